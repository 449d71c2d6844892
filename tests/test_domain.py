"""Domains: hand-written JSON, encoding of DataFrames/CSV, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ektelo.domain import SHOWN_BAD_VALUES, Attribute, Domain, DomainValueError

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
    "column, value, kind, shown",
    [
        ("age", 85, "values outside the domain (integer codes 0..84; a size gives codes", "85"),
        ("age", -1, "values outside the domain", "-1"),
        ("age", 2.5, "values outside the domain", "2.5"),
        ("age", np.nan, "missing values (NaN/blank)", "nan"),
        ("age", "", "missing values (NaN/blank)", "''"),
        ("sex", "X", "values not among the labels ['F', 'M']", "'X'"),
        ("sex", None, "missing values (NaN/blank)", "None"),
        ("salary", 50000, "values outside the domain (in [0, 50000) cut into 3 bins)", "50000"),
        ("salary", -0.5, "values outside the domain", "-0.5"),
    ],
)
def test_bad_value_named_by_column_and_kind_not_value(column, value, kind, shown):
    """The message names the column and the problem; the count, the value
    and its row appear only with the data holder's opt-in."""
    d = small()
    frame = pd.DataFrame({"age": [1, 2], "sex": ["M", "F"], "salary": [5, 6]}).astype(object)
    frame.loc[1, column] = value
    with pytest.raises(DomainValueError) as err:
        d.encode(frame)
    message = str(err.value)
    assert message.startswith(f"column {column!r}: {kind}")
    assert "row" not in message and f"= {shown}" not in message and "1 " not in message
    assert "show_bad_values=True" in message  # how to see them
    with pytest.raises(DomainValueError) as err:
        d.encode(frame, show_bad_values=True)
    counted = kind.replace("values", "value", 1)
    assert str(err.value).startswith(f"column {column!r}: 1 {counted}")
    assert f"row 1 = {shown}" in str(err.value)


def _private_table(rows: int = 1000) -> tuple[Domain, pd.DataFrame]:
    """A table with three distinctive out-of-domain values in 'affairs'."""
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {"affairs": rng.integers(0, 61, rows).astype(float), "sex": rng.choice(["F", "M"], rows)}
    )
    frame.loc[[749, 750, 998], "affairs"] = [57.5999908, 61.0, -3.25]
    frame.loc[[10, 20], "sex"] = ["X", "male"]
    return Domain.from_json({"affairs": 61, "sex": {"values": ["F", "M"]}}), frame


def test_message_carries_no_private_value():
    """No value, row or count: the message is the same for a neighbouring
    table with one more bad row (the kernel's rule, DESIGN.md)."""
    d, frame = _private_table()
    with pytest.raises(ValueError) as err:
        d.encode(frame)
    message = str(err.value)
    assert message == (
        "column 'affairs': values outside the domain (integer codes 0..60; a size gives codes "
        'from 0: write other values as {"values": [...]} or {"range": [lo, hi]}); '
        "on_invalid='drop' or 'clamp' cleans them; show_bad_values=True lists them"
    )
    for private in ("57.59", "61.0", "-3.25", "749", "750", "998", "3"):
        assert private not in message
    neighbour = pd.concat([frame, pd.DataFrame({"affairs": [99.5], "sex": ["F"]})])
    with pytest.raises(ValueError) as err:
        d.encode(neighbour)
    assert str(err.value) == message
    # the labelled column alone: named, not counted or shown
    with pytest.raises(ValueError) as err:
        d.encode(frame.assign(affairs=1.0))
    message = str(err.value)
    assert message.startswith("column 'sex': values not among the labels ['F', 'M'];")
    assert "'X'" not in message and "male" not in message and "row" not in message
    assert "2" not in message


