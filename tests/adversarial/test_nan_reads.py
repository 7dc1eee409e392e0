"""NaN in real, double and numeric columns reads as null on every dialect (docs/columns.md).

The campaign saw PostgreSQL fail on a NaN with "cannot safely convert passed user dtype of float64 for
object dtyped data in column 1": no column, no value.
"""

from __future__ import annotations

import math

import pytest
import sqlalchemy as sa
from support_dataloss import SALT, rows_of, url_of

from syndiffix_ops.config import parse_config
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.warehouse import read_columns, reflect_table

REAL_TYPES = {"d": sa.Float(53), "r": sa.REAL(), "n": sa.Numeric(), "n2": sa.Numeric(10, 2)}


def _measures(engine: sa.Engine, schema: str | None) -> sa.Table:
    table = sa.Table(
        "measures",
        sa.MetaData(),
        sa.Column("id", sa.Integer),
        sa.Column("s", sa.Text),
        *(sa.Column(name, sql_type) for name, sql_type in REAL_TYPES.items()),
        schema=schema,
    )
    table.create(engine)
    return table


def _insert_nan_rows(engine: sa.Engine, table: sa.Table, rows: int = 60) -> None:
    """Every third row NaN in every real column, every fifth null, the rest numbers; `s` holds the
    text 'NaN', which is a string like any other. PostgreSQL gets its 'NaN' literal; SQLite gets the
    driver's float NaN (which it stores as NULL)."""
    literal = engine.dialect.name == "postgresql"
    records = []
    for i in range(rows):
        real = (sa.literal_column("'NaN'") if literal else math.nan) if i % 3 == 0 else None
        if i % 3 and i % 5:
            real = i + 0.25
        records.append({"id": i, "s": "NaN", **dict.fromkeys(REAL_TYPES, real)})
    with engine.begin() as conn:
        conn.execute(table.insert().values(records))


@pytest.mark.parametrize("dialect", ["postgresql", "sqlite"])
def test_nan_reads_as_null_in_every_real_type(dialect, request, tmp_path):
    if dialect == "postgresql":
        engine = sa.create_engine(request.getfixturevalue("pg_url"))
        schema = "nan_reads"
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")
    else:
        engine, schema = sa.create_engine(f"sqlite:///{tmp_path / 'nan.db'}"), None
    table = _measures(engine, schema)
    _insert_nan_rows(engine, table)
    frame = read_columns(engine, reflect_table(engine, schema, "measures"), ["id", "s", *REAL_TYPES])
    frame = frame.sort_values("id").reset_index(drop=True)
    for name in REAL_TYPES:
        nulls = frame[name].isna()
        assert nulls.tolist() == [i % 3 == 0 or i % 5 == 0 for i in range(60)], name
        assert frame.loc[~nulls, name].tolist() == [i + 0.25 for i in range(60) if i % 3 and i % 5], name
    assert frame["s"].tolist() == ["NaN"] * 60  # a string 'NaN' stays a value
    engine.dispose()


def test_mariadb_cannot_hold_nan_so_there_is_none_to_read(mariadb_url):
    """MariaDB's DOUBLE has no NaN: the server refuses one on insert, so a read never meets it."""
    engine = sa.create_engine(mariadb_url)
    table = sa.Table("nan_probe", sa.MetaData(), sa.Column("d", sa.Float(53)))
    table.create(engine)
    with pytest.raises(sa.exc.DBAPIError), engine.begin() as conn:
        conn.execute(table.insert(), [{"d": math.nan}])
    table.drop(engine)
    engine.dispose()


def test_a_postgres_table_with_nan_is_synthesized_with_nulls(pg_url):
    engine = sa.create_engine(pg_url)
    schema = "nan_run"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}")
    _insert_nan_rows(engine, _measures(engine, schema), rows=150)
    config = parse_config(
        {
            "source": url_of(engine),
            "target": url_of(engine),
            "target_schema": schema,
            "risk": {"enabled": False},
            "tables": [
                {"source": f"{schema}.measures", "target": "measures_synth", "columns": list(REAL_TYPES)}
            ],
        }
    )
    [result] = run_table(config, "measures_synth", salt=SALT)
    written = rows_of(engine, schema, "measures_synth")
    assert result.rows_written == len(written) > 0
    values = [value for row in written for value in row]
    assert any(value is None for value in values)  # the NaNs and nulls came through as nulls
    assert not any(value is not None and math.isnan(float(value)) for value in values)
    engine.dispose()
