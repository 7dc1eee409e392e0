"""Reading a CSV file into pandas with pyarrow's multi-threaded parser, typed as pandas would type it.

`read_declared(path, columns)` reads the listed columns, each as one of: "float64" (numpy float64, NaN
for an empty field), "Int64" (pandas' nullable integer), "string" (pandas' `string` dtype) or `str`
(pandas' default string dtype, NaN for an empty field) — the dtypes `pd.read_csv(dtype=...,
keep_default_na=False, na_values=[""])` gives, with the same values. It returns None whenever arrow
rejects the file or a value (a number that does not parse, invalid UTF-8, a ragged row, duplicate or
missing header names): the caller then reads the file with pandas as before, which either accepts
it the same way or names the bad value. Arrow's parser is several times faster than pandas' on large
files and uses every core.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

_ARROW_TYPES = {"float64": pa.float64(), "Int64": pa.int64(), "string": pa.string(), str: pa.string()}
_PANDAS_TYPES = {
    "string": pd.StringDtype("pyarrow"),
    str: pd.StringDtype("pyarrow", na_value=np.nan),
}


def read_declared(path: Path, columns: Mapping[str, object]) -> pd.DataFrame | None:
    """The `columns` of the CSV file (name -> "float64", "Int64", "string" or str), or None if arrow
    cannot read them exactly as pandas would."""
    if not columns:
        return None
    try:
        table = pa_csv.read_csv(
            path,
            parse_options=pa_csv.ParseOptions(newlines_in_values=True),
            convert_options=pa_csv.ConvertOptions(
                column_types={name: _ARROW_TYPES[dtype] for name, dtype in columns.items()},
                include_columns=list(columns),
                null_values=[""],
                strings_can_be_null=True,
                quoted_strings_can_be_null=True,
            ),
        )
    except (pa.ArrowException, OSError):
        return None
    if table.column_names != list(columns):
        return None
    frame = {}
    for name, dtype in columns.items():
        column = table.column(name)
        if dtype == "float64":
            frame[name] = pd.Series(column.to_numpy(zero_copy_only=False), name=name, dtype=np.float64)
        elif dtype == "Int64":  # not through pd.array, which goes through float64 and rounds past 2**53
            values = column.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
            null = column.is_null().to_numpy(zero_copy_only=False)
            frame[name] = pd.Series(pd.arrays.IntegerArray(values, null), name=name)
        else:
            frame[name] = pd.Series(pd.array(column, dtype=_PANDAS_TYPES[dtype]), name=name)
    return pd.DataFrame(frame, copy=False)
