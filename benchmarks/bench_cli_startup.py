"""`ektelo --help` start-up time (issue #27: "imports cost ~2 s even for
--help"). Prints the median wall time of fresh interpreters running the
console entry point with --help, and of `import ektelo` alone (the package's
own import, which every command pays), over a few repetitions; and the CPU
seconds (user + system of the child, `getrusage(RUSAGE_CHILDREN)`, the fewest
over the repetitions) of one small question end to end — `ektelo run
--no-ledger` of a histogram of `age` (100 cells) on a 300-row CSV, with
`--plan identity` and `--plan auto` (issue #41's target: 0.4 s). With
`--before FILE`, also times a saved copy of an older cli.py the same way
(e.g. `git show <rev>:src/ektelo/cli.py > /tmp/old_cli.py`); with
`--before-rev REV`, also runs the small question on the source tree of git
revision REV (`git archive`), interleaved with this tree's runs so both see
the same machine load, and prints before/after and their ratio.

The children may write bytecode caches (PYTHONDONTWRITEBYTECODE is dropped
from their environment, and a first run warms them), as an installed package
has its .pyc files: otherwise every run compiles each of ektelo's ~90 modules
again (~0.25 s of CPU, not a cost users pay). `--no-bytecode` keeps the
variable as the caller set it, to measure that cost too."""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

TARGET = 0.4  # CPU seconds for a small question (issue #41)
ROOT = Path(__file__).resolve().parents[1]


def _time(code: str, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


BYTECODE = True  # (main: --no-bytecode sets False)


def _cpu_once(args: list[str], cwd: str, src: str | None, module: bool = True) -> float:
    """CPU seconds (user + system) of one `python -m ektelo.cli ARGS` (or,
    `module=False`, `python ARGS`), run on the source tree `src` (None: the
    installed/PYTHONPATH one)."""
    env = dict(os.environ)
    if BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    if src is not None:
        env["PYTHONPATH"] = src
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, *(["-m", "ektelo.cli"] if module else []), *args]
    subprocess.run(command, check=True, capture_output=True, cwd=cwd, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _cpu(args: list[str], repeat: int, cwd: str) -> float:
    """The fewest CPU seconds (user + system) of `python -m ektelo.cli ARGS`
    (after one warming run)."""
    _cpu_once(args, cwd, None)
    return min(_cpu_once(args, cwd, None) for _ in range(repeat))


def _small_question(folder: str) -> None:
    """A 300-row table (age 0..99, sex) and its domain, seeded."""
    rng = random.Random(0)
    with open(os.path.join(folder, "small.csv"), "w") as fh:
        fh.write("age,sex\n")
        for _ in range(300):
            fh.write(f"{rng.randint(0, 99)},{rng.choice('MF')}\n")
    with open(os.path.join(folder, "small.domain.json"), "w") as fh:
        json.dump({"age": {"range": [0, 99]}, "sex": {"values": ["M", "F"]}}, fh)


def _question(plan: str) -> list[str]:
    return ["run", "--no-ledger", "--data", "small.csv", "--domain", "small.domain.json",
            "--workload", "histogram:age", "--plan", plan, "--epsilon", "1"]


def _source_of(rev: str, into: str) -> str:
    """src/ of git revision `rev`, extracted under `into`."""
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True,
                         capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(into, filter="data")
    return os.path.join(into, "src")


def _before_after(rev: str, repeat: int, folder: str) -> None:
    """The small question on revision `rev`'s tree and on this one, runs
    interleaved; the fewest CPU seconds of each."""
    old = _source_of(rev, os.path.join(folder, "before"))
    new = str(ROOT / "src")
    for plan in ("identity", "auto"):
        runs: dict[str, list[float]] = {"before": [], "after": []}
        _cpu_once(_question(plan), folder, old)  # warm: .pyc files written once
        _cpu_once(_question(plan), folder, new)
        for _ in range(repeat):
            runs["before"].append(_cpu_once(_question(plan), folder, old))
            runs["after"].append(_cpu_once(_question(plan), folder, new))
        b, a = min(runs["before"]), min(runs["after"])
        print(f"--plan {plan:<8} before ({rev}) {b * 1000:5.0f} ms CPU   after {a * 1000:5.0f} "
              f"ms CPU   after/before {a / b:.2f}   after/target {a / TARGET:.2f} "
              f"(target {TARGET * 1000:.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", help="an older cli.py to time the same way")
    parser.add_argument("--before-rev", help="a git revision whose src/ runs the small "
                        "question too (before/after, interleaved)")
    parser.add_argument("--no-bytecode", action="store_true", help="keep "
                        "PYTHONDONTWRITEBYTECODE as set (every run compiles ektelo's modules)")
    args = parser.parse_args()
    global BYTECODE
    BYTECODE = not args.no_bytecode
    bare = _time("pass", args.repeat)
    package = _time("import ektelo", args.repeat)
    helped = _time(
        "import sys; sys.argv = ['ektelo', '--help']\nimport ektelo.cli as c\n"
        "try:\n    c.main()\nexcept SystemExit:\n    pass", args.repeat)
    print(f"python start-up               {bare * 1000:7.0f} ms")
    print(f"import ektelo (the package)   {package * 1000:7.0f} ms")
    print(f"ektelo --help (cli.py)        {helped * 1000:7.0f} ms  "
          f"(cli's own share {max(helped - package, 0) * 1000:.0f} ms)")
    with tempfile.TemporaryDirectory() as folder:
        _small_question(folder)
        for plan in ("identity", "auto"):
            cpu = _cpu(_question(plan), args.repeat, folder)
            print(f"a small question, --plan {plan:<8} {cpu * 1000:5.0f} ms CPU "
                  f"(target {TARGET * 1000:.0f} ms; bytecode cached: {BYTECODE})")
        # the floor: the libraries the question needs (NumPy; DuckDB, the engine
        # of a file), and what it no longer imports (#41: SciPy, pandas)
        for libs in ("numpy, duckdb", "numpy, scipy.sparse, pandas, duckdb"):
            floor = min(_cpu_once(["-c", f"import {libs}"], folder, None, module=False)
                        for _ in range(args.repeat))
            print(f"import {libs:<34} {floor * 1000:5.0f} ms CPU (the libraries alone)")
        if args.before_rev:
            _before_after(args.before_rev, args.repeat, folder)
    if args.before:
        old = _time(
            "import sys; sys.argv = ['ektelo', '--help']\n"
            "import importlib.util as u\n"
            f"spec = u.spec_from_file_location('ektelo._cli_before', {args.before!r})\n"
            "m = u.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "try:\n    m.main()\nexcept SystemExit:\n    pass", args.repeat)
        print(f"ektelo --help (before)        {old * 1000:7.0f} ms  "
              f"(its own share {max(old - package, 0) * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
