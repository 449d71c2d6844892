"""MST's domain compression (McKenna, Miklau & Sheldon, JPC 2021, §4;
`ektelo.plans.mst`, `ektelo.inference.graphical.compression`): it spends
exactly what the uncompressed plan spends, the returned model speaks the
original domain (marginals summing to the total, synthetic rows taking only
the domain's own values), and a rare value is merged while a frequent one
is kept (seeded research mode, many runs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, plans
from ektelo.inference.graphical.compression import (
    DomainCompression,
    compress_reduced,
    compressed_partition,
)
from ektelo.inference.graphical_model import CompressedGraphicalModel, GraphicalModel
from ektelo.matrix import Identity

LABELS = [f"v{i}" for i in range(10)]
# "r": two frequent labels and eight rare ones (≈ 10 records each); "g": bins.
DOMAIN = Domain.from_dict(
    {
        "a": 3,
        "b": 3,
        "r": {"values": LABELS},
        "g": {"bins": [0.0, 10.0, 20.0, 30.0, 40.0, 50.0]},
    }
)
RARE = set(range(2, 10))
RHO = 0.003  # 1-way σ = √(1/(2·ρ/12)) ≈ 45: 3σ ≈ 134 ≫ 10 records, ≪ 1,460


def rare_table(rows: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, rows)
    b = np.where(rng.random(rows) < 0.9, a, rng.integers(0, 3, rows))
    weights = np.array([0.4866, 0.4866] + [0.0034] * 8)
    r = rng.choice(10, rows, p=weights / weights.sum())
    g = np.where(rng.random(rows) < 0.95, 5.0, rng.choice([15.0, 25.0, 35.0, 45.0], rows))
    return pd.DataFrame({"a": a, "b": b, "r": np.array(LABELS)[r], "g": g})


def _charges(table: ektelo.ProtectedTable) -> list[tuple[str, float]]:
    return [(r.operation, float(r.charged_at_root)) for r in table.history()
            if float(r.charged_at_root) > 0]  # fmt: skip


def test_compression_spends_exactly_what_the_plain_plan_spends() -> None:
    df = rare_table()
    runs = {}
    for compress in (True, False):
        table = ektelo.protect(df, DOMAIN, rho=RHO, seed=5)
        assert isinstance(table, ektelo.ProtectedTable)
        model = plans.mst(table, None, RHO, compress=compress)
        runs[compress] = (_charges(table), table.budget.remaining, model)
    (with_c, left_c, model_c), (without, left, model) = runs[True], runs[False]
    assert with_c == without  # the same operations charged the same amounts, in order
    assert left_c == left <= 1e-12 * RHO
    assert isinstance(model_c, CompressedGraphicalModel)
    assert type(model) is GraphicalModel and model.domain == DOMAIN
    assert set(model.synthetic(50, seed=0)["r"]) <= set(LABELS)  # labels, not codes


def test_compressed_model_marginals_are_on_the_original_domain() -> None:
    table = ektelo.protect(rare_table(), DOMAIN, rho=RHO, seed=1)
    model = plans.mst(table, None, RHO)
    assert isinstance(model, CompressedGraphicalModel)
    merged = model.compression.merged("r")
    assert merged and model.inner.domain["r"].size == 10 - len(merged) + 1
    for attrs in (["r"], ["r", "a"], ["g", "r"], ["a", "b", "r"], ["b", "g"]):
        mu = model.marginal(attrs)
        assert mu.shape == DOMAIN.project(attrs).shape
        assert mu.sum() == pytest.approx(model.total, rel=1e-9)
        assert np.all(mu >= 0)
    # A merged value's mass is spread evenly over the values it stands for.
    ra = model.marginal(["r", "a"])
    assert np.allclose(ra[list(merged)], ra[merged[0]])
    W = np.ones((1, 30))
    assert model.answer(W, ["a", "r"])[0] == pytest.approx(model.total)


def test_compressed_synthetic_rows_take_only_original_values() -> None:
    df = rare_table()
    table = ektelo.protect(df, DOMAIN, rho=RHO, seed=2)
    model = plans.mst(table, None, RHO)
    assert isinstance(model, CompressedGraphicalModel)
    synthetic = model.synthetic(len(df), seed=0)
    assert list(synthetic.columns) == list(DOMAIN.names)
    assert set(synthetic["r"]) <= set(LABELS)
    assert set(synthetic["g"]) <= {0.0, 10.0, 20.0, 30.0, 40.0}
    assert set(synthetic["a"]) <= {0, 1, 2}
    # Merged values come back as several of their original values, about
    # as often as the model's (uniformly spread) marginal says.
    merged = [LABELS[v] for v in model.compression.merged("r")]
    drawn = synthetic["r"].isin(merged).sum()
    expected = model.marginal(["r"])[list(model.compression.merged("r"))].sum()
    assert synthetic["r"][synthetic["r"].isin(merged)].nunique() >= min(3, len(merged))
    assert abs(drawn - expected) <= 3


def test_a_rare_value_is_merged_and_a_frequent_one_kept() -> None:
    """Eight values with ≈ 10 records each sit ≈ 2.8σ below the 3σ threshold
    (P(kept) ≈ 0.003 each); two with ≈ 1,460 records sit ≈ 30σ above it.
    Over 12 seeds the rare ones are all merged in at least 11 runs and the
    frequent ones never; a compression that merged nothing, everything, or
    by the wrong side of the threshold fails. At a ρ 10⁴ times larger
    (3σ ≈ 1.3 records) nothing of "r" is merged."""
    df = rare_table()
    exact = 0
    for seed in range(12):
        table = ektelo.protect(df, DOMAIN, rho=RHO, seed=100 + seed)
        model = plans.mst(table, None, RHO, maxiter=20)  # the fit is not under test
        assert isinstance(model, CompressedGraphicalModel)
        merged = set(model.compression.merged("r"))
        assert not merged & {0, 1}, seed
        exact += merged == RARE
    assert exact >= 11
    table = ektelo.protect(df, DOMAIN, rho=30.0, seed=7)
    model = plans.mst(table, None, 30.0, maxiter=20)
    if isinstance(model, CompressedGraphicalModel):
        assert model.compression.merged("r") == ()


def test_reduced_measurements_land_in_the_compressed_cells() -> None:
    """The partition's groups are numbered by first appearance; the answers
    must come back in the compressed marginal's C order (noiseless check)."""
    comp = DomainCompression.from_supports(
        DOMAIN, {"r": np.array([False, True] + [False] * 7 + [True])}
    )
    assert comp.merged("r") == (0, 2, 3, 4, 5, 6, 7, 8)
    df = rare_table()
    table = ektelo.protect(df, DOMAIN, rho=1e9, seed=0)
    assert isinstance(table, ektelo.ProtectedTable)
    P = compressed_partition(comp, ["r", "a"])
    m = table.vectorize(["r", "a"]).reduce_by_partition(P).gaussian(
        Identity(P.num_groups), rho=1e9
    )
    got = compress_reduced(m, comp).answers.reshape(3, 3)
    codes = DOMAIN.encode(df)
    r, a = codes[:, DOMAIN.index("r")], codes[:, DOMAIN.index("a")]
    want = np.zeros((3, 3))
    np.add.at(want, (comp.codes["r"][r], a), 1)
    assert np.allclose(got, want, atol=0.5)


