"""Compiled statements → ONE workload over one vector (public).

Each statement becomes one or more *parts*, each a question of the Python
builders (`workload.spec.histogram` for counts, `workload.spec.aggregates`
for sums, counts and means of one column) over its own attributes; a
binned key ``FLOOR(col / w)`` replaces the key's Identity factor by a 0/1
coarsening. The parts are then lifted to the union of every attribute any
statement uses (keys, summed columns, WHERE columns): a factor of Total on
an attribute a part does not use, and the part's WHERE as a 0/1 mask on
the cells — the predicate evaluated on the public domain's codes (never on
data), written as a sum of Kronecker products of per-attribute masks with
disjoint supports (one product for a conjunction). The lifted parts stacked
are the joint workload, planned and answered once (`ektelo.sql.run`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from ..domain import Domain
from ..errors import SqlError
from ..matrix import Dense, EMatrix, Identity, Kronecker, Sum, Total, VStack, Weighted
from ..workload import spec as questions
from .compile import Key, Statement

__all__ = ["Joint", "Part", "joint_workload", "mask_terms", "part_questions"]

# The WHERE mask is evaluated on the product of its attributes' codes up to
# this many cells (public computation).
MAX_MASK_CELLS = 10**6


@dataclass(frozen=True)
class Part:
    """One builders' question of statement `statement`: `question` over its
    own attributes (binned keys applied), lifted to the union as `matrix`."""

    statement: int
    question: questions.ParsedWorkload
    keys: tuple[Key, ...]
    summed: str | None
    matrix: EMatrix
    terms: int = 1
    order: np.ndarray | None = None
    scale: float = 1.0

    def own_rows(self, lifted: np.ndarray) -> np.ndarray:
        """The part's values (one per row of `question`, in its order) from
        the lifted rows' (each term's, term-major, summed): the lift puts
        the rows in the union's attribute order, `order` maps them back."""
        k = self.terms
        summed = np.asarray(lifted).reshape(k, -1, *np.shape(lifted)[1:]).sum(axis=0)
        return self.reorder(summed)

    def reorder(self, summed: np.ndarray) -> np.ndarray:
        """Rows of `matrix` (the terms summed) in the question's order, in
        the question's units (the lifted rows are divided by `scale`)."""
        summed = summed * self.scale
        if self.order is None:
            return summed
        out = np.empty_like(summed)
        out[self.order] = summed
        return out


@dataclass(frozen=True)
class Joint:
    """The joint workload: `question` over the union of attributes (its
    rows number the queries), and which rows belong to which part (a part
    filtered by a WHERE of several mask terms holds its rows once per term,
    term-major: the part's answers are their sums)."""

    question: questions.ParsedWorkload
    parts: tuple[Part, ...]
    offsets: tuple[int, ...]


def part_questions(st: Statement, domain: Domain) -> list[tuple[questions.ParsedWorkload,
                                                                str | None]]:
    """The builders' questions of one statement, before binned keys: counts
    alone → `histogram` of the keys (a Total without keys); each summed or
    averaged column → `aggregates` (the first also carries the count)."""
    by = [k.attr for k in st.keys]
    summed = list(dict.fromkeys(i.attr for i in st.items if i.func in ("sum", "mean")))
    counted = any(i.func == "count" for i in st.items)
    out: list[tuple[questions.ParsedWorkload, str | None]] = []
    try:
        if not summed:
            if by:
                out.append((questions.histogram(domain, by), None))
            else:
                first = domain.names[0]
                out.append((questions.custom(domain, Total(domain[first].size), [first]), None))
        for j, s in enumerate(summed):
            assert s is not None
            stats = [f for f in ("sum", "mean") if any(i.func == f and i.attr == s
                                                        for i in st.items)]
            if counted and j == 0:
                stats.append("count")
            out.append((questions.aggregates(domain, s, by, stats), s))
    except ValueError as exc:
        raise SqlError(f"sql: {st.sql!r}: {exc} (nothing was spent)") from None
    return out


def _factors(q: questions.ParsedWorkload) -> list[EMatrix]:
    """The question's matrix as one factor per attribute (in its order)."""
    M = q.matrix
    if isinstance(M, Kronecker) and len(M.factors) == len(q.attributes):
        return list(M.factors)
    if len(q.attributes) == 1:
        return [M]
    if isinstance(M, Identity):
        return [Identity(n) for n in q.shape]
    raise SqlError(f"sql: internal: a question of kind {q.kind} has no product form")


def _coarsening(domain: Domain, key: Key) -> tuple[np.ndarray, np.ndarray]:
    """(C, labels): the 0/1 matrix mapping the attribute's codes to the bins
    FLOOR(v / w) of their representative values, and each bin's label."""
    from ..workload.values import representatives

    attr = domain[key.attr]
    assert key.width is not None
    if attr.bins is not None:
        lows = np.asarray(attr.bins[:-1], dtype=np.float64)
    else:
        lows = representatives(attr)
    g = np.floor(lows / key.width).astype(np.int64)
    bins = np.unique(g)
    C = (g[None, :] == bins[:, None]).astype(np.float64)
    labels = bins * key.width if key.scaled else bins
    if np.all(labels == np.round(labels)):
        labels = labels.astype(np.int64)
    return C, labels


