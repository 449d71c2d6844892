"""Envelopes (issue #41): a question's requests charged once, all or nothing.

`Kernel.envelope(source, eps=)` is a 1-stable copy of `source` whose
requests (and those of everything derived from it) are charged to the
envelope's own ledger, up to ε; the envelope itself is charged ε at its first
request, by Algorithm 2 like any request. These tests hold it to that: one
charge at the root however many requests; refusals — by the envelope's cap or
by the budget — change nothing; parallel composition holds inside it; a plan
refused before it measures spends nothing; nested envelopes; never replayed.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo.domain import Domain
from ektelo.kernel import BudgetExceeded
from ektelo.matrix import Identity, Total
from ektelo.port import ProtectedTable, ProtectedVector
from ektelo.port import requests as port

DOMAIN = Domain.from_json({"a": 4, "b": 3})


def table(epsilon: float = 1.0, **options: object) -> ProtectedTable:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 4, 200), "b": rng.integers(0, 3, 200)})
    t = ektelo.protect(frame, DOMAIN, epsilon=epsilon, seed=1, **options)  # type: ignore[arg-type]
    assert isinstance(t, ProtectedTable)
    return t


def test_many_requests_one_charge_at_the_root() -> None:
    t = table()
    e = t.envelope(eps=0.5)
    assert t.budget.spent == 0  # nothing charged before its first request
    x = e.vectorize()
    for _ in range(5):
        x.laplace(Identity(12), eps=0.1)
    assert t.budget.spent == pytest.approx(0.5)
    charges = [r for r in t.history() if r.charged_at_root > 0]
    assert [r.operation for r in charges] == ["envelope"]  # one reservation
    assert charges[0].charged_at_root == pytest.approx(0.5)
    assert all(r.charged_at_root == 0 for r in t.history() if r.operation == "laplace")


def test_a_request_beyond_the_envelope_is_refused_and_changes_nothing() -> None:
    t = table()
    x = t.envelope(eps=0.3).vectorize()
    x.laplace(Identity(12), eps=0.2)
    history, ledger = t.history(), t.ledger()
    with pytest.raises(BudgetExceeded):
        x.laplace(Total(12), eps=0.2)
    assert t.history() == history and t.ledger() == ledger
    x.laplace(Total(12), eps=0.1)  # what is left of the envelope
    assert t.budget.spent == pytest.approx(0.3)


def test_an_envelope_beyond_the_budget_is_refused_whole() -> None:
    t = table(epsilon=1.0)
    t.vectorize().laplace(Identity(12), eps=0.7)
    x = t.envelope(eps=0.5).vectorize()
    history, ledger = t.history(), t.ledger()
    with pytest.raises(BudgetExceeded):
        x.laplace(Identity(12), eps=0.1)  # the first request charges the envelope: refused
    assert t.history() == history and t.ledger() == ledger
    assert t.budget.spent == pytest.approx(0.7)
    t.envelope(eps=0.3).vectorize().laplace(Identity(12), eps=0.3)
    assert t.budget.spent == pytest.approx(1.0)


def test_a_first_request_beyond_the_envelope_charges_nothing() -> None:
    t = table()
    x = t.envelope(eps=0.2).vectorize()
    with pytest.raises(BudgetExceeded):
        x.laplace(Identity(12), eps=0.3)
    assert t.budget.spent == 0 and t.history() == ()


def test_a_bad_request_id_at_the_first_request_charges_no_envelope() -> None:
    t = table()
    x = t.envelope(eps=0.5).vectorize()
    with pytest.raises(ValueError, match="request_id"):
        x.port.submit(port.VectorLaplace(x.node, Identity(12), 0.1, request_id="x" * 300))
    assert t.budget.spent == 0 and t.history() == ()


def test_refusals_on_public_facts_before_the_first_request_spend_nothing() -> None:
    t = table()
    x = t.envelope(eps=0.5).vectorize()
    with pytest.raises((ValueError, TypeError)):
        x.laplace(Identity(5), eps=0.1)  # the wrong shape: refused before any charge
    assert t.budget.spent == 0


def test_parallel_composition_inside_an_envelope() -> None:
    t = table()
    parts = t.envelope(eps=0.4).split_by_partition("a")
    for part in parts:  # disjoint rows: each part may spend the whole envelope
        part.vectorize().laplace(Identity(12), eps=0.4)
    assert t.budget.spent == pytest.approx(0.4)
    with pytest.raises(BudgetExceeded):
        parts[0].vectorize().laplace(Identity(12), eps=0.1)


def test_nested_envelopes_and_stabilities() -> None:
    t = table()
    outer = t.envelope(eps=0.6)
    inner = outer.group_by(["a"]).envelope(eps=0.2)  # a 2-stable table: 0.4 of the outer
    inner.vectorize().laplace(Identity(4), eps=0.2)
    assert t.budget.spent == pytest.approx(0.6)  # the outer, at its first request
    outer.vectorize().laplace(Identity(12), eps=0.2)  # 0.4 + 0.2 = the outer's 0.6
    with pytest.raises(BudgetExceeded):
        outer.vectorize().laplace(Identity(12), eps=0.01)
    assert t.budget.spent == pytest.approx(0.6)


def test_an_envelope_on_a_vector_and_under_zcdp() -> None:
    t = ektelo.protect(np.arange(12.0), epsilon=1.0, delta=1e-6, seed=0)
    assert isinstance(t, ProtectedVector)
    e = t.envelope(rho=0.001)
    e.gaussian(Identity(12), rho=0.0005)
    e.gaussian(Identity(12), rho=0.0005)
    assert t.budget.spent == pytest.approx(0.001)
    assert t.ledger()[0].spent == Fraction(0.001)


def test_bad_budgets_are_refused_at_once() -> None:
    t = table()
    with pytest.raises(ValueError):
        t.envelope(eps=-1.0)
    with pytest.raises(ValueError, match="pure ε"):
        t.envelope(rho=0.1)
    with pytest.raises(TypeError):
        t.envelope()
    assert t.budget.spent == 0 and len(t.ledger()) == 1


def test_a_durable_ledger_records_one_reservation_per_envelope(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "ledger.sqlite"
    t = table(epsilon=1.0, ledger=str(path), dataset="d")
    x = t.envelope(eps=0.5).vectorize()
    for _ in range(4):
        x.laplace(Identity(12), eps=0.125)
    again = table(epsilon=1.0, ledger=str(path), dataset="d")  # another session: the same root
    assert again.budget.spent == pytest.approx(0.5)
    with pytest.raises(BudgetExceeded):
        again.envelope(eps=0.6).vectorize().laplace(Total(12), eps=0.1)
    assert again.budget.spent == pytest.approx(0.5)
