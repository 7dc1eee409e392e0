"""How close a synthetic table is to its source: metrics (JSON-able) and a self-contained HTML report.

Every column is binned with bins taken from the ORIGINAL column (quantile bins for numbers, times and
timestamps; the most frequent categories for strings and booleans), both frames are counted in those bins,
and the distance of the two distributions is their total variation distance (TVD: half the sum of absolute
share differences; 0 = identical, 1 = disjoint), for every column (1-dim) and every column pair (2-dim).
Pearson correlations of the columns with a numeric encoding (booleans, numbers, times, timestamps) are
compared as mean |difference|.

The report is itself something a reader sees, so it follows the project's privacy rules:
- it holds shares rounded to 0.1 %, never counts of source rows, and the row ratio rounded to 1 %, so the
  exact source row count cannot be computed back from it;
- bin edges are rounded to about 1 % of the column's interdecile spread and the outer bins are open, so the
  minimum and maximum (often a single person's value) never appear;
- a bin or category holding fewer than `rare_threshold` source rows is never shown on its own: numeric bins
  merge with a neighbour, rare categories (and rare nulls) go to one "other (rare)" bin.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import html
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, PercentFormatter

from syndiffix_core.threads import map_in_threads
from syndiffix_core.workers import available_workers
from syndiffix_ops.verdict import (
    QualityThresholds,
    attention,
    fidelity_scores,
    independence_tvd,
    joint_shares,
    sample_rows,
)
from syndiffix_ops.verdict import tvd as total_variation

DEFAULT_BINS = 10
DEFAULT_RARE_THRESHOLD = 10
DEFAULT_MAX_CATEGORIES = 20
# A Pearson correlation over n rows has a standard error of about 1/sqrt(n): below 100 rows in both
# tables a pair's correlation difference is mostly noise (e.g. a column that is 99 % null) and would
# dominate the table's mean, so such pairs are left undefined.
DEFAULT_MIN_CORRELATION_ROWS = 100
METRICS_SCHEMA_VERSION = 1

_SHARE_DECIMALS = 3
_METRIC_DECIMALS = 4
# Rows per block of the correlation sums (8 columns: ~4 MiB per temporary).
_PEARSON_BLOCK_ROWS = 65_536
_RATIO_DECIMALS = 2
_OTHER_LABEL = "other (rare)"
# A tail share needs this many source rows beyond the quantile to say more than noise.
_MIN_TAIL_ROWS = 100
_NULL_LABEL = "null"
_EPOCH = pd.Timestamp("1970-01-01", tz="UTC")

# Kinds as the report bins them (coarser than syndiffix_core's ColumnKind: only the binning differs).
BOOLEAN, NUMBER, TIMESTAMP, DATE, TIME, STRING = "boolean", "number", "timestamp", "date", "time", "string"


@dataclass(frozen=True)
class ReportSection:
    """An extra part of the HTML report (e.g. a risk histogram or DP metrics), placed after the built-in ones.

    `html` is trusted markup produced by the caller; escape any data in it with `html.escape`.
    """

    title: str
    html: str


# --------------------------------------------------------------------------------------------- metrics


def compute_quality(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    *,
    bins: int = DEFAULT_BINS,
    rare_threshold: int = DEFAULT_RARE_THRESHOLD,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    min_correlation_rows: int = DEFAULT_MIN_CORRELATION_ROWS,
    thresholds: QualityThresholds | None = None,
    target_column: str | None = None,
) -> dict[str, Any]:
    """Compare `synthetic` with `original` on the columns both hold (AID columns, absent from the synthetic
    output, are left out). Returns a JSON-able dict; distances are None where a side has no rows.

    Besides the distances: `scores` (0-100, with the sample and independence references of
    syndiffix_ops.verdict) and `attention`, the columns and pairs beyond `thresholds`; with a
    `target_column`, the scores include ML efficacy (syndiffix_ops.ml_efficacy)."""
    shared = [name for name in synthetic.columns if name in original.columns]
    source = source_quality(
        original,
        columns=shared,
        bins=bins,
        rare_threshold=rare_threshold,
        max_categories=max_categories,
        min_correlation_rows=min_correlation_rows,
    )
    return compare_with_source(
        source,
        synthetic,
        thresholds=thresholds,
        target_column=target_column,
        original=original if target_column is not None else None,
    )


@dataclass
class _SourceColumn:
    """One column binned as the source defines it, before any synthetic table exists: the labels (value
    bins, then null and other), the source's codes, how a column of another table gets its codes, and
    the source halves of the tails and moments."""

    name: str
    kind: str
    labels: list[str]
    codes: np.ndarray  # bin index per source row, uint8 for up to 256 bins
    codes_of: Callable[[Any], np.ndarray]  # the codes of another table's column (as _bin_values reads it)
    tails: list[tuple[float, dict[str, Any]]]  # (edge, tail without its synthetic share); see _tails
    moments: tuple[float, float] | None  # None for strings


@dataclass
class SourceQuality:
    """The source's half of the quality figures: each column's bins and codes (one byte per cell) and the
    source's correlations. Built before synthesis, so the source frame can be freed while the engine runs;
    compare_with_source completes the figures from the synthetic table."""

    columns: list[Any]  # every column of the source frame, compared or not
    rows: int
    binned: dict[Any, _SourceColumn]
    correlation_columns: list[str]
    correlation: np.ndarray
    settings: dict[str, int]


def source_quality(
    original: pd.DataFrame,
    *,
    columns: Sequence[Any] | None = None,
    bins: int = DEFAULT_BINS,
    rare_threshold: int = DEFAULT_RARE_THRESHOLD,
    max_categories: int = DEFAULT_MAX_CATEGORIES,
    min_correlation_rows: int = DEFAULT_MIN_CORRELATION_ROWS,
    threads: int | None = None,
) -> SourceQuality:
    """The source half of compute_quality for `columns` of `original` (default: all of them). The
    columns are binned side by side on `threads` threads (default: `_binning_threads()`), mostly in
    numpy's sorts and searches, which release the GIL; the figures do not depend on the count."""
    if bins < 1 or rare_threshold < 1 or max_categories < 1:
        raise ValueError("bins, rare_threshold and max_categories must be at least 1")
    names = list(original.columns) if columns is None else list(columns)
    columns_binned = map_in_threads(
        lambda name: _source_column(name, original[name], bins, rare_threshold, max_categories),
        names,
        _binning_threads() if threads is None else threads,
    )
    binned = dict(zip(names, columns_binned, strict=True))
    numeric = [column for column in binned.values() if column.moments is not None]
    min_rows = max(min_correlation_rows, rare_threshold, 2)
    return SourceQuality(
        columns=list(original.columns),
        rows=len(original),
        binned=binned,
        correlation_columns=[str(column.name) for column in numeric],
        correlation=_pairwise_pearson(original, numeric, [column.moments for column in numeric], min_rows),
        settings={
            "bins": bins,
            "rare_threshold": rare_threshold,
            "max_categories": max_categories,
            "min_correlation_rows": min_correlation_rows,
        },
    )


def _binning_threads() -> int:
    """Columns binned at once: each holds its column's temporaries (~0.3 GiB for a number column of 10M
    rows), so at most two, whatever the cores: two took the source half of a 10-column table of 10M rows
    from 17 to 12.6 s for 0.7 GiB more at that stage."""
    return min(2, available_workers())


