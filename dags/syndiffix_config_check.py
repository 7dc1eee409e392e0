"""Airflow import error for broken syndiffix-ops configs in configs/, naming each file and field.

This file defines no DAG. Airflow marks every DAG of a file with an import error as broken, so the
check lives here, apart from the DAGs that syndiffix_warehouses.py builds from the valid files.
"""

from pathlib import Path

from syndiffix_ops.airflow.dag_factory import check_configs

check_configs(Path(__file__).parent / "configs")
