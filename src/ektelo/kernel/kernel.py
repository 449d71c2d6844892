"""The protected kernel (§4): private data, transformation graph, budget, noise.

The argument — what this code must do for the kernel to be private, and why it
does — is the proof note `proofs/kernel.md`, checked against this file's version
(tests/kernel/test_proof_notes.py fails when the file changes after it).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import numbers
import threading
import uuid
import warnings
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from ..budget import ZCDP, PureDP
from ..domain import OTHER_KEY, Domain, check_names
from ..matrix import (
    Dense,
    EMatrix,
    Hierarchy,
    HStack,
    Kronecker,
    Partition,
    Product,
    RangeQueries,
    Sparse,
    Sum,
    Total,
    VStack,
    Weighted,
    rebuild,
    to_json,
)
from ..matrix.lazy import issparse
from ..measurement import Gaussian, Laplace, Measurement
from . import dawa, marginal_select, mwem, privbayes
from .contracts import MAX_CELLS, TableEngine, group_domain
from .evaluate import evaluate
from .gaussian import gaussian_draw, gaussian_sigma_for
from .ledger import Accountant, Budget, Ledger, NodeState, check_epsilon, check_request_id
from .noise import RandomSource, laplace_scale_for
from .records import PrivacyUnit, QueryRecord, Receipt, SourceInfo
from .sensitivity import Facts, facts, group_separable, has_rules, max_abs_entry

if TYPE_CHECKING:
    import scipy.sparse as sp
else:  # imported on first use (#41)
    from ..matrix.lazy import sparse as sp

__all__ = ["Kernel", "QueryLimits", "check_size", "query_size"]


@dataclass
class _Table:
    rows: Any  # the engine's table value (opaque: contracts.TableEngine)
    domain: Domain
    engine: TableEngine
    # (group_by, max_groups) when each unit has at most max_groups groups here (K7)
    groups: tuple[tuple[str, ...], int] | None = None


@dataclass
class _Vector:
    data: np.ndarray | Callable[[], np.ndarray]  # flat, read-only, or how to compute it (K9)
    shape: tuple[int, ...]
    integral: bool  # declared at protect, kept only by integer transforms
    root_id: str
    root_shape: tuple[int, ...]
    to_root: EMatrix | None  # this vector = to_root · root vector (None: it is the root)
    attributes: tuple[str, ...] | None = None  # the table attributes the root counts over
    # (axes of the group_by attributes, max_groups): see `_Table.groups` (K7)
    groups: tuple[tuple[int, ...], int] | None = None

    @property
    def values(self) -> np.ndarray:
        if callable(self.data):
            self.data = self.data()
        return self.data

    @property
    def size(self) -> int:
        return math.prod(self.shape)


_SEALED = object()  # the source entry of a privacy-unit table's sealed root


@dataclass
class _Envelope:  # `Kernel.envelope`: its ledger, where its one charge is made, and that charge
    ledger: Ledger
    parent: int
    eps: float | None
    rho: float | None
    charged: bool = False


def trusted_matrix(M: Any, name: str = "M") -> EMatrix:
    """A kernel-owned copy of `M` that the kernel's own rules cover (proofs/kernel.md K1)."""
    if isinstance(M, EMatrix):
        try:
            Q = rebuild(M)
        except TypeError:
            return _materialised(M.sparse(), name)  # client code runs once, on public inputs
        return _ruled(Q, name)
    if isinstance(M, np.ndarray) or issparse(M):
        return _materialised(cast(Any, M), name)
    raise TypeError(f"{name} must be a matrix (EMatrix, ndarray or scipy.sparse)")


_PARTS = {VStack: "blocks", HStack: "blocks", Kronecker: "factors", Sum: "terms"}


def _ruled(Q: EMatrix, name: str) -> EMatrix:
    """Q with every sub-expression outside the rules materialised (K1)."""
    if has_rules(Q):
        return Q
    if type(Q) is Weighted:
        return Weighted(_ruled(Q.base, name), Q.weight)
    if type(Q) in _PARTS:
        return type(Q)([_ruled(p, name) for p in getattr(Q, _PARTS[type(Q)])])  # type: ignore[call-arg]
    return _materialised(Q.sparse(), name)


def _materialised(raw: Any, name: str) -> EMatrix:
    if not issparse(raw) and np.ndim(raw) != 2:
        raise ValueError(f"{name} must be 2-D, got shape {np.shape(raw)}")
    with np.errstate(all="ignore"):
        csr = sp.csr_matrix(raw, dtype=np.float64, copy=True)
    if not np.all(np.isfinite(csr.data)):
        raise ValueError(f"{name} has non-finite entries")
    return Sparse(csr)


def query_facts(Q: EMatrix, name: str = "M") -> Facts:
    """The kernel's facts about a trusted query (refusing non-finite ones)."""
    with np.errstate(all="ignore"):
        f = facts(Q)
    if not (math.isfinite(f.l1) and math.isfinite(f.l2)):
        raise ValueError(f"{name} has entries too large: its sensitivity is not finite")
    return f


@dataclass(frozen=True)
class QueryLimits:
    """The largest query the kernel evaluates, checked before the charge (#36; kernel.md K1)."""

    max_rows: int = 2**26
    max_work: int = 2**33


