"""The demo DAG deployed the way Airflow runs in production: api-server, scheduler and dag-processor as
separate processes, LocalExecutor, a throw-away PostgreSQL metadata database, driven through the REST
API v2 with a token from the simple auth manager (generated user and password).

A fresh deployment is unpaused and triggered at once (a scheduled run and a manual one): both succeed,
one after the other. The tables, lineage rows, Asset events and OpenLineage events of those runs are
checked, and a DAG whose source table is missing fails in its first try despite its retries.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEMO_DAG = "syndiffix_demo_warehouse"
MISSING_DAG = "syndiffix_deploy_missing_table"
TARGET_SCHEMA = "synthetic"
DEMO_TARGETS = {"flights_delays", "flights_schedule", "planes", "weather"}
USER = "deploy-tester"
# Upper bounds of the polls below, not timings under test: a quiet 2-core machine needs about a third
# of them; a machine shared with other test processes several times more.
START_SECONDS = 180
RUNS_SECONDS = 600
TERMINAL = {"success", "failed"}

MISSING_TABLE_CONFIG = f"""\
version: 1
source_conn_id: syndiffix_source
target_conn_id: syndiffix_target
target_schema: deploy_missing
dag:
  dag_id: {MISSING_DAG}
  default_args: {{retries: 2, retry_delay: 0}}
tables:
  - source: demo.no_such_table
"""
MISSING_TABLE_DAG_FILE = """\
from pathlib import Path

from syndiffix_ops.airflow.dag_factory import build_dag

dag = build_dag(
    Path(__file__).parent / "configs" / "missing_table.yaml", salt_conn_id=None, salt_variable="syndiffix_salt"
)
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _until(condition: Callable[[], Any], seconds: float, what: str, logs: Callable[[], str]) -> Any:
    """Poll until condition() returns something truthy; fail naming `what` (with the logs) at the deadline."""
    deadline = time.monotonic() + seconds
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {seconds} s waiting for {what}\n{logs()}", pytrace=False)
        time.sleep(2)


@dataclass
class Deployment:
    home: Path
    api: str
    openlineage_file: Path
    processes: dict[str, subprocess.Popen]
    token: str = ""

    def logs(self, lines: int = 40) -> str:
        out = []
        for name in self.processes:
            path = self.home / f"{name}.log"
            text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else []
            out.append(f"--- {name} (exit {self.processes[name].poll()}) ---\n" + "\n".join(text))
        return "\n".join(out)

    def request(self, method: str, path: str, body: dict | None = None) -> Any:
        import httpx

        response = httpx.request(
            method,
            f"{self.api}/api/v2{path}",
            json=body,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=60,
        )
        assert response.status_code < 300, f"{method} {path}: {response.status_code} {response.text}"
        return response.json()

    def runs(self, dag_id: str) -> list[dict]:
        return self.request("GET", f"/dags/{dag_id}/dagRuns?order_by=run_after")["dag_runs"]

    def unpause_and_trigger(self, dag_id: str) -> None:
        self.request("PATCH", f"/dags/{dag_id}", {"is_paused": False})
        self.request("POST", f"/dags/{dag_id}/dagRuns", {"logical_date": None})


def _airflow_environment(home: Path, metadata_url: str, source_url: str, api_port: int) -> dict[str, str]:
    import sqlalchemy as sa

    source = sa.make_url(source_url)
    connection = {"conn_type": "postgres", "host": source.host, "port": source.port or 5432}
    connection |= {"login": source.username, "schema": source.database}
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SYNDIFFIX"))}
    python_path = os.pathsep.join(filter(None, [str(REPO / "core"), str(REPO), os.environ.get("PYTHONPATH")]))
    return inherited | {
        "PYTHONPATH": python_path,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(api_port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
        "AIRFLOW__API__SECRET_KEY": secrets.token_hex(32),
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
        "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(home / "logs"),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(_free_port()),
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",  # the files never change: parse once
        "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "syndiffix-deployment-test",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(home / "openlineage.jsonl"), "append": True}
        ),
        "AIRFLOW_CONN_SYNDIFFIX_SOURCE": json.dumps(connection),
        "AIRFLOW_CONN_SYNDIFFIX_TARGET": json.dumps(connection),
        "AIRFLOW_VAR_SYNDIFFIX_SALT": secrets.token_hex(32),  # the demo DAG's salt, as compose passes it
        "SYNDIFFIX_REPORT_DIR": str(home / "reports"),
    }


