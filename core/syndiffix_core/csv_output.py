"""CSV output of the `syndiffix` CLI: the text `DataFrame.to_csv(index=False)` writes, built with pyarrow.

pandas formats most cells in Python (one str per value) and writes rows through the csv module; here
every column becomes one arrow string array and rows are joined by arrow's string kernels, written in
batches. The text is the same as pandas' (`tests/core/test_csv_output.py` compares them):
- integers and booleans as Python prints them (`True`/`False`), nulls as empty fields;
- floats as Python's repr: a column whose values are decimals of at most 6 places below 1e15 is
  formatted from its scaled integers (for such a double the shortest round-trip digits are exactly that
  decimal); other values (exponents, more digits, -0.0) through numpy's repr;
- timestamps without a time zone whose values are whole seconds: `%Y-%m-%d %H:%M:%S`, or `%Y-%m-%d`
  when all are midnight (pandas' rule); other columns are formatted by pandas' own CSV value formatter;
- fields holding a comma, a quote or a line break are quoted, inner quotes doubled (csv.QUOTE_MINIMAL).
A one-column frame goes through `to_csv` itself (the csv module quotes a lone empty field).
"""

from __future__ import annotations

from typing import BinaryIO

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from pandas.core.internals.blocks import get_values_for_csv

BATCH_ROWS = 200_000
_MAX_DECIMALS = 6
_FIXED_LIMIT = 1e15  # below: at most 15 significant digits, so distinct decimals are distinct doubles


def write_csv(frame: pd.DataFrame, target: BinaryIO) -> None:
    """Write `frame` (without its index) to a binary file object as `frame.to_csv(index=False)` would."""
    if frame.shape[1] < 2:
        target.write(frame.to_csv(index=False).encode("utf-8"))
        return
    header = pc.binary_join_element_wise(*(_quoted(pa.array([str(name)])) for name in frame.columns), ",")
    target.write((header[0].as_py() + "\n").encode("utf-8"))
    for start in range(0, len(frame), BATCH_ROWS):
        batch = frame.iloc[start : start + BATCH_ROWS]
        cells = [_formatted(batch.iloc[:, j]) for j in range(frame.shape[1])]
        # The line break joins the last cell (a narrow column) rather than the whole row.
        cells[-1] = pc.binary_join_element_wise(
            cells[-1], "", "\n", null_handling="replace", null_replacement=""
        )
        lines = pc.binary_join_element_wise(*cells, ",", null_handling="replace", null_replacement="")
        target.write(_text_bytes(lines))


def _text_bytes(lines: pa.Array) -> bytes:
    """The concatenated values of a null-free string array, straight from its data buffer."""
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=len(lines) + 1, offset=lines.offset * 4)
    return lines.buffers()[2].to_pybytes()[offsets[0] : offsets[-1]]


def _formatted(series: pd.Series) -> pa.Array:
    """One column's cells as CSV text (null for an empty field)."""
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return pc.if_else(pa.Array.from_pandas(series), "True", "False")
    if pd.api.types.is_integer_dtype(dtype):
        return pc.cast(pa.Array.from_pandas(series), pa.string())
    if dtype == np.float64 or dtype == pd.Float64Dtype():
        return _floats(series.to_numpy(dtype=np.float64, na_value=np.nan))
    if isinstance(dtype, pd.StringDtype) or (
        _is_object(dtype) and pd.api.types.infer_dtype(series) == "string"
    ):
        return _quoted(pa.Array.from_pandas(series, type=pa.string()))
    if isinstance(dtype, np.dtype) and dtype.kind == "M":
        fast = _whole_second_timestamps(series.to_numpy())
        if fast is not None:
            return fast
    text = get_values_for_csv(series.array, na_rep="", float_format=None, date_format=None, decimal=".")
    values = pa.array(np.asarray(text, dtype=object), type=pa.string())
    return _quoted(pc.if_else(pa.array(series.isna().to_numpy()), pa.scalar(None, pa.string()), values))


def _quoted(text: pa.Array) -> pa.Array:
    """Fields with a delimiter, quote or line break in quotes, inner quotes doubled."""
    special = pc.match_substring_regex(text, '[,"\r\n]')
    if not pc.any(special).as_py():
        return text
    escaped = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
    return pc.if_else(special, escaped, text)


def _floats(values: np.ndarray) -> pa.Array:
    """Python's repr of every value (nulls as null)."""
    null = np.isnan(values)
    finite = values[~null]
    decimals, scaled = _scaled_decimals(finite)
    exact = (np.abs(finite) < _FIXED_LIMIT) & ((finite == 0) | (np.abs(finite) >= 1e-4))
    exact &= ~((finite == 0) & np.signbit(finite))  # -0.0 prints with its sign
    with np.errstate(invalid="ignore"):
        exact &= scaled / 10.0**decimals == finite
    text = _fixed_text(np.where(exact, scaled, 0).astype(np.int64), decimals)
    if not exact.all():
        text = pc.replace_with_mask(text, pa.array(~exact), pa.array(finite[~exact].astype(str)))
    if null.any():
        text = pc.take(text, pa.array(np.cumsum(~null) - 1, mask=null))
    return text


def _scaled_decimals(finite: np.ndarray) -> tuple[int, np.ndarray]:
    """The fewest decimal places (<= 6) that represent every value, and the values scaled by 10^places."""
    bounded = np.abs(finite) < _FIXED_LIMIT
    for decimals in range(_MAX_DECIMALS + 1):
        scaled = np.rint(np.where(bounded, finite, 0) * 10.0**decimals)
        with np.errstate(invalid="ignore"):
            if np.array_equal(scaled[bounded] / 10.0**decimals, finite[bounded]):
                return decimals, scaled
    return _MAX_DECIMALS, scaled


def _fixed_text(scaled: np.ndarray, decimals: int) -> pa.Array:
    """`scaled / 10^decimals` in positional notation with trailing zeros dropped (at least `.0`)."""
    negative = scaled < 0
    magnitude = np.abs(scaled)
    whole, fraction = np.divmod(magnitude, 10**decimals)
    whole_text = pc.cast(pa.array(whole), pa.string())
    if decimals:
        fraction_text = pc.utf8_lpad(pc.cast(pa.array(fraction), pa.string()), decimals, "0")
        fraction_text = pc.utf8_rtrim(fraction_text, "0")
        fraction_text = pc.if_else(pc.equal(pc.utf8_length(fraction_text), 0), "0", fraction_text)
    else:
        fraction_text = pa.array(np.full(scaled.size, "0"))
    text = pc.binary_join_element_wise(whole_text, fraction_text, ".")
    if negative.any():
        text = pc.if_else(pa.array(negative), pc.binary_join_element_wise("-", text, ""), text)
    return text


def _whole_second_timestamps(values: np.ndarray) -> pa.Array | None:
    """Naive timestamps that are whole seconds, formatted as pandas does (dates alone if all midnight)."""
    present = ~np.isnat(values)
    seconds = values[present].astype("datetime64[s]")
    if not np.array_equal(seconds.astype(values.dtype), values[present]):
        return None
    date_only = np.array_equal(seconds.astype("datetime64[D]").astype(seconds.dtype), seconds)
    unit = "datetime64[D]" if date_only else "datetime64[s]"
    # arrow prints dates as YYYY-MM-DD and second timestamps as YYYY-MM-DD HH:MM:SS, as pandas does
    return pc.cast(pa.array(values.astype(unit), mask=~present), pa.string())


def _is_object(dtype) -> bool:
    return isinstance(dtype, np.dtype) and dtype.kind == "O"
