"""The order a stitch zips the rows of each final range in: the stitch column they spread over most first.

A stitch splits both sides on the stitch columns in turn while the halves stay balanced between the sides,
then sorts each final range's rows on the stitch columns and zips the sides. Sorted on the first stitch
column first, the rows of a range pair on that column alone wherever the range still spans a wide part of
another one. On robustbase ambientNOxCH (366 days of NOx readings at 13 sites) the last stitch, on
(date, ef, lu), split on the date down to a few days per range, which the sides' balance allowed, but
rarely on ef, whose link to the date differs between the two sides' synthetic rows; zipped in date
order, the paired ef values correlated 0.34 across the sides, and the site stitched on ef kept 0.30-0.46
of its 0.90 correlation with it.

So each range sorts its rows on the stitch columns in the order of how much of their distribution the
range's rows span (the share of the column's values between the range's lowest and highest value, on a
sample of both sides' values), widest first. A code is the exception where the range holds many rows
of each of its values (at least ROWS_PER_CODE per value between its lowest and highest; a code: a column
whose sampled values repeat that often on average): it comes first, in the stitch column order, so that
rows of equal codes pair, and the columns sorted after it still order the many rows of each value. On
bench_wide's 1M rows, sorting an integer column of a few values after a wider measurement paired its
values at 0.986 instead of 1.000 and weakened its links to the other side's columns; in a small table's
range of a few rows, one or two per value, the code orders little and the measurement is what pairs.
Only the two sides' synthetic rows are read: no privacy is spent.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A column's distribution is read on at most this many of the two sides' values (every k-th).
DISTRIBUTION_SAMPLE = 1 << 16
# A stitch column whose sampled values repeat at least this many times on average is a code, and a code
# comes first in a range that holds at least this many rows per value it spans.
ROWS_PER_CODE = 20


@dataclass(frozen=True)
class ColumnOrders:
    """Per final range, the stitch columns (positions) most significant first: `orders[of_group[g]]`."""

    orders: np.ndarray  # (distinct orders, stitch columns)
    of_group: np.ndarray  # (groups,)

    @classmethod
    def of(
        cls,
        left_group: np.ndarray,
        right_group: np.ndarray,
        left_values: np.ndarray,
        right_values: np.ndarray,
    ) -> ColumnOrders | None:
        """The ranges' orders (`left_group`, `right_group`: each row's range), or None where every range
        keeps the stitch columns' order."""
        columns = left_values.shape[1]
        if columns < 2:
            return None
        groups = int(max(left_group.max(), right_group.max())) + 1
        rows = (np.bincount(left_group, minlength=groups) + np.bincount(right_group, minlength=groups)) / 2
        samples = [_sample(left_values[:, column], right_values[:, column]) for column in range(columns)]
        low, high = _extremes(left_group, right_group, left_values, right_values, groups)
        # Codes of many rows per value first, in stitch column order (keys below -1), then the others
        # widest first; the sort is stable, so columns spread alike keep the stitch column order.
        key = np.empty((groups, columns))
        for column, sample in enumerate(samples):
            below, above = sample.searchsorted(low[:, column]), sample.searchsorted(high[:, column])
            key[:, column] = -(above - below) / sample.size
            values = sample[np.r_[True, sample[1:] != sample[:-1]]]  # (sorted: its distinct values)
            if len(values) * ROWS_PER_CODE <= sample.size:
                spanned = values.searchsorted(high[:, column], "right") - values.searchsorted(low[:, column])
                many = rows >= ROWS_PER_CODE * np.maximum(spanned, 1)
                key[many, column] = column - columns - 1.0
        orders = np.argsort(key, axis=1, kind="stable")
        code = orders @ (columns ** np.arange(columns - 1, -1, -1))
        distinct, first, of_group = np.unique(code, return_index=True, return_inverse=True)
        if distinct.size == 1 and (orders[0] == np.arange(columns)).all():
            return None
        return cls(orders[first], of_group.reshape(-1))

    def lexsort_keys(self, values: np.ndarray, rows: np.ndarray, slot_group: np.ndarray) -> list[np.ndarray]:
        """`np.lexsort` keys that order `rows` (of `values`) by group (`slot_group`), then by each
        group's stitch columns in its order."""
        row_order = self.of_group[slot_group]
        columns = values.shape[1]
        keys = [values[rows, self.orders[row_order, j]] for j in range(columns - 1, -1, -1)]
        return [*keys, slot_group]

    def ranks(self, distinct_values: np.ndarray) -> np.ndarray:
        """(orders, rows): each row of `distinct_values` numbered in ascending order of its values taken
        in each order's column order; equal rows share a number."""
        return np.stack([lexicographic_numbers(distinct_values[:, order]) for order in self.orders])

    def row_ranks(self, ranks: np.ndarray, distinct_rows: np.ndarray, slot_group: np.ndarray) -> np.ndarray:
        """Per row (its distinct row and group), its number under its group's order (`ranks`)."""
        return ranks[self.of_group[slot_group], distinct_rows]


def lexicographic_numbers(rows: np.ndarray) -> np.ndarray:
    """Each row of a 2-dim array numbered 0, 1, ... in ascending order of its values (the first column
    most significant); equal rows share a number."""
    sorted_rows = np.lexsort(rows.T[::-1])
    new = np.r_[True, (np.diff(rows[sorted_rows], axis=0) != 0).any(axis=1)]
    numbers = np.empty(len(rows), dtype=np.int64)
    numbers[sorted_rows] = np.cumsum(new) - 1
    return numbers


def _extremes(left_group, right_group, left_values, right_values, groups) -> tuple[np.ndarray, np.ndarray]:
    """(groups, columns) each: every group's lowest and highest value of each column over both sides'
    rows (+inf and -inf for a group without rows)."""
    columns = left_values.shape[1]
    low, high = np.full((groups, columns), np.inf), np.full((groups, columns), -np.inf)
    for group, values in ((left_group, left_values), (right_group, right_values)):
        order, starts, present = _by_group(group, groups)
        for column in range(columns):
            in_order = values[order, column]
            low[present, column] = np.minimum(low[present, column], np.minimum.reduceat(in_order, starts))
            high[present, column] = np.maximum(high[present, column], np.maximum.reduceat(in_order, starts))
    return low, high


def _by_group(group: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The rows ordered by group, where each group that holds rows starts among them, and those groups."""
    order = np.argsort(group, kind="stable")
    count = np.bincount(group, minlength=groups)
    present = np.flatnonzero(count)
    starts = (np.cumsum(count) - count)[present]
    return order, starts, present


def _sample(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Every k-th of both sides' values, at most about DISTRIBUTION_SAMPLE, sorted."""
    step = max(1, (len(left) + len(right)) // DISTRIBUTION_SAMPLE)
    return np.sort(np.concatenate([left[::step], right[::step]]))
