"""HyperLogLog over 64-bit hashes: an exact sparse set for small cardinalities, dense registers beyond.

Registers follow Flajolet et al.: the top ``p`` bits of a hash pick one of ``m = 2**p`` registers, and
the register keeps the maximum of (trailing zeros of the remaining ``q = 64 - p`` bits) + 1, capped at
``q + 1`` (trailing rather than leading zeros: equally distributed, and cheaper to vectorize). Cardinality is estimated with Ertl's improved estimator ("New cardinality estimation
algorithms for HyperLogLog sketches", 2017, algorithm 6), which is unbiased from 0 to far beyond 2**64
without HLL++'s empirical bias tables or a linear-counting switch-over threshold; its relative
standard error is about 1.04 / sqrt(m).

While a sketch holds at most ``sparse_limit`` distinct hashes it keeps them exactly (a sorted array),
as HLL++'s sparse mode does, so small counts are exact. The default limit, m / 8, is where the sparse
array (8 bytes per hash) reaches the size of the dense registers (1 byte each). Converting is lossless:
the registers of the set are the registers of every hash ever added. The sketch's state is therefore a
function of the set of hashes added, whatever the order or sharding, which makes merges exact.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = [
    "HyperLogLog",
    "estimate_from_registers",
    "register_updates",
    "registers_from_hashes",
    "sorted_unique",
    "trailing_zeros",
]

MIN_PRECISION = 4
MAX_PRECISION = 18
_ALPHA_INF = 1.0 / (2.0 * np.log(2.0))
_MAGIC = b"SXHL"
_FORMAT_VERSION = 1
_HEADER = struct.Struct("<4sBBIBI")  # magic, version, precision, sparse_limit, mode, item count
_MODE_SPARSE = 0
_MODE_DENSE = 1


def check_precision(precision: int) -> int:
    if not isinstance(precision, int | np.integer) or not MIN_PRECISION <= precision <= MAX_PRECISION:
        raise ValueError(
            f"HLL precision must be an integer in [{MIN_PRECISION}, {MAX_PRECISION}], got {precision!r}"
        )
    return int(precision)


def sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values. ``np.unique`` is avoided: its hash-based path is slow on 64-bit hashes."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    first = np.empty(len(ordered), dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


def trailing_zeros(words: np.ndarray) -> np.ndarray:
    """Trailing zero bits of uint64 words (64 for 0), as uint8."""
    lowest_bit = words & (~words + np.uint64(1))
    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        return np.bitwise_count(lowest_bit - np.uint64(1))
    exponent = np.frexp(lowest_bit.astype(np.float64))[1]  # a power of two converts exactly
    return np.where(lowest_bit == 0, 64, exponent - 1).astype(np.uint8)


def register_updates(hashes: np.ndarray, precision: int) -> tuple[np.ndarray, np.ndarray]:
    """(register index, register value) of every hash: the top ``precision`` bits pick the register, the
    value is 1 + the trailing zeros of the remaining ``q = 64 - precision`` bits, capped at q + 1."""
    hashes = np.asarray(hashes, dtype=np.uint64)
    remaining_bits = 64 - precision
    index = (hashes >> np.uint64(remaining_bits)).astype(np.intp)
    rank = np.minimum(trailing_zeros(hashes), np.uint8(remaining_bits)) + np.uint8(1)
    return index, rank


def registers_from_hashes(hashes: np.ndarray, precision: int) -> np.ndarray:
    """Dense registers of a set of hashes."""
    registers = np.zeros(1 << precision, dtype=np.uint8)
    index, rank = register_updates(hashes, precision)
    np.maximum.at(registers, index, rank)
    return registers


def _sigma(x: np.ndarray) -> np.ndarray:
    x = np.array(x, dtype=np.float64, copy=True)
    full = x == 1.0
    x[full] = 0.0
    y = np.ones_like(x)
    z = x.copy()
    while True:
        x *= x
        previous = z.copy()
        z += x * y
        y += y
        if np.array_equal(z, previous):
            break
    z[full] = np.inf
    return z


def _tau(x: np.ndarray) -> np.ndarray:
    x = np.array(x, dtype=np.float64, copy=True)
    edge = (x == 0.0) | (x == 1.0)
    y = np.ones_like(x)
    z = 1.0 - x
    while True:
        x = np.sqrt(x)
        previous = z.copy()
        y *= 0.5
        z -= (1.0 - x) ** 2 * y
        if np.array_equal(z, previous):
            break
    z[edge] = 0.0
    return z / 3.0


def estimate_from_registers(registers: np.ndarray, precision: int) -> np.ndarray | float:
    """Ertl's improved estimate for one register array (m,) or many (n, m); vectorized over rows."""
    registers = np.asarray(registers, dtype=np.uint8)
    single = registers.ndim == 1
    rows = registers.reshape(1, -1) if single else registers
    m = 1 << precision
    if rows.shape[1] != m:
        raise ValueError(f"expected {m} registers per sketch at precision {precision}, got {rows.shape[1]}")
    q = 64 - precision
    levels = q + 2
    offsets = (np.arange(len(rows), dtype=np.intp) * levels)[:, None]
    histogram = np.bincount((rows + offsets).ravel(), minlength=len(rows) * levels).reshape(len(rows), levels)
    histogram = histogram.astype(np.float64)
    z = m * _tau(1.0 - histogram[:, q + 1] / m)
    for k in range(q, 0, -1):
        z = 0.5 * (z + histogram[:, k])
    z = z + m * _sigma(histogram[:, 0] / m)
    estimate = _ALPHA_INF * m * m / z
    return float(estimate[0]) if single else estimate


