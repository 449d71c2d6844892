"""The one codec for numpy arrays and exact fractions as JSON-ready values.

Three formats carry arrays as text: matrix specs (`ektelo.matrix.spec`, the
kernel's hash of a query and its stored partition choices), the ledger
store's released answers (`ektelo.ledger_store.records`) and the port's
wire format (`ektelo.wire`). All three write an array as one object
``{tag: base64 of its bytes, "dtype": numpy's dtype string, "shape": [...]}``
(the tag is ``"__ndarray__"`` in specs and stored answers, ``"$ndarray"`` on
the wire), and an exact rational as the text ``"p/q"``. This module is that
encoding, once; it imports nothing from ektelo, so the kernel, the matrices
and the stores may all use it.

Decoding validates before it builds: a dtype of an allowed kind, a shape of
non-negative ints, the byte count the shape and dtype need, and optionally a
bound on the number of elements. Every refusal is a `ValueError` whose
message starts "unsupported array dtype" or "malformed array"; each caller
re-raises it as its own error type (`WireError`, `StoreError`, or a spec's
`ValueError`).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = [
    "NUMERIC",
    "NUMERIC_OR_BOOL",
    "SPEC_TAG",
    "decode_array",
    "decode_tree",
    "encode_array",
    "encode_tree",
    "fraction_text",
    "parse_fraction",
]

#: the tag of an array inside a matrix spec or a stored answer
SPEC_TAG = "__ndarray__"
#: dtype kinds of numeric arrays (signed, unsigned, float)
NUMERIC = "iuf"
#: ... and of numeric or boolean arrays (what the wire carries)
NUMERIC_OR_BOOL = "biuf"


def encode_array(arr: np.ndarray, *, tag: str = SPEC_TAG, kinds: str = NUMERIC) -> dict[str, Any]:
    """`arr` as ``{tag: base64, "dtype", "shape"}``, its bytes C-ordered and
    little-endian (exact: the float64 bits themselves). TypeError when its
    dtype is not of one of `kinds`."""
    a = np.ascontiguousarray(arr)
    if a.dtype.kind not in kinds:
        raise TypeError(f"an array of dtype {a.dtype} cannot be encoded")
    a = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return {
        tag: base64.b64encode(a.tobytes()).decode("ascii"),
        "dtype": a.dtype.str,
        "shape": list(a.shape),
    }


def decode_array(
    doc: Mapping[str, Any],
    *,
    tag: str = SPEC_TAG,
    kinds: str = NUMERIC,
    max_elements: int | None = None,
) -> np.ndarray:
    """`encode_array`'s object back as a fresh array, checked before it is
    built (ValueError: "unsupported array dtype ..." or "malformed array ...")."""
    if set(doc) != {tag, "dtype", "shape"}:
        raise ValueError(f"malformed array: an array is {{{tag!r}: base64, 'dtype', 'shape'}}")
    shape = doc["shape"]
    if not isinstance(shape, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape
    ):
        raise ValueError("malformed array: its shape is a list of non-negative ints")
    count = math.prod(shape)
    if max_elements is not None and count > max_elements:
        raise ValueError(
            f"malformed array: {count} elements exceed the limit of {max_elements}"
        )
    try:
        dtype = np.dtype(doc["dtype"])
    except TypeError as err:
        raise ValueError(f"malformed array: unknown dtype {doc['dtype']!r}") from err
    if dtype.kind not in kinds or dtype.itemsize > 16:
        raise ValueError(f"unsupported array dtype {dtype}")
    data = doc[tag]
    need = count * dtype.itemsize
    if not isinstance(data, str) or len(data) > 4 * (need + 3) // 3 + 4:
        raise ValueError("malformed array: its data is the base64 of its bytes")
    try:
        raw = base64.b64decode(data, validate=True)
    except ValueError as err:
        raise ValueError("malformed array: its data is not valid base64") from err
    if len(raw) != need:
        raise ValueError(
            f"malformed array: its data has {len(raw)} bytes; its shape and dtype need {need}"
        )
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def encode_tree(obj: Any) -> Any:
    """Nested mappings, lists and tuples as JSON-ready values: arrays via
    `encode_array`, numpy scalars as Python ones, mapping keys as str.
    ValueError for a non-finite float (JSON has none)."""
    if isinstance(obj, np.ndarray):
        return encode_array(obj)
    if isinstance(obj, Mapping):
        return {str(k): encode_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [encode_tree(v) for v in obj]
    if isinstance(obj, (np.integer, np.floating, np.bool_)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        raise ValueError("a non-finite number cannot be encoded")
    return obj


def decode_tree(obj: Any) -> Any:
    """`encode_tree`'s output back (arrays as numpy arrays; ValueError as
    `decode_array` for a malformed one)."""
    if isinstance(obj, dict):
        if SPEC_TAG in obj:
            return decode_array(obj)
        return {k: decode_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_tree(v) for v in obj]
    return obj


def fraction_text(value: Fraction) -> str:
    """An exact rational as ``"p/q"`` (always with the denominator)."""
    return f"{value.numerator}/{value.denominator}"


def parse_fraction(text: str, *, max_length: int = 4096) -> Fraction:
    """``"p/q"`` (or an integer or decimal string) back as a `Fraction`;
    ValueError naming the text when it is not one."""
    if not isinstance(text, str) or len(text) > max_length:
        raise ValueError(f"an exact rational is a string 'p/q' of at most {max_length} characters")
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError) as err:
        raise ValueError(f"malformed fraction {text[:40]!r}") from err
