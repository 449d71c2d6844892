"""Everything checked before the charge at the session's front door (issue
#36): `synthetic(rows=...)`, its `seed=` and every parameter value of every
model plan are refused — with a clear error naming the argument — before
anything is spent (they used to be checked by the plan after its first
measurement, or not at all: rows=10¹³ charged and then ran out of memory)."""

from __future__ import annotations

import pytest

from ektelo import plans, wide
from ektelo.datasets import census_like
from ektelo.session import Session

DOMAIN = {
    "age": {"bins": [18, 30, 40, 50, 60, 70, 90]},
    "sex": {"values": ["F", "M"]},
    "race": {"values": ["white", "black", "hispanic", "asian-other"]},
}


@pytest.fixture(scope="module")
def census():
    return census_like(300, seed=0)[0][list(DOMAIN)]


def session(census, plan: str) -> Session:
    zcdp = {"delta": 1e-9} if plan in ("mst", "aim") else {}
    return Session(census, DOMAIN, epsilon=1.0, seed=1, progress=False, **zcdp)


@pytest.mark.parametrize("rows, error, match", [
    (-5, ValueError, "rows must be a positive integer, got -5"),
    (0, ValueError, "rows must be a positive integer, got 0"),
    ("x", TypeError, "rows must be an integer, got str"),
    (2.5, TypeError, "rows must be an integer, got float"),
    (10**13, ValueError, f"rows must be at most {wide.MAX_SYNTHETIC_ROWS}, got 10000000000000"),
])
def test_bad_rows_are_refused_with_nothing_spent(census, rows, error, match):
    s = session(census, "mst")
    with pytest.raises(error, match=match):
        s.synthetic(rows=rows, epsilon=0.5, plan="mst")
    assert s.spent == 0 and s.history.empty


def test_a_bad_drawing_seed_is_refused_with_nothing_spent(census):
    s = session(census, "mst")
    with pytest.raises(TypeError, match="seed must be an integer, got str"):
        s.synthetic(rows=10, epsilon=0.5, plan="mst", seed="x")
    assert s.spent == 0


# bad values for every parameter any model plan takes (a new parameter without
# an entry here fails `test_every_parameter_has_bad_values`)
BAD_VALUES: dict[str, tuple[object, ...]] = {
    "maxiter": (-5, 0, "x", 1.5, True, 10**13),
    "rounds": (-5, 0, "x", 1.5, 10**13),
    "compress": (0, "x", None),
    "split_merged": (0, "x", None),
    "progress": (-5, "x", 1.5),
    "max_model_size": (-5, 0, "x"),
    "degree": (-5, 0, "x", 1.5, 10**13),
    "beta": (-5, 0, "x", 1.5),
    "theta": (-5, 0, "x"),
    "rows": (-5, 0, "x"),
    "mechanism": ("x", 0),
    "strategy": ("x", 0),
    "discrepancy": (-5, 0, "x"),
}
BAD = [(plan, key, value) for plan in wide.MODEL_PLANS for key in sorted(plans.get(plan).parameters)
       for value in BAD_VALUES.get(key, ())]


def test_every_parameter_has_bad_values():
    keys = {k for plan in wide.MODEL_PLANS for k in plans.get(plan).parameters}
    assert keys <= set(BAD_VALUES)


@pytest.mark.parametrize("plan, key, value", BAD, ids=[f"{p}-{k}-{v!r}" for p, k, v in BAD])
def test_every_model_plan_parameter_is_checked_before_anything_is_spent(census, plan, key,
                                                                        value):
    s = session(census, plan)
    with pytest.raises((TypeError, ValueError), match=key):
        s.marginals(["sex", "race"], epsilon=0.5, plan=plan, params={key: value})
    assert s.spent == 0 and s.history.empty
