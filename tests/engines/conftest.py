"""Fixtures for the table-engine tests (issue #28): one shared Spark session.

DuckDB and PySpark are dev extras; Spark also needs Java. Where one is
missing its tests are skipped and the run says so LOUDLY at the end (a
terminal-summary section); with ``EKTELO_REQUIRE_COMPONENTS=1`` (set by
.ci/run) a missing component fails those tests instead of skipping them.

The Spark session is created once for the whole run: `local[2]`, UI and
console progress off, 2 shuffle partitions, driver memory bounded at 1 GB.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

REQUIRED = os.environ.get("EKTELO_REQUIRE_COMPONENTS") == "1"
_MISSING: list[str] = []


def _unavailable(component: str, why: str) -> None:
    """Skip (loudly) or, under EKTELO_REQUIRE_COMPONENTS=1, fail."""
    message = f"{component} tests cannot run: {why}"
    if message not in _MISSING:
        _MISSING.append(message)
    if REQUIRED:
        pytest.fail(f"{message} (EKTELO_REQUIRE_COMPONENTS=1 makes this a failure)")
    pytest.skip(message)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _MISSING:
        terminalreporter.section("TABLE ENGINES NOT TESTED", sep="!", red=True, bold=True)
        for line in _MISSING:
            terminalreporter.write_line(f"NOT RUN: {line}", red=True, bold=True)


@pytest.fixture(scope="session")
def duckdb_available() -> None:
    if importlib.util.find_spec("duckdb") is None:
        _unavailable("DuckDB", "the duckdb package is not installed (pip install -e '.[dev]')")


_SPARK: dict[str, Any] = {}


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    """The one local[2] session for every Spark test (started on first use)."""
    if importlib.util.find_spec("pyspark") is None:
        _unavailable("Spark", "the pyspark package is not installed (pip install -e '.[dev]')")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        _unavailable("Spark", "no Java runtime (java on PATH or JAVA_HOME)")
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
