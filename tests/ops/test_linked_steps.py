"""A linked set run step by step (linked_steps): one step per table, parents first, staging its synthetic
rows in the target, then one publish. The same set as in one call; a failed step leaves the previous set
and is retried alone; nothing staged is left after a publish or a discard."""

from __future__ import annotations

import pandas as pd
import pytest
import sqlalchemy as sa
import test_linked_pipeline
from test_linked_pipeline import SALT, _config, _frame, _linked_set, _make_source, _q

from syndiffix_ops.linked_pipeline import run_linked_set
from syndiffix_ops.linked_steps import discard_linked_set, publish_linked_set, stage_linked_table
from syndiffix_ops.run_errors import PipelineError
from syndiffix_ops.warehouse.staged_frames import STAGING_TABLE

TABLES = ("customers_synth", "orders_synth")
linked_db = test_linked_pipeline.linked_db  # SQLite, PostgreSQL and MariaDB, as for the one-call set


def _written(engine, schema) -> list[pd.DataFrame]:
    return [_frame(engine, schema, name) for name in TABLES]


def _staged_rows(engine, schema) -> int:
    with engine.connect() as conn:
        return conn.exec_driver_sql(f"SELECT count(*) FROM {_q(engine, schema, STAGING_TABLE)}").scalar_one()


def _steps(config, linked_set, run: str, salt: bytes) -> None:
    for table in linked_set.tables:
        stage_linked_table(config, linked_set, table, run=run, salt=salt, run_id=run)
    publish_linked_set(config, linked_set, run=run, salt=salt, run_id=run)


def test_the_steps_write_the_set_one_call_writes_and_leave_nothing_staged(linked_db, tmp_path):
    engine, schema = linked_db
    _make_source(engine, schema, declare_keys=True)
    config = _config(engine, schema, virtual_keys=False)
    linked_set = _linked_set(config, engine)
    run_linked_set(config, linked_set, salt=SALT, run_id="one call")
    in_one_call = _written(engine, schema)

    _steps(config, linked_set, "in steps", SALT)
    for steps, one_call in zip(_written(engine, schema), in_one_call, strict=True):
        pd.testing.assert_frame_equal(steps, one_call)
    assert _staged_rows(engine, schema) == 0
    with engine.connect() as conn:
        runs = conn.exec_driver_sql(
            f"SELECT target_table FROM {_q(engine, schema, 'syndiffix_lineage')} WHERE run_id = 'in steps'"
        ).scalars()
        assert sorted(runs) == list(TABLES)


def test_a_failed_child_step_leaves_the_previous_set_and_its_retry_completes_it(linked_db):
    """orders' step fails (its source table is gone for a moment): the previous copies stay; once the
    table is back, orders' step alone runs again, on customers' staged rows, and the set is published."""
    engine, schema = linked_db
    _make_source(engine, schema, declare_keys=True)
    config = _config(engine, schema, virtual_keys=False)
    linked_set = _linked_set(config, engine)
    _steps(config, linked_set, "first", SALT)
    previous = _written(engine, schema)

    stage_linked_table(config, linked_set, "customers_synth", run="second", salt=b"another salt")
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {_q(engine, schema, 'orders')} RENAME TO orders_away")
    with pytest.raises(Exception, match="orders"):
        stage_linked_table(config, linked_set, "orders_synth", run="second", salt=b"another salt")
    for now, before in zip(_written(engine, schema), previous, strict=True):
        pd.testing.assert_frame_equal(now, before)

    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE {_q(engine, schema, 'orders_away')} RENAME TO orders")
    stage_linked_table(config, linked_set, "orders_synth", run="second", salt=b"another salt")
    publish_linked_set(config, linked_set, run="second", salt=b"another salt")
    customers, orders = _written(engine, schema)
    assert not customers.equals(previous[0])
    assert orders.customer_id.isin(customers.customer_id).all()
    assert _staged_rows(engine, schema) == 0


def test_a_child_step_before_its_parents_fails_naming_it_and_a_discard_leaves_nothing(linked_db):
    engine, schema = linked_db
    _make_source(engine, schema, declare_keys=True)
    config = _config(engine, schema, virtual_keys=False)
    linked_set = _linked_set(config, engine)
    stage_linked_table(config, linked_set, "customers_synth", run="third", salt=SALT)
    with pytest.raises(PipelineError, match="nothing staged for table customers_synth"):
        stage_linked_table(config, linked_set, "orders_synth", run="fourth", salt=SALT)
    assert _staged_rows(engine, schema) == 1
    discard_linked_set(engine, schema, linked_set.name, run="third")
    assert _staged_rows(engine, schema) == 0
    assert sa.inspect(engine).get_table_names(schema=schema).count("customers_synth") == 0
