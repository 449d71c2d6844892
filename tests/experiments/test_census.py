"""census (Table 5): the domain and workloads, the striped plans' stripe-wise
least squares against the joint solve, and the quick run end to end (CSV
structure, PNG, positive finite errors, the paper's Table 5 beside)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ektelo
import experiments
from ektelo import workload as wl
from ektelo.matrix import Identity, Kronecker, Prefix, Total, VStack
from ektelo.operators import selection
from ektelo.plans import striped
from ektelo.plans.common import estimate
from experiments import census
from experiments.common import shared_data_dir

HAVE_ADULT = shared_data_dir() is not None and (shared_data_dir() / "adult" / "adult.csv").exists()


def test_domain_is_census_like_and_large_enough():
    d = census.census_domain()
    assert d.names == ("age", "marital-status", "race", "sex", "capital-gain")
    assert d.shape == (17, 7, 5, 2, 100)
    assert d.size >= 10**5
    assert census.census_domain("hours-per-week").size >= 10**5
    codes = d.encode(
        pd.DataFrame(
            {
                "age": [0, 4, 5, 84],
                "marital-status": [0] * 4,
                "race": [0] * 4,
                "sex": [0] * 4,
                "capital-gain": [0] * 4,
            }
        )
    )
    np.testing.assert_array_equal(codes[:, 0], [0, 0, 1, 16])  # 5-year bins of the age codes
    with pytest.raises(ValueError):
        census.census_domain(age_bins=4)
    with pytest.raises(ValueError):
        census.census_domain("fnlwgt")


def test_workloads_match_their_definitions():
    shape = (2, 3, 4)
    W = census.census_workloads(shape)
    x = np.random.default_rng(1).poisson(3, size=shape)
    np.testing.assert_allclose(W["Identity"].matvec(x.ravel()), x.ravel())
    assert W["2-way marginals"].shape[0] == 2 * 3 + 2 * 4 + 3 * 4
    # Prefix(income) x {value or any}: one query per (a or *, b or *, income ≤ j)
    P = W["Prefix(income)"].dense()
    assert P.shape == (3 * 4 * 4, 24)
    cdf = np.cumsum(x, axis=2)
    expected = np.concatenate([cdf, cdf.sum(0, keepdims=True)], axis=0)
    expected = np.concatenate([expected, expected.sum(1, keepdims=True)], axis=1)
    np.testing.assert_allclose(P @ x.ravel(), expected.ravel())


@pytest.mark.parametrize("plan", ["hb_striped", "dawa_striped"])
@pytest.mark.parametrize(
    "workload",
    [
        Kronecker([VStack([Identity(3), Total(3)]), VStack([Identity(2), Total(2)]), Prefix(30)]),
        wl.marginals((3, 2, 30), 2),
        Identity(180),
        wl.random_range((3, 2, 30), 12, seed=4),
    ],
)
def test_stripewise_least_squares_equals_the_joint_solve(plan, workload, monkeypatch):
    """The striped plans solve LS stripe by stripe (inference's block-diagonal
    solves: of the stripes' measurements for hb_striped, of the lines of the
    one union measurement for dawa_striped); with the same noise, the joint
    LS (LSMR) over all measurements gives the same estimate."""
    x = np.random.default_rng(2).poisson(2, size=(3, 2, 30))
    x[..., 12:25] = 0  # a flat run for DAWA to merge
    fn = getattr(striped, plan)
    fast = fn(ektelo.protect(x, epsilon=1.0, seed=9), workload, 1.0)
    monkeypatch.setattr(striped, "estimate", lambda ms: estimate(ms, method="lsmr"))
    joint = fn(ektelo.protect(x, epsilon=1.0, seed=9), workload, 1.0)
    np.testing.assert_allclose(fast, joint, atol=1e-6 * max(1.0, np.abs(joint).max()))


def test_stripe_workloads_have_the_restricted_gram():
    shape = (3, 2, 6)
    W = census.census_workloads(shape)["Prefix(income)"]
    R = ektelo.operators.partition.stripe(shape, 2)
    Wd = W.dense()
    for g, Ws in enumerate(selection.stripe_workloads(W, shape, 2)):
        cols = Wd[:, R.cells(g)]
        np.testing.assert_allclose(Ws.dense().T @ Ws.dense(), cols.T @ cols)


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_stripe_workloads_of_range_queries_have_the_restricted_gram(axis):
    """n-D ranges restricted to each stripe (some stripes meet no query)."""
    shape = (4, 3, 7)
    lower = np.array([[0, 0, 0], [1, 1, 2], [3, 0, 5], [1, 2, 0]])
    upper = np.array([[1, 2, 6], [2, 1, 4], [3, 0, 6], [1, 2, 3]])
    W = wl.range_queries(shape, lower, upper)
    R = ektelo.operators.partition.stripe(shape, axis)
    Wd = W.dense()
    stripes = selection.stripe_workloads(W, shape, axis)
    assert len(stripes) == R.num_groups
    for g, Ws in enumerate(stripes):
        cols = Wd[:, R.cells(g)]
        np.testing.assert_allclose(Ws.dense().T @ Ws.dense(), cols.T @ cols)


@pytest.mark.skipif(not HAVE_ADULT, reason="needs the shared adult data (../shared/data/adult)")
def test_quick_run_writes_table_and_plot(tmp_path, capsys):
    table = experiments.run("census", out=tmp_path, quick=True)
    out = capsys.readouterr().out
    assert "Table 5" in out and "DAWA-Striped" in out
    csv = pd.read_csv(tmp_path / "census.csv")
    assert (tmp_path / "census.png").stat().st_size > 0
    assert len(csv) == len(table)
    expected_columns = {
        "income_attr",
        "cells",
        "epsilon",
        "algorithm",
        "workload",
        "trials",
        "error_mean",
        "error_std",
        "seconds_mean",
        "error_in_unit",
        "paper_in_unit",
        "seed",
    }
    assert expected_columns <= set(csv.columns)
    private = csv[csv["algorithm"] != "zero_reference"]
    assert set(private["algorithm"]) == set(census.ALGORITHMS) - {"hb_striped"}
    assert set(csv["workload"]) == set(census.WORKLOADS)
    assert len(private) == len(set(private["algorithm"])) * 3  # every plan on every workload
    assert np.all(np.isfinite(csv["error_mean"])) and np.all(csv["error_mean"] > 0)
    assert set(csv["epsilon"]) == {1.0} and set(csv["trials"]) == {1}
    # the paper's numbers ride along for the plans it ran
    dawa = csv[(csv["algorithm"] == "dawa_striped") & (csv["workload"] == "Identity")]
    assert dawa["paper_in_unit"].iloc[0] == pytest.approx(3.43)
    # sanity: every private plan beats answering with x̂ = 0 on the Prefix workload
    prefix = csv[csv["workload"] == "Prefix(income)"].set_index("algorithm")["error_mean"]
    assert (prefix.drop("zero_reference") < prefix["zero_reference"]).all()


def test_paper_identity_entry_implies_epsilon_one():
    """Table 5 leaves ε unstated: Identity's expected identity-workload error
    √(2n)/ε/(n·N) on the CPS domain matches its 24.18e-9 at ε = 1."""
    n, rows = 1_400_000, 49_436
    assert np.sqrt(2 * n) / 1.0 / (n * rows) == pytest.approx(
        census.PAPER["identity"][0] * census.UNITS["Identity"], rel=0.01
    )
