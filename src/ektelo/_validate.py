"""Argument checks shared by ektelo's public layers (operators, inference,
workloads, the CLI): one definition of "a positive number", "a probability",
"a positive integer", "a shape", each raising with the argument's name.

The convention, the one the kernel's ledger applies to ε and ρ in its own
(audited, separate) checks:

* a *real number* is any `numbers.Real` except a boolean: Python `int` and
  `float`, every NumPy integer and floating type (`np.float32` included),
  `fractions.Fraction`; `bool`, `np.bool_`, complex numbers, strings and
  `decimal.Decimal` are refused;
* an *integer* is any `numbers.Integral` except a boolean (Python `int`,
  every NumPy integer type);
* a value of the wrong kind raises `TypeError`; a value of the right kind out
  of range (not finite, not positive, ...) raises `ValueError`; both messages
  name the argument and never need more than the value the caller passed.

Every check returns the value converted to the plain Python type (`float`,
`int`, a tuple of `int`), so a caller keeps the checked value and never the
caller's object.

The kernel does not import this module (its checks are part of what a
privacy auditor reads, closed under the kernel's imports), nor do
`matrix/` (which imports nothing of ektelo), `domain`, `budget` and
`measurement` (imported by the kernel).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable
from typing import TypeGuard

__all__ = [
    "axis",
    "integer",
    "is_integer",
    "is_real",
    "positive",
    "positive_int",
    "probability",
    "real",
    "shape",
    "unit_interval",
]


def is_real(value: object) -> TypeGuard[numbers.Real]:
    """True for a real number in the module's sense (not a boolean)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_integer(value: object) -> TypeGuard[numbers.Integral]:
    """True for an integer in the module's sense (not a boolean)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def real(value: object, name: str) -> float:
    """`value` as a finite float."""
    if not is_real(value):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return v


def positive(value: object, name: str) -> float:
    """`value` as a finite float > 0 (an ε, a ρ, a record count, a mass)."""
    if not is_real(value):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v


def unit_interval(value: object, name: str, *, include_one: bool = False) -> float:
    """`value` as a float in (0, 1), or in (0, 1] with `include_one`."""
    if not is_real(value):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    if not (0 < v < 1 or (include_one and v == 1)):
        interval = "(0, 1]" if include_one else "(0, 1)"
        raise ValueError(f"{name} must be a number in {interval}, got {value!r}")
    return v


def probability(value: object, name: str) -> float:
    """`value` as a float strictly between 0 and 1."""
    return unit_interval(value, name)


def integer(value: object, name: str, *, minimum: int | None = None) -> int:
    """`value` as an int, at least `minimum` when one is given."""
    if not is_integer(value):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    v = int(value)
    if minimum is not None and v < minimum:
        if minimum == 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if minimum == 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        raise ValueError(f"{name} must be an integer ≥ {minimum}, got {value!r}")
    return v


def positive_int(value: object, name: str) -> int:
    """`value` as an int ≥ 1."""
    return integer(value, name, minimum=1)


def shape(value: object, name: str = "shape") -> tuple[int, ...]:
    """A domain shape: a positive integer (1-D) or a non-empty sequence of
    them, as a tuple of ints."""
    wanted = f"{name} must be a positive integer or a tuple of them, got {value!r}"
    if is_integer(value):
        dims: tuple[object, ...] = (value,)
    elif isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
        dims = tuple(value)
    else:
        raise TypeError(wanted)
    ints: list[int] = []
    for s in dims:
        if not is_integer(s):
            raise TypeError(wanted)
        ints.append(int(s))
    if not ints or min(ints) < 1:
        raise ValueError(wanted)
    return tuple(ints)


def axis(value: object, ndim: int, name: str = "axis") -> int:
    """An axis index of a `ndim`-D domain, counted from the end when negative
    (as in NumPy), as an int in [0, ndim)."""
    if not is_integer(value):
        raise TypeError(f"{name} must be an axis index (an integer), got {type(value).__name__}")
    v = int(value)
    if not -ndim <= v < ndim:
        raise ValueError(f"{name} {v} is out of range for a {ndim}-D domain")
    return v % ndim
