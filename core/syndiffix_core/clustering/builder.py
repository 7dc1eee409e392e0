"""Clusters of columns: what they are, how a permutation becomes clusters, and how good a clustering is.

Columns are referred to by their position in the table (0..d-1). The dependence matrix is symmetric with
values in [0, 1]; a column's weight is ``1 + sqrt(max(entropy, 1))`` of its 1-dim entropy in bits.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from syndiffix_core.clustering.dependence import ConditionalDependence

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
# A member of a derived cluster whose strongest link to an earlier column beats its best link to the
# chosen stitch columns by at least this much gets that column as a further stitch column, past the
# weight limit (smaller gains are within the measure's sampling noise, and every further stitch column
# makes the join on the others coarser).
STRONGEST_LINK_MARGIN = 0.05
# A candidate left out by the weight limit whose strongest link to a member is within this of the link of
# a further stitch column that was taken is a near tie: the dependence measure cannot rank the two.
NEAR_TIE = 0.02
# A near tie replaces the taken column when, given the first stitch column, its link to its member beats
# the taken column's by at least this much (`ConditionalDependence.excess`; its shuffle noise on a
# 1000-row sample is about 0.01).
CONDITIONAL_MARGIN = 0.03
# A member whose rank correlations with the earlier columns, as its stitch columns imply them, miss the
# sample's by this much more in sum than with one further stitch column gets that column.
IMPLIED_LINKS_MARGIN = 0.15
# ... but only into a cluster of fewer columns than this: a cluster's trees double with each column
# (what a fifth column costs and buys: docs/clustering.md, "Up to 5 columns").
IMPLIED_LINKS_MAX_COLUMNS = 5


class StitchOwner(enum.StrEnum):
    """Which side's values of the stitch columns survive a merge."""

    SHARED = "shared"  # alternate rows take the left and the right side's values
    LEFT = "left"  # the accumulated table's values (used for columns that only ride along)
    RIGHT = "right"
    # shared, left or right, whichever keeps the two sides' rank correlations best (stitch_values.py)
    BEST = "best"


