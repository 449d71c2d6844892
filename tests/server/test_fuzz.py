"""A property-based fuzz of the HTTP API (issue #26): hypothesis builds request
bodies — arbitrary JSON, wire documents with tags in the wrong places, and
valid requests with one field replaced by anything — and posts them to a real
server. Whatever arrives, the answer is a 200 or a clear 4xx (never a 5xx or
a dropped connection), and a refused request charges nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ektelo
from ektelo import wire
from ektelo.matrix import Identity, Partition, Prefix, Total
from ektelo.port import requests as port
from tests.server.harness import http

TAGS = ["$type", "$matrix", "$ndarray", "$tuple", "$dict", "$partition", "$predicate",
        "$fraction", "$float", "$csr", "$domain", "fields", "type", "args", "node"]
NAMES = ["VectorLaplace", "Transform", "Where", "NoisyCount", "GetBudget", "Identity",
         "Dense", "Kronecker", "Hierarchy", "compare", "and", "<f8", "|O"]

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12),
              st.sampled_from(NAMES)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(TAGS), st.text(max_size=6)), inner,
                        max_size=4),
    ),
    max_leaves=12,
)

VALID = [
    port.VectorLaplace(0, Prefix(64), 0.001),
    port.Transform(0, Identity(64)),
    port.ReduceByPartition(0, Partition([0, 1] * 32)),
    port.SplitVector(0, Partition([0, 1] * 32)),
    port.VectorLaplace(0, Total(64), 0.001),
    port.Describe(0),
    port.GetLedger(),
]


def _mutate(doc: Any, path: list[int], value: Any) -> Any:
    """`doc` with the node at `path` (indices into its children) replaced."""
    if not path or not isinstance(doc, (dict, list)) or not doc:
        return value
    keys = list(doc) if isinstance(doc, dict) else list(range(len(doc)))
    key = keys[path[0] % len(keys)]
    copy = dict(doc) if isinstance(doc, dict) else list(doc)
    copy[key] = _mutate(doc[key], path[1:], value)  # type: ignore[index]
    return copy


mutated = st.builds(
    lambda request, path, value: _mutate(wire.encode(request), path, value),
    st.sampled_from(VALID), st.lists(st.integers(0, 7), min_size=1, max_size=6), json_values,
)
bodies = st.one_of(
    json_values.map(lambda v: {"request": v}),
    mutated.map(lambda v: {"request": v}),
    st.builds(lambda v, rid: {"request": v, "request_id": rid}, mutated, json_values),
    json_values,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(body=bodies)
def test_any_body_gets_a_200_or_a_clear_4xx_and_refusals_charge_nothing(served, body):
    status, doc = http("POST", f"{served.url}/v1/datasets/vec/sessions", b"{}", served.alice)
    sid = doc["session"]
    before = ektelo.connect(served.url, served.alice).budget("vec").spent
    status, doc = http("POST", f"{served.url}/v1/sessions/{sid}",
                       json.dumps(body).encode(), served.alice)
    assert status in (200, 400, 403, 404, 409, 413, 422), (status, doc, body)
    assert isinstance(doc, dict) and ("response" in doc) == (status == 200), doc
    if status != 200:
        assert doc["error"]["type"] and doc["error"]["message"]
        assert ektelo.connect(served.url, served.alice).budget("vec").spent == before


def _with_eps(text: str) -> bytes:
    """A valid VectorLaplace body with `text` spliced in as its ε (raw JSON)."""
    doc = json.dumps({"request": wire.encode(port.VectorLaplace(0, Identity(64), 0.5))})
    return doc.replace('"eps": 0.5', f'"eps": {text}').encode()


def test_the_issue_40_bodies_get_a_clear_4xx_in_json(served):
    """Numbers that overflow a double (1e400), an exact rational beyond any
    double, and paths the API does not have: each a 4xx with the documented
    JSON error, nothing charged (each was an HTTP 500 or plain text, #40)."""
    status, doc = http("POST", f"{served.url}/v1/datasets/vec/sessions", b"{}", served.alice)
    path = f"{served.url}/v1/sessions/{doc['session']}"
    before = ektelo.connect(served.url, served.alice).budget("vec").spent
    for eps in ("1e400", "-1e400", '{"$fraction": "1e999"}', '{"$fraction": "-1e999"}'):
        status, doc = http("POST", path, _with_eps(eps), served.alice)
        assert status in (400, 422), (eps, status, doc)
        assert doc["error"]["type"] and doc["error"]["message"], doc
    for method, where in (("GET", "/v1/nowhere"), ("DELETE", "/v1/datasets")):
        status, doc = http(method, f"{served.url}{where}", None, served.alice)
        assert status in (404, 405) and isinstance(doc, dict), (status, doc)
        assert doc["error"]["type"] in ("NotFound", "MethodNotAllowed"), doc
    assert ektelo.connect(served.url, served.alice).budget("vec").spent == before
