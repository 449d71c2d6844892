"""plan-scalability: plan runtime against domain size with dense, sparse and
implicit measurement matrices (εktelo §10.2.1, the plan-efficiency figure).

The representation switch. Plans are the library's own functions, run
unchanged on a stand-in for the protected vector (`Represented`) that hands
every measurement matrix to the kernel in one representation:

* ``implicit`` — the matrix the plan built (its `EMatrix` expression);
* ``dense``    — ``Dense(M.dense())``;
* ``sparse``   — ``Sparse(M.sparse())``;
* for HB-Striped_kron (whose strategy is HB ⊗ Identity…) ``dense`` and
  ``sparse`` materialise the Kronecker *factors* and keep the product, as the
  paper compares "implementations of the submatrices", and ``basic-sparse``
  materialises the whole product in sparse form (the paper's "Basic sparse").

The kernel answers and charges the materialised copy and the measurement
carries it, so least-squares inference (LSMR) then works on the dense or
sparse matrix too: a plan's selection, measurement and inference all see one
representation, as in the paper's "implementations of measurement matrices".
Workloads stay implicit (the figure is with the Identity workload, and HDMM
on a Kronecker workload, whose strategy optimisation needs its structure).
Materialising is part of the timed run, as it would be for a plan written
against dense or sparse matrices.

Runs and limits. Each run (one plan, representation, domain and trial) is a
job in a separate worker process (`LimitedRunner`): single-threaded BLAS, an
address-space cap (``MEMORY_GB``; an allocation beyond it, or the matrix
layer's own refusal to materialise more than 2²⁸ entries, is recorded as
"memory"), and a limit of ``CPU_LIMIT`` CPU seconds (the run is killed and
recorded as "timeout"). After a timeout or memory failure the larger domains
of that plan × representation are recorded as "skipped". Runtimes are CPU
seconds of the worker (time.process_time), which on a shared machine are far
steadier than wall-clock seconds; wall seconds are reported beside them. A
point runs up to ``trials`` times, stopping early once its trials have used
the CPU limit in total (the `trials` column says how many ran).

Domains: the paper's Fig. (a) plans on square 2-D domains (DAWA and GreedyH
on 1-D domains) of 2⁸ … 2²⁴ cells, and Fig. (b) multi-dimensional plans:
HB-Striped and HB-Striped_kron on (16, …, 16, 256)-shaped domains (stripes of
256 cells, with one axis of 4 for odd powers of 4), HDMM on (16, …, 16)
domains for the Kronecker workload of per-attribute prefixes, 2⁸ … 2²⁴
cells. Data: synthetic counts (Poisson around a product of random smooth
bumps, 10 records per cell on average, seeded by the trial); ε = 1.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .common import HandleProxy, clear_library_caches, experiment, progress, save_outputs

__all__ = [
    "CPU_LIMIT",
    "MEMORY_GB",
    "LimitedRunner",
    "Outcome",
    "Point",
    "Represented",
    "as_table",
    "panel_axes",
    "represent",
    "sweep",
    "sweep_series",
    "synthetic_data",
]

NAME = "plan-scalability"
CPU_LIMIT = 60.0  # CPU seconds per run
MEMORY_GB = 8.0  # address-space cap of the worker process
EPS = 1.0
DEFAULT_TRIALS = 3

# ---------------------------------------------------------------------------
# Running one job under a CPU-time and a memory limit (shared with
# inference-scalability)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What one limited run gave: status "ok", "timeout", "memory" or "error"."""

    status: str
    cpu_s: float = math.nan
    wall_s: float = math.nan
    peak_gb: float = math.nan
    info: dict[str, Any] = field(default_factory=dict)
    message: str = ""


_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _peak_gb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return math.nan


