"""Runs INSIDE the pac-synth virtualenv (never in the package's environment): fit + sample one CSV.

usage: python pacsynth_side.py INPUT.csv OUTPUT.csv EPSILON REPORTING_LENGTH  -> prints JSON timings
"""

import csv
import json
import sys
import time

import pacsynth

source, target, epsilon, reporting_length = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
with open(source, newline="") as f:
    raw = list(csv.reader(f))
start = time.perf_counter()
dataset = pacsynth.Dataset(raw)
params = (
    pacsynth.DpAggregateSeededParametersBuilder().epsilon(epsilon).reporting_length(reporting_length).build()
)
synthesizer = pacsynth.DpAggregateSeededSynthesizer(params)
synthesizer.fit(dataset)
fitted = time.perf_counter()
synthetic = synthesizer.sample()
done = time.perf_counter()
with open(target, "w", newline="") as f:
    csv.writer(f).writerows(synthetic)
print(
    json.dumps({"fit_seconds": fitted - start, "sample_seconds": done - fitted, "rows": len(synthetic) - 1})
)
