"""Refinement draws: placeholder entries of a pool -> concrete refined buckets, pool by pool.

A refined bucket of a k-dim node X (a placeholder entry of X's tree's pool) gets a random primary
dimension i: its other k-1 dimensions are a sub-bucket drawn count-weighted from the entries under
X's subnode i (the node of the tree without dimension i that has X's ranges there), and dimension i
is drawn under subnode (i + 1) % k. Dimension i so keeps its links to the others only as far as X's
ranges carry them; where two dimensions follow each other (`pool_links.TIED_LINK` in their 2-dim
pool) and others do not, the primary is drawn among the others, so the pair stays in the sub-bucket.
A 2-dim bucket so draws each dimension under the other dimension's subnode, whatever its primary. A
drawn sub-pool entry that is itself a placeholder is concretized the same way: all its dimensions for
a sub-bucket, only the one needed for a dimension, which is drawn under one of its other subnodes
picked at random. Where a subnode is missing or holds no entries, X keeps its own range; X's singular
dimensions keep its point.

The draws go breadth-first: every request to one pool, from all placeholders one column wider, is
drawn in one batch, widest pools first (a request only ever goes one column narrower), and the drawn
ranges are filled in afterwards, narrowest pools first. So a round of refinement costs a few numpy
calls per pool, not per request; at a few thousand rows those calls, not the rows, are the cost.
Top-level entries are drawn in chunks, so the batches of a large table stay small.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

# Top-level placeholder rows drawn per chunk: the requests they cause to narrower pools are a few
# times as many, and every batch is held until the chunk is filled in.
_CHUNK_ROWS = 1 << 16
# Below this many keys a plain searchsorted beats sorting them first.
_SORTED_SEARCH_FROM = 2048


@dataclass
class _Batch:
    """The requests to one pool: entries whose buckets are wanted whole (`dims` None) or in one
    dimension each (`dims`); their drawn ranges, and where narrower batches' ranges go in them."""

    parts: list[tuple[np.ndarray, np.ndarray | None]] = field(default_factory=list)
    size: int = 0
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    # (narrower batch, its rows, index into this batch's low/high): filled in before points are kept
    fills: list[tuple[_Batch, slice, tuple]] = field(default_factory=list)

    def add(self, entries: np.ndarray, dims: np.ndarray | None = None) -> slice:
        """Request `entries`; the slice of this batch where their ranges will be."""
        start = self.size
        self.parts.append((entries, dims))
        self.size += entries.size
        return slice(start, self.size)

    def entries(self) -> np.ndarray:
        self._join()
        return self.parts[0][0]

    def dims(self) -> np.ndarray | None:
        self._join()
        return self.parts[0][1]

    def _join(self) -> None:
        if len(self.parts) > 1:
            dims = None if self.parts[0][1] is None else np.concatenate([p[1] for p in self.parts])
            self.parts = [(np.concatenate([p[0] for p in self.parts]), dims)]