def _reset_peak() -> None:
    try:  # Linux: "5" resets the peak resident set size (VmHWM)
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _serve(conn: Any, memory_bytes: int) -> None:
    """Worker loop: build a job, say "ready", time it, send the outcome."""
    if memory_bytes > 0:
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
        except (ImportError, ValueError, OSError):  # pragma: no cover - non-Linux
            pass
    while True:
        try:
            request = conn.recv()
        except EOFError:
            return
        if request is None:
            return
        target, args = request
        job: Callable[[], Any] | None = None
        try:
            module, _, name = target.partition(":")
            clear_library_caches()
            job = getattr(importlib.import_module(module), name)(*args)
            gc.collect()
            _reset_peak()
            conn.send(("ready",))
            cpu0, wall0 = time.process_time(), time.perf_counter()
            info = job()
            cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
            peak = _peak_gb()
            if callable(info):  # checks that must not be timed
                info = info()
            conn.send(("ok", cpu, wall, peak, dict(info or {})))
        except MemoryError as err:
            conn.send(("memory", f"MemoryError: {err}"))
        except Exception as err:
            conn.send(("error", f"{type(err).__name__}: {err}"))
        finally:
            job = None
            gc.collect()


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class LimitedRunner:
    """Runs jobs one at a time in a worker process under a CPU and memory limit.

    A job is named "module:function"; the function is called in the worker
    with the given arguments (set-up, not timed) and returns a callable that
    is timed; its result (a dict, None, or a function returning a dict that
    is called after the clock stops) is sent back. A job past
    `cpu_limit` CPU seconds (or `wall_factor` times that in wall seconds, as a
    backstop), or whose set-up takes more than `setup_limit` wall seconds, is
    killed and the worker restarted. Workers use one BLAS thread, and empty
    the library's memo caches before each job.
    """

    def __init__(
        self,
        *,
        cpu_limit: float = CPU_LIMIT,
        memory_gb: float = MEMORY_GB,
        setup_limit: float = 900.0,
        wall_factor: float = 20.0,
    ):
        if not (cpu_limit > 0 and memory_gb > 0 and setup_limit > 0 and wall_factor >= 1):
            raise ValueError("limits must be positive")
        self.cpu_limit = float(cpu_limit)
        self.memory_bytes = int(memory_gb * 2**30)
        self.setup_limit = float(setup_limit)
        self.wall_limit = float(cpu_limit) * float(wall_factor)
        self._ctx = multiprocessing.get_context("spawn")
        self._proc: Any = None
        self._conn: Any = None

    def __enter__(self) -> LimitedRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        parent, child = self._ctx.Pipe()
        saved = {k: os.environ.get(k) for k in _THREAD_VARS}
        os.environ.update({k: "1" for k in _THREAD_VARS})
        try:
            proc = self._ctx.Process(target=_serve, args=(child, self.memory_bytes), daemon=True)
            proc.start()
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        child.close()
        self._proc, self._conn = proc, parent

    def _kill(self) -> None:
        if self._proc is not None:
            self._proc.kill()
            self._proc.join()
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        """Stop the worker (politely, then by force)."""
        if self._proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            self._conn.send(None)
        self._proc.join(timeout=5)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()
        self._conn.close()
        self._proc = self._conn = None

    def _died(self) -> Outcome:
        code = self._proc.exitcode if self._proc is not None else None
        self._kill()
        if code is not None and code < 0 and -code == 9:  # SIGKILL: the OOM killer
            return Outcome("memory", message="worker killed (out of memory)")
        return Outcome("error", message=f"worker died (exit code {code})")

    def _wait(self, wall_limit: float, cpu_limit: float | None) -> Any:
        """The next message, or "timeout"/"died" as a string."""
        start_wall = time.perf_counter()
        start_cpu = _cpu_seconds(self._proc.pid) if cpu_limit is not None else None
        while True:
            try:
                if self._conn.poll(0.1):
                    return self._conn.recv()
            except (EOFError, OSError):
                return "died"
            if not self._proc.is_alive():
                return "died"
            if time.perf_counter() - start_wall > wall_limit:
                return "timeout"
            if start_cpu is not None and cpu_limit is not None:
                now = _cpu_seconds(self._proc.pid)
                if now is not None and now - start_cpu > cpu_limit:
                    return "timeout"

    def run(self, target: str, *args: Any) -> Outcome:
        """Run job `target` ("module:function") with `args` under the limits."""
        if self._proc is None or not self._proc.is_alive():
            self._start()
        self._conn.send((target, args))
        msg = self._wait(self.setup_limit, None)
        if msg == "died":
            return self._died()
        if msg == "timeout":
            self._kill()
            return Outcome("timeout", message=f"set-up took over {self.setup_limit:.0f} s")
        if msg[0] != "ready":
            return Outcome(msg[0], message=msg[1])
        msg = self._wait(self.wall_limit, self.cpu_limit)
        if msg == "died":
            return self._died()
        if msg == "timeout":
            self._kill()
            return Outcome("timeout", message=f"over {self.cpu_limit:g} CPU s")
        if msg[0] == "ok":
            _, cpu, wall, peak, info = msg
            if cpu > self.cpu_limit:  # finished between two polls, but too late
                return Outcome("timeout", cpu, wall, peak, info, f"{cpu:.1f} CPU s")
            return Outcome("ok", cpu, wall, peak, info)
        return Outcome(msg[0], message=msg[1])


