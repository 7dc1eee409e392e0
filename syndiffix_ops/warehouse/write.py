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
`_sdx_old_*` tables behind; their names carry a hash of the target's name, so the next replace of the
same target finds and drops them (and logs a warning naming them) while it holds the target's lock.

Writers of the same target table take turns (warehouse/locks.py): on PostgreSQL from the check for the
previous table to the commit, on MySQL/MariaDB for the whole write, on SQLite by its write lock.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from syndiffix_ops.errors import PermanentError
from syndiffix_ops.warehouse import locks, postgres
from syndiffix_ops.warehouse.identifiers import derived_name, target_tag
from syndiffix_ops.warehouse.types import (
    ValueKind,
    declared_numeric_bounds,
    to_python,
    within_declared_numeric,
)

log = logging.getLogger(__name__)

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
    sql_type: sa.types.TypeEngine, source_dialect: str, target_dialect: str, schema: str | None = None
) -> sa.types.TypeEngine:
    """The source's declared type, kept as is on the same dialect and made generic across dialects.

    A PostgreSQL enum type moves to the target `schema` (None: the default schema): the synthetic table
    must not depend on a type in the source's schema, which another database does not even have.
    """
    if source_dialect != target_dialect:
        try:
            generic = sql_type.as_generic()
        except NotImplementedError:
            return sql_type
        if isinstance(generic, sa.Enum) and generic.name is None:
            # a MySQL enum has no type name, which a PostgreSQL enum needs: keep the labels in a VARCHAR
            return sa.Enum(*generic.enums, native_enum=False)
        if isinstance(generic, sa.Double):
            # PostgreSQL reflects double precision with precision 53, MySQL's DOUBLE(M,D) loses D on the
            # way: MySQL refuses a DOUBLE with a precision but no scale, and every dialect's double is 53 bits
            return sa.Double()
        return generic
    if isinstance(sql_type, postgresql.ENUM):
        # created (if missing) before the table, not by it: see create_enum_types
        return postgresql.ENUM(*sql_type.enums, name=sql_type.name, schema=schema, create_type=False)
    return sql_type


def target_type_sql(
    column: TargetColumn, source_dialect: str, dialect: sa.Dialect, schema: str | None = None
) -> str:
    return target_type(column.sql_type, source_dialect, dialect.name, schema).compile(dialect=dialect)


def synthetic_table(
    name: str, schema: str | None, columns: Sequence[TargetColumn], source_dialect: str, dialect: sa.Dialect
) -> sa.Table:
    # Synthetic tables carry types only: no keys, defaults, identities or NOT NULL (the engine decides).
    return sa.Table(
        name,
        sa.MetaData(),
        *(sa.Column(c.name, target_type(c.sql_type, source_dialect, dialect.name, schema)) for c in columns),
        schema=schema,
    )


def target_enum_types(table: sa.Table) -> list[postgresql.ENUM]:
    """The PostgreSQL enum types the table's columns use (each in the table's schema)."""
    return [column.type for column in table.columns if isinstance(column.type, postgresql.ENUM)]


