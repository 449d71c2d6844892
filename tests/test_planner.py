"""`ektelo.planner.choose_plan`: the rules of `ektelo run --plan auto`, from
public facts only (the workload's kind and the domain's shape)."""

from __future__ import annotations

import pytest

from ektelo import plans
from ektelo.planner import choose_plan


@pytest.mark.parametrize(
    ("kind", "shape", "plan"),
    [
        ("marginals", (10, 20, 5), "hdmm"),
        ("prefix", (1000,), "dawa"),
        ("ranges", (2**16,), "dawa"),
        ("random-ranges", (2**16 + 1,), "hb"),
        ("prefix", (100, 2, 7), "hb_striped_kron"),
        ("ranges", (256, 256), "dawa"),
        ("file", (1024, 512), "hb"),
        ("ranges", (10, 10, 10), "hb"),
        ("identity", (64, 64), "dawa"),
        ("identity", (512, 512), "identity"),
    ],
)
def test_rules(kind, shape, plan):
    name, why = choose_plan(kind, shape)
    assert name == plan and why
    assert name in plans.names()
