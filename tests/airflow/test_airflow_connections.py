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
    from syndiffix_ops.airflow.operators import connection_url

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
    from syndiffix_ops.airflow.operators import connection_url

    monkeypatch.setenv("AIRFLOW_CONN_SOME_DB", json.dumps(connection))
    url = connection_url("some_db")
    assert url.drivername == driver
    if driver == "sqlite":
        assert url.database == "/data/warehouse.db"


def test_an_unsupported_connection_type_is_named_in_the_error(airflow_env, monkeypatch):
    from syndiffix_ops.airflow.operators import connection_url

    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "aws", "login": "key"}))
    with pytest.raises(ValueError, match=r"connection 'lake' has type 'aws'.*sqlalchemy_scheme"):
        connection_url("lake")


def test_tables_are_named_the_way_the_postgres_and_mysql_providers_name_them(airflow_env):
    import sqlalchemy as sa

    from syndiffix_ops.airflow.operators import asset_uri, openlineage_dataset

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
