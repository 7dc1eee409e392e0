"""run_table frees the source rows while the engine runs, and its quality figures (whose source half is
computed before synthesis) are those of the source and the written table compared afterwards."""

from __future__ import annotations

import datetime as dt
import gc
import json

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from syndiffix_ops.config import parse_config
from syndiffix_ops.lineage import lineage_table
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.report import compute_quality
from syndiffix_ops.warehouse import read_columns, reflect_table

SALT = b"source release test salt"
ROWS = 4_000
COLUMNS = ["amount", "quantity", "city", "paid", "ordered_at", "shipped_on", "rating"]


@pytest.fixture
def database(pg_url):
    engine = sa.create_engine(pg_url)
    schema = "release_test"
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "customer_id": rng.integers(0, 900, ROWS),
            "amount": np.round(rng.lognormal(3.0, 1.0, ROWS), 2),
            "quantity": rng.geometric(0.5, ROWS),
            "city": rng.choice([f"city {i}" for i in range(40)], ROWS, p=np.arange(40, 0, -1) / 820),
            "paid": rng.random(ROWS) < 0.8,
            "ordered_at": np.datetime64("2024-01-01T00:00:00")
            + rng.integers(0, 365 * 86400, ROWS).astype("timedelta64[s]"),
            "shipped_on": [
                dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 400, ROWS)
            ],
            "rating": pd.array(np.where(rng.random(ROWS) < 0.3, None, rng.integers(1, 6, ROWS)), "Int16"),
        }
    )
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {schema}.orders (customer_id bigint, amount numeric(10, 2), quantity integer, "
            "city varchar(20), paid boolean, ordered_at timestamp, shipped_on date, rating smallint)"
        )
    frame.to_sql("orders", engine, schema=schema, if_exists="append", index=False, chunksize=1000)
    del frame  # the test counts the frames of the source's length
    yield engine, schema
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    engine.dispose()


def _config(engine: sa.Engine, schema: str, **table):
    url = engine.url.render_as_string(hide_password=False)
    entry = {"source": f"{schema}.orders", "target": "orders_synth", "aid_columns": ["customer_id"], **table}
    return parse_config({"source": url, "target": url, "target_schema": schema, "tables": [entry]})


def _source_frames_alive() -> int:
    """pandas frames and series of the source's length (the engine's own arrays are numpy)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, pd.DataFrame | pd.Series) and len(o) == ROWS)


def test_the_source_rows_are_freed_while_the_engine_runs_the_last_output(database):
    engine, schema = database
    config = _config(
        engine,
        schema,
        column_sets={"money": {"columns": ["amount", "quantity"]}, "where": {"columns": ["city", "paid"]}},
    )
    alive: dict[str, int] = {}

    def progress(stage: str, fraction: float) -> None:
        if stage == "synthesize: clustering":  # encoded, the forest built, no cluster yet
            alive[f"output {len(alive) + 1}"] = _source_frames_alive()

    run_table(config, "orders_synth", salt=SALT, progress=progress)

    # the first output's engine runs while the second still needs the rows; the last frees them
    assert alive["output 1"] > 0
    assert alive["output 2"] == 0


def test_the_run_quality_figures_are_those_of_the_source_and_the_written_table(database):
    engine, schema = database
    config = _config(engine, schema)

    run_table(config, "orders_synth", salt=SALT)

    source = read_columns(engine, reflect_table(engine, schema, "orders"), COLUMNS)
    synthetic = read_columns(engine, reflect_table(engine, schema, "orders_synth"), COLUMNS)
    table = lineage_table(schema)
    with engine.connect() as conn:
        recorded = conn.execute(sa.select(table.c.quality_metrics)).scalar_one()
    expected = json.loads(json.dumps(compute_quality(source, synthetic)))  # as the lineage stores it
    assert recorded == expected
