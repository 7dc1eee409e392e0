"""What the harness prints: per table the metrics (mean ± salt-to-salt standard deviation) of ours,
syndiffix 1.0.8 and the resample baseline, numeric tails, and at the end the acceptance checks of
issue 12 as a PASS/FAIL table."""

from __future__ import annotations

from collections import Counter

import numpy as np

REFERENCE = "syndiffix-1.0.8"
METHODS = ("ours", REFERENCE, "resample")
LOWER_IS_BETTER = [("tvd_1dim", "1-dim TVD"), ("tvd_2dim", "2-dim TVD"), ("corr_error", "correlation error")]
HIGHER_IS_BETTER = [
    ("sdm_overall", "SDMetrics overall"),
    ("sdm_column_shapes", "  column shapes"),
    ("sdm_pair_trends", "  pair trends"),
    ("ml", "ML efficacy"),
]
MEAN_TOLERANCE_SD = 0.05  # |mean(synthetic) - mean(source)| in source standard deviations
SHARE_TOLERANCE = 0.10  # relative, on the share of rows above the source's p90
MIN_JUDGED_SHARE = 0.05  # below this the source's p90 sits on a tie: the share says little
MIN_CPU_RATIO = 50.0
# Ours' ML efficacy may spread wider across salts than 1.0.8's only by what two samples of this many
# salts give by chance: a one-sided F-test of the two variances at this level.
SPREAD_TEST_LEVEL = 0.05


def _values(runs: list[dict], key: str) -> list[float]:
    """The figure `key` of every run that has one (None or NaN: none)."""
    return [run[key] for run in runs if run.get(key) is not None and not np.isnan(run[key])]


def spread(runs: list[dict], key: str) -> tuple[float, float] | None:
    values = _values(runs, key)
    if not values:
        return None
    return float(np.mean(values)), float(np.std(values))


def _cell(stat: tuple[float, float] | None, digits: int = 4) -> str:
    if stat is None:
        return f"{'-':>18s}"
    return f"{stat[0]:>10.{digits}f} ±{stat[1]:<6.{digits}f}"


def cpu_ratio(result: dict) -> float | None:
    ours, reference = (
        spread(result["runs"]["ours"], "cpu_seconds"),
        spread(result["runs"][REFERENCE], "cpu_seconds"),
    )
    if ours is None or reference is None or ours[0] <= 0:
        return None
    return reference[0] / ours[0]


def tail_means(runs: list[dict], column: str) -> dict[str, float] | None:
    """Mean over the salts whose output holds numbers in `column` (None if none does: a column that
    came out all null fails the mean check)."""
    found = [run["tails"][column] for run in runs if column in run.get("tails", {})]
    found = [tail for tail in found if not np.isnan(tail["mean"])]
    if not found:
        return None
    return {
        key: float(np.nanmean([tail[key] for tail in found])) for key in ("mean", "p90", "p99", "above_p90")
    }


def print_table(result: dict) -> None:
    source, runs = result["source"], result["runs"]
    target = result["target"]
    print(
        f"\n== {result['table']} ({result['origin']}): {source['rows']} rows x {len(source['columns'])} columns, "
        f"AID {result['aid'] or '-'}, hold-out {source['holdout_rows']} rows, "
        f"{len(result['salts'])} salt(s); 1.0.8 outputs: {len(runs[REFERENCE])} =="
    )
    print(f"{'':22s}" + "".join(f"{name:>18s}" for name in METHODS))
    ours_cpu, ref_cpu = spread(runs["ours"], "cpu_seconds"), spread(runs[REFERENCE], "cpu_seconds")
    ratio = cpu_ratio(result)
    ratio_text = f"   CPU ratio {ratio:.0f}x" if ratio is not None else ""
    print(f"{'CPU seconds':22s}{_cell(ours_cpu, 2)}{_cell(ref_cpu, 1)}{'-':>18s}{ratio_text}")
    for key, label in LOWER_IS_BETTER + HIGHER_IS_BETTER:
        if key == "ml":
            if target is None:
                continue
            label = f"ML {'AUC' if result['classification'] else 'R^2'} ({target})"
        cells = "".join(_cell(spread(runs[method], key)) for method in METHODS)
        extra = f"   trained on source: {source['ml_real']:.4f}" if key == "ml" else ""
        if any(spread(runs[method], key) for method in METHODS):
            print(f"{label:22s}{cells}{extra}")
    outside = [sum(sum(run["out_of_range"].values()) for run in runs[method]) for method in METHODS]
    print(f"{'out-of-range values':22s}" + "".join(f"{count:>18d}" for count in outside) + "   (all salts)")
    columns = sorted({column for run in runs["ours"] for column, n in run["out_of_range"].items() if n})
    if columns:
        print(f"{'':22s}ours out of range in: {', '.join(columns)}")
    for method in ("ours", REFERENCE):
        worst = _worst_columns(runs[method])
        if worst:
            print(f"{'':22s}largest 1-dim TVD, {method}: {worst}")
    plans = {run.get("clusters") for run in runs["ours"]} - {None}
    for plan in sorted(plans):
        print(f"{'':22s}ours clusters: {plan}")
    worst_pairs = _worst_correlations(runs)
    if worst_pairs:
        print(f"{'':22s}largest correlation errors, ours (1.0.8): {worst_pairs}")
    lowest_pairs = _lowest_sdmetrics_pairs(runs)
    if lowest_pairs:
        print(f"{'':22s}lowest SDMetrics pair scores, ours (1.0.8): {lowest_pairs}")
    print("numeric columns: mean | p90 | p99 | share above source p90, as source / ours / 1.0.8 / resample")
    for column, facts in source["tails"].items():
        means = [tail_means(runs[method], column) for method in METHODS]
        parts = []
        for key, fmt in (("mean", "{:.4g}"), ("p90", "{:.4g}"), ("p99", "{:.4g}"), ("above_p90", "{:.1%}")):
            values = [fmt.format(facts[key])] + [fmt.format(m[key]) if m else "-" for m in means]
            parts.append(" / ".join(values))
        print(f"  {column:16s} " + " | ".join(parts))


