"""Where a weakly linked branch's shortfall goes: its child cells that hold no buckets.

A multi-dim branch whose children's buckets hold less than `harvest.RESCALED_SHARE` of its noisy count
keeps them and refines the difference. Refined over the branch's whole box, those rows follow the
lower-dim trees there, which still hold the rows that the children's buckets already emit: the cells
that hold buckets get them a second time, and every dependence the tree holds is sharpened. Where the
columns are strongly linked, that sharpening offsets what refinement blurs (refined rows keep a
column's links only as far as the node's ranges carry them), so the harvest keeps it. In a tree whose
columns are all weakly linked (`harvest.WEAK_LINK`) there is little to blur, and the sharpening is
the error: a link of 0.05 came out at 0.08. There (in trees of at most `harvest.CELLS_MAX_ROWS` rows:
the cells take more memory than the branch) the shortfall goes to the branch's child cells that hold
no bucket, each cell a placeholder refined under its own subnodes, one level narrower than the
branch's.

A cell's weight is how the lower-dim trees fill it: per dropped dimension i, the share of the cell's
subnode among the children of the branch's subnode in the (k-1)-dim tree, and the (k-1)-th root of
their product (each column's share then counts once). A subnode that did not split says nothing and
is left out.

Privacy: only anonymized counts and the tree's anonymized structure decide. A cell is a candidate
unless a child there holds buckets (which passed LCF), whether or not the tree has a node there: a
child that failed LCF is not told apart from an empty cell. The weights read the counts of lower-dim
nodes that passed LCF and a constant (`LOW_CELL_COUNT`) for one that failed it or is absent, and a cell
takes its branch's representative row and singular points, never a row or value of its own. A branch
singular in a dimension (all its rows share one value) places rows only on its point's side.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# What a lower-dim subnode that failed LCF (or has no node) counts for in a cell's weight: its rows
# are few, and an empty cell must not read differently from a rare one.
LOW_CELL_COUNT = 1.0


@dataclass
class ShortfallCells:
    """Placeholders for the child cells of shortfall branches: per cell its branch (joined index at
    the branch's level), child bits, subnodes at the cells' depth (-1 none) and share of the shortfall."""

    branch: np.ndarray
    bits: np.ndarray
    subnodes: np.ndarray
    count: np.ndarray

    @classmethod
    def of(cls, forest, trees, level, depth, below, parent_below, held, shortfall) -> ShortfallCells | None:
        """The cells of the branches of `level` (at `depth`) with a `shortfall`, given the level below
        (`below`: its nodes' parents `parent_below` and whether each `held` buckets); None if no branch
        has a cell without buckets. Per-branch figures are (branches, 2^k) arrays, cells by child bits."""
        k = trees[0].dims
        branches = np.flatnonzero(shortfall > 0)
        bits = np.arange(1 << k, dtype=np.int64)
        candidate = ~_held_cells(branches, bits, below, held, parent_below, k)
        subnodes = np.full((branches.size, bits.size, k), -1, dtype=np.int32)
        log_share = np.zeros((branches.size, bits.size))
        tree_of = level.tree_of[branches] if level.tree_of is not None else np.zeros(branches.size, np.int64)
        for t in np.unique(tree_of).tolist():
            mine = np.flatnonzero(tree_of == t)
            tree = trees[t]
            if depth + 1 >= len(tree.levels):  # branches at the depth limit: no cells to place rows in
                candidate[mine] = False
                continue
            candidate[mine] &= _on_point_side(forest, tree, level, branches[mine], bits, depth + 1)
            for i in range(k):
                share, subnodes[mine, :, i] = _subnode_shares(
                    forest, tree, level, branches[mine], bits, depth, i
                )
                log_share[mine] += np.log(share)
        weight = np.where(candidate, np.exp(log_share / (k - 1)), 0.0)
        total = weight.sum(axis=1)
        row, cell = np.nonzero((weight > 0) & (total[:, None] > 0))
        if row.size == 0:
            return None
        branch = branches[row]
        share = shortfall[branch] * weight[row, cell] / total[row]
        return cls(branch, bits[cell], subnodes[row, cell], share)


def _held_cells(branches, bits, below, held, parent_below, k) -> np.ndarray:
    """(branches, cells): whether the branch's child with those bits is a node below holding buckets."""
    if below.key.size == 0:
        return np.zeros((branches.size, bits.size), dtype=bool)
    # (parent << k | bits) is ascending over the joined level below: trees one after the other,
    # each in Morton order.
    child_keys = (parent_below.astype(np.int64) << k) | (below.key.astype(np.int64) & ((1 << k) - 1))
    wanted = (branches.astype(np.int64)[:, None] << k) | bits[None, :]
    found = np.minimum(np.searchsorted(child_keys, wanted), child_keys.size - 1)
    return (child_keys[found] == wanted) & held[found]


def _on_point_side(forest, tree, level, branches, bits, child_depth) -> np.ndarray:
    """(branches, cells): False for cells on the other side of a singular dimension's point than
    the branch's rows."""
    ok = np.ones((branches.size, bits.size), dtype=bool)
    singular_dims = level.singular_dims[branches].astype(np.int64)
    rows = np.flatnonzero(singular_dims)
    if rows.size == 0:
        return ok
    values = forest.values_at(level.rep_row[branches[rows]], tree.columns)
    point_bits = np.mod(tree.cells_of(values, child_depth), 2).astype(np.int64)
    on_side = np.ones((rows.size, bits.size), dtype=bool)
    for j in range(tree.dims):
        singular = ((singular_dims[rows] >> j) & 1 == 1)[:, None]
        cell_bit = ((bits >> (tree.dims - 1 - j)) & 1)[None, :]
        on_side &= ~singular | (cell_bit == point_bits[:, j, None])
    ok[rows] = on_side
    return ok


def _subnode_shares(forest, tree, level, branches, bits, depth, drop) -> tuple[np.ndarray, np.ndarray]:
    """(branches, cells): in the (k-1)-dim tree that drops dimension `drop`, each cell's subnode's
    share among the children of its branch's subnode (1 where that did not split), and the cell's
    subnode at depth + 1 (-1: none, or one that failed LCF)."""
    k = tree.dims
    sub_tree = forest.tree(tree.columns[:drop] + tree.columns[drop + 1 :])
    shape = (branches.size, bits.size)
    if depth + 1 >= len(sub_tree.levels) or sub_tree.levels[depth + 1].size == 0:
        return np.ones(shape), np.full(shape, -1, dtype=np.int32)
    parent = level.subnodes[branches, drop].astype(np.int64)
    split = parent >= 0
    split[split] = sub_tree.levels[depth].branch[parent[split]]
    by_sub_bits = _children_by_bits(sub_tree, depth, np.where(split, parent, 0), split)
    counts = np.where(
        by_sub_bits >= 0, sub_tree.levels[depth + 1].noisy_count[np.maximum(by_sub_bits, 0)], LOW_CELL_COUNT
    )
    shares = np.ones(by_sub_bits.shape)
    shares[split] = counts[split] / counts[split].sum(axis=1, keepdims=True)
    dropped = k - 1 - drop  # bit position of dimension `drop` in the child bits
    sub_bits = ((bits >> (dropped + 1)) << dropped) | (bits & ((1 << dropped) - 1))
    return shares[:, sub_bits], by_sub_bits[:, sub_bits]


def _children_by_bits(tree, depth, parent, split) -> np.ndarray:
    """(parents, 2^k): the index at depth + 1 of each `split` parent's child by child bits, -1 where
    there is none or it failed LCF."""
    k = tree.dims
    children = tree.levels[depth + 1]
    keys = children.key
    starts, stops = tree.children(depth, parent)
    lengths = np.where(split, stops - starts, 0)
    row = np.repeat(np.arange(parent.size), lengths)
    first = np.cumsum(lengths) - lengths
    child = np.arange(row.size) - first[row] + starts[row]
    passed = ~children.lcf_low[child]
    table = np.full((parent.size, 1 << k), -1, dtype=np.int32)
    table[row[passed], keys[child[passed]] & ((1 << k) - 1)] = child[passed]
    return table
