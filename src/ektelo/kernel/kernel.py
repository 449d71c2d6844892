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
    # (group_by, max_groups) when every unit has at most max_groups groups of
    # group_by in these rows, each of at most the unit's max_rows rows
    groups: tuple[tuple[str, ...], int] | None = None


@dataclass
class _Vector:
    # flat float64, read-only — or, for a vector a free operation derived,
    # how to compute it: run by `values` at the first Private→Public request
    # that reads it, before its charge (issue #36: free requests do no work
    # on the data, whatever the engine's planner would skip)
    data: np.ndarray | Callable[[], np.ndarray]
    shape: tuple[int, ...]
    integral: bool  # declared at protect, kept only by integer transforms
    root_id: str
    root_shape: tuple[int, ...]
    to_root: EMatrix | None  # this vector = to_root · root vector (None: it is the root)
    attributes: tuple[str, ...] | None = None  # the table attributes the root counts over
    # (axes of the group_by attributes, max_groups): the vectorization of a
    # table with `_Table.groups` over attributes that include group_by
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
class _Envelope:
    """One envelope (`Kernel.envelope`): the ledger its requests are charged
    to, the variable its own charge is made at, and that charge — made at
    its first request (`_release`), once."""

    ledger: Ledger
    parent: int
    eps: float | None
    rho: float | None
    charged: bool = False


def trusted_matrix(M: Any, name: str = "M") -> EMatrix:
    """A kernel-owned copy of `M` that the kernel's own rules cover.

    Library expressions are rebuilt from their specs; the parts the rules of
    `sensitivity.py` cover stay implicit, and each part they do not (a
    `Product`, a transposed `Hierarchy`) is materialised once into a CSR copy
    in place — so a Kronecker of products stays a Kronecker of small sparse
    factors. A client subclass or an array is materialised whole. Every copy
    is used for both the sensitivity and the answers, so it cannot lie.
    """
    if isinstance(M, EMatrix):
        try:
            Q = rebuild(M)
        except TypeError:
            return _materialised(M.sparse(), name)  # client code runs once, on public inputs
        return _ruled(Q, name)
    if isinstance(M, np.ndarray) or issparse(M):
        return _materialised(cast(Any, M), name)
    raise TypeError(f"{name} must be a matrix (EMatrix, ndarray or scipy.sparse)")


def _ruled(Q: EMatrix, name: str) -> EMatrix:
    """Q with every sub-expression outside the rules materialised (see above)."""
    if has_rules(Q):
        return Q
    if isinstance(Q, Weighted) and type(Q) is Weighted:
        return Weighted(_ruled(Q.base, name), Q.weight)
    if isinstance(Q, (VStack, HStack)) and type(Q) in (VStack, HStack):
        return type(Q)([_ruled(b, name) for b in Q.blocks])
    if isinstance(Q, Kronecker) and type(Q) is Kronecker:
        return Kronecker([_ruled(f, name) for f in Q.factors])
    if isinstance(Q, Sum) and type(Q) is Sum:
        return Sum([_ruled(t, name) for t in Q.terms])
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
    """The largest query the kernel evaluates (issue #36): `max_rows` answers
    and `max_work` scalar operations for Q·x, both estimated by `query_size`
    from the matrix's structure alone (public), checked before the charge —
    so a query that would exhaust memory or time after the charge is
    refused, with nothing spent, instead. The defaults keep one answer
    array within 512 MiB and one evaluation within seconds."""

    max_rows: int = 2**26
    max_work: int = 2**33


