"""PostgreSQL enum columns land on a type in the target schema; dry runs catch target problems (item 11)."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa
from dialect_cases import SALT, config_for, lineage_rows, one_line

from syndiffix_ops.pipeline import run_table
from syndiffix_ops.run_errors import PipelineError


@pytest.fixture
def pg(pg_url):
    engine = sa.create_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.fixture
def other_pg_database(pg_url):
    """A second, empty PostgreSQL database on the same server: a cross-database target."""
    admin = sa.create_engine(sa.make_url(pg_url).set(database="postgres"), isolation_level="AUTOCOMMIT")
    name = f"sdx_enum_target_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    engine = sa.create_engine(sa.make_url(pg_url).set(database=name))
    yield engine
    engine.dispose()
    with admin.connect() as conn:
        conn.exec_driver_sql(f'DROP DATABASE "{name}" WITH (FORCE)')
    admin.dispose()


def _enum_source(engine: sa.Engine) -> str:
    """A source schema with enum type <schema>.tier and a table customers(tier, spend)."""
    schema = f"src_{uuid.uuid4().hex[:6]}"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        conn.exec_driver_sql(f"CREATE TYPE {schema}.tier AS ENUM ('bronze', 'silver', 'gold')")
        conn.exec_driver_sql(f"CREATE TABLE {schema}.customers (tier {schema}.tier, spend integer)")
        conn.exec_driver_sql(
            f"INSERT INTO {schema}.customers SELECT (ARRAY['bronze','silver','gold'])[1 + i %% 3]::{schema}.tier, "
            "i %% 50 FROM generate_series(1, 300) AS i"
        )
    return schema


def _column_type_schema(engine: sa.Engine, schema: str, table: str, column: str) -> tuple[str, str]:
    with engine.connect() as conn:
        return tuple(
            conn.execute(
                sa.text(
                    "SELECT udt_schema, udt_name FROM information_schema.columns "
                    "WHERE table_schema = :s AND table_name = :t AND column_name = :c"
                ),
                {"s": schema, "t": table, "c": column},
            ).one()
        )


def test_a_cross_database_target_gets_the_enum_type_in_its_target_schema(pg, other_pg_database):
    source_schema = _enum_source(pg)
    config = config_for(
        pg, other_pg_database, f"{source_schema}.customers", "customers_synth", target_schema="synthetic"
    )
    run_table(config, "customers_synth", salt=SALT, dry_run=True)
    for _ in range(2):
        [result] = run_table(config, "customers_synth", salt=SALT)
    assert _column_type_schema(other_pg_database, "synthetic", "customers_synth", "tier") == (
        "synthetic",
        "tier",
    )
    assert [c.sql_type for c in result.output_columns if c.name == "tier"] == ["synthetic.tier"]
    with other_pg_database.connect() as conn:
        tiers = set(
            conn.exec_driver_sql("SELECT DISTINCT tier::text FROM synthetic.customers_synth").scalars()
        )
    assert tiers <= {"bronze", "silver", "gold"} and len(tiers) == 3
    assert len(lineage_rows(other_pg_database, "synthetic")) == 2


def test_within_one_database_the_synthetic_column_does_not_depend_on_the_source_schema(pg):
    source_schema = _enum_source(pg)
    target_schema = f"syn_{uuid.uuid4().hex[:6]}"
    config = config_for(pg, pg, f"{source_schema}.customers", "customers_synth", target_schema=target_schema)
    run_table(config, "customers_synth", salt=SALT)
    assert _column_type_schema(pg, target_schema, "customers_synth", "tier") == (target_schema, "tier")
    with pg.begin() as conn:  # the source schema can go without taking the synthetic table with it
        conn.exec_driver_sql(f"DROP SCHEMA {source_schema} CASCADE")
    with pg.connect() as conn:
        assert conn.exec_driver_sql(f"SELECT count(*) FROM {target_schema}.customers_synth").scalar_one() > 0


def test_an_enum_type_with_other_labels_in_the_target_schema_is_refused_before_reading(pg):
    source_schema = _enum_source(pg)
    target_schema = f"syn_{uuid.uuid4().hex[:6]}"
    with pg.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {target_schema}")
        conn.exec_driver_sql(f"CREATE TYPE {target_schema}.tier AS ENUM ('bronze', 'gold')")
    config = config_for(pg, pg, f"{source_schema}.customers", "customers_synth", target_schema=target_schema)
    for dry_run in (True, False):
        with pytest.raises(PipelineError) as caught:
            run_table(config, "customers_synth", salt=SALT, dry_run=dry_run)
        message = one_line(caught.value)
        assert f"needs enum type {target_schema}.tier with labels ['bronze', 'silver', 'gold']" in message
        assert "labels ['bronze', 'gold']" in message
    assert not sa.inspect(pg).has_table("customers_synth", schema=target_schema)


def test_a_mariadb_enum_written_to_postgresql_keeps_its_labels(mariadb_url, pg):
    mariadb = sa.create_engine(mariadb_url)
    with mariadb.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS sizes")
        conn.exec_driver_sql("CREATE TABLE sizes (size ENUM('S', 'M', 'XL'), n INT)")
        conn.exec_driver_sql(
            "INSERT INTO sizes VALUES "
            + ", ".join(f"('{'SMX'[i % 3]}{'L' * (i % 3 == 2)}', {i % 9})" for i in range(300))
        )
    target_schema = f"syn_{uuid.uuid4().hex[:6]}"
    config = config_for(mariadb, pg, "sizes", "sizes_synth", target_schema=target_schema)
    run_table(config, "sizes_synth", salt=SALT)
    with pg.connect() as conn:
        sizes = set(conn.exec_driver_sql(f"SELECT DISTINCT size FROM {target_schema}.sizes_synth").scalars())
    assert sizes == {"S", "M", "XL"}
    mariadb.dispose()


def test_a_dry_run_names_a_missing_mariadb_target_database(mariadb_url):
    mariadb = sa.create_engine(mariadb_url)
    with mariadb.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS plain")
        conn.exec_driver_sql("CREATE TABLE plain (n INT)")
    config = config_for(mariadb, mariadb, "plain", "plain_synth", target_schema="no_such_database")
    with pytest.raises(PipelineError) as caught:
        run_table(config, "plain_synth", salt=SALT, dry_run=True)
    assert "target_schema 'no_such_database' is not a database on the target server" in one_line(caught.value)
    mariadb.dispose()
