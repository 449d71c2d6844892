"""The tidy rows of a marginals question (issue #25: built in NumPy, not per-cell
Python lists): checked cell by cell against a literal frame on a small domain
with a labelled, a binned, an integer-labelled and a coded attribute, and their
dtypes (the narrowest nullable integers, categoricals for labels and the
marginal's name: a 3-way question on adult has 20.9 million rows)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ektelo.domain import Domain
from ektelo.workload import spec

DOMAIN = Domain.from_json({
    "sex": {"values": ["F", "M"]},
    "age": {"bins": [0, 18, 65, 120]},
    "score": {"values": [5, 300]},
    "rate": 2,
})  # fmt: skip

NA = None
M = ["sex×age"] * 6 + ["sex×score"] * 4 + ["sex×rate"] * 4 + ["age×score"] * 6 \
    + ["age×rate"] * 6 + ["score×rate"] * 4
SEX = ["F", "F", "F", "M", "M", "M", "F", "F", "M", "M", "F", "F", "M", "M"] + [NA] * 16
AGE_LO = [0, 18, 65] * 2 + [NA] * 8 + [0, 0, 18, 18, 65, 65] * 2 + [NA] * 4
AGE_HI = [18, 65, 120] * 2 + [NA] * 8 + [18, 18, 65, 65, 120, 120] * 2 + [NA] * 4
SCORE = [NA] * 6 + [5, 300, 5, 300] + [NA] * 4 + [5, 300] * 3 + [NA] * 6 + [5, 5, 300, 300]
RATE = [NA] * 10 + [0, 1, 0, 1] + [NA] * 6 + [0, 1] * 3 + [0, 1, 0, 1]


def expected() -> pd.DataFrame:
    return pd.DataFrame({
        "marginal": pd.Categorical(M, categories=list(dict.fromkeys(M))),
        "sex": pd.Categorical(SEX, categories=["F", "M"]),
        "age_lo": np.array([np.nan if v is None else v for v in AGE_LO], dtype=float),
        "age_hi": np.array([np.nan if v is None else v for v in AGE_HI], dtype=float),
        "score": pd.array(SCORE, dtype="Int16"),
        "rate": pd.array(RATE, dtype="Int8"),
    })  # fmt: skip


def test_two_way_rows_are_the_literal_frame() -> None:
    q = spec.marginals(DOMAIN, ["sex", "age", "score", "rate"], 2)
    pd.testing.assert_frame_equal(q.rows, expected(), check_categorical=True)
    assert q.rows.attrs["shape"] == (2, 3, 2, 2) and q.kind == "marginals"
    assert q.matrix.shape == (30, 24)


def test_the_spec_string_gives_the_same_rows_and_labels() -> None:
    q = spec.parse("marginals:2:all", DOMAIN)
    pd.testing.assert_frame_equal(q.rows, expected())
    assert q.labels[0] == "marginal=sex×age,sex=F,age_lo=0.0,age_hi=18.0"
    assert q.labels[6] == "marginal=sex×score,sex=F,score=5"
    assert q.labels[-1] == "marginal=score×rate,score=300,rate=1"


def test_rows_follow_the_matrix_one_cell_per_row() -> None:
    """Row i is the count of exactly the cells its columns name (W's row i),
    for every k: the rows and the matrix agree on the order."""
    names = ["sex", "age", "score", "rate"]
    codes = np.indices((2, 3, 2, 2)).reshape(4, -1).T
    labels = {"sex": ["F", "M"], "score": [5, 300], "rate": [0, 1]}
    for k in range(5):
        q = spec.marginals(DOMAIN, names, k)
        W = np.asarray(q.matrix.dense())
        assert W.shape[0] == len(q.rows)
        for i, row in enumerate(q.rows.to_dict("records")):
            want = np.ones(len(codes), dtype=bool)
            for j, n in enumerate(names):
                v = row["age_lo"] if n == "age" else row[n]
                if pd.isna(v):
                    continue
                code = [0, 18, 65].index(v) if n == "age" else labels[n].index(v)
                want &= codes[:, j] == code
            assert np.array_equal(W[i] != 0, want), (k, i)


def test_a_total_and_the_full_table() -> None:
    q = spec.marginals(DOMAIN, ["sex", "rate"], 0)
    assert list(q.rows["marginal"]) == ["total"] and q.rows[["sex", "rate"]].isna().all(axis=None)
    full = spec.marginals(DOMAIN, ["sex", "rate"])
    assert list(full.rows["sex"]) == ["F", "F", "M", "M"]
    assert list(full.rows["rate"]) == [0, 1, 0, 1]
