"""The wire format (ektelo.wire): round trips of every request and response of
the port (hypothesis), exactness of floats and arrays, errors mapped back to
their types, and the decoder's limits and refusals."""

from __future__ import annotations

import dataclasses
import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import ektelo
from ektelo import wire
from ektelo.kernel import Budget, BudgetExceeded, NodeState
from ektelo.matrix import (
    Dense,
    Diagonal,
    EMatrix,
    HStack,
    Identity,
    Kronecker,
    Ones,
    Partition,
    Prefix,
    Product,
    RangeQueries,
    Sparse,
    Suffix,
    Sum,
    Total,
    VStack,
    Weighted,
    to_spec,
)
from ektelo.matrix.spec import specs_equal
from ektelo.measurement import Gaussian, Laplace, Measurement
from ektelo.port import requests as port
from ektelo.predicates import Predicate

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
any_float = st.floats(width=64)
ints = st.integers(-(2**62), 2**62)
scalars = st.one_of(st.none(), st.booleans(), ints, finite, st.text(max_size=8))


def leaves(n: int) -> st.SearchStrategy:
    small = st.floats(-100, 100, allow_nan=False)
    return st.one_of(
        st.just(Identity(n)), st.just(Total(n)), st.just(Prefix(n)), st.just(Suffix(n)),
        st.integers(1, 4).map(lambda m: Ones(m, n)),
        st.lists(small, min_size=n, max_size=n).map(lambda d: Diagonal(np.array(d))),
        st.integers(1, 4).flatmap(
            lambda m: st.lists(small, min_size=m * n, max_size=m * n).map(
                lambda v: Dense(np.array(v).reshape(m, n)))),
        st.integers(0, 2**31).map(
            lambda s: Sparse(sp.random(3, n, density=0.5, format="csr", random_state=s))),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1,
                 max_size=4).map(lambda rs: RangeQueries(
                     (n,), np.array([min(a, b) for a, b in rs]),
                     np.array([max(a, b) for a, b in rs]))),
    )


def matrices(n: int = 6) -> st.SearchStrategy:
    return st.recursive(
        leaves(n),
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3).map(VStack),
            st.tuples(inner, st.floats(0.1, 10)).map(lambda t: Weighted(t[0], t[1])),
            inner.map(lambda A: Sum([A, A])),
            inner.map(lambda A: Product(A, Identity(n))),
        ),
        max_leaves=4,
    )


small_matrices = st.one_of(
    matrices(),
    st.tuples(leaves(2), leaves(3)).map(lambda t: Kronecker(list(t))),
    st.just(HStack([Identity(3), Prefix(3)])),
)

arrays = st.one_of(
    st.lists(finite, max_size=20).map(np.array),
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=20).map(
        lambda v: np.array(v, dtype=np.int64)),
    st.lists(st.booleans(), min_size=1, max_size=20).map(lambda v: np.array(v, dtype=bool)),
    st.lists(finite, min_size=6, max_size=6).map(lambda v: np.array(v).reshape(2, 3)),
)

attrs = st.sampled_from(["a", "b", "c"])
operands = st.one_of(st.integers(-5, 5), st.floats(-5, 5), st.sampled_from(["x", "y"]))


def predicates() -> st.SearchStrategy:
    leaf = st.one_of(
        st.tuples(attrs, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), operands).map(
            lambda t: {"==": ektelo.col(t[0]).__eq__, "!=": ektelo.col(t[0]).__ne__,
                       "<": ektelo.col(t[0]).__lt__, "<=": ektelo.col(t[0]).__le__,
                       ">": ektelo.col(t[0]).__gt__, ">=": ektelo.col(t[0]).__ge__}[t[1]](t[2])),
        st.tuples(attrs, st.lists(operands, max_size=4)).map(lambda t: ektelo.col(t[0]).isin(t[1])),
        st.tuples(attrs, operands, operands).map(lambda t: ektelo.col(t[0]).between(t[1], t[2])),
    )
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.tuples(inner, inner).map(lambda t: t[0] & t[1]),
            st.tuples(inner, inner).map(lambda t: t[0] | t[1]),
            inner.map(lambda p: ~p),
        ),
        max_leaves=6,
    )


