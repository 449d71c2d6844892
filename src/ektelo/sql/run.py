"""SQL statements answered jointly by an analyst session (public layer).

`answer_sql(session, text, ...)`: compile (`ektelo.sql.compile`), build
the one joint workload (`ektelo.sql.joint`), let the planner choose its
plan, then either

* EXPLAIN: the session's `preview` of the joint workload — the plan, why,
  and each output cell's expected standard error — nothing spent; or
* answer: ONE `Session.ask` of the joint workload (one charge, one history
  row; the session's intervals), then each statement's rows cut from it:
  sums and counts as measured, means derived by `ektelo.derived.finish`
  from their part's sums and counts and the noise covariance of the
  measurements taken (Fieller intervals), ORDER BY / LIMIT applied to the
  released answers (post-processing).

A joint workload over more than `wide.LARGE_VECTOR` cells is too large for
the planner's closed-form ranking; there the two strategies with a closed
form on such vectors — Identity and HDMM's Kronecker strategy — are priced
by their exact expected total error and the better one runs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..answers import tidy
from ..domain import OTHER_KEY
from ..errors import SqlError
from ..workload import spec as questions
from .compile import Statement, compile_sql, open_columns
from .joint import Joint, joint_workload

__all__ = ["answer_sql", "check_sql", "compile_joint", "explain_text"]

TERMS_BOUND = "std error bounded by the sum over the filter's terms (conservative)"
MEAN_BEFORE = "a mean's error depends on its noisy count: known after measuring"
#: the share of a call's budget that releases the keys of the open columns it names
KEY_SHARE = 0.2


def check_sql(text: str, domain: Any) -> tuple[list[Statement], bool]:
    """The statements of `text` checked against `domain` before anything is
    read or spent — an open column they group by compiled as if its keys
    were none yet (they are released when the statements run)."""
    provisional = domain
    for c in open_columns(text, domain):
        provisional = provisional.with_keys(c, [])
    return compile_sql(text, provisional)


def compile_joint(text: str, domain: Any) -> tuple[list[Statement], Joint, bool]:
    """Statements, their joint workload and whether EXPLAIN was asked."""
    statements, explained = compile_sql(text, domain)
    return statements, joint_workload(statements, domain), explained


def _plan(session: Any, joint: Joint, plan: str, budget: dict[str, float]) -> tuple[str, str]:
    """The plan to run and why: the session's planner, or on a vector too
    large for it the better of Identity and HDMM by exact expected error."""
    from .. import wide
    from ..operators import error
    from ..plans import data_independent

    q = joint.question
    cells = math.prod(q.shape)
    if plan != "auto" or cells <= wide.LARGE_VECTOR:
        return plan, ""
    gaussian = "rho" in budget
    priced = []
    for name in ("hdmm", "identity"):
        A = data_independent.strategy_for(name, q.shape, q.matrix,
                                          mechanism="gaussian" if gaussian else "laplace")
        if A is None:
            continue
        if gaussian:
            total = float(error.expected_error(q.matrix, A, rho=budget["rho"]))
        else:
            total = float(error.expected_error(q.matrix, A, budget["epsilon"]))
        priced.append((total, name))
    total, name = min(priced)
    others = "; ".join(f"{n} RMSE {math.sqrt(t / q.matrix.shape[0]):.3g}" for t, n in priced)
    return name, (f"the joint vector has {cells:,} cells: priced by exact expected error "
                  f"({others})")


def answer_sql(session: Any, text: str, *, epsilon: float | None = None,
               rho: float | None = None, plan: str = "auto", alpha: float = 0.05,
               explain: bool = False) -> list[pd.DataFrame]:
    """One tidy frame per statement (see the module); with EXPLAIN (or
    `explain=True`) the expected errors instead, nothing spent.

    With `plan="auto"` and several statements, the joint plan's expected
    total squared error is compared (free) with asking each statement alone
    with an equal share; where apart errs less (one product strategy over the
    union serves some mixes badly), each statement is answered alone by its
    own plan — inside ONE envelope of the budget, so still charged once, all
    or nothing — and `attrs["mode"]` says so."""
    opened = open_columns(text, session.domain)
    if opened:
        return _after_keys(session, text, opened, epsilon, rho, plan, alpha, explain)
    statements, joint, explained = compile_joint(text, session.domain)
    budget = session._request(epsilon, rho)
    name, why = _plan(session, joint, plan, budget)
    explaining = explain or explained
    compare = plan == "auto" and len(statements) > 1  # joint or apart: priced (free)
    frames = (_expected(session, statements, joint, name, why, epsilon, rho, alpha)
              if explaining or compare else [])
    together = frames[0].attrs["expected_total"] if frames else math.nan
    apart = (_one_at_a_time(session, statements, epsilon, rho, plan, alpha) if compare
             else math.nan)
    separate = math.isfinite(apart) and math.isfinite(together) and apart < together
    if separate:
        share = _share(session, statements, epsilon, rho)
        if explaining:
            frames = [answer_sql(session, st.sql, plan=plan, alpha=alpha, explain=True,
                                 epsilon=share.get("epsilon"), rho=share.get("rho"))[0]
                      for st in statements]
        else:
            start = len(session._history)
            with session._one_charge(budget):
                frames = [answer_sql(session, st.sql, plan=plan, alpha=alpha,
                                     epsilon=share.get("epsilon"), rho=share.get("rho"))[0]
                          for st in statements]
            _one_history_row(session, joint, start, budget)
        for f in frames:
            f.attrs.update(mode="one at a time", expected_total=together,
                           one_at_a_time_total=apart, why=(
                               "each statement alone by its own plan with an equal share "
                               f"errs less ({apart:.4g} expected total squared error) than "
                               f"jointly ({together:.4g}); still one charge"))
        return frames
    if explaining:
        for f in frames:
            f.attrs.update(one_at_a_time_total=apart, mode="joint")
        return frames
    before = len(session._recorder.measurements)
    frame = session.ask(joint.question, epsilon=epsilon, rho=rho, plan=name, alpha=alpha)
    taken = session._recorder.measurements[before:]
    answers = frame["answer"].to_numpy(dtype=np.float64)
    std_col = frame["std_error"].to_numpy(dtype=np.float64)
    std = None if np.all(np.isnan(std_col)) else std_col
    method = str(frame.attrs.get("ci_method", ""))
    frames = _statements(statements, joint, answers, std, method, alpha, taken=taken,
                         session=session, expected=False, plan=str(frame.attrs["plan"]))
    for f in frames:
        f.attrs.update({k: v for k, v in frame.attrs.items() if k != "ci_method"})
        if why:
            f.attrs["why"] = why
        f.attrs["workload"] = _shape(joint)
        f.attrs["mode"] = "joint"
    return frames


def _after_keys(session: Any, text: str, opened: list[str], epsilon: float | None,
                rho: float | None, plan: str, alpha: float, explain: bool) -> list[pd.DataFrame]:
    """Statements naming open columns (issue #39): inside ONE envelope of the
    call's budget, `KEY_SHARE` of it releases each open column's keys
    (`select_keys`: partition selection) and the rest answers the statements
    over the recoded table; the released keys then stay public for the
    session (`Session.release_keys`). Everything is checked before anything
    is spent: the statements compile against the domain with no key yet."""
    _, explained = check_sql(text, session.domain)
    if explain or explained:
        raise SqlError(f"sql: EXPLAIN: open column(s) {opened} have no released keys yet, so "
                       "their cells are unknown: release them first (Session.release_keys)")
    whole = session._request(epsilon, rho)
    if "rho" not in whole:
        raise SqlError("sql: open columns need a zCDP session (delta=): releasing keys nobody "
                       "declared is never pure ε-DP")
    user = _stated(session, epsilon, rho)["rho"]
    key_rho = whole["rho"] * KEY_SHARE / len(opened)
    start = len(session._history)
    released: dict[str, tuple[str, ...]] = {}
    try:
        with session._one_charge(whole):
            for c in opened:
                released[c] = session._table.select_keys(c, rho=key_rho)
            for c, keys in released.items():
                session._table = session._table.recode(c, keys)
            session.domain = session._table.domain
            frames = answer_sql(session, text, rho=user * (1 - KEY_SHARE), plan=plan,
                                alpha=alpha)
    finally:  # keys released are public: every later question uses them, come what may
        for c, keys in released.items():
            session._open_keys(c, keys)
    _one_history_row(session, None, start, whole, "sql with keys of " + ", ".join(opened))
    for f in frames:
        f.attrs["released_keys"] = {c: len(k) for c, k in released.items()}
        f.attrs["key_rho"] = key_rho * len(opened)
    return frames


def _one_history_row(session: Any, joint: Joint | None, start: int, budget: dict[str, float],
                     what: str = "one at a time") -> None:
    """The statements' history rows since `start` as one: the call was one
    question, charged once."""
    rows = session._history[start:]
    del session._history[start:]
    attributes = ([str(r["attributes"]) for r in rows] if joint is None
                  else list(joint.question.attributes))
    session._remember("custom" if joint is None else joint.question.kind, attributes, None,
                      what + ": " + ", ".join(str(r["plan"]) for r in rows), budget,
                      session.budget)


def _expected(session: Any, statements: list[Statement], joint: Joint, name: str, why: str,
              epsilon: float | None, rho: float | None, alpha: float) -> list[pd.DataFrame]:
    """The joint workload's EXPLAIN frames (free): each statement's cells with
    their expected standard errors; `attrs` carry the plan and the total."""
    prev = session.preview(joint.question, plan=name, epsilon=epsilon, rho=rho, alpha=alpha)
    std = prev.std_error
    n = joint.question.matrix.shape[0]
    answers = np.zeros(n)  # (not shown: the intervals' half-widths are what count)
    frames = _statements(statements, joint, answers,
                         None if std is None else np.asarray(std), prev.ci_method,
                         alpha, taken=None, session=session, expected=True,
                         plan=prev.plan)
    together = _total(frames)
    for f in frames:
        f.attrs.update(plan=prev.plan, why=why or prev.why, explain=True, budget=prev.budget,
                       alpha=alpha, workload=_shape(joint), ranking=prev.ranking,
                       expected_total=together)
    return frames


def _stated(session: Any, epsilon: float | None, rho: float | None) -> dict[str, float]:
    """The call's budget as the caller states it, in the kernel's unit (ε
    converted with the session's δ on a zCDP session) — what `_request`
    turns into the table's, per unit."""
    if rho is not None:
        return {"rho": rho}
    assert epsilon is not None  # (`_request` checked one was given)
    b = session.budget
    if b.unit == "rho":
        from ..budget import rho_of_epsilon_delta

        return {"rho": rho_of_epsilon_delta(epsilon, b.delta)}
    return {"epsilon": epsilon}


def _share(session: Any, statements: list[Statement], epsilon: float | None,
           rho: float | None) -> dict[str, float]:
    """An equal share of the budget per statement, in the kernel's unit (a
    zCDP session splits ρ, not ε: k shares of ρ/k add up to the whole)."""
    return {u: v / len(statements) for u, v in _stated(session, epsilon, rho).items()}


def _total(frames: list[pd.DataFrame]) -> float:
    """Expected total squared error of the cells with a closed form (NaN if none)."""
    v = np.concatenate([f["expected_std_error"].to_numpy(dtype=np.float64) for f in frames])
    v = v[np.isfinite(v)]
    return float(np.sum(v**2)) if v.size else math.nan


def _one_at_a_time(session: Any, statements: list[Statement], epsilon: float | None,
                   rho: float | None, plan: str, alpha: float) -> float:
    """The expected total squared error of the same cells were each statement
    asked alone with an equal share of the budget (free; NaN for a single
    statement, or when a statement's plan has no closed form)."""
    if len(statements) < 2:
        return math.nan
    share = _share(session, statements, epsilon, rho)
    total = 0.0
    for st in statements:
        (f,) = answer_sql(session, st.sql, plan=plan, alpha=alpha, explain=True,
                          epsilon=share.get("epsilon"), rho=share.get("rho"))
        v = f["expected_std_error"].to_numpy(dtype=np.float64)
        if not np.all(np.isfinite(v[f["select"].astype(str).map(
                lambda n: not n.startswith("AVG")).to_numpy()])):
            return math.nan
        total += float(np.nansum(v**2))
    return total


def _shape(joint: Joint) -> str:
    q = joint.question
    return (f"{q.matrix.shape[0]} queries over {' × '.join(q.attributes)} "
            f"({math.prod(q.shape):,} cells), {len(joint.parts)} part(s)")


def _part_frame(joint: Joint, i: int, answers: np.ndarray, std: np.ndarray | None,
                method: str, alpha: float, taken: list[Any] | None, session: Any,
                expected: bool, plan: str) -> pd.DataFrame:
    from ..derived import finish

    part = joint.parts[i]
    lo, hi = joint.offsets[i], joint.offsets[i + 1]
    a = part.own_rows(answers[lo:hi])
    s = None if std is None else part.own_rows(std[lo:hi])
    if part.terms > 1 and s is not None:
        # several WHERE terms (an OR): the answer is their sum, whose standard
        # error the session computes exactly for the summed rows where it has a
        # closed form; else at most the sum of the terms' (Minkowski): conservative
        exact = _summed_std(session, joint, part, taken, expected)
        if exact is None:
            method = f"{method}; {TERMS_BOUND}"
        else:
            s = exact
    q = part.question
    if q.derived is None:
        return tidy(q, a, s, method, alpha, False, False, False).to_frame()
    if expected:  # before measuring: sums and counts have their exact errors; means not
        base = tidy(q, a, s, method, alpha, False, False, False).to_frame()
        stats = q.derived.statistics
        rows = []
        for stat in stats:
            if stat != "mean" and q.derived.basis != "ends":
                rows.append(base[base["statistic"].astype(str) == stat])
            else:
                g = q.derived.groups
                m = base.iloc[:g].copy()
                m["statistic"] = "mean"
                m[["std_error", "ci_low", "ci_high"]] = np.nan
                m["note"] = MEAN_BEFORE
                rows.append(m)
        out = pd.concat(rows, ignore_index=True)
        out["statistic"] = pd.Categorical(out["statistic"].astype(str),
                                          categories=list(questions.STATISTICS))
        return out
    factor = None
    if "mean" in q.derived.statistics and taken:
        # the session's own rule (least-squares plans only), on the part's lifted rows
        lifted = questions.ParsedWorkload(joint.question.attributes, part.matrix,
                                          joint.question.rows.iloc[:0],
                                          "custom", joint.question.shape)
        F = session._noise_factor(lifted, plan, taken, {})
        factor = None if F is None else part.reorder(F)
    return finish(q, a, s, method, alpha, factor)


def _summed_std(session: Any, joint: Joint, part: Any, taken: list[Any] | None,
                expected: bool) -> np.ndarray | None:
    """The exact standard errors of a multi-term part's answers (each the sum
    of its terms' rows), by the session's own rule for the question it just
    planned applied to the part's summed rows (`Part.matrix`); None where
    that rule has no closed form (the caller then bounds it)."""
    last = session._last_choice
    if last is None or last[0] is not joint.question:
        return None
    _, choice, spend = last
    summed = questions.ParsedWorkload(joint.question.attributes, part.matrix,
                                      joint.question.rows.iloc[:0], "custom",
                                      joint.question.shape)
    try:
        if expected:
            std, _ = session._expected_std(summed, choice, spend)
        else:
            std, _ = session._observed_std(summed, choice, spend, list(taken or []), {})
    except (ValueError, TypeError, MemoryError):
        return None
    return None if std is None else part.reorder(np.asarray(std, dtype=np.float64))


def _statements(statements: list[Statement], joint: Joint, answers: np.ndarray,
                std: np.ndarray | None, method: str, alpha: float, *,
                taken: list[Any] | None, session: Any, expected: bool,
                plan: str) -> list[pd.DataFrame]:
    per_part = [_part_frame(joint, i, answers, std, method, alpha, taken, session, expected,
                            plan) for i in range(len(joint.parts))]
    out = []
    for s, st in enumerate(statements):
        mine = [(p, f) for p, f in zip(joint.parts, per_part, strict=True) if p.statement == s]
        items = []
        for item in st.items:
            f = _item_rows(item.func, item.attr, mine)
            f = f.drop(columns=["statistic", "query"], errors="ignore")
            f.insert(0, "select", item.name)
            items.append(f.reset_index(drop=True))
        out.append(_ordered(st, items, expected))
    return out


def _item_rows(func: str, attr: str | None, mine: list[tuple[Any, pd.DataFrame]]
               ) -> pd.DataFrame:
    for part, f in mine:
        if func == "count" and "statistic" not in f.columns:
            return f.copy()
        if "statistic" in f.columns and (func == "count" or part.summed == attr):
            rows = f[f["statistic"].astype(str) == func]
            if len(rows):
                return rows.copy()
    raise SqlError(f"sql: internal: no rows for {func}({attr})")


def _ordered(st: Statement, items: list[pd.DataFrame], expected: bool) -> pd.DataFrame:
    """Group-major rows (each group's items in SELECT order), groups sorted
    by ORDER BY and cut by LIMIT: post-processing of released answers."""
    groups = len(items[0])
    order = np.arange(groups)
    # a recoded open column's `OTHER_KEY` (every key not released) is not a group:
    # partition selection suppresses those keys (issue #39)
    others = np.zeros(groups, dtype=bool)
    for key in st.keys:
        if key.width is None and key.name in items[0].columns:
            others |= (items[0][key.name].astype(str) == OTHER_KEY).to_numpy()
    order = order[~others]
    if st.order:
        keys = []
        for o in reversed(st.order):  # np.lexsort: the last key is the primary one
            match = [f for f, it in zip(items, st.items, strict=True) if it.name == o.target]
            if match:
                v = match[0]["answer"].to_numpy(dtype=np.float64)
                v = np.nan_to_num(v, nan=-np.inf)
            else:
                col = o.target if o.target in items[0].columns else f"{o.target}_lo"
                column = items[0][col]
                if isinstance(column.dtype, pd.CategoricalDtype):
                    v = column.cat.codes.to_numpy().astype(np.float64)
                else:
                    v = pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)
            keys.append(-v if o.descending else v)
        order = order[np.lexsort([k[order] for k in keys])] if keys else order
    if st.limit is not None:
        order = order[: st.limit]
    rank = np.empty(groups, dtype=np.int64)
    rank[order] = np.arange(len(order))
    parts = []
    for j, f in enumerate(items):
        g = f.copy()
        g["_g"] = np.arange(groups)
        g = g[np.isin(g["_g"], order)]
        g["_r"] = rank[g["_g"].to_numpy()]
        g["_i"] = j
        parts.append(g)
    frame = pd.concat(parts, ignore_index=True).sort_values(["_r", "_i"], kind="stable")
    frame = frame.drop(columns=["_g", "_r", "_i"]).reset_index(drop=True)
    if "note" in frame.columns:
        frame["note"] = frame["note"].fillna("")
    frame["ci_method"] = frame["ci_method"].astype(str).astype("category")
    if expected:
        frame = frame.drop(columns=["answer"]).rename(columns={"std_error": "expected_std_error"})
        frame["ci_half_width"] = (frame["ci_high"] - frame["ci_low"]) / 2
        frame = frame.drop(columns=["ci_low", "ci_high"])
    frame.attrs["sql"] = st.sql
    return frame


def explain_text(frames: list[pd.DataFrame]) -> str:
    """The EXPLAIN report: the workload's shape, the plan and why, and each
    output cell's expected standard error (when the statements are answered
    one at a time, each statement's own plan and share)."""
    if not frames:
        return ""
    a = frames[0].attrs
    apart_mode = a.get("mode") == "one at a time"

    def spend(f: pd.DataFrame) -> str:
        return ", ".join(f"{k}={v:g}" for k, v in f.attrs.get("budget", {}).items())

    if apart_mode:
        lines = ["answered: each statement alone by its own plan with an equal share, inside "
                 "one envelope of the budget: one charge (nothing spent now)",
                 f"  why: {a.get('why', '')}"]
    else:
        lines = [f"workload: {a.get('workload', '')}",
                 f"plan: {a.get('plan')} at {spend(frames[0])} (nothing spent)",
                 f"  why: {a.get('why', '')}"]
        if a.get("ranking"):
            lines.append(str(a["ranking"]))
    together, apart = a.get("expected_total", math.nan), a.get("one_at_a_time_total", math.nan)
    if math.isfinite(together) and math.isfinite(apart) and together > 0:
        lines.append(f"expected total squared error: {together:.4g} jointly; {apart:.4g} asking "
                     f"each statement alone with an equal share ({apart / together:.2f}×)")
    for f in frames:
        lines.append(f"-- {f.attrs.get('sql', '')}")
        if apart_mode:
            lines.append(f"   plan: {f.attrs.get('plan')} at {spend(f)}")
        lines.append(f.to_string(index=False, max_rows=60))
    return "\n".join(lines)
