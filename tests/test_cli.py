"""The `ektelo` command end to end: generated table and the shared adult data;
every bad input gives one clear line on stderr and a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ektelo.cli import main, parse_where
from ektelo.domain import Domain

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

ADULT = DATA / "adult"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ektelo.cli", *args],
        capture_output=True, text=True, cwd=cwd, timeout=300,
    )


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process; returns (exit code, stdout, stderr)."""
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def census(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("census")
    csv = folder / "census.csv"
    assert main(["generate", "--out", str(csv), "--rows", "5000"]) == 0
    return csv, csv.with_suffix(".domain.json")


def test_run_writes_csv_with_exact_error_bars(census, tmp_path, capsys):
    data, domain = census
    out = tmp_path / "answers.csv"
    code = main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                 "--workload", "cdf:salary by sex", "--plan", "hb_striped_kron",
                 "--epsilon", "0.5", "--out", str(out), "--seed", "3"])
    assert code == 0
    frame = pd.read_csv(out)
    assert list(frame.columns) == ["salary_below", "sex", "answer", "std_error", "ci_low",
                                   "ci_high", "ci_method"]
    assert len(frame) == 500 * 3
    assert frame["std_error"].gt(0).all()
    assert (frame["ci_low"] < frame["answer"]).all() and (frame["answer"] < frame["ci_high"]).all()
    assert (frame["ci_method"] == "Laplace-tail width (conservative for sums)").all()
    # the last prefix over all sexes (NA) counts every row, up to noise
    last = frame.iloc[-1]
    assert pd.isna(last["sex"]) and abs(last["answer"] - 5000) < 10 * last["std_error"]
    printed = capsys.readouterr().out
    assert "spent ε=0.5" in printed and "remaining ε=0" in printed


def test_run_json_records_with_where_and_auto_plan(census, tmp_path, capsys):
    data, domain = census
    out = tmp_path / "answers.json"
    code = main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                 "--workload", "cdf:salary", "--epsilon", "1", "--where",
                 "sex == 'M' and age >= 30 and age < 40", "--out", str(out)])
    assert code == 0
    doc = json.loads(out.read_text())
    budget = doc["meta"]["budget"]
    assert budget["spent"] + budget["remaining"] == pytest.approx(budget["total"])
    assert budget["spent"] == pytest.approx(1.0)
    assert len(doc["answers"]) == 500
    first = doc["answers"][0]
    assert set(first) >= {"salary_below", "answer", "std_error", "ci_low", "ci_high", "ci_method"}
    assert all(a["ci_method"] for a in doc["answers"])  # never a silent blank
    assert "auto" not in doc["meta"]["plan"] and "plan:" in capsys.readouterr().out


@pytest.mark.parametrize(
    "spec, plan",
    [("identity:sex,race", "identity"), ("histogram:sex,race", "auto"),
     ("marginals:1:sex,race,marital", "identity"), ("cdf:age by sex,race", "auto"),
     ("prefix:age|sex", "hb_striped_kron"),
     ("random-ranges:age,salary:20:3", "hb"), ("ranges:race", "h2")],
)
def test_workload_specs(census, tmp_path, spec, plan):
    data, domain = census
    out = tmp_path / "a.csv"
    assert main(["run", "--no-ledger",
                 "--data", str(data), "--domain", str(domain), "--workload", spec,
                 "--plan", plan, "--epsilon", "1", "--seed", "3", "--out", str(out)]) == 0
    assert len(pd.read_csv(out)) > 0


def test_range_file_workload(census, tmp_path):
    data, domain = census
    ranges = tmp_path / "ranges.csv"
    ranges.write_text("salary_lo,salary_hi,age_lo,age_hi\n0,50000,18,29\n50000,100000,30,64\n")
    out = tmp_path / "a.csv"
    assert main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain), "--workload",
                 f"file:{ranges}", "--plan", "hb", "--epsilon", "1", "--out", str(out)]) == 0
    assert len(pd.read_csv(out)) == 2


@pytest.mark.skipif(not ADULT.exists(), reason="shared adult data not available")
def test_adult_end_to_end_through_the_console(tmp_path):
    out = tmp_path / "adult.csv"
    result = run_cli("run", "--no-ledger", "--data", str(ADULT / "adult.csv"), "--domain",
                     str(ADULT / "adult-domain.json"), "--workload", "identity:race,sex",
                     "--plan", "identity", "--epsilon", "1", "--out", str(out), "--seed", "3")
    assert result.returncode == 0, result.stderr
    frame = pd.read_csv(out)
    assert len(frame) == 10
    assert abs(frame["answer"].sum() - 48842) < 200
    assert "spent ε=1" in result.stdout


