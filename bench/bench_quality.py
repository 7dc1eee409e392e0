"""Memory and CPU of a run's quality figures (`quality_metrics`) on two tables of bench_scale.py.

    python bench/bench_quality.py --rows 1000000

The "source" is bench_scale's table of --rows rows (without its AID column, dates as Python dates as the
warehouse read gives them); the "synthetic" table is the next --rows rows of the same generator, with
every 7th amount null. Prints the peak RSS above what the two frames hold, wall and CPU seconds, and a
hash of the metrics (JSON): a memory or speed change to the quality figures must leave it unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time

import numpy as np
from bench_scale import customer_probabilities, generate_chunk

from syndiffix_core.memory import return_freed_memory
from syndiffix_ops.output_quality import quality_metrics


def tables(rows: int):
    customers = customer_probabilities(rows)
    source, synthetic = (generate_chunk(rows, start, customers) for start in (0, rows))
    for frame in (source, synthetic):
        frame["shipped_on"] = frame["shipped_on"].dt.date.astype(object)
    synthetic.loc[::7, "amount"] = np.nan
    return source.drop(columns=["customer_id"]), synthetic.drop(columns=["customer_id"])


def current_rss_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


class PeakRss:
    """The highest RSS seen while the block runs, sampled every 20 ms by a thread (ru_maxrss would hold
    the generator's own peak)."""

    def __enter__(self) -> PeakRss:
        self.peak, self._running = current_rss_kib(), True
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while self._running:
            self.peak = max(self.peak, current_rss_kib())
            time.sleep(0.02)

    def __exit__(self, *exc_info: object) -> None:
        self._running = False
        self._thread.join()
        self.peak = max(self.peak, current_rss_kib())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    args = parser.parse_args()
    source, synthetic = tables(args.rows)
    return_freed_memory()  # the generator's freed pages: the baseline is what the frames hold
    before = current_rss_kib()
    wall, cpu = time.perf_counter(), time.process_time()
    with PeakRss() as watch:
        metrics = quality_metrics(source, synthetic)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    digest = hashlib.sha256(json.dumps(metrics, sort_keys=True, default=str).encode()).hexdigest()[:16]
    print(
        f"{args.rows:,} rows x {source.shape[1]} columns: quality figures {wall:.1f} s wall, {cpu:.1f} CPU-s; "
        f"RSS with the frames {before / 1024:.0f} MiB, peak {watch.peak / 1024:.0f} MiB "
        f"(+{(watch.peak - before) / 1024:.0f} MiB); metrics hash {digest}"
    )


if __name__ == "__main__":
    main()
