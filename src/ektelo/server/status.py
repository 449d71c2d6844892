"""The custodian's read-only status page (server-rendered HTML, no script).

Datasets with their budgets, each analyst's spending and remaining quota,
and the most recent audit entries. Only public state appears (the ledger is
public, §4.3); every value is escaped. Served at ``GET /status`` to an admin
token (docs/server.md).
"""

from __future__ import annotations

import html
import time
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..port import requests as port

if TYPE_CHECKING:
    from .app import Service

__all__ = ["render_status"]

_STYLE = """
body { font-family: sans-serif; margin: 2em; background: #fafafa; color: #222; }
h1 { color: #234; } table { border-collapse: collapse; margin-bottom: 2em; }
th, td { border: 1px solid #889; padding: 4px 10px; text-align: left; }
p.warn { color: #a00; font-weight: bold; }
th { background: #dde4ee; } td.num { text-align: right; font-family: monospace; }
"""


def _cell(value: Any, num: bool = False) -> str:
    if isinstance(value, float):
        value = f"{value:.6g}"
    cls = ' class="num"' if num else ""
    return f"<td{cls}>{html.escape('' if value is None else str(value))}</td>"


def _table(caption: str, ident: str, head: list[str], rows: list[list[Any]]) -> str:
    out = [f'<h2>{html.escape(caption)}</h2><table id="{ident}"><tr>']
    out += [f"<th>{html.escape(h)}</th>" for h in head]
    out.append("</tr>")
    for row in rows:
        out.append("<tr>" + "".join(_cell(v, isinstance(v, float)) for v in row) + "</tr>")
    out.append("</table>")
    return "".join(out)


def render_status(service: Service) -> str:
    """The page's HTML for the service's current state."""
    datasets: list[list[Any]] = []
    analysts: list[list[Any]] = []
    recent: list[list[Any]] = []
    if service.store is not None:
        _from_store(service, datasets, analysts, recent)
    else:
        _from_memory(service, datasets, analysts, recent)
    recent.sort(key=lambda row: str(row[0]), reverse=True)
    for row in datasets:  # issue #36: insecure modes are shown, never silent
        ds = service.datasets.get(str(row[0]))
        seeded = ds is not None and ds.cfg.insecure_research_seed
        row.append("INSECURE: research seed" if seeded else "secure noise")
    banner = ""
    if service.config.insecure_in_memory_ledger:
        banner = ('<p id="insecure-ledger" class="warn">INSECURE: in-memory ledger '
                  "(insecure_in_memory_ledger = true): every budget is lost on restart. "
                  "For tests and demos only.</p>")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ektelo status</title>"
        f"<style>{_STYLE}</style></head><body><h1>ektelo server status</h1>" + banner
        + _table("Datasets", "datasets", ["dataset", "kind", "engine", "unit", "total",
                                          "spent", "remaining", "noise"], datasets)
        + _table("Analysts", "analysts", ["analyst", "dataset", "quota", "spent",
                                          "remaining"], analysts)
        + _table("Recent audit entries", "audit", ["time (UTC)", "analyst", "dataset",
                                                   "operation", "request", "charge",
                                                   "outcome"], recent[:50])
        + "</body></html>"
    )


def _f(value: Any) -> float | None:
    return None if value is None else float(value)


def _from_store(service: Service, datasets: list[list[Any]], analysts: list[list[Any]],
                recent: list[list[Any]]) -> None:
    """The durable ledger's own records (every server process's requests)."""
    for record in service.store.datasets():
        ds = service.datasets.get(record.name)
        kind, engine = (ds.kind, ds.engine) if ds is not None else ("-", "-")
        datasets.append([record.name, kind, engine, record.unit, float(record.total),
                         float(record.spent), float(record.remaining)])
        for a in record.analysts:
            analysts.append([a.name, record.name, _f(a.quota), float(a.spent),
                             _f(a.remaining)])
        for e in service.store.audit_log(record.name)[-50:]:
            recent.append([e.time[:19].replace("T", " "), e.analyst, e.dataset, e.operation,
                           (e.spec_hash or "")[:12], _f(Fraction(e.charge)) if e.charge else None,
                           e.outcome])


def _from_memory(service: Service, datasets: list[list[Any]], analysts: list[list[Any]],
                 recent: list[list[Any]]) -> None:
    """This process's kernels and audit entries (in-memory ledgers)."""
    grants = service.tokens.grants()
    for name, ds in service.datasets.items():
        kernel_port, _, _ = ds.root_for("status")
        b = kernel_port.submit(port.GetBudget())
        datasets.append([name, ds.kind, ds.engine, b.unit, float(b.total), float(b.spent),
                         float(b.remaining)])
        spent: dict[str, float] = {}
        for e in ds.audit:
            if e.outcome == "granted" and e.charge is not None:
                spent[e.analyst] = spent.get(e.analyst, 0.0) + e.charge
        for analyst, dataset, quota in grants:
            if dataset == name:
                used = spent.get(analyst, 0.0)
                left = None if quota is None else max(quota - used, 0.0)
                analysts.append([analyst, dataset, quota, used, left])
        for e in list(ds.audit)[-50:]:
            recent.append([time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.time)), e.analyst,
                           e.dataset, e.operation, e.digest[:12], e.charge, e.outcome])