def test_show_bad_values_counts_and_lists_on_request():
    d, frame = _private_table()
    with pytest.raises(DomainValueError) as err:
        d.encode(frame, show_bad_values=True)
    message = str(err.value)
    assert message.startswith(
        "column 'affairs': 3 values outside the domain (integer codes 0..60; a size"
    )
    assert "row 749 = 57.5999908" in message and "row 750 = 61.0" in message
    assert "row 998 = -3.25" in message
    assert err.value.column == "affairs" and "57.59" not in err.value.summary
    # at most SHOWN_BAD_VALUES of them, and the total
    many = frame.assign(affairs=np.arange(len(frame)) + 0.5)
    with pytest.raises(DomainValueError) as err:
        d.encode(many, show_bad_values=True)
    message = str(err.value)
    assert "1000 values outside the domain" in message
    assert message.count("row ") == SHOWN_BAD_VALUES
    assert f"(first {SHOWN_BAD_VALUES} of 1000)" in message
    assert "row 9 = 9.5" in message and "row 10 =" not in message


def test_missing_values_named_apart():
    d, frame = _private_table()
    frame = frame.assign(affairs=1.0)
    frame.loc[[3, 4], "sex"] = [None, ""]
    frame.loc[5, "affairs"] = np.nan
    with pytest.raises(DomainValueError, match=r"^column 'affairs': missing values \(NaN/bl"):
        d.encode(frame)
    frame.loc[5, "affairs"] = 1.0
    with pytest.raises(DomainValueError) as err:
        d.encode(frame)
    assert str(err.value).startswith(
        "column 'sex': missing values (NaN/blank), values not among the labels ['F', 'M']"
    )
    with pytest.raises(DomainValueError) as err:
        d.encode(frame, show_bad_values=True)
    assert str(err.value).startswith(
        "column 'sex': 2 missing values (NaN/blank), 2 values not among the labels ['F', 'M']"
    )


@pytest.mark.parametrize(
    "spec",
    [85, {"bins": [0, 1, 2, 3]}, {"values": [0, 1]}, {"values": ["no", "yes"]}],
    ids=["codes", "bins", "int-labels", "str-labels"],
)
@pytest.mark.parametrize("dtype", [bool, object, "boolean"])
def test_booleans_are_not_codes(spec, dtype):
    """True/False used to be read as 1/0 (or as the labels 1/0)."""
    d = Domain.from_json({"flag": spec})
    frame = pd.DataFrame({"flag": pd.Series([True, False, True], dtype=dtype)})
    with pytest.raises(DomainValueError) as err:
        d.encode(frame)
    assert str(err.value).startswith("column 'flag': boolean values (True/False")
    mixed = pd.DataFrame({"flag": pd.Series([1, np.True_, 0], dtype=object)})
    with pytest.raises(DomainValueError, match=r"^column 'flag': 1 boolean value \(True/False"):
        d.encode(mixed, show_bad_values=True)
    with pytest.raises(ValueError, match="'flag'"):
        d["flag"].code_of(True)


def test_boolean_labels_take_booleans_only():
    d = Domain.from_json({"flag": {"values": [False, True]}})
    frame = pd.DataFrame({"flag": [True, False, np.True_]})
    np.testing.assert_array_equal(d.encode(frame)[:, 0], [1, 0, 1])
    np.testing.assert_array_equal(
        d.encode(frame.astype(object).astype("category"))[:, 0], [1, 0, 1]
    )
    assert d["flag"].code_of(True) == 1
    with pytest.raises(DomainValueError, match=r": values not among the labels \[False, True\]"):
        d.encode(pd.DataFrame({"flag": [1, 0, True]}))
    with pytest.raises(ValueError):
        d["flag"].code_of(1)


def test_label_lookup_keeps_its_semantics():
    d = Domain.from_json({"v": {"values": [None, "x", [1, 2], 3]}})
    frame = pd.DataFrame({"v": pd.Series([None, "x", (1, 2), 3.0, np.int64(3)], dtype=object)})
    np.testing.assert_array_equal(d.encode(frame)[:, 0], [0, 1, 2, 3, 3])
    unhashable = pd.DataFrame({"v": pd.Series([[1, 2], "x"], dtype=object)})
    with pytest.raises(DomainValueError, match="values not among the labels"):
        d.encode(unhashable)
    with pytest.raises(DomainValueError, match="missing values"):
        d.encode(pd.DataFrame({"v": [np.nan, "x"]}))


