"""SQL types <-> the value kinds the engines synthesize, and column values in both directions.

Every source column gets a `ValueKind` from its reflected SQL type. The kind decides the pandas dtype
handed to the engine (contract §1 of the column codecs) and how synthetic values are turned back into
Python values the driver writes into a column of the *source's* declared type.

NUMERIC/DECIMAL columns are read as float64: the engines compute in float64 anyway, and the database
rounds the synthetic values back to the declared scale on write. Values beyond 2**53 therefore lose
exactness, which only matters for identifiers stored as NUMERIC (give those an AID role or drop them).
"""

from __future__ import annotations

import enum
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
        data = (
            pd.array(values, dtype="Int64")
            if has_null
            else np.fromiter(values, dtype=np.int64, count=len(values))
        )
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
    else:  # pragma: no cover - the enum is closed
        raise AssertionError(kind)
    series = pd.Series(data, name=name)
    return series.reset_index(drop=True)


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
    return series.astype(object).where(series.notna(), None).tolist()
