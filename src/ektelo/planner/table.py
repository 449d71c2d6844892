"""The learned planner's decision table (issue #29, Tier 1): small binary
trees, one per workload group, stored as plain JSON data in the package
(`table.json`, trained offline on the public DPBench data by
`experiments/planner_*`), walked at run time without any learning library.

A tree node is a leaf ``{"plan": "<plan name>" | "tier0"}`` — "tier0" means
the best data-independent plan by Tier 0's exact expected error — or a split
``{"feature": name, "threshold": t, "below": node, "above": node}`` on one of
`Features.named()` ("below" when the value < t), in the spirit of Pythia's
decision trees (Kotsogiannis et al., SIGMOD 2017). The file:
``{"version": 1, "share": 0.05, "trained_on": "...", "trees": {group: node}}``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .features import FEATURE_NAMES, Features

__all__ = ["GROUPS", "TIER0", "DecisionTable", "default_table", "group_of"]

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


def _known_plans() -> set[str]:
    """The plans a leaf may name: registered plans over a vector, not `auto`."""
    from ..plans.registry import get, names  # lazy: the registry loads every plan

    return {n for n in names() if n != "auto" and get(n).input_kind == "vector"}


def _check_node(node: Any, where: str, plans: set[str], depth: int = 0) -> dict[str, Any]:
    """A validated copy of `node` (see the module docstring); errors name
    the place in the table (`where`) and the bad feature, plan or threshold."""
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
    if feature not in FEATURE_NAMES:
        raise ValueError(f"{where}: unknown feature {feature!r}; the features are "
                         f"{', '.join(FEATURE_NAMES)}")
    t = node["threshold"]
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise ValueError(f"{where}: the threshold on {feature} must be a finite number, "
                         f"got {t!r}")
    return {"feature": feature, "threshold": float(t),
            "below": _check_node(node["below"], f"{where}.below", plans, depth + 1),
            "above": _check_node(node["above"], f"{where}.above", plans, depth + 1)}


@dataclass(frozen=True)
class DecisionTable:
    """One tree per group (`GROUPS`), the budget share its features cost, and
    free text on what it was trained on. Build with `from_dict`/`load`
    (validated); `choose` walks a tree."""

    share: float
    trees: dict[str, dict[str, Any]]
    trained_on: str = ""
    version: int = 1

    @classmethod
    def from_dict(cls, d: Any) -> DecisionTable:
        """Validate the JSON form: version 1, 0 < share < 1, known groups,
        and in every node a known feature, a finite threshold, a known plan."""
        if not isinstance(d, dict):
            raise TypeError(f"a decision table is a JSON object, got {type(d).__name__}")
        unknown = set(d) - {"version", "share", "trained_on", "trees"}
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
        plans = _known_plans()
        checked = {}
        for group, node in trees.items():
            if group not in GROUPS:
                raise ValueError(f"decision table: unknown group {group!r}; the groups are "
                                 f"{', '.join(GROUPS)}")
            checked[group] = _check_node(node, f"trees[{group!r}]", plans)
        return cls(share=float(share), trees=checked, trained_on=trained_on)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (`from_dict(t.to_dict()) == t`)."""
        return {"version": self.version, "share": self.share, "trained_on": self.trained_on,
                "trees": json.loads(json.dumps(self.trees))}

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
        "feature=value < threshold" step per split), or None: no tree."""
        node = self.trees.get(group)
        if node is None:
            return None
        values = features.named()
        path = []
        while "plan" not in node:
            name, t = node["feature"], node["threshold"]
            v = values[name]
            below = v < t
            path.append(f"{name}={v:.3g} {'<' if below else '≥'} {t:.3g}")
            node = node["below"] if below else node["above"]
        return node["plan"], tuple(path)

    def choose(self, group: str, features: Features) -> str | None:
        """The leaf's plan ("tier0" or a plan name) for `features`; None: no
        tree for that group."""
        found = self.walk(group, features)
        return None if found is None else found[0]


def default_table() -> DecisionTable | None:
    """The table shipped in the package (`table.json`), None if absent."""
    if not DEFAULT_PATH.exists():
        return None
    return DecisionTable.load(DEFAULT_PATH)