def _with_keys(q: questions.ParsedWorkload, st: Statement,
               domain: Domain) -> questions.ParsedWorkload:
    """The question with binned keys applied (their Identity factors replaced
    by coarsenings) and rows named by the keys' output names."""
    binned = [k for k in st.keys if k.width is not None]
    renamed = {k.attr: k.name for k in st.keys if k.name != k.attr and k.width is None}
    if not binned and not renamed:
        return q
    factors = _factors(q)
    sizes: list[int] = []
    columns: dict[str, list[Any]] = {}
    labels_of: dict[str, Any] = {}
    for k in st.keys:
        j = q.attributes.index(k.attr)
        if k.width is not None:
            C, labels = _coarsening(domain, k)
            factors[j] = Dense(C)
            labels_of[k.name] = labels
            sizes.append(len(labels))
        else:
            sizes.append(domain[k.attr].size)
    groups = math.prod(sizes) if sizes else 1
    before = math.prod(domain[k.attr].size for k in st.keys) if st.keys else 1
    reps = q.matrix.shape[0] // before  # the value factor's rows (1 for counts)
    grid = np.indices(sizes).reshape(len(sizes), -1).T if sizes else np.zeros((1, 0), int)
    for j, k in enumerate(st.keys):
        codes = np.tile(grid[:, j], reps)
        if k.width is not None:
            columns[k.name] = list(labels_of[k.name][codes])
        else:
            for name, values in questions._cell_columns(domain[k.attr], codes).items():
                columns[k.name + name[len(k.attr):]] = values
    frame_cols: dict[str, Any] = {}
    if "statistic" in q.rows.columns:
        blocks = q.rows["statistic"].astype(str).to_numpy()[::before]
        frame_cols["statistic"] = pd.Categorical(np.repeat(blocks, groups),
                                                 categories=list(questions.STATISTICS))
    frame_cols.update(columns)
    rows = pd.DataFrame(frame_cols)
    rows.attrs["shape"] = q.shape
    matrix = factors[0] if len(factors) == 1 else Kronecker(factors)
    derived = None if q.derived is None else replace(q.derived, groups=groups)
    # a coarsened histogram is no longer the Identity its kind promises the planner
    kind = "custom" if binned and q.kind == "identity" else q.kind
    return questions.ParsedWorkload(q.attributes, matrix, rows, kind, q.shape, derived)


def mask_terms(predicate: Any, domain: Domain,
               attrs: tuple[str, ...]) -> list[list[np.ndarray]]:
    """The predicate's 0/1 mask over the product of `attrs` (their codes, in
    C order) as a sum of products of per-attribute 0/1 vectors with
    disjoint supports: [[v₁, …, v_k], …] with mask = Σ v₁ ⊗ … ⊗ v_k. The
    predicate runs on the public grid of codes, never on data."""
    from ..predicates import compile_predicate

    sizes = [domain[a].size for a in attrs]
    if math.prod(sizes) > MAX_MASK_CELLS:
        raise SqlError(f"sql: WHERE over {' × '.join(attrs)} spans {math.prod(sizes):,} cells "
                       f"(at most {MAX_MASK_CELLS:,}); filter on fewer columns")
    grid = np.indices(sizes).reshape(len(sizes), -1).T
    codes = np.zeros((grid.shape[0], len(domain)), dtype=np.float64)
    for j, a in enumerate(attrs):
        codes[:, domain.index(a)] = grid[:, j]
    mask = np.asarray(compile_predicate(predicate, domain)(codes), dtype=bool).reshape(sizes)
    return _decompose(mask)


def _decompose(mask: np.ndarray) -> list[list[np.ndarray]]:
    if mask.ndim == 1:
        return [[mask.astype(np.float64)]] if mask.any() else []
    flat = mask.reshape(mask.shape[0], -1)
    out: list[list[np.ndarray]] = []
    seen: dict[bytes, list[int]] = {}
    for i in range(mask.shape[0]):
        if flat[i].any():
            seen.setdefault(flat[i].tobytes(), []).append(i)
    for rows in seen.values():
        head = np.zeros(mask.shape[0])
        head[rows] = 1.0
        for rest in _decompose(mask[rows[0]]):
            out.append([head, *rest])
    return out


def _masked(factor: EMatrix, v: np.ndarray) -> EMatrix:
    if np.all(v == 1):
        return factor
    return Dense(factor.dense() * v[None, :])


