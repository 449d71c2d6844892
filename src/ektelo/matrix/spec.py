"""Plain specifications of matrix expressions, and rebuilding from them.

`to_spec(M)` describes any expression built from the library's own classes as
nested dicts of type names, integers and numpy arrays; `to_json`/`from_json`
make that a JSON document. `from_spec` rebuilds the expression using only the
classes registered here, so whoever receives a spec — the protected kernel,
or later a server — never runs a client-defined object's code. `rebuild(M)`
is the kernel's entry point: an exact library object is re-created from its
constructor arguments; anything else is refused (`TypeError`). A malformed
spec (unknown type, missing or ill-typed argument) raises `ValueError`; the
constructors then re-check every value as for any caller.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ..codec import decode_tree, encode_tree
from .base import EMatrix
from .combinators import HStack, Kronecker, Product, Sum, VStack, Weighted
from .core import Dense, Diagonal, Embedding, Identity, Ones, Prefix, Sparse, Suffix, Total
from .hierarchy import Hierarchy
from .ranges import RangeQueries
from .wavelet import Wavelet

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .lazy import sparse as sp

__all__ = ["from_json", "from_spec", "rebuild", "specs_equal", "to_json", "to_spec"]


def _arg(args: Any, key: str) -> Any:
    if not isinstance(args, dict):
        raise ValueError(f"malformed matrix spec: 'args' must be a dict, got {type(args).__name__}")
    if key not in args:
        raise ValueError(f"malformed matrix spec: missing argument {key!r}")
    return args[key]


def _int(args: Any, key: str) -> int:
    value = _arg(args, key)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"malformed matrix spec: {key!r} must be an integer, got {value!r}")
    return int(value)


def _bool(args: Any, key: str) -> bool:
    value = _arg(args, key)
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"malformed matrix spec: {key!r} must be a boolean, got {value!r}")
    return bool(value)


def _float(args: Any, key: str) -> float:
    value = _arg(args, key)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise ValueError(f"malformed matrix spec: {key!r} must be a number, got {value!r}")
    return float(value)


def _specs(args: Any, key: str) -> list[EMatrix]:
    value = _arg(args, key)
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"malformed matrix spec: {key!r} must be a list of specs")
    return [from_spec(v) for v in value]


def _int_array(args: Any, key: str) -> np.ndarray:
    arr = np.asarray(_arg(args, key))
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"malformed matrix spec: {key!r} must hold integers")
    return arr.astype(np.int64)


def _weights_or_none(args: Any, key: str) -> np.ndarray | None:
    value = _arg(args, key)
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.dtype.kind not in "iuf":
        raise ValueError(f"malformed matrix spec: {key!r} must be null or a 1-D array of numbers")
    return arr.astype(np.float64)


def _sparse_spec(mat: sp.csr_matrix) -> dict[str, Any]:
    csr = sp.csr_matrix(mat)
    return {
        "shape": [int(s) for s in csr.shape],
        "data": np.asarray(csr.data, dtype=np.float64),
        "indices": np.asarray(csr.indices, dtype=np.int64),
        "indptr": np.asarray(csr.indptr, dtype=np.int64),
    }


def _sparse_from(args: dict[str, Any]) -> sp.csr_matrix:
    shape = tuple(_int_array(args, "shape").reshape(-1))
    data = np.asarray(_arg(args, "data"), dtype=np.float64)
    indices = _int_array(args, "indices")
    indptr = _int_array(args, "indptr")
    if (
        len(shape) != 2
        or min(shape) < 1
        or indptr.shape != (shape[0] + 1,)
        or data.ndim != 1
        or indices.shape != data.shape
    ):
        raise ValueError("malformed sparse matrix spec (shape, indptr or data sizes)")
    if indptr[0] != 0 or indptr[-1] != data.size or np.any(np.diff(indptr) < 0):
        raise ValueError("malformed sparse matrix spec (indptr)")
    if indices.size and (indices.min() < 0 or indices.max() >= shape[1]):
        raise ValueError("malformed sparse matrix spec (column index out of range)")
    return sp.csr_matrix((data, indices, indptr), shape=shape)


# type name -> (exact class, arguments of an instance, constructor from arguments)
_Reader = Callable[[Any], dict[str, Any]]
_Builder = Callable[[dict[str, Any]], EMatrix]
_REGISTRY: dict[str, tuple[type, _Reader, _Builder]] = {
    "Identity": (Identity, lambda M: {"n": M.n}, lambda a: Identity(_int(a, "n"))),
    "Ones": (
        Ones,
        lambda M: {"m": M.m, "n": M.n},
        lambda a: Ones(_int(a, "m"), _int(a, "n")),
    ),
    "Total": (Total, lambda M: {"n": M.n}, lambda a: Total(_int(a, "n"))),
    "Prefix": (Prefix, lambda M: {"n": M.n}, lambda a: Prefix(_int(a, "n"))),
    "Suffix": (Suffix, lambda M: {"n": M.n}, lambda a: Suffix(_int(a, "n"))),
    "Wavelet": (
        Wavelet,
        lambda M: {"n": M.n, "transposed": M.transposed},
        lambda a: Wavelet(_int(a, "n"), _bool(a, "transposed")),
    ),
    "Embedding": (
        Embedding,
        lambda M: {"m": M.m, "n": M.n, "transposed": M.transposed},
        lambda a: Embedding(_int(a, "m"), _int(a, "n"), _bool(a, "transposed")),
    ),
    "Diagonal": (Diagonal, lambda M: {"d": np.asarray(M.d)}, lambda a: Diagonal(_arg(a, "d"))),
    "Dense": (
        Dense,
        lambda M: {"array": np.asarray(M.array)},
        lambda a: Dense(_arg(a, "array")),
    ),
    "Sparse": (
        Sparse,
        lambda M: _sparse_spec(M.matrix),
        lambda a: Sparse(_sparse_from(a)),
    ),
    "RangeQueries": (
        RangeQueries,
        lambda M: {
            "domain_shape": list(M.domain_shape),
            "lower": np.asarray(M.lower),
            "upper": np.asarray(M.upper),
            "transposed": M.transposed,
        },
        lambda a: RangeQueries(
            tuple(_int_array(a, "domain_shape").reshape(-1).tolist()),
            _int_array(a, "lower"),
            _int_array(a, "upper"),
            _bool(a, "transposed"),
        ),
    ),
    "Hierarchy": (
        Hierarchy,
        lambda M: {
            "domain_shape": list(M.domain_shape),
            "branching": M.branching,
            "root": M.root,
            "level_weights": (
                None if M.level_weights is None else np.array(M.level_weights, dtype=np.float64)
            ),
            "transposed": M.transposed,
        },
        lambda a: Hierarchy(
            tuple(_int_array(a, "domain_shape").reshape(-1).tolist()),
            _int(a, "branching"),
            _bool(a, "root"),
            _weights_or_none(a, "level_weights"),
            _bool(a, "transposed"),
        ),
    ),
    "VStack": (
        VStack,
        lambda M: {"blocks": [to_spec(b) for b in M.blocks]},
        lambda a: VStack(_specs(a, "blocks")),
    ),
    "HStack": (
        HStack,
        lambda M: {"blocks": [to_spec(b) for b in M.blocks]},
        lambda a: HStack(_specs(a, "blocks")),
    ),
    "Sum": (
        Sum,
        lambda M: {"terms": [to_spec(t) for t in M.terms]},
        lambda a: Sum(_specs(a, "terms")),
    ),
    "Product": (
        Product,
        lambda M: {"A": to_spec(M.A), "B": to_spec(M.B)},
        lambda a: Product(from_spec(_arg(a, "A")), from_spec(_arg(a, "B"))),
    ),
    "Kronecker": (
        Kronecker,
        lambda M: {"factors": [to_spec(f) for f in M.factors]},
        lambda a: Kronecker(_specs(a, "factors")),
    ),
    "Weighted": (
        Weighted,
        lambda M: {"base": to_spec(M.base), "weight": float(M.weight)},
        lambda a: Weighted(from_spec(_arg(a, "base")), _float(a, "weight")),
    ),
}
_BY_CLASS = {cls: name for name, (cls, _, _) in _REGISTRY.items()}


def to_spec(M: EMatrix) -> dict[str, Any]:
    """Describe `M` as {"type": name, "args": {...}}; refuse foreign classes."""
    name = _BY_CLASS.get(type(M))
    if name is None:
        raise TypeError(f"{type(M).__name__} is not one of ektelo's matrix classes and has no spec")
    return {"type": name, "args": _REGISTRY[name][1](M)}


def from_spec(spec: dict[str, Any]) -> EMatrix:
    """Rebuild a matrix from a spec using only the registered library classes."""
    if not isinstance(spec, dict) or "type" not in spec or "args" not in spec:
        raise ValueError("malformed matrix spec: a spec is a dict with 'type' and 'args'")
    entry = _REGISTRY.get(spec["type"]) if isinstance(spec["type"], str) else None
    if entry is None:
        raise ValueError(f"unknown matrix type in spec: {spec['type']!r}")
    return entry[2](spec["args"])


def rebuild(M: EMatrix) -> EMatrix:
    """A fresh copy of `M` made only from library classes (for the kernel)."""
    return from_spec(to_spec(M))


def _decode(obj: Any) -> Any:
    try:
        return decode_tree(obj)
    except ValueError as err:
        raise ValueError(f"malformed array in matrix spec: {err}") from err


def to_json(M: EMatrix) -> str:
    """The spec of `M` as a JSON string (arrays base64-encoded)."""
    return json.dumps(encode_tree(to_spec(M)))


def from_json(text: str) -> EMatrix:
    """Rebuild a matrix from `to_json` output."""
    return from_spec(_decode(json.loads(text)))


def specs_equal(a: Any, b: Any) -> bool:
    """Structural equality of two specs (arrays compared by value)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(specs_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(specs_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a_arr, b_arr = np.asarray(a), np.asarray(b)
        return a_arr.shape == b_arr.shape and bool(np.array_equal(a_arr, b_arr))
    return bool(a == b)
