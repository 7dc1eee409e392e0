"""Runs in the PROJECT's environment (PYTHONPATH=core:.): our SynDiffix on one table, one run per salt.

usage: python ours_side.py TABLE_DIR OUT_DIR SALT...   (TABLE_DIR holds in.csv and table.json)
prints one JSON line per salt: {"salt": ..., "seconds": ..., "cpu_seconds": ..., "rows": ..., "clusters": ...}
("clusters": the cluster plan as the engine logs it, or null for one cluster)
"""

import json
import logging
import sys
import time
from pathlib import Path

from interchange import read_table, write_table
from process_cpu import process_tree_cpu_seconds

from syndiffix_core import synthesize

table_dir, out_dir, salts = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
meta = json.loads((table_dir / "table.json").read_text())
frame = read_table(table_dir / "in.csv", meta["kinds"])
aid_columns = [meta["aid"]] if meta["aid"] else None
out_dir.mkdir(parents=True, exist_ok=True)


class PlanRecorder(logging.Handler):
    """Keeps the last cluster plan the engine logs."""

    plan = None

    def emit(self, record: logging.LogRecord) -> None:
        PlanRecorder.plan = record.getMessage()


plan_log = logging.getLogger("syndiffix_core.clustering.plan")
plan_log.setLevel(logging.INFO)
plan_log.addHandler(PlanRecorder())
for salt in salts:
    PlanRecorder.plan = None
    start, start_cpu = time.perf_counter(), process_tree_cpu_seconds()
    synthetic = synthesize(frame, aid_columns, salt=salt)
    seconds, cpu_seconds = time.perf_counter() - start, process_tree_cpu_seconds() - start_cpu
    write_table(synthetic, out_dir / f"{salt}.csv")
    timing = {"salt": salt, "seconds": seconds, "cpu_seconds": cpu_seconds, "rows": len(synthetic)}
    timing["clusters"] = PlanRecorder.plan
    print(json.dumps(timing), flush=True)
