"""The Diffix count anonymizer, vectorized over all nodes of one tree level.

Input: the rows of a level sorted so that each node's rows are one contiguous segment. Output per
node: the three noisy threshold decisions (LCF, singularity, range) and the noisy row count. The true
count never leaves this module except as the precision-limit row check the reference also makes.

Two paths:
- implicit entities (no AID columns): every row is its own entity, so the entity count is the row
  count and the entity seed is the XOR of the row hashes (two lookups in a prefix XOR);
- AID columns: per column, a node's distinct entities are its rows minus its "repeat rows" (rows whose
  entity already has a row earlier in the node). Within one tree, the previous row of the same entity
  stays in the same node down to the depth at which the two rows' codes first differ, so every row
  that repeats an entity is found once per tree, labelled with that depth, and each level counts and
  XORs only the repeat rows still inside their node (prefix lookups), not all rows. Nodes whose count
  can reach an output and that hold an entity with several rows rank their ten heaviest entities for
  outlier/top flattening from their repeat rows (all their rows only when fewer than ten entities
  repeat). Arbitrary row subsets (the 1-dim push-down) find the distinct (node, entity) pairs by sort.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .noise import Salt
from .params import AnonymizationParams, BucketizationParams


@dataclass(frozen=True)
class Entities:
    """Entity data of a table, in input row order.

    `hashes[a]` is the salted hash per row for AID column a (0 = null AID); `ids[a]` the dense entity
    index per row (-1 = null), or `ids is None` when each row is its own entity. With AID columns,
    `hashes[a]` is `entity_hashes[a][ids[a]]` (0 where null).
    """

    hashes: tuple[np.ndarray, ...]
    ids: tuple[np.ndarray, ...] | None
    entity_hashes: tuple[np.ndarray, ...] | None  # hash per dense entity index
    # The root of every tree holds all rows: its entities per AID column, counted and ranked once.
    roots: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def implicit(self) -> bool:
        return self.ids is None

    def root(self, column: int) -> _RootEntities:
        if column not in self.roots:
            self.roots[column] = _RootEntities(self.ids[column], self.entity_hashes[column])
        return self.roots[column]


class _RootEntities:
    """One AID column's entities over all rows (every tree's root): the same in every tree."""

    def __init__(self, ids: np.ndarray, entity_hashes: np.ndarray):
        self.known = int(np.count_nonzero(ids >= 0))
        self.rows = ids.size
        self._rows_per_entity = np.bincount(ids[ids >= 0], minlength=entity_hashes.size)
        present = self._rows_per_entity > 0
        self.distinct = int(np.count_nonzero(present))
        self.seed = np.bitwise_xor.reduce(entity_hashes[present])
        self._entity_hashes = entity_hashes
        # Hash per entity index, 0 at index -1 (null): rows' hashes in any order are a lookup in this
        # small table, cheaper than gathering the table-sized row hashes in that order.
        self.hash_of_id = np.r_[entity_hashes, np.uint64(0)]
        self._top: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def stats(self) -> _EntityStats:
        return _EntityStats(
            distinct=np.array([self.distinct], dtype=np.int64),
            seed=np.array([self.seed], dtype=np.uint64),
            unaccounted=np.array([self.rows - self.known], dtype=np.float64),
            known=np.array([self.known], dtype=np.int64),
            several=np.array([self.known > self.distinct]),
            top_entities=lambda nodes, top_n: self.top_entities(top_n),
        )

    def top_entities(self, top_n: int) -> tuple[np.ndarray, np.ndarray]:
        """The root's `top_n` heaviest entities (ties in entity order), as `_rank_top` gives them."""
        if top_n not in self._top:
            entity = np.flatnonzero(self._rows_per_entity)
            contribution = self._rows_per_entity[entity]
            node = np.zeros(entity.size, dtype=np.int64)
            candidates = _top_candidates(node, contribution, 1, top_n)
            self._top[top_n] = _rank_top(
                node[candidates], self._entity_hashes[entity[candidates]], contribution[candidates], 1, top_n
            )
        return self._top[top_n]