def test_compress_must_be_a_bool() -> None:
    table = ektelo.protect(rare_table(), DOMAIN, rho=RHO, seed=0)
    with pytest.raises(TypeError, match="compress"):
        plans.mst(table, None, RHO, compress="yes")
    assert table.budget.spent == 0


# -- merged values split by their noisy counts (issue #43) ------------------------------


def test_merged_shares_are_uniform_on_noise_and_follow_a_clear_signal() -> None:
    from ektelo.inference.graphical.compression import merged_shares

    rng = np.random.default_rng(3)
    # Pure noise around equal counts: James–Stein shrinks (nearly) all the
    # way to uniform, where splitting by the raw counts would follow the noise.
    js, raw = [], []
    for _ in range(200):
        y = 20 + rng.normal(0, 10, 30)
        js.append(0.5 * np.abs(merged_shares(y, 10.0) - 1 / 30).sum())
        clipped = np.clip(y, 0, None)
        raw.append(0.5 * np.abs(clipped / clipped.sum() - 1 / 30).sum())
    assert np.mean(js) < 0.25 * np.mean(raw)
    # Three or fewer values: uniform whatever the counts (no James–Stein there).
    assert np.allclose(merged_shares(np.array([0.0, 50.0, 100.0]), 1.0), 1 / 3)
    # A signal far above the noise: the split follows the counts.
    truth = np.array([0.0, 10, 20, 40, 80, 160] * 5)
    got = merged_shares(truth + rng.normal(0, 1.0, truth.size), 1.0)
    assert np.abs(got - truth / truth.sum()).sum() < 0.02
    assert np.isclose(got.sum(), 1.0) and np.all(got >= 0)


