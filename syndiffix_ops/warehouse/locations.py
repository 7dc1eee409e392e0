"""Where a table name resolves to on a live connection: server, database, schema and table.

Two connections can reach the same table under different spellings (localhost and 127.0.0.1, a relative
and an absolute SQLite path, an explicit `public.` and PostgreSQL's default schema), so the comparison
uses what the server says about itself, never the URL text:
  - SQLite: the resolved path of the main database file (an in-memory database is its own engine);
  - PostgreSQL: the cluster's system identifier (else its start time and port), current_database(), and
    current_schema() (the first existing schema of search_path) when no schema is given;
  - MySQL/MariaDB: @@hostname, @@port and @@datadir; the schema is the database (DATABASE() by default);
    names compare without case when lower_case_table_names is set.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa


@dataclass(frozen=True)
class TableLocation:
    server: tuple[object, ...]
    schema: str | None
    name: str


@dataclass(frozen=True)
class _Namespace:
    server: tuple[object, ...]
    default_schema: str | None
    fold_case: bool

    def locate(self, schema: str | None, name: str) -> TableLocation:
        schema = schema or self.default_schema
        if self.fold_case:
            return TableLocation(self.server, schema.casefold() if schema else None, name.casefold())
        return TableLocation(self.server, schema, name)


def namespace(conn: sa.Connection) -> _Namespace:
    """The server identity, default schema and name case rule of a connection."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        files = {row[1]: row[2] for row in conn.exec_driver_sql("PRAGMA database_list")}
        path = files.get("main") or ""
        server = ("sqlite", os.path.realpath(path)) if path else ("sqlite memory", id(conn.engine))
        return _Namespace(server, "main", fold_case=True)
    if dialect == "postgresql":
        database, schema = conn.exec_driver_sql("SELECT current_database(), current_schema()").one()
        return _Namespace(("postgresql", _postgres_cluster(conn), database), schema, fold_case=False)
    if dialect in ("mysql", "mariadb"):
        host, port, datadir, fold, database = conn.exec_driver_sql(
            "SELECT @@hostname, @@port, @@datadir, @@lower_case_table_names, DATABASE()"
        ).one()
        return _Namespace(("mysql", host, port, datadir), database, fold_case=int(fold) != 0)
    url = conn.engine.url
    default = sa.inspect(conn).default_schema_name
    return _Namespace((dialect, url.host, url.port, url.database), default, fold_case=False)


def _postgres_cluster(conn: sa.Connection) -> object:
    try:
        with conn.begin_nested():
            return conn.exec_driver_sql("SELECT system_identifier FROM pg_control_system()").scalar_one()
    except sa.exc.DBAPIError:  # a managed server may hide pg_control_system(): start time and port then
        return tuple(
            conn.exec_driver_sql("SELECT pg_postmaster_start_time()::text, current_setting('port')").one()
        )


def overlaps(
    source: sa.Connection,
    target: sa.Connection,
    sources: Sequence[tuple[str | None, str]],
    outputs: Sequence[tuple[str | None, str]],
) -> list[tuple[tuple[str | None, str], tuple[str | None, str]]]:
    """(output, source) pairs where an output (schema, name) on `target` is a source table on `source`."""
    source_space, target_space = namespace(source), namespace(target)
    located = [(s, source_space.locate(*s)) for s in sources]
    found = []
    for output in outputs:
        where = target_space.locate(*output)
        found += [(output, s) for s, place in located if place == where]
    return found
