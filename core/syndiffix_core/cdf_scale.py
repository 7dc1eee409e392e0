"""Each column's anonymized cumulative-count scale, on which the multi-column trees are built.

Halving a column's raw range resolves its rows only where they spread over the range: a column spanning
orders of magnitude (GDP from 4.5e7 to 1.2e13) keeps nearly all its rows in the lowest cell of every
multi-column tree for many levels, and a spike of one value (a column that is 0 in 82 % of rows) shares
its cells with the few other values until the tree is deep; by then the other columns' splits have used
up the rows, and the links between the columns are lost. On the cumulative-count scale a value's place
is the share of the column's rows below it, so a halving cuts the rows about in half whatever the shape.

The shares are read from the column's anonymized 1-dim harvest (its buckets and their noisy counts):
a range bucket's rows are spread evenly over its range, a point bucket's rows sit at its value (a
value there takes the middle of the point's share), nulls are the bucket at the column's null mapping.
A value's position blends its share with its place on the column's pushed-down 1-dim range
(`LINEAR_SHARE` of each): shares alone would give a column's tails as little room as their rows, and
the trees would resolve a tail's values (and a regression's largest errors) more coarsely than on the
raw scale; the raw part also keeps the scale strictly increasing, so values the 1-dim harvest leaves
out (low-count gaps, outliers) stay apart and in order.

The mapping keeps the values' order and is itself read from anonymized counts only: the multi-column
trees over the mapped values are anonymized exactly as over the raw ones, and microdata deals each
column's own 1-dim buckets to a cluster's rows by rank (`MicrodataBuilder`), which the mapping keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# How much of a position is the value's place on the column's range rather than its share of the rows.
LINEAR_SHARE = 0.5
# Bisection steps of `to_values`: halving a float64 interval this often reaches adjacent doubles.
_BISECTION_STEPS = 80


@dataclass(frozen=True)
class CdfScale:
    """One column's scale: positions in (0, 1), strictly increasing in the value (nulls mapped)."""

    breaks: np.ndarray  # range bucket ends, sorted: where the range buckets' spread mass changes slope
    spread_mass: np.ndarray  # the range buckets' rows at or below each break
    points: np.ndarray  # point bucket values, sorted
    point_mass: np.ndarray  # rows of the point buckets below each point (one more entry: all of them)
    total: float  # rows in all buckets
    low: float  # the column's pushed-down 1-dim range, for the linear share
    size: float

    @classmethod
    def from_buckets(
        cls, low: np.ndarray, high: np.ndarray, count: np.ndarray, column_range: tuple[float, float]
    ):
        """The scale of a column from its 1-dim buckets (ranges [low, high), points where low == high)
        and their counts, and its pushed-down range (low, size)."""
        low, high, count = (np.asarray(a, dtype=np.float64) for a in (low, high, count))
        point = low == high
        order = np.argsort(low[point], kind="stable")
        points, point_counts = low[point][order], count[point][order]
        # The spread mass is piecewise linear: each range bucket adds slope count / width over its range.
        ends = np.concatenate([low[~point], high[~point]])
        slope = count[~point] / (high[~point] - low[~point])
        slope_change = np.concatenate([slope, -slope])
        order = np.argsort(ends, kind="stable")
        breaks, slope_after = ends[order], np.cumsum(slope_change[order])
        spread_mass = np.concatenate([[0.0], np.cumsum(slope_after[:-1] * np.diff(breaks))])
        range_low, range_size = column_range
        return cls(
            breaks,
            spread_mass,
            points,
            np.concatenate([[0.0], np.cumsum(point_counts)]),
            float(count.sum()),
            float(range_low),
            float(range_size),
        )

    def shares(self, values: np.ndarray) -> np.ndarray:
        """Each value's cumulative share: the buckets' rows below it over all their rows, in [0, 1]
        (a point bucket's value counts half its rows; 0 everywhere for a column without buckets)."""
        values = np.asarray(values, dtype=np.float64)
        if self.total <= 0:
            return np.zeros(values.shape)
        below = np.interp(values, self.breaks, self.spread_mass) if self.breaks.size else 0.0
        first = np.searchsorted(self.points, values, side="left")
        after = np.searchsorted(self.points, values, side="right")
        below = below + (self.point_mass[first] + self.point_mass[after]) / 2
        return np.minimum(below / self.total, 1.0)

    def positions(self, values: np.ndarray) -> np.ndarray:
        """Each value's position on the scale, in (0, 1): its share blended with its place on the
        column's range (`LINEAR_SHARE`)."""
        values = np.asarray(values, dtype=np.float64)
        if self.total <= 0:
            return self._linear(values)
        return (1.0 - LINEAR_SHARE) * self.shares(values) + LINEAR_SHARE * self._linear(values)

    def to_values(self, positions: np.ndarray) -> np.ndarray:
        """The value at each position (the inverse of `positions`, to float64 resolution)."""
        positions = np.asarray(positions, dtype=np.float64)
        if self.total <= 0:
            return self._linear_inverse(positions)
        # The share lies in [0, 1]: the linear part alone brackets the value.
        low = self._linear_inverse((positions - (1.0 - LINEAR_SHARE)) / LINEAR_SHARE)
        high = self._linear_inverse(positions / LINEAR_SHARE)
        for _ in range(_BISECTION_STEPS):
            middle = low + (high - low) / 2
            above = self.positions(middle) >= positions
            high = np.where(above, middle, high)
            low = np.where(above, low, middle)
        # A point's share is a jump of the scale: a position inside it is the point's value exactly.
        if self.points.size:
            nearest = self.points[np.minimum(np.searchsorted(self.points, low), self.points.size - 1)]
            high = np.where((nearest >= low) & (nearest <= high), nearest, high)
        return high

    def _linear(self, values: np.ndarray) -> np.ndarray:
        """A smooth, strictly increasing map of the reals onto (0, 1): the column's 1-dim range onto
        [1/4, 3/4], steepest at its middle, and anything beyond it squeezed towards 0 or 1."""
        centred = 2.0 * (values - self.low) / self.size - 1.0
        return 0.5 + 0.5 * centred / (1.0 + np.abs(centred))

    def _linear_inverse(self, shares: np.ndarray) -> np.ndarray:
        unit = 2.0 * np.clip(shares, 2.0**-40, 1.0 - 2.0**-40) - 1.0
        centred = unit / (1.0 - np.abs(unit))
        return self.low + (centred + 1.0) * self.size / 2.0
