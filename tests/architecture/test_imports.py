"""The import contracts of DESIGN.md, checked on the source tree (issue #35).

* the leaves (`codec`: arrays and fractions as JSON; `errors`: the
  exception tree, which loads its re-exports lazily) import nothing of ektelo,
  so every layer may import them;
* `matrix` imports nothing of ektelo but itself and the leaves (algebra only);
* `kernel` imports only matrix, domain, measurement, budget and itself, and
  so do they — the code a privacy auditor reads is closed under its imports;
* `engines` import only the kernel's contract (`kernel.contracts`) and the
  public records (domain, predicates); `ledger_store` only the kernel's
  ledger (Algorithm 2) and records — the code beneath the contracts;
* `port` imports the kernel, never the reverse; nothing but the port, the
  engines and the stores knows the kernel's modules: everything above uses the
  kernel's public names (`ektelo.kernel.__all__`), never its modules;
* `plans` never imports `planner` (the planner registers "auto" itself);
* no import cycle among ektelo's modules, counting imports inside functions
  (only `if TYPE_CHECKING:` blocks are left out: they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ektelo.kernel

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "ektelo"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module imported, names taken from it) for every import that can run."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, tuple[str, ...]]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                found.extend((alias.name, ()) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                names = tuple(alias.name for alias in child.names)
                found.append((target, names))
            visit(child)

    visit(ast.parse(path.read_text(), str(path)))
    return found


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _ektelo_targets(module: str) -> set[str]:
    """The ektelo modules `module` imports (a `from pkg import sub` counts as sub)."""
    out: set[str] = set()
    for target, names in _imports(MODULES[module]):
        if not (target == "ektelo" or target.startswith("ektelo.")):
            continue
        subs = {f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES}
        out |= subs or {target}
    out.discard(module)
    return out


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


LEAVES = ("ektelo.codec", "ektelo.errors")


@pytest.mark.parametrize("module", LEAVES)
def test_the_leaves_import_nothing_of_ektelo(module: str) -> None:
    """Nothing but the package itself, whose __init__ imports nothing at load
    time (its names, and `errors`' re-exports, load lazily)."""
    assert _ektelo_targets("ektelo") == set()
    outside = _ektelo_targets(module) - {"ektelo"}
    assert not outside, f"{module} imports {sorted(outside)}"


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, "ektelo.matrix")])
def test_matrix_imports_nothing_of_ektelo(module: str) -> None:
    outside = {
        t for t in _ektelo_targets(module) if not _within(t, "ektelo.matrix") and t not in LEAVES
    }
    assert not outside, f"{module} imports {sorted(outside)}"


KERNEL_LINES = 3_925  # a ratchet: lowered as the carve proceeds (issue #35: ~2,100)

KERNEL_MAY_IMPORT = (
    "ektelo.kernel",
    "ektelo.matrix",
    "ektelo.domain",
    "ektelo.measurement",
    "ektelo.budget",
    *LEAVES,
)


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, "ektelo.kernel")])
def test_kernel_imports_only_matrix_domain_measurement(module: str) -> None:
    outside = {
        t for t in _ektelo_targets(module) if not any(_within(t, p) for p in KERNEL_MAY_IMPORT)
    }
    assert not outside, f"{module} imports {sorted(outside)}"


def test_kernel_is_closed_under_its_imports() -> None:
    """What the kernel imports imports nothing else either (so `domain`,
    `budget` and `measurement` keep their own checks, not `ektelo._validate`)."""
    seen: set[str] = set()
    todo = [m for m in MODULES if _within(m, "ektelo.kernel")]
    while todo:
        module = todo.pop()
        if module in seen or module not in MODULES:
            continue
        seen.add(module)
        todo.extend(_ektelo_targets(module))
    outside = {m for m in seen if not any(_within(m, p) for p in KERNEL_MAY_IMPORT)}
    assert not outside, f"the kernel's imports reach {sorted(outside)}"


BENEATH = {
    # package: what it may import of ektelo besides itself
    "ektelo.engines": ("ektelo.kernel.contracts", "ektelo.domain", "ektelo.predicates"),
    "ektelo.ledger_store": ("ektelo.kernel.ledger", "ektelo.budget"),
}


@pytest.mark.parametrize(
    ("package", "module"),
    [(pkg, m) for pkg in BENEATH for m in MODULES if _within(m, pkg)],
)
def test_engines_and_stores_import_only_the_contracts(package: str, module: str) -> None:
    allowed = (package, *BENEATH[package], *LEAVES)
    outside = {t for t in _ektelo_targets(module) if not any(_within(t, a) for a in allowed)}
    assert not outside, f"{module} imports {sorted(outside)}"


def test_the_kernel_never_imports_the_port() -> None:
    for module in (m for m in MODULES if _within(m, "ektelo.kernel")):
        above = {t for t in _ektelo_targets(module) if not _within(t, "ektelo.kernel")}
        assert not any(_within(t, "ektelo.port") for t in above), module


@pytest.mark.parametrize("module", [m for m in MODULES if _within(m, "ektelo.plans")])
def test_plans_never_import_the_planner(module: str) -> None:
    assert not any(_within(t, "ektelo.planner") for t in _ektelo_targets(module)), module


def test_the_kernel_is_small() -> None:
    """The trusted code an auditor reads (docs/audit.md) stays near 2,100 lines."""
    lines = sum(len(p.read_text().splitlines()) for p in (PACKAGE / "kernel").rglob("*.py"))
    assert lines <= KERNEL_LINES, f"kernel/ is {lines} lines (the budget is {KERNEL_LINES})"


PUBLIC_KERNEL_NAMES = set(ektelo.kernel.__all__)


KNOWS_THE_KERNEL = ("ektelo.kernel", *BENEATH)


@pytest.mark.parametrize(
    "module", [m for m in MODULES if not any(_within(m, p) for p in KNOWS_THE_KERNEL)]
)
def test_public_layers_use_only_the_kernels_public_names(module: str) -> None:
    for target, names in _imports(MODULES[module]):
        if target == "ektelo.kernel":
            private = [n for n in names if n not in PUBLIC_KERNEL_NAMES]
            assert not private, f"{module} imports {private} from ektelo.kernel"
        else:
            assert not target.startswith("ektelo.kernel."), f"{module} imports {target}"


def test_no_import_cycle() -> None:
    graph = {m: _ektelo_targets(m) & set(MODULES) for m in MODULES}
    # a package's __init__ re-exporting its modules is not a cycle with them
    for m in graph:
        graph[m] = {t for t in graph[m] if not _within(m, t)}
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycle = [*stack[stack.index(t) :], t]
                raise AssertionError("import cycle: " + " → ".join(cycle))
            if t not in state:
                walk(t)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            walk(m)
