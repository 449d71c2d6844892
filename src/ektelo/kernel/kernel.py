"""The protected kernel (§4): private data, transformation graph, budget, noise.

A `Kernel` holds the source environment E (every table and vector derived
from the protected input), the `Ledger` (graph, stabilities, B(sv), Algorithm
2) and the `RandomSource`. Clients hold opaque handles (`handles.py`) and
issue requests naming them; a handle of another kernel is refused.

Operator types (§4.2): the transformations are **Private** (a new handle, no
budget); `laplace`, `noisy_count` and the private partition/selection
operators are **Private→Public** (they charge `eps` through Algorithm 2 and
return a public value). Order of every Private→Public request:

  1. validate the handle, ε and every argument; rebuild client matrices from
     library classes (or materialise a foreign one once) and compute the
     sensitivity here, from that copy;
  2. Algorithm 2 on the ledger (check the whole chain, then commit) — a
     refusal raises `BudgetExceeded` and changes nothing;
  3. only then touch the data with noise, using the same copy.

The noise sampler may guarantee an ε slightly below the one requested (safe);
the kernel charges the requested ε.
"""

from __future__ import annotations

import inspect
import math
import numbers
import threading
import uuid
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, cast

import numpy as np
import scipy.sparse as sp

from ..domain import Domain, check_names
from ..matrix import EMatrix, Partition, Product, Sparse, Total, rebuild
from . import tables
from .budget import Budget, Ledger, NodeState, check_epsilon
from .handles import ProtectedTable, ProtectedVector
from .measurement import Measurement
from .noise import RandomSource, laplace_scale_for
from .predicates import compile_predicate

__all__ = ["Kernel", "Request"]


@dataclass(frozen=True)
class Request:
    """One granted Private→Public request (the query history QH, §4.4)."""

    index: int
    operation: str
    node: int
    eps: float
    charged_at_root: float
    increments: tuple[tuple[int, float], ...]  # (source variable, B increase) up to the root
    query: str | None = None
    sensitivity: float | None = None
    noise_scale: float | None = None


@dataclass
class _Table:
    codes: np.ndarray
    domain: Domain


@dataclass
class _Vector:
    values: np.ndarray  # flat float64, read-only
    shape: tuple[int, ...]
    integral: bool
    root_id: str
    root_shape: tuple[int, ...]
    to_root: EMatrix | None  # this vector = to_root · root vector (None: it is the root)


def trusted_matrix(M: Any, name: str = "M") -> EMatrix:
    """A kernel-owned copy of `M` built from library classes only.

    Library expressions are rebuilt from their specs. Anything else (a client
    subclass, an array) is materialised once into a CSR copy; that copy is
    used for both the sensitivity and the answers, so it cannot lie.
    """
    if isinstance(M, EMatrix):
        try:
            return rebuild(M)
        except TypeError:
            raw = M.sparse()  # the client's code runs once, on public inputs only
    elif isinstance(M, np.ndarray) or sp.issparse(M):
        raw = M
    else:
        raise TypeError(f"{name} must be a matrix (EMatrix, ndarray or scipy.sparse)")
    if not sp.issparse(raw) and np.ndim(raw) != 2:
        raise ValueError(f"{name} must be 2-D, got shape {np.shape(raw)}")
    csr = sp.csr_matrix(raw, dtype=np.float64, copy=True)
    if not np.all(np.isfinite(csr.data)):
        raise ValueError(f"{name} has non-finite entries")
    return Sparse(csr)


def sensitivity_of(Q: EMatrix, name: str = "M") -> float:
    """Max column L1 norm of a trusted matrix, rounded up against float error."""
    s = float(Q.sensitivity(1))
    if not math.isfinite(s) or s < 0:
        raise ValueError(f"{name} has an invalid sensitivity {s!r}")
    if s > 0 and not Q.is_integral():  # column sums of non-integers may round down
        s *= 1.0 + (Q.max_column_nnz() + 16) * 2.0**-52
    return s


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


