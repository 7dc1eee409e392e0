"""PostgreSQL's binary COPY format, written a whole column at a time with numpy.

Binary COPY saves the server from parsing text (timestamps, numerics) and the client from formatting
it, so a write takes about half the CPU of text COPY. It is used only for column types whose binary
form is known here and only when every value is written exactly as the text path would write it
(e.g. NUMERIC(p, s) values as their digits at scale s, integers within their column's width);
`binary_encoders` returns None otherwise, and the caller writes text.

A row is a 16-bit field count, then per field a 32-bit length (-1: NULL) and the value's bytes, all
big-endian (https://www.postgresql.org/docs/current/sql-copy.html, "Binary Format").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow as pa
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from syndiffix_ops.warehouse.types import ValueKind

SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # the signature, then no flags and no header extension
TRAILER = b"\xff\xff"
# PostgreSQL counts days and microseconds from 2000-01-01.
_EPOCH_ORDINAL = dt.date(2000, 1, 1).toordinal()
_EPOCH_DAY = np.datetime64("2000-01-01", "D").astype(np.int64)
_EPOCH_US = np.datetime64("2000-01-01", "us").astype(np.int64)
_INTEGER_WIDTHS = {
    sa.SmallInteger: 2,
    sa.SMALLINT: 2,
    sa.Integer: 4,
    sa.INTEGER: 4,
    sa.BigInteger: 8,
    sa.BIGINT: 8,
}
_STRING_TYPES = (sa.String, sa.Text, sa.Unicode, sa.UnicodeText, sa.VARCHAR, sa.CHAR, sa.TEXT, sa.NVARCHAR)
_EXACT_DIGITS = 10**15  # a decimal of at most 15 digits is what the shortest float text says exactly


@dataclass(frozen=True)
class Field:
    """One column of a chunk: byte length per row (-1: NULL) and the non-null values' bytes in row order,
    as an (n, width) matrix for fixed-width types or one flat array for variable ones."""

    lengths: np.ndarray
    data: np.ndarray


Encoder = Callable[[pd.Series], Field]


def binary_encoders(table: sa.Table, frame: pd.DataFrame, kinds: Sequence[ValueKind]) -> list[Encoder] | None:
    """An encoder per column of `table` (its order), or None when a column must travel as text."""
    encoders = []
    for column, kind in zip(table.columns, kinds, strict=True):
        encoder = _encoder(column.type, kind, frame[column.name])
        if encoder is None:
            return None
        encoders.append(encoder)
    return encoders


def integer_width(sql_type: sa.types.TypeEngine) -> int | None:
    """Bytes of an integer column's binary form (None: not a plain smallint, integer or bigint)."""
    return _INTEGER_WIDTHS.get(type(sql_type))


def is_plain_string(sql_type: sa.types.TypeEngine) -> bool:
    """Text, varchar, char and enum labels: their binary form is their UTF-8 text."""
    return type(sql_type) in _STRING_TYPES or isinstance(sql_type, sa.Enum | postgresql.ENUM)


def is_double(sql_type: sa.types.TypeEngine) -> bool:
    """Double precision (float8), whose binary form is the IEEE double itself."""
    if not isinstance(sql_type, sa.Float) or isinstance(sql_type, sa.REAL):
        return False
    return type(sql_type) is postgresql.DOUBLE_PRECISION or (sql_type.precision or 53) > 24


def _encoder(sql_type: sa.types.TypeEngine, kind: ValueKind, series: pd.Series) -> Encoder | None:
    if kind is ValueKind.STRING:
        text = pd.api.types.infer_dtype(series, skipna=True) in ("string", "empty")
        return _strings if is_plain_string(sql_type) and text else None
    if kind is ValueKind.INTEGER:
        return _integer_encoder(integer_width(sql_type), series)
    if kind is ValueKind.BOOLEAN:
        return _booleans if type(sql_type) in (sa.Boolean, sa.BOOLEAN) and _is_boolean(series) else None
    if kind is ValueKind.REAL:
        return _real_encoder(sql_type, series)
    if kind in (ValueKind.TIMESTAMP, ValueKind.TIMESTAMP_TZ):
        aware = kind is ValueKind.TIMESTAMP_TZ
        fits = isinstance(sql_type, sa.DateTime) and bool(sql_type.timezone) == aware
        if fits and pd.api.types.is_datetime64_any_dtype(series) and (series.dt.tz is not None) == aware:
            return _timestamps
        return None
    values = pd.api.types.infer_dtype(series, skipna=True)
    if kind is ValueKind.DATE and isinstance(sql_type, sa.Date):
        return _dates if values in ("date", "datetime", "datetime64", "empty") else None
    if kind is ValueKind.TIME and isinstance(sql_type, sa.Time) and not sql_type.timezone:
        return _times if values in ("time", "empty") else None
    return None


