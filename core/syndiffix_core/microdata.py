"""Microdata generation: harvested buckets -> synthetic float values -> typed columns.

Per bucket, `count` rows; per dimension a value drawn uniformly in the bucket's range (the exact point
for singular dimensions). A range starting at the column's null mapping gives null. Strings: the range
is turned into the integer indices it covers; the value is the exact string for a singular range or
for a "safe" index (a singularity of the column's 1-dim tree that passes LCF), otherwise the common
prefix of the range's first and last strings + "*" + the drawn index (e.g. `city_*37`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .columns import ColumnCodec, ColumnKind
from .forest import Forest
from .harvest import Buckets, Harvester


@dataclass
class Microdata:
    """Synthetic rows of one set of columns, in bucket order (not shuffled).

    `columns` are forest column indices; `values[i]` is the typed Series of column columns[i];
    `floats[:, i]` the float value each row was generated from (codec space: original units, string
    index, seconds since 1800; NaN = null), which is what stitching sorts and splits on.
    """

    columns: tuple[int, ...]
    values: list[pd.Series]
    floats: np.ndarray

    @property
    def row_count(self) -> int:
        return self.floats.shape[0]


class MicrodataBuilder:
    """Materializes the microdata of any column subset of one forest."""

    def __init__(self, forest: Forest, codecs: Sequence[ColumnCodec], harvester: Harvester | None = None):
        self.forest = forest
        self.codecs = list(codecs)
        self.harvester = harvester or Harvester(forest)
        self._safe_strings: dict[int, np.ndarray] = {}

    def materialize(self, columns: Sequence[int]) -> Microdata:
        columns = tuple(sorted(columns))
        buckets = self.harvester.harvest(columns)
        rng = self.forest.salt.rng("microdata", *(self.forest.column_names[j] for j in columns))
        return self.from_buckets(columns, buckets, rng)

    def from_buckets(self, columns: tuple[int, ...], buckets: Buckets, rng: np.random.Generator) -> Microdata:
        row_bucket = np.repeat(np.arange(buckets.size), buckets.count)
        low = buckets.low[row_bucket]
        high = buckets.high[row_bucket]
        floats = np.empty(low.shape)
        values = []
        for position, column in enumerate(columns):
            lo, hi = low[:, position], high[:, position]
            null = lo == self.forest.null_values[column]
            codec = self.codecs[column]
            if codec.kind == ColumnKind.STRING:
                series, drawn = self._strings(column, codec, lo, hi, null, rng)
            else:
                drawn = np.where(lo == hi, lo, lo + rng.random(lo.size) * (hi - lo))
                drawn[null] = np.nan
                series = codec.decode(drawn)
            floats[:, position] = drawn
            values.append(series)
        return Microdata(columns, values, floats)

    def safe_string_indices(self, column: int) -> np.ndarray:
        """Sorted string indices that are LCF-passing singularities of the column's 1-dim tree."""
        if column not in self._safe_strings:
            tree = self.forest.tree((column,))
            found = []
            for level in tree.levels:
                nodes = level.singular & ~level.lcf_low
                found.append(self.forest.values[level.rep_row[nodes], column])
            safe = np.unique(np.concatenate(found)) if found else np.zeros(0)
            self._safe_strings[column] = safe[safe != self.forest.null_values[column]]
        return self._safe_strings[column]

    def _strings(self, column, codec, lo, hi, null, rng):
        last = len(codec.strings) - 1
        singular = lo == hi
        first_index = np.clip(np.ceil(lo), 0, max(last, 0))
        last_index = np.clip(np.ceil(hi) - 1, 0, max(last, 0))
        # A non-singular range always holds an index in practice; if a cell holds none, use its start.
        empty = last_index < first_index
        last_index = np.where(empty, first_index, last_index)
        span = last_index - first_index + 1
        drawn = np.where(singular, lo, first_index + np.floor(rng.random(lo.size) * span))
        drawn = np.clip(np.rint(drawn), 0, max(last, 0))
        safe = self.safe_string_indices(column)
        exact = singular | np.isin(drawn, safe)
        drawn[null] = np.nan
        if last < 0:  # the column holds nulls only
            return codec.decode(np.full(lo.size, np.nan)), drawn
        series = codec.decode_in_ranges(
            drawn, exact, first_index.astype(np.int64), last_index.astype(np.int64)
        )
        return series, drawn
