"""Bucket harvesting and refinement: a tree's nodes -> buckets (ranges + noisy counts).

The traversal is the seed's bottom-up harvest, run one level at a time for all nodes of the level:
buckets carried up from depth d+1 are re-owned by their parents, then per node of depth d
- a leaf failing LCF yields nothing; a singular or 1-dim leaf yields its own bucket; a multi-dim
  leaf yields `noisy count` refined buckets;
- a branch whose children's buckets hold fewer than half of its noisy count either collapses into its
  own bucket (1-dim) or keeps them and adds refined buckets for the difference (multi-dim);
  otherwise the children's counts are rescaled to the branch's noisy count (fractions carried
  forward within the branch, then truncated).

Refinement of a multi-dim node X for n rows emits n buckets of count 1. The i-th bucket takes a
(k-1)-dim sub-bucket from subnode i mod k (the node of the lower-dim tree with X's ranges minus one
dimension), drawn with weight = count, and the missing dimension from a sub-bucket of the next
subnode. A subnode's buckets are the buckets of that lower-dim tree's own harvest whose originating
node lies under the subnode (found by preorder intervals, so no per-node lists exist); a missing
subnode, or one without buckets, contributes X's own ranges. Singular dimensions of X keep X's point.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .forest import Forest, Tree


@dataclass
class Buckets:
    """Harvested buckets of one tree, sorted by the preorder number of their originating node."""

    low: np.ndarray  # (n, k) float: range start, or the point for singular dimensions
    high: np.ndarray  # (n, k) float: range end (== low where singular)
    count: np.ndarray  # (n,) int64, > 0
    origin: np.ndarray  # (n,) int64 preorder number of the node the bucket came from

    @property
    def size(self) -> int:
        return self.count.size

    @property
    def singular(self) -> np.ndarray:
        return self.low == self.high

    def _take(self, index) -> Buckets:
        return Buckets(self.low[index], self.high[index], self.count[index], self.origin[index])


def _empty(k: int) -> Buckets:
    return Buckets(np.zeros((0, k)), np.zeros((0, k)), np.zeros(0, np.int64), np.zeros(0, np.int64))


def _concat(parts: list[Buckets], owners: list[np.ndarray]) -> tuple[Buckets, np.ndarray]:
    buckets = Buckets(
        np.concatenate([p.low for p in parts]),
        np.concatenate([p.high for p in parts]),
        np.concatenate([p.count for p in parts]),
        np.concatenate([p.origin for p in parts]),
    )
    return buckets, np.concatenate(owners)


@dataclass
class Preorder:
    """Per depth: preorder number and subtree size (in nodes) of every node of a tree."""

    number: list[np.ndarray]
    size: list[np.ndarray]

    @classmethod
    def of(cls, tree: Tree) -> Preorder:
        k = tree.dims
        sizes = [np.ones(level.size, dtype=np.int64) for level in tree.levels]
        for depth in range(len(tree.levels) - 1, 0, -1):
            parents = tree.levels[depth].key >> k
            sizes[depth - 1] += np.bincount(
                parents, weights=sizes[depth], minlength=sizes[depth - 1].size
            ).astype(np.int64)
        numbers = [np.zeros(1, dtype=np.int64)]
        for depth in range(1, len(tree.levels)):
            parents = tree.levels[depth].key >> k
            before = np.cumsum(sizes[depth]) - sizes[depth]
            first_sibling = np.searchsorted(parents, parents, side="left")
            numbers.append(numbers[depth - 1][parents] + 1 + before - before[first_sibling])
        return cls(numbers, sizes)


class Harvester:
    """Harvests the trees of one forest, memoizing every tree's buckets (refinement reuses them)."""

    def __init__(self, forest: Forest):
        self.forest = forest
        self._buckets: dict[tuple[int, ...], Buckets] = {}
        self._preorders: dict[tuple[int, ...], Preorder] = {}

    def preorder(self, columns: tuple[int, ...]) -> Preorder:
        if columns not in self._preorders:
            self._preorders[columns] = Preorder.of(self.forest.tree(columns))
        return self._preorders[columns]

    def harvest(self, columns: tuple[int, ...]) -> Buckets:
        columns = tuple(sorted(columns))
        if columns not in self._buckets:
            self._buckets[columns] = self._harvest(self.forest.tree(columns))
        return self._buckets[columns]

    def _harvest(self, tree: Tree) -> Buckets:
        # Buckets are created once (ranges stored in `parts`); what travels up the levels is only
        # (bucket id, owner node, real-valued count). Counts are rounded once at the end, with the
        # fractions carried forward, instead of after every rescale.
        k = tree.dims
        preorder = self.preorder(tree.columns)
        rng = self.forest.salt.rng("refine", *(self.forest.column_names[j] for j in tree.columns))
        parts: list[Buckets] = []
        created = 0
        bucket_id = np.zeros(0, dtype=np.int64)
        owner = np.zeros(0, dtype=np.int64)
        count = np.zeros(0)
        for depth in range(len(tree.levels) - 1, -1, -1):
            level = tree.levels[depth]
            if depth + 1 < len(tree.levels):
                owner = tree.levels[depth + 1].key[owner] >> k
            noisy = level.noisy_count
            child_total = np.bincount(owner, weights=count, minlength=level.size)
            numbers = preorder.number[depth]
            collapse = level.branch & (2 * child_total < noisy)
            rescale = level.branch & ~collapse
            factor = np.where(rescale, noisy / np.maximum(child_total, 1e-12), 1.0)
            count = count * factor[owner]
            own_bucket = ~level.branch & ~level.lcf_low
            if k == 1:
                own_bucket |= collapse
                kept = ~collapse[owner]
                bucket_id, owner, count = bucket_id[kept], owner[kept], count[kept]
            else:
                own_bucket &= level.singular
            new_ids, new_owners, new_counts = [bucket_id], [owner], [count]
            nodes = np.flatnonzero(own_bucket)
            if nodes.size:
                low, high = tree.node_ranges(self.forest, depth, nodes)
                parts.append(Buckets(low, high, noisy[nodes], numbers[nodes]))
                new_ids.append(np.arange(created, created + nodes.size))
                new_owners.append(nodes)
                new_counts.append(noisy[nodes].astype(np.float64))
                created += nodes.size
            if k > 1:
                refine_leaf = ~level.branch & ~level.lcf_low & ~level.singular
                refine_counts = np.where(refine_leaf, noisy, 0) + np.where(
                    collapse, np.rint(noisy - child_total).astype(np.int64), 0
                )
                nodes = np.flatnonzero(refine_counts > 0)
                if nodes.size:
                    refined = self._refine(tree, depth, nodes, refine_counts[nodes], numbers[nodes], rng)
                    parts.append(refined)
                    new_ids.append(np.arange(created, created + refined.size))
                    new_owners.append(np.repeat(nodes, refine_counts[nodes]))
                    new_counts.append(np.ones(refined.size))
                    created += refined.size
            bucket_id = np.concatenate(new_ids)
            owner = np.concatenate(new_owners)
            count = np.concatenate(new_counts)
        if not parts:
            return _empty(k)
        store, _ = _concat(parts, [np.zeros(0, np.int64)])
        result = store._take(bucket_id)
        order = np.argsort(result.origin, kind="stable")
        result = result._take(order)
        result.count = _round_carrying(count[order])
        return result._take(result.count > 0)

    def _refine(self, tree: Tree, depth: int, nodes, counts, numbers, rng) -> Buckets:
        k = tree.dims
        total = int(counts.sum())
        node_low, node_high = tree.node_ranges(self.forest, depth, nodes)
        owner = np.repeat(np.arange(nodes.size), counts)
        rank = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        primary = rank % k
        low = node_low[owner].copy()
        high = node_high[owner].copy()
        level = tree.levels[depth]
        sub_columns = [tuple(c for c in tree.columns if c != tree.columns[i]) for i in range(k)]
        sub_draws = []
        for i in range(k):
            sub_draws.append(self._subnode_sampler(sub_columns[i], depth, level.subnodes[nodes, i]))
        for i in range(k):
            rows = np.flatnonzero(primary == i)
            if rows.size == 0:
                continue
            other_dims = [j for j in range(k) if j != i]
            buckets, index, found = sub_draws[i](owner[rows], rng)
            if buckets is not None:
                low[np.ix_(rows[found], other_dims)] = buckets.low[index[found]]
                high[np.ix_(rows[found], other_dims)] = buckets.high[index[found]]
            donor = (i + 1) % k
            position = i if i < donor else i - 1
            buckets, index, found = sub_draws[donor](owner[rows], rng)
            if buckets is not None:
                low[rows[found], i] = buckets.low[index[found], position]
                high[rows[found], i] = buckets.high[index[found], position]
        singular = node_low == node_high
        low = np.where(singular[owner], node_low[owner], low)
        high = np.where(singular[owner], node_high[owner], high)
        return Buckets(low, high, np.ones(total, dtype=np.int64), numbers[owner])

    def _subnode_sampler(self, columns, depth, subnodes):
        """A function drawing, for refined rows of given owners, one bucket under each owner's subnode."""
        buckets = self.harvest(columns)
        if buckets.size == 0:
            return lambda owners, rng: (None, None, None)
        preorder = self.preorder(columns)
        tree_depths = len(preorder.number)
        present = subnodes >= 0
        if depth < tree_depths:
            safe = np.where(present, subnodes, 0)
            first = preorder.number[depth][safe]
            last = first + preorder.size[depth][safe]
        else:
            first = last = np.zeros(subnodes.size, dtype=np.int64)
        start = np.searchsorted(buckets.origin, first)
        stop = np.searchsorted(buckets.origin, last)
        stop = np.where(present, stop, start)
        cumulative = np.r_[0, np.cumsum(buckets.count)].astype(np.float64)

        def draw(owners, rng):
            lo, hi = cumulative[start[owners]], cumulative[stop[owners]]
            found = hi > lo
            target = lo + rng.random(owners.size) * (hi - lo)
            index = np.searchsorted(cumulative, target, side="right") - 1
            index = np.clip(index, start[owners], np.maximum(stop[owners] - 1, start[owners]))
            return buckets, np.minimum(index, buckets.size - 1), found

        return draw


def _round_carrying(values: np.ndarray) -> np.ndarray:
    """Integers whose running sum tracks the running sum of `values` (fractions carried forward)."""
    running = np.floor(np.cumsum(values) + 1e-9)
    return np.diff(np.r_[0.0, running]).astype(np.int64)