def compare_with_source(
    source: SourceQuality,
    synthetic: pd.DataFrame,
    *,
    thresholds: QualityThresholds | None = None,
    target_column: str | None = None,
    original: pd.DataFrame | None = None,
    threads: int | None = None,
) -> dict[str, Any]:
    """compute_quality's figures from the source half and the synthetic table; ML efficacy (with a
    `target_column`) trains on rows, so it needs the `original` frame too. The synthetic columns are
    binned on `threads` threads (default: `_binning_threads()`); the figures do not depend on the count."""
    thresholds = thresholds or QualityThresholds()
    shared = [name for name in synthetic.columns if name in source.binned]
    binned = map_in_threads(
        lambda name: _bin_synthetic(source.binned[name], synthetic[name]),
        shared,
        _binning_threads() if threads is None else threads,
    )
    comparable = source.rows > 0 and len(synthetic) > 0
    sample = sample_rows(source.rows, len(synthetic))

    column_details: dict[str, Any] = {}
    tvd_1dim = []
    original_shares = []
    for column in binned:
        original_share = column.shares(column.original_codes)
        original_shares.append(original_share)
        synthetic_share = column.shares(column.synthetic_codes)
        tvd = total_variation(original_share, synthetic_share) if comparable else None
        sample_tvd = (
            total_variation(original_share, column.shares(column.original_codes[sample]))
            if comparable
            else None
        )
        if tvd is not None:
            tvd_1dim.append(tvd)
        column_details[column.name] = {
            "kind": column.kind,
            "tvd": _round(tvd, _METRIC_DECIMALS),
            "sample_tvd": _round(sample_tvd, _METRIC_DECIMALS),
            "bins": column.labels,
            "original_share": [_round(share, _SHARE_DECIMALS) for share in original_share],
            "synthetic_share": [_round(share, _SHARE_DECIMALS) for share in synthetic_share],
            "tails": column.tails,
        }

    correlation = _correlations(source, synthetic, binned)
    # each column's sampled source rows gathered once, for all its pairs
    sampled = [column.original_codes[sample] for column in binned] if comparable else []
    pairs = []
    tvd_2dim = []
    corr_diffs = []
    for i, j in zip(*np.triu_indices(len(binned), k=1), strict=True):
        first, second = binned[i], binned[j]
        tvd = sample_tvd = independent_tvd = None
        if comparable:
            widths = len(first.labels), len(second.labels)
            source_joint = joint_shares(first.original_codes, widths[0], second.original_codes, widths[1])
            synthetic_joint = joint_shares(
                first.synthetic_codes, widths[0], second.synthetic_codes, widths[1]
            )
            tvd = total_variation(source_joint, synthetic_joint)
            sample_tvd = total_variation(
                source_joint, joint_shares(sampled[i], widths[0], sampled[j], widths[1])
            )
            independent_tvd = independence_tvd(source_joint, original_shares[i], original_shares[j])
        corr_diff = correlation.abs_diff(first.name, second.name)
        if tvd is not None:
            tvd_2dim.append(tvd)
        if corr_diff is not None:
            corr_diffs.append(corr_diff)
        pairs.append(
            {
                "columns": [first.name, second.name],
                "tvd": _round(tvd, _METRIC_DECIMALS),
                "sample_tvd": _round(sample_tvd, _METRIC_DECIMALS),
                "independent_tvd": _round(independent_tvd, _METRIC_DECIMALS),
                "corr_abs_diff": _round(corr_diff, _METRIC_DECIMALS),
            }
        )

    metrics = {
        "schema_version": METRICS_SCHEMA_VERSION,
        "synthetic_rows": len(synthetic),
        "row_ratio": _round(len(synthetic) / source.rows, _RATIO_DECIMALS) if source.rows else None,
        "columns_compared": len(binned),
        "tvd_1dim_mean": _round(_mean(tvd_1dim), _METRIC_DECIMALS),
        "tvd_1dim_max": _round(max(tvd_1dim, default=None), _METRIC_DECIMALS),
        "tvd_2dim_mean": _round(_mean(tvd_2dim), _METRIC_DECIMALS),
        "tvd_2dim_max": _round(max(tvd_2dim, default=None), _METRIC_DECIMALS),
        "corr_abs_diff_mean": _round(_mean(corr_diffs), _METRIC_DECIMALS),
        "corr_abs_diff_max": _round(max(corr_diffs, default=None), _METRIC_DECIMALS),
        "columns": column_details,
        "pairs": pairs,
        "correlation": correlation.as_dict(),
        "not_compared": {
            "only_in_original": [str(name) for name in source.columns if name not in synthetic.columns],
            "only_in_synthetic": [str(name) for name in synthetic.columns if name not in source.columns],
        },
        "settings": dict(source.settings),
    }
    efficacy = None
    if target_column is not None and comparable:
        from syndiffix_ops.ml_efficacy import ml_efficacy

        if original is None:
            raise ValueError("ML efficacy (a target_column) needs the original frame")
        efficacy = ml_efficacy(original, synthetic, target_column)
    metrics["scores"] = fidelity_scores(metrics, ml_efficacy=efficacy)
    metrics["attention"] = attention(metrics, thresholds)
    metrics["thresholds"] = thresholds.as_dict()
    return metrics


@dataclass
class _BinnedColumn:
    name: str
    kind: str
    labels: list[str]
    original_codes: np.ndarray  # bin index per original row (uint8 for up to 256 bins)
    synthetic_codes: np.ndarray
    tails: list[dict[str, Any]]  # see _tails
    # (mean, standard deviation) of the finite values of the numeric encoding of each side, None for strings
    original_moments: tuple[float, float] | None
    synthetic_moments: tuple[float, float] | None

    def shares(self, codes: np.ndarray) -> np.ndarray:
        counts = np.bincount(codes, minlength=len(self.labels)).astype(np.float64)
        return counts / codes.size if codes.size else counts


def _source_tails(kind: str, present: np.ndarray) -> list[tuple[float, dict[str, Any]]]:
    """The source's tails beyond its outer quantiles (1 % and 5 % each side) of its `present` (non-null,
    sorted) values, each with its edge: a tail lost in synthesis shows here even when it hides inside an
    outer decile bin. A tail is left out when fewer than _MIN_TAIL_ROWS source rows are in it: its share
    would be mostly noise (and near single rows)."""
    finite = present[np.isfinite(present)]  # an infinite value is beyond every edge, never an edge itself
    if finite.size == 0:
        return []
    step = _rounding_step(finite, kind)
    tails = []
    for side, quantile in (("low", 0.01), ("low", 0.05), ("high", 0.95), ("high", 0.99)):
        edge = float(np.round(np.quantile(finite, quantile) / step) * step)
        # the rows beyond the edge (as _beyond counts them), from the sorted values
        if side == "low":
            source_rows = int(np.searchsorted(present, edge, side="left"))
        else:
            source_rows = int(present.size - np.searchsorted(present, edge, side="right"))
        if source_rows < _MIN_TAIL_ROWS:
            continue
        label = f"{'<' if side == 'low' else '>'} {_format_edge(edge, kind, step)}"
        share = _round(source_rows / present.size, _SHARE_DECIMALS)
        tails.append((edge, {"side": side, "quantile": quantile, "label": label, "original_share": share}))
    return tails


def _tails(
    source_tails: list[tuple[float, dict[str, Any]]], synthetic_values: np.ndarray
) -> list[dict[str, Any]]:
    """The source's tails with the synthetic table's shares beyond the same edges (none when it has no
    values)."""
    synthetic = synthetic_values[~np.isnan(synthetic_values)]
    if synthetic.size == 0:
        return []
    return [
        {
            **tail,
            "synthetic_share": _round(float(_beyond(tail["side"], synthetic, edge).mean()), _SHARE_DECIMALS),
        }
        for edge, tail in source_tails
    ]


def _beyond(side: str, values: np.ndarray, edge: float) -> np.ndarray:
    sign = -1.0 if side == "low" else 1.0  # beyond the edge: sign * (value - edge) > 0
    return sign * (values - edge) > 0


