"""The custodian's status page in a real browser (headless Chromium, Debian's
`chromium` package), signed in by POSTing the admin token in a form — the
token never appears in a URL — which sets an HttpOnly cookie (#40).

A real server on a durable SQLite ledger: alice opens three sessions and
spends within her quota, then is refused by it; bob is refused by the cap
and by a query limit; a third dataset is spent to a float residue of its
cap. The page, rendered by Chromium: each dataset's spent and remaining
(clamped, no '5.55e-17'), the guarantee in words, an inline SVG chart of
spending, the audit chain's head (the store's), the sessions summarised
(alice: 3, no "attached" rows), the recent requests with their request ids,
the refusals with the amount asked and the reason; a screenshot of the
expected size that is not blank. Without Chromium the browser test skips —
unless EKTELO_REQUIRE_COMPONENTS=1 (CI, where .ci/run installs it), where it
fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ektelo
from ektelo import ledger_store
from ektelo.matrix import Identity, Total
from tests.server.harness import ServerProcess, http, run_admin, write_config

WIDTH, HEIGHT = 1280, 1400


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if os.environ.get("EKTELO_REQUIRE_COMPONENTS") == "1":
        pytest.fail("headless Chromium is required here (apt-get install chromium)")
    pytest.skip("SKIPPED LOUDLY: no chromium on this machine (apt-get install chromium)")


def _browse(url: str, *flags: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}",
         "--virtual-time-budget=10000", *flags, url],
        capture_output=True, text=True, timeout=120, check=False,
    )


@pytest.fixture
def custodian(tmp_path: Path, fast_sqlite: str) -> Any:
    """A server with history: quota, cap and limit refusals, three sessions."""
    np.save(tmp_path / "vec.npy", np.arange(64))
    config = write_config(tmp_path, {
        "vec": {"data": "vec.npy", "epsilon": 1.0},
        "tight": {"data": "vec.npy", "epsilon": 1.0},
        "z": {"data": "vec.npy", "rho": 0.5, "delta": 1e-6},
    }, ledger=fast_sqlite, max_query_rows=32)  # fmt: skip
    admin = run_admin(config, "init")
    run_admin(config, "add-analyst", "alice", "--dataset", "vec", "--quota", "0.5")
    alice = run_admin(config, "add-analyst", "alice", "--dataset", "z")
    run_admin(config, "add-analyst", "bob", "--dataset", "vec")
    bob = run_admin(config, "add-analyst", "bob", "--dataset", "tight")
    server = ServerProcess(config).start()
    try:
        for _ in range(3):  # three sessions of alice's, one charge each
            ektelo.connect(server.url, alice).dataset("vec").laplace(Total(64), eps=0.125)
        x = ektelo.connect(server.url, alice).dataset("vec")
        with pytest.raises(ektelo.BudgetExceeded, match="quota"):
            x.laplace(Total(64), eps=0.25)  # 0.375 + 0.25 > her 0.5
        y = ektelo.connect(server.url, bob).dataset("vec")
        y.laplace(Total(64), eps=0.125)
        with pytest.raises(ektelo.BudgetExceeded):
            y.laplace(Total(64), eps=0.75)  # 0.5 + 0.75 > the cap 1
        with pytest.raises(ValueError, match="at most 32"):
            y.laplace(Identity(64), eps=0.01)  # 64 rows > max_query_rows
        t = ektelo.connect(server.url, bob).dataset("tight")
        t.laplace(Total(64), eps=0.7)
        t.laplace(Total(64), eps=0.3)  # 0.7 + 0.3 in doubles: 1 − 5.55e-17
        yield server, admin, alice, fast_sqlite
    finally:
        server.stop()


def _post_form(url: str, token: str) -> tuple[int, Any]:
    """POST the sign-in form; (status, the response's headers), no redirect followed."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    req = urllib.request.Request(f"{url}/status/sign-in", data=f"token={token}".encode(),
                                 method="POST")
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.headers
    except urllib.error.HTTPError as err:
        return err.code, err.headers


def test_signing_in_sets_an_httponly_cookie_and_tokens_stay_out_of_urls(custodian):
    server, admin, alice, _ = custodian
    status, headers = _post_form(server.url, admin)
    assert status == 303 and headers["Location"] == "/status"
    cookie = headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "Path=/status" in cookie and admin not in cookie
    value = re.match(r"ektelo_status=([^;]+)", cookie).group(1)
    status, page = http("GET", f"{server.url}/status", headers={"Cookie": f"ektelo_status={value}"})
    assert status == 200 and 'id="datasets"' in page
    # the kernels run in the worker pool by default (one worker on SQLite)
    assert re.search(r'id="workers">Kernels: in 1 of at most 1 worker processes', page)
    assert _post_form(server.url, alice)[0] == 401  # an analyst's token signs nobody in
    assert http("GET", f"{server.url}/status?token={admin}")[0] == 401  # no tokens in URLs
    status, doc = http("GET", f"{server.url}/status")
    assert status == 401 and doc["error"]["type"] == "Unauthorized"  # JSON for programs
    status, form = http("GET", f"{server.url}/status", headers={"Accept": "text/html"})
    assert status == 401 and 'id="sign-in"' in form and 'method="post"' in form
    status, _ = http("POST", f"{server.url}/status/sign-out",
                     headers={"Cookie": f"ektelo_status={value}"})
    assert http("GET", f"{server.url}/status",
                headers={"Cookie": f"ektelo_status={value}"})[0] == 401  # signed out