class Kernel:
    """Holds one protected input, its derived sources, the budget and the noise."""

    def __init__(self, *, epsilon: float, seed: int | None = None):
        self._ledger = Ledger(check_epsilon(epsilon, "epsilon"))
        self._random = RandomSource(seed)
        self._sources: dict[int, _Table | _Vector] = {}
        self._history: list[Request] = []
        self._lock = threading.RLock()
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
        return self._ledger.budget()

    @property
    def history(self) -> tuple[Request, ...]:
        return tuple(self._history)

    def ledger(self) -> tuple[NodeState, ...]:
        """A full snapshot of the ledger (graph, stabilities, exact B(sv))."""
        return self._ledger.snapshot()

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
    def _root_table(self, codes: np.ndarray, domain: Domain) -> ProtectedTable:
        node = self._ledger.add_root("table", "protect")
        self._sources[node] = _Table(_readonly(codes), domain)
        return ProtectedTable(self, node)

    def _root_vector(self, values: np.ndarray) -> ProtectedVector:
        node = self._ledger.add_root("vector", "protect")
        shape = tuple(int(s) for s in values.shape)
        flat = _readonly(values.reshape(-1))
        integral = bool(np.all(flat == np.round(flat)))
        self._sources[node] = _Vector(flat, shape, integral, f"{self.id}/v{node}", shape, None)
        return ProtectedVector(self, node)

    def _resolve(self, handle: Any, cls: type) -> int:
        if type(handle) is not cls:
            raise TypeError(f"expected a {cls.__name__}, got {type(handle).__name__}")
        if handle._kernel is not self:
            raise ValueError("this handle belongs to another kernel")
        node = handle._node
        if type(node) is not int or not 0 <= node < len(self._ledger):
            raise ValueError(f"unknown source variable {node!r}")
        kind, wanted = self._ledger.kind(node), "table" if cls is ProtectedTable else "vector"
        if kind != wanted:
            raise TypeError(f"source variable {node} is a {kind}, not a {wanted}")
        return node

    def _table(self, handle: Any) -> tuple[int, _Table]:
        node = self._resolve(handle, ProtectedTable)
        return node, cast(_Table, self._sources[node])  # _resolve checked the kind

    def _vector(self, handle: Any) -> tuple[int, _Vector]:
        node = self._resolve(handle, ProtectedVector)
        return node, cast(_Vector, self._sources[node])  # _resolve checked the kind

    def _new_table(self, parent: int, codes: np.ndarray, domain: Domain, stability: int, op: str):
        node = self._ledger.add_child(parent, "table", stability, op)
        self._sources[node] = _Table(_readonly(codes), domain)
        return ProtectedTable(self, node)

    def _add_vector(self, parent: int, op: str, stability: Any, vec: _Vector) -> ProtectedVector:
        node = self._ledger.add_child(parent, "vector", stability, op)
        self._sources[node] = vec
        return ProtectedVector(self, node)

    def _derived_vector(
        self, parent: int, op: str, stability: Any, values: np.ndarray, base: _Vector,
        mapping: EMatrix, integral: bool,
    ) -> ProtectedVector:  # fmt: skip
        """A vector = mapping · base, recorded with its map back to the root."""
        to_root = mapping if base.to_root is None else Product(mapping, base.to_root)
        flat = _readonly(values.reshape(-1))
        vec = _Vector(flat, (flat.size,), integral, base.root_id, base.root_shape, to_root)
        return self._add_vector(parent, op, stability, vec)

    def shape_of(self, handle: ProtectedVector) -> tuple[int, ...]:
        return self._vector(handle)[1].shape

    def root_of(self, handle: ProtectedVector) -> tuple[str, tuple[int, ...]]:
        _, v = self._vector(handle)
        return v.root_id, v.root_shape

    def domain_of(self, handle: ProtectedTable) -> Domain:
        return self._table(handle)[1].domain

    # -- Private: table transformations (§5.1) -------------------------------------
    def where(self, handle: ProtectedTable, predicate: Any) -> ProtectedTable:
        with self._lock:
            node, t = self._table(handle)
            mask_of = compile_predicate(predicate, t.domain)
            return self._new_table(node, tables.where_rows(t.codes, mask_of), t.domain, 1, "where")

    def select(self, handle: ProtectedTable, attrs: Any) -> ProtectedTable:
        with self._lock:
            node, t = self._table(handle)
            names = check_names(t.domain, attrs)
            cols = [t.domain.index(n) for n in names]
            codes = tables.select_rows(t.codes, cols)
            return self._new_table(node, codes, t.domain.project(names), 1, "select")

    def group_by(
        self, handle: ProtectedTable, attrs: Any, *, count: str | None = None, count_cap: int = 1
    ) -> ProtectedTable:
        with self._lock:
            node, t = self._table(handle)
            names = check_names(t.domain, attrs)
            if count is not None and (type(count) is not str or count in names or not count):
                raise ValueError(f"count must be a new attribute name, got {count!r}")
            if isinstance(count_cap, bool) or not isinstance(count_cap, int) or count_cap < 1:
                raise ValueError(f"count_cap must be a positive int, got {count_cap!r}")
            cols = [t.domain.index(n) for n in names]
            codes = tables.group_rows(t.codes, cols, count, count_cap)
            domain = tables.group_domain(t.domain, cols, count, count_cap)
            return self._new_table(node, codes, domain, 2, "group_by")

    def split_table(self, handle: ProtectedTable, attr: Any) -> list[ProtectedTable]:
        with self._lock:
            node, t = self._table(handle)
            (name,) = check_names(t.domain, [attr], "attr")
            parts = tables.split_rows(t.codes, t.domain.index(name), t.domain[name].size)
            part = self._ledger.add_child(node, "partition", 1, f"split_by_partition({name})")
            return [self._new_table(part, c, t.domain, 1, "split_child") for c in parts]

    def vectorize(self, handle: ProtectedTable, attrs: Any = None) -> ProtectedVector:
        with self._lock:
            node, t = self._table(handle)
            names = t.domain.names if attrs is None else check_names(t.domain, attrs)
            shape = t.domain.project(names).shape
            if math.prod(shape) > tables.MAX_CELLS:
                raise ValueError(f"vectorize over {shape} has too many cells; select fewer")
            cols = [t.domain.index(n) for n in names]
            values = tables.vectorize_rows(t.codes, cols, shape)
            root_id = f"{self.id}/t{node}/" + "|".join(names)
            vec = _Vector(_readonly(values), shape, True, root_id, shape, None)
            return self._add_vector(node, "vectorize", 1, vec)

    # -- Private: vector transformations (§5.1) ------------------------------------
    def reduce_by_partition(self, handle: ProtectedVector, P: Any) -> ProtectedVector:
        with self._lock:
            node, v = self._vector(handle)
            part = trusted_partition(P, v.values.size)
            values = part.reduce(v.values)
            return self._derived_vector(
                node, "reduce_by_partition", 1, values, v, part.reduce_matrix(), v.integral
            )

    def split_vector(self, handle: ProtectedVector, P: Any) -> list[ProtectedVector]:
        with self._lock:
            node, v = self._vector(handle)
            part = trusted_partition(P, v.values.size)
            pnode = self._ledger.add_child(node, "partition", 1, "split_by_partition")
            order = np.argsort(part.groups, kind="stable")
            bounds = np.cumsum(part.sizes)[:-1]
            children = []
            for cells in np.split(order, bounds):
                select = sp.csr_matrix(
                    (np.ones(cells.size), (np.arange(cells.size), cells)),
                    shape=(cells.size, v.values.size),
                )
                children.append(
                    self._derived_vector(
                        pnode, "split_child", 1, v.values[cells], v, Sparse(select), v.integral
                    )
                )
            return children

    def transform(self, handle: ProtectedVector, M: Any) -> ProtectedVector:
        with self._lock:
            node, v = self._vector(handle)
            Q = _checked_matrix(M, v)
            stability = sensitivity_of(Q)
            values = Q.matvec(v.values)
            integral = v.integral and Q.is_integral()
            return self._derived_vector(
                node, "transform", Fraction(stability), values, v, Q, integral
            )

    # -- Private→Public ----------------------------------------------------------------
    def _spend(self, node: int, eps: float, operation: str, **detail: Any) -> Request:
        steps = self._ledger.plan(node, eps)
        charged = self._ledger.commit(steps)
        record = Request(
            index=len(self._history), operation=operation, node=node, eps=eps,
            charged_at_root=float(charged),
            increments=tuple((n, float(inc)) for n, inc in steps), **detail,
        )  # fmt: skip
        self._history.append(record)
        return record

    def _noted(self, record: Request, **detail: Any) -> None:
        self._history[record.index] = replace(record, **detail)

    def laplace(self, handle: ProtectedVector, M: Any, *, eps: Any) -> Measurement:
        """Vector Laplace (§5.2): Q·x + Laplace(sens(Q)/ε), sens computed here."""
        with self._lock:
            node, v = self._vector(handle)
            eps = check_epsilon(eps)
            Q = _checked_matrix(M, v)
            sens = sensitivity_of(Q)
            if sens == 0:
                raise ValueError("M is all zero: nothing to measure")
            integral, nnz = v.integral and Q.is_integral(), Q.max_column_nnz()
            laplace_scale_for(sens, eps, integral=integral, max_column_nnz=nnz)  # validates
            answers = Q.matvec(v.values)
            record = self._spend(node, eps, "laplace", query=repr(Q), sensitivity=sens)
            draw = self._random.laplace(
                answers, sensitivity=sens, epsilon=eps, integral=integral, max_column_nnz=nnz
            )
            self._noted(record, noise_scale=draw.scale)
            on_root = Q if v.to_root is None else Product(Q, v.to_root)
            return Measurement(
                answers=draw.values, query=Q, query_on_root=on_root, noise_scale=draw.scale,
                epsilon=eps, root_id=v.root_id, root_shape=v.root_shape, seed=self.seed,
            )  # fmt: skip

    def noisy_count(self, handle: ProtectedTable, *, eps: Any) -> Measurement:
        """NoisyCount (§5.2): |T| + Laplace(1/ε), as a Total query on the
        table's full vectorization (the root of `vectorize()` with no attrs)."""
        with self._lock:
            node, t = self._table(handle)
            eps = check_epsilon(eps)
            laplace_scale_for(1.0, eps, integral=True, max_column_nnz=1)  # validates
            record = self._spend(node, eps, "noisy_count", query="Total", sensitivity=1.0)
            answer = np.array([float(t.codes.shape[0])])
            draw = self._random.laplace(answer, sensitivity=1.0, epsilon=eps, integral=True)
            self._noted(record, noise_scale=draw.scale)
            Q = Total(t.domain.size)
            root_id = f"{self.id}/t{node}/" + "|".join(t.domain.names)
            return Measurement(
                answers=draw.values, query=Q, query_on_root=Q, noise_scale=draw.scale,
                epsilon=eps, root_id=root_id, root_shape=t.domain.shape, seed=self.seed,
            )  # fmt: skip

    def _run_private(self, node: int, eps: float, name: str, *args: Any, **options: Any) -> Any:
        """Import the operator, charge ε (Algorithm 2), then run it on private data."""
        function = _private_function(name)  # before any budget is charged
        inspect.signature(function).bind(*args, **options)  # unknown options: TypeError now
        self._spend(node, eps, name)
        return function(*args, **options)

    def ahp_partition(self, handle: ProtectedVector, *, eps: Any, **options: Any) -> Partition:
        """AHP partition selection (Zhang et al. 2014), ε-DP on this vector."""
        with self._lock:
            node, v = self._vector(handle)
            eps, opts = check_epsilon(eps), _plain_options(options)
            _require_counts(v, "AHP")
            x = np.array(v.values, copy=True).reshape(v.shape)
            P = self._run_private(node, eps, "ahp_partition", x, eps, self._random, **opts)
            return Partition(np.array(P.groups, copy=True), v.shape)

    def dawa_partition(self, handle: ProtectedVector, *, eps: Any, **options: Any) -> Partition:
        """DAWA partition selection (Li et al. 2014), ε-DP on this vector."""
        with self._lock:
            node, v = self._vector(handle)
            eps, opts = check_epsilon(eps), _plain_options(options)
            _require_counts(v, "DAWA")
            x = np.array(v.values, copy=True).reshape(v.shape)
            P = self._run_private(node, eps, "dawa_partition", x, eps, self._random, **opts)
            return Partition(np.array(P.groups, copy=True), v.shape)

    def worst_approx(self, handle: ProtectedVector, workload: Any, x_hat: Any, *, eps: Any) -> int:
        """MWEM's worst-approximated query (exponential mechanism), ε-DP."""
        with self._lock:
            node, v = self._vector(handle)
            eps = check_epsilon(eps)
            W, xh = _checked_matrix(workload, v, "workload"), _estimate(x_hat, v)
            x = np.array(v.values, copy=True)
            return int(self._run_private(node, eps, "worst_approx", x, W, xh, eps, self._random))

    def augmented_worst_approx(
        self, handle: ProtectedVector, workload: Any, x_hat: Any, *, eps: Any, round_index: int
    ) -> EMatrix:
        """The MWEM variant's augmented query selection (§8.1), ε-DP."""
        with self._lock:
            node, v = self._vector(handle)
            eps = check_epsilon(eps)
            W, xh = _checked_matrix(workload, v, "workload"), _estimate(x_hat, v)
            r = round_index
            if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 1:
                raise ValueError(f"round_index must be a positive int (1-based), got {r!r}")
            x = np.array(v.values, copy=True)
            name = "augmented_worst_approx"
            return self._run_private(node, eps, name, x, W, xh, eps, self._random, int(r))

    def privbayes_select(
        self, handle: ProtectedTable, *, eps: Any, **options: Any
    ) -> list[tuple[int, ...]]:
        """PrivBayes network selection (Zhang et al. 2014): attribute-index cliques."""
        with self._lock:
            node, t = self._table(handle)
            eps, opts = check_epsilon(eps), _plain_options(options)
            codes = np.array(t.codes, copy=True)
            name, shape = "privbayes_select", t.domain.shape
            cliques = self._run_private(node, eps, name, codes, shape, eps, self._random, **opts)
            return [tuple(int(i) for i in c) for c in cliques]


