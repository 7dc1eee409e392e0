"""Connection and driver failures are one line naming the table, the side and the fix, never a password.

The campaign saw raw driver errors that never said which side failed: a wrong password or port, an
unknown driver (`postgres://`), a missing driver module, a SQLite `target_schema` ("unknown database
synthetic" and 1,000 characters of SQL), and a password with an unencoded '@' whose tail was echoed.
"""

from __future__ import annotations

import importlib.util

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from support_dataloss import SALT, make_orders, table_names, url_of

from syndiffix_ops.cli import EXIT_TABLE_FAILED, main
from syndiffix_ops.config import ConfigError, PipelineConfig, parse_config
from syndiffix_ops.connections import PermanentConnectFailure, TransientConnectFailure
from syndiffix_ops.pipeline import run_table

SECRET = "s3cret-Pw"


@pytest.fixture
def sqlite_source(tmp_path) -> str:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'source.db'}")
    make_orders(engine, None)
    engine.dispose()
    return f"sqlite:///{tmp_path / 'source.db'}"


def _config(source: str, target: str, **top) -> PipelineConfig:
    """Built without the load-time checks, as an Airflow operator or a script might build it."""
    return PipelineConfig.model_validate(
        {
            "source": source,
            "target": target,
            "tables": [{"source": "orders", "target": "orders_synth"}],
            **top,
        }
    )


def _one_line(error: BaseException) -> str:
    text = "\n".join(error.problems) if isinstance(error, ConfigError) else str(error)
    assert "\n" not in text and SECRET not in text, text
    return text


def test_wrong_password_on_mariadb_names_the_side_and_the_fix(mariadb_url, sqlite_source, tmp_path):
    wrong = sa.engine.make_url(mariadb_url).set(password=SECRET).render_as_string(hide_password=False)
    with pytest.raises(PermanentConnectFailure) as failed:
        run_table(_config(wrong, f"sqlite:///{tmp_path / 't.db'}"), "orders_synth", salt=SALT)
    line = _one_line(failed.value)
    assert line.startswith("table orders_synth: source: cannot connect to mysql database ")
    assert line.endswith("the server refused the user or password; check them in the source URL")


def test_unknown_role_on_postgres_is_a_login_failure_of_the_target(pg_url, sqlite_source):
    target = sa.engine.make_url(pg_url).set(username="no_such_role", password=SECRET)
    config = _config(sqlite_source, target.render_as_string(hide_password=False))
    with pytest.raises(PermanentConnectFailure) as failed:
        run_table(config, "orders_synth", salt=SALT)
    line = _one_line(failed.value)
    assert line.startswith("table orders_synth: target: cannot connect to postgresql database ")
    assert "check them in the target URL" in line


@pytest.mark.parametrize("url_fixture", ["pg_url", "mariadb_url"])
def test_wrong_port_says_nothing_answers_there(request, url_fixture, sqlite_source, tmp_path):
    url = sa.engine.make_url(request.getfixturevalue(url_fixture)).set(port=1, password=SECRET)
    config = _config(url.render_as_string(hide_password=False), f"sqlite:///{tmp_path / 't.db'}")
    with pytest.raises(TransientConnectFailure) as failed:  # a server that restarts answers again
        run_table(config, "orders_synth", salt=SALT)
    line = _one_line(failed.value)
    assert "source: cannot connect to" in line and "nothing answers at 127.0.0.1:1" in line


def test_postgres_scheme_is_refused_at_load_and_at_run(sqlite_source, tmp_path):
    bad = f"postgres://reader:{SECRET}@db.internal/sales"
    with pytest.raises(ConfigError) as refused:
        parse_config({"source": bad, "target": sqlite_source, "tables": [{"source": "orders"}]})
    line = _one_line(refused.value)
    assert (
        "source: 'postgres' is not a database type SQLAlchemy knows (PostgreSQL is postgresql+psycopg://)"
        in line
    )
    with pytest.raises(ConfigError) as refused:
        run_table(_config(sqlite_source, sqlite_source), "orders_synth", source=bad, salt=SALT)
    assert _one_line(refused.value).startswith(
        "table orders_synth: source: 'postgres' is not a database type"
    )


def test_a_missing_driver_module_says_what_to_install(sqlite_source, tmp_path):
    candidates = [
        ("psycopg2", "postgresql+psycopg2"),
        ("MySQLdb", "mysql+mysqldb"),
        ("pymssql", "mssql+pymssql"),
    ]
    missing = [(module, scheme) for module, scheme in candidates if importlib.util.find_spec(module) is None]
    assert missing, "every candidate driver is installed: add a dialect whose DBAPI module is absent"
    module, scheme = missing[0]
    config = _config(sqlite_source, f"{scheme}://writer:{SECRET}@127.0.0.1/warehouse")
    with pytest.raises(ConfigError) as refused:
        run_table(config, "orders_synth", salt=SALT)
    line = _one_line(refused.value)
    assert line.startswith(f"table orders_synth: target: the {scheme} URL needs the Python module {module!r}")
    assert "pip install" in line


