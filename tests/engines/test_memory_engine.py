"""The in-memory engine at the hardware's limit (issue #42): the smallest
code type, column by column; numbers encoded block by block with the same
refusals as the general path; `select` names columns without copying;
`vectorize` counts block by block — every count against np.bincount."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ektelo import Domain, col
from ektelo.domain import DomainValueError
from ektelo.engines import MemoryEngine, open_frame
from ektelo.engines import rows as tables

SIZES = {"a": 7, "b": 3, "c": 300, "d": 2}


def _frame(rng: np.random.Generator, rows: int, dtype: str = "int64") -> pd.DataFrame:
    return pd.DataFrame({k: rng.integers(0, s, rows).astype(dtype) for k, s in SIZES.items()})


def _histogram(frame: pd.DataFrame, names: list[str], domain: Domain) -> np.ndarray:
    shape = tuple(domain[n].size for n in names)
    flat = np.ravel_multi_index(tuple(frame[n].to_numpy() for n in names), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).astype(np.float64)


def test_the_code_matrix_is_the_smallest_type_column_by_column(rng) -> None:
    domain = Domain.from_dict(SIZES)
    assert domain.code_dtype() == np.uint16  # 300 codes
    assert Domain.from_dict({"a": 256, "b": 2}).code_dtype() == np.uint8
    assert Domain.from_dict({"a": 70_000}).code_dtype() == np.uint32
    frame = _frame(rng, 1000)
    table = open_frame(frame, domain)
    assert table.codes.dtype == np.uint16 and table.codes.flags.f_contiguous
    assert not table.codes.flags.writeable
    np.testing.assert_array_equal(table.codes, domain.encode(frame))  # int64, C order
    np.testing.assert_array_equal(MemoryEngine().codes(table), frame.to_numpy())
    with pytest.raises(ValueError, match="cannot hold"):
        domain.encode(frame, dtype=np.uint8)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float64", "float32"])
def test_numbers_are_encoded_as_the_general_path_does(dtype: str, rng) -> None:
    domain = Domain.from_dict({**SIZES, "e": {"bins": [0, 2.5, 10, 100]}})
    frame = _frame(rng, 5000, dtype).assign(e=rng.integers(0, 100, 5000).astype(dtype))
    fast = domain.encode(frame, dtype=domain.code_dtype(), order="F")
    general = np.column_stack(
        [a.encode(frame[a.name].astype(object)) for a in domain.attributes]
    )  # object columns never take the numeric blocks
    np.testing.assert_array_equal(fast, general)


BAD = [
    ("a", -1, "int64"),
    ("a", 7, "int64"),
    ("c", 300, "uint16"),
    ("a", 2.5, "float64"),
    ("a", np.nan, "float64"),
    ("a", np.inf, "float64"),
    ("e", 100, "int64"),
    ("e", -0.5, "float64"),
    ("e", np.nan, "float64"),
]


@pytest.mark.parametrize(("column", "value", "dtype"), BAD)
@pytest.mark.parametrize("show", [False, True])
def test_a_bad_value_anywhere_is_refused_exactly_as_before(column, value, dtype, show) -> None:
    """Any out-of-domain value refuses the table, in the first block or the
    last, with the message of the general path (column and kind of problem;
    counts and rows only on the data holder's request)."""
    rng = np.random.default_rng(3)
    domain = Domain.from_dict({**SIZES, "e": {"bins": [0, 2.5, 10, 100]}})
    rows = 70_000  # more than one encoding block
    for where in (0, rows - 1):
        frame = _frame(rng, rows).assign(e=rng.integers(0, 100, rows))
        frame = frame.astype({column: dtype})
        frame.loc[where, column] = value
        with pytest.raises(DomainValueError) as fast:
            open_frame(frame, domain, show_bad_values=show)
        with pytest.raises(DomainValueError) as general:
            domain[column].encode(frame[column].astype(object), show_bad_values=show)
        assert str(fast.value) == str(general.value)
        assert fast.value.column == column


def test_select_names_columns_and_copies_nothing(rng) -> None:
    domain = Domain.from_dict(SIZES)
    table = open_frame(_frame(rng, 100), domain)
    picked = tables.select_rows(table, [3, 0])
    assert picked.codes is table.codes and picked.columns == (3, 0)
    again = tables.select_rows(picked, [1])
    assert again.columns == (0,) and again.sizes == (7,)
    np.testing.assert_array_equal(again.matrix(), table.codes[:, [0]])
    assert np.shares_memory(again.column(0), table.codes)


@pytest.mark.parametrize("rows", [0, 1, 1000, (1 << 16) + 123, 3 * (1 << 16)])
def test_vectorize_is_bincount_block_by_block(rows: int) -> None:
    """Counts over every block boundary, after select in any column order and
    after where (masked rows weigh 0), equal np.bincount on the rows."""
    rng = np.random.default_rng(rows)
    domain = Domain.from_dict(SIZES)
    frame = _frame(rng, rows)
    engine, table = MemoryEngine(), open_frame(frame, domain)
    for names in (["a", "b", "c", "d"], ["d", "a"], ["c"], ["b", "a"]):
        js = [domain.index(n) for n in names]
        shape = tuple(domain[n].size for n in names)
        x = engine.vectorize(engine.select(table, js), list(range(len(js))), shape)
        np.testing.assert_array_equal(x, _histogram(frame, names, domain))
        np.testing.assert_array_equal(engine.vectorize(table, js, shape), x)
    kept = engine.where(table, (col("a") >= 3) & (col("b") != 1), domain)
    picked = engine.select(kept, [2, 0])
    x = engine.vectorize(picked, [0, 1], (300, 7))
    mask = (frame["a"] >= 3) & (frame["b"] != 1)
    np.testing.assert_array_equal(x, _histogram(frame[mask], ["c", "a"], domain))
    assert engine.count(picked) == int(mask.sum())
    np.testing.assert_array_equal(engine.codes(picked), frame.loc[mask, ["c", "a"]].to_numpy())
