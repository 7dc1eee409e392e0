"""Airflow connections -> SQLAlchemy URLs, and the names tables get as Assets and OpenLineage datasets."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.airflow

POSTGRES = {
    "conn_type": "postgres",
    "host": "warehouse.internal",
    "port": 5433,
    "login": "reader",
    "password": "pa:ss/word@1",
    "schema": "sales",
    "extra": {"sqlalchemy_query": {"sslmode": "require"}, "cursor": "dictcursor"},
}


def test_a_postgres_connection_becomes_a_psycopg_url_that_never_prints_its_password(airflow_env, monkeypatch):
    from syndiffix_ops.airflow.hooks import connection_url

    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", json.dumps(POSTGRES))
    url = connection_url("warehouse")
    assert (url.drivername, url.host, url.port, url.username, url.database) == (
        "postgresql+psycopg",
        "warehouse.internal",
        5433,
        "reader",
        "sales",
    )
    assert url.password == "pa:ss/word@1"
    # Only sqlalchemy_query reaches the URL: the Postgres hook's own extras would break the driver.
    assert dict(url.query) == {"sslmode": "require"}
    assert "pa:ss/word@1" not in str(url) and "pa:ss/word@1" not in repr(url)


@pytest.mark.parametrize(
    ("connection", "driver"),
    [
        ({"conn_type": "mysql", "host": "db", "schema": "shop"}, "mysql+pymysql"),
        (
            {"conn_type": "postgres", "host": "db", "extra": {"sqlalchemy_scheme": "postgresql+psycopg2"}},
            "postgresql+psycopg2",
        ),
        ({"conn_type": "sqlite", "host": "/data/warehouse.db"}, "sqlite"),
    ],
)
def test_connection_types_map_to_tested_drivers(airflow_env, monkeypatch, connection, driver):
    from syndiffix_ops.airflow.hooks import connection_url

    monkeypatch.setenv("AIRFLOW_CONN_SOME_DB", json.dumps(connection))
    url = connection_url("some_db")
    assert url.drivername == driver
    if driver == "sqlite":
        assert url.database == "/data/warehouse.db"


def test_an_unsupported_connection_type_is_named_in_the_error(airflow_env, monkeypatch):
    from syndiffix_ops.airflow.hooks import connection_url

    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "aws", "login": "key"}))
    with pytest.raises(ValueError, match=r"connection 'lake' has type 'aws'.*sqlalchemy_scheme"):
        connection_url("lake")


def test_tables_are_named_the_way_the_postgres_and_mysql_providers_name_them(airflow_env):
    import sqlalchemy as sa

    from syndiffix_ops.airflow.openlineage_facets import openlineage_dataset
    from syndiffix_ops.airflow.operators import asset_uri

    pg = sa.make_url("postgresql+psycopg://u:p@warehouse:5433/sales")
    assert openlineage_dataset(pg, "public", "orders") == ("postgres://warehouse:5433", "sales.public.orders")
    assert openlineage_dataset(pg, None, "orders") == ("postgres://warehouse:5433", "sales.public.orders")
    assert asset_uri(pg, "synthetic", "orders") == "postgres://warehouse:5433/sales/synthetic/orders"
    assert (
        asset_uri(pg, "synthetic", "order lines/v2")
        == "postgres://warehouse:5433/sales/synthetic/order%20lines%2Fv2"
    )
    default_port = sa.make_url("postgresql+psycopg://warehouse/sales")
    assert openlineage_dataset(default_port, "s", "t")[0] == "postgres://warehouse:5432"
    my = sa.make_url("mysql+pymysql://u@shop-db/shop")
    assert openlineage_dataset(my, None, "orders") == ("mysql://shop-db:3306", "shop.orders")
    assert asset_uri(my, None, "orders") == "mysql://shop-db:3306/shop/orders"


def test_an_odd_table_name_is_a_valid_asset(airflow_env):
    import sqlalchemy as sa
    from airflow.sdk import Asset

    from syndiffix_ops.airflow.operators import asset_uri

    uri = asset_uri(sa.make_url("postgresql+psycopg://h/db"), "synthétique", 'order "lines"; drop')
    assert Asset(uri=uri, name=uri).uri == uri


def test_the_hook_runs_sql_and_tests_its_connection_on_a_postgres_connection(
    airflow_env, monkeypatch, pg_url
):
    import sqlalchemy as sa

    from syndiffix_ops.airflow.hooks import SyntheticWarehouseHook

    url = sa.make_url(pg_url)
    connection = {"conn_type": "postgres", "host": url.host, "port": url.port, "login": url.username}
    monkeypatch.setenv("AIRFLOW_CONN_PG", json.dumps({**connection, "schema": url.database}))
    hook = SyntheticWarehouseHook(warehouse_conn_id="pg")
    assert hook.get_first("SELECT current_database()") == (url.database,)
    assert hook.get_records("SELECT 1 UNION ALL SELECT 2 ORDER BY 1") == [(1,), (2,)]
    ok, message = hook.test_connection()
    assert ok and message.startswith("connected to postgresql "), message

    monkeypatch.setenv(
        "AIRFLOW_CONN_WRONG",
        json.dumps({**connection, "schema": "no_such_database_here", "password": "pa:ss/word@1"}),
    )
    ok, message = SyntheticWarehouseHook(warehouse_conn_id="wrong").test_connection()
    assert not ok and "no_such_database_here" in message and "\n" not in message
    assert "pa:ss/word@1" not in message


def test_a_generic_connection_names_its_driver_in_the_extra(airflow_env, monkeypatch, tmp_path):
    from syndiffix_ops.airflow.hooks import SyntheticWarehouseHook
    from syndiffix_ops.config import ConfigError

    monkeypatch.setenv(
        "AIRFLOW_CONN_FILE_DB",
        json.dumps(
            {"conn_type": "generic", "host": str(tmp_path / "w.db"), "extra": {"sqlalchemy_scheme": "sqlite"}}
        ),
    )
    assert SyntheticWarehouseHook(warehouse_conn_id="file_db").test_connection()[0]
    monkeypatch.setenv("AIRFLOW_CONN_BARE", json.dumps({"conn_type": "generic", "host": "h"}))
    with pytest.raises(ConfigError, match="connection 'bare' has type 'generic'"):
        SyntheticWarehouseHook(warehouse_conn_id="bare").get_sqlalchemy_engine()


def test_airflow_finds_the_hook_and_its_testable_connection_type(airflow_env):
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    hook = ProvidersManagerTaskRuntime().hooks["syndiffix_warehouse"]
    assert hook.hook_class_name == "syndiffix_ops.airflow.hooks.SyntheticWarehouseHook"
    assert hook.connection_testable and hook.package_name == "syndiffix-ops"
