"""PrivBayes's θ-usefulness cap in the kernel (`privbayes_select(max_cells=...)`,
Zhang et al., TODS 2017 §4.4): the capped candidate list against a brute-force
enumeration, the picks without a cap unchanged (pinned networks recorded
before the cap existed), every clique within the cap, and a bad cap refused
with nothing spent."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain
from ektelo.kernel.noise import RandomSource
from ektelo.kernel.privbayes import candidates
from tests.kernel.test_private_ops import SpySource
from tests.privbayes_rows import select_from_rows as privbayes_select

SIZES = (3, 5, 2, 7, 4, 6, 3)


def _table(rows: int = 1500) -> np.ndarray:
    """Seven attributes of SIZES; A1 copies A0 and A4 follows A3 (partly)."""
    rng = np.random.default_rng(11)
    t = np.stack([rng.integers(0, s, rows) for s in SIZES], 1)
    t[:, 1] = np.where(rng.random(rows) < 0.7, t[:, 0], t[:, 1])
    t[:, 4] = np.where(rng.random(rows) < 0.6, t[:, 3] % 4, t[:, 4])
    return t


def _brute_force(
    sizes: tuple[int, ...], chosen: list[int], degree: int, cap: int
) -> set[tuple[int, tuple[int, ...]]]:
    """The definition, spelled out: per child, the nonempty parent sets
    Π ⊂ chosen with |Π| ≤ degree whose clique fits, minus those strictly
    inside another fitting set; () when none fits."""
    out: set[tuple[int, tuple[int, ...]]] = set()
    for child in set(range(len(sizes))) - set(chosen):
        fitting = [
            set(p)
            for k in range(1, degree + 1)
            for p in itertools.combinations(chosen, k)
            if sizes[child] * math.prod(sizes[q] for q in p) <= cap
        ]
        maximal = [p for p in fitting if not any(p < o for o in fitting)]
        out |= {(child, tuple(sorted(p))) for p in maximal} or {(child, ())}
    return out


@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("cap", [1, 4, 10, 15, 30, 42, 60, 105, 300, 10**6])
def test_capped_candidates_are_exactly_the_maximal_fitting_sets(degree: int, cap: int) -> None:
    for chosen in ([0], [3, 1], [0, 2, 5], [1, 3, 4, 6], [0, 1, 2, 3, 4, 5]):
        got = candidates(SIZES, chosen, degree=degree, max_cells=cap)
        assert len(got) == len(set(got))  # no repeats
        assert set(got) == _brute_force(SIZES, chosen, degree, cap), (chosen, degree, cap)
        for child, parents in got:  # every oversize clique is out, every kept one fits or is alone
            assert parents == () or SIZES[child] * math.prod(SIZES[p] for p in parents) <= cap


def test_a_worked_example_of_the_cap() -> None:
    # child 3 (7 values), parents from {0 (3), 1 (5), 2 (2)}, cap 42 cells:
    # {0, 2} (42) fits and is maximal; {1} (35) fits but {1, x} does not; {0, 1}
    # (105) and {1, 2} (70) are over the cap
    got = [p for c, p in candidates(SIZES, [0, 1, 2], degree=2, max_cells=42) if c == 3]
    assert got == [(0, 2), (1,)]
    # child 3 alone is 7 cells: under a cap of 6 no parent set fits
    assert [p for c, p in candidates(SIZES, [0, 1], max_cells=6) if c == 3] == [()]


def test_no_cap_is_the_fixed_degree_rule() -> None:
    got = candidates(SIZES, [4, 0, 2], degree=2)
    want = [(c, p) for c in (1, 3, 5, 6) for p in ((0, 2), (0, 4), (2, 4))]
    assert got == want


# Networks privbayes_select chose before the cap existed (commit 209f711; this
# table, ε = 2, RandomSource(seed)).
PINNED = {
    (1, 0): [(5,), (3, 5), (4, 3), (1, 3), (0, 1), (6, 5), (2, 1)],
    (2, 0): [(5,), (3, 5), (4, 3, 5), (6, 4, 5), (0, 3, 5), (1, 0, 5), (2, 1, 5)],
    (2, 2): [(2,), (3, 2), (4, 2, 3), (5, 3, 4), (1, 2, 3), (0, 1, 4), (6, 3, 5)],
    (3, 1): [(4,), (3, 4), (5, 3, 4), (1, 3, 4, 5), (0, 1, 3, 5), (6, 1, 3, 5), (2, 1, 3, 5)],
}


@pytest.mark.parametrize(("degree", "seed"), sorted(PINNED))
def test_without_a_cap_the_picks_are_unchanged(degree: int, seed: int) -> None:
    t = _table()
    assert privbayes_select(t, SIZES, 2.0, RandomSource(seed), degree=degree) == PINNED[
        degree, seed
    ]
    # a cap that every clique fits changes nothing either
    huge = privbayes_select(t, SIZES, 2.0, RandomSource(seed), degree=degree, max_cells=10**9)
    assert huge == PINNED[degree, seed]


@pytest.mark.parametrize("cap", [6, 20, 40])
def test_capped_networks_keep_their_cliques_within_the_cap(cap: int) -> None:
    t = _table()
    shrunk = False
    for seed in range(4):
        spy = SpySource(seed)
        net = privbayes_select(t, SIZES, 2.0, spy, degree=3, max_cells=cap)
        assert sorted(c[0] for c in net) == list(range(7))
        for clique in net:
            cells = math.prod(SIZES[a] for a in clique)
            assert len(clique) == 1 or cells <= cap, (clique, cells)
        # each exponential mechanism ran over the capped candidate list of its step
        chosen = [net[0][0]]
        sizes = [kw["size"] for kind, kw in spy.calls if kind == "em"]
        for step, clique in enumerate(net[1:]):
            assert sizes[step] == len(candidates(SIZES, chosen, degree=3, max_cells=cap))
            chosen.append(clique[0])
        shrunk |= any(0 < len(c) - 1 < min(3, k) for k, c in enumerate(net))
    assert shrunk  # the cap did cut parent sets below the degree


DOMAIN = Domain.from_json({f"a{i}": s for i, s in enumerate(SIZES)})


def _protected(**kw: Any) -> ektelo.ProtectedTable:
    frame = pd.DataFrame(_table(), columns=list(DOMAIN.names))
    t = ektelo.protect(frame, DOMAIN, epsilon=1.0, seed=3, **kw)
    assert isinstance(t, ektelo.ProtectedTable)
    return t


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "40", float("nan")])
def test_a_bad_cap_is_refused_with_nothing_spent(bad: Any) -> None:
    t = _protected()
    with pytest.raises((ValueError, TypeError), match="max_cells"):
        t.privbayes_select(eps=0.5, degree=2, max_cells=bad)
    assert t.budget.spent == 0 and len(t.history()) == 0


def test_the_cap_through_the_kernel_matches_the_function() -> None:
    t = _protected()
    net = t.privbayes_select(eps=0.5, degree=2, max_cells=20)
    assert all(len(c) == 1 or math.prod(SIZES[a] for a in c) <= 20 for c in net)
    again = _protected().privbayes_select(eps=0.5, degree=2, max_cells=20)
    assert net == again  # same research seed, same picks
    assert t.budget.spent == pytest.approx(0.5)