@pytest.fixture(scope="module")
def metadata_database(pg_admin_url) -> Iterator[str]:
    """A fresh PostgreSQL database for Airflow's metadata, dropped afterwards whatever happened."""
    import sqlalchemy as sa

    admin = sa.create_engine(pg_admin_url, isolation_level="AUTOCOMMIT")
    name = f"sdx_airflow_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(pg_admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def _stop(processes: dict[str, subprocess.Popen]) -> None:
    """SIGTERM every process of the sessions we started (each component and the task processes it
    forked into process groups of their own), then SIGKILL what is left after a bounded wait."""
    sessions = {process.pid for process in processes.values()}

    def ours() -> list[int]:
        found = []
        for pid in (int(name) for name in os.listdir("/proc") if name.isdigit()):
            with contextlib.suppress(OSError):
                if os.getsid(pid) in sessions:
                    found.append(pid)
        return found

    for pid in ours():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    for process in processes.values():
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=max(0.1, deadline - time.monotonic()))
    for pid in ours():
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory, metadata_database, demo_source) -> Iterator[Deployment]:
    home = tmp_path_factory.mktemp("airflow-deployment")
    shutil.copytree(REPO / "dags", home / "dags", ignore=shutil.ignore_patterns("__pycache__"))
    (home / "dags" / "configs" / "missing_table.yaml").write_text(MISSING_TABLE_CONFIG)
    (home / "dags" / "syndiffix_deploy_missing_table.py").write_text(MISSING_TABLE_DAG_FILE)
    password = secrets.token_urlsafe(24)
    (home / "passwords.json").write_text(json.dumps({USER: password}))
    api_port = _free_port()
    env = _airflow_environment(home, metadata_database, demo_source, api_port)
    airflow = [sys.executable, "-m", "airflow"]
    migrate = subprocess.run(
        [*airflow, "db", "migrate"], env=env, capture_output=True, text=True, timeout=300
    )
    assert migrate.returncode == 0, migrate.stderr[-3000:]

    processes: dict[str, subprocess.Popen] = {}
    deployment = Deployment(
        home=home,
        api=f"http://127.0.0.1:{api_port}",
        openlineage_file=home / "openlineage.jsonl",
        processes=processes,
    )
    try:
        for component in ("api-server", "scheduler", "dag-processor"):
            with open(home / f"{component}.log", "wb") as log:
                processes[component] = subprocess.Popen(
                    [*airflow, component],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own process group: stopped with everything it forks
                )
        deployment.token = _until(
            lambda: _token(deployment.api, password), START_SECONDS, "the api-server's token", deployment.logs
        )
        for dag_id in (DEMO_DAG, MISSING_DAG):
            _until(
                lambda d=dag_id: _dag_parsed(deployment, d),
                START_SECONDS,
                f"{dag_id} parsed",
                deployment.logs,
            )
        yield deployment
    finally:
        _stop(processes)


def _token(api: str, password: str) -> str | None:
    import httpx

    try:
        response = httpx.post(f"{api}/auth/token", json={"username": USER, "password": password}, timeout=10)
    except httpx.TransportError:
        return None  # not listening yet
    return response.json()["access_token"] if response.status_code == 201 else None


def _dag_parsed(deployment: Deployment, dag_id: str) -> bool:
    import httpx

    response = httpx.get(
        f"{deployment.api}/api/v2/dags/{dag_id}",
        headers={"Authorization": f"Bearer {deployment.token}"},
        timeout=30,
    )
    return response.status_code == 200


@pytest.fixture(scope="module")
def finished(deployment) -> dict[str, list[dict]]:
    """Both DAGs unpaused and triggered at once; their runs once every run has ended."""
    for dag_id in (DEMO_DAG, MISSING_DAG):
        deployment.unpause_and_trigger(dag_id)

    def all_ended() -> dict[str, list[dict]] | None:
        import httpx

        try:
            runs = {dag_id: deployment.runs(dag_id) for dag_id in (DEMO_DAG, MISSING_DAG)}
        except httpx.TransportError:  # a busy api-server: ask again on the next poll
            return None
        # The demo DAG is scheduled daily: unpausing it adds a scheduled run to the triggered one.
        enough = len(runs[DEMO_DAG]) == 2 and len(runs[MISSING_DAG]) == 1
        ended = all(run["state"] in TERMINAL for dag_runs in runs.values() for run in dag_runs)
        return runs if enough and ended else None

    return _until(all_ended, RUNS_SECONDS, "every run to end", deployment.logs)


