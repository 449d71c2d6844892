"""Insecure modes never reach analysts silently (issue #36).

* A served dataset with a research `seed` is refused at start unless its
  section says ``insecure_research_seed = true``; then every response about
  it carries the ``Ektelo-Insecure`` header (and session and request bodies
  an ``insecure`` note), and the status page names it.
* With a durable ledger each session's kernel draws from its own stream (a
  seed derived from the configured one and the session id): the same query
  in two sessions gets different noise — sessions used to repeat the same
  noise, which differencing removes.
* Serving without a durable ledger is refused unless
  ``insecure_in_memory_ledger = true``, which the status page then shows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import ektelo
from ektelo import wire
from ektelo.matrix import Identity
from ektelo.server.config import load_config
from ektelo.server.sessions import session_seed
from tests.server.harness import ServerProcess, http, run_admin, vector, write_config


def _vector_config(tmp_path: Path, dataset: dict[str, object], **server: object) -> Path:
    np.save(tmp_path / "x.npy", vector(16))
    return write_config(tmp_path, {"x": {"data": "x.npy", "epsilon": 10.0, **dataset}}, **server)


@pytest.mark.parametrize(("dataset", "server", "message"), [
    ({"seed": 7, "insecure_research_seed": False}, {},
     r"seed = 7 is research mode .*refused unless insecure_research_seed = true"),
    ({"insecure_research_seed": True}, {}, "insecure_research_seed applies to a dataset with seed"),
    ({"seed": 7, "insecure_research_seed": "yes"}, {}, "insecure_research_seed must be true or "
                                                       "false"),
    ({}, {"insecure_in_memory_ledger": False},
     r"ledger is not set: .*insecure_in_memory_ledger = true for a test or demo"),
    ({}, {"insecure_in_memory_ledger": 1}, "insecure_in_memory_ledger must be true or false"),
])
def test_insecure_modes_are_refused_unless_opted_in(tmp_path, dataset, server, message):
    config = _vector_config(tmp_path, dataset, **server)
    with pytest.raises(ValueError, match=message):
        load_config(config)
    with pytest.raises(RuntimeError, match="exited"):  # the server refuses to start
        ServerProcess(config).start()


def test_add_dataset_with_a_seed_needs_the_explicit_opt_in(tmp_path):
    config = _vector_config(tmp_path, {})
    before = config.read_text()
    with pytest.raises(RuntimeError, match="insecure_research_seed"):
        run_admin(config, "add-dataset", "r", "--data", "x.npy", "--epsilon", "1", "--seed", "3")
    assert config.read_text() == before
    run_admin(config, "add-dataset", "r", "--data", "x.npy", "--epsilon", "1", "--seed", "3",
              "--insecure-research-seed")
    assert load_config(config).datasets["r"].insecure_research_seed


def test_session_seeds_are_distinct_and_fixed_by_public_facts():
    seeds = {session_seed(7, "x", f"s{i}") for i in range(1000)}
    assert len(seeds) == 1000 and 7 not in seeds
    assert session_seed(7, "x", "s1") == session_seed(7, "x", "s1") != session_seed(8, "x", "s1")
    assert session_seed(None, "x", "s1") is None


def test_a_research_seed_is_stated_everywhere_and_never_shared_by_sessions(tmp_path):
    np.save(tmp_path / "x.npy", vector(16))
    config = write_config(tmp_path, {
        "research": {"data": "x.npy", "epsilon": 100.0, "seed": 7,
                     "insecure_research_seed": True},
        "secure": {"data": "x.npy", "epsilon": 100.0},
    }, ledger="ledger.sqlite")
    admin = run_admin(config, "init")
    token = ""
    for name in ("research", "secure"):
        token = run_admin(config, "add-analyst", "ann", "--dataset", name)
    server = ServerProcess(config).start()
    try:
        url = server.url
        status, doc = http("POST", f"{url}/v1/datasets/research/sessions", b"{}", token)
        assert status == 200 and "INSECURE" in doc["insecure"]
        laplace = {"request": {"$type": "VectorLaplace", "fields": {
            "source": 0, "matrix": wire.encode(Identity(16)), "eps": 0.5}}}
        body = json.dumps(laplace).encode()
        status, out = http("POST", f"{url}/v1/sessions/{doc['session']}", body, token)
        assert status == 200 and "INSECURE" in out["insecure"]
        # headers: every response about the research dataset, none about the secure one
        for path, method, data in (
            ("/v1/datasets/research/sessions", "POST", b"{}"),
            (f"/v1/sessions/{doc['session']}", "POST", body),
            (f"/v1/sessions/{doc['session']}", "POST", b"not json"),  # a 400 too
            ("/v1/datasets/research/budget", "GET", None),
        ):
            assert _header(url + path, method, data, token) == "research-seed", path
        assert _header(f"{url}/v1/datasets/secure/budget", "GET", None, token) is None
        # two sessions, the same query: different noise, each from its own seed
        a = ektelo.connect(url, token).dataset("research")
        b = ektelo.connect(url, token).dataset("research")
        ma, mb = a.laplace(Identity(16), eps=1.0), b.laplace(Identity(16), eps=1.0)
        assert ma.seed != mb.seed and not np.array_equal(ma.answers, mb.answers)
        page = http("GET", f"{url}/status", token=admin)[1]
        rows = page[page.index('id="datasets"'):page.index('id="analysts"')]
        assert "<td>research</td>" in rows and "INSECURE: research seed" in rows
        assert rows.count("secure noise") == 1
        assert 'id="insecure-ledger"' not in page  # a durable ledger
    finally:
        server.stop()


def test_the_status_page_shows_an_in_memory_ledger(served):
    page = http("GET", f"{served.url}/status", token=served.admin)[1]
    assert 'id="insecure-ledger"' in page and "every budget is lost on restart" in page


def _header(url: str, method: str, data: bytes | None, token: str) -> str | None:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.headers.get("Ektelo-Insecure")
    except urllib.error.HTTPError as err:
        return err.headers.get("Ektelo-Insecure")
