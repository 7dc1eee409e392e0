"""DP aggregates of k-tuples (k = 1..R) of categorical attributes.

Input: an (n, d) int32 matrix of attribute codes (column j's values are 0..cardinality_j-1; null is a
value like any other), optionally an entity id per row. A k-tuple is a combination of values of k distinct
columns. For every column subset T (sorted column indices) the tuples are packed into int64 keys in mixed
radix, key = sum_j code[T_j] * stride_j, so counting is `np.bincount` over positions and lookups are a dense
gather or a `np.searchsorted`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np

from .accounting import BudgetSplit, adaptive_threshold, length1_threshold
from .noise import NoiseSource
from .params import DpError, DpParams

# A table gets a dense position index when its key space is small compared with its keys (or tiny):
# then dense memory stays within a few times the sorted keys' own, and at most ~12 MB per table.
_DENSE_ALWAYS = 1 << 16
_DENSE_MAX = 1 << 20
_DENSE_SPARSITY = 4
# Rows per chunk are chosen so that a chunk's (rows x subsets) position matrix stays near this size.
_CHUNK_CELLS = 1 << 21


class CombinationTable:
    """The k-tuples of one column subset that are present, with their counts, in packed-key form."""

    __slots__ = ("columns", "counts", "keys", "radices", "strides", "_dense", "_dense_counts")

    def __init__(self, columns: tuple[int, ...], radices: np.ndarray, keys: np.ndarray, counts: np.ndarray):
        self.columns = columns
        self.radices = radices.astype(np.int64)
        self.strides = strides_for(self.radices)
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.counts = counts[order]
        space = int(np.prod(self.radices, dtype=np.float64))
        self._dense = None
        self._dense_counts = None
        if space <= _DENSE_MAX and (space <= _DENSE_ALWAYS or space <= _DENSE_SPARSITY * len(self.keys)):
            dense = np.full(space, -1, dtype=np.int32 if len(self.keys) < 2**31 else np.int64)
            dense[self.keys] = np.arange(len(self.keys))
            self._dense = dense

    def __len__(self) -> int:
        return len(self.keys)

    def positions(self, keys: np.ndarray) -> np.ndarray:
        """Index of each key in this table, -1 where absent (keys outside the key space must not occur)."""
        if self._dense is not None:
            return self._dense[keys]
        if len(self.keys) == 0:
            return np.full(keys.shape, -1, dtype=np.int64)
        pos = np.searchsorted(self.keys, keys)
        np.minimum(pos, len(self.keys) - 1, out=pos)
        return np.where(self.keys[pos] == keys, pos, -1)

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        """Count of each key, 0 where absent."""
        if self._dense is not None:
            if self._dense_counts is None:
                dense_counts = np.zeros(len(self._dense))
                dense_counts[self.keys] = self.counts
                self._dense_counts = dense_counts
            return self._dense_counts[keys]
        pos = self.positions(keys)
        return np.where(pos >= 0, self.counts[np.maximum(pos, 0)], 0)

    def digits(self) -> np.ndarray:
        """(len(columns), len(keys)) codes of every key."""
        return (self.keys[None, :] // self.strides[:, None]) % self.radices[:, None]


def strides_for(radices: np.ndarray) -> np.ndarray:
    if float(np.prod(radices, dtype=np.float64)) >= 2.0**62:
        raise DpError(
            f"the combination key space {radices.tolist()} does not fit 62 bits: lower reporting_length "
            "or bin the high-cardinality columns more coarsely"
        )
    return np.concatenate(([1], np.cumprod(radices[:-1]))).astype(np.int64)


def pack(codes: np.ndarray, columns: tuple[int, ...], strides: np.ndarray) -> np.ndarray:
    """Keys of the rows of `codes` (rows x all columns) for the column subset `columns`."""
    key = codes[:, columns[0]].astype(np.int64)
    for column, stride in zip(columns[1:], strides[1:], strict=True):
        key = key + codes[:, column].astype(np.int64) * stride
    return key


@dataclass
class LengthReport:
    """What happened at one length k (all of it DP: derived from noisy values or public parameters)."""

    length: int
    allowed_sensitivity: int
    sensitivity_bound: int
    threshold: float
    noise_std: float
    candidates: int
    survivors: int


@dataclass
class DpAggregates:
    """Noisy, thresholded, rounded and normalized k-tuple counts: the only input of synthesis."""

    cardinalities: np.ndarray
    reporting_length: int
    tables: dict[tuple[int, ...], CombinationTable]
    protected_records: int
    lengths: list[LengthReport] = field(default_factory=list)

    def table(self, columns: tuple[int, ...]) -> CombinationTable:
        return self.tables[columns]

    def count_by_length(self) -> dict[int, int]:
        out: dict[int, int] = {}
        for columns, table in self.tables.items():
            out[len(columns)] = out.get(len(columns), 0) + len(table)
        return out


def canonical_row_order(codes: np.ndarray, entities: np.ndarray | None) -> np.ndarray:
    """A row order that depends only on the multiset of rows, so randomness indexed by position (which
    tuples a capped record keeps) does not depend on the order the warehouse returned the rows in."""
    keys = [codes[:, j] for j in range(codes.shape[1] - 1, -1, -1)]
    if entities is not None:
        keys.append(entities)
    return np.lexsort(keys) if keys else np.arange(len(codes))


def dp_percentile(
    sensitivities: np.ndarray, upper_bound: int, percentage: float, epsilon: float, stream
) -> int:
    """Exponential mechanism (report noisy max with exponential noise) for the `percentage` percentile.

    Candidate c in 0..upper_bound (a public bound) scores -|#{s <= c} - q n| - c/epsilon; adding or
    removing one record moves that by at most max(q, 1-q) <= 1, so exponential noise of scale 2/epsilon
    makes the choice epsilon-DP. The data-independent -c/epsilon term breaks the tie on the plateau above
    the largest sensitivity (every c there scores the same), where the noise alone would pick a uniformly
    random, far too large bound; it favours the smallest c whenever fewer than 1/epsilon records sit at
    one value (so in sparse tails the cap errs low: more records are capped, none gets more room).
    """
    clipped = np.minimum(sensitivities, upper_bound)
    at_most = np.cumsum(np.bincount(clipped, minlength=upper_bound + 1))
    scores = -np.abs(at_most - percentage / 100.0 * len(sensitivities)) - np.arange(upper_bound + 1) / epsilon
    noisy = scores + stream.exponentials(upper_bound + 1) * (2.0 / epsilon)
    return int(np.argmax(noisy))


class _Records:
    """Row chunks over which per-record tuple sets are built; with entities, chunks end at entity
    boundaries and each entity's distinct tuples count once."""

    def __init__(self, codes: np.ndarray, entities: np.ndarray | None):
        self.codes = codes
        self.entity_of_row = entities
        if entities is None:
            self.count = len(codes)
            self._starts = None
        else:
            boundaries = np.flatnonzero(np.diff(entities)) + 1
            self._starts = np.concatenate(([0], boundaries))
            self.count = len(self._starts) if len(codes) else 0

    def chunks(self, subsets: int):
        n = len(self.codes)
        step = max(1, _CHUNK_CELLS // max(subsets, 1))
        start = 0
        while start < n:
            stop = min(n, start + step)
            if self._starts is not None and stop < n:
                # extend to the next entity boundary
                nxt = np.searchsorted(self._starts, stop, side="left")
                stop = int(self._starts[nxt]) if nxt < len(self._starts) else n
            yield start, stop
            start = stop

    def record_ids(self, start: int, stop: int) -> np.ndarray:
        if self._starts is None:
            return np.arange(start, stop)
        return np.searchsorted(self._starts, np.arange(start, stop), side="right") - 1


def _candidate_tables(
    k: int,
    subsets: list[tuple[int, ...]],
    codes: np.ndarray,
    radices: np.ndarray,
    survivors: dict[tuple[int, ...], np.ndarray],
) -> dict[tuple[int, ...], CombinationTable]:
    """Candidates of length k: observed values for k = 1; for k >= 2, tuples whose every (k-1)-sub-tuple
    survived (unseen combinations included: they start at 0, which is how fabrication can happen)."""
    out: dict[tuple[int, ...], CombinationTable] = {}
    for subset in subsets:
        sub_radices = radices[list(subset)]
        if k == 1:
            keys = np.unique(codes[:, subset[0]]).astype(np.int64)
        else:
            prefix, last = subset[:-1], subset[-1]
            prefix_keys = survivors[prefix]
            last_values = survivors[(last,)]
            stride_last = int(np.prod(sub_radices[:-1], dtype=np.int64))
            keys = (prefix_keys[:, None] + last_values[None, :] * stride_last).ravel()
            if len(keys):
                strides = strides_for(sub_radices)
                digits = (keys[None, :] // strides[:, None]) % sub_radices[:, None]
                for drop in range(k - 1):
                    rest = tuple(c for i, c in enumerate(subset) if i != drop)
                    rest_idx = [i for i in range(k) if i != drop]
                    rest_strides = strides_for(sub_radices[rest_idx])
                    rest_keys = (digits[rest_idx] * rest_strides[:, None]).sum(axis=0)
                    keep = np.isin(rest_keys, survivors[rest], assume_unique=False)
                    keys, digits = keys[keep], digits[:, keep]
                    if not len(keys):
                        break
        out[subset] = CombinationTable(subset, sub_radices, keys, np.zeros(len(keys)))
    return out


def _count_length(
    records: _Records,
    candidates: dict[tuple[int, ...], CombinationTable],
    sensitivity_bound: int,
    params: DpParams,
    budget: BudgetSplit,
    noise: NoiseSource,
    k: int,
) -> tuple[np.ndarray, int]:
    """True counts of all candidates of length k (concatenated in `candidates` order), each record
    contributing at most Delta_k distinct tuples chosen at random; returns (counts, Delta_k)."""
    subsets = list(candidates)
    offsets = np.concatenate(([0], np.cumsum([len(candidates[s]) for s in subsets]))).astype(np.int64)
    total = int(offsets[-1])
    position_dtype = np.int32 if total < 2**31 else np.int64

    def chunk_positions(start: int, stop: int) -> np.ndarray:
        """(rows, subsets) global candidate index of each row's tuple, -1 where it is no candidate."""
        block = records.codes[start:stop]
        # column-major: each subset's column is written contiguously
        pos = np.empty((stop - start, len(subsets)), dtype=position_dtype, order="F")
        for j, subset in enumerate(subsets):
            table = candidates[subset]
            p = table.positions(pack(block, subset, table.strides))
            np.add(p, offsets[j], out=pos[:, j], casting="unsafe")
            pos[p < 0, j] = -1
        return pos

    def chunk_pairs(start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        """(record id, global candidate index) of each distinct valid tuple of the chunk's records."""
        pos = chunk_positions(start, stop)
        rec = np.broadcast_to(records.record_ids(start, stop)[:, None], pos.shape)
        valid = pos >= 0
        rec, pos = rec[valid], pos[valid]
        if records.entity_of_row is not None:
            pair = np.unique(rec.astype(np.int64) * max(total, 1) + pos)
            rec, pos = pair // max(total, 1), pair % max(total, 1)
        return rec, pos

    counts = np.zeros(total, dtype=np.float64)
    sensitivities = np.zeros(records.count, dtype=np.int64)
    for start, stop in records.chunks(len(subsets)):
        if records.entity_of_row is None:
            # a row is a record and its tuples are distinct (one per column subset): no pairs needed
            pos = chunk_positions(start, stop)
            valid = pos >= 0
            counts += np.bincount(pos[valid], minlength=total)
            sensitivities[start:stop] = valid.sum(axis=1)
        else:
            rec, pos = chunk_pairs(start, stop)
            counts += np.bincount(pos, minlength=total)
            sensitivities += np.bincount(rec, minlength=records.count)
    allowed = dp_percentile(
        sensitivities,
        sensitivity_bound,
        params.percentile_percentage,
        budget.percentile_epsilon,
        noise.stream("percentile", k),
    )
    allowed = max(allowed, 1)
    if records.count and allowed < int(sensitivities.max()):
        # Only records above the cap change: each keeps `allowed` of its tuples, chosen by random priority.
        rng = noise.stream("contribution choice", k).generator()
        counts[:] = 0
        over = sensitivities > allowed
        for start, stop in records.chunks(len(subsets)):
            if records.entity_of_row is None:
                pos = chunk_positions(start, stop)
                capped = over[start:stop]
                under = pos[~capped]
                counts += np.bincount(under[under >= 0], minlength=total)
                pos = pos[capped]
                if not len(pos):
                    continue
                priority = np.where(pos >= 0, rng.random(pos.shape), np.inf)
                cut = np.partition(priority, allowed - 1, axis=1)[:, allowed - 1 : allowed]
                counts += np.bincount(pos[priority <= cut], minlength=total)
            else:
                rec, pos = chunk_pairs(start, stop)
                capped = over[rec]
                counts += np.bincount(pos[~capped], minlength=total)
                rec, pos = rec[capped], pos[capped]
                order = np.lexsort((rng.random(len(rec)), rec))
                rec, pos = rec[order], pos[order]
                first = np.searchsorted(rec, rec, side="left")
                keep = (np.arange(len(rec)) - first) < allowed
                counts += np.bincount(pos[keep], minlength=total)
    return counts, allowed


def _postprocess(
    survivors: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]], radices: np.ndarray, r: int
) -> dict[tuple[int, ...], CombinationTable]:
    """Round, drop zeros, re-add missing sub-tuples with their largest child's count, and clamp every
    k-tuple to its (k-1)-sub-tuples so no tuple is counted more often than a part of it."""
    rounded: dict[tuple[int, ...], dict[str, np.ndarray]] = {}
    for subset, (keys, noisy) in survivors.items():
        c = np.rint(noisy)
        keep = c > 0
        rounded[subset] = {"keys": keys[keep], "counts": c[keep]}

    def project(subset, keys, drop):
        sub_radices = radices[list(subset)]
        strides = strides_for(sub_radices)
        digits = (keys[None, :] // strides[:, None]) % sub_radices[:, None]
        rest_idx = [i for i in range(len(subset)) if i != drop]
        return (digits[rest_idx] * strides_for(sub_radices[rest_idx])[:, None]).sum(axis=0)

    for k in range(r, 1, -1):
        for subset in [s for s in rounded if len(s) == k]:
            keys, counts = rounded[subset]["keys"], rounded[subset]["counts"]
            if not len(keys):
                continue
            for drop in range(k):
                parent = tuple(c for i, c in enumerate(subset) if i != drop)
                parent_keys = project(subset, keys, drop)
                uniq, inverse = np.unique(parent_keys, return_inverse=True)
                max_child = np.full(len(uniq), -np.inf)
                np.maximum.at(max_child, inverse, counts)
                have = rounded[parent]["keys"]
                missing = ~np.isin(uniq, have)
                if missing.any():
                    rounded[parent]["keys"] = np.concatenate((have, uniq[missing]))
                    rounded[parent]["counts"] = np.concatenate(
                        (rounded[parent]["counts"], max_child[missing])
                    )

    tables = {
        s: CombinationTable(s, radices[list(s)], v["keys"], v["counts"])
        for s, v in rounded.items()
        if len(s) == 1
    }
    for k in range(2, r + 1):
        for subset in [s for s in rounded if len(s) == k]:
            keys, counts = rounded[subset]["keys"], rounded[subset]["counts"].copy()
            for drop in range(k):
                parent = tuple(c for i, c in enumerate(subset) if i != drop)
                np.minimum(counts, tables[parent].lookup(project(subset, keys, drop)), out=counts)
            tables[subset] = CombinationTable(subset, radices[list(subset)], keys, counts)
    return tables


def aggregate(
    codes: np.ndarray,
    cardinalities: np.ndarray,
    *,
    params: DpParams,
    budget: BudgetSplit,
    protected_records: int,
    noise: NoiseSource,
    entities: np.ndarray | None = None,
) -> DpAggregates:
    """DP k-tuple counts for k = 1..R (the seed's algorithm; see accounting.py for the guarantee).

    `codes` must be in canonical row order (see `canonical_row_order`) and, with `entities`, grouped by
    entity; `budget` must come from `split_budget` for the same params.
    """
    n, d = codes.shape
    r = min(params.reporting_length, d)
    radices = np.maximum(np.asarray(cardinalities, dtype=np.int64), 1)
    records = _Records(codes, entities)
    threshold_kind, threshold_values = params.resolved_thresholds()
    survivors_keys: dict[tuple[int, ...], np.ndarray] = {}
    survivors: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}
    reports: list[LengthReport] = []
    for k in range(1, r + 1):
        subsets = list(itertools.combinations(range(d), k))
        candidates = _candidate_tables(k, subsets, codes, radices, survivors_keys)
        rows_bound = 1 if entities is None else params.max_rows_per_entity
        sensitivity_bound = math.comb(d, k) * rows_bound
        counts, allowed = _count_length(records, candidates, sensitivity_bound, params, budget, noise, k)
        sigma = budget.sigmas[k - 1]
        std = sigma * math.sqrt(allowed)
        if k == 1:
            threshold = length1_threshold(sigma, allowed, budget.delta)
        elif threshold_kind == "fixed":
            threshold = threshold_values[k]
        else:
            threshold = adaptive_threshold(sigma, allowed, threshold_values[k])
        offset = 0
        kept = 0
        for subset, table in candidates.items():
            m = len(table)
            noisy = counts[offset : offset + m] + std * noise.stream("gaussian", k, subset).gaussians(m)
            offset += m
            keep = (noisy > threshold) & (noisy > 0)
            survivors_keys[subset] = table.keys[keep]
            survivors[subset] = (table.keys[keep], noisy[keep])
            kept += int(keep.sum())
        reports.append(
            LengthReport(k, allowed, sensitivity_bound, float(threshold), float(std), len(counts), kept)
        )
    tables = _postprocess(survivors, radices, r)
    return DpAggregates(radices, r, tables, protected_records, reports)
