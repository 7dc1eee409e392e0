"""Checks of the target that need no data: run before the source is read, and by a dry run.

Names within the target dialect's limits and told apart by it, the target schema present where the
pipeline cannot create it (MySQL/MariaDB databases), every output column's type expressible on the
target, and PostgreSQL enum types in the target schema agreeing with the source's labels.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from syndiffix_ops.errors import PermanentError
from syndiffix_ops.warehouse.identifiers import check_identifiers
from syndiffix_ops.warehouse.write import TargetColumn, target_type


class TargetCheckError(PermanentError, ValueError):
    """The target cannot take an output as configured; the message names what and how to fix it."""


def check_target(
    engine: sa.Engine,
    schema: str | None,
    outputs: Sequence[tuple[str, Sequence[TargetColumn]]],
    source_dialect: str,
) -> None:
    """Raise TargetCheckError (or IdentifierError) for the first problem of writing `outputs`, each a
    (target table name, columns) pair, into `schema` of the target."""
    dialect = engine.dialect
    names = [("target schema", schema)] if schema else []
    for table, columns in outputs:
        names.append(("target table", table))
        names += [(f"target table {table}: column", column.name) for column in columns]
    check_identifiers(dialect, names)
    for table, columns in outputs:
        _check_distinct_names(dialect.name, table, columns)
        for column in columns:
            _check_type(dialect, schema, table, column, source_dialect)
    with engine.connect() as conn:
        if schema and dialect.name in ("mysql", "mariadb"):
            _check_database(conn, schema)
        if dialect.name == "postgresql" and source_dialect == "postgresql":
            for table, columns in outputs:
                _check_enum_labels(conn, schema, table, columns)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# Dialects whose column names ignore case: SQLite folds ASCII letters only, MySQL/MariaDB all letters.
_NAME_FOLDS = {
    "sqlite": lambda name: name.translate(_ASCII_LOWER),
    "mysql": str.casefold,
    "mariadb": str.casefold,
}


def _check_distinct_names(dialect: str, table: str, columns: Sequence[TargetColumn]) -> None:
    """Two source columns whose names differ only in case (PostgreSQL's quoted `iod` and `IOD`) are one
    name to a target that ignores case, which refuses the table with a raw driver error."""
    fold = _NAME_FOLDS.get(dialect)
    if fold is None:
        return
    seen: dict[str, str] = {}
    for column in columns:
        earlier = seen.setdefault(fold(column.name), column.name)
        if earlier != column.name:
            raise TargetCheckError(
                f"target table {table}: columns {earlier!r} and {column.name!r} differ only in case, which "
                f"{dialect} column names do not tell apart; drop one of them (its column policy) or write "
                "to a target that keeps case (PostgreSQL)"
            )


def _check_type(
    dialect: sa.Dialect, schema: str | None, table: str, column: TargetColumn, source_dialect: str
) -> None:
    try:
        target_type(column.sql_type, source_dialect, dialect.name, schema).compile(dialect=dialect)
    except sa.exc.SQLAlchemyError as error:
        raise TargetCheckError(
            f"target table {table}: column {column.name!r} of type {column.sql_type!r} cannot be created on "
            f"{dialect.name} ({' '.join(str(error).split())}); set its policy to drop or write to a "
            f"{source_dialect} target"
        ) from None


def _check_database(conn: sa.Connection, schema: str) -> None:
    """MySQL/MariaDB schemas are databases, which the pipeline does not create."""
    if schema not in sa.inspect(conn).get_schema_names():
        raise TargetCheckError(
            f"target: target_schema {schema!r} is not a database on the target server; "
            f"create it (CREATE DATABASE) or correct target_schema"
        )


def _check_enum_labels(conn: sa.Connection, schema: str | None, table: str, columns: Sequence[TargetColumn]):
    existing = {
        (e["schema"], e["name"]): e["labels"]
        for e in sa.inspect(conn).get_enums(schema="*")  # every schema's enum types
    }
    default_schema = conn.dialect.default_schema_name
    for column in columns:
        if not isinstance(column.sql_type, postgresql.ENUM):
            continue
        key = (schema or default_schema, column.sql_type.name)
        labels = existing.get(key)
        if labels is not None and list(labels) != list(column.sql_type.enums):
            raise TargetCheckError(
                f"target table {table}: column {column.name!r} needs enum type {key[0]}.{key[1]} with labels "
                f"{list(column.sql_type.enums)}, but the target has that type with labels {list(labels)}; "
                f"drop the target's type (DROP TYPE ... CASCADE also drops the synthetic tables using it) "
                f"or write to another target_schema"
            )
