"""Streaming reads: chunking, the max_rows stop, filter errors, and the connection afterwards."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from syndiffix_ops.warehouse import (
    ColumnValueError,
    RowLimitExceeded,
    check_row_limit,
    read_columns,
    reflect_table,
)
from syndiffix_ops.warehouse.read import iter_column_chunks

ROWS = 2500


@pytest.fixture
def numbers(warehouse_db):
    engine, schema = warehouse_db
    table = sa.Table(
        "numbers",
        sa.MetaData(),
        sa.Column("n", sa.Integer),
        sa.Column("word", sa.String(20)),
        schema=schema,
    )
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"n": i, "word": f"w{i % 7}" if i % 11 else None} for i in range(ROWS)])
    return engine, reflect_table(engine, schema, "numbers")


def test_chunks_hold_at_most_chunk_rows_and_together_the_whole_filtered_table(numbers):
    engine, source = numbers
    chunks = list(iter_column_chunks(engine, source, ["n", "word"], where="n >= 100", chunk_rows=700))
    assert [len(c) for c in chunks[:-1]] == [700] * (len(chunks) - 1) and 0 < len(chunks[-1]) <= 700
    frame = read_columns(engine, source, ["n", "word"], where="n >= 100", chunk_rows=700)
    assert sorted(frame["n"].tolist()) == list(range(100, ROWS))
    assert frame["word"].isna().sum() == sum(1 for i in range(100, ROWS) if i % 11 == 0)


def test_reading_stops_at_max_rows_and_leaves_the_connection_usable(numbers):
    engine, source = numbers
    with engine.connect() as conn:
        with pytest.raises(RowLimitExceeded, match="has more than max_rows=1000 rows"):
            read_columns(conn, source, ["n"], max_rows=1000, chunk_rows=300)
        conn.rollback()
        assert conn.execute(sa.select(sa.func.count()).select_from(source.table)).scalar_one() == ROWS
    assert len(read_columns(engine, source, ["n"], max_rows=ROWS)) == ROWS


def test_the_row_limit_check_counts_no_further_than_the_limit(numbers):
    engine, source = numbers
    check_row_limit(engine, source, None, ROWS)
    with pytest.raises(RowLimitExceeded, match=f"more than max_rows={ROWS - 1} rows"):
        check_row_limit(engine, source, None, ROWS - 1)
    check_row_limit(engine, source, "n < 10", 10)


def test_a_filter_that_fails_on_the_server_raises_and_the_connection_survives(numbers):
    engine, source = numbers
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite and MariaDB return NULL for a division by zero instead of failing")
    with engine.connect() as conn:
        with pytest.raises(sa.exc.DBAPIError, match="division by zero"):
            read_columns(conn, source, ["n"], where="100 / (n - 2000) > -1000")
        conn.rollback()
        assert conn.execute(sa.select(sa.literal(1))).scalar_one() == 1


def test_abandoning_a_postgresql_copy_midway_cancels_it_cleanly(numbers, monkeypatch):
    engine, source = numbers
    if engine.dialect.name != "postgresql":
        pytest.skip("the COPY fast path is PostgreSQL's")
    from syndiffix_ops.warehouse import postgres

    # many COPY chunks from a small table, each of more than 50 rows (about 16 bytes a row in binary)
    monkeypatch.setattr(postgres, "_READ_CHUNK_BYTES", 1024)
    with engine.connect() as conn:
        chunks = iter_column_chunks(conn, source, ["n", "word"], chunk_rows=50)
        first = next(chunks)
        assert len(first) == 50
        chunks.close()  # what a consumer that stops early (max_rows, an error) does
        conn.rollback()
        assert conn.execute(sa.select(sa.func.count()).select_from(source.table)).scalar_one() == ROWS
    assert len(read_columns(engine, source, ["n", "word"], chunk_rows=50)) == ROWS


def test_a_value_that_cannot_be_converted_names_the_table_and_column(warehouse_db):
    engine, schema = warehouse_db
    preparer = engine.dialect.identifier_preparer
    name = f"{preparer.quote_schema(schema)}.odd_values" if schema else "odd_values"
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql(f"CREATE TABLE {name} (id integer, happened timestamp)")
            conn.exec_driver_sql(f"INSERT INTO {name} VALUES (1, '2024-01-01'), (2, 'infinity')")
        elif engine.dialect.name == "sqlite":
            conn.exec_driver_sql(f"CREATE TABLE {name} (id integer, happened DATETIME)")
            conn.exec_driver_sql(f"INSERT INTO {name} VALUES (1, '2024-01-01 00:00:00'), (2, 'not a time')")
        else:
            pytest.skip("MariaDB refuses such values on insert")
    source = reflect_table(engine, schema, "odd_values")
    with pytest.raises(
        ColumnValueError, match=r"source table .*odd_values: .*a value cannot be read"
    ) as caught:
        read_columns(engine, source, ["id", "happened"])
    message = str(caught.value)
    assert "infinity" in message or "not a time" in message
    if engine.dialect.name == "postgresql":
        assert "column 'happened'" in message
