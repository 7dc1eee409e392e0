"""SyntheticWarehouseHook: an Airflow connection -> the SQLAlchemy engine the warehouse layer reads and
writes through, on common-sql's DbApiHook (so get_records, get_pandas_df, run and test_connection work).

It serves Airflow's own connection types, so the connections other SQL operators use serve it too:
`postgres`/`postgresql` become `postgresql+psycopg` engines, `mysql`/`mariadb` `mysql+pymysql`, `sqlite`
reads the file path from host; `generic` and this provider's `syndiffix_warehouse` type name the driver
in the extra. Extra keys: "sqlalchemy_scheme" picks another driver, "sqlalchemy_query" adds URL query
parameters; any other key belongs to other providers' hooks and is ignored.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import sqlalchemy as sa
from airflow.providers.common.sql.hooks.sql import DbApiHook

from syndiffix_ops.config import ConfigError

# Airflow connection types -> the SQLAlchemy drivers the warehouse layer is tested with.
SQLALCHEMY_DRIVERS = {
    "postgres": "postgresql+psycopg",
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mysql+pymysql",
    "sqlite": "sqlite",
}
CONN_TYPE = "syndiffix_warehouse"


class SyntheticWarehouseHook(DbApiHook):
    """A source or target warehouse of syndiffix-ops, from an Airflow connection.

    :param warehouse_conn_id: the connection (types postgres, mysql, mariadb, sqlite, generic or
        syndiffix_warehouse).
    """

    conn_name_attr = "warehouse_conn_id"
    default_conn_name = "syndiffix_warehouse_default"
    conn_type = CONN_TYPE
    hook_name = "SynDiffix warehouse (SQLAlchemy)"
    supports_autocommit = True

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": [],
            "relabeling": {"schema": "Database"},
            "placeholders": {
                "extra": '{"sqlalchemy_scheme": "postgresql+psycopg", "sqlalchemy_query": {"sslmode": "require"}}',
                "host": "warehouse.internal (or the file path for sqlite)",
            },
        }

    @cached_property
    def sqlalchemy_url(self) -> sa.URL:
        """The connection as a URL object: str() of it hides the password, Airflow masks it in logs."""
        conn_id = self.get_conn_id()
        conn = self.connection
        extra = conn.extra_dejson or {}
        driver = extra.get("sqlalchemy_scheme") or SQLALCHEMY_DRIVERS.get((conn.conn_type or "").lower())
        if driver is None:
            raise ConfigError(
                [
                    f"connection {conn_id!r} has type {conn.conn_type!r}; syndiffix-ops reads postgres, mysql "
                    'and sqlite connections, or set {"sqlalchemy_scheme": "dialect+driver"} in its extra'
                ]
            )
        if driver.startswith("sqlite"):
            # Airflow's sqlite connections keep the file path in host (or in schema when host is empty).
            return sa.URL.create(driver, database=conn.host or conn.schema or None)
        query = {key: str(value) for key, value in (extra.get("sqlalchemy_query") or {}).items()}
        return sa.URL.create(
            driver,
            username=conn.login or None,
            password=conn.password or None,
            host=conn.host or None,
            port=conn.port or None,
            database=conn.schema or None,
            query=query,
        )

    def get_sqlalchemy_engine(self, engine_kwargs: dict[str, Any] | None = None) -> sa.Engine:
        return sa.create_engine(self.sqlalchemy_url, **(engine_kwargs or {}))

    def get_uri(self) -> str:
        return self.sqlalchemy_url.render_as_string(hide_password=False)

    def get_conn(self) -> Any:
        """A DBAPI connection (what DbApiHook's run, get_records and get_first use)."""
        return self._engine.raw_connection()

    @cached_property
    def _engine(self) -> sa.Engine:
        return self.get_sqlalchemy_engine()

    def test_connection(self) -> tuple[bool, str]:
        """Connect and ask the server for its version: (True, what answered) or (False, why not)."""
        try:
            engine = self.get_sqlalchemy_engine()
            try:
                with engine.connect() as conn:
                    conn.exec_driver_sql("SELECT 1").scalar_one()
                    server = ".".join(str(part) for part in conn.dialect.server_version_info or ())
            finally:
                engine.dispose()
        except Exception as error:  # the UI shows the message: one line, no password (URLs hide it)
            return False, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        return True, f"connected to {engine.dialect.name} {server}".rstrip()


def connection_url(conn_id: str) -> sa.URL:
    """The SQLAlchemy URL of an Airflow connection (see SyntheticWarehouseHook)."""
    return SyntheticWarehouseHook(warehouse_conn_id=conn_id).sqlalchemy_url