BAD = [
    (["--data", "missing.csv"], "data file not found"),
    (["--domain", "missing.json"], "domain file not found"),
    (["--workload", "identity:nosuch"], "unknown attribute"),
    (["--workload", "cube:sex"], "unknown workload kind"),
    (["--plan", "nosuch"], "unknown plan"),
    (["--where", "nosuch == 1"], "nosuch"),
    (["--where", "sex = 'M'"], "cannot parse"),
]


@pytest.mark.parametrize("override, message", BAD)
def test_bad_input_gives_one_line_and_nonzero_exit(census, capsys, override, message):
    data, domain = census
    args = {"--data": str(data), "--domain": str(domain), "--workload": "identity:sex",
            "--plan": "identity", "--epsilon": "1"}
    args.update(dict(zip(override[::2], override[1::2], strict=True)))
    flat = [item for pair in args.items() for item in pair]
    code, _, err = call(capsys, "run", "--no-ledger", *flat)
    assert code != 0
    assert message in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("eps", ["0", "-1", "nan", "inf", "abc"])
def test_bad_epsilon(census, capsys, eps):
    data, domain = census
    code, _, err = call(capsys, "run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                        "--workload", "identity:sex", "--epsilon", eps)
    assert code != 0
    assert "epsilon" in err
    assert "Traceback" not in err


def test_out_of_domain_value_and_malformed_files(census, tmp_path, capsys):
    _, domain = census
    common = ("--workload", "identity:sex", "--epsilon", "1")
    bad = tmp_path / "bad.csv"
    bad.write_text("age,sex,race,marital,salary\n30,X,white,married,1000\n")
    code, _, err = call(capsys, "run", "--no-ledger",
                        "--data", str(bad), "--domain", str(domain), *common)
    assert code != 0 and "column 'sex': values not among the labels" in err and "'X'" not in err
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    code, _, err = call(capsys, "run", "--no-ledger",
                        "--data", str(empty), "--domain", str(domain), *common)
    assert code != 0 and "empty" in err
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    code, _, err = call(capsys, "run", "--no-ledger",
                        "--data", str(bad), "--domain", str(broken), *common)
    assert code != 0 and "JSON" in err


def _with_private_outliers(census: tuple[Path, Path], tmp_path: Path) -> Path:
    """The census table with three distinctive out-of-domain ages."""
    data, _ = census
    frame = pd.read_csv(data)
    frame["age"] = frame["age"].astype(float)
    frame.loc[[749, 750, 4998], "age"] = [-57.5999908, 120.25, 3.75]
    frame.loc[[12], "sex"] = ["male"]
    out = tmp_path / "outliers.csv"
    frame.to_csv(out, index=False)
    return out


def test_bad_values_are_counted_not_shown(census, tmp_path, capsys):
    _, domain = census
    data = _with_private_outliers(census, tmp_path)
    args = ("run", "--no-ledger",  # the question reads age and sex: both are checked
            "--data", str(data), "--domain", str(domain), "--workload", "identity:age,sex",
            "--plan", "identity", "--epsilon", "1")
    code, out, err = call(capsys, *args)
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "column 'age': values outside the domain" in err
    assert "--show-bad-values lists them" in err
    shown = (err + out).replace(str(data), "FILE")  # the temporary path may hold digits
    for private in ("57.59", "120.25", "3.75", "749", "750", "4998", " 3 "):
        assert private not in shown
    code, out, err = call(capsys, *args, "--show-bad-values")
    assert code != 0 and len(err.strip().splitlines()) == 1
    assert "column 'age': 3 values outside the domain" in err
    assert "row 749 = -57.5999908" in err and "row 750 = 120.25" in err and "row 4998 = 3.75" in err
    fixed = pd.read_csv(data).assign(age=30)
    fixed.to_csv(data, index=False)
    code, _, err = call(capsys, *args)  # the next column: the labels, counted
    assert "column 'sex': values not among the labels ['F', 'M']" in err and "male" not in err


def test_booleans_in_a_coded_column_are_refused(tmp_path, capsys):
    """pandas reads a CSV's True/False as booleans, which were taken as the codes 1/0."""
    (tmp_path / "d.json").write_text(json.dumps({"flag": 2, "sex": {"values": ["F", "M"]}}))
    (tmp_path / "t.csv").write_text("flag,sex\nTrue,F\nFalse,M\nTrue,F\n")
    code, _, err = call(capsys, "run", "--no-ledger", "--data", str(tmp_path / "t.csv"), "--domain",
                        str(tmp_path / "d.json"), "--workload", "identity:flag", "--plan",
                        "identity", "--epsilon", "1")
    assert code != 0 and "column 'flag': boolean values (True/False" in err


def test_repeated_csv_column_is_refused(census, tmp_path, capsys):
    """pandas renames `age,...,age` to `age, ..., age.1` and the copy was ignored."""
    data, domain = census
    frame = pd.read_csv(data)
    dup = tmp_path / "dup.csv"
    with open(dup, "w") as fh:
        fh.write(",".join([*frame.columns, "age"]) + "\n")
        for row in frame.head(5).itertuples(index=False):
            fh.write(",".join(map(str, [*row, 99])) + "\n")
    code, _, err = call(capsys, "run", "--no-ledger", "--data", str(dup), "--domain", str(domain),
                        "--workload", "identity:sex", "--plan", "identity", "--epsilon", "1")
    assert code != 0 and "repeats column name(s) ['age']" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "param, needle",
    [("rounds=1e8", "rounds must be an integer in 1..1,000"),
     ("rounds=100000000", "rounds must be an integer in 1..1,000"),
     ("passes=100000000", "passes must be an integer in 1..1,000"),
     ("ratio=2", "ratio must lie strictly between 0 and 1")],
)  # fmt: skip
def test_absurd_mwem_params_are_refused_at_once(census, capsys, param, needle):
    """`--param rounds=100000000` used to run for hours after buying the total."""
    data, domain = census
    code, out, err = call(capsys, "run", "--no-ledger",
                          "--data", str(data), "--domain", str(domain),
                          "--workload", "prefix:age", "--plan", "mwem", "--epsilon", "1",
                          "--param", param)
    assert code != 0 and needle in err
    assert "budget:" not in out


