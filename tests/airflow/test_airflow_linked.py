"""Linked sets in the generated DAG: one task per set in a task group of its own, parallel to the mapped
tables, run for real with dag.test() against PostgreSQL."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.postgres]

SOURCE_SCHEMA = "linked_src"
TARGET_SCHEMA = "linked_out"
CONFIG = f"""\
version: 1
source_conn_id: syndiffix_source
target_conn_id: syndiffix_target
target_schema: {TARGET_SCHEMA}
constraints: copy
dag:
  dag_id: syndiffix_linked
tables:
  - source: {SOURCE_SCHEMA}.customers
    primary_key: [customer_id]
  - source: {SOURCE_SCHEMA}.orders
    primary_key: [order_id]
    foreign_keys:
      - {{columns: [customer_id], references: customers(customer_id)}}
  - source: {SOURCE_SCHEMA}.weather
"""


@pytest.fixture(scope="module")
def linked_source(pg_url):
    import numpy as np
    import pandas as pd
    import sqlalchemy as sa

    rng = np.random.default_rng(3)
    customers = pd.DataFrame({"customer_id": np.arange(1, 501), "age": rng.integers(18, 90, 500)})
    per_customer = rng.poisson(3, 500)
    orders = pd.DataFrame(
        {
            "order_id": np.arange(1, per_customer.sum() + 1),
            "customer_id": np.repeat(customers.customer_id, per_customer),
            "amount": rng.gamma(2.0, 20.0, per_customer.sum()),
        }
    )
    weather = pd.DataFrame({"temp": rng.normal(15, 8, 800), "wind": rng.gamma(2.0, 4.0, 800)})
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {SOURCE_SCHEMA} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {SOURCE_SCHEMA}")
        for name, frame in (("customers", customers), ("orders", orders), ("weather", weather)):
            frame.to_sql(name, conn, schema=SOURCE_SCHEMA, index=False)
    engine.dispose()
    return pg_url


def _orders_joining_customers(conn, schema: str) -> tuple[int, int]:
    """(orders, orders whose customer_id finds a customer) in the synthetic copies."""
    return tuple(
        conn.exec_driver_sql(
            f"SELECT count(*), count(c.customer_id) FROM {schema}.orders o "
            f"LEFT JOIN {schema}.customers c ON o.customer_id = c.customer_id"
        ).one()
    )


def test_a_linked_set_is_one_task_in_its_own_group_and_unrelated_tables_stay_mapped(airflow_env, tmp_path):
    from syndiffix_ops.airflow.dag_factory import build_dag

    (tmp_path / "linked.yaml").write_text(CONFIG)
    dag = build_dag(tmp_path / "linked.yaml")
    tasks = {task.task_id: task for task in dag.tasks}
    assert set(tasks) == {"synthesize", "linked_customers.synthesize"}
    assert tasks["synthesize"].expand_input.value == [{"table": "weather", "column_set": None}]
    linked = tasks["linked_customers.synthesize"]
    assert type(linked).__name__ == "LinkedSetOperator" and linked.table == "customers"
    assert not linked.upstream_task_ids and not tasks["synthesize"].upstream_task_ids  # parallel


def test_the_linked_set_runs_in_airflow_and_its_copies_join(
    airflow_env, add_config_dag, run_dag, linked_source
):
    import sqlalchemy as sa

    add_config_dag(airflow_env.dags_folder, "linked", CONFIG)
    dag_run = run_dag("syndiffix_linked")
    assert dag_run.state == "success"
    engine = sa.create_engine(linked_source)
    try:
        with engine.connect() as conn:
            orders, joined = _orders_joining_customers(conn, TARGET_SCHEMA)
            assert orders == joined > 0
            lineage = conn.exec_driver_sql(
                f"SELECT target_table, airflow_task_id FROM {TARGET_SCHEMA}.syndiffix_lineage "
                "WHERE target_table IN ('customers', 'orders') ORDER BY target_table"
            ).all()
        assert [tuple(row) for row in lineage] == [
            ("customers", "linked_customers.synthesize"),
            ("orders", "linked_customers.synthesize"),
        ]
        (fk,) = sa.inspect(engine).get_foreign_keys("orders", schema=TARGET_SCHEMA)
        assert fk["referred_table"] == "customers"
    finally:
        engine.dispose()


DECLARED_SCHEMA = "declared_src"
DECLARED_TARGET = "declared_out"
DECLARED_CONFIG = f"""\
version: 1
source_conn_id: syndiffix_source
target_conn_id: syndiffix_target
target_schema: {DECLARED_TARGET}
constraints: copy
dag:
  dag_id: syndiffix_declared_keys
tables:
  - source: {DECLARED_SCHEMA}.customers
  - source: {DECLARED_SCHEMA}.orders
  - source: {DECLARED_SCHEMA}.weather
"""


def test_keys_the_source_declares_group_tables_when_the_tasks_run(
    airflow_env, add_config_dag, run_dag, linked_source
):
    """No key in the YAML: the DAG parses into three mapped tasks without touching the database; at run
    time the source's keys make customers and orders one set, which the task of its first table (the
    parent) writes as one unit while the task of orders skips."""
    import sqlalchemy as sa
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    engine = sa.create_engine(linked_source)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {DECLARED_SCHEMA} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {DECLARED_SCHEMA}")
        for name in ("customers", "orders", "weather"):
            conn.exec_driver_sql(
                f"CREATE TABLE {DECLARED_SCHEMA}.{name} AS SELECT * FROM {SOURCE_SCHEMA}.{name}"
            )
        conn.exec_driver_sql(f"ALTER TABLE {DECLARED_SCHEMA}.customers ADD PRIMARY KEY (customer_id)")
        conn.exec_driver_sql(f"ALTER TABLE {DECLARED_SCHEMA}.orders ADD PRIMARY KEY (order_id)")
        conn.exec_driver_sql(
            f"ALTER TABLE {DECLARED_SCHEMA}.orders ADD FOREIGN KEY (customer_id) "
            f"REFERENCES {DECLARED_SCHEMA}.customers (customer_id)"
        )
    _, dag_file = add_config_dag(airflow_env.dags_folder, "declared", DECLARED_CONFIG)
    try:
        dag_run = run_dag("syndiffix_declared_keys")
        assert dag_run.state == "success"
        with create_session() as session:
            instances = session.scalars(
                sa.select(TaskInstance).where(
                    TaskInstance.dag_id == "syndiffix_declared_keys", TaskInstance.run_id == dag_run.run_id
                )
            ).all()
            states = {ti.rendered_map_index: ti.state for ti in instances}
        assert states == {"customers": "success", "orders": "skipped", "weather": "success"}
        with engine.connect() as conn:
            orders, joined = _orders_joining_customers(conn, DECLARED_TARGET)
            assert orders == joined > 0
            written = (
                conn.exec_driver_sql(
                    f"SELECT target_table FROM {DECLARED_TARGET}.syndiffix_lineage "
                    "WHERE status = 'success' ORDER BY target_table"
                )
                .scalars()
                .all()
            )
        assert written == ["customers", "orders", "weather"]  # each once
        (fk,) = sa.inspect(engine).get_foreign_keys("orders", schema=DECLARED_TARGET)
        assert fk["referred_table"] == "customers"
    finally:
        dag_file.unlink()
        engine.dispose()
