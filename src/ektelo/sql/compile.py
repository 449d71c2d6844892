"""SQL text → statement specs (public): sqlglot parses, this module walks the
tree and keeps only what ektelo answers, checked against the public domain
before anything is spent.

Accepted: ``SELECT`` of ``COUNT(*)`` (or ``COUNT(col)``: a domain has no
missing values), ``SUM(col)``, ``AVG(col)`` and grouping keys, ``FROM`` one
table, ``WHERE`` with comparisons, ``BETWEEN``, ``IN``/``NOT IN``,
``AND``/``OR``/``NOT`` (compiled to the predicates of `ektelo.predicates`,
the same ones `ektelo.where.parse_where` builds from the equivalent
filter text), ``GROUP BY`` columns and binned expressions
``FLOOR(col / w) * w`` / ``FLOOR(col / w)`` (by name, alias or ordinal),
``ORDER BY`` keys or aggregates and ``LIMIT`` (post-processing of released
answers). A leading ``EXPLAIN`` asks for the plan and expected errors only.

Anything else — joins, subqueries, window functions, ``COUNT(DISTINCT …)``,
``HAVING``, ``DISTINCT``, ``WITH``, set operations, other functions — is a
`SqlError` naming the clause, raised here (nothing spent).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

from ..domain import Domain
from ..errors import SqlError, WhereError
from ..predicates import Predicate, col

__all__ = ["Item", "Key", "Order", "Statement", "compile_sql"]


@dataclass(frozen=True)
class Key:
    """A grouping key: attribute `attr`, or its values in bins of `width`
    (``FLOOR(attr / width)``; `scaled`: times `width`, the bin's lower value);
    `name` is the output column."""

    name: str
    attr: str
    width: float | None = None
    scaled: bool = False


@dataclass(frozen=True)
class Item:
    """An aggregate of SELECT: `func` "count", "sum" or "mean" of `attr`
    (None for a count); `name` is its output label (alias or SQL text)."""

    name: str
    func: str
    attr: str | None = None


@dataclass(frozen=True)
class Order:
    """One ORDER BY term: a key's or an item's output name."""

    target: str
    descending: bool = False


@dataclass(frozen=True)
class Statement:
    """One SELECT, compiled: what to measure (`items` by `keys` where
    `where`) and how to present it (`order`, `limit`)."""

    sql: str
    items: tuple[Item, ...]
    keys: tuple[Key, ...]
    where: Predicate | None
    order: tuple[Order, ...] = ()
    limit: int | None = None


def compile_sql(text: str, domain: Domain) -> tuple[list[Statement], bool]:
    """The statements of `text` (separated by ``;``) and whether they were
    asked with EXPLAIN; a `SqlError` naming the clause for anything else."""
    parsed = _parse(text)
    explained = [e for _, e in parsed]
    if any(explained) and not all(explained):
        raise SqlError("sql: EXPLAIN applies to the whole call (its statements form one "
                       "workload): put it before every statement, or use --explain")
    return [_statement(t, domain) for t, _ in parsed], all(explained)


def _parse(text: str) -> list[tuple[Any, bool]]:
    """Each statement's tree, and whether EXPLAIN preceded it."""
    import logging

    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    if not isinstance(text, str) or not text.strip():
        raise SqlError("sql: no statement given")
    quiet = logging.getLogger("sqlglot")  # EXPLAIN parses as a Command: handled below
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        trees = [t for t in sqlglot.parse(text) if t is not None]
    except ParseError as exc:
        first = str(exc).splitlines()[0]
        raise SqlError(f"sql: cannot parse: {first}") from None
    finally:
        quiet.setLevel(level)
    if not trees:
        raise SqlError("sql: no statement given")
    out = []
    for tree in trees:
        is_explain = False
        if isinstance(tree, exp.Command) and str(tree.this).upper() == "EXPLAIN":
            inner = tree.expression.name if isinstance(tree.expression, exp.Literal) else str(
                tree.expression)
            try:
                tree = sqlglot.parse_one(inner)
            except ParseError as exc:
                raise SqlError(f"sql: cannot parse: {str(exc).splitlines()[0]}") from None
            is_explain = True
        out.append((tree, is_explain))
    return out


def open_columns(text: str, domain: Domain) -> list[str]:
    """The domain's open columns (issue #39) that `text` names, in domain
    order — their keys are released before the statements can compile. One
    named in a WHERE is refused here, before anything is spent: its keys are
    unknown, so nothing can be compared to them."""
    from sqlglot import exp

    if not domain.open:
        return []
    trees = [t for t, _ in _parse(text)]
    named = {str(c.name) for t in trees for c in t.find_all(exp.Column)}
    filtered = {str(c.name) for t in trees if t.args.get("where") is not None
                for c in t.args["where"].find_all(exp.Column)} & set(domain.open)
    if filtered:
        raise SqlError(f"sql: WHERE on open column(s) {sorted(filtered)}: their keys are "
                       "unknown until released (Session.release_keys), so nothing can be "
                       "compared to them")
    return [o for o in domain.open if o in named]


# -- one statement ----------------------------------------------------------------------
def _refuse(clause: str, why: str = "") -> SqlError:
    return SqlError(f"sql: {clause} is not supported{': ' + why if why else ''} "
                    "(nothing was spent)")


def _statement(tree: Any, domain: Domain) -> Statement:
    from sqlglot import exp

    if isinstance(tree, exp.Union | exp.Intersect | exp.Except):
        raise _refuse(type(tree).__name__.upper(), "one SELECT per statement")
    if not isinstance(tree, exp.Select):
        raise _refuse(f"{type(tree).__name__.upper()} statement", "only SELECT is answered")
    _check_clauses(tree)
    sql = tree.sql()
    # SELECT: aggregates and keys, in order
    keys_by_name: dict[str, Key] = {}
    group_exprs = list(tree.args["group"].expressions) if tree.args.get("group") else []
    select_exprs = list(tree.expressions)
    aliases = {e.alias: e.this for e in select_exprs if isinstance(e, exp.Alias)}
    keys: list[Key] = []
    for g in group_exprs:
        target = g
        if isinstance(g, exp.Literal) and not g.is_string:  # GROUP BY 2 (an ordinal)
            i = int(g.name)
            if not 1 <= i <= len(select_exprs):
                raise SqlError(f"sql: GROUP BY {i}: the SELECT list has {len(select_exprs)} "
                               "items")
            target = select_exprs[i - 1]
        elif isinstance(g, exp.Column) and g.name in aliases and g.name not in domain:
            target = exp.alias_(aliases[g.name], g.name)
        key = _key(target, domain)
        if any(k.attr == key.attr for k in keys):
            raise SqlError(f"sql: GROUP BY names {key.attr!r} twice")
        keys.append(key)
        keys_by_name[key.name] = key
    items: list[Item] = []
    for e in select_exprs:
        if isinstance(e, exp.Star):
            raise _refuse("SELECT *", "select COUNT(*), SUM(col), AVG(col) and GROUP BY keys")
        item = _item(e, domain)
        if item is not None:
            items.append(item)
            continue
        key = _key(e, domain)
        match = next((k for k in keys if (k.attr, k.width, k.scaled)
                      == (key.attr, key.width, key.scaled)), None)
        if match is None:
            raise SqlError(f"sql: {e.sql()!r} in SELECT is neither an aggregate nor a GROUP BY "
                           "key")
        if key.name != match.name:  # SELECT sex AS s ... GROUP BY sex: the alias names it
            keys[keys.index(match)] = Key(key.name, match.attr, match.width, match.scaled)
    if not items:
        raise SqlError("sql: the SELECT list has no aggregate: COUNT(*), SUM(col) or AVG(col)")
    where = _predicate(tree.args["where"].this, domain) if tree.args.get("where") else None
    names = {k.name for k in keys} | {i.name for i in items}
    order: list[Order] = []
    if tree.args.get("order"):
        for o in tree.args["order"].expressions:
            order.append(_order(o, keys, items, names, domain))
    limit = None
    if tree.args.get("limit"):
        value = tree.args["limit"].expression
        if not (isinstance(value, exp.Literal) and not value.is_string and value.name.isdigit()):
            raise SqlError(f"sql: LIMIT needs a whole number, got {value.sql()!r}")
        limit = int(value.name)
    return Statement(sql, tuple(items), tuple(keys), where, tuple(order), limit)


def _check_clauses(tree: Any) -> None:
    """Refuse, by name, every clause or expression ektelo does not answer."""
    from sqlglot import exp

    for name, clause in (("with", "WITH (a common table expression)"), ("joins", "JOIN"),
                         ("having", "HAVING"), ("distinct", "SELECT DISTINCT"),
                         ("offset", "OFFSET"), ("qualify", "QUALIFY"),
                         ("laterals", "LATERAL"), ("windows", "WINDOW")):
        if tree.args.get(name) or tree.args.get(name + "_"):  # (sqlglot spells some with _)
            raise _refuse(clause)
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None:
        raise _refuse("a SELECT without FROM", "name the table")
    if not isinstance(source.this, exp.Table) or source.this.args.get("db"):
        what = "a subquery in FROM" if isinstance(source.this, exp.Subquery) else "FROM " + (
            source.this.sql())
        raise _refuse(what, "FROM the one protected table")
    for node in tree.walk():
        if node is tree:
            continue
        if isinstance(node, exp.Select | exp.Subquery):
            raise _refuse("a subquery")
        if isinstance(node, exp.Window):
            raise _refuse("a window function (OVER)")
        if isinstance(node, exp.Join):
            raise _refuse("JOIN")
        if isinstance(node, exp.Count) and isinstance(node.this, exp.Distinct):
            raise _refuse("COUNT(DISTINCT …)", "distinct counts are not linear queries")


def _column(node: Any, domain: Domain, where: str) -> str:
    from sqlglot import exp

    if not isinstance(node, exp.Column) or node.table:
        raise SqlError(f"sql: {where}: expected a column of the table, got {node.sql()!r}")
    name = node.name
    if name not in domain:
        raise SqlError(f"sql: {where}: unknown column {name!r}; the table has "
                       f"{list(domain.names)}")
    return str(name)


def _item(e: Any, domain: Domain) -> Item | None:
    """An aggregate of the SELECT list, or None for a key."""
    from sqlglot import exp

    node, alias = (e.this, e.alias) if isinstance(e, exp.Alias) else (e, None)
    label = alias or node.sql()
    if isinstance(node, exp.Count):
        if not isinstance(node.this, exp.Star):
            _column(node.this, domain, "COUNT")
        return Item(label, "count")
    if isinstance(node, exp.Sum | exp.Avg):
        what = "SUM" if isinstance(node, exp.Sum) else "AVG"
        if not isinstance(node.this, exp.Column):
            raise _refuse(f"{what} of an expression ({node.this.sql()!r})",
                          f"{what}(col) of one column")
        return Item(label, "sum" if what == "SUM" else "mean", _column(node.this, domain, what))
    if isinstance(node, exp.AggFunc):
        raise _refuse(f"the aggregate {node.sql()!r}", "COUNT(*), SUM(col) and AVG(col) are")
    return None


def _number(node: Any) -> float | None:
    from sqlglot import exp

    if isinstance(node, exp.Literal) and not node.is_string:
        return float(node.name)
    return None


def _key(e: Any, domain: Domain) -> Key:
    """A GROUP BY key: a column, or FLOOR(col / w) [* w]."""
    from sqlglot import exp

    node, alias = (e.this, e.alias) if isinstance(e, exp.Alias) else (e, None)
    if isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        name = _column(node, domain, "GROUP BY")
        return Key(alias or name, name)
    scaled = False
    width = None
    floor = node
    if isinstance(node, exp.Mul):
        width = _number(node.expression)
        floor = node.this
        scaled = True
    if isinstance(floor, exp.Floor) and isinstance(floor.this, exp.Div):
        w = _number(floor.this.expression)
        if w is not None and w > 0 and (not scaled or width == w):
            name = _column(floor.this.this, domain, "GROUP BY")
            _check_binnable(domain, name, w)
            return Key(alias or node.sql(), name, w, scaled)
    raise _refuse(f"GROUP BY {node.sql()!r}",
                  "group by columns or binned columns FLOOR(col / w) * w or FLOOR(col / w)")


def _check_binnable(domain: Domain, name: str, w: float) -> None:
    attr = domain[name]
    if attr.bins is not None:
        edges = attr.bins
        for lo, hi in itertools.pairwise(edges):
            if math.floor(lo / w) != math.ceil(hi / w) - 1:
                raise SqlError(f"sql: GROUP BY FLOOR({name} / {w:g}): the bin [{lo:g}, {hi:g}) "
                               f"of {name} straddles a multiple of {w:g}")
    elif attr.values is not None and not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in attr.values):
        raise SqlError(f"sql: GROUP BY FLOOR({name} / …): {name} has text labels")


