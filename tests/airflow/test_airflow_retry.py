"""A task that fails on its first try succeeds on Airflow's retry, leaving one table, one lineage row and
no staging table. The failure is injected by PostgreSQL itself: an event trigger raises the first time a
table in the target schema is altered, i.e. while the staging table is swapped into place, after it was
created and filled, inside the write transaction."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]

DAG_ID = "syndiffix_retry_test"
TARGET_SCHEMA = "retry_target"
CONFIG = f"""\
version: 1
source_conn_id: syndiffix_source
target_conn_id: syndiffix_target
target_schema: {TARGET_SCHEMA}
dag:
  dag_id: {DAG_ID}
  default_args: {{retries: 1, retry_delay: 0}}
tables:
  - source: demo.planes
    columns: [year, engines, seats, type]
"""

FAIL_FIRST_SWAP = f"""
CREATE SEQUENCE sdx_swaps_seen;
CREATE FUNCTION sdx_fail_first_swap() RETURNS event_trigger LANGUAGE plpgsql AS $$
DECLARE command record;
BEGIN
  FOR command IN SELECT * FROM pg_event_trigger_ddl_commands() LOOP
    -- nextval is not rolled back with the failing transaction, so only the first swap fails.
    IF command.schema_name = '{TARGET_SCHEMA}' AND nextval('sdx_swaps_seen') = 1 THEN
      RAISE EXCEPTION USING MESSAGE = 'injected failure while swapping ' || command.object_identity;
    END IF;
  END LOOP;
END $$;
CREATE EVENT TRIGGER sdx_fail_first_swap ON ddl_command_end WHEN TAG IN ('ALTER TABLE')
  EXECUTE FUNCTION sdx_fail_first_swap();
"""
REMOVE_TRIGGER = """
DROP EVENT TRIGGER IF EXISTS sdx_fail_first_swap;
DROP FUNCTION IF EXISTS sdx_fail_first_swap();
DROP SEQUENCE IF EXISTS sdx_swaps_seen;
"""


@pytest.fixture
def fail_first_swap(demo_source):
    import sqlalchemy as sa

    engine = sa.create_engine(demo_source, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.exec_driver_sql(REMOVE_TRIGGER)
        conn.exec_driver_sql(FAIL_FIRST_SWAP)
    yield engine
    with engine.connect() as conn:
        conn.exec_driver_sql(REMOVE_TRIGGER)
    engine.dispose()


def test_a_task_failing_on_its_first_try_succeeds_on_retry_without_staging_leftovers(
    airflow_env, run_dag, fail_first_swap, add_config_dag
):
    import sqlalchemy as sa
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    files = add_config_dag(airflow_env.dags_folder, "retry_test", CONFIG)
    try:
        dag_run = run_dag(DAG_ID)
    finally:
        for file in files:
            file.unlink()

    with create_session() as session:
        [ti] = session.scalars(
            sa.select(TaskInstance).where(
                TaskInstance.dag_id == DAG_ID,
                TaskInstance.run_id == dag_run.run_id,
                TaskInstance.task_id == "synthesize",
            )
        ).all()
        assert (ti.state, ti.try_number) == ("success", 2)
    assert dag_run.state == "success"

    with fail_first_swap.connect() as conn:
        # Two swaps reached the trigger: the first one failed (after the staging table was filled), the
        # second one went through.
        assert conn.exec_driver_sql("SELECT last_value FROM sdx_swaps_seen").scalar_one() == 2
        tables = set(sa.inspect(conn).get_table_names(schema=TARGET_SCHEMA))
        assert tables == {"planes", "syndiffix_lineage"}, f"left behind: {tables}"
        # The failed first try is on record (its stage, no values), the retry's success after it.
        lineage = conn.execute(
            sa.text(
                "SELECT status, airflow_run_id, error_stage FROM "
                f"{TARGET_SCHEMA}.syndiffix_lineage ORDER BY started_at"
            )
        ).all()
        assert [tuple(row)[:2] for row in lineage] == [
            ("failed", dag_run.run_id),
            ("success", dag_run.run_id),
        ]
        assert lineage[0].error_stage and lineage[1].error_stage is None
        rows = conn.execute(sa.text(f"SELECT count(*) FROM {TARGET_SCHEMA}.planes")).scalar_one()
        assert rows > 100
