"""dpbench (issue 6): the exact expected-error helper against the operator
module, the reference loader, and the quick run end to end (CSV structure,
PNG, finite errors, ratios in a sane range, the expected-error bound)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import experiments
from ektelo import workload
from ektelo.matrix import Identity
from ektelo.operators import error, selection
from experiments import dpbench
from experiments.common import shared_data_dir

HAVE_DATA = shared_data_dir() is not None and (
    (shared_data_dir() / "dpbench").exists()
    and (shared_data_dir().parent / "reference" / "dpbench_errors.csv").exists()
)
needs_data = pytest.mark.skipif(not HAVE_DATA, reason="needs the shared DPBench data")


@pytest.mark.parametrize(
    "strategy", [selection.hb(64), selection.h2(64), selection.wavelet(64), Identity(64)]
)
def test_expected_total_sq_1d_matches_operator_module(strategy):
    W = workload.prefix(64)
    got = dpbench.expected_total_sq(W, strategy, (64,))
    assert got == pytest.approx(float(error.expected_error(W, strategy, 1.0)), rel=1e-9)


@pytest.mark.parametrize("strategy", [selection.wavelet((8, 16)), Identity(128)])
def test_expected_total_sq_2d_factorises_over_rectangles(strategy):
    W = workload.random_range((8, 16), 40, seed=2)
    got = dpbench.expected_total_sq(W, strategy, (8, 16))
    # the operator module's dense path on the same (small) domain
    assert got == pytest.approx(float(error.expected_error(W, strategy, 1.0)), rel=1e-9)


def test_expected_total_sq_declines_large_unstructured():
    W = workload.random_range((128, 64), 10, seed=1)
    assert dpbench.expected_total_sq(W, selection.quadtree((128, 64)), (128, 64)) is None


def test_every_algorithm_has_a_plan_and_a_target_when_referenced():
    from ektelo import plans

    for algo in dpbench.ALGORITHMS:
        plans.get(algo.plan)  # raises for an unknown plan
        if algo.reference is None:
            assert algo.target is None
        else:
            assert algo.target == (1.25 if algo.data_independent else 1.5)
    mwem = next(a for a in dpbench.ALGORITHMS if a.label == "MWEM")
    assert mwem.params(np.array([3.0, 4.0]), 1) == {"total": 7.0}


@needs_data
def test_reference_rows_are_own_scale_and_match_our_datasets():
    from experiments.common import dpbench_1d, dpbench_2d

    ref = dpbench.load_reference()
    assert (ref["scale"] != 100000).all() and (ref["n_trials"] > 0).all()
    keys = {1: set(dpbench_1d()), 2: set(dpbench_2d())}
    for dims, group in ref.groupby("dims"):
        assert set(group["key"]) == keys[int(dims)]
    data = dpbench_2d()
    for r in ref[ref.dims == 2].drop_duplicates("key").itertuples():
        assert r.scale == pytest.approx(data[r.key].sum())
    W = dpbench.ranges_2d()
    assert W.shape == (2000, 65536)


@needs_data
def test_dpbench_quick(tmp_path):
    experiments.run("dpbench", out=tmp_path, quick=True)
    table = pd.read_csv(tmp_path / "dpbench.csv")
    summary = pd.read_csv(tmp_path / "dpbench_summary.csv")
    assert (tmp_path / "dpbench.png").stat().st_size > 0
    n_algos = sum(len(v) for v in dpbench.QUICK_ALGORITHMS.values())
    assert len(table) == 2 * n_algos  # two datasets per dims, ε = 1 only
    assert set(table.eps) == {1.0} and (table.trials == 2).all()
    for column in ("mean_error", "std_error", "ref_mean_error", "ratio", "mean_cpu_s"):
        values = table[column].to_numpy(dtype=float)
        assert np.all(np.isfinite(values)), column
    assert (table.mean_error > 0).all() and (table.mean_cpu_s >= 0).all()
    np.testing.assert_allclose(table.ratio, table.mean_error / table.ref_mean_error)
    assert (table[table.algorithm.isin(["MWEM", "UG", "AG"])].settings
            == "given the true total").all()
    # exact expected errors where they are cheap; the mean sits below them (Jensen)
    exact = table[table.algorithm.isin(["Identity", "Privelet"]) & (table.dims == 2)]
    assert np.all(np.isfinite(exact.expected_error))
    assert np.all(exact.ours_over_expected < 1.5) and np.all(exact.ours_over_expected > 0.3)
    # one summary row per (algorithm, dims), each a sane ratio with a verdict
    assert len(summary) == n_algos
    assert set(summary.verdict) <= {"pass", "FAIL"}
    assert np.all((summary.ratio_gmean > 0.2) & (summary.ratio_gmean < 5))


def test_select_subsets_by_label_and_dims():
    chosen = dpbench.select(["dawa", "MWEM"], dims=2)
    assert list(chosen) == [2]
    assert [a.label for a in chosen[2]] == ["DAWA", "MWEM"]  # not "DAWA[ρ=0.25]"
    both = dpbench.select(["DAWA"])
    assert [a.label for a in both[1]] == ["DAWA"] and [a.label for a in both[2]] == ["DAWA"]
    everything = dpbench.select()
    assert sum(map(len, everything.values())) == sum(len(a.dims) for a in dpbench.ALGORITHMS)
    with pytest.raises(ValueError, match="unknown algorithm"):
        dpbench.select(["NoSuchAlgo"])
    with pytest.raises(ValueError, match="runs in 2-D"):
        dpbench.select(["AHP"], dims=2)
    with pytest.raises(ValueError, match="dims"):
        dpbench.select(dims=3)


def test_only_is_refused_by_experiments_without_subsets(tmp_path):
    with pytest.raises(ValueError, match="takes no option only"):
        experiments.run("census", out=tmp_path, quick=True, only=("HB",))


@needs_data
def test_dpbench_subset_from_the_command_line(tmp_path, capsys):
    from experiments.__main__ import main

    code = main(
        ["dpbench", "--quick", "--only", "Uniform,Identity", "--dims", "2",
         "--out", str(tmp_path)]
    )
    assert code == 0
    table = pd.read_csv(tmp_path / "dpbench.csv")
    assert set(table.algorithm) == {"Uniform", "Identity"} and set(table.dims) == {2}
    assert set(table.dataset) == {"ADULT-2D", "MDSALARY-OVERT"}
    summary = pd.read_csv(tmp_path / "dpbench_summary.csv")
    assert sorted(summary.algorithm) == ["Identity", "Uniform"]
    printed = capsys.readouterr().out
    assert "Uniform" in printed and "pass" in printed
