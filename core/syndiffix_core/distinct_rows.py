"""A table of numbers as its distinct rows, each counted as many times as it occurs.

A stitch splits and sorts both sides' rows on the stitch columns (stitching.py), and a stitch column is
most often a code, a date or a small count: ten million rows then hold a few hundred thousand distinct
combinations of values at most, and work that depends only on a row's values can be done once per
combination. Refinement counts the exact values it drew per column the same way (harvest.py). Finding
them takes a few passes over the rows, no sort, when every column holds whole numbers on a grid of few
points (a common step from the smallest: category codes, dates in seconds, counts, booleans), and a sort
of the rows' grid codes when the rows are few for their grid; other columns (measurements, times to the
second) are left to the rows themselves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A column is coded by its values' steps from its smallest value when they take at most this many steps.
MAX_COLUMN_STEPS = 1 << 20
# The combinations are counted in a table of every combination of the columns' codes, at most this large
# (32 MiB of counts).
MAX_COMBINATIONS = 1 << 22
# ... when there are no more than this many combinations per row; fewer rows are sorted instead (a
# 5,000-row stitch of Lahman Batting spent 5 % of its synthesis zeroing and scanning a 4M-entry table).
DENSE_COMBINATIONS_PER_ROW = 16


@dataclass(frozen=True)
class DistinctRows:
    """``values[i]`` is a distinct row, ``counts[i]`` how many rows hold it, ``of_row[r]`` row r's
    distinct row. Distinct rows come in ascending order, the first column most significant."""

    values: np.ndarray
    counts: np.ndarray
    of_row: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> DistinctRows | None:
        """The distinct rows of a 2-dim float array, or None where a column's values are not whole
        numbers within MAX_COLUMN_STEPS steps or the columns have over MAX_COMBINATIONS combinations
        (no NaN)."""
        grids = []
        combinations = 1
        for column in values.T:
            grid = _Grid.of(column)
            if grid is None or combinations * grid.size > MAX_COMBINATIONS:
                return None
            grids.append(grid)
            combinations *= grid.size
        key = grids[0].codes
        for grid in grids[1:]:
            key *= grid.size
            key += grid.codes
        if combinations > DENSE_COMBINATIONS_PER_ROW * key.size:
            # Few rows over many possible combinations: sorting the rows beats a pass over the table.
            present, of_row, counts = np.unique(key, return_inverse=True, return_counts=True)
        else:
            counts = np.bincount(key, minlength=combinations)
            present = np.flatnonzero(counts)
            number = np.zeros(combinations, dtype=np.intp)
            number[present] = np.arange(len(present))
            of_row = number.take(key)
            counts = counts[present]
            del number
        del key
        columns = []
        for grid in reversed(grids):
            present, code = np.divmod(present, grid.size)
            columns.append(grid.value(code))
        return cls(np.column_stack(columns[::-1]), counts, of_row)


def whole_number_steps(values: np.ndarray) -> tuple[int, int, int, np.ndarray] | None:
    """(low, high, step, steps) of float values that are all whole numbers within int64: each value is
    ``low + step * steps[i]`` with `step` the largest whole number dividing every distance from `low`
    (a date column's seconds are a day apart); None for other values (fractions, NaN, inf) or none."""
    with np.errstate(invalid="ignore"):  # NaN, inf and numbers beyond int64 come out unequal
        whole = values.astype(np.int64)
    if len(whole) == 0 or not np.equal(whole, values).all():
        return None
    low, high = int(whole.min()), int(whole.max())
    if high - low >= 1 << 62:
        return None
    whole -= low
    step = int(np.gcd.reduce(whole)) or 1
    if step > 1:
        whole //= step
    return low, high, step, whole


@dataclass(frozen=True)
class _Grid:
    """A column of whole numbers as ``low + step * code`` with codes below `size`."""

    low: int
    step: int
    size: int
    codes: np.ndarray  # int64, one per row

    @classmethod
    def of(cls, column: np.ndarray) -> _Grid | None:
        steps = whole_number_steps(column)
        if steps is None:
            return None
        low, high, step, codes = steps
        size = (high - low) // step + 1
        return None if size > MAX_COLUMN_STEPS else cls(low, step, size, codes)

    def value(self, code: np.ndarray) -> np.ndarray:
        """The column's value of each code, as the float it was (whole numbers: exact)."""
        return (self.low + self.step * code.astype(np.int64)).astype(np.float64)
