"""`ektelo synth` and `ektelo run --workload marginals:K:all` on a wide table
(issue #25's front door): the synthetic file's columns and rows, the ledger
charged exactly once and refusing before spending, and one clear line for
bad input; every model plan — `--plan privbayes_pgm` (pure ε) and
`--plan hdmm_pgm` (ε, or ρ with --delta) as well as mst/aim — on a table of
`ektelo generate`."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ektelo import cli
from ektelo import ledger_store as store
from ektelo import wide as model_plans
from ektelo.budget import rho_of_epsilon_delta
from ektelo.cli import main
from tests.session.test_pgm_front_door import DOMAIN as FRONT_DOOR_DOMAIN

NAMES = [f"q{i}" for i in range(7)]


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """7 attributes × 12 values (3.6·10^7 cells), labelled by strings."""
    folder = tmp_path_factory.mktemp("wide")
    rng = np.random.default_rng(0)
    labels = [f"v{j}" for j in range(12)]
    codes = [rng.integers(0, 12, 1500)]
    for _ in NAMES[1:]:
        keep = rng.random(1500) < 0.6
        codes.append(np.where(keep, codes[-1], rng.integers(0, 12, 1500)))
    frame = pd.DataFrame({n: np.array(labels)[c] for n, c in zip(NAMES, codes, strict=True)})
    csv, domain = folder / "wide.csv", folder / "wide.json"
    frame.to_csv(csv, index=False)
    domain.write_text(json.dumps({n: {"values": labels} for n in NAMES}))
    return csv, domain


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_synth_writes_the_domain_columns_and_charges_the_ledger_once(wide, tmp_path, capsys):
    data, domain = wide
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "syn.csv"
    common = ["--data", str(data), "--domain", str(domain), "--delta", "1e-9",
              "--ledger", str(ledger)]
    code, stdout, err = call(capsys, "synth", *common, "--epsilon", "0.6", "--total", "1",
                             "--out", str(out), "--rows", "321", "--seed", "4")
    assert code == 0, err
    syn = pd.read_csv(out)
    assert list(syn.columns) == NAMES and len(syn) == 321
    assert set(syn["q0"]) <= {f"v{j}" for j in range(12)}  # decoded labels
    assert "plan: mst" in stdout and "spent ρ=" in stdout
    (record,) = store.open_store(str(ledger)).datasets()
    assert float(record.spent) == pytest.approx(rho_of_epsilon_delta(0.6, 1e-9), rel=1e-12)
    # over what is left (ρ composes: ρ(0.6) + ρ(0.9) > ρ(1)): refused before
    # anything is spent, no file written
    again = tmp_path / "again.csv"
    code, _, err = call(capsys, "synth", *common, "--epsilon", "0.9", "--out", str(again))
    assert code == 2 and "budget exceeded" in err and "nothing was spent" in err
    (after,) = store.open_store(str(ledger)).datasets()
    assert after.spent == record.spent and not again.exists()


def test_synth_with_aim_shows_progress(wide, tmp_path, capsys):
    data, domain = wide
    out = tmp_path / "aim.csv"
    code, _, err = call(capsys, "synth", "--data", str(data), "--domain", str(domain),
                        "--epsilon", "1", "--delta", "1e-9", "--no-ledger", "--plan", "aim",
                        "--param", "rounds=10", "--out", str(out), "--rows", "50")
    assert code == 0, err
    assert "aim round 1:" in err  # one progress line per round
    assert len(pd.read_csv(out)) == 50


def test_run_marginals_all_on_a_wide_table(wide, tmp_path, capsys):
    data, domain = wide
    out = tmp_path / "pairs.csv"
    code, stdout, err = call(capsys, "run", "--data", str(data), "--domain", str(domain),
                             "--workload", "marginals:2:all", "--epsilon", "1", "--delta",
                             "1e-9", "--no-ledger", "--out", str(out), "--seed", "3")
    assert code == 0, err
    assert "plan: mst" in stdout
    frame = pd.read_csv(out)
    pairs = ["×".join(p) for p in itertools.combinations(NAMES, 2)]
    assert list(frame["marginal"].unique()) == pairs and len(frame) == len(pairs) * 144
    assert frame["ci_method"].str.startswith("none: graphical-model estimate").all()
    # each pair's answers sum to (about) the row count
    sums = frame.groupby("marginal")["answer"].sum()
    assert np.allclose(sums, sums.iloc[0]) and abs(sums.iloc[0] - 1500) < 150


@pytest.mark.parametrize("args, message", [
    (["synth", "--epsilon", "1", "--out", "x.csv"], "give --delta"),
    (["synth", "--epsilon", "1", "--delta", "1e-9", "--out", "x.txt"], "unknown output type"),
    (["run", "--epsilon", "1", "--delta", "1e-9", "--workload", "marginals:2:q0,nope"],
     "unknown attribute 'nope'"),
    (["run", "--epsilon", "1", "--delta", "1e-9", "--workload", "marginals:two:all"],
     "K an integer"),
    (["synth", "--plan", "privbayes_pgm", "--epsilon", "1", "--delta", "1e-9", "--out",
      "x.csv"], "leave out --delta"),
    (["run", "--plan", "privbayes_pgm", "--epsilon", "1", "--delta", "1e-9", "--workload",
      "marginals:2:all"], "spends a pure ε"),
    (["run", "--plan", "aim", "--epsilon", "1", "--workload", "marginals:2:all"],
     "give --delta"),
])
def test_bad_input_is_one_clear_line_and_spends_nothing(wide, tmp_path, capsys, args, message):
    data, domain = wide
    ledger = tmp_path / "ledger.sqlite"
    code, _, err = call(capsys, *args, "--data", str(data), "--domain", str(domain),
                        "--ledger", str(ledger), "--total", "1")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not ledger.exists() or float(store.open_store(str(ledger)).datasets()[0].spent) == 0


# -- privbayes_pgm and hdmm_pgm (and the plan list) -------------------------------------
COARSE = FRONT_DOOR_DOMAIN  # `ektelo generate`'s census-like table on 1,680 cells
# (plan, extra arguments, what the ledger is charged for --epsilon 0.6)
MODEL_CASES = [
    ("privbayes_pgm", [], 0.6),
    ("hdmm_pgm", [], 0.6),
    ("hdmm_pgm", ["--delta", "1e-9"], rho_of_epsilon_delta(0.6, 1e-9)),
]
MODEL_IDS = ["privbayes_pgm-eps", "hdmm_pgm-eps", "hdmm_pgm-zcdp"]


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """`ektelo generate --rows 2000` with a coarse domain beside it."""
    folder = tmp_path_factory.mktemp("census")
    csv = folder / "census.csv"
    assert main(["generate", "--out", str(csv), "--rows", "2000", "--seed", "1"]) == 0
    domain = folder / "coarse.json"
    domain.write_text(json.dumps(COARSE))
    return csv, domain


def spent(ledger: Path) -> float:
    (record,) = store.open_store(str(ledger)).datasets()
    return float(record.spent)


@pytest.mark.parametrize("plan, extra, charge", MODEL_CASES, ids=MODEL_IDS)
def test_run_marginals_with_the_pgm_plans(census, tmp_path, capsys, plan, extra, charge):
    data, domain = census
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "pairs.csv"
    code, stdout, err = call(capsys, "run", "--data", str(data), "--domain", str(domain),
                             "--workload", "marginals:2:all", "--epsilon", "0.6", "--total",
                             "1", *extra, "--plan", plan, "--ledger", str(ledger),
                             "--out", str(out), "--seed", "3")  # research seed: no flake
    assert code == 0, err
    assert f"plan: {plan} (named:" in stdout
    frame = pd.read_csv(out)
    pairs = ["×".join(p) for p in itertools.combinations(COARSE, 2)]
    assert list(frame["marginal"].unique()) == pairs and len(frame) == 223
    assert frame["ci_method"].str.startswith(f"none: graphical-model estimate ({plan}").all()
    assert set(frame["race"].dropna()) == set(COARSE["race"]["values"])  # labels, not codes
    sums = frame.groupby("marginal")["answer"].sum()
    assert np.allclose(sums, sums.iloc[0]) and abs(sums.iloc[0] - 2000) < 100
    assert spent(ledger) == pytest.approx(charge, rel=1e-12)


@pytest.mark.parametrize("plan, extra, charge", MODEL_CASES, ids=MODEL_IDS)
def test_synth_with_the_pgm_plans(census, tmp_path, capsys, plan, extra, charge):
    data, domain = census
    ledger, out = tmp_path / "ledger.sqlite", tmp_path / "syn.csv"
    code, stdout, err = call(capsys, "synth", "--data", str(data), "--domain", str(domain),
                             "--epsilon", "0.6", "--total", "1", *extra, "--plan", plan,
                             "--param", "maxiter=300", "--ledger", str(ledger),
                             "--out", str(out), "--rows", "250", "--seed", "0")
    assert code == 0, err
    assert f"plan: {plan} (graphical model" in stdout
    syn = pd.read_csv(out)
    assert list(syn.columns) == list(COARSE) and len(syn) == 250
    assert set(syn["sex"]) <= {"F", "M"} and set(syn["race"]) <= set(COARSE["race"]["values"])
    assert set(syn["marital"]) <= set(COARSE["marital"]["values"])
    assert spent(ledger) == pytest.approx(charge, rel=1e-12)


@pytest.mark.parametrize("command, param, message", [
    ("run", "degree=0", "degree must be a positive integer"),
    ("run", "depth=2", "has no parameter(s) ['depth']"),
    ("synth", "beta=2", "beta"),
    ("synth", "theta=-1", "theta"),
])
def test_bad_param_is_refused_with_nothing_spent(census, tmp_path, capsys, command, param,
                                                 message):
    data, domain = census
    ledger = tmp_path / "ledger.sqlite"
    args = ["--workload", "marginals:2:all"] if command == "run" else [
        "--out", str(tmp_path / "x.csv")]
    code, _, err = call(capsys, command, "--data", str(data), "--domain", str(domain),
                        "--epsilon", "0.5", "--total", "1", "--plan", "privbayes_pgm",
                        "--param", param, "--ledger", str(ledger), *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not ledger.exists() or spent(ledger) == 0
    assert not (tmp_path / "x.csv").exists()


def test_the_command_lists_every_model_plan(capsys):
    assert cli.MODEL_PLANS == model_plans.MODEL_PLANS
    code, stdout, _ = call(capsys, "synth", "--help")
    assert code == 0
    assert all(p in stdout for p in model_plans.MODEL_PLANS)
    code, stdout, _ = call(capsys, "run", "--help")
    assert code == 0 and "privbayes_pgm" in stdout and "hdmm_pgm" in stdout


@pytest.mark.parametrize("args, message", [
    (["synth", "--plan", "privbayes_pgm", "--delta", "1e-9", "--out", "x.csv"],
     "--plan privbayes_pgm spends a pure ε (Laplace noise): leave out --delta"),
    (["run", "--plan", "mst", "--workload", "marginals:2:all"],
     "--plan mst spends ρ (zCDP, Gaussian noise): give --delta"),
])
def test_the_wrong_kind_of_budget_is_refused_before_the_ledger_is_touched(
        census, tmp_path, capsys, args, message):
    """A first run would record the dataset's total in the ledger, in the
    unit of --delta; a model plan that cannot spend that unit is refused
    before, so no budget of the wrong kind is left behind."""
    data, domain = census
    ledger = tmp_path / "ledger.sqlite"
    code, _, err = call(capsys, *args, "--data", str(data), "--domain", str(domain),
                        "--epsilon", "0.5", "--total", "1", "--ledger", str(ledger))
    assert code == 2 and message in err and "nothing was spent" in err
    assert not ledger.exists()


def test_synth_says_how_binned_columns_are_written(census, tmp_path, capsys):
    """Binned columns hold each bin's lower edge (they re-encode to the same
    bin), and the command says so; --bin-labels writes "[lo, hi)" (#41)."""
    data, domain = census
    common = ["synth", "--no-ledger", "--data", str(data), "--domain", str(domain),
              "--epsilon", "0.6", "--plan", "privbayes_pgm", "--rows", "200", "--seed", "0"]
    edges_out, labels_out = tmp_path / "edges.csv", tmp_path / "labels.csv"
    code, stdout, err = call(capsys, *common, "--out", str(edges_out))
    assert code == 0, err
    assert "binned columns (age, salary) hold each bin as its lower edge" in stdout
    edges = pd.read_csv(edges_out)
    assert set(edges["age"]) <= set(COARSE["age"]["bins"][:-1])
    code, stdout, err = call(capsys, *common, "--bin-labels", "--out", str(labels_out))
    assert code == 0, err
    labels = pd.read_csv(labels_out)
    bins = COARSE["age"]["bins"]
    assert set(labels["age"]) <= {f"[{lo:g}, {hi:g})" for lo, hi in itertools.pairwise(bins)}
    assert "its label [lo, hi)" in stdout
