"""Ordering rows by a key with ties in random order: `np.lexsort((randoms, keys))`, computed faster;
and the stable order of a key, `np.argsort(keys, kind="stable")`, the same way.

Stitching orders every column of one side this way at every stitch (stitching.py, `_calibrated_rows`),
twice per column; at a million rows the two lexsorts were two thirds of a stitch. A lexsort sorts the
random numbers as a whole and then the keys stably, both with merge sorts. Here the keys are sorted with
numpy's (vectorized, unstable) default sort, and only the rows whose key is tied get ordered by their
random number. Keys that are whole numbers within a span of 2**31 (codes, counts, booleans, dates) need no
sort of their own: the key itself is the high part of one integer sort key, the random number the low
part. The result is the same permutation: the tests compare it with `np.lexsort`. A cluster's microdata
ranks its rows by a drawn value in every column (microdata.py): `stable_order` replaces that merge sort
the same way, the position taking the random number's place.
"""

from __future__ import annotations

import numpy as np

from syndiffix_core.distinct_rows import whole_number_steps

# `Generator.random` gives multiples of 2**-53, so a random number times 2**53 is an exact integer.
_RANDOM_BITS = 53
# Whole-number keys spanning fewer values than this are sorted in one composite integer sort.
_WHOLE_SPAN = 1 << 31


def order_with_random_ties(keys: np.ndarray, randoms: np.ndarray) -> np.ndarray:
    """The permutation `np.lexsort((randoms, keys))`: rows by key (NaN last, NaNs equal), rows of equal
    keys by their random number, rows equal in both by position. `randoms`: `Generator.random` draws."""
    ranks = _whole_number_ranks(keys)
    if ranks is not None:
        return order_by_rank_with_random_ties(ranks, randoms)
    return _order_with_random_ties(keys, randoms)


