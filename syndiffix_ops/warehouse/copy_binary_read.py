"""Rows of a binary `COPY ... TO STDOUT`, decoded a whole column at a time with numpy and pyarrow.

The server then formats no text (timestamps, numerics) and the client parses none: each column is a
gather of fixed-width big-endian values, or of string bytes handed to pyarrow, which makes the Python
strings. It is used only where the values come out exactly as the text path reads them
(`binary_plan` says which columns, and how they are selected); otherwise the caller reads text.

Each row arrives as one CopyData message, so the message lengths the receiver records are the row
boundaries; every row is checked to end where its fields end.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from syndiffix_ops.warehouse.copy_binary import SIGNATURE, integer_width, is_double, is_plain_string
from syndiffix_ops.warehouse.types import ColumnValueError, ValueKind

_EPOCH_US = np.datetime64("2000-01-01", "us")
_EPOCH_ORDINAL = dt.date(2000, 1, 1).toordinal()
_INFINITE = (np.iinfo(np.int64).max, np.iinfo(np.int64).min)  # 'infinity' and '-infinity'
_INFINITE_DATES = (np.iinfo(np.int32).max, np.iinfo(np.int32).min)

# (row buffer, start and length of each non-null value, which rows are non-null, column name) -> column
Decoder = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, str], pd.Series]


def binary_plan(
    columns: Sequence[sa.ColumnElement], kinds: Sequence[ValueKind | None], as_text: Sequence[bool]
) -> tuple[list[sa.ColumnElement], list[Decoder]] | None:
    """What to select and how to decode it, per column; None when some column must be read as text.

    NUMERIC columns are selected as double precision: the server's conversion rounds the exact
    decimal to the nearest double, which is what parsing its text does. float4 (`real`) is not
    binary: its text is the shortest decimal of the float4, which is not the float4's exact value.
    """
    selected, decoders = [], []
    for column, kind, text in zip(columns, kinds, as_text, strict=True):
        sql_type = column.type
        if text:  # an AID of any type: its text, as the text path reads it
            selected.append(
                column if is_plain_string(sql_type) else sa.cast(column, sa.Text).label(column.name)
            )
            decoders.append(_strings)
            continue
        decoder = _decoder(sql_type, kind)
        if decoder is None:
            return None
        if kind is ValueKind.REAL and not is_double(sql_type):
            column = sa.cast(column, postgresql.DOUBLE_PRECISION).label(column.name)
        selected.append(column)
        decoders.append(decoder)
    return selected, decoders


def _decoder(sql_type: sa.types.TypeEngine, kind: ValueKind | None) -> Decoder | None:
    if kind is ValueKind.INTEGER:
        width = integer_width(sql_type)
        return None if width is None else _integers(width)
    if kind is ValueKind.REAL:
        numeric = type(sql_type) in (sa.Numeric, sa.NUMERIC, sa.DECIMAL) and sql_type.precision
        # within a double's range, so the server's conversion cannot overflow where text would not
        bounded = (
            numeric and sql_type.precision - (sql_type.scale or 0) <= 300 and (sql_type.scale or 0) <= 300
        )
        return _doubles if is_double(sql_type) or bounded else None
    if kind is ValueKind.STRING:
        return _strings if is_plain_string(sql_type) else None
    if kind is ValueKind.BOOLEAN:
        return _booleans if type(sql_type) in (sa.Boolean, sa.BOOLEAN) else None
    if kind in (ValueKind.TIMESTAMP, ValueKind.TIMESTAMP_TZ) and isinstance(sql_type, sa.DateTime):
        return _timestamps(utc=bool(sql_type.timezone))
    if kind is ValueKind.DATE and type(sql_type) in (sa.Date, sa.DATE):
        return _dates
    if kind is ValueKind.TIME and isinstance(sql_type, sa.Time) and not sql_type.timezone:
        return _times
    return None


def decode(
    data: bytes, message_lengths: np.ndarray, names: Sequence[str], decoders: Sequence[Decoder]
) -> list[pd.Series]:
    """The rows of whole CopyData messages (the first may start with the signature, the last may be
    the trailer) as one Series per column."""
    buffer = np.frombuffer(data, dtype=np.uint8)
    ends = np.cumsum(message_lengths, dtype=np.int64)
    starts = ends - message_lengths
    if data[: len(SIGNATURE)] == SIGNATURE:
        starts[0] += len(SIGNATURE)
    rows = starts < ends
    at = starts[rows] + 2
    counts = _gather(buffer, starts[rows], ">i2")
    if len(counts) and counts[-1] == -1:  # the trailer
        at, counts, ends = at[:-1], counts[:-1], ends[rows][:-1]
    else:
        ends = ends[rows]
    if np.any(counts != len(names)):
        raise ColumnValueError(
            f"the source sent rows of {sorted(set(counts.tolist()))} fields, not {len(names)}"
        )
    columns = []
    for name, decoder in zip(names, decoders, strict=True):
        lengths = _gather(buffer, at, ">i4").astype(np.int64)
        present = lengths >= 0
        try:
            columns.append(decoder(buffer, at[present] + 4, lengths[present], present, name))
        except (ValueError, TypeError, OverflowError, pa.ArrowInvalid) as error:
            raise ColumnValueError(
                f"column {name!r}: a value cannot be read for synthesis ({error})"
            ) from error
        at = at + 4 + np.maximum(lengths, 0)
    if not np.array_equal(at, ends):
        raise ColumnValueError("the source's binary COPY rows do not end where their fields end")
    return columns


def _gather(buffer: np.ndarray, at: np.ndarray, dtype: str) -> np.ndarray:
    """The values of `dtype` starting at byte offsets `at`: one gather over an (unaligned) view in which
    element i is the value starting at byte i, rather than one per byte."""
    width = np.dtype(dtype).itemsize
    every_offset = np.ndarray((max(len(buffer) - width + 1, 0),), dtype, buffer, 0, (1,))
    return every_offset[at]


def _fixed(buffer, at, lengths, dtype: str) -> np.ndarray:
    if np.any(lengths != np.dtype(dtype).itemsize):
        raise ValueError(f"a value of {int(lengths[lengths != np.dtype(dtype).itemsize][0])} bytes")
    return _gather(buffer, at, dtype)


def _spread(values: np.ndarray, present: np.ndarray, fill) -> np.ndarray:
    if present.all():
        return values
    out = np.full(len(present), fill, dtype=values.dtype)
    out[present] = values
    return out


def _integers(width: int) -> Decoder:
    def decode(buffer, at, lengths, present, name) -> pd.Series:
        values = _fixed(buffer, at, lengths, f">i{width}").astype(np.int64)
        if present.all():
            return pd.Series(values, name=name)
        return pd.Series(pd.arrays.IntegerArray(_spread(values, present, 0), ~present), name=name)

    return decode


def _doubles(buffer, at, lengths, present, name) -> pd.Series:
    values = _fixed(buffer, at, lengths, ">f8").astype(np.float64)
    return pd.Series(_spread(values, present, np.nan), name=name)


def _booleans(buffer, at, lengths, present, name) -> pd.Series:
    values = _fixed(buffer, at, lengths, "u1") != 0
    if present.all():
        return pd.Series(values, name=name)
    return pd.Series(pd.arrays.BooleanArray(_spread(values, present, False), ~present), name=name)


def _strings(buffer, at, lengths, present, name) -> pd.Series:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)  # a chunk is far below 2 GiB
    np.cumsum(lengths, out=offsets[1:])
    starts = (at - offsets[:-1]).astype(np.int32)
    data = buffer[np.repeat(starts, lengths) + np.arange(offsets[-1], dtype=np.int32)]
    array = pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets), pa.py_buffer(data))
    array.validate(full=True)  # UTF-8, as the text path's decoding requires
    # Values repeat: one Python string per distinct value, shared by its rows (faster, and less memory).
    encoded = array.dictionary_encode()
    values = np.empty(len(present), dtype=object)
    values[present] = encoded.dictionary.to_numpy(zero_copy_only=False)[encoded.indices.to_numpy()]
    return pd.Series(values, name=name, dtype=object)


def _timestamps(utc: bool) -> Decoder:
    def decode(buffer, at, lengths, present, name) -> pd.Series:
        micros = _fixed(buffer, at, lengths, ">i8").astype(np.int64)
        if np.isin(micros, _INFINITE).any():
            raise ValueError("infinity is not a time")
        stamps = _spread(_EPOCH_US + micros.astype("timedelta64[us]"), present, np.datetime64("NaT", "us"))
        series = pd.Series(stamps, name=name)
        return series.dt.tz_localize("UTC") if utc else series

    return decode


def _dates(buffer, at, lengths, present, name) -> pd.Series:
    days = _fixed(buffer, at, lengths, ">i4").astype(np.int64)
    if np.isin(days, _INFINITE_DATES).any():
        raise ValueError("infinity is not a date")
    # Days repeat: make each distinct date once and spread by code.
    codes, uniques = pd.factorize(days)
    objects = np.array([dt.date.fromordinal(int(d) + _EPOCH_ORDINAL) for d in uniques] + [None], dtype=object)
    return pd.Series(objects[_spread(codes, present, -1)], name=name, dtype=object)


def _times(buffer, at, lengths, present, name) -> pd.Series:
    micros = _fixed(buffer, at, lengths, ">i8").astype(np.int64)
    codes, uniques = pd.factorize(micros)
    objects = np.array([_time(int(m)) for m in uniques] + [None], dtype=object)
    return pd.Series(objects[_spread(codes, present, -1)], name=name, dtype=object)


def _time(micros: int) -> dt.time:
    seconds, micro = divmod(micros, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    return dt.time(hour, minute, second, micro)  # 24:00:00 fails here, as its text does
