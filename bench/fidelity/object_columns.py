"""Our SynDiffix on harness tables whose dates and decimals arrive as Python objects, as a warehouse
reads DATE and DECIMAL columns (datetime.date, decimal.Decimal), instead of as timestamps and floats.

    bash bench/fidelity/run.sh --ours-only --no-sdmetrics     # prepares the tables (once)
    PYTHONPATH=core:. python bench/fidelity/object_columns.py [--salts 5]

Per table, the mean over the salts of the harness's 1-dim TVD, 2-dim TVD and correlation error (its
metrics.py, source bins) and a digest of each output. Runs in the project's environment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).parent))
from interchange import read_table
from metrics import Binning, correlation_error, correlation_pairs, tvd_scores

from syndiffix_core import synthesize

# Per table: the columns made into objects, as dates ("date") or decimals with that many places.
OBJECT_COLUMNS: dict[str, dict[str, str | int]] = {
    "people": {"debut": "date"},
    "loans": {"interest_rate": 2, "annual_income": 0, "installment": 2, "debt_to_income": 2},
    "diamonds": {"carat": 2, "depth": 1, "x": 2, "y": 2, "z": 2},
    "nlswork": {"ln_wage": 3, "ttl_exp": 3, "tenure": 3},
}


def as_objects(column: pd.Series, how: str | int) -> pd.Series:
    if how == "date":
        return pd.Series([None if pd.isna(v) else v.date() for v in column], dtype=object)
    step = Decimal(1).scaleb(-int(how))
    return pd.Series(
        [None if pd.isna(v) else Decimal(repr(float(v))).quantize(step) for v in column], dtype=object
    )


def digest(frame: pd.DataFrame) -> str:
    return hashlib.sha256(
        pd.util.hash_pandas_object(frame.astype(str), index=False).to_numpy().tobytes()
    ).hexdigest()[:12]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--salts", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache/syndiffix-ops/fidelity")
    args = parser.parse_args()
    for name, columns in OBJECT_COLUMNS.items():
        table_dir = next((args.cache / "tables").glob(f"{name}-*"))
        meta = json.loads((table_dir / "table.json").read_text())
        frame = read_table(table_dir / "in.csv", meta["kinds"])
        for column, how in columns.items():
            frame[column] = as_objects(frame[column], how)
        kinds = {column: kind for column, kind in meta["kinds"].items() if column != meta["aid"]}
        binning = Binning(frame, kinds)
        scores, digests = [], []
        for salt in range(args.salts):
            synthetic = synthesize(frame, [meta["aid"]] if meta["aid"] else None, salt=f"fidelity-{salt}")
            tvd = tvd_scores(frame, synthetic, binning)
            scores.append(
                (
                    tvd["tvd_1dim"],
                    tvd["tvd_2dim"],
                    correlation_error(correlation_pairs(frame, synthetic, kinds)),
                )
            )
            digests.append(digest(synthetic))
        mean, sd = np.mean(scores, axis=0), np.std(scores, axis=0)
        print(
            f"{name:10s} 1-dim TVD {mean[0]:.4f}  2-dim TVD {mean[1]:.4f} +- {sd[1]:.4f}  "
            f"correlation error {mean[2]:.4f} +- {sd[2]:.4f}  outputs {' '.join(digests)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
