"""Which columns are synthesized together: dependence measure, annealing solver, cluster building and
the ML-target feature clustering. See docs/clustering.md."""

from syndiffix_core.clustering.builder import (
    ClusterBuilder,
    Clusters,
    DerivedCluster,
    StitchOwner,
    column_weights,
)
from syndiffix_core.clustering.dependence import DependenceResult, measure_dependence
from syndiffix_core.clustering.solver import solve, solve_stable

__all__ = [
    "ClusterBuilder",
    "Clusters",
    "DependenceResult",
    "DerivedCluster",
    "StitchOwner",
    "column_weights",
    "measure_dependence",
    "solve",
    "solve_stable",
]
