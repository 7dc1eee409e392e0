"""Trees for every combination of a cluster's columns, built level by level over all rows at once.

Float space: every column is a float64 array (NaN = null) from the column codecs. Nulls are mapped to a
value above the data (max + (max - min), see `null_mapping`), each column's range is
snapped to a power-of-two size aligned to half that size, and the 1-dim trees push their roots down
past low-count edges, which anonymizes each column's min/max; higher-dim trees use the pushed ranges.

Build order (the documented replacement for the reference's row-at-a-time insertion): a tree is built
breadth-first; at depth d the rows of every node are a contiguous segment of one sorted row array
(rows sorted once per tree by their interleaved cell bits, i.e. Morton/Z order), so every per-node
quantity is a segment reduction. A node splits iff, on its final row set, it is not a singularity,
not a stub, passes LCF and (1-dim only) satisfies the precision limit. Rows of nodes that stop leave
the arrays for the following levels. Trees of one size whose columns differ grow side by side in
small tables (`Forest.build`): their rows lie one tree after the other, and one level of all of them is
computed by the same few numpy calls. A row's cell at depth d in dimension j is
floor((x_j - lo_j) / size_j * 2^d), clamped to [0, 2^d - 1] (so 1-dim outliers land in edge cells).

Per tree and depth, `TreeLevel` holds one entry per node in Morton order: `key = parent << k | bits`
(bits: dimension 0 is the most significant), so children of any set of nodes are found with
`searchsorted`, and the (k-1)-dim subnodes (same ranges, one dimension dropped) are looked up the same
way in the sub-trees' levels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from itertools import combinations

import numpy as np

from .anonymizer import CountAnonymizer, Entities, SortedEntities
from .errors import InvalidInputError
from .noise import Salt, hash_floats, hash_strings, mix64
from .params import BucketizationParams
from .threads import map_in_threads

MAX_DEPTH = 62
# Cells of multi-dim trees are cut from each column's cells at this depth (k >= 2 -> depth <= 31).
CELL_BITS = 31
_UNIT_MAX = 1.0 - 2.0**-53
_SPREAD_TABLES: dict[tuple[int, int], np.ndarray] = {}
# Trees of one size grow side by side while their rows together stay under this many positions (~60
# MiB of layout at 4 columns): tables of a few thousand rows build all their trees of one size in one
# batch; from 1M rows on every tree grows alone (and its numpy calls are long enough that batching
# would gain nothing).
BATCHED_TREE_POSITIONS = 1 << 20
# With AID columns a batch counts each level's entities from all its rows (the per-tree count reads
# only the rows that repeat an entity within a node), which costs more than the per-tree overhead it
# saves beyond a few thousand rows (a 20,000-row table took 1.5-1.7x as long to synthesize batched).
BATCHED_AID_ROWS = 8_192
# Keys of a batch's sub-tree levels carry their tree's number above this bit (keys of a tree over
# at most 2^20 rows stay below 2^(20 + k)).
_TREE_KEY_SHIFT = 40


def _spread_table(k: int, shift: int) -> np.ndarray:
    """16-bit chunk -> its bits spread out with stride k, shifted left by `shift` (bits past 63 dropped)."""
    if (k, shift) not in _SPREAD_TABLES:
        # Built from the two bytes of the chunk: two 256-entry tables instead of 16 passes over 65536.
        byte = np.arange(256, dtype=np.uint64)
        spread = np.zeros(256, dtype=np.uint64)
        for bit in range(8):
            spread |= ((byte >> np.uint64(bit)) & np.uint64(1)) << np.uint64(bit * k)
        chunk = np.arange(1 << 16, dtype=np.uint64)
        table = np.zeros(1 << 16, dtype=np.uint64)
        for half in (0, 1):
            offset = 8 * k * half + shift
            if offset < 64:  # a shift of 64 or more would leave nothing
                table |= (spread << np.uint64(offset))[(chunk >> np.uint64(8 * half)) & np.uint64(255)]
        _SPREAD_TABLES[k, shift] = table
    return _SPREAD_TABLES[k, shift]


def snap_range(low: float, high: float) -> tuple[float, float]:
    """Power-of-two size aligned to half of itself, covering [low, high] with high strictly inside."""
    size = 1.0 if high <= low else 2.0 ** np.ceil(np.log2(high - low))
    while True:
        start = np.floor(low / (size / 2)) * (size / 2)
        if start + size > high:
            return float(start), float(size)
        size *= 2


def null_mapping(values: np.ndarray) -> float:
    """The value nulls take in the trees: as far above the maximum as the values spread (a constant
    column: its magnitude, or 1). The root then holds the data in a quarter to a half of its range
    wherever they lie on the axis, as 1.0.8's min-max normalization gives. Twice the maximum left
    1844-2004 in [0, 4096), and every multi-column tree spent five levels before it reached the data."""
    finite = values[~np.isnan(values)]
    if finite.size == 0:
        return 1.0
    lo, hi = float(finite.min()), float(finite.max())
    if hi > lo:
        return hi + (hi - lo)
    return hi + (abs(hi) or 1.0)


def unit_positions(values: np.ndarray, low: float, size: float) -> np.ndarray:
    """Position of values inside [low, low + size) as a fraction in [0, 1), clamped."""
    return np.clip((values - low) / size, 0.0, _UNIT_MAX)


@dataclass
class TreeLevel:
    """All nodes of one depth of one tree (index = position in Morton order)."""

    key: np.ndarray  # int32 (int64 past 2^31): parent index << k | child bits (0 for the root)
    rep_row: np.ndarray  # int32/int64: one input row of the node (its values give cells and singular points)
    singular_dims: np.ndarray  # uint8 (uint16 past 8 dims): bit j set if all rows share one value in dim j
    singular: np.ndarray  # bool: singular in every dimension
    lcf_low: np.ndarray
    singularity_low: np.ndarray
    range_low: np.ndarray
    stub: np.ndarray
    branch: np.ndarray  # bool: the node split; its children with >= 3 rows are in level depth + 1
    noisy_count: np.ndarray  # int32, >= 1
    # bool: a stub, or low for its kind (singularity or range): what the nodes one dimension up read
    counts_as_stub: np.ndarray

    @property
    def size(self) -> int:
        return self.key.size

    def part(self, nodes: slice) -> TreeLevel:
        """The level of one tree from a batch's level (keys in the narrowest dtype)."""
        return TreeLevel(
            key=_narrow_keys(self.key[nodes]),
            rep_row=self.rep_row[nodes],
            singular_dims=self.singular_dims[nodes],
            singular=self.singular[nodes],
            lcf_low=self.lcf_low[nodes],
            singularity_low=self.singularity_low[nodes],
            range_low=self.range_low[nodes],
            stub=self.stub[nodes],
            branch=self.branch[nodes],
            noisy_count=self.noisy_count[nodes],
            counts_as_stub=self.counts_as_stub[nodes],
        )