def _lift(q: questions.ParsedWorkload, union: tuple[str, ...], domain: Domain,
          terms: list[list[np.ndarray]] | None, where_attrs: tuple[str, ...]) -> list[EMatrix]:
    """The question lifted to the union: one matrix per term of its WHERE
    mask (the question's rows are the sum of the terms' rows)."""
    if terms is None and q.attributes == union:
        return [q.matrix]  # the builders' own matrix
    own = dict(zip(q.attributes, _factors(q), strict=True))
    base = [own.get(a, Total(domain[a].size)) for a in union]
    if terms is None:
        return [base[0] if len(base) == 1 else Kronecker(base)]
    if not terms:  # nothing satisfies the filter: every answer is 0 exactly (one
        # zero-masked product, as small as any other term)
        terms = [[np.zeros(domain[a].size) for a in where_attrs]]
    products: list[EMatrix] = []
    for term in terms:
        factors = list(base)
        for a, v in zip(where_attrs, term, strict=True):
            i = union.index(a)
            factors[i] = _masked(factors[i], v)
        products.append(factors[0] if len(factors) == 1 else Kronecker(factors))
    return products


def joint_workload(statements: list[Statement], domain: Domain) -> Joint:
    """Every statement's parts lifted to the union of attributes, stacked."""
    from ..predicates import Predicate

    raw: list[tuple[int, questions.ParsedWorkload, str | None]] = []
    for s, st in enumerate(statements):
        for q, summed in part_questions(st, domain):
            raw.append((s, _with_keys(q, st, domain), summed))
    union: list[str] = []
    for s, q, _ in raw:
        if statements[s].keys or q.derived is not None:
            union.extend(a for a in q.attributes if a not in union)
    wheres: dict[int, tuple[str, ...]] = {}
    for s, st in enumerate(statements):
        if st.where is not None:
            names = _predicate_attrs(st.where)
            wheres[s] = tuple(a for a in domain.names if a in names)
            union.extend(a for a in wheres[s] if a not in union)
    if not union:  # only COUNT(*) without filters: one attribute carries the total
        union.append(domain.names[0])
    U = tuple(union)
    parts: list[Part] = []
    mats: list[EMatrix] = []
    ends: list[int] = [0]
    for s, q, summed in raw:
        st = statements[s]
        where: Predicate | None = st.where
        terms = None if where is None else mask_terms(where, domain, wheres[s])
        own = q
        if not st.keys and q.derived is None:  # COUNT(*) alone: a Total over the union
            own = questions.custom(domain, Total(domain[U[0]].size), [U[0]])
        lifted = _lift(own, U, domain, terms, wheres.get(s, ()))
        order = _row_order(own, U, lifted[0])
        scale = 1.0
        if len(raw) > 1 and q.derived is not None:
            # a sum's rows in units of its largest value: the joint objective (total
            # squared error) then weighs a sum's cell like a count's, not by hours²
            scale = float(np.abs(_factors(q)[0].dense()).max()) or 1.0
            if scale != 1.0:
                lifted = [Weighted(m, 1.0 / scale) for m in lifted]
        parts.append(Part(s, q, st.keys, summed,
                          lifted[0] if len(lifted) == 1 else Sum(lifted), len(lifted),
                          order, scale))
        mats.extend(lifted)
        ends.append(len(mats))
    matrix = mats[0] if len(mats) == 1 else VStack(mats)
    shape = tuple(domain[a].size for a in U)
    rows = pd.DataFrame({"query": np.arange(matrix.shape[0])})
    rows.attrs["shape"] = shape
    single = len(parts) == 1 and parts[0].matrix is parts[0].question.matrix
    kind = parts[0].question.kind if single else "custom"
    starts = np.cumsum([0, *(m.shape[0] for m in mats)])
    offsets = tuple(int(starts[e]) for e in ends)
    return Joint(questions.ParsedWorkload(U, matrix, rows, kind, shape), tuple(parts), offsets)


def _row_order(q: questions.ParsedWorkload, union: tuple[str, ...],
               lifted: EMatrix) -> np.ndarray | None:
    """For each lifted row, the question's row it is (None: the same order).
    The question's rows are C order over its factors' rows in its attribute
    order, the lifted ones in the union's order."""
    if lifted is q.matrix:
        return None
    attrs = list(q.attributes)
    rows = [f.shape[0] for f in _factors(q)]
    ours = sorted(range(len(attrs)), key=lambda i: union.index(attrs[i]))
    if ours == list(range(len(attrs))):
        return None
    index = np.arange(math.prod(rows)).reshape(rows)
    return np.asarray(index.transpose(ours).ravel())


def _predicate_attrs(p: Any) -> set[str]:
    from .. import predicates as preds

    if isinstance(p, preds.Compare | preds.IsIn | preds.Between):
        return {p.attr}
    if isinstance(p, preds.And | preds.Or):
        return set().union(*(_predicate_attrs(x) for x in p.parts))
    if isinstance(p, preds.Not):
        return _predicate_attrs(p.part)
    raise SqlError(f"sql: internal: unknown predicate {p!r}")
