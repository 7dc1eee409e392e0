"""Ten million rows end to end: `syndiffix-ops run` from PostgreSQL to PostgreSQL, watched stage by stage.

    python bench/bench_scale.py                       # 10,000,000 rows (needs a machine that fits it)
    python bench/bench_scale.py --rows 1000000        # the same table at 1M rows
    python bench/bench_scale.py --rows 1000000 --keep # leave the database for another run (--reuse)

Builds `sales.orders` in a fresh database from a fixed seed: an entity column `customer_id` (0.3
customers per row, order counts per customer lognormal, so a few customers have hundreds of orders)
and 10 columns to synthesize: lognormal amounts that depend on the customer and the category, Zipf
categories and cities, a skewed sales channel, order times with yearly, weekly and daily seasons,
ship dates a lognormal delay later, discounts (mostly zero, some null), rare returns, ratings (many
null) and quantities. Then runs `syndiffix-ops run` on it (customer_id as the AID column, default
engine settings) in a child process and samples that process tree every 0.2 s: wall time, CPU seconds
(user + system of the tree, worker processes included) and peak memory per stage (read, synthesize,
quality and risk figures of the output, write: from the run's --progress-file events; --engine-stages
splits synthesize at the engine's own events: "synthesize: forest" runs from that event to the next
one). Memory is the tree's proportional set size (PSS: a page shared by a forked worker and its parent
counts once), and the run is killed above --abort-gib; --workers sets the engine's worker processes.

Finally the synthetic table is compared with the source, a column at a time: total variation distance
(TVD) of each column's distribution and of every pair of columns (numbers and times in 20 source
quantile bins, strings as their 50 most frequent source values plus one bin for the rest, NULL its own
bin), and mean / p90 / p99 of the numeric columns; and a hash of the synthetic table (of its rows,
whatever their order), the same for the same salt and code.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pyarrow as pa
import pyarrow.csv as pa_csv
import sqlalchemy as sa

from syndiffix_ops.warehouse import ValueKind, read_columns, reflect_table

SEED = 20261123
CHUNK_ROWS = 1_000_000
COLUMNS = """
    customer_id bigint, amount numeric(12,2), quantity integer, category varchar(24), city varchar(32),
    channel varchar(12), ordered_at timestamp, shipped_on date, discount double precision,
    is_return boolean, rating smallint
