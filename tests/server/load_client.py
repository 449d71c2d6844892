"""One analyst's load for the server's load and crash tests (run as a process).

    python load_client.py URL TOKEN DATASET N EPS OUT [STOP_FILE]

Sends up to N Vector Laplace requests (a total, `EPS` each) on the dataset's
root, each under its own request id, retrying through connection errors and
server restarts (`ektelo.client`), and writes one JSON line per request to
OUT: its id, the outcome ("granted", "refused", "lost": charged but its
answer lost in a crash, or an error) and, when granted, the answers and the
latency. Stops early when STOP_FILE exists.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path

import ektelo
from ektelo.matrix import Total
from ektelo.port import requests as port


def main() -> None:
    url, token, dataset, n, eps, out = sys.argv[1:7]
    stop = Path(sys.argv[7]) if len(sys.argv) > 7 else None
    x = ektelo.connect(url, token, retry_for=600.0).dataset(dataset)
    size = x.size
    prefix = uuid.uuid4().hex[:12]
    with open(out, "w") as f:
        for i in range(int(n)):
            if stop is not None and stop.exists():
                break
            rid = f"{prefix}-{i}"
            request = port.VectorLaplace(x.node, Total(size), float(eps), request_id=rid)
            start = time.perf_counter()
            row: dict[str, object] = {"id": rid}
            try:
                m = x.port.submit(request)
                row.update(outcome="granted", answers=m.answers.tolist())
            except ektelo.BudgetExceeded:
                row.update(outcome="refused")
            except ValueError as err:
                lost = "no released answer" in str(err)
                row.update(outcome="lost" if lost else f"error: {err}")
            row["seconds"] = time.perf_counter() - start
            f.write(json.dumps(row) + "\n")
            f.flush()


if __name__ == "__main__":
    main()
