"""Airflow shell around `syndiffix_ops.pipeline`: operators, the YAML DAG factory, provider metadata.

Importing this package imports nothing from Airflow; import `syndiffix_ops.airflow.operators` or
`syndiffix_ops.airflow.dag_factory` where Airflow is installed.
"""