def _report_kind(series: pd.Series) -> str:
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return BOOLEAN
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return TIMESTAMP
    if pd.api.types.is_numeric_dtype(dtype):
        return NUMBER
    inferred = pd.api.types.infer_dtype(series, skipna=True)
    if inferred == "boolean":
        return BOOLEAN
    if inferred in {"integer", "floating", "mixed-integer-float", "decimal"}:
        return NUMBER
    if inferred in {"datetime", "datetime64"}:
        return TIMESTAMP
    if inferred == "date":
        return DATE
    if inferred == "time":
        return TIME
    return STRING


def _as_float(series: pd.Series, kind: str) -> np.ndarray:
    """Numeric encoding: booleans 0/1, numbers as is, timestamps/dates as Unix seconds, times as seconds since
    midnight; anything that does not parse (e.g. a string in a synthetic number column) counts as null."""
    if kind == BOOLEAN and pd.api.types.is_bool_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    if kind == BOOLEAN:
        numbers = pd.to_numeric(series.astype(object).map({True: 1.0, False: 0.0}), errors="coerce")
        return numbers.to_numpy(dtype=np.float64, na_value=np.nan)
    if kind == NUMBER:
        return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    if kind in {TIMESTAMP, DATE}:
        stamps = pd.to_datetime(series, utc=True, errors="coerce")
        return ((stamps - _EPOCH) / pd.Timedelta(seconds=1)).to_numpy(dtype=np.float64, na_value=np.nan)
    if kind == TIME:
        present = series.notna()
        seconds = np.full(len(series), np.nan)
        deltas = pd.to_timedelta(series[present].astype(str), errors="coerce")
        seconds[present.to_numpy()] = (deltas / pd.Timedelta(seconds=1)).to_numpy(
            dtype=np.float64, na_value=np.nan
        )
        return seconds
    raise ValueError(f"no numeric encoding for kind {kind!r}")


def _source_column(
    name: Any, original: pd.Series, bins: int, rare_threshold: int, max_categories: int
) -> _SourceColumn:
    """The column's bins from the source, its codes, tails and moments; the numeric encoding itself is
    dropped here (the correlations read it again a block at a time)."""
    kind = _report_kind(original)
    tails, moments = [], None
    if kind == STRING:
        labels, codes_of = _categorical_bins(_as_categories(original), kind, rare_threshold, max_categories)
        codes = codes_of(_as_categories(original))
    else:
        values = _as_float(original, kind)
        if kind == BOOLEAN:
            labels, codes_of = _categorical_bins(pd.Series(values), kind, rare_threshold, max_categories)
            codes = codes_of(pd.Series(values))
        else:
            # One sort serves the bins' distinct values and quantiles and the tails' quantiles and sizes
            # (a quantile of sorted values is a few times cheaper, and the same: it depends on the
            # values alone, not on their order).
            present = np.sort(values[~np.isnan(values)])
            labels, codes_of = _quantile_bins(present, values.size - present.size, kind, bins, rare_threshold)
            codes = codes_of(values)
            tails = _source_tails(kind, present)
        moments = _moments(values)
    return _SourceColumn(
        name=name,
        kind=kind,
        labels=labels,
        codes=codes.astype(_code_dtype(len(labels))),
        codes_of=codes_of,
        tails=tails,
        moments=moments,
    )


def _bin_synthetic(source: _SourceColumn, synthetic: pd.Series) -> _BinnedColumn:
    """The synthetic column in the source's bins, beside the source's codes (unused null and other bins
    dropped), with the tails and moments of both."""
    tails, synthetic_moments = [], None
    if source.kind == STRING:
        synthetic_codes = source.codes_of(_as_categories(synthetic))
    else:
        values = _as_float(synthetic, source.kind)
        synthetic_codes = source.codes_of(pd.Series(values) if source.kind == BOOLEAN else values)
        tails = _tails(source.tails, values)
        synthetic_moments = _moments(values)
    labels, original_codes, synthetic_codes = _compact(source.labels, source.codes, synthetic_codes)
    return _BinnedColumn(
        name=str(source.name),
        kind=source.kind,
        labels=labels,
        original_codes=original_codes,
        synthetic_codes=synthetic_codes,
        tails=tails,
        original_moments=source.moments,
        synthetic_moments=synthetic_moments,
    )


def _as_categories(series: pd.Series) -> pd.Series:
    """Strings as they are (a copy as Python objects would cost ~100 bytes per row); other dtypes (e.g. a
    categorical, whose value counts would list unused categories) as Python objects."""
    if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
        return series
    return series.astype(object)


def _categorical_bins(
    original: pd.Series, kind: str, rare_threshold: int, max_categories: int
) -> tuple[list[str], Callable[[pd.Series], np.ndarray]]:
    """Bins of the most frequent values, by name; the other source values in groups of consecutive
    frequency ranks ("values ranked 21-27"), each group no larger than the largest named value, so no
    bin of unnamed values dwarfs the named ones. A column of many similar-sized values (an id, a tail
    number) gets rank groups only. Values the source does not have, and rare nulls, go to "other (rare)".
    Returns the labels (null and other last) and the codes of a column in these bins."""
    counts = original.value_counts(dropna=True)
    # Most frequent first, ties by value, so the bins do not depend on row order.
    ranked = sorted(counts.items(), key=lambda item: (-item[1], str(item[0])))
    values = pd.Index([value for value, _ in ranked], dtype=object)
    ranked_counts = np.array([count for _, count in ranked], dtype=np.int64)
    named, groups = _named_and_grouped(ranked_counts, rare_threshold, max_categories)
    if kind == BOOLEAN:
        labels = ["true" if value == 1.0 else "false" for value in values[:named]]
    else:
        labels = [str(value) for value in values[:named]]
    labels += [_rank_label(first + 1, last) for first, last in groups]
    null_is_frequent = int(original.isna().sum()) >= rare_threshold
    null_code = len(labels)
    other_code = null_code + 1
    code_of_rank = np.full(len(values), other_code, dtype=np.int64)  # ranks in no group: "other (rare)"
    code_of_rank[:named] = np.arange(named)
    for number, (first, last) in enumerate(groups):
        code_of_rank[first:last] = named + number

    codes_of = _CategoricalCodes(
        values, code_of_rank, null_code if null_is_frequent else other_code, other_code
    )
    return labels + [_NULL_LABEL, _OTHER_LABEL], codes_of


@dataclass
class _CategoricalCodes:
    """The codes of a column in a source column's categorical bins (a class, not a closure, so that the
    source half of the figures can be pickled: see source_figures)."""

    values: pd.Index  # the source's distinct values, most frequent first
    code_of_rank: np.ndarray
    null_code: int
    other_code: int

    def __call__(self, series: pd.Series) -> np.ndarray:
        # each distinct value looked up once (no Python object per row): -1 for nulls and unknown values
        row_codes, uniques = pd.factorize(series, use_na_sentinel=True)
        rank_of_unique = self.values.get_indexer(np.asarray(uniques, dtype=object))
        ranks = np.where(row_codes >= 0, np.r_[rank_of_unique, -1][row_codes], -1)
        known = self.code_of_rank[np.maximum(ranks, 0)] if len(self.values) else 0
        codes = np.where(ranks >= 0, known, self.other_code)
        codes[series.isna().to_numpy()] = self.null_code
        return codes