def query_size(Q: EMatrix) -> tuple[int, int]:
    """(rows, work): Q's output length and an upper estimate of the scalar
    operations of Q·x, from Q's structure alone (public; kernel.md K1)."""
    m, n = (int(d) for d in Q.shape)
    if isinstance(Q, Kronecker):
        dims = [max(int(f.shape[0]), int(f.shape[1])) for f in Q.factors]
        return m, m + n + sum(query_size(f)[1] * math.prod(dims[:i] + dims[i + 1:])
                              for i, f in enumerate(Q.factors))  # fmt: skip
    parts = (Q.blocks if isinstance(Q, (VStack, HStack)) else Q.terms if isinstance(Q, Sum)
             else [Q.A, Q.B] if isinstance(Q, Product) else [Q.base] if isinstance(Q, Weighted)
             else [])  # fmt: skip
    own = (int(Q.matrix.nnz) if isinstance(Q, Sparse)
           else min(m, n) * 2 ** len(Q.domain_shape) if isinstance(Q, RangeQueries)
           else m * n if isinstance(Q, Dense)
           else min(m, n) * (Q.height + 1) if isinstance(Q, Hierarchy)
           else 0)  # Identity, Ones/Total, Prefix, Suffix, Diagonal, Wavelet: O(m + n)  # fmt: skip
    return m, m + n + own + sum(query_size(p)[1] for p in parts)


def check_size(Q: EMatrix, limits: QueryLimits, name: str = "M") -> None:
    """Refuse (before any charge) a query over the kernel's `limits`."""
    rows, work = query_size(Q)
    if rows > limits.max_rows:
        raise ValueError(
            f"{name} has {rows:.3g} rows; the kernel answers at most {limits.max_rows} "
            "(nothing was spent)"
        )
    if work > limits.max_work:
        raise ValueError(
            f"{name} needs about {work:.3g} operations to evaluate; the kernel's limit is "
            f"{limits.max_work:.3g} (nothing was spent)"
        )


def trusted_partition(P: Any, size: int) -> Partition:
    """A fresh `Partition` from a copy of the client's group array."""
    if not isinstance(P, Partition):
        raise TypeError(f"P must be a Partition, got {type(P).__name__}")
    groups = np.array(P.groups, dtype=np.int64, copy=True).reshape(-1)
    if groups.size != size:
        raise ValueError(f"the partition covers {groups.size} cells; the vector has {size}")
    return Partition(groups)


def _plain_options(options: dict[str, Any]) -> dict[str, Any]:
    """Hyper-parameters passed to private operators: plain scalars only."""
    return {key: _plain(key, v) for key, v in options.items()}


def _plain(key: str, v: Any) -> Any:
    if v is None or type(v) in (bool, int, float, str):
        return v
    for kind, plain in ((np.bool_, bool), (numbers.Integral, int), (numbers.Real, float)):
        if isinstance(v, kind):
            return cast(Callable[[Any], Any], plain)(v)
    raise TypeError(f"option {key}= must be a plain number, bool or str")


_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")

# Non-finite values from private arithmetic become these (deterministically).
_HUGE = math.ldexp(1.0, 1000)


def _private(method: _F) -> _F:
    """Run a kernel request under the lock and the fixed floating-point regime (the rule)."""

    @functools.wraps(method)
    def run(self: Kernel, *args: Any, **kwargs: Any) -> Any:
        with self._lock, np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return method(self, *args, **kwargs)

    return cast(_F, run)


def _finite(values: np.ndarray) -> np.ndarray:
    """NaN → 0 and ±∞ → ±2¹⁰⁰⁰: a deterministic repair of private arithmetic."""
    repaired: np.ndarray = np.nan_to_num(values, nan=0.0, posinf=_HUGE, neginf=-_HUGE)
    out: np.ndarray = np.clip(repaired, -_HUGE, _HUGE)
    return out


