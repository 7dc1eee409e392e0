"""Write synthetic columns into the target: staging table, atomic swap, lineage in the same transaction.

PostgreSQL and SQLite have transactional DDL, so one transaction creates the staging table, fills it,
drops the previous table, renames the staging table into place and runs `before_commit` (the lineage
insert). Any failure rolls all of it back: the previous table and lineage stay as they were and the
staging table never existed for other sessions.

MySQL/MariaDB commit every DDL statement implicitly, so the steps are separate and observable:
  1. CREATE TABLE `_sdx_stage_<id>` (visible to other sessions from here on, empty);
  2. INSERT the rows in one transaction and COMMIT (other sessions see the filled staging table);
  3. RENAME TABLE target TO `_sdx_old_<id>`, `_sdx_stage_<id>` TO target: one atomic statement, so
     readers see either the previous or the new table, never neither;
  4. INSERT the lineage row and COMMIT: between 3 and 4 the new table is visible while lineage still
     shows the previous run;
  5. DROP TABLE `_sdx_old_<id>`.
A failure before 3 drops the staging table; a failure in 4 renames the tables back (atomically again)
before dropping the staging table. Only a crash of the process itself can leave `_sdx_stage_*` or
`_sdx_old_*` tables behind.

Writers of the same target table take turns (warehouse/locks.py): on PostgreSQL from the check for the
previous table to the commit, on MySQL/MariaDB for the whole write, on SQLite by its write lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from syndiffix_ops.errors import PermanentError
from syndiffix_ops.warehouse import locks, postgres
from syndiffix_ops.warehouse.types import ValueKind, to_python

STAGING_PREFIX = "_sdx_stage_"
OLD_PREFIX = "_sdx_old_"
_INSERT_BATCH_ROWS = 10_000


class TargetSchemaError(PermanentError, RuntimeError):
    """The existing target table does not match the synthetic output (append mode)."""


@dataclass(frozen=True)
class TargetColumn:
    name: str
    sql_type: sa.types.TypeEngine  # the reflected source type
    kind: ValueKind


def target_type(
    sql_type: sa.types.TypeEngine, source_dialect: str, target_dialect: str
) -> sa.types.TypeEngine:
    """The source's declared type, kept as is on the same dialect and made generic across dialects."""
    if source_dialect == target_dialect:
        return sql_type
    try:
        return sql_type.as_generic()
    except NotImplementedError:
        return sql_type


def target_type_sql(column: TargetColumn, source_dialect: str, dialect: sa.Dialect) -> str:
    return target_type(column.sql_type, source_dialect, dialect.name).compile(dialect=dialect)


def _table(
    name: str, schema: str | None, columns: Sequence[TargetColumn], source_dialect: str, dialect: sa.Dialect
) -> sa.Table:
    # Synthetic tables carry types only: no keys, defaults, identities or NOT NULL (the engine decides).
    return sa.Table(
        name,
        sa.MetaData(),
        *(
            sa.Column(c.name, _without_type_creation(target_type(c.sql_type, source_dialect, dialect.name)))
            for c in columns
        ),
        schema=schema,
    )


def _without_type_creation(sql_type: sa.types.TypeEngine) -> sa.types.TypeEngine:
    # PostgreSQL enum types are created (if missing) before the table, not by it: see _create_enum_types.
    if isinstance(sql_type, postgresql.ENUM):
        return postgresql.ENUM(*sql_type.enums, name=sql_type.name, schema=sql_type.schema, create_type=False)
    return sql_type


def _create_enum_types(conn: sa.Connection, table: sa.Table) -> None:
    for column in table.columns:
        if isinstance(column.type, postgresql.ENUM):
            postgresql.ENUM(*column.type.enums, name=column.type.name, schema=column.type.schema).create(
                conn, checkfirst=True
            )


def write_table(
    engine: sa.Engine,
    *,
    schema: str | None,
    name: str,
    columns: Sequence[TargetColumn],
    frame: pd.DataFrame,
    source_dialect: str,
    replace: bool,
    before_commit: Callable[[sa.Connection], None],
) -> None:
    """Write the frame's `columns` into one table and run before_commit atomically with it; `replace`
    swaps a staging table in, otherwise rows are appended to the existing table."""
    dialect = engine.dialect
    if dialect.name in ("mysql", "mariadb"):
        writer = _replace_mysql if replace else _append
    else:
        writer = _replace_transactional if replace else _append
    writer(engine, schema, name, columns, frame, source_dialect, before_commit)