def _named_and_grouped(
    counts: np.ndarray, rare_threshold: int, max_categories: int
) -> tuple[int, list[tuple[int, int]]]:
    """How many of the ranked values get a bin of their own, and the [first, last) rank ranges of the
    groups of the rest: the most named values (frequent ones, at most max_categories) for which the rest
    fits in groups each no larger than the largest named value, with at most 2 * max_categories bins."""
    frequent = int(np.count_nonzero(counts >= rare_threshold))
    for named in range(min(frequent, max_categories), -1, -1):
        cap = int(counts[0]) if named else None
        budget = 2 * max_categories - named if named else max_categories
        groups = _rank_groups(counts[named:], cap, budget, rare_threshold)
        if groups is not None:
            return named, [
                (first + named, last + named)
                for first, last in _without_rare_groups(groups, counts[named:], rare_threshold)
            ]
    raise AssertionError("grouping without named values always fits")


def _rank_groups(
    counts: np.ndarray, cap: int | None, budget: int, rare_threshold: int
) -> list[tuple[int, int]] | None:
    """Consecutive rank ranges over `counts`, each holding at most `cap` rows, or (cap None) about an
    equal share of `budget` groups (one more for the rarest values) and at least rare_threshold rows;
    None when more than `budget` groups would be needed."""
    if counts.size == 0:
        return []
    groups, first, held = [], 0, 0
    if cap is None:  # close a group once it holds its share: at most `budget` groups
        share = max(math.ceil(int(counts.sum()) / budget), rare_threshold)
        for rank, count in enumerate(counts):
            held += int(count)
            if held >= share:
                groups.append((first, rank + 1))
                first, held = rank + 1, 0
        if first < counts.size:  # the last values: a group of their own, or with their neighbours if few
            if held >= rare_threshold or not groups:
                groups.append((first, counts.size))
            else:
                groups[-1] = (groups[-1][0], counts.size)
        return groups
    for rank, count in enumerate(counts):  # close a group before it grows past the cap
        if held and held + count > cap:
            groups.append((first, rank))
            first, held = rank, 0
        held += int(count)
    groups.append((first, counts.size))
    return groups if len(groups) <= budget else None


def _without_rare_groups(
    groups: list[tuple[int, int]], counts: np.ndarray, rare_threshold: int
) -> list[tuple[int, int]]:
    """Groups of fewer than rare_threshold rows join the group before them, so no bin shows the share of
    a few rare values; when even the first is that small, the rest is left to "other (rare)"."""
    kept: list[tuple[int, int]] = []
    for first, last in groups:
        if int(counts[first:last].sum()) >= rare_threshold or not kept:
            kept.append((first, last))
        else:
            kept[-1] = (kept[-1][0], last)
    if kept and int(counts[kept[0][0] : kept[0][1]].sum()) < rare_threshold:
        kept = kept[1:] if len(kept) > 1 else []
        if kept:
            kept[0] = (groups[0][0], kept[0][1])
    return kept


def _rank_label(first: int, last: int) -> str:
    return f"value ranked {first}" if first == last else f"values ranked {first}–{last}"


def _quantile_bins(
    present: np.ndarray, nulls: int, kind: str, bins: int, rare_threshold: int
) -> tuple[list[str], Callable[[np.ndarray], np.ndarray]]:
    """Quantile bins of the source's `present` (non-null, sorted) values beside its `nulls`; a value
    held by at least 1/bins of the source rows (the zeros of a zero-inflated column) gets a bin of its
    own first, and the other values are cut into quantile bins among themselves, so both the point mass
    and the spread of the rest stay visible. Returns the labels (null and other last) and the codes of
    values in these bins."""
    starts = np.flatnonzero(np.r_[True, present[1:] != present[:-1]]) if present.size else np.empty(0, int)
    distinct, counts = present[starts], np.diff(np.r_[starts, present.size])
    heavy = distinct[(counts >= present.size / bins) & (counts >= rare_threshold)]
    rest = present[~np.isin(present, heavy)] if heavy.size else present
    if rest.size >= (rare_threshold if heavy.size else 1):  # a few rows beside point bins: "other (rare)"
        # edges come from the finite values; -inf and inf (a float column or an engine may hold them)
        # fall into the open outer bins, unless one of them is frequent enough for a point bin
        finite = rest[np.isfinite(rest)]
        fractions = np.linspace(0.0, 1.0, max(bins - heavy.size, 2) + 1)[1:-1]
        quantiles = np.quantile(finite, fractions) if finite.size else np.empty(0)
        step = _rounding_step(finite, kind)
        edges = np.unique(np.round(quantiles / step) * step)
        edges = _merge_rare_bins(edges, rest, rare_threshold)
        value_labels = _interval_labels(edges, kind, step)
        if heavy.size and edges.size == 0:
            value_labels = ["other values"]  # the values besides the point bins, too few to cut
    else:
        edges = np.empty(0)
        value_labels = [] if heavy.size else _interval_labels(edges, kind, 1.0)
    point_labels = [f"= {_format_point(value, kind)}" for value in heavy]
    null_code = len(point_labels) + len(value_labels)
    other_code = null_code + 1
    codes_of = _QuantileCodes(
        edges, heavy, bool(value_labels), null_code if nulls >= rare_threshold else other_code, other_code
    )
    return point_labels + value_labels + [_NULL_LABEL, _OTHER_LABEL], codes_of


@dataclass
class _QuantileCodes:
    """The codes of values in a source column's quantile bins: point bins first, then the intervals
    between `edges` (a class, not a closure, so that it can be pickled)."""

    edges: np.ndarray
    points: np.ndarray  # the values with a bin of their own
    has_intervals: bool  # False: every source value is a point, anything else is new
    null_code: int
    other_code: int

    def __call__(self, values: np.ndarray) -> np.ndarray:
        codes = self.points.size + np.searchsorted(self.edges, values, side="right")
        if not self.has_intervals:
            codes[:] = self.other_code
        for number, point in enumerate(self.points):
            codes[values == point] = number
        codes[np.isnan(values)] = self.null_code
        return codes


def _format_point(value: float, kind: str) -> str:
    """A value held by many rows, shown exactly (it is no single row's value)."""
    if kind in {TIMESTAMP, DATE, TIME}:
        return _format_edge(value, kind, 1.0 if kind != DATE else 86400.0)
    return f"{value:g}"


def _merge_rare_bins(edges: np.ndarray, values: np.ndarray, rare_threshold: int) -> np.ndarray:
    """Drop edges until every bin holds at least `rare_threshold` of the (sorted) source `values` (or
    only one bin is left)."""
    # bin i holds the values in [edges[i - 1], edges[i])
    counts = list(np.diff(np.r_[0, np.searchsorted(values, edges, side="left"), values.size]))
    edges = list(edges)
    while edges and min(counts) < rare_threshold:
        rare = int(np.argmin(counts))
        if rare == 0:
            neighbour = 1
        elif rare == len(counts) - 1:
            neighbour = rare - 1
        else:
            neighbour = rare - 1 if counts[rare - 1] <= counts[rare + 1] else rare + 1
        low = min(rare, neighbour)
        counts[low : low + 2] = [counts[low] + counts[low + 1]]
        del edges[low]
    return np.asarray(edges, dtype=np.float64)


def _compact(labels: list[str], original: np.ndarray, synthetic: np.ndarray):
    """Keep the value bins, and the null/other bins only when either side has rows in them."""
    used = np.zeros(len(labels), dtype=bool)
    used[: len(labels) - 2] = True
    used |= np.bincount(original, minlength=len(labels)) > 0
    used |= np.bincount(synthetic, minlength=len(labels)) > 0
    new_code = (np.cumsum(used) - 1).astype(_code_dtype(used.size))
    return (
        [label for label, keep in zip(labels, used, strict=True) if keep],
        new_code[original],
        new_code[synthetic],
    )


def _code_dtype(labels: int) -> type:
    # The narrowest type: a pair of columns is counted from codes, at 10M rows per column and side.
    return np.uint8 if labels <= 256 else np.int32


