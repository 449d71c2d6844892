"""Isolation (issue #26): a client process holds no data and no kernel, and what
an attacker does in it — patching matrix classes' `sensitivity`, patching
`os.urandom`, forging handles or ledger values — changes nothing the server
releases. The client runs as its own process against a real server."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ektelo
from ektelo.matrix import Identity, Prefix
from tests.server.harness import ServerProcess, run_admin, vector, write_config

SEED = 23


@pytest.fixture(scope="module")
def isolated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    d = tmp_path_factory.mktemp("isolation")
    np.save(d / "x.npy", vector(64, seed=9))
    config = write_config(d, {
        "research": {"data": "x.npy", "epsilon": 100.0, "seed": SEED},
        "secure": {"data": "x.npy", "epsilon": 100.0},
    })
    run_admin(config, "init")
    run_admin(config, "add-analyst", "mallory", "--dataset", "research")
    token = run_admin(config, "add-analyst", "mallory", "--dataset", "secure")  # one token (#40)
    server = ServerProcess(config).start()
    try:
        yield server.url, token, d
    finally:
        server.stop()


CLIENT = """
import gc, json, os, sys
import numpy as np
import ektelo
from ektelo.kernel import Budget, Kernel
from ektelo.client import ServerError
from ektelo import matrix

url, token = sys.argv[1], sys.argv[2]
out = {}
x = ektelo.connect(url, token).dataset("research")
s = ektelo.connect(url, token).dataset("secure")
truth = np.load(sys.argv[3])

# no kernel and no copy of the data anywhere in this process
out["kernels"] = sum(isinstance(o, Kernel) for o in gc.get_objects())
out["data_copies"] = sum(
    isinstance(o, np.ndarray) and o.size == truth.size and np.array_equal(o.ravel(), truth)
    for o in gc.get_objects() if o is not truth
)
out["port"] = type(x.port).__name__

# attack 1: every matrix class claims a tiny sensitivity
for cls in vars(matrix).values():
    if isinstance(cls, type) and hasattr(cls, "sensitivity"):
        cls.sensitivity = lambda self, p=1: 1e-12
m = x.laplace(matrix.Identity(64), eps=0.5)
out["answers"] = m.answers.tolist()
out["scale"] = m.noise.scale

# attack 2: "secure" noise from a patched os.urandom
os.urandom = lambda n: bytes(n)
before = s.budget.spent
a = s.laplace(matrix.Identity(64), eps=0.5).answers
b = s.laplace(matrix.Identity(64), eps=0.5).answers
out["secure_differ"] = bool(np.any(a != b))
out["secure_residual"] = float(np.abs(a - truth).mean())
out["secure_spent"] = s.budget.spent - before

# attack 3: forged handles and forged ledger values
spent = x.budget.spent
errors = []
for attempt in (
    lambda: ektelo.ProtectedVector(x.port, 10**6).laplace(matrix.Identity(64), eps=1),
    lambda: ektelo.ProtectedVector(x.port, -1).laplace(matrix.Identity(64), eps=1),
    lambda: x.port.submit(Budget(total=100.0, spent=0.0, remaining=100.0)),
):
    try:
        attempt()
        errors.append("none")
    except (ValueError, TypeError, ServerError) as err:
        errors.append(type(err).__name__)
out["forged"] = errors
out["spent_before"], out["spent_after"] = spent, x.budget.spent
print(json.dumps(out))
"""


def _run_client(url: str, token: str, data: Path) -> dict[str, Any]:
    script = textwrap.dedent(CLIENT)
    proc = subprocess.run(
        [sys.executable, "-c", script, url, token, str(data)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def test_a_client_process_cannot_change_what_the_server_releases(isolated):
    url, token, d = isolated
    out = _run_client(url, token, d / "x.npy")
    assert out["kernels"] == 0 and out["data_copies"] == 0
    assert out["port"] == "RemotePort"
    # the server's own sensitivity: the same release as an unpatched local kernel
    local = ektelo.protect(vector(64, seed=9), epsilon=100.0, seed=SEED)
    expected = local.laplace(Identity(64), eps=0.5)
    assert out["answers"] == expected.answers.tolist()
    assert out["scale"] == expected.noise.scale >= 1 / 0.5
    # the server's secure noise: fresh each time and of the right size (b = 2)
    assert out["secure_differ"] and out["secure_spent"] == pytest.approx(1.0)
    assert 0.5 < out["secure_residual"] < 8.0
    assert out["forged"] == ["ValueError", "ValueError", "ServerError"]
    assert out["spent_after"] == out["spent_before"]


def test_the_attacks_would_work_on_an_in_process_kernel(monkeypatch):
    """The control: in one process a patched class does change the kernel's
    input path for a foreign matrix — which is why the server matters. Here a
    subclass's answers are materialised by its own (client) code."""

    class Lying(Prefix):
        def sparse(self):  # client code the in-process kernel runs once
            return Identity(self.shape[1]).sparse()

    x = ektelo.protect(vector(64, seed=9), epsilon=10.0, seed=SEED)
    lied = x.laplace(Lying(64), eps=0.5)
    assert lied.noise.scale < 64 / 0.5  # the sensitivity of the lie, not of Prefix
    with pytest.raises(TypeError):  # over the wire such a class cannot even be sent
        ektelo.wire.encode(Lying(64))


def test_one_token_per_analyst(tmp_path) -> None:
    """A second grant replaces the analyst's earlier token (#40): the new one
    opens every dataset granted, the old one none; revoking covers them all."""
    import numpy as np

    from tests.server.harness import ServerProcess, http, write_config

    np.save(tmp_path / "vec.npy", np.arange(8))
    config = write_config(tmp_path, {n: {"data": "vec.npy", "epsilon": 1.0} for n in "ab"})
    run_admin(config, "init")
    old = run_admin(config, "add-analyst", "ann", "--dataset", "a")
    new = run_admin(config, "add-analyst", "ann", "--dataset", "b")
    server = ServerProcess(config).start()
    try:
        for name in "ab":
            assert http("POST", f"{server.url}/v1/datasets/{name}/sessions", b"{}", new)[0] == 200
            assert http("POST", f"{server.url}/v1/datasets/{name}/sessions", b"{}", old)[0] == 401
        run_admin(config, "revoke-token", "ann")
        for name in "ab":
            assert http("POST", f"{server.url}/v1/datasets/{name}/sessions", b"{}", new)[0] == 401
    finally:
        server.stop()