def _is_boolean(series: pd.Series) -> bool:
    try:
        series.astype("boolean")
    except (TypeError, ValueError):
        return False
    return True


def _integer_encoder(width: int | None, series: pd.Series) -> Encoder | None:
    """Integers in their column's width; a value beyond it goes through text, whose error names it."""
    if width is None or (isinstance(series.dtype, np.dtype) and series.dtype.kind not in "iu"):
        return None  # floats: the text path refuses 2.0 for an integer column, and so must this one
    values = series
    if not isinstance(series.dtype, np.dtype):  # a numpy column is checked as it is, without a copy
        try:
            values = series.astype("Int64")
        except (TypeError, ValueError, OverflowError):
            return None
    limit = 2 ** (8 * width - 1)
    if values.notna().any() and not (-limit <= values.min() and values.max() < limit):
        return None
    big_endian = np.dtype(f">i{width}")

    def encode(chunk: pd.Series) -> Field:
        chunk = chunk.astype("Int64")
        missing = chunk.isna().to_numpy()
        values = chunk.to_numpy(dtype=np.int64, na_value=0)[~missing]
        return _fixed(missing, values.astype(big_endian))

    return encode


def _real_encoder(sql_type: sa.types.TypeEngine, series: pd.Series) -> Encoder | None:
    if not (isinstance(series.dtype, np.dtype) and series.dtype.kind == "f"):
        return None  # e.g. the exact Decimal bounds of clamped NUMERIC values
    if isinstance(sql_type, sa.Float):
        # Double precision only: a float64 rounded to float4 here can differ from the float4 the server
        # makes of its shortest text when it lies on a float4 midpoint.
        return _doubles if is_double(sql_type) else None
    if type(sql_type) in (sa.Numeric, sa.NUMERIC, sa.DECIMAL) and sql_type.precision:
        return _numeric_encoder(sql_type.scale or 0, series)
    return None


def _doubles(chunk: pd.Series) -> Field:
    values = chunk.to_numpy(dtype=np.float64)
    missing = np.isnan(values)  # NaN is null, as in the text path
    return _fixed(missing, values[~missing].astype(">f8"))


def _numeric_encoder(scale: int, series: pd.Series) -> Encoder | None:
    """NUMERIC(p, s) values, already rounded to s decimals, as their base-10000 digits.

    The text path sends the shortest text of each float; when a value is k / 10**s for an integer
    k < 10**15, that text is exactly k / 10**s, so sending k's digits at scale s stores the same number.
    Other values (more digits than a float holds exactly) go through text.
    """
    if not 0 <= scale <= 15:
        return None
    values = series.to_numpy(dtype=np.float64)
    magnitudes = np.abs(values[~np.isnan(values)])
    scaled = np.rint(magnitudes * 10.0**scale)
    if not (np.all(scaled < _EXACT_DIGITS) and np.array_equal(scaled / 10.0**scale, magnitudes)):
        return None
    pad = -scale % 4  # digits after the point, padded to whole base-10000 digits
    weight = 4 - (scale + pad) // 4  # of the first of five base-10000 digits

    def encode(chunk: pd.Series) -> Field:
        values = chunk.to_numpy(dtype=np.float64)
        missing = np.isnan(values)
        present = values[~missing]
        digits = np.rint(np.abs(present) * 10.0**scale).astype(np.int64) * 10**pad
        words = np.empty((len(present), 9), dtype=">i2")
        words[:, 0] = 5  # base-10000 digits, leading zeros allowed (the server strips them)
        words[:, 1] = weight
        words[:, 2] = np.where((present < 0) & (digits > 0), 0x4000, 0)  # sign; numeric has no -0
        words[:, 3] = scale
        for i in range(5):
            words[:, 4 + i] = digits // 10_000 ** (4 - i) % 10_000
        return _fixed(missing, words)

    return encode


