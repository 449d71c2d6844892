"""Tests reach ektelo through its public interfaces (issue #23).

A test that pins a private name breaks on every refactor that keeps the
behaviour, and checks the implementation instead of the contract. This file
scans tests/ with `ast` and fails on any private ektelo name a test reaches
that is not in ALLOWED below, each entry with its one-line reason.

What counts as reaching a private name:

* importing a private ektelo module (`ektelo.operators._hdmm`, or
  `from ektelo.operators import _hdmm`), or a name starting with `_` from any
  ektelo module;
* an attribute `_x` read from an imported ektelo module or object
  (`selection._grow`, `ektelo.kernel.kernel._sources`);
* an attribute `_x` read from any other object when ektelo's source defines
  `_x` (as `self._x`, a private method, class or module attribute) and the
  test file does not define it itself — `protected._kernel`, `H._axes`;
* the same names spelled as strings: `getattr(obj, "_x")`,
  `monkeypatch.setattr("ektelo.mod._x", ...)`.

Dunder names (`__all__`, `__dict__`) are public protocol, not private names.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
PACKAGE = ROOT / "src" / "ektelo"


@dataclass(frozen=True)
class Allowed:
    """One allowlist entry: the private names (a regular expression over the
    qualified name), the test files they may appear in, and why."""

    names: str  # re.fullmatch over e.g. "ektelo.inference._system"
    files: tuple[str, ...]  # fnmatch over the test path relative to tests/
    reason: str


# The handful of reasons a test may reach a private name. What is not here
# has a public name: inside the kernel, privacy from the public layers is
# enforced for the package (test_imports.py: only `ektelo.kernel.__all__`), so
# the building blocks tests check line by line against their proof notes
# (DAWA's costs and DPs, AHP's err*, the exact samplers' steps and tables) are
# documented names of their kernel submodules, not private ones; so are the
# inference thresholds and caps tests lower (`tree_nnls.BLOCK_CELLS`, ...).
ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        r"<object>\._(conn|sources|port|kernel)",
        ("kernel/*", "store/*", "engines/*", "server/*"),
        "kernel white-box: isolation and durability tests read the kernel's state (the "
        "ledger store's connection and its durability settings; a kernel's sources, a "
        "handle's port), which no public accessor shows by design: handles are opaque",
    ),
    Allowed(
        r"ektelo\.matrix\.ranges\._(LARGE_RANGE|MAX_DIRECT_ENTRIES)"
        r"|ektelo\.inference\._mw_passes\._SCRATCH_ROWS",
        ("matrix/test_matrix_properties.py", "plans/test_mwem.py"),
        "size thresholds of modules private by design (range queries' direct-product "
        "limits, the multiplicative-weights passes' scratch rows), lowered so that a "
        "small input takes the path a large input takes",
    ),
    Allowed(
        r"ektelo\.inference\.tree_nnls\._(Parents|Grid|local)",
        ("inference/test_tree_nnls.py",),
        "fault injection into the tree NNLS's parent steps (a wrong line, the local "
        "price off or recorded, breakpoints set on ties): states no input can produce, "
        "to show the optimality certificate's power and the rounding cases",
    ),
    Allowed(
        r"ektelo\.inference\._system",
        ("inference/test_least_squares.py",),
        "inference's stacked system: grouping range measurements into one block (a "
        "speed-up that must not change the fit) shows only in the matrix it builds",
    ),
    Allowed(
        r"ektelo\.session\._Progress",
        ("test_cli.py",),
        "the session's progress indicator on a terminal and on a pipe, with its delays "
        "shortened (no public switch for them)",
    ),
)

# At most this many distinct private names reached by all tests together, and
# at most this many allowlist entries: "a handful" (issue #23).
HANDFUL_NAMES = 10
HANDFUL_ENTRIES = 5


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_module(module: str) -> bool:
    return any(_private(part) for part in module.split("."))


def _library_attributes() -> frozenset[str]:
    """Every private name ektelo's source defines: attributes, functions, classes."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return frozenset(n for n in names if _private(n))


