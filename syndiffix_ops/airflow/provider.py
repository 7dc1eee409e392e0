"""Provider metadata Airflow reads through the `apache_airflow_provider` entry point.

Every Airflow process (scheduler, dag-processor, api-server, workers) calls this on start-up, so the
module imports nothing: importing the operators here would pull the whole warehouse layer into processes
that never run a synthesis.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

# The package's own page (Airflow's provider list shows the Documentation URL of pyproject.toml too).
DOCUMENTATION_URL = "https://pypi.org/project/syndiffix-ops/"


def _package_version() -> str:
    try:
        return version("syndiffix-ops")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0.0.0+unknown"


def get_provider_info() -> dict:
    return {
        "package-name": "syndiffix-ops",
        "name": "SynDiffix Ops",
        "description": (
            "Anonymized synthetic copies of warehouse tables (SynDiffix, DP marginals), kept fresh by "
            "scheduled DAG runs generated from declarative YAML configs."
        ),
        "versions": [_package_version()],
        "integrations": [
            {
                "integration-name": "SynDiffix",
                "external-doc-url": DOCUMENTATION_URL,
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": "SynDiffix",
                "python-modules": [
                    "syndiffix_ops.airflow.operators",
                    "syndiffix_ops.airflow.plan_operator",
                    "syndiffix_ops.airflow.risk_operator",
                ],
            }
        ],
        "extra-links": ["syndiffix_ops.airflow.links.SyntheticReportLink"],
        "hooks": [{"integration-name": "SynDiffix", "python-modules": ["syndiffix_ops.airflow.hooks"]}],
        "connection-types": [
            {
                "connection-type": "syndiffix_warehouse",
                "hook-class-name": "syndiffix_ops.airflow.hooks.SyntheticWarehouseHook",
                "hook-name": "SynDiffix warehouse (SQLAlchemy)",
            }
        ],
    }
