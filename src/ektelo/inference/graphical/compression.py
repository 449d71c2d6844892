"""MST's domain compression (McKenna, Miklau & Sheldon, "Winning the NIST
contest: a scalable and general approach to differentially private
synthetic data", JPC 2021, §4 "Domain compression"; the published
`mechanisms/mst.py` of Private-PGM does the same).

The values of an attribute whose noisy 1-way count lies below 3σ of its
noise are merged into one value: their true counts are too small to tell
apart from noise, and every pair marginal over them would spend its cells on
noise. The model is fitted on the compressed domain (kept values first, in
their original order, then the one merged value), and speaks the original
domain by spreading a merged value's mass over the original values it
stands for — marginals and synthetic rows alike: uniformly (the published
rule), or by their noisy 1-way counts shrunk toward uniform
(`DomainCompression.with_shares`, `merged_shares`; MST's default since
issue #43).

Here: `DomainCompression` (the public map between the two domains, built
from the noisy 1-way answers), and the re-expression of measurements on the
compressed domain (`compress_oneway` for a 1-way measurement already taken
on the original domain, `compressed_partition` / `compress_reduced` for a
marginal measured as ``vectorize(attrs).reduce_by_partition(P)``). All of it
is public post-processing of noisy answers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...domain import Domain, check_names
from ...matrix import Diagonal, Identity, Partition
from ...measurement import Gaussian, Measurement

__all__ = [
    "DomainCompression",
    "compress_oneway",
    "compress_reduced",
    "compressed_partition",
    "merged_shares",
    "supports_of",
]

# A value is kept when its noisy count is at least this many noise standard
# deviations (the published rule: below it the count is mostly noise).
THRESHOLD = 3.0


def supports_of(
    oneway: Sequence[Measurement], threshold: float = THRESHOLD
) -> dict[str, np.ndarray]:
    """For each 1-way measurement (an identity query on one attribute, as
    MST takes them), the values it keeps: noisy count ≥ threshold·σ."""
    out: dict[str, np.ndarray] = {}
    for i, m in enumerate(oneway):
        if m.attributes is None or len(m.attributes) != 1:
            raise ValueError(
                f"oneway[{i}] is not a 1-way marginal's measurement (attributes {m.attributes})"
            )
        if not isinstance(m.query_on_root, Identity):
            raise ValueError(f"oneway[{i}] is not an identity query on its marginal")
        out[m.attributes[0]] = np.asarray(m.answers >= threshold * m.noise_scale)
    return out


@dataclass(frozen=True)
class DomainCompression:
    """The map from `original` to `compressed` (same attribute names).

    `codes[a][v]` is the compressed code of original code v of attribute a;
    `counts[a][c]` how many original values compressed code c stands for
    (1 for a kept value). Attributes with fewer than two values to merge
    are left as they are (merging one value changes nothing).
    `shares[a][v]` (optional) is original value v's share of its compressed
    value's mass (1 for a kept value; the merged values' shares sum to 1);
    None spreads a merged value uniformly (`with_shares` sets them)."""

    original: Domain
    compressed: Domain
    codes: Mapping[str, np.ndarray]
    counts: Mapping[str, np.ndarray]
    shares: Mapping[str, np.ndarray] | None = None

    @classmethod
    def from_supports(cls, domain: Domain, supports: Mapping[str, np.ndarray]) -> DomainCompression:
        """The compression keeping `supports[a]` (a boolean mask over a's
        values; attributes not named are kept whole)."""
        codes: dict[str, np.ndarray] = {}
        counts: dict[str, np.ndarray] = {}
        sizes: dict[str, int] = {}
        for a in domain.names:
            n = domain[a].size
            keep = np.ones(n, dtype=bool) if a not in supports else np.asarray(supports[a])
            if keep.shape != (n,) or keep.dtype != bool:
                raise ValueError(f"the support of {a!r} must be {n} booleans, got {keep!r}")
            if int((~keep).sum()) < 2:
                keep = np.ones(n, dtype=bool)
            kept = int(keep.sum())
            code = np.full(n, kept, dtype=np.int64)  # the merged value comes last
            code[keep] = np.arange(kept)
            code.setflags(write=False)
            count = np.bincount(code, minlength=kept + (kept < n)).astype(np.int64)
            count.setflags(write=False)
            codes[a], counts[a], sizes[a] = code, count, int(count.size)
        return cls(domain, Domain.from_dict(sizes), codes, counts)

    def with_shares(self, oneway: Sequence[Measurement]) -> DomainCompression:
        """This compression with each merged value's mass split by the noisy
        1-way counts of its values (`merged_shares`) instead of uniformly.
        `oneway` are the 1-way identity measurements the supports came from
        (public: the split reads noisy answers and their σ only)."""
        shares: dict[str, np.ndarray] = {}
        for m in oneway:
            if m.attributes is None or len(m.attributes) != 1:
                raise ValueError("with_shares takes 1-way measurements")
            a = m.attributes[0]
            share = np.ones(self.original[a].size)
            merged = np.asarray(self.merged(a), dtype=np.int64)
            if merged.size:
                share[merged] = merged_shares(np.asarray(m.answers)[merged], m.noise_scale)
            share.setflags(write=False)
            shares[a] = share
        for a in self.original.names:
            if a not in shares and self.merged(a):
                raise ValueError(f"no 1-way measurement of {a!r}, whose values are merged")
        return DomainCompression(self.original, self.compressed, self.codes, self.counts, shares)

    def _share(self, attr: str) -> np.ndarray:
        """Each original value's share of its compressed value's mass."""
        if self.shares is not None and attr in self.shares:
            return self.shares[attr]
        return 1.0 / self.counts[attr][self.codes[attr]]

    def merged(self, attr: str) -> tuple[int, ...]:
        """The original codes of `attr` merged into one value (empty when none)."""
        code, count = self.codes[attr], self.counts[attr]
        if count.size == code.size:
            return ()
        return tuple(int(v) for v in np.flatnonzero(code == count.size - 1))

    @property
    def trivial(self) -> bool:
        """True when nothing is merged."""
        return all(self.counts[a].size == self.original[a].size for a in self.original.names)

    def cell_map(self, attrs: Sequence[str]) -> np.ndarray:
        """For each cell of the original marginal on `attrs` (C order), its
        compressed cell (C order over the compressed sizes)."""
        names = check_names(self.original, attrs)
        grids = np.meshgrid(*(self.codes[a] for a in names), indexing="ij")
        shape = tuple(self.counts[a].size for a in names)
        return np.ravel_multi_index(tuple(g.reshape(-1) for g in grids), shape)

    def expand(self, table: np.ndarray, attrs: Sequence[str]) -> np.ndarray:
        """A marginal on `attrs` over the compressed domain as one over the
        original: each merged value's mass spread over its values by their
        shares (uniformly without `shares`)."""
        names = check_names(self.original, attrs)
        out = np.asarray(table, dtype=np.float64)
        want = tuple(self.counts[a].size for a in names)
        if out.shape != want:
            raise ValueError(f"the compressed marginal on {list(names)} has shape {out.shape}, "
                             f"not {want}")  # fmt: skip
        for axis, a in enumerate(names):
            code = self.codes[a]
            view = [1] * len(names)
            view[axis] = code.size
            out = np.take(out, code, axis=axis) * self._share(a).reshape(view)
        return out

    def decode(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Compressed codes (rows × attributes, the domain's order) as
        original ones: a merged value becomes one of its original values,
        drawn by their shares (uniformly without `shares`), independently per
        row."""
        out = np.empty_like(codes)
        for j, a in enumerate(self.original.names):
            column = codes[:, j]
            # Original values by compressed code: the kept ones in order, then the merged.
            by_code = np.argsort(self.codes[a], kind="stable")
            merged = np.asarray(self.merged(a), dtype=np.int64)
            out[:, j] = by_code[np.minimum(column, by_code.size - 1)]
            if merged.size:
                rows = column == self.counts[a].size - 1
                if self.shares is None or a not in self.shares:
                    out[rows, j] = rng.choice(merged, size=int(rows.sum()))
                else:
                    p = self.shares[a][merged]
                    out[rows, j] = rng.choice(merged, size=int(rows.sum()), p=p / p.sum())
        return out


