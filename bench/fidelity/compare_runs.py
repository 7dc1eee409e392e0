"""Ours before and after an engine change, from two JSON files the harness wrote (`--json`), harness
tables or a sweep: per table the figures that moved beyond the salts' noise, and per figure how many
tables got better or worse and the geometric mean of after / before over all tables.

usage: python bench/fidelity/compare_runs.py BEFORE.json AFTER.json [--pairs N]

Run the harness once from a copy of the checkout before the change (it synthesizes with the core/ of
the checkout it is started from) and once after, with the same salts; `--ours-only --no-sdmetrics`
is enough for everything but SDMetrics. `--pairs N` also lists per table the N column pairs whose
Spearman correlation moved most towards or away from the source's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from metrics import pair_correlation_errors
from summary import spread

# (key, label, lower is better)
FIGURES = [
    ("tvd_1dim", "1-dim TVD", True),
    ("tvd_2dim", "2-dim TVD", True),
    ("corr_error", "corr error", True),
    ("sdm_overall", "SDMetrics", False),
    ("ml", "ML", False),
    ("cpu_seconds", "CPU-s", True),
]


def moved(
    before: list[dict], after: list[dict], key: str, lower_is_better: bool
) -> tuple[str, float, float] | None:
    """("better" | "worse" | "same", mean before, mean after) of one figure, "same" within the noise
    (the two salt-to-salt standard deviations added in quadrature, as the acceptance's ties); None where
    either run lacks it."""
    old, new = spread(before, key), spread(after, key)
    if old is None or new is None:
        return None
    change = new[0] - old[0]
    verdict = "same"
    if abs(change) > float(np.hypot(old[1], new[1])):
        verdict = "better" if (change < 0) == lower_is_better else "worse"
    return verdict, old[0], new[0]


def _pair_moves(before: list[dict], after: list[dict], count: int) -> list[str]:
    """The pairs whose mean |Spearman(synthetic) - Spearman(source)| changed most, in that order."""

    def errors(runs: list[dict]) -> dict[str, float]:
        names = list(runs[0].get("corr_pairs", {}))
        # per pair and salt, as the harness counts them into the correlation error
        measured = np.array(
            [pair_correlation_errors([run["corr_pairs"][pair] for pair in names]) for run in runs]
        )
        return {
            pair: float(np.nanmean(values))
            for pair, values in zip(names, measured.T, strict=True)
            if not np.isnan(values).all()
        }

    old, new = errors(before), errors(after)
    # pairs that moved equally (most often not at all) in a fixed order, not the set's
    shared = sorted(set(old) & set(new), key=lambda pair: (-abs(new[pair] - old[pair]), pair))[:count]
    return [f"{pair} {old[pair]:.3f} -> {new[pair]:.3f}" for pair in shared]


def compare(before: dict, after: dict, pairs: int) -> None:
    tables = {table["table"]: table for table in before["tables"] if "runs" in table}
    counts = {key: {"better": 0, "worse": 0, "same": 0} for key, _, _ in FIGURES}
    ratios: dict[str, list[float]] = {key: [] for key, _, _ in FIGURES}
    print(f"before: {before.get('commit', '?')}   after: {after.get('commit', '?')}")
    for table in after["tables"]:
        old = tables.get(table["table"])
        if old is None or "runs" not in table:
            continue
        changes = []
        for key, label, lower_is_better in FIGURES:
            result = moved(old["runs"]["ours"], table["runs"]["ours"], key, lower_is_better)
            if result is None:
                continue
            verdict, old_mean, new_mean = result
            counts[key][verdict] += 1
            if old_mean > 0 and new_mean > 0:
                ratios[key].append(new_mean / old_mean)
            if verdict != "same" and key != "cpu_seconds":
                changes.append(f"{label} {verdict} ({old_mean:.4f} -> {new_mean:.4f})")
        print(f"{table['table']:36s} {'; '.join(changes) or 'no figure moved beyond noise'}")
        if pairs:
            for line in _pair_moves(old["runs"]["ours"], table["runs"]["ours"], pairs):
                print(f"{'':38s}{line}")
    print()
    for key, label, _ in FIGURES:
        if ratios[key]:
            geometric = float(np.exp(np.mean(np.log(ratios[key]))))
            tally = counts[key]
            print(
                f"{label:12s} better on {tally['better']:2d}, worse on {tally['worse']:2d}, same on "
                f"{tally['same']:2d}; after / before, geometric mean over {len(ratios[key])} tables: {geometric:.3f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--pairs", type=int, default=0, help="list the N pairs per table that moved most")
    args = parser.parse_args()
    compare(json.loads(args.before.read_text()), json.loads(args.after.read_text()), args.pairs)


if __name__ == "__main__":
    main()
