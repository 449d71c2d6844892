"""The durable ledger on both backends (SQLite, PostgreSQL): Algorithm 2's
semantics against the in-memory reference, the stored cap, quotas, idempotent
retries, refusals, the audit chain and the custodian's views."""

from __future__ import annotations

import sqlite3
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from ektelo.budget import ZCDP, PureDP
from ektelo.domain import Domain
from ektelo.kernel import BudgetExceeded, RequestConflict
from ektelo.kernel.ledger import Ledger
from ektelo.ledger_store import SQLiteStore, StoreError, attach, open_store
from ektelo.matrix import Identity, Total
from ektelo.port import protect
from ektelo.port import requests as port

F = Fraction
EPS = 2.0**-6  # exact in binary: sums of it are exact


def laplace(x, eps=EPS, rid=None, M=None):
    M = Identity(x.shape[0] if hasattr(x, "shape") else 4) if M is None else M
    return x.port.submit(port.VectorLaplace(x.node, M, eps, request_id=rid))


def vec(url, total=1.0, **kw):
    return protect(np.arange(4), epsilon=total, ledger=url, dataset="d", **kw)


def random_program(rng, led, steps):
    """Grow a random graph (stabilities, partitions) on `led` and return the
    requests to make: (node, amount) in the ledger's unit."""
    nodes = [led.add_root("vector", "protect")]
    requests = []
    for _ in range(steps):
        parent = nodes[int(rng.integers(len(nodes)))]
        roll = rng.random()
        if roll < 0.25:
            part = led.add_child(parent, "partition", 1, "split", str(len(nodes)))
            nodes += [led.add_child(part, "vector", 1, "child", str(i)) for i in range(3)]
        elif roll < 0.5:
            nodes.append(led.add_child(parent, "vector", int(rng.integers(1, 4)), "transform"))
        else:
            requests.append((parent, F(int(rng.integers(1, 9)), 64)))
    return requests


