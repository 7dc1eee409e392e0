"""Every listed SQL type is read into an engine-ready dtype and written back with the same declared type."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from syndiffix_ops.warehouse import (
    TargetColumn,
    ValueKind,
    read_columns,
    reflect_table,
    write_table,
)

# Per dialect: (column DDL, kind, values of three rows; None = null). Row values are what the driver returns.
PG_COLUMNS = {
    "c_smallint": ("smallint", ValueKind.INTEGER, [1, -2, None]),
    "c_integer": ("integer", ValueKind.INTEGER, [100000, 0, -7]),
    "c_bigint": ("bigint", ValueKind.INTEGER, [2**40, None, 3]),
    "c_numeric": ("numeric(10,2)", ValueKind.REAL, [Decimal("12.34"), Decimal("-0.50"), None]),
    "c_numeric_free": ("numeric", ValueKind.REAL, [Decimal("1.5"), Decimal("2"), Decimal("-3.25")]),
    "c_real": ("real", ValueKind.REAL, [1.5, None, -2.25]),
    "c_double": ("double precision", ValueKind.REAL, [1e-3, 2.5, None]),
    "c_char": ("char(3)", ValueKind.STRING, ["abc", "xy ", None]),
    "c_varchar": ("varchar(20)", ValueKind.STRING, ["hello", "", None]),
    "c_text": ("text", ValueKind.STRING, ['line\nbreak, "quoted"\ttab \\ back', "ünïcödé", None]),
    "c_boolean": ("boolean", ValueKind.BOOLEAN, [True, False, None]),
    "c_date": ("date", ValueKind.DATE, [dt.date(2024, 2, 29), dt.date(1900, 1, 1), None]),
    "c_time": ("time", ValueKind.TIME, [dt.time(23, 59, 59), dt.time(0, 0, 1, 500000), None]),
    "c_timestamp": (
        "timestamp",
        ValueKind.TIMESTAMP,
        [dt.datetime(2024, 1, 2, 3, 4, 5, 6), None, dt.datetime(1999, 12, 31)],
    ),
    "c_timestamp3": (
        "timestamp(3)",
        ValueKind.TIMESTAMP,
        [dt.datetime(2024, 1, 2, 3, 4, 5, 123000), None, None],
    ),
    "c_timestamp_old": (
        "timestamp",
        ValueKind.TIMESTAMP,
        [dt.datetime(1969, 12, 31, 23, 59, 59), dt.datetime(1900, 1, 1, 0, 0, 1), None],
    ),
    "c_timestamptz": (
        "timestamp with time zone",
        ValueKind.TIMESTAMP_TZ,
        [dt.datetime(2024, 6, 1, 12, tzinfo=dt.UTC), None, dt.datetime(2000, 1, 1, tzinfo=dt.UTC)],
    ),
    "c_enum": ("{enum}", ValueKind.STRING, ["happy", "sad", None]),
}
MARIADB_COLUMNS = {
    "c_tinyint": ("tinyint", ValueKind.INTEGER, [1, -2, None]),
    "c_smallint": ("smallint", ValueKind.INTEGER, [1, -2, None]),
    "c_mediumint": ("mediumint", ValueKind.INTEGER, [1000, None, 3]),
    "c_int": ("int", ValueKind.INTEGER, [100000, 0, -7]),
    "c_bigint": ("bigint", ValueKind.INTEGER, [2**40, None, 3]),
    "c_decimal": ("decimal(10,2)", ValueKind.REAL, [Decimal("12.34"), Decimal("-0.50"), None]),
    "c_float": ("float", ValueKind.REAL, [1.5, None, -2.25]),
    "c_double": ("double", ValueKind.REAL, [1e-3, 2.5, None]),
    "c_char": ("char(3)", ValueKind.STRING, ["abc", "xy", None]),
    "c_varchar": ("varchar(20)", ValueKind.STRING, ["hello", "", None]),
    "c_text": ("text", ValueKind.STRING, ['line\nbreak, "quoted"\ttab \\ back', "ünïcödé", None]),
    "c_boolean": ("boolean", ValueKind.INTEGER, [1, 0, None]),  # MariaDB's BOOLEAN is TINYINT(1)
    "c_date": ("date", ValueKind.DATE, [dt.date(2024, 2, 29), dt.date(1900, 1, 1), None]),
    "c_time": ("time", ValueKind.TIME, [dt.time(23, 59, 59), dt.time(0, 0, 1), None]),
    "c_datetime": (
        "datetime",
        ValueKind.TIMESTAMP,
        [dt.datetime(2024, 1, 2, 3, 4, 5), None, dt.datetime(1999, 12, 31)],
    ),
    "c_datetime6": ("datetime(6)", ValueKind.TIMESTAMP, [dt.datetime(2024, 1, 2, 3, 4, 5, 6), None, None]),
    "c_enum": ("enum('happy','sad')", ValueKind.STRING, ["happy", "sad", None]),
}
SQLITE_COLUMNS = {
    "c_integer": ("INTEGER", ValueKind.INTEGER, [1, -2, None]),
    "c_smallint": ("SMALLINT", ValueKind.INTEGER, [1, -2, None]),
    "c_bigint": ("BIGINT", ValueKind.INTEGER, [2**40, None, 3]),
    "c_numeric": ("NUMERIC(10, 2)", ValueKind.REAL, [Decimal("12.34"), Decimal("-0.50"), None]),
    "c_real": ("REAL", ValueKind.REAL, [1.5, None, -2.25]),
    "c_float": ("FLOAT", ValueKind.REAL, [1e-3, 2.5, None]),
    "c_char": ("CHAR(3)", ValueKind.STRING, ["abc", "xy", None]),
    "c_varchar": ("VARCHAR(20)", ValueKind.STRING, ["hello", "", None]),
    "c_text": ("TEXT", ValueKind.STRING, ['line\nbreak, "quoted"\ttab \\ back', "ünïcödé", None]),
    "c_boolean": ("BOOLEAN", ValueKind.BOOLEAN, [True, False, None]),
    "c_date": ("DATE", ValueKind.DATE, [dt.date(2024, 2, 29), dt.date(1900, 1, 1), None]),
    "c_time": ("TIME", ValueKind.TIME, [dt.time(23, 59, 59), dt.time(0, 0, 1, 500000), None]),
    "c_datetime": (
        "DATETIME",
        ValueKind.TIMESTAMP,
        [dt.datetime(2024, 1, 2, 3, 4, 5, 6), None, dt.datetime(1999, 12, 31)],
    ),
    "c_timestamp": ("TIMESTAMP", ValueKind.TIMESTAMP, [dt.datetime(2024, 1, 2), None, None]),
}
UNSUPPORTED = {
    "postgresql": ["json", "jsonb", "bytea", "uuid", "integer[]", "interval", "inet"],
    "mysql": ["json", "blob", "varbinary(16)", "set('a','b')", "bit(3)", "year"],
    "sqlite": ["BLOB", "JSON"],
}


def _columns_for(dialect: str) -> dict:
    return {"postgresql": PG_COLUMNS, "mysql": MARIADB_COLUMNS, "sqlite": SQLITE_COLUMNS}[dialect]


def _create_source(engine: sa.Engine, schema: str | None, name: str, columns: dict) -> sa.Table:
    preparer = engine.dialect.identifier_preparer
    qualified = preparer.quote_schema(schema) + "." + preparer.quote(name) if schema else preparer.quote(name)
    with engine.begin() as conn:
        ddl = []
        for column, (sql, *_rest) in columns.items():
            if sql == "{enum}":
                conn.exec_driver_sql(
                    f"CREATE TYPE {preparer.quote_schema(schema)}.mood AS ENUM ('happy', 'sad')"
                )
                sql = f"{preparer.quote_schema(schema)}.mood"
            ddl.append(f"{preparer.quote(column)} {sql}")
        conn.exec_driver_sql(f"CREATE TABLE {qualified} ({', '.join(ddl)})")
        table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=conn)
        rows = [{c: values[i] for c, (_, _, values) in columns.items()} for i in range(3)]
        conn.execute(table.insert(), rows)
    return table


def _sorted_rows(engine: sa.Engine, table: sa.Table) -> list[tuple]:
    with engine.connect() as conn:
        rows = conn.execute(sa.select(table)).all()
    return sorted((tuple(row) for row in rows), key=repr)


def test_every_listed_type_round_trips_with_its_declared_type_and_values(warehouse_db):
    engine, schema = warehouse_db
    columns = _columns_for(engine.dialect.name)
    source_table = _create_source(engine, schema, "typed_source", columns)
    source = reflect_table(engine, schema, "typed_source")

    assert {c.name: c.kind for c in source.columns} == {name: kind for name, (_, kind, _) in columns.items()}
    frame = read_columns(engine, source, [c.name for c in source.columns], chunk_rows=2)
    assert len(frame) == 3

    targets = [TargetColumn(c.name, c.sql_type, c.kind) for c in source.columns]
    write_table(
        engine,
        schema=schema,
        name="typed_copy",
        columns=targets,
        frame=frame,
        source_dialect=engine.dialect.name,
        replace=True,
        before_commit=lambda conn: None,
    )
    copy = sa.Table("typed_copy", sa.MetaData(), schema=schema, autoload_with=engine)
    declared = {c.name: c.type.compile(dialect=engine.dialect) for c in source_table.columns}
    assert {c.name: c.type.compile(dialect=engine.dialect) for c in copy.columns} == declared
    assert _sorted_rows(engine, copy) == _sorted_rows(engine, source_table)


def test_read_values_have_dtypes_the_engine_codecs_accept(warehouse_db):
    engine, schema = warehouse_db
    columns = _columns_for(engine.dialect.name)
    _create_source(engine, schema, "dtype_source", columns)
    source = reflect_table(engine, schema, "dtype_source")
    frame = read_columns(engine, source, [c.name for c in source.columns])
    for column in source.columns:
        series = frame[column.name]
        expected_values = columns[column.name][2]
        if column.kind is ValueKind.INTEGER:
            assert pd.api.types.is_integer_dtype(series.dtype), column.name
        elif column.kind is ValueKind.REAL:
            assert series.dtype == np.float64, column.name
            assert np.allclose(
                series.dropna().to_numpy(), [float(v) for v in expected_values if v is not None]
            )
        elif column.kind is ValueKind.BOOLEAN:
            assert pd.api.types.is_bool_dtype(series.dtype), column.name
        elif column.kind is ValueKind.TIMESTAMP:
            assert pd.api.types.is_datetime64_dtype(series.dtype) and series.dt.tz is None, column.name
        elif column.kind is ValueKind.TIMESTAMP_TZ:
            assert str(series.dt.tz) == "UTC", column.name
        elif column.kind is ValueKind.DATE:
            assert all(type(v) is dt.date for v in series.dropna()), column.name
        elif column.kind is ValueKind.TIME:
            assert all(type(v) is dt.time for v in series.dropna()), column.name
        else:
            assert all(isinstance(v, str) for v in series.dropna()), column.name
        assert series.isna().sum() == sum(v is None for v in expected_values), column.name


def test_types_no_engine_synthesizes_are_recognised_and_refused_by_name(warehouse_db):
    engine, schema = warehouse_db
    dialect = engine.dialect.name
    preparer = engine.dialect.identifier_preparer
    qualified = f"{preparer.quote_schema(schema)}.odd" if schema else "odd"
    columns = {f"c{i}": sql for i, sql in enumerate(UNSUPPORTED[dialect])}
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {qualified} (id integer, {', '.join(f'{n} {sql}' for n, sql in columns.items())})"
        )
    source = reflect_table(engine, schema, "odd")
    assert {c.name: c.kind for c in source.columns} == {"id": ValueKind.INTEGER, **dict.fromkeys(columns)}
    with pytest.raises(
        LookupError, match=r"column 'c0' \(.*\) cannot be read for synthesis; set its policy to drop"
    ):
        read_columns(engine, source, ["id", "c0"])
