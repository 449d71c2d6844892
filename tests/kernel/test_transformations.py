"""Private transformations compute the right data (checked through nearly
noiseless measurements: ε = 10⁶ gives noise of scale 10⁻⁶)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import ektelo
from ektelo import Domain, col
from ektelo.matrix import Dense, Identity, Partition, Prefix, Total

BIG = 1e6


def exact(m, decimals=0):
    return np.round(m.answers, decimals)


@pytest.fixture
def data():
    rng = np.random.default_rng(42)
    rows = 500
    frame = pd.DataFrame(
        {
            "age": rng.integers(0, 10, rows),
            "sex": rng.choice(["F", "M"], rows),
            "pay": rng.uniform(0, 300, rows),
        }
    )
    domain = Domain.from_json(
        {"age": 10, "sex": {"values": ["F", "M"]}, "pay": {"bins": [0, 100, 200, 300]}}
    )
    t = ektelo.protect(frame, domain, epsilon=1e9, seed=1)
    frame["pay_bin"] = (frame["pay"] // 100).astype(int)
    frame["sex_code"] = (frame["sex"] == "M").astype(int)
    return t, frame


def count(handle):
    return exact(handle.noisy_count(eps=BIG))[0]


@pytest.mark.parametrize(
    "pred, mask",
    [
        (col("age") == 3, lambda f: f.age == 3),
        (col("age") != 3, lambda f: f.age != 3),
        (col("age") < 3, lambda f: f.age < 3),
        (col("age") <= 3, lambda f: f.age <= 3),
        (col("age") > 3, lambda f: f.age > 3),
        (col("age") >= 3, lambda f: f.age >= 3),
        (col("age").between(2, 5), lambda f: f.age.between(2, 5)),
        (col("age").isin([1, 7, 9]), lambda f: f.age.isin([1, 7, 9])),
        (col("sex") == "M", lambda f: f.sex == "M"),
        (col("sex").isin(["F"]), lambda f: f.sex == "F"),
        (col("pay") >= 100, lambda f: f.pay >= 100),
        (col("pay") < 200, lambda f: f.pay < 200),
        (col("pay") == 100, lambda f: (f.pay >= 100) & (f.pay < 200)),
        (
            (col("age").between(3, 6) & (col("sex") == "M")) | ~(col("pay") < 200),
            lambda f: (f.age.between(3, 6) & (f.sex == "M")) | ~(f.pay < 200),
        ),
    ],
)
def test_where(data, pred, mask):
    t, frame = data
    assert count(t.where(pred)) == mask(frame).sum()


def test_where_rejects_bad_predicates_before_anything(data):
    t, _ = data
    before = t.ledger()
    with pytest.raises(ValueError, match="unknown attribute 'salary'"):
        t.where(col("salary") > 3)
    with pytest.raises(ValueError, match="'sex'"):
        t.where(col("sex") == "X")
    with pytest.raises(ValueError, match="edge"):
        t.where(col("pay") >= 150)
    with pytest.raises(ValueError, match="binned"):
        t.where(col("pay") <= 100)
    with pytest.raises(ValueError, match="binned"):
        t.where(col("pay").between(100, 200))
    with pytest.raises(TypeError):
        t.where(col("age") == "three")
    with pytest.raises(TypeError):
        t.where(lambda row: row["age"] > 3)
    with pytest.raises(TypeError):
        t.where("age > 3")
    with pytest.raises(TypeError):
        _ = (col("age") > 1) and (col("age") < 3)
    assert t.ledger() == before


def test_client_predicate_subclasses_are_refused(data):
    t, _ = data
    from ektelo.predicates import Compare

    class Spy(Compare):
        pass

    with pytest.raises(TypeError):
        t.where(Spy("age", "==", 1))
    with pytest.raises(TypeError):
        t.where((col("age") == 1) & Spy("age", "==", 1))


def test_select_and_vectorize_in_c_order(data):
    t, frame = data
    v = t.select(["sex", "age"]).vectorize()
    assert v.shape == (2, 10) and v.size == 20
    m = v.laplace(Identity(20), eps=BIG)
    truth = np.zeros((2, 10))
    np.add.at(truth, (frame.sex_code, frame.age), 1)
    np.testing.assert_array_equal(exact(m), truth.reshape(-1))
    assert m.root_shape == (2, 10)
    w = t.vectorize(["pay", "sex"])
    truth = np.zeros((3, 2))
    np.add.at(truth, (frame.pay_bin, frame.sex_code), 1)
    np.testing.assert_array_equal(exact(w.laplace(Identity(6), eps=BIG)), truth.reshape(-1))
    assert t.vectorize().shape == (10, 2, 3)


def test_select_keeps_every_row(data):
    t, frame = data
    assert count(t.select(["sex"])) == len(frame)
    assert t.select(["sex"]).domain == t.domain.project(["sex"])
    with pytest.raises(ValueError):
        t.select(["sex", "sex"])
    with pytest.raises(ValueError):
        t.select(["nope"])
    with pytest.raises(TypeError):
        t.select([1])


def test_group_by_is_a_table_of_groups(data):
    t, frame = data
    g = t.group_by(["age", "sex"])
    assert g.domain.names == ("age", "sex")
    assert count(g) == len(frame.groupby(["age", "sex"]))
    g2 = t.where(col("age") < 2).group_by(["sex", "age"], count="n", count_cap=40)
    assert g2.domain.shape == (2, 10, 41)
    m = g2.vectorize().laplace(Identity(2 * 10 * 41), eps=BIG)
    truth = np.zeros((2, 10, 41))
    sizes = frame[frame.age < 2].groupby(["sex_code", "age"]).size()
    for (s, a), n in sizes.items():
        truth[s, a, min(n, 40)] += 1
    np.testing.assert_array_equal(exact(m), truth.reshape(-1))
    with pytest.raises(ValueError):
        t.group_by(["age"], count="age")
    with pytest.raises(ValueError):
        t.group_by(["age"], count="n", count_cap=0)


def test_split_by_attribute(data):
    t, frame = data
    kids = t.split_by_partition("pay")
    assert len(kids) == 3
    for i, k in enumerate(kids):
        assert k.domain == t.domain
        assert count(k) == (frame.pay_bin == i).sum()


def test_noisy_count_measurement_describes_itself(data):
    t, _ = data
    m = t.noisy_count(eps=BIG)
    assert m.query == Total(t.domain.size)
    assert m.root_shape == t.domain.shape
    assert m.root_id == t.vectorize().root_id  # inference can combine the two
    assert m.root_id != t.where(col("age") > 1).vectorize().root_id
    assert m.seed == 1 and m.research_mode


def test_vector_reduce_and_transform_values():
    x = ektelo.protect(np.arange(6, dtype=float), epsilon=1e9, seed=2)
    r = x.reduce_by_partition(Partition([0, 1, 0, 1, 2, 2]))
    assert r.shape == (3,) and r.root_shape == (6,) and r.root_id == x.root_id
    np.testing.assert_array_equal(exact(r.laplace(Identity(3), eps=BIG)), [2, 4, 9])
    y = x.transform(Prefix(6))
    m = y.laplace(Identity(6), eps=BIG)
    np.testing.assert_array_equal(exact(m), np.cumsum(np.arange(6)))
    np.testing.assert_array_equal(m.query_on_root.dense(), np.tril(np.ones((6, 6))))
    z = x.transform(Dense(0.5 * np.ones((2, 6))))
    m = z.laplace(Identity(2), eps=BIG)
    np.testing.assert_allclose(m.answers, [7.5, 7.5], atol=1e-3)


def test_protect_inputs():
    frame = pd.DataFrame({"a": [0, 1]})
    with pytest.raises(TypeError, match="domain"):
        ektelo.protect(frame, epsilon=1.0)
    with pytest.raises(ValueError):
        ektelo.protect(np.ones(3), Domain.from_json({"a": 3}), epsilon=1.0)
    with pytest.raises(TypeError):
        ektelo.protect([1, 2, 3], epsilon=1.0)
    with pytest.raises(TypeError):
        ektelo.protect(np.array(["a"]), epsilon=1.0)
    with pytest.raises(ValueError):
        ektelo.protect(np.array([1.0, np.nan]), epsilon=1.0)
    with pytest.raises(ValueError, match="'a'"):
        ektelo.protect(pd.DataFrame({"a": [0, 5]}), Domain.from_json({"a": 3}), epsilon=1.0)
    with pytest.raises(ValueError, match="seed"):
        ektelo.protect(np.ones(3), epsilon=1.0, seed=-1)
    v = ektelo.protect(np.ones((2, 3, 4), dtype=np.int32), epsilon=1.0)
    assert v.shape == (2, 3, 4) and v.size == 24 and v.budget.total == 1.0


def test_vectorize_refuses_huge_domains():
    domain = Domain.from_json({f"a{i}": 100 for i in range(5)})
    frame = pd.DataFrame({f"a{i}": [0] for i in range(5)})
    t = ektelo.protect(frame, domain, epsilon=1.0)
    with pytest.raises(ValueError, match="too many cells"):
        t.vectorize()
    assert t.select(["a0", "a1"]).vectorize().shape == (100, 100)