def test_csv_with_a_repeated_column_is_refused(tmp_path):
    d = small()
    path = tmp_path / "dup.csv"
    path.write_text("age,sex,salary,age\n30,M,100,31\n")
    with pytest.raises(ValueError, match=r"repeats column name\(s\) \['age'\]"):
        d.read_csv(path)
    with pytest.raises(ValueError, match=r"\['zip'\]"):  # an extra column too
        (tmp_path / "dup2.csv").write_text("age,sex,salary,zip,zip\n30,M,100,1,2\n")
        d.read_csv(tmp_path / "dup2.csv", ignore_extra=True)
    (tmp_path / "ok.csv").write_text("age,sex,salary,age.1\n30,M,100,31\n")
    assert d.read_csv(tmp_path / "ok.csv", ignore_extra=True).shape == (1, 3)


def test_csv_bad_values_shown_only_on_request(tmp_path):
    d = small()
    path = tmp_path / "bad.csv"
    path.write_text("age,sex,salary\n30,M,100\n57.5999908,F,100\n31,,100\n")
    with pytest.raises(DomainValueError) as err:
        d.read_csv(path)
    assert "57.59" not in str(err.value) and ": values outside the domain" in str(err.value)
    with pytest.raises(DomainValueError, match=r"row 1 = 57\.5999908"):
        d.read_csv(path, show_bad_values=True)


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
    with pytest.raises(ValueError, match=r"'X5': values not among the labels"):
        Domain.from_json(short).encode(frame)
    # Binned age works too: [21, 30), [30, 40), ..., [70, 80).
    binned = Domain.from_json(dict(CREDIT_DOMAIN, X5={"bins": [21, 30, 40, 50, 60, 70, 80]}))
    ages = binned.encode(frame)[:, 2]
    np.testing.assert_array_equal(ages, np.searchsorted([30, 40, 50, 60, 70], frame["X5"], "right"))


# -- issue #27: domains made easy ---------------------------------------------------------
def _schema() -> dict:
    import importlib.resources
    import json

    return json.loads(importlib.resources.files("ektelo").joinpath("domain.schema.json")
                      .read_text(encoding="utf-8"))


def _readme_domain() -> dict:
    import json
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    return json.loads(re.search(r"```json\n(.*?)```", readme, re.S).group(1))