def test_debug_shows_the_traceback(census):
    data, domain = census
    result = run_cli("--debug", "run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                     "--workload", "identity:nosuch", "--epsilon", "1")
    assert result.returncode != 0 and "Traceback" in result.stderr


def test_plans_and_datasets_listings(capsys):
    assert main(["plans"]) == 0
    listing = capsys.readouterr().out
    for name in ("identity", "dawa", "mwem_d", "cdf_estimator", "nb_select_ls"):
        assert name in listing
    assert "Li, Hay & Miklau" in listing
    assert main(["datasets"]) == 0
    assert "census-like" in capsys.readouterr().out


def test_where_parser_builds_kernel_predicates():
    pred = parse_where("sex == 'M' and (30 <= age < 40 or race in ('a', 'b')) and not x != 2")
    assert "sex" in repr(pred) and "age" in repr(pred) and "race" in repr(pred)
    with pytest.raises(Exception, match="literal"):
        parse_where("age == other_fn()")


def test_progress_on_a_terminal_and_as_log_lines(caplog, monkeypatch):
    """Slow steps show tqdm's elapsed time on a terminal and log lines when piped."""
    import io
    import logging
    import time

    from ektelo.session import _Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    with _Progress("running test", True, delay=0.0):
        time.sleep(0.6)
    assert "running test" in terminal.getvalue()
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # piped: periodic log lines instead
    with caplog.at_level(logging.WARNING, logger="ektelo"), \
            _Progress("running test", True, delay=0.0, every=0.2):
        time.sleep(0.5)
    assert sum("still running running test" in r.getMessage() for r in caplog.records) >= 2
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ektelo"), _Progress("quick", True):
        pass  # fast steps say nothing
    assert not caplog.records


def test_datasets_take_an_explicit_data_dir(capsys, tmp_path):
    code, out, _ = call(capsys, "datasets", "--data-dir", str(tmp_path))
    assert code == 0
    assert "census-like" in out and "generated" in out
    assert "adult" in out and f"not in {tmp_path}" in out
    if (DATA / "adult" / "adult.csv").exists():
        code, out, _ = call(capsys, "datasets", "--data-dir", str(DATA))
        assert code == 0 and str(DATA / "adult" / "adult.csv") in out
    code, _, err = call(capsys, "datasets", "--data-dir", str(tmp_path / "nosuch"))
    assert code == 2 and "data directory not found" in err


def test_the_experiments_are_not_a_library_command(capsys):
    code, _, err = call(capsys, "experiment", "dpbench")
    assert code == 2 and "invalid choice" in err
    result = subprocess.run(
        [sys.executable, "-c",
         "import sys, ektelo.cli, ektelo.demo, ektelo.datasets, ektelo.plans; "
         "print(sorted(m for m in sys.modules if m.split('.')[0] in "
         "('experiments', 'matplotlib', 'threadpoolctl')))"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr


def test_experiments_run_from_the_repository_root():
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "experiments", "--help"],
        capture_output=True, text=True, cwd=root, timeout=120,
    )
    assert result.returncode == 0 and "dpbench" in result.stdout and "--quick" in result.stdout
    result = subprocess.run(
        [sys.executable, "-m", "experiments", "nosuch"],
        capture_output=True, text=True, cwd=root, timeout=120,
    )
    assert result.returncode == 2 and "invalid choice" in result.stderr


# -- issue #27: the analyst's command line ------------------------------------------------
def _run_args(census: tuple[Path, Path], *extra: str) -> list[str]:
    data, domain = census
    return ["run", "--data", str(data), "--domain", str(domain), *extra]


def test_ledger_carries_the_budget_across_runs_and_refuses_at_the_cap(census, tmp_path, capsys):
    ledger = str(tmp_path / "ledger.sqlite")
    base = _run_args(census, "--workload", "histogram:sex", "--ledger", ledger)
    code, _, err = call(capsys, *base, "--epsilon", "0.4")
    assert code == 2 and "--total" in err  # the first run must set the dataset's total
    code, out, _ = call(capsys, *base, "--epsilon", "0.4", "--total", "1")
    assert code == 0 and "spent ε=0.4, remaining ε=0.6" in out
    code, out, _ = call(capsys, *base, "--epsilon", "0.4")
    assert code == 0 and "spent ε=0.8" in out
    code, out, err = call(capsys, *base, "--epsilon", "0.4")
    assert code == 2 and "budget exceeded" in err and "nothing was spent" in err
    code, out, _ = call(capsys, "budget", "--ledger", ledger)
    assert code == 0 and "census" in out and "remaining ε=0.2" in out
    code, out, _ = call(capsys, "audit", "verify", "--ledger", ledger)
    assert code == 0 and "hash chain intact" in out
    code, _, err = call(capsys, *base, "--epsilon", "0.1", "--total", "5")
    assert code == 2 and "a total never changes" in err


def test_unknown_output_suffix_refused_before_spending(census, tmp_path, capsys):
    ledger = str(tmp_path / "ledger.sqlite")
    base = _run_args(census, "--workload", "histogram:sex", "--ledger", ledger, "--total", "1",
                     "--epsilon", "0.5")
    for bad in ("cdf.png", "answers.xlsx"):
        code, _, err = call(capsys, *base, "--out", str(tmp_path / bad))
        assert code == 2 and "unknown output type" in err and "nothing was spent" in err
    assert not (tmp_path / "ledger.sqlite").exists()  # not even a ledger entry
    for good in ("a.csv", "a.json", "a.parquet"):
        assert call(capsys, *base, "--no-ledger", "--out", str(tmp_path / good))[0] == 0
    assert len(pd.read_parquet(tmp_path / "a.parquet")) == 2
    records = json.loads((tmp_path / "a.json").read_text())["answers"]
    assert [r["sex"] for r in records] == ["F", "M"]


def test_dry_run_and_explain_spend_nothing(census, tmp_path, capsys):
    ledger = str(tmp_path / "ledger.sqlite")
    base = _run_args(census, "--workload", "cdf:age by sex", "--ledger", ledger, "--total", "1",
                     "--epsilon", "0.5")
    code, out, _ = call(capsys, *base, "--explain")
    assert code == 0 and "candidates" in out and "hdmm" in out and "expected std error" in out
    assert "spent ε=0," in out and "nothing spent" in out
    code, out, _ = call(capsys, *base, "--dry-run")
    assert code == 0 and "interval ±" in out and "candidates" not in out
    code, out, _ = call(capsys, "budget", "--ledger", ledger)
    assert "spent ε=0 " in out


def test_delta_switches_to_zcdp_and_gaussian(census, tmp_path, capsys):
    out = tmp_path / "m.csv"
    code, printed, _ = call(capsys, *_run_args(census, "--workload", "marginals:2:sex,race,marital",
                                               "--no-ledger", "--epsilon", "1", "--delta", "1e-9",
                                               "--out", str(out)))
    assert code == 0 and "ρ=" in printed and "guarantees (1, 1e-09)-DP" in printed
    assert (pd.read_csv(out)["ci_method"] == "exact Gaussian").all()


def test_plot_draws_the_answers(census, tmp_path, capsys):
    for spec in ("histogram:race", "cdf:age by sex", "histogram:sex,race"):
        plot = tmp_path / f"{spec.split(':')[0]}{spec.count(',')}.png"
        code, _, err = call(capsys, *_run_args(census, "--workload", spec, "--no-ledger",
                                                 "--epsilon", "1", "--plot", str(plot)))
        assert code == 0, err
        assert plot.stat().st_size > 5000 and plot.read_bytes()[:4] == b"\x89PNG"


def test_debug_anywhere_and_quiet_on_a_closed_pipe(census):
    data, domain = census
    result = run_cli("run", "--data", str(data), "--domain", str(domain), "--workload",
                     "histogram:nosuch", "--epsilon", "1", "--no-ledger", "--debug")
    assert result.returncode != 0 and "Traceback" in result.stderr
    pipe = subprocess.run(
        f"{sys.executable} -m ektelo.cli run --no-ledger --data {data} --domain {domain} "
        f"--workload cdf:salary --plan identity --epsilon 1 | head -2",
        shell=True, capture_output=True, text=True, timeout=300,
    )
    assert len(pipe.stdout.splitlines()) == 2
    assert "Broken pipe" not in pipe.stderr and "Traceback" not in pipe.stderr


def test_by_separator_and_aliases_are_the_same_question(census, tmp_path, capsys):
    frames = []
    for spec in ("cdf:age by sex", "prefix:age|sex"):
        out = tmp_path / f"{len(frames)}.csv"
        assert call(capsys, *_run_args(census, "--workload", spec, "--no-ledger", "--seed", "4",
                                       "--plan", "hb_striped_kron", "--epsilon", "1",
                                       "--out", str(out)))[0] == 0
        frames.append(pd.read_csv(out))
    pd.testing.assert_frame_equal(frames[0], frames[1])


def test_binned_where_message_in_the_filter_syntax(census, capsys):
    code, _, err = call(capsys, *_run_args(census, "--workload", "histogram:sex", "--no-ledger",
                                           "--epsilon", "1", "--where", "salary > 0"))
    assert code == 2 and "`salary > 0`" in err and "salary >= 1000" in err
    assert "col(" not in err  # not the Python API's syntax


def test_domain_init_writes_a_template_with_a_loud_note(tmp_path, capsys):
    data = tmp_path / "survey.csv"
    pd.DataFrame({"rate_marriage": [1, 5, 3, 4], "religious": ["yes", "no", "no", ""],
                  "affairs": [0.0, 0.4, 16.5, 2.3]}).to_csv(data, index=False)
    code, _, err = call(capsys, "domain", "init", str(data))
    assert code == 0 and "PRIVATE DATA" in err and "Replace every one of them" in err
    spec = json.loads((tmp_path / "survey.domain.json").read_text())
    assert "private" in spec["$comment"]
    assert spec["rate_marriage"] == {"range": [1, 5], "width": 1}
    assert spec["religious"] == {"values": ["no", "yes"]}
    assert spec["affairs"] == {"values": [0, 0.4, 2.3, 16.5]}  # few values: categories
    assert call(capsys, "domain", "init", str(data))[0] == 2  # no silent overwrite
    # the template is refused as it is: one line saying what to do
    template = tmp_path / "survey.domain.json"
    args = ("run", "--no-ledger", "--data", str(data), "--domain", str(template),
            "--workload", "histogram:rate_marriage", "--epsilon", "1", "--on-invalid", "drop")
    code, _, err = call(capsys, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "template read from the private data" in err and "delete" in err
    # reviewed (the note deleted), it is a working domain
    del spec["$comment"]
    template.write_text(json.dumps(spec))
    code, _, err = call(capsys, *args)
    assert code == 0, err


def test_domain_init_reads_the_delimiter_and_calls_an_empty_file_empty(tmp_path, capsys):
    (tmp_path / "semi.csv").write_text("a;b\n1;x\n2;y\n")
    assert call(capsys, "domain", "init", str(tmp_path / "semi.csv"))[0] == 0
    spec = json.loads((tmp_path / "semi.domain.json").read_text())
    assert spec["a"] == {"range": [1, 2], "width": 1} and spec["b"] == {"values": ["x", "y"]}
    (tmp_path / "empty.csv").write_text("")
    code, _, err = call(capsys, "domain", "init", str(tmp_path / "empty.csv"))
    assert code == 2 and "the file is empty" in err


def test_domain_init_proposes_categories_and_writes_no_private_extreme(tmp_path, capsys):
    """Issue #41: few-valued numeric columns become categories (not equal-width
    ranges of empty bins); other bounds are rounded outward to a grid, so the
    data's own extremes (57.5999908, 17, 83) are not in the file."""
    rng = np.random.default_rng(41)
    n = 400
    affairs = np.round(rng.exponential(2.0, n), 7)
    affairs[:2] = [0.0, 57.5999908]
    frame = pd.DataFrame({
        "yrs_married": rng.choice([0.5, 2.5, 6.0, 9.0, 13.0, 16.5, 23.0], n),
        "educ": rng.choice([9, 12, 14, 16, 17, 20], n),
        "age": np.r_[17, 83, rng.integers(18, 83, n - 2)],
        "affairs": affairs,
    })
    data = tmp_path / "survey.csv"
    frame.to_csv(data, index=False)
    assert call(capsys, "domain", "init", str(data))[0] == 0
    text = (tmp_path / "survey.domain.json").read_text()
    spec = json.loads(text)
    assert spec["yrs_married"] == {"values": [0.5, 2.5, 6, 9, 13, 16.5, 23]}
    assert spec["educ"] == {"range": [9, 20], "width": 1}  # a scale with gaps: its range
    assert spec["age"] == {"range": [10, 89], "width": 1}
    assert spec["affairs"] == {"range": [0, 60], "width": 5}
    written = [v for key in ("age", "affairs") for v in spec[key]["range"]]
    assert not {17, 83, 57.5999908} & set(written) and "57.59" not in text
    del spec["$comment"]
    domain = Domain.from_dict(spec)
    assert domain.shape[:3] == (7, 12, 80)  # no equal-width bins between the few values
    domain.encode(frame)  # every value fits


def test_a_size_guessed_for_values_one_to_n_gets_a_hint(tmp_path, capsys):
    (tmp_path / "d.json").write_text(json.dumps({"rate_marriage": 5}))
    (tmp_path / "t.csv").write_text("rate_marriage\n1\n5\n3\n")
    code, _, err = call(capsys, "run", "--no-ledger", "--data", str(tmp_path / "t.csv"),
                        "--domain", str(tmp_path / "d.json"), "--workload",
                        "histogram:rate_marriage", "--epsilon", "1")
    assert code == 2 and '{"range": [lo, hi]}' in err and "np.int64" not in err
    assert "--on-invalid drop|clamp" in err


def test_range_file_numeric_labels_and_binned_bounds(tmp_path, capsys):
    (tmp_path / "d.json").write_text(json.dumps({"age": {"values": [17.5, 22, 27, 32]},
                                                 "pay": {"bins": [0, 10, 20]}}))
    (tmp_path / "t.csv").write_text("age,pay\n22,5\n27,15\n17.5,1\n")
    ranges = tmp_path / "r.csv"
    ranges.write_text("age_lo,age_hi,pay_lo,pay_hi\n22,27,0,20\n")
    common = ("run", "--no-ledger", "--data", str(tmp_path / "t.csv"), "--domain",
              str(tmp_path / "d.json"), "--epsilon", "1")
    code, _, err = call(capsys, *common, "--workload", f"file:{ranges}")
    assert code == 0, err
    ranges.write_text("age_lo,age_hi,pay_lo,pay_hi\n22,27,0,15\n")
    code, _, err = call(capsys, *common, "--workload", f"file:{ranges}")
    assert code == 2 and "upper bound 15 is not a bin edge (nearest edges: 10 and 20)" in err


def test_help_imports_nothing_heavy():
    """`ektelo --help` loads no NumPy-based module of the CLI's own (lazy imports);
    the time is measured by benchmarks/bench_cli_startup.py."""
    result = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.argv = ['ektelo', '--help']\n"
         "import ektelo.cli as c\n"
         "try:\n    c.main()\nexcept SystemExit:\n    pass\n"
         "print(sorted(m for m in ('ektelo.session', 'ektelo.plans', 'ektelo.planner', "
         "'ektelo.workload.spec', 'matplotlib', 'tqdm') if m in sys.modules))"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0 and result.stdout.strip().endswith("[]"), result.stderr


def test_a_blank_cell_in_a_column_the_question_never_reads(tmp_path, capsys):
    """Issue #27, under issue #41's one policy: a blank in a domain column the
    question never reads is refused as `Session` refuses it (one line naming
    the column and --on-invalid), and dropped on request; the blank does not
    make pandas read a numeric-label column as text."""
    (tmp_path / "d.json").write_text(json.dumps({"rate": {"range": [1, 5]},
                                                 "religious": {"range": [1, 4]}}))
    (tmp_path / "t.csv").write_text("rate,religious\n1,2\n5,\n3,4\n")
    common = ("run", "--no-ledger", "--data", str(tmp_path / "t.csv"), "--domain",
              str(tmp_path / "d.json"), "--epsilon", "1")
    for question in ("histogram:rate", "histogram:religious"):
        code, _, err = call(capsys, *common, "--workload", question)
        assert code == 2 and "column 'religious': missing values (NaN/blank);" in err, err
        assert "--on-invalid drop|clamp" in err and len(err.strip().splitlines()) == 1
        assert "not among the labels" not in err  # "2" and "4" read as text still match
        assert call(capsys, *common, "--workload", question, "--on-invalid", "drop")[0] == 0
    # a domain of the columns analysed leaves the dirty one out
    (tmp_path / "rate.json").write_text(json.dumps({"rate": {"range": [1, 5]}}))
    code, _, err = call(capsys, "run", "--no-ledger", "--data", str(tmp_path / "t.csv"),
                        "--domain", str(tmp_path / "rate.json"), "--epsilon", "1",
                        "--workload", "histogram:rate")
    assert code == 0, err


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
@pytest.mark.parametrize("case", ["out-of-domain", "missing-column"])
def test_the_cli_and_python_check_the_table_alike(tmp_path, capsys, engine, case):
    """Issue #41: one validation policy. An out-of-domain value in a column
    the question never reads, or a domain column the file lacks: `ektelo run`
    refuses it (exit 2, one line) exactly when `Session` refuses it, naming
    the same column, and nothing is answered."""
    from ektelo.session import Session

    spec = {"rate": {"range": [1, 5]}, "religious": {"range": [1, 4]}}
    # 9 is outside religious; or religious is missing
    text = "rate,religious\n1,2\n5,9\n3,4\n" if case == "out-of-domain" else "rate\n1\n5\n3\n"
    (tmp_path / "d.json").write_text(json.dumps(spec))
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(ValueError, match="religious") as refused:
        Session(str(tmp_path / "t.csv"), spec, epsilon=1.0, engine=engine)
    code, _, err = call(capsys, "run", "--no-ledger", "--data", str(tmp_path / "t.csv"),
                        "--domain", str(tmp_path / "d.json"), "--epsilon", "1",
                        "--workload", "histogram:rate", "--engine", engine)
    assert code == 2 and "religious" in err and len(err.strip().splitlines()) == 1, err
    assert ("missing column" in str(refused.value)) == ("missing column" in err)


def test_serve_and_admin_are_subcommands(tmp_path, capsys) -> None:
    """`ektelo serve`/`ektelo admin` are ektelo-serve/ektelo-admin (#26)."""
    for name, prog in (("serve", "ektelo-serve"), ("admin", "ektelo-admin")):
        with pytest.raises(SystemExit) as exit_:
            main([name, "--help"])
        assert exit_.value.code == 0 and prog in capsys.readouterr().out
    missing = tmp_path / "absent.toml"
    assert main(["serve", "--config", str(missing)]) != 0
    assert "absent.toml" in capsys.readouterr().err


@pytest.mark.parametrize("engine", ["duckdb", "spark"])
def test_engine_gives_the_memory_answers(census, tmp_path, engine, request):
    """`--engine duckdb|spark` pushes the row work down (the file stays on
    disk) and, on the same research seed, answers exactly as in memory (#28).
    Spark runs on the run's one session (tests/conftest.py): the CLI picks up
    the active session instead of starting a second JVM."""
    request.getfixturevalue("duckdb_available" if engine == "duckdb" else "spark_session")
    data, domain = census
    frames = {}
    for name in ("memory", engine):
        out = tmp_path / f"{name}.csv"
        extra = ["--memory-limit", "512MB", "--threads", "1"] if name == "duckdb" else []
        code = main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                     "--workload", "marginals:2:sex,race", "--where", "age >= 30",
                     "--plan", "identity", "--epsilon", "1", "--seed", "7",
                     "--engine", name, "--out", str(out), *extra])
        assert code == 0
        frames[name] = pd.read_csv(out)
    pd.testing.assert_frame_equal(frames["memory"], frames[engine])


