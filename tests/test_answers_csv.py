"""The answers' CSV (`ektelo.cli.write_csv`, issue #25): DuckDB's vectorised
writer where its text is pandas' `to_csv(index=False)` exactly, pandas'
otherwise — the file is the same text either way (checked here against a
literal and against pandas)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ektelo.cli import main, write_csv


def answers() -> pd.DataFrame:
    return pd.DataFrame({
        "marginal": pd.Categorical(["a×b", "a×b", "b", "b"]),
        "label": pd.Categorical.from_codes([0, 1, -1, 2], ["x,y", 'say "hi"', "ünï×"]),
        "code": pd.array([1, None, 127, -3], dtype="Int8"),
        "big": pd.array([2**40, 0, None, 7], dtype="Int64"),
        "answer": [1e20, 0.1 + 0.2, -0.0, 106.0],
        "std_error": [np.nan, 1e-5, 5e-324, np.inf],
        "ci_method": pd.Categorical.from_codes([0, 0, 0, 0], ["exact Gaussian"]),
    })  # fmt: skip


EXPECTED = (
    "marginal,label,code,big,answer,std_error,ci_method\n"
    'a×b,"x,y",1,1099511627776,1e+20,,exact Gaussian\n'
    'a×b,"say ""hi""",,0,0.30000000000000004,1e-05,exact Gaussian\n'
    "b,,127,,-0.0,5e-324,exact Gaussian\n"
    "b,ünï×,-3,7,106.0,inf,exact Gaussian\n"
)


def test_the_text_is_pandas_text(tmp_path: Path) -> None:
    frame = answers()
    write_csv(frame, tmp_path / "a.csv")
    text = (tmp_path / "a.csv").read_text()
    assert text == EXPECTED == frame.to_csv(index=False)


def test_frames_duckdb_would_write_differently_are_still_pandas_text(tmp_path: Path) -> None:
    """An empty label, booleans, mixed objects and a lone column: pandas' text."""
    frames = [
        answers().assign(label=pd.Categorical.from_codes([0, 1, -1, 0], ["", "z"])),
        answers().assign(flag=[True, False, True, False]),
        answers().assign(mixed=[1, "x", None, 2.5]),
        pd.DataFrame({"answer": [1.5, np.nan, 3.0]}),
    ]
    for i, frame in enumerate(frames):
        write_csv(frame, tmp_path / f"{i}.csv")
        assert (tmp_path / f"{i}.csv").read_text() == frame.to_csv(index=False), i


def test_run_writes_the_answers_as_before(tmp_path: Path, capsys) -> None:
    """`ektelo run --out x.csv` on a labelled, coded table: the file is the
    session frame's pandas text (the categorical columns read back as text)."""
    data, domain = tmp_path / "t.csv", tmp_path / "t.json"
    pd.DataFrame({"sex": ["F", "M", "M", "F"] * 25, "rate": [0, 1, 2, 3] * 25}).to_csv(
        data, index=False)
    domain.write_text('{"sex": {"values": ["F", "M"]}, "rate": 4}')
    out = tmp_path / "out.csv"
    code = main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                 "--workload", "marginals:1:sex,rate", "--epsilon", "1", "--seed", "3",
                 "--out", str(out)])  # fmt: skip
    assert code == 0, capsys.readouterr().err
    lines = out.read_text().splitlines()
    assert lines[0] == "marginal,sex,rate,answer,std_error,ci_low,ci_high,ci_method"
    assert [ln.split(",")[:3] for ln in lines[1:]] == [
        ["sex", "F", ""], ["sex", "M", ""], ["rate", "", "0"], ["rate", "", "1"],
        ["rate", "", "2"], ["rate", "", "3"]]  # fmt: skip
    frame = pd.read_csv(out)
    assert frame["answer"].dtype == np.float64 and frame["ci_method"].nunique() == 1
