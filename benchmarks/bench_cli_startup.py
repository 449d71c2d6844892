"""`ektelo --help` start-up time (issue #27: "imports cost ~2 s even for
--help"). Prints the median wall time of fresh interpreters running the
console entry point with --help, and of `import ektelo` alone (the package's
own import, which every command pays), over a few repetitions; and the CPU
seconds (user + system, the fewest over the repetitions) of one small
question end to end — `ektelo run` of a histogram on a 3-row CSV, no ledger
(issue #41's target: 0.4 s). With
`--before FILE`, also times a saved copy of an older cli.py the same way
(e.g. `git show <rev>:src/ektelo/cli.py > /tmp/old_cli.py`)."""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def _time(code: str, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def _cpu(args: list[str], repeat: int, cwd: str) -> float:
    """The fewest CPU seconds (user + system) of `python -m ektelo.cli ARGS`."""
    runs = []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-m", "ektelo.cli", *args], check=True,
                       capture_output=True, cwd=cwd, env=os.environ)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        runs.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--before", help="an older cli.py to time the same way")
    args = parser.parse_args()
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
        with open(os.path.join(folder, "t.csv"), "w") as fh:
            fh.write("a,b\n1,x\n2,y\n3,x\n")
        with open(os.path.join(folder, "d.json"), "w") as fh:
            json.dump({"a": {"range": [1, 5]}, "b": {"values": ["x", "y"]}}, fh)
        cpu = _cpu(["run", "--no-ledger", "--data", "t.csv", "--domain", "d.json",
                    "--workload", "histogram:a", "--epsilon", "1"], args.repeat, folder)
    print(f"a small question, end to end  {cpu * 1000:7.0f} ms CPU (target 400 ms)")
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
