"""Side-by-side: our SynDiffix engine vs syndiffix 1.0.8 on the same generated tables (run via run.sh).

Tables: ROWS x COLUMNS of mixed kinds (reals with 5 % nulls, integers, strings, booleans, timestamps)
driven by two latent factors, so pairs range from strongly to weakly dependent. Both engines get the
same table and salt, default parameters (wide tables are clustered by both), and both outputs are scored
by the product's own quality report (`syndiffix_ops.report.compute_quality`): mean 1-dim and 2-dim
total variation distance on binned columns, mean |pairwise correlation difference|, row ratio. The
baseline is a resample of the original (same size, with replacement): the metrics' own noise floor.
Times are the synthesis call only (reading/writing CSV excluded), one process at a time, as wall
and CPU seconds (CPU time is the fairer figure on a machine shared with other work).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from syndiffix_core import synthesize
from syndiffix_ops.report import compute_quality

HERE = Path(__file__).resolve().parent
KINDS = ["real", "integer", "string", "real", "boolean", "timestamp", "integer", "string", "real", "integer"]
METRICS = ["tvd_1dim_mean", "tvd_2dim_mean", "corr_abs_diff_mean", "row_ratio"]


def generated_table(rows: int, columns: int, seed: int = 2026) -> tuple[pd.DataFrame, dict[str, str]]:
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(2, rows))
    data, schema = {}, {}
    for j in range(columns):
        kind = KINDS[j % len(KINDS)]
        weights = rng.uniform(-1, 1, 2)
        signal = weights @ latent + rng.uniform(0.2, 1.0) * rng.normal(size=rows)
        name = f"{kind[:3]}{j}"
        if kind == "real":
            values = np.round(10 * signal + 50, 2)
            values[rng.random(rows) < 0.05] = np.nan
        elif kind == "integer":
            values = np.clip(np.round(40 + 12 * signal), 18, 90).astype(np.int64)
        elif kind == "string":
            cuts = np.quantile(signal, [0.1, 0.3, 0.5, 0.7, 0.9])
            values = np.array([f"cat{j}_{k}" for k in "abcdef"], dtype=object)[np.searchsorted(cuts, signal)]
        elif kind == "boolean":
            values = signal > 0.3
        else:
            seconds = np.round((signal * 30 + 100) * 86400)
            values = pd.Timestamp("2020-01-01") + pd.to_timedelta(seconds, unit="s")
        data[name], schema[name] = values, kind
    return pd.DataFrame(data), schema


def read_back(path: Path, schema: dict[str, str]) -> pd.DataFrame:
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=str)
    for name, kind in schema.items():
        if kind in ("integer", "real"):
            frame[name] = pd.to_numeric(frame[name])
        elif kind == "boolean":
            frame[name] = frame[name].map({"True": True, "False": False})
        elif kind == "timestamp":
            frame[name] = pd.to_datetime(frame[name])
    return frame


def quality(original: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, float]:
    metrics = compute_quality(original, synthetic)
    return {name: metrics[name] for name in METRICS}


def run_reference(
    python: str, table: pd.DataFrame, schema: dict, salt: str, workdir: Path, cache: Path | None
) -> tuple[dict, pd.DataFrame]:
    """Synthesize with 1.0.8 in its own interpreter; with a cache directory, a run of the same table and
    salt is read back (with the time measured when it ran) instead of repeated."""
    rows, columns = table.shape
    stored = cache / f"{rows}x{columns}-{salt}" if cache is not None else None
    if stored is not None and (stored / "seconds.json").exists():
        return json.loads((stored / "seconds.json").read_text()), read_back(stored / "out.csv", schema)
    source, schema_path = workdir / "in.csv", workdir / "schema.json"
    target = (stored or workdir) / "out.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    if not source.exists():
        table.to_csv(source, index=False)
        schema_path.write_text(json.dumps(schema))
    done = subprocess.run(
        [python, str(HERE / "reference_side.py"), str(source), str(schema_path), str(target), salt],
        capture_output=True,
        text=True,
        check=True,
    )
    timing = json.loads(done.stdout.strip().splitlines()[-1])
    if stored is not None:
        (stored / "seconds.json").write_text(json.dumps(timing))
    return timing, read_back(target, schema)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference-python", required=True, help="python of the syndiffix 1.0.8 virtualenv")
    parser.add_argument("--tables", default="10000x10,10000x20,100000x10", help="ROWSxCOLUMNS,...")
    parser.add_argument("--salts", type=int, default=3, help="runs per table (metrics are averaged)")
    parser.add_argument(
        "--reference-cache", type=Path, help="keep 1.0.8 outputs and times here and reuse them on re-runs"
    )
    args = parser.parse_args()

    for spec in args.tables.split(","):
        rows, columns = map(int, spec.lower().split("x"))
        table, schema = generated_table(rows, columns)
        ours_time, reference_time, ours_cpu, reference_cpu = [], [], [], []
        scores = {"ours": [], "syndiffix 1.0.8": [], "resample baseline": []}
        with tempfile.TemporaryDirectory() as directory:
            for run in range(args.salts):
                salt = f"compare-salt-{run}"
                start, start_cpu = time.perf_counter(), time.process_time()
                ours = synthesize(table, salt=salt)
                ours_time.append(time.perf_counter() - start)
                ours_cpu.append(time.process_time() - start_cpu)
                scores["ours"].append(quality(table, ours))
                timing, reference = run_reference(
                    args.reference_python, table, schema, salt, Path(directory), args.reference_cache
                )
                reference_time.append(timing["seconds"])
                reference_cpu.append(timing.get("cpu_seconds"))
                scores["syndiffix 1.0.8"].append(quality(table, reference))
                resample = table.sample(n=rows, replace=True, random_state=run).reset_index(drop=True)
                scores["resample baseline"].append(quality(table, resample))
                print(
                    f"  {spec} salt {run}: ours {ours_time[-1]:.2f} s, 1.0.8 {timing['seconds']:.1f} s",
                    flush=True,
                )

        print(f"\n== {rows} rows x {columns} columns (mean over {args.salts} salts) ==")
        print(
            f"time: ours {np.mean(ours_time):.2f} s, syndiffix 1.0.8 {np.mean(reference_time):.1f} s, "
            f"ratio {np.mean(reference_time) / np.mean(ours_time):.0f}x (wall)"
        )
        if None not in reference_cpu:
            print(
                f"cpu:  ours {np.mean(ours_cpu):.2f} s, syndiffix 1.0.8 {np.mean(reference_cpu):.1f} s, "
                f"ratio {np.mean(reference_cpu) / np.mean(ours_cpu):.0f}x (less sensitive to a busy machine)"
            )
        print(f"{'':20s}" + "".join(f"{m:>20s}" for m in METRICS))
        for name, runs in scores.items():
            means = [np.mean([r[m] for r in runs]) for m in METRICS]
            spreads = [np.std([r[m] for r in runs]) for m in METRICS]
            cells = "".join(
                f"{mean:>12.4f} ±{spread:6.4f}" for mean, spread in zip(means, spreads, strict=True)
            )
            print(f"{name:20s}{cells}")
        print(flush=True)


if __name__ == "__main__":
    main()
