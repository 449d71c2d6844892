"""The wire format of the kernel port: every request and response as JSON.

The kernel as a service (issue #26; the paper's §4 architecture with the
kernel in another process) carries the typed values of `ektelo.port.requests`
between a client's `RemotePort` (`ektelo.client`) and the server
(`ektelo.server`). This module needs nothing but the library, so a client
installs no server dependency.

A document is plain JSON. Scalars travel as themselves (non-finite floats as
{"$float": "inf"}); everything else is a tagged object rebuilt on the
receiving side **only from the library's own classes**:

* ``{"$ndarray": base64, "dtype", "shape"}`` — a numeric or boolean array;
* ``{"$matrix": spec}`` — an `EMatrix` as `ektelo.matrix.spec` describes it
  (a class outside the library has no spec and cannot be sent);
* ``{"$csr": spec}`` — a scipy CSR matrix (the spec of a `Sparse`);
* ``{"$partition": {"groups", "domain_shape"}}`` — a `Partition`;
* ``{"$predicate": tree}`` — a `where` predicate (compare / isin / between /
  and / or / not nodes), rebuilt with `ektelo.col`;
* ``{"$domain": ...}`` (`Domain.to_dict`), ``{"$fraction": "p/q"}`` (the
  ledger's exact values), ``{"$tuple": [...]}``, ``{"$dict": {...}}``;
* ``{"$type": name, "fields": {...}}`` — one of the port's request and
  response dataclasses, a `Measurement` with its noise record (`Laplace`,
  `Gaussian`), a `BudgetReport` (named "Budget" on the wire) or a `NodeState`;
  the constructor re-checks every field as for any caller.

Errors travel as ``{"type", "message"}``; `decode_error` maps the kernel's
refusals back to the same exception types (`BudgetExceeded`, `ValueError`,
`TypeError`). A malformed document raises `WireError` (a `ValueError`),
and `Limits` bounds what a decoder accepts (array elements, matrix sizes,
nesting), so a server refuses huge inputs before building anything.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import numbers
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from . import predicates
from .codec import (
    NUMERIC_OR_BOOL,
    SPEC_TAG,
    decode_array,
    encode_array,
    fraction_text,
    parse_fraction,
)
from .domain import Domain
from .errors import WireError
from .kernel import BudgetExceeded, BudgetReport, NodeState
from .matrix import EMatrix, Partition, Sparse
from .matrix.lazy import issparse
from .matrix.spec import from_json, to_json
from .measurement import Gaussian, Laplace, Measurement
from .port import requests as port
from .predicates import Predicate, col

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from .matrix.lazy import sparse as sp

__all__ = [
    "PRIVATE_TO_PUBLIC",
    "REQUESTS",
    "Limits",
    "WireError",
    "decode",
    "decode_error",
    "dumps",
    "encode",
    "encode_error",
    "loads",
    "request_digest",
]


@dataclass(frozen=True)
class Limits:
    """What a decoder accepts: the largest array (elements), the largest
    matrix dimension (rows, columns, or cells of a domain shape) and the
    deepest nesting. The defaults suit a server; a client trusts its server."""

    max_array_elements: int = 1 << 22
    max_matrix_dim: int = 1 << 24
    max_depth: int = 64
    max_matrix_nodes: int = 1 << 15  # matrices in one spec (issue #36: building them is work)


# The dataclasses a document may name: the port's requests and responses
# (every dataclass `ektelo.port.requests` exports, so a new request travels
# as soon as the kernel has it) and the public records they carry. Nothing
# else is ever constructed.
_PORT_TYPES: tuple[type, ...] = tuple(
    obj for name in port.__all__
    if isinstance(obj := getattr(port, name), type) and dataclasses.is_dataclass(obj)
)
_RESPONSES = (port.NewSource, port.NewSources, port.QueryRecord, port.SourceInfo)
_CLASSES: dict[str, type] = {
    cls.__name__: cls for cls in (*_PORT_TYPES, Measurement, Laplace, Gaussian, NodeState)
}
_CLASSES["Budget"] = BudgetReport  # the wire's name for it (its class was `Budget` before #35)
_NAMES: dict[type, str] = {cls: name for name, cls in _CLASSES.items()}

#: the kernel requests a client may send (every port dataclass but the responses)
REQUESTS: frozenset[type] = frozenset(c for c in _PORT_TYPES if c not in _RESPONSES)

#: the requests that spend budget (Private→Public): each carries a request id
PRIVATE_TO_PUBLIC: frozenset[type] = frozenset(
    c for c in REQUESTS if any(f.name == "request_id" for f in dataclasses.fields(c))
)

# The exceptions a kernel refusal may be; anything else is the server's fault.
_ERRORS: dict[str, type[Exception]] = {
    "BudgetExceeded": BudgetExceeded,
    "ValueError": ValueError,
    "TypeError": TypeError,
}

# -- encoding ---------------------------------------------------------------------


def encode(value: Any) -> Any:
    """`value` as a JSON-ready structure, or TypeError naming what cannot be sent."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, Fraction):
        return {"$fraction": fraction_text(value)}
    if isinstance(value, numbers.Real):
        f = float(value)
        return f if math.isfinite(f) else {"$float": repr(f)}
    if isinstance(value, np.ndarray):
        return _encode_array(value)
    if isinstance(value, EMatrix):
        return {"$matrix": json.loads(to_json(value))}
    if issparse(value):
        return {"$csr": json.loads(to_json(Sparse(sp.csr_matrix(value))))}
    if isinstance(value, Partition):
        return {
            "$partition": {
                "groups": _encode_array(np.asarray(value.groups)),
                "domain_shape": list(value.domain_shape),
            }
        }
    if isinstance(value, Predicate):
        return {"$predicate": _encode_predicate(value)}
    if isinstance(value, Domain):
        return {"$domain": value.to_dict()}
    name = _NAMES.get(type(value))
    if name is not None:
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$type": name, "fields": fields}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("only dicts with str keys can be sent to a kernel")
        return {"$dict": {k: encode(v) for k, v in value.items()}}
    raise TypeError(
        f"a {type(value).__name__} cannot be sent to a kernel: requests carry only the "
        "library's matrices, partitions, predicates, arrays and plain values"
    )


