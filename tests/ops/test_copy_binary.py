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

from syndiffix_ops.warehouse import ValueKind, postgres, reflect_table
from syndiffix_ops.warehouse.copy_binary import binary_encoders
from syndiffix_ops.warehouse.copy_binary_read import binary_plan

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
    "nothing": (sa.Numeric(10, 2), ValueKind.REAL),  # NULL in every row
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
            "nothing": np.full(n, np.nan),
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
        (sa.BigInteger(), ValueKind.INTEGER, np.array([2**64 - 1], dtype=np.uint64)),  # beyond bigint
        (sa.String(10), ValueKind.STRING, [1]),
        (sa.DateTime(timezone=True), ValueKind.TIMESTAMP_TZ, pd.to_datetime(["2020-01-01"])),  # naive
    ],
)
def test_columns_without_an_exact_binary_form_go_through_text(sql_type, kind, values):
    table = sa.Table("t", sa.MetaData(), sa.Column("c", sql_type))
    assert binary_encoders(table, pd.DataFrame({"c": values}), [kind]) is None


SOURCE_COLUMNS = """
    small smallint, regular integer, big bigint, amount numeric(12,2), ratio numeric(15,7),
    wide numeric(38,10), double double precision, label varchar(40), note text, code char(3),
    mood {schema}.mood_binary_copy, flag boolean, seen timestamp, seen_us timestamp(6), seen_tz timestamptz,
    day date, clock time, person uuid
"""
SOURCE_ROWS = """
INSERT INTO {schema}.source
SELECT mod(g, 32767) - 16000, g * 7919 - 2000000000, g::bigint * 92233720368 - 9223372036854775807 / 2,
       round((g * 13.37 - 50000)::numeric, 2), round((g / 7.0)::numeric, 7),
       (g::numeric * 1234567890123.4567890123), (g - 1500) * 10.0 ^ (mod(g, 600) - 300),
       (ARRAY['plain', E'tab\\there', E'new\\nline', E'back\\\\slash', 'ünï ✓ 𝄞', '', '\\N'])[mod(g, 7) + 1],
       repeat('x', mod(g, 300)), (ARRAY['ab', 'abc', 'a'])[mod(g, 3) + 1],
       (ARRAY['sad', 'ok', 'happy'])[mod(g, 3) + 1]::{schema}.mood_binary_copy, mod(g, 2) = 0,
       timestamp '1950-01-01' + g * interval '12345 seconds 678901 microseconds',
       timestamp '1999-12-31 23:59:59' + g * interval '1 microsecond',
       timestamptz '2024-03-31 01:30:00+01' + g * interval '1 hour',
       date '1960-01-01' + g * 13, time '00:00:00' + g * interval '37 seconds 123 microseconds',
       md5(g::text)::uuid
FROM generate_series(1, 3000) AS g
"""


def _null_every_column(conn: sa.Connection, schema: str, names: list[str]) -> None:
    for offset, name in enumerate(names):
        conn.exec_driver_sql(
            f'UPDATE "{schema}".source SET "{name}" = NULL WHERE small = {offset + 1} - 16000'
        )
    conn.exec_driver_sql(f"UPDATE \"{schema}\".source SET double = 'NaN' WHERE small = 50 - 16000")


def _read(engine, source, names, aids, *, binary: bool) -> pd.DataFrame:
    statement = sa.select(*(source.table.c[n] for n in names))
    kinds = [source.column(n).kind for n in names]
    as_text = [n in aids for n in names]
    with engine.connect() as conn:
        chunks = list(postgres.copy_out(conn, statement, names, kinds, as_text=as_text, binary=binary))
    return pd.DataFrame(
        {n: pd.concat([c[i] for c in chunks], ignore_index=True) for i, n in enumerate(names)}
    )


def test_binary_copy_reads_the_same_columns_as_text_copy(pg_schema):
    engine, schema = pg_schema
    with engine.begin() as conn:
        conn.exec_driver_sql(f'CREATE TABLE "{schema}".source ({SOURCE_COLUMNS.format(schema=schema)})')
        conn.exec_driver_sql(SOURCE_ROWS.format(schema=f'"{schema}"'))
    source = reflect_table(engine, schema, "source")
    names = [c.name for c in source.columns]
    with engine.begin() as conn:
        _null_every_column(conn, schema, names)
    statement = sa.select(*(source.table.c[n] for n in names))
    kinds = [source.column(n).kind for n in names]
    as_text = [n == "person" for n in names]
    assert binary_plan(list(statement.selected_columns), kinds, as_text) is not None
    by_binary = _read(engine, source, names, {"person"}, binary=True)
    pd.testing.assert_frame_equal(by_binary, _read(engine, source, names, {"person"}, binary=False))
    assert by_binary["label"].isna().sum() == 1 and by_binary["double"].isna().sum() == 2


@pytest.mark.parametrize(
    ("sql_type", "kind"),
    [
        (postgresql.REAL(), ValueKind.REAL),  # its text is the shortest float4 decimal, not its value
        (sa.NUMERIC(400, 2), ValueKind.REAL),  # beyond a double: the server's cast would fail
        (sa.NUMERIC(), ValueKind.REAL),  # unbounded, likewise
        (postgresql.TIME(timezone=True), ValueKind.TIME),
        (postgresql.MONEY(), ValueKind.REAL),
    ],
)
def test_sources_without_an_exact_binary_reading_are_read_as_text(sql_type, kind):
    assert binary_plan([sa.Column("c", sql_type)], [kind], [False]) is None
