"""The default engine (issue #28): DuckDB for a file, memory for a DataFrame;
`--engine` / `engine=` override it; without DuckDB a file is read into memory
with a one-line note. Every CLI path gives, under one research seed, exactly
what `--engine memory` gives: run (histogram, cdf by, marginals, ranges,
where-filters on labelled and binned attributes, --on-invalid drop|clamp),
--dry-run, --explain, synth (its shape and budget line; its noise is secure),
budget; and refusals read the same."""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import ektelo
import ektelo.engines
from ektelo import engines
from ektelo.cli import main
from ektelo.session import Session


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    folder = tmp_path_factory.mktemp("defaults")
    csv = folder / "census.csv"
    assert main(["generate", "--out", str(csv), "--rows", "3000"]) == 0
    frame = pd.read_csv(csv)
    frame.to_parquet(folder / "census.parquet")
    dirty = frame.copy()  # values outside the domain, for --on-invalid
    dirty.loc[::97, "age"] = -4.0
    dirty.loc[5::131, "age"] = 300.0
    dirty.to_csv(folder / "dirty.csv", index=False)
    return csv, csv.with_suffix(".domain.json"), folder


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


RUNS = [
    ["--workload", "histogram:race,sex", "--plan", "identity"],
    ["--workload", "cdf:salary by sex", "--where", "age >= 30 and sex == 'M'", "--plan",
     "identity"],
    ["--workload", "marginals:2:sex,race,age", "--plan", "identity"],
    ["--workload", "ranges:age", "--where", "race != 'white'"],
    ["--workload", "histogram:age", "--where", "30 <= age < 40", "--plan", "auto"],
]


def _run(capsys: Any, data: Path, domain: Path, out: Path, extra: list[str]) -> tuple[str, Any]:
    code, stdout, err = call(capsys, "run", "--no-ledger", "--data", str(data), "--domain",
                             str(domain), "--epsilon", "1", "--seed", "7", "--out", str(out),
                             *extra)  # fmt: skip
    assert code == 0, err
    return stdout.replace(str(out), "OUT"), pd.read_csv(out)


@pytest.mark.parametrize("args", RUNS, ids=[a[1] for a in RUNS])
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_run_by_default_answers_as_memory(census, tmp_path, capsys, args, suffix) -> None:
    _csv, domain, folder = census
    data = folder / f"census{suffix}"
    default = _run(capsys, data, domain, tmp_path / "d.csv", args)
    memory = _run(capsys, data, domain, tmp_path / "m.csv", [*args, "--engine", "memory"])
    assert default[0] == memory[0]  # the plan, the budget line
    pd.testing.assert_frame_equal(default[1], memory[1])


@pytest.mark.parametrize("policy", ["drop", "clamp"])
def test_on_invalid_by_default_answers_as_memory(census, tmp_path, capsys, policy) -> None:
    _, domain, folder = census
    args = ["--workload", "histogram:age,sex", "--plan", "identity", "--on-invalid", policy]
    default = _run(capsys, folder / "dirty.csv", domain, tmp_path / "d.csv", args)
    memory = _run(capsys, folder / "dirty.csv", domain, tmp_path / "m.csv",
                  [*args, "--engine", "memory"])  # fmt: skip
    pd.testing.assert_frame_equal(default[1], memory[1])
    assert default[1]["answer"].sum() != 0


def test_refusals_read_as_memory(census, capsys) -> None:
    _, domain, folder = census
    for extra in ([], ["--show-bad-values"]):
        seen = []
        for engine in ([], ["--engine", "memory"]):
            code, _out, err = call(capsys, "run", "--no-ledger", "--data",
                                  str(folder / "dirty.csv"), "--domain", str(domain),
                                  "--workload", "histogram:age", "--epsilon", "1",
                                  *extra, *engine)  # fmt: skip
            assert code != 0 and len(err.strip().splitlines()) == 1
            seen.append(err)
        assert seen[0] == seen[1]
        assert "column 'age'" in seen[0]


@pytest.mark.parametrize("flag", ["--dry-run", "--explain"])
def test_dry_run_and_explain_by_default(census, capsys, flag) -> None:
    csv, domain, _ = census
    outs = []
    for engine in ([], ["--engine", "memory"]):
        code, out, err = call(capsys, "run", "--no-ledger", "--data", str(csv), "--domain",
                              str(domain), "--workload", "cdf:salary", "--epsilon", "0.5",
                              flag, *engine)  # fmt: skip
        assert code == 0, err
        outs.append(out)
    assert outs[0] == outs[1] and "nothing spent" in outs[0]