SharedLevels = Callable[[np.ndarray, np.ndarray], np.ndarray]


class SortedEntities:
    """Entity data of rows in one order, prepared so that any contiguous range is cheap to count.

    Implicit entities need only the XOR prefix of the row hashes (a range's seed is two lookups);
    AID columns keep the dense entity ids in that order and, when the order is a tree's and
    `shared_levels(p, q)` gives the number of tree levels positions p < q share (their node is the same
    down to that depth), each column's repeat rows (`EntityRepeats`) for counting tree levels.
    """

    def __init__(self, entities: Entities, order: np.ndarray, shared_levels: SharedLevels | None = None):
        self.entities = entities
        self.implicit = entities.implicit
        self.repeats = None
        if entities.implicit:
            prefix = np.zeros(order.size + 1, dtype=np.uint64)
            np.bitwise_xor.accumulate(entities.hashes[0][order], out=prefix[1:])
            self.xor_prefix = prefix
            self.ids = None
        else:
            self.xor_prefix = None
            self.ids = tuple(ids[order] for ids in entities.ids)
            if shared_levels is not None:
                self.repeats = tuple(
                    EntityRepeats(ids, entity_hashes, shared_levels, entities.root(a))
                    for a, (ids, entity_hashes) in enumerate(
                        zip(self.ids, entities.entity_hashes, strict=True)
                    )
                )


