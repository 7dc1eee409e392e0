"""Joining the microdata of several clusters into one table: patching, recursive stitching, merging.

A :class:`Microtable` is the synthetic output of one cluster: per column a float value in the column's
own encoded space (real values, string indices, seconds since 1800, 0/1; NaN = null) used to sort and
split rows, and the typed values that go into the output (strings, dates, times and decimals as
categories of their distinct values, the codecs' compact form, until the output is assembled).
Stitching only decides which left row goes with which right row; the typed values are gathered once at
the end of each join.

Everything is vectorized: the recursive stitch runs level by level over all open ranges at once (rows
carry a group id, counts come from ``np.bincount``), so Python only loops over tree levels, never rows.
Split points are midpoints of each stitch column's range *in the space of the values being split*
(the microtable's own floats), which is what makes the halves meaningful (1.0.8 split de-normalized
values at normalized midpoints).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from syndiffix_core.clustering.builder import Clusters, StitchOwner
from syndiffix_core.dealing import deal_keeping_matches
from syndiffix_core.distinct_rows import DistinctRows
from syndiffix_core.forest import null_mapping, snap_range
from syndiffix_core.pairing_order import ColumnOrders, lexicographic_numbers
from syndiffix_core.random_ties import (
    order_by_rank_with_random_ties,
    ranked_order_with_random_ties,
    stable_rank_order,
)
from syndiffix_core.stitch_priority import tied_columns
from syndiffix_core.stitch_values import choose_stitch_values
from syndiffix_core.threads import map_in_threads

# A split is accepted when, for both halves, the smaller side has at least this share of the larger.
SPLIT_BALANCE = 0.7
# A stitch column whose paired values' distribution drifts further than this, and than the noise of
# its row count, from the side's they come from (largest gap between the cumulative distributions) is
# calibrated back to it: the tolerance of the harness's tail check, 1 % of the rows above the p90
# (docs/fidelity.md). The harness's 9 tables (5,000 rows) drift by at most 0.0099; Ecdat PSID by
# 0.015-0.027.
DRIFT_TOLERANCE = 0.01
# The drift is measured on about this many values of each distribution (every k-th).
DRIFT_MEASURED_ROWS = 200_000


@dataclass(frozen=True)
class Microtable:
    """Synthetic rows of some columns: ``typed[columns[i]]`` holds column ``columns[i]`` (a column
    index of the whole table) and ``values[:, j]`` the floats of column ``value_columns[j]``, by default
    every column (a joined table keeps only those that later clusters stitch on)."""

    columns: tuple[int, ...]
    values: np.ndarray
    typed: Mapping[int, pd.Series]
    value_columns: tuple[int, ...] | None = None
    # Columns of names without an order: dealt out keeping each row's own name (`dealing`).
    names: frozenset[int] = frozenset()

    def __post_init__(self):
        if self.value_columns is None:
            object.__setattr__(self, "value_columns", self.columns)
        rows = self.values.shape[0]
        if self.values.shape != (rows, len(self.value_columns)):
            raise ValueError(
                f"values have shape {self.values.shape}, expected ({rows}, {len(self.value_columns)})"
            )
        for column in self.columns:
            if len(self.typed[column]) != rows:
                raise ValueError(f"typed column {column} has {len(self.typed[column])} rows, expected {rows}")

    @property
    def num_rows(self) -> int:
        return self.values.shape[0]

    def column_values(self, column: int) -> np.ndarray:
        return self.values[:, self.value_columns.index(column)]


def assemble(
    clusters: Clusters,
    materialize: Callable[[tuple[int, ...]], Microtable],
    *,
    entropies: Sequence[float] | None,
    rng: np.random.Generator,
    column_ranges: Mapping[int, tuple[float, float]] | None = None,
    null_values: Mapping[int, float] | None = None,
    progress: Callable[[str, float], None] | None = None,
    stitch_threads: Callable[[], int] | None = None,
) -> Microtable:
    """Synthesize the initial cluster, then join every derived cluster onto the accumulated table.
    `stitch_threads`: asked during each stitch how many threads it may use now (default 1)."""
    total = 1 + len(clusters.derived)
    table = materialize(clusters.initial)
    if progress is not None:
        progress(f"cluster 1/{total} synthesized", 1 / total)
    for number, cluster in enumerate(clusters.derived, start=2):
        right = materialize(cluster.all_columns)
        # The joined table's floats only serve later stitches: the other columns keep typed values only.
        stitched_later = {c for later in clusters.derived[number - 1 :] for c in later.stitch_columns}
        if cluster.stitch_columns:
            table = stitch(
                table,
                right,
                cluster.stitch_columns,
                entropies=entropies,
                owner=cluster.owner,
                column_ranges=column_ranges,
                null_values=null_values,
                rng=rng,
                keep_values=stitched_later,
                threads=1 if stitch_threads is None else stitch_threads,
            )
        else:
            table = patch(table, right, rng=rng, keep_values=stitched_later)
        del right  # not held while the next cluster is materialized
        if progress is not None:
            progress(f"cluster {number}/{total} stitched", number / total)
    return table


def patch(
    left: Microtable,
    right: Microtable,
    *,
    rng: np.random.Generator,
    keep_values: Collection[int] | None = None,
) -> Microtable:
    """Zip shuffled right rows onto the left rows: the right columns keep their own distribution but are
    independent of the left ones. The right side is cut or topped up with random repeats to fit.
    `keep_values`: the columns whose floats the result keeps (default: all)."""
    shared = set(left.columns) & set(right.columns)
    if shared:
        raise ValueError(f"a patch needs disjoint columns, both sides have {sorted(shared)}")
    n_left, n_right = left.num_rows, right.num_rows
    if n_left == 0 or n_right == 0:
        return _empty_join(left, right)
    right_rows = rng.permutation(n_right)
    if n_right < n_left:
        right_rows = np.concatenate([right_rows, rng.integers(0, n_right, size=n_left - n_right)])
    right_rows = right_rows[:n_left]
    return _join(left, right, np.arange(n_left), right_rows, take_right=None, keep_values=keep_values)


def stitch(
    left: Microtable,
    right: Microtable,
    stitch_columns: Sequence[int],
    *,
    entropies: Sequence[float] | None = None,
    owner: StitchOwner = StitchOwner.SHARED,
    column_ranges: Mapping[int, tuple[float, float]] | None = None,
    null_values: Mapping[int, float] | None = None,
    rng: np.random.Generator,
    keep_values: Collection[int] | None = None,
    threads: int | Callable[[], int] = 1,
) -> Microtable:
    """Join right rows to left rows that agree on the stitch columns.
    `keep_values`: the columns whose floats the result keeps (default: all). `threads`: how many threads
    the stitch may use, or a function asked before each step that could use more than one (cores free
    up while a stitch runs); the result is the same for any count.

    Both sides are split recursively at the midpoint of one stitch column's range at a time (lowest
    entropy first, then round robin) while the halves stay balanced between the sides; each final range
    is merged by sorting both sides on the stitch columns and zipping them, rows of equal stitch values
    paired first where they are codes (`_matching_equal_values`), then rows equal on the stitch columns
    that pin down a column of either side (`stitch_priority`). A column only one side holds
    then takes that side's own values at the merged row count, in the paired rows' order.

    ``column_ranges`` (column -> (low, size)) and ``null_values`` (column -> value nulls sort as) are the
    forest's; without them both are derived from the two sides' values.
    """
    stitch_columns = list(dict.fromkeys(stitch_columns))
    missing = [c for c in stitch_columns if c not in left.columns or c not in right.columns]
    if missing:
        raise ValueError(f"stitch columns {missing} are not on both sides")
    if left.num_rows == 0 or right.num_rows == 0:
        # Nothing survived anonymization on one side (tiny tables): no row can be completed.
        return _empty_join(left, right, keep_values)
    if entropies is not None:
        stitch_columns.sort(key=lambda c: (entropies[c], c))
    # Tied columns are split on and sorted by first: a range then holds all rows of their values.
    tied = tied_columns(left, right, stitch_columns) if len(stitch_columns) > 1 else []
    stitch_columns = tied + [c for c in stitch_columns if c not in tied]

    left_rows, right_rows, slot = _paired_rows(
        left, right, stitch_columns, column_ranges, null_values, owner, rng, len(tied)
    )
    if owner is StitchOwner.LEFT:
        take_right = np.zeros(len(left_rows), dtype=bool)
    elif owner is StitchOwner.RIGHT:
        take_right = np.ones(len(left_rows), dtype=bool)
    else:
        take_right = slot % 2 == 1
        if owner is StitchOwner.BEST:
            take_right = choose_stitch_values(left, right, stitch_columns, left_rows, right_rows, take_right)
    del slot
    shared_rows = _stitch_value_rows(left, right, stitch_columns, left_rows, right_rows, take_right, rng)
    one_sided = [(left, c, left_rows) for c in left.columns if c not in right.columns]
    one_sided += [(right, c, right_rows) for c in right.columns if c not in left.columns]
    return _join(
        left,
        right,
        left_rows,
        right_rows,
        take_right=take_right,
        keep_values=keep_values,
        rows_of=_calibrate_columns(one_sided, rng, threads if callable(threads) else lambda: threads),
        shared_rows=shared_rows,
    )


def _stitch_value_rows(left, right, stitch_columns, left_rows, right_rows, take_right, rng):
    """Per stitch column, the row of the two sides laid end to end (left rows first) whose value each
    output row takes: the paired row of the side `take_right` names, or, where those values' distribution
    drifts from the side's own by more than DRIFT_TOLERANCE and 1 / sqrt(rows), the values calibrated back to it
    (`_calibrated_rows`: the paired values' order, the side's distribution; both sides' where they
    alternate).

    Each final range of the split holds the mean of the two sides' row counts while its values come
    from one side, so where the sides relate the stitch columns differently the chosen side's values
    are reweighted (Ecdat PSID: the new cluster held intnum with persnum, the accumulated table had
    them unrelated, and intnum's top decile lost 11 % of its rows). Calibrating moves values within
    their rank, which blurs the row's links a little, so small drifts are left as they are."""
    # The sides the values come from, laid end to end, the output rows' rows in them, and where they
    # start among both sides' rows.
    n_left = left.num_rows
    if take_right.all():
        sides, rows, offset = [right], right_rows, n_left
    elif not take_right.any():
        sides, rows, offset = [left], left_rows, 0
    else:
        sides, rows, offset = [left, right], np.where(take_right, n_left + right_rows, left_rows), 0
    paired = offset + rows if offset else rows
    # Reweighting a few hundred rows at random drifts their distribution by about 1 / sqrt(rows) anyway.
    tolerance = max(DRIFT_TOLERANCE, 1 / np.sqrt(max(len(rows), 1)))
    shared_rows = {}
    for column in stitch_columns:
        side_keys = [_order_key(side, column) for side in sides]
        if _drift(side_keys, rows) <= tolerance:
            shared_rows[column] = paired
            continue
        keys = np.concatenate(side_keys)
        randoms = rng.random(len(rows)), rng.random(len(keys))
        names = any(column in side.names for side in sides)
        shared_rows[column] = offset + _calibrated_rows(keys, rows, *randoms, names=names)
    return shared_rows


def _drift(side_keys: list[np.ndarray], rows: np.ndarray) -> float:
    """The largest gap between the cumulative distributions of the sides' keys laid end to end and of
    those keys at `rows` (the Kolmogorov-Smirnov distance), on about DRIFT_MEASURED_ROWS of each (every
    k-th: no copy of a whole column)."""
    total = sum(len(keys) for keys in side_keys)
    step = max(1, total // DRIFT_MEASURED_ROWS)
    whole = np.sort(np.concatenate([keys[::step] for keys in side_keys]))
    picked = rows[:: max(1, len(rows) // DRIFT_MEASURED_ROWS)]
    taken = side_keys[0][np.minimum(picked, len(side_keys[0]) - 1)]
    if len(side_keys) > 1:
        second = picked >= len(side_keys[0])
        taken[second] = side_keys[1][picked[second] - len(side_keys[0])]
    taken.sort()
    if not len(whole) or not len(taken):
        return 0.0
    points = np.concatenate([whole, taken])
    gaps = whole.searchsorted(points, side="right") / len(whole)
    gaps -= taken.searchsorted(points, side="right") / len(taken)
    return float(np.abs(gaps).max())


def _paired_rows(left, right, stitch_columns, column_ranges, null_values, owner, rng, tied):
    """`_merge_groups`' (left rows, right rows, slot) of the split of both sides on the stitch columns;
    the sides' stitch values and groups are freed on return, before the one-sided columns' calibration.
    `tied`: how many of the first stitch columns the split runs on alone and rows pair on first, where
    both sides' values of them are codes (distinct rows found)."""
    left_values = np.column_stack([left.column_values(c) for c in stitch_columns])
    right_values = np.column_stack([right.column_values(c) for c in stitch_columns])
    _place_nulls(
        left_values, right_values, None if null_values is None else [null_values[c] for c in stitch_columns]
    )
    lows, highs, integral = _root_ranges(
        left_values,
        right_values,
        None if column_ranges is None else [column_ranges[c] for c in stitch_columns],
    )
    distinct = DistinctRows.of(left_values), DistinctRows.of(right_values)
    tied_distinct = None
    if tied:
        tied_distinct = (
            distinct
            if tied == left_values.shape[1]
            else (DistinctRows.of(left_values[:, :tied]), DistinctRows.of(right_values[:, :tied]))
        )
        if tied_distinct[0] is None or tied_distinct[1] is None:
            tied, tied_distinct = 0, None
    if tied:
        # Split on the tied columns alone: a final range then holds every row of its tied values,
        # however the other stitch columns differ between the sides, and its rows pair on them.
        left_group, right_group = _split_recursively(
            left_values[:, :tied],
            right_values[:, :tied],
            lows[:tied],
            highs[:tied],
            integral[:tied],
            tied_distinct,
        )
    else:
        left_group, right_group = _split_recursively(
            left_values, right_values, lows, highs, integral, distinct
        )
    return _merge_groups(
        left_group, right_group, left_values, right_values, owner, rng, distinct, tied, tied_distinct
    )


def _order_key(table: Microtable, column: int) -> np.ndarray:
    """Values that order a column's rows: its floats where the table keeps them, else the rank of its
    typed value (nulls first; a category column's categories are sorted values)."""
    if column in table.value_columns:
        return table.column_values(column)
    return pd.factorize(table.typed[column], sort=True)[0].astype(float)


def _calibrate_columns(
    one_sided: Sequence[tuple[Microtable, int, np.ndarray]],
    rng: np.random.Generator,
    threads: Callable[[], int],
) -> Iterator[tuple[int, np.ndarray]]:
    """(column, `_calibrated_rows`) of each (side, column, the side's row per output row), in order,
    as many columns side by side as `threads()` says when their batch starts (their sorts release the
    GIL). Each column's random numbers are drawn in column order before its batch starts, so the rows do
    not depend on the thread count. A batch is computed when the first of its columns is asked for, and
    each column's rows are held only until they are taken: a joined table's one-sided columns are not
    all held as rows at once."""
    start = 0
    while start < len(one_sided):
        batch_size = max(1, threads())
        batch = one_sided[start : start + batch_size]
        start += batch_size
        tasks = [
            (
                _order_key(table, column),
                rows,
                rng.random(len(rows)),
                rng.random(table.num_rows),
                column in table.names,
            )
            for table, column, rows in batch
        ]
        results = map_in_threads(lambda task: _calibrated_rows(*task), tasks, batch_size)
        del tasks
        results.reverse()
        for _, column, _ in batch:
            yield column, results.pop()


def _calibrated_rows(
    values: np.ndarray,
    rows: np.ndarray,
    output_randoms: np.ndarray,
    side_randoms: np.ndarray,
    names: bool = False,
) -> np.ndarray:
    """Per output row, the row of one side whose value it takes in one column of that side (`values`:
    the column's order keys, `rows`: the side's row paired with each output row): the output's rows keep
    their order in the column (ties in random order by `output_randoms`), and its values are the side's
    own, each as often as its share of the side's rows gives (quantiles at the output's row count; ties
    among the side's rows in random order by `side_randoms`). A column of `names` keeps each output
    row's own row while its value's share has room; only the surplus rows move (`dealing`)."""
    n_out, n_right = len(rows), len(values)
    by_value, ranks = ranked_order_with_random_ties(values, side_randoms)
    # the output's keys are some of the side's: their ranks sort as they do
    by_output = order_by_rank_with_random_ties(ranks[rows], output_randoms)
    quantile = ((np.arange(n_out) + 0.5) * (n_right / n_out)).astype(np.int64)
    dealt = by_value[quantile]
    if names:
        dealt = _keeping_own_rows(values, rows[by_output], dealt)
    calibrated = np.empty(n_out, dtype=np.int64)
    calibrated[by_output] = dealt
    return calibrated


def _keeping_own_rows(values: np.ndarray, own: np.ndarray, dealt: np.ndarray) -> np.ndarray:
    """The side's rows `dealt` (ascending in `values`) to the output's ranks, rearranged so that each
    rank keeps its `own` row (same order) while that row's value has room among those dealt; the other
    ranks take the dealt rows of the values that are left, in order."""
    first, quota, match = _runs_and_matches(values[dealt], values[own])
    value, kept = deal_keeping_matches(match, quota)
    moved = np.flatnonzero(~kept)
    # The moved ranks take their value's dealt rows after those its kept ranks stand for.
    moved_value = value[moved]
    kept_per_value = np.bincount(value[kept], minlength=quota.size)
    result = own.copy()
    result[moved] = dealt[first[moved_value] + kept_per_value[moved_value] + _place_in_run(moved_value)]
    return result


def _runs_and_matches(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The runs of equal values in `sorted_keys` (ascending, NaN last): each run's start and length;
    and per key of `keys` (also ascending), the run of its value or -1. NaN equals NaN (nulls)."""
    if sorted_keys.size == 0:
        none = np.zeros(0, dtype=np.int64)
        return none, none, np.full(keys.size, -1, dtype=np.int64)
    same_as_previous = sorted_keys[1:] == sorted_keys[:-1]
    same_as_previous |= np.isnan(sorted_keys[1:]) & np.isnan(sorted_keys[:-1])
    start = np.flatnonzero(np.r_[True, ~same_as_previous])
    length = np.diff(np.r_[start, sorted_keys.size])
    run_keys = sorted_keys[start]
    at = np.minimum(np.searchsorted(run_keys, keys), run_keys.size - 1)
    same = (run_keys[at] == keys) | (np.isnan(run_keys[at]) & np.isnan(keys))
    return start, length, np.where(same, at, -1)


def _place_nulls(
    left_values: np.ndarray, right_values: np.ndarray, null_values: Sequence[float] | None
) -> None:
    """Nulls sort as one value above the column's range (the forest's null mapping), so they stay
    together and never split off low or high real values. In place."""
    if null_values is None:
        both = np.concatenate([left_values, right_values])
        null_values = [null_mapping(both[:, k]) for k in range(both.shape[1])]
    for values in (left_values, right_values):
        for k, null in enumerate(null_values):
            column = values[:, k]
            column[np.isnan(column)] = null


def _root_ranges(
    left_values: np.ndarray, right_values: np.ndarray, column_ranges: Sequence[tuple[float, float]] | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per stitch column: the (low, high) range the recursion starts from (the column's range in the
    forest, or else the snapped range of both sides' values), and whether the column only holds whole
    numbers (then ranges narrower than 1 never split)."""
    both = np.concatenate([left_values, right_values])
    integral = np.all(both == np.floor(both), axis=0)
    if column_ranges is None:
        column_ranges = [
            snap_range(float(both[:, k].min()), float(both[:, k].max())) for k in range(both.shape[1])
        ]
    lows = np.array([low for low, _ in column_ranges], dtype=float)
    highs = lows + np.array([size for _, size in column_ranges], dtype=float)
    return lows, highs, integral


def _split_recursively(
    left_values: np.ndarray,
    right_values: np.ndarray,
    lows: np.ndarray,
    highs: np.ndarray,
    integral: np.ndarray,
    distinct: tuple[DistinctRows | None, DistinctRows | None],
) -> tuple[np.ndarray, np.ndarray]:
    """Assign every left and right row to a final range ("group"). Returns the group id of each left
    and each right row.

    Rows with the same values on every stitch column always go the same way, so where a side's rows
    hold few distinct combinations of values (`distinct`: codes, dates, small counts, most stitches),
    the split runs on those combinations, each counted as many times as it has rows, and its rows take
    its group."""
    left, right = distinct
    left_group, right_group = _split_items(
        left_values if left is None else left.values,
        right_values if right is None else right.values,
        None if left is None else left.counts,
        None if right is None else right.counts,
        lows,
        highs,
        integral,
    )
    return (
        left_group if left is None else left_group.take(left.of_row),
        right_group if right is None else right_group.take(right.of_row),
    )


def _split_items(
    left_values: np.ndarray,
    right_values: np.ndarray,
    left_counts: np.ndarray | None,
    right_counts: np.ndarray | None,
    lows: np.ndarray,
    highs: np.ndarray,
    integral: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """`_split_recursively` over items of each side (rows, or distinct rows that count `*_counts` times),
    splitting all open groups of a level at once. Returns the group id of each left and right item.

    Only items of still-open groups are touched per level: ``left_rows``/``right_rows`` are those items,
    ``left_slot``/``right_slot`` their open group's position in the per-group state arrays."""
    num_columns = left_values.shape[1]
    # Row and group indices fit 32 bits below 2^31 rows: half the bytes in every per-row pass.
    index = np.int32 if max(left_values.size, right_values.size) < 2**31 else np.int64
    left_group = np.zeros(left_values.shape[0], dtype=index)
    right_group = np.zeros(right_values.shape[0], dtype=index)
    left_rows = np.arange(left_values.shape[0], dtype=index)
    right_rows = np.arange(right_values.shape[0], dtype=index)
    left_slot = np.zeros(len(left_rows), dtype=index)
    right_slot = np.zeros(len(right_rows), dtype=index)
    # Per open group: its id, its range on every stitch column, the column to try next, and how many
    # columns may still be tried before giving up on splitting it.
    group_id = np.zeros(1, dtype=index)
    group_low = lows[None, :].copy()
    group_high = highs[None, :].copy()
    next_column = np.zeros(1, dtype=index)
    attempts = np.full(1, num_columns, dtype=np.int64)
    groups_made = 1

    # Column-major copies: a row's value in its group's column is one gather at column * rows + row.
    left_flat, right_flat = left_values.T.ravel(), right_values.T.ravel()
    while len(group_id):
        groups = len(group_id)
        column = next_column
        slots = np.arange(groups)
        low, high = group_low[slots, column], group_high[slots, column]
        middle = (low + high) / 2
        width = high - low
        at_top = high >= highs[column]
        can_split = np.where(integral[column], (width > 1) | ((width >= 1) & at_top), middle > low)

        left_upper = _in_upper_half(left_flat, left_values.shape[0], left_rows, left_slot, column, middle)
        right_upper = _in_upper_half(
            right_flat, right_values.shape[0], right_rows, right_slot, column, middle
        )
        # Each row's group and half as one number: slot * 2 + (1 if in the upper half).
        left_half, right_half = left_slot * 2 + left_upper, right_slot * 2 + right_upper
        left_down, left_up = _half_counts(left_half, groups, left_counts, left_rows)
        right_down, right_up = _half_counts(right_half, groups, right_counts, right_rows)
        n_left, n_right = left_down + left_up, right_down + right_up
        is_open = (attempts > 0) & (n_left > 1) & (n_right > 1)
        balanced = (_ratio(left_down, right_down) >= SPLIT_BALANCE) & (
            _ratio(left_up, right_up) >= SPLIT_BALANCE
        )
        accept = is_open & can_split & balanced
        rotated = (column + 1) % num_columns

        # Rejected: try the next column; if every row of both sides lies in one half, narrow to it.
        reject = is_open & ~accept
        narrow = np.flatnonzero(reject & (left_up == 0) & (right_up == 0))
        group_high[narrow, column[narrow]] = middle[narrow]
        narrow = np.flatnonzero(reject & (left_down == 0) & (right_down == 0))
        group_low[narrow, column[narrow]] = middle[narrow]

        # Accepted: the lower half keeps the group's id, the upper half gets a new one (its rows carry
        # it in their slot: a row's group is written once, when its group closes).
        accepted = np.flatnonzero(accept)
        upper_id = (groups_made + np.arange(len(accepted))).astype(index)
        groups_made += len(accepted)

        # Next level's open groups: every open group (its lower half when split), then the upper halves.
        kept = np.flatnonzero(is_open)
        new_slot = np.full(groups, -1, dtype=index)
        new_slot[kept] = np.arange(len(kept))
        upper_slot = np.full(groups, -1, dtype=index)
        upper_slot[accepted] = len(kept) + np.arange(len(accepted))

        upper_low = group_low[accepted].copy()
        upper_high = group_high[accepted].copy()
        upper_low[np.arange(len(accepted)), column[accepted]] = middle[accepted]
        group_high[accepted, column[accepted]] = middle[accepted]
        closing_id = group_id  # a closed group was not split: its rows end in it
        group_id = np.concatenate([group_id[kept], upper_id])
        group_low = np.concatenate([group_low[kept], upper_low])
        group_high = np.concatenate([group_high[kept], upper_high])
        next_column = np.concatenate([rotated[kept], rotated[accepted]])
        attempts = np.concatenate(
            [np.where(accept, num_columns, attempts - 1)[kept], np.full(len(accepted), num_columns)]
        )

        # Per group and half: the slot its rows take next level (-1: the group is closed).
        next_slot = np.repeat(new_slot, 2)
        next_slot[1::2] = np.where(accept, upper_slot, new_slot)
        left_rows, left_slot = _next_level(
            left_group, left_rows, left_slot, next_slot.take(left_half), closing_id
        )
        right_rows, right_slot = _next_level(
            right_group, right_rows, right_slot, next_slot.take(right_half), closing_id
        )
    return left_group, right_group


def _next_level(group, rows, slot, next_slot, closing_id) -> tuple[np.ndarray, np.ndarray]:
    """The rows still open at the next level and their slots there; the rows whose group closed get
    its id in `group` (in place)."""
    closed = np.flatnonzero(next_slot < 0)
    if closed.size == 0:
        return rows, next_slot
    group[rows.take(closed)] = closing_id.take(slot.take(closed))
    open_rows = next_slot >= 0
    return rows[open_rows], next_slot[open_rows]


def _in_upper_half(flat, rows_in_all, rows, slot, column, middle) -> np.ndarray:
    """Whether each row's value in its group's column lies in the group's upper half."""
    slot = slot.astype(np.intp, copy=False)  # (two gathers by slot: convert the indices once)
    offset = column.astype(np.intp) * rows_in_all
    return flat.take(offset.take(slot) + rows) >= middle.take(slot)


def _half_counts(
    half: np.ndarray, groups: int, counts: np.ndarray | None, items: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows per group in its lower and in its upper half (`half`: slot * 2 + 1 if upper), of `items`
    that are rows or (`counts`) distinct rows counted that many times."""
    if counts is None:
        per_half = np.bincount(half, minlength=2 * groups)
    else:  # sums of whole numbers below 2**53: exact in floats
        per_half = np.bincount(half, weights=counts.take(items), minlength=2 * groups).astype(np.int64)
    return per_half[0::2], per_half[1::2]


def _ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min/max of two counts, 0 when either is empty (an empty half never balances)."""
    smaller, larger = np.minimum(a, b), np.maximum(a, b)
    return np.where(smaller > 0, smaller / np.maximum(larger, 1), 0.0)


def _merge_groups(
    left_group: np.ndarray,
    right_group: np.ndarray,
    left_values: np.ndarray,
    right_values: np.ndarray,
    owner: StitchOwner,
    rng: np.random.Generator,
    distinct: tuple[DistinctRows | None, DistinctRows | None],
    tied: int = 0,
    tied_distinct: tuple[DistinctRows, DistinctRows] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pair the rows of each group: both sides are shuffled, cut or topped up with random repeats to a
    common length, sorted on the stitch columns and zipped, equal stitch values first where both sides'
    distinct rows are known, then rows equal on the first `tied` stitch columns (on all of them, then on
    fewer; `tied_distinct`: both sides' distinct rows of those). Returns the left row, the right row and
    the slot (position within its group) of every output row. `distinct`: each side's distinct rows, if
    found (they sort each group faster)."""
    groups = int(max(left_group.max(), right_group.max())) + 1
    n_left = np.bincount(left_group, minlength=groups)
    n_right = np.bincount(right_group, minlength=groups)
    if owner is StitchOwner.LEFT:
        target = n_left
    elif owner is StitchOwner.RIGHT:
        target = n_right
    else:
        # Round half to even on exact .5, like Python's round().
        target = np.rint((n_left + n_right) / 2).astype(np.int64)
    target = np.where((n_left > 0) & (n_right > 0), target, 0)
    # Rows that pair on tied columns first keep the stitch column order.
    orders = None if tied else ColumnOrders.of(left_group, right_group, left_values, right_values)
    left_rows = _align(left_group, n_left, target, left_values, rng, distinct[0], orders)
    right_rows = _align(right_group, n_right, target, right_values, rng, distinct[1], orders)
    # (distinct rows, how many of the first stitch columns) of each level of keys that rows pair on.
    columns = left_values.shape[1]
    full = distinct[0] is not None and distinct[1] is not None
    levels = [(distinct, columns)] if full else []
    levels += [(distinct if full else tied_distinct, size) for size in range(tied, 0, -1) if size < columns]
    if levels:
        # Each level's keys are made when it is reached: at 10M rows a level's are 160 MB.
        keys = (_common_keys(target, rows, left_rows, right_rows, size, orders) for rows, size in levels)
        right_rows = _matching_equal_values(keys, right_rows)
    starts = np.cumsum(target) - target
    slot = np.arange(int(target.sum())) - np.repeat(starts, target)
    return left_rows, right_rows, slot


def _common_keys(
    target, distinct, left_rows, right_rows, columns, orders: ColumnOrders | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One number per (group, values of the first `columns` stitch columns) for the aligned rows of both
    sides, ascending in the order `_align` lays each side out (group, then values in the group's column
    order: `orders`, for all stitch columns), equal where the values are: each side's distinct rows are
    numbered among the distinct rows of both."""
    both = np.concatenate([distinct[0].values[:, :columns], distinct[1].values[:, :columns]])
    group = np.repeat(np.arange(target.size, dtype=np.int64), target)
    left_distinct = distinct[0].of_row.take(left_rows)
    right_distinct = len(distinct[0].counts) + distinct[1].of_row.take(right_rows)
    if orders is not None:
        numbers = orders.ranks(both)
        size = int(numbers.max()) + 1
        return tuple(
            group * size + orders.row_ranks(numbers, rows, group) for rows in (left_distinct, right_distinct)
        )
    number = lexicographic_numbers(both)
    size = int(number.max()) + 1
    group *= size
    return group + number.take(left_distinct), group + number.take(right_distinct)


def _matching_equal_values(
    keys: Iterator[tuple[np.ndarray, np.ndarray]], right_rows: np.ndarray
) -> np.ndarray:
    """`right_rows` (aligned and sorted as `_align` gives them) rearranged within each group so that
    as many as can pair with left rows of the same stitch values do; of the others, as many as can
    pair with left rows equal on the columns of each further level of keys; the rest pair in order.
    `keys`: the (left, right) `_common_keys` of the aligned rows, level by level: on all stitch columns
    (where both sides' distinct rows are known), then on fewer of the first ones.

    Zipping the sorted sides pairs a group's k-th rows, so where one value has a row more on one side
    than on the other, every later row of the group pairs with the next value: a group of names or
    codes shifts along its whole length."""
    total = right_rows.size
    if total == 0:
        return right_rows
    left_key, right_key = next(keys)
    run_start, capacity, match = _runs_and_matches(left_key, right_key)
    del left_key, right_key
    run, kept = deal_keeping_matches(match, capacity)
    # A run's left positions go to its kept right rows first; the positions left free, in order, go
    # to the other rows.
    place = np.empty(total, dtype=np.int64)
    members = np.flatnonzero(kept)
    place[members] = run_start[run[members]] + _place_in_run(run[members])
    kept_per_run = np.bincount(run[kept], minlength=capacity.size)
    del members, run
    free_run = np.repeat(np.arange(capacity.size), capacity - kept_per_run)
    free = run_start[free_run] + kept_per_run[free_run] + _place_in_run(free_run)
    del free_run
    unplaced = np.flatnonzero(~kept)
    del kept
    for left_key, right_key in keys:
        rows, positions = _equal_key_pairs(left_key[free], right_key[unplaced])
        del left_key, right_key
        place[unplaced[rows]] = free[positions]
        unplaced, free = np.delete(unplaced, rows), np.delete(free, positions)
    place[unplaced] = free
    paired = np.empty_like(right_rows)
    paired[place] = right_rows
    return paired


def _equal_key_pairs(position_keys: np.ndarray, row_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """As many (row, position) pairs of equal keys (both ascending) as there are, each row and position
    in one pair at most, earlier rows and positions first: the indices of the paired rows and of their
    positions."""
    run_start, capacity, match = _runs_and_matches(position_keys, row_keys)
    run, kept = deal_keeping_matches(match, capacity)
    rows = np.flatnonzero(kept)
    return rows, run_start[run[rows]] + _place_in_run(run[rows])


def _place_in_run(runs: np.ndarray) -> np.ndarray:
    """Each item's place among the consecutive items of its run (runs: non-decreasing ids)."""
    place = np.arange(runs.size)
    if runs.size:
        first = np.r_[True, runs[1:] != runs[:-1]]
        place -= np.maximum.accumulate(np.where(first, place, 0))
    return place


def _align(
    group: np.ndarray,
    count: np.ndarray,
    target: np.ndarray,
    values: np.ndarray,
    rng: np.random.Generator,
    distinct: DistinctRows | None,
    orders: ColumnOrders | None = None,
) -> np.ndarray:
    """Rows of one side laid out group after group, ``target[g]`` rows for group g (a random subset, or
    all rows plus random repeats), each group sorted by its stitch values (in its column order:
    `orders`)."""
    # Random order within each group, groups ascending: the fraction never reaches the next group id.
    shuffled = np.argsort(group + rng.random(len(group)))
    starts = np.cumsum(count) - count
    total = int(target.sum())
    slot_group = np.repeat(np.arange(len(target)), target)
    slot = np.arange(total) - np.repeat(np.cumsum(target) - target, target)
    group_count = count[slot_group]
    # Slots past the group's own rows repeat a random row of the group.
    repeat = rng.integers(0, np.maximum(group_count, 1)) if total else np.zeros(0, dtype=np.int64)
    offset = np.where(slot < group_count, slot, repeat)
    rows = shuffled[starts[slot_group] + offset]
    return rows[_group_then_value_order(rows, slot_group, values, distinct, orders)]


def _group_then_value_order(
    rows: np.ndarray,
    slot_group: np.ndarray,
    values: np.ndarray,
    distinct: DistinctRows | None,
    orders: ColumnOrders | None = None,
) -> np.ndarray:
    """The stable order of `rows` by group, then by their stitch values (first stitch column most
    significant, or in each group's column order: `orders`): ties keep the random order the rows come
    in. With the side's distinct rows (numbered in that order), group and distinct row make one integer
    rank to sort."""
    if distinct is not None:
        ranks = slot_group * len(distinct.counts)
        if orders is None:
            ranks += distinct.of_row.take(rows)
        else:
            ranks += orders.row_ranks(orders.ranks(distinct.values), distinct.of_row.take(rows), slot_group)
        return stable_rank_order(ranks)
    if orders is not None:
        return np.lexsort(orders.lexsort_keys(values, rows, slot_group))
    keys = [values[rows, k] for k in range(values.shape[1] - 1, -1, -1)] + [slot_group]
    return np.lexsort(keys)


def _empty_join(
    left: Microtable, right: Microtable, keep_values: Collection[int] | None = None
) -> Microtable:
    none = np.zeros(0, dtype=np.int64)
    return _join(left, right, none, none, take_right=None, keep_values=keep_values)


def _join(
    left: Microtable,
    right: Microtable,
    left_rows: np.ndarray,
    right_rows: np.ndarray,
    *,
    take_right: np.ndarray | None,
    keep_values: Collection[int] | None = None,
    rows_of: Iterator[tuple[int, np.ndarray]] | None = None,
    shared_rows: Mapping[int, np.ndarray] | None = None,
) -> Microtable:
    """Row i of the result is left row ``left_rows[i]`` next to right row ``right_rows[i]``. A column on
    both sides (a stitch column) takes the rows `shared_rows` gives: of both sides laid end to end (left
    rows first) when ``take_right`` is set anywhere, else of the left. Floats are kept for the columns in
    `keep_values` (default: all). `rows_of`: (column, rows) for the columns only one side holds, in the
    order of the result's columns: the rows of that side its values come from instead."""
    calibrated = _taken_in_order(rows_of)
    columns = list(left.columns) + [c for c in right.columns if c not in left.columns]
    value_columns = [c for c in columns if keep_values is None or c in keep_values]
    values = np.empty((len(left_rows), len(value_columns)))
    typed: dict[int, pd.Series] = {}
    for column in columns:
        in_left, in_right = column in left.columns, column in right.columns
        keep = column in value_columns
        target = values[:, value_columns.index(column)] if keep else None
        if in_left and in_right and take_right is not None and take_right.any():
            indices = shared_rows[column]  # rows of both sides laid end to end
            if keep:
                target[:] = np.concatenate([left.column_values(column), right.column_values(column)])[indices]
            combined = _concat(left.typed[column], right.typed[column])
            typed[column] = combined.take(indices).reset_index(drop=True)
        elif in_left:
            if in_right:
                rows = left_rows if shared_rows is None else shared_rows[column]
            else:
                rows = calibrated(column, left_rows)
            if keep:
                target[:] = left.column_values(column)[rows]
            typed[column] = left.typed[column].take(rows).reset_index(drop=True)
        else:
            rows = calibrated(column, right_rows)
            if keep:
                target[:] = right.column_values(column)[rows]
            typed[column] = right.typed[column].take(rows).reset_index(drop=True)
    names = left.names | (right.names - set(left.columns))
    return Microtable(tuple(columns), values, typed, tuple(value_columns), names)


def _concat(left: pd.Series, right: pd.Series) -> pd.Series:
    """Both sides' typed values of one column, left rows first. Category columns (the codecs' compact
    form) take the union of both sides' categories, sorted as each side's are: a plain concatenation of
    different categories would hold every row as an object. (pandas' union_categoricals would also
    re-type string categories, which a later stitch's other side does not share.)"""
    if isinstance(left.dtype, pd.CategoricalDtype) and left.dtype != right.dtype:
        categories = pd.Index(sorted(set(left.cat.categories) | set(right.cat.categories)), dtype=object)
        left, right = left.cat.set_categories(categories), right.cat.set_categories(categories)
    return pd.concat([left, right], ignore_index=True)


def _taken_in_order(
    rows_of: Iterator[tuple[int, np.ndarray]] | None,
) -> Callable[[int, np.ndarray], np.ndarray]:
    """`_join`'s look-up of a one-sided column's rows: the next (column, rows) of `rows_of`, which holds
    them in the order of the result's columns, or without `rows_of` the paired rows. A batch of
    `rows_of` is only computed once its first column is asked for."""

    def rows_for(column: int, paired: np.ndarray) -> np.ndarray:
        if rows_of is None:
            return paired
        upcoming, rows = next(rows_of)
        if upcoming != column:
            raise AssertionError(f"calibrated rows of column {upcoming} came for column {column}")
        return rows

    return rows_for