"""
SYNTHESIZED = [
    "amount", "quantity", "category", "city", "channel",
    "ordered_at", "shipped_on", "discount", "is_return", "rating",
]  # fmt: skip
NUMERIC = ["amount", "quantity", "discount", "rating"]
GIB = 2**30


# ------------------------------------------------------------------------------------------ the table


def _zipf_probabilities(count: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, count + 1) ** exponent
    return weights / weights.sum()


def generate_chunk(rows: int, start: int, customers: np.ndarray) -> pd.DataFrame:
    """Rows start .. start + rows of the table; each chunk has its own seed, so chunking changes nothing."""
    rng = np.random.default_rng([SEED, start])
    customer = rng.choice(len(customers), size=rows, p=customers)
    spend = np.random.default_rng([SEED, 1]).normal(0.0, 0.6, len(customers))  # a customer's usual spend
    category = rng.choice(200, size=rows, p=_zipf_probabilities(200, 1.2))
    city = rng.choice(2000, size=rows, p=_zipf_probabilities(2000, 1.05))
    channel = rng.choice(["web", "app", "store", "phone"], size=rows, p=[0.55, 0.3, 0.12, 0.03])
    amount = np.round(rng.lognormal(3.2 + spend[customer] + 0.004 * category, 1.0), 2)
    quantity = rng.geometric(0.55, rows) + (amount > 200)
    ordered = _seasonal_times(rng, rows)
    delay = np.ceil(rng.lognormal(1.0, 0.6, rows)).astype("timedelta64[D]")
    shipped = ordered.astype("datetime64[D]") + delay
    discount = np.where(rng.random(rows) < 0.7, 0.0, np.round(rng.beta(2, 8, rows), 3))
    discount[rng.random(rows) < 0.05] = np.nan
    is_return = rng.random(rows) < 0.02 + 0.0002 * category
    rating = rng.choice(5, size=rows, p=[0.05, 0.07, 0.15, 0.33, 0.4]) + 1.0
    rating[rng.random(rows) < 0.4] = np.nan
    return pd.DataFrame(
        {
            "customer_id": 1_000_003 + customer * 7,
            "amount": amount,
            "quantity": quantity,
            "category": _labels("category {:03d}", 200)[category],
            "city": _labels("city {:04d}", 2000)[city],
            "channel": channel,
            "ordered_at": ordered,
            "shipped_on": shipped,
            "discount": discount,
            "is_return": is_return,
            "rating": pd.array(rating, dtype="Int16"),
        }
    )


def _labels(pattern: str, count: int) -> np.ndarray:
    return np.array([pattern.format(i) for i in range(count)], dtype=object)


def _seasonal_times(rng: np.random.Generator, rows: int) -> np.ndarray:
    """Two years of order times: more in December, on weekends and in the evening (rejection sampling)."""
    start = np.datetime64("2024-01-01T00:00:00", "s")
    seconds = np.empty(0, dtype=np.int64)
    while len(seconds) < rows:
        candidates = rng.integers(0, 2 * 365 * 86400, 2 * rows)
        days = candidates / 86400
        hour = (candidates % 86400) / 3600
        weight = (
            (1 + 0.5 * np.cos(2 * np.pi * (days - 350) / 365))
            * np.where(days.astype(int) % 7 >= 5, 1.4, 1.0)  # 2024-01-01 is a Monday
            * (0.3 + np.exp(-((hour - 20) ** 2) / 18) + 0.5 * np.exp(-((hour - 12) ** 2) / 8))
        )
        keep = rng.random(len(candidates)) * weight.max() < weight
        seconds = np.concatenate([seconds, candidates[keep]])
    return start + seconds[:rows].astype("timedelta64[s]")


def customer_probabilities(rows: int) -> np.ndarray:
    """0.3 customers per row; how often each orders is lognormal (a long tail of frequent customers)."""
    weights = np.random.default_rng([SEED, 0]).lognormal(0.0, 1.2, max(1, int(rows * 0.3)))
    return weights / weights.sum()


def load_table(url: str, rows: int) -> None:
    engine = sa.create_engine(url)
    customers = customer_probabilities(rows)
    with engine.connect() as conn:
        conn.exec_driver_sql("CREATE SCHEMA sales")
        conn.exec_driver_sql(f"CREATE TABLE sales.orders ({COLUMNS})")
        conn.commit()
        driver = conn.connection.driver_connection
        for start in range(0, rows, CHUNK_ROWS):
            chunk = generate_chunk(min(CHUNK_ROWS, rows - start), start, customers)
            csv = pa.BufferOutputStream()
            pa_csv.write_csv(pa.Table.from_pandas(chunk, preserve_index=False), csv)
            with (
                driver.cursor() as cursor,
                cursor.copy("COPY sales.orders FROM STDIN (FORMAT csv, HEADER)") as copy,
            ):
                copy.write(csv.getvalue())
            driver.commit()
            print(f"  loaded {start + len(chunk):,} rows", file=sys.stderr)
        conn.exec_driver_sql("ANALYZE sales.orders")
        conn.commit()
    engine.dispose()


# ---------------------------------------------------------------------------------------- the run


class Watch:
    """Samples a process tree: per stage wall, CPU and peak PSS; kills the tree above a memory limit."""

    def __init__(
        self, process: subprocess.Popen, progress_file: Path, abort_bytes: int, engine_stages: bool = False
    ):
        self.root = psutil.Process(process.pid)
        self.engine_stages = engine_stages
        self.progress_file, self.abort_bytes = progress_file, abort_bytes
        self.stages: dict[str, dict[str, float]] = {}
        self.stage, self.aborted, self.peak = "start", False, 0
        self._events_read, self._last_cpu = 0, 0.0
        self._stage_started = (time.perf_counter(), 0.0)

    def run(self, interval: float = 0.2) -> None:
        while True:
            try:
                cpu, memory = self._tree_cpu(), self._tree_pss()
            except psutil.NoSuchProcess:
                return
            self.peak = max(self.peak, memory)
            stage = self._current_stage()
            if stage != self.stage:
                self._close_stage(cpu)
                self.stage = stage
            entry = self.stages.setdefault(self.stage, {"wall_s": 0.0, "cpu_s": 0.0, "peak_gib": 0.0})
            entry["peak_gib"] = max(entry["peak_gib"], memory / GIB)
            self._last_cpu = cpu
            if memory > self.abort_bytes:
                self.aborted = True
                for process in [*self.root.children(recursive=True), self.root]:
                    process.kill()
                return
            time.sleep(interval)

    def finish(self) -> None:
        self._close_stage(self._last_cpu)

    def _close_stage(self, cpu: float) -> None:
        started, cpu_started = self._stage_started
        entry = self.stages.setdefault(self.stage, {"wall_s": 0.0, "cpu_s": 0.0, "peak_gib": 0.0})
        entry["wall_s"] += time.perf_counter() - started
        entry["cpu_s"] += cpu - cpu_started
        self._stage_started = (time.perf_counter(), cpu)

    def _current_stage(self) -> str:
        if not self.progress_file.exists():
            return self.stage
        lines = self.progress_file.read_text().splitlines()
        stage = self.stage
        for line in lines[self._events_read :]:
            try:
                stage = self._stage_name(json.loads(line)["stage"])
            except ValueError:
                return stage  # a line being written: read it next time
            self._events_read += 1
        return stage

    def _stage_name(self, event: str) -> str:
        """The pipeline's stage ("synthesize: forest" -> "synthesize"), or with engine_stages the event
        itself for the engine's ("synthesize: cluster 2/5 stitched": from that event to the next one)."""
        stage = event.split(":")[0]
        return event if self.engine_stages and stage == "synthesize" else stage

    def _tree_cpu(self) -> float:
        """User + system seconds of the run and its processes, live or reaped. A worker reaped while the
        tree is read would be counted in neither part (or in both): the reading is taken again until
        the run's reaped children stayed the same throughout."""
        while True:
            before = self.root.cpu_times()
            live = 0.0
            for child in self.root.children(recursive=True):
                try:
                    child_times = child.cpu_times()
                    live += child_times.user + child_times.system
                except psutil.NoSuchProcess:
                    pass
            after = self.root.cpu_times()
            if (before.children_user, before.children_system) == (after.children_user, after.children_system):
                return after.user + after.system + after.children_user + after.children_system + live

    def _tree_pss(self) -> int:
        total = 0
        for process in [self.root, *self.root.children(recursive=True)]:
            try:
                with open(f"/proc/{process.pid}/smaps_rollup") as rollup:
                    total += next(int(line.split()[1]) * 1024 for line in rollup if line.startswith("Pss:"))
            except (FileNotFoundError, ProcessLookupError, StopIteration):
                pass
        return total


