"""The handle wrappers of the private operators (AHP, DAWA, worst-approx,
PrivBayes select): validate, charge ε through Algorithm 2, run on the data."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain
from ektelo.matrix import Identity, Ones, Partition, Prefix

F = Fraction


def spent(handle):
    return handle.ledger()[0].spent


def steps(n=64):
    x = np.zeros(n, dtype=np.int64)  # counts: integral by its dtype
    x[: n // 2] = 100
    x[n // 2 :] = 5
    return x


@pytest.mark.parametrize("name", ["dawa_partition"])
def test_partition_operators_charge_eps_through_the_chain(name):
    pytest.importorskip(f"ektelo.kernel.{name.split('_')[0]}")
    x = ektelo.protect(steps(), epsilon=1.0, seed=3)
    y = x.transform(2 * Identity(64))  # stability 2
    P = getattr(y, name)(eps=0.25)
    assert isinstance(P, Partition) and P.size == 64
    assert spent(x) == 2 * F(0.25)
    record = x.history()[-1]
    assert record.operation == name and record.eps == 0.25 and record.node == y.node
    # the partition is public and usable at once
    m = y.reduce_by_partition(P).laplace(Identity(P.num_groups), eps=0.25)
    assert spent(x) == 4 * F(0.25) and m.query_on_root.shape == (P.num_groups, 64)


@pytest.mark.parametrize("name", ["dawa_partition"])
def test_partition_operators_refuse_before_charging(name):
    pytest.importorskip(f"ektelo.kernel.{name.split('_')[0]}")
    x = ektelo.protect(steps(), epsilon=0.5, seed=3)
    op = getattr(x, name)
    before = x.ledger()
    with pytest.raises(TypeError):
        op(eps=0.1, no_such_option=1)
    with pytest.raises(TypeError):
        op(eps=0.1, ratio=object())  # only plain scalars reach private code
    with pytest.raises(ektelo.BudgetExceeded):
        op(eps=0.6)
    with pytest.raises(ValueError, match="eps"):
        op(eps=-1)
    assert x.ledger() == before and x.history() == ()


def test_worst_approx_wrappers():
    pytest.importorskip("ektelo.kernel.mwem")
    x = ektelo.protect(steps(16), epsilon=1.0, seed=3)
    W = Prefix(16)
    i = x.worst_approx(W, np.zeros(16), eps=0.25)
    assert isinstance(i, int) and 0 <= i < 16
    assert spent(x) == F(0.25)
    with pytest.raises(ValueError):
        x.worst_approx(W, np.zeros(15), eps=0.25)
    with pytest.raises(ValueError):
        x.worst_approx(Prefix(15), np.zeros(16), eps=0.25)
    assert spent(x) == F(0.25)


def test_privbayes_select_wrapper():
    pytest.importorskip("ektelo.kernel.privbayes")
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 3, 300), "b": rng.integers(0, 2, 300)})
    frame["c"] = frame["a"] % 2
    t = ektelo.protect(frame, Domain.from_json({"a": 3, "b": 2, "c": 2}), epsilon=1.0, seed=1)
    cliques = t.group_by(["a", "b", "c"]).privbayes_select(eps=0.25)
    assert all(isinstance(c, tuple) and all(0 <= i < 3 for i in c) for c in cliques)
    assert spent(t) == 2 * F(0.25)


def test_partition_operators_refuse_non_integral_lineage():
    import numpy as np
    import pytest

    import ektelo
    from ektelo.matrix import Dense

    x = ektelo.protect(np.arange(8.0), epsilon=1.0, seed=0)
    halved = x.transform(Dense(np.eye(8) * 0.5))
    before = x.budget.spent
    for operator in (halved.dawa_partition,):
        with pytest.raises(ValueError, match="needs a vector of counts"):
            operator(eps=0.1)
    assert x.budget.spent == before


def test_public_limits_of_the_exponential_mechanism_are_checked_before_the_charge():
    """Limits that depend only on public values (ε per choice, the number of
    candidates) refuse before charging instead of raising after it."""
    frame = pd.DataFrame({c: [0, 1, 1, 0] for c in "abcdef"})
    t = ektelo.protect(frame, Domain.from_json({c: 2 for c in "abcdef"}), epsilon=1.0, seed=0)
    with pytest.raises(ValueError, match="too small"):
        t.privbayes_select(eps=1e-9)  # 1e-9 / 5 choices is below the mechanism's floor
    assert t.budget.spent == 0 and t.history() == ()
    x = ektelo.protect(np.zeros(4, dtype=np.int64), epsilon=1.0, seed=0)
    with pytest.raises(ValueError, match="2\\*\\*23"):
        x.worst_approx(Ones(2**23, 4), np.zeros(4), eps=0.5)
    assert x.budget.spent == 0
