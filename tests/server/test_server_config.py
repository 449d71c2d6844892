"""The custodian's side: configuration checks, `ektelo-admin add-dataset`, and
the response-time floor (`min_response_ms`) on a real server."""

from __future__ import annotations

import time

import numpy as np
import pytest

import ektelo
from ektelo.matrix import Total
from ektelo.server.config import load_config
from tests.server.harness import ServerProcess, run_admin, vector, write_config


@pytest.mark.parametrize(
    ("server", "dataset", "message"),
    [
        ({"colour": "red"}, {"data": "x.npy", "epsilon": 1.0}, "unknown keys"),
        ({}, {"data": "nope.npy", "epsilon": 1.0}, "does not exist"),
        ({}, {"data": "x.npy"}, "give the budget"),
        ({}, {"data": "x.npy", "epsilon": -1.0}, "positive number"),
        ({}, {"data": "x.npy", "epsilon": 1.0, "rho": 0.1}, "give the budget"),
        ({}, {"data": "x.npy", "epsilon": 1.0, "path": "/etc"}, "unknown keys"),
        ({}, {"data": "x.csv", "epsilon": 1.0}, "needs domain"),
        ({"port": 0}, {"data": "x.npy", "epsilon": 1.0}, "positive integer"),
        ({"min_response_ms": -5}, {"data": "x.npy", "epsilon": 1.0}, "min_response_ms"),
        ({"header_timeout_s": 0}, {"data": "x.npy", "epsilon": 1.0}, "header_timeout_s"),
        ({"body_timeout_s": "30"}, {"data": "x.npy", "epsilon": 1.0}, "body_timeout_s"),
        ({"max_concurrent_per_analyst": 0}, {"data": "x.npy", "epsilon": 1.0},
         "max_concurrent_per_analyst"),
        ({"session_history": True}, {"data": "x.npy", "epsilon": 1.0}, "session_history"),
    ],
)
def test_a_bad_configuration_names_its_problem(tmp_path, server, dataset, message):
    np.save(tmp_path / "x.npy", vector(8))
    (tmp_path / "x.csv").write_text("a\n1\n")
    config = write_config(tmp_path, {"d": dataset}, **server)
    with pytest.raises(ValueError, match=message):
        load_config(config)


def test_the_defaults_for_a_long_running_server(tmp_path):
    np.save(tmp_path / "x.npy", vector(8))
    c = load_config(write_config(tmp_path, {"d": {"data": "x.npy", "epsilon": 1.0}}))
    assert (c.header_timeout_s, c.body_timeout_s) == (10.0, 30.0)
    assert (c.max_concurrent_per_analyst, c.session_history) == (4, 256)


def test_add_dataset_appends_a_checked_section(tmp_path):
    np.save(tmp_path / "x.npy", vector(8))
    config = write_config(tmp_path, {"a": {"data": "x.npy", "epsilon": 1.0}})
    run_admin(config, "add-dataset", "b", "--data", "x.npy", "--rho", "0.5")
    assert load_config(config).datasets["b"].rho == 0.5
    before = config.read_text()
    with pytest.raises(RuntimeError, match="does not exist"):
        run_admin(config, "add-dataset", "c", "--data", "missing.npy", "--epsilon", "1")
    with pytest.raises(RuntimeError, match="already configured"):
        run_admin(config, "add-dataset", "b", "--data", "x.npy", "--epsilon", "1")
    with pytest.raises(RuntimeError, match="name"):
        run_admin(config, "add-dataset", "../evil", "--data", "x.npy", "--epsilon", "1")
    assert config.read_text() == before  # a refused change leaves the file as it was


def test_add_dataset_sets_the_engine_and_its_options(tmp_path):
    (tmp_path / "t.csv").write_text("a\n0\n1\n")
    (tmp_path / "t.json").write_text('{"a": 2}')
    np.save(tmp_path / "x.npy", vector(8))
    config = write_config(tmp_path, {"x": {"data": "x.npy", "epsilon": 1.0}})
    run_admin(config, "add-dataset", "t", "--data", "t.csv", "--domain", "t.json",
              "--epsilon", "1", "--engine", "duckdb", "--memory-limit", "256MB",
              "--threads", "1", "--temp-directory", "spill")
    ds = load_config(config).datasets["t"]
    assert ds.engine == "duckdb"
    assert 'memory_limit = "256MB"' in config.read_text()
    before = config.read_text()
    with pytest.raises(RuntimeError, match="memory_limit"):  # DuckDB's option on memory
        run_admin(config, "add-dataset", "m", "--data", "t.csv", "--domain", "t.json",
                  "--epsilon", "1", "--engine", "memory", "--memory-limit", "1GB")
    assert config.read_text() == before


def test_responses_are_padded_to_the_floor(tmp_path):
    np.save(tmp_path / "x.npy", vector(16))
    config = write_config(tmp_path, {"x": {"data": "x.npy", "epsilon": 10.0}},
                          min_response_ms=400)
    run_admin(config, "init")
    token = run_admin(config, "add-analyst", "a", "--dataset", "x")
    server = ServerProcess(config).start()
    try:
        x = ektelo.connect(server.url, token).dataset("x")
        for call in (lambda: x.laplace(Total(16), eps=0.1), lambda: x.budget):
            start = time.perf_counter()
            call()
            assert time.perf_counter() - start >= 0.4
        with pytest.raises(ektelo.BudgetExceeded):  # refusals are padded too
            start = time.perf_counter()
            x.laplace(Total(16), eps=100.0)
        assert time.perf_counter() - start >= 0.4
    finally:
        server.stop()
