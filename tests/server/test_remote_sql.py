"""SQL through a server (issue #39): `ektelo.connect(url, token).session(name)
.sql(...)` compiles and plans here and measures on the server through the
same typed requests a local session sends — the same answers bit for bit
as a local session on a kernel with the server session's research seed,
the same ledger and history; refused SQL spends nothing on the server."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo.errors import SqlError
from ektelo.session import Session
from tests.server.harness import ServerProcess, run_admin, write_config

DOMAIN = {"sex": {"values": ["F", "M"]}, "race": 4, "age": 12}
TEXT = ("SELECT sex, COUNT(*) AS n, SUM(age) AS s, AVG(age) FROM t WHERE race IN (0, 1) "
        "GROUP BY sex; SELECT race, COUNT(*) FROM t WHERE sex = 'M' OR age < 3 GROUP BY race "
        "ORDER BY COUNT(*) DESC")


@pytest.fixture(scope="module")
def sql_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Any]]:
    import json

    d = tmp_path_factory.mktemp("sql")
    rng = np.random.default_rng(4)
    frame = pd.DataFrame({"sex": rng.choice(["F", "M"], 800), "race": rng.integers(0, 4, 800),
                          "age": rng.integers(0, 12, 800)})
    frame.to_csv(d / "t.csv", index=False)
    (d / "t-domain.json").write_text(json.dumps(DOMAIN))
    _towns().to_csv(d / "towns.csv", index=False)
    (d / "towns-domain.json").write_text(json.dumps(TOWNS))
    config = write_config(d, {"t": {"data": "t.csv", "domain": "t-domain.json",
                                    "epsilon": 5.0, "seed": 23},
                              "towns": {"data": "towns.csv", "domain": "towns-domain.json",
                                        "epsilon": 5.0, "delta": 1e-6, "seed": 29}})
    run_admin(config, "init")
    token = run_admin(config, "add-analyst", "ana", "--dataset", "t")
    token = run_admin(config, "add-analyst", "ana", "--dataset", "towns")  # (one token: both)
    server = ServerProcess(config).start()
    try:
        yield server.url, token, frame
    finally:
        server.stop()


TOWNS = {"age": 12, "city": {"open": True}}


def _towns() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    p = 1 / np.arange(1, 13)
    return pd.DataFrame({"age": rng.integers(0, 12, 3000),
                         "city": rng.choice([f"c{i}" for i in range(12)], 3000, p=p / p.sum())})


def _records(history: Any) -> list[Any]:
    return [dataclasses.replace(r, request_id=None) for r in history]


def test_sql_remotely_equals_sql_locally(sql_server: tuple[str, str, Any]) -> None:
    url, token, frame = sql_server
    table = ektelo.connect(url, token).dataset("t")
    remote = Session.over(table)
    local_table = ektelo.protect(frame, ektelo.Domain.from_dict(DOMAIN), epsilon=5.0,
                                 seed=table.seed)
    local = Session.over(local_table)
    got = remote.sql(TEXT, epsilon=1.0)
    expected = local.sql(TEXT, epsilon=1.0)
    for g, e in zip(got, expected, strict=True):
        pd.testing.assert_frame_equal(g, e)
    assert remote.spent == local.spent == pytest.approx(1.0)
    assert table.ledger() == local_table.ledger()
    assert _records(table.history()) == _records(local_table.history())
    # refused SQL: nothing reaches the server
    with pytest.raises(SqlError, match="JOIN"):
        remote.sql("SELECT COUNT(*) FROM t JOIN u ON t.a = u.a", epsilon=1.0)
    assert remote.spent == pytest.approx(1.0)
    explained = remote.sql(TEXT, epsilon=1.0, explain=True)
    assert remote.spent == pytest.approx(1.0)
    assert explained[0].attrs["plan"] == got[0].attrs["plan"]
    # Connection.session: the same, opened in one call
    other = ektelo.connect(url, token).session("t")
    assert other.spent == pytest.approx(1.0)  # the dataset's budget, shared
    other.sql("SELECT COUNT(*) FROM t", epsilon=0.5)
    assert other.spent == pytest.approx(1.5)


def test_open_columns_remotely_equal_locally(sql_server: tuple[str, str, Any]) -> None:
    """Partition selection through the server (issue #39): the same keys and
    answers as a local kernel with the server session's seed."""
    url, token, _ = sql_server
    table = ektelo.connect(url, token).dataset("towns")
    frame = _towns()
    remote = Session.over(table)
    local_table = ektelo.protect(frame, ektelo.Domain.from_dict(TOWNS), epsilon=5.0,
                                 delta=1e-6, seed=table.seed)
    local = Session.over(local_table)
    text = "SELECT city, COUNT(*) AS n FROM t GROUP BY city ORDER BY n DESC LIMIT 4"
    (got,) = remote.sql(text, epsilon=1.0)
    (expected,) = local.sql(text, epsilon=1.0)
    pd.testing.assert_frame_equal(got, expected)
    assert remote.domain == local.domain and remote.domain["city"].values[0] == "c0"
    assert _records(table.history()) == _records(local_table.history())
