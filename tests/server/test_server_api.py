"""The server over HTTP: the normal path, and bad input and abuse (issue #26).

Every abuse case is a clear 4xx error with nothing charged (the dataset's
budget is unchanged) and nothing logged as granted (the admin's audit
endpoint), against a real `ektelo-serve` process."""

from __future__ import annotations

import contextlib
import http.client as httplib
import json
import time
from typing import Any

import numpy as np
import pytest

import ektelo
from ektelo import wire
from ektelo.client import ServerError
from ektelo.matrix import Identity, Partition, Prefix, Total
from ektelo.port import requests as port
from ektelo.server.auth import TokenStore
from tests.server.harness import http, run_admin


def _session(url: str, token: str, dataset: str = "vec") -> str:
    status, doc = http("POST", f"{url}/v1/datasets/{dataset}/sessions", b"{}", token)
    assert status == 200, doc
    return str(doc["session"])


def _granted(url: str, admin: str, dataset: str = "vec") -> int:
    status, doc = http("GET", f"{url}/v1/admin/datasets/{dataset}/audit", token=admin)
    assert status == 200, doc
    return sum(e["outcome"] == "granted" for e in doc["entries"])


def _spent(url: str, token: str, dataset: str = "vec") -> float:
    return ektelo.connect(url, token).budget(dataset).spent


def _post(url: str, sid: str, token: str, body: Any) -> tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return http("POST", f"{url}/v1/sessions/{sid}", data, token)


def _laplace_doc(matrix_doc: Any, eps: float = 0.01, source: int = 0) -> dict[str, Any]:
    return {"$type": "VectorLaplace", "fields": {"source": source, "matrix": matrix_doc,
                                                 "eps": eps}}


def test_a_remote_handle_measures_and_spends(served):
    conn = ektelo.connect(served.url, served.alice)
    assert set(conn.datasets()) == {"vec", "tab", "capped", "zcdp"}
    x = conn.dataset("vec")
    assert isinstance(x, ektelo.ProtectedVector) and x.shape == (64,) and x.integral
    before = x.budget.spent
    m = x.laplace(Prefix(64), eps=0.5)
    assert isinstance(m, ektelo.Measurement) and m.answers.shape == (64,)
    assert m.epsilon == 0.5 and m.seed == 11 and m.noise.scale >= 64 / 0.5
    assert x.budget.spent == pytest.approx(before + 0.5)
    parts = x.split_by_partition(Partition(np.repeat([0, 1], 32)))
    total = parts[1].laplace(Total(32), eps=0.25)
    assert total.answers.shape == (1,)
    history = x.history()
    assert [r.operation for r in history[-2:]] == ["laplace", "laplace"]
    assert history[-1].node == parts[1].node
    ledger = x.ledger()
    assert [s.kind for s in ledger] == ["vector", "partition", "vector", "vector"]
    t = conn.dataset("tab")
    assert t.domain.names == ("a", "b", "c")
    v = t.where(ektelo.col("b").isin(["x", "z"]) & (ektelo.col("a") >= 1)).vectorize(["a", "c"])
    assert v.shape == (4, 5)
    assert t.noisy_count(eps=0.1).answers.shape == (1,)


def test_kernel_refusals_keep_their_types_and_charge_nothing(served):
    x = ektelo.connect(served.url, served.alice).dataset("vec")
    before, granted = x.budget.spent, _granted(served.url, served.admin)
    with pytest.raises(ValueError, match="eps"):
        x.laplace(Identity(64), eps=-1.0)
    with pytest.raises(TypeError, match="eps"):
        x.laplace(Identity(64), eps="a lot")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        x.laplace(Identity(32), eps=0.1)  # wrong number of columns
    with pytest.raises(TypeError):  # a client class has no spec: refused before sending
        x.laplace(type("Mine", (Identity,), {})(64), eps=0.1)
    assert x.budget.spent == before
    assert _granted(served.url, served.admin) == granted


