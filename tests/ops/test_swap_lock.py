"""Two writers of one target table at once take turns (warehouse/locks.py), and a writer that waits too
long fails with a transient LockTimeout, leaving the previous table in place."""

from __future__ import annotations

import threading
import time

import pandas as pd
import pytest
import sqlalchemy as sa

from syndiffix_ops.errors import LockTimeout, is_permanent
from syndiffix_ops.warehouse import TargetColumn, ValueKind, locks, write_table
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX

DEADLINE_SECONDS = 60


def _write(engine, schema, ids, before_commit=lambda conn: None):
    write_table(
        engine,
        schema=schema,
        name="target",
        columns=[TargetColumn("id", sa.Integer(), ValueKind.INTEGER)],
        frame=pd.DataFrame({"id": ids}),
        source_dialect=engine.dialect.name,
        replace=True,
        before_commit=before_commit,
    )


def _ids(engine, schema) -> list[int]:
    table = sa.Table("target", sa.MetaData(), schema=schema, autoload_with=engine)
    with engine.connect() as conn:
        return sorted(conn.execute(sa.select(table.c.id)).scalars())


def _waiting_for_the_lock(monitor: sa.Engine) -> bool:
    """Whether a second writer is blocked on the target's lock right now (SQLite: cannot be seen)."""
    with monitor.connect() as conn:
        if conn.dialect.name == "postgresql":
            sql = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        elif conn.dialect.name in ("mysql", "mariadb"):
            sql = "SELECT count(*) FROM information_schema.processlist WHERE info LIKE 'SELECT GET_LOCK%%'"
        else:
            return True
        return conn.exec_driver_sql(sql).scalar_one() > 0


def _until(condition, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting: {what}")
        time.sleep(0.05)


def test_two_concurrent_first_runs_onto_one_table_both_succeed_one_after_the_other(warehouse_db):
    engine, schema = warehouse_db
    monitor = sa.create_engine(engine.url)
    first_in_swap, second_started = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    committed: list[str] = []

    def first_holds_the_swap(conn):
        first_in_swap.set()
        _until(second_started.is_set, "second writer started")
        if engine.dialect.name == "sqlite":
            time.sleep(0.3)  # SQLite's writer waits in its busy handler, which cannot be observed
        _until(lambda: _waiting_for_the_lock(monitor), "second writer blocked on the lock")
        committed.append("first")

    def run(ids, hook):
        try:
            _write(engine, schema, ids, hook)
        except BaseException as error:  # reported below: a thread's exception would vanish
            errors.append(error)

    # No target table exists yet: without the lock both writers would rename onto the same new name.
    first = threading.Thread(target=run, args=([1, 2, 3], first_holds_the_swap))
    second = threading.Thread(target=run, args=([7, 8], lambda conn: committed.append("second")))
    first.start()
    _until(first_in_swap.is_set, "first writer in its swap")
    second.start()
    second_started.set()
    first.join(DEADLINE_SECONDS)
    second.join(DEADLINE_SECONDS)
    monitor.dispose()

    assert errors == []
    assert committed == ["first", "second"]
    assert _ids(engine, schema) == [7, 8]
    leftovers = [
        n
        for n in sa.inspect(engine).get_table_names(schema=schema)
        if n.startswith((STAGING_PREFIX, OLD_PREFIX))
    ]
    assert leftovers == []


@pytest.mark.parametrize("dialect", ["postgresql", "mariadb"])
def test_a_writer_waiting_longer_than_the_timeout_fails_transiently_and_keeps_the_table(
    request, monkeypatch, dialect
):
    url = request.getfixturevalue("pg_url" if dialect == "postgresql" else "mariadb_url")
    engine = sa.create_engine(url)
    schema = None
    _write(engine, schema, [1, 2])
    monkeypatch.setattr(locks, "SWAP_LOCK_TIMEOUT_SECONDS", 1)
    key = locks.lock_key(schema, "target")
    holder = engine.connect()
    try:
        if dialect == "postgresql":
            holder.execute(
                sa.text("SELECT pg_advisory_lock(:k)"), {"k": int.from_bytes(key[:8], "big", signed=True)}
            )
        else:
            name = "syndiffix:" + key.hex()[:48]
            assert holder.execute(sa.text("SELECT GET_LOCK(:n, 0)"), {"n": name}).scalar() == 1
        with pytest.raises(
            LockTimeout, match="target table target: another run held its write lock"
        ) as raised:
            _write(engine, schema, [9])
        assert not is_permanent(raised.value)
    finally:
        holder.close()
    assert _ids(engine, schema) == [1, 2]
    _write(engine, schema, [9])  # the lock is free again: the retry goes through
    assert _ids(engine, schema) == [9]
    engine.dispose()
