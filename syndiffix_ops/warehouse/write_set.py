"""Write a linked set of synthetic tables as one unit: all of them replace their previous versions, or
none does.

PostgreSQL and SQLite (transactional DDL), in one transaction: every staging table is created and
filled, the previous tables are dropped (children first), the staging tables are renamed into place,
the keys are recreated when asked (`constraints: copy`) and `before_commit` records lineage. A failure
anywhere rolls all of it back. On PostgreSQL the keys are added after the data (ALTER TABLE ... ADD),
so the database checks every row; SQLite cannot add constraints to an existing table, so there the
staging tables are created with them (SQLite checks foreign keys only when `PRAGMA foreign_keys` is on).

MySQL/MariaDB commit every DDL statement, so the set is staged first and swapped by one statement:
  1. every staging table is created (with its primary key, unique keys and NOT NULL when asked) and
     filled, parents first, each committed; with `constraints: copy` the foreign keys are then added
     between the staging tables (ALTER TABLE ... ADD FOREIGN KEY checks every row);
  2. one RENAME TABLE moves every previous table aside and every staging table into place: MariaDB
     and MySQL rename all tables of one statement atomically, so readers see the whole previous set
     or the whole new one (InnoDB foreign keys follow the renamed tables);
  3. `before_commit` records lineage and commits; should it fail, one RENAME TABLE puts the previous
     set back;
  4. the previous tables are dropped, children first.
A failure before 2 drops the staging tables and leaves the previous set as it was. The targets' write
locks are held throughout, and what a crashed process left behind is dropped by the next write of the
same targets (see write.py).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
import sqlalchemy as sa

from syndiffix_ops.warehouse import locks
from syndiffix_ops.warehouse.identifiers import derived_name
from syndiffix_ops.warehouse.write import (
    OLD_PREFIX,
    STAGING_PREFIX,
    TargetColumn,
    begin_ddl_transaction,
    create_enum_types,
    drop_leftovers,
    format_table,
    insert_rows,
    synthetic_table,
)


@dataclass(frozen=True)
class ForeignKeyConstraint:
    columns: tuple[str, ...]
    parent: str  # target table name
    parent_columns: tuple[str, ...]


@dataclass(frozen=True)
class TableWrite:
    """One table of the set: its columns, rows and (with constraints: copy) keys."""

    name: str
    columns: Sequence[TargetColumn]
    frame: pd.DataFrame
    source_dialect: str
    primary_key: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    foreign_keys: tuple[ForeignKeyConstraint, ...] = ()
    not_null: frozenset[str] = field(default_factory=frozenset)


def write_linked_tables(
    engine: sa.Engine,
    *,
    schema: str | None,
    tables: Sequence[TableWrite],
    constraints: bool,
    before_commit: Callable[[sa.Connection], None],
) -> None:
    """Replace `tables` (parents first) in the target as one unit, with their keys if asked."""
    if engine.dialect.name in ("mysql", "mariadb"):
        _replace_set_by_rename(engine, schema, tables, constraints, before_commit)
    else:
        _replace_set_in_transaction(engine, schema, tables, constraints, before_commit)


def _replace_set_in_transaction(engine, schema, tables, constraints, before_commit) -> None:
    dialect = engine.dialect.name
    run = uuid.uuid4().hex[:16]
    staging_names = {t.name: derived_name(STAGING_PREFIX, t.name, run) for t in tables}
    with engine.connect() as conn:
        begin_ddl_transaction(conn)
        try:
            for table in sorted(t.name for t in tables):
                locks.lock_transaction(conn, schema, table, locks.SWAP_LOCK_TIMEOUT_SECONDS)
            inline = constraints and dialect == "sqlite"
            metadata = sa.MetaData()
            staged = [
                _staging_table(conn, metadata, staging_names[t.name], schema, t, inline=inline)
                for t in tables
            ]
            for table, staging in zip(tables, staged, strict=True):
                create_enum_types(conn, staging)
                staging.create(conn)
                insert_rows(conn, staging, table.columns, table.frame)
            for table in reversed(tables):
                if sa.inspect(conn).has_table(table.name, schema=schema):
                    sa.Table(table.name, sa.MetaData(), schema=schema).drop(conn)
            quote = conn.dialect.identifier_preparer.quote
            for table, staging in zip(tables, staged, strict=True):
                conn.exec_driver_sql(
                    f"ALTER TABLE {format_table(conn, staging)} RENAME TO {quote(table.name)}"
                )
            if constraints and dialect == "postgresql":
                _add_constraints(conn, schema, tables)
            before_commit(conn)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def _replace_set_by_rename(engine, schema, tables, constraints, before_commit) -> None:
    run = uuid.uuid4().hex[:16]
    staging = {t.name: derived_name(STAGING_PREFIX, t.name, run) for t in tables}
    old = {t.name: derived_name(OLD_PREFIX, t.name, run) for t in tables}
    with engine.connect() as conn, _session_locks(conn, schema, [t.name for t in tables]):
        for table in reversed(tables):  # children first: a leftover child may reference a leftover parent
            drop_leftovers(conn, schema, table.name)
        try:
            _stage_by_table(conn, schema, tables, staging, constraints)
            previous = [t.name for t in tables if sa.inspect(conn).has_table(t.name, schema=schema)]
            _rename(
                conn, schema, [(name, old[name]) for name in previous] + [(s, n) for n, s in staging.items()]
            )
            try:
                before_commit(conn)
                conn.commit()
            except BaseException:
                conn.rollback()
                _rename(conn, schema, [(n, s) for n, s in staging.items()] + [(old[n], n) for n in previous])
                raise
        except BaseException:
            conn.rollback()
            _drop_children_first(conn, schema, [staging[t.name] for t in tables])
            raise
        _drop_children_first(conn, schema, [old[t.name] for t in tables])


@contextlib.contextmanager
def _session_locks(conn: sa.Connection, schema: str | None, names: Sequence[str]) -> Iterator[None]:
    with contextlib.ExitStack() as held:  # one order for every writer: two sets never wait on each other
        for name in sorted(set(names)):
            held.enter_context(locks.session_lock(conn, schema, name, locks.SWAP_LOCK_TIMEOUT_SECONDS))
        yield


def _stage_by_table(
    conn: sa.Connection,
    schema: str | None,
    tables: Sequence[TableWrite],
    staging: Mapping[str, str],
    constraints: bool,
) -> None:
    """Create and fill every staging table (each committed), then link them by their foreign keys."""
    metadata = sa.MetaData()
    for table in tables:
        staged = _staging_table(
            conn, metadata, staging[table.name], schema, table, inline=constraints, references=False
        )
        staged.create(conn)
        conn.commit()
        insert_rows(conn, staged, table.columns, table.frame)
        conn.commit()
    if constraints:
        _add_foreign_keys(conn, schema, tables, staging)
        conn.commit()


def _rename(conn: sa.Connection, schema: str | None, moves: Sequence[tuple[str, str]]) -> None:
    """One RENAME TABLE statement: MySQL/MariaDB apply all its moves or none."""

    def fmt(name: str) -> str:
        return format_table(conn, sa.Table(name, sa.MetaData(), schema=schema))

    conn.exec_driver_sql("RENAME TABLE " + ", ".join(f"{fmt(a)} TO {fmt(b)}" for a, b in moves))
    conn.commit()


def _drop_children_first(conn: sa.Connection, schema: str | None, names: Sequence[str]) -> None:
    for name in reversed(names):
        sa.Table(name, sa.MetaData(), schema=schema).drop(conn, checkfirst=True)
    conn.commit()


def _staging_table(
    conn: sa.Connection,
    metadata: sa.MetaData,
    name: str,
    schema: str | None,
    table: TableWrite,
    *,
    inline: bool,
    references: bool = True,
) -> sa.Table:
    """The staging table of `table`; `inline`: with its keys and NOT NULL (foreign keys only with
    `references`, named after the parents' final tables)."""
    plain = synthetic_table(name, schema, table.columns, table.source_dialect, conn.dialect)
    if not inline:
        return plain
    key_columns = {*table.primary_key, *(c for u in table.unique for c in u)}
    key_columns |= {c for fk in table.foreign_keys for c in fk.columns}
    columns = [
        sa.Column(
            c.name,
            _indexable(c.type, table.frame[c.name], conn.dialect) if c.name in key_columns else c.type,
            nullable=c.name not in _not_null(table),
        )
        for c in plain.columns
    ]
    keys: list[sa.schema.Constraint] = []
    if table.primary_key:
        keys.append(sa.PrimaryKeyConstraint(*table.primary_key))
    keys += [sa.UniqueConstraint(*columns_) for columns_ in table.unique]
    for fk in table.foreign_keys if references else ():
        _reference_stub(metadata, schema, fk)
        keys.append(
            sa.ForeignKeyConstraint(
                list(fk.columns), [_qualified(schema, fk.parent, c) for c in fk.parent_columns]
            )
        )
    return sa.Table(name, metadata, *columns, *keys, schema=schema)


_MYSQL_KEY_CHARACTERS = 768  # InnoDB indexes at most 3072 bytes: 768 characters of utf8mb4


def _indexable(sql_type: sa.types.TypeEngine, values: pd.Series, dialect: sa.Dialect) -> sa.types.TypeEngine:
    """MySQL/MariaDB cannot index a TEXT column (a PostgreSQL `text` key becomes one there): a key of
    unbounded strings becomes a VARCHAR as long as its longest synthetic value."""
    if dialect.name not in ("mysql", "mariadb") or not isinstance(sql_type, sa.String) or sql_type.length:
        return sql_type
    longest = int(values.dropna().astype(str).str.len().max()) if values.notna().any() else 1
    return sa.String(max(1, min(longest, _MYSQL_KEY_CHARACTERS)))


def _reference_stub(metadata: sa.MetaData, schema: str | None, fk: ForeignKeyConstraint) -> None:
    # SQLAlchemy resolves a foreign key against a Table object: a stub named like the final table
    # (never created) makes the staging table reference the name it will have after the swap.
    key = f"{schema}.{fk.parent}" if schema else fk.parent
    stub = metadata.tables.get(key)
    if stub is None:
        stub = sa.Table(fk.parent, metadata, schema=schema)
    for column in fk.parent_columns:
        if column not in stub.c:
            stub.append_column(sa.Column(column, sa.Integer))


def _qualified(schema: str | None, table: str, column: str) -> str:
    return f"{schema}.{table}.{column}" if schema else f"{table}.{column}"


def _not_null(table: TableWrite) -> set[str]:
    # NOT NULL is copied where the source declares it and the synthetic column holds no null
    return {c for c in table.not_null if c in table.frame and not table.frame[c].isna().any()} | set(
        table.primary_key
    )


def _add_constraints(conn: sa.Connection, schema: str | None, tables: Sequence[TableWrite]) -> None:
    """PostgreSQL: NOT NULL, primary, unique and foreign keys on the tables in place (every row checked)."""
    metadata = sa.MetaData()
    reflected = {t.name: sa.Table(t.name, metadata, schema=schema, autoload_with=conn) for t in tables}
    quote = conn.dialect.identifier_preparer.quote
    for table in tables:
        target = format_table(conn, reflected[table.name])
        for column in sorted(_not_null(table)):
            conn.exec_driver_sql(f"ALTER TABLE {target} ALTER COLUMN {quote(column)} SET NOT NULL")
        if table.primary_key:
            conn.execute(
                sa.schema.AddConstraint(
                    _bound(sa.PrimaryKeyConstraint(*table.primary_key), reflected[table.name])
                )
            )
        for columns in table.unique:
            conn.execute(
                sa.schema.AddConstraint(_bound(sa.UniqueConstraint(*columns), reflected[table.name]))
            )
    _add_foreign_keys(conn, schema, tables, {t.name: t.name for t in tables}, reflected)


def _add_foreign_keys(
    conn: sa.Connection,
    schema: str | None,
    tables: Sequence[TableWrite],
    names: Mapping[str, str],
    reflected: Mapping[str, sa.Table] | None = None,
) -> None:
    """The foreign keys of `tables` between the tables `names` maps them to (their staging tables on
    MySQL/MariaDB); the database checks every row as it adds each key."""
    if reflected is None:
        metadata = sa.MetaData()
        reflected = {
            t.name: sa.Table(names[t.name], metadata, schema=schema, autoload_with=conn) for t in tables
        }
    for table in tables:
        for fk in table.foreign_keys:
            parent = reflected[fk.parent]
            constraint = sa.ForeignKeyConstraint(list(fk.columns), [parent.c[c] for c in fk.parent_columns])
            conn.execute(sa.schema.AddConstraint(_bound(constraint, reflected[table.name])))


def _bound(constraint: sa.schema.Constraint, table: sa.Table) -> sa.schema.Constraint:
    table.append_constraint(constraint)
    return constraint
