"""Clusters of columns: what they are, how a permutation becomes clusters, and how good a clustering is.

Columns are referred to by their position in the table (0..d-1). The dependence matrix is symmetric with
values in [0, 1]; a column's weight is ``1 + sqrt(max(entropy, 1))`` of its 1-dim entropy in bits.

Quality is the dependence the clustering loses. A pair of columns that shares a cluster loses nothing. A
pair in different clusters is related in the output only through the stitch columns between them; with a
correlation matrix the builder estimates how much of the pair's correlation those stitches carry over
(the correlation a stitched table would have if every join kept each cluster's columns independent of the
rest given the stitch columns, linearly) and counts only the share that is not carried as lost. Without a
correlation matrix every such pair is lost entirely, as the published description words it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# A derived cluster is filled up to this share of max_weight with its own columns, which leaves room
# for its stitch columns.
DERIVED_CLUSTER_CAPACITY = 0.7
# Stitch columns are added while the cluster weight, counted from at least this share of max_weight,
# stays within max_weight.
STITCH_RESERVED_SHARE = 0.5
# Candidates for stitch columns are compared on coarse steps of their average and maximum dependence
# to the cluster, so that near-equal candidates are ordered by their total dependence instead of noise.
AVERAGE_DEPENDENCE_STEP = 0.05
MAX_DEPENDENCE_STEP = 0.01
# Pairs in different clusters correlated more weakly than this get no credit for what stitching carries
# over: the linear estimate says nothing about their (then non-linear, if any) dependence.
TRANSMISSION_MIN_CORRELATION = 0.1


class StitchOwner(enum.StrEnum):
    """Which side's values of the stitch columns survive a merge."""

    SHARED = "shared"  # alternate rows take the left and the right side's values
    LEFT = "left"  # the accumulated table's values (used for columns that only ride along)
    RIGHT = "right"


@dataclass(frozen=True)
class DerivedCluster:
    """Columns synthesized together and joined onto the accumulated table over ``stitch_columns``.

    Without stitch columns the cluster is *patched*: its rows are zipped onto the table at random.
    """

    columns: tuple[int, ...]
    stitch_columns: tuple[int, ...] = ()
    owner: StitchOwner = StitchOwner.SHARED

    @property
    def all_columns(self) -> tuple[int, ...]:
        return self.stitch_columns + self.columns


@dataclass(frozen=True)
class Clusters:
    """The initial cluster, synthesized first, and the derived clusters stitched onto it in order."""

    initial: tuple[int, ...]
    derived: tuple[DerivedCluster, ...] = field(default_factory=tuple)

    def all_clusters(self) -> list[tuple[int, ...]]:
        return [self.initial, *(cluster.all_columns for cluster in self.derived)]

    def describe(self, names: Sequence[str]) -> str:
        parts = ["[" + ", ".join(names[c] for c in self.initial) + "]"]
        for cluster in self.derived:
            stitch = ", ".join(names[c] for c in cluster.stitch_columns) or "patch"
            parts.append(f"[{stitch} | " + ", ".join(names[c] for c in cluster.columns) + "]")
        return " + ".join(parts)


def column_weights(entropies: np.ndarray) -> np.ndarray:
    return 1.0 + np.sqrt(np.maximum(np.asarray(entropies, dtype=float), 1.0))