def merged_shares(answers: np.ndarray, sigma: float) -> np.ndarray:
    """How to split a merged value's mass among its k original values, from
    their noisy counts `answers` (independent Gaussian noise of std
    `sigma`): the positive-part James–Stein estimate of the true counts,
    shrunk toward their mean (James & Stein 1961; Efron & Morris 1973),
    clipped at 0 and normalised. Parameter-free: when the counts' spread
    is no more than the noise's ((k − 3)·σ² ≥ Σ(y − ȳ)²) the split is
    uniform — the published rule — and it follows the counts as their
    signal grows. Uniform for k ≤ 3 (where James–Stein does not dominate)
    or when nothing positive is left."""
    y = np.asarray(answers, dtype=np.float64)
    k = y.size
    uniform = np.full(k, 1.0 / k)
    if k <= 3:
        return uniform
    mean = float(y.mean())
    spread = float(((y - mean) ** 2).sum())
    factor = 0.0 if spread <= 0 else max(0.0, 1.0 - (k - 3) * sigma**2 / spread)
    est = np.maximum(mean + factor * (y - mean), 0.0)
    total = float(est.sum())
    return uniform if not total > 0 else est / total


def _compressed_record(m: Measurement, answers: np.ndarray, query: Diagonal | Identity,
                       shape: tuple[int, ...], sigma: float) -> Measurement:  # fmt: skip
    return Measurement(
        answers=answers,
        query=query,
        query_on_root=query,
        noise=Gaussian(sigma),
        epsilon=m.epsilon,
        root_id=m.root_id,
        root_shape=shape,
        seed=m.seed,
        attributes=m.attributes,
        rho=m.rho,
    )


