"""Datasets ektelo knows: a synthetic census-like table it generates itself,
and the benchmark data of a data directory the caller names (`DatasetInfo.path`
and `available` take that directory; the library looks nothing up itself).

`census_like(rows, seed)` needs no download: it draws a table shaped like the
CPS extract of the paper's census case study (§9.2) — age, sex, race,
marital status and salary — from a fixed generative model:

* age in years 18–89, from a mixture of two broad normals (working-age bulge);
* sex uniform; race from fixed shares (0.62, 0.18, 0.13, 0.07);
* marital status conditional on age (young people mostly never married,
  older people more often widowed);
* salary log-normal with a mean rising with age up to the 50s, a gap between
  sexes, and 4% of people with no salary; clipped to [0, 500000).

The model is public and made up; it only has to look like census data so the
demo exercises the same plans on the same kind of skew.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import _validate as check
from .domain import Domain

__all__ = ["KNOWN", "DatasetInfo", "census_like", "census_like_domain"]

MARITAL = [
    "never-married",
    "married",
    "married-spouse-absent",
    "separated",
    "divorced",
    "widowed",
    "civil-partnership",
]
RACE = ["white", "black", "hispanic", "asian-other"]
SALARY_BIN = 1000
SALARY_BINS = 500


def census_like_domain() -> Domain:
    """The domain of `census_like` tables (a domain a user could write by hand)."""
    return Domain.from_dict(
        {
            "age": {"bins": list(range(18, 91))},
            "sex": {"values": ["F", "M"]},
            "race": {"values": RACE},
            "marital": {"values": MARITAL},
            "salary": {"bins": [SALARY_BIN * i for i in range(SALARY_BINS + 1)]},
        }
    )


def census_like(rows: int = 50_000, seed: int = 0) -> tuple[pd.DataFrame, Domain]:
    """A synthetic census-like table and its domain (see the module docstring)."""
    rows = check.positive_int(rows, "rows")
    rng = np.random.default_rng(seed)
    young = rng.random(rows) < 0.55
    age = np.where(young, rng.normal(33, 8, rows), rng.normal(56, 12, rows))
    age = np.clip(np.round(age), 18, 89).astype(int)
    sex = rng.choice(["F", "M"], size=rows)
    race = rng.choice(RACE, size=rows, p=[0.62, 0.18, 0.13, 0.07])
    p_married = np.clip((age - 20) / 25, 0.05, 0.65)
    p_widowed = np.clip((age - 55) / 60, 0.0, 0.35)
    u = rng.random(rows)
    marital = np.select(
        [u < p_widowed, u < p_widowed + p_married, u < p_widowed + p_married + 0.12],
        ["widowed", "married", "divorced"],
        default="never-married",
    )
    other = rng.random(rows) < 0.06
    marital = np.where(other, rng.choice(MARITAL[2:4] + MARITAL[6:], size=rows), marital)
    log_mean = 10.2 + 0.6 * np.exp(-(((age - 52) / 18) ** 2)) + np.where(sex == "M", 0.18, 0.0)
    salary = np.exp(rng.normal(log_mean, 0.7))
    salary = np.where(rng.random(rows) < 0.04, 0.0, salary)
    salary = np.clip(salary, 0, SALARY_BIN * SALARY_BINS - 1)
    frame = pd.DataFrame(
        {"age": age, "sex": sex, "race": race, "marital": marital, "salary": salary.round(2)}
    )
    return frame, census_like_domain()


@dataclass(frozen=True)
class DatasetInfo:
    """A known dataset: where it comes from and what it is."""

    name: str
    description: str
    relative_path: str | None  # under the data directory; None = generated

    def path(self, data_dir: Path | str) -> Path | None:
        """Where this dataset lives under `data_dir` (None for a generated one)."""
        return None if self.relative_path is None else Path(data_dir) / self.relative_path

    def available(self, data_dir: Path | str | None) -> bool:
        """Whether the dataset can be had: generated, or present under `data_dir`."""
        if self.relative_path is None:
            return True
        return data_dir is not None and (Path(data_dir) / self.relative_path).exists()


KNOWN = [
    DatasetInfo("census-like", "synthetic census-like table, generated (age, sex, race, "
                "marital, salary; 50,000 rows)", None),
    DatasetInfo("adult", "UCI Adult 1994 Census extract, 48,842 rows x 14 coded attributes",
                "adult/adult.csv"),
    DatasetInfo("credit", "Default of credit card clients (Yeh & Lien 2009), 30,000 rows",
                "credit/credit_default.csv"),
    DatasetInfo("dpbench-1d", "DPBench 1-D histograms, 10 datasets of 4096 bins",
                "dpbench/1d"),
    DatasetInfo("dpbench-2d", "DPBench 2-D histograms, 6 datasets of 256x256 cells",
                "dpbench/2d"),
]