def _order(o: Any, keys: list[Key], items: list[Item], names: set[str],
           domain: Domain) -> Order:
    from sqlglot import exp

    node = o.this
    desc = bool(o.args.get("desc"))
    if isinstance(node, exp.Literal) and not node.is_string:
        raise _refuse("ORDER BY an ordinal", "order by a key or an aggregate by name")
    if isinstance(node, exp.Column) and not node.table and node.name in names:
        return Order(str(node.name), desc)
    text = node.sql()
    for i in items:
        if i.name == text:
            return Order(i.name, desc)
    item = _item(node, domain) if isinstance(node, exp.AggFunc) else None
    if item is not None:
        same = next((i for i in items if (i.func, i.attr) == (item.func, item.attr)), None)
        if same is not None:
            return Order(same.name, desc)
    raise SqlError(f"sql: ORDER BY {text!r}: order by a GROUP BY key or an aggregate of the "
                   "SELECT list")


# -- WHERE -------------------------------------------------------------------------
_OPS = {"EQ": "==", "NEQ": "!=", "LT": "<", "LTE": "<=", "GT": ">", "GTE": ">="}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _literal(node: Any) -> Any:
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _literal(node.this)
    if isinstance(node, exp.Neg):
        v = _literal(node.this)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise SqlError(f"sql: WHERE: cannot negate {node.this.sql()!r}")
        return -v
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return str(node.name)
        text = node.name
        try:
            return int(text)
        except ValueError:
            return float(text)
    raise SqlError(f"sql: WHERE: expected a literal value, got {node.sql()!r}")