# -- issue #41: one-line errors and the files a new user brings ---------------------------
@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "inf"])
def test_a_bad_epsilon_is_one_line_without_the_usage(tmp_path, capsys, value):
    code, _, err = call(capsys, "run", "--no-ledger", "--data", "t.csv", "--domain", "d.json",
                        "--workload", "histogram:a", f"--epsilon={value}")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "epsilon must be" in err and repr(value) in err and "usage:" not in err
    assert "ektelo run --help" in err  # where the usage is


def _small_files(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    domain = tmp_path / "d.json"
    domain.write_text(json.dumps({"a": {"range": [1, 5]}, "b": {"values": ["x", "y"]}}))
    rows = [("1", "x"), ("2", "y"), ("3", "x"), ("5", "y"), ("5", "x")]
    files = {}
    for name, sep in (("comma.csv", ","), ("semicolon.csv", ";"), ("tab.tsv", "\t"),
                      ("bar.csv", "|")):
        files[name] = sep
        (tmp_path / name).write_text("\n".join(sep.join(r) for r in [("a", "b"), *rows]) + "\n")
    return domain, files


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_the_delimiter_is_read_off_the_header_by_every_engine(tmp_path, capsys, engine):
    """A ';'-, tab- or '|'-separated file is read as DuckDB sniffs it, by the
    in-memory engine too: the same seeded answers as the comma file."""
    domain, files = _small_files(tmp_path)
    answers = {}
    for name in files:
        out = tmp_path / f"{name}.{engine}.out.csv"
        code, _, err = call(capsys, "run", "--no-ledger", "--data", str(tmp_path / name),
                            "--domain", str(domain), "--workload", "histogram:a,b",
                            "--epsilon", "1", "--seed", "5", "--engine", engine,
                            "--out", str(out))
        assert code == 0, (name, err)
        answers[name] = pd.read_csv(out)
    for name in files:
        pd.testing.assert_frame_equal(answers[name], answers["comma.csv"])


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_an_empty_file_is_called_empty(tmp_path, capsys, engine):
    domain, _ = _small_files(tmp_path)
    (tmp_path / "empty.csv").write_text("")
    code, _, err = call(capsys, "run", "--no-ledger", "--data", str(tmp_path / "empty.csv"),
                        "--domain", str(domain), "--workload", "histogram:a",
                        "--epsilon", "1", "--engine", engine)
    assert code == 2 and "the file is empty" in err and "missing column" not in err, err
    assert len(err.strip().splitlines()) == 1


def test_a_header_of_other_names_names_its_delimiter(tmp_path, capsys):
    domain, _ = _small_files(tmp_path)
    (tmp_path / "other.csv").write_text("x;y\n1;2\n")
    code, _, err = call(capsys, "run", "--no-ledger", "--data", str(tmp_path / "other.csv"),
                        "--domain", str(domain), "--workload", "histogram:a",
                        "--epsilon", "1", "--engine", "memory")
    assert code == 2 and "missing column(s)" in err and "';'-separated" in err, err


def test_a_zcdp_budget_shows_its_epsilon_equivalents(tmp_path, capsys):
    """Issue #41: ρ is printed with the ε the user gave (total) and the ε one
    more run can still ask for, which a run of that ε is then granted."""
    domain, _ = _small_files(tmp_path)
    ledger = tmp_path / "l.sqlite"
    common = ("run", "--ledger", str(ledger), "--data", str(tmp_path / "comma.csv"),
              "--domain", str(domain), "--workload", "histogram:a", "--delta", "1e-9")
    code, out, err = call(capsys, *common, "--epsilon", "0.5", "--total", "1")
    assert code == 0, err
    assert "[as ε at δ=1e-09: total ε=1, one more run can spend up to ε=0.8522]" in out
    code, out, _ = call(capsys, "budget", "--ledger", str(ledger))
    assert code == 0 and "total ε=1, one more run can spend up to ε=0.8522" in out
    code, out, err = call(capsys, *common, "--epsilon", "0.8522")
    assert code == 0, err  # the printed ε is granted (rounded down) ...
    left = out.split("one more run can spend up to ε=")[1].split("]")[0]
    assert float(left) < 0.01  # ... and next to nothing is left


def test_plots_label_the_values_and_draw_many_marginals_as_a_grid(tmp_path):
    """Issue #41: a heat map's ticks are the values (1..5, not 0..4 nor
    −0.5, 0, 0.5); many marginals are a grid of small titled panels."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from ektelo.plotting import answer_figure
    from ektelo.session import Session
    from ektelo.workload.spec import parse

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"rate": rng.integers(1, 6, 300), "religious": rng.integers(1, 5, 300),
                          "sex": rng.choice(["F", "M"], 300), "age": rng.integers(20, 60, 300)})
    spec = {"rate": {"range": [1, 5]}, "religious": {"range": [1, 4]},
            "sex": {"values": ["F", "M"]}, "age": {"bins": [20, 30, 40, 60]}}
    s = Session(frame, spec, epsilon=10.0, seed=1, progress=False)
    one = s.marginals(["rate", "religious"], epsilon=1)
    fig = answer_figure(one, parse("marginals:2:rate,religious", s.domain))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2", "3", "4", "5"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4"]
    assert list(ax.get_xticks()) == [0, 1, 2, 3] and ax.get_ylabel() == "rate"
    plt.close(fig)
    many = s.marginals(["rate", "religious", "sex", "age"], k=2, epsilon=1)
    fig = answer_figure(many, parse("marginals:2:rate,religious,sex,age", s.domain))
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [
        "rate × religious", "rate × sex", "rate × age", "religious × sex", "religious × age",
        "sex × age"]
    ages = [t.get_text() for t in panels[2].get_xticklabels()]
    assert ages == ["[20, 30)", "[30, 40)", "[40, 60)"]  # bins, not codes
    assert "6 marginals" in fig._suptitle.get_text()
    plt.close(fig)
