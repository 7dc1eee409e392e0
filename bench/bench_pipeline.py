"""Warehouse I/O overhead of run_table on a 1M-row PostgreSQL table, against raw COPY.

    python bench/bench_pipeline.py [--rows 1000000] [--url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

Baseline: `COPY (SELECT ...) TO STDOUT` into memory plus `COPY ... FROM STDIN` of those bytes into a
fresh table of the same types: the least any tool must do to move the data out and back in.
Pipeline: run_table with a pass-through engine (every row back unchanged, so the write moves as many
rows as the baseline), timed by the pipeline's own read and write stages (reflection, streaming read
into typed pandas columns, conversion back to Python values, staging table, COPY, swap and lineage
insert). Synthesis and quality metrics are excluded: they are the engine's and the report's cost.
Target: read + write <= 1.2 x baseline. Each figure is the best of --repeat runs (the machine is shared).

Wall time on a busy machine mostly measures the load, so each side's CPU is printed too: this process's
user + system seconds plus those of the PostgreSQL server processes serving its connections (found by
pg_backend_pid). The pipeline's is sampled at the progress events that open and close its read and
write stages; the whole run_table's (reflection and checks too) is printed as well.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

import psutil
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


class CpuMeter:
    """CPU seconds (user + system) of this process and of the server processes of an engine's connections."""

    def __init__(self, engine: sa.Engine):
        self._servers: list[psutil.Process] = []
        sa.event.listen(engine, "connect", self._on_connect)

    def _on_connect(self, dbapi_connection, _record) -> None:
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            self._servers.append(psutil.Process(cursor.fetchone()[0]))
        dbapi_connection.commit()

    def seconds(self) -> float:
        return sum(_cpu(p) for p in [psutil.Process(), *self._servers] if p.is_running())


def _cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def raw_copy_seconds(url: str) -> tuple[float, float, float]:
    """(COPY TO STDOUT into memory, COPY FROM STDIN of those bytes, CPU of both), with psycopg's documented
    COPY API."""
    engine = sa.create_engine(url)
    meter = CpuMeter(engine)
    with engine.connect() as conn:
        cpu = meter.seconds()
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
        cpu = meter.seconds() - cpu
        conn.exec_driver_sql("DROP TABLE bench.raw_copy")
        conn.commit()
    engine.dispose()
    return copied_out - started, finished - copied_out, cpu


def pipeline_seconds(url: str) -> dict[str, float]:
    """The pipeline's read and write stage timings, the CPU of those two stages (sampled at their
    progress events) and of the whole run."""
    config = parse_config(
        {
            "source": url,
            "target": url,
            "target_schema": "bench_out",
            "risk": {"enabled": False},  # the KHLL risk report is not I/O either
            "tables": [{"source": "bench.orders", "engine": PassThrough.name}],
        }
    )
    engine = sa.create_engine(url)
    meter = CpuMeter(engine)
    marks: dict[tuple[str, float], float] = {}

    def progress(stage: str, fraction: float) -> None:
        if stage in ("read", "write"):
            marks[stage, fraction] = meter.seconds()

    originals = pipeline.quality_of_source, pipeline.quality_against_source
    # the report's cost is not I/O
    pipeline.quality_of_source = pipeline.quality_against_source = lambda *args, **kwargs: None
    try:
        started = meter.seconds()
        [result] = pipeline.run_table(
            config, "orders", source=engine, target=engine, salt=b"bench", progress=progress
        )
        finished = meter.seconds()
    finally:
        pipeline.quality_of_source, pipeline.quality_against_source = originals
        engine.dispose()
    stages_cpu = marks["read", 1.0] - marks["read", 0.0] + marks["write", 1.0] - marks["write", 0.5]
    return {
        "read": result.timings["read"],
        "write": result.timings["write"],
        "cpu": stages_cpu,
        "run_cpu": finished - started,
    }


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
            raws.append(raw_copy_seconds(url))
            runs.append(pipeline_seconds(url))
        raw_out, raw_in = min(r[0] for r in raws), min(r[1] for r in raws)
        raw = min(r[0] + r[1] for r in raws)
        raw_cpu = min(r[2] for r in raws)
        read = min(r["read"] for r in runs)
        write = min(r["write"] for r in runs)
        pipeline_cpu = min(r["cpu"] for r in runs)
        run_cpu = min(r["run_cpu"] for r in runs)
        ratio = (read + write) / raw
        print(
            f"rows: {args.rows:,} x 8 columns (bigint, int, numeric(10,2), varchar, bool, timestamp, date, text)"
        )
        print(f"load average (1 min)    : {psutil.getloadavg()[0]:7.2f}")
        print(f"raw COPY TO STDOUT      : {raw_out:7.2f} s")
        print(f"raw COPY FROM STDIN     : {raw_in:7.2f} s")
        print(f"raw COPY TO + COPY FROM : {raw:7.2f} s wall  {raw_cpu:7.2f} CPU-s (client + server)")
        print(f"pipeline read           : {read:7.2f} s")
        print(f"pipeline write          : {write:7.2f} s  (staging table, COPY, swap, lineage)")
        print(
            f"pipeline read + write   : {read + write:7.2f} s wall  {pipeline_cpu:7.2f} CPU-s (client + server)"
        )
        print(f"pipeline whole run      :            {run_cpu:7.2f} CPU-s (reflection and checks too)")
        print(
            f"read + write / raw      : {ratio:7.2f} x wall  {pipeline_cpu / raw_cpu:7.2f} x CPU  (target <= 1.2 x)"
        )
        return 0 if ratio <= 1.2 else 1
    finally:
        ENGINES.pop(PassThrough.name, None)
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.dispose()


if __name__ == "__main__":
    sys.exit(main())
