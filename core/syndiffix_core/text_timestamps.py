"""Text columns read as time: a string column of ISO 8601 dates or date-times (`IsoTextCodec`) is
synthesized as a timestamp, so that its synthetic values are dates and times in the source's layout,
drawn from anonymized ranges like any timestamp's, rather than `prefix*N` labels, and so that it takes
part in the clusters' rank correlations.

Whether a column is read so must not tell whether any one entity's value is odd: the rows whose text
is outside the layout (a stray "unknown", a date that does not exist) pass the noisy low-count filter
that every bucket passes. When they are a low count they are read as null; otherwise the column stays
text. See docs/columns.md, "Dates and times held as text".
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
import pandas as pd

from syndiffix_core.anonymizer import CountAnonymizer, Entities, SortedEntities
from syndiffix_core.columns import ColumnCodec, IsoTextCodec, StringCodec


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
        rows = np.flatnonzero(outside)
        if rows.size and not anonymizer.low_count(SortedEntities(entities, rows), 0, rows.size):
            continue
        codecs[position] = iso
        matrix[:, position] = encoded
