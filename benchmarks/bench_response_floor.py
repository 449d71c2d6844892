"""The latency cost of releasing answers at data-independent times (issue #36).

The server holds every `/v1/` response until its request class's floor
(`[server] response_floor_ms`, server/timing.py), or the next point of the
floor's doubling grid. This script measures what that costs: a real
`ektelo-serve` (SQLite ledger, a 2,000-row table on the memory engine), 1, 8
and 32 concurrent client processes, each alternating a free request (a
`where` on the root table) and a charged one (`noisy_count` at ε = 10⁻⁶),
with the floors off and at their defaults; p50/p99 latency per class::

    python benchmarks/bench_response_floor.py [--requests 40] [--clients 1 8 32]

Each client sends `--requests` requests of each class (the first of each
discarded as warm-up). Run alone: the machine's other load shows in p99.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ektelo.server.timing import FLOOR_DEFAULTS
from tests.server.harness import DOMAIN, ServerProcess, run_admin, table_rows, write_config

CLIENT = """
import json, sys, time
import ektelo
from ektelo import col
t = ektelo.connect(sys.argv[1], sys.argv[2]).dataset("bench")
free, charged = [], []
for i in range(int(sys.argv[3]) + 1):
    t0 = time.perf_counter()
    t.where(col("a") == i % 4)
    t1 = time.perf_counter()
    t.noisy_count(eps=1e-6)
    t2 = time.perf_counter()
    if i:  # the first round warms the connection up
        free.append(t1 - t0)
        charged.append(t2 - t1)
print(json.dumps({"free": free, "charged": charged}))
"""


def run(floors: dict[str, float], clients: int, requests: int) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "t.csv").write_text(table_rows(2000))
        (d / "d.json").write_text(json.dumps(DOMAIN))
        config = write_config(d, {"bench": {"data": "t.csv", "domain": "d.json",
                                            "epsilon": 1e6, "engine": "memory"}},
                              ledger="ledger.sqlite", response_floor_ms=floors)
        run_admin(config, "init")
        tokens = [run_admin(config, "add-analyst", f"a{i}", "--dataset", "bench")
                  for i in range(clients)]
        server = ServerProcess(config).start()
        try:
            procs = [subprocess.Popen([sys.executable, "-c", CLIENT, server.url, tok,
                                       str(requests)], stdout=subprocess.PIPE)
                     for tok in tokens]
            outs = [json.loads(p.communicate()[0]) for p in procs]
        finally:
            server.stop()
    return {k: np.array([s for o in outs for s in o[k]]) * 1000 for k in ("free", "charged")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40, help="per client and class")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    settings = {"off": {"free": 0.0, "charged": 0.0}, "default": dict(FLOOR_DEFAULTS)}
    print(f"response floors: default {FLOOR_DEFAULTS} ms; {args.requests} requests per "
          "client and class; latency in ms")
    print(f"{'floors':<8} {'clients':>7} {'free p50':>9} {'free p99':>9} "
          f"{'charged p50':>12} {'charged p99':>12}")
    for clients in args.clients:
        for name, floors in settings.items():
            r = run(floors, clients, args.requests)
            print(f"{name:<8} {clients:>7} {np.percentile(r['free'], 50):9.1f} "
                  f"{np.percentile(r['free'], 99):9.1f} {np.percentile(r['charged'], 50):12.1f} "
                  f"{np.percentile(r['charged'], 99):12.1f}", flush=True)


if __name__ == "__main__":
    main()