def _predicate(node: Any, domain: Domain) -> Predicate:
    """A WHERE clause as the predicate `parse_where` builds from the same
    filter written in its syntax (checked by `where._check` alike)."""
    from sqlglot import exp

    from ..where import _check

    def check(name: str, op: str, value: Any) -> None:
        try:
            _check(domain, name, op, value)
        except WhereError as exc:
            raise SqlError("sql: WHERE" + str(exc).removeprefix("--where")) from None

    if isinstance(node, exp.Paren):
        return _predicate(node.this, domain)
    if isinstance(node, exp.And | exp.Or):
        left, right = _predicate(node.this, domain), _predicate(node.expression, domain)
        return (left & right) if isinstance(node, exp.And) else (left | right)
    if isinstance(node, exp.Not):
        return ~_predicate(node.this, domain)
    if isinstance(node, exp.Between):
        name = _column(node.this, domain, "WHERE")
        lo, hi = _literal(node.args["low"]), _literal(node.args["high"])
        check(name, ">=", lo)
        check(name, "<=", hi)
        between: Predicate = (col(name) >= lo) & (col(name) <= hi)  # `lo <= name <= hi`
        return between
    if isinstance(node, exp.In):
        if node.args.get("query") is not None:
            raise _refuse("a subquery")
        name = _column(node.this, domain, "WHERE")
        values = [_literal(v) for v in node.expressions]
        for v in values:
            check(name, "==", v)
        return col(name).isin(values)
    symbol = _OPS.get(type(node).__name__)
    if symbol is not None:
        left, right = node.this, node.expression
        if isinstance(left, exp.Column) and not isinstance(right, exp.Column):
            name, value = _column(left, domain, "WHERE"), _literal(right)
        elif isinstance(right, exp.Column) and not isinstance(left, exp.Column):
            name, value, symbol = _column(right, domain, "WHERE"), _literal(left), _FLIP[symbol]
        else:
            raise SqlError(f"sql: WHERE {node.sql()!r}: each comparison needs one column and "
                           "one value")
        check(name, symbol, value)
        c = col(name)
        made: Predicate = {"==": lambda: c == value, "!=": lambda: c != value,
                           "<": lambda: c < value, "<=": lambda: c <= value,
                           ">": lambda: c > value,
                           ">=": lambda: c >= value}[symbol]()
        return made
    if isinstance(node, exp.Is):
        raise _refuse("IS NULL", "a domain has no missing values")
    if isinstance(node, exp.Like | exp.ILike):
        raise _refuse("LIKE")
    raise _refuse(f"WHERE {node.sql()!r}",
                  "comparisons, BETWEEN, IN, AND, OR and NOT of columns and values")