def test_budget_exceeded_is_a_403_and_changes_nothing(served):
    x = ektelo.connect(served.url, served.alice).dataset("capped")
    x.laplace(Identity(64), eps=0.75)
    granted = _granted(served.url, served.admin, "capped")
    with pytest.raises(ektelo.BudgetExceeded):
        x.laplace(Identity(64), eps=0.5)
    assert x.budget.spent == pytest.approx(0.75)
    assert _granted(served.url, served.admin, "capped") == granted
    sid = _session(served.url, served.alice, "capped")
    status, doc = _post(served.url, sid, served.alice,
                        {"request": _laplace_doc({"$matrix": {"type": "Identity",
                                                              "args": {"n": 64}}}, 0.5)})
    assert status == 403 and doc["error"]["type"] == "BudgetExceeded"


BAD_BODIES = {
    "not JSON": b"{not json",
    "NaN constant": b'{"request": {"$type": "GetBudget", "fields": {}}, "x": NaN}',
    "not an object": b"[1, 2, 3]",
    "no request": b'{"request_id": "r1"}',
    "extra key": b'{"request": {"$type": "GetBudget", "fields": {}}, "code": "print(1)"}',
    "unknown message type": b'{"request": {"$type": "Kernel", "fields": {}}}',
    "response type as request": b'{"request": {"$type": "NewSource", "fields": {"source": 0}}}',
    "unknown tag": b'{"request": {"$pickle": "gASV"}}',
    "bad request id": b'{"request": {"$type": "GetBudget", "fields": {}}, "request_id": 7}',
    "unknown field": json.dumps({"request": {"$type": "VectorLaplace", "fields": {
        "source": 0, "matrix": {"$matrix": {"type": "Identity", "args": {"n": 64}}},
        "eps": 0.1, "code": "x"}}}).encode(),
    "class outside the library": json.dumps({"request": _laplace_doc(
        {"$matrix": {"type": "os.system", "args": {"command": "true"}}})}).encode(),
    "spec of a subclass name": json.dumps({"request": _laplace_doc(
        {"$matrix": {"type": "EMatrix", "args": {}}})}).encode(),
    "huge implicit matrix": json.dumps({"request": _laplace_doc(
        {"$matrix": {"type": "Identity", "args": {"n": 1 << 40}}})}).encode(),
    "huge dense matrix": json.dumps({"request": {"$type": "VectorLaplace", "fields": {
        "source": 0, "eps": 0.1, "matrix": wire.encode(np.zeros((300, 300)))}}}).encode(),
    "array bytes do not match": json.dumps({"request": {"$type": "Transform", "fields": {
        "source": 0, "matrix": {"$ndarray": "AAAA", "dtype": "<f8", "shape": [64, 64]}}}}).encode(),
    "object array": json.dumps({"request": {"$type": "Transform", "fields": {
        "source": 0, "matrix": {"$ndarray": "AAAAAAAAAAA=", "dtype": "|O", "shape": [1]}}}},
    ).encode(),
    "deep nesting": ("[" * 5000 + "]" * 5000).encode(),
    "deep tuples": json.dumps({"request": {"$type": "Select", "fields": {"source": 0, "attrs": (
        {"$tuple": [{"$tuple": [{"$tuple": ["a"]}]}]})}}}).encode().replace(
        b'"a"', b'{"$tuple": ' * 100 + b'"a"' + b"}" * 100),
}


@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_malformed_requests_are_400_and_charge_nothing(served, name):
    sid = _session(served.url, served.alice)
    spent, granted = _spent(served.url, served.alice), _granted(served.url, served.admin)
    status, doc = _post(served.url, sid, served.alice, BAD_BODIES[name])
    assert status == 400, (status, doc)
    assert doc["error"]["type"] == "MalformedRequest" and doc["error"]["message"]
    assert _spent(served.url, served.alice) == spent
    assert _granted(served.url, served.admin) == granted


def test_a_body_over_the_limit_is_413(served):
    sid = _session(served.url, served.alice)
    spent = _spent(served.url, served.alice)
    for declared, body in ((2 << 20, b" " * 1024), (None, b" " * ((1 << 20) + 1))):
        conn = httplib.HTTPConnection("127.0.0.1", served.server.port, timeout=30)
        conn.putrequest("POST", f"/v1/sessions/{sid}")
        conn.putheader("Authorization", f"Bearer {served.alice}")
        conn.putheader("Content-Length", str(declared or len(body)))
        conn.endheaders()
        with contextlib.suppress(OSError):  # the server may answer before reading it all
            conn.send(body)
        response = conn.getresponse()
        doc = json.loads(response.read())
        conn.close()
        assert response.status == 413 and doc["error"]["type"] == "RequestTooLarge"
    assert _spent(served.url, served.alice) == spent