def test_the_status_page_in_a_browser(custodian, tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    server, admin, _, ledger = custodian
    form = tmp_path / "sign-in.html"  # what a custodian's browser does: POST the form
    form.write_text(
        f'<!DOCTYPE html><form method="post" action="{server.url}/status/sign-in">'
        f'<input name="token" value="{admin}"></form>'
        "<script>document.forms[0].submit()</script>"
    )
    dom = _browse(form.as_uri(), "--dump-dom", tmp=tmp_path).stdout
    assert "ektelo server status" in dom and 'id="datasets"' in dom, dom[-2000:]
    figures = re.findall(r'<td class="num">([^<]*)</td>', dom)
    assert figures and not [f for f in figures if "e-" in f], "a float residue on the page"

    datasets = dom[dom.index('id="datasets"'):dom.index('id="analysts"')]
    row = re.search(r"<tr><td>vec</td>(.*?)</tr>", datasets).group(1)
    assert re.findall(r'<td class="num">([^<]*)</td>', row) == ["1", "0.5", "0.5"]
    row = re.search(r"<tr><td>tight</td>(.*?)</tr>", datasets).group(1)
    assert re.findall(r'<td class="num">([^<]*)</td>', row) == ["1", "1", "0"]  # clamped
    with ledger_store.open_store(ledger) as store:
        assert store.dataset("tight").spent < 1  # a residue in the ledger, 0 on the page
        head = store.audit_head("vec")
        history = store.history("vec")
    analysts = dom[dom.index('id="analysts"'):dom.index('id="ds-vec"')]
    row = re.search(r"<tr><td>alice</td><td>vec</td>(.*?)</tr>", analysts).group(1)
    assert re.findall(r'<td class="num">([^<]*)</td>', row) == ["0.5", "0.375", "0.125"]

    vec = dom[dom.index('id="ds-vec"'):dom.index('id="ds-tight"')]
    assert "ε-differentially private with ε = 0.5 so far, and never more than 1" in vec
    assert "per row" in vec
    chart = re.search(r'<svg id="chart-vec".*?</svg>', vec, re.S)
    assert chart and "<polyline" in chart.group(0) and "cap 1" in chart.group(0)
    assert head is not None and head[1] in vec  # the audit chain's head, the store's
    sessions = re.search(r'id="sessions-vec".*?</table>', vec, re.S).group(0)
    alice_sessions = re.search(r"<tr><td>alice</td>(.*?)</tr>", sessions).group(1)
    assert re.findall(r'<td class="num">([^<]*)</td>', alice_sessions)[0] == "4"
    z = dom[dom.index('id="ds-z"'):dom.index('id="requests"')]
    assert "(zCDP) with ρ = 0 so far, and never more than 0.5" in z
    assert "implies (ε, δ)-DP" in z and "δ = 1e-06" in z

    requests = dom[dom.index('id="requests"'):dom.index('id="refusals"')]
    assert "attached" not in requests  # sessions are summarised, not listed
    for h in history:  # every charge's own request id (the analyst's, unprefixed)
        assert h.request_id.split("/", 1)[1] in requests
    refusals = dom[dom.index('id="refusals"'):]
    reasons = {(m[0], m[1], m[2]) for m in re.findall(
        r"<tr><td>[^<]*</td><td>(\w+)</td><td>vec</td><td>[^<]*</td><td>[^<]*</td>"
        r'<td class="num">([^<]*)</td><td>([^<]*)</td></tr>', refusals)}
    assert reasons == {("alice", "0.25", "quota"), ("bob", "0.75", "cap"),
                       ("bob", "0.01", "limit")}, refusals
    spent = sum((h.charge for h in history), Fraction(0))
    assert spent == Fraction(1, 2)

    shot = tmp_path / "status.png"
    done = _browse(form.as_uri(), f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
                   tmp=tmp_path)
    assert shot.exists(), done.stderr[-2000:]
    image = PIL.open(shot).convert("L")
    assert image.size == (WIDTH, HEIGHT)
    lo, hi = image.getextrema()
    assert hi - lo > 100, "the screenshot is blank"
    assert max(image.histogram()) < 0.98 * WIDTH * HEIGHT, "the screenshot is one colour"


def test_the_status_page_needs_an_admin_token(served):
    assert http("GET", f"{served.url}/status")[0] == 401
    assert http("GET", f"{served.url}/status", token=served.alice)[0] == 401
    status, page = http("GET", f"{served.url}/status", token=served.admin)
    assert status == 200 and "<table" in page  # a script's Authorization header works
