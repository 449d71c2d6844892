"""The graphical-model plans at the front door (issue #25): ``ektelo run
--workload marginals:2:all --plan P`` end to end on the adult table — reading
the file, the question's rows, the plan, reading every pair off the model,
writing the answers' CSV — per plan: wall and CPU seconds, the process's
peak resident memory, and the accuracy of the answers written.

Each run is its own process (``python -m ektelo.cli``-equivalent, in research
mode with ``--seed``, ``--no-ledger``), so that its peak RSS is its own.
Accuracy: the average over the pairs of the total-variation distance
½‖p − q‖₁ between the true pair marginal and the normalised answers of the
CSV (the model's own marginals, as the front door returns them; each pair's
cells are listed in C order of its attributes). A plan refused by its
model-size guard is printed with the refusal and the time it took.

Settings: ``adult`` — all 91 pairs of the 14 attributes (a 6.4·10¹⁷-cell
domain); ``adult5`` — all 10 pairs of five small attributes (workclass,
marital-status, relationship, race, sex: 3,780 cells), where HDMM+PGM's model
fits. Budgets: privbayes_pgm and hdmm_pgm at a pure ε (no --delta), hdmm_pgm_z
(hdmm_pgm with --delta) and mst at ρ(ε, δ = 10⁻⁹).

    PYTHONPATH=. python benchmarks/bench_front_door_pgm.py [--seeds 2] [--eps 1]
        [--settings adult adult5] [--plans privbayes_pgm hdmm_pgm hdmm_pgm_z mst]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from ektelo import Domain

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"
FIVE = ["workclass", "marital-status", "relationship", "race", "sex"]
DELTA = 1e-9
# plan name on the command line, and whether it runs under --delta
PLANS = {"privbayes_pgm": ("privbayes_pgm", False), "hdmm_pgm": ("hdmm_pgm", False),
         "hdmm_pgm_z": ("hdmm_pgm", True), "mst": ("mst", True)}
# One `ektelo run` in a child process that reports its own CPU time and peak RSS.
CHILD = """
import resource, sys
from ektelo.cli import main
code = main(sys.argv[1:])
use = resource.getrusage(resource.RUSAGE_SELF)
print(f"RUSAGE {use.ru_utime + use.ru_stime} {use.ru_maxrss}", file=sys.stderr)
sys.exit(code)
"""


def true_pairs(domain: Domain, names: list[str]) -> dict[tuple[str, str], np.ndarray]:
    """Every pair's true marginal (counts) of the adult table."""
    frame = domain.read_csv(ADULT / "adult.csv", ignore_extra=True)
    codes = domain.encode(frame[list(domain.names)])
    out = {}
    for a, b in itertools.combinations(names, 2):
        i, j = domain.index(a), domain.index(b)
        counts = np.zeros((domain[a].size, domain[b].size))
        np.add.at(counts, (codes[:, i], codes[:, j]), 1.0)
        out[(a, b)] = counts
    return out


def average_tv(answers: pd.DataFrame, truth: dict[tuple[str, str], np.ndarray]) -> float:
    tvs = []
    for (a, b), true in truth.items():
        est = answers.loc[answers["marginal"] == f"{a}×{b}", "answer"].to_numpy()
        est = np.clip(est.reshape(true.shape), 0, None)
        tvs.append(0.5 * np.abs(est / est.sum() - true / true.sum()).sum())
    return float(np.mean(tvs))


def run_once(domain_file: Path, plan: str, zcdp: bool, eps: float, seed: int,
             out: Path) -> tuple[int, float, float, float, str]:
    """One run: exit code, wall s, CPU s, peak RSS (MB), the error line."""
    args = ["run", "--data", str(ADULT / "adult.csv"), "--domain", str(domain_file),
            "--workload", "marginals:2:all", "--epsilon", str(eps), "--plan", plan,
            "--no-ledger", "--seed", str(seed), "--out", str(out)]
    if zcdp:
        args += ["--delta", str(DELTA)]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, *args], capture_output=True,
                          text=True, check=False)
    wall = time.perf_counter() - start
    usage = [line for line in done.stderr.splitlines() if line.startswith("RUSAGE ")]
    cpu, rss = (float(v) for v in usage[-1].split()[1:]) if usage else (float("nan"),) * 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("ektelo: ")]
    return done.returncode, wall, cpu, rss / 1024, errors[-1] if errors else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--settings", nargs="+", default=["adult", "adult5"],
                        choices=["adult", "adult5"])
    parser.add_argument("--plans", nargs="+", default=list(PLANS), choices=list(PLANS))
    opts = parser.parse_args()
    if not (ADULT / "adult.csv").is_file():
        print(f"SKIPPED: the shared adult table is not at {ADULT}")
        return
    full = Domain.from_json(ADULT / "adult-domain.json")
    with tempfile.TemporaryDirectory() as tmp:
        for setting in opts.settings:
            names = list(full.names) if setting == "adult" else FIVE
            domain = full.project(names)
            domain_file = Path(tmp) / f"{setting}.json"
            domain_file.write_text(json.dumps(domain.to_dict()))
            truth = true_pairs(domain, names)
            print(f"\n{setting}: {len(truth)} pairs, ε = {opts.eps:g} "
                  f"(zCDP plans: ρ(ε, δ={DELTA:g})), {opts.seeds} seed(s)")
            print(f"{'plan':15} {'avg TV':>16} {'wall s':>8} {'CPU s':>7} {'peak MB':>8}")
            for key in opts.plans:
                plan, zcdp = PLANS[key]
                tvs: list[float] = []
                walls: list[float] = []
                cpus: list[float] = []
                rss: list[float] = []
                refusal = ""
                for seed in range(opts.seeds):
                    out = Path(tmp) / f"{setting}-{key}-{seed}.csv"
                    code, wall, cpu, peak, error = run_once(domain_file, plan, zcdp, opts.eps,
                                                            seed, out)
                    walls.append(wall)
                    cpus.append(cpu)
                    rss.append(peak)
                    if code != 0:
                        refusal = error
                        break
                    tvs.append(average_tv(pd.read_csv(out), truth))
                if refusal:
                    print(f"{key:15} {'refused':>16} {np.mean(walls):8.1f} {np.mean(cpus):7.1f} "
                          f"{np.max(rss):8.0f}  {refusal[:60]} … {refusal[-120:]}")
                    continue
                se = np.std(tvs, ddof=1) / np.sqrt(len(tvs)) if len(tvs) > 1 else float("nan")
                print(f"{key:15} {np.mean(tvs):9.4f} ± {se:.4f} {np.mean(walls):8.1f} "
                      f"{np.mean(cpus):7.1f} {np.max(rss):8.0f}", flush=True)


if __name__ == "__main__":
    main()
