"""`ektelo synth` and `ektelo run --workload marginals:K:all` on a wide table
(issue #25's front door): the synthetic file's columns and rows, the ledger
charged exactly once and refusing before spending, and one clear line for
bad input."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ektelo.budget import rho_of_epsilon_delta
from ektelo.cli import main
from ektelo.kernel import store

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
                             "1e-9", "--no-ledger", "--out", str(out))
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
])
def test_bad_input_is_one_clear_line_and_spends_nothing(wide, tmp_path, capsys, args, message):
    data, domain = wide
    ledger = tmp_path / "ledger.sqlite"
    code, _, err = call(capsys, *args, "--data", str(data), "--domain", str(domain),
                        "--ledger", str(ledger), "--total", "1")
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not ledger.exists() or float(store.open_store(str(ledger)).datasets()[0].spent) == 0
