"""`ektelo domain init` proposing numeric ranges privately (issue #38): bounds
are round grid edges from a noisy CDF at a stated ε, or public ranges typed
by the user — never the raw private minimum or maximum."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ektelo.cli import main
from ektelo.domain_ranges import GRID, private_range, private_ranges
from ektelo.domain_template import domain_template


def _table(rows: int = 5000) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    rate = rng.uniform(0.5, 57.5999908, rows)
    rate[0] = 57.5999908  # the raw private maximum
    return pd.DataFrame({"rate": rate, "k": rng.integers(3, 40, rows),
                         "kind": rng.choice(["x", "y"], rows)})


def test_private_range_is_grid_edges_around_the_bulk() -> None:
    t = _table()
    lo, hi = private_range(t["rate"], 1.0, seed=3)
    assert lo in GRID and hi in GRID
    assert lo <= np.quantile(t["rate"], 0.05) and hi >= np.quantile(t["rate"], 0.95)
    assert hi <= 200 and lo >= -1  # not pushed out into the empty grid


def test_private_ranges_replace_every_numeric_range_and_spend_the_stated_eps() -> None:
    t = _table()
    spec, _ = domain_template(t)
    out, notes, spent = private_ranges(t, spec, epsilon=0.5, public={"k": (0, 50)}, seed=1)
    assert spent == pytest.approx(0.5)  # one private column; k is public
    assert out["k"] == {"range": [0, 50], "width": 1}
    assert out["kind"] == spec["kind"]
    assert "57.5999908" not in json.dumps(out)
    assert all(v in GRID for v in out["rate"]["range"][1:])
    assert len(notes) == 2
    with pytest.raises(ValueError, match="not in the template"):
        private_ranges(t, spec, public={"nosuch": (0, 1)})


def test_cli_domain_init_with_private_and_public_ranges(tmp_path, capsys) -> None:
    data = tmp_path / "t.csv"
    _table(2000).to_csv(data, index=False)
    out = tmp_path / "t.json"
    assert main(["domain", "init", str(data), "--out", str(out), "--range-epsilon", "0.5",
                 "--range", "k=0:50"]) == 0
    text = out.read_text()
    assert "57.5999908" not in text and "57.59" not in text
    spec = json.loads(text)
    assert spec["k"] == {"range": [0, 50], "width": 1}
    printed = capsys.readouterr().out
    assert "spent ε=0.5 on numeric ranges" in printed
    with pytest.raises(SystemExit):
        main(["domain", "init", str(data), "--out", str(out), "--force", "--range", "k=oops"])