def _rounding_step(values: np.ndarray, kind: str) -> float:
    """About 1 % of the interdecile spread, as a round unit, so edges say little about single rows."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return 1.0
    low, high = np.quantile(values, [0.1, 0.9])
    spread = float(high - low) or abs(float(np.median(values))) or 1.0
    raw = spread / 100.0
    if kind in {TIMESTAMP, DATE, TIME}:
        units = [1.0, 60.0, 3600.0] + ([86400.0] if kind != TIME else [])
        if kind == DATE:
            units = [86400.0]
        fitting = [unit for unit in units if unit <= raw]
        return fitting[-1] if fitting else units[0]
    step = 10.0 ** math.floor(math.log10(raw))
    if np.all(values == np.round(values)):
        step = max(step, 1.0)
    return step


def _interval_labels(edges: np.ndarray, kind: str, step: float) -> list[str]:
    if edges.size == 0:
        return ["all values"]
    text = [_format_edge(edge, kind, step) for edge in edges]
    labels = [f"< {text[0]}"]
    labels += [f"{low} – {high}" for low, high in zip(text[:-1], text[1:], strict=True)]
    labels.append(f"≥ {text[-1]}")
    return labels


def _format_edge(value: float, kind: str, step: float) -> str:
    if kind in {TIMESTAMP, DATE}:
        stamp = pd.Timestamp(value, unit="s")
        if step >= 86400:
            return stamp.strftime("%Y-%m-%d")
        return stamp.strftime("%Y-%m-%d %H:%M" if step >= 60 else "%Y-%m-%d %H:%M:%S")
    if kind == TIME:
        seconds = int(round(value))
        clock = f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}"
        return clock if step >= 60 else f"{clock}:{seconds % 60:02d}"
    decimals = max(0, -math.floor(math.log10(step)))
    return f"{value:.{decimals}f}"


@dataclass
class _Correlations:
    columns: list[str]
    original: np.ndarray
    synthetic: np.ndarray

    def abs_diff(self, first: str, second: str) -> float | None:
        if first not in self.columns or second not in self.columns:
            return None
        i, j = self.columns.index(first), self.columns.index(second)
        diff = abs(self.original[i, j] - self.synthetic[i, j])
        return None if np.isnan(diff) else float(diff)

    def as_dict(self) -> dict[str, Any]:
        def matrix(values: np.ndarray) -> list[list[float | None]]:
            return [[_round(value, _SHARE_DECIMALS) for value in row] for row in values]

        return {
            "columns": self.columns,
            "original": matrix(self.original),
            "synthetic": matrix(self.synthetic),
        }


def _correlations(
    source: SourceQuality, synthetic: pd.DataFrame, binned: Sequence[_BinnedColumn]
) -> _Correlations:
    numeric = [column for column in binned if column.original_moments is not None]
    names = [column.name for column in numeric]
    original = source.correlation
    if names != source.correlation_columns:  # fewer columns compared than the source half holds
        at = [source.correlation_columns.index(name) for name in names]
        original = original[np.ix_(at, at)]
    min_rows = max(source.settings["min_correlation_rows"], source.settings["rare_threshold"], 2)
    return _Correlations(
        names,
        original,
        _pairwise_pearson(synthetic, numeric, [column.synthetic_moments for column in numeric], min_rows),
    )


def _pairwise_pearson(
    frame: pd.DataFrame,
    columns: Sequence[_SourceColumn] | Sequence[_BinnedColumn],
    moments: Sequence[tuple[float, float]],
    min_rows: int,
) -> np.ndarray:
    """Pearson correlation of every column pair over the rows where both are present, as a few matrix
    products (pandas' pairwise loop is ~50x slower on wide frames). Columns are centred and scaled first so
    that sums of squares of large values (timestamps in seconds) do not cancel catastrophically. The
    products are summed over blocks of rows, each column's numeric encoding made a block at a time: all
    columns side by side as float64, and the four temporaries of that size, would be the largest thing
    the quality figures hold (~3 GiB at 10M rows x 8 columns)."""
    if not columns:
        return np.empty((0, 0))
    width = len(columns)
    centres, scales = (np.array(figures) for figures in zip(*moments, strict=True))
    pairs, sums, squares, products = (np.zeros((width, width)) for _ in range(4))
    for start in range(0, len(frame), _PEARSON_BLOCK_ROWS):
        rows = frame.iloc[start : start + _PEARSON_BLOCK_ROWS]
        block = np.column_stack([_as_float(rows[column.name], column.kind) for column in columns])
        present = np.isfinite(block)  # infinite values have no correlation: left out like nulls
        weights = present.astype(np.float64)
        with np.errstate(invalid="ignore"):
            centred = np.where(present, (block - centres) / scales, 0.0)
        pairs += weights.T @ weights  # rows where both columns are present
        sums += centred.T @ weights  # [i, j]: sum of column i over the rows where j is present too
        squares += (centred**2).T @ weights
        products += centred.T @ centred
    with np.errstate(invalid="ignore", divide="ignore"):
        covariance = products - sums * sums.T / pairs
        variance_i = squares - sums**2 / pairs
        correlation = covariance / np.sqrt(variance_i * variance_i.T)
    correlation[(pairs < min_rows) | ~np.isfinite(correlation)] = np.nan
    return np.clip(correlation, -1.0, 1.0)


def _moments(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation of the finite values (deviation 1 where it is 0 or undefined),
    computed on the values divided by their largest magnitude: the squares of values beyond ~1e154
    (or their sum, near the float limit) would overflow to infinity, and with an infinite scale the
    column's correlations would come out undefined."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return np.nan, 1.0
    magnitude = float(np.abs(finite).max())
    if magnitude == 0:
        return 0.0, 1.0
    scaled = finite / magnitude
    centre = scaled.sum() / scaled.size
    scale = np.sqrt(((scaled - centre) ** 2).sum() / scaled.size) * magnitude
    return float(centre * magnitude), float(scale) if scale > 0 else 1.0


def _round(value: float | None, decimals: int) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return round(float(value), decimals)


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


# ------------------------------------------------------------------------------------------------ HTML


def report_file_stem(table_name: str) -> str:
    """A file-system-safe, collision-free stem for a table name (which may hold dots, quotes, spaces)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", table_name).strip("._") or "table"
    if stem != table_name:
        stem = f"{stem}-{hashlib.sha256(table_name.encode()).hexdigest()[:8]}"
    return stem


def report_relative_path(table_name: str, run_id: str) -> PurePosixPath:
    """Where a run's report of a table goes inside a report folder: `<table>/<run id>.html`, both parts
    made file-system safe. One file per run and table, so no run overwrites another's report; the
    metrics sit next to it as `<run id>.metrics.json`. Join it to a local or object-storage folder."""
    return PurePosixPath(report_file_stem(table_name), report_file_stem(run_id) + ".html")


def write_html_report(
    directory: str | Path,
    *,
    table_name: str,
    original: pd.DataFrame | None,
    synthetic: pd.DataFrame,
    metrics: Mapping[str, Any] | None,
    sections: Iterable[ReportSection | tuple[str, str]] = (),
    run_id: str | None = None,
    source_table: str | None = None,
    risk: Mapping[str, Any] | None = None,
) -> Path:
    """Write `<table>/<run id>.html` (plots embedded) and `<table>/<run id>.metrics.json` into `directory`
    (see `report_relative_path`; a new run id when none is given); return the HTML path. `risk` (the
    coarse record of syndiffix_ops.risk) goes into the metrics file for the index's history.

    The report is drawn from `metrics` only (shares of privacy-safe bins), never from raw rows, so it shows
    no row of either frame; the frames are only needed when `metrics` is None, to compute them.
    """
    from syndiffix_ops.provenance import new_run_id

    if metrics is None:
        if original is None:
            raise ValueError("write_html_report needs either metrics or the original frame")
        metrics = compute_quality(original, synthetic)
    run_id = run_id or new_run_id()
    directory = Path(directory) if isinstance(directory, str) else directory
    html_path = directory / str(report_relative_path(table_name, run_id))
    html_path.parent.mkdir(parents=True, exist_ok=True)
    generated_at = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()

    metrics_path = html_path.with_name(html_path.name.removesuffix(".html") + ".metrics.json")
    payload = {
        "table": table_name,
        "source_table": source_table,
        "run_id": run_id,
        "generated_at": generated_at,
        "metrics": metrics,
        "risk": risk,
    }
    metrics_path.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")

    extra = [
        section if isinstance(section, ReportSection) else ReportSection(*section) for section in sections
    ]
    body = [
        verdict_section(metrics),
        _summary_section(metrics),
        _privacy_section(metrics),
        _columns_section(metrics),
        _correlation_section(metrics),
        _pairs_section(metrics),
        *([_dp_budget_section(metrics["dp_budget"])] if "dp_budget" in metrics else []),
        *(
            [_dp_marginals_section(metrics["dp_marginals_evaluation"])]
            if "dp_marginals_evaluation" in metrics
            else []
        ),
        *extra,
    ]
    page = PAGE.format(
        title=html.escape(f"Synthetic data quality: {table_name}"),
        table=html.escape(table_name),
        generated_at=html.escape(f"{generated_at} (run {run_id})"),
        metrics_file=html.escape(metrics_path.name),
        style=STYLE,
        body="\n".join(render_section(section) for section in body),
    )
    html_path.write_text(page, encoding="utf-8")
    return html_path


def figure_to_img_tag(figure: Figure, alt: str, *, tight: bool = True) -> str:
    """Render a matplotlib Figure (created without pyplot, so no global backend state) as an embedded PNG.

    `tight=False` keeps the figure's own margins: twice as fast, for the many small per-column plots."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80, bbox_inches="tight" if tight else None)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{encoded}">'


def render_section(section: ReportSection) -> str:
    return f"<section><h2>{html.escape(section.title)}</h2>\n{section.html}\n</section>"


def fmt_number(value: Any, decimals: int = 3) -> str:
    return "–" if value is None else f"{value:.{decimals}f}"


SCALE_NOTE = (
    "Scores are 0&ndash;100: 100 &times; (1 &minus; mean TVD) over the report's bins, i.e. the share of rows "
    "that are in the right bin. <em>Sample of the source</em>: the same score for a random sample of source "
    "rows as large as the synthetic table, the best a copy can do (it differs by sampling noise only, and "
    "protects nobody). <em>Columns independent</em>: the pair-trends score of the source's own columns with "
    "every relation between them removed. A score close to the sample's is good; pair trends close to "
    "&ldquo;independent&rdquo; mean the relations were lost."
)


def verdict_section(metrics: Mapping[str, Any]) -> ReportSection:
    """The score on its scale, its parts against their references, and what needs attention."""
    scores = metrics.get("scores")
    if not scores or scores.get("overall") is None:
        return ReportSection("Verdict", "<p>No score: one of the tables is empty.</p>")
    rows = [
        ("column shapes", scores["column_shapes"], "1-dim TVD of each column"),
        ("pair trends", scores["pair_trends"], "2-dim TVD of each column pair"),
    ]
    efficacy = scores.get("ml_efficacy")
    if efficacy:
        what = f"{efficacy.get('metric', 'score')} predicting {efficacy['target']} on source rows"
        rows.append(
            ("ML efficacy", efficacy, what if efficacy.get("score") is not None else efficacy["note"])
        )
    cells = "".join(
        f"<tr><th>{html.escape(name)}</th><td class='score'>{fmt_number(part.get('score'), 1)}</td>"
        f"<td>{fmt_number(part.get('sample'), 1)}</td><td>{fmt_number(part.get('independent'), 1)}</td>"
        f"<td class='note'>{html.escape(what)}</td></tr>"
        for name, part, what in rows
    )
    headline = (
        f'<p class="headline">Fidelity <strong>{scores["overall"]:.1f}</strong> / 100 '
        f'<span class="note">(a sample of the source scores {fmt_number(scores.get("sample"), 1)})</span></p>'
    )
    table = (
        "<table><tr><th>part</th><th>score</th><th>sample of the source</th><th>columns independent</th>"
        f"<th>measured as</th></tr>{cells}</table>"
    )
    return ReportSection(
        "Verdict",
        headline + table + f'<p class="note">{SCALE_NOTE}</p>' + attention_html(metrics),
    )


def attention_html(metrics: Mapping[str, Any]) -> str:
    flags = metrics.get("attention") or {"columns": [], "pairs": []}
    thresholds = metrics.get("thresholds") or {}
    rule = (
        f"column TVD &gt; {thresholds.get('column_tvd')}, pair TVD &gt; {thresholds.get('pair_tvd')}, "
        f"correlation moved &gt; {thresholds.get('correlation_diff')}, or a bin (of at least "
        f"{_percent_text(thresholds.get('min_bin_share'))} of the source) or tail off by more than "
        f"&times;{thresholds.get('bin_share_ratio')}; set in the config's <code>quality:</code> block or the table's own"
        if thresholds
        else ""
    )
    if not flags["columns"] and not flags["pairs"]:
        return f'<p class="ok">Nothing needs attention ({rule}).</p>'
    items = [
        f"<li><strong>{html.escape(flag['column'])}</strong>: {html.escape('; '.join(flag['reasons']))}</li>"
        for flag in flags["columns"]
    ]
    items += [
        f"<li><strong>{html.escape(' + '.join(flag['columns']))}</strong>: "
        f"{html.escape('; '.join(flag['reasons']))}</li>"
        for flag in flags["pairs"]
    ]
    return f'<div class="attention"><h3>Needs attention</h3><p class="note">{rule}</p><ul>{"".join(items)}</ul></div>'


def _percent_text(share: float | None) -> str:
    return "–" if share is None else f"{100 * share:g} %"


def _summary_section(metrics: Mapping[str, Any]) -> ReportSection:
    rows = [
        ("columns compared", str(metrics["columns_compared"])),
        ("synthetic rows", f"{metrics['synthetic_rows']:,}"),
        ("row ratio (synthetic / source, rounded)", fmt_number(metrics["row_ratio"], 2)),
        (
            "mean / max 1-dim TVD",
            f"{fmt_number(metrics['tvd_1dim_mean'])} / {fmt_number(metrics['tvd_1dim_max'])}",
        ),
        (
            "mean / max 2-dim TVD",
            f"{fmt_number(metrics['tvd_2dim_mean'])} / {fmt_number(metrics['tvd_2dim_max'])}",
        ),
        (
            "mean / max |correlation difference|",
            f"{fmt_number(metrics['corr_abs_diff_mean'])} / {fmt_number(metrics['corr_abs_diff_max'])}",
        ),
    ]
    not_compared = metrics["not_compared"]["only_in_original"]
    if not_compared:
        rows.append(("source columns not in the output (AID or dropped)", ", ".join(not_compared)))
    table = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return ReportSection("Summary", f"<table>{table}</table>{_HOW_TO_READ}")


def _privacy_section(metrics: Mapping[str, Any]) -> ReportSection:
    threshold = metrics["settings"]["rare_threshold"]
    return ReportSection(
        "What this report does not show",
        "<p>This report shows shares (rounded to 0.1 %), never counts of source rows; the row ratio is "
        "rounded to 1 %. Numeric bins come from source quantiles rounded to about 1 % of the column's spread, "
        "and the outer bins are open, so no minimum or maximum appears. Categories held by fewer than "
        f"{threshold} source rows are never shown by name: they are counted in groups of values by frequency "
        f"rank (&ldquo;values ranked 21&ndash;27&rdquo;) of at least {threshold} rows, rare nulls in "
        f"&ldquo;{html.escape(_OTHER_LABEL)}&rdquo;, and numeric bins with fewer than {threshold} source rows "
        "are merged with a neighbour. A value shown as its own bin (&ldquo;= 0&rdquo;) is held by at least a "
        "tenth of the rows; tails are shown only with at least 100 source rows beyond them. The source shares are rounded aggregates, not anonymized ones: share "
        "this report with people allowed to see the source's statistics, not with the synthetic data's "
        "audience (comparing reports of many runs of a small table could reveal a changed row).</p>",
    )


def dp_budget(metadata: Mapping[str, Any], identity: str, params: Any) -> dict[str, Any]:
    """What a differentially private output spent, for the report: from the engine's metadata (its
    accounting) and params (the contribution bound and release label)."""
    split = metadata.get("budget_split") or {}
    return {
        "identity": identity,
        "release": metadata.get("release"),
        "epsilon_spent": metadata.get("epsilon_spent"),
        "delta_spent": metadata.get("delta_spent"),
        "epsilon_records": split.get("epsilon_records"),
        "epsilon_marginals": split.get("epsilon_marginals"),
        "max_rows_per_entity": getattr(params, "max_rows_per_entity", None),
        "reporting_length": metadata.get("reporting_length"),
    }


def _significant(value: float | None) -> str:
    return "–" if value is None else f"{value:.3g}"


def _dp_budget_section(budget: Mapping[str, Any]) -> ReportSection:
    rows = [
        ("noise identity (table and column set)", html.escape(str(budget["identity"]))),
        ("release", html.escape(str(budget.get("release") or "(none)"))),
        ("&epsilon; spent by this release", _significant(budget.get("epsilon_spent"))),
        ("&delta; spent by this release", _significant(budget.get("delta_spent"))),
        (
            "&epsilon; for the record count / for the marginals",
            f"{_significant(budget.get('epsilon_records'))} / "
            f"{_significant(budget.get('epsilon_marginals'))}",
        ),
        ("rows per entity kept at most", html.escape(str(budget.get("max_rows_per_entity")))),
        ("combination length", html.escape(str(budget.get("reporting_length")))),
    ]
    table = "".join(f"<tr><th>{label}</th><td>{value}</td></tr>" for label, value in rows)
    return ReportSection(
        "Differential privacy budget",
        f"{dp_total_html(budget)}<table>{table}</table><p class='note'>This output is (&epsilon;, &delta;)-"
        "differentially private for the entities of its AID column (or its rows). The noise is seeded from "
        "the salt, the identity, the parameters, the release and the data: a rerun on unchanged data with "
        "the same parameters and release repeats the same output and spends nothing new; changed data, "
        "parameters or release spend this budget again for the same people.</p>",
    )


def dp_total_html(budget: Mapping[str, Any]) -> str:
    """The total spent on the protected people over every recorded release, with the budget warning."""
    if budget.get("total_epsilon") is None:
        return "<p>The lineage holds no total for this release.</p>"
    limits = [
        f"&epsilon; {budget['budget_epsilon']:g}" if budget.get("budget_epsilon") is not None else "",
        f"&delta; {budget['budget_delta']:g}" if budget.get("budget_delta") is not None else "",
    ]
    limit_text = " and ".join(filter(None, limits)) or "none set (<code>dp: {budget_epsilon: ...}</code>)"
    total = (
        f"<p class='headline'>Spent on {html.escape(str(budget['source_table']))} "
        f"({html.escape(str(budget['protected_unit']))}) over {budget['total_releases']} release(s): "
        f"<strong>&epsilon; {_significant(budget['total_epsilon'])}</strong>, "
        f"&delta; {_significant(budget['total_delta'])} <span class='note'>(budget: {limit_text})</span></p>"
        "<p class='note'>Basic composition: the sum over the distinct releases of the same source table and "
        "protected unit recorded in the target's lineage (another <code>where</code>, column set or target "
        "protects the same people and counts too; a rerun that repeated a release counts once). It is an "
        "upper bound on the privacy loss of these people. Releases into another target database, or under "
        f"another salt, are not in this lineage. Identity id {html.escape(str(budget['identity_id']))}.</p>"
    )
    if budget.get("over_budget"):
        total += (
            f"<div class='attention'><h3>Over the DP budget</h3><p>{html.escape(budget['over_budget'])}: "
            "these people have been exposed beyond the configured budget. Stop releasing this table, or "
            "raise the budget knowingly; <code>dp: {refuse_over_budget: true}</code> refuses such releases."
            "</p></div>"
        )
    return total


def _dp_marginals_section(evaluation: Mapping[str, Any]) -> ReportSection:
    """The DP-marginals engine's own evaluation (k-tuple counts of both tables up to the reporting length)."""
    names = (
        ("suppressed_share", "suppressed combinations", True),
        ("fabricated_share", "fabricated combinations", True),
        ("mean_preservation", "mean preservation", True),
        ("mean_abs_count_error_all", "mean |count error|, all combinations", False),
        ("mean_abs_count_error_common", "mean |count error|, combinations in both", False),
    )
    by_length = evaluation["by_length"]
    lengths = sorted(by_length, key=int)
    header = "".join(f"<th>length {html.escape(k)}</th>" for k in lengths)
    rows = []
    for key, label, is_share in names:
        cells = "".join(
            f"<td>{fmt_number(100 * by_length[k][key], 1) + ' %' if is_share else fmt_number(by_length[k][key], 1)}</td>"
            for k in lengths
        )
        rows.append(f"<tr><th>{html.escape(label)}</th>{cells}</tr>")
    return ReportSection(
        "DP marginals: combinations by length",
        "<p>Both tables are counted on the engine's attributes (values or bins) for every combination of up "
        "to the reporting length. Suppressed: source combinations the synthetic table lacks; fabricated: "
        "synthetic combinations the source lacks; preservation: min(synthetic / source, 1). This comparison "
        "reads the source and is not differentially private; it shows only shares and mean errors.</p>"
        f"<table><tr><th></th>{header}</tr>{''.join(rows)}</table>",
    )


