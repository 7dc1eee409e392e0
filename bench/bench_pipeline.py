"""Warehouse I/O overhead of run_table on a 1M-row PostgreSQL table, against raw COPY.

    python bench/bench_pipeline.py [--rows 1000000] [--url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

Baseline: `COPY (SELECT ...) TO STDOUT` into memory plus `COPY ... FROM STDIN` of those bytes into a
fresh table of the same types: the least any tool must do to move the data out and back in.
Pipeline: run_table with a pass-through engine (every row back unchanged, so the write moves as many
rows as the baseline), timed by the pipeline's own read and write stages (reflection, streaming read
into typed pandas columns, conversion back to Python values, staging table, COPY, swap and lineage
insert). Synthesis and quality metrics are excluded: they are the engine's and the report's cost.
Target: read + write <= 1.5 x baseline. Each figure is the best of --repeat runs (the machine is shared).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict

from syndiffix_ops import pipeline
from syndiffix_ops.config import parse_config
from syndiffix_ops.engines import ENGINES, EngineResult, register_engine

COLUMNS = """
    id bigint, customer_id integer, amount numeric(10,2), city varchar(20), paid boolean,
    created_at timestamp, shipped_on date, note text
"""
FILL = """
INSERT INTO {table}
SELECT g, mod(g, 50000), mod(g, 100000) / 100.0, 'city ' || mod(g, 300), mod(g, 3) = 0,
       timestamp '2020-01-01' + g * interval '17 seconds', date '2020-01-01' + mod(g, 1500)::int,
       CASE WHEN mod(g, 5) = 0 THEN NULL ELSE 'note number ' || mod(g, 977) END
FROM generate_series(1, {rows}) AS g
"""


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PassThrough:
    """Hands every row back: the write then moves exactly what the read moved."""

    name = "bench_pass_through"
    params_model = _NoParams

    def run(self, df, *, aid_columns, salt, params, table_identity, progress=None):
        return EngineResult(df.drop(columns=list(aid_columns)))


def raw_copy_seconds(engine: sa.Engine) -> tuple[float, float]:
    """(COPY TO STDOUT into memory, COPY FROM STDIN of those bytes), with psycopg's documented COPY API."""
    with engine.connect() as conn:
        driver = conn.connection.driver_connection
        started = time.perf_counter()
        buffer = bytearray()
        with driver.cursor() as cursor:
            with cursor.copy("COPY (SELECT * FROM bench.orders) TO STDOUT") as copy:
                for block in copy:
                    buffer += block
            copied_out = time.perf_counter()
            cursor.execute(f"CREATE TABLE bench.raw_copy ({COLUMNS})")
            with cursor.copy("COPY bench.raw_copy FROM STDIN") as copy:
                copy.write(buffer)
        driver.commit()
        finished = time.perf_counter()
        conn.exec_driver_sql("DROP TABLE bench.raw_copy")
        conn.commit()
    return copied_out - started, finished - copied_out


def pipeline_seconds(engine: sa.Engine, url: str) -> dict[str, float]:
    config = parse_config(
        {
            "source": url,
            "target": url,
            "target_schema": "bench_out",
            "risk": {"enabled": False},  # the KHLL risk report is not I/O either
            "tables": [{"source": "bench.orders", "engine": PassThrough.name}],
        }
    )
    originals = pipeline.quality_metrics
    pipeline.quality_metrics = lambda original, synthetic: None  # the report's cost is not I/O
    try:
        [result] = pipeline.run_table(config, "orders", source=engine, target=engine, salt=b"bench")
    finally:
        pipeline.quality_metrics = originals
    return result.timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args(argv)

    admin = sa.create_engine(args.url, isolation_level="AUTOCOMMIT")
    database = f"sdx_bench_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{database}"')
    url = sa.make_url(args.url).set(database=database).render_as_string(hide_password=False)
    engine = sa.create_engine(url)
    register_engine(PassThrough())
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE SCHEMA bench")
            conn.exec_driver_sql(f"CREATE TABLE bench.orders ({COLUMNS})")
            conn.exec_driver_sql(FILL.format(table="bench.orders", rows=args.rows))
            conn.exec_driver_sql("ANALYZE bench.orders")
        raws, runs = [], []
        for _ in range(args.repeat):  # interleaved, so both see the same load on a shared machine
            raws.append(raw_copy_seconds(engine))
            runs.append(pipeline_seconds(engine, url))
        raw_out, raw_in = min(r[0] for r in raws), min(r[1] for r in raws)
        raw = min(sum(r) for r in raws)
        read = min(r["read"] for r in runs)
        write = min(r["write"] for r in runs)
        ratio = (read + write) / raw
        print(
            f"rows: {args.rows:,} x 8 columns (bigint, int, numeric(10,2), varchar, bool, timestamp, date, text)"
        )
        print(f"raw COPY TO STDOUT      : {raw_out:7.2f} s")
        print(f"raw COPY FROM STDIN     : {raw_in:7.2f} s")
        print(f"raw COPY TO + COPY FROM : {raw:7.2f} s")
        print(f"pipeline read           : {read:7.2f} s")
        print(f"pipeline write          : {write:7.2f} s  (staging table, COPY, swap, lineage)")
        print(f"read + write / raw      : {ratio:7.2f} x  (target <= 1.5 x)")
        return 0 if ratio <= 1.5 else 1
    finally:
        ENGINES.pop(PassThrough.name, None)
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.dispose()


if __name__ == "__main__":
    sys.exit(main())