class ClusterBuilder:
    """Turns permutations of the columns into clusters and scores them.

    The solver calls :meth:`unsatisfied_dependence_of` thousands of times, so placing columns works on
    nested Python lists (faster than numpy for lookups this small) and never builds the dataclasses.
    ``correlation`` (d x d rank correlations, optional) lets the quality credit what stitching carries over
    between clusters (module docstring).
    """

    def __init__(
        self,
        dependence: np.ndarray,
        entropies: np.ndarray,
        *,
        max_weight: float,
        merge_threshold: float,
        main_column: int | None = None,
        correlation: np.ndarray | None = None,
    ):
        dependence = np.asarray(dependence, dtype=float)
        # Symmetric, and the diagonal never counts: a column is never compared with itself.
        dependence = (dependence + dependence.T) / 2
        np.fill_diagonal(dependence, 0.0)
        self.num_columns = dependence.shape[0]
        self._dependence_matrix = dependence
        self.dependence = dependence.tolist()
        self.total_dependence = dependence.sum(axis=1).tolist()
        self._correlation = None
        if correlation is not None:
            correlation = np.nan_to_num(np.asarray(correlation, dtype=float))
            if correlation.shape != dependence.shape:
                raise ValueError(f"correlation has shape {correlation.shape}, dependence {dependence.shape}")
            self._correlation = (correlation + correlation.T) / 2
            np.fill_diagonal(self._correlation, 1.0)
            self._credited = np.abs(self._correlation) >= TRANSMISSION_MIN_CORRELATION
            self._credited_correlation = np.where(self._credited, self._correlation, 1.0)
        # Regression of a cluster's columns on its stitch columns, per (stitch, columns): the annealing
        # revisits the same few clusters many times.
        self._regressions: dict[tuple[tuple[int, ...], tuple[int, ...]], np.ndarray] = {}
        self.weights = column_weights(entropies).tolist()
        self.max_weight = float(max_weight)
        self.merge_threshold = float(merge_threshold)
        if main_column is not None and not 0 <= main_column < self.num_columns:
            raise ValueError(f"main column {main_column} is not a column index below {self.num_columns}")
        self.main_column = main_column

    def build(self, permutation: Sequence[int]) -> Clusters:
        initial, joins = self._joins(permutation)
        derived = [DerivedCluster(tuple(columns), tuple(stitch)) for stitch, columns in joins]
        # A first derived cluster stitched on the whole initial cluster is the initial cluster grown by
        # its columns: synthesizing it as one saves a stitch and covers the same pairs.
        if derived and set(derived[0].stitch_columns) == set(initial):
            initial = initial + list(derived[0].columns)
            derived = derived[1:]
        return Clusters(tuple(initial), tuple(derived))

    def unsatisfied_dependence_of(self, permutation: Sequence[int]) -> float:
        """The quality of ``build(permutation)`` (lower is better), without building it."""
        return self._unsatisfied(*self._joins(permutation))

    def unsatisfied_dependence(self, clusters: Clusters) -> float:
        """Average dependence lost between column pairs that share no cluster (lower is better)."""
        joins = [(list(cluster.stitch_columns), list(cluster.columns)) for cluster in clusters.derived]
        return self._unsatisfied(list(clusters.initial), joins)

    def _joins(self, permutation: Sequence[int]) -> tuple[list[int], list[tuple[list[int], list[int]]]]:
        """The initial cluster and, per derived cluster, its (stitch columns, own columns)."""
        members, weights = self._place_columns(permutation)
        joins = []
        available = list(members[0])
        for cluster, weight in zip(members[1:], weights[1:], strict=True):
            joins.append((self._stitch_columns(cluster, weight, available), cluster))
            available.extend(cluster)
        return members[0], joins

    def _unsatisfied(self, initial: list[int], joins: list[tuple[list[int], list[int]]]) -> float:
        membership = np.zeros((1 + len(joins), self.num_columns))
        membership[0, initial] = 1.0
        for index, (stitch, columns) in enumerate(joins, start=1):
            membership[index, stitch] = 1.0
            membership[index, columns] = 1.0
        apart = (membership.T @ membership) == 0
        lost = np.where(apart, self._dependence_matrix, 0.0)
        if self._correlation is not None:
            lost *= 1.0 - self._carried_share(initial, joins)
        return float(lost.sum()) / (2 * self.num_columns)

    def _carried_share(self, initial: list[int], joins: list[tuple[list[int], list[int]]]) -> np.ndarray:
        """Per pair, the share of its correlation that the stitched table keeps (0..1), if every join kept
        a cluster's columns independent of the earlier columns given the stitch columns, linearly: the
        joined columns C get cov(C, earlier) = B · cov(stitch, earlier) with B the regression of C on the
        stitch columns within the cluster. A patched cluster keeps nothing of its relation to the rest."""
        correlation = self._correlation
        # Rows and columns of columns not placed yet stay 0, so whole rows can be carried at once.
        in_initial = np.zeros(self.num_columns, dtype=bool)
        in_initial[initial] = True
        stitched = np.where(in_initial[:, None] & in_initial[None, :], correlation, 0.0)
        for stitch, columns in joins:
            rows = (
                self._regression(stitch, columns) @ stitched[stitch]
                if stitch
                else np.zeros((len(columns), self.num_columns))
            )
            rows[:, columns] = correlation[columns][:, columns]
            stitched[columns] = rows
            stitched[:, columns] = rows.T
        return np.where(self._credited, np.clip(stitched / self._credited_correlation, 0.0, 1.0), 0.0)

    def _regression(self, stitch: list[int], columns: list[int]) -> np.ndarray:
        key = (tuple(stitch), tuple(columns))
        regression = self._regressions.get(key)
        if regression is None:
            correlation = self._correlation
            # pinv: stitch columns may be collinear (duplicated or constant columns).
            regression = correlation[columns][:, stitch] @ np.linalg.pinv(correlation[stitch][:, stitch])
            self._regressions[key] = regression
        return regression

    def _place_columns(self, permutation: Sequence[int]) -> tuple[list[list[int]], list[float]]:
        """Each column joins the cluster it depends on most (on average), if that is at least the merge
        threshold and the cluster has room; otherwise it opens a cluster."""
        dep = self.dependence
        weights = self.weights
        threshold = self.merge_threshold
        first_capacity = self.max_weight
        capacity = DERIVED_CLUSTER_CAPACITY * self.max_weight
        members: list[list[int]] = []
        cluster_weight: list[float] = []
        for column in permutation:
            get = dep[column].__getitem__
            weight = weights[column]
            best, best_average = -1, -1.0
            for index, cluster in enumerate(members):
                total = sum(map(get, cluster))
                average = total / len(cluster)
                if average < threshold or average <= best_average:
                    continue
                if len(cluster) > 1 and cluster_weight[index] + weight > (
                    first_capacity if index == 0 else capacity
                ):
                    continue
                best, best_average = index, average
            if best < 0:
                members.append([column])
                cluster_weight.append(weight)
            else:
                members[best].append(column)
                cluster_weight[best] += weight
        return members, cluster_weight

    def _stitch_columns(self, cluster: list[int], weight: float, available: list[int]) -> list[int]:
        """Stitch columns for a derived cluster, from the columns placed before it: the best one (or the
        main column) always, then others that depend enough on the cluster while the weight allows."""
        dep = self.dependence
        size = len(cluster)
        scored = []
        for candidate in available:
            values = list(map(dep[candidate].__getitem__, cluster))
            total = sum(values)
            maximum = max(values)
            key = (
                math.floor(total / size / AVERAGE_DEPENDENCE_STEP),
                math.floor(maximum / MAX_DEPENDENCE_STEP),
                self.total_dependence[candidate],
            )
            scored.append((key, maximum, candidate))
        scored.sort(reverse=True)

        main = self.main_column
        if main is not None and main in available:
            first = next(item for item in scored if item[2] == main)
        else:
            first = scored[0]
        stitch = [first[2]]
        total_weight = max(weight, STITCH_RESERVED_SHARE * self.max_weight) + self.weights[first[2]]
        for _, maximum, candidate in scored:
            if candidate == first[2] or maximum < self.merge_threshold:
                continue
            if total_weight + self.weights[candidate] > self.max_weight:
                continue
            stitch.append(candidate)
            total_weight += self.weights[candidate]
        return stitch