def test_shares_split_a_merged_value_in_marginals_and_synthetic_rows() -> None:
    domain = Domain.from_dict({"a": 6, "b": 2})
    supports = {"a": np.array([True, True, False, False, False, False])}
    plain = DomainCompression.from_supports(domain, supports)
    shares = np.array([1.0, 1.0, 0.1, 0.2, 0.3, 0.4])
    split = DomainCompression(plain.original, plain.compressed, plain.codes, plain.counts,
                              {"a": shares})  # fmt: skip
    table = np.array([[10.0, 20.0], [30.0, 40.0], [100.0, 200.0]])  # compressed a × b
    assert np.allclose(plain.expand(table, ["a", "b"])[2:], [[25.0, 50.0]] * 4)
    spread = split.expand(table, ["a", "b"])
    assert np.allclose(spread[2:], np.outer([0.1, 0.2, 0.3, 0.4], [100.0, 200.0]))
    assert np.isclose(spread.sum(), table.sum())
    codes = np.column_stack([np.full(40_000, 2), np.zeros(40_000, dtype=np.int64)])
    drawn = split.decode(codes, np.random.default_rng(0))[:, 0]
    freq = np.bincount(drawn, minlength=6)[2:] / 40_000
    assert np.abs(freq - [0.1, 0.2, 0.3, 0.4]).max() < 0.01


def test_mst_splits_merged_values_by_their_noisy_counts() -> None:
    """Eight rare labels whose counts differ (≈ 0–60 records, under 3σ ≈ 134):
    merged, then split by their noisy counts; over seeds the split model's
    `r` marginal is closer to the truth than the uniform spread."""
    rng = np.random.default_rng(0)
    rows = 3000
    weights = np.array([0.45, 0.45, 0.0, 0.001, 0.003, 0.006, 0.01, 0.02, 0.025, 0.035])
    r = rng.choice(10, rows, p=weights / weights.sum())
    a = rng.integers(0, 3, rows)
    df = pd.DataFrame({"a": a, "b": (a + (rng.random(rows) < 0.2)) % 3,
                       "r": np.array(LABELS)[r], "g": np.full(rows, 5.0)})  # fmt: skip
    truth = np.bincount(r, minlength=10)[2:]
    better = 0
    for seed in range(10):
        errors = {}
        for split in (True, False):
            table = ektelo.protect(df, DOMAIN, rho=RHO * 10, seed=seed)
            model = plans.mst(table, None, RHO * 10, split_merged=split)
            assert isinstance(model, CompressedGraphicalModel)
            assert (model.compression.shares is not None) == split
            errors[split] = np.abs(model.marginal(["r"])[2:] - truth).sum()
        better += errors[True] < errors[False]
    assert better >= 8