def _private_function(name: str) -> Any:
    """Import the private operator lazily (before any budget is charged)."""
    if name == "ahp_partition":
        from .ahp import ahp_partition as f
    elif name == "dawa_partition":
        from .dawa import dawa_partition as f
    elif name == "worst_approx":
        from .mwem import worst_approx as f
    elif name == "augmented_worst_approx":
        from .mwem import augmented_worst_approx as f
    elif name == "privbayes_select":
        from .privbayes import privbayes_select as f
    else:
        raise ValueError(f"unknown private operator {name!r}")
    return f


def _require_counts(v: _Vector, operator: str) -> None:
    """Refuse a partition operator whose privacy proof needs integer neighbours.

    The flag is public: set when the root was protected (counts) and kept only
    through reductions, splits and integer transforms.
    """
    if not v.integral:
        raise ValueError(
            f"{operator} partition selection needs a vector of counts; this vector is "
            "derived through a non-integer transform (or its root is not integral)"
        )


def _checked_matrix(M: Any, v: _Vector, name: str = "M") -> EMatrix:
    Q = trusted_matrix(M, name)
    if Q.shape[1] != v.values.size:
        raise ValueError(f"{name} has {Q.shape[1]} columns; the vector has {v.values.size} cells")
    return Q


def _estimate(x_hat: Any, v: _Vector) -> np.ndarray:
    xh = np.array(x_hat, dtype=np.float64, copy=True).reshape(-1)
    if xh.size != v.values.size or not np.all(np.isfinite(xh)):
        raise ValueError(f"x_hat must be {v.values.size} finite numbers")
    return xh


def _readonly(a: np.ndarray) -> np.ndarray:
    out = np.array(a, copy=True)
    out.setflags(write=False)
    return out