@dataclass(frozen=True)
class Point:
    """One domain size of a series: table fields and the job's arguments."""

    fields: dict[str, Any]
    args: tuple[Any, ...]


def sweep(
    runner: LimitedRunner,
    target: str,
    label: dict[str, Any],
    points: Sequence[Point],
    trials: int,
) -> list[dict[str, Any]]:
    """Run a series of growing points; after a failure, skip the larger ones.

    Each point runs up to `trials` times (the trial index is the job's last
    argument), stopping early once its runs have used the CPU limit in total.
    Returns one table row per point: status, trials run, mean/std/min CPU
    seconds, mean wall seconds, peak resident memory (GB), the first run's
    info (trial 0, comparable across series) and the failure message.
    """
    rows: list[dict[str, Any]] = []
    failed = False
    for point in points:
        row: dict[str, Any] = {**label, **point.fields}
        if failed:
            rows.append({**row, "status": "skipped", "trials": 0})
            continue
        done: list[Outcome] = []
        problem: Outcome | None = None
        for t in range(trials):
            outcome = runner.run(target, *point.args, t)
            if outcome.status != "ok":
                problem = outcome
                break
            done.append(outcome)
            if sum(o.cpu_s for o in done) >= runner.cpu_limit:
                break
        if done:
            cpu = np.array([o.cpu_s for o in done])
            row.update(
                status="ok",
                trials=len(done),
                runtime_s=float(cpu.mean()),
                runtime_std=float(cpu.std()),
                runtime_min=float(cpu.min()),
                wall_s=float(np.mean([o.wall_s for o in done])),
                peak_gb=float(np.nanmax([o.peak_gb for o in done]))
                if not all(math.isnan(o.peak_gb) for o in done)
                else math.nan,
                **done[0].info,
            )
        elif problem is not None:
            row.update(status=problem.status, trials=0)
        if problem is not None:
            row["message"] = problem.message
            failed = True
        rows.append(row)
    return rows


def sweep_series(
    name: str,
    out: Path,
    target: str,
    series: Sequence[tuple[str, dict[str, Any], Sequence[Point]]],
    trials: int,
    cpu_limit: float,
    memory_gb: float,
) -> list[dict[str, Any]]:
    """`sweep` every (tag, label, points) series in one limited worker, with
    progress, a line per series on stderr and a partial CSV kept up to date
    in `out` (it survives an interrupted run; removed at the end)."""
    rows: list[dict[str, Any]] = []
    partial = out / f"{name}.partial.csv"
    with LimitedRunner(cpu_limit=cpu_limit, memory_gb=memory_gb) as runner:
        for tag, label, points in progress(series, name):
            rows += sweep(runner, target, label, points, trials)
            sys.stderr.write(f"  {tag}: {rows[-1]['status']} at n={rows[-1]['n']}\n")
            pd.DataFrame(rows).to_csv(partial, index=False)
    partial.unlink(missing_ok=True)
    return rows


def as_table(rows: list[dict[str, Any]], columns: Sequence[str]) -> pd.DataFrame:
    """The rows as a frame with exactly `columns`, in order (NaN where no row
    set one, e.g. when every point failed)."""
    table = pd.DataFrame(rows)
    for column in columns:
        if column not in table:
            table[column] = np.nan
    return table[list(columns)]


# ---------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------


def synthetic_data(shape: Sequence[int], seed: int, per_cell: float = 10.0) -> np.ndarray:
    """Seeded synthetic counts: Poisson around a product, over the axes, of
    three random Gaussian bumps on a floor; `per_cell` records per cell on
    average. Returns a float64 array of `shape`."""
    rng = np.random.default_rng(seed)
    lam: np.ndarray = np.ones(())
    for s in shape:
        t = (np.arange(s) + 0.5) / s
        centres, widths, weights = rng.random(3), 0.02 + 0.2 * rng.random(3), rng.random(3)
        bumps = weights[:, None] * np.exp(-0.5 * ((t - centres[:, None]) / widths[:, None]) ** 2)
        density = 0.05 + bumps.sum(axis=0)
        lam = np.multiply.outer(lam, density / density.mean())
    return rng.poisson(per_cell * lam)


