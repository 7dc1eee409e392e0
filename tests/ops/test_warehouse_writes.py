"""Atomic replace, append and identifier quoting of warehouse.write on PostgreSQL, SQLite and MariaDB."""

from __future__ import annotations

import pandas as pd
import pytest
import sqlalchemy as sa

from syndiffix_ops.warehouse import (
    TargetColumn,
    TargetSchemaError,
    ValueKind,
    read_columns,
    reflect_table,
    write_table,
)
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX

WEIRD_TABLE = 'order "items"; DROP TABLE x; -- ü'
WEIRD_COLUMNS = ["select", 'the "quoted"', "semi;colon", "spa ce", "naïve ✓", "from"]


def _columns() -> list[TargetColumn]:
    return [
        TargetColumn("id", sa.SmallInteger(), ValueKind.INTEGER),
        TargetColumn("label", sa.String(20), ValueKind.STRING),
    ]


def _write(engine, schema, name, ids, labels, *, replace=True, before_commit=lambda conn: None):
    write_table(
        engine,
        schema=schema,
        name=name,
        columns=_columns(),
        frame=pd.DataFrame({"id": ids, "label": labels}),
        source_dialect=engine.dialect.name,
        replace=replace,
        before_commit=before_commit,
    )


def _rows(engine, schema, name) -> list[tuple]:
    table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=engine)
    with engine.connect() as conn:
        return sorted(tuple(r) for r in conn.execute(sa.select(table)).all())


def _leftovers(engine, schema) -> list[str]:
    names = sa.inspect(engine).get_table_names(schema=schema)
    return [n for n in names if n.startswith((STAGING_PREFIX, OLD_PREFIX))]


def _marker_table(schema) -> sa.Table:
    return sa.Table("marker", sa.MetaData(), sa.Column("note", sa.String(50)), schema=schema)


class InjectedFailure(RuntimeError):
    pass


def test_replace_swaps_in_the_new_rows_together_with_the_before_commit_work(warehouse_db):
    engine, schema = warehouse_db
    marker = _marker_table(schema)
    marker.create(engine)
    _write(engine, schema, "t", [1, 2], ["a", "b"])

    def note(conn):
        conn.execute(marker.insert(), [{"note": "second"}])

    _write(engine, schema, "t", [3], ["c"], before_commit=note)
    assert _rows(engine, schema, "t") == [(3, "c")]
    assert _rows(engine, schema, "marker") == [("second",)]
    assert _leftovers(engine, schema) == []


def test_a_failure_after_the_staging_write_leaves_the_previous_table_and_no_staging_table(warehouse_db):
    engine, schema = warehouse_db
    marker = _marker_table(schema)
    marker.create(engine)
    _write(engine, schema, "t", [1, 2], ["a", "b"])

    def note_then_fail(conn):
        # Runs after the staging table is filled and swapped in: the lineage insert's place.
        conn.execute(marker.insert(), [{"note": "must not stay"}])
        assert sa.inspect(conn).has_table("t", schema=schema)
        raise InjectedFailure("after the staging write")

    with pytest.raises(InjectedFailure):
        _write(engine, schema, "t", [3], ["c"], before_commit=note_then_fail)
    assert _rows(engine, schema, "t") == [(1, "a"), (2, "b")]
    assert _rows(engine, schema, "marker") == []
    assert _leftovers(engine, schema) == []


def test_a_failure_on_the_first_write_leaves_no_table_at_all(warehouse_db):
    engine, schema = warehouse_db

    def fail(conn):
        raise InjectedFailure("first write")

    with pytest.raises(InjectedFailure):
        _write(engine, schema, "fresh", [1], ["a"], before_commit=fail)
    assert not sa.inspect(engine).has_table("fresh", schema=schema)
    assert _leftovers(engine, schema) == []


def test_a_database_error_while_filling_the_staging_table_leaves_the_previous_table(warehouse_db):
    engine, schema = warehouse_db
    if engine.dialect.name == "sqlite":
        pytest.skip("SQLite does not enforce SMALLINT's range, so this value does not fail there")
    _write(engine, schema, "t", [1], ["a"])
    with pytest.raises(sa.exc.DBAPIError):
        _write(engine, schema, "t", [2, 10**6], ["b", "c"])  # 10**6 does not fit a SMALLINT
    assert _rows(engine, schema, "t") == [(1, "a")]
    assert _leftovers(engine, schema) == []


def test_append_adds_rows_and_refuses_a_target_of_another_shape(warehouse_db):
    engine, schema = warehouse_db
    _write(engine, schema, "t", [1], ["a"], replace=False)
    _write(engine, schema, "t", [2], ["b"], replace=False)
    assert _rows(engine, schema, "t") == [(1, "a"), (2, "b")]

    def fail(conn):
        raise InjectedFailure("append")

    with pytest.raises(InjectedFailure):
        _write(engine, schema, "t", [3], ["c"], replace=False, before_commit=fail)
    assert _rows(engine, schema, "t") == [(1, "a"), (2, "b")]

    with pytest.raises(TargetSchemaError, match="use mode: replace"):
        write_table(
            engine,
            schema=schema,
            name="t",
            columns=[TargetColumn("id", sa.SmallInteger(), ValueKind.INTEGER)],
            frame=pd.DataFrame({"id": [4]}),
            source_dialect=engine.dialect.name,
            replace=False,
            before_commit=lambda conn: None,
        )


