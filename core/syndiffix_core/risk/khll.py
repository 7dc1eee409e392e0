"""KHyperLogLog (KHLL): uniqueness distribution and joinability of a column (or column set) in one pass.

Level 1 is a K-minimum-values sample of the column's value hashes: the K smallest distinct hashes are a
uniform random sample of the distinct values, and the K-th smallest gives the number of distinct values
(Beyer et al.'s unbiased ``(K - 1) / u_K``). Level 2 keeps, for every sampled value, a HyperLogLog of the
ids (the protected entities) seen with it: an exact set up to ``sparse_limit`` ids, dense registers
beyond (see ``hll.py``). Two global HyperLogLogs count the distinct ids and the distinct (value, id)
pairs.

Everything is held as flat numpy arrays (sorted keys, a (dense values x m) register matrix, sorted
(value, id) pairs for sparse values), so ingestion and merging are vectorized. The state is a function
of the set of (value hash, id hash) pairs seen, never of their order or sharding: a value's id set turns
dense exactly when it exceeds ``sparse_limit`` distinct ids, and registers are maxima. Merging per-chunk
sketches therefore gives a sketch equal, array for array, to the one built on the whole input.

Defaults, and why they differ from the paper's K = 2048: the first level's relative standard error is
about 1 / sqrt(K - 2) and the error of a share of sampled values (re-identification potential) about
0.5 / sqrt(K). K = 4096 makes those 1.6% and 0.8 percentage points, leaving about two standard errors of
headroom under a 3% distinct-count and a 2-point potential target (K = 2048: 2.2% and 1.1 points, about
1.4 and 1.8 standard errors). Presto also uses K = 4096. The per-value HLL keeps the paper's m = 1024
(p = 10): counts up to 128 ids are exact, larger ones carry ~3% error, which no privacy threshold feels.
The global id counter uses p = 14 (0.8% error, 16 KiB) since there is only one per sketch.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import numpy as np

from syndiffix_core.risk.hll import (
    HyperLogLog,
    check_precision,
    estimate_from_registers,
    register_updates,
    sorted_unique,
)

__all__ = ["DEFAULT_HLL_PRECISION", "DEFAULT_ID_PRECISION", "DEFAULT_K", "KHyperLogLog", "SetOverlap"]

DEFAULT_K = 4096
DEFAULT_HLL_PRECISION = 10
DEFAULT_ID_PRECISION = 14

_UINT64_MAX = np.uint64(0xFFFFFFFFFFFFFFFF)
_MAGIC = b"KHLL"
_FORMAT_VERSION = 1
# magic, version, k, hll precision, id precision, sparse limit, #keys, #dense keys, #sparse pairs,
# bytes of the id HLL, bytes of the (value, id) pair HLL
_HEADER = struct.Struct("<4sBIBBIIIIII")


@dataclass(frozen=True)
class SetOverlap:
    """Overlap of two sketches' value sets, from their coordinated samples (theta-sketch style)."""

    containment_of_first: float  # share of the first sketch's distinct values also in the second
    containment_of_second: float  # share of the second sketch's distinct values also in the first
    jaccard: float
    intersection: float  # estimated number of distinct values in both
    sample_size: int  # values of the two samples in the common hash range; the estimates' precision


def _registers_of_groups(group: np.ndarray, id_hashes: np.ndarray, groups: int, precision: int) -> np.ndarray:
    """(groups, m) registers of id hashes, each added to the group of the same position."""
    m = 1 << precision
    registers = np.zeros(groups * m, dtype=np.uint8)
    index, rank = register_updates(id_hashes, precision)
    np.maximum.at(registers, group.astype(np.intp) * m + index, rank)
    return registers.reshape(groups, m)


def _add_to_registers(registers: np.ndarray, row: np.ndarray, id_hashes: np.ndarray, precision: int) -> None:
    index, rank = register_updates(id_hashes, precision)
    np.maximum.at(registers.reshape(-1), row.astype(np.intp) * registers.shape[1] + index, rank)


