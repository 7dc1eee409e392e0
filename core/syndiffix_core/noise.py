"""Salted hashing and seeded ("sticky") noise, vectorized over uint64 arrays.

Every random decision of the anonymizer is a pure function of (secret salt, a 64-bit seed, a step
name). Seeds come from the data itself: the XOR of the entity hashes in a bucket, the tree's column
names and the bucket's labels (range midpoints). Same data + same salt -> same noise, so re-running a
schedule on unchanged data cannot be averaged away; another salt -> independent noise.

Hashes:
- entity (AID) values are hashed with pandas' keyed SipHash-2-4 (`hash_array` with a salt-derived key)
  for strings/objects, then passed through the salted 64-bit mixer below; numbers go through the mixer
  directly. 0 is reserved for "no entity" (null AID).
- seeds are turned into noise by two rounds of the SplitMix64 finalizer keyed with two 64-bit words
  derived from the salt by BLAKE2b. This is a fast statistical mixer, not a cryptographic PRF: it keeps
  the properties the algorithm needs (deterministic, order-free set seeds, avalanche, salt-dependent)
  at numpy speed (a few ns per value instead of a BLAKE2b call per node).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

_U64 = np.uint64
_MUL1 = _U64(0xBF58476D1CE4E5B9)
_MUL2 = _U64(0x94D049BB133111EB)
_GOLDEN = _U64(0x9E3779B97F4A7C15)
_TWO_PI = 2.0 * np.pi
_U31_MAX = float(2**31 - 1)
_EPS = float(np.finfo(np.float64).eps)


def mix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64 finalizer over a uint64 array (bijective, full avalanche). Returns a new array."""
    x = np.asarray(values, dtype=_U64).copy()
    _mix64_in_place(x)
    return x


def _mix64_in_place(x: np.ndarray) -> None:
    # In-place array arithmetic wraps around without a warning, so no np.errstate is needed (entering
    # one costs more than mixing a small array, and this runs thousands of times per table).
    x ^= x >> _U64(30)
    x *= _MUL1
    x ^= x >> _U64(27)
    x *= _MUL2
    x ^= x >> _U64(31)