@dataclass(frozen=True)
class DerivedCluster:
    """Columns synthesized together and joined onto the accumulated table over ``stitch_columns``.

    Without stitch columns the cluster is *patched*: its rows are zipped onto the table at random.
    """

    columns: tuple[int, ...]
    stitch_columns: tuple[int, ...] = ()
    owner: StitchOwner = StitchOwner.BEST

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

    The solver calls :meth:`unsatisfied_dependence_of` tens of thousands of times, so the hot path works on
    nested Python lists (faster than numpy for lookups this small) and never builds the dataclasses.
    """

    def __init__(
        self,
        dependence: np.ndarray,
        entropies: np.ndarray,
        *,
        max_weight: float,
        merge_threshold: float,
        main_column: int | None = None,
        sample: np.ndarray | None = None,
        ordered: Sequence[bool] | None = None,
    ):
        """``sample``: the rows the dependence was measured on; without it near ties between stitch
        columns are not judged (`_judge_near_ties`). ``ordered``: per column, whether its values have
        an order (numbers, timestamps, booleans; not strings); with the sample it lets the stitch
        columns' implied rank correlations be judged (`_implied_links`)."""
        dependence = np.asarray(dependence, dtype=float)
        # Symmetric, and the diagonal never counts: a column is never compared with itself.
        dependence = (dependence + dependence.T) / 2
        np.fill_diagonal(dependence, 0.0)
        self.num_columns = dependence.shape[0]
        self.dependence = dependence.tolist()
        self.total_dependence = dependence.sum(axis=1).tolist()
        self.weights = column_weights(entropies).tolist()
        self._lightest = min(self.weights, default=0.0)
        self.max_weight = float(max_weight)
        self.merge_threshold = float(merge_threshold)
        if main_column is not None and not 0 <= main_column < self.num_columns:
            raise ValueError(f"main column {main_column} is not a column index below {self.num_columns}")
        self.main_column = main_column
        self.sample = sample
        self._conditional = ConditionalDependence(sample) if sample is not None else None
        self.ordered = list(ordered) if ordered is not None else None
        self._rank_correlation: np.ndarray | None = None
        self._total_dependence = float(dependence.sum())
        self._stitch_choices: dict[tuple[tuple[int, ...], int], tuple[tuple[int, ...], float]] = {}
        self._stitch_coverage: dict[tuple[int, ...], list[float]] = {}
        self._candidate_orders: dict[tuple[int, ...], tuple[list[tuple], list[tuple]]] = {}

    def build(self, permutation: Sequence[int], *, refine_stitches: bool = True) -> Clusters:
        """The clusters of a permutation. With ``refine_stitches`` a further stitch column gives way to a
        near tie that carries more given the first stitch column (`_judge_near_ties`), and every derived
        cluster also gets, past the weight limit, the earlier columns its members depend on far more
        than on its stitch columns (`_strongest_links`) and those that mend the rank correlations its
        stitch columns imply (`_implied_links`); the solver scores permutations without any of them
        (see `unsatisfied_dependence_of`)."""
        members, weights, _, _ = self._place_columns(permutation)
        derived: list[DerivedCluster] = []
        available = list(members[0])
        for cluster, weight in zip(members[1:], weights[1:], strict=True):
            stitch, _ = self._stitch_columns(cluster, weight, _mask(available))
            if refine_stitches:
                stitch = self._judge_near_ties(cluster, weight, stitch, available)
                stitch += self._strongest_links(cluster, stitch, available)
                stitch = self._implied_links(cluster, stitch, available)
            derived.append(DerivedCluster(tuple(cluster), tuple(stitch)))
            available.extend(cluster)
        initial = tuple(members[0])
        # A first derived cluster stitched on the whole initial cluster is the initial cluster grown by
        # its columns: synthesizing it as one saves a stitch and covers the same pairs.
        if derived and set(derived[0].stitch_columns) == set(initial):
            initial = initial + derived[0].columns
            derived = derived[1:]
        return Clusters(initial, tuple(derived))

    def unsatisfied_dependence_of(self, permutation: Sequence[int]) -> float:
        """The quality of ``build(permutation, refine_stitches=False)`` (lower is better), without building
        it: the solver's objective. Scoring the strongest links too made the solver group columns
        differently, for the worse on real tables (docs/clustering.md).

        What the stitch columns cover is a function of the clusters' column sets in order (up to the
        order of a float sum's terms), and an annealing run meets each such placement many times under
        other permutations (wa_churn: 5,366 permutations, 698 placements), so it is kept, keyed by the
        clusters' column masks."""
        members, weights, covered, masks = self._place_columns(permutation)
        key = tuple(masks)
        addends = self._stitch_coverage.get(key)
        if addends is None:
            addends = self._stitch_coverage[key] = self._stitch_addends(members, weights)
        for addend in addends:  # added one by one, as the placement's own sum is accumulated
            covered += addend
        return (self._total_dependence - 2.0 * covered) / (2 * self.num_columns)

    def _stitch_addends(self, members: list[list[int]], weights: list[float]) -> list[float]:
        """The dependences that the derived clusters' stitch columns cover, in the order they count:
        each cluster's stitch columns with the cluster, then pairs of stitch columns that share no
        earlier cluster."""
        dep = self.dependence
        home = [0] * self.num_columns
        for index, cluster in enumerate(members):
            for column in cluster:
                home[column] = index
        addends: list[float] = []
        stitches_of: list[list[int]] = [[]]
        stitch_pairs: set[tuple[int, int]] = set()
        available_mask = _mask(members[0])
        for index in range(1, len(members)):
            cluster = members[index]
            stitch, stitch_sums = self._stitch_columns(cluster, weights[index], available_mask)
            addends.append(stitch_sums)
            # Pairs of stitch columns are the only pairs that can already share an earlier cluster.
            for i, a in enumerate(stitch):
                for b in stitch[i + 1 :]:
                    pair = (a, b) if a < b else (b, a)
                    if (
                        home[a] == home[b]
                        or a in stitches_of[home[b]]
                        or b in stitches_of[home[a]]
                        or pair in stitch_pairs
                    ):
                        continue
                    stitch_pairs.add(pair)
                    addends.append(dep[a][b])
            stitches_of.append(stitch)
            available_mask |= _mask(cluster)
        return addends

    def unsatisfied_dependence(self, clusters: Clusters) -> float:
        """Average dependence between column pairs that share no cluster (lower is better)."""
        dep = self.dependence
        covered: set[tuple[int, int]] = set()
        for columns in clusters.all_clusters():
            ordered = sorted(columns)
            for i, a in enumerate(ordered):
                for b in ordered[i + 1 :]:
                    covered.add((a, b))
        satisfied = sum(dep[a][b] for a, b in covered)
        return (self._total_dependence - 2.0 * satisfied) / (2 * self.num_columns)

    def _place_columns(
        self, permutation: Sequence[int]
    ) -> tuple[list[list[int]], list[float], float, list[int]]:
        """Each column joins the cluster it depends on most (on average), if that is at least the merge
        threshold and the cluster has room; otherwise it opens a cluster. Also returns the summed
        dependence of the pairs inside the clusters and each cluster's columns as a mask (`_mask`).

        Each cluster keeps its members' dependence rows summed, in member order, so a column's sum to
        it is a look-up that gives the float of adding its dependences to the members one by one."""
        dep = self.dependence
        weights = self.weights
        threshold = self.merge_threshold
        first_capacity = self.max_weight
        capacity = DERIVED_CLUSTER_CAPACITY * self.max_weight
        members: list[list[int]] = []
        cluster_weight: list[float] = []
        sums: list[list[float]] = []
        masks: list[int] = []
        covered = 0.0
        for column in permutation:
            weight = weights[column]
            best, best_average, best_sum = -1, -1.0, 0.0
            for index, cluster in enumerate(members):
                # A full cluster is passed over.
                if len(cluster) > 1 and cluster_weight[index] + weight > (
                    first_capacity if index == 0 else capacity
                ):
                    continue
                total = sums[index][column]
                average = total / len(cluster)
                if average < threshold or average <= best_average:
                    continue
                best, best_average, best_sum = index, average, total
            if best < 0:
                members.append([column])
                cluster_weight.append(weight)
                sums.append(dep[column])
                masks.append(1 << column)
            else:
                members[best].append(column)
                cluster_weight[best] += weight
                sums[best] = list(map(operator.add, sums[best], dep[column]))
                masks[best] |= 1 << column
                covered += best_sum
        return members, cluster_weight, covered, masks

    def _stitch_columns(
        self, cluster: list[int], weight: float, available_mask: int
    ) -> tuple[list[int], float]:
        """Stitch columns for a derived cluster, from the columns placed before it: the best one (or the
        main column) always, then others that depend enough on the cluster while the weight allows.
        Also returns the summed dependence between the chosen stitch columns and the cluster.

        The choice depends on the cluster (in placement order, which fixes ``weight``) and on the set of
        available columns, not their order; the solver asks for each such pair 4-6 times on average
        (wa_churn: 12,122 calls, 1,886 pairs; ISLR Credit, 12 columns: 3 times), so choices are kept,
        keyed by the cluster and `available_mask` (bit c set for each available column c)."""
        key = (tuple(cluster), available_mask)
        known = self._stitch_choices.get(key)
        if known is None:
            known = self._choose_stitch_columns(cluster, weight, available_mask)
            self._stitch_choices[key] = known
        return list(known[0]), known[1]

    def _choose_stitch_columns(
        self, cluster: list[int], weight: float, available_mask: int
    ) -> tuple[tuple[int, ...], float]:
        ranked, further = self._ranked_candidates(tuple(cluster))
        main = self.main_column
        if main is not None and available_mask >> main & 1:
            first = next(item for item in ranked if item[3] == main)
        else:
            first = next(item for item in ranked if available_mask >> item[3] & 1)
        stitch = [first[3]]
        covered = first[2]
        max_weight = self.max_weight
        total_weight = max(weight, STITCH_RESERVED_SHARE * max_weight) + self.weights[first[3]]
        for candidate, total, candidate_weight in further:
            if total_weight + self._lightest > max_weight:
                break  # no column fits any more
            if not available_mask >> candidate & 1 or candidate == first[3]:
                continue
            if total_weight + candidate_weight > max_weight:
                continue
            stitch.append(candidate)
            covered += total
            total_weight += candidate_weight
        return tuple(stitch), covered

    def _ranked_candidates(self, cluster: tuple[int, ...]) -> tuple[list[tuple], list[tuple]]:
        """Every column outside ``cluster`` as a stitch candidate (key, maximum, total, column), best
        first, and those whose maximum reaches the merge threshold as (column, total, weight) in the
        order further stitch columns are tried. A stitch choice takes the available ones in these
        orders; the solver meets the same cluster under many sets of available columns, so both are
        kept per cluster (in placement order: it fixes the float sums).

        A further stitch column carries its strongest link into the cluster, so candidates are tried by
        their maximum dependence to a cluster column (then their total): the weight limit then leaves
        out a column weakly tied to every member rather than one strongly tied to one member."""
        known = self._candidate_orders.get(cluster)
        if known is None:
            # Per column, its dependences to the members (the matrix is symmetric) summed in member
            # order, and their maximum.
            rows = [self.dependence[member] for member in cluster]
            totals = list(map(sum, zip(*rows, strict=True)))
            maxima = list(map(max, zip(*rows, strict=True)))
            size = len(cluster)
            members = set(cluster)
            floor, overall = math.floor, self.total_dependence
            ranked = [
                (
                    (
                        floor(totals[candidate] / size / AVERAGE_DEPENDENCE_STEP),
                        floor(maxima[candidate] / MAX_DEPENDENCE_STEP),
                        overall[candidate],
                    ),
                    maxima[candidate],
                    totals[candidate],
                    candidate,
                )
                for candidate in range(self.num_columns)
                if candidate not in members
            ]
            ranked.sort(reverse=True)
            # Stable: equal keys keep the order above, as they would among any subset of the candidates.
            by_maximum = sorted(
                ranked, key=lambda item: (math.floor(item[1] / MAX_DEPENDENCE_STEP), item[2]), reverse=True
            )
            further = [
                (candidate, total, self.weights[candidate])
                for _, maximum, total, candidate in by_maximum
                if maximum >= self.merge_threshold
            ]
            known = self._candidate_orders[cluster] = (ranked, further)
        return known

    def _judge_near_ties(
        self, cluster: list[int], weight: float, stitch: list[int], available: list[int]
    ) -> list[int]:
        """``stitch`` with each further stitch column replaced by the candidate the weight limit left
        out whose strongest link to a member is a near tie of the taken column's (within NEAR_TIE) and
        which, given the first stitch column, depends on its member by CONDITIONAL_MARGIN more than the
        taken column on its member (the most such; only where the weight limit still holds).

        The pairwise measure cannot see a three-way relation: on diamonds depth's link to x (0.22) is
        what cut, the first stitch column, already carries, while its link to table (0.20) is not."""
        if self.sample is None or len(stitch) < 2:
            return stitch
        dep = self.dependence
        first = stitch[0]

        def strongest(column: int) -> tuple[float, int]:
            return max((dep[column][member], member) for member in cluster)

        def beyond_first(column: int) -> float:
            return self._conditional.excess(strongest(column)[1], column, first)

        chosen = list(stitch)
        for position in range(1, len(stitch)):
            taken = chosen[position]
            reach = strongest(taken)[0]
            ties = [
                candidate
                for candidate in available
                if candidate not in chosen
                and strongest(candidate)[0] >= self.merge_threshold
                and abs(strongest(candidate)[0] - reach) <= NEAR_TIE
            ]
            if not ties:
                continue
            best_excess, best = max((beyond_first(candidate), candidate) for candidate in ties)
            if best_excess < beyond_first(taken) + CONDITIONAL_MARGIN:
                continue
            swapped = chosen[:position] + [best] + chosen[position + 1 :]
            total = max(weight, STITCH_RESERVED_SHARE * self.max_weight)
            if total + sum(self.weights[column] for column in swapped) <= self.max_weight:
                chosen = swapped
        return chosen

    def _strongest_links(self, cluster: list[int], stitch: list[int], available: list[int]) -> list[int]:
        """Earlier columns, not yet stitch columns, that are the strongest link of a cluster member and
        beat that member's best link to the stitch columns by at least STRONGEST_LINK_MARGIN (and reach
        the merge threshold). The weight limit would otherwise leave out a column tied strongly to one
        member, such as a running total's duration, because its weight was spent on columns tied to all."""
        dep = self.dependence
        extra: list[int] = []
        for member in cluster:
            row = dep[member]
            strongest = max(available, key=lambda column: (row[column], -column))
            served = max(row[column] for column in stitch + extra)
            if (
                strongest not in stitch
                and strongest not in extra
                and row[strongest] >= self.merge_threshold
                and row[strongest] >= served + STRONGEST_LINK_MARGIN
            ):
                extra.append(strongest)
        return extra

    def _implied_links(self, cluster: list[int], stitch: list[int], available: list[int]) -> list[int]:
        """``stitch`` with earlier ordered columns, one per ordered member at most, that bring the member's
        rank correlations with the earlier columns close to the sample's where the stitch columns alone
        imply them wrongly (the sum of the misses drops by at least IMPLIED_LINKS_MARGIN).

        A column joined through stitch columns gets, to any earlier column, the correlation that runs
        through them. On diamonds depth is stitched on cut and table: depth–table (-0.26) times
        table–size (+0.2) gives depth about -0.05 to every size column, while in the source depth–z is
        +0.10 and the rest about 0; with price as a further stitch column the misses shrink from 0.35 to
        0.17 (sum over carat, price, x, y, z). A cluster of IMPLIED_LINKS_MAX_COLUMNS columns takes such
        a column instead of its further stitch column least tied to the members, where that one is
        tied to them less (`_replaceable_stitch_column`)."""
        if self.sample is None or self.ordered is None:
            return stitch
        ordered = self.ordered
        stitch = list(stitch)
        for member in cluster:
            if not ordered[member]:
                continue
            chosen = [column for column in stitch if ordered[column]]
            earlier = [column for column in available if ordered[column] and column not in stitch]
            if not earlier:
                continue
            missed = self._implied_misses(member, chosen, earlier)
            best_sum, best = min(
                (self._implied_misses(member, chosen + [column], earlier), column) for column in earlier
            )
            if missed - best_sum < IMPLIED_LINKS_MARGIN:
                continue
            if len(cluster) + len(stitch) < IMPLIED_LINKS_MAX_COLUMNS:
                stitch.append(best)
                continue
            replaced = self._replaceable_stitch_column(cluster, stitch, best)
            if replaced is None:
                continue
            through = [column for column in chosen if column != replaced] + [best]
            judged = earlier + [replaced] if ordered[replaced] else earlier
            if missed - self._implied_misses(member, through, judged) >= IMPLIED_LINKS_MARGIN:
                stitch[stitch.index(replaced)] = best
        return stitch

    def _replaceable_stitch_column(self, cluster: list[int], stitch: list[int], candidate: int) -> int | None:
        """The further stitch column (not the first) whose strongest link to a member of ``cluster`` is
        the weakest, if ``candidate``'s is stronger; None otherwise. On Panel Study wages (AER
        PSID7682) education is stitched on experience and south, a region weakly tied to it, while its
        wage correlation (+0.37) comes out at -0.01 through experience; with wage in place of south it
        comes out at +0.36."""
        dep = self.dependence
        reach, weakest = min(
            ((max(dep[column][m] for m in cluster), column) for column in stitch[1:]), default=(1.0, None)
        )
        if weakest is None or reach >= max(dep[candidate][m] for m in cluster):
            return None
        return weakest

    def _implied_misses(self, member: int, through: list[int], columns: list[int]) -> float:
        """Sum over ``columns`` of |rank correlation of the member with the column as a linear join
        through the ``through`` columns implies it − the sample's| (a column of ``through`` is met
        exactly)."""
        ranks = self._ranks()
        actual = ranks[member, columns]
        if not through:
            return float(np.abs(actual).sum())
        weights = np.linalg.lstsq(ranks[np.ix_(through, through)], ranks[through, member], rcond=None)[0]
        return float(np.abs(weights @ ranks[np.ix_(through, columns)] - actual).sum())

    def _ranks(self) -> np.ndarray:
        """Spearman correlations between the sample's columns (0 where a column is constant)."""
        if self._rank_correlation is None:
            ranks = pd.DataFrame(self.sample).rank()
            self._rank_correlation = np.nan_to_num(ranks.corr().to_numpy())
        return self._rank_correlation


def _mask(columns: Sequence[int]) -> int:
    """The set of `columns` as an integer with bit c set for column c: a cheaper dictionary key than a
    frozenset."""
    mask = 0
    for column in columns:
        mask |= 1 << column
    return mask