def _strings(chunk: pd.Series) -> Field:
    array = pa.array(chunk.to_numpy(dtype=object), type=pa.string(), from_pandas=True)
    _, offsets, data = array.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int32, count=len(array) + 1)
    lengths = np.diff(offsets).astype(np.int32)
    lengths[np.asarray(array.is_null())] = -1
    payload = np.frombuffer(data, dtype=np.uint8)[offsets[0] : offsets[-1]] if data else np.empty(0, np.uint8)
    return Field(lengths, payload)


def _booleans(chunk: pd.Series) -> Field:
    values = chunk.astype("boolean")
    missing = values.isna().to_numpy()
    return _fixed(missing, values.to_numpy(dtype=np.uint8, na_value=0)[~missing])


def _timestamps(chunk: pd.Series) -> Field:
    missing = chunk.isna().to_numpy()
    micros = _utc_naive(chunk).to_numpy("datetime64[us]")[~missing].astype(np.int64) - _EPOCH_US
    return _fixed(missing, micros.astype(">i8"))


def _utc_naive(stamps: pd.Series) -> pd.Series:
    return stamps.dt.tz_convert("UTC").dt.tz_localize(None) if stamps.dt.tz is not None else stamps


def _dates(chunk: pd.Series) -> Field:
    if pd.api.types.is_datetime64_any_dtype(chunk):
        missing = chunk.isna().to_numpy()
        days = _utc_naive(chunk).to_numpy("datetime64[D]")[~missing].astype(np.int64) - _EPOCH_DAY
        return _fixed(missing, days.astype(">i4"))
    # Days repeat: convert each distinct date once and spread by code.
    codes, uniques = pd.factorize(chunk, use_na_sentinel=True)
    days = np.array([d.toordinal() - _EPOCH_ORDINAL for d in uniques], dtype=np.int64)
    missing = codes < 0
    return _fixed(missing, days[codes[~missing]].astype(">i4"))


def _times(chunk: pd.Series) -> Field:
    codes, uniques = pd.factorize(chunk, use_na_sentinel=True)
    micros = np.array(
        [((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond for t in uniques],
        dtype=np.int64,
    )
    missing = codes < 0
    return _fixed(missing, micros[codes[~missing]].astype(">i8"))


def _fixed(missing: np.ndarray, present: np.ndarray) -> Field:
    width = present.dtype.itemsize * int(np.prod(present.shape[1:]))
    rows = present.view(np.uint8).reshape(len(present), width)
    lengths = np.full(len(missing), rows.shape[1], dtype=np.int32)
    lengths[missing] = -1
    return Field(lengths, rows)


def encode_rows(fields: Sequence[Field]) -> memoryview:
    """The rows of one chunk in binary COPY format (without signature or trailer)."""
    sizes = np.full(len(fields[0].lengths), 2, dtype=np.int64)
    for field in fields:
        sizes += 4 + np.maximum(field.lengths, 0)
    starts = np.cumsum(sizes) - sizes
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    _at_every_byte(out, 2)[starts] = np.array(len(fields), dtype=">i2").view("V2")
    at = starts + 2
    for field in fields:
        _at_every_byte(out, 4)[at] = field.lengths.astype(">i4").view("V4")
        present = field.lengths >= 0
        if field.data.ndim == 2 and field.data.shape[1]:
            width = field.data.shape[1]
            _at_every_byte(out, width)[at[present] + 4] = field.data.view(f"V{width}").ravel()
        elif len(field.data):
            lengths = field.lengths[present].astype(np.int64)
            sources = np.cumsum(lengths) - lengths
            out[np.repeat(at[present] + 4 - sources, lengths) + np.arange(len(field.data))] = field.data
        at += 4 + np.maximum(field.lengths, 0)
    return out.data


def _at_every_byte(out: np.ndarray, width: int) -> np.ndarray:
    """A view of `out` whose element i is the `width` bytes starting at byte i: writing element
    positions copies whole values, rather than indexing every byte."""
    return np.ndarray((max(len(out) - width + 1, 0),), f"V{width}", out, 0, (1,))