def _worst_columns(runs: list[dict], count: int = 3) -> str:
    """The columns with the largest 1-dim TVD, mean over salts."""
    if not runs:
        return ""
    columns = runs[0]["tvd_1dim_columns"]
    means = {name: float(np.mean([run["tvd_1dim_columns"][name] for run in runs])) for name in columns}
    worst = sorted(means.items(), key=lambda item: -item[1])[:count]
    return ", ".join(f"{name} {tvd:.3f}" for name, tvd in worst)


def _pair_errors(runs: list[dict]) -> dict[str, float]:
    """|Spearman(source) - Spearman(synthetic)| per pair, mean over salts (a constant synthetic column
    loses the source's whole correlation, as in the correlation error)."""
    if not runs or not runs[0].get("corr_pairs"):
        return {}
    errors = {}
    for pair in runs[0]["corr_pairs"]:
        values = [run["corr_pairs"][pair] for run in runs]
        diffs = [abs(src) if syn is None or syn != syn else abs(src - syn) for src, syn in values]
        errors[pair] = float(np.mean(diffs))
    return errors


def _worst_correlations(runs: dict[str, list[dict]], count: int = 4) -> str:
    ours, reference = _pair_errors(runs["ours"]), _pair_errors(runs[REFERENCE])
    worst = sorted(ours.items(), key=lambda item: -item[1])[:count]
    return ", ".join(
        f"{pair} {error:.3f}" + (f" ({reference[pair]:.3f})" if pair in reference else "")
        for pair, error in worst
    )


def _sdmetrics_pair_means(runs: list[dict]) -> dict[str, float]:
    """SDMetrics Column Pair Trends score per counted pair, mean over the salts that scored it."""
    scores: dict[str, list[float]] = {}
    for run in runs:
        for pair, value in (run.get("sdm_pairs") or {}).items():
            if value is not None:
                scores.setdefault(pair, []).append(value)
    return {pair: float(np.mean(values)) for pair, values in scores.items()}


def _lowest_sdmetrics_pairs(runs: dict[str, list[dict]], count: int = 3) -> str:
    ours, reference = _sdmetrics_pair_means(runs["ours"]), _sdmetrics_pair_means(runs[REFERENCE])
    lowest = sorted(ours.items(), key=lambda item: item[1])[:count]
    return ", ".join(
        f"{pair} {value:.3f}" + (f" ({reference[pair]:.3f})" if pair in reference else "")
        for pair, value in lowest
    )


def _not_worse(result: dict, key: str, lower_is_better: bool) -> str:
    """PASS, tie or FAIL (see `print_acceptance`); "worse" where ours is worse but a side has one salt
    only, so there is no salt-to-salt noise to judge the difference by."""
    ours_runs, reference_runs = result["runs"]["ours"], result["runs"][REFERENCE]
    ours, reference = spread(ours_runs, key), spread(reference_runs, key)
    if ours is None or reference is None:
        return "n/a"
    worse_by = (ours[0] - reference[0]) if lower_is_better else (reference[0] - ours[0])
    if worse_by <= 0:
        return "PASS"
    if min(len(_values(ours_runs, key)), len(_values(reference_runs, key))) < 2:
        return "worse"
    noise = float(np.hypot(ours[1], reference[1]))
    return "tie" if worse_by <= noise else "FAIL"