# ---------------------------------------------------------------------------
# The representation switch
# ---------------------------------------------------------------------------

REPRESENTATIONS = ("dense", "sparse", "implicit")


def represent(M: Any, representation: str, *, keep_kronecker: bool = False) -> Any:
    """The matrix `M` in the named representation (see the module notes)."""
    from ektelo.matrix import Dense, Kronecker, Sparse

    if representation == "implicit":
        return M
    if representation == "basic-sparse":
        return Sparse(M.sparse())
    if representation not in ("dense", "sparse"):
        raise ValueError(f"unknown representation {representation!r}")
    if keep_kronecker and isinstance(M, Kronecker):
        return Kronecker([represent(f, representation) for f in M.factors])
    return Dense(M.dense()) if representation == "dense" else Sparse(M.sparse())


class Represented(HandleProxy):
    """A stand-in for a `ProtectedVector` that measures in one representation.

    `laplace` materialises the matrix (`represent`) before the kernel sees
    it; vectors derived by `reduce_by_partition`, `split_by_partition` and
    `transform` are wrapped alike; everything else is the handle's own.
    `rows` counts the measured queries (shared by the derived vectors).
    """

    def __init__(
        self,
        handle: Any,
        representation: str,
        *,
        keep_kronecker: bool = False,
        _rows: list[int] | None = None,
    ):
        super().__init__(handle)
        self._rep = representation
        self._kron = keep_kronecker
        self._rows = [0] if _rows is None else _rows

    def _wrap(self, handle: Any) -> Represented:
        return Represented(handle, self._rep, keep_kronecker=self._kron, _rows=self._rows)

    @property
    def rows(self) -> int:
        return self._rows[0]

    def laplace(self, M: Any, *, eps: float) -> Any:
        Q = represent(M, self._rep, keep_kronecker=self._kron)
        self._rows[0] += Q.shape[0]
        return self._handle.laplace(Q, eps=eps)

    def reduce_by_partition(self, P: Any) -> Represented:
        return self._wrap(self._handle.reduce_by_partition(P))

    def split_by_partition(self, P: Any) -> list[Represented]:
        return [self._wrap(h) for h in self._handle.split_by_partition(P)]

    def transform(self, M: Any) -> Represented:
        return self._wrap(self._handle.transform(M))


# ---------------------------------------------------------------------------
# The experiment
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """A plan, its representations and its domains."""

    panel: str  # "1-D/2-D" or "multi-D"
    plan: str
    representations: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    workload: str  # "identity" or "prefix-kron"
    keep_kronecker: bool = False


def _square(n: int) -> tuple[int, ...]:
    side = math.isqrt(n)
    return (side, side)


