"""Answers as NumPy columns (#41): `ektelo.columns.frame_text` prints a
table as pandas' ``to_string`` does (the CLI's 20 rows, floats to 2
decimals) without importing pandas, and `Columns.to_frame` builds the
DataFrame `Session.ask` returns. Every comparison is against pandas itself."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ektelo import columns as cols
from ektelo.cli import main
from ektelo.columns import Category, Columns, NullableInt, frame_text
from ektelo.domain import Domain
from ektelo.workload import spec


def _pandas_text(table: Columns) -> str:
    """What pandas prints for the table (frame_text's fallback, forced)."""
    return frame_text(table.to_frame())


def _random_column(rng: np.random.Generator, n: int) -> object:
    kind = rng.integers(6)
    if kind == 0:  # floats: signs, widths, NaN, ±inf, -0.0
        x = rng.normal(0, 10.0 ** rng.integers(-3, 9), n)
        x[rng.random(n) < 0.1] = np.nan
        if n > 2 and rng.random() < 0.3:
            x[0], x[1] = np.inf if rng.random() < 0.5 else -np.inf, -0.0
        return x
    if kind == 1:  # nullable integers of every width, NA
        width = rng.choice([np.int8, np.int16, np.int32, np.int64])
        hi = min(np.iinfo(width).max, 10 ** int(rng.integers(1, 6)))
        return NullableInt(rng.integers(-hi, hi, n).astype(width), rng.random(n) < 0.2)
    if kind == 2:  # integer ndarrays
        return rng.integers(-(10 ** int(rng.integers(1, 8))), 10 ** 4, n)
    if kind == 3:  # categoricals of labels (unicode too), NA
        labels = tuple(rng.choice(["M", "F", "white", "other race", "a×b", "total",
                                   "Laplace-tail width (conservative for sums)", "x"],
                                  size=int(rng.integers(1, 5)), replace=False))
        return Category(rng.integers(-1, len(labels), n), labels)
    if kind == 4:  # bin edges: floats with NaN
        return np.where(rng.random(n) < 0.3, np.nan, rng.integers(0, 100, n) * 2.5)
    return np.round(rng.random(n), 2)


@pytest.mark.parametrize("seed", range(40))
def test_frame_text_is_pandas_text(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.choice([1, 2, 3, 9, 19, 20, 21, 22, 40, 101]))
    names = ["age", "a", "answer", "std_error", "marginal", "x_lo", "ci_method", "q"]
    table = Columns({(str(rng.choice(names)) + str(j) if rng.random() < 0.6 else "abcdefg"[j]):
                     _random_column(rng, n) for j in range(int(rng.integers(1, 7)))})
    assert cols.plain_text(table, cols.MAX_ROWS) is not None  # printed without pandas
    assert frame_text(table) == _pandas_text(table)


def test_a_cut_table_shows_pandas_dots_in_narrow_columns_too() -> None:
    """Beyond 20 rows pandas shows 10 + 10 with a row of dots: '...', '..'
    or '.' as the column's width allows."""
    n = 45
    table = Columns({"s": Category(np.arange(n) % 2, ("M", "F")),  # width 1
                     "ab": Category(np.arange(n) % 2, ("xy", "z")),  # width 2
                     "c": np.arange(n) % 10,  # width 2 (" c")
                     "d": NullableInt(np.arange(n, dtype=np.int8), np.zeros(n, dtype=bool)),
                     "e": np.linspace(-1, 1, n)})
    text = frame_text(table)
    assert cols.plain_text(table, cols.MAX_ROWS) is not None
    assert text == _pandas_text(table)
    assert len(text.splitlines()) == 1 + 20 + 1


def test_what_frame_text_leaves_to_pandas_is_printed_by_pandas() -> None:
    """Values pandas would cut (longer than display.max_colwidth), object
    columns and empty tables: pandas prints them, as before."""
    long = Category(np.zeros(3, dtype=np.int8), ("x" * 60,))
    for table in (Columns({"a": np.arange(3.0), "m": long}),
                  Columns({"a": ["u", 1, None]}), Columns({"a": np.zeros(0)})):
        assert cols.plain_text(table, cols.MAX_ROWS) is None
        assert frame_text(table) == _pandas_text(table)


DOMAIN = Domain.from_json({
    "age": {"range": [0, 99]}, "sex": {"values": ["M", "F"]},
    "race": {"values": ["white", "black", "other race"]},
    "pay": {"bins": [0, 10, 20, 50, 100]}, "kids": {"values": [0, 1, 2, 5]},
    "score": {"range": [-5, 5]},
})
SPECS = ["histogram:age", "histogram:race,sex", "histogram:pay", "histogram:kids,score",
         "cdf:age", "cdf:pay", "cdf:kids by race", "cdf:pay by sex,kids", "ranges:kids",
         "ranges:pay", "random-ranges:age,sex:30:3", "marginals:2:sex,race,kids",
         "sum:age by sex", "mean:age by race", "sum,count,mean:pay by sex with totals",
         "quantile:age@0.5,0.9 by sex"]


@pytest.mark.parametrize("text", SPECS)
def test_a_questions_rows_are_pandas_columns_of_the_documented_types(text: str) -> None:
    q = spec.parse(text, DOMAIN)
    frame = q.rows
    assert frame is q.rows and len(frame) == q.matrix.shape[0] == len(q.table)
    assert frame.attrs["shape"] == q.shape
    for name in frame.columns:
        dtype = frame[name].dtype
        if name in ("age", "score", "kids") or (name.endswith("_at_most") and "kids" in name):
            assert isinstance(dtype, pd.Int8Dtype | pd.Int64Dtype), (name, dtype)
        elif name in ("sex", "race", "marginal", "statistic"):
            assert isinstance(dtype, pd.CategoricalDtype), (name, dtype)
        elif name.startswith("pay_"):
            assert dtype == np.float64 or isinstance(dtype, pd.Int64Dtype), (name, dtype)
    answers = np.linspace(-3, 1e4, len(frame))
    from ektelo.answers import tidy

    table = tidy(q, answers, np.full(len(frame), 1.5), "exact Laplace", 0.05, False, False,
                 False)
    assert frame_text(table) == _pandas_text(table)
    assert list(table.to_frame().columns) == [*frame.columns, "answer", "std_error", "ci_low",
                                              "ci_high", "ci_method"]


CLI_WORKLOADS = [
    ["histogram:age", "--plan", "identity"], ["histogram:age"], ["histogram:race,sex"],
    ["histogram:pay", "--nonnegative"], ["histogram:score", "--round"], ["cdf:age"],
    ["cdf:kids by race"], ["cdf:pay by sex,kids"], ["ranges:kids"], ["marginals:2:sex,race"],
    ["sum:age by sex"], ["quantile:age@0.5 by sex"], ["histogram:age", "--plan", "dawa"],
    ["histogram:age", "--where", "sex == 'M'"], ["histogram:age", "--alpha", "0.1"],
]


@pytest.mark.parametrize("workload", CLI_WORKLOADS, ids=lambda w: " ".join(w))
def test_the_cli_prints_what_pandas_printed(tmp_path: Path, workload: list[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """`ektelo run` prints its answers byte for byte as pandas' to_string did
    (the same seeded run, once through frame_text and once through pandas)."""
    rng = np.random.default_rng(5)
    rows = ["age,sex,race,pay,kids,score"] + [
        f"{rng.integers(100)},{rng.choice(['M', 'F'])},{rng.choice(['white', 'black'])},"
        f"{rng.uniform(0, 100):.2f},{rng.choice([0, 1, 2, 5])},{rng.integers(-5, 6)}"
        for _ in range(200)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "t.json").write_text(json.dumps({
        "age": {"range": [0, 99]}, "sex": {"values": ["M", "F"]},
        "race": {"values": ["white", "black", "other race"]},
        "pay": {"bins": [0, 10, 20, 50, 100]}, "kids": {"values": [0, 1, 2, 5]},
        "score": {"range": [-5, 5]}}))
    monkeypatch.chdir(tmp_path)
    argv = ["run", "--no-ledger", "--data", "t.csv", "--domain", "t.json", "--epsilon", "1",
            "--seed", "3", "--workload", *workload]

    def run() -> str:
        out = io.StringIO()
        with redirect_stdout(out):
            assert main(argv) == 0
        return out.getvalue()

    ours = run()
    monkeypatch.setattr(cols, "plain_text", lambda table, max_rows: None)  # pandas prints
    assert ours == run()
    assert "answer" in ours.splitlines()[1]