def create_enum_types(conn: sa.Connection, table: sa.Table) -> None:
    for enum_type in target_enum_types(table):
        postgresql.ENUM(*enum_type.enums, name=enum_type.name, schema=enum_type.schema).create(
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
    before_swap: Callable[[], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Write the frame's `columns` into one table and run before_commit atomically with it; `replace`
    swaps a staging table in, otherwise rows are appended to the existing table.

    `before_swap` runs once the rows are staged, before the target is touched (when appending, before
    anything is written); what it raises leaves the target as it was and drops the staged rows.
    `progress` hears "staged" once the rows are in the staging table (and before_swap has passed) and
    "swapped" once it has taken the target's name (before before_commit and the commit; on
    MySQL/MariaDB the rename is committed).
    """
    dialect = engine.dialect
    if dialect.name in ("mysql", "mariadb"):
        writer = _replace_mysql if replace else _append
    else:
        writer = _replace_transactional if replace else _append
    steps = _Steps(before_swap or _nothing, before_commit, progress or _silent)
    writer(engine, schema, name, columns, frame, source_dialect, steps)


@dataclass(frozen=True)
class _Steps:
    """What a writer calls between its own steps."""

    before_swap: Callable[[], None]
    before_commit: Callable[[sa.Connection], None]
    progress: Callable[[str], None]


def _nothing() -> None:
    pass


def _silent(step: str) -> None:
    pass


def _replace_transactional(engine, schema, name, columns, frame, source_dialect, steps: _Steps) -> None:
    staging_name = derived_name(STAGING_PREFIX, name, uuid.uuid4().hex[:16])
    staging = synthetic_table(staging_name, schema, columns, source_dialect, engine.dialect)
    with engine.connect() as conn:
        begin_ddl_transaction(conn)
        try:
            create_enum_types(conn, staging)
            staging.create(conn)
            insert_rows(conn, staging, columns, frame)
            steps.before_swap()
            steps.progress("staged")
            locks.lock_transaction(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS)
            if sa.inspect(conn).has_table(name, schema=schema):
                sa.Table(name, sa.MetaData(), schema=schema).drop(conn)
            conn.exec_driver_sql(
                f"ALTER TABLE {format_table(conn, staging)} RENAME TO {conn.dialect.identifier_preparer.quote(name)}"
            )
            steps.progress("swapped")
            steps.before_commit(conn)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def _replace_mysql(engine, schema, name, columns, frame, source_dialect, steps: _Steps) -> None:
    run = uuid.uuid4().hex[:16]
    staging = synthetic_table(
        derived_name(STAGING_PREFIX, name, run), schema, columns, source_dialect, engine.dialect
    )
    old = sa.Table(derived_name(OLD_PREFIX, name, run), sa.MetaData(), schema=schema)
    target = sa.Table(name, sa.MetaData(), schema=schema)
    with (
        engine.connect() as conn,
        locks.session_lock(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS),
    ):
        fmt = lambda table: format_table(conn, table)  # noqa: E731
        drop_leftovers(conn, schema, name)
        try:
            staging.create(conn)
            conn.commit()
            insert_rows(conn, staging, columns, frame)
            conn.commit()
            steps.before_swap()
            steps.progress("staged")
            had_previous = sa.inspect(conn).has_table(name, schema=schema)
            if had_previous:
                conn.exec_driver_sql(
                    f"RENAME TABLE {fmt(target)} TO {fmt(old)}, {fmt(staging)} TO {fmt(target)}"
                )
            else:
                conn.exec_driver_sql(f"RENAME TABLE {fmt(staging)} TO {fmt(target)}")
            conn.commit()
            try:
                steps.progress("swapped")
                steps.before_commit(conn)
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


def leftover_tables(conn: sa.Connection, schema: str | None, name: str) -> list[str]:
    """Staging and previous tables that interrupted replaces of `name` left in `schema`."""
    tag = target_tag(name)
    prefixes = (f"{STAGING_PREFIX}{tag}_", f"{OLD_PREFIX}{tag}_")
    return sorted(t for t in sa.inspect(conn).get_table_names(schema=schema) if t.startswith(prefixes))


def drop_leftovers(conn: sa.Connection, schema: str | None, name: str) -> list[str]:
    """Drop what interrupted replaces of `name` left behind, saying so; the caller holds the target lock."""
    leftovers = leftover_tables(conn, schema, name)
    for leftover in leftovers:
        sa.Table(leftover, sa.MetaData(), schema=schema).drop(conn, checkfirst=True)
    conn.commit()
    if leftovers:
        where = f"{schema}." if schema else ""
        log.warning(
            "target table %s%s: dropped %s, left by an earlier run that was interrupted mid-replace",
            where,
            name,
            ", ".join(where + leftover for leftover in leftovers),
        )
    return leftovers


def _append(engine, schema, name, columns, frame, source_dialect, steps: _Steps) -> None:
    steps.before_swap()  # nothing to stage: the rows go into the target itself
    with (
        engine.connect() as conn,
        locks.session_lock(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS),
    ):
        begin_ddl_transaction(conn)
        try:
            locks.lock_transaction(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS)
            if sa.inspect(conn).has_table(name, schema=schema):
                table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=conn)
                _check_append_target(conn, table, columns, source_dialect)
            else:
                # On MySQL/MariaDB this CREATE commits at once: a failing first append leaves an empty table.
                table = synthetic_table(name, schema, columns, source_dialect, engine.dialect)
                create_enum_types(conn, table)
                table.create(conn)
            insert_rows(conn, table, columns, frame)
            steps.before_commit(conn)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def _check_append_target(
    conn: sa.Connection, table: sa.Table, columns: Sequence[TargetColumn], source_dialect
):
    expected = [(c.name, target_type_sql(c, source_dialect, conn.dialect, table.schema)) for c in columns]
    actual = [(c.name, c.type.compile(dialect=conn.dialect)) for c in table.columns]
    # Compared through the generic types: MySQL reflects SMALLINT as SMALLINT(6), which is the same column.
    expected_generic = [
        (c.name, _generic(target_type(c.sql_type, source_dialect, conn.dialect.name, table.schema)))
        for c in columns
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


def begin_ddl_transaction(conn: sa.Connection) -> None:
    # pysqlite does not open a transaction before DDL on its own; an explicit BEGIN makes CREATE/DROP/RENAME
    # part of the transaction, so a rollback undoes them (SQLite's DDL is transactional).
    if conn.dialect.name == "sqlite":
        driver_connection = conn.connection.driver_connection
        if not driver_connection.in_transaction:
            conn.exec_driver_sql("BEGIN")


def format_table(conn: sa.Connection, table: sa.Table) -> str:
    return conn.dialect.identifier_preparer.format_table(table)


def _within_declared_types(
    frame: pd.DataFrame, columns: Sequence[TargetColumn], table: sa.Table
) -> pd.DataFrame:
    """NUMERIC(p, s) columns rounded to s digits and clamped to p digits (see types.within_declared_numeric)."""
    numeric = {
        c.name: within_declared_numeric(frame[c.name], column.type)
        for c, column in zip(columns, table.columns, strict=True)
        if c.kind is ValueKind.REAL and declared_numeric_bounds(column.type) is not None
    }
    return frame.assign(**numeric) if numeric else frame


def insert_rows(
    conn: sa.Connection, table: sa.Table, columns: Sequence[TargetColumn], frame: pd.DataFrame
) -> None:
    if len(frame) == 0:
        return
    frame = _within_declared_types(frame, columns, table)
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


def ensure_table(conn: sa.Connection, table: sa.Table) -> None:
    """Create a helper table of the target (and a missing PostgreSQL schema) if needed, in its own
    transaction, tolerating a concurrent run that creates it at the same moment."""
    if table.schema and conn.dialect.name == "postgresql":
        conn.execute(sa.schema.CreateSchema(table.schema, if_not_exists=True))
        conn.commit()
    try:
        table.create(conn, checkfirst=True)
        conn.commit()
    except (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.OperationalError):
        conn.rollback()
        if not sa.inspect(conn).has_table(table.name, schema=table.schema):
            raise
