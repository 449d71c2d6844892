"""How the planner explains itself (issue #29): the ranking as rows (for
`Session.preview`'s candidates table) and as text (for `ektelo run
--explain`): each candidate's expected RMSE per query and how it was found
— exact (the matrix mechanism's closed form), Monte-Carlo (Tier 0's
data-free estimate) or data-dependent (no closed form) — then, when Tier 1
ran, the noisy features (already paid for) and the decision table's path.
"""

from __future__ import annotations

from typing import Any

from .rules import Candidate, Choice

__all__ = ["PREVIEW_NOTE", "error_label", "format_choice", "ranking_rows"]

PREVIEW_NOTE = ("Tier 0 ranking of the candidates (expected RMSE per query), free: nothing "
                "spent, and a preview charges no Tier 1 features (the plan 'auto' spends a "
                "share of ε on them when its decision table has a tree for the workload)")


def error_label(c: Candidate) -> str:
    """"RMSE r (exact)", "RMSE r (Monte-Carlo)", "data-dependent" or "not priced"
    (RMSE, not ±: the interval's half-width is another figure, `preview`'s ±)."""
    if c.rmse is None:
        return "data-dependent" if c.data_dependent else "not priced"
    how = "Monte-Carlo" if c.method == "monte-carlo" else "exact"
    return f"RMSE {c.rmse:.3g} ({how})"


def ranking_rows(choice: Choice) -> list[dict[str, Any]]:
    """One row per candidate, best first: plan, data_dependent,
    expected_rmse (None: no estimate), method ("exact", "monte-carlo",
    "data-dependent" or None) and the note."""
    return [{"plan": c.plan, "data_dependent": c.data_dependent, "expected_rmse": c.rmse,
             "method": c.method if c.rmse is not None else
             ("data-dependent" if c.data_dependent else None), "note": c.note}
            for c in choice.candidates]


def format_choice(choice: Choice, *, preview: bool = True) -> str:
    """The ranking, the features (if measured) and the choice, as lines."""
    width = max((len(c.plan) for c in choice.candidates), default=4)
    lines = [PREVIEW_NOTE + ":" if preview else "ranking (Tier 0):"]
    for i, c in enumerate(choice.candidates, 1):
        mark = "*" if c.plan == choice.plan else " "
        lines.append(f" {mark}{i:2d}. {c.plan:<{width}}  {error_label(c):<24} {c.note}")
    if choice.features is not None:
        named = choice.features.named()
        shown = ", ".join(f"{k}={v:.3g}" for k, v in named.items())
        lines.append(f"features (noisy, paid ε={choice.feature_budget:.3g}): {shown}")
    if choice.path:
        lines.append("decision table: " + " → ".join(choice.path))
    lines.append(f"choice: {choice.plan} — {choice.why}")
    return "\n".join(lines)
