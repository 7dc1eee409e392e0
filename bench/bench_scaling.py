"""Scaling of synthesize(): rows x columns x AID (no / yes), CPU seconds and peak RSS per run.

    python bench/bench_scaling.py                                  # 100k and 1M rows, 5/10/20 columns
    python bench/bench_scaling.py --rows 100000 --columns 5 10 --workers 1

The table is `generated_table(rows, columns)` of bench/compare_reference/compare.py (reals with 5 % nulls,
integers, strings, booleans, timestamps); with an AID the rows get a `customer` column of rows * 0.3
entities (uniform, fixed seed) used as the AID column. Each run is its own child process: CPU seconds are
the child's user + system time including its worker processes, peak RSS the child's own (os.wait4).
The growth exponent a (time ~ rows^a) is printed per column count and AID setting from the smallest and
largest row counts measured. A run whose RSS passes --max-rss-gib (default 6.5) stops itself and the
larger row counts of that column count and AID setting are skipped; the load average is printed before
and after (CPU seconds are the fairer figure on a loaded machine).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _watch_memory(limit_gib: float) -> None:
    """Ends this process (exit status 3) once its resident set exceeds `limit_gib`: a run that would
    not fit must not take the machine's memory from everything else on it."""
    import threading

    def watch() -> None:
        while True:
            with open("/proc/self/status") as status:
                rss_kib = next(int(line.split()[1]) for line in status if line.startswith("VmRSS"))
            if rss_kib > limit_gib * 2**20:
                print(f"peak RSS above {limit_gib} GiB: stopped", file=sys.stderr, flush=True)
                os._exit(3)
            time.sleep(0.05)

    threading.Thread(target=watch, daemon=True).start()


def child(rows: int, columns: int, aid: bool, workers: int | None, limit_gib: float) -> None:
    _watch_memory(limit_gib)
    sys.path.insert(0, str(HERE / "compare_reference"))
    import numpy as np
    from compare import generated_table

    from syndiffix_core import synthesize

    table, _ = generated_table(rows, columns)
    aid_columns = None
    if aid:
        table["customer"] = np.random.default_rng(7).integers(0, max(1, int(rows * 0.3)), rows)
        aid_columns = ["customer"]
    result = synthesize(table, aid_columns, salt="scaling-salt", workers=workers)
    print(json.dumps({"output_rows": len(result)}))


def run(rows: int, columns: int, aid: bool, workers: int | None, limit_gib: float) -> dict | None:
    command = [sys.executable, __file__, "--child", str(rows), str(columns), str(int(aid))]
    command += ["--max-rss-gib", str(limit_gib)]
    if workers is not None:
        command += ["--workers", str(workers)]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    output = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) == 3:
        return None
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{rows} x {columns} (AID {aid}) failed")
    return {
        "wall_s": time.perf_counter() - start,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_mib": usage.ru_maxrss / 1024,
        **json.loads(output.strip().splitlines()[-1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--columns", type=int, nargs="+", default=[5, 10, 20])
    parser.add_argument("--workers", type=int, help="worker processes (default: the CPUs available)")
    parser.add_argument(
        "--max-rss-gib", type=float, default=6.5, help="stop a run whose RSS exceeds this (default 6.5)"
    )
    parser.add_argument("--child", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child[:2], bool(args.child[2]), args.workers, args.max_rss_gib)
        return
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    print(
        f"{'rows':>9} {'cols':>4} {'AID':>4} {'wall s':>8} {'CPU s':>8} {'peak MiB':>9} {'B/cell':>7}",
        flush=True,
    )
    measured: dict[tuple[int, bool], list[tuple[int, float]]] = {}
    for columns in args.columns:
        for aid in (False, True):
            for rows in sorted(args.rows):
                figures = run(rows, columns, aid, args.workers, args.max_rss_gib)
                if figures is None:
                    print(
                        f"{rows:>9} {columns:>4} {'yes' if aid else 'no':>4}  stopped above {args.max_rss_gib} GiB"
                    )
                    break
                cells = rows * (columns + aid)
                print(
                    f"{rows:>9} {columns:>4} {'yes' if aid else 'no':>4} {figures['wall_s']:>8.1f} "
                    f"{figures['cpu_s']:>8.1f} {figures['peak_mib']:>9.0f} {figures['peak_mib'] * 2**20 / cells:>7.0f}",
                    flush=True,
                )
                measured.setdefault((columns, aid), []).append((rows, figures["cpu_s"]))
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for (columns, aid), points in measured.items():
        if len(points) > 1:
            (r0, t0), (r1, t1) = points[0], points[-1]
            exponent = math.log(t1 / t0) / math.log(r1 / r0)
            print(f"{columns} columns, AID {'yes' if aid else 'no'}: CPU ~ rows^{exponent:.2f}")


if __name__ == "__main__":
    main()
