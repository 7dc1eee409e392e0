"""Aggregate-seeded synthesis: records sampled from the DP aggregates alone (post-processing, so the
output keeps the aggregates' (epsilon, delta) guarantee).

Records are built in batches that share one random column order. At each step every record of the batch
picks a value for the same column, all records and candidate values at once:
  * the weight of value v is the aggregate count of (record so far + v) while that has at most R
    attributes; beyond R it is the `weight_selection_percentile`-th percentile (nearest rank) of the counts
    of the sub-combinations that contain v: of every length <= R as in the showcase (`longest_only=False`),
    or, by default, of length R only. The showcase's pool is dominated by the single-attribute and pair
    counts, so beyond R columns are drawn almost independently of the record; the length-R counts carry
    the record's context (measured in bench/compare_pacsynth: 2-way count error ~4x lower);
  * v is vetoed when any of those combinations is absent from the aggregates, so synthesis never creates a
    combination the aggregates do not hold (it can only repeat the aggregation's own fabrication);
  * values whose single-attribute count is used up are skipped while another value is possible (the
    seed's "available attributes"; with a target row count the pool is reused once spent);
  * a cell with no possible value stays missing (-1): the record is partial, as in the showcase.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .aggregation import DpAggregates

_BATCH_CELLS = 1 << 21
MISSING = -1


class _Counts:
    """Aggregate counts, optionally minus what has already been synthesized (use_synthetic_counts)."""

    def __init__(self, aggregates: DpAggregates, use_synthetic_counts: bool):
        self.aggregates = aggregates
        self.synthesized = (
            {cols: np.zeros(len(t)) for cols, t in aggregates.tables.items()}
            if use_synthetic_counts
            else None
        )

    def lookup(self, columns: tuple[int, ...], keys: np.ndarray) -> np.ndarray:
        table = self.aggregates.tables[columns]
        if self.synthesized is None:
            return table.lookup(keys)
        pos = table.positions(keys)
        safe = np.maximum(pos, 0)
        counts = table.counts[safe]
        if self.synthesized is not None:
            counts = counts - self.synthesized[columns][safe]
        return np.where(pos >= 0, counts, 0.0)

    def record(self, codes: np.ndarray) -> None:
        if self.synthesized is None:
            return
        for columns, table in self.aggregates.tables.items():
            present = (codes[:, list(columns)] >= 0).all(axis=1)
            if not present.any():
                continue
            rows = codes[present]
            key = rows[:, columns[0]].astype(np.int64)
            for column, stride in zip(columns[1:], table.strides[1:], strict=True):
                key = key + rows[:, column].astype(np.int64) * stride
            pos = table.positions(key)
            pos = pos[pos >= 0]
            self.synthesized[columns] += np.bincount(pos, minlength=len(table))


def _nearest_rank(values: np.ndarray, valid: np.ndarray | None, percentile: float) -> np.ndarray:
    """Per (record, value): the nearest-rank percentile of values[..., j] over the valid j (all if None)."""
    m = values.shape[-1]
    if valid is None:
        kth = max(math.ceil(percentile / 100.0 * m) - 1, 0)
        return np.partition(values, kth, axis=-1)[..., kth]
    counts = valid.sum(axis=-1)
    ordered = np.sort(np.where(valid, values, np.inf), axis=-1)
    kth = np.maximum(np.ceil(percentile / 100.0 * counts).astype(np.int64) - 1, 0)
    kth = np.minimum(kth, m - 1)
    return np.take_along_axis(ordered, kth[..., None], axis=-1)[..., 0]


def _sample_column(
    codes: np.ndarray,
    prior: list[int],
    column: int,
    counts: _Counts,
    remaining: np.ndarray,
    reporting_length: int,
    weight_percentile: float,
    longest_only: bool,
    rng: np.random.Generator,
) -> np.ndarray:
    aggregates = counts.aggregates
    values = aggregates.tables[(column,)].keys
    batch = len(codes)
    if not len(values):
        return np.full(batch, MISSING, dtype=np.int32)
    present = codes[:, prior] >= 0 if prior else np.ones((batch, 0), dtype=bool)
    complete_rows = present.all(axis=1)
    if not complete_rows.all() and complete_rows.any():
        # the few partial records take the slow path on their own
        weights = np.empty((batch, len(values)))
        for rows in (complete_rows, ~complete_rows):
            weights[rows] = _weights(
                codes[rows],
                present[rows],
                prior,
                column,
                values,
                counts,
                reporting_length,
                weight_percentile,
                longest_only,
            )
    else:
        weights = _weights(
            codes, present, prior, column, values, counts, reporting_length, weight_percentile, longest_only
        )
    return _draw_within_pool(weights, values, remaining, rng)


def _weights(
    codes: np.ndarray,
    present: np.ndarray,
    prior: list[int],
    column: int,
    values: np.ndarray,
    counts: _Counts,
    reporting_length: int,
    weight_percentile: float,
    longest_only: bool,
) -> np.ndarray:
    """(records, candidate values) sampling weights, 0 for vetoed values."""
    aggregates = counts.aggregates
    batch = len(codes)
    complete = bool(present.all())

    def lookup(subset: tuple[int, ...]) -> np.ndarray:
        """(batch, values) counts of (the record's values in `subset`) + each candidate value."""
        columns = tuple(sorted((*subset, column)))
        table = aggregates.tables[columns]
        base = np.zeros(batch, dtype=np.int64)
        for col, stride in zip(columns, table.strides, strict=True):
            if col != column:
                base += np.maximum(codes[:, col], 0).astype(np.int64) * stride
        own_stride = table.strides[columns.index(column)]
        return counts.lookup(columns, base[:, None] + values[None, :] * own_stride)

    if complete and len(prior) + 1 <= reporting_length:
        # The whole record so far plus the value is one reported combination: a direct lookup (its
        # sub-combinations are all reported too, the aggregates being closed under sub-combinations).
        weights = lookup(tuple(prior))
    else:
        # Subsets S of the known columns with |S| <= R-1 (only |S| = R-1 with longest_only):
        # S + {column} holds the candidate value. Absent longest ones veto (closure covers the rest).
        lo = min(len(prior), reporting_length - 1) if longest_only and complete else 0
        subsets = [
            s
            for j in range(lo, min(len(prior), reporting_length - 1) + 1)
            for s in itertools.combinations(prior, j)
        ]
        m = len(subsets)
        kth = max(math.ceil(weight_percentile / 100.0 * m) - 1, 0)
        if complete and kth in (0, m - 1):
            # the percentile is the min or the max (95% of fewer than 20 values is the max): running
            # reductions, no (records, values, subsets) array
            weights = lookup(subsets[0])
            smallest = weights.copy()
            for subset in subsets[1:]:
                found = lookup(subset)
                np.minimum(smallest, found, out=smallest)
                (np.minimum if kth == 0 else np.maximum)(weights, found, out=weights)
            weights[smallest <= 0] = 0.0
            return np.maximum(weights, 0.0)
        lookups = np.empty((batch, len(values), m))
        for s_index, subset in enumerate(subsets):
            lookups[:, :, s_index] = lookup(subset)
        if complete:
            vetoed = (lookups <= 0).any(axis=-1)
            weights = _nearest_rank(lookups, None, weight_percentile)
        else:
            prior_index = {c: i for i, c in enumerate(prior)}
            applicable = np.stack(
                [present[:, [prior_index[c] for c in s]].all(axis=1) for s in subsets], axis=1
            )
            valid = np.broadcast_to(applicable[:, None, :], lookups.shape)
            vetoed = (valid & (lookups <= 0)).any(axis=-1)
            weights = _nearest_rank(lookups, valid, weight_percentile)
            direct = present.sum(axis=1) + 1 <= reporting_length
            if direct.any():
                # with cells missing, the largest applicable subset is the record's whole known part
                sizes = np.array([len(s) for s in subsets])
                largest = np.argmax(np.where(applicable[direct], sizes[None, :], -1), axis=1)
                weights[direct] = np.take_along_axis(lookups[direct], largest[:, None, None], axis=-1)[..., 0]
        weights[vetoed] = 0.0
    return np.maximum(weights, 0.0)


def _draw_within_pool(
    weights: np.ndarray, values: np.ndarray, remaining: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """One value per row, by weight, never taking a value more often than its remaining pool allows
    (the batched form of the seed's one-record-at-a-time pool): rows that overdraw a value give it back
    at random and draw again among the values left. Rows with no possible value left in the pool draw
    from their weights alone (the pool is reused), rows with no possible value at all stay MISSING."""
    batch = len(weights)
    chosen = np.full(batch, -1, dtype=np.int64)
    pool = remaining[values].copy()
    pending = np.arange(batch)
    for _ in range(8):
        if not len(pending):
            break
        w = weights[pending] * (pool > 0)[None, :]
        drawable = w.sum(axis=1) > 0
        if not drawable.any():
            break
        rows = pending[drawable]
        pick = _draw(w[drawable], rng)
        taken = np.bincount(pick, minlength=len(values))
        if (taken <= pool).all():
            chosen[rows] = pick
            pool -= taken
            pending = np.flatnonzero(chosen < 0)
            continue
        # keep at most pool[v] of the rows that picked v, chosen at random
        order = np.lexsort((rng.random(len(rows)), pick))
        rows, pick = rows[order], pick[order]
        rank = np.arange(len(pick)) - np.searchsorted(pick, pick, side="left")
        keep = rank < np.ceil(pool[pick])
        chosen[rows[keep]] = pick[keep]
        pool -= np.bincount(pick[keep], minlength=len(values))
        pending = np.flatnonzero(chosen < 0)
    if len(pending):
        w = weights[pending]
        drawable = w.sum(axis=1) > 0
        chosen[pending[drawable]] = _draw(w[drawable], rng)
    out = np.full(batch, MISSING, dtype=np.int32)
    out[chosen >= 0] = values[chosen[chosen >= 0]]
    return out


def _draw(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Index of one weighted draw per row (every row has a positive total)."""
    cumulative = np.cumsum(weights, axis=1)
    target = rng.random(len(weights)) * cumulative[:, -1]
    return np.minimum((cumulative < target[:, None]).sum(axis=1), weights.shape[1] - 1)


def synthesize_records(
    aggregates: DpAggregates,
    number_of_records: int,
    *,
    rng: np.random.Generator,
    weight_selection_percentile: float = 95.0,
    longest_only: bool = True,
    use_synthetic_counts: bool = False,
    keep_partial_records: bool = False,
    max_attempts: int = 4,
) -> tuple[np.ndarray, int]:
    """(records, discarded): `number_of_records` rows of int32 attribute codes, and how many partial
    records were thrown away.

    A record that got stuck (some column had no value that the aggregates allow) is MISSING there. With
    `keep_partial_records` it is kept as in the showcase. Otherwise it is discarded, its values go back
    to the pools and another record is drawn, while that pays: up to `max_attempts` * number_of_records
    draws in all, and only while at least 1 draw in 10 completes. Any shortfall is then filled with
    partial records (wide tables with sparse aggregates cannot be completed without inventing a
    combination the aggregates lack).
    """
    d = len(aggregates.cardinalities)
    r = aggregates.reporting_length
    if d == 0 or number_of_records == 0:
        return np.full((number_of_records if d else 0, d), MISSING, dtype=np.int32), 0
    counts = _Counts(aggregates, use_synthetic_counts)
    remaining = [np.zeros(int(aggregates.cardinalities[c])) for c in range(d)]
    for c in range(d):
        table = aggregates.tables[(c,)]
        remaining[c][table.keys] = table.counts
    initial = [x.copy() for x in remaining]
    widest = max(len(aggregates.tables[(c,)]) for c in range(d))
    subsets_per_step = sum(math.comb(d - 1, j) for j in range(min(r - 1, d - 1) + 1))
    batch_size = max(16, _BATCH_CELLS // max(widest * subsets_per_step, 1))
    kept: list[np.ndarray] = []
    spare_partial: list[np.ndarray] = []  # drawn partial records, the fallback when redrawing does not pay
    produced = drawn = discarded = spare = 0
    redraw = not keep_partial_records
    while produced < number_of_records and drawn < max_attempts * number_of_records:
        wanted = number_of_records - produced
        size = min(batch_size, max(16, wanted + wanted // 8) if redraw and discarded else wanted)
        codes = np.full((size, d), MISSING, dtype=np.int32)
        order = rng.permutation(d)
        for step, column in enumerate(order):
            prior = sorted(int(c) for c in order[:step])
            codes[:, column] = _sample_column(
                codes,
                prior,
                int(column),
                counts,
                remaining[column],
                r,
                weight_selection_percentile,
                longest_only,
                rng,
            )
            sampled = codes[:, column]
            remaining[column] -= np.bincount(sampled[sampled >= 0], minlength=len(remaining[column]))
            if (remaining[column] <= 0).all():
                # the pool of this column is spent: start it over (target row count beyond the aggregates)
                remaining[column] += initial[column]
        drawn += size
        if redraw:
            partial = (codes == MISSING).any(axis=1)
            for column in range(d):
                back = codes[partial, column]
                remaining[column] += np.bincount(back[back >= 0], minlength=len(remaining[column]))
            discarded += int(partial.sum())
            if spare < number_of_records:
                spare_partial.append(codes[partial][: number_of_records - spare])
                spare += len(spare_partial[-1])
            codes = codes[~partial]
            if drawn >= 1000 and discarded > 0.9 * drawn:
                # fewer than 1 in 10 draws completes: redrawing would cost 10x for little; keep partials
                redraw = False
        codes = codes[:wanted]
        counts.record(codes)
        kept.append(codes)
        produced += len(codes)
    if produced < number_of_records and spare_partial:
        # out of attempts: fill up with partial records drawn earlier (their values go back to use)
        fill = np.concatenate(spare_partial)[: number_of_records - produced]
        discarded -= len(fill)
        counts.record(fill)
        kept.append(fill)
    return np.concatenate(kept) if kept else np.empty((0, d), dtype=np.int32), discarded
