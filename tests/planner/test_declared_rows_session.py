"""A declared public row count at the front door (issue #29): the session's
`preview` and `ask(plan="auto")`, and `ektelo run --public-rows`, choose from
the decision table's declared-rows tree for free; `where=` does not use it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ektelo.cli import main
from ektelo.planner import table as planner_table
from ektelo.session import Session

DOMAIN = {"age": {"range": [0, 511], "width": 1}, "sex": {"values": ["F", "M"]}}
# A declared-rows tree Tier 0 would never pick on its own here: privelet
# below 10⁴ rows·ε, h2 above (both data-independent: the preview's interval
# is the answer's).
TREE = {"feature": "log10_signal", "threshold": 4.0,
        "below": {"plan": "privelet"}, "above": {"plan": "h2"}}


@pytest.fixture(autouse=True)
def hand_table(monkeypatch, tmp_path):
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"version": 1, "share": 0.05, "trained_on": "test",
                                "trees": {}, "declared": {"1d-prefix": TREE}}))
    monkeypatch.setattr(planner_table, "DEFAULT_PATH", path)


def frame(rows: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"age": rng.integers(0, 512, rows), "sex": rng.choice(["F", "M"], rows)})


def test_preview_and_ask_follow_the_declared_tree_and_agree():
    s = Session(frame(), DOMAIN, epsilon=1.0, seed=1, public_rows=3000)
    p = s.preview("cdf", "age", epsilon=0.5)
    assert p.plan == "privelet" and "declared public" in p.why
    assert s.budget.spent == 0
    answer = s.ask(s.question("cdf", "age"), epsilon=0.5)
    assert answer.attrs["plan"] == "privelet"
    np.testing.assert_allclose(answer["std_error"].to_numpy(), p.std_error)
    big = Session(frame(), DOMAIN, epsilon=1.0, seed=1, public_rows=10**6)
    assert big.preview("cdf", "age", epsilon=0.5).plan == "h2"


def test_without_a_declaration_or_with_where_the_tree_is_not_used():
    plain = Session(frame(), DOMAIN, epsilon=1.0, seed=1)
    assert "declared" not in plain.preview("cdf", "age", epsilon=0.5).why
    s = Session(frame(), DOMAIN, epsilon=1.0, seed=1, public_rows=3000)
    filtered = s.ask(s.question("cdf", "age"), where="sex == 'F'", epsilon=0.5)
    assert filtered.attrs["plan"] != "privelet"


def test_a_bad_declaration_is_refused_at_once():
    with pytest.raises(ValueError, match="public_rows"):
        Session(frame(), DOMAIN, epsilon=1.0, public_rows=-1)


def test_cli_public_rows_explains_the_declared_choice(tmp_path, capsys):
    data = tmp_path / "t.csv"
    frame().to_csv(data, index=False)
    domain = tmp_path / "d.json"
    domain.write_text(json.dumps(DOMAIN))
    code = main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
                 "--workload", "cdf:age", "--epsilon", "0.5", "--public-rows", "3000",
                 "--explain"])
    out = capsys.readouterr().out
    assert code == 0 and "privelet" in out and "declared public" in out
    with pytest.raises(SystemExit) as stop:  # argparse's refusal, before anything is read
        main(["run", "--no-ledger", "--data", str(data), "--domain", str(domain),
              "--workload", "cdf:age", "--epsilon", "0.5", "--public-rows", "0"])
    assert stop.value.code == 2 and "public-rows must be a finite positive number" in \
        capsys.readouterr().err
