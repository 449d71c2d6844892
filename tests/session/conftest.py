"""Fixtures shared by the session tests."""

from __future__ import annotations

import pytest

from ektelo.port import ProtectedTable


@pytest.fixture
def vectorized(monkeypatch):
    """The attribute lists every vectorize call asks for (the wide-table
    tests check that no plan vectorizes more than its cliques)."""
    seen: list[list[str]] = []
    original = ProtectedTable.vectorize

    def spy(self, attrs, *args, **kwargs):
        seen.append(list(attrs))
        return original(self, attrs, *args, **kwargs)

    monkeypatch.setattr(ProtectedTable, "vectorize", spy)
    return seen
