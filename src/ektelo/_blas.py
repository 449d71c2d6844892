"""Small dense linear algebra on one BLAS thread (#41).

OpenBLAS's thread team costs more than it saves on small matrices: an
eigendecomposition of a 128 × 128 Gram matrix takes ~18 ms of CPU on two
threads and ~3 ms on one (7× more at 256 cells on a loaded 2-core machine,
wall time too), and the planner prices a small question's candidate plans
with several of them. Up to `SMALL` columns they run on one thread (via
threadpoolctl, when installed; otherwise as the BLAS is set), which also
makes their last bits independent of the machine's core count."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

__all__ = ["SMALL", "small_blas"]

SMALL = 512


@contextmanager
def small_blas(n: int) -> Iterator[None]:
    """One BLAS thread inside the block when the matrix has at most `SMALL`
    columns (`n`); the BLAS's own setting otherwise."""
    if n > SMALL:
        yield
        return
    controller = _controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


@cache
def _controller() -> Any:
    """threadpoolctl's view of the loaded BLAS libraries, found once (NumPy's
    is loaded with NumPy; a scan costs ~5 ms), or None without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # (a dependency; a trimmed install still computes)
        return None
    return ThreadpoolController()
