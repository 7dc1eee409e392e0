"""Runs INSIDE the syndiffix 1.0.8 virtualenv (never in the package's environment): synthesize one CSV.

usage: python reference_side.py INPUT.csv SCHEMA.json OUTPUT.csv SALT  -> prints JSON {"seconds": ..., "cpu_seconds": ...}
"""

import json
import sys
import time

import pandas as pd
from syndiffix import Synthesizer
from syndiffix.common import AnonymizationParams

source, schema_path, target, salt = sys.argv[1:5]
with open(schema_path) as f:
    schema = json.load(f)
frame = pd.read_csv(source, keep_default_na=False, na_values=[""], dtype=str)
for name, kind in schema.items():
    if kind == "integer":
        frame[name] = frame[name].astype("int64")
    elif kind == "real":
        frame[name] = frame[name].astype("float64")
    elif kind == "boolean":
        frame[name] = frame[name] == "True"
    elif kind == "timestamp":
        frame[name] = pd.to_datetime(frame[name])
    else:
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None)

start, start_cpu = time.perf_counter(), time.process_time()
synthetic = Synthesizer(frame, anonymization_params=AnonymizationParams(salt=salt.encode())).sample()
seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
synthetic.to_csv(target, index=False)
print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds, "rows": len(synthetic)}))
