"""Runs in the PROJECT's environment (PYTHONPATH=core:bench/fidelity): our SynDiffix on every table of a scan.

usage: python scan_side.py TABLES.txt RESULTS.jsonl SALT   (TABLES.txt: one Parquet path per line)
writes one JSON line per table: its size and CPU seconds, and the problems found per kind (columns lost
or added, a type not kept, numbers or instants beyond the source's extremes, nulls where the source has
none), or the error it raised.
"""

import json
import signal
import sys
from pathlib import Path

import pandas as pd
from process_cpu import process_tree_cpu_seconds

from syndiffix_core import synthesize
from syndiffix_core.errors import InvalidInputError, UnsupportedColumnError

TIMEOUT_SECONDS = 600


class TableTimeout(Exception):
    pass


def _interrupt(*_) -> None:
    raise TableTimeout(f"no output after {TIMEOUT_SECONDS} s")


def _ordered(series: pd.Series) -> bool:
    return (
        pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
    ) or pd.api.types.is_datetime64_any_dtype(series)


def _beyond_extremes(before: pd.Series, after: pd.Series) -> bool:
    return bool(len(before) and len(after)) and (after.min() < before.min() or after.max() > before.max())


def problems_of(source: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    if list(synthetic.columns) != list(source.columns):
        found["columns"] = [f"{list(source.columns)} -> {list(synthetic.columns)}"]
        return found
    for name in source.columns:
        before, after = source[name], synthetic[name]
        if before.dtype != after.dtype:
            found.setdefault("types", []).append(f"{name}: {before.dtype} -> {after.dtype}")
            continue
        if _ordered(before) and _beyond_extremes(before.dropna(), after.dropna()):
            found.setdefault("out of range", []).append(name)
        if before.notna().all() and after.isna().any():
            found.setdefault("new nulls", []).append(name)
    return found


def main(arguments: list[str]) -> None:
    listing, results_path, salt = Path(arguments[0]), Path(arguments[1]), arguments[2]
    signal.signal(signal.SIGALRM, _interrupt)
    with results_path.open("w") as results:
        for path in listing.read_text().split("\n"):
            source = pd.read_parquet(path)
            result = {"table": Path(path).name.removesuffix(".parquet"), "rows": len(source)}
            result["columns"] = source.shape[1]
            start = process_tree_cpu_seconds()
            signal.alarm(TIMEOUT_SECONDS)
            try:
                synthetic = synthesize(source, salt=salt)
            except (UnsupportedColumnError, InvalidInputError) as refusal:
                result["refused"] = str(refusal).splitlines()[0][:300]
            except Exception as error:  # what the scan is for: record it, go on with the next table
                result["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            else:
                result["cpu_seconds"] = round(process_tree_cpu_seconds() - start, 3)
                result["problems"] = problems_of(source, synthetic)
            finally:
                signal.alarm(0)
            results.write(json.dumps(result) + "\n")
            results.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
