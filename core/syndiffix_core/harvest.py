"""Bucket harvesting and refinement: a tree's nodes -> buckets (ranges + noisy counts).

The traversal is the seed's bottom-up harvest, run one level at a time for all nodes of the level:
buckets carried up from depth d+1 are re-owned by their parents, then per node of depth d
- a leaf failing LCF yields nothing; a singular or 1-dim leaf yields its own bucket; a multi-dim
  leaf yields `noisy count` refined buckets;
- a branch whose children's buckets hold fewer than half of its noisy count either collapses into its
  own bucket (1-dim) or keeps them and adds refined buckets for the difference (multi-dim);
  otherwise the children's counts are rescaled to the branch's noisy count.
Counts travel up as real numbers and are rounded once at the end, fractions carried forward.

Refinement is lazy: a node to refine for n rows is kept as ONE placeholder entry (count n) in its
tree's harvest ("pool"); only when rows are materialized is each placeholder row turned into a
concrete bucket. A refined bucket of node X takes a (k-1)-dim sub-bucket from a subnode i (the node
of the lower-dim tree with X's ranges minus dimension i), drawn count-weighted from that tree's pool
entries originating under the subnode (a preorder interval), and its missing dimension i from a
sub-bucket of another subnode. A drawn entry that is itself a placeholder is concretized the same
way, recursively (only the one needed dimension for the missing-dimension draw). A missing subnode,
or one without entries, contributes X's own ranges. Singular dimensions of X keep X's point.
This keeps every pool O(nodes) instead of O(rows), for every lower-dim tree. After concretizing,
frequent exact values that refinement over-draws are thinned back towards their 1-dim counts
(`_rebalance_exact_values`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from .forest import Forest, Tree
from .threads import map_in_threads


@dataclass
class Buckets:
    """Harvested buckets of one tree, sorted by the preorder number of their originating node."""

    low: np.ndarray  # (n, k) float: range start, or the point for singular dimensions
    high: np.ndarray  # (n, k) float: range end (== low where singular)
    count: np.ndarray  # (n,) int64, > 0
    origin: np.ndarray  # (n,) int64 preorder number of the node the bucket came from
    depth: np.ndarray | None = None  # (n,) int8: depth of the node to refine (placeholder), -1 concrete
    subnodes: np.ndarray | None = None  # (n, k) int32: that node's subnode per dropped dimension, -1 none

    @property
    def size(self) -> int:
        return self.count.size

    @property
    def singular(self) -> np.ndarray:
        return self.low == self.high

    def _take(self, index) -> Buckets:
        return Buckets(
            self.low[index],
            self.high[index],
            self.count[index],
            self.origin[index],
            None if self.depth is None else self.depth[index],
            None if self.subnodes is None else self.subnodes[index],
        )

    @property
    def placeholder(self) -> np.ndarray:
        return np.zeros(self.size, dtype=bool) if self.depth is None else self.depth >= 0


def _empty(k: int) -> Buckets:
    none = np.zeros(0, np.int64)
    return Buckets(np.zeros((0, k)), np.zeros((0, k)), none, none, none, np.zeros((0, k), np.int32))


def _concat(parts: list[Buckets]) -> Buckets:
    def field(name):
        return np.concatenate([getattr(p, name) for p in parts])

    return Buckets(
        field("low"), field("high"), field("count"), field("origin"), field("depth"), field("subnodes")
    )


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
        return cls([_narrow(n) for n in numbers], [_narrow(s) for s in sizes])


class Harvester:
    """Harvests the trees of one forest, memoizing every tree's pool (refinement draws from them)."""

    def __init__(self, forest: Forest):
        self.forest = forest
        self._pools: dict[tuple[int, ...], Buckets] = {}
        self._preorders: dict[tuple[int, ...], Preorder] = {}
        self._sub_range_cache: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._sub_index_cache: dict[tuple, tuple] = {}
        self._cumulative_cache: dict[tuple[int, ...], np.ndarray] = {}
        self._target_cache: dict[tuple, tuple[np.ndarray, ...]] = {}
        self._bounds: dict[int, np.ndarray] = {}

    def release(self, keep: Callable[[tuple[int, ...]], bool], *, tree_lookups_only: bool = False) -> None:
        """Drop the cached pools and lookups of every tree whose columns `keep` rejects; with
        `tree_lookups_only`, only what the trees themselves were needed for (the preorders), which
        `prepare_refinement` has already turned into sub-pool ranges."""
        caches = (
            (self._preorders,)
            if tree_lookups_only
            else (self._pools, self._preorders, self._cumulative_cache)
        )
        for cache in caches:
            for columns in [c for c in cache if not keep(c)]:
                del cache[columns]
        if tree_lookups_only:
            return
        for cache in (self._sub_range_cache, self._sub_index_cache, self._target_cache):
            for key in [key for key in cache if not keep(key[0])]:
                del cache[key]

    def prepare_refinement(
        self,
        columns: tuple[int, ...],
        threads: int = 1,
        keep: Callable[[tuple[int, ...]], bool] | None = None,
    ) -> None:
        """Everything the harvest of `columns` reads from the trees, computed up front: the pools of
        all column subsets and, for those with placeholders, their sub-pool ranges and cumulative
        counts. Afterwards refinement needs neither the multi-column trees nor their preorders, so
        they can be released before the refined rows are drawn (the same values are computed as
        lazily, so the output does not change).

        One subset size after the other, the trees of that size are built and harvested side by side
        on `threads` threads (a tree needs only the trees one column smaller), then their sub-pool
        lookups; each task writes only its own cache entries. The pools' subnodes are dropped once
        their sub-pool ranges exist. With `keep`, the trees and preorders of each size that `keep`
        rejects are released once the next size is done (nothing reads them afterwards), so that at
        most two sizes of trees are held at a time."""
        columns = tuple(sorted(columns))
        if len(columns) > 1:
            self.forest.cache_cells(columns)
        map_in_threads(self.column_bounds, columns, threads)
        for size in range(2, len(columns) + 1):
            subsets = list(combinations(columns, size))
            pools = map_in_threads(self.pool, subsets, threads)
            refined = [subset for subset, pool in zip(subsets, pools, strict=True) if pool.placeholder.any()]
            drops = [(subset, drop) for subset in refined for drop in range(size)]
            sub_pools = sorted({subset[:drop] + subset[drop + 1 :] for subset, drop in drops})
            map_in_threads(self._cumulative, sub_pools, threads)
            map_in_threads(lambda key: self._sub_ranges(*key), drops, threads)
            for pool in pools:  # the sub-pool ranges are all that refinement needed the subnodes for
                pool.subnodes = None
            if keep is not None and size > 2:
                done = [subset for subset in combinations(columns, size - 1) if not keep(subset)]
                self.forest.discard(done)
                for subset in done:
                    self._preorders.pop(subset, None)

    def preorder(self, columns: tuple[int, ...]) -> Preorder:
        if columns not in self._preorders:
            self._preorders[columns] = Preorder.of(self.forest.tree(columns))
        return self._preorders[columns]

    def pool(self, columns: tuple[int, ...]) -> Buckets:
        """The tree's harvest with refined nodes as placeholder entries, sorted by origin."""
        pool = self._pools.get(columns)  # refinement asks thousands of times, with sorted columns
        if pool is None:
            columns = tuple(sorted(columns))
            if columns not in self._pools:
                tree = self.forest.tree(columns)
                if tree.subnodes is None:  # harvested before, and that pool was released since
                    tree = self.forest.rebuilt(columns)
                self._pools[columns] = self._harvest(tree)
            pool = self._pools[columns]
        return pool

    def harvest(self, columns: tuple[int, ...], after_draws: Callable[[], None] | None = None) -> Buckets:
        """Concrete buckets of the tree over `columns`: placeholders become count-1 refined buckets.
        `after_draws` runs once the refined rows are drawn, before they are put in order (the caller's
        chance to release the pools: ordering needs only this pool's concrete entries)."""
        columns = tuple(sorted(columns))
        pool = self.pool(columns)
        lazy = pool.placeholder
        if not lazy.any():
            if after_draws is not None:
                after_draws()
            return pool
        rng = self.forest.salt.rng("refine", *(self.forest.column_names[j] for j in columns))
        expanded = np.repeat(np.flatnonzero(lazy), pool.count[lazy])
        low, high = self._concretize(columns, expanded, rng)
        if len(columns) > 1:
            self._rebalance_exact_values(columns, pool, expanded, low, high, rng)
        entries = np.flatnonzero(~lazy)
        origin = np.concatenate([pool.origin[entries], pool.origin[expanded]])
        concrete = Buckets(pool.low[entries], pool.high[entries], pool.count[entries], origin[: entries.size])
        del pool, expanded
        if after_draws is not None:
            after_draws()
        # Concrete entries, then the refined rows, ordered by origin: each array is written once into
        # its place (no concatenated copy next to the ordered one).
        order = np.argsort(origin, kind="stable")
        place = np.empty(order.size, dtype=np.intp)
        place[order] = np.arange(order.size)
        first, rest = place[: concrete.size], place[concrete.size :]
        del place
        low = _placed(concrete.low, first, low, rest)
        high = _placed(concrete.high, first, high, rest)
        count = _placed(concrete.count, first, np.ones(rest.size, np.int64), rest)
        return Buckets(low, high, count, origin[order])

    def _rebalance_exact_values(self, columns, pool, expanded, low, high, rng, rounds: int = 4) -> None:
        """Correct refinement's over-use of frequent exact values, in place.

        A refined row draws a dimension from the subnode's marginal, and that marginal still holds the
        rows that sibling nodes already emit as the exact value v (nodes singular in that dimension).
        So frequent values come out too often. Per dimension and exact value, the target is v's count
        in the column's 1-dim tree (scaled to this tree's total); what singular entries already emit
        is subtracted, and refined rows that drew an over-drawn v keep it with probability
        (target - emitted) / drawn, else they are drawn again; a few rounds, each re-measuring the
        draws. Only anonymized counts are used.
        """
        # Which dimensions of each refined row are open ranges does not change between rounds.
        open_range = np.empty((expanded.size, len(columns)), dtype=bool)
        for j in range(len(columns)):  # column by column: no (rows, k) float copies
            open_range[:, j] = pool.low[expanded, j] != pool.high[expanded, j]
        for _ in range(rounds):
            rejected = np.zeros(expanded.size, dtype=bool)
            for j in range(len(columns)):
                # Refined rows that drew an exact value in dimension j.
                rows = np.flatnonzero(open_range[:, j] & (low[:, j] == high[:, j]))
                if rows.size == 0:
                    continue
                values, position, counts = np.unique(low[rows, j], return_inverse=True, return_counts=True)
                keep = self._exact_value_acceptance(columns, pool, values, counts, j)
                rejected[rows[rng.random(rows.size) >= keep[position]]] = True
            redraw = np.flatnonzero(rejected)
            if redraw.size == 0:
                return
            low[redraw], high[redraw] = self._concretize(columns, expanded[redraw], rng)

    def _exact_value_targets(self, columns, pool, j):
        """Exact values of dimension j: 1-dim counts scaled to this tree, and what singular entries emit."""
        key = (columns, j)
        if key not in self._target_cache:
            one_dim = self.forest.tree((columns[j],))
            target_values, target_counts = [], []
            for depth, nodes in one_dim.leaves():
                level = one_dim.levels[depth]
                nodes = nodes[level.singular[nodes] & ~level.lcf_low[nodes]]
                target_values.append(self.forest.values_at(level.rep_row[nodes], (columns[j],))[:, 0])
                target_counts.append(level.noisy_count[nodes].astype(np.float64))
            scale = pool.count.sum() / max(float(one_dim.levels[0].noisy_count[0]), 1.0)
            singular = pool.low[:, j] == pool.high[:, j]
            emitted_values, emitted_index = np.unique(pool.low[singular, j], return_inverse=True)
            emitted_counts = np.bincount(
                emitted_index, weights=pool.count[singular], minlength=emitted_values.size
            )
            self._target_cache[key] = (
                np.concatenate(target_values),
                np.concatenate(target_counts) * scale,
                emitted_values,
                emitted_counts,
            )
        return self._target_cache[key]

    def _exact_value_acceptance(self, columns, pool, values, drawn, j):
        """Probability to keep each of the sorted exact `values` that refined rows drew `drawn` times in
        dimension j."""
        target_values, target_counts, emitted_values, emitted_counts = self._exact_value_targets(
            columns, pool, j
        )
        target, known = _lookup(values, target_values, target_counts)
        emitted, _ = _lookup(values, emitted_values, emitted_counts)
        # Over-drawn values are thinned to their target; under-drawn ones gain from the redraws.
        # Values that are no 1-dim singularity have no target and are left alone.
        return np.where(known, np.clip(np.maximum(target - emitted, 0.0) / drawn, 0.0, 1.0), 1.0)

    def _harvest(self, tree: Tree) -> Buckets:
        # Buckets are created once (stored in `parts`); what travels up the levels is only
        # (bucket id, owner node, real-valued count).
        k = tree.dims
        preorder = self.preorder(tree.columns)
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
            collapse = level.branch & (2 * child_total < noisy)
            rescale = level.branch & ~collapse
            factor = np.where(rescale, noisy / np.maximum(child_total, 1e-12), 1.0)
            count = count * factor[owner]
            own_bucket = ~level.branch & ~level.lcf_low
            refine = np.zeros(level.size)
            if k == 1:
                own_bucket |= collapse
                kept = ~collapse[owner]
                bucket_id, owner, count = bucket_id[kept], owner[kept], count[kept]
            else:
                refine = np.where(own_bucket & ~level.singular, noisy, 0.0)
                refine += np.where(collapse, noisy - child_total, 0.0)
                own_bucket &= level.singular
            nodes = np.flatnonzero(own_bucket | (refine > 0))
            if nodes.size:
                low, high = tree.node_ranges(self.forest, depth, nodes)
                if k > 1:
                    self._clip_to_bounds(tree.columns, low, high)
                lazy = refine[nodes] > 0
                parts.append(
                    Buckets(
                        low,
                        high,
                        noisy[nodes],
                        preorder.number[depth][nodes],
                        np.where(lazy, depth, -1).astype(np.int8),
                        np.where(lazy[:, None], tree.subnodes[depth][nodes], -1).astype(np.int32),
                    )
                )
                bucket_id = np.concatenate([bucket_id, np.arange(created, created + nodes.size)])
                owner = np.concatenate([owner, nodes])
                count = np.concatenate([count, np.where(lazy, refine[nodes], noisy[nodes])])
                created += nodes.size
        if k > 1:
            tree.subnodes = None
        if not parts:
            return _empty(k)
        store = _concat(parts)
        order = np.argsort(store.origin[bucket_id], kind="stable")
        rounded = _round_carrying(count[order])
        keep = rounded > 0
        result = store._take(bucket_id[order][keep])
        result.count = rounded[keep]
        return result

    def column_bounds(self, column: int) -> np.ndarray:
        """The column's anonymized range as its two edge buckets of the 1-dim harvest, nulls left out:
        [[bottom bucket low, high], [top bucket low, high]]; the range is [edges[0, 0], edges[1, 1]].

        Multi-column trees share the 1-dim root range, which is wider: a null mapping far beyond the
        maximum keeps the root from being pushed down, and edge cells overhang the data. Their buckets
        are clipped to this hull, which only uses what the 1-dim harvest releases anyway.
        """
        if column not in self._bounds:
            pool = self.pool((column,))
            present = np.flatnonzero(pool.low[:, 0] != self.forest.null_values[column])
            if present.size:
                bottom = present[np.argmin(pool.low[present, 0])]
                top = present[np.argmax(pool.high[present, 0])]
                edges = [[pool.low[bottom, 0], pool.high[bottom, 0]], [pool.low[top, 0], pool.high[top, 0]]]
            else:
                low, size = self.forest.column_range(column)
                edges = [[low, low + size], [low, low + size]]
            self._bounds[column] = np.array(edges, dtype=np.float64)
        return self._bounds[column]

    def _clip_to_bounds(self, columns, low, high) -> None:
        """Narrow the open ranges of multi-dim buckets (n, k) to each column's anonymized range, in place.
        A range wholly beyond it (rows of a tail the 1-dim tree suppressed) becomes the nearest edge
        bucket: a point there could be a value the 1-dim tree never released (e.g. a rare string)."""
        for position, column in enumerate(columns):
            edges = self.column_bounds(column)
            bottom, top = edges[0, 0], edges[1, 1]
            lo, hi = low[:, position], high[:, position]
            open_range = lo != hi
            below = open_range & (hi <= bottom)
            above = open_range & (lo >= top)
            lo[open_range] = np.clip(lo[open_range], bottom, top)
            hi[open_range] = np.clip(hi[open_range], bottom, top)
            lo[below], hi[below] = edges[0]
            lo[above], hi[above] = edges[1]

    def _concretize(self, columns, entries, rng):
        """One concrete refined bucket (low, high: (m, k)) per placeholder `entries` of a pool.

        Each row's dimensions are written once: first the drawn sub-bucket (all dimensions but its
        primary one), then the primary dimension; the placeholder's singular dimensions are put back
        at the end, so they keep its point.
        """
        pool = self.pool(columns)
        k = len(columns)
        low, high = pool.low[entries], pool.high[entries]
        point = low == high
        primary = rng.integers(0, k, size=entries.size)
        if k == 2:
            self._draw_pair(columns, entries, primary, rng, low, high)
            _keep_points(low, high, point, pool.low[entries])
            return low, high
        for i in range(k):
            rows = (primary == i).nonzero()[0]
            if rows.size == 0:
                continue
            picked = entries[rows]
            found, sub_low, sub_high = self._draw_sub_bucket(columns, i, picked, rng)
            if found.size:
                # (found rows, other dimensions) as one broadcast index
                target = (rows[found][:, None], _other_dims(k, i))
                low[target], high[target] = sub_low, sub_high
            low[rows, i], high[rows, i] = self._draw_dimension(columns, i, (i + 1) % k, picked, rng)
        _keep_points(low, high, point, pool.low[entries])
        return low, high

    def _draw_pair(self, columns, entries, primary, rng, low, high) -> None:
        """`_concretize`'s draws for a 2-dim pool, written into `low`, `high` (m, 2): the same draws from
        the same random numbers, in fewer steps. Both sub-pools are 1-dim (no placeholders), so every
        row draws dimension j under its subnode 1 - j, whatever its primary dimension; only the order
        in which the rows use the uniforms depends on it. `_concretize` draws rows of primary 0 under
        subnode 0 then 1, then rows of primary 1 under subnode 1 then 0, each set in row order, and
        only rows whose subnode has entries use one; here one call gives all those uniforms."""
        first = primary == 0
        # Per subnode: each row's [start, stop) of sub-pool entries and whether it draws there.
        ranges = [self._sub_pool_index(columns, drop)[:3] for drop in (0, 1)]
        spans = [(start_of[entries], stop_of[entries]) for start_of, stop_of, _ in ranges]
        draws = [stop > start for start, stop in spans]
        groups = [draws[0] & first, draws[1] & first, draws[1] & ~first, draws[0] & ~first]
        sizes = [int(np.count_nonzero(group)) for group in groups]
        uniforms = rng.random(sum(sizes))
        offsets = np.cumsum([0, *sizes])
        per_subnode = [np.empty(entries.size), np.empty(entries.size)]
        for group, drop, begin, end in zip(groups, (0, 1, 1, 0), offsets[:-1], offsets[1:], strict=True):
            per_subnode[drop][group] = uniforms[begin:end]
        for drop in (0, 1):
            (start, stop), (_, _, cumulative) = spans[drop], ranges[drop]
            rows = draws[drop].nonzero()[0]
            if rows.size == 0:
                continue
            drawn = _weighted_draw(cumulative, start[rows], stop[rows], per_subnode[drop][rows])
            sub_pool = self.pool(columns[1 - drop : 2 - drop])
            low[rows, 1 - drop], high[rows, 1 - drop] = sub_pool.low[drawn, 0], sub_pool.high[drawn, 0]

    def _concretize_dimension(self, columns, entries, dim, rng):
        """Only dimension `dim` of a refined bucket per placeholder entry: (low, high) of shape (m,)."""
        pool = self.pool(columns)
        k = len(columns)
        own_low = pool.low[entries, dim]
        point = own_low == pool.high[entries, dim]
        if k == 2:  # one possible donor (a draw from a range of one value uses no random numbers)
            low, high = self._draw_dimension(columns, dim, 1 - dim, entries, rng)
        else:
            low, high = own_low.copy(), pool.high[entries, dim]
            donors = (dim + 1 + rng.integers(0, k - 1, size=entries.size)) % k
            for donor in range(k):
                rows = (donors == donor).nonzero()[0]
                if rows.size:
                    low[rows], high[rows] = self._draw_dimension(columns, dim, donor, entries[rows], rng)
        _keep_points(low, high, point, own_low)
        return low, high

    def _draw_entries(self, columns, drop, entries, rng):
        """Count-weighted draw of one sub-pool entry under each placeholder's subnode `drop`.

        Returns (rows that found one, the drawn sub-pool entries, the sub-pool).
        """
        start_of, stop_of, cumulative, sub_columns = self._sub_pool_index(columns, drop)
        sub_pool = self.pool(sub_columns)
        start, stop = start_of[entries], stop_of[entries]
        found = (stop > start).nonzero()[0]
        if found.size == 0:
            return found, found, sub_pool
        if found.size < entries.size:
            start, stop = start[found], stop[found]
        return found, _weighted_draw(cumulative, start, stop, rng.random(found.size)), sub_pool

    def _draw_sub_bucket(self, columns, drop, entries, rng):
        """A concrete (k-1)-dim sub-bucket under each placeholder's subnode `drop`, for the placeholders
        whose subnode has entries: (those rows of `entries`, low, high: (f, k-1) arrays)."""
        found, drawn, sub_pool = self._draw_entries(columns, drop, entries, rng)
        if found.size == 0:
            return found, None, None
        low, high = sub_pool.low[drawn], sub_pool.high[drawn]
        if len(columns) > 2:  # (1-dim pools hold no placeholders)
            lazy = (sub_pool.depth[drawn] >= 0).nonzero()[0]
            if lazy.size:
                sub_columns = columns[:drop] + columns[drop + 1 :]
                low[lazy], high[lazy] = self._concretize(sub_columns, drawn[lazy], rng)
        return found, low, high

    def _draw_dimension(self, columns, dim, donor, entries, rng):
        """Dimension `dim` of a concrete sub-bucket under each placeholder's subnode `donor`: (m,).
        Where the subnode has no entries, the placeholder's own range is kept."""
        pool = self.pool(columns)
        low, high = pool.low[entries, dim], pool.high[entries, dim]
        found, drawn, sub_pool = self._draw_entries(columns, donor, entries, rng)
        if found.size == 0:
            return low, high
        position = dim if dim < donor else dim - 1
        low[found], high[found] = sub_pool.low[drawn, position], sub_pool.high[drawn, position]
        if len(columns) > 2:  # (1-dim pools hold no placeholders)
            lazy = (sub_pool.depth[drawn] >= 0).nonzero()[0]
            if lazy.size:
                sub_columns = columns[:donor] + columns[donor + 1 :]
                low[found[lazy]], high[found[lazy]] = self._concretize_dimension(
                    sub_columns, drawn[lazy], position, rng
                )
        return low, high

    def _sub_pool_index(self, columns, drop):
        """What a draw under subnode `drop` needs, looked up once per (tree, dropped dimension): each
        pool entry's [start, stop) of sub-pool entries, the sub-pool's cumulative counts, its columns."""
        key = (columns, drop)
        if key not in self._sub_index_cache:
            sub_columns = columns[:drop] + columns[drop + 1 :]
            start, stop = self._sub_ranges(columns, drop)
            self._sub_index_cache[key] = (start, stop, self._cumulative(sub_columns), sub_columns)
        return self._sub_index_cache[key]

    def _sub_ranges(self, columns, drop) -> tuple[np.ndarray, np.ndarray]:
        """Per entry of the pool: [start, stop) of the sub-pool entries under the entry's subnode."""
        key = (columns, drop)
        if key not in self._sub_range_cache:
            pool = self.pool(columns)
            sub_columns = columns[:drop] + columns[drop + 1 :]
            sub_pool = self.pool(sub_columns)
            preorder = self.preorder(sub_columns)
            first = np.zeros(pool.size, dtype=np.int64)
            last = np.zeros(pool.size, dtype=np.int64)
            lazy = np.flatnonzero(pool.placeholder)
            depths = pool.depth[lazy]
            for depth in np.unique(depths):
                if depth >= len(preorder.number):
                    continue
                rows = lazy[depths == depth]
                sub = pool.subnodes[rows, drop].astype(np.int64)
                present = sub >= 0
                safe = np.where(present, sub, 0)
                first[rows] = preorder.number[depth][safe]
                last[rows] = np.where(present, first[rows] + preorder.size[depth][safe], first[rows])
            start = np.searchsorted(sub_pool.origin, first)
            stop = np.maximum(np.searchsorted(sub_pool.origin, last), start)
            self._sub_range_cache[key] = (_narrow(start), _narrow(stop))
        return self._sub_range_cache[key]

    def _cumulative(self, columns) -> np.ndarray:
        if columns not in self._cumulative_cache:
            self._cumulative_cache[columns] = np.r_[0, np.cumsum(self.pool(columns).count)].astype(np.float64)
        return self._cumulative_cache[columns]