def _encode_array(arr: np.ndarray) -> dict[str, Any]:
    try:
        return encode_array(arr, tag="$ndarray", kinds=NUMERIC_OR_BOOL)
    except TypeError as err:
        raise TypeError(f"arrays of dtype {arr.dtype} cannot be sent to a kernel") from err


def _encode_predicate(p: Any) -> dict[str, Any]:
    kind = type(p)  # exactly the library's classes: a subclass could answer differently
    if kind is predicates.Compare:
        return {"node": "compare", "attr": p.attr, "op": p.op, "value": encode(p.value)}
    if kind is predicates.IsIn:
        return {"node": "isin", "attr": p.attr, "values": [encode(v) for v in p.values]}
    if kind is predicates.Between:
        return {"node": "between", "attr": p.attr, "low": encode(p.low), "high": encode(p.high)}
    if kind is predicates.And or kind is predicates.Or:
        node = "and" if kind is predicates.And else "or"
        return {"node": node, "parts": [_encode_predicate(q) for q in p.parts]}
    if kind is predicates.Not:
        return {"node": "not", "part": _encode_predicate(p.part)}
    raise TypeError(f"{kind.__name__} is not one of the library's predicate classes")


# -- decoding ---------------------------------------------------------------------


def decode(doc: Any, limits: Limits | None = None) -> Any:
    """Rebuild a value from `encode`'s output (WireError when malformed)."""
    return _Decoder(limits or Limits()).value(doc, 0)


