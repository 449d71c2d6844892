"""scipy.sparse, imported on first use (#41): a question whose matrices are
never materialised (a histogram's Identity, measured and answered by its
structure) loads no SciPy — ~0.12 s of CPU, with the numpy.testing,
unittest and logging that SciPy pulls in. Modules write
``from .lazy import sparse as sp`` (their type checker sees scipy.sparse)
and test for a sparse matrix with `issparse`, which imports nothing."""

from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["issparse", "sparse"]


class _Module:
    """A module imported when one of its names is first read."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<{self._name}, imported on first use>"


sparse: Any = _Module("scipy.sparse")


def issparse(x: Any) -> bool:
    """`scipy.sparse.issparse(x)`, without importing SciPy: no sparse matrix
    exists before scipy.sparse has been imported."""
    module = sys.modules.get("scipy.sparse")
    return module is not None and bool(module.issparse(x))