def _delta_encode(sorted_values: np.ndarray) -> bytes:
    deltas = np.diff(sorted_values, prepend=np.uint64(0))
    return deltas.astype("<u8").tobytes()


def _delta_decode(payload: bytes, count: int) -> np.ndarray:
    deltas = np.frombuffer(payload, dtype="<u8", count=count).astype(np.uint64)
    return np.cumsum(deltas, dtype=np.uint64)


class HyperLogLog:
    """A mergeable distinct counter of 64-bit hashes (see the module docstring)."""

    __slots__ = ("_registers", "_sparse", "precision", "sparse_limit")

    def __init__(self, precision: int = 14, sparse_limit: int | None = None):
        self.precision = check_precision(precision)
        self.sparse_limit = (1 << self.precision) // 8 if sparse_limit is None else int(sparse_limit)
        if self.sparse_limit < 0:
            raise ValueError(f"sparse_limit must be >= 0, got {sparse_limit}")
        self._sparse: np.ndarray | None = np.empty(0, dtype=np.uint64)
        self._registers: np.ndarray | None = None

    @property
    def m(self) -> int:
        return 1 << self.precision

    @property
    def is_sparse(self) -> bool:
        return self._sparse is not None

    def update(self, hashes: np.ndarray) -> HyperLogLog:
        """Add a batch of 64-bit hashes. Returns self."""
        hashes = np.asarray(hashes, dtype=np.uint64).ravel()
        if self._sparse is None:
            index, rank = register_updates(hashes, self.precision)
            np.maximum.at(self._registers, index, rank)
            return self
        if len(hashes) > 4 * self.sparse_limit:
            # Cheap lower bound first: more occupied registers than the limit means more distinct hashes.
            registers = registers_from_hashes(np.concatenate([self._sparse, hashes]), self.precision)
            if np.count_nonzero(registers) > self.sparse_limit:
                self._sparse, self._registers = None, registers
                return self
        merged = sorted_unique(np.concatenate([self._sparse, hashes]))
        if len(merged) > self.sparse_limit:
            self._sparse, self._registers = None, registers_from_hashes(merged, self.precision)
        else:
            self._sparse = merged
        return self

    def merge(self, other: HyperLogLog) -> HyperLogLog:
        """A new sketch of the union of both inputs' sets."""
        if (self.precision, self.sparse_limit) != (other.precision, other.sparse_limit):
            raise ValueError(
                "cannot merge HyperLogLogs with different precision/sparse_limit: "
                f"{(self.precision, self.sparse_limit)} vs {(other.precision, other.sparse_limit)}"
            )
        result = self.copy()
        if other._sparse is not None:
            return result.update(other._sparse)
        if result._sparse is not None:
            result._sparse, result._registers = None, registers_from_hashes(result._sparse, result.precision)
        np.maximum(result._registers, other._registers, out=result._registers)
        return result

    def copy(self) -> HyperLogLog:
        twin = HyperLogLog(self.precision, self.sparse_limit)
        twin._sparse = None if self._sparse is None else self._sparse.copy()
        twin._registers = None if self._registers is None else self._registers.copy()
        return twin

    def estimate(self) -> float:
        """Estimated number of distinct hashes added (exact while sparse)."""
        if self._sparse is not None:
            return float(len(self._sparse))
        return estimate_from_registers(self._registers, self.precision)

    def registers(self) -> np.ndarray:
        """The dense registers (computed from the exact set while sparse)."""
        if self._sparse is not None:
            return registers_from_hashes(self._sparse, self.precision)
        return self._registers.copy()

    def to_bytes(self) -> bytes:
        if self._sparse is not None:
            mode, count, payload = _MODE_SPARSE, len(self._sparse), _delta_encode(self._sparse)
        else:
            mode, count, payload = _MODE_DENSE, self.m, self._registers.tobytes()
        header = _HEADER.pack(_MAGIC, _FORMAT_VERSION, self.precision, self.sparse_limit, mode, count)
        return header + zlib.compress(payload, 6)

    @classmethod
    def from_bytes(cls, blob: bytes) -> HyperLogLog:
        if len(blob) < _HEADER.size:
            raise ValueError(f"not a serialized HyperLogLog: {len(blob)} bytes is shorter than its header")
        magic, version, precision, sparse_limit, mode, count = _HEADER.unpack_from(blob)
        if magic != _MAGIC:
            raise ValueError(f"not a serialized HyperLogLog (magic {magic!r})")
        if version != _FORMAT_VERSION:
            raise ValueError(
                f"unsupported HyperLogLog format version {version} (this code reads {_FORMAT_VERSION})"
            )
        payload = zlib.decompress(blob[_HEADER.size :])
        sketch = cls(precision, sparse_limit)
        if mode == _MODE_SPARSE:
            sketch._sparse = _delta_decode(payload, count)
        elif mode == _MODE_DENSE:
            sketch._sparse, sketch._registers = (
                None,
                np.frombuffer(payload, dtype=np.uint8, count=count).copy(),
            )
        else:
            raise ValueError(f"corrupt HyperLogLog: unknown mode {mode}")
        return sketch

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HyperLogLog):
            return NotImplemented
        if (self.precision, self.sparse_limit, self.is_sparse) != (
            other.precision,
            other.sparse_limit,
            other.is_sparse,
        ):
            return False
        mine, theirs = (
            (self._sparse, other._sparse) if self.is_sparse else (self._registers, other._registers)
        )
        return np.array_equal(mine, theirs)

    __hash__ = None

    def __repr__(self) -> str:
        mode = f"sparse, {len(self._sparse)} hashes" if self.is_sparse else "dense"
        return f"HyperLogLog(precision={self.precision}, {mode}, estimate={self.estimate():.1f})"
