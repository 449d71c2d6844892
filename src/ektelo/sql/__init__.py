"""SQL in, a jointly planned workload out (issue #39): `compile` (SQL text →
statement specs, sqlglot's parser, refusals by clause), `joint` (statements
→ one workload over one vector), `run` (answer or EXPLAIN through an analyst
session), `output` (frames to CSV/Parquet/JSON). See docs/sql.md."""

from .compile import Item, Key, Order, Statement, compile_sql
from .joint import Joint, joint_workload
from .run import answer_sql, check_sql, compile_joint, explain_text

__all__ = ["Item", "Joint", "Key", "Order", "Statement", "answer_sql", "check_sql", "compile_joint",
           "compile_sql", "explain_text", "joint_workload"]