class _Decoder:
    def __init__(self, limits: Limits):
        self.limits = limits
        self._nodes = 0  # matrices met in this document (all its specs)

    def value(self, doc: Any, depth: int) -> Any:
        if depth > self.limits.max_depth:
            raise WireError(f"the document nests deeper than {self.limits.max_depth} levels")
        if doc is None or isinstance(doc, (bool, int, str)):
            return doc
        if isinstance(doc, float):
            return doc
        if isinstance(doc, list):
            return [self.value(v, depth + 1) for v in doc]
        if not isinstance(doc, dict):
            raise WireError(f"unexpected JSON value of type {type(doc).__name__}")
        tags = [k for k in doc if k.startswith("$")]
        if len(tags) != 1:
            raise WireError("an object on the wire has exactly one '$' tag, e.g. {'$tuple': ...}")
        tag = tags[0]
        body = doc[tag]
        if tag == "$float":
            if body not in ("inf", "-inf", "nan"):
                raise WireError(f"'$float' is 'inf', '-inf' or 'nan', got {body!r}")
            return float(body)
        if tag == "$fraction":
            return self.fraction(body)
        if tag == "$ndarray":
            return self.array(doc)
        if tag == "$matrix":
            return self.matrix(body)
        if tag == "$csr":
            M = self.matrix(body)
            if not isinstance(M, Sparse):
                raise WireError("'$csr' holds the spec of a Sparse matrix")
            return M.matrix
        if tag == "$partition":
            return self.partition(body)
        if tag == "$predicate":
            return self.predicate(body, depth + 1)
        if tag == "$domain":
            try:
                return Domain.from_dict(body)
            except (TypeError, ValueError) as err:
                raise WireError(f"malformed domain: {err}") from err
        if tag == "$tuple":
            if not isinstance(body, list):
                raise WireError("'$tuple' holds a list")
            return tuple(self.value(v, depth + 1) for v in body)
        if tag == "$dict":
            if not isinstance(body, dict):
                raise WireError("'$dict' holds an object")
            return {k: self.value(v, depth + 1) for k, v in body.items()}
        if tag == "$type":
            return self.dataclass(body, doc.get("fields"), depth)
        raise WireError(f"unknown tag {tag!r}")

    def fraction(self, body: Any) -> Fraction:
        try:
            return parse_fraction(body)
        except ValueError as err:
            raise WireError(f"'$fraction' holds a string 'p/q': {err}") from err

    def array(self, doc: dict[str, Any]) -> np.ndarray:
        try:
            return decode_array(doc, tag="$ndarray", kinds=NUMERIC_OR_BOOL,
                                max_elements=self.limits.max_array_elements)
        except ValueError as err:
            raise WireError(str(err)) from err

    def matrix(self, spec: Any) -> EMatrix:
        self._check_spec(spec, 0)
        try:
            return from_json(json.dumps(spec))
        except (TypeError, ValueError) as err:  # an unknown class, a bad argument
            raise WireError(f"bad matrix spec: {err}") from err

    def _check_spec(self, node: Any, depth: int) -> None:
        """Every size in a matrix spec within the limits, before anything is built."""
        if depth > self.limits.max_depth:
            raise WireError(f"the matrix spec nests deeper than {self.limits.max_depth} levels")
        lim = self.limits.max_matrix_dim
        if isinstance(node, dict):
            if "type" in node:  # one matrix to build (before the charge: bounded)
                self._nodes += 1
                if self._nodes > self.limits.max_matrix_nodes:
                    raise WireError(f"the matrix spec holds more than "
                                    f"{self.limits.max_matrix_nodes} matrices")
            if SPEC_TAG in node:
                shape = node.get("shape")
                if not isinstance(shape, list) or not all(
                    isinstance(s, int) and not isinstance(s, bool) for s in shape
                ):
                    raise WireError("malformed array in a matrix spec")
                if math.prod(shape) > self.limits.max_array_elements:
                    raise WireError(
                        f"an array of {math.prod(shape)} elements in a matrix spec exceeds "
                        f"the limit of {self.limits.max_array_elements}"
                    )
                return
            for key, v in node.items():
                if key in ("n", "m") and isinstance(v, int) and v > lim:
                    raise WireError(f"a matrix of dimension {v} exceeds the limit of {lim}")
                if key in ("domain_shape", "shape") and isinstance(v, list):
                    dims = [d for d in v if isinstance(d, int)]
                    if any(d > lim for d in dims) or math.prod(dims) > lim:
                        raise WireError(f"a matrix over {v} cells exceeds the limit of {lim}")
                self._check_spec(v, depth + 1)
        elif isinstance(node, list):
            for v in node:
                self._check_spec(v, depth + 1)

    def partition(self, body: Any) -> Partition:
        if not isinstance(body, dict) or set(body) != {"groups", "domain_shape"}:
            raise WireError("a partition is {'groups': array, 'domain_shape': [...]}")
        groups = self.value(body["groups"], 1)
        shape = body["domain_shape"]
        if not isinstance(groups, np.ndarray) or not isinstance(shape, list):
            raise WireError("a partition's groups are an array and its shape a list")
        try:
            return Partition(groups, tuple(shape))
        except (TypeError, ValueError) as err:
            raise WireError(f"bad partition: {err}") from err

    def predicate(self, node: Any, depth: int) -> Predicate:
        if depth > self.limits.max_depth:
            raise WireError(f"the predicate nests deeper than {self.limits.max_depth} levels")
        if not isinstance(node, dict) or "node" not in node:
            raise WireError("a predicate node is an object with a 'node' kind")
        kind = node["node"]
        try:
            if kind == "compare":
                column, op = col(node["attr"]), node["op"]
                value = self.value(node["value"], depth + 1)
                ops = {
                    "==": column.__eq__, "!=": column.__ne__, "<": column.__lt__,
                    "<=": column.__le__, ">": column.__gt__, ">=": column.__ge__,
                }
                if op not in ops:
                    raise WireError(f"unknown comparison {op!r}")
                result: Predicate = ops[op](value)
                return result
            if kind == "isin":
                values = node["values"]
                if not isinstance(values, list):
                    raise WireError("'isin' values are a list")
                return col(node["attr"]).isin([self.value(v, depth + 1) for v in values])
            if kind == "between":
                low, high = (self.value(node[k], depth + 1) for k in ("low", "high"))
                return col(node["attr"]).between(low, high)
            if kind in ("and", "or"):
                parts = node["parts"]
                if not isinstance(parts, list) or not parts:
                    raise WireError(f"'{kind}' has a non-empty list of parts")
                built = [self.predicate(p, depth + 1) for p in parts]
                out = built[0]
                for p in built[1:]:
                    out = (out & p) if kind == "and" else (out | p)
                return out
            if kind == "not":
                return ~self.predicate(node["part"], depth + 1)
        except KeyError as err:
            raise WireError(f"predicate node {kind!r} lacks {err}") from err
        except TypeError as err:  # e.g. a non-str attribute name
            raise WireError(f"bad predicate: {err}") from err
        raise WireError(f"unknown predicate node {kind!r}")

    def dataclass(self, name: Any, fields: Any, depth: int) -> Any:
        cls = _CLASSES.get(name) if isinstance(name, str) else None
        if cls is None:
            raise WireError(f"unknown message type {name!r}")
        if not isinstance(fields, dict):
            raise WireError(f"{name} needs an object of 'fields'")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(fields) - known
        if unknown:
            raise WireError(f"{name} has no field(s) {sorted(unknown)}")
        values = {k: self.value(v, depth + 1) for k, v in fields.items()}
        try:
            return cls(**values)
        except TypeError as err:  # a missing required field
            raise WireError(f"bad {name}: {err}") from err