class EntityRepeats:
    """One AID column's rows in a tree's order, indexed by the rows that repeat an entity.

    Row q repeats its entity in a node iff the entity's previous row p (in this order) is in the same
    node, i.e. iff the node's depth is at most the levels p and q share. Per depth, the repeat rows
    still inside their node form a shrinking subset, held twice: by position, so a node's repeat count
    and XOR are two lookups in prefix arrays (its distinct entities follow from its rows with an AID
    and the XOR of their hashes), and in entity order, where an entity's repeat rows in one node are a
    chain, for ranking the heaviest entities; a chain's node is found from its first row by one
    search in the bounds of the ranked nodes. The root (depth 0, all rows) is the
    same in every tree and counted once (`_RootEntities`), so only repeat rows that share at least
    one level with their previous row are kept.
    """

    def __init__(self, ids, entity_hashes, shared_levels: SharedLevels, root: _RootEntities):
        n = ids.size
        row_hashes = root.hash_of_id[ids]
        self._root = root
        self.ids = ids
        self.entity_hashes = entity_hashes
        self.known_prefix = None  # every row has an AID: a range's known rows are its rows
        if root.known < n:
            self.known_prefix = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(ids >= 0, out=self.known_prefix[1:])
        self.xor_prefix = np.zeros(n + 1, dtype=np.uint64)
        np.bitwise_xor.accumulate(row_hashes, out=self.xor_prefix[1:])
        row, previous = _repeat_rows(ids)
        shared = shared_levels(previous, row)
        below_root = np.flatnonzero(shared >= 1)
        # Entity order: each repeat row with its entity's previous row and the levels they share.
        self._row, self._previous, self._row_shared = (
            row[below_root],
            previous[below_root],
            shared[below_root],
        )
        del row, previous, shared, below_root
        # Position order, by marking each repeat row's shared levels at its place (a row repeats at
        # most once: no sort).
        shared_at_row = np.zeros(n, dtype=np.int32)
        shared_at_row[self._row] = self._row_shared
        self._positions = np.flatnonzero(shared_at_row).astype(self._row.dtype)
        self._shared = shared_at_row[self._positions].astype(np.uint8)
        self._hashes = row_hashes[self._positions]
        self._depth = 0  # the depth that `_xor` serves (none yet)
        self._xor = None

    def _at_depth(self, depth: int) -> None:
        """Keep the repeat rows that still share their node at `depth` (depths come in increasing order)."""
        if depth == self._depth:
            return
        kept = np.flatnonzero(self._shared >= depth)
        if kept.size < self._shared.size:  # (one index array serves three takes: faster than masks)
            self._positions, self._shared, self._hashes = (
                self._positions.take(kept),
                self._shared.take(kept),
                self._hashes.take(kept),
            )
            kept = np.flatnonzero(self._row_shared >= depth)
            self._row, self._previous, self._row_shared = (
                self._row.take(kept),
                self._previous.take(kept),
                self._row_shared.take(kept),
            )
        self._xor = np.zeros(self._positions.size + 1, dtype=np.uint64)
        np.bitwise_xor.accumulate(self._hashes, out=self._xor[1:])
        self._depth = depth

    def level_stats(self, depth: int, starts: np.ndarray, ends: np.ndarray) -> _EntityStats:
        """Per node [starts, ends) of tree level `depth` (depth 0: the root, all rows)."""
        if depth == 0:
            return self._root.stats()
        self._at_depth(depth)
        first = self._positions.searchsorted(starts)
        stop = self._positions.searchsorted(ends)
        repeats = stop - first
        if self.known_prefix is None:
            known = ends - starts
        else:
            known = self.known_prefix[ends] - self.known_prefix[starts]
        distinct = known - repeats
        seed = self.xor_prefix[ends] ^ self.xor_prefix[starts] ^ self._xor[stop] ^ self._xor[first]
        return _EntityStats(
            distinct=distinct,
            seed=seed,
            unaccounted=((ends - starts) - known).astype(np.float64),
            known=known,
            several=repeats > 0,
            top_entities=lambda nodes, top_n: self._rank_nodes(starts, ends, distinct, nodes, top_n),
        )

    def _rank_nodes(self, starts, ends, distinct, nodes, top_n):
        """Heaviest entities of `nodes` (of a level's nodes [starts, ends)): in entity order, an
        entity's repeat rows in one node are a chain of entries each following the previous one's
        row, and c rows in the node make c - 1 entries. A node with fewer than `top_n` entities of
        several rows also ranks its entities of one row."""
        # Chain boundaries: chains start where an entry does not follow the previous entry's row.
        boundary = np.empty(self._row.size + 1, dtype=bool)
        boundary[0] = boundary[-1] = True
        np.not_equal(self._previous[1:], self._row[:-1], out=boundary[1:-1])
        boundary = boundary.nonzero()[0]
        chain_first_row = self._row[boundary[:-1]]
        # The node of a chain holds its first row: the nodes' ranges are disjoint and in position
        # order, so a row lies inside one iff it falls after an odd number of their bounds.
        bounds = np.empty(2 * nodes.size, dtype=np.int64)
        starts, ends = starts[nodes], ends[nodes]
        bounds[0::2], bounds[1::2] = starts, ends
        slot = bounds.searchsorted(chain_first_row, side="right")
        selected = (slot & 1).nonzero()[0]
        pair_node, first_row = slot[selected] >> 1, chain_first_row[selected]
        contribution = boundary[1:] - boundary[:-1]
        contribution = contribution[selected] + 1
        ranked = np.bincount(pair_node, minlength=nodes.size)
        light = ((ranked < top_n) & (distinct[nodes] > ranked)).nonzero()[0]
        if light.size == nodes.size:
            # Every node is light, so every chain is a candidate and the light ranking is the result.
            entity = self.ids[first_row]
            return self._rank_light(starts, ends, (pair_node, entity, contribution), top_n)
        if pair_node.size >= _PACKED_SORT_MIN:  # (fewer chains are ranked faster than selected)
            candidates = _top_candidates(pair_node, contribution, nodes.size, top_n)
            pair_node, contribution = pair_node[candidates], contribution[candidates]
            first_row = first_row[candidates]
        entity = self.ids[first_row]
        top = _rank_top(pair_node, self.entity_hashes[entity], contribution, nodes.size, top_n)
        if light.size:
            # All the chains of a light node are candidates (it has fewer than top_n of them).
            light_index = np.full(nodes.size, -1, dtype=np.int64)
            light_index[light] = np.arange(light.size)
            chains = (light_index[pair_node] >= 0).nonzero()[0]
            top[0][light], top[1][light] = self._rank_light(
                starts[light],
                ends[light],
                (light_index[pair_node[chains]], entity[chains], contribution[chains]),
                top_n,
            )
        return top

    def _rank_light(self, starts, ends, chains, top_n):
        """Heaviest entities of nodes [starts, ends) with fewer than `top_n` entities of several rows,
        from their `chains` (node, entity, rows) and their entities of one row."""
        pair_node, entity, contribution = _light_node_pairs(
            self.ids, starts, ends, chains, self.entity_hashes.size, top_n, self.known_prefix is not None
        )
        return _rank_top(pair_node, self.entity_hashes[entity], contribution, starts.size, top_n)


