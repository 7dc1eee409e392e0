"""Microdata generation: harvested buckets -> synthetic float values -> typed columns.

Per bucket, `count` rows; per dimension a value drawn uniformly in the bucket's range (the exact point
for singular dimensions). Columns whose codec decodes to a grid (integers, timestamps at their
resolution, string indices) draw one of the grid values inside [low, high) uniformly instead: a
continuous draw rounded by the decoder would give the end values half weight and could emit `high`,
one step past the range. A range starting at the column's null mapping gives null. Strings: the range
is turned into the integer indices it covers; the value is the exact string for a singular range or
for a "safe" index (a singularity of the column's 1-dim tree that passes LCF), otherwise the common
prefix of the range's first and last strings + "*" + the drawn index (e.g. `city_*37`). Timestamps
on a calendar (firsts of months or years: `ColumnCodec.calendar`) draw one of its instants.
In a cluster of several columns, each column's rows are first dealt its 1-dim buckets in the order of
their own values (`_calibrated_ranges`), so the column keeps its 1-dim distribution and the joint ranks.
Numbers and timestamps stay between the column's known values (`known_values`): the outermost 1-dim
buckets, when ranges, are drawn in their part between those values, so no value falls beyond the
source's extremes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import calendar_grid
from .cdf_scale import CdfScale
from .columns import ColumnCodec, ColumnKind, IntegerCodec
from .dealing import deal_keeping_matches, matching_buckets, ordered_names
from .forest import Forest
from .harvest import Buckets, Harvester
from .random_ties import stable_order


@dataclass
class Microdata:
    """Synthetic rows of one set of columns, in bucket order (not shuffled).

    `columns` are forest column indices; `values[i]` is the typed Series of column columns[i], as the
    codec's `decode_compact` gives it (strings, dates, decimals as categories; `expand` -> input dtype);
    `floats[:, i]` the float value each row was generated from (codec space: original units, string
    index, seconds since 1800; NaN = null), which is what stitching sorts and splits on.
    """

    columns: tuple[int, ...]
    values: list[pd.Series]
    floats: np.ndarray
    names: frozenset[int] = frozenset()  # the columns of names without an order (`dealing`)

    @property
    def row_count(self) -> int:
        return self.floats.shape[0]


# Whether a string column's order goes with a number column's is read from at most this many buckets.
NAMES_TEST_BUCKETS = 50_000
# An outermost 1-dim bucket holding at most this share of a column's rows is a tail: its rows are drawn
# at the known value it reaches (`_inside_known_values`).
TAIL_SHARE = 0.1


class MicrodataBuilder:
    """Materializes the microdata of any column subset of one table.

    `forest` holds the columns' own 1-dim trees (`harvester` harvests them): a one-column subset comes
    from them, and they give every column its distribution in a cluster. A cluster of several columns
    comes from the trees of `cluster_harvester`'s forest, whose columns are on the `scales`
    (`cdf_scale.CdfScale`, one per column, None for a column on its own values; no `scales`: the same
    forest as the 1-dim trees)."""

    def __init__(
        self,
        forest: Forest,
        codecs: Sequence[ColumnCodec],
        harvester: Harvester | None = None,
        *,
        cluster_harvester: Harvester | None = None,
        scales: Sequence[CdfScale | None] | None = None,
    ):
        self.forest = forest
        self.codecs = list(codecs)
        self.harvester = harvester or Harvester(forest)
        self.cluster_harvester = cluster_harvester or self.harvester
        self.scales = scales
        self._safe_strings: dict[int, np.ndarray] = {}
        self._known_values: dict[int, tuple[float, float] | None] = {}

    def materialize(self, columns: Sequence[int], after_draws: Callable[[], None] | None = None) -> Microdata:
        """The rows of `columns`; `after_draws` runs once the refined rows are drawn (the caller's chance
        to release the pools and caches that only the draws needed)."""
        columns = tuple(sorted(columns))
        harvester = self.harvester if len(columns) == 1 else self.cluster_harvester
        buckets = harvester.harvest(columns, after_draws)
        rng = self.forest.salt.rng("microdata", *(self.forest.column_names[j] for j in columns))
        return self.from_buckets(columns, buckets, rng)

    def from_buckets(self, columns: tuple[int, ...], buckets: Buckets, rng: np.random.Generator) -> Microdata:
        row_bucket = np.repeat(np.arange(buckets.size), buckets.count)
        floats = np.empty((row_bucket.size, len(columns)))
        values = []
        names = self._names(columns, buckets)
        for position, column in enumerate(columns):
            # One column's ranges at a time: a (rows, k) copy of both bounds would dominate the peak.
            lo, hi = buckets.low[:, position][row_bucket], buckets.high[:, position][row_bucket]
            codec = self.codecs[column]
            rank_order = None
            if len(columns) > 1 and lo.size:
                lo, hi, rank_order = self._calibrated_ranges(column, lo, hi, codec, rng, position in names)
            null = lo == self.forest.null_values[column]
            if codec.kind not in (ColumnKind.STRING, ColumnKind.BOOLEAN):
                lo, hi = self._inside_known_values(column, lo, hi, null)
            if codec.kind == ColumnKind.STRING:
                series, drawn = self._strings(column, codec, lo, hi, null, rng)
            else:
                if codec.calendar is None:
                    drawn = _draw_in_ranges(lo, hi, _grid_step(codec), rng)
                else:
                    drawn = _draw_on_calendar(lo, hi, null, codec.calendar, rng)
                if rank_order is not None:
                    # Inside each 1-dim bucket too, the cluster's rows keep their order.
                    drawn[rank_order] = np.sort(drawn[rank_order])
                drawn[null] = np.nan
                series = codec.decode_compact(drawn)
            floats[:, position] = drawn
            values.append(series)
        return Microdata(columns, values, floats, frozenset(columns[p] for p in names))

    def _names(self, columns: tuple[int, ...], buckets: Buckets) -> set[int]:
        """The positions among `columns` of the string columns whose values are names without an order
        that the cluster's number columns follow (`dealing.ordered_names`, on the buckets' middles:
        every k-th of at most NAMES_TEST_BUCKETS, which rank correlations need no more of)."""
        strings = [p for p, c in enumerate(columns) if self.codecs[c].kind == ColumnKind.STRING]
        if len(columns) < 2 or not strings or buckets.size == 0:
            return set(strings)
        every = slice(None, None, -(-buckets.size // NAMES_TEST_BUCKETS))
        middle = (buckets.low[every] + buckets.high[every]) / 2
        weights = buckets.count[every].astype(np.float64)
        numbers = [middle[:, p] for p, c in enumerate(columns) if self.codecs[c].kind != ColumnKind.STRING]
        ordered = ordered_names([middle[:, p] for p in strings], numbers, weights)
        return {p for p, is_ordered in zip(strings, ordered, strict=True) if not is_ordered}

    def _calibrated_ranges(self, column, lo, hi, codec, rng, names=False):
        """The column's 1-dim buckets handed out to a cluster's rows in the order of the rows' values.

        A multi-column tree loses what its low-count nodes hold (tails above all) and refinement
        over- or under-draws values, while the column's own 1-dim tree resolves its distribution
        best. The cluster's rows are ranked by a value drawn in their range (ties in random order) and
        the 1-dim buckets, in value order with counts scaled to the cluster's rows, are dealt out by
        rank: the column gets its 1-dim distribution and the rows keep their joint ranks. Uses only
        the 1-dim harvest and the cluster's synthetic rows, both anonymized. The cluster's ranges are
        on the column's scale (`scales`), which keeps the values' order, so the ranks are the same.
        A column of `names` keeps each row's own value while its share has room (`dealing`).
        Returns (low, high, row order by rank), low and high in the column's own values."""
        scale = None if self.scales is None else self.scales[column]
        target = self.harvester.harvest((column,))
        if target.size == 0:
            if scale is not None:
                lo, hi = scale.to_values(lo), scale.to_values(hi)
            return lo, hi, None
        by_value = np.lexsort((target.high[:, 0], target.low[:, 0]))
        # Each bucket's share of the cluster's rows, rounded so that the running total stays exact.
        edges = np.rint(np.cumsum(target.count[by_value]) * (lo.size / target.count.sum())).astype(np.int64)
        edges[-1] = lo.size
        shares = np.diff(edges, prepend=0)
        shuffled = rng.permutation(lo.size)
        step = _grid_step(codec) if scale is None else None  # the scale has no grid
        provisional = _draw_in_ranges(lo[shuffled], hi[shuffled], step, rng)
        order = stable_order(provisional)
        rank_order = shuffled[order]
        del shuffled
        if names:
            sorted_low, sorted_high = target.low[by_value, 0], target.high[by_value, 0]
            match = matching_buckets(provisional[order], sorted_low, sorted_high)
            del provisional, order
            bucket_of_rank = by_value[deal_keeping_matches(match, shares)[0]]
        else:
            bucket_of_rank = by_value[np.repeat(np.arange(by_value.size), shares)]
        calibrated_lo, calibrated_hi = np.empty_like(lo), np.empty_like(hi)
        calibrated_lo[rank_order] = target.low[bucket_of_rank, 0]
        calibrated_hi[rank_order] = target.high[bucket_of_rank, 0]
        return calibrated_lo, calibrated_hi, rank_order

    def known_values(self, column: int) -> tuple[float, float] | None:
        """(lowest, highest): the column's source minimum is at most `lowest` and its maximum at least
        `highest`, read from the 1-dim harvest alone; None if the harvest knows no value between them
        (one range bucket). They are one value when the lowest bucket end is the highest start: two
        touching range buckets, or a point bucket with a range bucket reaching it (a column of 1.0s
        and a few rows below).

        Every 1-dim bucket passed the low-count filter, so it holds source rows: a point bucket is a
        source value, and the rows of a range bucket [low, high) lie below `high` and at or above
        `low` (outliers beyond the pushed-down root sit in its edge cells, on the far side). So the
        minimum is below the lowest bucket end and the maximum at or above the highest bucket start.
        """
        if column not in self._known_values:
            pool = self.harvester.pool((column,))
            present = pool.low[:, 0] != self.forest.null_values[column]
            lows, highs = pool.low[present, 0], pool.high[present, 0]
            known = None
            if lows.size and highs.min() <= lows.max():
                known = (float(highs.min()), float(lows.max()))
            self._known_values[column] = known
        return self._known_values[column]

    def _inside_known_values(self, column, lo, hi, null):
        """Ranges cut to the column's known values: the outermost 1-dim buckets, when ranges, reach
        beyond the data's extremes by up to their width, and a uniform draw there can fall below the
        source's minimum or above its maximum. Such a range keeps its part between the known values.
        The bucket that starts at the highest known value (ends at the lowest) keeps that value alone
        when it is a tail (at most TAIL_SHARE of the rows): its rows lie at or beyond it, so they stay
        as far out as the harvest shows values to exist. Spread a bucket width inwards they would
        lose a heavy tail's mass (a 506-row crime rate's top bucket [32, 64) drawn in [0, 32)). A
        bucket holding more of the rows (a tiny table's, or a column of a few buckets) is spread that
        way, so that the column keeps a spread of values instead of piling them onto the edge; where
        the known values are one value there is no room to spread into, and it keeps its range."""
        known = self.known_values(column)
        if known is None:
            return lo, hi
        lowest, highest = known
        present = ~null
        tail_rows = TAIL_SHARE * present.sum()
        width = hi - lo
        below, above = present & (lo < lowest), present & (hi > highest)
        original_lo, original_hi = lo, hi
        lo, hi = lo.copy(), hi.copy()
        lo[below], hi[below] = lowest, np.minimum(hi[below], highest)
        lo[above], hi[above] = np.maximum(lo[above], lowest), highest
        for edge, inwards in ((below & (lo == hi), 1.0), (above & (lo == hi), -1.0)):
            if edge.sum() <= tail_rows:
                continue
            if lowest == highest:
                lo[edge], hi[edge] = original_lo[edge], original_hi[edge]
            else:
                value = lo[edge]
                lo[edge], hi[edge] = np.sort(
                    [value, np.clip(value + inwards * width[edge], lowest, highest)], axis=0
                )
        return lo, hi

    def safe_string_indices(self, column: int) -> np.ndarray:
        """Sorted string indices that are LCF-passing singularities of the column's 1-dim tree."""
        if column not in self._safe_strings:
            tree = self.forest.tree((column,))
            found = []
            for level in tree.levels:
                nodes = level.singular & ~level.lcf_low
                found.append(self.forest.values_at(level.rep_row[nodes], (column,))[:, 0])
            safe = np.unique(np.concatenate(found)) if found else np.zeros(0)
            self._safe_strings[column] = safe[safe != self.forest.null_values[column]]
        return self._safe_strings[column]

    def _strings(self, column, codec, lo, hi, null, rng):
        last = len(codec.strings) - 1
        singular = lo == hi
        first_index = np.clip(np.ceil(lo), 0, max(last, 0))
        last_index = np.clip(np.ceil(hi) - 1, 0, max(last, 0))
        # A non-singular range always holds an index in practice; if a cell holds none, use its start.
        empty = last_index < first_index
        last_index = np.where(empty, first_index, last_index)
        span = last_index - first_index + 1
        drawn = np.where(singular, lo, first_index + np.floor(rng.random(lo.size) * span))
        drawn = np.clip(np.rint(drawn), 0, max(last, 0))
        safe = self.safe_string_indices(column)
        exact = singular | _in_index_set(drawn, safe, max(last, 0) + 1)
        drawn[null] = np.nan
        if last < 0:  # the column holds nulls only
            return codec.decode_compact(np.full(lo.size, np.nan)), drawn
        series = codec.decode_in_ranges_compact(
            drawn, exact, first_index.astype(np.int64), last_index.astype(np.int64)
        )
        return series, drawn


