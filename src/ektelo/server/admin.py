"""`ektelo-admin`: the custodian's commands for a server's configuration.

    ektelo-admin --config server.toml init                 # prints the admin token
    ektelo-admin --config server.toml add-dataset NAME --data FILE [--domain JSON]
                 [--engine memory|duckdb|spark] [--table T] [--memory-limit M] …
                 (--epsilon E [--delta D] | --rho R) [--seed S]
    ektelo-admin --config server.toml add-analyst NAME --dataset D [--quota Q]
                 [--expires-days N]
    ektelo-admin --config server.toml rotate-token NAME [--admin] [--expires-days N]
    ektelo-admin --config server.toml revoke-token NAME [--admin]

Tokens are printed once, on stdout, and stored only as keyed hashes
(`auth.TokenStore`). An analyst has one live token, covering every dataset
granted to them: `add-analyst` for a second dataset prints a new token and
revokes the earlier one, and `rotate-token`/`revoke-token` cover them all.
A dataset is appended to the configuration file (and
the file re-checked: on an error it is left as it was); restart the server
to serve it. An analyst's quota is recorded with the durable ledger when the
server has one (its per-analyst bound beneath the dataset's cap).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .. import ledger_store as store
from .auth import TokenStore
from .config import DatasetConfig, check_name, dataset_section, ensure_in_store, load_config

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ektelo-admin", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True, help="the server's TOML configuration")
    sub = p.add_subparsers(dest="command", required=True)
    init = sub.add_parser("init", help="create the state directory and an admin token")
    init.add_argument("--admin", default="custodian", help="the admin's name")
    init.add_argument("--expires-days", type=float, help="the token's lifetime (default: none)")
    ds = sub.add_parser("add-dataset", help="append a dataset to the configuration")
    ds.add_argument("name")
    ds.add_argument("--data", required=True, help="a CSV (table) or .npy (vector) file")
    ds.add_argument("--domain", help="the table's domain JSON")
    ds.add_argument("--epsilon", type=float)
    ds.add_argument("--delta", type=float)
    ds.add_argument("--rho", type=float)
    ds.add_argument("--seed", type=int, help="research mode (reproducible, NOT secure): "
                    "refused without --insecure-research-seed")
    ds.add_argument("--insecure-research-seed", action="store_true",
                    help="serve --seed anyway (every response and the status page say so)")
    ds.add_argument("--engine", choices=("memory", "duckdb", "spark"),
                    help="where the rows live (default: DuckDB for a file when installed)")
    ds.add_argument("--table", help="a table in a DuckDB database file (--data)")
    ds.add_argument("--memory-limit", help="DuckDB's memory limit, e.g. 1GB")
    ds.add_argument("--threads", type=int, help="DuckDB's worker threads")
    ds.add_argument("--temp-directory", help="DuckDB's spill directory")
    an = sub.add_parser("add-analyst", help="let an analyst open a dataset; prints a token")
    an.add_argument("name")
    an.add_argument("--dataset", required=True)
    an.add_argument("--quota", type=float, help="the analyst's budget on this dataset")
    an.add_argument("--expires-days", type=float, help="the token's lifetime (default: none)")
    for command in ("rotate-token", "revoke-token"):
        c = sub.add_parser(command, help=f"{command.split('-')[0]} a principal's tokens")
        c.add_argument("name")
        c.add_argument("--admin", action="store_true", help="an admin token, not an analyst's")
        if command == "rotate-token":
            c.add_argument("--expires-days", type=float, help="the new token's lifetime")
    return p


def _add_dataset(path: Path, args: argparse.Namespace) -> None:
    original = path.read_text() if path.exists() else ""
    options: dict[str, Any] = {"epsilon": args.epsilon, "delta": args.delta, "rho": args.rho,
                               "seed": args.seed, "engine": args.engine, "table": args.table,
                               "memory_limit": args.memory_limit, "threads": args.threads,
                               "temp_directory": args.temp_directory,
                               "insecure_research_seed": args.insecure_research_seed or None}
    section = dataset_section(args.name, args.data, args.domain, options)
    if args.name in load_config(path).datasets:
        raise ValueError(f"dataset {args.name!r} is already configured")
    path.write_text(original + section)
    try:
        load_config(path)
    except ValueError:
        path.write_text(original)
        raise


def _add_to_store(ledger: str, ds: DatasetConfig, analyst: str, quota: float | None) -> None:
    """Record the analyst and quota in the durable ledger (the dataset is
    created there with its configured cap if the server has not yet)."""
    from .app import open_ledger

    ledger_store = open_ledger(ledger)
    ensure_in_store(ledger_store, ds)
    known = {a.name for r in ledger_store.datasets() if r.name == ds.name for a in r.analysts}
    if analyst in known:
        print(f"analyst {analyst} is already on {ds.name}; quota unchanged", file=sys.stderr)
    else:
        ledger_store.add_analyst(ds.name, analyst, quota)
    ledger_store.close()


def _lifetime(args: argparse.Namespace) -> float | None:
    """--expires-days in seconds (None: the token lives until revoked)."""
    days = getattr(args, "expires_days", None)
    return None if days is None else days * 86400.0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    path = Path(args.config)
    try:
        config = load_config(path)
        tokens = TokenStore(config.state)
        if args.command == "init":
            print(tokens.issue(check_name(args.admin, "admin"), "admin", _lifetime(args)))
        elif args.command == "add-dataset":
            _add_dataset(path, args)
            print(f"added dataset {args.name}; restart the server to serve it", file=sys.stderr)
        elif args.command == "add-analyst":
            name, dataset = check_name(args.name, "analyst"), args.dataset
            if dataset not in config.datasets:
                raise ValueError(f"no dataset {dataset!r} in {path}")
            if args.quota is not None and not args.quota > 0:
                raise ValueError(f"--quota must be positive, got {args.quota}")
            if config.ledger is not None:
                _add_to_store(config.ledger, config.datasets[dataset], name, args.quota)
            tokens.grant(name, dataset, args.quota)
            # one token per analyst, covering every dataset granted (#40): a new grant
            # replaces the analyst's earlier token instead of adding a second one
            revoked = tokens.revoke(name, "analyst")
            print(tokens.issue(name, "analyst", _lifetime(args)))
            if revoked:
                print(f"{name}'s earlier token is revoked: the new one opens every dataset "
                      f"granted to {name}", file=sys.stderr)
        elif args.command == "rotate-token":
            role = "admin" if args.admin else "analyst"
            print(tokens.rotate(args.name, role, _lifetime(args)))
        elif args.command == "revoke-token":
            n = tokens.revoke(args.name, "admin" if args.admin else "analyst")
            print(f"revoked {n} token(s) of {args.name}", file=sys.stderr)
    except (ValueError, TypeError, OSError, store.StoreError) as err:
        print(f"ektelo-admin: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