partitions = st.lists(st.integers(0, 4), min_size=1, max_size=12).map(Partition)
eps_values = st.one_of(finite, any_float, st.integers(-3, 3), st.text(max_size=3), st.none())
options = st.dictionaries(st.text(min_size=1, max_size=6), scalars, max_size=3)
attr_lists = st.one_of(st.none(), attrs, st.lists(attrs, max_size=3),
                       st.lists(attrs, max_size=3).map(tuple))
sources = st.integers(-3, 50)
rids = st.one_of(st.none(), st.text(min_size=1, max_size=10))

REQUEST_STRATEGIES: dict[type, st.SearchStrategy] = {
    port.Describe: st.builds(port.Describe, sources),
    port.GetBudget: st.just(port.GetBudget()),
    port.GetHistory: st.just(port.GetHistory()),
    port.GetLedger: st.just(port.GetLedger()),
    port.Where: st.builds(port.Where, sources, predicates()),
    port.Select: st.builds(port.Select, sources, attr_lists),
    port.GroupBy: st.builds(port.GroupBy, sources, attr_lists, st.one_of(st.none(), attrs),
                            st.integers(1, 9)),
    port.SplitTable: st.builds(port.SplitTable, sources, attrs),
    port.Vectorize: st.builds(port.Vectorize, sources, attr_lists),
    port.ReduceByPartition: st.builds(port.ReduceByPartition, sources, partitions),
    port.SplitVector: st.builds(port.SplitVector, sources, partitions),
    port.Transform: st.builds(port.Transform, sources, st.one_of(small_matrices, arrays)),
    port.VectorLaplace: st.builds(port.VectorLaplace, sources, small_matrices, eps_values, rids),
    port.VectorGaussian: st.builds(port.VectorGaussian, sources, small_matrices, eps_values,
                                   rids),
    port.NoisyCount: st.builds(port.NoisyCount, sources, eps_values, rids),
    port.Envelope: st.builds(port.Envelope, sources, st.one_of(st.none(), eps_values),
                             st.one_of(st.none(), eps_values)),
    port.DAWAPartition: st.builds(port.DAWAPartition, sources, eps_values, options, rids),
    port.WorstApprox: st.builds(port.WorstApprox, sources, small_matrices, arrays, eps_values,
                                rids),
    port.PrivBayesSelect: st.builds(port.PrivBayesSelect, sources, eps_values, options, rids),
    port.SelectKeys: st.builds(port.SelectKeys, sources, attrs, eps_values, rids),
    port.Recode: st.builds(port.Recode, sources, attrs,
                           st.lists(st.text(max_size=8), max_size=4).map(tuple)),
    port.SelectMarginal: st.builds(
        port.SelectMarginal, sources, st.lists(st.lists(attrs, max_size=2).map(tuple),
                                               max_size=3),
        st.lists(arrays, max_size=3), eps_values, eps_values,
        st.one_of(st.none(), st.lists(finite, max_size=3)),
        st.one_of(st.none(), st.lists(finite, max_size=3)), rids),
}
requests = st.one_of(*REQUEST_STRATEGIES.values())


def test_the_strategies_cover_every_request_of_the_port():
    assert set(REQUEST_STRATEGIES) == set(wire.REQUESTS)


