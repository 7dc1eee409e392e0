"""Binary COPY writes exactly what text COPY writes, and leaves to text what it cannot write exactly."""

from __future__ import annotations

import datetime as dt
import math
import uuid

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from syndiffix_ops.warehouse import ValueKind, postgres
from syndiffix_ops.warehouse.copy_binary import binary_encoders

UTC = dt.UTC

COLUMNS = {
    "small": (sa.SmallInteger(), ValueKind.INTEGER),
    "regular": (sa.Integer(), ValueKind.INTEGER),
    "big": (sa.BigInteger(), ValueKind.INTEGER),
    "amount": (sa.Numeric(12, 2), ValueKind.REAL),
    "ratio": (sa.Numeric(15, 7), ValueKind.REAL),
    "whole": (sa.Numeric(9, 0), ValueKind.REAL),
    "double": (postgresql.DOUBLE_PRECISION(), ValueKind.REAL),
    "label": (sa.String(40), ValueKind.STRING),
    "note": (sa.Text(), ValueKind.STRING),
    "code": (sa.CHAR(3), ValueKind.STRING),
    "mood": (
        postgresql.ENUM("sad", "ok", "happy", name="mood_binary_copy", create_type=False),
        ValueKind.STRING,
    ),
    "flag": (sa.Boolean(), ValueKind.BOOLEAN),
    "seen": (sa.DateTime(), ValueKind.TIMESTAMP),
    "seen_tz": (sa.DateTime(timezone=True), ValueKind.TIMESTAMP_TZ),
    "day": (sa.Date(), ValueKind.DATE),
    "day_stamp": (sa.Date(), ValueKind.DATE),
    "clock": (sa.Time(), ValueKind.TIME),
}


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 3000
    stamps = pd.Series(
        pd.to_datetime("1950-01-01")
        + pd.to_timedelta(rng.integers(0, 100 * 365 * 86400 * 10**6, n), unit="us")
    )
    frame = pd.DataFrame(
        {
            "small": pd.array(rng.integers(-(2**15), 2**15, n), dtype="Int64"),
            "regular": pd.array(rng.integers(-(2**31), 2**31, n), dtype="Int64"),
            "big": pd.array(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64), dtype="Int64"),
            "amount": np.round(rng.lognormal(3, 3, n) * rng.choice([-1, 1], n), 2),
            "ratio": np.round(rng.normal(0, 50, n), 7),
            "whole": np.round(rng.normal(0, 1e6, n)),
            "double": rng.normal(0, 1, n) * 10.0 ** rng.integers(-300, 300, n),
            "label": rng.choice(["plain", "tab\there", "new\nline", "back\\slash", "ünï ✓ 𝄞", "", "\\N"], n),
            "note": rng.choice(["a", "carriage\rreturn", "x" * 500], n),
            "code": rng.choice(["ab", "abc", "a"], n),
            "mood": rng.choice(["sad", "ok", "happy"], n),
            "flag": pd.array(rng.integers(0, 2, n).astype(bool), dtype="boolean"),
            "seen": stamps,
            "seen_tz": (stamps + pd.Timedelta(hours=5)).dt.tz_localize(
                "Europe/Berlin", ambiguous="NaT", nonexistent="NaT"
            ),
            "day": [d.date() for d in stamps],
            "day_stamp": stamps.dt.floor("D"),
            "clock": [d.time() for d in stamps],
        }
    )
    frame.loc[[0, 1], "double"] = [math.inf, -0.0]
    frame.loc[[2, 3], "amount"] = [-0.0, 0.0]
    frame.loc[4, "small"] = -(2**15)
    for offset, name in enumerate(COLUMNS):  # a NULL in every column, in different rows
        frame.loc[10 + offset, name] = None
    frame["double"] = frame["double"].astype(np.float64)
    frame["amount"] = frame["amount"].astype(np.float64)
    return frame


def _table(name: str, schema: str, columns: dict) -> sa.Table:
    return sa.Table(name, sa.MetaData(), *(sa.Column(c, t) for c, (t, _) in columns.items()), schema=schema)


def _written(conn: sa.Connection, table: sa.Table, frame: pd.DataFrame, kinds, *, binary: bool) -> list[str]:
    table.create(conn)
    postgres.copy_in(conn, table, frame, kinds, binary=binary)
    rows = conn.exec_driver_sql(f'SELECT t::text FROM "{table.schema}"."{table.name}" t').scalars()
    return sorted(rows)


@pytest.fixture
def pg_schema(pg_url):
    engine = sa.create_engine(pg_url)
    schema = f"binary_copy_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
        conn.exec_driver_sql(f"CREATE TYPE \"{schema}\".mood_binary_copy AS ENUM ('sad', 'ok', 'happy')")
    yield engine, schema
    with engine.begin() as conn:
        conn.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
    engine.dispose()


def _with_enum_schema(columns: dict, schema: str) -> dict:
    enum = postgresql.ENUM("sad", "ok", "happy", name="mood_binary_copy", schema=schema, create_type=False)
    return {name: (enum, kind) if name == "mood" else (t, kind) for name, (t, kind) in columns.items()}


def test_binary_copy_stores_the_same_values_as_text_copy(pg_schema):
    engine, schema = pg_schema
    columns = _with_enum_schema(COLUMNS, schema)
    frame = _frame()
    kinds = [kind for _, kind in columns.values()]
    binary, text = _table("by_binary", schema, columns), _table("by_text", schema, columns)
    assert binary_encoders(binary, frame, kinds) is not None  # every column here has an exact binary form
    with engine.begin() as conn:
        assert _written(conn, binary, frame, kinds, binary=True) == _written(
            conn, text, frame, kinds, binary=False
        )


@pytest.mark.parametrize(
    ("sql_type", "kind", "values"),
    [
        (sa.Numeric(20, 2), ValueKind.REAL, [12345678901234.56]),  # 16 digits: more than the float says
        (sa.Numeric(), ValueKind.REAL, [0.1]),  # no precision: written as computed
        (sa.REAL(), ValueKind.REAL, [0.1]),  # float4 rounding of the text, not of the float
        (sa.SmallInteger(), ValueKind.INTEGER, [40000]),  # out of range: the text path's error names it
        (sa.Integer(), ValueKind.INTEGER, [2.0]),  # a float: refused by the text path
        (sa.String(10), ValueKind.STRING, [1]),
        (sa.DateTime(timezone=True), ValueKind.TIMESTAMP_TZ, pd.to_datetime(["2020-01-01"])),  # naive
    ],
)
def test_columns_without_an_exact_binary_form_go_through_text(sql_type, kind, values):
    table = sa.Table("t", sa.MetaData(), sa.Column("c", sql_type))
    assert binary_encoders(table, pd.DataFrame({"c": values}), [kind]) is None
