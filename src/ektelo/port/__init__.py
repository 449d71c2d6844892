"""The client side of the kernel's boundary (DESIGN.md): requests, ports, handles.

* `requests` — the typed requests a handle submits and the responses it
  gets back (what a server's wire format carries, `ektelo.wire`);
* `handles` — opaque `ProtectedTable`/`ProtectedVector` over a port: every
  method is one request;
* `local` — `LocalPort` (a kernel in this process) and `protect`, the data
  holder's call that starts one around the data.

A remote port (`ektelo.client`) is the other implementation: the same handles
and plans run unchanged against a server. Nothing here is trusted: the kernel
re-validates every request from public facts.
"""

from . import requests
from .handles import ProtectedTable, ProtectedVector
from .local import LocalPort, budget_of, protect
from .requests import Port, QueryRecord

__all__ = [
    "LocalPort",
    "Port",
    "ProtectedTable",
    "ProtectedVector",
    "QueryRecord",
    "budget_of",
    "protect",
    "requests",
]
