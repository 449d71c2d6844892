"""naive-bayes (§10.1.3): the AUC, the Naive Bayes model and workload layout,
and the quick run end to end (CSV structure, PNG, AUCs in [0, 1], the
unperturbed classifier above the majority's 0.5)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import experiments
from ektelo.workload.naive_bayes import naive_bayes, split_answers
from experiments import naive_bayes as nb
from experiments.common import shared_data_dir

HAVE_CREDIT = (
    shared_data_dir() is not None and (shared_data_dir() / "credit" / "credit_default.csv").exists()
)


def test_auc_is_the_rank_statistic():
    assert nb.auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert nb.auc([0, 0, 1, 1], [0.4, 0.3, 0.2, 0.1]) == 0.0
    assert nb.auc([0, 1, 0, 1], [5, 5, 5, 5]) == 0.5  # ties count one half
    labels = np.array([0, 1, 1, 0, 1])
    scores = np.array([0.2, 0.9, 0.2, 0.5, 0.6])
    pairs = [(p, q) for p in scores[labels == 1] for q in scores[labels == 0]]
    brute = np.mean([1.0 if p > q else 0.5 if p == q else 0.0 for p, q in pairs])
    assert nb.auc(labels, scores) == pytest.approx(brute)
    with pytest.raises(ValueError):
        nb.auc([1, 1], [0.1, 0.2])


def test_domain_has_the_papers_17248_predictor_cells():
    d = nb.credit_domain()
    assert d.names == ("X3", "X4", "X5", "X6", "Y")
    assert d.size // d["Y"].size == 17_248


def test_workload_layout_and_model():
    shape = (3, 4, 2)
    rng = np.random.default_rng(0)
    x = rng.poisson(4, size=shape)
    W = naive_bayes(shape)
    assert W.shape == (2 + 3 * 2 + 4 * 2, x.size)
    y_counts, tables = split_answers(W @ x.ravel(), shape)
    np.testing.assert_allclose(y_counts, x.sum(axis=(0, 1)))
    np.testing.assert_allclose(tables[0], x.sum(axis=1))
    np.testing.assert_allclose(tables[1], x.sum(axis=0))
    model = nb.fit_naive_bayes(W @ x.ravel(), shape)
    for logs in model[1:]:  # conditionals P(X | Y) sum to one per class
        np.testing.assert_allclose(np.exp(logs).sum(axis=0), 1.0)
    # add-one smoothing of clipped counts: a negative noisy count acts as 0
    noisy = W @ x.ravel()
    noisy[2] = -50.0
    clipped = W @ x.ravel()
    clipped[2] = 0.0
    for a, b in zip(
        nb.fit_naive_bayes(noisy, shape), nb.fit_naive_bayes(clipped, shape), strict=True
    ):
        np.testing.assert_allclose(a, b)
    # the score is the log-odds of Bayes' rule under the model
    codes = np.array([[0, 1], [2, 3]])
    prior, c0, c1 = model
    odds = prior[1] - prior[0] + c0[codes[:, 0], 1] - c0[codes[:, 0], 0]
    odds += c1[codes[:, 1], 1] - c1[codes[:, 1], 0]
    np.testing.assert_allclose(nb.score(model, codes), odds)


@pytest.mark.skipif(not HAVE_CREDIT, reason="needs the shared credit data (../shared/data/credit)")
def test_quick_run_writes_table_and_plot(tmp_path, capsys):
    table = experiments.run("naive-bayes", out=tmp_path, quick=True)
    out = capsys.readouterr().out
    assert "§10.1.3" in out
    csv = pd.read_csv(tmp_path / "naive-bayes.csv")
    assert (tmp_path / "naive-bayes.png").stat().st_size > 0
    assert len(csv) == len(table)
    assert {
        "method",
        "epsilon",
        "auc_q25",
        "auc_median",
        "auc_q75",
        "auc_mean",
        "repeats",
        "folds",
        "seed",
    } <= set(csv.columns)
    private = csv[csv["epsilon"].notna()]
    assert set(private["method"]) == {"Identity", "Workload", "WorkloadLS", "SelectLS"}
    assert set(private["epsilon"]) == set(nb.QUICK_EPSILONS)
    assert len(private) == 4 * len(nb.QUICK_EPSILONS)
    for col in ("auc_q25", "auc_median", "auc_q75"):
        assert csv[col].between(0.0, 1.0).all()
    assert (csv["auc_q25"] <= csv["auc_median"]).all()
    assert (csv["auc_median"] <= csv["auc_q75"]).all()
    by_method = csv[csv["epsilon"].isna()].set_index("method")["auc_median"]
    assert by_method["Majority"] == pytest.approx(0.5)
    assert by_method["Unperturbed"] > 0.6
    # at ε = 1 every private plan learns something
    assert (private[private["epsilon"] == 1.0]["auc_median"] > 0.55).all()
