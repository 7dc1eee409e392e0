"""SQL types <-> the value kinds the engines synthesize, and column values in both directions.

Every source column gets a `ValueKind` from its reflected SQL type. The kind decides the pandas dtype
handed to the engine (contract §1 of the column codecs) and how synthetic values are turned back into
Python values the driver writes into a column of the *source's* declared type.

NUMERIC/DECIMAL columns are read as float64: the engines compute in float64 anyway. On write the
synthetic values are rounded to the declared scale and kept within the declared precision (see
`within_declared_numeric`): a float64 near NUMERIC(38, 10)'s maximum rounds *up* past it, and the
database would refuse the whole table. Values beyond 2**53 lose exactness, which only matters for
identifiers stored as NUMERIC (give those an AID role or drop them).
"""

from __future__ import annotations

import decimal
import enum
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from syndiffix_ops.errors import PermanentError


class ValueKind(enum.StrEnum):
    BOOLEAN = "boolean"
    INTEGER = "integer"
    REAL = "real"
    STRING = "string"
    TIMESTAMP = "timestamp"  # without time zone
    TIMESTAMP_TZ = "timestamptz"
    DATE = "date"
    TIME = "time"
    # Key columns only (never synthesized by an engine, see key_value_kind): UUIDs held as canonical
    # text in the frame, written as the database's uuid type or as 16 bytes.
    UUID = "uuid"
    UUID_BINARY = "uuid_binary"


class UnsupportedTypeError(PermanentError, TypeError):
    """A column whose SQL type no engine synthesizes; the message says which policy fixes it."""

    def __init__(self, table: str, column: str, sql_type: str):
        self.table, self.column, self.sql_type = table, column, sql_type
        super().__init__(
            f"table {table}: column {column!r} has type {sql_type}, which cannot be synthesized; "
            f"set its policy to drop (columns: {{{column}: drop}}) or use it as an AID column"
        )


class ColumnValueError(PermanentError, ValueError):
    """A source value that cannot be converted for the engines; the message names the column and value."""


# MySQL types that subclass String or Integer in SQLAlchemy but do not hold free text / plain integers.
_NOT_SYNTHESIZABLE = (
    mysql.SET,
    mysql.BIT,
    mysql.YEAR,
    sa.Interval,
    sa.JSON,
    sa.LargeBinary,
    sa.Uuid,
    sa.ARRAY,
)


def value_kind(sql_type: sa.types.TypeEngine) -> ValueKind | None:
    """The kind of a reflected SQL type, or None when no engine can synthesize it."""
    if isinstance(sql_type, _NOT_SYNTHESIZABLE):
        return None
    if isinstance(sql_type, sa.Boolean):
        return ValueKind.BOOLEAN
    if isinstance(sql_type, sa.Enum | sa.String):  # Enum first: it subclasses String, and both read as str
        return ValueKind.STRING
    if isinstance(sql_type, sa.Integer):
        return ValueKind.INTEGER
    if isinstance(sql_type, sa.Float | sa.Numeric):
        return ValueKind.REAL
    if isinstance(sql_type, sa.DateTime):
        return ValueKind.TIMESTAMP_TZ if getattr(sql_type, "timezone", False) else ValueKind.TIMESTAMP
    if isinstance(sql_type, sa.Date):
        return ValueKind.DATE
    if isinstance(sql_type, sa.Time):
        return ValueKind.TIME
    return None


def key_value_kind(sql_type: sa.types.TypeEngine) -> ValueKind | None:
    """The kind of a key column: the engines' kinds, and UUIDs (a uuid type, or BINARY(16)), which
    only keys can have: their values are never synthesized, they get fresh surrogates."""
    if isinstance(sql_type, sa.Uuid):
        return ValueKind.UUID
    if (
        isinstance(sql_type, sa.LargeBinary | sa.BINARY | sa.VARBINARY)
        and getattr(sql_type, "length", None) == 16
    ):
        return ValueKind.UUID_BINARY
    return value_kind(sql_type)


def _uuid_texts(values: Sequence[Any], kind: ValueKind) -> np.ndarray:
    def text(value: Any) -> str | None:
        if value is None:
            return None
        if kind is ValueKind.UUID_BINARY:
            return str(uuid.UUID(bytes=bytes(value)))
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)))

    return np.array([text(v) for v in values], dtype=object)


def aid_values(values: Sequence[Any]) -> pd.Series:
    """AID columns of any type (UUID, bytes, JSON ids, ...) become strings: the engine only hashes them."""
    series = pd.Series(values, dtype=object)
    present = series.notna()
    series[present] = series[present].map(_aid_text)
    return series


def _aid_text(value: Any) -> str:
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    return str(value)


def to_series(values: Sequence[Any], kind: ValueKind, name: str) -> pd.Series:
    """Driver values of one column (None = null) -> a Series of a dtype the engine codecs accept."""
    has_null = any(v is None for v in values) if kind is not ValueKind.REAL else False
    if kind is ValueKind.INTEGER:
        data = _integers(values, name, has_null)
    elif kind is ValueKind.REAL:
        # numpy converts Decimal with float() and None to NaN, the codecs' null for reals.
        data = np.array(values, dtype=np.float64)
    elif kind is ValueKind.BOOLEAN:
        data = pd.array(values, dtype="boolean") if has_null else np.array(values, dtype=bool)
    elif kind is ValueKind.TIMESTAMP:
        data = pd.to_datetime(pd.Series(values, dtype=object))
    elif kind is ValueKind.TIMESTAMP_TZ:
        data = pd.to_datetime(pd.Series(values, dtype=object), utc=True)
    elif kind in (ValueKind.STRING, ValueKind.DATE, ValueKind.TIME):
        data = np.array(values, dtype=object)
    elif kind in (ValueKind.UUID, ValueKind.UUID_BINARY):
        data = _uuid_texts(values, kind)
    else:  # pragma: no cover - the enum is closed
        raise AssertionError(kind)
    series = pd.Series(data, name=name)
    return series.reset_index(drop=True)


