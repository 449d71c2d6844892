"""SQL compiled to workloads (issue #39): over a grammar of generated
queries, every statement compiles to the workload the Python builders give
(`workload.spec.histogram` / `aggregates`) and its WHERE to the predicate
`parse_where` builds from the same filter; the joint workload applied to the
true data vector gives pandas' answers exactly (lifting, masks, binned keys);
unsupported SQL is refused by clause."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ektelo.errors import SqlError
from ektelo.matrix import to_spec
from ektelo.matrix.spec import specs_equal
from ektelo.session import load_domain
from ektelo.sql import compile_sql, joint_workload
from ektelo.sql.joint import part_questions
from ektelo.where import parse_where
from ektelo.workload import spec

DOMAIN = load_domain({"sex": {"values": ["F", "M"]}, "race": 4, "age": 12,
                      "hours": {"values": [0, 10, 20, 40, 60]}})
RACES = [0, 1, 2, 3]


def _table(rows: int = 400, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"sex": rng.choice(["F", "M"], rows), "race": rng.integers(0, 4, rows),
                         "age": rng.integers(0, 12, rows),
                         "hours": rng.choice([0, 10, 20, 40, 60], rows)})


# -- a grammar of WHERE clauses: (SQL text, --where text, pandas mask function) ---------
def _atom() -> st.SearchStrategy[tuple[str, str, object]]:
    cmp = st.sampled_from(["=", "<>", "<", "<=", ">", ">="])
    py = {"=": "==", "<>": "!="}
    age_cmp = st.builds(lambda op, v: (f"age {op} {v}", f"age {py.get(op, op)} {v}",
                                       ("age", py.get(op, op), v)), cmp, st.integers(0, 11))
    sex_eq = st.builds(lambda v: (f"sex = '{v}'", f"sex == '{v}'", ("sex", "==", v)),
                       st.sampled_from(["F", "M"]))
    between = st.builds(lambda a, b: (f"age BETWEEN {min(a, b)} AND {max(a, b)}",
                                      f"{min(a, b)} <= age <= {max(a, b)}",
                                      ("between", min(a, b), max(a, b))),
                        st.integers(0, 11), st.integers(0, 11))
    isin = st.builds(lambda vs: (f"race IN ({', '.join(map(str, vs))})",
                                 f"race in ({', '.join(map(str, vs))},)", ("in", vs)),
                     st.lists(st.sampled_from(RACES), min_size=1, max_size=3, unique=True))
    return st.one_of(age_cmp, sex_eq, between, isin)


def _combine(children: st.SearchStrategy) -> st.SearchStrategy:
    both = st.builds(lambda a, b, op: (f"({a[0]}) {op.upper()} ({b[0]})",
                                       f"({a[1]}) {op} ({b[1]})", (op, a[2], b[2])),
                     children, children, st.sampled_from(["and", "or"]))
    neg = st.builds(lambda a: (f"NOT ({a[0]})", f"not ({a[1]})", ("not", a[2])), children)
    return st.one_of(both, neg)


WHERE = st.recursive(_atom(), _combine, max_leaves=4)


def _mask(frame: pd.DataFrame, node: object) -> np.ndarray:
    import operator

    ops = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
           ">": operator.gt, ">=": operator.ge}
    assert isinstance(node, tuple)
    if node[0] == "between":
        return ((frame["age"] >= node[1]) & (frame["age"] <= node[2])).to_numpy()
    if node[0] == "in":
        return frame["race"].isin(node[1]).to_numpy()
    if node[0] in ("and", "or"):
        a, b = _mask(frame, node[1]), _mask(frame, node[2])
        return (a & b) if node[0] == "and" else (a | b)
    if node[0] == "not":
        return ~_mask(frame, node[1])
    name, op, value = node
    return np.asarray(ops[op](frame[name], value))


KEYS = st.lists(st.sampled_from(["sex", "race", "FLOOR(age / 4) * 4"]), max_size=2, unique=True)
AGGS = st.lists(st.sampled_from(["COUNT(*)", "SUM(hours)", "AVG(hours)"]), min_size=1,
                max_size=3, unique=True)


def _sql(keys: list[str], aggs: list[str], where: tuple | None) -> str:
    select = ", ".join([*keys, *aggs])
    text = f"SELECT {select} FROM t"
    if where is not None:
        text += f" WHERE {where[0]}"
    if keys:
        text += " GROUP BY " + ", ".join(keys)
    return text


def _vector(frame: pd.DataFrame, attrs: tuple[str, ...]) -> np.ndarray:
    codes = DOMAIN.encode(frame)
    cols = [DOMAIN.index(a) for a in attrs]
    shape = tuple(DOMAIN[a].size for a in attrs)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).astype(np.float64)


def _truth(frame: pd.DataFrame, keys: list[str], func: str) -> np.ndarray:
    """pandas' answers in the builders' group order (C order over the keys'
    codes; every group, empty ones 0)."""
    f = frame.copy()
    f["sex"] = f["sex"].map({"F": 0, "M": 1})
    f["hours_v"] = f["hours"]
    f["FLOOR(age / 4) * 4"] = f["age"] // 4
    sizes = {"sex": 2, "race": 4, "FLOOR(age / 4) * 4": 3}
    index = pd.MultiIndex.from_product([range(sizes[k]) for k in keys]) if keys else None
    if not keys:
        return np.array([len(f) if func == "count" else f["hours_v"].sum()], dtype=float)
    g = f.groupby(keys)
    s = g.size() if func == "count" else g["hours_v"].sum()
    if len(keys) == 1:
        s.index = pd.MultiIndex.from_arrays([s.index])
    return s.reindex(index, fill_value=0).to_numpy(dtype=float)


@settings(max_examples=60, deadline=None)
@given(keys=KEYS, aggs=AGGS, where=st.one_of(st.none(), WHERE))
def test_generated_queries_compile_to_the_builders_workloads(keys: list[str], aggs: list[str],
                                                              where: tuple | None) -> None:
    (stmt,), explained = compile_sql(_sql(keys, aggs, where), DOMAIN)
    assert not explained
    # the WHERE: the predicate --where builds from the same filter
    if where is None:
        assert stmt.where is None
    else:
        assert repr(stmt.where) == repr(parse_where(where[1], DOMAIN))
    # the workload: the builders' own question when no key is binned
    by = [k.attr for k in stmt.keys]
    questions = part_questions(stmt, DOMAIN)
    if "SUM(hours)" in aggs or "AVG(hours)" in aggs:
        stats = [s for s, a in (("sum", "SUM(hours)"), ("mean", "AVG(hours)")) if a in aggs]
        stats += ["count"] if "COUNT(*)" in aggs else []
        expected = spec.aggregates(DOMAIN, "hours", by, stats)
        assert specs_equal(to_spec(questions[0][0].matrix), to_spec(expected.matrix))
        assert questions[0][0].derived == expected.derived
    elif by:
        assert specs_equal(to_spec(questions[0][0].matrix),
                           to_spec(spec.histogram(DOMAIN, by).matrix))
    # the joint workload on the true vector: pandas' answers, exactly
    frame = _table()
    joint = joint_workload([stmt], DOMAIN)
    x = _vector(frame, joint.question.attributes)
    answers = joint.question.matrix.dot(x) if hasattr(joint.question.matrix, "dot") else (
        joint.question.matrix @ x)
    kept = frame if where is None else frame[_mask(frame, where[2])]
    part = joint.parts[0]
    got = part.own_rows(np.asarray(answers[joint.offsets[0]:joint.offsets[1]]))
    names = list(keys)
    if part.question.derived is None:
        np.testing.assert_allclose(got, _truth(kept, names, "count"))
    else:
        rows = part.question.rows["statistic"].astype(str).to_numpy()
        measured = list(dict.fromkeys(rows))
        if part.question.derived.basis == "ends":  # Σ(v − lo)x and Σ(hi − v)x
            total = _truth(kept, names, "count")
            hours = _truth(kept, names, "sum")
            g = len(total)
            np.testing.assert_allclose(got[:g], hours)
            np.testing.assert_allclose(got[g:], 60 * total - hours)
        else:
            for stat in measured:
                sel = rows == stat
                np.testing.assert_allclose(got[sel], _truth(kept, names, stat))


def test_several_statements_share_one_vector() -> None:
    text = ("SELECT sex, COUNT(*) FROM t GROUP BY sex; "
            "SELECT race, SUM(hours) FROM t WHERE age >= 6 GROUP BY race; SELECT COUNT(*) FROM t")
    statements, _ = compile_sql(text, DOMAIN)
    joint = joint_workload(statements, DOMAIN)
    assert set(joint.question.attributes) == {"sex", "race", "hours", "age"}
    frame = _table()
    x = _vector(frame, joint.question.attributes)
    answers = np.asarray(joint.question.matrix @ x)
    o = joint.offsets
    got = [p.own_rows(answers[o[i]:o[i + 1]]) for i, p in enumerate(joint.parts)]
    np.testing.assert_allclose(got[0], frame.groupby("sex").size().to_numpy())
    sums = frame[frame.age >= 6].groupby("race")["hours"].sum().reindex(RACES, fill_value=0)
    np.testing.assert_allclose(got[1], sums.to_numpy())
    np.testing.assert_allclose(got[2], [len(frame)])
    assert joint.parts[1].scale == 60  # a sum's rows in units of its largest value


def test_parts_keep_their_row_order_whatever_the_union_order() -> None:
    """The union's attribute order is the first statement's; a later
    statement grouping in another order gets its rows back in its own."""
    text = ("SELECT race, sex, COUNT(*) FROM t GROUP BY race, sex; "
            "SELECT sex, race, SUM(hours) FROM t WHERE age < 6 OR sex = 'F' GROUP BY sex, race")
    statements, _ = compile_sql(text, DOMAIN)
    joint = joint_workload(statements, DOMAIN)
    assert joint.question.attributes[:2] == ("race", "sex")
    frame = _table()
    answers = np.asarray(joint.question.matrix @ _vector(frame, joint.question.attributes))
    o = joint.offsets
    first = joint.parts[0].own_rows(answers[o[0]:o[1]])
    np.testing.assert_allclose(first, frame.groupby(["race", "sex"]).size().to_numpy())
    second = joint.parts[1].own_rows(answers[o[1]:o[2]])
    kept = frame[(frame.age < 6) | (frame.sex == "F")]
    sums = kept.groupby(["sex", "race"])["hours"].sum()
    np.testing.assert_allclose(second, sums.to_numpy())
    assert joint.parts[1].terms == 2


def test_explain_and_order_by() -> None:
    (stmt,), explained = compile_sql(
        "EXPLAIN SELECT sex AS s, COUNT(*) AS n FROM t GROUP BY sex ORDER BY n DESC LIMIT 1",
        DOMAIN)
    assert explained
    assert stmt.keys[0].name == "s" and stmt.order[0].target == "n" and stmt.order[0].descending
    assert stmt.limit == 1


@pytest.mark.parametrize(("sql", "clause"), [
    ("SELECT COUNT(DISTINCT age) FROM t", "COUNT(DISTINCT"),
    ("SELECT t.sex, COUNT(*) FROM t JOIN u ON t.a = u.a GROUP BY t.sex", "JOIN"),
    ("SELECT COUNT(*) FROM (SELECT * FROM t) s", "subquery"),
    ("SELECT COUNT(*) FROM t WHERE age IN (SELECT age FROM t)", "subquery"),
    ("SELECT sex, COUNT(*) OVER () FROM t", "window"),
    ("SELECT sex, COUNT(*) FROM t GROUP BY sex HAVING COUNT(*) > 2", "HAVING"),
    ("SELECT MAX(age) FROM t", "MAX(age)"),
    ("SELECT SUM(age * 2) FROM t", "SUM of an expression"),
    ("SELECT DISTINCT sex FROM t", "DISTINCT"),
    ("WITH s AS (SELECT * FROM t) SELECT COUNT(*) FROM s", "WITH"),
    ("SELECT COUNT(*) FROM t UNION SELECT COUNT(*) FROM t", "UNION"),
    ("SELECT COUNT(*) FROM t WHERE sex LIKE 'F%'", "LIKE"),
    ("SELECT age % 3, COUNT(*) FROM t GROUP BY age % 3", "GROUP BY"),
    ("DELETE FROM t", "DELETE"),
    ("SELECT COUNT(*) FROM t WHERE sex = 'X'", "'X'"),
    ("SELECT nope, COUNT(*) FROM t GROUP BY nope", "unknown column 'nope'"),
    ("SELECT sex FROM t GROUP BY sex", "no aggregate"),
])
def test_unsupported_sql_is_refused_by_clause(sql: str, clause: str) -> None:
    with pytest.raises(SqlError, match=None) as info:
        compile_sql(sql, DOMAIN)
    message = str(info.value)
    assert clause in message, message
    assert "\n" not in message
