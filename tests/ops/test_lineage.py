"""The lineage table: what a row holds, and what it must never hold (credentials, salt, source counts)."""

from __future__ import annotations

import datetime as dt
import json
import re

import numpy as np
import pytest
import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict

from syndiffix_ops.config import parse_config
from syndiffix_ops.engines import ENGINES, EngineResult, register_engine
from syndiffix_ops.lineage import (
    LINEAGE_TABLE,
    LineageRecord,
    SourceIdentity,
    ensure_lineage_table,
    insert_lineage,
    last_lineage,
    lineage_table,
)
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.run_result import AirflowIds

PASSWORD = "pa55-word-never-stored"
SALT = b"salt-never-stored"


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EveryOtherRow:
    name = "test_every_other_row"
    params_model = _NoParams

    def run(self, df, *, aid_columns, salt, params, table_identity, progress=None):
        metrics_like = {"share": np.float64(0.5), "rows": np.int64(2), "undefined": float("nan")}
        return EngineResult(df.drop(columns=list(aid_columns)).iloc[::2].reset_index(drop=True), metrics_like)


@pytest.fixture(autouse=True)
def engine_for_tests():
    register_engine(EveryOtherRow())
    yield
    ENGINES.pop(EveryOtherRow.name)


def _record(**overrides) -> LineageRecord:
    now = dt.datetime.now(dt.UTC)
    fields = dict(
        run_id="r",
        target_table="t",
        column_set=None,
        source=SourceIdentity("postgresql", "db.internal", "sales", "public.orders"),
        columns=[{"name": "a", "source_type": "INTEGER", "target_type": "INTEGER", "kind": "integer"}],
        aid_columns=["id"],
        engine="syndiffix",
        package_version="0",
        parameters={},
        config_hash="c" * 64,
        source_schema_hash="s" * 64,
        source_schema=[{"name": "a", "type": "INTEGER", "nullable": True}],
        synthetic_rows=3,
        started_at=now,
        finished_at=now,
    )
    fields.update(overrides)
    return LineageRecord(**fields)


def test_the_source_identity_keeps_host_and_database_but_never_credentials():
    url = sa.make_url(f"postgresql+psycopg://reader:{PASSWORD}@db.internal:5432/sales")
    identity = SourceIdentity.from_url(url, "public.orders")
    assert identity == SourceIdentity("postgresql", "db.internal", "sales", "public.orders")
    assert PASSWORD not in repr(identity) and "reader" not in repr(identity)


def test_last_lineage_picks_the_newest_row_of_the_target_and_column_set(warehouse_db):
    engine, schema = warehouse_db
    ensure_lineage_table(engine, schema)
    ensure_lineage_table(engine, schema)  # idempotent
    base = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    with engine.begin() as conn:
        for run, minutes, column_set in [
            ("old", 1, None),
            ("new", 2, None),
            ("set", 3, "s"),
            ("other", 4, None),
        ]:
            target = "other" if run == "other" else "t"
            insert_lineage(
                conn,
                schema,
                _record(
                    run_id=run,
                    target_table=target,
                    column_set=column_set,
                    finished_at=base + dt.timedelta(minutes=minutes),
                ),
            )
    assert last_lineage(engine, schema, "t")["run_id"] == "new"
    assert last_lineage(engine, schema, "t", "s")["run_id"] == "set"
    assert last_lineage(engine, schema, "absent") is None


def test_last_lineage_without_a_lineage_table_is_none(warehouse_db):
    engine, schema = warehouse_db
    assert last_lineage(engine, schema, "t") is None


def test_a_pipeline_lineage_row_holds_provenance_but_no_secret_and_no_source_count(warehouse_db):
    engine, schema = warehouse_db
    if engine.dialect.name != "postgresql":
        pytest.skip("needs a server that accepts (and ignores) a password: PostgreSQL with trust auth")
    source = sa.Table(
        "people", sa.MetaData(), sa.Column("id", sa.Integer), sa.Column("age", sa.Integer), schema=schema
    )
    source.create(engine)
    with engine.begin() as conn:
        conn.execute(source.insert(), [{"id": i, "age": 20 + i % 40} for i in range(137)])
    url = engine.url.set(password=PASSWORD).render_as_string(hide_password=False)
    config = parse_config(
        {
            "source": url,
            "target": url,
            "target_schema": schema,
            "tables": [
                {
                    "source": f"{schema}.people",
                    "target": "people_synthetic",
                    "engine": EveryOtherRow.name,
                    "aid_columns": ["id"],
                    "where": "age > 0",
                }
            ],
        }
    )
    airflow = AirflowIds(dag_id="synth", task_id="people", run_id="scheduled__2024")
    [result] = run_table(config, "people_synthetic", salt=SALT, run_id="run-7", airflow=airflow)

    with engine.connect() as conn:
        [row] = conn.execute(sa.select(lineage_table(schema))).mappings().all()
    reflected = sa.Table(LINEAGE_TABLE, sa.MetaData(), schema=schema, autoload_with=engine)
    assert [c.name for c in reflected.columns] == [c.name for c in lineage_table(schema).columns]

    assert row["source_host"] == "127.0.0.1" and row["source_database"] == engine.url.database
    assert row["source_table"] == f"{schema}.people" and row["target_table"] == "people_synthetic"
    assert (row["airflow_dag_id"], row["airflow_task_id"], row["airflow_run_id"]) == (
        "synth",
        "people",
        "scheduled__2024",
    )
    assert row["aid_columns"] == ["id"]
    assert row["parameters"]["where"] == "age > 0"
    assert row["engine_metadata"] == {"share": 0.5, "rows": 2, "undefined": None}
    assert row["synthetic_rows"] == result.rows_written == 69
    assert row["started_at"] <= row["finished_at"]
    assert row["source_schema"] == [
        {"name": "id", "type": "INTEGER", "nullable": True},
        {"name": "age", "type": "INTEGER", "nullable": True},
    ]

    everything = json.dumps({k: str(v) for k, v in row.items()})
    assert PASSWORD not in everything
    assert SALT.decode() not in everything
    # The exact source row count is nowhere as a number (ids and timestamps are random/clock text, so not
    # searched; hex digests may hold the digits 137 inside a longer token, which is no count).
    counted = json.dumps(
        {k: v for k, v in row.items() if k not in ("lineage_id", "started_at", "finished_at")}
    )
    assert re.search(r"(?<![0-9A-Za-z.])137(?![0-9A-Za-z])", counted) is None


def test_a_lineage_table_from_an_older_release_gains_the_newer_columns(warehouse_db):
    engine, schema = warehouse_db
    current = lineage_table(schema)
    current.create(engine)
    preparer = engine.dialect.identifier_preparer
    with engine.begin() as conn:  # what an older release created: without the newest columns
        for column in ("risk_metrics", "engine_metadata"):
            conn.exec_driver_sql(f"ALTER TABLE {preparer.format_table(current)} DROP COLUMN {column}")
    ensure_lineage_table(engine, schema)
    reflected = sa.Table(LINEAGE_TABLE, sa.MetaData(), schema=schema, autoload_with=engine)
    assert {c.name for c in reflected.columns} == {c.name for c in current.columns}
    with engine.begin() as conn:
        insert_lineage(conn, schema, _record(engine_metadata={"v": 1}))
    assert last_lineage(engine, schema, "t")["engine_metadata"] == {"v": 1}
