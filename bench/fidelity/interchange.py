"""CSV files between the harness (its venv) and the synthesizers (ours in the project's environment,
syndiffix 1.0.8 in the harness venv): one reader, so every side sees the same typed table."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def read_table(path: Path, kinds: dict[str, str]) -> pd.DataFrame:
    """Columns in `kinds` typed by their kind (integer columns with nulls as nullable Int64)."""
    # Lines end in "\n" (write_table): a "\r" inside a quoted text value (a tweet) is text.
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""], dtype=str, lineterminator="\n")
    out = {}
    for name, kind in kinds.items():
        if name not in frame.columns:
            continue
        column = frame[name]
        if kind == "integer":
            numbers = pd.to_numeric(column).round()
            out[name] = numbers.astype("Int64") if numbers.isna().any() else numbers.astype("int64")
        elif kind == "real":
            out[name] = pd.to_numeric(column).astype("float64")
        elif kind == "boolean":
            out[name] = column.map({"True": True, "False": False})
        elif kind == "timestamp":
            out[name] = pd.to_datetime(column)
        else:
            out[name] = column.astype(object).where(column.notna(), None)
    return pd.DataFrame(out)


def write_table(frame: pd.DataFrame, path: Path) -> None:
    """Atomically (a run killed half way leaves no file that looks complete)."""
    partial = path.with_name(path.name + ".partial")
    frame.to_csv(partial, index=False, lineterminator="\n")
    partial.replace(path)
