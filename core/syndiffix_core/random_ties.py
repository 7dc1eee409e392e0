"""Ordering rows by a key with ties in random order: `np.lexsort((randoms, keys))`, computed faster.

Stitching orders every column of one side this way at every stitch (stitching.py, `_calibrated_rows`),
twice per column; at a million rows the two lexsorts were two thirds of a stitch. A lexsort sorts the
random numbers as a whole and then the keys stably, both with merge sorts. Here the keys are sorted with
numpy's (vectorized, unstable) default sort, and only the rows whose key is tied get ordered by their
random number. The result is the same permutation: the tests compare it with `np.lexsort`.
"""

from __future__ import annotations

import numpy as np

# `Generator.random` gives multiples of 2**-53, so a random number times 2**53 is an exact integer.
_RANDOM_BITS = 53


def order_with_random_ties(keys: np.ndarray, randoms: np.ndarray) -> np.ndarray:
    """The permutation `np.lexsort((randoms, keys))`: rows by key (NaN last, NaNs equal), rows of equal
    keys by their random number, rows equal in both by position. `randoms`: `Generator.random` draws."""
    order = np.argsort(keys)
    sorted_keys = keys[order]
    tied_with_next = sorted_keys[1:] == sorted_keys[:-1]
    nan = np.isnan(sorted_keys)
    tied_with_next |= nan[1:] & nan[:-1]
    if not tied_with_next.any():
        return order
    # Runs of equal keys in sorted order; only rows in runs longer than one need reordering.
    run = np.concatenate(([0], np.cumsum(~tied_with_next)))
    in_tie = np.zeros(len(keys), dtype=bool)
    in_tie[1:] |= tied_with_next
    in_tie[:-1] |= tied_with_next
    positions = np.flatnonzero(in_tie)
    rows = order[positions]
    order[positions] = rows[_order_runs(run[positions], randoms[rows], rows)]
    return order


def _order_runs(run: np.ndarray, randoms: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The order of tied rows (ascending `run`) by run, then random number, then row.

    One integer sort: the run's rank in the high bits of an int64, below it as many of the random
    number's bits as fit. Truncating keeps the random numbers' order, so only rows that share both rank
    and kept bits (rare) are ordered again on the whole random number and the row."""
    ranks = np.concatenate(([0], np.cumsum(run[1:] != run[:-1])))
    random_bits = min(_RANDOM_BITS, 63 - int(ranks[-1]).bit_length())
    kept = (randoms * float(1 << _RANDOM_BITS)).astype(np.int64) >> (_RANDOM_BITS - random_bits)
    composite = (ranks.astype(np.int64) << random_bits) | kept
    order = np.argsort(composite)
    ordered = composite[order]
    shared = ordered[1:] == ordered[:-1]
    if shared.any():
        again = np.zeros(len(order), dtype=bool)
        again[1:] |= shared
        again[:-1] |= shared
        positions = np.flatnonzero(again)
        subset = order[positions]
        order[positions] = subset[np.lexsort((rows[subset], randoms[subset], composite[subset]))]
    return order