def _integers(
    values: Sequence[Any], name: str, has_null: bool
) -> np.ndarray | pd.api.extensions.ExtensionArray:
    """An integer column's values, refusing anything else: SQLite stores 2.5 or 'x' in an INTEGER column
    as it is, and a silent cast would turn 2.5 into 2."""
    if has_null:
        try:
            return pd.array(values, dtype="Int64")
        except (TypeError, ValueError, OverflowError):
            pass
    else:
        array = np.asarray(values) if len(values) else np.empty(0, dtype=np.int64)
        if array.dtype.kind in "ib" or (array.dtype.kind == "u" and (len(array) == 0 or array.max() < 2**63)):
            return array.astype(np.int64, copy=False)
    bad = next(v for v in values if v is not None and not _is_int64(v))
    raise ColumnValueError(
        f"column {name!r} is declared as an integer type but holds {bad!r}; convert or remove that value, "
        "or read the column through a view that casts it to a real type"
    )


def _is_int64(value: Any) -> bool:
    return isinstance(value, int | np.integer) and -(2**63) <= value < 2**63


def to_python(series: pd.Series, kind: ValueKind) -> list[Any]:
    """A synthetic column -> Python values (None = null) for the driver, matching the SQL type's kind."""
    if kind in (ValueKind.TIMESTAMP, ValueKind.TIMESTAMP_TZ) and pd.api.types.is_datetime64_any_dtype(series):
        if kind is ValueKind.TIMESTAMP_TZ and series.dt.tz is None:
            series = series.dt.tz_localize("UTC")
        values = np.array(series.dt.to_pydatetime(), dtype=object)
        values[series.isna().to_numpy()] = None
        return values.tolist()
    if kind is ValueKind.DATE and pd.api.types.is_datetime64_any_dtype(series):
        return series.dt.date.astype(object).where(series.notna(), None).tolist()
    if kind is ValueKind.INTEGER:
        if isinstance(series.dtype, np.dtype) and series.dtype.kind in "iu":
            return series.tolist()
        return series.astype("Int64").to_numpy(dtype=object, na_value=None).tolist()
    if kind is ValueKind.REAL:
        values = (
            series.to_numpy(dtype=object, na_value=None) if not isinstance(series.dtype, np.dtype) else None
        )
        if values is None:
            floats = series.to_numpy()
            if floats.dtype == object:
                return series.astype(object).where(series.notna(), None).tolist()
            values = floats.astype(object)
            values[np.isnan(floats.astype(np.float64))] = None
        return values.tolist()
    if kind is ValueKind.BOOLEAN:
        if series.dtype == bool:
            return series.tolist()
        return series.astype("boolean").to_numpy(dtype=object, na_value=None).tolist()
    if kind in (ValueKind.UUID, ValueKind.UUID_BINARY):
        keys = [None if pd.isna(v) else uuid.UUID(str(v)) for v in series.tolist()]
        return keys if kind is ValueKind.UUID else [None if k is None else k.bytes for k in keys]
    return series.astype(object).where(series.notna(), None).tolist()


def declared_numeric_bounds(
    sql_type: sa.types.TypeEngine,
) -> tuple[decimal.Decimal, decimal.Decimal, int] | None:
    """(lowest, highest, scale) a NUMERIC(p, s)/DECIMAL(p, s) column holds, or None for other types and
    for NUMERIC without a precision (unbounded)."""
    if not isinstance(sql_type, sa.Numeric) or isinstance(sql_type, sa.Float) or not sql_type.precision:
        return None
    scale = sql_type.scale or 0
    # built from digits: arithmetic in the default 28-digit context would round 38 nines up to 1E+28
    digits = max(sql_type.precision - scale, 0)
    highest = decimal.Decimal(("9" * digits or "0") + ("." + "9" * scale if scale else ""))
    lowest = decimal.Decimal(0) if getattr(sql_type, "unsigned", False) else highest.copy_negate()
    return lowest, highest, scale


def within_declared_numeric(series: pd.Series, sql_type: sa.types.TypeEngine) -> pd.Series:
    """Synthetic float64 values of a NUMERIC(p, s) column, rounded to s digits and clamped to what
    NUMERIC(p, s) holds; a clamped value becomes the exact Decimal bound (a float cannot hold
    9999999999999999999999999999.9999999999: it rounds to 1e28, which overflows the column)."""
    bounds = declared_numeric_bounds(sql_type)
    if bounds is None:
        return series
    lowest, highest, scale = bounds
    values = series.to_numpy(dtype=np.float64, na_value=np.nan)
    if scale <= 15:  # beyond 15 digits float64 has nothing left to round
        values = np.round(values, scale)
    above = values > _largest_float_within(highest)
    below = values < -_largest_float_within(lowest.copy_abs()) if lowest < 0 else values < 0
    if not (above.any() or below.any()):
        return pd.Series(values, name=series.name)
    exact = values.astype(object)
    exact[np.isnan(values)] = None
    exact[above] = highest
    exact[below] = lowest
    return pd.Series(exact, name=series.name, dtype=object)


def _largest_float_within(bound: decimal.Decimal) -> float:
    """The largest float64 whose shortest text (what the drivers send: 1e+28 for the float nearest
    9999999999999999999999999999.9999999999) is not above the non-negative Decimal bound."""
    nearest = float(bound)
    while decimal.Decimal(repr(nearest)) > bound:
        nearest = float(np.nextafter(nearest, -np.inf))
    return nearest