def run_pipeline(
    url: str, work: Path, abort_gib: float, engine_stages: bool, workers: int | None
) -> tuple[Watch, float, int]:
    config = work / "scale.yaml"
    config.write_text(
        f"version: 1\nsource: {url}\ntarget: {url}\ntarget_schema: synthetic\n"
        "tables:\n  - source: sales.orders\n    aid_columns: [customer_id]\n"
        + (f"    engine_params: {{workers: {workers}}}\n" if workers else "")
    )
    progress = work / "progress.jsonl"
    environment = {**os.environ, "SYNDIFFIX_SALT": "bench-scale-salt"}
    started = time.perf_counter()
    command = Path(sys.executable).with_name("syndiffix-ops")
    process = subprocess.Popen(
        [str(command), "run", str(config), "--progress-file", str(progress)], env=environment
    )
    watch = Watch(process, progress, int(abort_gib * GIB), engine_stages)
    watcher = threading.Thread(target=watch.run, daemon=True)
    watcher.start()
    code = process.wait()
    watcher.join()
    watch.finish()
    return watch, time.perf_counter() - started, code


# ------------------------------------------------------------------------------------------ quality


def column_codes(engine: sa.Engine, name: str) -> tuple[np.ndarray, np.ndarray, pd.Series, pd.Series]:
    """Bin codes of one column in the source and the synthetic table, and the raw values of both."""
    source_table = reflect_table(engine, "sales", "orders")
    source = read_columns(engine, source_table, [name])[name]
    synthetic = read_columns(engine, reflect_table(engine, "synthetic", "orders"), [name])[name]
    if source_table.column(name).kind in (ValueKind.STRING, ValueKind.BOOLEAN):
        top = source.value_counts().index[:50]
        return _category_codes(source, top), _category_codes(synthetic, top), source, synthetic
    numbers = [_as_number(s) for s in (source, synthetic)]
    edges = np.unique(np.nanquantile(numbers[0], np.linspace(0, 1, 21)[1:-1]))
    codes = [np.where(np.isnan(x), 0, 1 + np.searchsorted(edges, x, side="right")) for x in numbers]
    return codes[0].astype(np.int16), codes[1].astype(np.int16), source, synthetic


