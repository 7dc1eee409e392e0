"""Write a linked set of synthetic tables as one unit: all of them replace their previous versions in one
transaction, or none does (PostgreSQL and SQLite, whose DDL is transactional).

Within the transaction: every staging table is created and filled, the previous tables are dropped
(children first), the staging tables are renamed into place, the keys are recreated when asked
(`constraints: copy`) and `before_commit` records lineage. A failure anywhere rolls all of it back.
On PostgreSQL the keys are added after the data (ALTER TABLE ... ADD), so the database checks every
row; SQLite cannot add constraints to an existing table, so there the staging tables are created with
them (SQLite checks foreign keys only when `PRAGMA foreign_keys` is on).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pandas as pd
import sqlalchemy as sa

from syndiffix_ops.warehouse.write import (
    STAGING_PREFIX,
    TargetColumn,
    begin_ddl_transaction,
    create_enum_types,
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


class LinkedWriteError(RuntimeError):
    """The target cannot hold the linked set as one unit."""


def write_linked_tables(
    engine: sa.Engine,
    *,
    schema: str | None,
    tables: Sequence[TableWrite],
    constraints: bool,
    before_commit: Callable[[sa.Connection], None],
) -> None:
    """Replace `tables` (parents first) in the target in one transaction, with their keys if asked."""
    dialect = engine.dialect.name
    if dialect not in ("postgresql", "sqlite"):
        raise LinkedWriteError(
            f"target: a linked set is written in one transaction, which needs transactional DDL "
            f"(PostgreSQL or SQLite); {dialect} commits each table on its own"
        )
    run = uuid.uuid4().hex[:12]
    staging_names = {t.name: f"{STAGING_PREFIX}{run}_{number}" for number, t in enumerate(tables)}
    with engine.connect() as conn:
        begin_ddl_transaction(conn)
        try:
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


def _staging_table(
    conn: sa.Connection,
    metadata: sa.MetaData,
    name: str,
    schema: str | None,
    table: TableWrite,
    *,
    inline: bool,
) -> sa.Table:
    plain = synthetic_table(name, schema, table.columns, table.source_dialect, conn.dialect)
    if not inline:
        return plain
    columns = [sa.Column(c.name, c.type, nullable=c.name not in _not_null(table)) for c in plain.columns]
    keys: list[sa.schema.Constraint] = []
    if table.primary_key:
        keys.append(sa.PrimaryKeyConstraint(*table.primary_key))
    keys += [sa.UniqueConstraint(*columns_) for columns_ in table.unique]
    for fk in table.foreign_keys:
        _reference_stub(metadata, schema, fk)
        keys.append(
            sa.ForeignKeyConstraint(
                list(fk.columns), [_qualified(schema, fk.parent, c) for c in fk.parent_columns]
            )
        )
    return sa.Table(name, metadata, *columns, *keys, schema=schema)


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
    for table in tables:
        for fk in table.foreign_keys:
            parent = reflected[fk.parent]
            constraint = sa.ForeignKeyConstraint(list(fk.columns), [parent.c[c] for c in fk.parent_columns])
            conn.execute(sa.schema.AddConstraint(_bound(constraint, reflected[table.name])))


def _bound(constraint: sa.schema.Constraint, table: sa.Table) -> sa.schema.Constraint:
    table.append_constraint(constraint)
    return constraint