class RefinementDraws:
    """Draws the refined buckets of a harvester's placeholders (see the module docstring)."""

    def __init__(self, harvester, rng: np.random.Generator):
        self.harvester = harvester
        self.rng = rng

    def concretize(self, columns: tuple[int, ...], entries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One concrete refined bucket (low, high: (m, k)) per placeholder `entries` of the pool."""
        if entries.size <= _CHUNK_ROWS:
            return self._concretize_chunk(columns, entries)
        k = len(columns)
        low, high = np.empty((entries.size, k)), np.empty((entries.size, k))
        for start in range(0, entries.size, _CHUNK_ROWS):
            chunk = slice(start, start + _CHUNK_ROWS)
            low[chunk], high[chunk] = self._concretize_chunk(columns, entries[chunk])
        return low, high

    def _concretize_chunk(self, columns, entries):
        top = _Batch()
        top.add(entries)
        whole: dict[tuple[int, ...], _Batch] = {columns: top}
        single: dict[tuple[int, ...], _Batch] = {}
        order = []
        for size in range(len(columns), 1, -1):
            for subset in sorted(s for s in whole.keys() | single.keys() if len(s) == size):
                if subset in whole:
                    self._draw_whole(subset, whole[subset], whole, single)
                    order.append((subset, whole[subset]))
                if subset in single:
                    self._draw_single(subset, single[subset], single)
                    order.append((subset, single[subset]))
        for subset, batch in reversed(order):  # narrowest first: their ranges are final
            self._fill_in(subset, batch)
        return top.low, top.high

    def _draw_whole(self, columns, batch, whole, single) -> None:
        pool = self.harvester.pool(columns)
        k = len(columns)
        entries = batch.entries()
        batch.low, batch.high = pool.low[entries], pool.high[entries]
        if k == 2:
            for drop in (0, 1):
                self._draw_dimension(columns, batch, np.arange(entries.size), entries, 1 - drop, drop, single)
            return
        choices = self.harvester.primary_choices(columns)
        if choices is None:
            primary = self.rng.integers(0, k, size=entries.size)
        else:
            primary = choices[self.rng.integers(0, choices.size, size=entries.size)]
        for i in range(k):
            rows = (primary == i).nonzero()[0]
            if rows.size == 0:
                continue
            self._draw_sub_bucket(columns, batch, rows, entries[rows], i, whole)
            self._draw_dimension(columns, batch, rows, entries[rows], i, (i + 1) % k, single)

    def _draw_single(self, columns, batch, single) -> None:
        pool = self.harvester.pool(columns)
        k = len(columns)
        entries, dims = batch.entries(), batch.dims()
        batch.low, batch.high = pool.low[entries, dims], pool.high[entries, dims]
        # A 2-dim pool has one possible donor: no random numbers are drawn to pick it.
        donors = 1 - dims if k == 2 else (dims + 1 + self.rng.integers(0, k - 1, size=entries.size)) % k
        for donor in range(k):
            rows = (donors == donor).nonzero()[0]
            if rows.size:
                self._draw_dimension(columns, batch, rows, entries[rows], dims[rows], donor, single)

    def _draw_sub_bucket(self, columns, batch, rows, entries, drop, whole) -> None:
        """Rows `rows` of a whole-bucket batch take all dimensions but `drop` from a sub-bucket drawn
        under their subnode `drop`; drawn placeholders are requested from the sub-pool."""
        found, drawn, sub_pool = self._draw_entries(columns, drop, entries)
        if found.size == 0:
            return
        target = (rows[found][:, None], _other_dims(len(columns), drop))
        batch.low[target], batch.high[target] = sub_pool.low[drawn], sub_pool.high[drawn]
        if len(columns) > 2:  # (1-dim pools hold no placeholders)
            lazy = (sub_pool.depth[drawn] >= 0).nonzero()[0]
            if lazy.size:
                sub_columns = columns[:drop] + columns[drop + 1 :]
                sub_batch = whole.setdefault(sub_columns, _Batch())
                target = (rows[found[lazy]][:, None], _other_dims(len(columns), drop))
                batch.fills.append((sub_batch, sub_batch.add(drawn[lazy]), target))

    def _draw_dimension(self, columns, batch, rows, entries, dims, donor, single) -> None:
        """Rows `rows` of a batch take dimension `dims` (one, or one per row) from a sub-bucket drawn
        under their subnode `donor`; drawn placeholders are requested from the sub-pool."""
        found, drawn, sub_pool = self._draw_entries(columns, donor, entries)
        if found.size == 0:
            return
        # One dimension for all rows (a whole bucket's) stays a number: no per-row index arrays.
        if isinstance(dims, np.ndarray):
            dims = dims[found]
        position = dims - (dims > donor)
        rows = rows[found]
        target = (rows, dims) if batch.low.ndim == 2 else (rows,)
        batch.low[target], batch.high[target] = sub_pool.low[drawn, position], sub_pool.high[drawn, position]
        if len(columns) > 2:
            lazy = (sub_pool.depth[drawn] >= 0).nonzero()[0]
            if lazy.size:
                sub_columns = columns[:donor] + columns[donor + 1 :]
                sub_batch = single.setdefault(sub_columns, _Batch())
                position = (
                    position[lazy] if isinstance(position, np.ndarray) else np.full(lazy.size, position)
                )
                target = tuple(index[lazy] if isinstance(index, np.ndarray) else index for index in target)
                batch.fills.append((sub_batch, sub_batch.add(drawn[lazy], position), target))

    def _draw_entries(self, columns, drop, entries):
        """Count-weighted draw of one sub-pool entry under each placeholder's subnode `drop`.

        Returns (rows that found one, the drawn sub-pool entries, the sub-pool).
        """
        start_of, stop_of, cumulative, sub_columns = self.harvester.sub_pool_index(columns, drop)
        sub_pool = self.harvester.pool(sub_columns)
        start, stop = start_of[entries], stop_of[entries]
        found = (stop > start).nonzero()[0]
        if found.size == 0:
            return found, found, sub_pool
        if found.size < entries.size:
            start, stop = start[found], stop[found]
        return found, _weighted_draw(cumulative, start, stop, self.rng.random(found.size)), sub_pool

    def _fill_in(self, columns, batch) -> None:
        """Put the narrower batches' ranges in, then the placeholders' points back."""
        for sub_batch, part, target in batch.fills:
            batch.low[target], batch.high[target] = sub_batch.low[part], sub_batch.high[part]
        pool = self.harvester.pool(columns)
        dims = batch.dims()
        own = (batch.entries(),) if dims is None else (batch.entries(), dims)
        own_low = pool.low[own]
        point = own_low == pool.high[own]
        np.copyto(batch.low, own_low, where=point)
        np.copyto(batch.high, own_low, where=point)
        batch.fills.clear()


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
    # target >= cumulative[start], so drawn >= start; only a target rounded up to cumulative[stop] goes
    # past the last entry.
    np.minimum(drawn, stop - 1, out=drawn)
    return drawn


@functools.cache
def _other_dims(k: int, i: int) -> np.ndarray:
    """The dimensions of a k-dim tree other than i (those of the subnode that drops i)."""
    return np.array([j for j in range(k) if j != i], dtype=np.intp)
