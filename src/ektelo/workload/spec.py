"""Workload specifications for the command line (public).

A spec names the attributes to vectorize and the queries over them:

* ``identity:a,b``            the histogram over attributes a and b
* ``prefix:a``                the CDF of attribute a (Prefix)
* ``prefix:a|b,c``            the CDF of a for every value of b, c and for "any"
                              (Prefix(a) ⊗ [Identity; Total] on b, c — §9.2)
* ``ranges:a``                every range of a (1-D)
* ``random-ranges:a,b:N[:S]`` N random ranges over a, b (seed S, default 0)
* ``marginals:K:a,b,c``       all K-way marginals over a, b, c
* ``file:PATH``               explicit ranges from a CSV with columns
                              ``<attr>_lo,<attr>_hi`` per attribute (values in
                              the domain's own units; bounds inclusive)

`parse(spec, domain)` returns the attributes, the query matrix over their
vectorized domain, and a human-readable label per query.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..domain import Attribute, Domain
from ..matrix import EMatrix, Identity, Kronecker, Prefix, Total, VStack
from . import builders

__all__ = ["ParsedWorkload", "parse"]


@dataclass(frozen=True)
class ParsedWorkload:
    """A workload over the vectorization of `attributes` (in that order)."""

    attributes: tuple[str, ...]
    matrix: EMatrix
    labels: list[str]
    kind: str


def _value_label(attr: Attribute, code: int) -> str:
    if attr.values is not None:
        return str(attr.values[code])
    if attr.bins is not None:
        return f"[{attr.bins[code]:g},{attr.bins[code + 1]:g})"
    return str(code)


def _prefix_label(attr: Attribute, code: int) -> str:
    if attr.bins is not None:
        return f"{attr.name}<{attr.bins[code + 1]:g}"
    return f"{attr.name}<={_value_label(attr, code)}"


def _attrs(domain: Domain, text: str) -> tuple[str, ...]:
    names = tuple(a.strip() for a in text.split(",") if a.strip())
    if not names:
        raise ValueError("the workload spec names no attributes")
    for n in names:
        domain.index(n)  # raises a clear error for unknown attributes
    if len(set(names)) != len(names):
        raise ValueError(f"attributes repeated in workload spec: {list(names)}")
    return names


def _cell_labels(domain: Domain, names: tuple[str, ...]) -> list[str]:
    attrs = [domain[n] for n in names]
    grids = np.indices([a.size for a in attrs]).reshape(len(attrs), -1).T
    return [
        ",".join(f"{a.name}={_value_label(a, int(c))}" for a, c in zip(attrs, row, strict=True))
        for row in grids
    ]


def _range_labels(
    domain: Domain, names: tuple[str, ...], lo: np.ndarray, hi: np.ndarray
) -> list[str]:
    attrs = [domain[n] for n in names]
    return [
        " & ".join(
            f"{a.name} in {_value_label(a, int(lo[q, i]))}..{_value_label(a, int(hi[q, i]))}"
            for i, a in enumerate(attrs)
        )
        for q in range(lo.shape[0])
    ]


def _code_for(attr: Attribute, value: object) -> int:
    if attr.values is None and attr.bins is None:
        code = int(float(value))  # type: ignore[arg-type]
        if not 0 <= code < attr.size:
            raise ValueError(f"{attr.name}: value {value!r} outside 0..{attr.size - 1}")
        return code
    return attr.code_of(value)


def _from_file(domain: Domain, path: str) -> ParsedWorkload:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"workload file not found: {path}")
    frame = pd.read_csv(file, dtype=str, keep_default_na=False)
    cols = list(frame.columns)
    names = tuple(c[: -len("_lo")] for c in cols if c.endswith("_lo"))
    if not names or any(f"{n}_hi" not in cols for n in names):
        raise ValueError(
            f"{path}: a range file needs columns <attr>_lo and <attr>_hi for each attribute"
        )
    _attrs(domain, ",".join(names))
    if frame.empty:
        raise ValueError(f"{path}: no queries in the range file")
    lo = np.empty((len(frame), len(names)), dtype=np.int64)
    hi = np.empty_like(lo)
    for i, n in enumerate(names):
        attr = domain[n]
        for q, (a, b) in enumerate(zip(frame[f"{n}_lo"], frame[f"{n}_hi"], strict=True)):
            lo[q, i], hi[q, i] = _code_for(attr, a), _code_for(attr, b)
    if np.any(lo > hi):
        bad = int(np.nonzero(np.any(lo > hi, axis=1))[0][0])
        raise ValueError(f"{path}: query {bad + 1} has a lower bound above its upper bound")
    shape = tuple(domain[n].size for n in names)
    W = builders.range_queries(shape, lo, hi)
    return ParsedWorkload(names, W, _range_labels(domain, names, lo, hi), "ranges")


def parse(spec: str, domain: Domain) -> ParsedWorkload:
    """Parse a workload spec (see the module docstring) against `domain`."""
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind == "file":
        return _from_file(domain, rest)
    if kind == "identity":
        names = _attrs(domain, rest)
        shape = tuple(domain[n].size for n in names)
        return ParsedWorkload(names, Identity(math.prod(shape)), _cell_labels(domain, names), kind)
    if kind == "prefix":
        target, _, by = rest.partition("|")
        targets = _attrs(domain, target)
        if len(targets) != 1:
            raise ValueError("prefix takes one attribute (prefix:a or prefix:a|b,c)")
        name = targets[0]
        attr = domain[name]
        labels = [_prefix_label(attr, c) for c in range(attr.size)]
        if not by.strip():
            return ParsedWorkload((name,), Prefix(attr.size), labels, kind)
        others = _attrs(domain, by)
        if name in others:
            raise ValueError(f"prefix attribute {name!r} repeated after '|'")
        factors: list[EMatrix] = [Prefix(attr.size)]
        choices: list[list[str]] = [labels]
        for o in others:
            a = domain[o]
            factors.append(VStack([Identity(a.size), Total(a.size)]))
            choices.append([f"{o}={_value_label(a, c)}" for c in range(a.size)] + [f"{o}=any"])
        grid = np.indices([len(c) for c in choices]).reshape(len(choices), -1).T
        full = [",".join(choices[i][j] for i, j in enumerate(row)) for row in grid]
        return ParsedWorkload((name, *others), Kronecker(factors), full, kind)
    if kind == "ranges":
        names = _attrs(domain, rest)
        if len(names) != 1:
            raise ValueError("ranges: (all ranges) takes one attribute; use random-ranges for more")
        R = builders.all_range(domain[names[0]].size)
        return ParsedWorkload(names, R, _range_labels(domain, names, R.lower, R.upper), kind)
    if kind == "random-ranges":
        parts = rest.split(":")
        if len(parts) not in (2, 3):
            raise ValueError("random-ranges spec is random-ranges:a,b:COUNT[:SEED]")
        names = _attrs(domain, parts[0])
        try:
            count, seed = int(parts[1]), int(parts[2]) if len(parts) == 3 else 0
        except ValueError:
            raise ValueError("random-ranges COUNT and SEED must be integers") from None
        shape = tuple(domain[n].size for n in names)
        R = builders.random_range(shape, count, seed)
        return ParsedWorkload(names, R, _range_labels(domain, names, R.lower, R.upper), kind)
    if kind == "marginals":
        k_text, _, attr_text = rest.partition(":")
        try:
            k = int(k_text)
        except ValueError:
            raise ValueError("marginals spec is marginals:K:a,b,c with K an integer") from None
        names = _attrs(domain, attr_text)
        shape = tuple(domain[n].size for n in names)
        W = builders.marginals(shape, k)
        labels = []
        for combo in itertools.combinations(range(len(names)), k):
            sub = tuple(names[i] for i in combo)
            if not sub:
                labels.append("total")
                continue
            labels += [f"marginal[{'×'.join(sub)}] {c}" for c in _cell_labels(domain, sub)]
        return ParsedWorkload(names, W, labels, kind)
    raise ValueError(
        f"unknown workload kind {kind!r}; use identity, prefix, ranges, random-ranges, "
        "marginals or file"
    )
