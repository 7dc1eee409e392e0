"""An output that resolves to a source table (or the lineage table) is refused before anything is written.

The campaign saw `validate` and `run` exit 0 and replace `public.orders` by its synthetic copy when source
and target were the same database; here every way of naming the same table is tried on every dialect.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support_dataloss import SALT, config_for, lineage_rows, make_orders, rows_of, table_names, url_of

from syndiffix_ops.cli import EXIT_OK, EXIT_USAGE, main
from syndiffix_ops.config import ConfigError, PipelineConfig
from syndiffix_ops.lineage import LINEAGE_TABLE
from syndiffix_ops.pipeline import run_table


def _assert_refused_and_untouched(engine, schema, config, source_name="orders", source_schema=None):
    before = rows_of(engine, source_schema or schema, source_name)
    tables_before = table_names(engine, schema)
    with pytest.raises(ConfigError) as refused:
        run_table(config, config.tables[0], salt=SALT)
    [line] = refused.value.problems
    assert "is the source table" in line and "choose another target name" in line, line
    assert rows_of(engine, source_schema or schema, source_name) == before
    assert table_names(engine, schema) == tables_before  # no lineage table, no staging table
    return line


def test_run_refuses_an_output_that_is_its_own_source_on_every_dialect(warehouse_db):
    engine, schema = warehouse_db
    make_orders(engine, schema)
    config = config_for(engine, schema, validated=False, target="orders")
    line = _assert_refused_and_untouched(engine, schema, config)
    assert line.startswith("table orders: output ") and "nothing was written" in line


def test_validate_refuses_the_same_database_and_schema_without_a_connection(warehouse_db):
    engine, schema = warehouse_db
    with pytest.raises(ConfigError) as refused:
        config_for(engine, schema, target="orders")
    [line] = refused.value.problems
    assert "tables[0] (orders) -> target" in line and "would overwrite source table" in line, line


def test_run_refuses_a_default_schema_spelled_out_in_the_source(warehouse_db, request):
    """The source names the connection's default schema, the target relies on it: only the live
    connection knows they are the same (PostgreSQL: search_path's first schema; MySQL: the database)."""
    engine, _ = warehouse_db
    dialect = engine.dialect.name
    default = {"sqlite": "main", "postgresql": "public"}.get(dialect, engine.url.database)
    name = f"orders_{uuid.uuid4().hex[:6]}"
    make_orders(engine, default if dialect == "postgresql" else None, name=name)
    config = PipelineConfig.model_validate(
        {
            "source": url_of(engine),
            "target": url_of(engine),
            "tables": [{"source": f"{default}.{name}", "target": name}],
        }
    )
    if dialect == "postgresql":
        request.addfinalizer(lambda: _drop(engine, "public", name))
    _assert_refused_and_untouched(engine, None, config, source_name=name, source_schema=default)


def test_postgres_target_in_search_path_schema_is_resolved_on_the_server(pg_url):
    engine = sa.create_engine(pg_url)
    schema = f"sp_{uuid.uuid4().hex[:6]}"
    with engine.begin() as conn:
        conn.execute(sa.schema.CreateSchema(schema))
    make_orders(engine, schema)
    # the target URL looks different and puts `schema` first on its search_path
    target = sa.create_engine(pg_url, connect_args={"options": f"-csearch_path={schema}"})
    config = PipelineConfig.model_validate(
        {"source": pg_url, "target": pg_url, "tables": [{"source": f"{schema}.orders", "target": "orders"}]}
    )
    before = rows_of(engine, schema, "orders")
    with pytest.raises(ConfigError, match="is the source table"):
        run_table(config, "orders", target=target, salt=SALT)
    assert rows_of(engine, schema, "orders") == before
    target.dispose()
    _drop(engine, schema, "orders")
    engine.dispose()


def test_sqlite_same_file_by_another_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    make_orders(engine, None)
    config = PipelineConfig.model_validate(
        {
            "source": "sqlite:///shop.db",
            "target": f"sqlite:///{tmp_path}/./sub/../shop.db",
            "tables": [{"source": "orders", "target": "ORDERS"}],  # SQLite names ignore case
        }
    )
    _assert_refused_and_untouched(engine, None, config)


def test_different_sqlite_files_may_share_table_names(tmp_path):
    source = sa.create_engine(f"sqlite:///{tmp_path / 'source.db'}")
    make_orders(source, None)
    config = PipelineConfig.model_validate(
        {
            "source": url_of(source),
            "target": f"sqlite:///{tmp_path / 'target.db'}",
            "tables": [{"source": "orders", "target": "orders"}],
        }
    )
    [result] = run_table(config, "orders", salt=SALT)
    assert result.status == "success" and result.rows_written > 0


def test_a_target_named_like_the_lineage_table_is_refused(warehouse_db):
    engine, schema = warehouse_db
    make_orders(engine, schema)
    with pytest.raises(ConfigError, match="lineage table"):
        config_for(engine, schema, target=LINEAGE_TABLE)
    config = config_for(engine, schema, validated=False, target=LINEAGE_TABLE)
    with pytest.raises(ConfigError, match="name of the lineage table"):
        run_table(config, config.tables[0], salt=SALT)
    assert lineage_rows(engine, schema) == [] and LINEAGE_TABLE not in table_names(engine, schema)


def _cli_config(tmp_path: Path, source: Path, target: Path, target_name: str) -> Path:
    path = tmp_path / "same.yaml"
    path.write_text(
        f"source: sqlite:///{source}\ntarget: sqlite:///{target}\n"
        f"tables:\n  - source: orders\n    target: {target_name}\n",
        encoding="utf-8",
    )
    return path


@pytest.mark.parametrize("command", ["validate", "run"])
def test_cli_exits_2_with_one_line_and_leaves_the_source(tmp_path, command):
    database = tmp_path / "shop.db"
    engine = sa.create_engine(f"sqlite:///{database}")
    make_orders(engine, None)
    before = rows_of(engine, None, "orders")
    config = _cli_config(tmp_path, database, tmp_path / "x" / ".." / "shop.db", "orders")
    result = CliRunner().invoke(main, [command, str(config)], env={"SYNDIFFIX_SALT": "s"})
    assert result.exit_code == EXIT_USAGE, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert (
        len(errors) == 1 and str(config) in errors[0] and "would overwrite source table orders" in errors[0]
    )
    assert rows_of(engine, None, "orders") == before and table_names(engine, None) == {"orders"}


def test_cli_validate_accepts_another_target_name_in_the_same_file(tmp_path):
    database = tmp_path / "shop.db"
    make_orders(sa.create_engine(f"sqlite:///{database}"), None)
    config = _cli_config(tmp_path, database, database, "orders_synth")
    assert CliRunner().invoke(main, ["validate", str(config)]).exit_code == EXIT_OK


def _drop(engine: sa.Engine, schema: str, name: str) -> None:
    sa.Table(name, sa.MetaData(), schema=schema).drop(engine, checkfirst=True)