def same(a: Any, b: Any) -> bool:
    """Structural equality that follows the wire's own meaning of values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(
            np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, EMatrix):
        return specs_equal(to_spec(a), to_spec(b))
    if isinstance(a, Partition):
        return same(a.groups, b.groups) and a.domain_shape == b.domain_shape
    if isinstance(a, Predicate):
        return repr(a) == repr(b)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@settings(max_examples=150, deadline=None)
@given(requests)
def test_every_request_round_trips_exactly(request):
    back = wire.loads(wire.dumps(request))
    assert same(back, request)
    assert wire.dumps(back) == wire.dumps(request)


@settings(max_examples=60, deadline=None)
@given(small_matrices)
def test_matrices_round_trip_to_the_same_dense_matrix(M):
    back = wire.loads(wire.dumps(M))
    assert type(back) is type(M)
    np.testing.assert_array_equal(back.dense(), M.dense())


measurements = st.builds(
    lambda n, seed, gauss, scale, grid, eps, attrs_: Measurement(
        answers=np.random.default_rng(seed).normal(size=n), query=Identity(n),
        query_on_root=VStack([Identity(n)]),
        noise=Gaussian(scale, grid) if gauss else Laplace(scale, grid), epsilon=eps,
        root_id=f"k/{seed}", root_shape=(n,), seed=seed, attributes=attrs_,
        rho=eps / 2 if gauss else None),
    st.integers(1, 8), st.integers(0, 2**31), st.booleans(), st.floats(0, 1e6),
    st.one_of(st.none(), st.floats(1e-6, 1)), st.floats(0, 10),
    st.one_of(st.none(), st.lists(attrs, max_size=3).map(tuple)),
)
fractions = st.fractions(max_denominator=2**60)
responses = st.one_of(
    st.builds(port.NewSource, st.integers(0, 100)),
    st.builds(port.NewSources, st.lists(st.integers(0, 100), max_size=5).map(tuple)),
    measurements,
    partitions,
    st.integers(0, 10**6),
    small_matrices,
    st.lists(st.lists(st.integers(0, 9), max_size=3).map(tuple), max_size=4),
    st.builds(Budget, finite, finite, finite, st.sampled_from(["epsilon", "rho"]),
              st.one_of(st.none(), st.floats(1e-12, 0.5))),
    st.builds(port.QueryRecord, index=st.integers(0, 9), operation=st.text(max_size=9),
              node=st.integers(0, 9), eps=st.one_of(st.none(), finite), charged_at_root=finite,
              increments=st.lists(st.tuples(st.integers(0, 9), finite), max_size=3).map(tuple),
              request_id=rids, replayed=st.booleans()),
    st.builds(NodeState, st.integers(0, 9), st.sampled_from(["table", "vector", "partition"]),
              st.one_of(st.none(), st.integers(0, 9)), fractions, fractions,
              st.text(max_size=9)),
    st.builds(port.SourceInfo, st.integers(0, 9), st.just("table"),
              st.just(ektelo.Domain.from_dict({"a": 3, "b": {"values": ["x", "y"]}})),
              st.just((3, 2)), st.just(True), st.text(max_size=9), st.just((3, 2)),
              st.one_of(st.none(), st.integers(0, 9))),
    st.lists(st.builds(port.NewSource, st.integers(0, 9)), max_size=3).map(tuple),
)


@settings(max_examples=100, deadline=None)
@given(responses)
def test_every_response_round_trips_exactly(response):
    back = wire.loads(wire.dumps(response))
    assert same(back, response)
    if isinstance(response, Measurement):  # the noise record and exact answers
        assert back.noise == response.noise
        assert back.answers.tobytes() == response.answers.tobytes()


def test_a_real_measurement_and_ledger_round_trip():
    x = ektelo.protect(np.arange(16), epsilon=1.0, seed=3)
    parts = x.split_by_partition(Partition(np.arange(16) // 8))
    m = parts[0].laplace(Prefix(8), eps=0.3)
    for value in (m, x.ledger(), x.history(), x.budget, x.port.submit(port.Describe(2))):
        assert same(wire.loads(wire.dumps(value)), value)


@pytest.mark.parametrize(
    "error", [BudgetExceeded("spent 1 of 1"), ValueError("bad eps"), TypeError("not a matrix"),
              ektelo.domain.DomainValueError("col", "values outside", None)],
)
def test_kernel_errors_keep_their_type(error):
    doc = json.loads(json.dumps(wire.encode_error(error)))
    back = wire.decode_error(doc)
    assert isinstance(back, BudgetExceeded if isinstance(error, BudgetExceeded) else
                      ValueError if isinstance(error, ValueError) else TypeError)
    assert str(back) == str(error)
    assert wire.decode_error({"type": "SystemExit", "message": "x"}) is None


class Mine(Identity):
    pass


@pytest.mark.parametrize("value", [Mine(3), object(), np.array(["a"]), {1: 2}, lambda: 0,
                                   np.array([1 + 2j])])
def test_what_is_not_the_librarys_cannot_be_sent(value):
    with pytest.raises(TypeError):
        wire.encode(port.Transform(0, value))


@pytest.mark.parametrize(
    "doc",
    [
        {"$ndarray": "AAAA", "dtype": "<f8", "shape": [10]},  # bytes do not match
        {"$ndarray": "AA==", "dtype": "|O", "shape": [1]},
        {"$ndarray": "", "dtype": "<f8", "shape": [1 << 30]},  # over the limit
        {"$matrix": {"type": "Identity", "args": {"n": 1 << 30}}},
        {"$matrix": {"type": "Hierarchy", "args": {"domain_shape": [1 << 13, 1 << 13],
                                                   "branching": 2, "root": True,
                                                   "level_weights": None,
                                                   "transposed": False}}},
        {"$matrix": {"type": "subprocess.Popen", "args": {}}},
        {"$type": "Kernel", "fields": {}},
        {"$type": "VectorLaplace", "fields": {"source": 0, "eps": 1.0}},  # no matrix
        {"$predicate": {"node": "compare", "attr": "a", "op": "__import__", "value": 1}},
        {"$predicate": {"node": "lambda"}},
        {"$fraction": "1/0"},
        {"$float": "1e999"},
        {"$tuple": [], "$dict": {}},
        {"no tag": 1},
    ],
)
def test_malformed_documents_are_wire_errors(doc):
    with pytest.raises(wire.WireError):
        wire.decode(doc, wire.Limits(max_array_elements=1 << 20, max_matrix_dim=1 << 20))


def test_json_constants_and_deep_nesting_are_refused():
    with pytest.raises(wire.WireError):
        wire.loads(b'{"$float": NaN}')
    with pytest.raises(wire.WireError):
        wire.loads(b"[" * 100_000 + b"]" * 100_000)
    deep = 1
    for _ in range(100):
        deep = {"$tuple": [deep]}  # type: ignore[assignment]
    with pytest.raises(wire.WireError):
        wire.decode(deep)


def test_a_request_digest_names_its_content():
    a = wire.encode(port.VectorLaplace(0, Identity(4), 0.5))
    b = wire.encode(port.VectorLaplace(0, Identity(4), 0.25))
    assert wire.request_digest(a) == wire.request_digest(json.loads(json.dumps(a)))
    assert wire.request_digest(a) != wire.request_digest(b)
    assert Fraction(1, 3) == wire.loads(wire.dumps(Fraction(1, 3)))


def test_a_spec_of_too_many_matrices_is_refused_while_decoding():
    """Issue #36: building a 150,000-block matrix took 41.9 s of server CPU before
    the charge; a document may hold at most `max_matrix_nodes` matrices (the
    server's default 32,768), counted before anything is built."""
    from ektelo.matrix import Total, VStack
    from ektelo.port import requests as port

    request = port.VectorLaplace(0, VStack([Total(4)] * 300), 0.5)
    doc = wire.encode(request)
    with pytest.raises(wire.WireError, match="holds more than 299 matrices"):
        wire.decode(doc, wire.Limits(max_matrix_nodes=299))
    decoded = wire.decode(doc, wire.Limits(max_matrix_nodes=301))  # 300 blocks + the VStack
    assert decoded.matrix.shape == (300, 4)
    assert wire.Limits().max_matrix_nodes == 1 << 15
