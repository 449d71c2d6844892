"""workload-reduction (Table 6): the small-range workload and the quick run
end to end (CSV structure, PNG, finite errors, the paper's factors beside)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import experiments
from ektelo.operators import partition
from experiments import workload_reduction as wr
from experiments.common import shared_data_dir


@pytest.mark.parametrize("shape", [(4096,), (256, 256), (128, 128)])
def test_small_ranges_are_small_and_seeded(shape):
    W = wr.small_ranges(shape, 1000, seed=3)
    assert W.shape == (1000, int(np.prod(shape)))
    extent = W.upper - W.lower + 1
    assert extent.min() >= 1
    assert np.all(extent <= np.array(shape) // wr.MAX_FRACTION)
    assert np.all(W.lower >= 0) and np.all(W.upper < np.array(shape))
    again = wr.small_ranges(shape, 1000, seed=3)
    np.testing.assert_array_equal(W.lower, again.lower)
    assert not np.array_equal(W.lower, wr.small_ranges(shape, 1000, seed=4).lower)
    # small ranges leave room to reduce: far fewer groups than cells
    assert partition.workload_based(W).num_groups < W.shape[1]


def test_paper_factors_are_original_over_reduced():
    for err_o, run_o, err_r, run_r, err_f, run_f in wr.PAPER.values():
        assert err_o / err_r == pytest.approx(err_f, abs=0.01)
        assert run_o / run_r == pytest.approx(run_f, abs=0.01)


@pytest.mark.skipif(
    shared_data_dir() is None or not (shared_data_dir() / "dpbench").exists(),
    reason="needs the shared DPBench data",
)
def test_workload_reduction_quick(tmp_path):
    experiments.run("workload-reduction", out=tmp_path, quick=True)
    table = pd.read_csv(tmp_path / "workload-reduction.csv")
    assert (tmp_path / "workload-reduction.png").stat().st_size > 0
    summary = table[table.dataset == "geometric mean"].set_index("algorithm")
    assert list(summary.index) == ["AHP", "DAWA", "Identity", "HB"]
    assert list(summary.domain) == ["128x128", "4096", "256x256", "4096"]
    for column in (
        "error_original",
        "error_reduced",
        "runtime_original_s",
        "runtime_reduced_s",
        "error_factor",
        "runtime_factor",
    ):
        values = summary[column].to_numpy(dtype=float)
        assert np.all(np.isfinite(values)) and np.all(values > 0), column
    assert np.all(summary.n_reduced < summary.n)
    for name, paper in wr.PAPER.items():
        assert summary.loc[name, "paper_error_factor"] == paper[4]
        assert summary.loc[name, "paper_runtime_factor"] == paper[5]
    # Identity's exact factor depends on the workload only; reduction never hurts it
    assert summary.loc["Identity", "identity_exact_factor"] > 1
    per_dataset = table[table.dataset != "geometric mean"]
    assert len(per_dataset) == 4 and (per_dataset.trials == 1).all()


@pytest.mark.parametrize("plan", ["identity", "hb", "ahp"])
def test_reduced_domain_estimate_reuses_the_plan_measurements(plan, rng):
    from ektelo import plans, protect

    shape = (32, 32) if plan != "hb" else (1024,)
    x = rng.poisson(20.0, size=shape)
    W = wr.small_ranges(shape, 50, seed=1)
    # the experiment's private recorder: its trials build it only inside a worker
    recorder = wr._Recorder(protect(x, epsilon=1.0, seed=5))
    x_hat = plans.run(plan, recorder, W, 1.0, workload_reduction=True)
    assert recorder.budget.spent == pytest.approx(1.0)
    assert recorder.log and all(path for _, path in recorder.log)
    x_alt = wr.reduced_domain_estimate(recorder.log)
    assert x_alt.shape == (x.size,)
    if plan in ("identity", "hb"):  # the measurements fix every group: same answers
        np.testing.assert_allclose(W @ x_alt, W @ x_hat, rtol=1e-6, atol=1e-6)
    assert x_alt.sum() == pytest.approx(x_hat.sum(), rel=1e-6)  # same measured totals
