"""Research mode (seeded, reproducible, recorded) versus secure mode."""

from __future__ import annotations

import numpy as np
import pandas as pd

import ektelo
from ektelo import Domain
from ektelo.matrix import Identity, Prefix


def run(seed):
    x = ektelo.protect(np.arange(32, dtype=float), epsilon=1.0, seed=seed)
    a = x.laplace(Prefix(32), eps=0.5)
    b = x.transform(Prefix(32)).laplace(Identity(32), eps=0.01)
    return a, b


def test_research_mode_is_reproducible_and_recorded():
    a1, b1 = run(123)
    a2, b2 = run(123)
    np.testing.assert_array_equal(a1.answers, a2.answers)
    np.testing.assert_array_equal(b1.answers, b2.answers)
    assert a1.seed == b1.seed == 123 and a1.research_mode
    a3, _ = run(124)
    assert not np.array_equal(a1.answers, a3.answers)


def test_secure_mode_is_not_reproducible():
    a1, _ = run(None)
    a2, _ = run(None)
    assert a1.seed is None and not a1.research_mode
    assert not np.array_equal(a1.answers, a2.answers)
    x = ektelo.protect(np.ones(3), epsilon=1.0)
    assert not x.research_mode and x.seed is None and "secure" in repr(x.port)


def test_table_noisy_count_modes():
    frame = pd.DataFrame({"a": [0, 1, 1]})
    domain = Domain.from_json({"a": 2})

    def count(seed):
        return ektelo.protect(frame, domain, epsilon=1.0, seed=seed).noisy_count(eps=1.0)

    assert count(5).answers[0] == count(5).answers[0]
    secure = {count(None).answers[0] for _ in range(5)}
    assert len(secure) > 1
    assert count(5).seed == 5 and count(None).seed is None