def test_unknown_and_foreign_handles_are_refused(served):
    alice = ektelo.connect(served.url, served.alice).dataset("vec")
    child = alice.transform(Identity(64)).transform(Identity(64))
    bob_sid = _session(served.url, served.bob)
    spent, granted = _spent(served.url, served.alice), _granted(served.url, served.admin)
    # bob's fresh session holds only its root: alice's handle id means nothing there
    doc = {"request": _laplace_doc({"$matrix": {"type": "Identity", "args": {"n": 64}}},
                                   source=child.node)}
    status, body = _post(served.url, bob_sid, served.bob, doc)
    assert status == 404 and "unknown source variable" in body["error"]["message"]
    # alice's session id with bob's token: not bob's session
    status, body = _post(served.url, alice.port.session, served.bob, doc)
    assert status == 404 and body["error"]["type"] == "UnknownSession"
    # a made-up session
    status, body = _post(served.url, "no-such-session", served.alice, doc)
    assert status == 404 and body["error"]["type"] == "UnknownSession"
    # through the client: an unknown id is the kernel's ValueError
    with pytest.raises(ValueError, match="unknown source variable"):
        ektelo.ProtectedVector(alice.port, 999).laplace(Identity(64), eps=0.1)
    assert _spent(served.url, served.alice) == spent
    assert _granted(served.url, served.admin) == granted


def test_tokens_wrong_missing_revoked_rotated(served):
    url = served.url
    for token in (None, "", "ekt_0000_nope", served.alice[:-2] + "xx", "Basic abc"):
        status, doc = http("GET", f"{url}/v1/datasets", token=token)
        assert status == 401 and doc["error"]["type"] == "Unauthorized"
    # an admin token is not an analyst's, and an analyst's does not open the status page
    assert http("GET", f"{url}/v1/datasets", token=served.admin)[0] == 401
    assert http("GET", f"{url}/status", token=served.alice)[0] == 401
    assert http("GET", f"{url}/status?token={served.alice}")[0] == 401
    # a dataset the analyst is not registered for looks like no dataset at all
    status, doc = http("POST", f"{url}/v1/datasets/tab/sessions", b"{}", served.bob)
    assert status == 404 and doc["error"]["type"] == "UnknownDataset"
    # rotate and revoke take effect on the running server
    carol = run_admin(served.config, "add-analyst", "carol", "--dataset", "vec")
    x = ektelo.connect(url, carol).dataset("vec")
    new = run_admin(served.config, "rotate-token", "carol")
    with pytest.raises(ServerError) as err:
        x.laplace(Identity(64), eps=0.1)
    assert err.value.status == 401
    y = ektelo.connect(url, new).dataset("vec")
    y.budget  # noqa: B018 - the new token works
    run_admin(served.config, "revoke-token", "carol")
    with pytest.raises(ServerError) as err:
        y.budget  # noqa: B018
    assert err.value.status == 401


def test_expired_tokens_are_refused(served):
    dave = run_admin(served.config, "add-analyst", "dave", "--dataset", "vec",
                     "--expires-days", "30")
    assert http("GET", f"{served.url}/v1/datasets", token=dave)[0] == 200
    short = TokenStore(served.config.parent / "state").issue("dave", expires_in=1.0)
    assert http("GET", f"{served.url}/v1/datasets", token=short)[0] == 200
    time.sleep(1.2)
    status, doc = http("GET", f"{served.url}/v1/datasets", token=short)
    assert status == 401 and "expired" in doc["error"]["message"]
    assert http("GET", f"{served.url}/v1/datasets", token=dave)[0] == 200