def _category_codes(values: pd.Series, top: pd.Index) -> np.ndarray:
    """0: NULL, 1..50: the source's most frequent values, 51: any other value."""
    codes = pd.Categorical(values.where(values.isin(top)), categories=top).codes.astype(np.int16)
    return np.where((codes < 0) & values.notna().to_numpy(), len(top), codes) + 1


def _as_number(series: pd.Series) -> np.ndarray:
    if pd.api.types.is_datetime64_any_dtype(series):
        return np.where(
            series.isna(), np.nan, series.to_numpy("datetime64[s]").astype(np.int64).astype(float)
        )
    if series.dtype == object:  # dates
        return pd.to_datetime(series).to_numpy("datetime64[s]").astype(np.int64).astype(float)
    return series.astype("Float64").to_numpy(dtype=np.float64, na_value=np.nan)


def tvd(a: np.ndarray, b: np.ndarray, size: int) -> float:
    p = np.bincount(a, minlength=size) / len(a)
    q = np.bincount(b, minlength=size) / len(b)
    return 0.5 * float(np.abs(p - q).sum())


def quality(url: str) -> dict:
    engine = sa.create_engine(url)
    codes, numeric, rows = {}, {}, None
    for name in SYNTHESIZED:
        source_codes, synthetic_codes, source, synthetic = column_codes(engine, name)
        codes[name] = (source_codes, synthetic_codes)
        rows = _with_column_hash(rows, synthetic)
        if name in NUMERIC:
            numeric[name] = {
                side: _summary(_as_number(values))
                for side, values in (("source", source), ("synthetic", synthetic))
            }
    engine.dispose()
    sizes = {name: int(max(a.max(), b.max())) + 1 for name, (a, b) in codes.items()}
    one = {name: tvd(a, b, sizes[name]) for name, (a, b) in codes.items()}
    two = {}
    for x, y in itertools.combinations(SYNTHESIZED, 2):
        (sx, tx), (sy, ty) = codes[x], codes[y]
        two[f"{x} x {y}"] = tvd(
            sx.astype(np.int32) * sizes[y] + sy, tx.astype(np.int32) * sizes[y] + ty, sizes[x] * sizes[y]
        )
    table_hash = hashlib.sha256(np.sort(rows).tobytes()).hexdigest()[:16]
    return {"tvd_1dim": one, "tvd_2dim": two, "numeric": numeric, "synthetic_hash": table_hash}


