"""Forms of timestamp columns that depend on their rows, decided by the anonymizer: a text column of
ISO 8601 dates or date-times is read as time (`read_text_timestamps`), and a timestamp column whose
values are firsts of months or years stays on that calendar (`keep_calendars`).

Neither may tell whether any one entity's value is odd (`unknown` in a column of dates, a 14 March in
a column of months): the rows that do not fit the form pass the noisy low-count filter that every
bucket passes (counted by entity, the noise seeded by the entities). When they are a low count the
column takes the form (odd text is read as null; an odd instant is synthesized like the others and
lands on the calendar); otherwise it does not. See docs/columns.md.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from syndiffix_core import calendar_grid
from syndiffix_core.anonymizer import CountAnonymizer, Entities, SortedEntities
from syndiffix_core.columns import ColumnCodec, DateCodec, IsoTextCodec, StringCodec, TimestampCodec

# Rows whose entities `_clearly_many` counts before it asks the anonymizer.
PROBE_ROWS = 10_000


def read_text_timestamps(
    codecs: list[ColumnCodec],
    matrix: np.ndarray,
    entities: Entities,
    anonymizer: CountAnonymizer,
    declared: Collection[str],
) -> None:
    """Swap in place, in `codecs` and the encoded `matrix`, each undeclared string column (not a
    pandas category) that reads as ISO text for its `IsoTextCodec` and encoding."""
    for position, codec in enumerate(codecs):
        if (
            not isinstance(codec, StringCodec)
            or isinstance(codec.dtype, pd.CategoricalDtype)
            or codec.name in declared
        ):
            continue
        found = IsoTextCodec.from_strings(codec, matrix[:, position])
        if found is None:
            continue
        iso, encoded, outside = found
        if _few(np.flatnonzero(outside), entities, anonymizer):
            codecs[position] = iso
            matrix[:, position] = encoded


def keep_calendars(
    codecs: list[ColumnCodec], matrix: np.ndarray, entities: Entities, anonymizer: CountAnonymizer
) -> None:
    """Set `calendar` on each timestamp codec (not tz-aware) whose values are firsts of a month ("month")
    and, further, 1 Januaries ("year"), but for a low count of rows."""
    for position, codec in enumerate(codecs):
        # Times of day (TimeCodec) lie on 1800-01-01; zoned months start at local, not UTC, midnights.
        if not isinstance(codec, (TimestampCodec, DateCodec, IsoTextCodec)) or isinstance(
            codec.dtype, pd.DatetimeTZDtype
        ):
            continue
        values = matrix[:, position]
        present = np.flatnonzero(~np.isnan(values))
        for unit in ("month", "year"):
            # A daily column is told from its first rows, without reading every row's date.
            probe = present[:PROBE_ROWS]
            off_probe = probe[~calendar_grid.on_grid(values[probe], unit)]
            if _clearly_many(off_probe, entities, anonymizer.max_low_count):
                break
            off = present[~calendar_grid.on_grid(values[present], unit)]
            if not _few(off, entities, anonymizer):
                break
            codec.calendar = unit


def _few(positions: np.ndarray, entities: Entities, anonymizer: CountAnonymizer) -> bool:
    """Whether the rows at `positions` are a low count (no rows are)."""
    if positions.size == 0:
        return True
    if _clearly_many(positions, entities, anonymizer.max_low_count):
        return False
    return anonymizer.low_count(SortedEntities(entities, positions), 0, positions.size)


def _clearly_many(positions: np.ndarray, entities: Entities, max_low_count: int) -> bool:
    """Whether the rows hold more entities than any low count can (a daily column has millions of rows
    off the calendar): counted on the first rows alone, so a large table is not sorted for it."""
    if entities.implicit:
        return positions.size > max_low_count
    probe = positions[:PROBE_ROWS]
    return all(np.unique(ids[probe]).size > max_low_count for ids in entities.ids)
