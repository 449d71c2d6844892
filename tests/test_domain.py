"""Domains: hand-written JSON, encoding of DataFrames/CSV, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ektelo.domain import Attribute, Domain

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
ADULT = DATA / "adult"
CREDIT = DATA / "credit"
needs_data = pytest.mark.skipif(
    not (ADULT / "adult.csv").exists() or not (CREDIT / "credit_default.csv").exists(),
    reason="shared data directory ../shared/data is missing",
)

CREDIT_DOMAIN = {
    "X3": {"values": list(range(7))},
    "X4": {"values": list(range(4))},
    "X5": {"values": [*range(21, 76), 79]},
    "X6": {"values": list(range(-2, 9))},
    "Y": 2,
}


def small() -> Domain:
    return Domain.from_json(
        {"age": 85, "sex": {"values": ["F", "M"]}, "salary": {"bins": [0, 10000, 20000, 50000]}}
    )


def test_from_json_forms(tmp_path):
    d = small()
    assert d.names == ("age", "sex", "salary")
    assert d.shape == (85, 2, 3)
    assert d.size == 85 * 2 * 3
    assert d["sex"].values == ("F", "M")
    assert d["salary"].bins == (0.0, 10000.0, 20000.0, 50000.0)
    path = tmp_path / "d.json"
    path.write_text(json.dumps(d.to_dict()))
    assert Domain.from_json(path) == d
    assert Domain.from_json(str(path)) == d
    assert Domain.from_json(d.to_json()) == d
    assert Domain.from_json({"a": {"size": 3}}).shape == (3,)
    assert d.project(["salary", "age"]).names == ("salary", "age")


@pytest.mark.parametrize(
    "spec, error",
    [
        ({"a": 0}, ValueError),
        ({"a": -3}, ValueError),
        ({"a": True}, TypeError),
        ({"a": "5"}, TypeError),
        ({"a": {"values": ["x", "x"]}}, ValueError),
        ({"a": {"bins": [0, 0, 1]}}, ValueError),
        ({"a": {"bins": [0, float("nan")]}}, ValueError),
        ({"a": {"values": [1], "bins": [0, 1]}}, ValueError),
        ({"a": {"size": 3, "values": [1, 2]}}, ValueError),
        ({"a": {"colour": 3}}, ValueError),
        ({}, ValueError),
    ],
)
def test_bad_specs(spec, error):
    with pytest.raises(error):
        Domain.from_json(spec)


def test_duplicate_names():
    with pytest.raises(ValueError, match="duplicate"):
        Domain([Attribute("a", 2), Attribute("a", 3)])


def test_encode_all_kinds():
    d = small()
    frame = pd.DataFrame(
        {"age": [0, 84, 30], "sex": ["M", "F", "M"], "salary": [0, 19999.5, 49999]}
    )
    codes = d.encode(frame)
    assert codes.dtype == np.int64
    np.testing.assert_array_equal(codes, [[0, 1, 0], [84, 0, 1], [30, 1, 2]])


@pytest.mark.parametrize(
    "column, value, needle",
    [
        ("age", 85, "'age'.*85"),
        ("age", -1, "'age'.*-1"),
        ("age", 2.5, "'age'.*2.5"),
        ("age", np.nan, "'age'.*nan"),
        ("sex", "X", "'sex'.*'X'"),
        ("salary", 50000, "'salary'.*50000"),
        ("salary", -0.5, "'salary'.*-0.5"),
    ],
)
def test_value_outside_domain_named(column, value, needle):
    d = small()
    frame = pd.DataFrame({"age": [1, 2], "sex": ["M", "F"], "salary": [5, 6]}).astype(object)
    frame.loc[1, column] = value
    with pytest.raises(ValueError, match=needle):
        d.encode(frame)


def test_missing_and_unknown_columns():
    d = small()
    frame = pd.DataFrame({"age": [1], "sex": ["M"]})
    with pytest.raises(ValueError, match=r"missing column.*salary"):
        d.encode(frame)
    frame["salary"] = [1]
    frame["zip"] = [1]
    with pytest.raises(ValueError, match=r"unknown column.*zip"):
        d.encode(frame)
    assert d.encode(frame, ignore_extra=True).shape == (1, 3)
    with pytest.raises(TypeError):
        d.encode(frame.to_numpy())


def test_code_of_errors():
    d = small()
    assert d["sex"].code_of("M") == 1
    assert d["salary"].code_of(15000) == 1
    with pytest.raises(ValueError, match="'sex'"):
        d["sex"].code_of("Z")


@needs_data
def test_adult_domain_loads_and_encodes():
    d = Domain.from_json(ADULT / "adult-domain.json")
    assert len(d) == 14 and d["age"].size == 85 and d["hours-per-week"].size == 99
    frame = d.read_csv(ADULT / "adult.csv")
    codes = d.encode(frame)
    assert codes.shape == (48842, 14)
    np.testing.assert_array_equal(codes, frame.to_numpy())


@needs_data
def test_credit_hand_written_domain():
    d = Domain.from_json(CREDIT_DOMAIN)
    assert d.shape == (7, 4, 56, 11, 2) and d.size == 2 * 17248
    with pytest.raises(ValueError, match="unknown column"):
        d.read_csv(CREDIT / "credit_default.csv")
    frame = d.read_csv(CREDIT / "credit_default.csv", ignore_extra=True)
    codes = d.encode(frame)
    assert codes.shape == (30000, 5)
    assert codes[:, 2].max() == 55  # age 79 is the last label
    np.testing.assert_array_equal(codes[:, 3], frame["X6"].to_numpy() + 2)
    # A domain that forgets a value is a clear error, not a silent drop.
    short = dict(CREDIT_DOMAIN, X5={"values": list(range(21, 76))})
    with pytest.raises(ValueError, match=r"'X5'.*79"):
        Domain.from_json(short).encode(frame)
    # Binned age works too: [21, 30), [30, 40), ..., [70, 80).
    binned = Domain.from_json(dict(CREDIT_DOMAIN, X5={"bins": [21, 30, 40, 50, 60, 70, 80]}))
    ages = binned.encode(frame)[:, 2]
    np.testing.assert_array_equal(ages, np.searchsorted([30, 40, 50, 60, 70], frame["X5"], "right"))
