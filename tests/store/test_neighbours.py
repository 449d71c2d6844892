"""Each store keeps the neighbouring relation a dataset was created with
(issue #37): per row, or per privacy unit; a session stating another one is
refused before anything is recorded — on SQLite and PostgreSQL alike."""

from __future__ import annotations

from fractions import Fraction

import pytest

from ektelo.ledger_store import open_store


def test_a_dataset_keeps_its_relation(store_url: str) -> None:
    store = open_store(store_url)
    store.ensure_dataset("visits", "epsilon", Fraction(1), None, "unit:person")
    store.ensure_dataset("visits", "epsilon", Fraction(1), None, "unit:person")  # the same
    for other in ("row", "unit:household"):
        with pytest.raises(ValueError, match="neighbouring relation never changes"):
            store.ensure_dataset("visits", "epsilon", Fraction(1), None, other)
    store.ensure_dataset("rows", "epsilon", Fraction(1), None)  # the default: per row
    with pytest.raises(ValueError, match="per row"):
        store.ensure_dataset("rows", "epsilon", Fraction(1), None, "unit:person")
    assert sorted(r.name for r in store.datasets()) == ["rows", "visits"]
    assert store.verify_audit().ok
