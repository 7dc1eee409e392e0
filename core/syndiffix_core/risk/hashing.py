"""Stable 64-bit hashing of column values, column combinations and ids, vectorized over numpy arrays.

Sketches are stored, merged across runs and compared across tables, so a value must hash to the same
64 bits in every process, on every machine and under every supported numpy/pandas version. Python's
``hash()`` (salted per process) and ``pd.util.hash_array`` (an implementation detail of pandas) are
therefore not used; the function below is fully specified here and pinned by reference vectors in
``tests/core/test_risk_hashing.py`` that recompute it in plain Python.

Specification (all arithmetic modulo 2**64, ``mix`` is the splitmix64 finalizer)::

    mix(z):  z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31
    key(seed) = mix(seed + 0x9E3779B97F4A7C15)
    hash(value, seed) = mix(payload(value) ^ TAG[domain] ^ key(seed))

    domain   payload
    null     0                                     (None, NaN, NaT, pd.NA: one shared "null" value)
    number   int64 two's complement bits, for booleans (0/1), integers, and floats with an integral
             value in [-2**63, 2**63); otherwise the IEEE-754 bits of the float64 (``-0.0`` is 0)
    time     mix(seconds since 1970-01-01) ^ nanoseconds within the second; naive timestamps are
             taken as they are, tz-aware ones as their UTC instant; ``datetime.date`` is its midnight
    string   mix(acc ^ L) for a string of L code points (Python ``str``, so no encoding is involved):
             code points c_0..c_{L-1} (one 0 appended when L is odd) form words w_j = c_2j | c_2j+1 << 32;
             acc = 0; for each word: acc = (acc ^ w_j) * 0xBF58476D1CE4E5B9; acc ^= acc >> 31
    bytes    as string, over the byte values (latin-1)

    combination of columns h_1..h_n (same seed):  acc = h_1; acc = mix(acc * 0x9E3779B97F4A7C15 + h_j)
    row ids:  hash(row number) in the number domain, with the id seed

So ``3``, ``3.0``, ``np.int8(3)`` and ``True``-like ``1`` vs ``1`` hash alike (joinable across tables
whose SQL types differ), while ``"3"`` and ``3`` do not. Value hashes use ``VALUE_SEED`` and id hashes
``ID_SEED``: the KMV level selects values by small hash, and the independent id hash keeps the HLL
level unbiased even when the id column is the value column.

Strings are hashed column-wise over fixed-width UTF-32 blocks (no per-row Python). Repetitive string
columns and other Python objects (dates, Decimals, bytes, times, mixtures) are factorized first and hashed
per distinct value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "ID_SEED",
    "VALUE_SEED",
    "combine_hashes",
    "hash_column",
    "hash_columns",
    "hash_row_numbers",
    "mix64",
]

VALUE_SEED = 0
ID_SEED = 1

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)

# Domain tags keep e.g. the number 7 apart from the timestamp 1970-01-01T00:00:07.
_TAG_NULL = np.uint64(0x6E756C6C00000000)  # "null"
_TAG_NUMBER = np.uint64(0x6E756D6265720000)  # "number"
_TAG_TIME = np.uint64(0x74696D6500000000)  # "time"
_TAG_STRING = np.uint64(0x737472696E670000)  # "string"
_TAG_BYTES = np.uint64(0x6279746573000000)  # "bytes"

_NS_PER_UNIT = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_STRING_BLOCK_CODE_POINTS = 1 << 24  # 64 MiB of UTF-32 per block
_PROBE_ROWS = 10_000


def mix64(values: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer: a bijection of uint64 with full avalanche. Returns a new array."""
    z = np.array(values, dtype=np.uint64, copy=True)
    z ^= z >> np.uint64(30)
    z *= _M1
    z ^= z >> np.uint64(27)
    z *= _M2
    z ^= z >> np.uint64(31)
    return z


def _seed_key(seed: int) -> np.uint64:
    return mix64(np.array([seed], dtype=np.uint64) + _GOLDEN)[0]


def _finish(payload: np.ndarray, tag: np.uint64, seed: int) -> np.ndarray:
    payload = np.asarray(payload, dtype=np.uint64)
    return mix64(payload ^ (tag ^ _seed_key(seed)))


def _null_hash(seed: int) -> np.uint64:
    return _finish(np.zeros(1, dtype=np.uint64), _TAG_NULL, seed)[0]


def _number_payload(values: np.ndarray) -> np.ndarray:
    """int64 bits for integral values, float64 bits otherwise (see the module docstring)."""
    if values.dtype.kind in "biu":
        return values.astype(np.int64, copy=False).view(np.uint64)
    floats = values.astype(np.float64, copy=False)
    integral = (
        np.isfinite(floats) & (np.floor(floats) == floats) & (floats >= -(2.0**63)) & (floats < 2.0**63)
    )
    as_int = np.where(integral, floats, 0.0).astype(np.int64).view(np.uint64)
    return np.where(integral, as_int, floats.view(np.uint64))


