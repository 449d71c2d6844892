"""Implicit matrix algebra (paper §7): core matrices, combinators, range
queries, hierarchies of ranges, partitions, and plain specs for rebuilding
expressions safely."""

from .base import EMatrix, as_vector
from .combinators import HStack, Kronecker, Product, Sum, VStack, Weighted
from .core import Dense, Diagonal, Embedding, Identity, Ones, Prefix, Sparse, Suffix, Total
from .hierarchy import Hierarchy
from .partition import Partition, hilbert_order
from .ranges import RangeQueries
from .spec import from_json, from_spec, rebuild, to_json, to_spec
from .wavelet import Wavelet

Union = VStack  # the paper's name for stacking query sets (§7.4)

__all__ = [
    "Dense",
    "Diagonal",
    "EMatrix",
    "Embedding",
    "HStack",
    "Hierarchy",
    "Identity",
    "Kronecker",
    "Ones",
    "Partition",
    "Prefix",
    "Product",
    "RangeQueries",
    "Sparse",
    "Suffix",
    "Sum",
    "Total",
    "Union",
    "VStack",
    "Wavelet",
    "Weighted",
    "as_vector",
    "from_json",
    "from_spec",
    "hilbert_order",
    "rebuild",
    "to_json",
    "to_spec",
]