def _striped_shape(n: int) -> tuple[int, ...]:
    """(4?, 16, …, 16, 256) with n cells (n = 2^(8+2k))."""
    k = (n.bit_length() - 1 - 8) // 2
    return (4,) * (k % 2) + (16,) * (k // 2) + (256,)


def _hdmm_shape(n: int) -> tuple[int, ...]:
    """(4?, 16, …, 16) with n cells (n = 2^(2j), j ≥ 4)."""
    j = (n.bit_length() - 1) // 2
    return (4,) * (j % 2) + (16,) * (j // 2)


LOW_D_2D = ("identity", "privelet", "h2", "hb", "quadtree", "uniform_grid", "adaptive_grid", "ahp")
LOW_D_1D = ("greedy_h", "dawa")


def _series(quick: bool) -> list[Series]:
    if quick:
        sizes = (2**8, 2**12)
        low = [
            Series("1-D/2-D", p, REPRESENTATIONS, tuple(_square(n) for n in sizes), "identity")
            for p in ("identity", "hb")
        ]
        low.append(Series("1-D/2-D", "greedy_h", REPRESENTATIONS, ((2**8,), (2**12,)), "identity"))
        multi = [
            Series("multi-D", "hb_striped", REPRESENTATIONS, ((16, 256),), "identity"),
            Series(
                "multi-D",
                "hb_striped_kron",
                (*REPRESENTATIONS, "basic-sparse"),
                ((16, 256),),
                "identity",
                keep_kronecker=True,
            ),
            Series("multi-D", "hdmm", REPRESENTATIONS, ((16, 16),), "prefix-kron"),
        ]
        return low + multi
    sizes = tuple(2**k for k in range(8, 25, 2))
    out = [
        Series("1-D/2-D", p, REPRESENTATIONS, tuple(_square(n) for n in sizes), "identity")
        for p in LOW_D_2D
    ]
    out += [
        Series("1-D/2-D", p, REPRESENTATIONS, tuple((n,) for n in sizes), "identity")
        for p in LOW_D_1D
    ]
    striped = tuple(_striped_shape(n) for n in sizes[1:])
    out += [
        Series("multi-D", "hb_striped", REPRESENTATIONS, striped, "identity"),
        Series(
            "multi-D",
            "hb_striped_kron",
            (*REPRESENTATIONS, "basic-sparse"),
            striped,
            "identity",
            keep_kronecker=True,
        ),
        Series(
            "multi-D", "hdmm", REPRESENTATIONS, tuple(_hdmm_shape(n) for n in sizes), "prefix-kron"
        ),
    ]
    return out


def _workload(kind: str, shape: tuple[int, ...]) -> Any:
    from ektelo.matrix import Identity, Kronecker, Prefix

    if kind == "identity":
        return Identity(math.prod(shape))
    if kind == "prefix-kron":
        return Kronecker([Prefix(s) for s in shape])
    raise ValueError(f"unknown workload {kind!r}")


def plan_job(
    plan: str,
    representation: str,
    shape: tuple[int, ...],
    workload: str,
    keep_kronecker: bool,
    trial: int,
) -> Callable[[], dict[str, Any]]:
    """Worker job: set up data, workload and handle; return the timed plan run."""
    import ektelo
    from ektelo import plans

    x = synthetic_data(shape, seed=trial)
    W = _workload(workload, shape)
    x_handle = Represented(
        ektelo.protect(x, epsilon=EPS, seed=trial), representation, keep_kronecker=keep_kronecker
    )
    function = plans.get(plan).function

    def run() -> dict[str, Any]:
        x_hat = np.asarray(function(x_handle, W, EPS))
        return {"measured_rows": x_handle.rows, "finite": bool(np.all(np.isfinite(x_hat)))}

    return run


_PAPER = {  # §10.2.1, as stated in the text (the figure itself is not in the source)
    "hb": "implicit scales ~1000x further",
    "quadtree": "implicit scales ~1000x further",
    "uniform_grid": "implicit scales ~1000x further",
    "greedy_h": "little difference (selection materialises)",
    "dawa": "little difference (selection materialises)",
    "adaptive_grid": "little difference (partition loop dominates)",
    "hb_striped": "sparse ~ implicit, >=10x larger than dense",
    "hdmm": "sparse ~ implicit, >=10x larger than dense",
    "hb_striped_kron": "kron >=10x larger than striped; basic sparse worst",
}


def _summary(table: pd.DataFrame) -> pd.DataFrame:
    """Largest domain each plan × representation finished, and its runtime."""
    rows = []
    for (panel, plan), group in table.groupby(["panel", "plan"], sort=False):
        entry: dict[str, Any] = {"panel": panel, "plan": plan}
        for rep, g in group.groupby("representation", sort=False):
            ok = g[g.status == "ok"]
            if ok.empty:
                entry[f"{rep}_max_n"] = 0
                continue
            last = ok.iloc[-1]
            entry[f"{rep}_max_n"] = int(last["n"])
            entry[f"{rep}_s_at_max"] = round(float(last["runtime_s"]), 3)
        dense, implicit = entry.get("dense_max_n", 0), entry.get("implicit_max_n", 0)
        entry["implicit/dense scale-up"] = implicit / dense if dense else math.inf
        common = group[group.status == "ok"].pivot_table(
            index="n", columns="representation", values="runtime_s"
        )
        if {"dense", "implicit"} <= set(common.columns):
            both = common[["dense", "implicit"]].dropna()
            if not both.empty:
                n = both.index.max()
                entry["dense/implicit speed-up at largest common n"] = round(
                    float(both.loc[n, "dense"] / both.loc[n, "implicit"]), 2
                )
        entry["paper (§10.2.1)"] = _PAPER.get(plan, "implicit usually fastest and most scalable")
        rows.append(entry)
    return pd.DataFrame(rows)


def panel_axes(ax: Any, count: int, cols: int = 4) -> list[Any]:
    """Split the single axes `save_outputs` provides into a grid of `count`
    panels (inset axes; the outer axes only carries the title) and resize the
    figure to fit them."""
    cols = max(1, min(cols, count))
    rows = math.ceil(count / cols)
    ax.figure.set_size_inches(4.2 * cols, 3.4 * rows + 0.5)
    ax.set_axis_off()
    panels = []
    for i in range(count):
        r, c = divmod(i, cols)
        left, bottom = c / cols + 0.09 / cols, 1 - (r + 1) / rows + 0.16 / rows
        panels.append(ax.inset_axes((left, bottom, 0.78 / cols, 0.68 / rows)))
    return panels


def _plot(table: pd.DataFrame, cpu_limit: float) -> Callable[[Any], None]:
    def plot(ax: Any) -> None:
        plans_ = list(dict.fromkeys(table.plan))
        styles = {"dense": "o-", "sparse": "s-", "implicit": "^-", "basic-sparse": "d--"}
        for a, plan in zip(panel_axes(ax, len(plans_)), plans_, strict=True):
            g = table[table.plan == plan]
            for rep, gr in g.groupby("representation", sort=False):
                ok = gr[gr.status == "ok"]
                (line,) = a.plot(ok.n, ok.runtime_s, styles.get(str(rep), ".-"), label=str(rep))
                bad = gr[gr.status.isin(["timeout", "memory", "error"])]
                if not bad.empty:
                    a.plot(bad.n, [cpu_limit] * len(bad), "x", color=line.get_color(), ms=9)
            a.set_xscale("log", base=2)
            a.set_yscale("log")
            a.set_title(f"{plan} ({g.panel.iloc[0]})", fontsize=9)
            a.set_xlabel("domain size (cells)", fontsize=8)
            a.set_ylabel("CPU seconds", fontsize=8)
            a.tick_params(labelsize=7)
            a.axhline(cpu_limit, color="grey", lw=0.6, ls=":")
            a.legend(fontsize=7)

    return plot


def run_experiment(
    out: Path,
    trials: int | None,
    quick: bool,
    *,
    cpu_limit: float | None = None,
    memory_gb: float | None = None,
) -> pd.DataFrame:
    """Run every series under the limits; write the CSV and PNG."""
    trials = trials if trials is not None else (1 if quick else DEFAULT_TRIALS)
    cpu_limit = cpu_limit if cpu_limit is not None else (10.0 if quick else CPU_LIMIT)
    memory_gb = memory_gb if memory_gb is not None else (3.0 if quick else MEMORY_GB)
    series = [
        (
            f"{s.plan}/{rep}",
            {"panel": s.panel, "plan": s.plan, "representation": rep},
            [
                Point(
                    {"shape": "x".join(map(str, shape)), "n": math.prod(shape)},
                    (s.plan, rep, shape, s.workload, s.keep_kronecker),
                )
                for shape in s.shapes
            ],
        )
        for s in _series(quick)
        for rep in s.representations
    ]
    rows = sweep_series(NAME, out, f"{__name__}:plan_job", series, trials, cpu_limit, memory_gb)
    table = as_table(
        rows,
        [
            "panel",
            "plan",
            "representation",
            "shape",
            "n",
            "status",
            "trials",
            "runtime_s",
            "runtime_std",
            "runtime_min",
            "wall_s",
            "peak_gb",
            "measured_rows",
            "finite",
            "message",
        ],
    )
    summary = _summary(table)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(
            f"\nLargest domain reached per representation (CPU limit {cpu_limit:g} s, "
            f"memory cap {memory_gb:g} GB), beside the paper's §10.2.1 claims:"
        )
        print(summary.to_string(index=False))
    save_outputs(
        NAME,
        out,
        table,
        _plot(table, cpu_limit),
        "Plan CPU time by measurement-matrix representation (x: timeout or memory failure)",
    )
    return table


@experiment(NAME)
def main(out: Path, trials: int | None, quick: bool) -> pd.DataFrame:
    """The plan-efficiency figure (§10.2.1)."""
    return run_experiment(out, trials, quick)