@dataclass
class Tree:
    columns: tuple[int, ...]  # forest column indices, ascending
    low: np.ndarray  # (k,) root range starts
    size: np.ndarray  # (k,) root range sizes (powers of two)
    base_seed: int
    code_levels: int  # levels held by the sort code (62 for 1-dim trees, else the depth limit)
    levels: list[TreeLevel] = field(default_factory=list)
    # Per depth, int32 (n, k): index of each node's (k-1)-dim subnode (dropping dimension i) at that
    # depth, -1 if none. Only refinement reads them, for the nodes it refines: the harvest keeps those
    # in its pool and sets this to None (the largest per-node field, k entries per node).
    subnodes: list[np.ndarray] | None = field(default_factory=list)

    @property
    def dims(self) -> int:
        return len(self.columns)

    def children(self, depth: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, stop) index ranges of the children of `nodes` (at `depth`) in level depth + 1."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if depth + 1 >= len(self.levels):
            return np.zeros(nodes.size, np.int64), np.zeros(nodes.size, np.int64)
        keys = self.levels[depth + 1].key
        k = self.dims
        first, past = nodes << k, (nodes + 1) << k
        if keys.dtype == np.int32 and (past.size == 0 or past.max() < 2**31):
            first, past = first.astype(np.int32), past.astype(np.int32)  # else the search copies the keys
        return np.searchsorted(keys, first), np.searchsorted(keys, past)

    def leaves(self) -> list[tuple[int, np.ndarray]]:
        """(depth, node indices) of the nodes that did not split, per depth (e.g. for 1-dim entropy)."""
        return [(depth, np.flatnonzero(~level.branch)) for depth, level in enumerate(self.levels)]

    def node_ranges(self, forest: Forest, depth: int, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bucket ranges (low, high) of shape (n, k): snapped cell, or the point where singular."""
        level = self.levels[depth]
        return self.ranges_of(forest, depth, level.rep_row[nodes], level.singular_dims[nodes])

    def cells_of(self, values: np.ndarray, depth: int | np.ndarray) -> np.ndarray:
        """(n, k) cell index per dimension of the rows with `values` at `depth` (one, or one per row)."""
        scale = np.ldexp(1.0, np.asarray(depth, dtype=np.int64))[..., None]
        return np.floor(unit_positions(values, self.low[None, :], self.size[None, :]) * scale)

    def ranges_of(
        self,
        forest: Forest,
        depth: int | np.ndarray,
        rep_rows: np.ndarray,
        singular_dims: np.ndarray,
        cell_bits: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """`node_ranges` of nodes given by their representative rows and singular dimensions, at one
        `depth` or at one depth per node. With `cell_bits` (one per node, -1 for the row's own cell):
        the sibling cell at `depth` with those child bits instead of the one holding the row."""
        values = forest.values_at(rep_rows, self.columns)
        scale = np.ldexp(1.0, np.asarray(depth, dtype=np.int64))[..., None]  # 2^depth, (1,) or (n, 1)
        width = self.size[None, :] / scale
        cell = self.cells_of(values, depth)
        if cell_bits is not None:
            sibling = cell_bits >= 0
            shifts = np.arange(self.dims - 1, -1, -1)  # dimension 0 is the most significant bit
            wanted = (cell_bits[sibling, None] >> shifts[None, :]) & 1
            cell[sibling] += wanted - np.mod(cell[sibling], 2)
        low = self.low[None, :] + cell * width
        # A deep edge cell (rows clamped into it keep it splitting) can be narrower than float64
        # resolves; it must not turn into a point, which would read as a singular (exact) value.
        high = np.maximum(low + width, np.nextafter(low, np.inf))
        singular = (singular_dims[:, None] >> np.arange(self.dims, dtype=np.uint32)[None, :]) & 1
        singular = singular.astype(bool)
        low = np.where(singular, values, low)
        high = np.where(singular, values, high)
        return low, high


class Forest:
    """Lazily built trees over the columns of one float matrix (rows, columns), NaN = null.

    The values are not kept as floats: per column, the sorted distinct values (nulls mapped) and each
    row's dense rank among them (1-4 bytes per cell instead of 8; `values_at` gathers the floats)."""

    def __init__(
        self,
        values: np.ndarray,
        column_names: list[str],
        entities: Entities,
        anonymizer: CountAnonymizer,
        bucketization: BucketizationParams,
        salt: Salt,
        threads: int = 1,
        null_values: Sequence[float | None] | None = None,
    ):
        """`threads`: how many columns' 1-dim trees are built side by side (each depends on its column
        alone; the forest is the same for any count). `null_values`: per column, the value that stands
        for null in `values` (None: nulls are NaN, mapped by `null_mapping`)."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(column_names):
            raise ValueError("values must be a (rows, columns) matrix matching column_names")
        if values.shape[0] == 0:
            raise ValueError("a forest needs at least one row")
        self.column_names = list(column_names)
        self.entities = entities
        self.anonymizer = anonymizer
        self.bucketization = bucketization
        self.salt = salt
        self.row_count = values.shape[0]
        given = null_values if null_values is not None else [None] * values.shape[1]
        self.null_values = np.array(
            [null_mapping(values[:, j]) if given[j] is None else given[j] for j in range(values.shape[1])]
        )
        self.low = np.zeros(values.shape[1])
        self.size = np.ones(values.shape[1])
        self.trees: dict[tuple[int, ...], Tree] = {}
        self._cell_cache: dict[int, np.ndarray] = {}
        self._unique_cells: dict[int, np.ndarray] = {}
        self._ranks: dict[int, np.ndarray] = {}
        self._uniques: dict[int, np.ndarray] = {}
        self._negative_zero_rows: dict[int, np.ndarray] = {}
        columns = range(values.shape[1])
        together = self._growing_together()
        if together > 1 and threads <= 1:
            for first in range(0, len(columns), together):
                batch = [self._start_column(j, values[:, j]) for j in columns[first : first + together]]
                self._grow(batch)
                self.trees.update((growing.tree.columns, growing.tree) for growing in batch)
        else:
            trees = map_in_threads(lambda j: self._build_column(j, values[:, j]), columns, threads)
            self.trees.update(((j,), tree) for j, tree in enumerate(trees))

    def _build_column(self, j: int, values: np.ndarray) -> Tree:
        """Column j's 1-dim tree from its floats (NaN = null); the column's floats are held only while
        its tree is built: the tree stores them as ranks and distinct values."""
        growing = self._start_column(j, values)
        self._grow([growing])
        return growing.tree

    def _start_column(self, j: int, values: np.ndarray) -> _Growing:
        """`_start` of column j's 1-dim tree, its range snapped first."""
        column = np.where(np.isnan(values), self.null_values[j], values)
        low, high = float(column.min()), float(column.max())
        if not np.isfinite(high - low) or not np.isfinite(self.null_values[j] * 2):
            raise InvalidInputError(
                f"column {self.column_names[j]!r}: values span [{low!r}, {high!r}] (nulls mapped to "
                f"{self.null_values[j]!r}), too wide a range for float64 arithmetic"
            )
        self.low[j], self.size[j] = snap_range(low, high)
        return self._start((j,), column)

    @property
    def dims(self) -> int:
        return len(self.column_names)

    def over(self, values: np.ndarray, null_values: Sequence[float | None], threads: int = 1) -> Forest:
        """A forest over other values (rows, columns) of the same rows and columns: the same entities,
        anonymizer and salt. `null_values`: per column, the value its null rows have in `values`."""
        return Forest(
            values,
            self.column_names,
            self.entities,
            self.anonymizer,
            self.bucketization,
            self.salt,
            threads=threads,
            null_values=null_values,
        )

    def values_at(self, rows: np.ndarray, columns: Sequence[int], order: str = "C") -> np.ndarray:
        """The (nulls mapped) float values of `rows` in `columns`, shape (rows, len(columns))."""
        out = np.empty((len(rows), len(columns)), order=order)
        for position, column in enumerate(columns):
            out[:, position] = self._uniques[column].take(self._ranks[column].take(rows))
            negative_zeros = self._negative_zero_rows.get(column)
            if negative_zeros is not None:
                out[np.isin(rows, negative_zeros), position] = -0.0
        return out

    def value_matrix(self) -> np.ndarray:
        """Every row's float values, NaN = null, (rows, columns) with each column contiguous: a new array
        of 8 bytes per cell."""
        values = self.values_at(np.arange(self.row_count), range(self.dims), order="F")
        for j in range(self.dims):
            column = values[:, j]
            column[column == self.null_values[j]] = np.nan
        return values

    def mapped_matrix(
        self, maps: Sequence[Callable[[np.ndarray], np.ndarray]]
    ) -> tuple[np.ndarray, list[float | None]]:
        """Every row's values (nulls mapped) through its column's map, (rows, columns) with each column
        contiguous, and per column the value its null rows take there (None for a column without
        nulls); each map is applied to the column's distinct values only."""
        out = np.empty((self.row_count, self.dims), order="F")
        null_values: list[float | None] = []
        for j, mapping in enumerate(maps):
            mapped = mapping(self._uniques[j])
            out[:, j] = mapped.take(self._ranks[j])
            at = np.flatnonzero(self._uniques[j] == self.null_values[j])
            null_values.append(float(mapped[at[0]]) if at.size else None)
        return out, null_values

    def column_range(self, column: int) -> tuple[float, float]:
        """The column's snapped range after the 1-dim push-down: (low, size)."""
        return float(self.low[column]), float(self.size[column])

    def _cells(self, column: int) -> np.ndarray:
        """The rows' cells of `column` at depth 31 of its (pushed-down) range, computed once."""
        if column not in self._cell_cache:
            if column not in self._unique_cells:
                units = unit_positions(self._uniques[column], self.low[column], self.size[column])
                self._unique_cells[column] = np.floor(units * 2.0**CELL_BITS).astype(np.uint32)
            self._cell_cache[column] = self._unique_cells[column].take(self._ranks[column])
        return self._cell_cache[column]

    def cache_cells(self, columns: tuple[int, ...]) -> None:
        """Compute the cells of `columns` now (before trees over them are built side by side)."""
        for column in columns:
            self._cells(column)

    def _store_ranks(self, column: int, order: np.ndarray, sorted_values: np.ndarray) -> None:
        """Dense rank of every row's value in `column` (from the 1-dim tree's value order), in the
        smallest unsigned dtype that holds it, and the distinct values: the forest keeps the column in
        this form. Multi-dim trees test "all rows of a node share one value" on ranks gathered in their
        row order, which moves far fewer bytes than the floats."""
        changes = _change_counts(sorted_values)
        top = int(changes[-1]) if changes.size else 0
        dtype = np.uint8 if top < 2**8 else np.uint16 if top < 2**16 else np.uint32
        ranks = np.empty(order.size, dtype=dtype)
        ranks[order] = changes
        first = np.ones(sorted_values.size, dtype=bool)
        first[1:] = changes[1:] != changes[:-1]
        uniques = sorted_values[first]
        # -0.0 and 0.0 share a rank (they are equal); rows holding the other sign than the rank's
        # first row keep it through a list of the -0.0 rows.
        start, stop = (int(sorted_values.searchsorted(0.0, side)) for side in ("left", "right"))
        if stop > start:
            negative = np.signbit(sorted_values[start:stop])
            if negative.any() and not negative.all():
                self._negative_zero_rows[column] = np.sort(order[start:stop][negative])
                uniques[changes[start]] = 0.0
        self._ranks[column] = ranks
        self._uniques[column] = uniques

    def release(self, keep: Callable[[tuple[int, ...]], bool], cell_columns: set[int]) -> None:
        """Drop the trees whose columns `keep` rejects, every row's cached cells (a tree built later
        gathers them again from the ranks, identically) and the distinct values' cells of columns
        outside `cell_columns`."""
        self.trees = {columns: tree for columns, tree in self.trees.items() if keep(columns)}
        self._cell_cache = {}
        self._unique_cells = {j: cells for j, cells in self._unique_cells.items() if j in cell_columns}

    def discard(self, trees: list[tuple[int, ...]]) -> None:
        """Drop the trees over these column sets (a later `tree` call builds them again, identically)."""
        for columns in trees:
            self.trees.pop(columns, None)

    def rebuilt(self, columns: tuple[int, ...]) -> Tree:
        """The tree over `columns` built again, with its subnodes (identical: everything is seeded)."""
        self.trees.pop(tuple(sorted(columns)), None)
        return self.tree(columns)

    def tree(self, columns: tuple[int, ...]) -> Tree:
        columns = tuple(sorted(columns))
        if columns not in self.trees:
            for sub in combinations(columns, len(columns) - 1):
                if sub:
                    self.tree(sub)
            self.trees[columns] = self._build(columns)
        return self.trees[columns]

    def _base_seed(self, columns: tuple[int, ...]) -> int:
        return hash_strings(self.column_names[j] for j in columns)

    # --- building -------------------------------------------------------------------------------------

    def build(self, column_sets: Sequence[tuple[int, ...]]) -> None:
        """Build the missing trees over `column_sets` (of one size, with their one-column-smaller trees).

        The trees of a small table grow side by side (`_growing_together`), one level of all of them at
        a time (`_grow`): each level is a handful of numpy calls whatever the number of trees, where one
        tree at a time pays that overhead per tree and level (most of a small table's tree time). The
        trees are the same as built one by one: every per-node quantity is computed per node."""
        missing = sorted({tuple(sorted(c)) for c in column_sets} - self.trees.keys())
        for columns in missing:
            for sub in combinations(columns, len(columns) - 1):
                if sub:
                    self.tree(sub)
        together = self._growing_together()
        for first in range(0, len(missing), together):
            batch = [self._start(columns) for columns in missing[first : first + together]]
            self._grow(batch)
            self.trees.update((growing.tree.columns, growing.tree) for growing in batch)

    @property
    def side_by_side(self) -> int:
        """How many trees of one size grow (or are harvested) side by side (BATCHED_TREE_POSITIONS)."""
        return max(1, BATCHED_TREE_POSITIONS // self.row_count)

    def _growing_together(self) -> int:
        """How many trees of one size grow side by side (see BATCHED_AID_ROWS for AID tables)."""
        return self.side_by_side if self.entities.implicit or self.row_count <= BATCHED_AID_ROWS else 1

    def _build(self, columns: tuple[int, ...], column_values: np.ndarray | None = None) -> Tree:
        """The tree over `columns`; a 1-dim tree reads `column_values` (the column's floats, nulls
        mapped; gathered from the ranks when not given)."""
        growing = self._start(columns, column_values)
        self._grow([growing])
        return growing.tree

    def _start(self, columns: tuple[int, ...], column_values: np.ndarray | None = None) -> _Growing:
        """A tree with no levels yet and its rows sorted by code: everything `_grow` needs."""
        k = len(columns)
        if k == 1 and column_values is None:
            column_values = self.values_at(np.arange(self.row_count), columns)[:, 0]
        base_seed = self._base_seed(columns)
        depth_offset = 0
        row_limit = 0
        sub_trees = []
        if k == 1:
            row_limit = self._row_limit(base_seed)
            # One value order serves the push-down and the tree.
            value_order = _value_order(column_values)
            depth_offset = self._push_down(columns[0], row_limit, value_order, column_values)
            max_depth = MAX_DEPTH
        else:
            sub_trees = [self.trees[s] for s in combinations(columns, k - 1)]
            # combinations() of the columns in order yields the subset dropping the LAST column first.
            sub_trees.reverse()
            max_depth = min(63 // k, max(len(sub.levels) for sub in sub_trees))
        code_levels = MAX_DEPTH if k == 1 else max_depth
        tree = Tree(
            columns, self.low[list(columns)].copy(), self.size[list(columns)].copy(), base_seed, code_levels
        )
        sorted_first = None
        if k == 1:
            # 1-dim trees sort by value: that keeps the code order and shows singularity at segment ends.
            units = unit_positions(column_values, tree.low[0], tree.size[0])
            code = np.floor(units * 2.0**MAX_DEPTH).astype(np.uint64)
            del units
            order = value_order
            sorted_code = code[order]
            del code
            sorted_first = column_values[order]
            self._store_ranks(columns[0], order, sorted_first)
        else:
            code = _morton_code([self._cells(j) for j in columns], max_depth)
            order, sorted_code = _sort_codes(code, max_depth * k)
            del code
        changes = [_change_counts(self._ranks[j].take(order)) for j in columns] if k > 1 else []
        if order.size < 2**31:
            order = order.astype(np.int32)  # node storage: half the bytes per representative row
        return _Growing(
            tree, sub_trees, max_depth, depth_offset, row_limit, order, sorted_code, changes, sorted_first
        )

    def _grow(self, batch: list[_Growing]) -> None:
        """Grow the trees of `batch` (all of one size) breadth-first to their full depth, side by side.

        The batch's rows lie one tree after the other in one layout (`_Rows`), so a node is a range of
        positions in it wherever its tree is, and each level of every tree is computed at once."""
        rows = _Rows(batch, self.entities)
        k = rows.dims
        trees = len(batch)
        starts = np.arange(trees, dtype=np.int64) * self.row_count
        ends = starts + self.row_count
        tree_of = np.arange(trees)
        key = np.zeros(trees, dtype=np.int64)
        subnodes = np.zeros((trees, k if k > 1 else 0), dtype=np.int32)
        depth = 0
        while True:
            level = self._level(rows, depth, starts, ends, tree_of, key, subnodes)
            bounds = tree_of.searchsorted(np.arange(trees + 1))
            for t in np.flatnonzero(bounds[1:] > bounds[:-1]).tolist():
                nodes = slice(bounds[t], bounds[t + 1])
                batch[t].tree.levels.append(level.part(nodes))
                batch[t].tree.subnodes.append(subnodes[nodes])
            split_nodes = (level.branch & (depth < rows.per_node(rows.max_depth, tree_of))).nonzero()[0]
            if split_nodes.size == 0:
                break
            split_tree = tree_of[split_nodes]
            starts, ends, parents, child_bits = self._children_runs(
                rows, starts[split_nodes], ends[split_nodes], split_nodes, split_tree, depth
            )
            if starts.size == 0:
                break
            tree_of = tree_of[parents]
            key = ((parents - bounds[tree_of]) << k) | child_bits
            subnodes = self._child_subnodes(rows, subnodes, parents, child_bits, tree_of, depth + 1)
            depth += 1

    def _children_runs(self, rows, starts, ends, parents, tree_of, depth):
        """Children of the splitting nodes [starts, ends) as runs of equal next-level bits.

        The codes of a node's rows are sorted, so its children start at the node's start and at every
        position inside it where the code first differs from the previous one at level depth + 1
        (`_Rows.divergence`, computed once per batch): no search over the rows per level.
        Children with fewer rows than the hard LCF floor are dropped too: every threshold calls them
        low, so they could neither split nor yield a bucket (a missing node means the same).
        """
        k = rows.dims
        boundaries = rows.divergence(depth + 1)
        node = starts.searchsorted(boundaries, side="right") - 1
        inside = node >= 0
        inside[inside] = boundaries[inside] < ends[node[inside]]
        boundaries, node = boundaries[inside], node[inside]
        # Children in position order: each node's start, then its inner boundaries.
        total = starts.size + boundaries.size
        first_child = np.arange(starts.size) + node.searchsorted(np.arange(starts.size), side="left")
        inner = np.arange(boundaries.size) + node + 1
        child_start = np.empty(total, dtype=np.int64)
        child_start[first_child] = starts
        child_start[inner] = boundaries
        child_parent = np.empty(total, dtype=np.int64)
        child_parent[first_child] = np.arange(starts.size)
        child_parent[inner] = node
        child_end = np.empty(total, dtype=np.int64)
        child_end[:-1] = child_start[1:]
        last_child = np.empty_like(first_child)
        last_child[:-1] = first_child[1:] - 1
        last_child[-1] = total - 1
        child_end[last_child] = ends
        code_levels = rows.per_node(rows.code_levels, tree_of[child_parent])
        shift = ((code_levels - 1 - depth) * k).astype(np.uint64)
        bits = ((rows.code[child_start] >> shift) & np.uint64((1 << k) - 1)).astype(np.int64)
        keep = (child_end - child_start) >= self.anonymizer.params.low_count_params.low_threshold
        return child_start[keep], child_end[keep], parents[child_parent[keep]], bits[keep]

    def _level(self, rows, depth, starts, ends, tree_of, key, subnodes) -> TreeLevel:
        """One depth of every tree of the batch (nodes in position order, keys local to their tree)."""
        k = rows.dims
        n = starts.size
        last = ends - 1
        if k == 1:
            singular_dims = (rows.sorted_first[starts] == rows.sorted_first[last]).astype(np.uint32)
        else:
            singular_dims = np.zeros(n, dtype=np.uint32)
            for j, changes in enumerate(rows.changes):
                same = changes[last] == changes[starts]
                singular_dims |= same.astype(np.uint32) << np.uint32(j)
        singular = singular_dims == np.uint32((1 << k) - 1)
        rep_row = rows.order[starts]
        # Bucket labels: the node's cell (depth + interleaved cell bits) or, for singularities, the point.
        code_levels = rows.per_node(rows.code_levels, tree_of)
        cell_bits = cell_prefix(rows.code[starts], depth, code_levels, k)
        base_seed = rows.per_node(rows.base_seed, tree_of)
        seeds = mix64(cell_bits ^ base_seed ^ (np.uint64(depth + 1) << np.uint64(57)))
        if singular.any():
            nodes = singular.nonzero()[0]
            point_seed = np.zeros(nodes.size, dtype=np.uint64)
            point_seed ^= rows.per_node(rows.base_seed, tree_of[nodes])
            for j in range(k):
                columns = rows.per_node(rows.columns[:, j], tree_of[nodes])
                point_seed ^= hash_floats(self._values_in(rep_row[nodes], columns), j)
            seeds[nodes] = point_seed
        counts = self.anonymizer.count_ranges(rows.entities, starts, ends, seeds, depth)
        if k > 1:
            stub = np.ones(n, dtype=bool)
            for i in range(k):
                blocked, offsets = rows.sub_blocked(i, depth)
                if blocked is None:
                    continue
                index = subnodes[:, i]
                present = index >= 0
                safe = np.where(present, index + rows.per_node(offsets, tree_of), 0)
                stub &= ~present | blocked[safe]
            precise_enough = np.ones(n, dtype=bool)
        else:
            stub = np.zeros(n, dtype=bool)
            depth_offset = rows.per_node(rows.depth_offset, tree_of)
            row_limit = rows.per_node(rows.row_limit, tree_of)
            precise_enough = (depth + depth_offset <= self.bucketization.precision_limit_depth_threshold) | (
                counts.row_count >= row_limit
            )
        branch = ~singular & ~stub & ~counts.lcf_low & precise_enough
        return TreeLevel(
            key=key,
            rep_row=rep_row,
            singular_dims=singular_dims.astype(np.uint8 if k <= 8 else np.uint16),
            singular=singular,
            lcf_low=counts.lcf_low,
            singularity_low=counts.singularity_low,
            range_low=counts.range_low,
            stub=stub,
            branch=branch,
            noisy_count=counts.noisy_count.astype(np.int32),
            counts_as_stub=stub | np.where(singular, counts.singularity_low, counts.range_low),
        )

    def _values_in(self, rows: np.ndarray, columns: np.ndarray | int) -> np.ndarray:
        """The float value of each of `rows` in its column (one column for all, or one per row)."""
        if np.ndim(columns) == 0:
            return self.values_at(rows, (int(columns),))[:, 0]
        values = np.empty(rows.size)
        for column in np.unique(columns).tolist():
            at = columns == column
            values[at] = self.values_at(rows[at], (column,))[:, 0]
        return values

    @staticmethod
    def _child_subnodes(rows, parent_subnodes, parents, child_bits, tree_of, depth) -> np.ndarray:
        k = rows.sub_dims
        result = np.full((parents.size, k), -1, dtype=np.int32)
        for i in range(k):
            keys, offsets = rows.sub_keys(i, depth)
            if keys is None or keys.size == 0:
                continue
            parent_sub = parent_subnodes[parents, i].astype(np.int64)
            dropped = k - 1 - i  # bit position of dimension i in the child bits
            sub_bits = ((child_bits >> (dropped + 1)) << dropped) | (child_bits & ((1 << dropped) - 1))
            target = (parent_sub << (k - 1)) | sub_bits
            if offsets is not None:
                target |= tree_of << _TREE_KEY_SHIFT  # the batch's keys carry their tree above the key
            elif keys.dtype == np.int32 and (target.size == 0 or target.max() < 2**31):
                target = target.astype(np.int32)  # a search in keys of another dtype would copy them
            found = np.minimum(keys.searchsorted(target), keys.size - 1)
            ok = (parent_sub >= 0) & (keys[found] == target)
            if offsets is not None:
                found = found - offsets[tree_of]
            result[:, i] = np.where(ok, found, -1)
        return result

    def _row_limit(self, base_seed: int) -> int:
        limit = self.row_count // self.bucketization.precision_limit_row_fraction
        jitter = limit // 20
        if jitter == 0:
            return limit
        return int(limit + self.salt.uniform_int(base_seed, "precision_limit", -jitter, jitter)[0])

    def _push_down(self, column: int, row_limit: int, order: np.ndarray, values: np.ndarray) -> int:
        """Narrow the column's range while exactly one half of it is low; returns the levels pushed.
        `order` sorts the column's `values`.

        The halves count the rows beyond the current range at their edge (the rows of the dropped
        halves stay in the tree). As in the reference, only a node that would split on its own rows
        becomes the root: the kept half's rows inside it must pass LCF and hold more than one value.
        Without that, a small table (n near twice the LCF threshold, where one half is nearly always
        low) pushed its root down ~60 levels onto one value, which every row then received.
        """
        sorted_values = values[order]
        if sorted_values[0] == sorted_values[-1]:
            return 0
        # Only the LCF decision of the root and the halves matters here (it needs no bucket seed).
        ranges = SortedEntities(self.entities, order)
        if self.anonymizer.low_count(ranges, 0, order.size):
            return 0
        low, size = float(self.low[column]), float(self.size[column])
        pushed = 0
        while pushed < MAX_DEPTH - 1:
            if pushed > self.bucketization.precision_limit_depth_threshold and self.row_count < row_limit:
                break
            middle = low + size / 2
            split = int(np.searchsorted(sorted_values, middle, side="left"))
            halves_low = [
                end <= begin or self.anonymizer.low_count(ranges, begin, end)
                for begin, end in ((0, split), (split, order.size))
            ]
            if halves_low[0] == halves_low[1]:
                break
            if halves_low[0]:
                inside = (split, int(np.searchsorted(sorted_values, low + size, side="left")))
            else:
                inside = (int(np.searchsorted(sorted_values, low, side="left")), split)
            begin, end = inside
            if end - begin < 2 or sorted_values[begin] == sorted_values[end - 1]:
                break
            if self.anonymizer.low_count(ranges, begin, end):
                break
            if halves_low[0]:
                low = middle
            size /= 2
            pushed += 1
        self.low[column], self.size[column] = low, size
        return pushed


@dataclass
class _Growing:
    """A tree under construction: its rows in code order and its depth limits."""

    tree: Tree
    sub_trees: list[Tree]  # the (k-1)-dim trees, by the dimension they drop
    max_depth: int
    depth_offset: int  # 1-dim: levels the root was pushed down
    row_limit: int  # 1-dim: the precision limit's row count
    order: np.ndarray  # input row index per sorted position
    code: np.ndarray  # uint64 interleaved cell bits, non-decreasing
    changes: list[np.ndarray]  # per dimension: number of value changes up to each position
    sorted_first: np.ndarray | None  # 1-dim trees: the sorted values themselves


class _Rows:
    """The rows of a batch of trees of one size in code order, one tree after the other: a node of
    tree t is a range of positions in [t * rows, (t + 1) * rows), and prefix counts make every node a
    pair of lookups. Per-tree constants are looked up per node (`per_node`); a batch of one tree holds
    its arrays as they are (no copies) and its constants as scalars."""

    def __init__(self, batch: list[_Growing], entities: Entities):
        self.single = len(batch) == 1
        first = batch[0]
        self.dims = first.tree.dims
        self.sub_dims = len(first.sub_trees)  # dims, or none for 1-dim trees
        self.order = join_arrays([growing.order for growing in batch])
        self.code = join_arrays([growing.code for growing in batch])
        self.changes = [
            join_arrays([growing.changes[j] for growing in batch]) for j in range(len(first.changes))
        ]
        self.sorted_first = (
            None if first.sorted_first is None else join_arrays([g.sorted_first for g in batch])
        )
        self.columns = np.array([growing.tree.columns for growing in batch], dtype=np.int64)
        self.base_seed = np.array([growing.tree.base_seed for growing in batch], dtype=np.uint64)
        self.code_levels = np.array([growing.tree.code_levels for growing in batch], dtype=np.int64)
        self.max_depth = np.array([growing.max_depth for growing in batch], dtype=np.int64)
        self.depth_offset = np.array([growing.depth_offset for growing in batch], dtype=np.int64)
        self.row_limit = np.array([growing.row_limit for growing in batch], dtype=np.int64)
        self._sub_trees = [growing.sub_trees for growing in batch]
        if self.single:
            shared_levels = partial(_shared_levels, first.code, first.tree.code_levels, self.dims)
            self.entities = SortedEntities(entities, self.order, shared_levels)
        else:
            # A range lies in one tree's part: one XOR prefix over all the batch's rows gives its seed
            # (implicit entities), and AID columns count its entities from all its rows (the repeat
            # index of `shared_levels` is one tree's).
            self.entities = SortedEntities(entities, self.order)
        self._divergence = self._divergence_index(batch)

    def per_node(self, values: np.ndarray, tree_of: np.ndarray):
        """Each node's value of a per-tree constant (a scalar for a batch of one tree)."""
        return values[0] if self.single else values[tree_of]

    def divergence(self, level: int) -> np.ndarray:
        """Positions i whose code first differs from code[i - 1] (same tree) at `level` (1-based), sorted.

        Rows i - 1 and i share the nodes of every depth below that level and are split into different
        nodes at it. Computed once per batch: the highest differing bit of neighbouring codes gives the
        level; positions are grouped by level with one stable (radix) sort of the small level numbers.
        """
        positions, offsets = self._divergence
        if level + 1 >= offsets.size:
            return positions[:0]
        return positions[offsets[level] : offsets[level + 1]]

    def _divergence_index(self, batch: list[_Growing]) -> tuple[np.ndarray, np.ndarray]:
        top = int(self.code_levels.max())
        parts = []
        for growing in batch:
            code, code_levels = growing.code, growing.tree.code_levels
            levels = _first_difference_levels(code[1:] ^ code[:-1], code_levels, self.dims)
            if code_levels < top:  # equal codes stay past every level of the batch
                levels[levels == code_levels + 1] = top + 1
            parts.append(levels)
        levels = join_arrays(parts)
        positions = np.argsort(levels, kind="stable")
        # Tree t's neighbours t * (rows - 1) + i - 1 are its positions t * rows + i, i = 1 .. rows - 1.
        positions += 1 if self.single else positions // (batch[0].code.size - 1) + 1
        offsets = np.zeros(top + 3, dtype=np.int64)
        np.cumsum(np.bincount(levels, minlength=top + 2), out=offsets[1:])
        return positions, offsets

    def sub_blocked(self, i: int, depth: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """Per node at `depth` of the sub-trees dropping dimension i: whether it keeps a node over it
        from splitting (a stub, or low for its kind), joined over the batch, with each tree's offset."""
        parts = [self._sub_level(sub_trees[i], depth, "counts_as_stub") for sub_trees in self._sub_trees]
        if all(part.size == 0 for part in parts):
            return None, None
        return join_arrays(parts), _offsets(parts)

    def sub_keys(self, i: int, depth: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The keys of the nodes at `depth` of the sub-trees dropping dimension i, with each tree's
        offset; joined over a batch as (tree << _TREE_KEY_SHIFT) | key, which keeps them sorted."""
        parts = [self._sub_level(sub_trees[i], depth, "key") for sub_trees in self._sub_trees]
        if self.single:
            return (parts[0], None) if parts[0].size else (None, None)
        keys = np.concatenate(parts, dtype=np.int64)
        sizes = [part.size for part in parts]
        keys |= np.repeat(np.arange(len(parts), dtype=np.int64) << _TREE_KEY_SHIFT, sizes)
        return keys, _offsets(parts)

    @staticmethod
    def _sub_level(sub: Tree, depth: int, name: str) -> np.ndarray:
        values = getattr(sub.levels[min(depth, len(sub.levels) - 1)], name)
        return values if depth < len(sub.levels) else values[:0]


def join_arrays(arrays: list[np.ndarray]) -> np.ndarray:
    """The arrays one after the other (a single array as it is, not copied)."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _offsets(parts: list[np.ndarray]) -> np.ndarray:
    offsets = np.zeros(len(parts), dtype=np.int64)
    np.cumsum([part.size for part in parts[:-1]], out=offsets[1:])
    return offsets


def _first_difference_levels(differ: np.ndarray, code_levels: int, k: int) -> np.ndarray:
    """Level (1-based, uint8) of the highest set bit of each xor of two codes; code_levels + 1 for 0."""
    # The float64 exponent field of the xor is 1022 + its bit length (0 for no difference);
    # rounding to 53 bits can add one, only where the float is then an exact power of two.
    exponent = differ.astype(np.float64).view(np.uint64)
    power_of_two = (exponent & np.uint64(2**52 - 1)) == 0
    exponent >>= np.uint64(52)
    check = np.flatnonzero(power_of_two & (differ != 0))
    rounded = check[(differ[check] >> (exponent[check] - np.uint64(1023))) == 0]
    exponent[rounded] -= np.uint64(1)
    bit_length = np.arange(2048) - 1022
    level_of = np.where(bit_length >= 1, code_levels - (bit_length - 1) // k, code_levels + 1)
    return np.clip(level_of, 0, code_levels + 1).astype(np.uint8).take(exponent.astype(np.intp))


def _shared_levels(code: np.ndarray, code_levels: int, k: int, earlier: np.ndarray, later: np.ndarray):
    """Levels that sorted positions `earlier` and `later` share: their node is one down to that depth.

    The pairs come in entity order, so their codes are gathered at random: the top 16 code bits (a
    2-byte copy of the codes, which stays in cache) decide every pair that differs there; only the
    pairs equal in those bits gather their whole codes. Fewer pairs than the head table's 65536
    entries (a small table) are read from the whole codes, which fit in cache anyway.
    """
    if earlier.size < 1 << _HEAD_BITS:
        return _first_difference_levels(code.take(earlier) ^ code.take(later), code_levels, k) - np.uint8(1)
    shift = max(code_levels * k - _HEAD_BITS, 0)
    head = (code >> np.uint64(shift)).astype(np.uint16)
    differ = head.take(earlier) ^ head.take(later)
    levels = _head_levels(code_levels, k, shift).take(differ)
    if shift:
        same_head = np.flatnonzero(differ == 0)
        if same_head.size:
            whole = code.take(earlier[same_head]) ^ code.take(later[same_head])
            levels[same_head] = _first_difference_levels(whole, code_levels, k)
    levels -= np.uint8(1)
    return levels


_HEAD_BITS = 16


@cache
def _head_levels(code_levels: int, k: int, shift: int) -> np.ndarray:
    """First-difference level (as `_first_difference_levels`) of every xor of two codes' top bits."""
    return _first_difference_levels(
        np.arange(1 << _HEAD_BITS, dtype=np.uint64) << np.uint64(shift), code_levels, k
    )


def _sort_codes(code: np.ndarray, code_bits: int) -> tuple[np.ndarray, np.ndarray]:
    """(row order, sorted codes) of codes of `code_bits` bits; rows with equal codes in any order.

    A plain sort of (code, row) packed into one uint64 is a few times faster than an argsort. When
    code and row number do not fit in 64 bits together, the code's lowest bits are left out of the
    packed key, and the few runs of equal truncated codes whose rows are then out of code order are
    sorted again on the whole code.
    """
    n = code.size
    row_bits = max(1, (n - 1).bit_length())
    excess = code_bits + row_bits - 64
    packed = code >> np.uint64(excess) if excess > 0 else code.copy()
    packed <<= np.uint64(row_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    order = (packed & np.uint64((1 << row_bits) - 1)).astype(np.int64)
    if excess <= 0:
        return order, packed >> np.uint64(row_bits)
    sorted_code = code[order]
    unsorted = np.flatnonzero(sorted_code[1:] < sorted_code[:-1])
    if unsorted.size:
        prefix = packed >> np.uint64(row_bits)
        # Every run of equal truncated code that holds an inversion is sorted again as a whole.
        run_start = np.searchsorted(prefix, prefix[unsorted], side="left")
        run_stop = np.searchsorted(prefix, prefix[unsorted], side="right")
        depth = np.zeros(n + 1, dtype=np.int64)
        np.add.at(depth, run_start, 1)
        np.add.at(depth, run_stop, -1)
        positions = np.flatnonzero(np.cumsum(depth[:-1]) > 0)
        resort = np.argsort(sorted_code[positions], kind="stable")
        order[positions] = order[positions][resort]
        sorted_code[positions] = sorted_code[positions][resort]
    return order, sorted_code


def _narrow_keys(keys: np.ndarray) -> np.ndarray:
    """Sorted node keys as int32 when the largest fits (levels are held for a whole cluster)."""
    return keys.astype(np.int32) if keys.size == 0 or keys[-1] < 2**31 else keys


def _change_counts(sorted_values: np.ndarray) -> np.ndarray:
    """changes[i] = number of positions p <= i with value[p] != value[p - 1].

    A range [s, e] holds a single value iff changes[e] == changes[s], whatever the row order.
    """
    changes = np.zeros(sorted_values.size, dtype=np.int32)
    np.cumsum(sorted_values[1:] != sorted_values[:-1], out=changes[1:])
    return changes


def cell_prefix(codes: np.ndarray, depth: int, code_levels: int, k: int) -> np.ndarray:
    """The first `depth` levels of interleaved cell bits (the node's cell at that depth)."""
    if depth == 0:
        return np.zeros(codes.size, dtype=np.uint64)
    return codes >> np.uint64((code_levels - depth) * k)


def _morton_code(cells: list[np.ndarray], depth: int) -> np.ndarray:
    """Interleaved cell bits of every row down to `depth` (<= 31) levels, as one uint64 per row.

    `cells[j]` are the rows' cells of dimension j at depth 31. k-dim trees hold at most 63 // k
    levels, which is also their depth limit. Within a level, dimension 0 is the most significant bit,
    so sorting rows by the code puts every node's rows (at every depth) into one contiguous run.
    """
    k = len(cells)
    code = None
    for j in range(k):
        cell = cells[j] >> np.uint32(CELL_BITS - depth)
        # One table lookup per 16 bits of the cell (depth <= 31: at most two).
        chunks = [cell] if depth <= 16 else [cell & np.uint32(0xFFFF), cell >> np.uint32(16)]
        for number, chunk in enumerate(chunks):
            spread = _spread_table(k, 16 * number * k + (k - 1 - j))[chunk]
            if code is None:
                code = spread
            else:
                code |= spread
    return code


def _value_order(values: np.ndarray) -> np.ndarray:
    """Rows in value order (NaN last). Rows of equal value may come in any order: nothing a tree holds
    depends on it (its nodes are value ranges, and a node's representative row stands for its value),
    so numpy's vectorized sort serves, several times faster than a stable one on distinct values."""
    return np.argsort(values)
