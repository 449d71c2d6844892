"""The lazy plan registry (#41): `registry.PLAN_MODULES`, the static table of
plan name → the module that registers it, agrees with what the modules
actually register (so the two cannot drift); importing `ektelo.plans` imports
no plan module, and `plans.get(name)` imports only that plan's module."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import ektelo.planner
import ektelo.plans
from ektelo.plans import registry


def _import_all(package: object) -> None:
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):  # type: ignore[attr-defined]
        importlib.import_module(info.name)


def test_the_static_table_matches_what_the_modules_register() -> None:
    # every module that can register a plan: the plan library and the planner
    _import_all(ektelo.plans)
    _import_all(ektelo.planner)
    # (a plan of the user's own, registered by their module, is no drift)
    ours = {name: module for name, module in registry.registered_modules().items()
            if module.startswith(("ektelo.plans.", "ektelo.planner."))}
    assert ours == registry.PLAN_MODULES
    assert set(registry.names()) >= set(registry.PLAN_MODULES)


def _modules_after(code: str) -> set[str]:
    probe = (f"{code}\nimport sys\n"
             "print(' '.join(m for m in sys.modules if m.startswith('ektelo.pl')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    return set(out.split())


PLAN_MODULES = {m for m in registry.PLAN_MODULES.values() if m.startswith("ektelo.plans.")}


def test_importing_the_package_imports_no_plan() -> None:
    loaded = _modules_after("from ektelo import plans\nassert len(plans.names()) == "
                            f"{len(registry.PLAN_MODULES)}")
    assert not loaded & PLAN_MODULES
    assert "ektelo.planner.auto" not in loaded


def test_get_imports_only_that_plans_module() -> None:
    loaded = _modules_after("from ektelo import plans\nplans.get('identity')")
    assert loaded & PLAN_MODULES == {"ektelo.plans.data_independent"}
    loaded = _modules_after("from ektelo import plans\nplans.get('aim')")
    assert "ektelo.plans.aim" in loaded and "ektelo.plans.mwem" not in loaded


def test_plan_functions_keep_their_names_when_their_module_loads_late() -> None:
    # aim, mst, mwem and privbayes share their name with their module: a late
    # import of the module must not hide the plan function on the package
    code = ("import ektelo.plans as p\nimport ektelo.plans.aim, ektelo.plans.mst\n"
            "from ektelo.plans.mwem import MAX_PASSES\nimport ektelo.plans.privbayes\n"
            "assert all(callable(f) and f.__name__ == n for n, f in "
            "[('aim', p.aim), ('mst', p.mst), ('mwem', p.mwem), ('privbayes', p.privbayes)])")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert ektelo.plans.aim is registry.get("aim").function
    assert ektelo.plans.mwem is registry.get("mwem").function
