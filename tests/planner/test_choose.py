"""`ektelo.planner.choose`, the one place that decides which plan answers a
question (#35): its answers for named and auto plans, and the strategy it
builds once per question, which the session uses instead of asking again."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from ektelo.planner import choose, tier0
from ektelo.plans import data_independent
from ektelo.session import Session
from ektelo.workload import spec

DOMAIN = {"age": {"range": [0, 63], "width": 1}, "sex": {"values": ["F", "M"]}}


def _table(rows: int = 500) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.integers(0, 64, rows), "sex": rng.choice(["F", "M"], rows)})


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each plan's strategy is built (every caller goes through
    `data_independent.strategy_for`)."""
    counts: Counter[str] = Counter()
    original = data_independent.strategy_for

    def spy(name, shape, workload, **options):
        counts[name] += 1
        return original(name, shape, workload, **options)

    monkeypatch.setattr(data_independent, "strategy_for", spy)
    tier0.clear_cache()
    return counts


@pytest.mark.parametrize("plan", ["hb", "identity", "greedy_h"])
@pytest.mark.parametrize("budget", [{"epsilon": 1.0}, {"rho": 0.5}])
def test_a_named_plan_builds_its_strategy_once_per_question(built, plan, budget):
    s = Session(_table(), DOMAIN, seed=3, **({"epsilon": 10.0} if "epsilon" in budget
                                             else {"rho": 5.0}))
    frame = s.cdf("age", plan=plan, **budget)
    assert built == Counter({plan: 1})
    gaussian = "rho" in budget
    assert frame.attrs["ci_method"] in (("exact Gaussian",) if gaussian
                                        else ("Laplace-tail width (conservative for sums)",
                                              "exact Laplace"))


def test_auto_builds_each_candidates_strategy_once_and_reuses_the_chosen_one(built):
    s = Session(_table(), DOMAIN, seed=3, epsilon=10.0)
    frame = s.cdf("age", epsilon=1.0)
    chosen = frame.attrs["plan"]
    assert built[chosen] == 1 and max(built.values()) == 1
    assert frame["std_error"].notna().all()  # the strategy reached the error bars


def test_choose_answers_as_the_session_did():
    q = spec.parse("cdf:age", _domain())
    named = choose(q, {"rho": 0.5}, plan="dawa")
    assert named.plan == "dawa" and named.strategy is None and not named.gaussian
    assert "Laplace mechanism at ε = √(2ρ)" in named.why
    gauss = choose(q, {"rho": 0.5}, plan="hb")
    assert gauss.gaussian and gauss.why == "named"
    assert gauss.strategy == data_independent.strategy_for("hb", q.shape, q.matrix)
    auto = choose(q, {"epsilon": 1.0})
    assert auto.candidates and auto.plan in {c.plan for c in auto.candidates}
    with pytest.raises(KeyError, match="unknown plan"):
        choose(q, {"epsilon": 1.0}, plan="no_such_plan")


def _domain():
    from ektelo import Domain

    return Domain.from_json(DOMAIN)
