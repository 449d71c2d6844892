"""The graphical-model estimator on the adult table (issue #25's benchmark for
`ektelo.inference.graphical_model`, Private-PGM's estimator: McKenna, Sheldon
& Miklau, ICML 2019).

Measures, through the kernel at (ε, δ) (zCDP, Gaussian noise, ρ split evenly):
all 14 one-way marginals and the 13 two-way marginals of a spanning tree —
MST's shape of measurements (McKenna, Miklau & Sheldon, JPC 2021). The tree
is the maximum spanning tree of the TRUE pairwise mutual information, less
its finite-sample bias (k_a − 1)(k_b − 1)/2N (Miller–Madow; without it the
100×100 pairs win on noise alone) — a benchmark shortcut, not private: MST
selects its tree privately; `--tree l1` takes MST's own score (the L1
distance of each pair to the product of its 1-way marginals) on the true data
instead, `--tree chain` the attributes in order.
Then fits the model, answers all 91 two-way marginals, draws a synthetic
table with as many rows as the real one, and prints, per seed: fit time (wall and
CPU) and iterations, answer time, synthesis time, peak traced memory (tracemalloc:
NumPy's allocations), and the average over the 91 marginals of the
total-variation distance ½‖p̂ − p‖₁ to the true marginal, for the model's
marginals and for the synthetic table's.

Reads ../shared/data/adult (skips with a message when it is absent).

    PYTHONPATH=. python benchmarks/bench_graphical_model.py [--eps 1] [--seeds 0 1] \
        [--maxiter 1000] [--tree mi|l1|chain]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.sparse.csgraph import minimum_spanning_tree

import ektelo
from ektelo.inference.graphical_model import fit_graphical_model
from ektelo.matrix import Identity

ADULT = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "adult"


def counts(codes: np.ndarray, domain: ektelo.Domain, attrs: tuple[str, ...]) -> np.ndarray:
    """The true marginal on `attrs` (a code matrix in the domain's column order)."""
    shape = domain.project(attrs).shape
    cols = tuple(codes[:, domain.index(a)] for a in attrs)
    return np.bincount(np.ravel_multi_index(cols, shape), minlength=int(np.prod(shape))).reshape(
        shape
    )


def mi_tree(codes: np.ndarray, domain: ektelo.Domain) -> list[tuple[str, str]]:
    """The maximum spanning tree of the true pairwise mutual information,
    bias-corrected (module docstring)."""
    names = domain.names
    k = len(names)
    weight = np.zeros((k, k))
    for i, j in itertools.combinations(range(k), 2):
        p = counts(codes, domain, (names[i], names[j])) / len(codes)
        outer = p.sum(1, keepdims=True) * p.sum(0, keepdims=True)
        nz = p > 0
        bias = (p.shape[0] - 1) * (p.shape[1] - 1) / (2 * len(codes))
        weight[i, j] = float(np.sum(p[nz] * np.log(p[nz] / outer[nz]))) - bias
    # The maximum spanning tree as a minimum one on positive shifted weights
    # over the pairs i < j (a zero entry would be a missing edge).
    tree = minimum_spanning_tree(np.triu(weight.max() + 1.0 - weight, 1)).tocoo()
    return [(names[i], names[j]) for i, j in zip(tree.row, tree.col, strict=True)]


def l1_tree(codes: np.ndarray, domain: ektelo.Domain) -> list[tuple[str, str]]:
    """The maximum spanning tree of MST's selection score without its noise:
    the L1 distance between a pair's true marginal and the product of its
    true 1-way marginals (counts)."""
    names = domain.names
    k = len(names)
    weight = np.zeros((k, k))
    for i, j in itertools.combinations(range(k), 2):
        x = counts(codes, domain, (names[i], names[j])).astype(np.float64)
        product = x.sum(1, keepdims=True) * x.sum(0, keepdims=True) / x.sum()
        weight[i, j] = float(np.abs(x - product).sum())
    tree = minimum_spanning_tree(np.triu(weight.max() + 1.0 - weight, 1)).tocoo()
    return [(names[i], names[j]) for i, j in zip(tree.row, tree.col, strict=True)]


def tv(estimate: np.ndarray, truth: np.ndarray) -> float:
    p = np.clip(estimate, 0, None)
    return 0.5 * float(np.abs(p / p.sum() - truth / truth.sum()).sum())


def run(
    frame: pd.DataFrame,
    domain: ektelo.Domain,
    args: argparse.Namespace,
    seed: int,
    tree: list[tuple[str, str]],
    truth: dict[tuple[str, ...], np.ndarray],
) -> float:
    """One seed's measurements, fit, answers and synthetic table; prints its
    figures and returns the synthetic table's average TV."""
    pairs = list(truth)
    table = ektelo.protect(frame, domain, epsilon=args.eps, delta=args.delta, seed=seed)
    cliques = [(a,) for a in domain.names] + tree
    rho = table.budget.total / len(cliques)
    measurements = []
    for c in cliques:
        x = table.vectorize(list(c))
        measurements.append(x.gaussian(Identity(x.size), rho=rho))
    # Wall and CPU seconds of this process: on a shared machine the wall
    # time also counts the other processes' turns.
    c0, t0 = time.process_time(), time.perf_counter()
    model = fit_graphical_model(measurements, domain, maxiter=args.maxiter)
    c1, t1 = time.process_time(), time.perf_counter()
    answers = {p: model.marginal(p) for p in pairs}
    c2, t2 = time.process_time(), time.perf_counter()
    synthetic = model.synthetic(len(frame), seed=seed)
    c3, t3 = time.process_time(), time.perf_counter()
    # Peak memory in a second, traced pass (tracing slows NumPy down several
    # times, so the timings above are untraced); the iterations do not
    # allocate more than the first few, so 20 of them show the peak.
    tracemalloc.start()
    traced = fit_graphical_model(measurements, domain, maxiter=20)
    for p in pairs:
        traced.marginal(p)
    traced.synthetic(len(frame), seed=seed)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    synth_codes = domain.encode(synthetic)
    tv_model = np.mean([tv(answers[p], truth[p]) for p in pairs])
    tv_synth = np.mean([tv(counts(synth_codes, domain, p), truth[p]) for p in pairs])
    print(
        f"seed {seed}: fit {t1 - t0:5.2f} s wall / {c1 - c0:5.2f} s CPU "
        f"({model.info.iterations} it, {'converged' if model.info.converged else 'maxiter'}), "
        f"91 marginals {t2 - t1:4.2f} / {c2 - c1:4.2f} s, synthetic {t3 - t2:4.2f} / "
        f"{c3 - c2:4.2f} s, peak {peak / 2**20:5.1f} MB, model {model.size} cells; "
        f"avg TV model {tv_model:.4f}, synthetic {tv_synth:.4f}"
    )
    return float(tv_synth)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eps", type=float, default=1.0)
    parser.add_argument("--delta", type=float, default=1e-9)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--maxiter", type=int, default=1000)
    parser.add_argument("--tree", choices=("mi", "l1", "chain"), default="mi")
    args = parser.parse_args()
    if not (ADULT / "adult.csv").exists():
        print(f"skipped: the adult table is not at {ADULT}")
        return
    frame = pd.read_csv(ADULT / "adult.csv")
    domain = ektelo.Domain.from_json(json.loads((ADULT / "adult-domain.json").read_text()))
    print(
        f"adult: {len(frame)} rows, {len(domain)} attributes, domain {float(domain.size):.2e} "
        f"cells; eps={args.eps}, delta={args.delta}, tree={args.tree}, maxiter={args.maxiter}"
    )
    codes = domain.encode(frame)
    truth = {p: counts(codes, domain, p) for p in itertools.combinations(domain.names, 2)}
    trees = {"mi": mi_tree, "l1": l1_tree}
    if args.tree in trees:
        tree = trees[args.tree](codes, domain)
    else:
        tree = list(itertools.pairwise(domain.names))
    print("tree:", ", ".join(f"{a}-{b}" for a, b in tree))
    synth = [run(frame, domain, args, seed, tree, truth) for seed in args.seeds]
    print(f"mean over {len(synth)} seed(s): avg TV of the synthetic tables {np.mean(synth):.4f}")


if __name__ == "__main__":
    main()
