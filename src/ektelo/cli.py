"""The `ektelo` command: a thin shell over `ektelo.session` (arguments →
session → planner → plan → kernel), so the command line and Python answer
alike.

    ektelo run --data FILE --domain FILE.json --workload SPEC --epsilon E
               [--total T] [--delta D] [--plan NAME|auto] [--public-rows N]
               [--where EXPR] [--out FILE]
               [--plot FILE.png] [--dry-run | --explain] [--alpha A]
               [--on-invalid error|drop|clamp] [--ledger PATH | --no-ledger]
               [--dataset NAME] [--nonnegative] [--round] [--seed N] [--param K=V]
    ektelo synth --data FILE --domain FILE.json --epsilon E [--delta D] --out FILE.csv
               [--plan mst|aim|privbayes_pgm|hdmm_pgm] [--rows N] [--seed N] [--total T]
               [--ledger PATH | --no-ledger] [--param K=V]
    ektelo budget [--ledger PATH] [--dataset NAME]   spent/remaining per dataset
    ektelo audit verify [--ledger PATH]              check the ledger's hash chain
    ektelo domain init DATA.csv [--out FILE.json]    a domain template to edit
    ektelo serve --config FILE | ektelo admin ...   the kernel as a service (docs/server.md)
    ektelo plans | datasets | generate

The budget persists across runs: by default `run` keeps a ledger file at
`$EKTELO_LEDGER`, else ``~/.local/share/ektelo/ledger.sqlite`` (XDG data
home), one budget per dataset (named by `--dataset`, default the data file's
stem) whose total the first run sets with `--total`; each run spends its
`--epsilon`, and a run that would overspend what earlier runs left is
refused before anything is measured. `--no-ledger` gives a throwaway in-memory budget.
The graphical-model plans (`--plan` of `run` for marginals, and of `synth`)
spend ρ under `--delta` (mst, aim, hdmm_pgm) or a pure ε without it
(privbayes_pgm, hdmm_pgm); a plan given the other kind is refused first.
Errors are one line on stderr with exit code 2; `--debug` (anywhere on the
line) shows the traceback. Imports are lazy so that `--help` is fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import CLIError

__all__ = ["default_ledger", "main", "parse_where", "write_csv"]

OUTPUT_SUFFIXES = (".csv", ".json", ".parquet")
# ektelo.wide.MODEL_PLANS, written out so that `--help` imports nothing heavy
# (tests/test_cli_synth.py checks that the two agree).
MODEL_PLANS = ("mst", "aim", "privbayes_pgm", "hdmm_pgm")


def parse_where(text: str, domain: Any = None) -> Any:
    """`--where` text → a kernel predicate (see `ektelo.where`)."""
    from .where import parse_where as parse

    return parse(text, domain)


def default_ledger() -> Path:
    """Where `run` keeps the budget unless told otherwise: $EKTELO_LEDGER, else
    $XDG_DATA_HOME/ektelo/ledger.sqlite (~/.local/share/ektelo/ledger.sqlite)."""
    if os.environ.get("EKTELO_LEDGER"):
        return Path(os.environ["EKTELO_LEDGER"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ektelo" / "ledger.sqlite"


def _positive(name: str) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not (value > 0 and value < float("inf")):
            raise argparse.ArgumentTypeError(f"{name} must be a finite positive number, "
                                             f"got {text!r}")
        return value

    return parse


def _params(items: Sequence[str]) -> dict[str, Any]:
    import ast

    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise CLIError(f"--param expects KEY=VALUE, got {item!r}")
        try:
            out[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[key] = raw
    return out


# -- run ------------------------------------------------------------------------------
def cmd_run(args: argparse.Namespace) -> int:
    import json

    from .session import load_domain
    from .workload.spec import parse

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise CLIError(f"--out {args.out}: unknown output type {out.suffix or '(none)'!r}; "
                       f"use {', '.join(OUTPUT_SUFFIXES)} (nothing was spent)")
    if args.plot and Path(args.plot).suffix.lower() not in (".png", ".pdf", ".svg"):
        raise CLIError(f"--plot {args.plot}: use a .png, .pdf or .svg file (nothing was spent)")
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CLIError("--plot needs matplotlib: pip install 'ektelo[plot]' "
                           "(nothing was spent)") from None
    try:
        domain = load_domain(args.domain)
    except json.JSONDecodeError as exc:
        raise CLIError(f"{args.domain}: not valid JSON ({exc.msg})") from None
    question = parse(args.workload, domain)
    where = parse_where(args.where, domain) if args.where else None
    # One validation policy with `Session` (README, "Dirty data"): the domain
    # describes the table, so every domain column is read and checked, also
    # those this question never reads (--on-invalid drop|clamp handles bad values).
    _check_model_unit(args.plan, args.delta)
    ledger = None if args.no_ledger else (args.ledger or str(default_ledger()))
    dataset = args.dataset or Path(args.data).stem
    budget = _dataset_budget(args, ledger, dataset, domain)
    session = _open(args, domain, budget, ledger, dataset, seed=args.seed)
    ask: dict[str, Any] = {"epsilon": args.epsilon}
    if args.dry_run or args.explain:
        preview = session.preview(question, plan=args.plan, alpha=args.alpha, **ask)
        print(preview)
        if args.explain and preview.ranking:  # the planner's ranking, free (#29)
            print(preview.ranking)
        elif args.explain and not preview.candidates.empty:
            print("candidates (expected RMSE per query; nothing spent):")
            print(preview.candidates.to_string(index=False))
        _print_budget(session, ledger, dataset, note="nothing spent (dry run)")
        return 0
    # `Session.ask`'s answer as NumPy columns: a DataFrame (pandas) only where one is
    # written or plotted; printed, the same text without importing pandas (#41)
    frame = session._answer(question, where=where, plan=args.plan, alpha=args.alpha,
                            nonnegative=args.nonnegative, round=args.round,
                            params=_params(args.param), **ask)
    print(f"plan: {frame.attrs['plan']} ({frame.attrs['why']})")
    _write(out, frame, meta={
        "plan": frame.attrs["plan"], "workload": args.workload, "where": args.where,
        "epsilon": args.epsilon, "delta": args.delta, "alpha": args.alpha,
        "ci_method": frame.attrs["ci_method"], "budget": frame.attrs["budget"],
        "seed": args.seed,
    })
    if args.plot:
        from .plotting import plot_answers

        plot_answers(frame.to_frame(), question, Path(args.plot))
        print(f"plot: {args.plot}")
    _print_budget(session, ledger, dataset)
    if args.seed is not None:
        print("note: research mode (seeded noise) — not for releasing real data")
    return 0


# -- sql ------------------------------------------------------------------------------
def cmd_sql(args: argparse.Namespace) -> int:
    """SQL statements answered jointly (docs/sql.md): compiled and checked
    before the ledger or the data is touched; EXPLAIN/--explain spends nothing."""
    import json

    from .session import load_domain
    from .sql import check_sql, explain_text

    out = Path(args.out) if args.out else None
    if out is not None and out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise CLIError(f"--out {args.out}: unknown output type {out.suffix or '(none)'!r}; "
                       f"use {', '.join(OUTPUT_SUFFIXES)} (nothing was spent)")
    try:
        domain = load_domain(args.domain)
    except json.JSONDecodeError as exc:
        raise CLIError(f"{args.domain}: not valid JSON ({exc.msg})") from None
    statements, explained = check_sql(args.query, domain)  # refusals: nothing opened
    ledger = None if args.no_ledger else (args.ledger or str(default_ledger()))
    dataset = args.dataset or Path(args.data).stem
    budget = _dataset_budget(args, ledger, dataset, domain)
    session = _open(args, domain, budget, ledger, dataset, seed=args.seed)
    frames = session.sql(args.query, epsilon=args.epsilon, plan=args.plan, alpha=args.alpha,
                         explain=args.explain)
    if args.explain or explained:
        print(explain_text(frames))
        _print_budget(session, ledger, dataset, note="nothing spent (explain)")
        return 0
    print(f"plan: {frames[0].attrs['plan']} ({frames[0].attrs['why']}); "
          f"{frames[0].attrs['workload']}")
    for i, (frame, st) in enumerate(zip(frames, statements, strict=True), start=1):
        target = out
        if out is not None and len(frames) > 1:
            target = out.with_name(f"{out.stem}-{i}{out.suffix}")
        if out is None:
            print(f"-- {st.sql}")
        _write(target, frame, meta={
            "sql": st.sql, "plan": frame.attrs["plan"], "epsilon": args.epsilon,
            "delta": args.delta, "alpha": args.alpha, "budget": frame.attrs["budget"],
            "statements": len(frames), "seed": args.seed,
        })
    _print_budget(session, ledger, dataset)
    if args.seed is not None:
        print("note: research mode (seeded noise) — not for releasing real data")
    return 0


# -- synth ----------------------------------------------------------------------------
SYNTH_SUFFIXES = (".csv", ".parquet")


def _check_model_unit(plan: str, delta: float | None) -> None:
    """A graphical-model plan given the other kind of budget (`--delta`: ρ;
    none: pure ε) refused before the ledger or the data is touched."""
    from .wide import MODELS

    model = MODELS.get(plan)
    if model is None:
        return
    if delta is None and "epsilon" not in model.units:
        raise CLIError(f"--plan {plan} spends ρ (zCDP, Gaussian noise): give --delta (e.g. "
                       "1e-9) with --epsilon (nothing was spent)")
    if delta is not None and "rho" not in model.units:
        zcdp = [n for n, m in MODELS.items() if "rho" in m.units]
        raise CLIError(f"--plan {plan} spends a pure ε (Laplace noise): leave out --delta; "
                       f"under --delta use {', '.join(zcdp)} (nothing was spent)")


def cmd_synth(args: argparse.Namespace) -> int:
    """A synthetic table from a graphical model: MST's (default), AIM's,
    PrivBayes+PGM's or HDMM+PGM's."""
    import json

    from .session import load_domain

    out = Path(args.out)
    if out.suffix.lower() not in SYNTH_SUFFIXES:
        raise CLIError(f"--out {args.out}: unknown output type {out.suffix or '(none)'!r}; "
                       f"use {' or '.join(SYNTH_SUFFIXES)} (nothing was spent)")
    _check_model_unit(args.plan, args.delta)
    if args.rows is not None and args.rows < 1:
        raise CLIError(f"--rows must be a positive integer, got {args.rows}")
    try:
        domain = load_domain(args.domain)
    except json.JSONDecodeError as exc:
        raise CLIError(f"{args.domain}: not valid JSON ({exc.msg})") from None
    ledger = None if args.no_ledger else (args.ledger or str(default_ledger()))
    dataset = args.dataset or Path(args.data).stem
    budget = _dataset_budget(args, ledger, dataset, domain)
    session = _open(args, domain, budget, ledger, dataset)
    frame = session.synthetic(args.rows, plan=args.plan, epsilon=args.epsilon, seed=args.seed,
                              params=_params(args.param))
    binned = [a for a in domain.attributes if a.bins is not None and a.name in frame.columns]
    if binned and args.bin_labels:
        frame = frame.assign(**{a.name: _bin_labels(a, frame[a.name]) for a in binned})
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".parquet":
        try:
            frame.to_parquet(out, index=False)
        except ImportError:
            raise CLIError("writing Parquet needs pyarrow (pip install 'ektelo[parquet]'); "
                           "use --out FILE.csv") from None
    else:
        frame.to_csv(out, index=False)
    print(f"plan: {args.plan} (graphical model, spent {'ρ' if args.delta else 'pure ε'}; "
          "synthetic rows are post-processing)")
    print(f"wrote {len(frame):,} synthetic rows × {frame.shape[1]} columns to {out}")
    if binned:
        names = ", ".join(a.name for a in binned)
        print(f"binned columns ({names}) hold each bin as "
              + ("its label [lo, hi)" if args.bin_labels else
                 "its lower edge, so they re-encode to the same bin (--bin-labels writes "
                 "[lo, hi) instead)"))
    _print_budget(session, ledger, dataset)
    return 0


def _bin_labels(attribute: Any, lower_edges: Any) -> Any:
    """A binned column's lower edges as the bins' labels "[lo, hi)" (#41)."""
    import numpy as np

    edges = np.asarray(attribute.bins, dtype=np.float64)
    codes = np.searchsorted(edges[:-1], np.asarray(lower_edges, dtype=np.float64), side="right") - 1
    labels = [f"[{edges[i]:g}, {edges[i + 1]:g})" for i in range(edges.size - 1)]
    return [labels[i] for i in codes]


def _engine(args: argparse.Namespace) -> Any:
    """--engine (default: DuckDB for the file, memory without DuckDB, with a
    one-line note) and DuckDB's --memory-limit/--threads/--temp-directory, as
    protect's engine= (docs/engines.md)."""
    from .engines import default_engine, duckdb_installed, fallback_note

    name = args.engine
    limits = {"memory_limit": args.memory_limit, "threads": args.threads,
              "temp_directory": args.temp_directory}  # fmt: skip
    if name is None:
        name = default_engine(args.data)
        if not duckdb_installed():  # a file read into memory
            print(fallback_note(args.data), file=sys.stderr)
    if name != "duckdb" and any(v is not None for v in limits.values()):
        raise CLIError("--memory-limit, --threads and --temp-directory are DuckDB's: "
                       f"they do not apply to --engine {name}")
    if name == "spark":  # the active session, else a local one on every core
        from pyspark.sql import SparkSession

        from .engines import SparkEngine

        session = SparkSession.getActiveSession() or (
            SparkSession.builder.master("local[*]").appName("ektelo")
            .config("spark.ui.showConsoleProgress", "false").getOrCreate()
        )
        return SparkEngine(session=session)
    if name != "duckdb" or all(v is None for v in limits.values()):
        return name
    from .engines import DuckDBEngine

    return DuckDBEngine(**limits)


def _open(args: argparse.Namespace, domain: Any, budget: dict[str, Any], ledger: str | None,
          dataset: str, seed: int | None = None) -> Any:
    """The session over --data (`seed`: research mode), bad values reported
    as one CLI line."""
    from .session import Session
    from .units import SuggestMaxRows

    choice = getattr(args, "max_rows_per_unit", None)
    if (isinstance(choice, SuggestMaxRows) and ledger is None and budget.get("delta") is None
            and budget.get("epsilon") is not None and getattr(args, "total", None) is None):
        # auto:EPS is spent on top of the question's --epsilon (a pure-ε run, no --total)
        budget = {**budget, "epsilon": budget["epsilon"] + choice.epsilon}
    try:
        return Session(args.data, domain, **budget, seed=seed, on_invalid=args.on_invalid,
                       show_bad_values=args.show_bad_values, ledger=ledger,
                       dataset=dataset if ledger is not None else None,
                       engine=_engine(args), public_rows=getattr(args, "public_rows", None),
                       privacy_unit=getattr(args, "privacy_unit", None),
                       max_rows_per_unit=getattr(args, "max_rows_per_unit", None),
                       max_groups_per_unit=getattr(args, "max_groups_per_unit", None),
                       max_rows_per_group=getattr(args, "max_rows_per_group", None),
                       group_by=getattr(args, "group_by_unit", None))
    except Exception as exc:
        from .domain import DomainValueError

        if isinstance(exc, DomainValueError):
            tail = exc.listing if exc.listing is not None else "--show-bad-values lists them"
            summary = exc.summary.replace("on_invalid='drop' or 'clamp'",
                                          "--on-invalid drop|clamp")
            raise CLIError(f"{args.data}: {summary}; {tail}") from None
        raise


def _dataset_budget(args: argparse.Namespace, ledger: str | None, dataset: str,
                    domain: Any = None) -> dict[str, Any]:
    """The dataset's total budget for protect: the ledger's record when the
    dataset has one (a cap never changes), else `--total` (recorded by this
    first run); without a ledger, `--total` or this run's ε. With open
    columns protect keeps half of δ for their keys and records the other
    half: the record's δ is then half of --delta."""
    if ledger is None:
        return {"epsilon": args.total or args.epsilon, "delta": args.delta}
    record = None
    remote = ledger.startswith(("postgresql://", "postgres://"))
    if remote or Path(ledger).is_file():
        from . import ledger_store as store

        record = next((r for r in store.open_store(ledger).datasets() if r.name == dataset), None)
    if record is None:
        if args.total is None:
            raise CLIError(
                f"dataset {dataset!r} has no budget in the ledger {ledger} yet: the first run "
                f"sets its total with --total E (kept for every later run), or use --no-ledger"
            )
        if not remote:
            Path(ledger).parent.mkdir(parents=True, exist_ok=True)
        return {"epsilon": args.total, "delta": args.delta}
    if record.unit == "epsilon":
        stored = {"epsilon": float(record.total), "delta": None}
        if args.delta is not None:
            raise CLIError(f"dataset {dataset!r} has a pure ε budget in the ledger (a dataset's "
                           f"budget is of one kind, set by its first run): drop --delta")
    else:
        halved = 2 if getattr(domain, "open", ()) else 1  # (exact: a power of two)
        stated = None if record.delta is None else record.delta * halved
        stored = {"rho": float(record.total), "delta": stated}
        if args.delta is None or stated is None or args.delta != stated:
            raise CLIError(f"dataset {dataset!r} has a zCDP budget with δ={stated} in the "
                           f"ledger: pass --delta {stated}")
    if args.total is not None and record.unit == "epsilon" and args.total != float(record.total):
        raise CLIError(f"dataset {dataset!r} already has total ε={float(record.total):g} in the "
                       f"ledger; a total never changes (drop --total)")
    return stored


def _write(out: Path | None, frame: Any, meta: dict[str, Any]) -> None:
    """Answers (a DataFrame or `ektelo.columns.Columns`) printed as pandas'
    ``to_string`` (20 rows at most, floats to 2 decimals) or written to `out`."""
    import json

    from .columns import Columns, frame_text

    if out is None:
        print(frame_text(frame))
        return
    if isinstance(frame, Columns):
        frame = frame.to_frame()
    out.parent.mkdir(parents=True, exist_ok=True)
    suffix = out.suffix.lower()
    if suffix == ".json":  # records, with the run's description beside them
        records = json.loads(frame.to_json(orient="records"))
        out.write_text(json.dumps({"meta": meta, "answers": records}, indent=1, default=str))
    elif suffix == ".parquet":
        try:
            frame.to_parquet(out, index=False)
        except ImportError:
            fallback = out.with_suffix(".csv")
            frame.to_csv(fallback, index=False)
            raise CLIError(f"writing Parquet needs pyarrow (pip install 'ektelo[parquet]'); "
                           f"the answers were saved to {fallback} instead") from None
    else:
        write_csv(frame, out)
    print(f"wrote {len(frame)} answers to {out}")


def write_csv(frame: Any, out: Path) -> None:
    """`frame` written to `out` as pandas' ``to_csv(index=False)`` writes it,
    byte for byte (the answers' CSV; issue #25: 20.9 million rows of 3-way
    marginals took 734 s in pandas' writer, its Python per-row formatting).

    DuckDB (a core dependency) writes the frame in one vectorised COPY when
    its text is pandas' exactly (tests/test_answers_csv.py): at least two
    columns (pandas quotes a lone empty field), every column integers (NA
    too), float64 or a categorical of non-empty strings (DuckDB quotes an
    empty string and writes booleans lower-case; object columns of mixed
    values are pandas' to format). Anything else, or DuckDB missing or
    failing, goes to pandas' writer in chunks."""
    import pandas as pd

    def simple(column: Any) -> bool:
        dtype = column.dtype
        if isinstance(dtype, pd.CategoricalDtype):
            cats = dtype.categories
            return all(isinstance(c, str) and c != "" for c in cats)
        return pd.api.types.is_integer_dtype(dtype) or str(dtype) == "float64"

    if frame.shape[1] >= 2 and len(frame) and all(simple(frame[c]) for c in frame.columns):
        try:
            import duckdb
        except ImportError:
            duckdb = None  # type: ignore[assignment]
        if duckdb is not None:
            con = duckdb.connect()
            try:  # one thread: no per-thread buffers (20.9M rows: +0 MB, not +530 MB)
                con.execute("SET threads=1")
                con.register("answers", frame)
                target = str(out).replace("'", "''")
                con.execute(f"COPY answers TO '{target}' (HEADER, DELIMITER ',')")
                return
            except duckdb.Error:
                pass  # pandas' writer below
            finally:
                con.close()
    frame.to_csv(out, index=False, chunksize=2**20)


def _print_budget(session: Any, ledger: Any, dataset: str, note: str = "") -> None:
    from .budget import describe

    b = session.budget
    unit = "ε" if b.unit == "epsilon" else "ρ"
    where = f"ledger {ledger}, dataset {dataset!r}" if ledger is not None else "this run only"
    line = (f"budget ({where}): total {unit}={b.total:g}, spent {unit}={b.spent:g}, "
            f"remaining {unit}={b.remaining:g}")
    if b.unit == "rho" and b.delta is not None:
        line += f" [{_epsilon_equivalents(b.total, b.remaining, b.delta)}]"
    if b.unit == "rho" and b.delta is not None and b.spent > 0:
        # budget.describe's (ε, δ): printed digits rounded so the stated ε still holds
        line += f" (spent so far guarantees {describe(b).rsplit('i.e. ', 1)[1]})"
    print(line + (f"; {note}" if note else ""))


def _epsilon_equivalents(total: float, remaining: float, delta: float) -> str:
    """ρ in the unit the user gave: the total's ε at δ, and the largest
    --epsilon one more run at this δ can still spend (its ρ is the remaining ρ)."""
    import math

    from .budget import epsilon_of_rho

    left = "0"
    if remaining > 0:  # rounded DOWN to 4 digits: asking for the printed ε is not refused
        value = epsilon_of_rho(remaining, delta) * (1 - 1e-9)
        scale = 10.0 ** (3 - math.floor(math.log10(value)))
        left = f"{math.floor(value * scale) / scale:.4g}"
    return f"as ε at δ={delta:g}: total ε={epsilon_of_rho(total, delta):.4g}, one more run " \
           f"can spend up to ε={left}"


# -- budget, audit, domain --------------------------------------------------------------
def _store(path: str | None) -> Any:
    """The ledger store --ledger names: a SQLite file that must exist, or a
    postgresql:// URL kept as text (a Path would fold its '//', issue #40)."""
    target = path if path else str(default_ledger())
    if not target.startswith(("postgresql://", "postgres://")) and not Path(target).is_file():
        raise CLIError(f"no ledger at {target} (runs create it; --ledger names another)")
    from . import ledger_store as store

    return store.open_store(target)


def cmd_budget(args: argparse.Namespace) -> int:
    store = _store(args.ledger)
    records = store.datasets()
    if args.dataset:
        records = [r for r in records if r.name == args.dataset]
        if not records:
            raise CLIError(f"no dataset {args.dataset!r} in the ledger")
    if not records:
        print("the ledger holds no dataset yet")
    for r in records:
        unit = "ε" if r.unit == "epsilon" else "ρ"
        delta = f", δ={r.delta:g}" if r.delta is not None else ""
        line = (f"{r.name:20s} total {unit}={float(r.total):g}{delta}  spent "
                f"{unit}={float(r.spent):g}  remaining {unit}={float(r.remaining):g}")
        if r.unit != "epsilon" and r.delta is not None:
            line += f"  [{_epsilon_equivalents(float(r.total), float(r.remaining), r.delta)}]"
        print(line)
    if args.dataset and args.history:
        for h in store.history(args.dataset):
            print(f"  {h.time}  {h.operation:<22} charged {float(h.charge):g}  {h.status}")
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    report = _store(args.ledger).verify_audit()
    if report.ok:
        print(f"audit log verified: {report.entries} entries, hash chain intact")
        return 0
    print(f"audit log BROKEN at {report.first_broken}: {'; '.join(map(str, report.problems))}")
    return 1


def _public_range(text: str) -> tuple[str, tuple[float, float]]:
    """COL=LO:HI (a public range typed by the user) for `domain init --range`."""
    name, eq, bounds = text.partition("=")
    lo, colon, hi = bounds.partition(":")
    try:
        if not (eq and colon and name.strip()):
            raise ValueError
        return name.strip(), (float(lo), float(hi))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--range takes COL=LO:HI, got {text!r}") from None


def cmd_domain_init(args: argparse.Namespace) -> int:
    import json

    import pandas as pd

    from .domain_template import TEMPLATE_NOTE, domain_template

    data = Path(args.data)
    if not data.is_file():
        raise CLIError(f"data file not found: {args.data}")
    if data.suffix.lower() in (".parquet", ".pq"):
        frame = pd.read_parquet(data)
    else:
        import csv

        from .domain import DELIMITERS

        with open(data, encoding="utf-8", errors="replace", newline="") as fh:
            header = fh.readline()
        if not header.strip():
            raise CLIError(f"{data}: the file is empty (no header line naming the columns)")
        try:  # the delimiter as `ektelo run` reads it (comma, semicolon, tab or bar)
            sep = csv.Sniffer().sniff(header, delimiters="".join(DELIMITERS)).delimiter
        except csv.Error:
            sep = ","
        frame = pd.read_csv(data, keep_default_na=True, sep=sep)
    spec, notes = domain_template(frame)
    out = Path(args.out) if args.out else data.with_suffix(".domain.json")
    if out.exists() and not args.force:
        raise CLIError(f"{out} exists; --force overwrites it")
    spent = 0.0
    if args.range_epsilon is not None or args.range:  # numeric ranges, privately (#38)
        from .domain_ranges import private_ranges

        try:
            spec, more, spent = private_ranges(frame, spec, epsilon=args.range_epsilon,
                                               public=dict(args.range or []))
        except ValueError as exc:
            raise CLIError(str(exc)) from None
        notes += more
    out.write_text(json.dumps(spec, indent=1) + "\n")
    print(f"wrote a domain template for {len(spec) - 1} columns to {out}")
    for note in notes:
        print(f"  note: {note}")
    if spent:
        print(f"  spent ε={spent:g} on numeric ranges (no ledger: count it against the "
              "dataset's budget)")
    print(f"WARNING: {TEMPLATE_NOTE}", file=sys.stderr)
    return 0


def cmd_plans(args: argparse.Namespace) -> int:
    from . import plans

    for name in plans.names():
        info = plans.get(name)
        kind = "data-dependent" if info.data_dependent else "data-independent"
        print(f"{name:16s} {kind:17s} {info.summary}  [{info.citation}]")
    return 0


DEFAULT_DATA_DIR = Path("..") / "shared" / "data"  # relative to the working directory


def cmd_datasets(args: argparse.Namespace) -> int:
    from .datasets import KNOWN

    root: Path | None
    if args.data_dir is not None:
        root = Path(args.data_dir)
        if not root.is_dir():
            raise CLIError(f"data directory not found: {args.data_dir}")
    else:
        root = DEFAULT_DATA_DIR if DEFAULT_DATA_DIR.is_dir() else None
    for d in KNOWN:
        if d.relative_path is None:
            where = "generated (ektelo generate)"
        elif root is not None and d.available(root):
            where = str(d.path(root))
        elif root is None:
            where = "needs --data-dir DIR (the folder holding adult/, credit/, dpbench/)"
        else:
            where = f"not in {root}"
        print(f"{d.name:12s} {d.description}  ({where})")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    import json

    from .datasets import census_like

    frame, domain = census_like(args.rows, seed=args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out, index=False)
    domain_path = out.with_suffix(".domain.json")
    entries = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in domain.to_dict().items()]
    domain_path.write_text("{\n" + ",\n".join(entries) + "\n}\n")
    print(f"wrote {len(frame):,} rows to {out} and the domain to {domain_path}")
    return 0


