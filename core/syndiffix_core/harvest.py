"""Bucket harvesting and refinement: a tree's nodes -> buckets (ranges + noisy counts).

The traversal is the seed's bottom-up harvest, run one level at a time for all nodes of the level
(in small tables, of all trees of one size at once, as the forest builds them):
buckets carried up from depth d+1 are re-owned by their parents, then per node of depth d
- a leaf failing LCF yields nothing; a singular or 1-dim leaf yields its own bucket; a multi-dim
  leaf yields `noisy count` refined buckets;
- a 1-dim branch whose children's buckets hold fewer than half of its noisy count collapses into its
  own bucket; a multi-dim one whose children's buckets hold less than `RESCALED_SHARE` of it keeps
  them and adds refined buckets for the difference; otherwise the children's counts are rescaled to
  the branch's noisy count.
Counts travel up as real numbers and are rounded once at the end, fractions carried forward.

Refinement is lazy: a node to refine for n rows is kept as ONE placeholder entry (count n) in its
tree's harvest ("pool"); only when rows are materialized is each placeholder row turned into a
concrete bucket, drawn from the pools of the lower-dim trees (`refinement.RefinementDraws`, which
reads each pool entry's sub-pool ranges from `sub_pool_index`). This keeps every pool O(nodes)
instead of O(rows), for every lower-dim tree. After concretizing, frequent exact values that
refinement over-draws are thinned back towards their 1-dim counts (`_rebalance_exact_values`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from .anonymizer import run_starts
from .distinct_rows import DistinctRows
from .forest import Forest, Tree, join_arrays
from .pool_links import pair_link, primary_choices
from .refinement import RefinementDraws
from .shortfall_cells import ShortfallCells
from .threads import map_in_threads

# A multi-dim branch's children are rescaled to its count only when their buckets hold at least this
# share of it. What they miss are mostly the rows of children that failed LCF, sparse cells beside the
# dense ones: rescaling by more piles those rows onto the dense cells and sharpens every dependence
# the tree holds (the seed rescales from one half), while refined rows spread them as the lower-dim
# trees do. A shortfall under a tenth is rescaled, as the counts' noise alone may make it, so that a column
# that follows another keeps the precision of the children's cells.
RESCALED_SHARE = 0.9
# A tree of 3 or more columns every pair of which is linked less than this in its 2-dim pool
# (`pool_links.pair_link`) places a branch's shortfall in the child cells that hold no buckets
# (`shortfall_cells`); other trees refine it over the branch's box.
WEAK_LINK = 0.03
# ... if it holds at most this many rows: a branch's cells are about 4 pool entries where the branch
# was one, which at a million rows cost a third more peak memory (docs/engine.md).
CELLS_MAX_ROWS = 100_000
# A 1-dim branch's two children, as in the seed; below this share the branch collapses into one bucket.
ONE_DIM_RESCALED_SHARE = 0.5


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

    @property
    def placeholder(self) -> np.ndarray:
        return np.zeros(self.size, dtype=bool) if self.depth is None else self.depth >= 0


def _empty(k: int) -> Buckets:
    none = np.zeros(0, np.int64)
    return Buckets(np.zeros((0, k)), np.zeros((0, k)), none, none, none, np.zeros((0, k), np.int32))


@dataclass
class Preorder:
    """Preorder number and subtree size (in nodes) of every node of a tree: every depth's nodes one
    after the other, depth d from `depth_start[d]`, so that nodes of many depths are looked up at once."""

    all_numbers: np.ndarray
    all_sizes: np.ndarray
    depth_start: np.ndarray

    @property
    def depths(self) -> int:
        return self.depth_start.size

    def numbers_at(self, depth: int) -> np.ndarray:
        """The preorder numbers of the nodes at `depth`."""
        stop = self.depth_start[depth + 1] if depth + 1 < self.depths else self.all_numbers.size
        return self.all_numbers[self.depth_start[depth] : stop]

    @classmethod
    def of(cls, tree: Tree) -> Preorder:
        return cls.of_trees([tree])[0]

    @classmethod
    def of_trees(cls, trees: list[Tree]) -> list[Preorder]:
        """The preorders of several trees of one size, computed depth by depth for all of them at once
        (each tree's nodes one after the other's, as in `_JoinedLevel`)."""
        k = trees[0].dims
        depths = max(len(tree.levels) for tree in trees)
        counts = np.array(
            [[tree.levels[d].size if d < len(tree.levels) else 0 for tree in trees] for d in range(depths)]
        )
        offsets = np.cumsum(counts, axis=1) - counts
        # Per depth >= 1, each node's parent among the nodes one level up (joined indices).
        parents = [np.zeros(0, dtype=np.int64)]
        for depth in range(1, depths):
            local = join_arrays([tree.levels[depth].key for tree in trees if depth < len(tree.levels)]) >> k
            if len(trees) > 1:
                local = local + np.repeat(offsets[depth - 1], counts[depth])
            parents.append(local)
        sizes = [np.ones(counts[depth].sum(), dtype=np.int64) for depth in range(depths)]
        for depth in range(depths - 1, 0, -1):
            sizes[depth - 1] += np.bincount(
                parents[depth], weights=sizes[depth], minlength=sizes[depth - 1].size
            ).astype(np.int64)
        numbers = [np.zeros(len(trees), dtype=np.int64)]
        for depth in range(1, depths):
            before = np.cumsum(sizes[depth]) - sizes[depth]
            first_sibling = run_starts(parents[depth])
            numbers.append(numbers[depth - 1][parents[depth]] + 1 + before - before[first_sibling])
        return [cls._part(tree, numbers, sizes, offsets[:, t], counts[:, t]) for t, tree in enumerate(trees)]

    @classmethod
    def _part(cls, tree: Tree, numbers, sizes, offsets, counts) -> Preorder:
        """One tree's preorder from the joined per-depth numbers and sizes."""
        parts = [slice(offsets[d], offsets[d] + counts[d]) for d in range(len(tree.levels))]
        depth_start = np.cumsum([0] + [level.size for level in tree.levels[:-1]])
        return cls(
            _narrow(join_arrays([numbers[d][part] for d, part in enumerate(parts)])),
            _narrow(join_arrays([sizes[d][part] for d, part in enumerate(parts)])),
            depth_start,
        )


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
        self._primaries: dict[tuple[int, ...], np.ndarray | None] = {}
        self._links: dict[tuple[int, int], float] = {}

    def release(self, keep: Callable[[tuple[int, ...]], bool], *, tree_lookups_only: bool = False) -> None:
        """Drop the cached pools and lookups of every tree whose columns `keep` rejects; with
        `tree_lookups_only`, only what the trees themselves were needed for (the preorders), which
        `prepare_refinement` has already turned into sub-pool ranges."""
        caches = (
            (self._preorders,)
            if tree_lookups_only
            else (self._pools, self._preorders, self._cumulative_cache, self._primaries, self._links)
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
            if threads <= 1:
                self._harvest_side_by_side(subsets)
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

    def prepare_pools(self, clusters: list[tuple[int, ...]]) -> None:
        """In a small table, build and harvest the trees of every cluster up front, one size after the
        other for all clusters at once, when each size's trees fit one batch (`forest.side_by_side`):
        fewer, larger batches. `prepare_refinement` then finds them (the same trees and pools)."""
        widest = max(len(columns) for columns in clusters)
        for size in range(2, widest + 1):
            subsets = sorted({s for columns in clusters for s in combinations(sorted(columns), size)})
            if len(subsets) > self.forest.side_by_side:
                return
            self._harvest_side_by_side(subsets)

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

    def _harvest_side_by_side(self, subsets: list[tuple[int, ...]]) -> None:
        """The missing pools of `subsets` (of one size), their trees built side by side (`forest.build`)
        and harvested `forest.side_by_side` at a time."""
        missing = [columns for columns in subsets if columns not in self._pools]
        self.forest.build(missing)
        trees = [self.forest.tree(columns) for columns in missing]
        trees = [self.forest.rebuilt(tree.columns) if tree.subnodes is None else tree for tree in trees]
        together = self.forest.side_by_side
        for first in range(0, len(trees), together):
            batch = trees[first : first + together]
            self._pools.update(
                zip(missing[first : first + together], self._harvest_trees(batch), strict=True)
            )

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
        draws = RefinementDraws(self, rng)
        low, high = draws.concretize(columns, expanded)
        if len(columns) > 1:
            self._rebalance_exact_values(columns, pool, expanded, low, high, draws)
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

    def _rebalance_exact_values(self, columns, pool, expanded, low, high, draws, rounds: int = 4) -> None:
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
                values, position, counts = _distinct_values(low[rows, j])
                keep = self._exact_value_acceptance(columns, pool, values, counts, j)
                rejected[rows[draws.rng.random(rows.size) >= keep[position]]] = True
            redraw = np.flatnonzero(rejected)
            if redraw.size == 0:
                return
            low[redraw], high[redraw] = draws.concretize(columns, expanded[redraw])

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
        return self._harvest_trees([tree])[0]

    def _harvest_trees(self, trees: list[Tree]) -> list[Buckets]:
        """The pools of `trees` (all of one size), harvested level by level for all of them at once.

        Buckets are only noted where they arise (`_Born`); what travels up the levels is (bucket id,
        owner node, real-valued count), and each tree's surviving buckets get their ranges at the end.
        Every count is computed per node or per bucket in the order of one tree alone, so a tree's
        pool is the same whichever trees it is harvested with."""
        k = trees[0].dims
        missing = [tree for tree in trees if tree.columns not in self._preorders]
        if missing:
            preorders = Preorder.of_trees(missing)
            self._preorders.update(
                (tree.columns, order) for tree, order in zip(missing, preorders, strict=True)
            )
        levels = _JoinedLevels(trees, [self.preorder(tree.columns) for tree in trees])
        in_cells = np.array([k > 2 and self._places_shortfall_in_cells(tree) for tree in trees])
        any_in_cells = bool(in_cells.any())
        born = _Born()
        bucket_id = np.zeros(0, dtype=np.int64)
        owner = np.zeros(0, dtype=np.int64)
        count = np.zeros(0)
        for depth in range(levels.depths - 1, -1, -1):
            level = levels.at(depth)
            below = None
            if depth + 1 < levels.depths and any_in_cells:
                # What the cells need: the level below, its nodes' parents and which hold buckets.
                below_level = levels.at(depth + 1)
                parents = levels.parents(depth + 1, np.arange(below_level.size))
                below = (below_level, parents, np.bincount(owner, minlength=below_level.size) > 0)
                owner = parents[owner]
            elif depth + 1 < levels.depths:
                owner = levels.parents(depth + 1, owner)
            noisy = level.noisy_count
            child_total = np.bincount(owner, weights=count, minlength=level.size)
            share = ONE_DIM_RESCALED_SHARE if k == 1 else RESCALED_SHARE
            rescale = level.branch & (child_total >= share * noisy)
            collapse = level.branch & ~rescale
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
                shortfall = np.where(collapse, noisy - child_total, 0.0)
                if below is not None:
                    cells = self._shortfall_cells(trees, in_cells, level, depth, below, shortfall)
                    if cells is not None:
                        shortfall[cells.branch] = 0.0
                        bucket_id = np.concatenate([bucket_id, born.note_cells(level, depth + 1, cells)])
                        owner = np.concatenate([owner, cells.branch])
                        count = np.concatenate([count, cells.count])
                refine += shortfall
                own_bucket &= level.singular
            nodes = np.flatnonzero(own_bucket | (refine > 0))
            if nodes.size:
                lazy = refine[nodes] > 0
                bucket_id = np.concatenate([bucket_id, born.note(level, depth, nodes, lazy)])
                owner = np.concatenate([owner, nodes])
                count = np.concatenate([count, np.where(lazy, refine[nodes], noisy[nodes])])
        born.join()
        pools = []
        for t, tree in enumerate(trees):  # after depth 0, each tree's buckets are owned by its root, t
            mine = np.flatnonzero(owner == t) if len(trees) > 1 else slice(None)
            pools.append(self._tree_pool(tree, born, bucket_id[mine], count[mine]))
            if k > 1:
                tree.subnodes = None
        return pools

    def _tree_pool(self, tree: Tree, born: _Born, bucket_id: np.ndarray, count: np.ndarray) -> Buckets:
        """One tree's buckets sorted by origin, counts rounded (fractions carried), zero counts gone."""
        if bucket_id.size == 0:
            return _empty(tree.dims)
        order = np.argsort(born.origin[bucket_id], kind="stable")
        rounded = _round_carrying(count[order])
        keep = rounded > 0
        ids = bucket_id[order][keep]
        depth = born.depth[ids]
        low, high = tree.ranges_of(
            self.forest, depth, born.rep_row[ids], born.singular_dims[ids], born.cell_bits[ids]
        )
        if tree.dims > 1:
            self._clip_to_bounds(tree.columns, low, high)
        lazy = born.lazy[ids]
        return Buckets(
            low,
            high,
            rounded[keep],
            born.origin[ids],
            np.where(lazy, depth, -1).astype(np.int8),
            np.where(lazy[:, None], born.subnodes[ids], -1).astype(np.int32),
        )

    def column_bounds(self, column: int) -> np.ndarray:
        """The column's anonymized range as its two edge buckets of the 1-dim harvest, nulls left out:
        [[bottom bucket low, high], [top bucket low, high]]; the range is [edges[0, 0], edges[1, 1]].

        Multi-column trees share the 1-dim root range, which is wider: a null mapping beyond the
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

    def sub_pool_index(self, columns, drop):
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
            depths = pool.depth[lazy].astype(np.int64)
            reached = depths < preorder.depths  # the sub-tree holds the placeholder's depth
            rows, depths = lazy[reached], depths[reached]
            sub = pool.subnodes[rows, drop].astype(np.int64)
            present = sub >= 0
            # The sub-tree's nodes of all depths one after the other: one lookup for every depth.
            node = preorder.depth_start[depths] + np.where(present, sub, 0)
            first[rows] = preorder.all_numbers[node]
            last[rows] = np.where(present, first[rows] + preorder.all_sizes[node], first[rows])
            start = np.searchsorted(sub_pool.origin, first)
            stop = np.maximum(np.searchsorted(sub_pool.origin, last), start)
            self._sub_range_cache[key] = (_narrow(start), _narrow(stop))
        return self._sub_range_cache[key]

    def primary_choices(self, columns: tuple[int, ...]) -> np.ndarray | None:
        """The dimensions refinement of the pool over `columns` (k > 2) may draw alone (None: any), from
        the links in their 2-dim pools (`pool_links`)."""
        if columns not in self._primaries:
            k = len(columns)
            links = np.zeros((k, k))
            for a, b in combinations(range(k), 2):
                links[a, b] = links[b, a] = self._pair_link(columns[a], columns[b])
            self._primaries[columns] = primary_choices(links)
        return self._primaries[columns]

    def _places_shortfall_in_cells(self, tree: Tree) -> bool:
        return tree.levels[0].noisy_count[0] <= CELLS_MAX_ROWS and self.weakly_linked(tree.columns)

    def _shortfall_cells(self, trees, in_cells, level, depth, below, shortfall) -> ShortfallCells | None:
        """The cells of the branches at `depth` whose tree places its `shortfall` in cells (`in_cells`);
        `below`: the level below, its nodes' parents and whether each holds buckets."""
        placed = shortfall * (in_cells if level.tree_of is None else in_cells[level.tree_of])
        if not (placed > 0).any():
            return None
        return ShortfallCells.of(self.forest, trees, level, depth, *below, placed)

    def weakly_linked(self, columns: tuple[int, ...]) -> bool:
        """Whether every pair of `columns` is linked less than `WEAK_LINK` in its 2-dim pool."""
        return all(self._pair_link(a, b) < WEAK_LINK for a, b in combinations(columns, 2))

    def _pair_link(self, a: int, b: int) -> float:
        if (a, b) not in self._links:
            pool = self.pool((a, b))
            self._links[a, b] = pair_link(pool.low, pool.high, pool.count)
        return self._links[a, b]

    def _cumulative(self, columns) -> np.ndarray:
        if columns not in self._cumulative_cache:
            self._cumulative_cache[columns] = np.r_[0, np.cumsum(self.pool(columns).count)].astype(np.float64)
        return self._cumulative_cache[columns]


class _JoinedLevels:
    """The levels of several trees of one size, depth by depth, one tree's nodes after the other's
    (a batch of one tree reads its own arrays)."""

    def __init__(self, trees: list[Tree], preorders: list[Preorder]):
        self.trees = trees
        self.preorders = preorders
        self.depths = max(len(tree.levels) for tree in trees)
        self.k = trees[0].dims
        self._at: dict[int, _JoinedLevel] = {}

    def at(self, depth: int) -> _JoinedLevel:
        if depth not in self._at:
            self._at[depth] = _JoinedLevel(self.trees, self.preorders, depth)
        return self._at[depth]

    def parents(self, depth: int, nodes: np.ndarray) -> np.ndarray:
        """The parents (at depth - 1) of nodes at `depth`, as joined indices."""
        level, above = self.at(depth), self.at(depth - 1)
        parents = level.key[nodes] >> self.k
        if len(self.trees) > 1:
            parents = parents + above.offsets[level.tree_of[nodes]]
        self._at.pop(depth)  # each depth is read on the way up only
        return parents


class _JoinedLevel:
    """One depth of several trees: the fields the harvest reads, joined, and each tree's offset."""

    def __init__(self, trees: list[Tree], preorders: list[Preorder], depth: int):
        present = [(t, tree) for t, tree in enumerate(trees) if depth < len(tree.levels)]
        levels = [tree.levels[depth] for _, tree in present]
        sizes = np.zeros(len(trees), dtype=np.int64)
        sizes[[t for t, _ in present]] = [level.size for level in levels]
        self.offsets = np.zeros(len(trees), dtype=np.int64)
        np.cumsum(sizes[:-1], out=self.offsets[1:])
        self.tree_of = np.repeat(np.arange(len(trees)), sizes) if len(trees) > 1 else None
        for name in ("key", "noisy_count", "branch", "lcf_low", "singular", "rep_row", "singular_dims"):
            setattr(self, name, join_arrays([getattr(level, name) for level in levels]))
        self.origin = join_arrays([preorders[t].numbers_at(depth) for t, _ in present])
        self.subnodes = join_arrays([tree.subnodes[depth] for _, tree in present])

    @property
    def size(self) -> int:
        return self.key.size


class _Born:
    """Where the buckets of a harvest arose, in the order they did (a bucket's id is its number)."""

    def __init__(self):
        self.parts: list[tuple] = []
        self.created = 0

    def note(self, level: _JoinedLevel, depth: int, nodes: np.ndarray, lazy: np.ndarray) -> np.ndarray:
        """Note the buckets of `nodes` (placeholders where `lazy`); their ids."""
        return self._add(
            np.full(nodes.size, depth, dtype=np.int8),
            level.rep_row[nodes],
            level.singular_dims[nodes],
            level.origin[nodes],
            lazy,
            level.subnodes[nodes],
            np.full(nodes.size, -1, dtype=np.int16),
        )

    def note_cells(self, level: _JoinedLevel, depth: int, cells: ShortfallCells) -> np.ndarray:
        """Note placeholders for the child cells (at `depth`) of branches of `level`; their ids. A cell
        is its branch's node (representative row, singular points, preorder number) with child bits."""
        return self._add(
            np.full(cells.branch.size, depth, dtype=np.int8),
            level.rep_row[cells.branch],
            level.singular_dims[cells.branch],
            level.origin[cells.branch],
            np.ones(cells.branch.size, dtype=bool),
            cells.subnodes,
            cells.bits.astype(np.int16),
        )

    def _add(self, *fields) -> np.ndarray:
        self.parts.append(fields)
        size = fields[0].size
        ids = np.arange(self.created, self.created + size)
        self.created += size
        return ids

    def join(self) -> None:
        fields = list(zip(*self.parts, strict=True)) if self.parts else [[np.zeros(0)]] * 7
        joined = [np.concatenate(parts) for parts in fields]
        (
            self.depth,
            self.rep_row,
            self.singular_dims,
            self.origin,
            self.lazy,
            self.subnodes,
            self.cell_bits,
        ) = joined
        self.parts = []


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


def _distinct_values(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True, return_counts=True)`, by counting where the values are
    codes, dates or counts (DistinctRows) instead of sorting them."""
    distinct = DistinctRows.of(values[:, None])
    if distinct is None:
        return np.unique(values, return_inverse=True, return_counts=True)
    return distinct.values[:, 0], distinct.of_row, distinct.counts
