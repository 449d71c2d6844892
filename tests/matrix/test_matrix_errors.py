"""Bad input is refused with a clear exception and message."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from ektelo.matrix import (
    Dense,
    Diagonal,
    EMatrix,
    Embedding,
    HStack,
    Identity,
    Kronecker,
    Ones,
    Prefix,
    Product,
    RangeQueries,
    Sparse,
    Suffix,
    Sum,
    Total,
    VStack,
    Wavelet,
    Weighted,
    from_json,
    from_spec,
    rebuild,
    to_json,
    to_spec,
)

# -- shapes of compositions ------------------------------------------------------------


def test_vstack_needs_equal_column_counts():
    with pytest.raises(ValueError, match=r"same number of columns: 3 vs 4"):
        VStack([Identity(3), Prefix(4)])


def test_hstack_needs_equal_row_counts():
    with pytest.raises(ValueError, match=r"same number of rows: 3 vs 1"):
        HStack([Identity(3), Total(3)])


def test_product_needs_aligned_shapes():
    with pytest.raises(ValueError, match=r"do not align: \(1, 5\) @ \(4, 4\)"):
        Product(Total(5), Prefix(4))
    with pytest.raises(ValueError, match="do not align"):
        Total(5) @ Prefix(4)


def test_sum_needs_equal_shapes():
    with pytest.raises(ValueError, match=r"equal shapes: \(3, 3\) vs \(1, 3\)"):
        Sum([Prefix(3), Total(3)])


@pytest.mark.parametrize("combinator", [VStack, HStack, Sum, Kronecker])
def test_combinators_need_matrices(combinator):
    with pytest.raises(ValueError, match="at least one matrix"):
        combinator([])
    with pytest.raises(TypeError, match="must be matrices, got ndarray"):
        combinator([Identity(2), np.eye(2)])


def test_product_and_weighted_need_matrices():
    with pytest.raises(TypeError, match="must be matrices"):
        Product(np.eye(2), Identity(2))
    with pytest.raises(TypeError, match="must be matrices"):
        Weighted(np.eye(2), 2.0)


# -- entries ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_entries_are_refused(bad):
    arr = np.eye(3)
    arr[1, 2] = bad
    with pytest.raises(ValueError, match="Dense matrix entries must be finite"):
        Dense(arr)
    with pytest.raises(ValueError, match="Sparse matrix entries must be finite"):
        Sparse(sp.csr_matrix(arr))
    with pytest.raises(ValueError, match="Diagonal entries must be finite"):
        Diagonal([1.0, bad])
    with pytest.raises(ValueError, match="weight must be finite"):
        Weighted(Prefix(3), bad)
    with pytest.raises(ValueError, match="weight must be finite"):
        Prefix(3) * bad


def test_empty_and_misshapen_explicit_matrices():
    with pytest.raises(ValueError, match="non-empty 2-D array"):
        Dense(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="non-empty 2-D array"):
        Dense(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError, match="Sparse needs a non-empty matrix"):
        Sparse(sp.csr_matrix((0, 4)))
    with pytest.raises(ValueError, match="at least one entry"):
        Diagonal([])


@pytest.mark.parametrize("cls", [Identity, Prefix, Suffix, Total, Wavelet])
def test_sizes_must_be_positive_integers(cls):
    with pytest.raises(ValueError, match="must be a positive integer, got 0"):
        cls(0)
    with pytest.raises(TypeError, match="must be an integer, got float"):
        cls(4.0)
    with pytest.raises(TypeError, match="must be an integer, got bool"):
        cls(True)
    with pytest.raises(ValueError, match="positive integer"):
        Ones(2, -1)


def test_an_embedding_pads_at_most_its_rows():
    with pytest.raises(ValueError, match="Embedding needs n <= m, got n=5 > m=4"):
        Embedding(4, 5)
    with pytest.raises(ValueError, match="must be a positive integer, got 0"):
        Embedding(4, 0)
    with pytest.raises(TypeError, match="must be an integer, got float"):
        Embedding(4.0, 2)
    with pytest.raises(ValueError, match="Embedding needs n <= m"):
        from_spec({"type": "Embedding", "args": {"m": 2, "n": 3, "transposed": False}})
    with pytest.raises(ValueError, match="must be a boolean"):
        from_spec({"type": "Embedding", "args": {"m": 3, "n": 2, "transposed": 1}})


@pytest.mark.parametrize("n", [3, 6, 12, 1000])
def test_wavelet_needs_a_power_of_two(n):
    with pytest.raises(ValueError, match=f"power-of-two size, got {n}"):
        Wavelet(n)


# -- operands --------------------------------------------------------------------------


def test_wrong_vector_lengths():
    M = VStack([Identity(5), Prefix(5)])  # 10 x 5
    with pytest.raises(ValueError, match=r"shape \(4,\); expected a vector of length 5"):
        M.matvec(np.ones(4))
    with pytest.raises(ValueError, match=r"shape \(5,\); expected a vector of length 10"):
        M.rmatvec(np.ones(5))
    with pytest.raises(ValueError, match=r"shape \(4, 2\); expected \(5, k\)"):
        M.matmat(np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"shape \(5,\); expected \(5, k\)"):
        M.matmat(np.ones(5))
    with pytest.raises(ValueError, match="expected a vector of length 5"):
        M @ np.ones(6)
    with pytest.raises(ValueError, match="expected a vector of length 10"):
        np.ones(3) @ M
    with pytest.raises(ValueError, match=r"cannot multiply a matrix by an array of shape"):
        M @ np.ones((5, 1, 1))
    with pytest.raises(ValueError, match="dimension mismatch"):  # SciPy's own check
        M.as_linear_operator().matvec(np.ones(3))


def test_bad_norm_order_axis_and_index():
    for M in [
        Prefix(4),
        Identity(4),
        Ones(2, 4),
        Wavelet(4),
        Dense(np.eye(4)),
        Kronecker([Prefix(2), Identity(2)]),
        VStack([Prefix(4), Total(4)]),
        RangeQueries(4, [0], [2]),
        Weighted(Suffix(4), 2.0),
        Sparse(np.eye(4)),
        Product(Prefix(4), Suffix(4)),
        Diagonal([1.0, 2.0, 3.0, 4.0]),
        Embedding(6, 4).T,
        Product(Wavelet(8), Embedding(8, 4)),
    ]:
        with pytest.raises(ValueError, match="p must be 1 or 2, got 3"):
            M.sensitivity(3)
        with pytest.raises(ValueError, match="p must be 1 or 2, got 0"):
            M.column_norms(0)
    with pytest.raises(ValueError, match="axis must be None, 0 or 1, got 2"):
        Prefix(3).sum(axis=2)
    with pytest.raises(TypeError, match="integer index only"):
        Prefix(3)[0:2]
    with pytest.raises(IndexError, match="row index 3 out of range for 3 rows"):
        Prefix(3).row(3)


def test_scalar_multiplication_needs_a_real_number():
    with pytest.raises(TypeError):
        Prefix(3) * "2"
    with pytest.raises(TypeError):
        Prefix(3) * True
    with pytest.raises(TypeError):
        Prefix(3) * np.ones(3)


def test_no_numpy_ufunc_dispatch():
    """|A| only through the exact abs() method (STYLE: never np.abs(operator))."""
    with pytest.raises(TypeError):
        np.abs(Prefix(3))
    with pytest.raises(TypeError):
        np.add(Prefix(3), 1)


def test_materialisation_beyond_the_cap_is_refused():
    with pytest.raises(MemoryError, match="refusing to materialise a 100000x100000 matrix"):
        Prefix(100_000).dense()
    with pytest.raises(MemoryError, match="in sparse form; use its implicit form"):
        Prefix(100_000).sparse()
    with pytest.raises(MemoryError, match="refusing to materialise"):
        Kronecker([Prefix(1000), Prefix(1000)]).dense()
    with pytest.raises(MemoryError, match="refusing to materialise"):
        Kronecker([Prefix(2000), Prefix(2000)]).sparse()
    R = RangeQueries(10**6, np.zeros(300, dtype=int), np.full(300, 10**6 - 1))
    with pytest.raises(MemoryError, match="refusing to materialise a 1000000x300 matrix"):
        R.T.dense()
    with pytest.raises(MemoryError, match="300000000 non-zeros"):
        R.sparse()


# -- range corners ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lower", "upper"),
    [
        ([[2]], [[1]]),  # lower > upper
        ([[-1]], [[3]]),  # below the domain
        ([[0]], [[5]]),  # past the end of a size-5 axis
        ([[0, 0]], [[1, 4]]),  # second axis past a size-4 axis
    ],
)
def test_range_corners_must_lie_in_the_domain(lower, upper):
    shape = (5,) if len(lower[0]) == 1 else (5, 4)
    with pytest.raises(ValueError, match=r"0 ≤ lower ≤ upper < domain size"):
        RangeQueries(shape, np.array(lower), np.array(upper))


def test_range_corner_shapes_and_types():
    with pytest.raises(ValueError, match=r"must both have shape \(m, 2\)"):
        RangeQueries((3, 3), np.array([[0, 0]]), np.array([[1, 1], [2, 2]]))
    with pytest.raises(ValueError, match=r"must both have shape \(m, 2\)"):
        RangeQueries((3, 3), np.array([0, 1]), np.array([1, 2]))
    with pytest.raises(ValueError, match="m ≥ 1"):
        RangeQueries(3, np.zeros((0, 1), dtype=int), np.zeros((0, 1), dtype=int))
    with pytest.raises(TypeError, match="range corners must be integer arrays"):
        RangeQueries(3, np.array([0.0]), np.array([1.0]))
    with pytest.raises(ValueError, match="domain_shape must hold positive integer sizes"):
        RangeQueries((3, 0), np.array([[0, 0]]), np.array([[0, 0]]))
    with pytest.raises(ValueError, match="domain_shape must hold positive integer sizes"):
        RangeQueries((2.5,), np.array([0]), np.array([1]))
    with pytest.raises(ValueError, match="domain_shape must hold positive integer sizes"):
        RangeQueries((), np.array([0]), np.array([1]))


# -- rebuild and specs -----------------------------------------------------------------


class MyPrefix(Prefix):
    """A client subclass: its code must never run inside the kernel."""

    def sensitivity(self, p: int = 1) -> float:
        return 0.0


class Custom(EMatrix):
    def __init__(self) -> None:
        self.shape = (2, 2)

    def _matmat(self, X: np.ndarray) -> np.ndarray:
        return 2 * X

    def _transpose(self) -> EMatrix:
        return self


@pytest.mark.parametrize(
    "M", [MyPrefix(4), Custom(), VStack([Identity(2), Custom()]), Kronecker([MyPrefix(2)])]
)
def test_rebuild_refuses_foreign_classes(M):
    with pytest.raises(TypeError, match="is not one of ektelo's matrix classes"):
        rebuild(M)
    with pytest.raises(TypeError, match="has no spec"):
        to_json(M)
    with pytest.raises(TypeError, match="has no spec"):
        to_spec(M)


def test_foreign_classes_still_compare_by_identity():
    a, b = Custom(), Custom()
    assert a == a
    assert a != b
    assert MyPrefix(3) != Prefix(3)
    assert MyPrefix(3) != MyPrefix(3)  # a client subclass: identity, like its spec
    c = Custom()
    assert VStack([Identity(2), c]) == VStack([Identity(2), c])
    assert VStack([Identity(2), c]) != VStack([Identity(2), Custom()])


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("Prefix", "a spec is a dict with 'type' and 'args'"),
        ({"type": "Prefix"}, "a spec is a dict with 'type' and 'args'"),
        ({"args": {"n": 3}}, "a spec is a dict with 'type' and 'args'"),
        ({"type": "Evil", "args": {}}, "unknown matrix type in spec: 'Evil'"),
        ({"type": ["Prefix"], "args": {}}, "unknown matrix type"),
        ({"type": "Prefix", "args": {}}, "missing argument 'n'"),
        ({"type": "Prefix", "args": [3]}, "'args' must be a dict"),
        ({"type": "Prefix", "args": {"n": "3"}}, "'n' must be an integer, got '3'"),
        ({"type": "Prefix", "args": {"n": 2.7}}, "'n' must be an integer, got 2.7"),
        ({"type": "Prefix", "args": {"n": True}}, "'n' must be an integer"),
        ({"type": "Wavelet", "args": {"n": 4, "transposed": "false"}}, "must be a boolean"),
        (
            {
                "type": "Weighted",
                "args": {"base": {"type": "Identity", "args": {"n": 2}}, "weight": "2"},
            },
            "'weight' must be a number",
        ),
        ({"type": "VStack", "args": {"blocks": {"type": "Identity"}}}, "must be a list of specs"),
        (
            {"type": "VStack", "args": {"blocks": [{"type": "Identity", "args": {}}]}},
            "missing argument 'n'",
        ),
        (
            {
                "type": "Sparse",
                "args": {"shape": [2, 2], "data": [1.0], "indices": [5], "indptr": [0, 1, 1]},
            },
            "column index out of range",
        ),
        (
            {
                "type": "Sparse",
                "args": {"shape": [2, 2], "data": [1.0], "indices": [0], "indptr": [0, 1]},
            },
            "malformed sparse matrix spec",
        ),
        (
            {
                "type": "Sparse",
                "args": {"shape": [2, 2], "data": [1.0], "indices": [0.5], "indptr": [0, 1, 1]},
            },
            "'indices' must hold integers",
        ),
        (
            {
                "type": "RangeQueries",
                "args": {
                    "domain_shape": [4],
                    "lower": [[0.5]],
                    "upper": [[1]],
                    "transposed": False,
                },
            },
            "'lower' must hold integers",
        ),
    ],
)
def test_malformed_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        from_spec(spec)


def test_spec_values_are_rechecked_by_the_constructors():
    with pytest.raises(ValueError, match="power-of-two"):
        from_spec({"type": "Wavelet", "args": {"n": 6, "transposed": False}})
    with pytest.raises(ValueError, match="finite"):
        from_spec({"type": "Dense", "args": {"array": [[1.0, float("nan")]]}})
    with pytest.raises(ValueError, match="lower ≤ upper"):
        from_spec(
            {
                "type": "RangeQueries",
                "args": {"domain_shape": [4], "lower": [[3]], "upper": [[1]], "transposed": False},
            }
        )


def test_malformed_json():
    with pytest.raises(ValueError):
        from_json("{not json")
    good = json.loads(to_json(Dense(np.eye(2))))
    for field, value, message in [
        ("dtype", "|O", "unsupported array dtype"),
        ("dtype", "<U4", "unsupported array dtype"),
        ("dtype", "no-such-type", "malformed array"),
        ("shape", [3, 3], "malformed array"),
        ("__ndarray__", "***", "malformed array"),
    ]:
        doc = json.loads(json.dumps(good))
        doc["args"]["array"][field] = value
        with pytest.raises(ValueError, match=message):
            from_json(json.dumps(doc))
    doc = json.loads(json.dumps(good))
    del doc["args"]["array"]["dtype"]
    with pytest.raises(ValueError, match="malformed array"):
        from_json(json.dumps(doc))
