"""Workloads (public): builders of query matrices and error metrics."""

from .builders import (
    all_range,
    identity,
    marginal,
    marginals,
    prefix,
    prefix_marginal,
    random_range,
    range_queries,
    total,
)
from .metrics import scaled_l2_error

__all__ = [
    "all_range",
    "identity",
    "marginal",
    "marginals",
    "prefix",
    "prefix_marginal",
    "random_range",
    "range_queries",
    "scaled_l2_error",
    "total",
]
