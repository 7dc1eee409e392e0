"""`where:` is exactly one boolean expression, and what runs is what was checked.

The campaign saw `label = 'ratio :high'` read as a bind parameter (an empty table swapped in on
PostgreSQL, valid SQL refused elsewhere), a `--` comment swallow the rest of the COPY statement, and a
`where` that closed the COPY wrapper run a DROP TABLE and commit.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from support_dataloss import SALT, config_for, make_orders, rows_of, table_names

from syndiffix_ops.config import ConfigError, PipelineConfig, parse_config
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.warehouse import read_columns, reflect_table
from syndiffix_ops.where import WhereError, render_where

BREAK_OUT = "1=1) TO STDOUT; DROP TABLE {victim}; COMMIT; SELECT (1"


def _label_rows(engine, schema, labels: list[str]) -> None:
    table = sa.Table(
        "labels", sa.MetaData(), sa.Column("id", sa.Integer), sa.Column("label", sa.Text), schema=schema
    )
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(table.insert(), [{"id": i, "label": label} for i, label in enumerate(labels)])


@pytest.mark.parametrize(
    ("where", "expected"),
    [
        ("label = 'ratio :high'", [0, 3]),
        ("label = 'ratio :high' -- only the colon ones", [0, 3]),
        ("label LIKE 'ratio :%' AND id > 0", [3]),
        ("label = 'a:b' OR label = '10:30'", [1, 2]),
    ],
)
def test_colons_in_string_literals_are_text_on_every_dialect(warehouse_db, where, expected):
    engine, schema = warehouse_db
    _label_rows(engine, schema, ["ratio :high", "a:b", "10:30", "ratio :high", "ratio high"])
    source = reflect_table(engine, schema, "labels")
    frame = read_columns(engine, source, ["id", "label"], where=where)
    assert sorted(frame["id"].tolist()) == expected


def test_a_filtered_run_keeps_the_colon_literal_and_writes_rows(warehouse_db):
    engine, schema = warehouse_db
    make_orders(engine, schema)
    with engine.begin() as conn:
        table = sa.Table("orders", sa.MetaData(), schema=schema, autoload_with=conn)
        conn.execute(table.update().where(table.c.id < 60).values(label="ratio :high"))
    config = config_for(engine, schema, where="label = 'ratio :high'")
    [result] = run_table(config, "orders_synth", salt=SALT)
    written = rows_of(engine, schema, "orders_synth")
    assert result.rows_written == len(written) > 0
    assert {row[1] for row in written} == {"ratio :high"}


@pytest.mark.parametrize(
    "where",
    [
        BREAK_OUT.format(victim="victim"),
        "id > 0; DROP TABLE victim",
        "id > 0;",
        "(SELECT 1)",
        "id IN (WITH d AS (DELETE FROM victim RETURNING id) SELECT id FROM d)",
        "id > 0) TO STDOUT WITH (FORMAT csv) --",
        "/* id > 0",
        "'unterminated",
        "",
        "id >",
    ],
)
def test_anything_but_one_expression_is_refused_at_load(where):
    data = {
        "source": "sqlite:///s.db",
        "target": "sqlite:///t.db",
        "tables": [{"source": "orders", "where": where}],
    }
    with pytest.raises(ConfigError) as refused:
        parse_config(data, file="pipeline.yaml")
    [line] = refused.value.problems
    assert line.startswith("pipeline.yaml: tables[0] (orders) -> where: "), line
    assert "\n" not in line


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite", None])
def test_comments_never_reach_the_database(dialect):
    rendered = render_where("id > 0 -- ) TO STDOUT; DROP TABLE x\n AND label <> 'x' /* c */", dialect)
    assert "--" not in rendered and "/*" not in rendered and "DROP" not in rendered
    assert rendered.startswith("(") and rendered.endswith(")")


def test_the_break_out_is_refused_before_any_database_call(pg_url):
    """The issue's example, given straight to run_table (no config validation): no statement reaches
    the server, and the table it would have dropped is still there."""
    engine = sa.create_engine(pg_url)
    make_orders(engine, "public", name="victim")
    make_orders(engine, "public", name="wsource")
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda conn, cursor, sql, *a: statements.append(sql))
    config = PipelineConfig.model_validate(
        {
            "source": pg_url,
            "target": pg_url,
            "target_schema": "wout",
            "tables": [{"source": "public.wsource", "where": BREAK_OUT.format(victim="public.victim")}],
        }
    )
    with pytest.raises(ConfigError, match="where: a ';' ends a statement"):
        run_table(config, "wsource", source=engine, target=engine, salt=SALT)
    assert statements == []
    assert "victim" in table_names(engine, "public")
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE public.victim, public.wsource")
    engine.dispose()


def test_mariadb_backslash_quote_cannot_smuggle_a_statement(mariadb_url):
    """MySQL strings treat \\' as a quote; the re-rendered literal keeps the whole text as one value."""
    engine = sa.create_engine(mariadb_url)
    _label_rows(engine, None, ["x' ) ; drop table labels; -- ", "plain"])
    source = reflect_table(engine, None, "labels")
    frame = read_columns(engine, source, ["id", "label"], where="label = 'x\\' ) ; drop table labels; -- '")
    assert frame["id"].tolist() == [0]
    assert "labels" in table_names(engine, None)
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE labels")
    engine.dispose()


def test_reading_refuses_an_unchecked_where_too(tmp_path):
    """read_columns is public API (the risk report uses it): it applies the same check."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    make_orders(engine, None)
    source = reflect_table(engine, None, "orders")
    with pytest.raises(WhereError, match="';'"):
        read_columns(engine, source, ["label"], where="id > 0; DELETE FROM orders")
    assert len(rows_of(engine, None, "orders")) == 120
