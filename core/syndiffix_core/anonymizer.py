"""The Diffix count anonymizer, vectorized over all nodes of one tree level.

Input: the rows of a level sorted so that each node's rows are one contiguous segment. Output per
node: the three noisy threshold decisions (LCF, singularity, range) and the noisy row count. The true
count never leaves this module except as the precision-limit row check the reference also makes.

Two paths:
- implicit entities (no AID columns): every row is its own entity, so the entity count is the row
  count and the entity seed is the XOR of the row hashes (one `bitwise_xor.reduceat`);
- AID columns: per column, the distinct (node, entity) pairs are found by one sort, giving distinct
  entity counts, XOR seeds of the distinct entities and each entity's contribution; the ten heaviest
  entities per node drive outlier/top flattening.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .noise import Salt
from .params import AnonymizationParams, BucketizationParams


@dataclass(frozen=True)
class Entities:
    """Entity data of a table, in input row order.

    `hashes[a]` is the salted hash per row for AID column a (0 = null AID); `ids[a]` the dense entity
    index per row (-1 = null), or `ids is None` when each row is its own entity.
    """

    hashes: tuple[np.ndarray, ...]
    ids: tuple[np.ndarray, ...] | None
    entity_hashes: tuple[np.ndarray, ...] | None  # hash per dense entity index

    @property
    def implicit(self) -> bool:
        return self.ids is None


class SortedEntities:
    """Entity data of rows in one order, prepared so that any contiguous range is cheap to count.

    Implicit entities need only the XOR prefix of the row hashes (a range's seed is two lookups);
    AID columns keep the dense entity ids in that order.
    """

    def __init__(self, entities: Entities, order: np.ndarray):
        self.entities = entities
        self.implicit = entities.implicit
        if entities.implicit:
            prefix = np.zeros(order.size + 1, dtype=np.uint64)
            np.bitwise_xor.accumulate(entities.hashes[0][order], out=prefix[1:])
            self.xor_prefix = prefix
            self.ids = None
        else:
            self.xor_prefix = None
            self.ids = tuple(ids[order] for ids in entities.ids)


def _concatenated_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Positions start_i, ..., start_i + count_i - 1 for every i, concatenated."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - np.r_[0, np.cumsum(counts)[:-1]], counts)
    return np.arange(total, dtype=np.int64) + offsets


@dataclass
class _EntityStats:
    """One AID column's entities per node, and the distinct (node, entity) pairs behind them."""

    distinct: np.ndarray  # distinct non-null entities per node
    seed: np.ndarray  # XOR of their hashes
    unaccounted: np.ndarray  # rows with a null AID per node
    pair_node: np.ndarray  # per distinct pair, sorted by node
    pair_hash: np.ndarray
    contribution: np.ndarray  # rows of the pair's entity in the node
    heaviest: np.ndarray  # largest contribution per node


@dataclass
class NodeCounts:
    lcf_low: np.ndarray  # bool per node
    singularity_low: np.ndarray
    range_low: np.ndarray
    noisy_count: np.ndarray  # int64 per node, >= 1
    row_count: np.ndarray  # int64 per node (precision limit only)


class CountAnonymizer:
    def __init__(self, anonymization: AnonymizationParams, bucketization: BucketizationParams, salt: Salt):
        self.params = anonymization
        self.bucketization = bucketization
        self.salt = salt
        lcf = anonymization.low_count_params
        self.max_low_count = max(
            lcf.low_threshold, bucketization.range_low_threshold, bucketization.singularity_low_threshold
        ) + int((lcf.low_mean_gap + 4) * lcf.layer_sd)

    def _low(self, entity_count: np.ndarray, threshold_noise: np.ndarray, threshold: int) -> np.ndarray:
        lcf = self.params.low_count_params
        noisy_threshold = threshold + lcf.low_mean_gap * lcf.layer_sd + threshold_noise
        low = (entity_count < threshold) | (entity_count < noisy_threshold)
        return low & (entity_count <= self.max_low_count)

    def _thresholds(self, entity_count: np.ndarray, entity_seed: np.ndarray):
        # Below the smallest threshold every count is low, above max_low_count none is: only the
        # counts in between need their noise layer.
        lcf = self.params.low_count_params
        smallest = min(
            lcf.low_threshold,
            self.bucketization.singularity_low_threshold,
            self.bucketization.range_low_threshold,
        )
        undecided = np.flatnonzero((entity_count >= smallest) & (entity_count <= self.max_low_count))
        noise = np.zeros(entity_count.size)
        noise[undecided] = self.salt.gaussian(entity_seed[undecided], "suppress", lcf.layer_sd)
        return (
            self._low(entity_count, noise, self.params.low_count_params.low_threshold),
            self._low(entity_count, noise, self.bucketization.singularity_low_threshold),
            self._low(entity_count, noise, self.bucketization.range_low_threshold),
        )

    def count_nodes(
        self, entities: Entities, rows: np.ndarray, starts: np.ndarray, bucket_seeds: np.ndarray
    ) -> NodeCounts:
        """Anonymize the nodes whose rows are `rows[starts[i]:starts[i+1]]` (rows are input indices)."""
        ends = np.r_[starts[1:], rows.size]
        return self.count_ranges(SortedEntities(entities, rows), starts, ends, bucket_seeds)

    def count_ranges(
        self, sorted_entities: SortedEntities, starts: np.ndarray, ends: np.ndarray, bucket_seeds: np.ndarray
    ) -> NodeCounts:
        """Anonymize nodes given as [start, end) ranges of positions in `sorted_entities`' row order."""
        counts = (ends - starts).astype(np.int64)
        if sorted_entities.implicit:
            prefix = sorted_entities.xor_prefix
            entity_seed = prefix[ends] ^ prefix[starts]
            return self._count_implicit(entity_seed, counts, bucket_seeds)
        positions = _concatenated_ranges(starts, counts)
        row_ids = tuple(ids[positions] for ids in sorted_entities.ids)
        return self._count_explicit(sorted_entities.entities, row_ids, counts, bucket_seeds)

    def _count_implicit(self, entity_seed, counts, bucket_seeds) -> NodeCounts:
        lcf_low, sing_low, range_low = self._thresholds(counts, entity_seed)
        sd = self.params.layer_noise_sd
        noise = self.salt.gaussian(bucket_seeds, "noise", sd) + self.salt.gaussian(entity_seed, "noise", sd)
        noisy = np.maximum(np.rint(counts + noise), 1).astype(np.int64)
        return NodeCounts(lcf_low, sing_low, range_low, noisy, counts)

    def _count_explicit(self, entities: Entities, row_ids, counts, bucket_seeds) -> NodeCounts:
        n_nodes = counts.size
        node_of_row = np.repeat(np.arange(n_nodes, dtype=np.int64), counts)
        lcf_low = np.zeros(n_nodes, dtype=bool)
        sing_low = np.zeros(n_nodes, dtype=bool)
        range_low = np.zeros(n_nodes, dtype=bool)
        best_flattening = np.full(n_nodes, -1.0)
        best_count = np.zeros(n_nodes)
        best_sd = np.full(n_nodes, -1.0)
        best_noise = np.zeros(n_nodes)
        no_count = np.zeros(n_nodes, dtype=bool)
        per_column = [
            self._distinct_entities(ids, node_of_row, entity_hashes, n_nodes)
            for ids, entity_hashes in zip(row_ids, entities.entity_hashes, strict=True)
        ]
        for entity_stats in per_column:
            lows = self._thresholds(entity_stats.distinct, entity_stats.seed)
            lcf_low |= lows[0]
            sing_low |= lows[1]
            range_low |= lows[2]
        for entity_stats in per_column:
            distinct, seed, unaccounted = entity_stats.distinct, entity_stats.seed, entity_stats.unaccounted
            flattening, flattened, sd = self._flatten(entity_stats, ~lcf_low)
            no_count |= distinct < (self.params.outlier_count.lower + self.params.top_count.lower)
            total = flattened + np.maximum(unaccounted - flattening, 0.0)
            noise = (self.salt.gaussian(bucket_seeds, "noise") + self.salt.gaussian(seed, "noise")) * sd
            take_count = (flattening > best_flattening) | (
                (flattening == best_flattening) & (total > best_count)
            )
            best_flattening = np.where(take_count, flattening, best_flattening)
            best_count = np.where(take_count, total, best_count)
            take_noise = (sd > best_sd) | ((sd == best_sd) & (np.abs(noise) > np.abs(best_noise)))
            best_sd = np.where(take_noise, sd, best_sd)
            best_noise = np.where(take_noise, noise, best_noise)
        noisy = np.where(no_count, 0.0, np.rint(best_count + best_noise))
        return NodeCounts(lcf_low, sing_low, range_low, np.maximum(noisy, 1).astype(np.int64), counts)

    @staticmethod
    def _distinct_entities(ids, node_of_row, entity_hashes, n_nodes) -> _EntityStats:
        """Distinct (node, entity) pairs of one AID column with each entity's contribution (rows)."""
        known = ids >= 0
        unaccounted = np.bincount(node_of_row[~known], minlength=n_nodes).astype(np.float64)
        n_entities = max(entity_hashes.size, 1)
        pair_key = node_of_row[known] * n_entities + ids[known]
        pair_key.sort()
        is_first = np.r_[True, pair_key[1:] != pair_key[:-1]] if pair_key.size else np.zeros(0, bool)
        first_positions = np.flatnonzero(is_first)
        contribution = np.diff(np.r_[first_positions, pair_key.size]).astype(np.int64)
        unique_keys = pair_key[first_positions]
        pair_node = unique_keys // n_entities
        pair_hash = entity_hashes[unique_keys % n_entities]
        distinct = np.bincount(pair_node, minlength=n_nodes)
        seed = np.zeros(n_nodes, dtype=np.uint64)
        heaviest = np.zeros(n_nodes, dtype=np.int64)
        if pair_node.size:
            node_first = np.flatnonzero(np.r_[True, pair_node[1:] != pair_node[:-1]])
            seed[pair_node[node_first]] = np.bitwise_xor.reduceat(pair_hash, node_first)
            heaviest[pair_node[node_first]] = np.maximum.reduceat(contribution, node_first)
        return _EntityStats(distinct, seed, unaccounted, pair_node, pair_hash, contribution, heaviest)

    def _flatten(self, stats: _EntityStats, counted: np.ndarray):
        """Per node: flattening, flattened row sum and noise SD (Diffix outlier/top flattening).

        Only nodes that are `counted` (their count can reach an output) and have an entity with
        more than one row need the top-entity ranking; for the others nothing is flattened.
        """
        n_nodes = stats.distinct.size
        true_sum = stats.distinct.astype(np.float64)  # every entity contributes one row ...
        flattening = np.zeros(n_nodes)
        top_average = np.where(stats.distinct > 0, 1.0, 0.0)
        heavy = np.flatnonzero(counted & (stats.heaviest > 1))  # ... except in these nodes
        if heavy.size:
            index = np.full(n_nodes, -1, dtype=np.int64)
            index[heavy] = np.arange(heavy.size)
            in_heavy = index[stats.pair_node] >= 0
            node = index[stats.pair_node[in_heavy]]
            flattening[heavy], true_sum[heavy], top_average[heavy] = self._flatten_nodes(
                node,
                stats.pair_hash[in_heavy],
                stats.contribution[in_heavy],
                stats.distinct[heavy],
            )
        flattened = np.maximum(true_sum - flattening, 0.0)
        sd = self.params.layer_noise_sd * np.maximum(
            flattened / np.maximum(stats.distinct, 1), 0.5 * top_average
        )
        return flattening, flattened, sd

    def _flatten_nodes(self, pair_node, pair_hash, contribution, distinct):
        """Flattening, true row sum and top-group average for nodes 0..n-1 from their entity pairs."""
        n_nodes = distinct.size
        outlier, top = self.params.outlier_count, self.params.top_count
        top_n = outlier.upper + top.upper
        # Heaviest entities first within each node; ties keep the entity-index order (deterministic).
        max_contribution = int(contribution.max()) if contribution.size else 0
        order = np.argsort(
            pair_node * (max_contribution + 1) + (max_contribution - contribution), kind="stable"
        )
        ranked_node = pair_node[order]
        node_start = np.zeros(n_nodes + 1, dtype=np.int64)
        np.cumsum(distinct, out=node_start[1:])
        rank = np.arange(order.size) - node_start[ranked_node]
        keep = rank < top_n
        top_contribution = np.zeros((n_nodes, top_n))
        top_hash = np.zeros((n_nodes, top_n), dtype=np.uint64)
        top_contribution[ranked_node[keep], rank[keep]] = contribution[order][keep]
        top_hash[ranked_node[keep], rank[keep]] = pair_hash[order][keep]

        shortfall = np.maximum(top_n - distinct, 0)
        outlier_upper = np.maximum(outlier.upper - shortfall // 2, outlier.lower)
        top_upper = np.maximum(top.upper - (shortfall + 1) // 2, top.lower)
        columns = np.arange(top_n)
        in_top = columns[None, :] < (outlier_upper + top_upper)[:, None]
        top_seed = np.bitwise_xor.reduce(np.where(in_top, top_hash, np.uint64(0)), axis=1)
        outlier_count = self.salt.uniform_int(top_seed, "outlier", outlier.lower, outlier_upper)
        top_count = self.salt.uniform_int(top_seed, "top", top.lower, top_upper)
        in_top_group = (columns[None, :] >= outlier_count[:, None]) & (
            columns[None, :] < (outlier_count + top_count)[:, None]
        )
        top_average = (top_contribution * in_top_group).sum(axis=1) / np.maximum(top_count, 1)
        is_outlier = columns[None, :] < outlier_count[:, None]
        flattening = (np.maximum(top_contribution - top_average[:, None], 0.0) * is_outlier).sum(axis=1)
        true_sum = np.bincount(pair_node, weights=contribution, minlength=n_nodes)
        return flattening, true_sum, top_average