def test_before_swap_runs_with_the_rows_staged_and_what_it_raises_leaves_the_target_as_it_was(warehouse_db):
    engine, schema = warehouse_db
    _write(engine, schema, "t", [1], ["a"])
    seen = []

    def review_staged():
        # the rows are in a staging table, the target still holds the previous copy
        seen.append((_rows(engine, schema, "t"), len(_leftovers(engine, schema))))
        raise InjectedFailure("held back")

    for replace in (True, False):
        with pytest.raises(InjectedFailure):
            write_table(
                engine,
                schema=schema,
                name="t",
                columns=_columns(),
                frame=pd.DataFrame({"id": [2, 3], "label": ["b", "c"]}),
                source_dialect=engine.dialect.name,
                replace=replace,
                before_swap=review_staged,
                before_commit=lambda conn: None,
            )
        assert _rows(engine, schema, "t") == [(1, "a")]
        assert _leftovers(engine, schema) == []
    # PostgreSQL and SQLite stage inside the write's transaction (another connection sees no staging
    # table); MariaDB commits it first. Appending stages nothing: the review comes before any write.
    staged_tables = 1 if engine.dialect.name in ("mysql", "mariadb") else 0
    assert seen == [([(1, "a")], staged_tables), ([(1, "a")], 0)]

    events = []
    write_table(
        engine,
        schema=schema,
        name="t",
        columns=_columns(),
        frame=pd.DataFrame({"id": [2], "label": ["b"]}),
        source_dialect=engine.dialect.name,
        replace=True,
        before_swap=lambda: events.append("reviewed"),
        before_commit=lambda conn: events.append("lineage"),
        progress=events.append,
    )
    assert events == ["reviewed", "staged", "swapped", "lineage"]
    assert _rows(engine, schema, "t") == [(2, "b")]


def test_names_with_quotes_spaces_semicolons_unicode_and_reserved_words_round_trip(warehouse_db):
    engine, schema = warehouse_db
    source_table = sa.Table(
        WEIRD_TABLE,
        sa.MetaData(),
        *(sa.Column(name, sa.String(30)) for name in WEIRD_COLUMNS),
        schema=schema,
    )
    source_table.create(engine)
    row = {name: f"v {i} '\";" for i, name in enumerate(WEIRD_COLUMNS)}
    with engine.begin() as conn:
        conn.execute(source_table.insert(), [row, dict.fromkeys(WEIRD_COLUMNS)])

    source = reflect_table(engine, schema, WEIRD_TABLE)
    assert [c.name for c in source.columns] == WEIRD_COLUMNS
    frame = read_columns(engine, source, WEIRD_COLUMNS, where=None)
    target_name = f"synthetic {WEIRD_TABLE}"[:60]
    for _ in range(2):  # the second write replaces the first through the staging table and rename
        write_table(
            engine,
            schema=schema,
            name=target_name,
            columns=[TargetColumn(c.name, c.sql_type, c.kind) for c in source.columns],
            frame=frame,
            source_dialect=engine.dialect.name,
            replace=True,
            before_commit=lambda conn: None,
        )
    copy = sa.Table(target_name, sa.MetaData(), schema=schema, autoload_with=engine)
    assert [c.name for c in copy.columns] == WEIRD_COLUMNS
    with engine.connect() as conn:
        rows = conn.execute(sa.select(copy)).mappings().all()
    assert sorted(rows, key=lambda r: r["select"] is None) == [row, dict.fromkeys(WEIRD_COLUMNS)]
    assert sa.inspect(engine).has_table(
        WEIRD_TABLE, schema=schema
    )  # the "DROP TABLE" in the name did nothing
    assert _leftovers(engine, schema) == []


def test_postgresql_floating_point_columns_are_created_on_a_mariadb_target(pg_url, mariadb_url):
    source = sa.create_engine(pg_url)
    target = sa.create_engine(mariadb_url)
    try:
        with source.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE float_kinds (d double precision, r real, f float(53))")
        reflected = sa.Table("float_kinds", sa.MetaData(), autoload_with=source)
        columns = [TargetColumn(c.name, c.type, ValueKind.REAL) for c in reflected.columns]
        frame = pd.DataFrame({"d": [1.25, -2.5e300], "r": [0.5, 3.0], "f": [1e-300, 7.75]})
        write_table(
            target,
            schema=None,
            name="float_kinds",
            columns=columns,
            frame=frame,
            source_dialect="postgresql",
            replace=True,
            before_commit=lambda conn: None,
        )
        written = {c["name"]: c["type"] for c in sa.inspect(target).get_columns("float_kinds")}
        assert {name: type(kind).__name__ for name, kind in written.items()} == {
            "d": "DOUBLE",
            "r": "FLOAT",
            "f": "DOUBLE",
        }
        with target.connect() as conn:  # raw driver values: SQLAlchemy's reflected DOUBLE rounds to 10 places
            stored = sorted(conn.exec_driver_sql("SELECT d, r, f FROM float_kinds").all())
        assert stored == sorted([(1.25, 0.5, 1e-300), (-2.5e300, 3.0, 7.75)])
    finally:
        source.dispose()
        target.dispose()