class Kernel:
    """Holds one protected input, its derived sources, the budget and the noise."""

    def __init__(
        self, budget: PureDP | ZCDP, *, seed: int | None = None, ledger: Accountant | None = None,
        limits: QueryLimits | None = None, history: int | None = None,
        key_delta: float | None = None,
    ):
        """`ledger`: the accountant to charge (default: a fresh `Ledger` of `budget`);
        `limits`: `QueryLimits`; `history`: the last this many query records kept in
        memory (None: all); `key_delta`: the δ of `select_keys` (zCDP only; kernel.md)."""
        if history is not None and (isinstance(history, bool) or not isinstance(history, int)
                                    or history < 1):  # fmt: skip
            raise ValueError(f"history must be a positive int or None, got {history!r}")
        if limits is not None and not isinstance(limits, QueryLimits):
            raise TypeError(f"limits must be a QueryLimits, got {type(limits).__name__}")
        self.limits = QueryLimits() if limits is None else limits
        if not isinstance(budget, (PureDP, ZCDP)):
            raise TypeError(f"budget must be PureDP(...) or ZCDP(...), got {budget!r}")
        if ledger is not None and ledger.unit != budget.unit:
            raise ValueError(f"the ledger's unit is {ledger.unit}; the budget's is {budget.unit}")
        self._ledger: Accountant = Ledger(budget) if ledger is None else ledger
        if key_delta is not None:
            if not isinstance(budget, ZCDP):
                raise ValueError("key_delta= needs a zCDP budget: releasing unknown keys is "
                                 "(ε, δ)-DP, never pure ε-DP")
            if isinstance(key_delta, bool) or not isinstance(key_delta, numbers.Real) or not (
                    0 < float(key_delta) < 1):  # fmt: skip
                raise ValueError(f"key_delta must be a number in (0, 1), got {key_delta!r}")
        self._key_delta = None if key_delta is None else float(key_delta)
        self._random = RandomSource(seed)
        self._sources: dict[int, _Table | _Vector | object] = {}
        self._history: deque[QueryRecord] = deque(maxlen=history)
        self._records = 0  # query records ever written (their indices)
        self._lock = threading.RLock()
        self._units: PrivacyUnit | None = None  # the neighbouring relation, when per unit
        self._marginals = marginal_select.MarginalCache()  # select_marginal's counts (#25)
        # the variables under an envelope → (the envelope, their id in its ledger)
        self._scopes: dict[int, tuple[_Envelope, int]] = {}
        self.id = uuid.uuid4().hex

    # -- public state ------------------------------------------------------------
    @property
    def seed(self) -> int | None:
        return self._random.seed

    @property
    def research_mode(self) -> bool:
        return self._random.research_mode

    @property
    def budget(self) -> Budget:
        report = replace(self._ledger.budget(), key_delta=self._key_delta)
        return report if self._units is None else replace(report, privacy_unit=str(self._units))

    @property
    def history(self) -> tuple[QueryRecord, ...]:
        return tuple(self._history)

    def ledger(self) -> tuple[NodeState, ...]:
        """A full snapshot of the ledger (graph, stabilities, exact B(sv))."""
        return self._ledger.snapshot()

    def receipted(self, call: Callable[[], _T]) -> tuple[_T, Receipt]:
        """`call()` (one request to this kernel) and its `Receipt`: the nodes it created and
        the records it wrote (two with its envelope's charge); atomic, O(1) (nothing copied)."""
        with self._lock:
            nodes, records = len(self._ledger), self._records
            response = call()
            created = tuple(range(nodes, len(self._ledger)))
            new = self._records - records  # what the request wrote (an envelope's first)
            kept = min(new, len(self._history))  # (a deque: its ends are O(1))
            written = tuple(self._history[-i] for i in range(kept, 0, -1))
        return response, Receipt(created, written[0] if written else None, written)

    def __repr__(self) -> str:
        mode = f"research seed={self.seed}" if self.research_mode else "secure"
        return f"Kernel({len(self._ledger)} sources, {self.budget}, {mode})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("a kernel cannot be pickled or copied")

    def __copy__(self, *memo: Any) -> Kernel:
        raise TypeError("a kernel cannot be copied")

    __deepcopy__ = __copy__

    # -- sources -------------------------------------------------------------------
    @_private
    def add_engine_table(
        self, engine: TableEngine, table: Any, domain: Domain, *,
        units: PrivacyUnit | None = None, root: int | None = None,
    ) -> int:  # fmt: skip
        """A root table held by a table engine (protect); with `units`, the
        `bound_contributions` child of the sealed table of units (kernel.md K6, K7)."""
        if units is None:
            if root is not None:
                raise ValueError("root= is the sealed table of units: pass units= too")
            node = self._ledger.add_root("table", "protect")
            self._sources[node] = _Table(table, domain, engine)
            return node
        if not isinstance(units, PrivacyUnit):
            raise TypeError(f"units must be a PrivacyUnit, got {type(units).__name__}")
        groups = None
        if units.max_groups is not None:
            check_names(domain, list(units.group_by), "group_by")
            groups = (units.group_by, units.max_groups)
        if root is None:
            root = self._seal(units.column)
        elif root != 0 or self._units is not None or self._sources.get(0) is not _SEALED:
            raise ValueError("root= must be the sealed table of units of this kernel")
        self._units = units
        return self._child(root, "table", units.stability, "bound_contributions", repr(units),
                           _Table(table, domain, engine, groups))

    def _seal(self, column: str) -> int:
        root = self._ledger.add_root("table", f"protect(privacy unit {column!r})")
        self._sources[root] = _SEALED
        return root

    @_private
    def seal_units(self, column: str, rows_per_unit: np.ndarray) -> tuple[int, int]:
        """The sealed table of units (the root) and its 1-stable vector of rows
        per unit (`engines.rows_per_unit`; kernel.md K6)."""
        root = self._seal(column)
        values = np.asarray(rows_per_unit, dtype=np.float64).reshape(-1)
        shape = (int(values.size),)
        vec = _Vector(_readonly(values), shape, True, f"{self.id}/units", shape, None)
        return root, self._child(root, "vector", 1, "rows_per_unit", column, vec)

    @_private
    def add_vector(self, values: np.ndarray, *, integral: bool) -> int:
        """A root vector; `integral` is the data holder's declaration (protect)."""
        node = self._ledger.add_root("vector", "protect")
        shape = tuple(int(s) for s in values.shape)
        flat = _readonly(values.reshape(-1))
        vec = _Vector(flat, shape, bool(integral), f"{self.id}/v{node}", shape, None)
        self._sources[node] = vec
        return node

    def _resolve(self, source: Any, kind: str | None) -> int:
        """The id of an existing source of `kind` (None: table or vector), from public facts."""
        if isinstance(source, bool) or not isinstance(source, numbers.Integral):
            raise TypeError(f"a source variable is named by an int, got {type(source).__name__}")
        node = int(source)
        if not 0 <= node < len(self._ledger):
            raise ValueError(f"unknown source variable {source!r}")
        if self._sources.get(node) is _SEALED:
            raise ValueError(
                f"source variable {node} is the table of privacy units before contributions "
                "are bounded: it is sealed (query the table protect returned)"
            )
        actual = self._ledger.kind(node)
        if actual != kind and (kind is not None or actual == "partition"):
            wanted = kind or "table or vector"
            raise TypeError(f"source variable {node} is a {actual}, not a {wanted}")
        return node

    def _table_root(self, node: int, names: tuple[str, ...]) -> str:
        """The root id of the vectorization of table `node` over `names`."""
        return f"{self.id}/t{node}/" + "|".join(names)

    def _table(self, source: Any) -> tuple[int, _Table]:
        node = self._resolve(source, "table")
        return node, cast(_Table, self._sources[node])  # _resolve checked the kind

    def _vector(self, source: Any, *, lazy: bool = False) -> tuple[int, _Vector]:
        """The vector `source`, its values computed now unless `lazy` (kernel.md K9)."""
        node = self._resolve(source, "vector")
        vec = cast(_Vector, self._sources[node])  # _resolve checked the kind
        if not lazy:
            vec.values  # noqa: B018 - computed before anything is charged
        return node, vec

    def _child(
        self, parent: int, kind: Any, stability: Any, op: str, spec: str = "",
        item: Any = None,
    ) -> int:  # fmt: skip
        """A new variable (`item`: its table or vector) in the ledger — and in
        its envelope's, if any. A derived `_Table` keeps `groups` only where
        its rows are a subset of a group-bounded table's (K7)."""
        node = self._ledger.add_child(parent, kind, stability, op, spec)
        scope = self._scopes.get(parent)
        if scope is not None:
            env, local = scope
            self._scopes[node] = (env, env.ledger.add_child(local, kind, stability, op, spec))
        if item is not None:
            self._sources[node] = item
        return node

    def _derived_vector(
        self, parent: int, op: str, stability: Any, values: Callable[[], np.ndarray],
        base: _Vector, mapping: EMatrix, integral: bool, spec: str = "",
    ) -> int:  # fmt: skip
        """A vector = mapping · base (computed lazily: `_Vector.data`),
        recorded with its map back to the root."""
        to_root = mapping if base.to_root is None else Product(mapping, base.to_root)
        vec = _Vector(
            lambda: _readonly(_finite(values().reshape(-1))), (int(mapping.shape[0]),),
            integral, base.root_id, base.root_shape, to_root, base.attributes,
        )  # fmt: skip
        return self._child(parent, "vector", stability, op, spec, vec)

    @_private
    def describe(self, source: Any) -> SourceInfo:
        """The public description of a source variable."""
        node = self._resolve(source, None)
        t = self._sources[node]
        if isinstance(t, _Table):
            root, shape = self._table_root(node, tuple(t.domain.names)), t.domain.shape
            return SourceInfo(node, "table", t.domain, shape, True, root, shape, self.seed)
        v = cast(_Vector, t)  # _resolve refused the sealed root
        return SourceInfo(node, "vector", None, v.shape, v.integral, v.root_id, v.root_shape,
                          self.seed)

    # -- Private: table transformations (§5.1) -------------------------------------
    @_private
    def where(self, source: int, predicate: Any) -> int:
        node, t = self._table(source)
        # the engines check the predicate against the public domain first
        rows = t.engine.where(t.rows, predicate, t.domain)
        return self._child(node, "table", 1, "where", repr(predicate),
                           _Table(rows, t.domain, t.engine, t.groups))

    @_private
    def select(self, source: int, attrs: Any) -> int:
        node, t = self._table(source)
        names = check_names(t.domain, attrs)
        cols = [t.domain.index(n) for n in names]
        rows = t.engine.select(t.rows, cols)
        kept = t.groups if t.groups and set(t.groups[0]) <= set(names) else None
        return self._child(node, "table", 1, "select", repr(names),
                           _Table(rows, t.domain.project(names), t.engine, kept))

    @_private
    def group_by(
        self, source: int, attrs: Any, *, count: str | None = None, count_cap: int = 1
    ) -> int:
        node, t = self._table(source)
        names = check_names(t.domain, attrs)
        if count is not None and (type(count) is not str or count in names or not count):
            raise ValueError(f"count must be a new attribute name, got {count!r}")
        if isinstance(count_cap, bool) or not isinstance(count_cap, int) or count_cap < 1:
            raise ValueError(f"count_cap must be a positive int, got {count_cap!r}")
        cols = [t.domain.index(n) for n in names]
        rows = t.engine.group_by(t.rows, cols, count, count_cap)
        domain = group_domain(t.domain, cols, count, count_cap)
        return self._child(node, "table", 2, "group_by", repr((names, count, count_cap)),
                           _Table(rows, domain, t.engine))

    @_private
    def split_table(self, source: int, attr: Any) -> list[int]:
        node, t = self._table(source)
        (name,) = check_names(t.domain, [attr], "attr")
        parts = t.engine.split(t.rows, t.domain.index(name), t.domain[name].size)
        part = self._child(node, "partition", 1, f"split_by_partition({name})", name)
        return [self._child(part, "table", 1, "split_child", str(i), _Table(c, t.domain, t.engine))
                for i, c in enumerate(parts)]

    @_private
    def recode(self, source: int, column: Any, keys: Any) -> int:
        """Open column `column` made a coded attribute: code i for key keys[i], `OTHER_KEY`
        for any other key; 1-stable (kernel.md K10)."""
        node, t = self._table(source)
        _check_open(t.domain, column)
        keys = _checked_keys(keys)
        domain = t.domain.with_keys(column, keys)
        rows = t.engine.recode(t.rows, column, keys)
        return self._child(node, "table", 1, "recode", repr((column, keys)),
                           _Table(rows, domain, t.engine, t.groups))

    @_private
    def vectorize(self, source: int, attrs: Any = None) -> int:
        node, t = self._table(source)
        names = t.domain.names if attrs is None else check_names(t.domain, attrs)
        shape = t.domain.project(names).shape
        if math.prod(shape) > MAX_CELLS:
            raise ValueError(f"vectorize over {shape} has too many cells; select fewer")
        cols = [t.domain.index(n) for n in names]
        engine, rows = t.engine, t.rows

        def counts() -> np.ndarray:  # at the first charged request on it (`_Vector.data`)
            return _readonly(engine.vectorize(rows, cols, shape))

        root_id = self._table_root(node, tuple(names))
        groups = None
        if t.groups is not None and set(t.groups[0]) <= set(names):
            groups = (tuple(names.index(n) for n in t.groups[0]), t.groups[1])
        vec = _Vector(counts, shape, True, root_id, shape, None, tuple(names), groups)
        return self._child(node, "vector", 1, "vectorize", repr(tuple(names)), vec)

    # -- Private: vector transformations (§5.1) ------------------------------------
    @_private
    def reduce_by_partition(self, source: int, P: Any) -> int:
        node, v = self._vector(source, lazy=True)
        part = trusted_partition(P, v.size)
        groups = np.asarray(part.groups, dtype=np.int64).reshape(-1)  # a copy the kernel made
        size = int(groups.max()) + 1
        return self._derived_vector(
            node, "reduce_by_partition", 1,
            lambda: np.bincount(groups, weights=v.values, minlength=size),
            v, part.reduce_matrix(), v.integral, _array_digest(part.groups),
        )  # fmt: skip

    @_private
    def split_vector(self, source: int, P: Any) -> list[int]:
        node, v = self._vector(source, lazy=True)
        part = trusted_partition(P, v.size)
        pnode = self._child(node, "partition", 1, "split_by_partition", _array_digest(part.groups))
        order = np.argsort(part.groups, kind="stable")

        def child(i: int, cells: np.ndarray) -> int:  # the cells of group i, read lazily
            select = sp.csr_matrix((np.ones(cells.size), (np.arange(cells.size), cells)),
                                   shape=(cells.size, v.size))  # fmt: skip
            return self._derived_vector(pnode, "split_child", 1, lambda: v.values[cells], v,
                                        Sparse(select), v.integral, str(i))  # fmt: skip

        return [child(i, c) for i, c in enumerate(np.split(order, np.cumsum(part.sizes)[:-1]))]

    @_private
    def transform(self, source: int, M: Any) -> int:
        node, v = self._vector(source, lazy=True)
        Q = _checked_matrix(M, v, self.limits)
        f = query_facts(Q)
        integral = v.integral and f.integral
        return self._derived_vector(
            node, "transform", Fraction(f.l1), lambda: _answer(Q, v.values), v, Q, integral,
            _matrix_digest(Q),
        )  # fmt: skip

    # -- Private→Public: one release step ----------------------------------------------
    def _release(
        self, node: int, operation: str, compute: Callable[[], dict[str, Any]], *,
        eps: float | None = None, rho: float | None = None, request_id: Any = None,
        content: dict[str, Any] | None = None, scale: Fraction = Fraction(1), **detail: Any,
    ) -> dict[str, Any]:  # fmt: skip
        """THE release step of every Private→Public request, once its arguments are
        validated: charge (or replay) → `compute()` → record → release (kernel.md K5).
        `content`: the request's public content for its digest; `scale`: 1/g (K7)."""
        amount = self._ledger.amount(eps=eps, rho=rho) * scale
        ledger, local = self._ledger, node
        scope = self._scopes.get(node)
        if scope is not None:
            env, local = scope
            ledger = env.ledger
            if not env.charged:  # its first request: the envelope's one charge, first
                check_request_id(request_id)  # every refusal of the request comes before it:
                ledger.plan(local, amount)  # a bad id, or beyond the envelope: nothing charged
                self._release(env.parent, "envelope", dict, eps=env.eps, rho=env.rho,
                              content={"nonce": uuid.uuid4().hex})  # never a replay
                env.charged = True
        budget = {"eps": None if eps is None else str(Fraction(eps)),
                  "rho": None if rho is None else str(Fraction(rho))}  # fmt: skip
        res = ledger.reserve(
            local, amount, operation=operation, request_id=request_id,
            content={**budget, **(content or {})},
        )  # fmt: skip
        enveloped = ledger is not self._ledger
        answer = dict(res.replay) if res.replay is not None else compute()
        self._records += 1
        self._history.append(QueryRecord(
            index=self._records - 1, operation=operation, node=node, eps=eps,
            charged_at_root=0.0 if enveloped else float(res.charged),
            increments=() if enveloped else tuple((n, float(inc)) for n, inc in res.steps),
            rho=rho,
            request_id=None if request_id is None else res.request_id,
            replayed=res.replay is not None, noise_scale=answer.get("scale"), **detail,
        ))  # fmt: skip
        if res.replay is None:  # a store failure here raises; the charge stands (ledger.md)
            ledger.release(res, answer)
        return answer

    @_private
    def envelope(self, source: int, *, eps: Any = None, rho: Any = None) -> int:
        """One charge for many requests (issue #41): a 1-stable copy of `source` whose
        requests are charged to its own ledger of ε (or ρ), itself charged at its first
        request, never replayed (kernel.md K8)."""
        node = self._resolve(source, None)
        cap = self._ledger.amount(eps=eps, rho=rho)  # validates; refuses ρ on a pure-ε kernel
        kind = self._ledger.kind(node)
        child = self._child(node, kind, 1, "envelope", str(cap), self._sources[node])  # same data
        ledger = Ledger.envelope(self._ledger.unit, cap, kind)
        self._scopes[child] = (_Envelope(ledger, node, eps, rho), 0)
        return child

    @_private
    def laplace(self, source: int, M: Any, *, eps: Any, request_id: Any = None) -> Measurement:
        """Vector Laplace (§5.2): Q·x + Laplace(sens(Q)/ε), sens computed here."""
        node, v = self._vector(source)
        eps = check_epsilon(eps)
        return self._measure(node, v, M, "laplace", eps, request_id)

    @_private
    def gaussian(self, source: int, M: Any, *, rho: Any, request_id: Any = None) -> Measurement:
        """Gaussian mechanism (zCDP): Q·x + N_Z(0, σ²) with σ ≥ Δ₂(Q)/√(2ρ),
        the exact discrete Gaussian (gaussian.py); Δ₂ computed here."""
        node, v = self._vector(source)
        self._ledger.amount(rho=rho)  # validates ρ; refuses on a pure-ε kernel
        return self._measure(node, v, M, "gaussian", float(rho), request_id)

    def _measure(
        self, node: int, v: _Vector, M: Any, mechanism: str, amount: float, request_id: Any
    ) -> Measurement:
        """The vector mechanisms' checks after their budget's: the query, its sensitivity
        (L1 for "laplace" at ε = amount, L2 for "gaussian" at ρ = amount), the noise scale."""
        laplace = mechanism == "laplace"
        Q = _checked_matrix(M, v, self.limits)
        f = query_facts(Q)
        sens = f.l1 if laplace else f.l2
        if sens == 0:
            raise ValueError("M is all zero: nothing to measure")
        kw = dict[str, Any](integral=v.integral and f.integral, max_column_nnz=f.max_column_nnz)
        (laplace_scale_for if laplace else gaussian_sigma_for)(sens, amount, **kw)  # validates
        groups = 1  # a unit's groups move disjoint answers: L2 √g·r, not g·r (#37)
        if not laplace and v.groups is not None and group_separable(Q, v.shape, v.groups[0]):
            groups = v.groups[1]
        on_root = Q if v.to_root is None else Product(Q, v.to_root)
        return self._noisy(
            node, mechanism, amount, request_id, lambda: _answer(Q, v.values), sens, kw, Q,
            on_root, (v.root_id, v.root_shape, v.attributes), {"query": _matrix_digest(Q)},
            repr(Q), groups,
        )  # fmt: skip

    @_private
    def noisy_count(self, source: int, *, eps: Any, request_id: Any = None) -> Measurement:
        """NoisyCount (§5.2): |T| + Laplace(1/ε), as a Total query on the
        table's full vectorization (the root of `vectorize()` with no attrs)."""
        node, t = self._table(source)
        eps = check_epsilon(eps)
        kw = dict[str, Any](integral=True, max_column_nnz=1)
        laplace_scale_for(1.0, eps, **kw)  # validates
        count = float(t.engine.count(t.rows))  # engine work before the charge (contracts C2)
        Q, names = Total(t.domain.size), tuple(t.domain.names)
        root = (self._table_root(node, names), t.domain.shape, names)
        return self._noisy(node, "noisy_count", eps, request_id, lambda: np.array([count]), 1.0,
                           kw, Q, Q, root, None, "Total")  # fmt: skip

    def _noisy(
        self, node: int, mechanism: str, amount: float, request_id: Any,
        exact: Callable[[], np.ndarray], sens: float, kw: dict[str, Any], Q: EMatrix,
        on_root: EMatrix, root: tuple[str, tuple[int, ...], tuple[str, ...] | None],
        content: dict[str, Any] | None, query: str, groups: int = 1,
    ) -> Measurement:  # fmt: skip
        """Q·x + noise (`exact()` is Q·x), released, as a public Measurement."""
        laplace = mechanism != "gaussian"

        def draw() -> dict[str, Any]:  # after the charge: nothing raises on the data
            if laplace:
                d = self._random.laplace(exact(), sensitivity=sens, epsilon=amount, **kw)
                return {"answers": d.values, "scale": d.scale, "grid": d.grid}
            g = gaussian_draw(self._random, exact(), sensitivity=sens, rho=amount, **kw)
            return {"answers": g.values, "scale": g.sigma, "grid": g.grid}

        out = self._release(
            node, mechanism, draw, **{"eps" if laplace else "rho": amount},
            request_id=request_id, content=content, query=query, sensitivity=sens,
            scale=Fraction(1, groups),
        )  # fmt: skip
        return Measurement(
            answers=out["answers"], query=Q, query_on_root=on_root,
            noise=(Laplace if laplace else Gaussian)(out["scale"], out["grid"]),
            epsilon=amount if laplace else 0.0, root_id=root[0], root_shape=root[1],
            seed=self.seed, attributes=root[2], rho=None if laplace else amount,
        )  # fmt: skip

    @_private
    def select_keys(
        self, source: int, column: Any, *, rho: Any, request_id: Any = None
    ) -> tuple[str, ...]:
        """Partition selection (issue #39): the keys of open column `column` whose noisy
        count reaches τ = c + σ·√(2 ln(c/δₛ)), sorted; counts never released (kernel.md K10)."""
        node, t = self._table(source)
        _check_open(t.domain, column)
        if self._key_delta is None:
            raise ValueError("releasing an open column's keys needs a kernel with key_delta= "
                             "(a zCDP budget with δ: protect(..., epsilon=, delta=))")
        amount = self._ledger.amount(rho=rho)  # validates ρ; refuses on a pure-ε kernel
        c = self._ledger.stability_to_root(node)
        total = Fraction(self._ledger.budget().total)
        share = float(Fraction(self._key_delta) * c * c * amount / total)
        if not 0 < share < 1:
            raise ValueError(f"the keys' δ share {share!r} is outside (0, 1)")
        gaussian_sigma_for(1.0, float(rho), integral=True, max_column_nnz=1)  # validates
        labels, counts = t.engine.key_counts(t.rows, column)  # engine work before the charge
        labels, counts = [str(k) for k in labels], np.asarray(counts, np.float64).reshape(-1)
        if len(labels) != counts.size:  # (the engine's contract; public sizes only)
            raise ValueError("the engine returned keys and counts of different lengths")
        # one order on every engine; the reserved `OTHER_KEY` is never a key (a public rule)
        order = sorted((i for i in range(len(labels)) if labels[i] != OTHER_KEY),
                       key=labels.__getitem__)  # fmt: skip
        labels, counts = [labels[i] for i in order], counts[np.asarray(order, dtype=np.int64)]

        def draw() -> dict[str, Any]:  # after the charge: nothing raises on the data
            g = gaussian_draw(self._random, counts, sensitivity=1.0, rho=float(rho),
                              integral=True)
            tau = float(c) + g.sigma * math.sqrt(2.0 * math.log(float(c) / share))
            kept = np.flatnonzero(g.values >= tau)
            if kept.size > MAX_KEYS:  # (post-processing) the largest noisy counts, in order
                kept = np.sort(kept[np.argsort(-g.values[kept], kind="stable")[:MAX_KEYS]])
            return {"keys": [labels[i] for i in kept], "scale": g.sigma,
                    "threshold": tau}

        out = self._release(
            node, "select_keys", draw, rho=float(rho), request_id=request_id,
            content={"column": str(column)}, query=f"keys of {column!r}", sensitivity=1.0,
        )  # fmt: skip
        return tuple(str(k) for k in out["keys"])

    def _counts(self, v: _Vector, operator: str) -> np.ndarray:
        """The vector as counts, refused unless declared integral (kernel.md K2)."""
        if not v.integral:
            raise ValueError(
                f"{operator} needs a vector of counts; this vector is not declared integral "
                "(protect a float array with integral=True, or derive it by integer transforms)"
            )
        limit = math.ldexp(1.0, 52)
        counts: np.ndarray = np.clip(np.rint(v.values), -limit, limit)
        return counts.reshape(v.shape)

    @_private
    def dawa_partition(
        self, source: int, *, eps: Any, request_id: Any = None, **options: Any
    ) -> Partition:
        """DAWA partition selection (Li et al. 2014), ε-DP on this vector."""
        node, v = self._vector(source)
        eps = check_epsilon(eps)
        opts = dawa.check_options(v.shape, eps, **_plain_options(options))
        x = self._counts(v, "DAWA partition selection")
        out = self._release(
            node, "dawa_partition",
            lambda: {"groups": dawa.dawa_partition(x, eps, self._random, **opts).groups},
            eps=eps, request_id=request_id, content={"options": repr(opts)},
        )  # fmt: skip
        return Partition(np.array(out["groups"], dtype=np.int64, copy=True), v.shape)

    @_private
    def worst_approx(
        self, source: int, workload: Any, x_hat: Any, *, eps: Any, request_id: Any = None
    ) -> int:
        """MWEM's worst-approximated query (exponential mechanism, mwem.py S1–S3), ε-DP."""
        node, v = self._vector(source)
        eps = check_epsilon(eps)
        W, xh = _checked_matrix(workload, v, self.limits, "workload"), _estimate(x_hat, v)
        if W.shape[0] >= 2**23:  # the exponential mechanism's exact weights (noise.py E2)
            raise ValueError(f"the workload has {W.shape[0]} queries; must be < 2**23")
        if not (query_facts(W, "workload").integral and v.integral):
            raise ValueError(
                "worst_approx needs an integer workload on a vector of counts "
                "(its scores are computed exactly)"
            )
        delta = max_abs_entry(W) if has_rules(W) else 0.0
        if delta == 0:
            raise ValueError("the workload is all zero: nothing to select")
        if mwem.cell_clamp(v.values.size, delta) < 1:
            raise ValueError(
                f"the workload's entries (up to {delta:g}) times {v.values.size} cells are too "
                "large for exact scores (must be at most 2^52)"
            )
        out = self._release(
            node, "worst_approx",
            lambda: {"index": int(mwem.worst_approx(v.values, W, xh, eps, self._random,
                                                    delta=delta))},
            eps=eps, request_id=request_id,
            content={"workload": _matrix_digest(W), "x_hat": _array_digest(xh)},
        )  # fmt: skip
        return int(out["index"])

    @_private
    def privbayes_select(
        self, source: int, *, eps: Any, request_id: Any = None, **options: Any
    ) -> list[tuple[int, ...]]:
        """PrivBayes network selection (Zhang et al. 2014): attribute-index cliques."""
        node, t = self._table(source)
        eps = check_epsilon(eps)
        opts = privbayes.check_options(**_plain_options(options))
        shape = t.domain.shape
        if math.prod(shape) >= 2**62:
            raise ValueError("the attribute domain is too large for int64 cell codes")
        if len(shape) > 1 and eps / (len(shape) - 1) <= 2.0**-32:  # noise.py E4, per choice
            raise ValueError(f"eps={eps!r} is too small for {len(shape) - 1} network choices")
        # the engine's GROUP BYs and every score GreedyBayes may need, before the charge
        scored = privbayes.engine_scores(t.engine, t.rows, shape, opts["degree"])
        out = self._release(
            node, "privbayes_select",
            lambda: {"cliques": [[int(i) for i in c] for c in
                                 privbayes.greedy(scored, len(shape), eps, self._random, **opts)]},
            eps=eps, request_id=request_id, content={"options": repr(opts)},
        )  # fmt: skip
        return [tuple(int(i) for i in c) for c in out["cliques"]]

    @_private
    def select_marginal(
        self, source: int, candidates: Any, estimates: Any, *, eps: Any = None,
        rho: Any = None, weights: Any = None, penalties: Any = None, request_id: Any = None,
        groups: Any = None,
    ) -> tuple[str, ...]:  # fmt: skip
        """MST's and AIM's choice of one marginal (marginal_select.py M1–M4): ε-DP, or
        ε²/8-zCDP on a zCDP ledger (bounded range)."""
        node, t = self._table(source)
        request = marginal_select.check_request(
            t.domain, candidates, estimates, weights, penalties, groups
        )
        em_eps, charge = marginal_select.em_budget(self._ledger.unit, eps=eps, rho=rho)
        counts = self._marginals.each(node, t.engine, t.rows, request.columns, request.shapes)
        q = marginal_select.scores(counts, request)  # GROUP BYs (held per node), scores: pre-charge
        content = {
            "candidates": repr(request.candidates),
            "estimates": [_array_digest(e) for e in request.estimates],
            "weights": _array_digest(request.weights),
            "penalties": _array_digest(request.penalties),
        }
        if request.groups is not None:
            content["groups"] = [_array_digest(g) for g in request.groups]
        out = self._release(
            node, "select_marginal",
            lambda: {"index": int(marginal_select.select_marginal(q, request, em_eps,
                                                                  self._random))},
            sensitivity=request.sensitivity, request_id=request_id, content=content,
            **cast(dict[str, Any], charge),
        )  # fmt: skip
        return request.candidates[int(out["index"])]