def query_size(Q: EMatrix) -> tuple[int, int]:
    """(rows, work): Q's output length and an upper estimate of the scalar
    operations of Q·x, from the structure of the kernel's matrix classes
    (public: shapes, non-zeros and factors, never the data). A Kronecker
    applies each factor along its axis of a tensor no larger than the
    product of max(rows, cols) of the other factors; stacks and sums add;
    a dense block costs rows·cols, a sparse one its non-zeros, the implicit
    classes rows + cols (a range query its 2^d corners)."""
    m, n = (int(d) for d in Q.shape)
    base = m + n
    if isinstance(Q, Kronecker):
        dims = [max(int(f.shape[0]), int(f.shape[1])) for f in Q.factors]
        work = base
        for i, f in enumerate(Q.factors):
            work += query_size(f)[1] * math.prod(dims[:i] + dims[i + 1:])
        return m, work
    if isinstance(Q, (VStack, HStack)):
        return m, base + sum(query_size(b)[1] for b in Q.blocks)
    if isinstance(Q, Sum):
        return m, base + sum(query_size(t)[1] for t in Q.terms)
    if isinstance(Q, Product):
        return m, base + query_size(Q.A)[1] + query_size(Q.B)[1]
    if isinstance(Q, Weighted):
        return m, base + query_size(Q.base)[1]
    if isinstance(Q, Sparse):
        return m, base + int(Q.matrix.nnz)
    if isinstance(Q, RangeQueries):
        return m, base + min(m, n) * 2 ** len(Q.domain_shape)
    if isinstance(Q, Dense):
        return m, base + m * n
    if isinstance(Q, Hierarchy):
        return m, base + min(m, n) * (Q.height + 1)
    return m, base  # Identity, Ones/Total, Prefix, Suffix, Diagonal, Wavelet: O(m + n)


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
    out: dict[str, Any] = {}
    for key, v in options.items():
        if v is None or type(v) in (bool, int, float, str):
            out[key] = v
        elif isinstance(v, np.bool_):
            out[key] = bool(v)
        elif isinstance(v, numbers.Integral):
            out[key] = int(v)
        elif isinstance(v, numbers.Real):
            out[key] = float(v)
        else:
            raise TypeError(f"option {key}= must be a plain number, bool or str")
    return out


_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")

# Non-finite values from private arithmetic become these (deterministically).
_HUGE = math.ldexp(1.0, 1000)


def _private(method: _F) -> _F:
    """Run a kernel request under the lock and the fixed floating-point regime:
    no NumPy error state or warning filter of the caller can make private
    arithmetic raise or warn (the kernel's rule)."""

    @functools.wraps(method)
    def run(self: Kernel, *args: Any, **kwargs: Any) -> Any:
        with self._lock, np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return method(self, *args, **kwargs)

    return cast(_F, run)


