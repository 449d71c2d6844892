"""`ektelo.planner.choose_plan`: the rules of `ektelo run --plan auto`, from
public facts only (the workload's kind and the domain's shape)."""

from __future__ import annotations

import pytest

from ektelo import plans
from ektelo.planner import choose_plan


@pytest.mark.parametrize(
    ("kind", "shape", "plan"),
    [
        ("marginals", (10, 20, 5), "hdmm"),
        ("prefix", (1000,), "dawa"),
        ("ranges", (2**16,), "dawa"),
        ("random-ranges", (2**16 + 1,), "hb"),
        ("prefix", (100, 2, 7), "hb_striped_kron"),
        ("ranges", (256, 256), "dawa"),
        ("file", (1024, 512), "hb"),
        ("ranges", (10, 10, 10), "hb"),
        ("identity", (64, 64), "dawa"),
        ("identity", (512, 512), "identity"),
    ],
)
def test_rules(kind, shape, plan):
    name, why = choose_plan(kind, shape)
    assert name == plan and why
    assert name in plans.names()


# -- auto_plan: error-aware (#27) ---------------------------------------------------------
def _errors(choice):
    return {c.plan: c.rmse for c in choice.candidates}


def test_auto_plan_takes_the_lowest_expected_error_and_says_why():
    from ektelo.matrix import Prefix
    from ektelo.planner import auto_plan

    choice = auto_plan(Prefix(85), "prefix", (85,), eps=1.0)
    exact = {p: e for p, e in _errors(choice).items() if e is not None}
    assert choice.plan == min(exact, key=exact.get)
    assert f"RMSE {exact[choice.plan]:.3g}" in choice.why and "next" in choice.why
    assert {"identity", "hb", "hdmm"} <= set(exact)


def test_a_five_cell_histogram_is_not_given_dawa():
    """Issue #27: auto picked DAWA (no error bars) even for 5 cells."""
    from ektelo.matrix import Identity
    from ektelo.planner import auto_plan

    choice = auto_plan(Identity(5), "identity", (5,), eps=1.0)
    assert choice.plan == "identity"  # ties go to the simplest
    dawa = next(c for c in choice.candidates if c.plan == "dawa")
    assert dawa.rmse is None and "not worth it" in dawa.note


def test_large_domains_keep_the_data_dependent_rule_only_with_evidence():
    from ektelo.matrix import Prefix
    from ektelo.planner import DATA_DEPENDENT_MIN_CELLS, DecisionTable, auto_plan

    n = 2 * DATA_DEPENDENT_MIN_CELLS
    # no row count: DAWA loses to HB on the training grid at large scales
    blind = auto_plan(Prefix(n), "prefix", (n,), eps=1.0)
    assert not plans.get(blind.plan).data_dependent
    dawa = next(c for c in blind.candidates if c.plan == "dawa")
    assert "training grid" in dawa.note and "Tier 0's best instead" in dawa.note
    # 1000 rows declared (no declared tree): at that scale DAWA measured 0.6× HB's error
    no_trees = DecisionTable.from_dict({"version": 1, "share": 0.05, "trees": {}})
    choice = auto_plan(Prefix(n), "prefix", (n,), eps=1.0, rows=1000, table=no_trees)
    assert choice.plan == "dawa" and "training grid at most 0.6" in choice.why
    zcdp = auto_plan(Prefix(n), "prefix", (n,), rho=0.1)  # zCDP: Gaussian-capable plans only
    assert not plans.get(zcdp.plan).data_dependent


def test_a_failing_candidate_is_listed_and_left_out(monkeypatch):
    import warnings

    from ektelo import planner
    from ektelo.matrix import Prefix

    real = plans.strategy_for

    def flaky(name, shape, W, **kw):
        if name == "hb":
            warnings.warn("overflow encountered in cast", RuntimeWarning, stacklevel=2)
        return real(name, shape, W, **kw)

    monkeypatch.setattr(plans.data_independent, "strategy_for", flaky)
    planner.tier0.clear_cache()  # prices are cached by workload value
    choice = planner.auto_plan(Prefix(8), "prefix", (8,), eps=1.0)
    hb = next(c for c in choice.candidates if c.plan == "hb")
    assert hb.rmse is None and hb.note == "left out: overflow encountered in cast"
    assert choice.plan != "hb"