# -- the parser -------------------------------------------------------------------------
def _max_rows(text: str) -> Any:
    """--max-rows-per-unit: K, or auto:EPS[:Q] (a private choice, ektelo.units)."""
    if text.startswith("auto:"):
        from .units import SuggestMaxRows

        parts = text.split(":")[1:]
        try:
            numbers = [float(p) for p in parts]
            if not 1 <= len(numbers) <= 2:
                raise ValueError("give auto:EPS or auto:EPS:Q")
            return SuggestMaxRows(*numbers)
        except (ValueError, TypeError) as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not K (an int) or auto:EPS") from None


def _data_and_ledger_options(parser: argparse.ArgumentParser) -> None:
    """What every command that reads --data and spends shares: bad values,
    the ledger and the budget's name in it."""
    parser.add_argument("--on-invalid", choices=("error", "drop", "clamp"), default="error",
                        help="rows with values outside the domain: refuse (default), drop the "
                             "rows, or clamp numbers to the nearest valid value")
    parser.add_argument("--ledger", help="budget ledger (SQLite path or postgresql:// URL; "
                                         "default $EKTELO_LEDGER or "
                                         "~/.local/share/ektelo/ledger.sqlite)")
    parser.add_argument("--no-ledger", action="store_true",
                        help="throwaway budget for this run only (demos)")
    parser.add_argument("--dataset",
                        help="the budget's name in the ledger (default: data file stem)")
    parser.add_argument("--show-bad-values", action="store_true",
                        help="data holder only: list the first 10 bad rows and values in the "
                             "error (private data; by default only the column and the kind "
                             "of problem)")


