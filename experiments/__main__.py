"""`python -m experiments NAME [--out DIR] [--trials N] [--quick] ...` from the
repository root: re-run one of the paper's experiments (§10)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from . import names, run
from .common import set_data_dir


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments",
        description="Re-run an experiment of the εktelo paper (§10): prints its table "
        "and writes <name>.csv and <name>.png to --out.",
    )
    parser.add_argument("name", choices=names(), help="the experiment")
    parser.add_argument("--out", default="out", help="output directory (default: out)")
    parser.add_argument("--trials", type=int, default=None, help="number of trials")
    parser.add_argument("--quick", action="store_true", help="reduced version (minutes)")
    parser.add_argument("--only", help="dpbench: run only these algorithms (ALGO[,ALGO])")
    parser.add_argument("--dims", type=int, choices=(1, 2),
                        help="dpbench, planner: only 1-D or 2-D")
    parser.add_argument("--shares", help="planner: the feature shares of ε to try (S[,S]; "
                        "default 0.05)")
    parser.add_argument("--write-table", action="store_true",
                        help="planner: write src/ektelo/planner/table.json trained on all "
                        "datasets")
    parser.add_argument(
        "--data-dir",
        help="benchmark data directory holding dpbench/, adult/, credit/ (default: "
        "$EKTELO_DATA, else shared/data beside the checkout)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.data_dir is not None:
        set_data_dir(args.data_dir)
    only = None if args.only is None else tuple(a for a in args.only.split(",") if a.strip())
    try:
        shares = None if args.shares is None else tuple(
            float(s) for s in args.shares.split(",") if s.strip())
    except ValueError:
        print(f"experiments: error: --shares must be numbers like 0.05,0.1, got {args.shares!r}",
              file=sys.stderr)
        return 2
    try:
        run(
            args.name,
            out=Path(args.out),
            trials=args.trials,
            quick=args.quick,
            only=only,
            dims=args.dims,
            shares=shares,
            write_table=True if args.write_table else None,
        )
    except KeyboardInterrupt:
        print("experiments: interrupted", file=sys.stderr)
        return 130
    except ImportError as exc:
        print(f"experiments: error: {exc} (the experiments need the 'experiments' extra: "
              "pip install -e '.[experiments]')", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError) as exc:
        print(f"experiments: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
