"""Linked sets in the generated DAG: with the YAML's keys (keys_from_database: false), a task group per set,
one step per table after its parents' steps, then publish and a teardown, beside the mapped `synthesize`
task of the other tables; with the source's keys, one mapped `synthesize` instance per set, planned by
the run's `plan` task. Run for real with dag.test() against PostgreSQL."""

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
keys_from_database: false
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


GROUP_TASKS = (
    "customers.synthesize_customers",
    "customers.synthesize_orders",
    "customers.publish",
    "customers.discard_staged",
)


def _instances(dag_id: str, run_id: str) -> dict[str, str]:
    """The run's synthesize instances: their names in the UI (rendered map index) -> state."""
    return {name: state for name, (state, _) in _task_states(dag_id, run_id, "synthesize").items()}


def _task_states(dag_id: str, run_id: str, *task_ids: str) -> dict[str, tuple[str, int]]:
    """(state, try number) of the run's tasks (a mapped one: per instance, by its name in the UI)."""
    import sqlalchemy as sa
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        instances = session.scalars(
            sa.select(TaskInstance).where(
                TaskInstance.dag_id == dag_id,
                TaskInstance.run_id == run_id,
                TaskInstance.task_id.in_(task_ids),
            )
        ).all()
        return {ti.rendered_map_index or ti.task_id: (ti.state, ti.try_number) for ti in instances}


def test_with_the_yaml_keys_alone_a_set_is_a_task_group_in_dependency_order(airflow_env, tmp_path):
    from syndiffix_ops.airflow.dag_factory import build_dag

    (tmp_path / "linked.yaml").write_text(CONFIG)
    dag = build_dag(tmp_path / "linked.yaml")
    tasks = {task.task_id: task for task in dag.tasks}
    assert set(tasks) == {"synthesize", *GROUP_TASKS}
    assert tasks["synthesize"].expand_input.value == [
        {"table": "weather", "column_set": None, "linked_set": []}
    ]
    assert dag.task_group.children["customers"].tooltip.startswith("linked set customers, orders")
    upstream = {task_id: tasks[task_id].upstream_task_ids for task_id in GROUP_TASKS}
    assert upstream == {
        "customers.synthesize_customers": set(),
        "customers.synthesize_orders": {"customers.synthesize_customers"},
        "customers.publish": {"customers.synthesize_customers", "customers.synthesize_orders"},
        "customers.discard_staged": {
            "customers.publish",
            "customers.synthesize_customers",
            "customers.synthesize_orders",
        },
    }
    assert tasks["customers.discard_staged"].is_teardown
    assert not tasks["synthesize"].upstream_task_ids


def test_with_the_sources_keys_a_plan_task_maps_the_instances_when_the_run_starts(airflow_env, tmp_path):
    from syndiffix_ops.airflow.dag_factory import build_dag

    (tmp_path / "declared.yaml").write_text(DECLARED_CONFIG)
    dag = build_dag(tmp_path / "declared.yaml")  # the connections are not looked up while parsing
    tasks = {task.task_id: task for task in dag.tasks}
    assert set(tasks) == {"plan", "synthesize"}
    assert tasks["synthesize"].upstream_task_ids == {"plan"}
    assert [(ref.task_id, key) for ref, key in tasks["synthesize"].expand_input.iter_references()] == [
        ("plan", "return_value")
    ]


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
            staged = conn.exec_driver_sql(
                f"SELECT count(*) FROM {TARGET_SCHEMA}.syndiffix_staging"
            ).scalar_one()
        assert [tuple(row) for row in lineage] == [
            ("customers", "customers.publish"),
            ("orders", "customers.publish"),
        ]
        assert staged == 0
        assert _instances("syndiffix_linked", dag_run.run_id) == {"weather": "success"}
        states = _task_states("syndiffix_linked", dag_run.run_id, *GROUP_TASKS)
        assert {task: state for task, (state, _) in states.items()} == dict.fromkeys(GROUP_TASKS, "success")
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


def _declare_keys_in_the_database(engine) -> None:
    """declared_src: the tables of linked_src, with keys PostgreSQL declares (and the YAML does not)."""
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


