"""Side-by-side: our DP-marginals engine vs pac-synth 0.0.8 on the same data (run via run.sh).

Data: ROWS x 8 correlated categorical columns (one shared latent factor, 6-10 values per column), as
strings. Both engines get epsilon 4 and reporting length 3 with otherwise default parameters, and both
synthetic tables are scored by the same code against the same true k-tuple counts: the mean absolute
count error over every 2- and 3-combination that either table holds (a missing one counts 0), and the
showcase's own figure (over combinations both hold). pac-synth's partial records (empty cells) simply
do not hold the combinations of their empty cells.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from syndiffix_core.dp import DpParams, synthesize_dp
from syndiffix_core.dp.evaluation import compare_counts

HERE = Path(__file__).resolve().parent


def correlated_frame(rows: int, seed: int = 2026) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=rows)
    data = {}
    for j in range(8):
        values = 6 + (j % 5)
        x = 0.8 * latent + 0.6 * rng.normal(size=rows)
        codes = np.clip(np.floor((x + 2.5) / 5 * values), 0, values - 1).astype(int)
        data[f"col{j}"] = np.char.add(f"v{j}_", codes.astype(str))
    return pd.DataFrame(data)


def codes_of(frame: pd.DataFrame, vocabulary: list[dict[str, int]]) -> np.ndarray:
    out = np.full(frame.shape, -1, dtype=np.int32)
    for j, column in enumerate(frame.columns):
        mapped = frame[column].map(vocabulary[j])
        out[:, j] = mapped.fillna(-1).astype(int).to_numpy()
    return out


def errors(sensitive: np.ndarray, synthetic: np.ndarray, radices: np.ndarray) -> dict:
    by_length = compare_counts(sensitive, synthetic, radices, 3)
    return {
        f"{k}-way": {
            "mean_abs_count_error_all": round(v["mean_abs_count_error_all"], 2),
            "mean_abs_count_error_common": round(v["mean_abs_count_error_common"], 2),
            "fabricated_share": round(v["fabricated_share"], 4),
            "suppressed_share": round(v["suppressed_share"], 4),
        }
        for k, v in by_length.items()
        if k in (2, 3)
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("rows", nargs="?", type=int, default=100_000)
    parser.add_argument("--pacsynth-python", required=True)
    parser.add_argument("--epsilon", type=float, default=4.0)
    parser.add_argument("--reporting-length", type=int, default=3)
    args = parser.parse_args()

    frame = correlated_frame(args.rows)
    vocabulary = [{v: i for i, v in enumerate(sorted(frame[c].unique()))} for c in frame.columns]
    radices = np.array([len(v) for v in vocabulary])
    sensitive = codes_of(frame, vocabulary)
    params = DpParams(epsilon=args.epsilon, reporting_length=args.reporting_length)

    start, start_cpu = time.perf_counter(), time.process_time()
    ours = synthesize_dp(frame, salt=b"bench-salt", table_identity="bench.correlated", params=params)
    our_seconds, our_cpu = time.perf_counter() - start, time.process_time() - start_cpu

    with tempfile.TemporaryDirectory() as tmp:
        source, target = Path(tmp) / "in.csv", Path(tmp) / "out.csv"
        frame.to_csv(source, index=False)
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = subprocess.run(
            [
                args.pacsynth_python,
                str(HERE / "pacsynth_side.py"),
                str(source),
                str(target),
                str(args.epsilon),
                str(args.reporting_length),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        # CPU time of the whole child (CSV parsing included): an upper bound of fit + sample CPU
        their_cpu = (children_after.ru_utime + children_after.ru_stime) - (
            children_before.ru_utime + children_before.ru_stime
        )
        theirs_timing = json.loads(run.stdout.strip().splitlines()[-1])
        theirs = pd.read_csv(target, dtype=str, keep_default_na=False).replace("", None)
    theirs = theirs[list(frame.columns)]
    their_seconds = theirs_timing["fit_seconds"] + theirs_timing["sample_seconds"]

    report = {
        "data": f"{args.rows} rows x 8 correlated categorical columns, epsilon {args.epsilon}, "
        f"reporting length {args.reporting_length}",
        "ours": {
            "fit_plus_sample_seconds": round(our_seconds, 2),
            "cpu_seconds": round(our_cpu, 2),
            "rows": len(ours.frame),
            **errors(sensitive, codes_of(ours.frame, vocabulary), radices),
        },
        "pac-synth 0.0.8": {
            "fit_seconds": round(theirs_timing["fit_seconds"], 2),
            "sample_seconds": round(theirs_timing["sample_seconds"], 2),
            "fit_plus_sample_seconds": round(their_seconds, 2),
            "cpu_seconds_whole_process": round(their_cpu, 2),
            "rows": theirs_timing["rows"],
            "partial_rows": int(theirs.isna().any(axis=1).sum()),
            **errors(sensitive, codes_of(theirs, vocabulary), radices),
        },
        "speedup_wall": round(their_seconds / our_seconds, 1),
        "speedup_cpu_upper_bound": round(their_cpu / our_cpu, 1),
        "machine_load_average_1min": round(os.getloadavg()[0], 2),
    }
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
