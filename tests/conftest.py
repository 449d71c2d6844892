"""Shared fixtures: a seeded generator for test data, and the shared data path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DATA = SHARED / "data"


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)