def test_a_set_the_source_declares_is_planned_when_the_run_starts_and_written_by_one_instance(
    airflow_env, add_config_dag, run_dag, linked_source
):
    """No key in the YAML: the DAG parses without touching the database; the run's plan task reads the
    keys PostgreSQL declares and maps customers and orders to one instance, weather to another."""
    import sqlalchemy as sa

    engine = sa.create_engine(linked_source)
    _declare_keys_in_the_database(engine)
    _, dag_file = add_config_dag(airflow_env.dags_folder, "declared", DECLARED_CONFIG)
    try:
        dag_run = run_dag("syndiffix_declared_keys")
        assert dag_run.state == "success"
        assert _instances("syndiffix_declared_keys", dag_run.run_id) == {
            "customers, orders (linked set)": "success",
            "weather": "success",
        }
        with engine.connect() as conn:
            orders, joined = _orders_joining_customers(conn, DECLARED_TARGET)
            assert orders == joined > 0
            written = conn.exec_driver_sql(
                f"SELECT target_table FROM {DECLARED_TARGET}.syndiffix_lineage "
                "WHERE status = 'success' ORDER BY target_table"
            ).all()
        assert [row.target_table for row in written] == ["customers", "orders", "weather"]  # each once
        (fk,) = sa.inspect(engine).get_foreign_keys("orders", schema=DECLARED_TARGET)
        assert fk["referred_table"] == "customers"
    finally:
        dag_file.unlink()
        engine.dispose()


STALE_TARGET = "stale_out"
STALE_PLAN_DAG = """\
import datetime as dt
from pathlib import Path

from airflow.sdk import DAG

from syndiffix_ops.airflow.operators import SyntheticTableOperator

with DAG("syndiffix_stale_plan", schedule=None):
    SyntheticTableOperator(
        task_id="synthesize",
        config_path=str(Path(__file__).parent / "configs" / "stale.yaml"),
        table="orders",
        linked_set=["orders"],
        salt_conn_id="syndiffix_salt",
        retries=2,
        retry_delay=dt.timedelta(0),
    )
"""


