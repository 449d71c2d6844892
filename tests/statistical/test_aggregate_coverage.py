"""Coverage of the 95 % intervals of means (Fieller, from the joint noise of
a sum and a count) and quantiles (the noisy CDF's band inverted), issue #38:
a cheap, seeded version of `benchmarks/bench_aggregates.py` part (c), with a
power check — the same threshold fails intervals of half the width (means) and
the bare point estimate (quantiles)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ektelo.session import Session

DOMAIN = {"v": 10, "g": {"values": ["a", "b", "c"]}}
DRAWS = 100
LEVELS = (0.5, 0.8)


@pytest.fixture(scope="module")
def setting() -> tuple[Session, pd.DataFrame]:
    rng = np.random.default_rng(7)
    rows = 300
    table = pd.DataFrame({"g": rng.choice(["a", "b", "c"], rows, p=[0.5, 0.3, 0.2]),
                          "v": np.minimum(rng.poisson(4, rows), 9)})
    return Session(table, DOMAIN, epsilon=1e6, seed=19, progress=False), table


def test_mean_intervals_cover_and_the_check_has_power(setting) -> None:
    s, table = setting
    truth = table.groupby("g")["v"].mean().loc[["a", "b", "c"]].to_numpy()
    hit, half_hit = [], []
    for _ in range(DRAWS):
        f = s.mean("v", by="g", epsilon=0.3)
        lo, hi, ans = (f[c].to_numpy(float) for c in ("ci_low", "ci_high", "answer"))
        hit.append((lo <= truth) & (truth <= hi))
        half_hit.append((ans - (ans - lo) / 2 <= truth) & (truth <= ans + (hi - ans) / 2))
    coverage, half = np.mean(hit), np.mean(half_hit)
    assert coverage >= 0.93, coverage  # nominal 0.95 (Laplace-tail width: conservative)
    assert half < 0.93, half  # half-width intervals would be caught


def test_quantile_intervals_cover_and_the_check_has_power(setting) -> None:
    s, table = setting
    truth = {(q, g): np.quantile(table.loc[table["g"] == g, "v"] if g else table["v"], q,
                                 method="inverted_cdf")
             for q in LEVELS for g in ("a", "b", "c", None)}
    hit, point = [], []
    for _ in range(DRAWS):
        f = s.quantile("v", LEVELS, by="g", epsilon=0.3)
        want = np.array([truth[(q, None if pd.isna(g) else g)]
                         for q, g in zip(f["quantile"], f["g"], strict=True)])
        hit.append((f["ci_low"].to_numpy() <= want) & (want <= f["ci_high"].to_numpy()))
        point.append(f["answer"].to_numpy() == want)
    assert np.mean(hit) >= 0.93, np.mean(hit)
    assert np.mean(point) < 0.93, np.mean(point)  # the point alone would be caught
