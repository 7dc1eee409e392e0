"""is_permanent sorts real failures: config and source mistakes are permanent, lost connections and
lock timeouts transient (from the real servers and drivers, not constructed exceptions)."""

from __future__ import annotations

import socket
import sqlite3

import pytest
import sqlalchemy as sa

from syndiffix_ops.config import ConfigError, load_config
from syndiffix_ops.errors import is_permanent
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.run_errors import PipelineError, SchemaDriftError


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # nothing listens once the probe is closed


def _raised(engine: sa.Engine, sql: str) -> BaseException:
    with pytest.raises(sa.exc.DBAPIError) as raised, engine.connect() as conn:
        conn.exec_driver_sql(sql)
    return raised.value


def _config(tmp_path, table_line: str):
    path = tmp_path / "c.yaml"
    source = tmp_path / "s.sqlite"
    engine = sa.create_engine(f"sqlite:///{source}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS t (a INTEGER, b TEXT)")
    engine.dispose()
    path.write_text(
        f"version: 1\nsource: sqlite:///{source}\ntarget: sqlite:///{tmp_path / 't.sqlite'}\ntables:\n{table_line}"
    )
    return load_config(path)


def test_config_missing_table_and_missing_column_are_permanent(tmp_path):
    (tmp_path / "bad.yaml").write_text("version: 1\ntables: []\nsurprise: 1\n")
    with pytest.raises(ConfigError) as config_error:
        load_config(tmp_path / "bad.yaml")
    assert is_permanent(config_error.value)
    for line in ("  - source: missing_table\n", "  - source: t\n    columns: [a, nope]\n"):
        with pytest.raises(PipelineError) as raised:
            config = _config(tmp_path, line)
            run_table(config, config.tables[0], salt=b"s" * 16)
        assert is_permanent(raised.value), raised.value
    assert issubclass(SchemaDriftError, PipelineError)


def test_postgres_errors_by_sqlstate(pg_url):
    engine = sa.create_engine(pg_url)
    assert is_permanent(_raised(engine, "SELECT * FROM no_such_table"))
    assert is_permanent(_raised(engine, "SELECT no_such_column FROM pg_class"))
    # lock_not_available: a statement gives up waiting for a lock another session holds.
    with engine.connect() as holder:
        holder.exec_driver_sql("CREATE TABLE IF NOT EXISTS locked (x int)")
        holder.commit()
        holder.exec_driver_sql("LOCK TABLE locked IN ACCESS EXCLUSIVE MODE")
        assert not is_permanent(_raised(engine, "SET lock_timeout = '100ms'; SELECT * FROM locked"))
        holder.rollback()
    refused = sa.create_engine(sa.make_url(pg_url).set(port=_closed_port()))
    with pytest.raises(sa.exc.OperationalError) as raised:
        refused.connect()
    assert not is_permanent(raised.value)
    engine.dispose()


def test_mariadb_errors_by_number(mariadb_url):
    engine = sa.create_engine(mariadb_url)
    assert is_permanent(_raised(engine, "SELECT * FROM no_such_table"))
    refused = sa.create_engine(sa.make_url(mariadb_url).set(port=_closed_port()))
    with pytest.raises(sa.exc.OperationalError) as raised:
        refused.connect()
    assert not is_permanent(raised.value)
    engine.dispose()


def test_a_locked_sqlite_database_is_transient_and_a_missing_table_permanent(tmp_path):
    path = tmp_path / "w.sqlite"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.1})
    assert not is_permanent(_raised(engine, "INSERT INTO t VALUES (1)"))
    holder.rollback()
    holder.close()
    assert is_permanent(_raised(engine, "SELECT * FROM missing"))
    engine.dispose()