def _cells_of(v: _Vector, cells: np.ndarray) -> Callable[[], np.ndarray]:
    """How to read `cells` of `v` (a split's child, computed lazily)."""
    return lambda: v.values[cells]


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
        """`ledger`: the accountant to charge (default: a fresh in-memory
        `Ledger` of `budget`; a durable one from `store.attach` must be of
        the same unit). `limits`: the largest query evaluated (`QueryLimits`,
        checked before any charge). `history`: keep only the last this many
        query records in memory (None: all) — the history is public
        bookkeeping, not accounting (the ledger charges), and a durable
        ledger keeps every request; a long-lived server kernel stays O(1).
        `key_delta`: the δ reserved for releasing open columns' keys
        (`select_keys`, a zCDP budget only; None: refused)."""
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
        """Run one request (`call`, which calls one method of this kernel) and
        return its response with its `Receipt`: the nodes it created and the
        records it wrote (two when it also charged its envelope). Atomic under
        the kernel's lock; O(1) in the length of the ledger and the history
        (nothing is copied)."""
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

    def __copy__(self) -> Kernel:
        raise TypeError("a kernel cannot be copied")

    def __deepcopy__(self, memo: Any) -> Kernel:
        raise TypeError("a kernel cannot be copied")

    # -- sources -------------------------------------------------------------------
    @_private
    def add_engine_table(
        self, engine: TableEngine, table: Any, domain: Domain, *,
        units: PrivacyUnit | None = None, root: int | None = None,
    ) -> int:  # fmt: skip
        """A root table held by a table engine (`engines.open_table`, protect).

        With `units` (neighbours differ in all rows of one privacy unit), the
        engine opened `table` with at most `units.max_rows` rows per unit —
        or per (unit, group) of at most `units.max_groups` groups — (contracts
        C4): it becomes the child by `bound_contributions`, of stability
        `units.stability` (L1), of the sealed table of units (`root`, from
        `seal_units`, or a new one) — never a source any request may name —
        so Algorithm 2 charges every request on it that many times at the
        root (proofs/kernel.md); `gaussian` charges group-separable queries
        less (`_measure`)."""
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
        return self._new_table(
            root, table, domain, units.stability, "bound_contributions", repr(units), engine,
            groups,
        )  # fmt: skip

    def _seal(self, column: str) -> int:
        root = self._ledger.add_root("table", f"protect(privacy unit {column!r})")
        self._sources[root] = _SEALED
        return root

    @_private
    def seal_units(self, column: str, rows_per_unit: np.ndarray) -> tuple[int, int]:
        """The sealed table of units (the root) and its 1-stable vector of rows
        per unit: entry c counts the units with min(rows, C) = c (the engine's
        histogram, `engines.rows_per_unit`). One unit added or removed moves
        one entry by one, so the vector is 1-stable from the units (§4.4)."""
        root = self._seal(column)
        values = np.asarray(rows_per_unit, dtype=np.float64).reshape(-1)
        shape = (int(values.size),)
        vec = _Vector(_readonly(values), shape, True, f"{self.id}/units", shape, None)
        return root, self._add_vector(root, "rows_per_unit", 1, vec, column)

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
        """The id of an existing source of `kind` ("table", "vector", or either
        when None), or TypeError/ValueError from public facts alone."""
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
        """The vector `source`, its values computed now unless `lazy` (a free
        transformation's): a Private→Public request reads them here, first,
        so an engine's failure refuses it before its charge."""
        node = self._resolve(source, "vector")
        vec = cast(_Vector, self._sources[node])  # _resolve checked the kind
        if not lazy:
            vec.values  # noqa: B018 - computed before anything is charged
        return node, vec

    def _new_table(
        self, parent: int, rows: Any, domain: Domain, stability: int, op: str,
        spec: str = "", engine: TableEngine | None = None,
        groups: tuple[tuple[str, ...], int] | None = None,
    ) -> int:  # fmt: skip
        """A derived table; `rows` is the parent's engine's table value;
        `groups` only where its rows are a subset of a group-bounded table's."""
        if engine is None:  # the parent's (a split's children pass theirs: see split_table)
            engine = cast(_Table, self._sources[parent]).engine
        node = self._child(parent, "table", stability, op, spec)
        self._sources[node] = _Table(rows, domain, engine, groups)
        return node

    def _child(
        self, parent: int, kind: Any, stability: Any, op: str, spec: str = ""
    ) -> int:
        """A new variable in the ledger — and in its envelope's, if any."""
        node = self._ledger.add_child(parent, kind, stability, op, spec)
        scope = self._scopes.get(parent)
        if scope is not None:
            env, local = scope
            self._scopes[node] = (env, env.ledger.add_child(local, kind, stability, op, spec))
        return node

    def _add_vector(
        self, parent: int, op: str, stability: Any, vec: _Vector, spec: str = ""
    ) -> int:
        node = self._child(parent, "vector", stability, op, spec)
        self._sources[node] = vec
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
        return self._add_vector(parent, op, stability, vec, spec)

    @_private
    def describe(self, source: Any) -> SourceInfo:
        """The public description of a source variable."""
        node = self._resolve(source, None)
        item = self._sources[node]
        if isinstance(item, _Table):
            root = self._table_root(node, tuple(item.domain.names))
            shape = item.domain.shape
            return SourceInfo(node, "table", item.domain, shape, True, root, shape, self.seed)
        item = cast(_Vector, item)  # _resolve refused the sealed root
        return SourceInfo(
            node, "vector", None, item.shape, item.integral, item.root_id, item.root_shape,
            self.seed,
        )  # fmt: skip

    # -- Private: table transformations (§5.1) -------------------------------------
    @_private
    def where(self, source: int, predicate: Any) -> int:
        node, t = self._table(source)
        # the engines check the predicate against the public domain first
        rows = t.engine.where(t.rows, predicate, t.domain)
        return self._new_table(node, rows, t.domain, 1, "where", repr(predicate), None, t.groups)

    @_private
    def select(self, source: int, attrs: Any) -> int:
        node, t = self._table(source)
        names = check_names(t.domain, attrs)
        cols = [t.domain.index(n) for n in names]
        rows = t.engine.select(t.rows, cols)
        kept = t.groups if t.groups and set(t.groups[0]) <= set(names) else None
        return self._new_table(
            node, rows, t.domain.project(names), 1, "select", repr(names), None, kept
        )

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
        return self._new_table(node, rows, domain, 2, "group_by", repr((names, count, count_cap)))

    @_private
    def split_table(self, source: int, attr: Any) -> list[int]:
        node, t = self._table(source)
        (name,) = check_names(t.domain, [attr], "attr")
        parts = t.engine.split(t.rows, t.domain.index(name), t.domain[name].size)
        part = self._child(node, "partition", 1, f"split_by_partition({name})", name)
        return [
            self._new_table(part, c, t.domain, 1, "split_child", str(i), t.engine)
            for i, c in enumerate(parts)
        ]

    @_private
    def recode(self, source: int, column: Any, keys: Any) -> int:
        """Open column `column` made a coded attribute (issue #39): code i for
        the rows whose key is keys[i] — public text, e.g. what `select_keys`
        released — and one more code, `OTHER_KEY`, for every other key. A
        fixed row-by-row map of public arguments: 1-stable, no row lost."""
        node, t = self._table(source)
        _check_open(t.domain, column)
        keys = _checked_keys(keys)
        domain = t.domain.with_keys(column, keys)
        rows = t.engine.recode(t.rows, column, keys)
        return self._new_table(node, rows, domain, 1, "recode", repr((column, keys)), None,
                               t.groups)

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
        return self._add_vector(node, "vectorize", 1, vec, repr(tuple(names)))

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
        pnode = self._child(
            node, "partition", 1, "split_by_partition", _array_digest(part.groups)
        )
        order = np.argsort(part.groups, kind="stable")
        bounds = np.cumsum(part.sizes)[:-1]
        children = []
        for i, cells in enumerate(np.split(order, bounds)):
            select = sp.csr_matrix(
                (np.ones(cells.size), (np.arange(cells.size), cells)),
                shape=(cells.size, v.size),
            )
            children.append(
                self._derived_vector(
                    pnode, "split_child", 1, _cells_of(v, cells), v, Sparse(select),
                    v.integral, str(i),
                )
            )
        return children

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
        """THE release step of every Private→Public request, called once its
        arguments are validated from public facts (proofs/kernel.md):

        charge   reserve ε (or ρ) by Algorithm 2 — durably, with a durable
                 ledger — or find the stored answer of an earlier identical
                 request (a replay charges nothing and draws nothing);
        compute  `compute()` on the data, under the fixed regime: it clamps,
                 never raises on the data;
        release  store the answer with its reservation and return it.

        `content` is the request's public content beyond the source and the
        budget (the query's spec, options), for the request's digest; the
        answer is a dict of public values, the same shape fresh or replayed.
        `scale` multiplies the amount charged: 1/g for a group-separable
        Gaussian query on a table bounded to g groups per unit, which
        Algorithm 2 then charges ρ/g·(g·r)² = g·r²·ρ at the root (`_measure`,
        proofs/kernel.md K7). A request under an
        envelope is charged to the envelope's ledger (K8): nothing more at
        the root, which paid for the envelope."""
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
        """One charge for many requests (issue #41): a new variable — the same
        table or vector as `source`, 1-stable — whose requests, and those of
        everything derived from it, are charged to the envelope's own ledger,
        up to ε (or ρ) in all (proofs/kernel.md K8). The envelope itself is
        charged ε at `source` by Algorithm 2, like a request, at the first
        request inside it: a question's plan that is refused on public facts
        before it measures anything spends nothing; once it measures, its
        whole budget is charged at once — or refused whole (BudgetExceeded,
        nothing changed) — and no later step can be refused by the kernel's
        budget, only by the envelope's. Never replayed: a retry is a new
        envelope and a new charge."""
        node = self._resolve(source, None)
        cap = self._ledger.amount(eps=eps, rho=rho)  # validates; refuses ρ on a pure-ε kernel
        kind = self._ledger.kind(node)
        child = self._child(node, kind, 1, "envelope", str(cap))
        self._sources[child] = self._sources[node]  # the same rows or values
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
        """The vector mechanisms' shared steps, after their budget check: the
        query and its sensitivity (L1 for "laplace" at ε = amount, L2 for
        "gaussian" at ρ = amount), the noise scale validated, then the release
        step and the public Measurement."""
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

        def draw() -> dict[str, Any]:  # after the charge: nothing raises on the data
            exact = _answer(Q, v.values)
            if laplace:
                d = self._random.laplace(exact, sensitivity=sens, epsilon=amount, **kw)
                return {"answers": d.values, "scale": d.scale, "grid": d.grid}
            g = gaussian_draw(self._random, exact, sensitivity=sens, rho=amount, **kw)
            return {"answers": g.values, "scale": g.sigma, "grid": g.grid}

        out = self._release(
            node, mechanism, draw, **{"eps" if laplace else "rho": amount},
            request_id=request_id, content={"query": _matrix_digest(Q)}, query=repr(Q),
            sensitivity=sens, scale=Fraction(1, groups),
        )  # fmt: skip
        on_root = Q if v.to_root is None else Product(Q, v.to_root)
        noise = (Laplace if laplace else Gaussian)(out["scale"], out["grid"])
        return Measurement(
            answers=out["answers"], query=Q, query_on_root=on_root, noise=noise,
            epsilon=amount if laplace else 0.0, root_id=v.root_id, root_shape=v.root_shape,
            seed=self.seed, attributes=v.attributes, rho=None if laplace else amount,
        )  # fmt: skip

    @_private
    def noisy_count(self, source: int, *, eps: Any, request_id: Any = None) -> Measurement:
        """NoisyCount (§5.2): |T| + Laplace(1/ε), as a Total query on the
        table's full vectorization (the root of `vectorize()` with no attrs)."""
        node, t = self._table(source)
        eps = check_epsilon(eps)
        laplace_scale_for(1.0, eps, integral=True, max_column_nnz=1)  # validates
        count = float(t.engine.count(t.rows))  # engine work before the charge (contracts C2)

        def draw() -> dict[str, Any]:
            d = self._random.laplace(np.array([count]), sensitivity=1.0, epsilon=eps, integral=True)
            return {"answers": d.values, "scale": d.scale, "grid": d.grid}

        out = self._release(
            node, "noisy_count", draw, eps=eps, request_id=request_id, query="Total",
            sensitivity=1.0,
        )  # fmt: skip
        Q = Total(t.domain.size)
        root_id = self._table_root(node, tuple(t.domain.names))
        return Measurement(
            answers=out["answers"], query=Q, query_on_root=Q,
            noise=Laplace(out["scale"], out["grid"]),
            epsilon=eps, root_id=root_id, root_shape=t.domain.shape, seed=self.seed,
            attributes=tuple(t.domain.names),
        )  # fmt: skip

    @_private
    def select_keys(
        self, source: int, column: Any, *, rho: Any, request_id: Any = None
    ) -> tuple[str, ...]:
        """Partition selection (issue #39; proofs/kernel.md K10): the keys of
        open column `column` whose count of rows plus exact discrete Gaussian
        noise (σ for ρ at sensitivity 1) reaches the threshold
        τ = c + σ·√(2 ln(c/δₛ)), sorted — the rest suppressed, counts never
        released. c is the table's stability to the root (one unit moves at
        most c rows: at most c keys, by at most c each); δₛ = key_delta ·
        c²ρ / ρ_total, this request's share of the kernel's `key_delta` (the
        ledger caps Σ c²ρ at ρ_total, so Σ δₛ ≤ key_delta, durably too).
        Charged ρ here (c²ρ at the root) like a Gaussian measurement."""
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
        """The vector as counts for a partition operator whose privacy proof
        needs integer neighbours; refused (before any charge) unless the
        vector is *declared* integral. Its values are integers already; rint
        and the clamp to ±2⁵² are no-ops kept so that no value can surprise
        the operator after the charge."""
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
        """MWEM's worst-approximated query (exponential mechanism), ε-DP; its
        checks (mwem.py S1–S3) all before the charge."""
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
        """MST's and AIM's choice of one marginal (exponential mechanism on
        w_r·(‖M_r(D) − est_r‖₁ − p_r), marginal_select.py M1–M4): ε-DP, or
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