#: the most keys `recode` takes (a public bound on the recoded attribute's size)
MAX_KEYS = 1 << 20


def _check_open(domain: Domain, column: Any) -> None:
    if column not in domain.open:
        raise ValueError(f"{column!r} is not an open column of this table "
                         f"(open: {list(domain.open)})")


def _checked_keys(keys: Any) -> tuple[str, ...]:
    """Public keys for `recode`: a list of distinct str, none the reserved
    `OTHER_KEY`, at most `MAX_KEYS` (what `select_keys` releases always is)."""
    if isinstance(keys, str) or not isinstance(keys, (list, tuple)):
        raise TypeError(f"keys must be a list of str, got {type(keys).__name__}")
    if len(keys) > MAX_KEYS:
        raise ValueError(f"at most {MAX_KEYS} keys, got {len(keys)}")
    if not all(type(k) is str for k in keys):
        raise TypeError("keys must be str (an open column's keys are text)")
    if len(set(keys)) != len(keys):
        raise ValueError("keys must be distinct")
    if OTHER_KEY in keys:
        raise ValueError(f"{OTHER_KEY!r} is the code of every other key; it cannot be a key")
    return tuple(keys)


def _array_digest(a: Any) -> str:
    """SHA-256 of an array's dtype, shape and bytes (a request's content)."""
    arr = np.ascontiguousarray(a)
    head = json.dumps([arr.dtype.str, list(arr.shape)]).encode()
    return hashlib.sha256(head + arr.tobytes()).hexdigest()