# Below this many keys a plain searchsorted beats sorting them first.
_SORTED_SEARCH_FROM = 2048


def _weighted_draw(cumulative, start, stop, uniforms) -> np.ndarray:
    """Per draw, the entry in [start, stop) that its uniform picks, weighted by the entries' counts
    (`cumulative`: the running count before each entry)."""
    lo = cumulative[start]
    target = lo + uniforms * (cumulative[stop] - lo)
    if target.size >= _SORTED_SEARCH_FROM:
        # Searching the keys in ascending order walks the cumulative counts once, which is much
        # faster than random lookups once there are many keys.
        by_target = target.argsort()
        drawn = np.empty(target.size, dtype=np.int64)
        drawn[by_target] = cumulative.searchsorted(target[by_target], side="right")
    else:
        drawn = cumulative.searchsorted(target, side="right")
    drawn -= 1
    np.maximum(drawn, start, out=drawn)
    np.minimum(drawn, stop - 1, out=drawn)
    return drawn


@functools.cache
def _other_dims(k: int, i: int) -> np.ndarray:
    """The dimensions of a k-dim tree other than i (those of the subnode that drops i)."""
    return np.array([j for j in range(k) if j != i], dtype=np.intp)


def _keep_points(low, high, point, own_low) -> None:
    """Put the placeholder's own value back where its range is a single value (`point`: a singular
    dimension; `own_low`: its ranges' starts, which are those values), in place. The placeholders'
    ranges are gathered again here rather than kept through the draws: less memory held meanwhile."""
    np.copyto(low, own_low, where=point)
    np.copyto(high, own_low, where=point)