def test_schema_ships_and_accepts_what_the_parser_accepts():
    jsonschema = pytest.importorskip("jsonschema")
    schema = _schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    good = [_readme_domain(), {"a": 3, "b": {"size": 2}, "c": {"range": [0.0, 1.0], "width": 0.1}},
            {"a": 3, "city": {"open": True}}]
    for spec in good:
        jsonschema.validate(spec, schema)
        Domain.from_dict(spec)
    for bad in ({"a": 0}, {"a": {"values": [1, 1]}}, {"a": {"bins": [1]}},
                {"a": {"range": [0, 1], "bins": [0, 1]}}, {"a": "5"},
                {"a": 3, "b": {"open": True, "size": 2}}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
        with pytest.raises((ValueError, TypeError)):
            Domain.from_dict(bad)


def test_range_shorthand():
    d = Domain.from_dict(_readme_domain())
    assert d["age"].values == tuple(range(17, 91))  # integers one by one: labels
    income = d["income"]
    assert income.bins[0] == 0 and income.bins[-1] == 210000 and income.size == 21
    tenth = Attribute.from_spec("r", {"range": [0, 1], "width": 0.1})
    assert tenth.bins[3] == 0.3 and tenth.size == 11  # exact decimal steps; 1 has a bin
    with pytest.raises(ValueError, match="'range' must be"):
        Attribute.from_spec("r", {"range": [0], "width": 1})
    with pytest.raises(ValueError, match="lo ≤ hi"):
        Attribute.from_spec("r", {"range": [5, 1], "width": 1})


def test_numeric_labels_from_text_and_binned_bounds_at_edges():
    a = Attribute.from_spec("h", {"values": [17.5, 22, 27]})
    assert a.code_of("27") == 2 and a.code_of(" 17.5") == 0
    b = Attribute.from_spec("pay", {"bins": [0, 10, 20, 50]})
    assert b.range_codes(10, 50) == (1, 2)  # half-open [10, 50): bins 1 and 2
    with pytest.raises(ValueError, match=r"upper bound 49 is not a bin edge \(nearest edges: "
                                         r"20 and 50\)"):
        b.range_codes(0, 49)
    with pytest.raises(ValueError, match="empty"):
        b.range_codes(20, 20)


def test_clean_drop_and_clamp_are_row_by_row():
    d = Domain.from_dict({"age": {"range": [18, 27], "width": 1}, "pay": {"bins": [0, 10, 20]},
                          "sex": {"values": ["F", "M"]}})
    frame = pd.DataFrame({"age": [30, 20, 17], "pay": [5, -3, 25.0], "sex": ["F", "M", "F"]})
    dropped = d.clean(frame, "drop")
    assert dropped.to_dict("list") == {"age": [], "pay": [], "sex": []}
    clamped = d.clean(frame, "clamp")
    assert list(clamped["age"]) == [27, 20, 18] and list(clamped["pay"]) == [5, 0, 10]
    d.encode(clamped)  # everything valid now
    # one more bad row changes the cleaned table by at most one row (1-stable)
    more = pd.concat([frame, frame.iloc[[0]]], ignore_index=True)
    assert len(d.clean(more, "clamp")) == len(clamped) + 1
    with pytest.raises(DomainValueError, match="cannot be clamped"):
        d.clean(frame.assign(sex=["F", "X", "M"]), "clamp")
    with pytest.raises(ValueError, match="on_invalid must be"):
        d.clean(frame, "fix")


def test_domain_template_is_valid_and_says_it_is_private():
    from ektelo.domain_template import domain_template

    frame = pd.DataFrame({"n": [1, 5, 3], "t": ["x", "y", None], "f": [0.5, 1000.0, 33.3],
                          "many": ["a", "b", "c"]})
    spec, notes = domain_template(frame, max_labels=2, max_categories=2)
    assert "private" in spec["$comment"] and notes == ["many: 3 distinct values (> 2); left out"]
    assert spec["n"] == {"range": [0, 9], "width": 1}  # bounds on a grid of 10, not 1 and 5
    assert spec["t"] == {"values": ["x", "y"]}
    assert spec["f"]["width"] == 50 and spec["f"]["range"][0] == 0
    d = Domain.from_dict(spec)
    d.encode(frame.drop(columns="many").dropna())
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(spec, _schema())


def test_a_template_read_from_the_data_is_refused_until_its_note_is_deleted(tmp_path):
    """Issue #41: Python refuses `domain init`'s template as the CLI does, as
    a file, a JSON string or a dict; without the note it is a domain."""
    from ektelo.domain_template import domain_template
    from ektelo.loading import load_domain

    spec, _ = domain_template(pd.DataFrame({"n": [1, 2, 3], "t": ["x", "y", "x"]}))
    path = tmp_path / "d.json"
    path.write_text(json.dumps(spec))
    for source in (path, str(path), json.dumps(spec), spec):
        with pytest.raises(ValueError, match=r"template read from the private data.*delete"):
            load_domain(source)
    del spec["$comment"]
    assert load_domain(spec).names == ("n", "t")
    assert load_domain({"$comment": "bounds from the codebook", "n": 3}).names == ("n",)
