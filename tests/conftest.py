"""Shared fixtures and the run's progress.

* `rng`: a seeded generator for test data; `SHARED`/`DATA`: the shared data path.
* `spark_session`: the ONE local Spark session of the whole run (its JVM starts
  once, on first use, for every test module that needs Spark: the engine tests
  and the CLI's `--engine spark`), and `duckdb_available`. Where DuckDB,
  PySpark or Java is missing those tests are skipped and the run says so
  LOUDLY at the end (a terminal-summary section); with
  ``EKTELO_REQUIRE_COMPONENTS=1`` (set by .ci/run) a missing component fails
  them instead.
* `STRESS_FULL`: the load and crash tests (marked `slow`) run at a quick
  scale in the suite (every invariant checked, fewer processes, requests and
  kill rounds); ``EKTELO_STRESS=full`` (`make stress`) runs them at the
  full scale of issue #26.
* Hypothesis runs derandomized with no example database (profile "ektelo",
  loaded unless $HYPOTHESIS_PROFILE names another): the same examples on every
  run and every machine, so a property test cannot pass on one run and fail
  on the next. `HYPOTHESIS_PROFILE=explore` draws fresh random examples.
* Progress by folder: in the default (quiet) output each test folder's dots
  start on a line naming the folder and the seconds the run has taken so far,
  so a slow or stuck run shows where it is.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import settings

settings.register_profile("ektelo", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ektelo"))

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
DATA = SHARED / "data"

REQUIRED = os.environ.get("EKTELO_REQUIRE_COMPONENTS") == "1"
STRESS_FULL = os.environ.get("EKTELO_STRESS") == "full"
_MISSING: list[str] = []


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(12345)


# -- optional components: DuckDB and one Spark session --------------------------------
def unavailable(component: str, why: str) -> None:
    """Skip (loudly) or, under EKTELO_REQUIRE_COMPONENTS=1, fail."""
    message = f"{component} tests cannot run: {why}"
    if message not in _MISSING:
        _MISSING.append(message)
    if REQUIRED:
        pytest.fail(f"{message} (EKTELO_REQUIRE_COMPONENTS=1 makes this a failure)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def duckdb_available() -> None:
    if importlib.util.find_spec("duckdb") is None:
        unavailable("DuckDB", "the duckdb package is not installed (pip install -e '.[dev]')")


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """The one local[2] session for every Spark test (started on first use):
    UI and console progress off, 2 shuffle partitions, driver memory bounded at
    1 GB. It is also the active session, which `ektelo run --engine spark`
    picks up (`SparkSession.getActiveSession()`) instead of starting a JVM."""
    if importlib.util.find_spec("pyspark") is None:
        unavailable("Spark", "the pyspark package is not installed (pip install -e '.[dev]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        unavailable("Spark", "no Java runtime (java on PATH or JAVA_HOME)")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no network lookup of the host
    with warnings.catch_warnings():  # PySpark warns about pandas versions on import
        warnings.simplefilter("ignore")
        from pyspark.sql import SparkSession

        session = (
            SparkSession.builder.master("local[2]")
            .appName("ektelo-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "1g")
            .config("spark.sql.execution.arrow.pyspark.enabled", "false")
            # tiny tables: no adaptive planning, no whole-stage code generation
            .config("spark.sql.adaptive.enabled", "false")
            .config("spark.sql.codegen.wholeStage", "false")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture
def spark(spark_session: Any) -> Any:
    return spark_session


# -- the run's progress and closing notes ---------------------------------------------
_PROGRESS: dict[str, Any] = {"folder": None, "start": None}


def _folder(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return path.rsplit("/", 1)[0] if "/" in path else path


def pytest_runtest_logstart(nodeid: str, location: tuple[str, int | None, str]) -> None:
    config = _CONFIG.get("config")
    if config is None or config.get_verbosity() > 0:
        return  # verbose runs name every test already
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    folder = _folder(nodeid)
    if reporter is None or folder == _PROGRESS["folder"]:
        return
    if _PROGRESS["start"] is None:
        _PROGRESS["start"] = time.monotonic()
    _PROGRESS["folder"] = folder
    reporter.ensure_newline()
    reporter.write(f"{folder} (at {time.monotonic() - _PROGRESS['start']:.0f} s) ")


_CONFIG: dict[str, pytest.Config] = {}


def pytest_configure(config: pytest.Config) -> None:
    _CONFIG["config"] = config


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _MISSING:
        terminalreporter.section("COMPONENTS NOT TESTED", sep="!", red=True, bold=True)
        for line in _MISSING:
            terminalreporter.write_line(f"NOT RUN: {line}", red=True, bold=True)
