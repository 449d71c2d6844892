"""plan-scalability and inference-scalability: the limited runner, the
representation switch, and the quick experiments end to end (CSV structure,
PNG, sanity of the numbers)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import ektelo
import experiments
from ektelo import plans
from ektelo.matrix import Dense, Identity, Kronecker, Prefix, Sparse
from ektelo.operators import selection
from experiments import common
from experiments import inference_scalability as inf_exp
from experiments import plan_scalability as plan_exp

STATUSES = {"ok", "timeout", "memory", "error", "skipped"}


# -- the limited runner --------------------------------------------------------------
def test_runner_reports_ok_error_memory_and_timeout():
    with plan_exp.LimitedRunner(cpu_limit=1.0, memory_gb=1.0, setup_limit=60) as runner:
        ok = runner.run("functools:partial", dict, [("answer", 42)])
        assert ok.status == "ok"
        assert ok.info == {"answer": 42}
        assert ok.cpu_s >= 0 and ok.wall_s >= 0
        error = runner.run("functools:partial", int, "not a number")
        assert error.status == "error"
        assert "ValueError" in error.message
        memory = runner.run("functools:partial", np.ones, 2**31)  # 16 GB > the 1 GB cap
        assert memory.status == "memory"
        slow = runner.run("functools:partial", sum, range(10**13))  # hours of CPU
        assert slow.status == "timeout"
        again = runner.run("functools:partial", dict, [("after", "restart")])
        assert again.status == "ok"
        assert again.info == {"after": "restart"}


def test_sweep_skips_larger_points_after_a_failure():
    # sweep appends the trial index: partial(min, 0, t)() = 0 succeeds, dict(t) fails
    points = [
        plan_exp.Point({"n": 1}, (min, 0)),
        plan_exp.Point({"n": 2}, (dict,)),
        plan_exp.Point({"n": 3}, (min, 0)),
    ]
    with plan_exp.LimitedRunner(cpu_limit=5.0, memory_gb=1.0) as runner:
        rows = plan_exp.sweep(runner, "functools:partial", {"label": "y"}, points, 2)
    assert [r["status"] for r in rows] == ["ok", "error", "skipped"]
    assert [r["trials"] for r in rows] == [2, 0, 0]
    assert rows[0]["runtime_s"] >= 0
    assert "TypeError" in rows[1]["message"]
    assert all(r["label"] == "y" for r in rows)


def test_worker_empties_library_memos_before_each_job(monkeypatch):
    import functools
    import sys
    import types

    probe = types.ModuleType("ektelo.memo_probe")
    probe.square = functools.lru_cache(maxsize=4)(lambda v: v * v)
    monkeypatch.setitem(sys.modules, "ektelo.memo_probe", probe)
    probe.square(3)
    assert probe.square.cache_info().currsize == 1
    common.clear_library_caches()
    assert probe.square.cache_info().currsize == 0


# -- the representation switch ---------------------------------------------------------
def test_represent_materialises_exactly():
    M = selection.hb((256,))
    dense = plan_exp.represent(M, "dense")
    sparse = plan_exp.represent(M, "sparse")
    assert isinstance(dense, Dense)
    assert isinstance(sparse, Sparse)
    assert plan_exp.represent(M, "implicit") is M
    np.testing.assert_array_equal(dense.dense(), M.dense())
    np.testing.assert_array_equal(sparse.dense(), M.dense())
    K = selection.stripe((4, 256), 1, selection.hb((256,)))
    factors = plan_exp.represent(K, "sparse", keep_kronecker=True)
    assert isinstance(factors, Kronecker)
    assert all(isinstance(f, (Sparse)) for f in factors.factors)
    whole = plan_exp.represent(K, "basic-sparse", keep_kronecker=True)
    assert isinstance(whole, Sparse)
    np.testing.assert_array_equal(factors.dense(), K.dense())
    np.testing.assert_array_equal(whole.dense(), K.dense())
    with pytest.raises(ValueError, match="unknown representation"):
        plan_exp.represent(M, "csr")


@pytest.mark.parametrize("plan", ["hb", "hb_striped", "dawa"])
def test_representations_change_runtime_not_results(plan):
    shape = (16, 64) if plan == "hb_striped" else (1024,)
    x = plan_exp.synthetic_data(shape, seed=3)
    W = Identity(x.size) if plan != "dawa" else Prefix(x.size)
    estimates, spent = {}, {}
    for rep in plan_exp.REPRESENTATIONS:
        h = ektelo.protect(x, epsilon=1.0, seed=11)
        stand_in = plan_exp.Represented(h, rep)
        estimates[rep] = plans.run(plan, stand_in, W, 1.0)
        spent[rep] = h.budget.spent
        assert stand_in.rows > 0
    for rep in ("dense", "sparse"):
        np.testing.assert_allclose(estimates[rep], estimates["implicit"], rtol=1e-6, atol=1e-5)
        assert spent[rep] == pytest.approx(1.0)


def test_synthetic_data_is_seeded_counts():
    a = plan_exp.synthetic_data((8, 32), seed=1)
    assert a.shape == (8, 32)
    assert np.all(a >= 0) and np.all(a == np.round(a))
    assert a.sum() == pytest.approx(10 * a.size, rel=0.2)
    np.testing.assert_array_equal(a, plan_exp.synthetic_data((8, 32), seed=1))
    assert not np.array_equal(a, plan_exp.synthetic_data((8, 32), seed=2))


def test_h2_answers_match_the_strategy(rng):
    x = rng.poisson(3.0, size=64)
    np.testing.assert_array_equal(inf_exp.h2_answers(x), selection.h2((64,)).matvec(x))
    with pytest.raises(ValueError, match="power-of-two"):
        inf_exp.h2_answers(np.ones(12))


@pytest.mark.parametrize("strategy", ["h2", "hb"])
def test_iterative_implicit_ls_is_lsmr_not_the_tree_solve(strategy):
    # least_squares solves one Hierarchy measurement by its exact tree solve unless
    # told otherwise; the paper's iterative-implicit series must be LSMR
    info = inf_exp.inference_job("LS", "iterative-implicit", strategy, 256, 0)()()
    assert info["solver"] == "lsmr"
    assert info["iterations"] > 0 and info["products"] > 0
    auto = inf_exp.inference_job("LS", "implicit, method=auto", strategy, 256, 0)()()
    assert auto["solver"] == "tree"
    assert auto["rel_residual"] == pytest.approx(info["rel_residual"], rel=1e-6)
    nnls = inf_exp.inference_job("NNLS", "iterative-implicit", strategy, 256, 0)()()
    assert nnls["solver"] == "projected_newton"


# -- the quick experiments ---------------------------------------------------------------
def _largest_common(table: pd.DataFrame, a: str, b: str) -> tuple[float, float]:
    wide = table[table.status == "ok"].pivot_table(
        index="n",
        columns="representation" if "representation" in table else "implementation",
        values="runtime_s",
    )
    both = wide[[a, b]].dropna()
    n = both.index.max()
    return float(both.loc[n, a]), float(both.loc[n, b])


def test_plan_scalability_quick(tmp_path):
    table = experiments.run("plan-scalability", out=tmp_path, quick=True)
    on_disk = pd.read_csv(tmp_path / "plan-scalability.csv")
    assert (tmp_path / "plan-scalability.png").stat().st_size > 0
    assert len(on_disk) == len(table)
    for column in (
        "panel",
        "plan",
        "representation",
        "shape",
        "n",
        "status",
        "trials",
        "runtime_s",
        "wall_s",
        "peak_gb",
        "measured_rows",
    ):
        assert column in on_disk.columns
    assert set(on_disk.status) <= STATUSES
    ok = on_disk[on_disk.status == "ok"]
    assert len(ok) == len(on_disk)  # nothing this small fails
    assert (ok.runtime_s > 0).all() and (ok.trials == 1).all()
    assert ok.finite.all()
    assert set(on_disk.representation) == {"dense", "sparse", "implicit", "basic-sparse"}
    assert {"identity", "hb", "greedy_h", "hb_striped", "hb_striped_kron", "hdmm"} <= set(
        on_disk.plan
    )
    for plan in ("identity", "hb", "greedy_h"):  # measurement-dominated 1-D/2-D plans
        dense, implicit = _largest_common(on_disk[on_disk.plan == plan], "dense", "implicit")
        assert implicit < dense, plan


def test_inference_scalability_quick(tmp_path):
    experiments.run("inference-scalability", out=tmp_path, quick=True)
    table = pd.read_csv(tmp_path / "inference-scalability.csv")
    assert (tmp_path / "inference-scalability.png").stat().st_size > 0
    for column in (
        "method",
        "implementation",
        "n",
        "rows",
        "status",
        "runtime_s",
        "rel_residual",
        "min_estimate",
        "iterations",
    ):
        assert column in table.columns
    assert set(table.status) == {"ok"}
    assert (table.runtime_s > 0).all()
    assert np.isfinite(table.rel_residual).all()
    impls = set(table[table.method == "LS"].implementation)
    assert {
        "direct-dense",
        "iterative-sparse",
        "iterative-implicit",
        "tree-based",
        "implicit, method=auto",
    } <= impls
    iterative = table[table.implementation.str.startswith("iterative")]
    expected = iterative.method.map({"LS": "lsmr", "NNLS": "projected_newton"})
    assert (iterative.solver == expected).all()
    assert set(table[table.implementation == "implicit, method=auto"].solver) == {"tree"}
    # every LS implementation finds the same least-squares fit
    ls = table[(table.method == "LS") & (table.measurements == "h2")]
    for _, g in ls.groupby("n"):
        assert g.rel_residual.max() - g.rel_residual.min() <= 1e-6 * g.rel_residual.max()
    nnls = table[table.method == "NNLS"]
    assert (nnls.min_estimate >= 0).all()
    for method in ("LS", "NNLS"):
        rows = table[(table.method == method) & (table.measurements == "h2")]
        dense, implicit = _largest_common(rows, "direct-dense", "iterative-implicit")
        assert implicit < dense, method
    assert math.isclose(table.n.max(), 1024)