def _columns_section(metrics: Mapping[str, Any]) -> ReportSection:
    parts = []
    flagged = {
        flag["column"]: flag["reasons"] for flag in (metrics.get("attention") or {}).get("columns", [])
    }
    for name, column in metrics["columns"].items():
        figure = _distribution_figure(name, column)
        reasons = flagged.get(name)
        warning = f'<div class="reasons">{html.escape("; ".join(reasons))}</div>' if reasons else ""
        parts.append(
            f'<figure class="column{" flagged" if reasons else ""}"><figcaption>{html.escape(name)} '
            f'<span class="kind">{html.escape(column["kind"])}</span> TVD {fmt_number(column["tvd"])} '
            f'<span class="kind">(sample {fmt_number(column.get("sample_tvd"))})</span>{warning}</figcaption>'
            f"{figure_to_img_tag(figure, f'distribution of {name}', tight=False)}</figure>"
        )
    if not parts:
        return ReportSection("Columns", "<p>No column is in both the source and the synthetic table.</p>")
    return ReportSection(
        "Columns: source vs synthetic shares", '<div class="grid">' + "".join(parts) + "</div>"
    )


def _distribution_figure(name: str, column: Mapping[str, Any]) -> Figure:
    """Horizontal bars, source above synthetic per bin: labels stay horizontal and readable however many
    bins there are, and the legend sits above the plot, never over a bar."""
    labels = [_shorten(label, 28) for label in column["bins"]]
    positions = np.arange(len(labels))
    original = [share or 0.0 for share in column["original_share"]]
    synthetic = [share or 0.0 for share in column["synthetic_share"]]
    height = 1.2 + 0.24 * len(labels)  # inches: fixed margins for the legend and the axis, a row per bin
    figure = Figure(figsize=(4.6, height))
    longest = max((len(label) for label in labels), default=0)
    figure.subplots_adjust(
        left=min(0.5, 0.06 + 0.0145 * longest), right=0.97, top=1 - 0.45 / height, bottom=0.35 / height
    )
    axes = figure.add_subplot()
    axes.barh(positions - 0.2, original, height=0.4, label="source", color="#4c72b0")
    axes.barh(positions + 0.2, synthetic, height=0.4, label="synthetic", color="#dd8452")
    axes.set_yticks(positions, labels, fontsize=8)
    axes.invert_yaxis()  # first bin on top
    axes.tick_params(axis="x", labelsize=8)
    axes.xaxis.set_major_locator(MaxNLocator(4))
    axes.xaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    axes.legend(
        fontsize=8, frameon=False, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, borderaxespad=0.1
    )
    return figure


