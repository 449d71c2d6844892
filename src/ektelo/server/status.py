"""The custodian's status page (server-rendered HTML and inline SVG, no
script, no external asset) and its sign-in form.

What a custodian opens every morning (#40): per dataset, the guarantee in
words, the budget spent and remaining (exact values from the ledger, shown
clamped at 0 — never a float residue like 1.7e-18), a chart of its spending
over the latest charges, each analyst's quota, spent and remaining, the
sessions summarised per analyst, the head of the audit hash chain; then the
recent requests with their request ids, and the refusals with the amount
asked and the reason (the cap, the analyst's quota, a query limit). Only
public state appears (the ledger is public, §4.3); every value is escaped.
With a durable ledger every figure comes from the ledger store by bounded
queries (the latest N rows), so the page costs the same after months.
Served at ``GET /status`` to an admin token (a header, or the HttpOnly
cookie that the sign-in form's POST sets: docs/server.md).
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..port import requests as port

if TYPE_CHECKING:
    from .app import Service

__all__ = ["render_sign_in", "render_status"]

RECENT = 50  # rows of recent requests and of refusals shown per dataset
CHART_POINTS = 2_000  # the latest charges drawn per dataset

_STYLE = """
body { font-family: sans-serif; margin: 2em; background: #fafafa; color: #222; max-width: 72em; }
h1 { color: #234; } h2 { margin-top: 1.6em; border-bottom: 2px solid #234; }
h3 { margin-bottom: .3em; }
table { border-collapse: collapse; margin-bottom: 1.2em; }
th, td { border: 1px solid #889; padding: 4px 10px; text-align: left; }
th { background: #dde4ee; } td.num { text-align: right; font-family: monospace; }
p.warn { color: #a00; font-weight: bold; } p.guarantee { max-width: 60em; }
code { font-size: 90%; } .bar { display: inline-block; width: 10em; height: .8em;
background: #dde4ee; vertical-align: middle; } .bar span { display: block; height: 100%;
background: #c4572a; } section.dataset { background: #fff; border: 1px solid #ccd;
padding: .5em 1.2em 1em; margin-bottom: 1.5em; }
"""


@dataclass
class _Dataset:
    """One dataset's figures, from the ledger store or this process's kernel."""

    name: str
    kind: str
    engine: str
    unit: str
    total: Fraction
    spent: Fraction
    delta: float | None
    relation: str
    noise: str
    analysts: list[tuple[str, Fraction | None, Fraction]] = field(default_factory=list)
    sessions: list[tuple[str, int, str, str, int]] = field(default_factory=list)
    charges: list[tuple[float, Fraction]] = field(default_factory=list)  # newest first
    head: tuple[int, str] | None = None

    @property
    def remaining(self) -> Fraction:
        return max(self.total - self.spent, Fraction(0))


def _amount(value: Fraction | float | None, total: Fraction | float) -> str:
    """A budget figure for people: 6 significant digits, and 0 for anything
    within the ledger's float slack of 0 (never '1.7e-18'), never negative."""
    if value is None:
        return "—"
    v = float(value)
    if v <= float(total) * 1e-9:
        return "0"
    return f"{v:.6g}"


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _table(ident: str, head: list[str], rows: list[list[str]], empty: str) -> str:
    """A table of already-escaped cells (a cell starting '#' is numeric)."""
    if not rows:
        return f'<p id="{ident}" class="empty">{_e(empty)}</p>'
    out = [f'<table id="{ident}"><tr>', *(f"<th>{_e(h)}</th>" for h in head), "</tr>"]
    for row in rows:
        cells = "".join(f'<td class="num">{c[1:]}</td>' if c.startswith("#") else f"<td>{c}</td>"
                        for c in row)  # fmt: skip
        out.append(f"<tr>{cells}</tr>")
    out.append("</table>")
    return "".join(out)


def _bar(part: Fraction | float, whole: Fraction | float) -> str:
    share = 0.0 if float(whole) <= 0 else min(max(float(part) / float(whole), 0.0), 1.0)
    return (f'<span class="bar" title="{share:.0%}"><span style="width:{share * 100:.1f}%">'
            "</span></span>")  # fmt: skip


def _when(stamp: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(stamp))


def _epoch(iso: str) -> float:
    try:
        return datetime.fromisoformat(iso).timestamp()
    except ValueError:
        return 0.0


def _guarantee(d: _Dataset) -> str:
    """The dataset's guarantee in words."""
    amounts = f"{_amount(d.spent, d.total)} so far, and never more than {_amount(d.total, 1)}"
    if d.unit == "epsilon":
        text = f"ε-differentially private with ε = {amounts}"
    else:
        text = f"ρ-zero-concentrated differentially private (zCDP) with ρ = {amounts}"
        if d.delta is not None:
            from ..budget import ZCDP

            def eps(rho: Fraction) -> float:  # rho > 0 here (0 spent is shown as 0)
                return ZCDP(float(rho)).epsilon(d.delta)

            spent = "0" if d.spent == 0 else f"{eps(d.spent):.4g}"
            text += (f" — which implies (ε, δ)-DP with ε = {spent} so far (at most "
                     f"{eps(d.total):.4g}) at δ = {d.delta:g}")  # fmt: skip
    return (f'<p class="guarantee">Everything released about <b>{_e(d.name)}</b>, by all '
            f"analysts together, is {_e(text)}, {_e(d.relation)}.</p>")  # fmt: skip


def _chart(d: _Dataset) -> str:
    """Inline SVG: the dataset's spent over the time of its latest charges,
    against its cap (a dashed line)."""
    ident = f"chart-{_e(d.name)}"
    if not d.charges:
        return f'<p id="{ident}" class="empty">No charges yet.</p>'
    width, height, pad = 640, 170, 40
    # the spent after each charge, newest last: the current spent minus later charges
    points: list[tuple[float, Fraction]] = []
    after = d.spent
    for stamp, charge in d.charges:
        points.append((stamp, after))
        after -= charge
    points.append((d.charges[-1][0], max(after, Fraction(0))))
    points.reverse()
    t0, t1 = points[0][0], points[-1][0]
    top = float(max(d.total, d.spent)) or 1.0

    def xy(stamp: float, value: Fraction) -> str:
        x = pad + (width - 2 * pad) * ((stamp - t0) / (t1 - t0) if t1 > t0 else 1.0)
        y = height - pad + -(height - 2 * pad) * float(value) / top
        return f"{x:.1f},{y:.1f}"

    line = " ".join(xy(t, v) for t, v in points)
    cap_y = height - pad - (height - 2 * pad) * float(d.total) / top
    n = len(d.charges)
    label = "charge" if n == 1 else f"{n} charges"
    return (
        f'<svg id="{ident}" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" role="img" aria-label="spending of {_e(d.name)} over time">'
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#fff" stroke="#ccd"/>'
        f'<line x1="{pad}" y1="{cap_y:.1f}" x2="{width - pad}" y2="{cap_y:.1f}" '
        'stroke="#a00" stroke-dasharray="6 4"/>'
        f'<text x="{width - pad}" y="{cap_y - 4:.1f}" text-anchor="end" font-size="11" '
        f'fill="#a00">cap {_amount(d.total, 1)}</text>'
        f'<polyline points="{line}" fill="none" stroke="#c4572a" stroke-width="2"/>'
        f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" '
        'stroke="#556"/>'
        f'<text x="{pad}" y="{height - pad + 16}" font-size="11">{_e(_when(t0))}</text>'
        f'<text x="{width - pad}" y="{height - pad + 16}" font-size="11" text-anchor="end">'
        f"{_e(_when(t1))}</text>"
        f'<text x="{pad}" y="{height - 8}" font-size="11" fill="#556">spent {d.unit} over '
        f"the latest {label}; now {_amount(d.spent, d.total)}</text></svg>"
    )


def render_sign_in(message: str = "") -> str:
    """The sign-in form: the admin token is POSTed (never put in a URL) and
    exchanged for an HttpOnly cookie."""
    note = f'<p class="warn" id="sign-in-error">{_e(message)}</p>' if message else ""
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>ektelo status: sign in"
        f"</title><style>{_STYLE}</style></head><body><h1>ektelo server status</h1>{note}"
        '<form id="sign-in" method="post" action="/status/sign-in">'
        '<label>Admin token <input type="password" name="token" autocomplete="off" '
        'required></label> <button type="submit">Sign in</button></form>'
        "<p>The token is sent in the form's body and exchanged for a session cookie "
        "(HttpOnly, 8 hours); it never appears in a URL.</p></body></html>"
    )


def render_status(service: Service) -> str:
    """The page's HTML for the service's current state."""
    ring = {name: list(ds.audit) for name, ds in service.datasets.items()}
    views = _from_store(service) if service.store is not None else _from_memory(service, ring)
    live: dict[tuple[str, str], int] = {}
    with service.sessions_lock:
        for s in service.sessions.values():
            key = (s.dataset.name, s.analyst)
            live[key] = live.get(key, 0) + 1
    requests, refusals = _requests(service, ring)
    banner = ""
    if service.config.insecure_in_memory_ledger:
        banner = ('<p id="insecure-ledger" class="warn">INSECURE: in-memory ledger '
                  "(insecure_in_memory_ledger = true): every budget is lost on restart. "
                  "For tests and demos only.</p>")  # fmt: skip
    if service.workers is not None:  # where the kernels run (worker.py)
        limits = service.workers.limits
        banner += (f'<p id="workers">Kernels: in {len(service.workers.processes)} of at most '
                   f"{limits.processes} worker processes ({limits.memory_mb} MiB of memory "
                   f"headroom, {limits.cpu_seconds} s of CPU per request).</p>")
    elif service.store is not None:
        banner += ('<p id="workers" class="warn">Kernels: in the server\'s own process '
                   "(worker_memory_mb = 0): a runaway query takes the server down.</p>")
    body = [f"<h1>ektelo server status</h1><p>As of {_e(_when(time.time()))} UTC. "
            '<form method="post" action="/status/sign-out" style="display:inline">'
            '<button type="submit">Sign out</button></form></p>', banner]
    summary = [[_e(d.name), _e(d.kind), _e(d.engine), _e(d.unit), "#" + _amount(d.total, 1),
                "#" + _amount(d.spent, d.total), "#" + _amount(d.remaining, d.total),
                _bar(d.spent, d.total), _e(d.noise), f'<a href="#ds-{_e(d.name)}">details</a>']
               for d in views]  # fmt: skip
    body.append("<h2>Datasets</h2>" + _table(
        "datasets", ["dataset", "kind", "engine", "unit", "cap", "spent", "remaining", "used",
                     "noise", ""], summary, "No datasets."))
    analyst_rows: list[list[str]] = []
    for d in views:
        for who, quota, spent in d.analysts:
            left = None if quota is None else max(quota - spent, Fraction(0))
            analyst_rows.append([_e(who), _e(d.name), "#" + _amount(quota, d.total),
                                 "#" + _amount(spent, d.total), "#" + _amount(left, d.total),
                                 _bar(spent, quota if quota is not None else d.total)])
    body.append("<h2>Analysts</h2>" + _table(
        "analysts", ["analyst", "dataset", "quota", "spent", "remaining", "of quota (or cap)"],
        analyst_rows, "No analysts."))
    for d in views:
        sessions = [[_e(a), "#" + str(n), _e(first[:19].replace("T", " ")),
                     _e(last[:19].replace("T", " ")), "#" + str(live.get((d.name, a), 0))]
                    for a, n, first, last, _ in d.sessions]  # fmt: skip
        head = ("no durable audit chain (in-memory ledger)" if service.store is None
                else "no entries yet" if d.head is None
                else f"entry {d.head[0]}: <code>{_e(d.head[1])}</code>")
        body.append(
            f'<section class="dataset" id="ds-{_e(d.name)}"><h3>{_e(d.name)} '
            f"<small>({_e(d.kind)}, {_e(d.engine)})</small></h3>{_guarantee(d)}"
            f"<p>Spent {_amount(d.spent, d.total)} of {_amount(d.total, 1)} {_e(d.unit)}; "
            f"remaining {_amount(d.remaining, d.total)}.</p>{_chart(d)}"
            f'<p class="head" id="head-{_e(d.name)}">Audit chain head: {head}</p>'
            + _table(f"sessions-{_e(d.name)}", ["analyst", "sessions opened", "first",
                                                "latest", "open now"], sessions,
                     "No sessions yet.")
            + "</section>"
        )
    body.append("<h2>Recent requests</h2>" + _table(
        "requests", ["time (UTC)", "analyst", "dataset", "operation", "request id", "charge",
                     "outcome"], requests[:RECENT], "No requests yet."))
    body.append("<h2>Refusals</h2>" + _table(
        "refusals", ["time (UTC)", "analyst", "dataset", "operation", "request id", "asked",
                     "reason"], refusals[:RECENT], "No refusals."))
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>ektelo status</title>"
            f"<style>{_STYLE}</style></head><body>" + "".join(body) + "</body></html>")


def _relation(service: Service, name: str) -> tuple[str, str, str, str]:
    """(kind, engine, the neighbouring relation in words, the noise) of a dataset."""
    ds = service.datasets.get(name)
    if ds is None:
        return "-", "-", "per row", "-"
    c = ds.cfg
    relation = ("per person: datasets that differ in one person's rows (column "
                f"{c.privacy_unit!r}, at most {c.max_rows_per_unit} rows each)"
                if c.privacy_unit is not None
                else "per row: datasets that differ in one row")  # fmt: skip
    noise = "INSECURE: research seed" if c.insecure_research_seed else "secure noise"
    return ds.kind, ds.engine, relation, noise


def _from_store(service: Service) -> list[_Dataset]:
    """The durable ledger's own records (every server process's requests),
    read with bounded queries."""
    store = service.store
    views = []
    for r in store.datasets():
        kind, engine, relation, noise = _relation(service, r.name)
        views.append(_Dataset(
            r.name, kind, engine, r.unit, r.total, r.spent, r.delta, relation, noise,
            analysts=[(a.name, a.quota, a.spent) for a in r.analysts],
            sessions=[(a, n, lo, hi, 0) for a, n, lo, hi in store.sessions(r.name)],
            charges=[(_epoch(t), c) for t, c in store.recent_charges(r.name, CHART_POINTS)],
            head=store.audit_head(r.name),
        ))  # fmt: skip
    return views


def _from_memory(service: Service, ring: dict[str, list[Any]]) -> list[_Dataset]:
    """This process's kernels and audit ring (in-memory ledgers)."""
    grants = service.tokens.grants()
    views = []
    for name, ds in service.datasets.items():
        kernel_port, _, _ = ds.root_for("status")
        b = kernel_port.submit(port.GetBudget())
        kind, engine, relation, noise = _relation(service, name)
        spent: dict[str, Fraction] = {}
        charges: list[tuple[float, Fraction]] = []
        opened: dict[str, list[float]] = {}
        for e in ring[name]:
            if e.outcome == "granted" and e.charge is not None:
                spent[e.analyst] = spent.get(e.analyst, Fraction(0)) + Fraction(e.charge)
                charges.append((e.time, Fraction(e.charge)))
        for s in list(service.sessions.values()):
            if s.dataset.name == name:
                opened.setdefault(s.analyst, []).append(time.time())
        view = _Dataset(name, kind, engine, b.unit, Fraction(b.total), Fraction(b.spent),
                        b.delta, relation, noise, charges=charges[::-1][:CHART_POINTS])
        for analyst, dataset, quota in grants:
            if dataset == name:
                view.analysts.append((analyst, None if quota is None else Fraction(quota),
                                      spent.get(analyst, Fraction(0))))
        view.sessions = [(a, len(ts), "-", "-", 0) for a, ts in sorted(opened.items())]
        views.append(view)
    return views


def _requests(service: Service, ring: dict[str, list[Any]]) -> tuple[list[list[str]],
                                                                       list[list[str]]]:
    """(recent requests, refusals) as rows, newest first. With a durable ledger
    both come from its audit log (every process's), refusals with their
    reason from this process's ring where it saw them; refusals that never
    reached the ledger (a query over the limits) come from the ring."""
    requests: list[tuple[float, list[str]]] = []
    refusals: list[tuple[float, list[str]]] = []
    reasons: dict[tuple[str, str], str] = {}
    for name, entries in ring.items():
        for e in entries:
            if e.reason is not None and e.request_id is not None:
                reasons[(e.analyst, e.request_id)] = e.reason
            if e.reason in ("limit", "invalid") or service.store is None:
                row = [_e(_when(e.time)), _e(e.analyst), _e(name), _e(e.operation),
                       _e(e.request_id or "—")]
                if e.outcome.startswith("refused"):
                    refusals.append((e.time, [*row, "#" + _amount(e.amount, 1),
                                              _e(e.reason or e.outcome)]))
                if service.store is None:
                    requests.append((e.time, [*row, "#" + _amount(e.charge, 1),
                                              _e(e.outcome)]))
    if service.store is not None:
        for r in service.store.datasets():
            for a in service.store.recent_audit(r.name, RECENT):
                own = _own_id(a.analyst, a.request_id)
                row = [_e(a.time[:19].replace("T", " ")), _e(a.analyst or "(owner)"),
                       _e(r.name), _e(a.operation), _e(own or "—")]
                stamp = _epoch(a.time)
                charge = None if a.charge is None else Fraction(a.charge)
                requests.append((stamp, [*row, "#" + _amount(charge, r.total), _e(a.outcome)]))
            for a in service.store.recent_audit(r.name, RECENT, "refused"):
                own = _own_id(a.analyst, a.request_id)
                reason = reasons.get((a.analyst, own or ""), "cap or quota")
                row = [_e(a.time[:19].replace("T", " ")), _e(a.analyst or "(owner)"),
                       _e(r.name), _e(a.operation), _e(own or "—")]
                asked = None if a.amount is None else Fraction(a.amount)
                refusals.append((_epoch(a.time), [*row, "#" + _amount(asked, r.total),
                                                  _e(reason)]))
    requests.sort(key=lambda p: p[0], reverse=True)
    refusals.sort(key=lambda p: p[0], reverse=True)
    return [r for _, r in requests], [r for _, r in refusals]


def _own_id(analyst: str | None, request_id: str | None) -> str | None:
    """The analyst's own request id (the server prefixes it with their name)."""
    if request_id is None:
        return None
    prefix = f"{analyst}/"
    return request_id[len(prefix):] if analyst and request_id.startswith(prefix) else request_id
