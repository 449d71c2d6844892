"""`ektelo budget` and `ektelo audit verify` open a PostgreSQL ledger by its URL
(issue #40: the URL was wrapped in a Path, and `postgresql://` became
`postgresql:/`)."""

from __future__ import annotations

from typing import Any

import numpy as np

import ektelo
from ektelo.cli import main
from ektelo.matrix import Identity


def test_budget_and_audit_read_a_postgres_ledger(pg_url: str, capsys: Any) -> None:
    x = ektelo.protect(np.arange(4), epsilon=1.0, ledger=pg_url, dataset="pg")
    x.laplace(Identity(4), eps=0.25)
    assert main(["budget", "--ledger", pg_url]) == 0
    out = capsys.readouterr().out
    assert "pg" in out and "0.25" in out
    assert main(["audit", "verify", "--ledger", pg_url]) == 0
    assert "hash chain intact" in capsys.readouterr().out