def ranked_order_with_random_ties(keys: np.ndarray, randoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`order_with_random_ties(keys, randoms)` and integer ranks of the keys, in the keys' order and with
    their ties (to order some of the rows again with `order_by_rank_with_random_ties`): whole-number
    keys' steps as they are, or else dense ranks."""
    ranks = _whole_number_ranks(keys)
    if ranks is not None:
        return order_by_rank_with_random_ties(ranks, randoms), ranks
    order = _order_with_random_ties(keys, randoms)
    return order, dense_ranks(keys, order)


def order_by_rank_with_random_ties(ranks: np.ndarray, randoms: np.ndarray) -> np.ndarray:
    """`order_with_random_ties` for keys given as non-negative integer ranks (equal keys, equal ranks)."""
    return _order_by_rank(ranks, randoms, np.arange(len(ranks)))


def stable_rank_order(ranks: np.ndarray) -> np.ndarray:
    """`stable_order` of non-negative integer ranks: one integer sort of rank and position."""
    return _rows_by_rank(ranks, np.arange(len(ranks)))


def stable_order(keys: np.ndarray) -> np.ndarray:
    """The permutation `np.argsort(keys, kind="stable")` (NaN last, NaNs equal, ties by position).
    Whole-number keys make one integer sort with the position (as in `order_with_random_ties`); other
    keys are sorted with the (unstable) default sort and only the rows of tied keys ordered again."""
    ranks = _whole_number_ranks(keys)
    if ranks is not None:
        return stable_rank_order(ranks)
    order = np.argsort(keys)
    tied = _tied_runs(keys, order)
    if tied is not None:
        positions, run = tied
        order[positions] = _rows_by_rank(run, order[positions])
    return order


def _order_with_random_ties(keys: np.ndarray, randoms: np.ndarray) -> np.ndarray:
    """`order_with_random_ties` for keys that are not whole numbers: the (unstable) default sort, then
    only the rows of tied keys are ordered by their random number."""
    order = np.argsort(keys)
    tied = _tied_runs(keys, order)
    if tied is not None:
        positions, run = tied
        rows = order[positions]
        order[positions] = rows[_order_runs(run, randoms[rows], rows)]
    return order


def _tied_runs(keys: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The positions in `order` (the rows in key order) of rows whose key is tied with another's, and
    the run of equal keys each lies in (ascending); None without ties."""
    sorted_keys = keys[order]
    tied_with_next = sorted_keys[1:] == sorted_keys[:-1]
    nan = np.isnan(sorted_keys)
    tied_with_next |= nan[1:] & nan[:-1]
    if not tied_with_next.any():
        return None
    run = np.concatenate(([0], np.cumsum(~tied_with_next)))
    in_tie = np.zeros(len(keys), dtype=bool)
    in_tie[1:] |= tied_with_next
    in_tie[:-1] |= tied_with_next
    positions = np.flatnonzero(in_tie)
    return positions, run[positions]


def _rows_by_rank(ranks: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`rows` (non-negative integers) sorted by rank, then by row: one integer sort of both."""
    row_bits = max(1, int(rows.max(initial=0)).bit_length())
    if int(ranks.max(initial=0)).bit_length() + row_bits > 63:
        return rows[np.lexsort((rows, ranks))]
    keys = ranks.astype(np.int64) << row_bits
    keys |= rows
    keys.sort()
    keys &= (1 << row_bits) - 1
    return keys


def dense_ranks(keys: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per row, the number of distinct keys below its own (NaN last, NaNs equal); `order`: the rows in
    key order (as `order_with_random_ties` gives them)."""
    sorted_keys = keys[order]
    new_value = sorted_keys[1:] != sorted_keys[:-1]
    new_value &= ~(np.isnan(sorted_keys[1:]) & np.isnan(sorted_keys[:-1]))
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[order] = np.concatenate(([0], np.cumsum(new_value)))
    return ranks


def _whole_number_ranks(keys: np.ndarray) -> np.ndarray | None:
    """Each key's steps from the smallest (NaN: one step past the largest) when every non-NaN key is a
    whole number and they span fewer than _WHOLE_SPAN values; else None. A step is the largest whole
    number that divides every key's distance from the smallest (a date column's keys are seconds, a
    day apart): the fewer bits the ranks take, the more bits of each random number the sort keeps."""
    if len(keys) == 0:
        return None
    nan = np.isnan(keys)
    present = keys[~nan] if nan.any() else keys
    if len(present) == 0:
        return np.zeros(len(keys), dtype=np.int64)
    grid = whole_number_steps(present)
    if grid is None or grid[1] - grid[0] >= _WHOLE_SPAN:
        return None
    low, high, step, steps = grid
    if not nan.any():
        return steps
    ranks = np.full(len(keys), (high - low) // step + 1, dtype=np.int64)
    ranks[~nan] = steps
    return ranks


def _order_runs(run: np.ndarray, randoms: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The order of tied rows (ascending `run`) by run, then random number, then row."""
    return _order_by_rank(np.concatenate(([0], np.cumsum(run[1:] != run[:-1]))), randoms, rows)


def _order_by_rank(ranks: np.ndarray, randoms: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The order of rows by `ranks` (non-negative integers), then random number, then row.

    One integer sort: the rank in the high bits of an int64, then as many of the random number's bits as
    fit, then the row's position, so that sorting the keys themselves gives the order (a plain sort of
    integers takes less than half the time of an argsort of them). Truncating keeps the random numbers'
    order, so only rows that share both rank and kept bits (rare) are ordered again on the whole random
    number and the row."""
    position_bits = max(1, (len(ranks) - 1).bit_length())
    random_bits = min(_RANDOM_BITS, 63 - position_bits - int(ranks.max(initial=0)).bit_length())
    if random_bits < 0:  # beyond 2**31 rows: too many for the position to fit next to the rank
        return _order_by_rank_argsort(ranks, randoms, rows)
    # A random number's top bits: it is a multiple of 2**-53, so scaling by a power of two is exact.
    kept = (randoms * float(1 << random_bits)).astype(np.int64)
    kept <<= position_bits
    keys = np.left_shift(ranks, random_bits + position_bits, dtype=np.int64)
    keys |= kept
    del kept
    keys |= np.arange(len(ranks), dtype=np.int64)
    keys.sort()
    order = keys & ((1 << position_bits) - 1)
    keys >>= position_bits  # rank and kept bits
    return _reorder_shared(order, keys, randoms, rows)


def _order_by_rank_argsort(ranks: np.ndarray, randoms: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """`_order_by_rank` without the row's position in the sort key: an argsort of rank and random bits."""
    random_bits = min(_RANDOM_BITS, 63 - int(ranks.max(initial=0)).bit_length())
    kept = (randoms * float(1 << _RANDOM_BITS)).astype(np.int64) >> (_RANDOM_BITS - random_bits)
    composite = (ranks.astype(np.int64) << random_bits) | kept
    order = np.argsort(composite)
    return _reorder_shared(order, composite[order], randoms, rows)


def _reorder_shared(
    order: np.ndarray, ordered: np.ndarray, randoms: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """`order` with every run of equal sort keys (`ordered`: the keys in that order) ordered again on
    the whole random number and the row, in place."""
    shared = ordered[1:] == ordered[:-1]
    if shared.any():
        again = np.zeros(len(order), dtype=bool)
        again[1:] |= shared
        again[:-1] |= shared
        positions = np.flatnonzero(again)
        subset = order[positions]
        order[positions] = subset[np.lexsort((rows[subset], randoms[subset], ordered[positions]))]
    return order
