"""Benchmark of the SynDiffix engine: 5 mixed-type columns synthesized as one cluster.

    python bench/bench_syndiffix.py                 # 10k, 100k, 1M rows
    python bench/bench_syndiffix.py --rows 100000   # one size
    python bench/bench_syndiffix.py --rows 1000000 --entities 300000   # with an AID column

Each size runs in its own child process, so the peak RSS printed is that run's alone
(resource.getrusage(RUSAGE_CHILDREN) after the child exits). Tables are generated from a fixed seed.
Targets (issue 2): 100k x 5 <= 10 s, 1M x 5 <= 60 s, peak RSS <= 2 GiB. With `--entities N` the table gets
a `customer` AID column of N entities (uniform, fixed seed: orders by customer), synthesized with it as
the AID; issue 14: 1M rows with 300k entities within 1.3x of the same table without AIDs. The machine may be shared:
CPU seconds are printed next to wall time because they are less sensitive to other load.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import pandas as pd

DEFAULT_SIZES = (10_000, 100_000, 1_000_000)


def make_table(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.normal(40, 12, rows)
    return pd.DataFrame(
        {
            "age": np.clip(base, 18, 95).astype(np.int64),
            "income": np.round(base * 1100 + rng.normal(0, 4000, rows), 2),
            "city": rng.choice([f"city_{i:03d}" for i in range(200)], rows, p=_zipf(200, rng)),
            "signup": pd.Timestamp("2015-01-01")
            + pd.to_timedelta(rng.integers(0, 8 * 365 * 86400, rows), unit="s"),
            "premium": rng.random(rows) < 0.25 + (base > 50) * 0.3,
        }
    )


def _zipf(n: int, rng: np.random.Generator) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1)
    return weights / weights.sum()


def run_child(rows: int, entities: int) -> None:
    """Synthesize one table and print a JSON line with the timings (the parent adds peak RSS)."""
    from syndiffix_core import synthesize

    table = make_table(rows)
    aid_columns = None
    if entities:
        table["customer"] = np.random.default_rng(7).integers(0, entities, rows)
        aid_columns = ["customer"]
    wall, cpu = time.perf_counter(), time.process_time()
    result = synthesize(table, aid_columns, salt="benchmark-salt")
    print(
        json.dumps(
            {
                "rows": rows,
                "wall_s": time.perf_counter() - wall,
                "cpu_s": time.process_time() - cpu,
                "output_rows": len(result),
                "corr_age_income_in": float(table[["age", "income"]].corr().iloc[0, 1]),
                "corr_age_income_out": float(result[["age", "income"]].corr().iloc[0, 1]),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, action="append", help="table size (repeatable)")
    parser.add_argument("--entities", type=int, default=0, help="add an AID column with this many entities")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child, args.entities)
        return
    print(f"{'rows':>9} {'wall s':>8} {'cpu s':>8} {'peak RSS MiB':>13} {'out rows':>9} {'corr in/out':>12}")
    for rows in args.rows or DEFAULT_SIZES:
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        completed = subprocess.run(
            [sys.executable, __file__, "--child", str(rows), "--entities", str(args.entities)],
            capture_output=True,
            text=True,
            check=False,
        )
        if completed.returncode != 0:
            print(f"{rows:>9} FAILED\n{completed.stderr}")
            continue
        peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        # ru_maxrss of children is the maximum over all waited-for children: runs go smallest first,
        # so a larger value than before is this child's own peak.
        peak = max(peak_kib, before) / 1024
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        print(
            f"{rows:>9} {result['wall_s']:>8.2f} {result['cpu_s']:>8.2f} {peak:>13.0f} "
            f"{result['output_rows']:>9} {result['corr_age_income_in']:>5.3f}/{result['corr_age_income_out']:.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
