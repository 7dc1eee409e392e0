"""How strongly columns depend on each other, and how much information each holds (1-dim entropy).

Both are measured on a sample of the rows (``sample_size``), like the sampling forest of SynDiffix 1.0.8,
whose counts are noiseless: the measure only steers which columns are synthesized together, and every
value it is applied to is still anonymized by the cluster forests. The sample is the rows with the
smallest content hashes: it depends on the rows' values only, not on their order or the salt, so a
table gets the same clusters under every salt (as 1.0.8, whose sample and solver use a fixed seed).

The dependence of columns x and y walks the 2-dim space in lock-step with the 1-dim trees of x and y:
every 1-dim node holding at least ``RANGE_THRESHOLD`` rows that is not a single value is halved, and at
every visited pair of 1-dim nodes (X, Y) the joint count is compared with the count independence
predicts, ``expected = |X|·|Y| / N``: ``score = |expected − actual| / max(expected, actual)``.
Dependence is the expected-weighted mean score over all visited pairs below the root (0 = independent,
1 = every row in a different cell than independence predicts). When one node is a single value only the
other dimension descends; pairs with a node under the threshold are not visited.

A 2-dim tree over the sample would hold exactly these joint counts (its node covering X x Y counts the
sample rows inside), so they are computed directly from the rows, one numpy pass per tree level.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from syndiffix_core.forest import snap_range
from syndiffix_core.noise import hash_floats, mix64

# 1-dim nodes with fewer rows are not compared (the range threshold of the bucketization defaults).
RANGE_THRESHOLD = 15
# Leaves of the entropy trees: nodes with fewer rows than this are not split further (the low-count
# threshold of the noiseless sampling forest: low threshold 2 plus a 0.5 gap, rounded up).
LOW_COUNT_THRESHOLD = 3
# Halving a range of doubles more often than this cannot separate values any more.
MAX_DEPTH = 60
# Conditional dependence: a given column with at most this many distinct values in the sample is split
# into one stratum per value, any other into this many equal-count strata of its sorted values.
MAX_VALUE_STRATA = 8
RANK_STRATA = 5
# Strata too small for the measure to descend twice are left out.
MIN_STRATUM_ROWS = 2 * RANGE_THRESHOLD
# Shuffles within the strata whose mean dependence is the noise floor subtracted (fixed seed: the plan
# stays a function of the table).
NULL_SHUFFLES = 3


@dataclass(frozen=True)
class DependenceResult:
    """The measured dependence matrix (d x d, symmetric, diagonal 1), 1-dim entropies (bits) and the
    sample both were measured on (nulls mapped), which `conditional_excess` reads too."""

    dependence: np.ndarray
    entropies: np.ndarray
    sample: np.ndarray


def measure_dependence(values: np.ndarray, *, sample_size: int) -> DependenceResult:
    """Dependence between every pair of columns of ``values`` (rows x columns, floats, NaN = null) and
    the entropy of every column, measured on at most ``sample_size`` rows (``content_sample``)."""
    values = np.asarray(values, dtype=float)
    num_rows, num_columns = values.shape
    null_values = planning_null_values(values)
    sample = values
    if sample_size > 0 and num_rows > sample_size:
        sample = values[content_sample(values, sample_size, null_values)]
    sample = map_nulls(sample, null_values)

    walk_levels = [_Levels.build(sample[:, i], RANGE_THRESHOLD) for i in range(num_columns)]
    entropies = np.array([_entropy(sample[:, i]) for i in range(num_columns)])
    dependence = np.eye(num_columns)
    for x in range(num_columns):
        for y in range(x + 1, num_columns):
            dependence[x, y] = dependence[y, x] = _pair_dependence(walk_levels[x], walk_levels[y])
    return DependenceResult(dependence, entropies, sample)


def conditional_excess(sample: np.ndarray, x: int, y: int, given: int) -> float:
    """How much x and y depend on each other within the strata of column ``given``, beyond chance.

    The sample's rows are split by ``given`` (one stratum per value when it has few, else equal-count
    strata of its sorted values); the dependence of x and y is measured in every stratum and averaged,
    weighted by rows. The measure reads dependence even into independent columns on a few hundred rows,
    so the same average with y shuffled within each stratum (mean of `NULL_SHUFFLES` fixed-seed shuffles)
    is subtracted: about 0 when ``given`` explains all of the link between x and y (or there is none),
    clearly positive when x and y share something ``given`` does not carry."""
    return ConditionalDependence(sample).excess(x, y, given)


class ConditionalDependence:
    """`conditional_excess` over one sample, for many (x, y, given). Calls that share the given column
    share its strata and their shuffles, and calls that share a column and the given column share that
    column's 1-dim trees per stratum; the clustering asks for the same triple more than once while it
    judges near ties. So all of them are kept (the values are those of separate calls)."""

    def __init__(self, sample: np.ndarray):
        self.sample = sample
        self._strata: dict[int, tuple[list[np.ndarray], np.ndarray, list[list[np.ndarray]]]] = {}
        self._levels: dict[tuple[int, int], list[_Levels]] = {}
        self._excess: dict[tuple[int, int, int], float] = {}

    def excess(self, x: int, y: int, given: int) -> float:
        key = (x, y, given)
        if key not in self._excess:
            self._excess[key] = self._measure(x, y, given)
        return self._excess[key]

    def _measure(self, x: int, y: int, given: int) -> float:
        strata, rows, shuffle_sets = self._strata_of(given)
        if not strata:
            return 0.0
        x_levels, y_levels = self._levels_of(given, x), self._levels_of(given, y)

        def mean_dependence(shuffles: list[np.ndarray] | None) -> float:
            scores = [
                _pair_dependence(levels, other if shuffles is None else other.reordered(shuffles[index]))
                for index, (levels, other) in enumerate(zip(x_levels, y_levels, strict=True))
            ]
            return float(np.dot(scores, rows) / rows.sum())

        chance = np.mean([mean_dependence(shuffles) for shuffles in shuffle_sets])
        return mean_dependence(None) - float(chance)

    def _strata_of(self, given: int) -> tuple[list[np.ndarray], np.ndarray, list[list[np.ndarray]]]:
        """The strata of ``given``, their row counts and the `NULL_SHUFFLES` fixed-seed shuffles."""
        if given not in self._strata:
            strata = _strata(self.sample[:, given])
            rows = np.array([len(stratum) for stratum in strata], dtype=float)
            rng = np.random.default_rng(0)
            shuffle_sets = [
                [rng.permutation(len(stratum)) for stratum in strata] for _ in range(NULL_SHUFFLES)
            ]
            self._strata[given] = (strata, rows, shuffle_sets)
        return self._strata[given]

    def _levels_of(self, given: int, column: int) -> list[_Levels]:
        key = (given, column)
        if key not in self._levels:
            strata = self._strata_of(given)[0]
            self._levels[key] = [
                _Levels.build(self.sample[stratum, column], RANGE_THRESHOLD) for stratum in strata
            ]
        return self._levels[key]


def _strata(column: np.ndarray) -> list[np.ndarray]:
    """Row indices per stratum of a column (see `conditional_excess`), without the small ones."""
    distinct, codes = np.unique(column, return_inverse=True)
    if len(distinct) > MAX_VALUE_STRATA:
        # Equal-count strata of the sorted values; equal values stay in one stratum.
        ranks = np.searchsorted(np.sort(column), column, side="left")
        codes = ranks * RANK_STRATA // len(column)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    return [stratum for stratum in np.split(order, bounds) if len(stratum) >= MIN_STRATUM_ROWS]


def content_sample(
    values: np.ndarray, sample_size: int, null_values: Sequence[float | None] | None = None
) -> np.ndarray:
    """Sorted indices of the ``sample_size`` rows with the smallest hashes of their values: a fixed
    pseudo-random sample without replacement, independent of the row order and of the salt (equal
    rows have equal hashes, and which of them is taken does not change the sample's values). With
    ``null_values`` (`planning_null_values`) nulls hash as their mapped value, one column at a time,
    so the table is never copied whole."""
    row_hash = np.zeros(values.shape[0], dtype=np.uint64)
    for column in range(values.shape[1]):
        column_values = values[:, column]
        if null_values is not None and null_values[column] is not None:
            column_values = np.where(np.isnan(column_values), null_values[column], column_values)
        row_hash ^= hash_floats(column_values, column)
    return np.sort(np.argsort(mix64(row_hash), kind="stable")[:sample_size])


def map_nulls(values: np.ndarray, null_values: Sequence[float | None] | None = None) -> np.ndarray:
    """``values`` (rows x columns, NaN = null) with every null as its column's `planning_null_value`
    (of ``values``, unless ``null_values`` gives them): a new array when there are nulls, else
    ``values`` itself."""
    if null_values is None:
        null_values = planning_null_values(values)
    mapped = values
    for j, null in enumerate(null_values):
        if null is None:
            continue
        if mapped is values:
            mapped = values.copy()
        column = mapped[:, j]
        column[np.isnan(column)] = null
    return mapped


def planning_null_values(values: np.ndarray) -> list[float | None]:
    """Per column of ``values`` (NaN = null): its `planning_null_value`, None when it has no nulls."""
    return [
        planning_null_value(values[:, j]) if np.isnan(values[:, j]).any() else None
        for j in range(values.shape[1])
    ]


def planning_null_value(column: np.ndarray) -> float:
    """Where the plan's measures place a column's nulls: beyond twice its extreme (2*max if max > 0,
    else 2*min if min < 0, else 1). Not the forest's placement: the plan's sample is drawn by hashing
    these values and its 1-dim trees are rooted on them, and the cluster plans of the fidelity
    harness's tables were judged with this placement (docs/clustering.md)."""
    finite = column[~np.isnan(column)]
    if finite.size == 0:
        return 1.0
    lo, hi = float(finite.min()), float(finite.max())
    if hi > 0:
        return 2.0 * hi
    if lo < 0:
        return 2.0 * lo
    return 1.0


class _Levels:
    """The nodes of one column's 1-dim tree, level by level. A node that does not split is carried to the
    next level unchanged (its rows never change, so it never will). Only nodes holding at least the
    range threshold are kept per level, numbered densely: ``node_of_row`` (-1 for rows in smaller
    nodes), ``count`` and ``carried`` (the node was already there, unsplit, one level up)."""

    def __init__(
        self,
        values: np.ndarray,
        node_of_row: list[np.ndarray],
        count: list[np.ndarray],
        carried: list[np.ndarray],
    ):
        self.values = values
        self.node_of_row = node_of_row
        self.count = count
        self.carried = carried

    @property
    def depth(self) -> int:
        return len(self.count) - 1

    @classmethod
    def build(cls, column: np.ndarray, split_threshold: int) -> _Levels:
        order = np.argsort(column, kind="stable")
        ordered = column[order]
        node_of_row, count, carried = [], [], []
        for starts, ends, was_carried in _tree_levels(ordered, split_threshold):
            counts = ends - starts
            kept = counts >= RANGE_THRESHOLD
            dense = np.where(kept, np.cumsum(kept) - 1, -1)
            rows = np.empty(len(ordered), dtype=np.int64)
            rows[order] = np.repeat(dense, counts)
            node_of_row.append(rows)
            count.append(counts[kept].astype(float))
            carried.append(was_carried[kept])
        return cls(column, node_of_row, count, carried)

    def reordered(self, order: np.ndarray) -> _Levels:
        """The same tree over the rows taken in ``order`` (a shuffle keeps every node's rows and count)."""
        return _Levels(
            self.values[order], [rows[order] for rows in self.node_of_row], self.count, self.carried
        )


def _tree_levels(ordered: np.ndarray, split_threshold: int):
    """Yield (starts, ends, carried) of the nodes of every level of the 1-dim tree over the sorted values:
    nodes holding at least ``split_threshold`` rows and more than one distinct value are halved."""
    num_rows = len(ordered)
    lo, size = _push_down_root(ordered, *snap_range(float(ordered[0]), float(ordered[-1])))
    starts = np.zeros(1, dtype=np.int64)
    ends = np.full(1, num_rows, dtype=np.int64)
    node_low, node_size = np.array([lo]), np.array([size])
    carried = np.zeros(1, dtype=bool)
    yield starts, ends, carried
    for _ in range(MAX_DEPTH):
        single = ordered[starts] == ordered[ends - 1]
        middle = node_low + node_size / 2
        splits = (ends - starts >= split_threshold) & ~single & (middle > node_low)
        if not splits.any():
            return
        cut = np.where(splits, np.clip(np.searchsorted(ordered, middle), starts, ends), ends)
        present = np.stack([cut > starts, (ends > cut) & splits], axis=1)
        child_size = np.where(splits, node_size / 2, node_size)
        starts = np.stack([starts, cut], axis=1)[present]
        ends = np.stack([cut, ends], axis=1)[present]
        node_low = np.stack([node_low, middle], axis=1)[present]
        node_size = np.stack([child_size, child_size], axis=1)[present]
        carried = np.stack([~splits, ~splits], axis=1)[present]
        yield starts, ends, carried


def _push_down_root(ordered: np.ndarray, lo: float, size: float) -> tuple[float, float]:
    """Narrow the root while one half is low-count and the other is not (anonymizes min and max; the
    rows of the dropped half stay in the edge node of the narrower range)."""
    num_rows = len(ordered)
    below = 0
    above = num_rows
    while size > 0:
        middle = lo + size / 2
        if middle <= lo:
            break
        cut = int(np.searchsorted(ordered, middle))
        lower, upper = cut - below, above - cut
        lower_low, upper_low = lower < LOW_COUNT_THRESHOLD, upper < LOW_COUNT_THRESHOLD
        if lower_low == upper_low:
            break
        if lower_low:
            lo, below = middle, cut
        else:
            above = cut
        size /= 2
    return lo, size


def _entropy(column: np.ndarray) -> float:
    """Entropy (bits) of the leaf counts of the column's 1-dim tree."""
    if len(column) == 0:
        return 0.0
    ordered = np.sort(column)
    for starts, ends, _ in _tree_levels(ordered, LOW_COUNT_THRESHOLD):
        leaves = ends - starts
    shares = leaves / len(column)
    return float(-(shares * np.log2(shares)).sum())


def _pair_dependence(x: _Levels, y: _Levels) -> float:
    """Expected-weighted mean score over the pairs of 1-dim nodes visited in lock-step (see module doc).

    At each level the visited pairs are all pairs of nodes over the threshold, except pairs of two nodes
    that were single values one level up (their walk ended there), so one dense table per level holds
    them all."""
    num_rows = len(x.node_of_row[0])
    if num_rows < RANGE_THRESHOLD:
        return 0.0
    weighted_score = total_expected = 0.0
    # Whether the row's 2-dim node one level up was split (the root always is, unless it is one point).
    parent_split = np.full(num_rows, _splits(np.zeros(num_rows, dtype=np.int64), x.values, y.values)[0])
    for level in range(1, max(x.depth, y.depth) + 1):
        lx, ly = min(level, x.depth), min(level, y.depth)
        count_x, count_y = x.count[lx], y.count[ly]
        if len(count_x) == 0 or len(count_y) == 0:
            break
        # Past a column's last level all its nodes are single values carried down.
        carried_x = x.carried[lx] if level <= x.depth else np.ones(len(count_x), dtype=bool)
        carried_y = y.carried[ly] if level <= y.depth else np.ones(len(count_y), dtype=bool)
        visited = ~(carried_x[:, None] & carried_y[None, :])
        if not visited.any():
            break
        width = len(count_y) + 1
        cell = np.where(x.node_of_row[lx] < 0, len(count_x), x.node_of_row[lx]) * width + np.where(
            y.node_of_row[ly] < 0, len(count_y), y.node_of_row[ly]
        )
        cells = (len(count_x) + 1) * width
        # A 2-dim node below the split floor or holding one point is a leaf: its children, and so every
        # deeper pair under it, hold no rows (as a walk of the 2-dim tree finds them).
        actual = np.bincount(cell, weights=parent_split, minlength=cells).reshape(-1, width)[:-1, :-1]
        parent_split = _splits(cell, x.values, y.values)[cell]
        expected = count_x[:, None] * count_y[None, :] / num_rows
        score = np.abs(expected - actual) / np.maximum(expected, actual)
        weighted_score += float((score * expected)[visited].sum())
        total_expected += float(expected[visited].sum())
    return weighted_score / total_expected if total_expected > 0 else 0.0


def _splits(cell: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per 2-dim node (``cell`` of every row): whether the 2-dim tree splits it, i.e. it holds at least
    ``LOW_COUNT_THRESHOLD`` rows (the sampling forest's low-count filter) and not a single (x, y) point."""
    cells = int(cell.max()) + 1
    count = np.bincount(cell, minlength=cells)
    single = np.ones(cells, dtype=bool)
    for values in (x, y):
        low = np.full(cells, np.inf)
        high = np.full(cells, -np.inf)
        np.minimum.at(low, cell, values)
        np.maximum.at(high, cell, values)
        single &= low == high
    return (count >= LOW_COUNT_THRESHOLD) & ~single