# -- documents, errors, digests ---------------------------------------------------


def dumps(value: Any) -> bytes:
    """`value` encoded as a compact JSON document (UTF-8)."""
    return json.dumps(encode(value), separators=(",", ":"), allow_nan=False).encode()


def _no_constant(name: str) -> Any:
    raise WireError(f"JSON constant {name} is not allowed; send {{'$float': ...}}")


def loads(data: bytes | str, limits: Limits | None = None) -> Any:
    """Parse and decode a document (WireError for bad JSON or bad content)."""
    try:
        doc = json.loads(data, parse_constant=_no_constant)
    except RecursionError as err:
        raise WireError("the JSON document nests too deeply") from err
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise WireError(f"malformed JSON: {err}") from err
    try:
        return decode(doc, limits)
    except RecursionError as err:
        raise WireError("the document nests too deeply") from err


def encode_error(exc: BaseException) -> dict[str, str]:
    """An error as {type, message}: the kernel's refusal kinds by name, any
    other exception as its nearest of them (a `DomainValueError` is a ValueError)."""
    for name, cls in _ERRORS.items():
        if isinstance(exc, cls):
            return {"type": name, "message": str(exc)}
    return {"type": type(exc).__name__, "message": str(exc)}


def decode_error(doc: Any) -> Exception | None:
    """The kernel exception a {type, message} stands for, or None if it is
    not one of BudgetExceeded, ValueError, TypeError."""
    if not isinstance(doc, dict):
        return None
    cls = _ERRORS.get(doc.get("type"))  # type: ignore[arg-type]
    return None if cls is None else cls(str(doc.get("message", "")))


def request_digest(document: Any) -> str:
    """A stable SHA-256 of a request's JSON structure (for idempotent retries:
    one request id names one request content)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode()).hexdigest()
