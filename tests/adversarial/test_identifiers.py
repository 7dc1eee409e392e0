"""Identifiers: `%` in PostgreSQL names, length limits per dialect, derived helper names (issue #11 item 8)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from dialect_cases import SALT, config_for, leftovers, lineage_rows, one_line, table_rows

from syndiffix_ops.lineage import LINEAGE_TABLE
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.run_errors import PipelineError
from syndiffix_ops.warehouse.identifiers import derived_name, target_tag
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX


@pytest.fixture
def pg(pg_url):
    engine = sa.create_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.fixture
def mariadb(mariadb_url):
    engine = sa.create_engine(mariadb_url)
    yield engine
    engine.dispose()


def _source(engine: sa.Engine, schema: str | None, name: str, column: str = "value", rows: int = 300) -> None:
    table = sa.Table(
        name,
        sa.MetaData(),
        sa.Column(column, sa.Integer),
        sa.Column("label", sa.String(10)),
        schema=schema,
    )
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{column: i % 40, "label": f"l{i % 4}"} for i in range(rows)])


def _schema(engine: sa.Engine, name: str) -> str:
    with engine.begin() as conn:
        conn.execute(sa.schema.CreateSchema(name))
    return name


def test_percent_signs_in_postgresql_schema_table_and_column_names_work(pg):
    tag = uuid.uuid4().hex[:6]
    source_schema = _schema(pg, f"src%s {tag}")
    _source(pg, source_schema, "100% data", column="pct%col")
    target_schema = f"out%%{tag}"
    config = config_for(pg, pg, f"{source_schema}.100% data", "syn%d", target_schema=target_schema)
    for _ in range(2):  # the second run replaces the first run's table
        [result] = run_table(config, "syn%d", salt=SALT)
    assert [c["name"] for c in sa.inspect(pg).get_columns("syn%d", schema=target_schema)] == [
        "pct%col",
        "label",
    ]
    rows = table_rows(pg, target_schema, "syn%d")
    assert len(rows) == result.rows_written > 0 and {label for _, label in rows} <= {"l0", "l1", "l2", "l3"}
    assert [r["target_table"] for r in lineage_rows(pg, target_schema)] == ["syn%d", "syn%d"]
    assert leftovers(pg, target_schema) == []


@pytest.mark.parametrize(
    ("target", "length"),
    [("t" * 64, "64 bytes"), ("é" * 32, "64 bytes")],  # PostgreSQL counts bytes: 32 x 'é' is 64
)
def test_postgresql_target_names_over_63_bytes_are_refused_before_anything_is_written(pg, target, length):
    schema = _schema(pg, f"limits {uuid.uuid4().hex[:6]}")
    _source(pg, schema, "source")
    config = config_for(pg, pg, f"{schema}.source", target, target_schema=schema)
    for dry_run in (True, False):
        with pytest.raises(PipelineError) as caught:
            run_table(config, target, salt=SALT, dry_run=dry_run)
        message = one_line(caught.value)
        assert f"target table {target!r} is {length} long" in message and "at most 63 bytes" in message
    assert set(sa.inspect(pg).get_table_names(schema=schema)) <= {"source", LINEAGE_TABLE}
    assert lineage_rows(pg, schema) == []


def test_a_postgresql_target_name_of_exactly_63_bytes_is_replaced_run_after_run(pg):
    schema = _schema(pg, f"limits {uuid.uuid4().hex[:6]}")
    _source(pg, schema, "source")
    target = "n" * 63
    config = config_for(pg, pg, f"{schema}.source", target, target_schema=schema)
    for _ in range(3):
        run_table(config, target, salt=SALT)
    assert sorted(sa.inspect(pg).get_table_names(schema=schema)) == sorted([LINEAGE_TABLE, "source", target])
    assert len(lineage_rows(pg, schema)) == 3


def test_a_long_source_column_is_refused_for_a_postgresql_target_naming_the_column(tmp_path, pg):
    sqlite = sa.create_engine(f"sqlite:///{tmp_path / 'long.db'}")
    column = "c" * 70
    _source(sqlite, None, "wide", column=column)
    config = config_for(sqlite, pg, "wide", "wide_synth", target_schema=f"s{uuid.uuid4().hex[:6]}")
    with pytest.raises(PipelineError) as caught:
        run_table(config, "wide_synth", salt=SALT, dry_run=True)
    assert f"target table wide_synth: column {column!r} is 70 bytes long" in one_line(caught.value)
    sqlite.dispose()


def test_mariadb_names_over_64_characters_are_refused_up_front(mariadb):
    _source(mariadb, None, "limits_source")
    ok, too_long = "m" * 64, "m" * 65
    config = config_for(mariadb, mariadb, "limits_source", too_long)
    with pytest.raises(PipelineError) as caught:
        run_table(config, too_long, salt=SALT)
    assert f"target table {too_long!r} is 65 characters long" in one_line(caught.value)
    assert "at most 64 characters" in str(caught.value)
    assert not sa.inspect(mariadb).has_table(too_long[:64])

    config = config_for(mariadb, mariadb, "limits_source", ok)
    for _ in range(2):
        run_table(config, ok, salt=SALT)
    assert len(table_rows(mariadb, None, ok)) > 0
    assert [n for n in leftovers(mariadb, None) if target_tag(ok) in n] == []


def test_helper_table_names_have_a_fixed_length_whatever_the_target_name():
    for target in ("t", "x" * 63, "é" * 200):
        for prefix in (STAGING_PREFIX, OLD_PREFIX):
            name = derived_name(prefix, target, uuid.uuid4().hex[:16])
            assert name.startswith(prefix) and len(name) == len(prefix) + 25 <= 63
    assert derived_name(STAGING_PREFIX, "a", "r") != derived_name(STAGING_PREFIX, "b", "r")


@pytest.mark.parametrize("target", ["𐀀 table", "trailing "])
def test_mariadb_names_it_cannot_hold_are_refused_up_front(mariadb, target):
    _source(mariadb, None, f"chars_{uuid.uuid4().hex[:6]}")
    source = [n for n in sa.inspect(mariadb).get_table_names() if n.startswith("chars_")][-1]
    with pytest.raises(PipelineError) as caught:
        run_table(config_for(mariadb, mariadb, source, target), target, salt=SALT, dry_run=True)
    message = one_line(caught.value)
    assert f"target table {target!r}" in message and "MySQL/MariaDB names cannot" in message


def _case_pair_source(pg: sa.Engine) -> str:
    """A PostgreSQL table whose quoted columns `iod` and `IOD` differ only in case (DAAG bomregions2021)."""
    schema = _schema(pg, f"cases {uuid.uuid4().hex[:6]}")
    table = sa.Table(
        "indices", sa.MetaData(), sa.Column("iod", sa.Float), sa.Column("IOD", sa.Float), schema=schema
    )
    table.create(pg)
    with pg.begin() as conn:
        conn.execute(table.insert(), [{"iod": i / 10, "IOD": (i % 7) / 3} for i in range(300)])
    return schema


@pytest.mark.parametrize("side", ["sqlite", "mariadb"])
def test_columns_differing_only_in_case_are_refused_for_a_target_that_ignores_case(
    pg, mariadb, tmp_path, side
):
    schema = _case_pair_source(pg)
    target = sa.create_engine(f"sqlite:///{tmp_path / 'cases.db'}") if side == "sqlite" else mariadb
    config = config_for(pg, target, f"{schema}.indices", "indices_synth")
    for dry_run in (True, False):
        with pytest.raises(PipelineError) as caught:
            run_table(config, "indices_synth", salt=SALT, dry_run=dry_run)
        assert (
            "target table indices_synth: columns 'iod' and 'IOD' differ only in case, which "
            f"{target.dialect.name} column names do not tell apart"
        ) in one_line(caught.value)
    assert not sa.inspect(target).has_table("indices_synth")
    assert leftovers(target, None) == []


def test_columns_differing_only_in_case_are_kept_apart_on_postgresql(pg):
    schema = _case_pair_source(pg)
    config = config_for(pg, pg, f"{schema}.indices", "indices_synth", target_schema=schema)
    run_table(config, "indices_synth", salt=SALT)
    columns = [c["name"] for c in sa.inspect(pg).get_columns("indices_synth", schema=schema)]
    assert columns == ["iod", "IOD"]