def test_request_ids_make_retries_free_and_refuse_other_content(served):
    sid = _session(served.url, served.alice)
    matrix = {"$matrix": {"type": "Identity", "args": {"n": 64}}}
    first = {"request": _laplace_doc(matrix, 0.125), "request_id": "retry-1"}
    status, a = _post(served.url, sid, served.alice, first)
    assert status == 200
    spent, granted = _spent(served.url, served.alice), _granted(served.url, served.admin)
    status, b = _post(served.url, sid, served.alice, first)
    assert status == 200 and a == b  # the stored answer, not a fresh draw
    other = {"request": _laplace_doc(matrix, 0.25), "request_id": "retry-1"}
    status, doc = _post(served.url, sid, served.alice, other)
    assert status == 409 and "different request" in doc["error"]["message"]
    assert _spent(served.url, served.alice) == spent
    assert _granted(served.url, served.admin) == granted


def test_every_port_request_round_trips_through_the_server(served):
    """Each request type of the port once, by its own handle method."""
    x = ektelo.connect(served.url, served.alice).dataset("vec")
    y = x.reduce_by_partition(Partition(np.arange(64) // 4))
    assert y.shape == (16,)
    assert isinstance(x.dawa_partition(eps=0.1), Partition)
    i = x.worst_approx(Prefix(64), np.zeros(64), eps=0.1)
    assert isinstance(i, int) and 0 <= i < 64
    t = ektelo.connect(served.url, served.alice).dataset("tab")
    assert len(t.split_by_partition("b")) == 3
    assert t.select(["a"]).group_by(["a"]).vectorize().shape == (4,)
    cliques = t.privbayes_select(eps=0.1)
    assert all(isinstance(c, tuple) for c in cliques)
    info = x.port.submit(port.Describe(y.node))
    assert info.source == y.node and info.shape == (16,)
    with pytest.raises(ValueError, match="pure"):  # Gaussian noise needs a zCDP budget
        x.gaussian(Identity(64), rho=0.01)
    z = ektelo.connect(served.url, served.alice).dataset("zcdp")
    g = z.gaussian(Prefix(64), rho=0.5)
    assert isinstance(g.noise, ektelo.Gaussian) and g.rho == 0.5
    assert z.budget.unit == "rho" and z.budget.spent == pytest.approx(0.5)


def test_a_query_too_large_to_evaluate_is_a_422_with_nothing_charged(served):
    """Issue #36: three 60,000×2 factors pass every per-factor wire limit, but
    their Kronecker has 2.2·10¹⁴ rows — refused from its structure before the
    charge (the server used to charge, then fail with HTTP 500)."""
    from ektelo.matrix import Kronecker, Ones, VStack, Weighted

    factor = VStack([Identity(2), Weighted(Ones(59_998, 2), 0.0)])  # sensitivity 1, tiny
    y = ektelo.connect(served.url, served.alice).dataset("vec")
    before, granted = y.budget.spent, _granted(served.url, served.admin)
    small = y.split_by_partition(Partition(np.repeat([0, 1], [8, 56])))[0]
    with pytest.raises(ValueError, match=r"M has 2\.16e\+14 rows; the kernel answers at most"):
        small.laplace(Kronecker([factor] * 3), eps=0.5)
    assert y.budget.spent == before and _granted(served.url, served.admin) == granted



def test_an_envelope_is_one_charge_remotely_and_refused_whole(served):
    """`envelope` through the server (issue #41): one charge at its first
    request, then nothing more at the dataset's root; beyond the cap, a 403
    BudgetExceeded with nothing changed; the history shows the envelope."""
    x = ektelo.connect(served.url, served.alice).dataset("vec")
    before = x.budget.spent
    e = x.envelope(eps=0.3)
    first = e.laplace(Identity(64), eps=0.1).answers
    e.laplace(Total(64), eps=0.2)
    assert x.budget.spent == pytest.approx(before + 0.3)
    with pytest.raises(ektelo.BudgetExceeded):
        e.laplace(Total(64), eps=0.05)
    assert x.budget.spent == pytest.approx(before + 0.3)
    too_big = x.envelope(eps=2000.0)  # beyond the dataset's total of 1000
    with pytest.raises(ektelo.BudgetExceeded):
        too_big.laplace(Total(64), eps=0.1)
    assert x.budget.spent == pytest.approx(before + 0.3)
    ops = [r.operation for r in x.history()]  # the envelope's record, then its requests
    assert ops[-3:] == ["envelope", "laplace", "laplace"] and first.shape == (64,)
