"""Airflow DAGs for every valid syndiffix-ops config in configs/ (one DAG per YAML file).

The configs' problems are reported by syndiffix_config_check.py, so a broken file never takes these
DAGs down with it (see syndiffix_ops.airflow.dag_factory).
"""

import os
from pathlib import Path

from syndiffix_ops.airflow.dag_factory import build_dags

CONFIGS = Path(__file__).parent / "configs"

# The salt is the password of the Airflow connection `syndiffix_salt` (masked in logs and the UI).
# HTML quality reports go to $SYNDIFFIX_REPORT_DIR on the worker for configs that set no report_dir.
globals().update(
    build_dags(CONFIGS, salt_conn_id="syndiffix_salt", report_dir=os.environ.get("SYNDIFFIX_REPORT_DIR"))
)