def _replace_transactional(engine, schema, name, columns, frame, source_dialect, before_commit) -> None:
    staging_name = f"{STAGING_PREFIX}{uuid.uuid4().hex[:16]}"
    staging = _table(staging_name, schema, columns, source_dialect, engine.dialect)
    with engine.connect() as conn:
        _begin(conn)
        try:
            _create_enum_types(conn, staging)
            staging.create(conn)
            _insert(conn, staging, columns, frame)
            locks.lock_transaction(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS)
            if sa.inspect(conn).has_table(name, schema=schema):
                sa.Table(name, sa.MetaData(), schema=schema).drop(conn)
            conn.exec_driver_sql(
                f"ALTER TABLE {_format_table(conn, staging)} RENAME TO {conn.dialect.identifier_preparer.quote(name)}"
            )
            before_commit(conn)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def _replace_mysql(engine, schema, name, columns, frame, source_dialect, before_commit) -> None:
    run = uuid.uuid4().hex[:16]
    staging = _table(f"{STAGING_PREFIX}{run}", schema, columns, source_dialect, engine.dialect)
    old = sa.Table(f"{OLD_PREFIX}{run}", sa.MetaData(), schema=schema)
    target = sa.Table(name, sa.MetaData(), schema=schema)
    with (
        engine.connect() as conn,
        locks.session_lock(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS),
    ):
        fmt = lambda table: _format_table(conn, table)  # noqa: E731
        try:
            staging.create(conn)
            conn.commit()
            _insert(conn, staging, columns, frame)
            conn.commit()
            had_previous = sa.inspect(conn).has_table(name, schema=schema)
            if had_previous:
                conn.exec_driver_sql(
                    f"RENAME TABLE {fmt(target)} TO {fmt(old)}, {fmt(staging)} TO {fmt(target)}"
                )
            else:
                conn.exec_driver_sql(f"RENAME TABLE {fmt(staging)} TO {fmt(target)}")
            conn.commit()
            try:
                before_commit(conn)
                conn.commit()
            except BaseException:
                conn.rollback()
                if had_previous:
                    conn.exec_driver_sql(
                        f"RENAME TABLE {fmt(target)} TO {fmt(staging)}, {fmt(old)} TO {fmt(target)}"
                    )
                else:
                    conn.exec_driver_sql(f"RENAME TABLE {fmt(target)} TO {fmt(staging)}")
                conn.commit()
                raise
        except BaseException:
            conn.rollback()
            staging.drop(conn, checkfirst=True)
            conn.commit()
            raise
        old.drop(conn, checkfirst=True)
        conn.commit()


def _append(engine, schema, name, columns, frame, source_dialect, before_commit) -> None:
    with (
        engine.connect() as conn,
        locks.session_lock(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS),
    ):
        _begin(conn)
        try:
            locks.lock_transaction(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS)
            if sa.inspect(conn).has_table(name, schema=schema):
                table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=conn)
                _check_append_target(conn, table, columns, source_dialect)
            else:
                # On MySQL/MariaDB this CREATE commits at once: a failing first append leaves an empty table.
                table = _table(name, schema, columns, source_dialect, engine.dialect)
                _create_enum_types(conn, table)
                table.create(conn)
            _insert(conn, table, columns, frame)
            before_commit(conn)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def _check_append_target(
    conn: sa.Connection, table: sa.Table, columns: Sequence[TargetColumn], source_dialect
):
    expected = [(c.name, target_type_sql(c, source_dialect, conn.dialect)) for c in columns]
    actual = [(c.name, c.type.compile(dialect=conn.dialect)) for c in table.columns]
    # Compared through the generic types: MySQL reflects SMALLINT as SMALLINT(6), which is the same column.
    expected_generic = [
        (c.name, _generic(target_type(c.sql_type, source_dialect, conn.dialect.name))) for c in columns
    ]
    if expected_generic != [(c.name, _generic(c.type)) for c in table.columns]:
        raise TargetSchemaError(
            f"target table {table.fullname} has columns {actual}, but the synthetic output has {expected}; "
            "use mode: replace (or drop the target) to change its schema"
        )


def _generic(sql_type: sa.types.TypeEngine) -> str:
    try:
        return repr(sql_type.as_generic())
    except NotImplementedError:
        return repr(sql_type)


def _begin(conn: sa.Connection) -> None:
    # pysqlite does not open a transaction before DDL on its own; an explicit BEGIN makes CREATE/DROP/RENAME
    # part of the transaction, so a rollback undoes them (SQLite's DDL is transactional).
    if conn.dialect.name == "sqlite":
        driver_connection = conn.connection.driver_connection
        if not driver_connection.in_transaction:
            conn.exec_driver_sql("BEGIN")


def _format_table(conn: sa.Connection, table: sa.Table) -> str:
    return conn.dialect.identifier_preparer.format_table(table)


def _insert(
    conn: sa.Connection, table: sa.Table, columns: Sequence[TargetColumn], frame: pd.DataFrame
) -> None:
    if len(frame) == 0:
        return
    kinds = [c.kind for c in columns]
    if postgres.is_psycopg(conn):
        postgres.copy_in(conn, table, frame[[c.name for c in columns]], kinds)
        return
    keys = [c.key for c in table.columns]
    statement = table.insert()
    for start in range(0, len(frame), _INSERT_BATCH_ROWS):
        chunk = frame.iloc[start : start + _INSERT_BATCH_ROWS]
        values = [to_python(chunk[c.name], c.kind) for c in columns]
        conn.execute(statement, [dict(zip(keys, row, strict=True)) for row in zip(*values, strict=True)])
