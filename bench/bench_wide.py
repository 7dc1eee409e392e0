"""Benchmark of a wide table end to end: clustering, one synthesis per cluster, stitching.

    python bench/bench_wide.py                          # 1M rows x 10 columns
    python bench/bench_wide.py --rows 100000 --columns 10
    python bench/bench_wide.py --no-cli                 # synthesize() only

The table is `generated_table(rows, columns)` of bench/compare_reference/compare.py (reals with 5 %
nulls, integers, strings, booleans, timestamps driven by two latent factors; 10 columns are planned
as ~3 clusters and stitched). Two lines are printed:

- `synthesize()`: the engine call on the in-memory frame (salt "bench-salt"), in a child process;
- `syndiffix CLI`: the `syndiffix` command on the same table written to CSV (CSV in -> CSV out, column
  kinds given with --columns), the literal end-to-end figure (CSV parsing and writing included).

Each run is its own child process and its peak RSS is that child's own (os.wait4). CPU seconds are
user + system time of the child and its worker processes (for synthesize(): around the call), the fairer
figure on a shared machine. The per-stage breakdown of synthesize() comes from the engine's DEBUG
stage log (`syndiffix_core.synthesizer`); with worker processes, each cluster's line is the worker's
own wall and CPU seconds ("in a worker"), followed by a line with their sum, the largest, and the
calling process's own CPU seconds (what bounds the wall time on a quiet machine). `hash` is a digest of the output frame (same salt -> same
hash: use it to check that a speed change left the output identical). After the timed call the child
prints the correlation error of the output as bench/fidelity measures it (mean |Spearman(source) -
Spearman(synthetic)| over the pairs of numbers and timestamps) and its worst pair, so a plan change shows what it buys. Targets: 1M x 10 synthesize()
in <= 20 s wall on 2 cores with peak RSS <= 0.7 GiB; the CLI <= 1.3x synthesize().
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KIND_CODES = {"real": "r", "integer": "i", "string": "s", "boolean": "b", "timestamp": "t"}


def _table(rows: int, columns: int):
    sys.path.insert(0, str(HERE / "compare_reference"))
    from compare import generated_table

    return generated_table(rows, columns)


def frame_digest(frame) -> str:
    import hashlib

    import pandas as pd

    hashes = pd.util.hash_pandas_object(frame, index=False).to_numpy()
    names = "\0".join(map(str, frame.columns)).encode()
    return hashlib.blake2b(hashes.tobytes() + names, digest_size=8).hexdigest()


class _StageRecords(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.stages: list[tuple[str, float, float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "stage"):
            self.stages.append((record.stage, record.wall_s, record.cpu_s))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mib() -> float:
    """The largest resident set so far of this process and of its reaped workers."""
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return max(own.ru_maxrss, workers.ru_maxrss) / 1024


def correlation_error(source, synthetic, schema: dict[str, str]) -> tuple[float, str, float]:
    """The fidelity harness's correlation error of the output (bench/fidelity/metrics.py: mean
    |Spearman(source) - Spearman(synthetic)| over the pairs of numbers and timestamps), and the pair
    that misses most."""
    import numpy as np

    sys.path.insert(0, str(HERE / "fidelity"))
    from metrics import correlation_pairs, pair_correlation_errors

    pairs = correlation_pairs(source, synthetic, schema)
    misses = pair_correlation_errors(list(pairs.values()))
    worst = int(np.nanargmax(misses))
    return float(np.nanmean(misses)), list(pairs)[worst], float(misses[worst])


def child_synthesize(rows: int, columns: int, salt: str, workers: int | None) -> None:
    """Synthesize the table in this process; print one JSON line (peak RSS taken before the quality
    figure is computed)."""
    from syndiffix_core import synthesize

    table, schema = _table(rows, columns)
    records = _StageRecords()
    log = logging.getLogger("syndiffix_core.synthesizer")
    log.addHandler(records)
    log.setLevel(logging.DEBUG)
    wall, cpu = time.perf_counter(), time.process_time() + _children_cpu()
    result = synthesize(table, salt=salt, workers=workers)
    wall, cpu = time.perf_counter() - wall, time.process_time() + _children_cpu() - cpu
    peak = _peak_rss_mib()
    error, pair, pair_error = correlation_error(table, result, schema)
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": cpu,
                "peak_rss_mib": peak,
                "output_rows": len(result),
                "hash": frame_digest(result),
                "stages": records.stages,
                "correlation_error": error,
                "worst_pair": [pair, pair_error],
            }
        )
    )


def _run_child(command: list[str]) -> tuple[float, float, float, str]:
    """Run a command; (wall s, child CPU s, child peak RSS MiB, stdout)."""
    start = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as out, tempfile.TemporaryFile(mode="w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed ({process.returncode}):\n{err.read()}")
        return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, out.read()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--columns", type=int, default=10)
    parser.add_argument("--salt", default="bench-salt")
    parser.add_argument("--no-cli", action="store_true", help="skip the syndiffix command-line run")
    parser.add_argument("--workers", type=int, help="worker processes (default: the CPUs available)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_synthesize(args.rows, args.columns, args.salt, args.workers)
        return

    print(f"table: generated_table({args.rows}, {args.columns}), salt {args.salt!r}", flush=True)
    header = f"{'run':<15} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13} {'out rows':>9}  hash"
    command = [sys.executable, __file__, "--child", "--rows", str(args.rows), "--columns", str(args.columns)]
    workers = [] if args.workers is None else ["--workers", str(args.workers)]
    command += workers
    _, _, _, stdout = _run_child([*command, "--salt", args.salt])
    result = json.loads(stdout.strip().splitlines()[-1])
    print(header)
    print(
        f"{'synthesize()':<15} {result['wall_s']:>8.2f} {result['cpu_s']:>8.2f} {result['peak_rss_mib']:>13.0f} "
        f"{result['output_rows']:>9}  {result['hash']}",
        flush=True,
    )
    for stage, wall, cpu in result["stages"]:
        print(f"  {stage:<56} {wall:>8.2f} s wall {cpu:>8.2f} CPU-s")
    in_workers = [cpu for stage, _, cpu in result["stages"] if stage.endswith("in a worker")]
    if in_workers:
        own = sum(cpu for stage, _, cpu in result["stages"] if not stage.endswith("in a worker"))
        print(
            f"  clusters in workers: {sum(in_workers):.2f} CPU-s in all, the largest {max(in_workers):.2f}; "
            f"calling process {own:.2f} CPU-s"
        )
    pair, pair_error = result["worst_pair"]
    print(
        f"  correlation error (mean |Spearman source - synthetic| over number and timestamp pairs): "
        f"{result['correlation_error']:.4f}; worst pair {pair} {pair_error:.3f}"
    )
    if args.no_cli:
        return

    table, schema = _table(args.rows, args.columns)
    with tempfile.TemporaryDirectory() as workdir:
        source, target = Path(workdir) / "table.csv", Path(workdir) / "synthetic.csv"
        table.to_csv(source, index=False)
        del table
        specs = [f"{name}:{KIND_CODES[kind]}" for name, kind in schema.items()]
        cli = [sys.executable, "-m", "syndiffix_core.cli", str(source), "--columns", *specs, *workers]
        wall, cpu, rss, _ = _run_child([*cli, "--salt", args.salt, "-o", str(target)])
        with target.open() as handle:
            output_rows = sum(1 for _ in handle) - 1
        print(
            f"{'syndiffix CLI':<15} {wall:>8.2f} {cpu:>8.2f} {rss:>13.0f} {output_rows:>9}  (CSV in -> CSV out)"
        )


if __name__ == "__main__":
    main()
