"""Stateful property tests of the budget invariants (hypothesis state machines).

A literal, recursive transcription of Algorithm 2 (§4.4) is the reference
model; the ledger (iterative, check-then-commit) and the kernel behind real
handles must agree with it after every step, and the proof's invariants must
hold throughout:
  * B(root) ≤ ε_total·(1 + slack);
  * a refused request changes nothing;
  * a partition variable's B is the max of its children's;
  * any other variable's B is its direct spend plus Σ_c St(c)·B(c)
    (stability multiplies).
The zCDP variant runs the same machines on a ρ ledger: pure-ε requests count
ε²/2, ρ requests count ρ, and stability enters squared (Σ_c St(c)²·B(c)).
"""

from __future__ import annotations

import sys
from fractions import Fraction

import numpy as np
from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

import ektelo
from ektelo import BudgetExceeded
from ektelo.budget import ZCDP
from ektelo.kernel.ledger import SLACK, Ledger
from ektelo.matrix import Dense, Identity, Partition

F = Fraction
TOTAL = 1.0
EPS = st.sampled_from([0.05, 0.1, 0.25, 1 / 3, 0.5, 0.7])


class Model:
    """Algorithm 2 exactly as printed: recursive, committing on the way back;
    `power` 1 for ε, 2 for ρ (a c-stable transformation costs c²·ρ)."""

    def __init__(self, total: float, power: int = 1):
        self.power = power
        self.limit = F(total) * (1 + SLACK)
        self.parent: dict[int, int | None] = {0: None}
        self.kind = {0: "v"}
        self.st = {0: F(1)}
        self.B = {0: F(0)}
        self.direct = {0: F(0)}

    def add(self, node: int, parent: int, kind: str, stability: Fraction) -> None:
        self.parent[node], self.kind[node], self.st[node] = parent, kind, stability
        self.B[node] = self.direct[node] = F(0)

    def _request(self, sv: int, sigma: Fraction, child: int | None) -> bool:
        up = self.parent[sv]
        if up is None:
            if self.B[sv] + sigma > self.limit:
                return False
            self.B[sv] += sigma
            return True
        if self.kind[sv] == "p":
            assert child is not None
            r = max(self.B[child] + sigma - self.B[sv], F(0))
            if not self._request(up, r, sv):
                return False
            self.B[sv] += r
            return True
        if not self._request(up, self.st[sv] ** self.power * sigma, sv):
            return False
        self.B[sv] += sigma
        return True

    def request(self, sv: int, eps: float | None = None, rho: float | None = None) -> bool:
        amount = F(rho) if rho is not None else (F(eps) if self.power == 1 else F(eps) ** 2 / 2)
        ok = self._request(sv, amount, None)
        if ok:
            self.direct[sv] += amount
        return ok

    def check_invariants(self) -> None:
        assert self.B[0] <= self.limit
        for sv in self.B:
            children = [c for c, p in self.parent.items() if p == sv]
            if self.kind[sv] == "p":
                assert self.B[sv] == max((self.B[c] for c in children), default=F(0))
            else:
                assert self.B[sv] == self.direct[sv] + sum(
                    self.st[c] ** self.power * self.B[c] for c in children
                )


class LedgerMachine(RuleBasedStateMachine):
    """The bare ledger against the model, on random graphs."""

    nodes = Bundle("nodes")

    def __init__(self):
        super().__init__()
        self.ledger = Ledger(TOTAL)
        self.model = Model(TOTAL)

    @initialize(target=nodes)
    def root(self):
        return self.ledger.add_root("vector", "protect")

    @rule(target=nodes, parent=nodes, stability=st.sampled_from([1, 2, 3, 0.5, 1.5, 0.3, 0]))
    def derive(self, parent, stability):
        node = self.ledger.add_child(parent, "vector", stability, "transform")
        self.model.add(node, parent, "v", F(stability))
        return node

    @rule(target=nodes, parent=nodes, k=st.integers(1, 3))
    def split(self, parent, k):
        part = self.ledger.add_child(parent, "partition", 1, "split")
        self.model.add(part, parent, "p", F(1))
        kids = []
        for _ in range(k):
            kid = self.ledger.add_child(part, "vector", 1, "child")
            self.model.add(kid, part, "v", F(1))
            kids.append(kid)
        return multiple(*kids)

    @rule(node=nodes, eps=EPS)
    def request(self, node, eps):
        self._request(node, eps=eps)

    def _request(self, node, **amount):
        before = self.ledger.snapshot()
        charge = self.ledger.amount(**amount)
        if self.model.request(node, **amount):
            self.ledger.request(node, charge)
        else:
            try:
                self.ledger.request(node, charge)
            except BudgetExceeded:
                pass
            else:  # pragma: no cover - a failure
                raise AssertionError("the ledger admitted a request the model refused")
            assert self.ledger.snapshot() == before

    @invariant()
    def agrees_with_model(self):
        assert {s.node: s.spent for s in self.ledger.snapshot()} == self.model.B
        self.model.check_invariants()
        assert self.ledger.spent <= self.ledger.total * (1 + SLACK)


