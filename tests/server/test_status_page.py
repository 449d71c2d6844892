"""The custodian's status page in a real browser (headless Chromium, Debian's
`chromium` package): a screenshot of the expected size that is not blank, and
the rendered DOM holding the datasets, each analyst's spending and the audit
entries. Without Chromium the test skips — unless EKTELO_REQUIRE_COMPONENTS=1
(CI, where .ci/run installs it), where it fails."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import ektelo
from ektelo.matrix import Identity, Prefix
from tests.server.harness import http

WIDTH, HEIGHT = 1280, 900


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
         "--disable-dev-shm-usage", f"--user-data-dir={tmp / 'profile'}", *flags, url],
        capture_output=True, text=True, timeout=120, check=False,
    )


def test_the_status_page_renders_datasets_spending_and_audit(served, tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    x = ektelo.connect(served.url, served.alice).dataset("vec")
    x.laplace(Identity(64), eps=0.125)
    x.laplace(Prefix(64), eps=0.0625)
    spent = f"{x.budget.spent:.6g}"
    url = f"{served.url}/status?token={served.admin}"
    assert http("GET", url)[0] == 200

    shot = tmp_path / "status.png"
    done = _browse(url, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", tmp=tmp_path)
    assert shot.exists(), done.stderr[-2000:]
    image = PIL.open(shot).convert("L")
    assert image.size == (WIDTH, HEIGHT)
    lo, hi = image.getextrema()
    assert hi - lo > 100, "the screenshot is blank"
    histogram = image.histogram()
    assert max(histogram) < 0.98 * WIDTH * HEIGHT, "the screenshot is one colour"

    dom = _browse(url, "--dump-dom", tmp=tmp_path).stdout
    text = re.sub(r"<[^>]+>", " ", dom)
    for name in ("vec", "tab", "capped", "zcdp", "alice", "bob"):
        assert re.search(rf"\b{re.escape(name)}\b", text), name
    assert "ektelo server status" in dom
    datasets = dom[dom.index('id="datasets"'):dom.index('id="analysts"')]
    assert spent in datasets  # the dataset's spent, from the ledger
    analysts = dom[dom.index('id="analysts"'):dom.index('id="audit"')]
    row = re.search(r"<tr><td>alice</td><td>vec</td>(.*?)</tr>", analysts)
    assert row and "500" in row.group(1)  # alice's quota on vec
    audit = dom[dom.index('id="audit"'):]
    assert audit.count("VectorLaplace") >= 2 and "granted" in audit


def test_the_status_page_needs_an_admin_token(served):
    assert http("GET", f"{served.url}/status")[0] == 401
    assert http("GET", f"{served.url}/status", token=served.alice)[0] == 401
    status, page = http("GET", f"{served.url}/status", token=served.admin)
    assert status == 200 and "<table" in page