def _engine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--engine", choices=("memory", "duckdb", "spark"), default=None,
                        help="where row-level work runs: duckdb (default: the file stays on "
                             "disk), memory (pandas; the default without DuckDB) or spark "
                             "(local; extra ektelo[spark]) — docs/engines.md")
    parser.add_argument("--memory-limit", help="duckdb: memory limit, e.g. 1GB")
    parser.add_argument("--threads", type=int, help="duckdb: worker threads")
    parser.add_argument("--temp-directory", help="duckdb: where it spills beyond the limit")
    parser.add_argument("--privacy-unit", metavar="COL",
                        help="protect each person, not each row: COL identifies the person "
                             "(all rows sharing it); needs --max-rows-per-unit (docs/units.md)")
    parser.add_argument("--max-rows-per-unit", type=_max_rows, metavar="K|auto:EPS",
                        help="with --privacy-unit: keep at most K rows per person (a keyed, "
                             "secret choice); the budget is per person, noise scales with K; "
                             "auto:EPS spends EPS more (per person) to choose K as the noisy "
                             "95%% quantile of rows per person (auto:EPS:Q: another quantile)")
    parser.add_argument("--max-groups-per-unit", type=int, metavar="G",
                        help="with --privacy-unit, instead of --max-rows-per-unit: keep at "
                             "most G groups (values of --unit-groups) per person and "
                             "--max-rows-per-group R rows of each; Gaussian (zCDP) histograms "
                             "and marginals that include those attributes get noise √G·R "
                             "instead of G·R (docs/units.md)")
    parser.add_argument("--max-rows-per-group", type=int, metavar="R",
                        help="with --max-groups-per-unit: rows kept per person and group")
    parser.add_argument("--unit-groups", dest="group_by_unit", metavar="A,B",
                        type=lambda text: [t.strip() for t in text.split(",") if t.strip()],
                        help="with --max-groups-per-unit: the attributes whose values are "
                             "a person's groups")


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `ektelo run: error: <what> (ektelo run
    --help shows the usage)` instead of the usage block before the message."""

    def error(self, message: str) -> Any:
        self.exit(2, f"{self.prog}: error: {message} ({self.prog} --help shows the usage)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ektelo", description=__doc__.split("\n\n")[0],
                     epilog="--debug anywhere shows tracebacks on errors")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="answer a workload privately over a CSV/Parquet table")
    run.add_argument("--data", required=True, help="CSV or Parquet file")
    run.add_argument("--domain", required=True, help="domain description (JSON; see README)")
    run.add_argument("--workload", required=True,
                     help="histogram:a,b | cdf:a [by b,c] | ranges:a | marginals:K:a,b,c|all | "
                          "random-ranges:a,b:N | file:ranges.csv | sum:a [by b,c] | "
                          "mean:a [by b,c] | sum,count,mean:a by b,c [with totals] | "
                          "quantile:a@0.5,0.9 [by b]")
    run.add_argument("--plan", default="auto",
                     help="plan name or 'auto' (default); graphical models for marginals: "
                          "mst, aim (with --delta), privbayes_pgm (pure ε: no --delta), "
                          "hdmm_pgm (either)")
    run.add_argument("--public-rows", type=_positive("public-rows"), metavar="N",
                     help="the table's row count, if the custodian declares it public "
                     "(approximate is fine): --plan auto then chooses from the planner's "
                     "declared-rows table, for free, and --plan privbayes_pgm takes it as "
                     "its N (not used with --where)")
    run.add_argument("--epsilon", required=True, type=_positive("epsilon"),
                     help="privacy budget ε > 0 for this run")
    run.add_argument("--total", type=_positive("total"),
                     help="the dataset's total ε, recorded in the ledger by its first run")
    run.add_argument("--delta", type=_positive("delta"),
                     help="(ε, δ)-DP via zCDP: Gaussian-capable plans (e.g. 1e-9)")
    run.add_argument("--where", help="row filter, e.g. \"sex == 'M' and 30 <= age <= 39\"")
    run.add_argument("--out", help="write answers to .csv, .json (records) or .parquet")
    run.add_argument("--plot", help="draw answers with intervals to a .png/.pdf/.svg")
    run.add_argument("--alpha", type=_positive("alpha"), default=0.05,
                     help="intervals at level 1 - alpha (default 0.05)")
    run.add_argument("--dry-run", action="store_true",
                     help="show the plan, expected error and interval width; spend nothing")
    run.add_argument("--explain", action="store_true",
                     help="like --dry-run, and list every candidate plan with its error")
    _data_and_ledger_options(run)
    run.add_argument("--nonnegative", action="store_true", help="clip answers at 0")
    run.add_argument("--round", action="store_true", help="round answers to integers")
    run.add_argument("--seed", type=int, help="research mode: seeded (insecure) noise")
    run.add_argument("--param", action="append", default=[], help="plan parameter KEY=VALUE")
    _engine_options(run)
    run.set_defaults(func=cmd_run)

    sql = sub.add_parser("sql", help="answer SQL statements jointly (one workload, one charge)")
    sql.add_argument("query", help="\"SELECT sex, COUNT(*) FROM t GROUP BY sex; SELECT ...\" "
                                   "(EXPLAIN first: the plan and expected errors, nothing spent)")
    sql.add_argument("--data", required=True, help="CSV or Parquet file")
    sql.add_argument("--domain", required=True, help="domain description (JSON; see README)")
    sql.add_argument("--epsilon", required=True, type=_positive("epsilon"),
                     help="privacy budget ε > 0 for all the statements together")
    sql.add_argument("--total", type=_positive("total"),
                     help="the dataset's total ε, recorded in the ledger by its first run")
    sql.add_argument("--delta", type=_positive("delta"),
                     help="(ε, δ)-DP via zCDP: Gaussian-capable plans (e.g. 1e-9)")
    sql.add_argument("--plan", default="auto", help="plan name or 'auto' (default)")
    sql.add_argument("--explain", action="store_true",
                     help="the joint workload, the plan and each cell's expected error; "
                          "spend nothing")
    sql.add_argument("--out", help="write answers to .csv, .json or .parquet (several "
                                   "statements: NAME-1.csv, NAME-2.csv, …)")
    sql.add_argument("--alpha", type=_positive("alpha"), default=0.05,
                     help="intervals at level 1 - alpha (default 0.05)")
    _data_and_ledger_options(sql)
    sql.add_argument("--seed", type=int, help="research mode: seeded (insecure) noise")
    _engine_options(sql)
    sql.set_defaults(func=cmd_sql)

    synth = sub.add_parser("synth", help="write a synthetic table from a graphical model "
                                         "(MST, AIM, PrivBayes+PGM or HDMM+PGM)")
    synth.add_argument("--data", required=True, help="CSV or Parquet file")
    synth.add_argument("--domain", required=True, help="domain description (JSON)")
    synth.add_argument("--epsilon", required=True, type=_positive("epsilon"),
                       help="privacy budget ε > 0 for this run")
    synth.add_argument("--delta", type=_positive("delta"),
                       help="δ of the (ε, δ) guarantee, kept as zCDP (e.g. 1e-9): needed by "
                            "mst and aim, refused by privbayes_pgm (pure ε)")
    synth.add_argument("--total", type=_positive("total"),
                       help="the dataset's total ε, recorded in the ledger by its first run")
    synth.add_argument("--out", required=True, help="synthetic table: .csv or .parquet")
    synth.add_argument("--plan", choices=MODEL_PLANS, default="mst",
                       help="mst (default; fast, zCDP), aim (workload-aware, slower, zCDP), "
                            "privbayes_pgm (pure ε) or hdmm_pgm (zCDP with --delta, else "
                            "pure ε)")
    synth.add_argument("--rows", type=int,
                       help="rows to write (default: the model's noisy total)")
    synth.add_argument("--bin-labels", action="store_true",
                       help="write a binned column as its bin's label [lo, hi) (default: the "
                            "bin's lower edge, which re-encodes to the same bin)")
    synth.add_argument("--seed", type=int,
                       help="seeds the drawing of rows only (the noise stays secure)")
    _data_and_ledger_options(synth)
    synth.add_argument("--param", action="append", default=[], help="plan parameter KEY=VALUE")
    _engine_options(synth)
    synth.set_defaults(func=cmd_synth)

    budget = sub.add_parser("budget", help="spent and remaining budget per dataset")
    budget.add_argument("--ledger", help="ledger (default: as for run)")
    budget.add_argument("--dataset", help="one dataset only")
    budget.add_argument("--history", action="store_true", help="with --dataset: every charge")
    budget.set_defaults(func=cmd_budget)

    audit = sub.add_parser("audit", help="check the ledger's audit log")
    audit_sub = audit.add_subparsers(dest="action", required=True)
    verify = audit_sub.add_parser("verify", help="recompute the hash chain")
    verify.add_argument("--ledger", help="ledger (default: as for run)")
    verify.set_defaults(func=cmd_audit)

    domain = sub.add_parser("domain", help="domain files")
    domain_sub = domain.add_subparsers(dest="action", required=True)
    init = domain_sub.add_parser("init", help="write a template from a data file (then edit it: "
                                              "bounds read from data are private)")
    init.add_argument("data", help="CSV or Parquet file")
    init.add_argument("--out", help="domain JSON (default: DATA.domain.json)")
    init.add_argument("--force", action="store_true", help="overwrite an existing file")
    init.add_argument("--range-epsilon", type=_positive("range-epsilon"), metavar="E",
                      help="numeric columns' ranges from their noisy 1%%/99%% quantiles at ε=E "
                           "each, on a grid of round numbers (never the raw min/max)")
    init.add_argument("--range", action="append", type=_public_range, metavar="COL=LO:HI",
                      help="a public range for a numeric column (repeatable; no ε spent)")
    init.set_defaults(func=cmd_domain_init)

    for name, what in (("serve", "serve protected datasets over HTTP (= ektelo-serve)"),
                       ("admin", "datasets, analysts and tokens of a server (= ektelo-admin)")):
        sub.add_parser(name, help=what, add_help=False)  # handled in main()
    sub.add_parser("plans", help="list the plans").set_defaults(func=cmd_plans)
    data = sub.add_parser("datasets", help="list known datasets")
    data.add_argument("--data-dir", help="directory holding adult/, credit/, dpbench/ "
                      "(default: ../shared/data if present)")
    data.set_defaults(func=cmd_datasets)

    gen = sub.add_parser("generate", help="write the synthetic census-like table as CSV")
    gen.add_argument("--out", default="census-like.csv", help="CSV path (domain JSON beside it)")
    gen.add_argument("--rows", type=int, default=50_000)
    gen.add_argument("--seed", type=int, default=0)
    gen.set_defaults(func=cmd_generate)
    return parser


# `ektelo serve ...` and `ektelo admin ...` are `ektelo-serve` and
# `ektelo-admin` (the `server` extra), reached from the one command.
SERVER_COMMANDS = {"serve": "app", "admin": "admin"}


def _server_command(name: str, argv: list[str]) -> int:
    import importlib

    try:
        module = importlib.import_module(f"ektelo.server.{SERVER_COMMANDS[name]}")
    except ImportError as exc:
        print(f"ektelo: error: `ektelo {name}` needs the server extra "
              f"(pip install 'ektelo[server]'): {exc}", file=sys.stderr)
        return 2
    return int(module.main(argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ektelo` console script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv  # anywhere on the line
    argv = [a for a in argv if a != "--debug"]
    if argv and argv[0] in SERVER_COMMANDS:  # the custodian's commands (docs/server.md)
        return _server_command(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    if getattr(args, "dry_run", False) and getattr(args, "explain", False):
        args.dry_run = False
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("ektelo: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `ektelo ... | head`: the reader left; stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        if debug:
            raise
        from .kernel import BudgetExceeded

        kind = "budget exceeded" if isinstance(exc, BudgetExceeded) else "error"
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, KeyError):
            message = message.strip("'\"")
        if isinstance(exc, BudgetExceeded):
            message += " (`ektelo budget` shows what is left)"
        print(f"ektelo: {kind}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
