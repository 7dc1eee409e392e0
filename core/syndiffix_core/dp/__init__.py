"""Differentially private synthetic data from DP marginals (the synthetic data showcase's approach).

    result = synthesize_dp(df, salt=secret, table_identity="sales.orders@2026-11-22", params=DpParams(epsilon=4))
    result.frame            # typed synthetic table, same columns and dtypes as df (minus the AID column)
    result.epsilon_spent, result.delta_spent, result.budget   # what goes into lineage

See docs/dp-marginals.md for what is guaranteed and what is not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .accounting import BudgetSplit, default_delta, epsilon_records, spent_epsilon, split_budget
from .aggregation import DpAggregates, aggregate, canonical_row_order
from .binning import AttributeEncoder, decode_columns, encode_columns
from .evaluation import compare_counts, summarize
from .noise import NoiseSource, content_digest, params_digest
from .params import AccuracyMode, BinKind, ColumnBinning, DpError, DpParams, FabricationMode
from .synthesis import MISSING, synthesize_records

__all__ = [
    "AccuracyMode",
    "BinKind",
    "ColumnBinning",
    "DpError",
    "DpParams",
    "DpResult",
    "FabricationMode",
    "evaluate_dp",
    "synthesize_dp",
]


@dataclass
class DpResult:
    frame: pd.DataFrame
    epsilon_spent: float
    delta_spent: float
    budget: BudgetSplit
    protected_records: int
    aggregates: DpAggregates
    records: np.ndarray  # synthetic attribute codes (rows, columns), MISSING = cell left unsampled
    encoders: list[AttributeEncoder]
    sensitive_codes: np.ndarray  # the input's attribute codes, canonical order (internal: never export)
    target_records: int
    discarded_partial_records: int
    release_fingerprint: str  # NoiseSource.fingerprint(): equal for a rerun that repeats this release

    @property
    def partial_records(self) -> int:
        return int((self.records == MISSING).any(axis=1).sum())

    def metadata(self) -> dict:
        """JSON-able facts for lineage: all DP (noisy, thresholded) or public; never the salt."""
        return {
            "engine": "dp_marginals",
            "epsilon_spent": self.epsilon_spent,
            "delta_spent": self.delta_spent,
            "release_fingerprint": self.release_fingerprint,
            "budget_split": self.budget.as_dict(),
            "protected_records": self.protected_records,
            "synthetic_rows": len(self.frame),
            "target_rows": self.target_records,
            "partial_records_kept": self.partial_records,
            "partial_records_discarded": self.discarded_partial_records,
            "reporting_length": self.aggregates.reporting_length,
            "lengths": [
                {
                    "length": r.length,
                    "allowed_sensitivity": r.allowed_sensitivity,
                    "sensitivity_bound": r.sensitivity_bound,
                    "threshold": r.threshold,
                    "noise_std": r.noise_std,
                }
                for r in self.aggregates.lengths
            ],
            "aggregate_combinations": {str(k): v for k, v in self.aggregates.count_by_length().items()},
            # released attributes per column (DP); never the input's number of distinct values
            "binning": {
                str(e.name): {
                    "kind": e.binning.kind.value,
                    "released_attributes": len(self.aggregates.tables[(j,)]),
                }
                for j, e in enumerate(self.encoders)
            },
        }


def _entity_ids(series: pd.Series) -> np.ndarray:
    """Entity number per row, independent of row order; rows with a null AID form one entity (grouping
    them can only bound their joint contribution more tightly, never less)."""
    try:
        codes, _ = pd.factorize(series, sort=True, use_na_sentinel=False)
    except TypeError:
        codes, _ = pd.factorize(series.astype(str), sort=True, use_na_sentinel=False)
    return codes.astype(np.int64)


def synthesize_dp(
    df: pd.DataFrame,
    *,
    salt: bytes | str,
    table_identity: str,
    params: DpParams | None = None,
    aid_column: str | None = None,
) -> DpResult:
    """An (epsilon, delta)-DP synthetic copy of df (every column except `aid_column`, in order and dtype).

    With `aid_column`, all rows of one entity are one record: the entity, not the row, is what the
    guarantee protects. The noise depends only on `salt`, `table_identity`, `params` and the input's row
    multiset, so the same input gives the same output whatever its row order, and changed data or
    parameters get fresh noise.
    """
    params = params or DpParams()
    if aid_column is not None and aid_column not in df.columns:
        raise DpError(f"aid_column {aid_column!r} is not a column of the table (columns: {list(df.columns)})")
    columns = [c for c in df.columns if c != aid_column]
    encoders, codes = encode_columns(df, params, columns)
    entities = _entity_ids(df[aid_column].reset_index(drop=True)) if aid_column is not None else None
    order = canonical_row_order(codes, entities)
    codes = codes[order]
    if entities is not None:
        entities = entities[order]
    noise = NoiseSource(salt, table_identity, content_digest(df) + params_digest(params))
    n_records = len(np.unique(entities)) if entities is not None else len(codes)
    protected = max(0, round(n_records + noise.stream("record count").laplace(1.0 / epsilon_records(params))))
    delta = params.delta if params.delta is not None else default_delta(protected)
    budget = split_budget(params, delta)
    cardinalities = np.array([e.cardinality for e in encoders], dtype=np.int64)
    aggregates = aggregate(
        codes,
        cardinalities,
        params=params,
        budget=budget,
        protected_records=protected,
        noise=noise,
        entities=entities,
    )
    if params.number_of_records is not None:
        target = params.number_of_records
    elif entities is None:
        target = protected
    else:
        # rows per entity are not protected; the single-attribute counts (DP) tell how many rows there are
        sums = [aggregates.tables[(j,)].counts.sum() for j in range(len(columns))]
        target = int(np.median(sums)) if sums else 0
    records, discarded = synthesize_records(
        aggregates,
        target,
        rng=noise.stream("synthesis").generator(),
        weight_selection_percentile=params.weight_selection_percentile,
        longest_only=params.weight_selection_lengths == "longest",
        use_synthetic_counts=params.use_synthetic_counts,
        keep_partial_records=params.keep_partial_records,
    )
    frame = decode_columns(encoders, records, noise.stream("values within bins").generator())
    return DpResult(
        frame=frame,
        epsilon_spent=spent_epsilon(budget),
        delta_spent=delta,
        budget=budget,
        protected_records=protected,
        aggregates=aggregates,
        records=records,
        encoders=encoders,
        sensitive_codes=codes,
        target_records=target,
        discarded_partial_records=discarded,
        release_fingerprint=noise.fingerprint(),
    )


def evaluate_dp(result: DpResult, max_subsets_per_length: int | None = 200) -> dict:
    """The showcase's evaluation of a result against its own input (internal, NOT DP: see evaluation.py):
    per length, suppressed and fabricated shares, mean count errors and preservation."""
    by_length = compare_counts(
        result.sensitive_codes,
        result.records,
        result.aggregates.cardinalities,
        result.aggregates.reporting_length,
        max_subsets_per_length=max_subsets_per_length,
    )
    return summarize(by_length)