def spread_check(result: dict, key: str = "ml") -> str:
    """ML efficacy's spread over the salts, ours vs 1.0.8: PASS = ours no wider; tie = wider, but not
    beyond chance (F-test of the variances, SPREAD_TEST_LEVEL); FAIL = wider beyond it; n/a = fewer
    than 3 salts on a side (a spread from 2 values says nothing)."""
    from scipy.stats import f as f_distribution

    ours, reference = _values(result["runs"]["ours"], key), _values(result["runs"][REFERENCE], key)
    if len(ours) < 3 or len(reference) < 3:
        return "n/a"
    ours_variance, reference_variance = np.var(ours, ddof=1), np.var(reference, ddof=1)
    if ours_variance <= reference_variance:
        return "PASS"
    if reference_variance == 0:
        return "FAIL"
    chance = f_distribution.sf(ours_variance / reference_variance, len(ours) - 1, len(reference) - 1)
    return "tie" if chance >= SPREAD_TEST_LEVEL else "FAIL"


def failing_columns(result: dict) -> tuple[list[str], list[str]]:
    """Numeric columns whose mean (over salts) misses by more than 0.05 sd, and those whose share above
    the source's p90 misses the source's share by more than 10 % of it."""
    bad_mean, bad_share = [], []
    for column, facts in result["source"]["tails"].items():
        ours = tail_means(result["runs"]["ours"], column)
        if ours is None:
            bad_mean.append(column)
            continue
        if abs(ours["mean"] - facts["mean"]) > MEAN_TOLERANCE_SD * (facts["sd"] or 1.0):
            bad_mean.append(column)
        judged = facts["above_p90"] >= MIN_JUDGED_SHARE
        if judged and abs(ours["above_p90"] - facts["above_p90"]) > SHARE_TOLERANCE * facts["above_p90"]:
            bad_share.append(column)
    return bad_mean, bad_share


def acceptance(result: dict) -> dict[str, str]:
    checks = {key: _not_worse(result, key, True) for key, _ in LOWER_IS_BETTER}
    checks["sdm_overall"] = _not_worse(result, "sdm_overall", False)
    checks["ml"] = _not_worse(result, "ml", False) if result["target"] else "n/a"
    checks["ml_spread"] = spread_check(result) if result["target"] else "n/a"
    outside = sum(sum(run["out_of_range"].values()) for run in result["runs"]["ours"])
    checks["out_of_range"] = "PASS" if outside == 0 else "FAIL"
    bad_mean, bad_share = failing_columns(result)
    checks["mean"] = "PASS" if not bad_mean else "FAIL"
    checks["above_p90"] = "PASS" if not bad_share else "FAIL"
    ratio = cpu_ratio(result)
    checks["cpu_ratio"] = "n/a" if ratio is None else ("PASS" if ratio >= MIN_CPU_RATIO else "FAIL")
    return checks


HEADERS = {
    "tvd_1dim": "TVD1",
    "tvd_2dim": "TVD2",
    "corr_error": "corr",
    "sdm_overall": "SDM",
    "ml": "ML",
    "ml_spread": "MLsd",
    "out_of_range": "range",
    "mean": "mean",
    "above_p90": ">p90",
    "cpu_ratio": "CPUx50",
}


def print_acceptance(results: list[dict]) -> None:
    print(
        "\n== acceptance (issue 12; mean over salts). vs 1.0.8: PASS = ours as good or better, tie = worse by"
        " less than the salt-to-salt noise, FAIL = worse beyond it; worse = worse with one salt (no noise"
        " to judge it by: run more salts); n/a = no 1.0.8 output cached. MLsd:"
        " ML efficacy's spread over the salts, tie = wider by no more than chance (F-test, 5 %) =="
    )
    print(f"{'table':12s}" + "".join(f"{header:>8s}" for header in HEADERS.values()))
    for result in results:
        result["acceptance"] = checks = acceptance(result)
        print(f"{result['table']:12s}" + "".join(f"{checks[key]:>8s}" for key in HEADERS))
    for result in results:
        bad_mean, bad_share = failing_columns(result)
        if bad_mean or bad_share:
            print(
                f"  {result['table']}: mean off by > {MEAN_TOLERANCE_SD} sd: {', '.join(bad_mean) or '-'}; "
                f"share above p90 off by > {SHARE_TOLERANCE:.0%}: {', '.join(bad_share) or '-'}"
            )