def _with_column_hash(rows: np.ndarray | None, values: pd.Series) -> np.ndarray:
    """Each synthetic row's hash with one more column mixed in (the columns are read one at a time, in
    the table's order); the table's hash is that of the sorted row hashes, whatever the rows' order."""
    column = pd.util.hash_pandas_object(values, index=False).to_numpy()
    return column if rows is None else rows * np.uint64(0x9E3779B97F4A7C15) + column


def _summary(values: np.ndarray) -> dict[str, float]:
    present = values[~np.isnan(values)]
    return {
        "mean": float(present.mean()),
        "p90": float(np.quantile(present, 0.9)),
        "p99": float(np.quantile(present, 0.99)),
    }


# ---------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--abort-gib", type=float, default=6.5, help="kill the run above this memory (PSS)")
    parser.add_argument("--keep", action="store_true", help="keep the database (printed) for --reuse")
    parser.add_argument("--reuse", metavar="DATABASE", help="run on a database a --keep run left")
    parser.add_argument(
        "--engine-stages", action="store_true", help="split synthesize into the engine's stages and clusters"
    )
    parser.add_argument("--workers", type=int, help="the engine's worker processes (default: the CPUs)")
    args = parser.parse_args(argv)

    admin = sa.create_engine(args.url, isolation_level="AUTOCOMMIT")
    database = args.reuse or f"sdx_scale_{uuid.uuid4().hex[:8]}"
    url = sa.make_url(args.url).set(database=database).render_as_string(hide_password=False)
    try:
        if not args.reuse:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'CREATE DATABASE "{database}"')
            started = time.perf_counter()
            load_table(url, args.rows)
            print(f"loaded {args.rows:,} rows in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        with tempfile.TemporaryDirectory() as work:
            watch, wall, code = run_pipeline(
                url, Path(work), args.abort_gib, args.engine_stages, args.workers
            )
        print(
            f"rows: {args.rows:,} x 10 columns + customer_id (AID); workers: {args.workers or 'default'}; "
            f"load average {psutil.getloadavg()[0]:.1f}"
        )
        print(
            f"syndiffix-ops run: {wall:.1f} s wall, {sum(f['cpu_s'] for f in watch.stages.values()):.1f} CPU-s, "
            f"exit code {code}, peak {watch.peak / GIB:.2f} GiB (PSS)"
        )
        if watch.aborted:
            print(f"ABORTED: memory above {args.abort_gib} GiB in stage {watch.stage}")
        width = max(map(len, watch.stages))
        print(f"{'stage':<{width}} {'wall s':>8} {'CPU s':>8} {'peak GiB':>9}")
        for stage, figures in watch.stages.items():
            print(
                f"{stage:<{width}} {figures['wall_s']:8.1f} {figures['cpu_s']:8.1f} {figures['peak_gib']:9.2f}"
            )
        if code != 0:
            return 1
        figures = quality(url)
        print(f"synthetic table hash: {figures['synthetic_hash']}")
        print(f"1-dim TVD  : mean {np.mean(list(figures['tvd_1dim'].values())):.4f}")
        for name, value in figures["tvd_1dim"].items():
            print(f"  {name:<12} {value:.4f}")
        two = figures["tvd_2dim"]
        worst = max(two, key=two.get)
        print(f"2-dim TVD  : mean {np.mean(list(two.values())):.4f}, worst {two[worst]:.4f} ({worst})")
        print(
            f"{'numeric':<12} {'mean src':>10} {'mean syn':>10} {'p90 src':>10} {'p90 syn':>10} {'p99 src':>10} {'p99 syn':>10}"
        )
        for name, sides in figures["numeric"].items():
            src, syn = sides["source"], sides["synthetic"]
            print(
                f"{name:<12} {src['mean']:10.3f} {syn['mean']:10.3f} {src['p90']:10.3f} {syn['p90']:10.3f} "
                f"{src['p99']:10.3f} {syn['p99']:10.3f}"
            )
        return 0
    finally:
        if args.keep:
            print(f"database kept: --reuse {database}", file=sys.stderr)
        else:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.dispose()


if __name__ == "__main__":
    sys.exit(main())