def _time_payload(nanoseconds_or_seconds: np.ndarray, unit: str) -> np.ndarray:
    ticks = nanoseconds_or_seconds.astype(np.int64, copy=False)
    per_second = 10**9 // _NS_PER_UNIT[unit]
    seconds = np.floor_divide(ticks, per_second)
    nanos = (ticks - seconds * per_second) * _NS_PER_UNIT[unit]
    return mix64(seconds.view(np.uint64)) ^ nanos.view(np.uint64)


def _hash_datetime64(values: np.ndarray, seed: int) -> np.ndarray:
    unit = np.datetime_data(values.dtype)[0]
    if unit not in _NS_PER_UNIT:
        # Coarser units (D, h, m, ...) are exact in seconds; finer than ns are truncated to ns.
        unit = "s" if np.dtype(f"datetime64[{unit}]") < np.dtype("datetime64[s]") else "ns"
        values = values.astype(f"datetime64[{unit}]")
    null = np.isnat(values)
    out = _finish(_time_payload(values.view(np.int64), unit), _TAG_TIME, seed)
    out[null] = _null_hash(seed)
    return out


def _string_payload(strings: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Multiply-xorshift fold over 64-bit words of two UTF-32 code points (see the module docstring).

    Strings are processed longest first in blocks of bounded size, one numpy pass per word position
    over the rows still that long, so a few very long strings neither blow up memory nor time.
    """
    count = len(strings)
    order = np.argsort(-lengths, kind="stable")
    sorted_lengths = lengths[order]
    acc = np.zeros(count, dtype=np.uint64)
    start = 0
    while start < count:
        width = max(2, int(sorted_lengths[start]) + (int(sorted_lengths[start]) & 1))
        stop = min(count, start + max(1, _STRING_BLOCK_CODE_POINTS // width))
        block = np.array(strings[order[start:stop]], dtype=f"U{width}")
        words = np.ascontiguousarray(block.view(np.uint64).reshape(stop - start, width // 2).T)
        word_counts = (sorted_lengths[start:stop] + 1) // 2
        # word_counts is non-increasing, so the rows with a word at position j are a prefix.
        rows_with_word = np.searchsorted(-word_counts, -np.arange(1, len(words) + 1), side="right")
        block_acc = acc[start:stop]
        for position, rows in enumerate(rows_with_word):
            head = block_acc[:rows]
            head ^= words[position, :rows]
            head *= _M1
            head ^= head >> np.uint64(31)
        start = stop
    out = np.empty(count, dtype=np.uint64)
    out[order] = acc
    return mix64(out ^ lengths.astype(np.uint64))


def _hash_strings(strings, seed: int, tag: np.uint64 = _TAG_STRING) -> np.ndarray:
    """Hash a sequence of Python strings (no nulls)."""
    strings = np.asarray(strings, dtype=object)
    lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
    return _finish(_string_payload(strings, lengths), tag, seed)


def _canonical_object(value: object) -> tuple[str, np.uint64]:
    """Text and domain of a distinct Python object that has no vectorized path."""
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).decode("latin-1"), _TAG_BYTES
    if hasattr(value, "isoformat"):  # datetime.time and other temporal objects
        return value.isoformat(), _TAG_STRING
    return f"{type(value).__name__}:{value!r}", _TAG_STRING


def _hash_distinct_objects(uniques: np.ndarray, seed: int) -> np.ndarray:
    """Hash an object array of distinct non-null values by their inferred kind."""
    inferred = pd.api.types.infer_dtype(uniques, skipna=False)
    if inferred == "string":
        return _hash_strings(list(uniques), seed)
    if inferred in {"integer", "boolean"}:
        try:  # exact for Python ints beyond 2**53, which floats would round
            return _finish(_number_payload(np.asarray(uniques, dtype=np.int64)), _TAG_NUMBER, seed)
        except OverflowError:
            pass
    if inferred in {"integer", "floating", "mixed-integer-float", "decimal", "boolean"}:
        return _finish(_number_payload(np.asarray(uniques, dtype=np.float64)), _TAG_NUMBER, seed)
    if inferred in {"date", "datetime", "datetime64"}:
        stamps = pd.to_datetime(pd.Series(uniques, dtype=object), utc=inferred != "date")
        return _hash_datetime64(
            stamps.dt.tz_localize(None).to_numpy() if inferred != "date" else stamps.to_numpy(), seed
        )
    out = np.empty(len(uniques), dtype=np.uint64)
    texts_by_tag: dict[int, tuple[list[int], list[str]]] = {}
    for position, value in enumerate(uniques):  # distinct values of an exotic type, not rows
        text, tag = _canonical_object(value)
        slot = texts_by_tag.setdefault(int(tag), ([], []))
        slot[0].append(position)
        slot[1].append(text)
    for tag, (positions, texts) in texts_by_tag.items():
        out[positions] = _hash_strings(texts, seed, np.uint64(tag))
    return out


def _mostly_repeated(values: np.ndarray) -> bool:
    """Whether a probe of the first values repeats enough for hashing distinct values only to pay off."""
    probe = values[:_PROBE_ROWS]
    return len(values) > _PROBE_ROWS and len(pd.unique(probe)) < len(probe) // 4


def _hash_objects(values: np.ndarray, seed: int) -> np.ndarray:
    """Object arrays: high-cardinality strings are hashed row by row (vectorized), anything else by
    distinct value."""
    if not _mostly_repeated(values):
        null = np.asarray(pd.isna(values), dtype=bool)
        present = values[~null] if null.any() else values
        if pd.api.types.infer_dtype(present, skipna=False) == "string":
            out = np.full(len(values), _null_hash(seed), dtype=np.uint64)
            out[~null] = _hash_strings(present, seed)
            return out
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    unique_hashes = _hash_distinct_objects(np.asarray(uniques, dtype=object), seed) if len(uniques) else None
    out = np.full(len(codes), _null_hash(seed), dtype=np.uint64)
    present = codes >= 0
    if unique_hashes is not None:
        out[present] = unique_hashes[codes[present]]
    return out


def hash_column(values, *, seed: int = VALUE_SEED) -> np.ndarray:
    """Stable uint64 hash of every element of a numpy array or pandas Series/Index/array.

    Nulls of any spelling share one hash. Raises ``TypeError`` naming the dtype when a kind of value
    cannot be hashed (e.g. complex numbers).
    """
    if isinstance(values, pd.Series | pd.Index):
        values = values.array
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype):
        category_hashes = hash_column(values.categories, seed=seed)
        codes = np.asarray(values.codes)
        out = np.full(len(codes), _null_hash(seed), dtype=np.uint64)
        out[codes >= 0] = category_hashes[codes[codes >= 0]]
        return out
    if isinstance(dtype, pd.DatetimeTZDtype):
        return _hash_datetime64(np.asarray(values.tz_convert("UTC").tz_localize(None)), seed)
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in "biuf":
        null = np.asarray(pd.isna(values))
        filled = np.asarray(values.to_numpy(dtype=np.float64 if dtype.kind == "f" else np.int64, na_value=0))
        out = _finish(_number_payload(filled), _TAG_NUMBER, seed)
        out[null] = _null_hash(seed)
        return out
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and dtype.kind in "mM":
        values = np.asarray(values)
        dtype = values.dtype
    if isinstance(dtype, pd.api.extensions.ExtensionDtype):  # strings, intervals, ...
        return _hash_objects(np.asarray(values, dtype=object), seed)
    array = np.asarray(values)
    kind = array.dtype.kind
    if kind in "biu":
        return _finish(_number_payload(array), _TAG_NUMBER, seed)
    if kind == "f":
        out = _finish(_number_payload(array), _TAG_NUMBER, seed)
        out[np.isnan(array)] = _null_hash(seed)
        return out
    if kind == "M":
        return _hash_datetime64(array, seed)
    if kind == "m":  # durations: integral nanoseconds in the number domain
        null = np.isnat(array)
        out = _finish(array.astype("timedelta64[ns]").view(np.int64).view(np.uint64), _TAG_NUMBER, seed)
        out[null] = _null_hash(seed)
        return out
    if kind in "OUS":
        return _hash_objects(array.astype(object, copy=False), seed)
    raise TypeError(f"cannot hash values of dtype {array.dtype}")


def combine_hashes(hashes: Sequence[np.ndarray]) -> np.ndarray:
    """Order-sensitive combination of per-column hashes into one hash per row."""
    if not hashes:
        raise ValueError("combine_hashes needs at least one column")
    acc = np.array(hashes[0], dtype=np.uint64, copy=True)
    for column_hashes in hashes[1:]:
        acc *= _GOLDEN
        acc += column_hashes
        acc = mix64(acc)
    return acc


def hash_columns(frame: pd.DataFrame, columns: Sequence[str], *, seed: int = VALUE_SEED) -> np.ndarray:
    """Hash of the combination of ``columns`` in every row of ``frame``."""
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise KeyError(f"columns {missing} are not in the frame (it has {list(frame.columns)})")
    return combine_hashes([hash_column(frame[c], seed=seed) for c in columns])


def hash_row_numbers(count: int, *, start: int = 0, seed: int = ID_SEED) -> np.ndarray:
    """Id hashes of rows ``start .. start + count - 1``, for tables whose rows are the protected entities."""
    return _finish(np.arange(start, start + count, dtype=np.int64).view(np.uint64), _TAG_NUMBER, seed)
