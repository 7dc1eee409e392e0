"""Runs in the harness venv: syndiffix 1.0.8 on one table and salt (never in the project's environment).

usage: python reference_side.py TABLE_DIR OUTPUT.csv SALT   -> prints {"seconds": ..., "cpu_seconds": ..., "rows": ...}
"""

import json
import sys
import time
from pathlib import Path

from interchange import read_table, write_table
from syndiffix import Synthesizer
from syndiffix.common import AnonymizationParams

table_dir, target, salt = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
meta = json.loads((table_dir / "table.json").read_text())
frame = read_table(table_dir / "in.csv", meta["kinds"])
pids = frame[[meta["aid"]]] if meta["aid"] else None
data = frame.drop(columns=[meta["aid"]]) if meta["aid"] else frame
# 1.0.8 asserts plain integers: integer columns with nulls go in as reals (read back rounded to integers)
data = data.astype({name: "float64" for name in data.columns if str(data[name].dtype) == "Int64"})
start, start_cpu = time.perf_counter(), time.process_time()
synthetic = Synthesizer(
    data, pids=pids, anonymization_params=AnonymizationParams(salt=salt.encode())
).sample()
seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
write_table(synthetic, target)
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "rows": len(synthetic)}))