def _correlation_section(metrics: Mapping[str, Any]) -> ReportSection:
    correlation = metrics["correlation"]
    names = correlation["columns"]
    if len(names) < 2:
        return ReportSection(
            "Correlations",
            "<p>Fewer than two columns with a numeric encoding: no correlations to compare.</p>",
        )

    def as_array(matrix: list[list[float | None]]) -> np.ndarray:
        return np.array([[np.nan if value is None else value for value in row] for row in matrix])

    original, synthetic = as_array(correlation["original"]), as_array(correlation["synthetic"])
    difference = np.abs(original - synthetic)
    largest = float(np.nanmax(difference)) if np.isfinite(difference).any() else 0.0
    # the difference panel's scale ends at the largest difference rounded up to 0.1 (at least 0.1), so
    # small differences are visible instead of all near-white on a 0-1 scale
    scale = min(1.0, max(0.1, math.ceil(largest * 10 - 1e-9) / 10))
    size = min(6.0, 2.0 + 0.3 * len(names))
    figure = Figure(figsize=(3 * size + 2.0, size + 0.6))
    panels = [
        ("source", original, "RdBu_r", -1.0, 1.0),
        ("synthetic", synthetic, "RdBu_r", -1.0, 1.0),
        (f"|difference| (scale 0–{scale:.1f})", difference, "Oranges", 0.0, scale),
    ]
    # rows named "1 dep_delay", columns numbered alike: no rotated labels to read
    show_labels = len(names) <= 30
    ticks = np.arange(len(names)) if show_labels else []
    row_labels = [f"{n + 1} {_shorten(name, 16)}" for n, name in enumerate(names)] if show_labels else []
    column_labels = [str(n + 1) for n in range(len(names))] if show_labels else []
    all_axes = figure.subplots(1, 3)
    images = []
    for axes, (title, values, colormap, low, high) in zip(all_axes, panels, strict=True):
        images.append(axes.imshow(values, cmap=colormap, vmin=low, vmax=high))
        axes.set_title(title, fontsize=10)
        axes.set_xticks(ticks, column_labels, fontsize=8 if len(names) <= 20 else 6)
        axes.set_yticks([])
    all_axes[0].set_yticks(ticks, row_labels, fontsize=9 if len(names) <= 20 else 7)
    if len(names) <= 12:  # few enough cells to print each difference
        for i, j in zip(*np.nonzero(np.isfinite(difference)), strict=True):
            if i != j:
                all_axes[2].text(j, i, f"{difference[i, j]:.2f}", ha="center", va="center", fontsize=7)
    # source and synthetic share one scale, so one colour bar; ticks made once each (they are costly)
    figure.colorbar(images[1], ax=list(all_axes[:2]), shrink=0.7)
    figure.colorbar(images[2], ax=[all_axes[2]], shrink=0.7)
    note = (
        "<p>Pearson correlations of the columns with a numeric encoding (booleans as 0/1, numbers, times and "
        "timestamps as seconds); string columns have no meaningful order and are compared by the 2-dim TVD "
        "instead. Empty cells: undefined (a constant column, or fewer than "
        f"{metrics['settings'].get('min_correlation_rows', DEFAULT_MIN_CORRELATION_ROWS)} rows where both "
        f"columns are present). The difference panel's colour scale ends at {scale:.1f}, the largest "
        "difference rounded up; the correlation panels go from &minus;1 (blue) to 1 (red).</p>"
    )
    return ReportSection(
        "Correlations: source | synthetic | difference", note + figure_to_img_tag(figure, "correlations")
    )


