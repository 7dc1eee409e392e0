"""KHLL ingestion speed and accuracy per column set on a generated 1M-row table.

    python bench/bench_khll.py [--rows 1000000] [--chunk 250000] [--k 4096]

For each column set it prints: hashing time of the value columns, ingestion time (KHLL.update over
chunks), rows/second for ingestion alone and for hashing + ingestion, and the estimates next to exact
pandas group-by counts. The machine may be shared, so every time is the best of --repeat runs and is
given twice: wall clock and this process's CPU time (all numpy work here is single-threaded, so CPU time
is what an idle core would show).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from syndiffix_core.risk import ID_SEED, KHyperLogLog, hash_column, hash_columns

COLUMN_SETS = [
    ["city"],
    ["city", "age"],
    ["city", "age", "income"],
    ["city", "age", "income", "product"],
    ["city", "age", "income", "product", "status"],
    ["email"],
    ["city", "age", "income", "product", "status", "signup", "score", "device"],
]


def make_table(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    people = rows // 2  # about two rows per person: ids repeat across rows
    return pd.DataFrame(
        {
            "person_id": rng.integers(0, people, rows),
            "city": pd.Series(rng.choice([f"city-{i}" for i in range(56)], rows)).astype("str"),
            "age": rng.integers(18, 90, rows),
            "income": (rng.lognormal(10, 0.6, rows) // 5_000 * 5_000).astype(np.int64),
            "product": rng.zipf(1.6, rows) % 500,
            "status": rng.choice(["new", "active", "lapsed"], rows),
            "signup": pd.to_datetime("2020-01-01") + pd.to_timedelta(rng.integers(0, 1_500, rows), unit="D"),
            "score": np.round(rng.normal(600, 80, rows), 1),
            "device": rng.choice(["ios", "android", "web", None], rows),
            "email": pd.Series([f"user{i}@example.com" for i in rng.integers(0, people, rows)]),
        }
    )


def exact(table: pd.DataFrame, columns: list[str]) -> tuple[int, float]:
    ids_per_value = table.groupby(columns, dropna=False, observed=True)["person_id"].nunique()
    return len(ids_per_value), float((ids_per_value <= 1).mean())


def best_of(repeat: int, run):
    """(best wall seconds, best CPU seconds, result)."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        result = run()
        wall = min(wall, time.perf_counter() - start_wall)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--chunk", type=int, default=250_000)
    parser.add_argument("--k", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    table = make_table(args.rows)
    id_wall, id_cpu, id_hashes = best_of(args.repeat, lambda: hash_column(table["person_id"], seed=ID_SEED))
    print(
        f"{args.rows:,} rows, chunks of {args.chunk:,}, K={args.k}; id hashing {id_wall:.3f}s wall {id_cpu:.3f}s cpu"
    )
    header = (
        f"{'column set':<40} {'hash s wall/cpu':>16} {'ingest s wall/cpu':>18} {'ingest Mrows/s wall/cpu':>24}"
        f" {'hash+ingest Mrows/s cpu':>24} {'distinct exact/est':>22} {'reid<=1 exact/est':>18}"
    )
    print(header)
    print("-" * len(header))
    slowest_wall = slowest_cpu = float("inf")
    for columns in COLUMN_SETS:
        hash_wall, hash_cpu, value_hashes = best_of(args.repeat, lambda c=columns: hash_columns(table, c))

        def ingest(value_hashes=value_hashes):
            sketch = KHyperLogLog(k=args.k)
            for start in range(0, args.rows, args.chunk):
                stop = start + args.chunk
                sketch.update(value_hashes[start:stop], id_hashes[start:stop])
            return sketch

        ingest_wall, ingest_cpu, sketch = best_of(args.repeat, ingest)
        distinct, potential = exact(table, columns)
        rate_wall, rate_cpu = args.rows / ingest_wall / 1e6, args.rows / ingest_cpu / 1e6
        slowest_wall, slowest_cpu = min(slowest_wall, rate_wall), min(slowest_cpu, rate_cpu)
        name = "+".join(columns) if len(columns) < 6 else f"all {len(columns)} columns"
        print(
            f"{name:<40} {f'{hash_wall:.3f}/{hash_cpu:.3f}':>16} {f'{ingest_wall:.3f}/{ingest_cpu:.3f}':>18}"
            f" {f'{rate_wall:.2f}/{rate_cpu:.2f}':>24} {args.rows / (hash_cpu + ingest_cpu) / 1e6:>24.2f}"
            f" {f'{distinct:,}/{sketch.distinct_values():,.0f}':>22}"
            f" {f'{potential:.3f}/{sketch.reidentification_potential(1):.3f}':>18}"
        )
    print(
        f"slowest ingestion per column set: {slowest_wall:.2f}M rows/s wall, {slowest_cpu:.2f}M rows/s cpu"
        " (target >= 2M)"
    )


if __name__ == "__main__":
    main()
