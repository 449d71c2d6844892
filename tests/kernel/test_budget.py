"""The Algorithm 2 ledger on its own: golden values, slack, refusals, ε checks."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from ektelo.kernel.ledger import SLACK, BudgetExceeded, Ledger, check_epsilon

F = Fraction


def chain(total=1.0):
    led = Ledger(total)
    root = led.add_root("table", "protect")
    return led, root


def test_root_requests_add_up_exactly():
    led, root = chain(1.0)
    led.request(root, 0.25)
    led.request(root, 0.5)
    assert led.spent == F(3, 4)
    assert led.budget().remaining == 0.25
    with pytest.raises(BudgetExceeded):
        led.request(root, 0.3)
    assert led.spent == F(3, 4)


def test_stability_multiplies_along_the_chain():
    led, root = chain(10.0)
    a = led.add_child(root, "table", 2, "group_by")
    b = led.add_child(a, "vector", 1, "vectorize")
    c = led.add_child(b, "vector", 3.0, "transform")
    charged = led.request(c, 0.5)
    assert charged == F(2) * F(3) * F(0.5) == 3
    snap = {s.node: s.spent for s in led.snapshot()}
    assert snap == {root: F(3), a: F(3, 2), b: F(3, 2), c: F(1, 2)}


def test_partition_charges_the_max_of_its_children():
    led, root = chain(1.0)
    part = led.add_child(root, "partition", 1, "split")
    kids = [led.add_child(part, "vector", 1, "child") for _ in range(3)]
    assert led.request(kids[0], 0.25) == F(1, 4)
    assert led.request(kids[1], 0.25) == 0  # parallel composition: free
    assert led.request(kids[2], 0.125) == 0
    assert led.request(kids[2], 0.25) == F(1, 8)  # child 2 now at 3/8 > 1/4
    assert led.spent == F(3, 8)
    snap = {s.node: s.spent for s in led.snapshot()}
    assert snap[part] == max(snap[k] for k in kids) == F(3, 8)


def test_nested_partitions_and_stability_below_a_partition():
    led, root = chain(1.0)
    p1 = led.add_child(root, "partition", 1, "split")
    left, right = (led.add_child(p1, "table", 1, "child") for _ in range(2))
    g = led.add_child(left, "table", 2, "group_by")
    p2 = led.add_child(right, "partition", 1, "split")
    rr = [led.add_child(p2, "table", 1, "child") for _ in range(2)]
    assert led.request(g, 0.125) == F(1, 4)  # 2 × 1/8 at `left`, max at p1
    assert led.request(rr[0], 0.125) == 0  # right at 1/8 < 1/4
    assert led.request(rr[1], 0.25) == 0  # right at 1/4 = max
    assert led.request(rr[1], 0.125) == F(1, 8)  # right at 3/8
    assert led.spent == F(3, 8)


def test_refused_request_changes_nothing_anywhere_in_the_chain():
    led, root = chain(1.0)
    part = led.add_child(root, "partition", 1, "split")
    kid = led.add_child(part, "vector", 1, "child")
    t = led.add_child(kid, "vector", 4.0, "transform")
    led.request(t, 0.2)  # 0.8 at the root
    before = led.snapshot()
    with pytest.raises(BudgetExceeded):
        led.request(t, 0.06)  # would need 0.24 more
    assert led.snapshot() == before
    led.request(t, 0.05)  # exactly fits: 0.8 + 0.2
    assert led.spent == F(0.2) * 4 + F(0.05) * 4


@pytest.mark.parametrize("eps", [1.0, 0.1, 0.7, 3.3, 1e-3, 1e3])
def test_float_splits_fit_within_the_documented_slack(eps):
    for parts in ([eps / 3] * 3, [eps * 0.3, eps * 0.7], [eps / 10] * 10, [eps * 0.1] * 10):
        led, root = chain(eps)
        for p in parts:
            led.request(root, p)
        assert led.spent <= F(eps) * (1 + SLACK)
        with pytest.raises(BudgetExceeded):
            led.request(root, eps * 1e-6)


def test_slack_is_tight():
    led, root = chain(1.0)
    led.request(root, 1.0)
    with pytest.raises(BudgetExceeded):
        led.request(root, 2e-9)


@pytest.mark.parametrize("bad", [0, 0.0, -1.0, math.nan, math.inf, -math.inf])
def test_bad_eps_values(bad):
    with pytest.raises(ValueError, match="eps"):
        check_epsilon(bad)
    led, root = chain(1.0)
    with pytest.raises(ValueError, match="eps"):
        led.request(root, bad)
    assert led.spent == 0


@pytest.mark.parametrize("bad", [True, False, "0.1", None, [0.1], np.bool_(True), 1j])
def test_bad_eps_types(bad):
    with pytest.raises(TypeError, match="eps"):
        check_epsilon(bad)


def test_numpy_scalars_are_accepted():
    assert check_epsilon(np.float64(0.5)) == 0.5
    assert check_epsilon(np.int64(2)) == 2.0
    assert check_epsilon(F(1, 4)) == 0.25


def test_graph_rules():
    led, root = chain(1.0)
    with pytest.raises(ValueError):
        led.add_root("table", "again")
    part = led.add_child(root, "partition", 1, "split")
    with pytest.raises(ValueError):
        led.add_child(part, "vector", 2, "child")  # children of a partition are 1-stable
    with pytest.raises(ValueError):
        led.add_child(part, "partition", 1, "child")
    with pytest.raises(ValueError):
        led.add_child(root, "partition", 2, "split")
    with pytest.raises(ValueError):
        led.add_child(root, "vector", -1, "transform")
    with pytest.raises(ValueError):
        led.request(part, 0.1)  # partition variables are not queried directly
    with pytest.raises(ValueError):
        led.request(99, 0.1)
    with pytest.raises(ValueError, match="epsilon"):
        Ledger(0.0)
