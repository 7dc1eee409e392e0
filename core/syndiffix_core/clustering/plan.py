"""The clustering decision for one table: one cluster, default clustering, or ML-target clusters."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from syndiffix_core.clustering.builder import ClusterBuilder, Clusters, DerivedCluster
from syndiffix_core.clustering.dependence import map_nulls, measure_dependence
from syndiffix_core.clustering.ml import feature_clusters, select_features
from syndiffix_core.clustering.solver import solve_stable
from syndiffix_core.errors import InvalidInputError
from syndiffix_core.params import ClusteringParams

LOG = logging.getLogger(__name__)

# Tables this narrow are synthesized as one cluster: every pair of columns stays together, and the
# 2^k - 1 trees of one cluster are still cheap.
SINGLE_CLUSTER_COLUMNS = 5


@dataclass(frozen=True)
class TablePlan:
    clusters: Clusters
    entropies: np.ndarray | None  # 1-dim entropy per column (orders stitch columns); None for one cluster


def plan_table(
    values: np.ndarray,
    column_names: Sequence[str],
    params: ClusteringParams,
    *,
    target_column: str | None,
    rng: np.random.Generator,
    ordered_columns: Sequence[bool] | None = None,
) -> TablePlan:
    """Decide the clusters of a table given as floats (rows x columns, NaN = null).

    - ``params.enabled`` false, or at most 5 columns without a target: one cluster of every column.
    - ``target_column`` (or ``params.main_column`` with ``params.main_features``): the target's features
      chunked into clusters stitched on it; features from scikit-learn unless given explicitly.
    - otherwise: dependence measure on a sample, then simulated annealing over permutations, with
      ``params.main_column`` kept in the initial cluster and as the first stitch column;
      ``ordered_columns`` (per column: numbers, timestamps, booleans) lets the plan judge the rank
      correlations a stitch implies.
    """
    names = list(column_names)
    num_columns = len(names)

    def index_of(name: str, what: str) -> int:
        if name not in names:
            raise InvalidInputError(f"{what} {name!r} is not a synthesized column (columns: {names})")
        return names.index(name)

    pairs = [
        (index_of(a, "column to keep together"), index_of(b, "column to keep together"))
        for a, b in params.keep_together
    ]
    main = index_of(params.main_column, "main column") if params.main_column is not None else None
    target = index_of(target_column, "target column") if target_column is not None else None
    if params.main_features is not None and target is None and main is None:
        raise InvalidInputError("main features need a main column (or target column) they predict")
    if target is not None and main is not None and target != main:
        raise InvalidInputError(
            f"target column {target_column!r} and main column {params.main_column!r} differ; give one"
        )
    target = target if target is not None else (main if params.main_features is not None else None)

    if not params.enabled or (num_columns <= SINGLE_CLUSTER_COLUMNS and target is None):
        return TablePlan(Clusters(tuple(range(num_columns))), None)

    measured = measure_dependence(values, sample_size=params.sample_size)
    if target is not None:
        if params.main_features is not None:
            features = [index_of(name, "main feature") for name in params.main_features]
        else:
            features = select_features(map_nulls(values), target, rng=rng)
        clusters = feature_clusters(
            target,
            features,
            num_columns,
            measured.entropies,
            max_weight=params.max_weight,
            patch_non_features=params.patch_non_features,
        )
        LOG.info("ML clusters for target %r: %s", names[target], clusters.describe(names))
        return TablePlan(clusters, measured.entropies)

    builder = ClusterBuilder(
        with_pairs_kept_together(measured.dependence, pairs),
        measured.entropies,
        max_weight=params.max_weight,
        merge_threshold=params.merge_threshold,
        main_column=main,
        sample=measured.sample,
        ordered=ordered_columns,
    )
    clusters = with_pairs_joined(solve_stable(builder, alpha=params.solver_alpha), pairs)
    LOG.info(
        "clusters (unsatisfied dependence %.3f): %s",
        builder.unsatisfied_dependence(clusters),
        clusters.describe(names),
    )
    return TablePlan(clusters, measured.entropies)


def with_pairs_joined(clusters: Clusters, pairs: Sequence[tuple[int, int]]) -> Clusters:
    """`clusters` with every pair in one cluster: a pair the solver left in two clusters (the weight
    limit, or stronger dependences elsewhere) gets its earlier column as a further stitch column of the
    later column's cluster, past the weight limit. Stitch columns are taken from earlier clusters only,
    so the later cluster can always take it."""
    home = {column: 0 for column in clusters.initial}
    for number, cluster in enumerate(clusters.derived, start=1):
        home.update((column, number) for column in cluster.columns)
    together = [set(columns) for columns in clusters.all_clusters()]
    added: dict[int, list[int]] = {}
    for a, b in pairs:
        if any(a in columns and b in columns for columns in together):
            continue
        earlier, later = (a, b) if home[a] < home[b] else (b, a)
        added.setdefault(home[later], []).append(earlier)
        together[home[later]].add(earlier)
    if not added:
        return clusters
    derived = [
        DerivedCluster(
            cluster.columns,
            cluster.stitch_columns + tuple(added.get(number, ())),
            cluster.owner,
        )
        for number, cluster in enumerate(clusters.derived, start=1)
    ]
    return Clusters(clusters.initial, tuple(derived))


def with_pairs_kept_together(dependence: np.ndarray, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """The dependence matrix with each pair's dependence raised to 1: the solver then puts the pair in
    one cluster, or one of them among the other's stitch columns, wherever the weight limit allows."""
    dependence = np.array(dependence, dtype=float)
    for a, b in pairs:
        dependence[a, b] = dependence[b, a] = 1.0
    return dependence