def markdown(results: list[dict]) -> str:
    """One row per table of the main figures (mean over salts) and the verdicts, for docs/fidelity.md."""

    def cells(result: dict, key: str, digits: int = 4) -> str:
        stats = [spread(result["runs"][method], key) for method in METHODS]
        return " / ".join(f"{stat[0]:.{digits}f}" if stat else "-" for stat in stats)

    lines = [
        "| table | 1.0.8 outputs | CPU ratio | 1-dim TVD | 2-dim TVD | correlation error | SDMetrics overall "
        "| ML efficacy | out of range | verdicts (TVD1 TVD2 corr SDM ML MLsd range mean >p90 CPUx50) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        ratio = cpu_ratio(result)
        outside = [sum(sum(run["out_of_range"].values()) for run in result["runs"][m]) for m in METHODS[:2]]
        checks = result.get("acceptance") or acceptance(result)
        lines.append(
            f"| {result['table']} | {len(result['runs'][REFERENCE])} | "
            f"{f'{ratio:.0f}x' if ratio else '-'} | {cells(result, 'tvd_1dim')} | {cells(result, 'tvd_2dim')} | "
            f"{cells(result, 'corr_error')} | {cells(result, 'sdm_overall')} | "
            f"{cells(result, 'ml', 3) if result['target'] else '-'} | {outside[0]} / {outside[1]} | "
            f"{' '.join(checks[key] for key in HEADERS)} |"
        )
    return "\n".join(lines) + "\n"


def print_sweep_line(result: dict) -> None:
    """One line per sweep table: size, CPU per synthesis, TVDs (ours / resample, or ours / 1.0.8 /
    resample with the reference) and what misses."""
    if "failed" in result:
        print(f"{result['table']:36s} FAILED: {result['failed']}", flush=True)
        return
    source, runs = result["source"], result["runs"]
    with_reference = bool(runs[REFERENCE])
    methods = METHODS if with_reference else ("ours", "resample")
    cpu = spread(runs["ours"], "cpu_seconds")
    tvds = [
        "/".join(f"{stat[0]:.3f}" if stat else "-" for stat in (spread(runs[m], key) for m in methods))
        for key in ("tvd_1dim", "tvd_2dim")
    ]
    outside = sum(sum(run["out_of_range"].values()) for run in runs["ours"])
    bad_mean, bad_share = failing_columns(result)
    misses = [f"{outside} out of range"] if outside else []
    misses += [f"mean {', '.join(bad_mean)}"] if bad_mean else []
    misses += [f">p90 {', '.join(bad_share)}"] if bad_share else []
    misses += _worse_than_reference(result)
    size = f"{source['rows']}x{len(source['columns'])}"
    if result.get("aid"):
        size += " AID"
    ratio = cpu_ratio(result)
    ratio_text = f" {ratio:4.0f}x" if ratio is not None else ""
    print(
        f"{result['table']:36s} {size:>9s} {cpu[0]:6.2f} CPU-s{ratio_text}  TVD1 {tvds[0]}  TVD2 {tvds[1]}  "
        + ("; ".join(misses) or "ok"),
        flush=True,
    )


def _worse_than_reference(result: dict) -> list[str]:
    """The sweep's checks against 1.0.8 that ours misses: CPU ratio, TVDs and correlation error."""
    if not result["runs"][REFERENCE]:
        return []
    checks = acceptance(result)
    suffix = {"FAIL": "", "worse": " (one salt: not judged against noise)"}
    worse = [
        f"{label} worse than 1.0.8{suffix[checks[key]]}"
        for key, label in LOWER_IS_BETTER
        if checks[key] in suffix
    ]
    return worse + ([f"CPU under {MIN_CPU_RATIO:.0f}x"] if checks["cpu_ratio"] == "FAIL" else [])


def print_sweep_counts(results: list[dict]) -> int:
    """The sweep's totals; returns the number of tables that failed to synthesize or left their range."""
    failed = [r["table"] for r in results if "failed" in r]
    done = [r for r in results if "failed" not in r]
    outside = [
        r["table"] for r in done if any(sum(run["out_of_range"].values()) for run in r["runs"]["ours"])
    ]
    failing = {r["table"]: failing_columns(r) for r in done}
    compared = [r for r in done if r["runs"][REFERENCE]]
    bad_mean = [table for table, (mean, _) in failing.items() if mean]
    bad_share = [table for table, (_, share) in failing.items() if share]
    print(
        f"\n{len(results)} tables: {len(failed)} failed to synthesize, {len(outside)} with values out of range, "
        f"{len(bad_mean)} with a mean off by > {MEAN_TOLERANCE_SD} sd, "
        f"{len(bad_share)} with a share above p90 off by > {SHARE_TOLERANCE:.0%} (columns listed above; "
        "TVDs: ours/resample)"
    )
    if compared:
        ratios = sorted(ratio for ratio in map(cpu_ratio, compared) if ratio is not None)
        worse = Counter(label for r in compared for label in _worse_than_reference(r))
        print(
            f"against 1.0.8 on {len(compared)} tables (TVDs ours/1.0.8/resample): CPU ratio "
            f"{ratios[0]:.0f}x to {ratios[-1]:.0f}x (median {np.median(ratios):.0f}x); "
            + (", ".join(f"{label} on {count}" for label, count in sorted(worse.items())) or "never worse")
        )
    return len(failed) + len(outside)
