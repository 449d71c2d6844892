"""The learned planner's decision table (issue #29, Tier 1): small binary
trees, one per workload group, stored as plain JSON data in the package
(`table.json`, trained offline on the public DPBench data by
`experiments/planner_*`), walked at run time without any learning library.

A tree node is a leaf ``{"plan": "<plan name>" | "tier0"}`` — "tier0" means
the best data-independent plan by Tier 0's exact expected error — or a split
``{"feature": name, "threshold": t, "below": node, "above": node}`` on one of
`Features.named()` ("below" when the value < t), in the spirit of Pythia's
decision trees (Kotsogiannis et al., SIGMOD 2017). The file:
``{"version": 1, "share": 0.05, "trained_on": "...", "trees": {group: node},
"declared": {group: node}}``. The optional ``declared`` trees are for a table
whose row count the custodian declared public: they split only on public
facts (`PUBLIC_FEATURES`: the row count, ε, the domain), so choosing costs no
budget at all and the plan runs with the whole ε.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .features import FEATURE_NAMES, PUBLIC_FEATURES, Features

__all__ = ["GROUPS", "TIER0", "DecisionTable", "default_table", "group_of", "walk_node"]

GROUPS = ("1d-prefix", "1d-ranges", "2d-ranges")
TIER0 = "tier0"
# The table shipped with the package (written by the experiment's training
# command); absent until trained.
DEFAULT_PATH = Path(__file__).with_name("table.json")
# Deeper trees than this are not what offline training produces; refusing
# them keeps a corrupt file from recursing without end.
_MAX_DEPTH = 32


def group_of(dims: int, kind: str) -> str | None:
    """The decision table's group of a workload: prefix/ranges/random-ranges/
    file workloads over 1 or 2 dimensions ("1d-prefix", "1d-ranges",
    "2d-ranges"; a 2-D prefix counts as ranges); anything else None."""
    if kind in ("prefix", "cdf") and dims == 1:
        return "1d-prefix"
    if kind in ("prefix", "cdf", "ranges", "random-ranges", "file"):
        if dims == 1:
            return "1d-ranges"
        if dims == 2:
            return "2d-ranges"
    return None


class _VectorPlans:
    """The plans a leaf may name: registered plans over a vector, not `auto`.
    A name is checked when asked for, importing only that plan's module: the
    shipped table names a few plans, and loading it must not import every
    plan (AIM, PGM, …) for a small question (issue #41)."""

    def __contains__(self, plan: object) -> bool:
        from ..plans.registry import get, names

        return (isinstance(plan, str) and plan != "auto" and plan in names()
                and get(plan).input_kind == "vector")

    def __iter__(self) -> Iterator[str]:
        from ..plans.registry import names

        return iter([n for n in names() if n in self])


def _known_plans() -> _VectorPlans:
    return _VectorPlans()


def _check_node(node: Any, where: str, plans: _VectorPlans, depth: int = 0,
                features: tuple[str, ...] = FEATURE_NAMES) -> dict[str, Any]:
    """A validated copy of `node` (see the module docstring); errors name
    the place in the table (`where`) and the bad feature, plan or threshold.
    Splits may use only `features`."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"{where}: the tree is deeper than {_MAX_DEPTH} levels")
    if not isinstance(node, dict):
        raise TypeError(f"{where}: a node must be an object, got {type(node).__name__}")
    if "plan" in node:
        if set(node) != {"plan"}:
            raise ValueError(f"{where}: a leaf has only 'plan', got keys {sorted(node)}")
        plan = node["plan"]
        if plan != TIER0 and plan not in plans:
            raise ValueError(f"{where}: unknown plan {plan!r}; a leaf names {TIER0!r} or one "
                             f"of the plans {', '.join(sorted(plans))}")
        return {"plan": plan}
    keys = {"feature", "threshold", "below", "above"}
    if set(node) != keys:
        raise ValueError(f"{where}: a split has exactly the keys {sorted(keys)}, got "
                         f"{sorted(node)}")
    feature = node["feature"]
    if feature not in features:
        raise ValueError(f"{where}: unknown feature {feature!r}; the features here are "
                         f"{', '.join(features)}")
    t = node["threshold"]
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise ValueError(f"{where}: the threshold on {feature} must be a finite number, "
                         f"got {t!r}")
    return {"feature": feature, "threshold": float(t),
            "below": _check_node(node["below"], f"{where}.below", plans, depth + 1, features),
            "above": _check_node(node["above"], f"{where}.above", plans, depth + 1, features)}


@dataclass(frozen=True)
class DecisionTable:
    """One tree per group (`GROUPS`), the budget share its features cost,
    free text on what it was trained on, and optionally one tree per group
    for a declared public row count (`declared`: public features only, no
    share). Build with `from_dict`/`load` (validated); `choose` walks a tree
    (the declared one when the features are `Features.from_declared_rows`)."""

    share: float
    trees: dict[str, dict[str, Any]]
    trained_on: str = ""
    version: int = 1
    declared: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Any) -> DecisionTable:
        """Validate the JSON form: version 1, 0 < share < 1, known groups,
        and in every node a known feature, a finite threshold, a known plan."""
        if not isinstance(d, dict):
            raise TypeError(f"a decision table is a JSON object, got {type(d).__name__}")
        unknown = set(d) - {"version", "share", "trained_on", "trees", "declared"}
        if unknown:
            raise ValueError(f"decision table: unknown key(s) {sorted(unknown)}")
        if d.get("version") != 1:
            raise ValueError(f"decision table: version must be 1, got {d.get('version')!r}")
        share = d.get("share")
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share < 1:
            raise ValueError(f"decision table: share must lie strictly between 0 and 1, "
                             f"got {share!r}")
        trained_on = d.get("trained_on", "")
        if not isinstance(trained_on, str):
            raise TypeError("decision table: trained_on must be text")
        trees = d.get("trees")
        if not isinstance(trees, dict):
            raise TypeError("decision table: trees must be an object {group: node}")
        declared = d.get("declared", {})
        if not isinstance(declared, dict):
            raise TypeError("decision table: declared must be an object {group: node}")
        plans = _known_plans()
        return cls(share=float(share), trees=_check_trees(trees, "trees", plans, FEATURE_NAMES),
                   trained_on=trained_on,
                   declared=_check_trees(declared, "declared", plans, PUBLIC_FEATURES))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`from_dict(t.to_dict()) == t`)."""
        out = {"version": self.version, "share": self.share, "trained_on": self.trained_on,
               "trees": json.loads(json.dumps(self.trees))}
        if self.declared:
            out["declared"] = json.loads(json.dumps(self.declared))
        return out

    @classmethod
    def load(cls, path: str | Path) -> DecisionTable:
        """Read and validate a table file (errors name the file)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc.msg})") from None
        try:
            return cls.from_dict(data)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{path}: {exc}") from None

    def save(self, path: str | Path) -> None:
        """Write the JSON form (sorted, indented: a readable diff in review)."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    def walk(self, group: str, features: Features) -> tuple[str, tuple[str, ...]] | None:
        """The leaf of `group`'s tree for `features` and the path to it (one
        "feature=value < threshold" step per split), or None: no tree. For
        declared-rows features the `declared` tree is walked."""
        node = (self.declared if features.declared else self.trees).get(group)
        return None if node is None else walk_node(node, features)

    def choose(self, group: str, features: Features) -> str | None:
        """The leaf's plan ("tier0" or a plan name) for `features`; None: no
        tree for that group."""
        found = self.walk(group, features)
        return None if found is None else found[0]


def walk_node(node: dict[str, Any], features: Features) -> tuple[str, tuple[str, ...]]:
    """The leaf of a (validated) tree `node` for `features`, and the path to
    it: one "feature=value < threshold" step per split."""
    values = features.named()
    path = []
    while "plan" not in node:
        name, t = node["feature"], node["threshold"]
        v = values[name]
        below = v < t
        path.append(f"{name}={v:.3g} {'<' if below else '≥'} {t:.3g}")
        node = node["below"] if below else node["above"]
    return node["plan"], tuple(path)


def _check_trees(trees: dict[str, Any], key: str, plans: _VectorPlans,
                 features: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    checked = {}
    for group, node in trees.items():
        if group not in GROUPS:
            raise ValueError(f"decision table: unknown group {group!r} in {key}; the groups "
                             f"are {', '.join(GROUPS)}")
        checked[group] = _check_node(node, f"{key}[{group!r}]", plans, features=features)
    return checked


def default_table() -> DecisionTable | None:
    """The table shipped in the package (`table.json`), None if absent."""
    if not DEFAULT_PATH.exists():
        return None
    return DecisionTable.load(DEFAULT_PATH)
