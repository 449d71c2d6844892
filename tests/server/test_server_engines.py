"""The server's datasets on table engines (issue #28): a real `ektelo-serve`
serving one table from memory, from its CSV through DuckDB (the default for
a file), from Parquet and from a DuckDB database table. Under the same
research seed every one answers exactly as the memory-backed one (the
engines compute the same counts; the noise is the kernel's). The status page
names each dataset's engine. The configuration's engine keys are checked at
start-up with errors naming the key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import col
from ektelo.matrix import Identity, Total
from ektelo.server.config import load_config
from tests.server.harness import DOMAIN, ServerProcess, http, run_admin, table_rows, write_config

duckdb = pytest.importorskip("duckdb", reason="ENGINE NOT TESTED: duckdb is not installed")

NAMES = ("mem", "csv", "pq", "db", "db_url")


@pytest.fixture(scope="module")
def engines_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    d = tmp_path_factory.mktemp("engines")
    (d / "tab.csv").write_text(table_rows(400, seed=3))
    frame = pd.read_csv(d / "tab.csv")
    frame.to_parquet(d / "tab.parquet")
    with duckdb.connect(str(d / "warehouse.duckdb")) as con:
        con.register("frame", frame)
        con.execute("CREATE TABLE people AS SELECT * FROM frame")
    (d / "tab-domain.json").write_text(json.dumps(DOMAIN))
    common = {"domain": "tab-domain.json", "epsilon": 1000.0, "seed": 5}
    config = write_config(
        d,
        {
            "mem": {"data": "tab.csv", "engine": "memory", **common},
            "csv": {"data": "tab.csv", "memory_limit": "256MB", "threads": 1,
                    "temp_directory": "spill", **common},  # the default engine: DuckDB
            "pq": {"data": "tab.parquet", "engine": "duckdb", **common},
            "db": {"data": "warehouse.duckdb", "table": "people", **common},
            "db_url": {"data": f"duckdb://{d / 'warehouse.duckdb'}?table=people", **common},
        },
    )
    admin = run_admin(config, "init")
    token = ""
    for name in NAMES:
        token = run_admin(config, "add-analyst", "ann", "--dataset", name)
    server = ServerProcess(config).start()
    try:
        yield {"url": server.url, "token": token, "admin": admin, "config": config}
    finally:
        server.stop()


def _answers(url: str, token: str, name: str) -> list[Any]:
    return _steps(ektelo.connect(url, token).dataset(name))


def _steps(t: Any) -> list[Any]:
    assert isinstance(t, ektelo.ProtectedTable)
    seen: list[Any] = []
    v = t.where(col("b").isin(["x", "z"]) & (col("a") >= 1)).vectorize(["a", "c"])
    seen.append(v.laplace(Identity(20), eps=1.0).answers.tolist())
    seen.append(t.noisy_count(eps=0.5).answers.tolist())
    g = t.group_by(["b"], count="n", count_cap=3).vectorize()
    seen.append(g.laplace(Total(g.size), eps=0.5).answers.tolist())
    seen.append(t.privbayes_select(eps=1.0))
    pairs = [("a", "b"), ("a", "c"), ("b", "c")]
    ests = [np.zeros(12), np.zeros(20), np.zeros(15)]
    seen.append(t.where(col("c") != 4).select_marginal(pairs, ests, eps=1.0))
    seen.append(t.budget.spent)
    return seen


def test_engine_backed_datasets_answer_as_the_memory_one(engines_server: dict[str, Any]) -> None:
    url, token = engines_server["url"], engines_server["token"]
    reference = _answers(url, token, "mem")
    assert reference[-1] == pytest.approx(4.5)
    for name in NAMES[1:]:
        assert _answers(url, token, name) == reference, name


def test_with_a_durable_ledger_every_session_opens_its_own_engine(tmp_path: Path) -> None:
    """With a ledger store each session is a kernel of its own (its own DuckDB
    connection, the file not scanned again) with its own research seed, derived
    from the configured one and the session id (issue #36: no two sessions
    share a noise stream): each session answers exactly as a local kernel of
    that seed, and no two sessions have the same seed."""
    (tmp_path / "tab.csv").write_text(table_rows(300, seed=4))
    (tmp_path / "tab-domain.json").write_text(json.dumps(DOMAIN))
    common = {"data": "tab.csv", "domain": "tab-domain.json", "epsilon": 1000.0, "seed": 9}
    config = write_config(tmp_path, {"mem": {**common, "engine": "memory"}, "duck": common},
                          ledger="ledger.sqlite")  # fmt: skip
    run_admin(config, "init")
    token = ""
    for name in ("mem", "duck"):
        token = run_admin(config, "add-analyst", "ann", "--dataset", name)
    frame = pd.read_csv(tmp_path / "tab.csv")
    server = ServerProcess(config).start()
    seeds = set()
    try:
        for _ in range(2):  # a second session: a new kernel and engine on each side
            for name in ("duck", "mem"):
                remote = ektelo.connect(server.url, token).dataset(name)
                seed = remote.seed
                assert seed is not None and seed not in seeds and seed != 9
                seeds.add(seed)
                local = ektelo.protect(frame, ektelo.Domain.from_dict(DOMAIN), epsilon=1000.0,
                                       seed=seed, engine="memory")
                # the answers (not the spent budget: the durable one is the dataset's)
                assert _steps(remote)[:-1] == _steps(local)[:-1], name
    finally:
        server.stop()


def test_the_status_page_names_each_engine(engines_server: dict[str, Any]) -> None:
    status, page = http(
        "GET", f"{engines_server['url']}/status", token=engines_server["admin"]
    )
    assert status == 200
    rows = page[page.index('id="datasets"'):page.index('id="analysts"')]
    for name, engine in (("mem", "memory"), ("csv", "duckdb"), ("pq", "duckdb"),
                         ("db", "duckdb")):  # fmt: skip
        assert f"<td>{name}</td><td>table</td><td>{engine}</td>" in rows, name


def _config(tmp: Path, spec: dict[str, Any]) -> Path:
    (tmp / "t.csv").write_text(table_rows(10))
    (tmp / "t.parquet").write_bytes(b"not parquet")
    (tmp / "d.json").write_text(json.dumps(DOMAIN))
    return write_config(tmp, {"t": {"domain": "d.json", "epsilon": 1.0, **spec}})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"data": "t.csv", "engine": "sqlite"}, "engine must be one of"),
        ({"data": "t.csv", "engine": "memory", "threads": 2}, "are DuckDB's options"),
        ({"data": "t.csv", "memory_limit": "lots"}, "memory_limit must be a size"),
        ({"data": "t.csv", "threads": 0}, "threads must be a positive integer"),
        ({"data": "t.csv", "table": "people"}, "a DuckDB database (.db, .duckdb)"),
        ({"data": "t.db"}, "does not exist"),
        ({"data": "d.json"}, "must be a .csv, .parquet or .npy file"),
        ({"data": "duckdb://t.db?table=x"}, "duckdb:///path/to/file.db?table=name"),
        ({"data": "t.csv", "bogus": 1}, "unknown keys"),
    ],
)
def test_engine_keys_are_checked_when_the_file_is_read(
    tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=r"\[datasets\.t\]") as raised:
        load_config(_config(tmp_path, spec))
    assert message in str(raised.value)


def test_the_default_engine_is_duckdb_for_files(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, {"data": "t.csv"})).datasets["t"]
    assert cfg.engine == "duckdb" and cfg.source == str(tmp_path / "t.csv")


def test_a_dataset_duckdb_cannot_read_stops_the_server(tmp_path: Path) -> None:
    """Bad data is refused at start-up (one scan), not at a client's first request."""
    config = _config(tmp_path, {"data": "t.parquet"})
    server = ServerProcess(config)
    with pytest.raises(RuntimeError, match="ektelo-serve exited"):
        server.start(timeout=60)
    assert "DuckDB cannot read it" in server.log.read_text()


