"""Adversarial accounting: every path to overspend, with exact expected spends.

Each test names the path, computes the exact charge at the root with
`Fraction`s of the float ε values, and compares it with the ledger.
"""

from __future__ import annotations

import copy
import pickle
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import ektelo
from ektelo import BudgetExceeded, Domain, col
from ektelo.matrix import Dense, Identity, Kronecker, Partition, Prefix, Total, VStack
from ektelo.matrix.core import Sparse
from ektelo.port import requests as port

F = Fraction
EPS = 0.1


def spent(handle) -> Fraction:
    return handle.ledger()[0].spent


def vector(n=8, total=1.0):
    return ektelo.protect(np.arange(n, dtype=float), epsilon=total, seed=7)


def table(total=1.0, rows=200):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.integers(0, 4, rows),
            "b": rng.integers(0, 3, rows),
            "c": rng.choice(["x", "y"], rows),
        }
    )
    domain = Domain.from_json({"a": 4, "b": 3, "c": {"values": ["x", "y"]}})
    return ektelo.protect(frame, domain, epsilon=total, seed=11), frame


# -- stability products ---------------------------------------------------------------


def test_transform_norm3_then_reduce_then_laplace_charges_3eps():
    x = vector()
    y = x.transform(Dense(3 * np.eye(8)))
    z = y.reduce_by_partition(Partition(np.arange(8) // 2))
    m = z.laplace(Identity(4), eps=EPS)
    assert spent(x) == 3 * F(EPS)
    assert m.epsilon == EPS
    assert m.noise_scale >= 1 / EPS  # sensitivity of Identity on z is 1
    np.testing.assert_array_equal(
        m.query_on_root.dense(), np.kron(np.eye(4), [[3.0, 3.0]])
    )  # Q · P · 3I


def test_stability_chain_multiplies():
    x = vector(total=100.0)
    y = x.transform(Prefix(8))  # column norms 8..1 → stability 8
    z = y.transform(VStack([Identity(8), Identity(8)]))  # stability 2
    z.laplace(Total(16), eps=EPS)
    assert spent(x) == 8 * 2 * F(EPS)
    assert x.history()[-1].increments == (
        (z.node, EPS),
        (y.node, float(2 * F(EPS))),
        (x.node, float(16 * F(EPS))),
    )


def test_query_sensitivity_sets_the_noise_not_the_charge():
    x = vector()
    m = x.laplace(Prefix(8), eps=EPS)  # sensitivity 8
    assert spent(x) == F(EPS)
    assert 8 / EPS <= m.noise_scale <= 8 / EPS * (1 + 2**-9)


def test_fractional_column_norm_transform():
    x = vector(total=10.0)
    y = x.transform(Dense(0.5 * np.ones((3, 8))))  # column norm 1.5
    y.laplace(Identity(3), eps=EPS)
    expected = F(EPS) * F(1.5)
    assert expected <= spent(x) <= expected * (1 + F(1, 10**12))


def test_kronecker_transform_stability():
    x = ektelo.protect(np.ones((4, 4)), epsilon=10.0, seed=1)
    y = x.transform(Kronecker([Prefix(4), Identity(4)]))
    y.laplace(Identity(16), eps=EPS)
    assert spent(x) == 4 * F(EPS)


def test_group_by_doubles():
    t, _ = table()
    g = t.group_by(["a"])
    g.noisy_count(eps=EPS)
    assert spent(t) == 2 * F(EPS)
    v = g.vectorize()
    v.laplace(Identity(4), eps=EPS)
    assert spent(t) == 4 * F(EPS)


def test_group_by_of_group_by_quadruples():
    t, _ = table()
    t.group_by(["a", "b"]).group_by(["a"]).noisy_count(eps=EPS)
    assert spent(t) == 4 * F(EPS)


def test_where_select_vectorize_are_1_stable():
    t, _ = table()
    v = t.where(col("a") >= 1).select(["b", "a"]).vectorize()
    v.laplace(Identity(12), eps=EPS)
    assert spent(t) == F(EPS)


# -- partitions -------------------------------------------------------------------------


def test_measuring_all_siblings_charges_the_max():
    t, _ = table()
    kids = t.split_by_partition("a")
    assert len(kids) == 4
    for i, k in enumerate(kids):
        k.noisy_count(eps=EPS * (i + 1) / 4)
    assert spent(t) == F(EPS * 4 / 4)


def test_remeasuring_the_same_child_adds():
    x = vector()
    kids = x.split_by_partition(Partition(np.arange(8) % 2))
    kids[0].laplace(Identity(4), eps=EPS)
    kids[0].laplace(Identity(4), eps=EPS)
    kids[1].laplace(Identity(4), eps=EPS)
    assert spent(x) == 2 * F(EPS)


def test_nested_partitions():
    t, _ = table()
    outer = t.split_by_partition("c")
    inner = [k.split_by_partition("b") for k in outer]
    for group in inner:
        for leaf in group:
            leaf.noisy_count(eps=EPS)
    assert spent(t) == F(EPS)
    inner[1][2].noisy_count(eps=EPS)  # one leaf twice: its branch now at 2ε
    assert spent(t) == 2 * F(EPS)
    outer[0].noisy_count(eps=EPS)  # the other branch: ε (leaves) + ε (direct) = 2ε
    assert spent(t) == 2 * F(EPS)


def test_split_then_reduce():
    x = vector()
    kids = x.split_by_partition(Partition(np.arange(8) // 4))
    reduced = kids[0].reduce_by_partition(Partition([0, 0, 1, 1]))
    reduced.laplace(Identity(2), eps=EPS)
    kids[1].laplace(Identity(4), eps=EPS)
    assert spent(x) == F(EPS)
    m = reduced.laplace(Total(2), eps=EPS)
    assert spent(x) == 2 * F(EPS)
    on_root = np.zeros((1, 8))
    on_root[0, :4] = 1
    np.testing.assert_array_equal(m.query_on_root.dense(), on_root)


def test_transform_below_a_partition_multiplies_within_the_branch():
    x = vector(total=10.0)
    left, right = x.split_by_partition(Partition(np.arange(8) % 2))
    left.transform(Dense(5 * np.eye(4))).laplace(Identity(4), eps=EPS)
    right.laplace(Identity(4), eps=EPS)
    assert spent(x) == 5 * F(EPS)


def test_split_children_hold_their_cells_and_map_back():
    data = np.arange(12, dtype=float).reshape(3, 4)
    x = ektelo.protect(data, epsilon=1e7, seed=3)
    groups = np.array([[0, 1, 0, 1], [2, 2, 0, 1], [1, 1, 1, 0]])
    kids = x.split_by_partition(Partition(groups))
    for g, kid in enumerate(kids):
        cells = np.flatnonzero(groups.reshape(-1) == g)
        assert kid.shape == (cells.size,)
        m = kid.laplace(Identity(cells.size), eps=1e6)
        np.testing.assert_allclose(m.answers, data.reshape(-1)[cells], atol=1e-3)
        np.testing.assert_allclose(m.query_on_root.dense() @ data.reshape(-1), m.answers, atol=1e-3)


# -- lying clients ------------------------------------------------------------------------


class LyingDense(Dense):
    """Claims sensitivity 1 whatever its entries."""

    def sensitivity(self, p=1):
        return 1.0

    def column_norms(self, p=1):
        return np.ones(self.shape[1])

    def max_column_nnz(self):
        return 1


class TwoFaced(Identity):
    """Materialises as 2·I but applies as 1000·I; claims sensitivity 0.001."""

    def sparse(self):
        return sp.identity(self.n, format="csr") * 2.0

    def _matmat(self, X):
        return 1000.0 * X

    def sensitivity(self, p=1):
        return 0.001


class LyingPartition(Partition):
    def reduce_matrix(self):
        return Sparse(sp.csr_matrix((self.num_groups, self.size)))

    def reduce(self, x):
        return np.zeros(self.num_groups)


def test_lying_subclass_as_transform_is_charged_its_true_norm():
    x = vector(total=10.0)
    y = x.transform(LyingDense(5 * np.eye(8)))
    y.laplace(Identity(8), eps=EPS)
    assert spent(x) == 5 * F(EPS)


def test_lying_subclass_as_query_gets_its_true_noise():
    x = vector()
    m = x.laplace(LyingDense(5 * np.eye(8)), eps=EPS)
    assert m.noise_scale >= 5 / EPS
    assert type(m.query) is Sparse


def test_two_faced_matrix_is_materialised_once_and_used_for_both():
    x = ektelo.protect(np.arange(4, dtype=float), epsilon=1e7, seed=5)
    m = x.laplace(TwoFaced(4), eps=1e6)
    np.testing.assert_allclose(m.answers, 2 * np.arange(4), atol=1e-3)
    assert m.noise_scale >= 2 / 1e6
    np.testing.assert_array_equal(m.query.dense(), 2 * np.eye(4))
    y = x.transform(TwoFaced(4))
    y.laplace(Identity(4), eps=1.0)
    assert spent(x) == F(1e6) + 2


def test_lying_partition_is_rebuilt_from_its_groups():
    x = ektelo.protect(np.arange(4, dtype=float), epsilon=1e7, seed=5)
    r = x.reduce_by_partition(LyingPartition([0, 0, 1, 1]))
    m = r.laplace(Identity(2), eps=1e6)
    np.testing.assert_allclose(m.answers, [1, 5], atol=1e-3)
    np.testing.assert_array_equal(m.query_on_root.dense(), [[1, 1, 0, 0], [0, 0, 1, 1]])


def test_client_matrix_contents_are_copied_before_use():
    x = vector()
    arr = 3 * np.eye(8)
    dense_sp = sp.csr_matrix(arr)
    y = x.transform(dense_sp)
    dense_sp.data[:] = 0.0  # mutating the client's object later changes nothing
    y.laplace(Identity(8), eps=EPS)
    assert spent(x) == 3 * F(EPS)


def test_non_finite_or_misshapen_matrices_are_refused_before_charging():
    x = vector()
    before = x.ledger()
    with pytest.raises(ValueError):
        x.laplace(Identity(7), eps=EPS)
    with pytest.raises(ValueError):
        x.laplace(np.full((2, 8), np.nan), eps=EPS)
    with pytest.raises(ValueError):
        x.laplace(np.zeros((2, 8)), eps=EPS)
    with pytest.raises(TypeError):
        x.laplace([[1] * 8], eps=EPS)
    with pytest.raises(ValueError):
        x.transform(Identity(9))
    with pytest.raises(ValueError):
        x.reduce_by_partition(Partition([0, 1]))
    with pytest.raises(TypeError):
        x.reduce_by_partition([0, 0, 1, 1, 2, 2, 3, 3])
    assert x.ledger() == before and x.history() == ()


# -- refusals ----------------------------------------------------------------------------


def test_refused_requests_change_nothing():
    t, _ = table(total=1.0)
    kids = t.split_by_partition("a")
    g = kids[0].group_by(["b"])
    v = g.vectorize()
    w = v.transform(Dense(2 * np.ones((1, 3))))
    w.laplace(Identity(1), eps=0.2)  # 2 × 2 × 0.2 = 0.8
    assert spent(t) == 4 * F(0.2)
    before, history, budget = t.ledger(), t.history(), t.budget
    for attempt in (
        lambda: w.laplace(Identity(1), eps=0.06),  # needs 0.24
        lambda: v.laplace(Identity(3), eps=0.11),  # needs 0.22
        lambda: g.noisy_count(eps=0.11),
        lambda: kids[1].noisy_count(eps=1.01),  # sibling: needs 1.01 - 0.8 at the root
        lambda: t.noisy_count(eps=0.21),
    ):
        with pytest.raises(BudgetExceeded):
            attempt()
        assert t.ledger() == before
        assert t.history() == history
        assert t.budget == budget
    kids[1].noisy_count(eps=0.8)  # within the max over siblings: free
    assert spent(t) == 4 * F(0.2)
    t.noisy_count(eps=0.2)
    assert t.budget.remaining == 0.0


def test_bad_eps_is_rejected_everywhere_without_change():
    t, _ = table()
    v = t.vectorize(["a"])
    before = t.ledger()
    for bad, error in [
        (0, ValueError),
        (-0.1, ValueError),
        (float("nan"), ValueError),
        (float("inf"), ValueError),
        (True, TypeError),
        ("0.1", TypeError),
        (None, TypeError),
    ]:
        with pytest.raises(error, match="eps"):
            v.laplace(Identity(4), eps=bad)
        with pytest.raises(error, match="eps"):
            t.noisy_count(eps=bad)
        with pytest.raises(error, match="eps"):
            v.dawa_partition(eps=bad)
    assert t.ledger() == before


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1"])
def test_bad_total_epsilon(bad):
    with pytest.raises((TypeError, ValueError), match="epsilon"):
        ektelo.protect(np.ones(3), epsilon=bad)


def test_eps_is_keyword_only():
    x = vector()
    with pytest.raises(TypeError):
        x.laplace(Identity(8), 0.1)  # type: ignore[misc]


# -- handles --------------------------------------------------------------------------


def test_requests_name_only_their_own_sources():
    """Through the port a request names sources by id: an id this kernel does
    not have, a handle object instead of an id, or something that is not a
    request are refused before anything is spent."""
    a, b = vector(), vector()
    with pytest.raises(ValueError, match="unknown source"):
        a.port.submit(port.VectorLaplace(999, Identity(8), EPS))
    with pytest.raises(TypeError, match="named by an int"):
        a.port.submit(port.VectorLaplace(b, Identity(8), EPS))
    with pytest.raises(TypeError, match="named by an int"):
        a.port.submit(port.Transform(b, Identity(8)))
    ta, _ = table()
    tb, _ = table()
    with pytest.raises(TypeError, match="named by an int"):
        ta.port.submit(port.NoisyCount(tb, EPS))
    with pytest.raises(TypeError, match="not a kernel request"):
        ta.port.submit(("where", 0))
    assert spent(a) == spent(b) == spent(ta) == spent(tb) == 0


def test_forged_handles_are_refused():
    t, _ = table()
    kids = t.split_by_partition("a")
    k = t.port
    with pytest.raises(TypeError):
        k.submit(port.VectorLaplace(t.node, Identity(1), EPS))  # a table is not a vector
    forged = ektelo.ProtectedVector(k, t.node)
    with pytest.raises(TypeError, match="not a vector"):
        forged.laplace(Identity(1), eps=EPS)
    partition_node = kids[0].ledger()[kids[0].node].parent
    with pytest.raises(TypeError):
        ektelo.ProtectedTable(k, partition_node).noisy_count(eps=EPS)
    with pytest.raises(ValueError):
        ektelo.ProtectedTable(k, 999).noisy_count(eps=EPS)
    assert spent(t) == 0


def test_handles_and_kernels_cannot_be_copied():
    x = vector()
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError):
            attempt(x)
        with pytest.raises(TypeError):
            attempt(x.port)


def test_no_public_attribute_exposes_the_data():
    x = vector()
    t, _ = table()
    for h in (x, t, t.vectorize()):
        public = [n for n in dir(h) if not n.startswith("_")]
        for name in public:
            value = getattr(h, name)
            assert not isinstance(value, (np.ndarray, pd.DataFrame)), name
        assert not hasattr(h, "__dict__")
    public = [n for n in dir(x.port) if not n.startswith("_")]
    assert public == ["submit", "submit_with_receipt"]  # requests in, public values out
    assert "0." not in repr(x) and "0." not in repr(x.port).split("Budget")[0]


def test_a_kernel_keeps_its_last_history_records_and_charges_every_request():
    """history=N (#40): only the last N query records stay in memory, indexed
    among all of them; the ledger still charges every request, and each
    request's receipt names its own record."""
    x = ektelo.protect(np.arange(8), epsilon=10.0, seed=3, history=3)
    for _ in range(5):
        x.laplace(Identity(8), eps=0.5)
    assert [r.index for r in x.history()] == [2, 3, 4]
    assert x.budget.spent == pytest.approx(2.5)
    response, receipt = x.port.submit_with_receipt(port.VectorLaplace(x.node, Total(8), 0.25))
    assert receipt.record is not None and receipt.record.index == 5
    assert receipt.record.eps == 0.25 and len(response.answers) == 1
    with pytest.raises(ValueError, match="history"):
        ektelo.protect(np.arange(8), epsilon=1.0, history=0)


def test_a_handle_asks_for_its_description_once() -> None:
    """A source's description (shape, integrality, root) is fixed when it is
    created: a handle asks the kernel for it once, however often it is read
    (a plan reads x.shape and x.size; remotely each ask is a round trip)."""
    x = ektelo.protect(np.arange(12).reshape(3, 4), epsilon=1.0, seed=1)
    asked: list[object] = []

    class Counting:
        def submit(self, request: object) -> object:
            asked.append(request)
            return x.port.submit(request)

    h = ektelo.ProtectedVector(Counting(), x.node)  # type: ignore[arg-type]
    assert (h.shape, h.size, h.integral, h.root_shape) == ((3, 4), 12, True, (3, 4))
    assert h.shape == (3, 4)
    assert [type(r) for r in asked] == [port.Describe]
    h.laplace(Identity(12), eps=0.5)  # other requests still go through
    assert [type(r) for r in asked] == [port.Describe, port.VectorLaplace]
