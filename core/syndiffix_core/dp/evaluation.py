"""Evaluation in the manner of the synthetic data showcase: both datasets are aggregated up to the
reporting length and their k-tuple counts compared.

This reads the sensitive data and is NOT differentially private: it is an internal quality report. It
returns only shares and mean errors per length (no individual combination or its count).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .aggregation import pack, strides_for


def tuple_counts(
    codes: np.ndarray, columns: tuple[int, ...], radices: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted packed keys and counts of the value combinations of `columns` (rows with a missing cell in
    `columns` do not hold that combination)."""
    rows = codes[(codes[:, list(columns)] >= 0).all(axis=1)]
    keys = pack(rows, columns, strides_for(radices[list(columns)]))
    return np.unique(keys, return_counts=True)


def _column_subsets(d: int, k: int, limit: int | None) -> list[tuple[int, ...]]:
    """All k-subsets of d columns, or an evenly spread, deterministic `limit` of them for wide tables."""
    total = math.comb(d, k)
    if limit is None or total <= limit:
        return list(itertools.combinations(range(d), k))
    wanted = set(np.linspace(0, total - 1, limit).round().astype(int).tolist())
    return [s for i, s in enumerate(itertools.combinations(range(d), k)) if i in wanted]


def compare_counts(
    sensitive: np.ndarray,
    synthetic: np.ndarray,
    radices: np.ndarray,
    reporting_length: int,
    max_subsets_per_length: int | None = None,
) -> dict[int, dict[str, float]]:
    """Per length k: combination counts, suppressed and fabricated shares, mean absolute count error over
    the combinations both hold (the showcase's figure) and over all combinations either holds (a missing
    combination counted as 0), and the mean preservation min(syn/sen, 1) over sensitive combinations.
    `max_subsets_per_length` bounds the work on wide tables (column subsets spread evenly)."""
    d = sensitive.shape[1]
    radices = np.asarray(radices, dtype=np.int64)
    out: dict[int, dict[str, float]] = {}
    for k in range(1, min(reporting_length, d) + 1):
        sen_total = syn_total = common_total = 0
        suppressed = fabricated = 0
        common_error = union_error = preservation = 0.0
        for columns in _column_subsets(d, k, max_subsets_per_length):
            sen_keys, sen_counts = tuple_counts(sensitive, columns, radices)
            syn_keys, syn_counts = tuple_counts(synthetic, columns, radices)
            in_syn = np.isin(sen_keys, syn_keys, assume_unique=True)
            in_sen = np.isin(syn_keys, sen_keys, assume_unique=True)
            sen_common, syn_common = sen_counts[in_syn], syn_counts[in_sen]
            sen_total += len(sen_keys)
            syn_total += len(syn_keys)
            common_total += int(in_syn.sum())
            suppressed += int((~in_syn).sum())
            fabricated += int((~in_sen).sum())
            diff = np.abs(sen_common.astype(np.float64) - syn_common)
            common_error += float(diff.sum())
            union_error += float(diff.sum() + sen_counts[~in_syn].sum() + syn_counts[~in_sen].sum())
            preservation += float(np.minimum(syn_common / sen_common, 1.0).sum())
        union_total = sen_total + fabricated
        out[k] = {
            "sensitive_combinations": sen_total,
            "synthetic_combinations": syn_total,
            "suppressed_combinations": suppressed,
            "suppressed_share": suppressed / sen_total if sen_total else 0.0,
            "fabricated_combinations": fabricated,
            "fabricated_share": fabricated / syn_total if syn_total else 0.0,
            "mean_abs_count_error_common": common_error / common_total if common_total else 0.0,
            "mean_abs_count_error_all": union_error / union_total if union_total else 0.0,
            "mean_preservation": preservation / sen_total if sen_total else 0.0,
        }
    return out


_SHAREABLE = (
    "suppressed_share",
    "fabricated_share",
    "mean_abs_count_error_common",
    "mean_abs_count_error_all",
    "mean_preservation",
)


def summarize(by_length: dict[int, dict[str, float]]) -> dict:
    """The JSON-able evaluation block of the quality report: shares and mean errors only (numbers of
    sensitive combinations and the input's row count stay out, as reports hold no exact source counts)."""
    return {
        "by_length": {str(k): {name: round(v[name], 4) for name in _SHAREABLE} for k, v in by_length.items()}
    }