def hash_bytes(data: bytes) -> int:
    """64-bit BLAKE2b of a byte string, as an unsigned int."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def hash_string(text: str) -> int:
    return hash_bytes(text.encode("utf-8"))


def hash_strings(texts: Iterable[str]) -> int:
    """Order-free seed of a set of strings: XOR of the hashes of the distinct strings."""
    seed = 0
    for text in set(texts):
        seed ^= hash_string(text)
    return seed


def hash_floats(values: np.ndarray, position: int = 0) -> np.ndarray:
    """Hash float64 values by their bit pattern (used for bucket labels); -0.0 is folded onto 0.0."""
    bits = (np.asarray(values, dtype=np.float64) + 0.0).view(_U64)
    offset = _U64(int(_GOLDEN) * (position + 1) % 2**64)
    return mix64(bits + offset)


@functools.lru_cache(maxsize=64)
def _step_key(step: str) -> np.uint64:
    return _U64(hash_string(step))


@dataclass(frozen=True)
class Salt:
    """The secret salt, reduced to the keys the hashes use. Never logged (no repr of the secret)."""

    key0: np.uint64
    key1: np.uint64
    siphash_key: str

    @classmethod
    def from_secret(cls, secret: bytes | str) -> Salt:
        raw = secret.encode("utf-8") if isinstance(secret, str) else bytes(secret)
        digest = hashlib.blake2b(raw, digest_size=24, person=b"syndiffix-salt").digest()
        return cls(
            key0=_U64(int.from_bytes(digest[:8], "little")),
            key1=_U64(int.from_bytes(digest[8:16], "little")),
            siphash_key=digest[16:24].hex(),
        )

    def __repr__(self) -> str:
        return "Salt(<hidden>)"

    def seeds(self, seeds: np.ndarray | int, step: str) -> np.ndarray:
        """Salted, step-specific 64-bit random words for an array of seeds."""
        x = np.asarray(seeds, dtype=_U64)
        x = (x.reshape(1) if x.ndim == 0 else x) ^ self.key0  # a new array: mixed in place below
        _mix64_in_place(x)
        x ^= _step_key(step) ^ self.key1
        _mix64_in_place(x)
        return x

    def gaussian(self, seeds: np.ndarray | int, step: str, sd: float = 1.0) -> np.ndarray:
        """One gaussian noise layer per seed (Box-Muller on two 31-bit fields of the salted word)."""
        words = self.seeds(seeds, step)
        # In place, operation by operation as sqrt(-2 log(max(u1, eps))) * sin(2 pi u2) * sd.
        radius = (words & _U64(0x7FFFFFFF)).astype(np.float64)
        radius /= _U31_MAX
        np.maximum(radius, _EPS, out=radius)
        np.log(radius, out=radius)
        radius *= -2.0
        np.sqrt(radius, out=radius)
        words >>= _U64(32)
        words &= _U64(0x7FFFFFFF)
        angle = words.astype(np.float64)
        angle /= _U31_MAX
        angle *= _TWO_PI
        np.sin(angle, out=angle)
        radius *= angle
        radius *= sd
        return radius

    def uniform_int(self, seeds: np.ndarray | int, step: str, low, high) -> np.ndarray:
        """Uniform integers in [low, high] (inclusive, broadcastable) per seed."""
        words = self.seeds(seeds, step)
        low = np.asarray(low, dtype=np.int64)
        span = (np.asarray(high, dtype=np.int64) - low + 1).astype(_U64)
        return (words % np.maximum(span, _U64(1))).astype(np.int64) + low

    def rng(self, *labels: str | int) -> np.random.Generator:
        """A numpy Generator for draws on already-anonymized data (refinement, microdata, shuffles)."""
        seed = 0
        for label in labels:
            seed ^= hash_string(str(label))
            seed = int(mix64(np.array([seed], dtype=_U64))[0])
        words = self.seeds(np.array([seed], dtype=_U64), "rng")
        return np.random.Generator(np.random.PCG64(int(words[0])))

    def hash_entities(self, values: pd.Series | np.ndarray) -> np.ndarray:
        """Salted 64-bit hash per entity (AID) value; 0 for nulls, never 0 otherwise."""
        series = values if isinstance(values, pd.Series) else pd.Series(values)
        null = series.isna().to_numpy()
        if series.dtype.kind in "iub":
            raw = series.to_numpy(dtype=np.int64, na_value=0).view(_U64)
        elif series.dtype.kind == "f":
            raw = series.to_numpy(dtype=np.float64, na_value=0.0).view(_U64)
        else:
            as_text = series.astype(object).where(~null, "").map(str).to_numpy(dtype=object)
            # Hashing each string directly gives the same hashes as categorizing first, which only
            # pays off for repeated values (callers pass distinct entity values).
            raw = pd.util.hash_array(as_text, hash_key=self.siphash_key, categorize=False)
        hashed = self.seeds(raw, "entity")
        hashed[hashed == 0] = _U64(1)
        hashed[null] = _U64(0)
        return hashed

    def hash_rows(self, row_hashes: np.ndarray) -> np.ndarray:
        """Entity hashes for tables without AID columns: each row is its own entity.

        The seed is the row's content hash plus its occurrence number among identical rows, so the
        set of entities (and hence the noise) does not depend on the input row order.
        """
        raw = np.asarray(row_hashes, dtype=_U64)
        order = np.argsort(raw, kind="stable")
        sorted_raw = raw[order]
        starts = np.r_[True, sorted_raw[1:] != sorted_raw[:-1]] if raw.size else np.zeros(0, bool)
        positions = np.arange(raw.size)
        group_start = np.maximum.accumulate(np.where(starts, positions, 0))
        occurrence = np.empty(raw.size, dtype=_U64)
        occurrence[order] = (positions - group_start).astype(_U64)
        with np.errstate(over="ignore"):
            hashed = self.seeds(raw ^ mix64(occurrence + _GOLDEN), "row-entity")
        hashed[hashed == 0] = _U64(1)
        return hashed


def row_content_hashes(frame: pd.DataFrame) -> np.ndarray:
    """Content hash per row (pandas' vectorized hashing), independent of the row index."""
    if frame.shape[1] == 0:
        return np.zeros(len(frame), dtype=_U64)
    return pd.util.hash_pandas_object(frame, index=False).to_numpy(dtype=_U64)