def _member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """values[i] in sorted_set, by binary search (``np.isin`` sorts both sides every time)."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    position = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[position] == values


def _group_starts(sorted_values: np.ndarray) -> np.ndarray:
    """Start index of every run of equal values in a sorted array."""
    if len(sorted_values) == 0:
        return np.empty(0, dtype=np.intp)
    return np.concatenate([[0], np.flatnonzero(sorted_values[1:] != sorted_values[:-1]) + 1])


def _small_index_dtype(count: int) -> type:
    """Narrowest unsigned dtype for indices below ``count``: 16-bit keys get numpy's O(n) radix sort."""
    return np.uint16 if count <= 1 << 16 else np.uint32


def _index_table(indices: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(is listed, position in the list) for every index below ``size``: membership as a gather."""
    listed = np.zeros(size, dtype=bool)
    listed[indices] = True
    position = np.zeros(size, dtype=np.intp)
    position[indices] = np.arange(len(indices))
    return listed, position


def _unique_pairs(group: np.ndarray, ids: np.ndarray, groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (group, id) pairs sorted by group then id; ``group`` are ints below ``groups``.

    One 64-bit sort of (group, top bits of id) replaces a two-key lexsort; ids agreeing in those top
    bits stay adjacent and are compared in full, so no distinct pair is lost.
    """
    if len(group) == 0:
        return group, ids
    group_bits = max(1, int(groups - 1).bit_length())
    packed = (group.astype(np.uint64) << np.uint64(64 - group_bits)) | (ids >> np.uint64(group_bits))
    order = np.argsort(packed)
    group, ids = group[order], ids[order]
    first = np.ones(len(group), dtype=bool)
    first[1:] = (group[1:] != group[:-1]) | (ids[1:] != ids[:-1])
    return group[first], ids[first]


class KHyperLogLog:
    """KHLL(K, m) sketch of (value hash, id hash) pairs; see the module docstring."""

    def __init__(
        self,
        k: int = DEFAULT_K,
        hll_precision: int = DEFAULT_HLL_PRECISION,
        id_precision: int = DEFAULT_ID_PRECISION,
        sparse_limit: int | None = None,
    ):
        if not isinstance(k, int | np.integer) or k < 2:
            raise ValueError(f"KHLL k must be an integer >= 2, got {k!r}")
        self.k = int(k)
        self.hll_precision = check_precision(hll_precision)
        self.id_precision = check_precision(id_precision)
        self.sparse_limit = (1 << self.hll_precision) // 8 if sparse_limit is None else int(sparse_limit)
        if self.sparse_limit < 0:
            raise ValueError(f"sparse_limit must be >= 0, got {sparse_limit}")
        self._keys = np.empty(0, dtype=np.uint64)
        self._dense_keys = np.empty(0, dtype=np.uint64)
        self._registers = np.empty((0, 1 << self.hll_precision), dtype=np.uint8)
        self._sparse_keys = np.empty(0, dtype=np.uint64)
        self._sparse_ids = np.empty(0, dtype=np.uint64)
        self._ids = HyperLogLog(self.id_precision)
        self._pairs = HyperLogLog(self.id_precision)

    # ----------------------------------------------------------------------------------- building
    @property
    def params(self) -> tuple[int, int, int, int]:
        return self.k, self.hll_precision, self.id_precision, self.sparse_limit

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.k

    @property
    def threshold(self) -> np.uint64:
        """Largest value hash the sample covers: every distinct value hashing at or below it is kept."""
        return self._keys[-1] if self.is_full else _UINT64_MAX

    def update(self, value_hashes: np.ndarray, id_hashes: np.ndarray) -> KHyperLogLog:
        """Ingest (value hash, id hash) pairs, e.g. one chunk of a table. Returns self."""
        value_hashes = np.asarray(value_hashes, dtype=np.uint64).ravel()
        id_hashes = np.asarray(id_hashes, dtype=np.uint64).ravel()
        if len(value_hashes) != len(id_hashes):
            raise ValueError(f"{len(value_hashes)} value hashes but {len(id_hashes)} id hashes")
        self._ids.update(id_hashes)
        # Value and id hashes are independent and uniform, so their xor is a uniform hash of the pair.
        self._pairs.update(value_hashes ^ id_hashes)
        if self.is_full:
            keep = value_hashes <= self.threshold
            value_hashes, id_hashes = value_hashes[keep], id_hashes[keep]
        elif len(value_hashes) > 8 * self.k:
            # If the 4K smallest rows already hold K distinct values, no larger row can enter level 1:
            # a partition then replaces sorting a large chunk of a high-cardinality column.
            bound = np.partition(value_hashes, 4 * self.k)[4 * self.k]
            keep = value_hashes <= bound
            if len(sorted_unique(value_hashes[keep])) >= self.k:
                value_hashes, id_hashes = value_hashes[keep], id_hashes[keep]
        order = np.argsort(value_hashes)
        self._absorb(value_hashes[order], id_hashes[order], self._dense_keys[:0], self._registers[:0])
        return self

    def merge(self, other: KHyperLogLog) -> KHyperLogLog:
        """A new sketch of the union of both inputs. Uses the smaller K, so no resolution is invented."""
        if (self.hll_precision, self.id_precision, self.sparse_limit) != (
            other.hll_precision,
            other.id_precision,
            other.sparse_limit,
        ):
            raise ValueError(
                "cannot merge KHLL sketches with different (hll_precision, id_precision, sparse_limit): "
                f"{self.params[1:]} vs {other.params[1:]}"
            )
        result = KHyperLogLog(min(self.k, other.k), self.hll_precision, self.id_precision, self.sparse_limit)
        for part in (self, other):
            result._ids = result._ids.merge(part._ids)
            result._pairs = result._pairs.merge(part._pairs)
            result._absorb(part._sparse_keys, part._sparse_ids, part._dense_keys, part._registers)
        return result

    def _absorb(
        self,
        pair_keys: np.ndarray,
        pair_ids: np.ndarray,
        dense_keys: np.ndarray,
        dense_registers: np.ndarray,
    ) -> None:
        """Fold (value, id) pairs, sorted by value (duplicates allowed), and dense per-value registers
        (sorted by value) into the sketch."""
        m = 1 << self.hll_precision
        starts = _group_starts(pair_keys)
        incoming_values = pair_keys[starts]

        # Level 1: the K smallest distinct value hashes of everything seen.
        keys = sorted_unique(np.concatenate([self._keys, incoming_values, dense_keys]))[: self.k]
        if len(keys) >= self.k:
            limit = keys[-1]
            cut = np.searchsorted(pair_keys, limit, side="right")
            pair_keys, pair_ids = pair_keys[:cut], pair_ids[:cut]
            kept_groups = np.searchsorted(incoming_values, limit, side="right")
            incoming_values, starts = incoming_values[:kept_groups], starts[:kept_groups]
            cut = np.searchsorted(dense_keys, limit, side="right")
            dense_keys, dense_registers = dense_keys[:cut], dense_registers[:cut]
            cut = np.searchsorted(self._dense_keys, limit, side="right")
            self._dense_keys, self._registers = self._dense_keys[:cut], self._registers[:cut]
            cut = np.searchsorted(self._sparse_keys, limit, side="right")
            self._sparse_keys, self._sparse_ids = self._sparse_keys[:cut], self._sparse_ids[:cut]
        self._keys = keys
        group_sizes = np.diff(np.append(starts, len(pair_keys)))

        # Dense values: the union of both sides' dense sets, registers combined by maximum.
        all_dense = sorted_unique(np.concatenate([self._dense_keys, dense_keys]))
        registers = np.zeros((len(all_dense), m), dtype=np.uint8)
        registers[np.searchsorted(all_dense, self._dense_keys)] = self._registers
        rows = np.searchsorted(all_dense, dense_keys)
        registers[rows] = np.maximum(registers[rows], dense_registers)

        # From here on values are addressed by their index in `keys` (< K), so lookups are gathers.
        n = len(keys)
        is_dense, dense_row = _index_table(np.searchsorted(keys, all_dense), n)
        stored_index = np.searchsorted(keys, self._sparse_keys)
        stored_ids = self._sparse_ids
        group_index = np.searchsorted(keys, incoming_values)

        # Stored sparse pairs of values the other side has as dense join those registers.
        now_dense = is_dense[stored_index]
        if now_dense.any():
            _add_to_registers(
                registers, dense_row[stored_index[now_dense]], stored_ids[now_dense], self.hll_precision
            )
            stored_index, stored_ids = stored_index[~now_dense], stored_ids[~now_dense]

        # Incoming pairs of dense values go straight into their registers.
        group_is_dense = is_dense[group_index]
        row_is_dense = np.repeat(group_is_dense, group_sizes)
        if group_is_dense.any():
            _add_to_registers(
                registers,
                np.repeat(dense_row[group_index[group_is_dense]], group_sizes[group_is_dense]),
                pair_ids[row_is_dense],
                self.hll_precision,
            )

        # Sparse values touched by incoming pairs: re-collect their exact id sets.
        is_touched = _index_table(group_index[~group_is_dense], n)[0]
        stored_touched = is_touched[stored_index]
        index = np.concatenate(
            [
                np.repeat(group_index[~group_is_dense], group_sizes[~group_is_dense]),
                stored_index[stored_touched],
            ]
        )
        ids = np.concatenate([pair_ids[~row_is_dense], stored_ids[stored_touched]])
        untouched_index, untouched_ids = stored_index[~stored_touched], stored_ids[~stored_touched]

        promoted_index, promoted_registers = [], []
        heavy = np.flatnonzero(np.bincount(index, minlength=n) > self.sparse_limit)
        if len(heavy):
            # More occupied registers than sparse_limit proves more distinct ids than sparse_limit, without
            # sorting the (possibly many) rows of a frequent value.
            is_heavy, heavy_row = _index_table(heavy, n)
            rows = is_heavy[index]
            heavy_registers = _registers_of_groups(
                heavy_row[index[rows]], ids[rows], len(heavy), self.hll_precision
            )
            proven = np.count_nonzero(heavy_registers, axis=1) > self.sparse_limit
            promoted_index.append(heavy[proven])
            promoted_registers.append(heavy_registers[proven])
            keep = ~_index_table(heavy[proven], n)[0][index]
            index, ids = index[keep], ids[keep]

        index, ids = _unique_pairs(index, ids, n)
        over = np.flatnonzero(np.bincount(index, minlength=n) > self.sparse_limit)
        if len(over):
            is_over, over_row = _index_table(over, n)
            rows = is_over[index]
            promoted_index.append(over)
            promoted_registers.append(
                _registers_of_groups(over_row[index[rows]], ids[rows], len(over), self.hll_precision)
            )
            index, ids = index[~rows], ids[~rows]

        # Both runs are sorted by (value, id) and share no value: a stable sort by value merges them.
        index = np.concatenate([untouched_index, index])
        ids = np.concatenate([untouched_ids, ids])
        order = np.argsort(index.astype(_small_index_dtype(n)), kind="stable")
        self._sparse_keys, self._sparse_ids = keys[index[order]], ids[order]

        if promoted_index:
            all_dense = np.concatenate([all_dense, keys[np.concatenate(promoted_index)]])
            registers = np.concatenate([registers, *promoted_registers])
            order = np.argsort(all_dense)
            all_dense, registers = all_dense[order], registers[order]
        self._dense_keys, self._registers = all_dense, registers

    # ---------------------------------------------------------------------------------- estimates
    @property
    def sample_size(self) -> int:
        """Number of distinct values sampled (all of them while the sketch is exact)."""
        return len(self._keys)

    @property
    def is_exact(self) -> bool:
        """True while fewer than K distinct values were seen: level 1 then holds every value."""
        return not self.is_full

    def distinct_values(self) -> float:
        """Estimated number of distinct values (exact while ``is_exact``)."""
        if not self.is_full:
            return float(len(self._keys))
        return (self.k - 1) / ((float(self.threshold) + 1.0) / 2.0**64)

    def distinct_ids(self) -> float:
        """Estimated number of distinct ids over all values (exact up to the id HLL's sparse limit)."""
        return self._ids.estimate()

    def sampled_values(self) -> tuple[np.ndarray, np.ndarray]:
        """(value hashes, estimated distinct ids of each): the uniform sample behind every estimate."""
        counts = np.zeros(len(self._keys), dtype=np.float64)
        starts = _group_starts(self._sparse_keys)
        sparse_counts = np.diff(np.append(starts, len(self._sparse_keys)))
        counts[np.searchsorted(self._keys, self._sparse_keys[starts])] = sparse_counts
        if len(self._dense_keys):
            dense = estimate_from_registers(self._registers, self.hll_precision)
            # A dense value has, by construction, more than sparse_limit ids.
            counts[np.searchsorted(self._keys, self._dense_keys)] = np.maximum(
                np.rint(dense), self.sparse_limit + 1
            )
        return self._keys.copy(), counts

    def id_counts(self) -> np.ndarray:
        """Estimated distinct ids of each sampled value (see ``sampled_values``)."""
        return self.sampled_values()[1]

    def uniqueness_distribution(self, histogram_size: int = 256) -> np.ndarray:
        """Share of distinct values with exactly i ids at index i - 1, for i < histogram_size; the last
        bucket holds the share with histogram_size ids or more (value-weighted, as in the paper)."""
        if histogram_size < 1:
            raise ValueError(f"histogram_size must be >= 1, got {histogram_size}")
        counts = self.id_counts()
        if len(counts) == 0:
            return np.zeros(histogram_size)
        buckets = np.minimum(counts, histogram_size).astype(np.intp) - 1
        return np.bincount(buckets, minlength=histogram_size) / len(counts)

    def reidentification_potential(self, threshold: int) -> float:
        """Share of distinct values with at most ``threshold`` distinct ids."""
        counts = self.id_counts()
        return float(np.mean(counts <= threshold)) if len(counts) else 0.0

    def id_share(self, threshold: int) -> float:
        """Share of (value, id) associations that fall in values with at most ``threshold`` ids.

        When every id has one value of the column (e.g. one row per person) this is the share of ids
        in such small classes: "the fraction of people in classes of size <= t". While the sketch is
        exact it is computed from all values. Beyond, two estimators compete and the one with the smaller
        estimated variance is returned:
        - the ratio of sums over the sample, precise unless a few very frequent values dominate the
          sample's total (a skewed column);
        - the sample's sum of small classes scaled by distinct values / sample size, over the distinct
          (value, id) pairs counted by a dedicated HLL, which ignores the frequent values' sampling
          luck but carries the errors of both distinct counts.
        """
        counts = self.id_counts()
        small_counts = np.where(counts <= threshold, counts, 0.0)
        if not self.is_full:
            total = counts.sum()
            return float(small_counts.sum() / total) if total else 0.0
        n = len(counts)
        ratio = small_counts.sum() / counts.sum()
        # Delta-method variances of both estimators (finite-population correction left out).
        ratio_variance = np.sum((small_counts - ratio * counts) ** 2) / (n * (n - 1)) / counts.mean() ** 2
        scaled = small_counts.mean() * self.distinct_values() / self.associations()
        pairs_error = 0.0 if self._pairs.is_sparse else 1.04 / np.sqrt(self._pairs.m)
        scaled_relative_variance = (
            small_counts.var(ddof=1) / n / max(small_counts.mean(), 1e-300) ** 2
            + 1.0 / (self.k - 2)
            + pairs_error**2
        )
        best = ratio if ratio_variance <= scaled_relative_variance * scaled**2 else scaled
        return float(min(1.0, best))

    def associations(self) -> float:
        """Estimated number of distinct (value, id) pairs."""
        return self._pairs.estimate()

    def sampled_id_counts_of(self, value_hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For arbitrary value hashes (e.g. of synthetic rows): whether each falls in the hash range the
        sample covers, and the id count of its value in this sketch (0 when absent). Restricting to the
        covered range keeps the rows a uniform sample, so shares over them estimate shares over all."""
        value_hashes = np.asarray(value_hashes, dtype=np.uint64)
        covered = value_hashes <= self.threshold
        keys, counts = self.sampled_values()
        position = np.minimum(np.searchsorted(keys, value_hashes), max(len(keys) - 1, 0))
        found = covered & (len(keys) > 0) & (keys[position] == value_hashes) if len(keys) else covered & False
        return covered, np.where(found, counts[position] if len(keys) else 0.0, 0.0)

    def overlap(self, other: KHyperLogLog) -> SetOverlap:
        """Containment both ways and Jaccard of the two value sets.

        Both samples are complete below min(threshold), so the values there form a coordinated sample of
        both sets: containment is the share of one side's sampled values found in the other side's, which
        stays precise when the sets differ in size (Presto's union-of-first-k Jaccard route does not).
        """
        limit = min(self.threshold, other.threshold)
        mine = self._keys[self._keys <= limit]
        theirs = other._keys[other._keys <= limit]
        both = int(np.count_nonzero(_member(mine, theirs)))
        either = len(mine) + len(theirs) - both
        jaccard = both / either if either else 0.0
        union = self.merge_values_only(other)
        return SetOverlap(
            containment_of_first=both / len(mine) if len(mine) else 0.0,
            containment_of_second=both / len(theirs) if len(theirs) else 0.0,
            jaccard=jaccard,
            intersection=min(jaccard * union, self.distinct_values(), other.distinct_values()),
            sample_size=either,
        )

    def merge_values_only(self, other: KHyperLogLog) -> float:
        """Estimated distinct values of the union (level 1 only: cheap, no id sets merged)."""
        k = min(self.k, other.k)
        keys = sorted_unique(np.concatenate([self._keys, other._keys]))
        limit = min(self.threshold, other.threshold)
        keys = keys[keys <= limit][:k]
        if len(keys) < k:
            return float(len(keys))
        return (k - 1) / ((float(keys[-1]) + 1.0) / 2.0**64)

    def containment_in(self, other: KHyperLogLog) -> float:
        """Share of this sketch's distinct values that also occur in ``other``."""
        return self.overlap(other).containment_of_first

    def jaccard(self, other: KHyperLogLog) -> float:
        return self.overlap(other).jaccard

    # ------------------------------------------------------------------------------ serialization
    def to_bytes(self) -> bytes:
        """Compact, versioned, little-endian bytes; ``from_bytes`` restores an equal sketch."""
        ids_blob = self._ids.to_bytes()
        pairs_blob = self._pairs.to_bytes()
        is_dense = _member(self._keys, self._dense_keys)
        starts = _group_starts(self._sparse_keys)
        sparse_counts = np.diff(np.append(starts, len(self._sparse_keys))).astype("<u4")
        body = b"".join(
            [
                np.diff(self._keys, prepend=np.uint64(0)).astype("<u8").tobytes(),
                np.packbits(is_dense).tobytes(),
                self._registers.tobytes(),
                sparse_counts.tobytes(),
                # Ids ascend within a value; wrapping differences keep them small and compressible.
                np.diff(self._sparse_ids, prepend=np.uint64(0)).astype("<u8").tobytes(),
                ids_blob,
                pairs_blob,
            ]
        )
        header = _HEADER.pack(
            _MAGIC,
            _FORMAT_VERSION,
            self.k,
            self.hll_precision,
            self.id_precision,
            self.sparse_limit,
            len(self._keys),
            len(self._dense_keys),
            len(self._sparse_ids),
            len(ids_blob),
            len(pairs_blob),
        )
        return header + zlib.compress(body, 6)

    @classmethod
    def from_bytes(cls, blob: bytes) -> KHyperLogLog:
        if len(blob) < _HEADER.size or blob[:4] != _MAGIC:
            raise ValueError("not a serialized KHyperLogLog (bad magic or too short)")
        (
            magic,
            version,
            k,
            hll_precision,
            id_precision,
            sparse_limit,
            n_keys,
            n_dense,
            n_pairs,
            n_ids,
            n_assoc,
        ) = _HEADER.unpack_from(blob)
        if version != _FORMAT_VERSION:
            raise ValueError(
                f"unsupported KHyperLogLog format version {version} (this code reads {_FORMAT_VERSION})"
            )
        body = memoryview(zlib.decompress(blob[_HEADER.size :]))
        sketch = cls(k, hll_precision, id_precision, sparse_limit)
        m = 1 << hll_precision
        offset = 0

        def take(size: int) -> memoryview:
            nonlocal offset
            if offset + size > len(body):
                raise ValueError("corrupt KHyperLogLog: body shorter than its header says")
            part = body[offset : offset + size]
            offset += size
            return part

        sketch._keys = np.cumsum(
            np.frombuffer(take(8 * n_keys), dtype="<u8").astype(np.uint64), dtype=np.uint64
        )
        is_dense = np.unpackbits(np.frombuffer(take((n_keys + 7) // 8), dtype=np.uint8), count=n_keys).astype(
            bool
        )
        sketch._dense_keys = sketch._keys[is_dense]
        sketch._registers = np.frombuffer(take(n_dense * m), dtype=np.uint8).reshape(n_dense, m).copy()
        sparse_counts = np.frombuffer(take(4 * (n_keys - n_dense)), dtype="<u4").astype(np.intp)
        sketch._sparse_keys = np.repeat(sketch._keys[~is_dense], sparse_counts)
        sketch._sparse_ids = np.cumsum(
            np.frombuffer(take(8 * n_pairs), dtype="<u8").astype(np.uint64), dtype=np.uint64
        )
        sketch._ids = HyperLogLog.from_bytes(bytes(take(n_ids)))
        sketch._pairs = HyperLogLog.from_bytes(bytes(take(n_assoc)))
        if len(sketch._dense_keys) != n_dense or len(sketch._sparse_keys) != n_pairs or offset != len(body):
            raise ValueError("corrupt KHyperLogLog: sections do not add up")
        return sketch

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, KHyperLogLog):
            return NotImplemented
        return (
            self.params == other.params
            and self._ids == other._ids
            and self._pairs == other._pairs
            and all(
                np.array_equal(a, b)
                for a, b in (
                    (self._keys, other._keys),
                    (self._dense_keys, other._dense_keys),
                    (self._registers, other._registers),
                    (self._sparse_keys, other._sparse_keys),
                    (self._sparse_ids, other._sparse_ids),
                )
            )
        )

    __hash__ = None

    def __repr__(self) -> str:
        return (
            f"KHyperLogLog(k={self.k}, hll_precision={self.hll_precision}, sampled={len(self._keys)}, "
            f"dense={len(self._dense_keys)}, distinct_values~{self.distinct_values():.0f}, "
            f"distinct_ids~{self.distinct_ids():.0f})"
        )
