"""Which stitch columns a stitch should agree on first: those that pin down a column of either side.

A stitch pairs rows whose stitch values agree where both sides have such rows; the rows left over (a
value combination one side holds a few more times than the other) pair with rows of other values. Each
stitch column of such a pair then comes from one side, and its links to the other side's columns break
for that row. Most links bend a little under that; a deterministic one snaps: a maker's code and its
name, a drive system's code and its description. On openintro epa2021 (1,108 cars, 28 columns) 17 % of
the pairs of a stitch on (maker code, transmission) disagreed on the code, and the code named another
maker than the name beside it on 20 % of the output's rows.

So the stitch columns of names that determine a column of either side, or are determined by one, are
*tied* (`tied_columns`): the stitch splits on them alone and pairs the rows left over on them before
it pairs the rest in order. Only names: a stitch column with an order (a number, a date, a graded
label) pairs the rows left over with rows of neighbouring values, which keeps its links roughly, and
pairing on it first pairs the other stitch columns worse (DAAG science, a school's number tied: the
class number beside it went from 0.3 % to 8 % of pairs unequal, and its correlations got worse).
Everything is read from the two sides' synthetic rows, which are anonymized already: no privacy is
spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from syndiffix_core.stitching import Microtable

# How much one column determines another: the share of rows holding their value's most frequent
# partner, beyond the share the other column's most frequent value holds alone (0: no better than
# guessing the commonest value, 1: a function). A maker's code of its name, on a cluster's synthetic
# rows: 0.90-0.97; a drive system of its description: 0.98; unrelated codes: about 0.
DETERMINES = 0.8
# ... measured only for a determining column with at least this many rows per value on average: with
# fewer, a column "determines" another by chance (epa2021's model index, 502 values on 1,108 rows,
# determines engine size 0.8 on a cluster's rows).
MIN_ROWS_PER_VALUE = 20
# The links are measured on at most this many rows of each side (every k-th).
MEASURED_ROWS = 20_000


def tied_columns(left: Microtable, right: Microtable, stitch_columns: Sequence[int]) -> list[int]:
    """The stitch columns of names (`Microtable.names` of both sides: neither found an order in them)
    that determine, or are determined by, a column only one side holds (at least DETERMINES, on that
    side's rows), the most strongly tied first (ties in stitch column order)."""
    stitch = [c for c in stitch_columns if c in left.names and c in right.names]
    if not stitch:
        return []
    strength = dict.fromkeys(stitch, 0.0)
    for side, other in ((left, right), (right, left)):
        rows = np.arange(0, side.num_rows, max(1, side.num_rows // MEASURED_ROWS))
        own = [c for c in side.columns if c not in other.columns]
        if not own or len(rows) < MIN_ROWS_PER_VALUE:
            continue
        codes = {c: _codes(side, c, rows) for c in [*stitch, *own]}
        for column in stitch:
            for partner in own:
                link = max(
                    _determines(codes[column], codes[partner]), _determines(codes[partner], codes[column])
                )
                strength[column] = max(strength[column], link)
    tied = [c for c in stitch if strength[c] >= DETERMINES]
    return sorted(tied, key=lambda c: -strength[c])


def _codes(table: Microtable, column: int, rows: np.ndarray) -> np.ndarray:
    """The column's values at `rows` as codes 0..k-1 (nulls one more value)."""
    if column in table.value_columns:
        values = pd.Series(table.column_values(column)[rows])
    else:
        values = table.typed[column].take(rows)
    return pd.factorize(values, use_na_sentinel=False)[0]


def _determines(by: np.ndarray, of: np.ndarray) -> float:
    """How far the codes `by` determine the codes `of` (DETERMINES), 0 where `by` has too few rows per
    value to tell."""
    rows = len(by)
    values, partners = int(by.max()) + 1, int(of.max()) + 1
    if values * MIN_ROWS_PER_VALUE > rows or partners < 2:
        return 0.0
    joint = np.bincount(by * partners + of, minlength=values * partners).reshape(values, partners)
    guessed = joint.sum(axis=0).max() / rows
    if guessed >= 1.0:
        return 0.0
    held = joint.max(axis=1).sum() / rows
    return float(max(0.0, (held - guessed) / (1.0 - guessed)))