@pytest.mark.parametrize("budget", [PureDP(1.0), ZCDP(0.5)], ids=["epsilon", "rho"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_algorithm2_matches_the_in_memory_reference(store_url, budget, seed):
    """Same graph, same requests: the same grants, refusals and B(sv) as the
    in-memory Ledger (tests/kernel/test_budget.py's golden values hold there)."""
    ref, durable = Ledger(budget), attach(store_url, "d", budget)
    program = random_program(np.random.default_rng(seed), ref, 40)
    random_program(np.random.default_rng(seed), durable, 40)
    assert program
    for node, amount in program:
        try:
            expected = ref.request(node, amount)
        except BudgetExceeded:
            with pytest.raises(BudgetExceeded):
                durable.reserve(node, amount, operation="laplace", request_id=None, content={})
            continue
        got = durable.reserve(node, amount, operation="laplace", request_id=None, content={})
        assert got.charged == expected
    assert [s.spent for s in durable.snapshot()] == [s.spent for s in ref.snapshot()]
    assert open_store(store_url).dataset("d").spent == ref.spent
    assert open_store(store_url).verify_audit().ok


def test_sessions_share_the_dataset_root_and_persist_their_nodes(store_url):
    x = vec(store_url)
    laplace(x)
    y = vec(store_url)  # a second session: same root
    z = y.transform(Identity(4) * 2)  # 2-stable: charges 2·ε at the root
    laplace(z)
    assert y.budget.spent == x.budget.spent == 3 * EPS
    assert [s.spent for s in y.ledger()] == [F(3 * EPS), F(EPS)]
    store = open_store(store_url)
    assert [(h.operation, h.amount, h.charge) for h in store.history("d")] == [
        ("laplace", F(EPS), F(EPS)), ("laplace", F(EPS), F(2 * EPS)),
    ]  # fmt: skip


def test_the_stored_cap_never_changes(store_url):
    vec(store_url, total=1.0)
    with pytest.raises(ValueError, match=r"stored budget epsilon=1\b"):
        vec(store_url, total=2.0)
    with pytest.raises(ValueError, match="stored budget epsilon=1"):
        protect(np.arange(4), rho=1.0, ledger=store_url, dataset="d")
    with pytest.raises(ValueError, match="stored budget epsilon=1"):
        protect(np.arange(4), epsilon=1.0, delta=1e-6, ledger=store_url, dataset="d")
    (record,) = open_store(store_url).datasets()
    assert (record.unit, record.total, record.spent) == ("epsilon", 1, 0)


def test_rho_budget_reports_the_implied_epsilon(store_url):
    x = protect(np.arange(4), epsilon=1.0, delta=1e-6, ledger=store_url, dataset="z")
    rho = ZCDP.from_approx(1.0, 1e-6)
    m = x.gaussian(Identity(4), rho=rho.rho / 4)
    assert m.rho == rho.rho / 4
    laplace(x, eps=0.1)  # pure ε on a zCDP ledger: ε²/2
    record = open_store(store_url).dataset("z")
    assert record.unit == "rho" and record.delta == 1e-6
    assert record.total == F(rho.rho)
    assert record.spent == F(rho.rho / 4) + F(0.1) ** 2 / 2
    assert record.epsilon == pytest.approx(ZCDP(float(record.spent)).epsilon(1e-6))
    assert record.total_epsilon == pytest.approx(1.0, rel=1e-6)


def test_retry_with_the_same_id_returns_the_stored_answer_without_a_charge(store_url):
    x = vec(store_url, seed=7)
    first = laplace(x, rid="q1")
    again = laplace(x, rid="q1")
    np.testing.assert_array_equal(first.answers, again.answers)
    assert x.budget.spent == EPS
    # from a new session (a new process after a crash) deriving the same source
    y = vec(store_url).transform(Identity(4) * 3)
    t = laplace(y, rid="q2")
    y2 = vec(store_url).transform(Identity(4) * 3)
    np.testing.assert_array_equal(laplace(y2, rid="q2").answers, t.answers)
    assert x.budget.spent == EPS + 3 * EPS
    assert x.history()[-1].replayed and x.history()[-1].charged_at_root == 0
    outcomes = [e.outcome for e in open_store(store_url).audit_log("d")]
    assert outcomes.count("replayed") == 2 and outcomes.count("granted") == 2


def test_same_id_with_other_content_is_refused_and_charges_nothing(store_url):
    x = vec(store_url)
    laplace(x, rid="q1")
    for other in (dict(eps=2 * EPS), dict(M=Total(4)), dict(eps=EPS, M=Identity(4) * 2)):
        with pytest.raises(RequestConflict, match="different request"):
            laplace(x, rid="q1", **other)
    y = vec(store_url).transform(Identity(4) * 2)  # another source, same id
    with pytest.raises(RequestConflict):
        laplace(y, rid="q1")
    assert x.budget.spent == EPS
    store = open_store(store_url)
    assert len(store.history("d")) == 1
    assert [e.outcome for e in store.audit_log("d")].count("conflict") == 4
    assert store.verify_audit().ok


def test_a_reservation_without_an_answer_stays_charged(store_url, monkeypatch):
    """A crash between reserve and release: the charge stands, and the id can
    never be answered afresh (a new draw would spend twice)."""
    crashed = open_store(store_url)
    monkeypatch.setattr(crashed, "release", lambda token, answer: None)  # dies before release
    laplace(protect(np.arange(4), epsilon=1.0, ledger=crashed, dataset="d"), rid="lost")
    x = vec(store_url)
    with pytest.raises(RequestConflict, match="no released answer"):
        laplace(x, rid="lost")
    (entry,) = open_store(store_url).history("d")
    assert (entry.status, entry.charge) == ("reserved", F(EPS))
    assert x.budget.spent == EPS


def test_a_refusal_changes_nothing_but_the_audit_log(store_url):
    x = vec(store_url, total=3 * EPS)
    laplace(x)
    laplace(x)
    before = open_store(store_url)
    state = (before.datasets(), before.history("d"), x.ledger())
    with pytest.raises(BudgetExceeded, match="dataset 'd'"):
        laplace(x, eps=2 * EPS)
    laplace(x)  # what is left still fits exactly
    with pytest.raises(BudgetExceeded):
        laplace(x)
    after = open_store(store_url)
    assert after.history("d")[:2] == state[1] and len(after.history("d")) == 3
    assert after.dataset("d").spent == 3 * EPS == after.dataset("d").total
    assert [e.outcome for e in after.audit_log("d")].count("refused") == 2


def test_analyst_quotas_sit_beneath_the_dataset_cap(store_url):
    vec(store_url, total=4 * EPS)
    store = open_store(store_url)
    store.add_analyst("d", "ann", quota=3 * EPS)
    store.add_analyst("d", "bob")
    with pytest.raises(ValueError, match="already has an analyst"):
        store.add_analyst("d", "ann", quota=1.0)
    with pytest.raises(ValueError, match="no analyst 'eve'"):
        vec(store_url, total=4 * EPS, analyst="eve")
    ann = vec(store_url, total=4 * EPS, analyst="ann")
    laplace(ann, eps=2 * EPS)
    with pytest.raises(BudgetExceeded, match="quota"):
        laplace(ann, eps=2 * EPS)
    bob = vec(store_url, total=4 * EPS, analyst="bob")
    laplace(bob, eps=2 * EPS)  # only the dataset cap limits bob
    with pytest.raises(BudgetExceeded, match="dataset 'd'"):
        laplace(ann, eps=EPS)  # within ann's quota, past the cap
    record = store.dataset("d")
    assert record.spent == 4 * EPS
    assert {a.name: (a.quota, a.spent) for a in record.analysts} == {
        "ann": (F(3 * EPS), F(2 * EPS)), "bob": (None, F(2 * EPS)),
    }  # fmt: skip
    assert {h.analyst for h in store.history("d")} == {"ann", "bob"}
    assert store.verify_audit().ok


def test_the_audit_chain_detects_edits(store_url):
    x = vec(store_url)
    for _ in range(3):
        laplace(x)
    store = open_store(store_url)
    report = store.verify_audit()
    assert report.ok and report.entries == 5  # created, attached, 3 granted
    log = store.audit_log("d")
    assert {e.outcome for e in log} == {"created", "attached", "granted"}
    assert all(e.spec_hash and len(e.spec_hash) == 64 for e in log if e.outcome == "granted")
    raw = _raw(store_url)
    raw("UPDATE ektelo_audit SET charge = '0' WHERE seq = 4")
    report = open_store(store_url).verify_audit()
    assert not report.ok and report.first_broken == ("d", 4)
    assert "does not match" in report.problems[0]


def test_verify_audit_checks_the_ledger_against_the_log(store_url):
    x = vec(store_url)
    laplace(x)
    _raw(store_url)("UPDATE ektelo_nodes SET spent = '0' WHERE parent IS NULL")
    report = open_store(store_url).verify_audit()
    assert not report.ok and "sum of its reservations" in " ".join(report.problems)


def test_tables_keep_their_derivations_and_partitions_charge_the_max(store_url):
    domain = Domain.from_json({"a": 3, "b": 2})
    df = pd.DataFrame({"a": [0, 1, 2, 2], "b": [0, 1, 1, 0]})
    t = protect(df, domain, epsilon=1.0, ledger=store_url, dataset="t")
    g = t.group_by(["a"]).vectorize()  # 2-stable
    g.laplace(Identity(g.size), eps=EPS)
    parts = t.split_by_partition("a")
    for i, part in enumerate(parts):  # parallel composition: the max of the parts
        part.vectorize().laplace(Identity(6), eps=EPS * (i + 1))
    t.noisy_count(eps=EPS)
    assert open_store(store_url).dataset("t").spent == 2 * EPS + 3 * EPS + EPS
    kinds = [s.kind for s in t.ledger()]
    assert kinds.count("partition") == 1 and kinds[0] == "table"


def test_release_failure_raises_after_the_charge_and_the_charge_stays(store_url, monkeypatch):
    """A database failure after the charge is the one raise after it: the
    charge stays, and the id is never answered afresh."""
    patched = open_store(store_url)

    def broken(token, answer):
        raise StoreError("disk full")

    monkeypatch.setattr(patched, "release", broken)
    x = protect(np.arange(4), epsilon=1.0, ledger=patched, dataset="d")  # an open store
    with pytest.raises(StoreError, match="disk full"):
        laplace(x, rid="r")
    store = open_store(store_url)
    assert store.dataset("d").spent == EPS
    with pytest.raises(RequestConflict, match="no released answer"):
        laplace(x, rid="r")
    assert store.dataset("d").spent == EPS
    assert [h.status for h in store.history("d")] == ["reserved"]


def test_open_store_and_protect_refuse_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="scheme"):
        open_store("mysql://x/y")
    with pytest.raises(ValueError, match="does not exist"):
        open_store(str(tmp_path / "no" / "ledger.db"))
    with pytest.raises(TypeError):
        open_store(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dataset="):
        protect(np.arange(4), epsilon=1.0, ledger=str(tmp_path / "l.db"))
    with pytest.raises(TypeError, match="ledger="):
        protect(np.arange(4), epsilon=1.0, dataset="d")
    with pytest.raises(ValueError, match="dataset name"):
        protect(np.arange(4), epsilon=1.0, ledger=str(tmp_path / "l.db"), dataset="")
    x = protect(np.arange(4), epsilon=1.0, ledger=str(tmp_path / "l.db"), dataset="d")
    with pytest.raises(ValueError, match="request_id"):
        laplace(x, rid="")
    with pytest.raises(TypeError, match="request_id"):
        laplace(x, rid=5)
    assert x.budget.spent == 0


def test_sqlite_runs_with_the_durability_settings(tmp_path):
    store = SQLiteStore(tmp_path / "l.db")
    conn = store._conn  # white-box: the settings are the point of this test
    assert conn.isolation_level is None
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    assert store.integrity_check() == "ok"


def test_the_in_memory_ledger_is_still_the_default_and_idempotent():
    x = protect(np.arange(4), epsilon=1.0, seed=3)
    a, b = laplace(x, rid="k"), laplace(x, rid="k")
    np.testing.assert_array_equal(a.answers, b.answers)
    assert x.budget.spent == EPS
    with pytest.raises(RequestConflict):
        laplace(x, eps=2 * EPS, rid="k")
    laplace(x)
    laplace(x)  # no id: fresh every time
    assert x.budget.spent == 3 * EPS


def _raw(url):
    """Run one statement on the store's database, behind its back (tampering)."""
    if url.startswith("postgresql://"):
        import psycopg

        def run(sql):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql)

        return run

    def run_sqlite(sql):
        conn = sqlite3.connect(url, isolation_level=None)
        conn.execute(sql)
        conn.close()

    return run_sqlite


def test_a_missing_postgres_skips_loudly_or_fails_when_required(monkeypatch):
    from tests.store import conftest

    monkeypatch.setattr(conftest, "REQUIRED", False)
    with pytest.raises(pytest.skip.Exception, match="POSTGRESQL LEDGER TESTS NOT RUN: no pg"):
        conftest.unavailable("no pg")
    monkeypatch.setattr(conftest, "REQUIRED", True)
    with pytest.raises(pytest.fail.Exception, match="EKTELO_REQUIRE_COMPONENTS=1"):
        conftest.unavailable("no pg")