class ZcdpLedgerMachine(LedgerMachine):
    """The ledger of a ρ budget: ε requests count ε²/2, stability squared."""

    def __init__(self):
        RuleBasedStateMachine.__init__(self)
        self.ledger = Ledger(ZCDP(TOTAL / 8))
        self.model = Model(TOTAL / 8, power=2)

    @rule(node=LedgerMachine.nodes, rho=st.sampled_from([0.001, 0.005, 0.01, 1 / 30]))
    def request_rho(self, node, rho):
        self._request(node, rho=rho)


class KernelMachine(RuleBasedStateMachine):
    """Real handles, real data and noise; the kernel's ledger against the model."""

    vectors = Bundle("vectors")

    def __init__(self):
        super().__init__()
        self.root = ektelo.protect(np.arange(8, dtype=float), epsilon=TOTAL, seed=0)
        self.model = Model(TOTAL)

    def _stability(self, handle) -> Fraction:
        return handle.ledger()[handle.node].stability

    @initialize(target=vectors)
    def start(self):
        return self.root

    @rule(target=vectors, v=vectors, c=st.sampled_from([1.0, 2.0, 3.0, 0.5, 1.5]))
    def transform(self, v, c):
        w = v.transform(Dense(c * np.eye(v.size)))
        s = self._stability(w)
        assert s >= F(c)  # never below the true column norm
        self.model.add(w.node, v.node, "v", s)
        return w

    @rule(target=vectors, v=vectors)
    def reduce(self, v):
        assume(v.size >= 2)
        w = v.reduce_by_partition(Partition(np.arange(v.size) // 2))
        self.model.add(w.node, v.node, "v", self._stability(w))
        return w

    @rule(target=vectors, v=vectors)
    def split(self, v):
        assume(v.size >= 2)
        kids = v.split_by_partition(Partition(np.arange(v.size) % 2))
        part = kids[0].ledger()[kids[0].node].parent
        self.model.add(part, v.node, "p", F(1))
        for k in kids:
            self.model.add(k.node, part, "v", F(1))
        return multiple(*kids)

    @rule(v=vectors, eps=EPS)
    def measure(self, v, eps):
        before, history = self.root.ledger(), self.root.history()
        if self.model.request(v.node, eps):
            m = v.laplace(Identity(v.size), eps=eps)
            assert m.epsilon == eps and m.root_id == self.root.root_id
            assert self.root.history()[-1].eps == eps
        else:
            try:
                v.laplace(Identity(v.size), eps=eps)
            except BudgetExceeded:
                pass
            else:  # pragma: no cover - a failure
                raise AssertionError("the kernel admitted a request the model refused")
            assert self.root.ledger() == before
            assert self.root.history() == history

    @invariant()
    def agrees_with_model(self):
        snapshot = self.root.ledger()
        assert {s.node: s.spent for s in snapshot} == self.model.B
        self.model.check_invariants()
        budget = self.root.budget
        assert budget.spent <= budget.total * (1 + 1e-9)


# Under `python -O` (test_optimize.py) the machines run a shorter search.
_settings = settings(
    max_examples=15 if sys.flags.optimize else 60,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)
TestLedgerMachine = LedgerMachine.TestCase
TestLedgerMachine.settings = _settings
TestZcdpLedgerMachine = ZcdpLedgerMachine.TestCase
TestZcdpLedgerMachine.settings = _settings
TestKernelMachine = KernelMachine.TestCase
TestKernelMachine.settings = _settings
