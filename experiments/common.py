"""Shared machinery of the experiments: registry, progress, outputs, data."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

__all__ = [
    "EXPERIMENTS",
    "dpbench_1d",
    "dpbench_2d",
    "experiment",
    "one_blas_thread",
    "progress",
    "require_shared",
    "save_outputs",
    "set_data_dir",
    "shared_data_dir",
]

T = TypeVar("T")
ExperimentFn = Callable[..., pd.DataFrame]  # (out, trials, quick, **options)
EXPERIMENTS: dict[str, ExperimentFn] = {}
OPTIONS: dict[str, tuple[str, ...]] = {}  # the extra keyword options an experiment takes


def experiment(name: str, options: tuple[str, ...] = ()) -> Callable[[ExperimentFn], ExperimentFn]:
    """Register an experiment under `name`; `options` names the extra keyword
    arguments (beyond out, trials, quick) it accepts, e.g. a subset to run."""

    def wrap(fn: ExperimentFn) -> ExperimentFn:
        EXPERIMENTS[name] = fn
        OPTIONS[name] = tuple(options)
        return fn

    return wrap


def one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """One BLAS thread for the timed plan calls (the library leaves BLAS
    threading to its caller): the optimisations and solvers make thousands of
    small and mid-sized BLAS calls, and a threaded BLAS on a busy machine
    spends its time synchronising (HDMM's LSMR on 65536 cells: 16 s instead of
    1.8 s of CPU on two shared cores), which CPU seconds would count."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def progress(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    """Yield items while printing a one-line progress bar with elapsed time to stderr."""
    items = list(items) if total is None else items
    count = len(items) if total is None else total  # type: ignore[arg-type]
    start = time.perf_counter()
    for i, item in enumerate(items, 1):
        yield item
        done = int(30 * i / max(count, 1))
        elapsed = time.perf_counter() - start
        bar = "#" * done + "." * (30 - done)
        sys.stderr.write(f"\r{label} [{bar}] {i}/{count} {elapsed:6.1f}s")
        sys.stderr.flush()
    sys.stderr.write("\n")


_DATA_DIR: Path | None = None  # set by `set_data_dir` (the command's --data-dir)


def set_data_dir(path: Path | str | None) -> None:
    """Read the benchmark data from `path` (None: look it up again)."""
    global _DATA_DIR
    _DATA_DIR = None if path is None else Path(path)


def shared_data_dir() -> Path | None:
    """The benchmark data directory, if present: the one given to `set_data_dir`,
    else `EKTELO_DATA`, else a `shared/data` beside the checkout or the working
    directory."""
    if _DATA_DIR is not None:
        return _DATA_DIR if _DATA_DIR.is_dir() else None
    candidates = [os.environ.get("EKTELO_DATA")]
    here = Path(__file__).resolve()
    candidates += [str(p / "shared" / "data") for p in here.parents[:4]]
    candidates.append(str(Path.cwd().parent / "shared" / "data"))
    for c in candidates:
        if c and Path(c).is_dir():
            return Path(c)
    return None


def require_shared(relative: str) -> Path:
    """A path under the shared data directory, or a clear error if it is absent."""
    root = shared_data_dir()
    if root is None or not (root / relative).exists():
        raise FileNotFoundError(
            f"this experiment needs the shared benchmark data ({relative}); pass --data-dir "
            "(or set EKTELO_DATA to) the directory that holds dpbench/, adult/ and credit/"
        )
    return root / relative


def dpbench_1d() -> dict[str, np.ndarray]:
    """The ten DPBench 1-D histograms (4096 bins), keyed by file stem."""
    folder = require_shared("dpbench/1d")
    files = sorted(folder.glob("*.npy"))
    return {p.name.split(".")[0]: np.load(p).astype(np.int64) for p in files}


def dpbench_2d() -> dict[str, np.ndarray]:
    """The six DPBench 2-D histograms (256×256), keyed by file stem."""
    folder = require_shared("dpbench/2d")
    files = sorted(folder.glob("*.npy"))
    return {p.name.split("_256")[0]: np.load(p).astype(np.int64) for p in files}


def save_outputs(
    name: str, out: Path, table: pd.DataFrame, plot: Callable[[Any], None], title: str
) -> None:
    """Print `table`, write `<name>.csv`, and draw `<name>.png` with `plot(ax)`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with pd.option_context("display.width", 160, "display.max_columns", 30):
        print(table.to_string(index=False))
    table.to_csv(out / f"{name}.csv", index=False)
    fig, ax = plt.subplots(figsize=(8, 5))
    plot(ax)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out / f"{name}.png", dpi=120)
    plt.close(fig)
    print(f"wrote {out / (name + '.csv')} and {out / (name + '.png')}")


def clear_library_caches() -> None:
    """Empty every memo (anything with `cache_clear`, e.g. `functools.lru_cache`
    or HDMM's strategy memo) in ektelo's loaded modules, so that a timed run
    pays for its own work whatever ran before it in the same process."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "ektelo" or name.startswith("ektelo.")):
            continue
        for value in list(vars(module).values()):
            clear = getattr(value, "cache_clear", None)
            if callable(clear):
                clear()


class HandleProxy:
    """Base of the experiments' stand-ins for a protected vector: `shape`,
    `size` and every attribute not overridden are the wrapped handle's."""

    def __init__(self, handle: Any):
        self._handle = handle

    @property
    def shape(self) -> tuple[int, ...]:
        return self._handle.shape

    @property
    def size(self) -> int:
        return self._handle.size

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)