def _repeat_rows(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, previous row) of every position whose entity has an earlier position, in entity order
    (each entity's rows by position); positions as int32 when they fit."""
    n = ids.size
    # (entity, position) in one sorted uint64: each entity's rows are then consecutive.
    row_bits = max(1, (n - 1).bit_length())
    packed = ids.astype(np.uint64)
    packed += np.uint64(1)  # null (-1) -> 0
    packed <<= np.uint64(row_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    entity = packed >> np.uint64(row_bits)
    again = np.flatnonzero((entity[1:] == entity[:-1]) & (entity[1:] != 0))
    del entity
    position = (packed & np.uint64((1 << row_bits) - 1)).astype(np.int32 if n < 2**31 else np.int64)
    return position[again + 1], position[again]


def _range_entities(ids: np.ndarray, entity_hashes: np.ndarray) -> tuple[int, np.uint64]:
    """Distinct entities of the rows `ids` (-1 = null) and the XOR of their hashes, by marking the
    entities present (one pass over the rows, no sort)."""
    present = np.zeros(entity_hashes.size + 1, dtype=bool)
    present[ids + 1] = True
    present = present[1:]
    return int(np.count_nonzero(present)), np.bitwise_xor.reduce(entity_hashes[present])


_BINNED_PAIRS_MIN = 2048


def _light_node_pairs(ids, starts, ends, chains, entity_count: int, top_n: int, has_nulls: bool):
    """(node, entity, rows) sorted by node then entity: what can rank among the `top_n` heaviest
    entities of nodes [starts, ends) that hold fewer than `top_n` entities of several rows, i.e. those
    (`chains`: node, entity, rows, from the repeat rows) and the `top_n` smallest entity indices of
    each node (its one-row entities come in that order).

    From `_BINNED_PAIRS_MIN` rows on, the smallest indices come without sorting every row
    (`_first_bins`); below, sorting them all costs less than the numpy calls of the bins.
    """
    chain_node, chain_entity, chain_rows = chains
    counts = ends - starts
    row_ids = ids[_concatenated_ranges(starts, counts)]
    row_node = np.repeat(np.arange(starts.size, dtype=np.int64), counts)
    if has_nulls:
        known = row_ids >= 0
        row_ids, row_node = row_ids[known], row_node[known]
    later = None
    if row_ids.size >= _BINNED_PAIRS_MIN:
        paired, later = _first_bins(row_ids, row_node, chains, starts.size, entity_count, top_n)
        row_node, row_ids = row_node[paired], row_ids[paired]
    pair_node, entity, rows = _distinct_pairs(row_node, row_ids, entity_count)
    smallest = (np.arange(pair_node.size) - run_starts(pair_node)) < top_n
    kept = (smallest | (rows > 1)).nonzero()[0]
    if later is None or later.size == 0:  # the pairs are all there is, already in order
        return pair_node[kept], entity[kept], rows[kept]
    pair_node = np.concatenate([pair_node[kept], chain_node[later]])
    entity = np.concatenate([entity[kept], chain_entity[later]])
    rows = np.concatenate([rows[kept], chain_rows[later]])
    order = np.argsort(pair_node * max(entity_count, 1) + entity)
    return pair_node[order], entity[order], rows[order]


def _first_bins(row_ids, row_node, chains, n_nodes: int, entity_count: int, top_n: int):
    """(rows to pair, chains not among them) for `_light_node_pairs`: entity indices are cut into
    bins, and per node only the rows of the bins up to the one where its distinct entities (rows minus
    repeat rows per bin) reach `top_n` are paired by sort; the chains of later bins join those pairs."""
    chain_node, chain_entity, chain_rows = chains
    # About four rows per bin in a node of average size.
    wanted_bins = max(1, row_ids.size // (4 * n_nodes))
    shift = max(0, (entity_count - 1).bit_length() - wanted_bins.bit_length())
    n_bins = ((entity_count - 1) >> shift) + 1
    row_bin = row_ids >> shift
    chain_bin = chain_entity >> shift
    distinct = np.bincount(row_node * n_bins + row_bin, minlength=n_nodes * n_bins)
    distinct -= np.bincount(
        chain_node * n_bins + chain_bin, weights=chain_rows - 1, minlength=n_nodes * n_bins
    ).astype(np.int64)
    reached = np.cumsum(distinct.reshape(n_nodes, n_bins), axis=1) >= top_n
    last_bin = np.where(reached[:, -1], reached.argmax(axis=1), n_bins - 1)
    paired = row_bin <= last_bin[row_node]
    return paired, (chain_bin > last_bin[chain_node]).nonzero()[0]


def _distinct_pairs(node: np.ndarray, ids: np.ndarray, entity_count: int):
    """Distinct (node, entity) pairs of rows with known entities, sorted by node then entity, with the
    number of rows of each pair."""
    n_entities = max(entity_count, 1)
    if node.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    pair_key = node * n_entities + ids
    if (int(node.max()) + 1) * n_entities <= 2**31:
        pair_key = pair_key.astype(np.int32)  # sorting 32-bit keys takes about half the time
    pair_key.sort()
    first_positions = _true_first(pair_key[1:] != pair_key[:-1]).nonzero()[0]
    rows = np.empty(first_positions.size, dtype=np.int64)
    rows[:-1] = first_positions[1:] - first_positions[:-1]
    rows[-1] = pair_key.size - first_positions[-1]
    node, entity = np.divmod(pair_key[first_positions].astype(np.int64), n_entities)
    return node, entity, rows


def _top_candidates(pair_node, contribution, n_nodes, top_n, cap: int = 15) -> np.ndarray:
    """Positions of the pairs that can be among their node's `top_n` heaviest: per node, those whose
    contribution (capped at `cap`) is at least the top_n-th largest capped contribution there."""
    capped = np.minimum(contribution, cap)
    histogram = np.bincount(pair_node * (cap + 1) + capped, minlength=n_nodes * (cap + 1))
    at_least = np.cumsum(histogram.reshape(n_nodes, cap + 1)[:, ::-1], axis=1)[:, ::-1]
    # Largest c with at least top_n pairs of capped contribution >= c (0 if the node has fewer pairs).
    threshold = (at_least >= top_n).sum(axis=1) - 1
    return (capped >= np.maximum(threshold, 0)[pair_node]).nonzero()[0]


# From this many pairs, one sort of packed keys beats a stable argsort; below, its extra numpy calls
# cost more than the sorting.
_PACKED_SORT_MIN = 1024


def _rank_top(pair_node, pair_hash, contribution, n_nodes, top_n):
    """(contribution, hash) matrices (n_nodes, top_n) of each node's heaviest entities, heaviest first;
    ties keep the order of the pairs (each node's entities must come in entity-index order)."""
    top_contribution = np.zeros((n_nodes, top_n))
    top_hash = np.zeros((n_nodes, top_n), dtype=np.uint64)
    n = pair_node.size
    if n == 0:
        return top_contribution, top_hash
    max_contribution = int(contribution.max())
    index_bits, rank_bits = max(1, (n - 1).bit_length()), max_contribution.bit_length()
    if n >= _PACKED_SORT_MIN and index_bits + rank_bits + max(1, (n_nodes - 1).bit_length()) <= 64:
        # One plain sort of (node, contribution rank, position) packed into a uint64.
        key = pair_node.astype(np.uint64) << np.uint64(rank_bits + index_bits)
        key |= (max_contribution - contribution).astype(np.uint64) << np.uint64(index_bits)
        key |= np.arange(n, dtype=np.uint64)
        key.sort()
        order = (key & np.uint64((1 << index_bits) - 1)).astype(np.int64)
    else:
        order = np.argsort(
            pair_node * (max_contribution + 1) + (max_contribution - contribution), kind="stable"
        )
    ranked_node = pair_node[order]
    # A pair's rank is its distance from the first pair of its node (ranked_node is sorted).
    rank = np.arange(n) - run_starts(ranked_node)
    keep = (rank < top_n).nonzero()[0]
    if keep.size < n:
        ranked_node, rank, order = ranked_node[keep], rank[keep], order[keep]
    top_contribution[ranked_node, rank] = contribution[order]
    top_hash[ranked_node, rank] = pair_hash[order]
    return top_contribution, top_hash


def run_starts(sorted_values: np.ndarray) -> np.ndarray:
    """Per element of a sorted array, the index of the first element equal to it (as
    `sorted_values.searchsorted(sorted_values)`, in linear time)."""
    if sorted_values.size == 0:
        return np.zeros(0, dtype=np.intp)
    starts = _true_first(sorted_values[1:] != sorted_values[:-1]).nonzero()[0]
    return np.repeat(starts, np.diff(starts, append=sorted_values.size))


def _true_first(differs: np.ndarray) -> np.ndarray:
    """[True, *differs]: the first element and those that differ from their predecessor."""
    marks = np.empty(differs.size + 1, dtype=bool)
    marks[0] = True
    marks[1:] = differs
    return marks


def _concatenated_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Positions start_i, ..., start_i + count_i - 1 for every i, concatenated."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.repeat(starts - (counts.cumsum() - counts), counts)
    return np.arange(total, dtype=np.int64) + offsets


@dataclass
class _EntityStats:
    """One AID column's entities per node."""

    distinct: np.ndarray  # distinct non-null entities per node
    seed: np.ndarray  # XOR of their hashes
    unaccounted: np.ndarray  # rows with a null AID per node (float)
    known: np.ndarray  # rows with a non-null AID per node
    several: np.ndarray  # bool: some entity has more than one row in the node
    top_entities: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]  # (nodes, n) -> heaviest n


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
        undecided = ((entity_count >= smallest) & (entity_count <= self.max_low_count)).nonzero()[0]
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

    def low_count(self, sorted_entities: SortedEntities, start: int, end: int) -> bool:
        """The LCF decision alone for the rows at positions [start, end) of `sorted_entities`' order."""
        if sorted_entities.implicit:
            prefix = sorted_entities.xor_prefix
            seed = prefix[end] ^ prefix[start]
            return bool(self._thresholds(np.array([end - start]), np.array([seed], dtype=np.uint64))[0][0])
        for ids, entity_hashes in zip(
            sorted_entities.ids, sorted_entities.entities.entity_hashes, strict=True
        ):
            distinct, seed = _range_entities(ids[start:end], entity_hashes)
            if self._thresholds(np.array([distinct]), np.array([seed], dtype=np.uint64))[0][0]:
                return True
        return False

    def count_ranges(
        self,
        sorted_entities: SortedEntities,
        starts: np.ndarray,
        ends: np.ndarray,
        bucket_seeds: np.ndarray,
        depth: int | None = None,
    ) -> NodeCounts:
        """Anonymize nodes given as [start, end) ranges of positions in `sorted_entities`' row order
        (`depth`: the nodes are one level of the tree whose order that is, visited in increasing depth)."""
        counts = (ends - starts).astype(np.int64)
        if sorted_entities.implicit:
            prefix = sorted_entities.xor_prefix
            entity_seed = prefix[ends] ^ prefix[starts]
            return self._count_implicit(entity_seed, counts, bucket_seeds)
        if sorted_entities.repeats is not None and depth is not None:
            per_column = [repeats.level_stats(depth, starts, ends) for repeats in sorted_entities.repeats]
        else:
            per_column = _range_stats(sorted_entities, starts, ends)
        return self._count_explicit(per_column, counts, bucket_seeds)

    def _count_implicit(self, entity_seed, counts, bucket_seeds) -> NodeCounts:
        lcf_low, sing_low, range_low = self._thresholds(counts, entity_seed)
        bucket_layer, entity_layer = self._noise_layers(
            bucket_seeds, [entity_seed], self.params.layer_noise_sd
        )
        noise = bucket_layer + entity_layer
        noisy = np.maximum(np.rint(counts + noise), 1).astype(np.int64)
        return NodeCounts(lcf_low, sing_low, range_low, noisy, counts)

    def _count_explicit(self, per_column: list[_EntityStats], counts, bucket_seeds) -> NodeCounts:
        """Per AID column: thresholds, flattening and noise; a node is low if low for any column, and
        takes the largest flattening (then count) and the largest noise SD (then |noise|)."""
        lcf_low, sing_low, range_low = self._thresholds(per_column[0].distinct, per_column[0].seed)
        for entity_stats in per_column[1:]:
            lows = self._thresholds(entity_stats.distinct, entity_stats.seed)
            lcf_low, sing_low, range_low = lcf_low | lows[0], sing_low | lows[1], range_low | lows[2]
        layers = self._noise_layers(bucket_seeds, [stats.seed for stats in per_column])
        bucket_noise = layers[0]
        smallest_count = self.params.outlier_count.lower + self.params.top_count.lower
        no_count = np.zeros(counts.size, dtype=bool)
        best = None
        for entity_stats, entity_noise in zip(per_column, layers[1:], strict=True):
            flattening, flattened, sd = self._flatten(entity_stats, ~lcf_low)
            no_count |= entity_stats.distinct < smallest_count
            total = flattened + np.maximum(entity_stats.unaccounted - flattening, 0.0)
            noise = (bucket_noise + entity_noise) * sd
            if best is None:
                best = flattening, total, sd, noise
                continue
            best_flattening, best_count, best_sd, best_noise = best
            take_count = (flattening > best_flattening) | (
                (flattening == best_flattening) & (total > best_count)
            )
            take_noise = (sd > best_sd) | ((sd == best_sd) & (np.abs(noise) > np.abs(best_noise)))
            best = (
                np.where(take_count, flattening, best_flattening),
                np.where(take_count, total, best_count),
                np.where(take_noise, sd, best_sd),
                np.where(take_noise, noise, best_noise),
            )
        _, best_count, _, best_noise = best
        noisy = np.where(no_count, 0.0, np.rint(best_count + best_noise))
        return NodeCounts(lcf_low, sing_low, range_low, np.maximum(noisy, 1).astype(np.int64), counts)

    def _noise_layers(self, bucket_seeds, entity_seeds: list[np.ndarray], sd: float = 1.0) -> np.ndarray:
        """(1 + len(entity_seeds), nodes): each node's bucket noise layer, then its entity layer per AID
        column, drawn in one call (each seed's noise is computed on its own, so the values are those of
        one call per layer, at the per-call cost of one)."""
        seeds = np.concatenate([np.asarray(seeds, np.uint64) for seeds in (bucket_seeds, *entity_seeds)])
        return self.salt.gaussian(seeds, "noise", sd).reshape(len(entity_seeds) + 1, -1)

    def _flatten(self, stats: _EntityStats, counted: np.ndarray):
        """Per node: flattening, flattened row sum and noise SD (Diffix outlier/top flattening).

        Only nodes that are `counted` (their count can reach an output) and have an entity with
        more than one row need the top-entity ranking; for the others nothing is flattened.
        """
        n_nodes = stats.distinct.size
        true_sum = stats.distinct.astype(np.float64)  # every entity contributes one row ...
        flattening = np.zeros(n_nodes)
        top_average = np.where(stats.distinct > 0, 1.0, 0.0)
        heavy = (counted & stats.several).nonzero()[0]  # ... except in these nodes
        if heavy.size:
            top_n = self.params.outlier_count.upper + self.params.top_count.upper
            top_contribution, top_hash = stats.top_entities(heavy, top_n)
            flattening[heavy], top_average[heavy] = self._flatten_top(
                top_contribution, top_hash, stats.distinct[heavy]
            )
            true_sum[heavy] = stats.known[heavy]
        flattened = np.maximum(true_sum - flattening, 0.0)
        sd = self.params.layer_noise_sd * np.maximum(
            flattened / np.maximum(stats.distinct, 1), 0.5 * top_average
        )
        return flattening, flattened, sd

    def _flatten_top(self, top_contribution, top_hash, distinct):
        """Flattening and top-group average of nodes from their heaviest entities (rows, hashes)."""
        outlier, top = self.params.outlier_count, self.params.top_count
        top_n = top_contribution.shape[1]
        shortfall = np.maximum(top_n - distinct, 0)
        outlier_upper = np.maximum(outlier.upper - shortfall // 2, outlier.lower)
        top_upper = np.maximum(top.upper - (shortfall + 1) // 2, top.lower)
        # The seed XORs the first outlier_upper + top_upper hashes, which is all of them: that sum
        # is at least top_n - shortfall, a node's entity count when it has fewer than top_n, and
        # its hashes after its last entity are 0.
        top_seed = np.bitwise_xor.reduce(top_hash, axis=1)
        columns = np.arange(top_n)
        outlier_count = self.salt.uniform_int(top_seed, "outlier", outlier.lower, outlier_upper)
        top_count = self.salt.uniform_int(top_seed, "top", top.lower, top_upper)
        is_outlier = columns < outlier_count[:, None]
        in_top_group = is_outlier ^ (columns < (outlier_count + top_count)[:, None])
        top_average = (top_contribution * in_top_group).sum(axis=1) / np.maximum(top_count, 1)
        flattening = (np.maximum(top_contribution - top_average[:, None], 0.0) * is_outlier).sum(axis=1)
        return flattening, top_average


def _range_stats(sorted_entities: SortedEntities, starts: np.ndarray, ends: np.ndarray) -> list[_EntityStats]:
    """Per AID column, the entities of the position ranges [starts, ends) from all their rows."""
    counts = ends - starts
    positions = _concatenated_ranges(starts, counts)
    node_of_row = np.repeat(np.arange(counts.size, dtype=np.int64), counts)
    return [
        _pair_stats(ids[positions], node_of_row, entity_hashes, counts.size)
        for ids, entity_hashes in zip(
            sorted_entities.ids, sorted_entities.entities.entity_hashes, strict=True
        )
    ]


def _pair_stats(ids, node_of_row, entity_hashes, n_nodes) -> _EntityStats:
    """One AID column's entities per node from the distinct (node, entity) pairs of all its rows."""
    known = ids >= 0
    unaccounted = np.bincount(node_of_row[~known], minlength=n_nodes)
    pair_node, entity, contribution = _distinct_pairs(node_of_row[known], ids[known], entity_hashes.size)
    pair_hash = entity_hashes[entity]
    distinct = np.bincount(pair_node, minlength=n_nodes)
    seed = np.zeros(n_nodes, dtype=np.uint64)
    heaviest = np.zeros(n_nodes, dtype=np.int64)
    if pair_node.size:
        node_first = np.flatnonzero(np.r_[True, pair_node[1:] != pair_node[:-1]])
        seed[pair_node[node_first]] = np.bitwise_xor.reduceat(pair_hash, node_first)
        heaviest[pair_node[node_first]] = np.maximum.reduceat(contribution, node_first)

    def top_entities(nodes: np.ndarray, top_n: int):
        index = np.full(n_nodes, -1, dtype=np.int64)
        index[nodes] = np.arange(nodes.size)
        selected = index[pair_node] >= 0
        return _rank_top(
            index[pair_node[selected]], pair_hash[selected], contribution[selected], nodes.size, top_n
        )

    return _EntityStats(
        distinct=distinct,
        seed=seed,
        unaccounted=unaccounted.astype(np.float64),
        known=np.bincount(node_of_row, minlength=n_nodes) - unaccounted,
        several=heaviest > 1,
        top_entities=top_entities,
    )
