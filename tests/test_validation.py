"""One argument convention across the public layers (issue #23): a real
number is any `numbers.Real` but a boolean (so `np.float32` and NumPy ints
pass, `True`, strings and complex numbers do not), an integer any
`numbers.Integral` but a boolean; the wrong kind raises TypeError, a value
out of range ValueError, and both messages name the argument."""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from ektelo import inference
from ektelo import workload as wl
from ektelo.matrix import Identity, Prefix
from ektelo.measurement import Measurement
from ektelo.operators import error, partition, selection


def _measurements() -> list[Measurement]:
    Q = Identity(4)
    return [Measurement(np.array([1.0, 2.0, 3.0, 4.0]), Q, Q, 1.0, 1.0, "root", (4,))]


# the argument's name: a call passing it the value
POSITIVE: dict[str, Callable[[Any], Any]] = {
    "eps": lambda v: selection.uniform_grid((8, 8), 100.0, v),
    "expected_error eps": lambda v: error.expected_error(Prefix(4), Identity(4), v),
    "records": lambda v: error.scaled_error(Prefix(4), Identity(4), 1.0, v),
    "total": lambda v: inference.multiplicative_weights(_measurements(), total=v, maxiter=1),
}
PROBABILITY: dict[str, Callable[[Any], Any]] = {
    "tol": lambda v: inference.least_squares(_measurements(), tol=v),
}
POSITIVE_INT: dict[str, Callable[[Any], Any]] = {
    "count": lambda v: wl.random_range(8, v),
    "repetitions": lambda v: partition.workload_based(Prefix(4), repetitions=v),
    "maxiter": lambda v: inference.multiplicative_weights(_measurements(), maxiter=v),
    "n": lambda v: wl.prefix(v),
}
NAMES = {"expected_error eps": "eps"}


def _name(key: str) -> str:
    return NAMES.get(key, key)


@pytest.mark.parametrize("key", sorted(POSITIVE))
@pytest.mark.parametrize(
    "value", [1, 0.5, np.float32(0.5), np.float16(2), np.int64(3), Fraction(1, 2)]
)
def test_positive_reals_of_every_kind_are_accepted(key: str, value: Any) -> None:
    POSITIVE[key](value)


@pytest.mark.parametrize("key", sorted(POSITIVE))
@pytest.mark.parametrize("value", [True, np.True_, "1", 1 + 0j, [1.0]])  # (None: "not given")
def test_positive_reals_refuse_other_kinds(key: str, value: Any) -> None:
    with pytest.raises(TypeError, match=f"{_name(key)} must be a real number"):
        POSITIVE[key](value)


@pytest.mark.parametrize("key", sorted(POSITIVE))
@pytest.mark.parametrize("value", [0, -1.0, math.nan, math.inf, np.float32("-inf")])
def test_positive_reals_out_of_range(key: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"{_name(key)} must be a finite positive number"):
        POSITIVE[key](value)


@pytest.mark.parametrize("key", sorted(PROBABILITY))
def test_probabilities(key: str) -> None:
    call = PROBABILITY[key]
    for value in (1e-6, np.float32(1e-6), Fraction(1, 1000)):
        call(value)
    for value in (True, "0.1", None):
        with pytest.raises(TypeError, match=f"{key} must be a real number"):
            call(value)
    for value in (0, 1, 1.5, -0.1, math.nan):
        with pytest.raises(ValueError, match=rf"{key} must be a number in \(0, 1\)"):
            call(value)


@pytest.mark.parametrize("key", sorted(POSITIVE_INT))
def test_positive_integers(key: str) -> None:
    call = POSITIVE_INT[key]
    for value in (1, 3, np.int8(2), np.uint64(4)):
        call(value)
    for value in (True, 2.0, np.float32(2), "2", Fraction(2)):
        with pytest.raises(TypeError, match=key):
            call(value)
    for value in (0, -3, np.int64(-1)):
        with pytest.raises(ValueError, match=f"{key} must be a positive integer"):
            call(value)


def test_shapes_and_axes() -> None:
    for shape in (4, (2, 3), [2, 3], np.array([2, 3]), (np.int32(2), 3)):
        wl.identity(shape)
    for shape in ((2, 3.0), (True, 2), "23", 4.0, None):
        with pytest.raises(TypeError, match="shape must be a positive integer or a tuple"):
            wl.identity(shape)
    for shape in ((), (2, 0), 0, -1):
        with pytest.raises(ValueError, match="shape must be a positive integer or a tuple"):
            wl.identity(shape)
    # an axis counts from the end when negative, as in NumPy
    assert selection.stripe((3, 4), -1, selection.identity) == selection.stripe(
        (3, 4), 1, selection.identity
    )
    with pytest.raises(ValueError, match="axis 2 is out of range for a 2-D domain"):
        selection.stripe((3, 4), 2, selection.identity)
    with pytest.raises(TypeError, match="axis must be an axis index"):
        selection.stripe((3, 4), 1.0, selection.identity)
