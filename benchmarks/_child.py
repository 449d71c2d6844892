"""Helpers the benchmarks share: a measurement in a fresh child process (so
each path pays its own imports and its own peak memory), reported as one
JSON line on stdout, and this process's peak RSS."""

from __future__ import annotations

import json
import subprocess
from typing import Any


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `cmd`; its last stdout line parsed as JSON, or {"error": its last
    stderr line} when it failed."""
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM) in MB; NaN off Linux."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def local_spark() -> Any:
    """The benchmarks' Spark session: local[2], no UI or console progress,
    4 shuffle partitions, a 2 GB driver, errors only in its log."""
    import os

    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark
