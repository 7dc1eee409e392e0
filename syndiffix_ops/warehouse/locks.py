"""One writer at a time per target table, across processes and machines: the lock around a swap.

Two runs that swap a staging table onto the same name at once collide (on the first run both see no
table and both rename onto it). The lock is keyed by the target table and taken where the writer
checks for the previous table, so the second writer sees the first one's table and replaces it.

- PostgreSQL: a transaction-scoped advisory lock (pg_advisory_xact_lock) on a 64-bit key derived from
  schema and table; PostgreSQL releases it at commit or rollback, even when the process dies.
  lock_timeout bounds the wait.
- MySQL/MariaDB: GET_LOCK on a name derived the same way (at most 64 characters), released by
  RELEASE_LOCK or when the session ends.
- SQLite: the database's own write lock already admits one writing transaction at a time.

A wait longer than `timeout_seconds` raises LockTimeout, a transient error: a retry may get the lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

from syndiffix_ops.errors import LockTimeout

SWAP_LOCK_TIMEOUT_SECONDS = 600


def lock_key(schema: str | None, name: str) -> bytes:
    return hashlib.sha256(f"syndiffix-ops target {schema or ''}.{name}".encode()).digest()


def lock_transaction(conn: sa.Connection, schema: str | None, name: str, timeout_seconds: float) -> None:
    """PostgreSQL: hold the target's lock until the current transaction ends (no-op on SQLite)."""
    if conn.dialect.name != "postgresql":
        return
    key = int.from_bytes(lock_key(schema, name)[:8], "big", signed=True)
    previous = conn.execute(sa.text("SELECT current_setting('lock_timeout')")).scalar_one()
    conn.execute(
        sa.text("SELECT set_config('lock_timeout', :ms, true)"), {"ms": f"{int(timeout_seconds * 1000)}"}
    )
    try:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
    except sa.exc.OperationalError as error:
        if getattr(error.orig, "sqlstate", None) == "55P03":  # lock_not_available: the wait timed out
            raise _timeout(schema, name, timeout_seconds) from None
        raise
    conn.execute(sa.text("SELECT set_config('lock_timeout', :previous, true)"), {"previous": previous})


@contextmanager
def session_lock(
    conn: sa.Connection, schema: str | None, name: str, timeout_seconds: float
) -> Iterator[None]:
    """MySQL/MariaDB: hold the target's lock for the block, across the block's commits."""
    if conn.dialect.name not in ("mysql", "mariadb"):
        yield
        return
    lock_name = "syndiffix:" + lock_key(schema, name).hex()[:48]
    got = conn.execute(
        sa.text("SELECT GET_LOCK(:name, :seconds)"), {"name": lock_name, "seconds": timeout_seconds}
    ).scalar()
    if got != 1:
        raise _timeout(schema, name, timeout_seconds)
    try:
        yield
    finally:
        conn.execute(sa.text("SELECT RELEASE_LOCK(:name)"), {"name": lock_name})


def _timeout(schema: str | None, name: str, timeout_seconds: float) -> LockTimeout:
    table = f"{schema}.{name}" if schema else name
    return LockTimeout(
        f"target table {table}: another run held its write lock for more than {timeout_seconds:g} s; "
        "a retry waits again"
    )
