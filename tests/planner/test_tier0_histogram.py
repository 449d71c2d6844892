"""Tier 0 on a histogram (#41): HDMM's optimiser is not run to price it —
no strategy errs less than the identity on W = I, and HDMM keeps the
workload itself among its candidates, so its error is the identity's. The
price, the ranking and the choice are those the optimiser would have given."""

from __future__ import annotations

import pytest

from ektelo.matrix import Identity, Kronecker, Prefix
from ektelo.operators.hdmm import hdmm
from ektelo.planner import auto_plan, price, rank
from ektelo.planner.tier0 import clear_cache, is_histogram


@pytest.mark.parametrize(
    ("W", "shape"),
    [(Identity(100), (100,)), (Identity(40), (10, 4)),
     (Kronecker([Identity(10), Identity(4)]), (10, 4))],
)
@pytest.mark.parametrize("budget", [{"eps": 0.5}, {"rho": 0.2}])
def test_hdmm_is_priced_as_its_optimiser_would_without_running_it(W, shape, budget) -> None:
    clear_cache()
    hdmm.cache_clear()  # type: ignore[attr-defined]
    ranked = {c.plan: c for c in rank(W, "identity", shape, **budget)}
    assert hdmm.cache_info().misses == 0  # type: ignore[attr-defined]  # not run
    assert ranked["hdmm"].rmse == ranked["identity"].rmse
    assert ranked["hdmm"].method == "exact"
    # the optimiser's own price (HDMM run, its strategy's exact error)
    gaussian = "rho" in budget
    run = price("hdmm", shape, W, gaussian=gaussian)
    assert hdmm.cache_info().misses == 1  # type: ignore[attr-defined]
    unit = budget["rho"] if gaussian else budget["eps"] ** 2
    assert ranked["hdmm"].rmse == pytest.approx((run.mse / unit) ** 0.5, rel=1e-9)


@pytest.mark.parametrize("shape", [(5,), (100,), (16, 3)])
def test_a_histogram_is_still_given_the_identity(shape) -> None:
    import math

    choice = auto_plan(Identity(math.prod(shape)), "identity", shape, eps=1.0)
    assert choice.plan == "identity"


def test_only_a_whole_domain_identity_is_a_histogram() -> None:
    assert is_histogram(Identity(12), (3, 4))
    assert is_histogram(Kronecker([Identity(3), Identity(4)]), (3, 4))
    assert not is_histogram(Identity(12), (3, 5))
    assert not is_histogram(Prefix(12), (12,))
    assert not is_histogram(Kronecker([Identity(3), Prefix(4)]), (3, 4))
