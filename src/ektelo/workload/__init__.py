"""Workloads (public): builders of query matrices and error metrics."""

from .builders import (
    all_range,
    group_sums,
    identity,
    marginal,
    marginals,
    prefix,
    prefix_marginal,
    random_range,
    range_queries,
    range_sums,
    total,
    value_factor,
)
from .metrics import scaled_l2_error

__all__ = [
    "all_range",
    "group_sums",
    "identity",
    "marginal",
    "marginals",
    "prefix",
    "prefix_marginal",
    "random_range",
    "range_queries",
    "range_sums",
    "scaled_l2_error",
    "total",
    "value_factor",
]