def _in_index_set(indices: np.ndarray, members: np.ndarray, size: int) -> np.ndarray:
    """`np.isin(indices, members)` for indices that are whole numbers in [0, size) or NaN, by a look-up
    in a table of `size` flags instead of sorting the indices (10M rows: a few hundred ms)."""
    table = np.zeros(size + 1, dtype=bool)  # the last flag, never set, answers NaN
    members = members[(members >= 0) & (members < size) & (members == np.floor(members))]
    table[members.astype(np.intp)] = True
    return table.take(np.where(np.isnan(indices), size, indices).astype(np.intp))


def _grid_step(codec: ColumnCodec) -> float | None:
    """Spacing of the values the codec decodes to (it rounds to multiples of it), or None if continuous.

    Booleans are left continuous: their decoder thresholds at 0.5 instead of rounding.
    """
    if isinstance(codec, IntegerCodec) or codec.kind == ColumnKind.INTEGER:
        return 1.0
    if codec.kind == ColumnKind.TIMESTAMP:
        return float(codec.resolution_seconds)
    return None


def _draw_on_calendar(
    lo: np.ndarray, hi: np.ndarray, null: np.ndarray, unit: str, rng: np.random.Generator
) -> np.ndarray:
    """As `_draw_in_ranges`, on the firsts of months or years (`calendar_grid`), which are not evenly
    spaced."""
    uniform = rng.random(lo.size)
    drawn = np.where(lo == hi, lo, lo + uniform * (hi - lo))
    if null.all():
        return drawn
    grid = calendar_grid.starts_between(unit, lo[~null].min(), hi[~null].max())
    if grid.size == 0:
        return drawn
    first = np.searchsorted(grid, lo)
    count = np.searchsorted(grid, hi) - first  # grid instants in [lo, hi)
    on_grid = ~null & (lo != hi) & (count >= 1)
    picked = np.minimum(first + np.floor(uniform * count).astype(np.int64), grid.size - 1)
    return np.where(on_grid, grid[picked], drawn)


# Beyond this many grid steps from 0 a float64 cannot tell neighbouring grid values apart.
_GRID_LIMIT = 2.0**52


def _draw_in_ranges(
    lo: np.ndarray, hi: np.ndarray, step: float | None, rng: np.random.Generator
) -> np.ndarray:
    """A value per row in [lo, hi) (lo where lo == hi); on the codec's grid when it has one."""
    uniform = rng.random(lo.size)
    drawn = np.where(lo == hi, lo, lo + uniform * (hi - lo))
    if step is None:
        return drawn
    with np.errstate(invalid="ignore"):
        start, stop = lo / step, hi / step
        # A range bound sitting on a grid value may be off by a few ulps after the division.
        slack = np.maximum(1e-6, 8 * np.spacing(np.abs(stop)))
        first = np.ceil(start - slack)
        values_in_range = np.ceil(stop - slack) - first
        on_grid = (lo != hi) & (values_in_range >= 1) & (np.abs(stop) < _GRID_LIMIT)
    grid = (first + np.minimum(np.floor(uniform * values_in_range), values_in_range - 1)) * step
    # Ranges holding no grid value (possible only at outlier-holding edge cells) keep the plain draw.
    return np.where(on_grid, grid, drawn)
