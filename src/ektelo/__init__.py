"""ektelo: differentially private answering of linear counting queries.

Layers (see DESIGN.md): `ektelo.matrix` (implicit matrices), `ektelo.workload`
(workload builders and error metrics), `ektelo.kernel` (the protected kernel:
the only code that touches private data or samples noise), `ektelo.operators`
(public operators), `ektelo.plans` (algorithms as short plans).
"""

__version__ = "0.1.0"