def test_a_dataset_served_per_person(tmp_path: Path) -> None:
    """`privacy_unit` / `max_rows_per_unit` per dataset (issue #37): every
    session's requests are charged k·ε per person at the dataset's root, and
    each session answers as a local kernel bounding the same rows (its seed
    derives the bounding key in research mode), on memory and DuckDB."""
    rows = table_rows(300, seed=5).splitlines()
    people = [f"{rows[0]},person"] + [f"{r},{i % 40}" for i, r in enumerate(rows[1:])]
    (tmp_path / "visits.csv").write_text("\n".join(people) + "\n")
    (tmp_path / "visits-domain.json").write_text(json.dumps(DOMAIN))
    common = {"data": "visits.csv", "domain": "visits-domain.json", "epsilon": 10.0, "seed": 3,
              "privacy_unit": "person", "max_rows_per_unit": 2}
    config = write_config(tmp_path, {"mem": {**common, "engine": "memory"}, "duck": common},
                          ledger="ledger.sqlite")  # fmt: skip
    run_admin(config, "init")
    token = ""
    for name in ("mem", "duck"):
        token = run_admin(config, "add-analyst", "ann", "--dataset", name)
    frame = pd.read_csv(tmp_path / "visits.csv")
    server = ServerProcess(config).start()
    try:
        for name in ("mem", "duck"):
            remote = ektelo.connect(server.url, token).dataset(name)
            answer = remote.vectorize(["a"]).laplace(Identity(4), eps=0.5).answers.tolist()
            assert remote.budget.spent == pytest.approx(2 * 0.5)  # k·ε per person
            local = ektelo.protect(frame, ektelo.Domain.from_dict(DOMAIN), epsilon=10.0,
                                   seed=remote.seed, engine="memory", privacy_unit="person",
                                   max_rows_per_unit=2)  # fmt: skip
            assert local.vectorize(["a"]).laplace(Identity(4), eps=0.5).answers.tolist() == answer
    finally:
        server.stop()
    bad = write_config(tmp_path, {"x": {**common, "max_rows_per_unit": 0}})
    with pytest.raises(ValueError, match="max_rows_per_unit"):
        load_config(bad)


def test_a_dataset_bounds_groups_per_person(tmp_path: Path) -> None:
    """`max_groups_per_unit`, `max_rows_per_group` and `group_by` per dataset
    (issue #37) reach the kernel; a half-given bound is refused at start-up."""
    (tmp_path / "visits.csv").write_text("a,b,person\n0,1,7\n")
    (tmp_path / "visits-domain.json").write_text(json.dumps(DOMAIN))
    common = {"data": "visits.csv", "domain": "visits-domain.json", "epsilon": 1.0,
              "privacy_unit": "person", "max_groups_per_unit": 2, "max_rows_per_group": 3,
              "group_by": ["a"]}  # fmt: skip
    ds = load_config(write_config(tmp_path, {"v": common})).datasets["v"]
    assert (ds.max_groups_per_unit, ds.max_rows_per_group, ds.group_by) == (2, 3, ("a",))
    for drop, match in (("group_by", "together"), ("max_groups_per_unit", "together")):
        spec = {k: v for k, v in common.items() if k != drop}
        with pytest.raises(ValueError, match=match):
            load_config(write_config(tmp_path, {"v": spec}))
    with pytest.raises(ValueError, match="not both"):
        load_config(write_config(tmp_path, {"v": {**common, "max_rows_per_unit": 2}}))