def test_unpause_and_trigger_on_a_fresh_deployment_gives_two_runs_that_succeed_one_after_the_other(
    finished, deployment
):
    runs = finished[DEMO_DAG]
    assert [run["state"] for run in runs] == ["success", "success"], deployment.logs()
    assert sorted(run["run_type"] for run in runs) == ["manual", "scheduled"]
    first, second = sorted(runs, key=lambda run: run["start_date"])
    assert first["end_date"] <= second["start_date"], "max_active_runs 1: the runs must not overlap"


def test_the_tables_and_lineage_rows_of_both_runs_are_in_the_target(finished, demo_source):
    import sqlalchemy as sa

    run_ids = {run["dag_run_id"] for run in finished[DEMO_DAG]}
    engine = sa.create_engine(demo_source)
    try:
        tables = set(sa.inspect(engine).get_table_names(schema=TARGET_SCHEMA))
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    f"SELECT target_table, airflow_run_id, airflow_task_id, status, synthetic_rows "
                    f"FROM {TARGET_SCHEMA}.syndiffix_lineage WHERE airflow_dag_id = :dag"
                ),
                {"dag": DEMO_DAG},
            ).all()
    finally:
        engine.dispose()
    assert tables >= DEMO_TARGETS
    assert not [t for t in tables if t.startswith("_sdx_")], f"staging tables left behind: {tables}"
    mine = [row for row in rows if row.airflow_run_id in run_ids]
    assert sorted((r.airflow_run_id, r.target_table) for r in mine) == sorted(
        (run_id, target) for run_id in run_ids for target in DEMO_TARGETS
    )
    assert {(r.airflow_task_id, r.status) for r in mine} == {("synthesize", "success")}
    assert all(r.synthetic_rows > 100 for r in mine)


def test_each_run_records_one_asset_event_per_table(finished, deployment, demo_source):
    import sqlalchemy as sa

    database = sa.make_url(demo_source).database
    events = deployment.request("GET", f"/assets/events?source_dag_id={DEMO_DAG}&limit=100")["asset_events"]
    for run in finished[DEMO_DAG]:
        uris = sorted(e["uri"] for e in events if e["source_run_id"] == run["dag_run_id"])
        assert [uri.split("/", 3)[3] for uri in uris] == sorted(
            f"{database}/{TARGET_SCHEMA}/{t}" for t in DEMO_TARGETS
        )


def test_openlineage_events_name_each_runs_inputs_and_outputs(finished, deployment, demo_source):
    import sqlalchemy as sa

    database = sa.make_url(demo_source).database
    events = [json.loads(line) for line in deployment.openlineage_file.read_text().splitlines()]
    for run in finished[DEMO_DAG]:
        task_events = [
            e
            for e in events
            if e["job"]["name"] == f"{DEMO_DAG}.synthesize"
            and e["run"]["facets"].get("airflow", {}).get("dagRun", {}).get("run_id") == run["dag_run_id"]
        ]
        for event_type in ("START", "COMPLETE"):
            outputs = {o["name"] for e in task_events if e["eventType"] == event_type for o in e["outputs"]}
            assert outputs == {f"{database}.{TARGET_SCHEMA}.{t}" for t in DEMO_TARGETS}, event_type
            inputs = {i["name"] for e in task_events if e["eventType"] == event_type for i in e["inputs"]}
            assert inputs == {f"{database}.demo.{t}" for t in ("flights", "planes", "weather")}, event_type


def test_a_missing_source_table_fails_in_its_first_try(finished, deployment):
    [run] = finished[MISSING_DAG]
    assert run["state"] == "failed"
    instances = deployment.request("GET", f"/dags/{MISSING_DAG}/dagRuns/{run['dag_run_id']}/taskInstances")
    states = {i["task_id"]: (i["state"], i["try_number"]) for i in instances["task_instances"]}
    assert states == {"plan": ("success", 1), "synthesize": ("failed", 1)}