def _defined_here(tree: ast.AST) -> set[str]:
    """Private names the test file defines itself (its own helpers and fakes)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return {n for n in names if _private(n)}


def _dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None when the chain does not start at a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _call_name(func: ast.expr) -> str | None:
    """`f` for a call of `f(...)` or of `obj.f(...)`."""
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


def _found(path: Path, library: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, qualified private name) for each private ektelo name `path` reaches."""
    tree = ast.parse(path.read_text(), str(path))
    own = _defined_here(tree)
    ektelo: dict[str, str] = {}  # local name -> the ektelo object it is bound to
    foreign: set[str] = set()  # local names bound to other libraries' modules
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "ektelo" or alias.name.startswith("ektelo."):
                    if _private_module(alias.name):
                        yield node.lineno, alias.name
                    if alias.asname:
                        ektelo[alias.asname] = alias.name
                    else:
                        ektelo["ektelo"] = "ektelo"
                else:
                    foreign.add(alias.asname or alias.name.partition(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "ektelo" or node.module.startswith("ektelo."):
                for alias in node.names:
                    if _private_module(node.module) or _private(alias.name):
                        yield node.lineno, f"{node.module}.{alias.name}"
                    ektelo[alias.asname or alias.name] = f"{node.module}.{alias.name}"
            else:
                foreign.update(alias.asname or alias.name for alias in node.names)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain = _dotted(node)
            if chain and chain[0] in ektelo:
                base = ektelo[chain[0]].split(".")
                parts = base + chain[1:]
                # Report each chain once: a name read from a private module
                # (`_hdmm.objective`), else the first private step
                # (`kernel._sources`, not again `kernel._sources._x`).
                first = next(i for i, part in enumerate(parts) if _private(part))
                cut = first + 1 if first < len(base) else first
                if cut == len(parts) - 1:
                    yield node.lineno, ".".join(parts)
            elif chain and chain[0] in foreign:
                continue
            elif node.attr in library and node.attr not in own:
                inner = node.value
                if not (isinstance(inner, ast.Attribute) and _private(inner.attr)):
                    yield node.lineno, f"<object>.{node.attr}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if re.fullmatch(r"ektelo(\.\w+)+", text) and _private_module(text):
                yield node.lineno, text
        elif (
            isinstance(node, ast.Call)
            and _call_name(node.func) in {"getattr", "setattr", "hasattr", "delattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
        ):
            # getattr(obj, "_x"), monkeypatch.setattr(module, "_x", ...)
            name = node.args[1].value
            chain = _dotted(node.args[0])
            if chain and chain[0] in ektelo:
                yield node.lineno, ".".join([ektelo[chain[0]], *chain[1:], name])
            elif name in library and name not in own:
                yield node.lineno, f"<object>.{name}"


@functools.cache  # one pass over src/ and tests/ for both tests below
def _scan() -> list[tuple[str, int, str]]:
    library = _library_attributes()
    out: list[tuple[str, int, str]] = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        for line, name in _found(path, library):
            out.append((rel, line, name))
    return out


def _allowed(rel: str, name: str) -> Allowed | None:
    for entry in ALLOWED:
        if re.fullmatch(entry.names, name) and any(fnmatch(rel, f) for f in entry.files):
            return entry
    return None


def test_tests_reach_only_allowlisted_private_names() -> None:
    unexplained = sorted(
        f"{rel}:{line}: {name}" for rel, line, name in _scan() if _allowed(rel, name) is None
    )
    assert not unexplained, (
        "tests reach private ektelo names not in ALLOWED (test through the public "
        "interface, make the name public, or allowlist it with a reason):\n  "
        + "\n  ".join(unexplained)
    )


def test_the_allowlist_is_a_handful_and_every_entry_is_used() -> None:
    assert len(ALLOWED) <= HANDFUL_ENTRIES, "the allowlist is meant to stay a handful"
    found = _scan()
    names = sorted({name for _, _, name in found})
    assert len(names) <= HANDFUL_NAMES, (
        f"tests reach {len(names)} distinct private ektelo names, more than a handful "
        f"({HANDFUL_NAMES}): make building blocks public names of their module or test "
        "through the public interface:\n  " + "\n  ".join(names)
    )
    for entry in ALLOWED:
        assert entry.reason.strip(), f"{entry.names}: no reason given"
        assert any(_allowed(rel, name) is entry for rel, _, name in found), (
            f"{entry.names} ({entry.files}) is allowlisted but no test uses it: drop it"
        )