def compress_oneway(m: Measurement, compression: DomainCompression) -> Measurement:
    """A 1-way identity measurement on the original domain re-expressed on
    the compressed one: kept values as they are; the merged value's answer is
    the sum of its values' answers (noise variance k·σ²), scaled by 1/√k so
    that one σ serves the whole record (a weighted row, as in the published
    code)."""
    if m.attributes is None or len(m.attributes) != 1 or not isinstance(m.query_on_root, Identity):
        raise ValueError("compress_oneway takes a 1-way identity measurement")
    if not isinstance(m.noise, Gaussian):
        raise ValueError("compress_oneway takes a Gaussian measurement")
    a = m.attributes[0]
    code, count = compression.codes[a], compression.counts[a]
    sums = np.bincount(code, weights=m.answers, minlength=count.size)
    scale = 1.0 / np.sqrt(count.astype(np.float64))
    query: Diagonal | Identity = Identity(count.size) if np.all(count == 1) else Diagonal(scale)
    return _compressed_record(m, sums * scale, query, (int(count.size),), m.noise_scale)


def compressed_partition(compression: DomainCompression, attrs: Sequence[str]) -> Partition:
    """The partition of the original marginal on `attrs` into its
    compressed cells (for ``vectorize(attrs).reduce_by_partition``)."""
    names = check_names(compression.original, attrs)
    shape = tuple(compression.original[a].size for a in names)
    return Partition(compression.cell_map(names).reshape(shape), shape)


def compress_reduced(m: Measurement, compression: DomainCompression) -> Measurement:
    """An identity measurement of ``vectorize(attrs).reduce_by_partition(P)``
    (P from `compressed_partition`) as a measurement of the compressed
    marginal: the answers put back in the compressed cells' C order (a
    `Partition` numbers its groups by first appearance)."""
    if m.attributes is None or not isinstance(m.noise, Gaussian):
        raise ValueError("compress_reduced takes a Gaussian measurement of a table's projection")
    names = m.attributes
    cells = compression.cell_map(names)
    shape = tuple(int(compression.counts[a].size) for a in names)
    groups = Partition(cells).groups
    order = np.empty(math.prod(shape), dtype=np.int64)
    order[groups] = cells  # group g is compressed cell order[g]
    if m.answers.size != order.size:
        raise ValueError(
            f"the measurement has {m.answers.size} answers; the compressed marginal on "
            f"{list(names)} has {order.size} cells"
        )
    answers = np.empty(order.size)
    answers[order] = m.answers
    return _compressed_record(m, answers, Identity(order.size), shape, m.noise_scale)
