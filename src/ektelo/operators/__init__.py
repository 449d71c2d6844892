"""Public operators (paper §5.3–§5.5): pure client code that never sees private data.

Each kind of operator lives in its own module, imported by name:

* `ektelo.operators.selection` — query selection: returns the strategy
  matrix (an implicit `EMatrix`) a plan measures with the Vector Laplace
  operator (Identity, Prefix, H2, HB, Privelet, QuadTree, UniformGrid,
  AdaptiveGrid, stripes, marginals, ...).
* further modules (partition selection, error metrics) sit beside it; this
  package file deliberately imports none of them, so adding a module never
  means editing it. Inference has its own package, `ektelo.inference`.
"""
