"""docker-compose.yml and the Dockerfile, checked without a Docker daemon: services, health checks,
volumes, start order, and the connections the demo config names. `docker compose config` runs too where
a compose binary exists."""

from __future__ import annotations

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
        assert service["environment"]["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        assert (
            "@airflow-metadata-db:5432/airflow"
            in service["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        )
    init = services["airflow-init"]["command"][-1]
    assert "airflow db migrate" in init and "syndiffix_ops.airflow.demo_warehouse" in init


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


def test_the_connections_of_the_demo_config_exist_and_the_salt_is_required_not_defaulted(compose):
    env = compose["services"]["airflow-scheduler"]["environment"]
    demo = yaml.safe_load((REPO / "dags" / "configs" / "demo_warehouse.yaml").read_text())
    for conn_id in (demo["source_conn_id"], demo["target_conn_id"], "syndiffix_salt"):
        assert f"AIRFLOW_CONN_{conn_id.upper()}" in env
    # ${VAR:?message} makes compose refuse to start without a salt instead of using a known one.
    assert re.search(r"\$\{SYNDIFFIX_SALT:\?", env["AIRFLOW_CONN_SYNDIFFIX_SALT"])


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
    monkeypatch.setenv("SYNDIFFIX_SALT", "compose-config-check")
    result = subprocess.run([*binary, "config", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    monkeypatch.delenv("SYNDIFFIX_SALT")
    refused = subprocess.run([*binary, "config", "--quiet"], cwd=REPO, capture_output=True, text=True)
    assert refused.returncode != 0 and "SYNDIFFIX_SALT" in refused.stderr
