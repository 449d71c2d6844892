"""The `ektelo` command: private answers with error bars from one command.

    ektelo run --data FILE --domain FILE.json --workload SPEC --plan NAME|auto
               --epsilon E [--where EXPR] [--out FILE] [--seed N] [--param K=V]
               [--show-bad-values]
    ektelo plans            list the plan library
    ektelo datasets [--data-dir DIR]  list the known demo and benchmark data
    ektelo generate         write the synthetic census-like table (CSV + domain)

Errors are one line on stderr with a non-zero exit code; `--debug` shows the
traceback.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from . import _validate as check

__all__ = ["main"]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


class Progress:
    """A spinner with elapsed time on stderr while a long step runs (TTY only).

    Plans are single calls into the library, so the indicator shows that work
    is going on and for how long.
    """

    def __init__(self, label: str, stream: Any = None, delay: float = 1.0):
        self.label, self.stream, self.delay = label, stream or sys.stderr, delay
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)

    def _spin(self) -> None:
        start = time.perf_counter()
        if self._stop.wait(self.delay):
            return
        frames = "|/-\\"
        i = 0
        while not self._stop.wait(0.2):
            elapsed = time.perf_counter() - start
            self.stream.write(f"\r{frames[i % 4]} {self.label} {elapsed:6.1f} s")
            self.stream.flush()
            i += 1
        self.stream.write("\r" + " " * (len(self.label) + 12) + "\r")
        self.stream.flush()

    def __enter__(self) -> Progress:
        if getattr(self.stream, "isatty", lambda: False)():
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


# -- --where expressions ---------------------------------------------------------
_COMPARE = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}


def parse_where(text: str) -> Any:
    """Turn `sex == 'M' and 30 <= age <= 39` into a kernel predicate.

    Accepts comparisons (chained too), `in`/`not in` with a tuple or list of
    literals, `and`, `or`, `not` and parentheses; attribute names are bare
    identifiers, values are literals. Nothing is evaluated.
    """
    from .kernel import col

    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError as exc:
        raise CLIError(f"--where: cannot parse {text!r}: {exc.msg}") from None

    def literal(node: ast.AST) -> Any:
        try:
            return ast.literal_eval(node)
        except ValueError:
            text = ast.unparse(node)
            raise CLIError(f"--where: expected a literal value, got {text!r}") from None

    def convert(node: ast.AST) -> Any:
        if isinstance(node, ast.BoolOp):
            parts = [convert(v) for v in node.values]
            out = parts[0]
            for p in parts[1:]:
                out = (out & p) if isinstance(node.op, ast.And) else (out | p)
            return out
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return ~convert(node.operand)
        if isinstance(node, ast.Compare):
            terms = [node.left, *node.comparators]
            result = None
            for left, op, right in zip(terms, node.ops, terms[1:], strict=False):
                result_part = compare(left, op, right)
                result = result_part if result is None else (result & result_part)
            return result
        raise CLIError(f"--where: unsupported expression {ast.unparse(node)!r}")

    def compare(left: ast.AST, op: ast.cmpop, right: ast.AST) -> Any:
        if isinstance(op, (ast.In, ast.NotIn)):
            if not isinstance(left, ast.Name):
                raise CLIError("--where: 'in' needs an attribute name on its left")
            values = literal(right)
            if not isinstance(values, (tuple, list, set)):
                raise CLIError("--where: 'in' needs a tuple or list of values")
            pred = col(left.id).isin(list(values))
            return ~pred if isinstance(op, ast.NotIn) else pred
        symbol = _COMPARE.get(type(op))
        if symbol is None:
            raise CLIError(f"--where: unsupported comparison {type(op).__name__}")
        if isinstance(left, ast.Name) and not isinstance(right, ast.Name):
            name, value = left.id, literal(right)
        elif isinstance(right, ast.Name) and not isinstance(left, ast.Name):
            flipped = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}
            name, value, symbol = right.id, literal(left), flipped[symbol]
        else:
            raise CLIError("--where: each comparison needs one attribute and one value")
        column = col(name)
        return {
            "==": lambda: column == value,
            "!=": lambda: column != value,
            "<": lambda: column < value,
            "<=": lambda: column <= value,
            ">": lambda: column > value,
            ">=": lambda: column >= value,
        }[symbol]()

    return convert(tree)


# -- loading -------------------------------------------------------------------------
def load_table(path: str, domain: Any, show_bad_values: bool = False) -> pd.DataFrame:
    """Read a CSV or Parquet file's domain columns, checking every value.

    A bad value is reported by column and kind of problem, never shown or
    counted: the values are the private data. `show_bad_values` (the data
    holder's `--show-bad-values`) adds the counts and the first few
    offending rows and values. A header naming a column twice is refused
    (pandas would rename the copy and ignore it).
    """
    from .domain import DomainValueError

    try:
        return _load_table(path, domain, show_bad_values)
    except DomainValueError as exc:
        tail = exc.listing if exc.listing is not None else "--show-bad-values lists them"
        raise CLIError(f"{path}: {exc.summary}; {tail}") from None


def _load_table(path: str, domain: Any, show_bad_values: bool) -> pd.DataFrame:
    file = Path(path)
    if not file.is_file():
        raise CLIError(f"data file not found: {path}")
    suffix = file.suffix.lower()
    if suffix in (".parquet", ".pq"):
        try:
            frame = pd.read_parquet(file)
        except ImportError:
            raise CLIError("reading Parquet needs pyarrow: pip install 'ektelo[parquet]'") from None
        except Exception as exc:
            raise CLIError(f"{path}: not a readable Parquet file ({exc})") from None
        repeated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()]})
        if repeated:
            raise CLIError(f"{path}: the file repeats column name(s) {repeated}")
        missing = [n for n in domain.names if n not in frame.columns]
        if missing:
            raise CLIError(f"{path}: missing column(s) {missing}")
        frame = frame[list(domain.names)]
        domain.encode(frame, show_bad_values=show_bad_values)
        return frame
    try:
        return domain.read_csv(file, ignore_extra=True, show_bad_values=show_bad_values)
    except pd.errors.ParserError as exc:
        raise CLIError(f"{path}: malformed CSV ({str(exc).splitlines()[0]})") from None
    except pd.errors.EmptyDataError:
        raise CLIError(f"{path}: the file is empty") from None
    except UnicodeDecodeError:
        raise CLIError(f"{path}: not a text CSV file") from None


def _epsilon(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"epsilon must be a number, got {text!r}") from None
    try:
        return check.positive(value, "epsilon")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _params(items: Sequence[str]) -> dict[str, Any]:
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


# -- commands -------------------------------------------------------------------------
def _write_answers(path: str | None, rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    if path is None:
        frame = pd.DataFrame(rows)
        with pd.option_context("display.max_rows", 20, "display.width", 120):
            print(frame.to_string(index=False, max_rows=20))
        return
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix.lower() == ".json":
        out.write_text(json.dumps({"meta": meta, "answers": rows}, indent=1))
    else:
        pd.DataFrame(rows).to_csv(out, index=False)
    print(f"wrote {len(rows)} answers to {out}")


def cmd_run(args: argparse.Namespace) -> int:
    import ektelo

    from . import plans
    from .domain import Domain
    from .kernel import ProtectedTable
    from .planner import choose_plan
    from .workload.spec import parse

    try:
        domain = Domain.from_json(Path(args.domain))
    except FileNotFoundError:
        raise CLIError(f"domain file not found: {args.domain}") from None
    except json.JSONDecodeError as exc:
        raise CLIError(f"{args.domain}: not valid JSON ({exc.msg})") from None
    workload = parse(args.workload, domain)
    frame = load_table(args.data, domain, show_bad_values=args.show_bad_values)
    shape = tuple(domain[n].size for n in workload.attributes)
    if args.plan == "auto":
        plan_name, why = choose_plan(workload.kind, shape)  # ektelo.planner: public facts
        print(f"plan: {plan_name} (auto: {why})")
    else:
        plan_name = args.plan
    info = plans.get(plan_name)
    params = _params(args.param)

    table = ektelo.protect(
        frame, domain, epsilon=args.epsilon, seed=args.seed, show_bad_values=args.show_bad_values
    )
    assert isinstance(table, ProtectedTable)  # (a DataFrame is protected as a table)
    if args.where:
        table = table.where(parse_where(args.where))
    W = workload.matrix
    start = time.perf_counter()
    with Progress(f"running {plan_name} (ε={args.epsilon:g})"):
        result = _run_plan(plan_name, info, table, workload, W, args.epsilon, params)
    elapsed = time.perf_counter() - start
    answers = np.asarray(result) if info.returns == "answers" else W @ np.asarray(result)

    errors, error_kind = _error_bars(plan_name, info, shape, W, args.epsilon, params)
    rows = [
        {"query": label, "answer": float(a), "std_error": e, "error_kind": error_kind}
        for label, a, e in zip(workload.labels, answers, errors, strict=True)
    ]
    budget = table.budget
    meta = {
        "plan": plan_name,
        "epsilon": args.epsilon,
        "workload": args.workload,
        "where": args.where,
        "budget": {"total": budget.total, "spent": budget.spent, "remaining": budget.remaining},
        "seed": args.seed,
        "error_kind": error_kind,
    }
    _write_answers(args.out, rows, meta)
    print(f"budget: total ε={budget.total:g}, spent ε={budget.spent:g}, "
          f"remaining ε={budget.remaining:g}; plan ran in {elapsed:.2f} s")
    for request in table.history():
        eps = "-" if request.eps is None else f"{float(request.eps):g}"  # (None: a ρ request)
        print(f"  {request.operation:<22} ε={eps:<10} "
              f"charged at the table: ε={float(request.charged_at_root):g}")
    if args.seed is not None:
        print("note: research mode (seeded noise) — not for releasing real data")
    return 0


def _run_plan(
    plan_name: str, info: Any, table: Any, workload: Any, W: Any, eps: float,
    params: dict[str, Any],
) -> Any:
    from . import plans

    if info.input_kind == "table":
        sub = table.select(list(workload.attributes))
        if plan_name == "cdf_estimator":
            if workload.kind != "prefix" or len(workload.attributes) != 1:
                raise CLIError("cdf_estimator answers a prefix:ATTR workload")
            params = {"attribute": workload.attributes[0], **params}
        return plans.run(plan_name, sub, W, eps, **params)
    x = table.vectorize(list(workload.attributes))
    return plans.run(plan_name, x, W, eps, **params)


def _error_bars(
    plan_name: str, info: Any, shape: tuple[int, ...], W: Any, eps: float, params: dict[str, Any]
) -> tuple[list[float | None], str]:
    """Exact per-query standard errors for data-independent plans, else none."""
    from .operators import error
    from .plans import strategy_for

    if info.data_dependent or params:
        return [None] * W.shape[0], "none (data-dependent plan: no closed-form error)"
    A = strategy_for(plan_name, shape, W)
    if A is None:
        return [None] * W.shape[0], "none (plan has no fixed strategy)"
    try:
        variances = error.expected_error(W, A, eps, per_query=True)
    except (ValueError, MemoryError) as exc:
        return [None] * W.shape[0], f"none ({exc})"
    return [float(math.sqrt(v)) for v in np.asarray(variances)], "exact expected (LS, Laplace)"


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
            where = "generated"
        elif root is not None and d.available(root):
            where = str(d.path(root))
        else:
            where = "not found"
        print(f"{d.name:12s} {d.description}  ({where})")
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ektelo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="answer a workload privately over a CSV/Parquet table")
    run.add_argument("--data", required=True, help="CSV or Parquet file")
    run.add_argument("--domain", required=True, help="domain description (JSON)")
    run.add_argument("--workload", required=True, help="workload spec, e.g. prefix:salary")
    run.add_argument("--plan", default="auto", help="plan name or 'auto' (default)")
    run.add_argument("--epsilon", required=True, type=_epsilon, help="privacy budget ε > 0")
    run.add_argument("--where", help="row filter, e.g. \"sex == 'M' and 30 <= age <= 39\"")
    run.add_argument("--out", help="write answers to this .csv or .json file")
    run.add_argument("--seed", type=int, help="research mode: seeded (insecure) noise")
    run.add_argument("--param", action="append", default=[], help="plan parameter KEY=VALUE")
    run.add_argument("--show-bad-values", action="store_true",
                     help="data holder only: list the first 10 bad rows and values in the error "
                          "(private data; by default only the column and the kind of problem)")
    run.set_defaults(func=cmd_run)

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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `ektelo` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        print("ektelo: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        from .kernel import BudgetExceeded

        kind = "budget exceeded" if isinstance(exc, BudgetExceeded) else "error"
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, KeyError):
            message = message.strip("'\"")
        print(f"ektelo: {kind}: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