def _pairs_section(metrics: Mapping[str, Any]) -> ReportSection:
    pairs = [pair for pair in metrics["pairs"] if pair["tvd"] is not None]
    if not pairs:
        return ReportSection("Column pairs", "<p>No column pairs to compare.</p>")
    worst = sorted(pairs, key=lambda pair: pair["tvd"], reverse=True)[:10]
    rows = "".join(
        f"<tr><td>{html.escape(pair['columns'][0])}</td><td>{html.escape(pair['columns'][1])}</td>"
        f"<td>{fmt_number(pair['tvd'])}</td><td>{fmt_number(pair.get('sample_tvd'))}</td>"
        f"<td>{fmt_number(pair.get('independent_tvd'))}</td><td>{fmt_number(pair['corr_abs_diff'])}</td></tr>"
        for pair in worst
    )
    return ReportSection(
        "Column pairs with the largest 2-dim TVD",
        "<table><tr><th>column</th><th>column</th><th>2-dim TVD</th><th>sample of the source</th>"
        "<th>columns independent</th><th>|corr diff|</th></tr>"
        f"{rows}</table><p>All {len(metrics['pairs'])} pairs are in the metrics JSON.</p>",
    )


def _shorten(label: str, width: int = 24) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"


_HOW_TO_READ = (
    '<p class="note">TVD = total variation distance between the source and synthetic shares over bins taken '
    "from the source column: 0 means identical distributions, 1 means disjoint. 2-dim TVD does the same for "
    "every pair of columns, so it shows whether relations between columns survived.</p>"
)

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1400px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; border-bottom: 1px solid #ddd; padding-bottom: .2em; }
table { border-collapse: collapse; font-size: .85em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: left; }
.grid { display: flex; flex-wrap: wrap; gap: 1em; }
figure.column { margin: 0; border: 1px solid #eee; padding: .4em; }
figcaption { font-size: .85em; font-weight: 600; } .kind { color: #888; font-weight: normal; }
.note, footer { color: #666; font-size: .85em; } .scroll { overflow-x: auto; }
.headline { font-size: 1.3em; } .headline strong { font-size: 1.4em; }
td.score { font-weight: 600; }
tr.risk-identifying td { background: #fbe3e0; } tr.risk-elevated td { background: #fdf3dc; }
figure.flagged { border: 2px solid #d9822b; } .reasons { color: #a85d00; font-weight: normal; max-width: 28em; }
.attention { border-left: 4px solid #d9822b; background: #fdf6ec; padding: .3em 1em; margin: .8em 0; }
.attention h3 { margin: .3em 0; font-size: 1em; color: #a85d00; }
.ok { border-left: 4px solid #3a8f3a; background: #eef7ee; padding: .5em 1em; }
"""

PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title><style>{style}</style></head>
<body>
<h1>{title}</h1>
<p class="note">Generated {generated_at} by syndiffix-ops. Metrics: <code>{metrics_file}</code>.</p>
{body}
<footer><p>Report for {table}. Self-contained: all plots are embedded.</p></footer>
</body></html>
"""