def test_sqlite_target_schema_is_refused_at_load_and_at_run(sqlite_source, tmp_path):
    target = sa.create_engine(f"sqlite:///{tmp_path / 't.db'}")
    with pytest.raises(ConfigError) as refused:
        parse_config(
            {
                "source": sqlite_source,
                "target": url_of(target),
                "target_schema": "synthetic",
                "tables": [{"source": "orders"}],
            }
        )
    assert "a SQLite target has no schemas; remove target_schema" in _one_line(refused.value)
    # An Airflow connection id says nothing about the dialect until the run hands over its engine.
    config = PipelineConfig.model_validate(
        {
            "source": sqlite_source,
            "target_conn_id": "warehouse",
            "target_schema": "synthetic",
            "tables": [{"source": "orders", "target": "orders_synth"}],
        }
    )
    with pytest.raises(ConfigError) as refused:
        run_table(config, "orders_synth", target=target, salt=SALT)
    line = _one_line(refused.value)
    assert line.startswith(
        "table orders_synth: target: target_schema 'synthetic' is set, but a SQLite target"
    )
    assert table_names(target, None) == set()  # nothing written, not even lineage


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql+psycopg://reader:p@{SECRET}@127.0.0.1:5432/sales",
        f"mysql+pymysql://reader:a@b:{SECRET}@127.0.0.1:3306/sales",
    ],
)
def test_an_unencoded_at_in_the_password_is_refused_without_echoing_it(url, sqlite_source):
    with pytest.raises(ConfigError) as refused:
        parse_config({"source": url, "target": sqlite_source, "tables": [{"source": "orders"}]})
    line = _one_line(refused.value)
    assert "must be percent-encoded (%40, %3A, %2F)" in line and "127.0.0.1" not in line
    with pytest.raises(ConfigError) as refused:
        run_table(_config(sqlite_source, sqlite_source), "orders_synth", source=url, salt=SALT)
    assert _one_line(refused.value).startswith("table orders_synth: source: not a SQLAlchemy URL")


def test_an_at_in_a_password_variable_is_refused_naming_the_variable(sqlite_source):
    config = parse_config(
        {
            "source": "postgresql+psycopg://reader:${DB_PASSWORD}@127.0.0.1/sales",
            "target": sqlite_source,
            "tables": [{"source": "orders"}],
        }
    )
    with pytest.raises(ConfigError) as refused:
        config.source_url(environ={"DB_PASSWORD": f"p@{SECRET}"})
    line = _one_line(refused.value)
    assert "${DB_PASSWORD}" in line and "percent-encoded" in line


def test_cli_run_prints_one_line_and_exits_1(pg_url, sqlite_source, tmp_path):
    wrong_port = sa.engine.make_url(pg_url).set(port=1, password=SECRET).render_as_string(hide_password=False)
    path = tmp_path / "c.yaml"
    path.write_text(
        f"source: {sqlite_source}\ntarget: {wrong_port}\ntables:\n  - source: orders\n    target: orders_synth\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, ["run", str(path)], env={"SYNDIFFIX_SALT": "s"})
    assert result.exit_code == EXIT_TABLE_FAILED, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and SECRET not in result.output, result.output
    assert "table orders_synth: target: cannot connect to postgresql database" in errors[0]


@pytest.mark.parametrize("command", ["run", "risk"])
def test_cli_with_an_unreachable_source_prints_one_line_naming_it(pg_url, tmp_path, command):
    """Before any table runs, `run` reads the source's keys and `risk` its tables: both say which side."""
    wrong_port = sa.engine.make_url(pg_url).set(port=1, password=SECRET).render_as_string(hide_password=False)
    path = tmp_path / "c.yaml"
    path.write_text(
        f"source: {wrong_port}\ntarget: sqlite:///{tmp_path / 't.db'}\ntables:\n  - source: orders\n"
        "    target: orders_synth\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(main, [command, str(path)], env={"SYNDIFFIX_SALT": "s"})
    assert result.exit_code == EXIT_TABLE_FAILED, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and SECRET not in result.output, result.output
    assert f"{path}" in errors[0] and "source: cannot connect to postgresql database" in errors[0]
    assert "nothing answers at 127.0.0.1:1" in errors[0]