def test_synth_and_budget_by_default(census, tmp_path, capsys) -> None:
    csv, domain, _ = census
    ledger = tmp_path / "ledger.sqlite"
    out = tmp_path / "synthetic.csv"
    code, stdout, err = call(capsys, "synth", "--data", str(csv), "--domain", str(domain),
                             "--epsilon", "2", "--delta", "1e-6", "--rows", "200", "--seed",
                             "3", "--out", str(out), "--ledger", str(ledger),
                             "--total", "5")  # fmt: skip
    assert code == 0, err
    frame = pd.read_csv(out)
    assert len(frame) == 200 and set(frame.columns) == set(json.loads(domain.read_text()))
    code, stdout, err = call(capsys, "budget", "--ledger", str(ledger))
    assert code == 0 and "census" in stdout


def test_without_duckdb_a_file_is_read_into_memory_with_a_note(
    census, tmp_path, capsys, monkeypatch
) -> None:
    csv, domain, _ = census
    args = ["--workload", "histogram:race", "--plan", "identity"]
    with_duckdb = _run(capsys, csv, domain, tmp_path / "a.csv", args)
    find_spec = importlib.util.find_spec  # DuckDB as if not installed

    def without_duckdb(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "duckdb" else find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_duckdb)
    assert not ektelo.engines.duckdb_installed()
    code, _stdout, err = call(capsys, "run", "--no-ledger", "--data", str(csv), "--domain",
                             str(domain), "--epsilon", "1", "--seed", "7", "--out",
                             str(tmp_path / "b.csv"), *args)  # fmt: skip
    assert code == 0
    note = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(note) == 1 and "DuckDB" in note[0] and "not installed" in note[0]
    pd.testing.assert_frame_equal(with_duckdb[1], pd.read_csv(tmp_path / "b.csv"))
    with warnings.catch_warnings(record=True) as caught:  # Python: one warning
        warnings.simplefilter("always")
        Session(csv, domain, epsilon=1.0)
        ektelo.protect(str(csv), ektelo.Domain.from_json(domain), epsilon=1.0)
    assert len([w for w in caught if "not installed" in str(w.message)]) == 2


def test_the_default_engine_rule(census) -> None:
    csv, domain, folder = census
    d = ektelo.Domain.from_json(domain)
    assert engines.default_engine(pd.read_csv(csv)) == "memory"
    assert engines.default_engine(str(csv)) == engines.default_engine(csv) == "duckdb"
    assert engines.default_engine(folder / "census.parquet") == "duckdb"
    assert engines.default_engine("duckdb:///x.db?table=t") == "duckdb"
    assert engines.default_engine(folder / "notes.txt") == "memory"  # DuckDB reads no .txt
    chosen, _ = engines.open_table(csv, d)
    assert chosen.name == "duckdb"
    chosen, _ = engines.open_table(csv, d, engine="memory")
    assert chosen.name == "memory"


def test_session_reads_a_file_into_memory_only_when_asked(census, monkeypatch) -> None:
    csv, domain, _ = census

    def no_pandas(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the file was read into memory")

    monkeypatch.setattr("ektelo.session.load_table", no_pandas)
    Session(csv, domain, epsilon=1.0)  # DuckDB: the file stays where it is
    with pytest.raises(AssertionError, match="read into memory"):
        Session(csv, domain, epsilon=1.0, engine="memory")


def test_a_csv_text_that_is_not_a_number_is_never_an_engine_error(tmp_path) -> None:
    """DuckDB 2 pushed TRY_CAST into the CSV reader as a strict cast: a 'True'
    in a numeric column raised inside vectorize (a data-dependent error)."""
    (tmp_path / "t.csv").write_text("flag,sex\n1,F\nTrue,F\n0,M\nabc,M\n")
    d = ektelo.Domain.from_dict({"flag": 2, "sex": {"values": ["F", "M"]}})
    from ektelo.matrix import Identity

    answers = []
    for engine in ("duckdb", "memory"):
        t = ektelo.protect(str(tmp_path / "t.csv"), d, epsilon=2e6, seed=1, on_invalid="drop",
                           engine=engine)  # fmt: skip
        answers.append(t.vectorize().laplace(Identity(4), eps=1e6).answers)
    assert answers[0].tolist() == answers[1].tolist()
    assert answers[0].round().tolist() == [0.0, 1.0, 1.0, 0.0]  # (0,M) and (1,F) kept
    with pytest.raises(ektelo.domain.DomainValueError):
        ektelo.protect(str(tmp_path / "t.csv"), d, epsilon=1.0)
