"""Sums, means and quantiles as linear queries (issue #38): noiseless answers
equal pandas' on the clamped, binned data; bad input refused before anything
is spent; an empty group's mean is a stated NaN, never an infinity; the
command line's `sum:`/`mean:`/`quantile:` specs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ektelo.cli import main
from ektelo.domain import Attribute, Domain
from ektelo.session import Session
from ektelo.workload import spec

EDGES = np.array([0.0, 10.0, 20.0, 50.0])
DOMAIN = {"pay": {"bins": EDGES.tolist()}, "grp": {"values": ["a", "b", "c"]},
          "n": 8, "lvl": {"values": [1, 2, 5, 10]}}
# Levels chosen so that q·N is never an integer for these group sizes (a tie
# F(k) = q·N would be decided by the 1e-7 noise).
LEVELS = (0.3137, 0.7071)


def _table(rows: int = 997, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "pay": rng.uniform(-5, 60, rows).round(2),  # some below 0, some ≥ 50: clamped
        "grp": rng.choice(["a", "b", "c"], rows, p=[0.5, 0.3, 0.2]),
        "n": rng.integers(0, 8, rows),
        "lvl": rng.choice([1, 2, 5, 10], rows),
    })


def _binned(raw: pd.Series) -> np.ndarray:
    """The reference's own clamping and binning: into [0, 50), then each bin's midpoint."""
    clamped = np.clip(raw.to_numpy(float), EDGES[0], np.nextafter(EDGES[-1], 0))
    code = np.searchsorted(EDGES, clamped, side="right") - 1
    return (0.5 * (EDGES[:-1] + EDGES[1:]))[code]


@pytest.fixture(scope="module")
def noiseless() -> tuple[Session, pd.DataFrame]:
    table = _table()
    s = Session(table, DOMAIN, epsilon=1e9, seed=11, on_invalid="clamp", progress=False)
    ref = table.assign(pay=_binned(table["pay"]))
    return s, ref


def test_noiseless_sums_and_means_equal_pandas(noiseless) -> None:
    s, ref = noiseless
    for attr in ("pay", "n", "lvl"):
        got = s.aggregates(attr, by="grp", epsilon=1e7)
        want = ref.groupby("grp")[attr].agg(["sum", "count", "mean"])
        for stat in ("sum", "count", "mean"):
            rows = got[got["statistic"] == stat].set_index("grp")
            np.testing.assert_allclose(rows.loc[["a", "b", "c"], "answer"], want[stat],
                                       rtol=1e-9, atol=1e-4, err_msg=f"{stat} of {attr}")
        alone = s.mean(attr, by="grp", epsilon=1e7).set_index("grp")  # the "ends" basis
        np.testing.assert_allclose(alone.loc[["a", "b", "c"], "answer"], want["mean"],
                                   rtol=1e-7, err_msg=f"mean alone of {attr}")
        means = got[got["statistic"] == "mean"]
        assert (means["ci_low"] <= means["answer"] + 1e-9).all()
        assert (means["answer"] <= means["ci_high"] + 1e-9).all()
        assert (means["ci_high"] - means["ci_low"]).max() < 1e-3
    total = s.sum("pay", epsilon=1e7)
    assert total["answer"].iloc[0] == pytest.approx(ref["pay"].sum(), abs=1e-3)


def test_noiseless_quantiles_equal_numpy_inverted_cdf(noiseless) -> None:
    s, ref = noiseless
    for attr in ("pay", "n", "lvl"):
        got = s.quantile(attr, LEVELS, by="grp", epsilon=1e7)
        for level in LEVELS:
            rows = got[got["quantile"] == level]
            for g in ("a", "b", "c"):
                want = np.quantile(ref.loc[ref["grp"] == g, attr], level, method="inverted_cdf")
                row = rows[rows["grp"] == g].iloc[0]
                assert row["answer"] == want, (attr, level, g)
                assert row["ci_low"] <= want <= row["ci_high"]
            overall = rows[rows["grp"].isna()].iloc[0]
            assert overall["answer"] == np.quantile(ref[attr], level, method="inverted_cdf")


def test_sum_of_a_categorical_or_unbounded_attribute_is_refused_before_spending() -> None:
    s = Session(_table(50), DOMAIN, epsilon=1.0, seed=0, on_invalid="clamp", progress=False)
    with pytest.raises(ValueError, match="'grp' is categorical"):
        s.sum("grp", epsilon=0.5)
    with pytest.raises(ValueError, match="'grp' is categorical"):
        s.mean("grp", by="n", epsilon=0.5)
    with pytest.raises(ValueError, match="'grp' is categorical"):
        s.quantile("grp", 0.5, epsilon=0.5)
    with pytest.raises(ValueError, match="levels must be numbers in"):
        s.quantile("pay", [0.5, 1.0], epsilon=0.5)
    with pytest.raises(ValueError, match="unknown statistic"):
        s.aggregates("pay", statistics=("median",), epsilon=0.5)
    assert s.spent == 0.0
    unbounded = Domain([Attribute("x", 2, (0.0, float("inf"))), Attribute("g", 2)])
    with pytest.raises(ValueError, match="'x' is unbounded"):
        spec.parse("mean:x by g", unbounded)


def test_an_empty_group_has_a_stated_mean_never_an_infinity() -> None:
    s = Session(_table(400), DOMAIN, epsilon=10.0, seed=5, on_invalid="clamp", progress=False)
    got = s.mean("pay", by="grp", where="grp == 'a'", epsilon=1.0)
    assert not np.isinf(got[["answer", "ci_low", "ci_high"]].to_numpy(float)).any()
    empty = got[got["grp"] != "a"]
    assert len(empty) == 2
    assert empty["note"].str.len().gt(0).all()  # NaN with "noisy count ≤ 0", or the whole range
    lo, hi = 5.0, 35.0  # the representative values' range
    assert ((empty["answer"].isna()) | empty["answer"].between(lo, hi)).all()
    a = got[got["grp"] == "a"].iloc[0]
    assert a["note"] == "" and lo <= a["ci_low"] < a["answer"] < a["ci_high"] <= hi


def test_the_planner_answers_sums_and_counts_jointly_with_hdmm() -> None:
    s = Session(_table(400), DOMAIN, epsilon=10.0, seed=5, on_invalid="clamp", progress=False)
    got = s.aggregates("pay", by=["grp", "lvl"], totals=True, epsilon=1.0)
    assert got.attrs["plan"] == "hdmm"
    assert s.spent == pytest.approx(1.0)
    assert len(got) == 3 * 4 * 5  # (3 + 1) × (4 + 1) groups, three statistics
    assert list(got.columns) == ["statistic", "grp", "lvl", "answer", "std_error", "ci_low",
                                 "ci_high", "ci_method", "note"]
    preview = s.preview("sum,count:pay by grp,lvl with totals", epsilon=1.0)
    assert preview.plan == "hdmm" and preview.std_error is not None


def test_cli_mean_and_quantile_specs(tmp_path, capsys) -> None:
    data, domain = tmp_path / "t.csv", tmp_path / "t.json"
    _table(300).assign(pay=lambda f: f["pay"].clip(0, 49)).to_csv(data, index=False)
    domain.write_text(Domain.from_dict(DOMAIN).to_json())
    out = tmp_path / "mean.csv"
    assert main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                 "--workload", "mean:pay by grp", "--epsilon", "1", "--seed", "2",
                 "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["statistic", "grp", "answer", "std_error", "ci_low",
                                   "ci_high", "ci_method", "note"]
    assert (frame["statistic"] == "mean").all() and frame["ci_method"].str.contains("Fieller").all()
    out = tmp_path / "q.csv"
    assert main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                 "--workload", "quantile:pay@0.5,0.9", "--epsilon", "1", "--seed", "2",
                 "--out", str(out)]) == 0
    frame = pd.read_csv(out)
    assert list(frame["quantile"]) == [0.5, 0.9]
    assert frame["answer"].isin([5.0, 15.0, 35.0]).all()
    capsys.readouterr()


def test_cli_plots_a_mean_and_a_quantile_as_bars_with_intervals(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    data, domain = tmp_path / "t.csv", tmp_path / "t.json"
    _table(300).assign(pay=lambda f: f["pay"].clip(0, 49)).to_csv(data, index=False)
    domain.write_text(Domain.from_dict(DOMAIN).to_json())
    for spec_text in ("mean:pay by grp", "quantile:pay@0.5 by grp"):
        png = tmp_path / f"{spec_text.split(':')[0]}.png"
        assert main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                     "--workload", spec_text, "--epsilon", "1", "--seed", "2",
                     "--plot", str(png)]) == 0
        assert png.stat().st_size > 1000
    capsys.readouterr()


def test_the_kronecker_noise_factor_equals_the_dense_covariance() -> None:
    from ektelo.answers import noise_factor
    from ektelo.matrix import Kronecker
    from ektelo.operators.selection import hdmm
    from ektelo.port import protect
    from ektelo.workload import group_sums

    shape = (12, 3, 4)
    W = group_sums(shape, 0, np.linspace(0, 11, 12), by=(1, 2), counts=True, totals=True)
    A = hdmm(W)
    assert isinstance(A, Kronecker)  # OPT_⊗ with a row-space value factor: the fast path
    x = protect(np.zeros(shape), epsilon=1.0, seed=0, integral=True)
    m = x.laplace(A, eps=1.0)
    F = noise_factor(W, [m])
    assert F is not None
    G = np.asarray(A.gram().dense()) / m.variance
    lam, V = np.linalg.eigh(G)
    keep = lam > lam.max() * 1e-10
    Gp = (V[:, keep] / lam[keep]) @ V[:, keep].T
    want = W.dense() @ Gp @ W.dense().T
    np.testing.assert_allclose(F @ F.T, want, rtol=1e-7, atol=1e-9 * float(np.abs(want).max()))