def test_a_set_planned_before_the_keys_changed_fails_in_one_try_naming_the_change(
    airflow_env, add_config_dag, run_dag, linked_source, capfd
):
    """A task planned to write orders as a set of its own, run after the source declared its key to
    customers: it writes nothing and fails once, saying what changed and what to do."""
    import sqlalchemy as sa
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    engine = sa.create_engine(linked_source)
    _declare_keys_in_the_database(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {STALE_TARGET} CASCADE")
    stale = DECLARED_CONFIG.replace(DECLARED_TARGET, STALE_TARGET).replace(
        "syndiffix_declared_keys", "unused"
    )
    _, dag_file = add_config_dag(airflow_env.dags_folder, "stale", stale)
    dag_file.write_text(STALE_PLAN_DAG)
    try:
        dag_run = run_dag("syndiffix_stale_plan")
        assert dag_run.state == "failed"
        log = "".join(capfd.readouterr())
        assert (
            "linked set orders: the source's keys changed after the run was planned (table orders now goes "
            "with customers, orders); clear the whole DAG run so that its plan task plans it again"
        ) in log
        with create_session() as session:
            [ti] = session.scalars(sa.select(TaskInstance).where(TaskInstance.run_id == dag_run.run_id)).all()
            assert (ti.state, ti.try_number) == ("failed", 1)
        assert sa.inspect(engine).get_table_names(schema=STALE_TARGET) == []
    finally:
        dag_file.unlink()
        engine.dispose()


RETRY_TARGET = "linked_retry_out"
RETRY_DAG = "syndiffix_linked_retry"
RETRY_CONFIG = CONFIG.replace(TARGET_SCHEMA, RETRY_TARGET).replace(
    "dag_id: syndiffix_linked", f"dag_id: {RETRY_DAG}\n  default_args: {{retries: 1, retry_delay: 0}}"
)
# PostgreSQL refuses the first `failures` attempts to stage orders' rows (the sequence is not rolled
# back with the failing transaction): a real failure inside the orders step, after its synthesis.
FAIL_STAGING_ORDERS = f"""
DROP SEQUENCE IF EXISTS {RETRY_TARGET}.orders_staged;
CREATE SEQUENCE {RETRY_TARGET}.orders_staged;
CREATE OR REPLACE FUNCTION {RETRY_TARGET}.fail_staging_orders() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.table_name = 'orders' AND nextval('{RETRY_TARGET}.orders_staged') <= TG_ARGV[0]::int THEN
    RAISE EXCEPTION 'injected failure while staging orders';
  END IF;
  RETURN NEW;
END $$;
DROP TRIGGER IF EXISTS fail_staging_orders ON {RETRY_TARGET}.syndiffix_staging;
CREATE TRIGGER fail_staging_orders BEFORE INSERT ON {RETRY_TARGET}.syndiffix_staging
  FOR EACH ROW EXECUTE FUNCTION {RETRY_TARGET}.fail_staging_orders(%(failures)s);
"""


def test_a_failing_child_step_leaves_the_previous_set_and_a_retry_redoes_only_that_step(
    airflow_env, add_config_dag, run_dag, linked_source
):
    """Run 2: orders' step fails in both tries; the previous set (run 1) stays as it was, nothing staged is
    left. Run 3: orders' step fails once; Airflow retries that step alone, on the rows customers' step
    staged, and the set is published."""
    import pandas as pd
    import sqlalchemy as sa

    from syndiffix_ops.warehouse.staged_frames import staging_table

    engine = sa.create_engine(linked_source)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {RETRY_TARGET} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {RETRY_TARGET}")
    staging_table(RETRY_TARGET).create(engine)

    def fail_staging_orders(failures: int) -> None:
        with engine.begin() as conn:
            conn.exec_driver_sql(FAIL_STAGING_ORDERS % {"failures": failures})

    def written(run_id: str) -> tuple[list[pd.DataFrame], list[tuple[str, str]], int]:
        with engine.connect() as conn:
            frames = [
                pd.read_sql(f"SELECT * FROM {RETRY_TARGET}.{t} ORDER BY 1", conn)
                for t in ("customers", "orders")
            ]
            lineage = conn.exec_driver_sql(
                f"SELECT target_table, status FROM {RETRY_TARGET}.syndiffix_lineage WHERE airflow_run_id = %(run)s "
                "AND target_table IN ('customers', 'orders') "
                "ORDER BY started_at, target_table",
                {"run": run_id},
            ).all()
            staged = conn.exec_driver_sql(
                f"SELECT count(*) FROM {RETRY_TARGET}.syndiffix_staging"
            ).scalar_one()
        return frames, [tuple(row) for row in lineage], staged

    files = add_config_dag(airflow_env.dags_folder, "linked_retry", RETRY_CONFIG)
    try:
        first = run_dag(RETRY_DAG)
        assert first.state == "success"
        previous, _, _ = written(first.run_id)

        fail_staging_orders(2)
        failed = run_dag(RETRY_DAG)
        assert failed.state == "failed"
        assert _task_states(RETRY_DAG, failed.run_id, *GROUP_TASKS) == {
            "customers.synthesize_customers": ("success", 1),
            "customers.synthesize_orders": ("failed", 2),
            "customers.publish": ("upstream_failed", 0),
            "customers.discard_staged": ("success", 1),
        }
        frames, lineage, staged = written(failed.run_id)
        for now, before in zip(frames, previous, strict=True):
            pd.testing.assert_frame_equal(now, before)
        assert staged == 0
        assert {status for _, status in lineage} == {"failed"}  # each failed try on record, no success

        fail_staging_orders(1)
        retried = run_dag(RETRY_DAG)
        assert retried.state == "success"
        states = _task_states(RETRY_DAG, retried.run_id, *GROUP_TASKS)
        assert states["customers.synthesize_customers"] == ("success", 1)  # not redone
        assert states["customers.synthesize_orders"] == ("success", 2)
        assert states["customers.publish"] == ("success", 1)
        (customers, orders), lineage, staged = written(retried.run_id)
        assert lineage[-2:] == [("customers", "success"), ("orders", "success")] and staged == 0
        assert orders.customer_id.isin(customers.customer_id).all() and len(orders) > 0
    finally:
        for file in files:
            file.unlink()
        engine.dispose()
