"""min_rows: a run never swaps in fewer synthetic rows than allowed (default 1), and says so.

The campaign saw a filter that stopped matching replace a good table with an empty one, exit 0.
"""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from support_dataloss import SALT, config_for, lineage_rows, make_orders, rows_of, table_names

from syndiffix_ops.cli import EXIT_TABLE_FAILED, main
from syndiffix_ops.config import DEFAULT_MIN_ROWS, ConfigError, parse_config
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.run_errors import TooFewRowsError
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX


def _leftovers(engine, schema) -> list[str]:
    return [n for n in table_names(engine, schema) if n.startswith((STAGING_PREFIX, OLD_PREFIX))]


def test_a_filter_that_stops_matching_leaves_the_previous_table_and_lineage(warehouse_db):
    engine, schema = warehouse_db
    make_orders(engine, schema)
    run_table(config_for(engine, schema, where="label = 'high'"), "orders_synth", salt=SALT, run_id="good")
    table_before = rows_of(engine, schema, "orders_synth")
    lineage_before = lineage_rows(engine, schema)
    assert table_before and [row["run_id"] for row in lineage_before] == ["good"]

    emptied = config_for(engine, schema, where="label = 'no such label'")
    with pytest.raises(TooFewRowsError) as refused:
        run_table(emptied, "orders_synth", salt=SALT, run_id="empty")
    message = str(refused.value)
    assert message.startswith("table orders_synth: the synthetic output has 0 rows, fewer than min_rows=1")
    assert "nothing was written" in message and "where filter" in message
    assert rows_of(engine, schema, "orders_synth") == table_before
    lineage_after = lineage_rows(engine, schema)
    assert [row for row in lineage_after if row["status"] == "success"] == lineage_before
    # the failure itself is on record (lineage redacts numbers from error messages)
    [failed] = [row for row in lineage_after if row["status"] == "failed"]
    assert failed["run_id"] == "empty" and "fewer than min_rows" in failed["error_message"]
    assert _leftovers(engine, schema) == []


def test_the_refusal_tells_the_synthetic_count_never_the_source_count(warehouse_db):
    engine, schema = warehouse_db
    make_orders(engine, schema, rows=120)
    [allowed] = run_table(config_for(engine, schema, min_rows=0), "orders_synth", salt=SALT)
    synthetic_rows = allowed.rows_written
    with pytest.raises(TooFewRowsError) as refused:
        run_table(config_for(engine, schema, min_rows=10_000), "orders_synth", salt=SALT)
    assert f"has {synthetic_rows} rows, fewer than min_rows=10000" in str(refused.value)
    if synthetic_rows != 120:  # the exact source count appears nowhere unless the synthetic one equals it
        # as a number of its own: the random schema name may hold the digits (test 91204517)
        assert re.search(r"(?<!\d)120(?!\d)", str(refused.value)) is None
    assert len(rows_of(engine, schema, "orders_synth")) == synthetic_rows


def test_min_rows_0_allows_an_empty_output(tmp_path):
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    make_orders(engine, None)
    config = config_for(engine, None, where="label = 'no such label'", min_rows=0)
    [result] = run_table(config, "orders_synth", salt=SALT)
    assert result.status == "success" and result.rows_written == 0
    assert rows_of(engine, None, "orders_synth") == []
    assert [row["synthetic_rows"] for row in lineage_rows(engine, None)] == [0]


def test_defaults_and_precedence():
    base = {"source": "sqlite:///s.db", "target": "sqlite:///t.db"}
    config = parse_config(
        {**base, "defaults": {"min_rows": 50}, "tables": [{"source": "a"}, {"source": "b", "min_rows": 0}]}
    )
    assert [config.effective(t).min_rows for t in config.tables] == [50, 0]
    plain = parse_config({**base, "tables": [{"source": "a"}]})
    assert plain.effective(plain.tables[0]).min_rows == DEFAULT_MIN_ROWS == 1
    with pytest.raises(ConfigError, match="min_rows"):
        parse_config({**base, "tables": [{"source": "a", "min_rows": -1}]})


def test_cli_reports_the_refusal_as_one_line_and_exits_1(tmp_path):
    import sqlalchemy as sa

    database = tmp_path / "w.db"
    make_orders(sa.create_engine(f"sqlite:///{database}"), None)
    config = tmp_path / "c.yaml"
    config.write_text(
        f"source: sqlite:///{database}\ntarget: sqlite:///{tmp_path / 't.db'}\n"
        "tables:\n  - source: orders\n    where: \"label = 'none'\"\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["run", str(config)], env={"SYNDIFFIX_SALT": "s"})
    assert result.exit_code == EXIT_TABLE_FAILED, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "0 rows, fewer than min_rows=1" in errors[0], result.stderr


def test_a_linked_set_with_a_short_table_writes_none_of_its_tables(tmp_path):
    import sqlalchemy as sa

    from syndiffix_ops.linked_pipeline import run_linked_set
    from syndiffix_ops.run_plan import database_key_reader, plan_run

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE customers (customer_id INTEGER PRIMARY KEY, age INTEGER)")
        conn.exec_driver_sql(
            "CREATE TABLE orders (order_id INTEGER PRIMARY KEY, "
            "customer_id INTEGER NOT NULL REFERENCES customers(customer_id), amount REAL)"
        )
        conn.exec_driver_sql(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150) "
            "INSERT INTO customers SELECT i, 18 + i % 60 FROM n"
        )
        conn.exec_driver_sql(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 400) "
            "INSERT INTO orders SELECT i, 1 + i % 150, (i % 37) * 2.5 FROM n"
        )
    config = parse_config(
        {
            "source": f"sqlite:///{tmp_path / 'shop.db'}",
            "target": f"sqlite:///{tmp_path / 'synthetic.db'}",
            "risk": {"enabled": False},
            "tables": [
                {"source": "customers"},
                {"source": "orders", "min_rows": 100_000},
            ],
        }
    )
    [linked_set] = plan_run(config, database_key_reader(engine)).linked_sets
    with pytest.raises(
        TooFewRowsError, match=r"^table orders: the synthetic output has \d+ rows, fewer than min_rows=100000"
    ):
        run_linked_set(config, linked_set, salt=SALT)
    target = sa.create_engine(f"sqlite:///{tmp_path / 'synthetic.db'}")
    assert table_names(target, None) == {"syndiffix_lineage"}  # no synthetic table, only the record
    failed = lineage_rows(target, None)
    assert sorted((r["target_table"], r["status"], r["synthetic_rows"]) for r in failed) == [
        ("customers", "failed", 0),
        ("orders", "failed", 0),
    ]
    assert {r["error_class"] for r in failed} == {"syndiffix_ops.run_errors.TooFewRowsError"}