def _narrow(positions: np.ndarray) -> np.ndarray:
    """Indices or counts as int32 when they fit (caches held for a whole cluster: half the bytes)."""
    if positions.size and max(int(positions.max()), -int(positions.min())) >= 2**31:
        return positions
    return positions.astype(np.int32)


def _placed(head: np.ndarray, head_place: np.ndarray, tail: np.ndarray, tail_place: np.ndarray) -> np.ndarray:
    """The rows of `head` and `tail` (same trailing shape) put at positions `head_place` / `tail_place`."""
    out = np.empty((head.shape[0] + tail.shape[0], *head.shape[1:]), dtype=head.dtype)
    out[head_place] = head
    out[tail_place] = tail
    return out


def _lookup(keys: np.ndarray, table_values: np.ndarray, table_counts: np.ndarray):
    """(count of each key in the table or 0, whether it was found)."""
    if table_values.size == 0:
        return np.zeros(keys.size), np.zeros(keys.size, dtype=bool)
    order = np.argsort(table_values)
    table_values, table_counts = table_values[order], table_counts[order]
    position = np.clip(np.searchsorted(table_values, keys), 0, table_values.size - 1)
    found = table_values[position] == keys
    return np.where(found, table_counts[position], 0.0), found


def _round_carrying(values: np.ndarray) -> np.ndarray:
    """Integers whose running sum tracks the running sum of `values` (fractions carried forward)."""
    running = np.floor(np.cumsum(values) + 1e-9)
    return np.diff(np.r_[0.0, running]).astype(np.int64)
