"""`ektelo.planner.DecisionTable` (issue #29): validation with errors that
name the bad feature, plan or threshold; the JSON round trip; the tree walk."""

from __future__ import annotations

import json

import pytest

from ektelo.planner import GROUPS, DecisionTable, Features, default_table, group_of

TREE = {"feature": "log10_signal", "threshold": 3.0,
        "below": {"plan": "tier0"},
        "above": {"feature": "top_share", "threshold": 0.5,
                  "below": {"plan": "hb"}, "above": {"plan": "dawa"}}}


def table(**trees):
    return {"version": 1, "share": 0.05, "trained_on": "by hand", "trees": trees}


def feats(total, coarse, eps=1.0):
    return Features(dims=1, cells=1024, kind="prefix", eps=eps, total=total,
                    coarse=tuple(coarse), coarse_scale=20.0)


def test_the_walk_follows_the_thresholds():
    t = DecisionTable.from_dict(table(**{"1d-prefix": TREE}))
    low = feats(100.0, [100.0 / 16] * 16)  # signal 10² < 10³
    assert t.choose("1d-prefix", low) == "tier0"
    spread = feats(1e5, [1e5 / 16] * 16)  # top_share 1/8 < 0.5
    assert t.choose("1d-prefix", spread) == "hb"
    peaked = feats(1e5, [6e4, 3e4] + [1e4 / 14] * 14)  # top_share 0.9
    assert t.choose("1d-prefix", peaked) == "dawa"
    plan, path = t.walk("1d-prefix", peaked)
    assert plan == "dawa" and path == ("log10_signal=5 ≥ 3", "top_share=0.9 ≥ 0.5")
    assert t.choose("2d-ranges", peaked) is None  # no tree for the group
    # the threshold is the boundary: exactly at it goes "above"
    at = feats(1e3, [1e3 / 16] * 16)
    assert t.walk("1d-prefix", at)[1][0] == "log10_signal=3 ≥ 3"


def test_round_trip(tmp_path):
    t = DecisionTable.from_dict(table(**{"1d-prefix": TREE, "2d-ranges": {"plan": "quadtree"}}))
    assert DecisionTable.from_dict(t.to_dict()) == t
    path = tmp_path / "t.json"
    t.save(path)
    assert DecisionTable.load(path) == t
    assert json.loads(path.read_text())["trees"]["1d-prefix"] == TREE


@pytest.mark.parametrize(("mutate", "error", "match"), [
    (lambda d: d["trees"]["1d-prefix"].update(feature="median"), ValueError,
     r"trees\['1d-prefix'\]: unknown feature 'median'"),
    (lambda d: d["trees"]["1d-prefix"]["above"]["above"].update(plan="dawwa"), ValueError,
     r"trees\['1d-prefix'\]\.above\.above: unknown plan 'dawwa'"),
    (lambda d: d["trees"]["1d-prefix"]["above"]["above"].update(plan="auto"), ValueError,
     r"unknown plan 'auto'"),
    (lambda d: d["trees"]["1d-prefix"]["above"].update(threshold=float("nan")), ValueError,
     r"\.above: the threshold on top_share must be a finite number, got nan"),
    (lambda d: d["trees"]["1d-prefix"].update(threshold="3"), ValueError,
     r"the threshold on log10_signal must be a finite number, got '3'"),
    (lambda d: d["trees"]["1d-prefix"].pop("below"), ValueError, r"exactly the keys"),
    (lambda d: d["trees"].update({"3d-ranges": {"plan": "hb"}}), ValueError,
     r"unknown group '3d-ranges'"),
    (lambda d: d.update(share=1.0), ValueError, r"share must lie strictly between 0 and 1"),
    (lambda d: d.update(share=0), ValueError, r"share must lie strictly between 0 and 1"),
    (lambda d: d.update(version=2), ValueError, r"version must be 1"),
    (lambda d: d.update(trees=[]), TypeError, r"trees must be an object"),
    (lambda d: d["trees"].update({"1d-ranges": "hb"}), TypeError, r"must be an object"),
])
def test_bad_tables_are_refused_with_the_place_named(mutate, error, match):
    d = json.loads(json.dumps(table(**{"1d-prefix": TREE})))
    mutate(d)
    with pytest.raises(error, match=match):
        DecisionTable.from_dict(d)


def test_load_names_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json: not valid JSON"):
        DecisionTable.load(bad)
    bad.write_text(json.dumps(table(**{"1d-prefix": {"plan": "nope"}})))
    with pytest.raises(ValueError, match=r"bad\.json: trees\['1d-prefix'\]: unknown plan 'nope'"):
        DecisionTable.load(bad)


@pytest.mark.parametrize(("dims", "kind", "group"), [
    (1, "prefix", "1d-prefix"), (1, "ranges", "1d-ranges"), (1, "random-ranges", "1d-ranges"),
    (1, "file", "1d-ranges"), (2, "ranges", "2d-ranges"), (2, "random-ranges", "2d-ranges"),
    (2, "prefix", "2d-ranges"), (3, "ranges", None), (1, "marginals", None),
    (1, "identity", None), (2, "marginals", None),
])
def test_groups(dims, kind, group):
    assert group_of(dims, kind) == group
    assert group is None or group in GROUPS


def test_the_shipped_table_is_valid_if_present():
    t = default_table()  # None until the experiment's training writes table.json
    if t is not None:
        assert set(t.trees) <= set(GROUPS) and 0 < t.share < 1