def _matrix_digest(Q: EMatrix) -> str:
    """SHA-256 of a trusted matrix's spec (library classes only, see `trusted_matrix`)."""
    return hashlib.sha256(to_json(Q).encode()).hexdigest()


def _checked_matrix(M: Any, v: _Vector, limits: QueryLimits, name: str = "M") -> EMatrix:
    Q = trusted_matrix(M, name)
    if Q.shape[1] != v.size:
        raise ValueError(f"{name} has {Q.shape[1]} columns; the vector has {v.size} cells")
    check_size(Q, limits, name)  # output and work from the structure, before any charge
    return Q


def _estimate(x_hat: Any, v: _Vector) -> np.ndarray:
    xh = np.array(x_hat, dtype=np.float64, copy=True).reshape(-1)
    if xh.size != v.size or not np.all(np.isfinite(xh)):
        raise ValueError(f"x_hat must be {v.size} finite numbers")
    return xh


def _answer(Q: EMatrix, values: np.ndarray) -> np.ndarray:
    """Q·x by the kernel's own evaluator (evaluate.py), never the class's methods."""
    out: np.ndarray = evaluate(Q, values.reshape(-1, 1))[:, 0]
    return out


def _readonly(a: np.ndarray) -> np.ndarray:
    out = np.array(a, copy=True)
    out.setflags(write=False)
    return out
