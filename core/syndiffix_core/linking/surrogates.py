"""Fresh surrogate values for primary and unique key columns, of the source column's type.

The values are drawn from the salt's random generator: they depend on nothing in the source but the
number of synthetic rows, the column's type and its declared limit (a string column's length, an
integer column's largest value), so no real key value can be derived from them. Random draws over a
wide range also keep coincidences with real key values (1, 2, 3, ...) rare, which the risk report's
key check measures.
"""

from __future__ import annotations

import math
import re
import uuid

import numpy as np
import pandas as pd

from .schema import LinkingError

_ALPHABET = np.frombuffer(b"0123456789abcdefghjkmnpqrstvwxyz", dtype=np.uint8)  # Crockford-like base 32
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
_UUID_TEXT = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
DEFAULT_INTEGER_LIMIT = 2**31 - 1  # SQL INTEGER: the narrowest common key type
_STRING_LENGTH = 10


def key_kind(column: pd.Series) -> str:
    """'integer', 'string', 'uuid' or 'uuid_text' (UUIDs held as strings); other types are refused."""
    if pd.api.types.is_bool_dtype(column.dtype):
        return "unsupported"
    if pd.api.types.is_integer_dtype(column.dtype):
        return "integer"
    if pd.api.types.is_float_dtype(column.dtype):
        values = column.dropna().to_numpy()
        return "integer" if np.array_equal(values, np.round(values)) else "unsupported"
    if column.dtype == object or pd.api.types.is_string_dtype(column.dtype):
        sample = column.dropna().head(100)
        if len(sample) and all(isinstance(v, uuid.UUID) for v in sample):
            return "uuid"
        if len(sample) and all(isinstance(v, str) and _UUID_TEXT.match(v) for v in sample):
            return "uuid_text"
        if all(isinstance(v, str) for v in sample):
            return "string"
    return "unsupported"


def surrogate_values(
    kind: str, rows: int, rng: np.random.Generator, *, limit: int | None, what: str
) -> pd.Series:
    """`rows` distinct fresh values of `kind`; `limit` is a string's max length or an integer's max value."""
    if kind == "integer":
        return pd.Series(_distinct_integers(rows, limit or DEFAULT_INTEGER_LIMIT, rng, what), dtype="int64")
    if kind == "string":
        return pd.Series(_distinct_strings(rows, limit, rng, what), dtype=object)
    if kind in ("uuid", "uuid_text"):
        texts = _uuid_texts(rows, rng)
        return pd.Series([uuid.UUID(t) for t in texts] if kind == "uuid" else texts, dtype=object)
    raise LinkingError(
        f"{what}: keys of this type cannot be replaced by surrogates (integers, strings, UUIDs)"
    )


def _distinct_integers(rows: int, limit: int, rng: np.random.Generator, what: str) -> np.ndarray:
    if rows > limit:
        raise LinkingError(f"{what}: {rows} synthetic rows do not fit in keys up to {limit}")
    if rows * 4 > limit:  # a dense range: a permutation of it
        return rng.permutation(limit)[:rows].astype(np.int64) + 1
    return _distinct(lambda n: rng.integers(1, limit, size=n, endpoint=True), rows)


def _distinct_strings(rows: int, limit: int | None, rng: np.random.Generator, what: str) -> np.ndarray:
    # long enough that random draws rarely collide (>= 32x the rows), within the column's length
    needed = max(1, math.ceil(math.log(max(rows, 1) * 32, 32)))
    length = min(limit, max(_STRING_LENGTH, needed)) if limit else max(_STRING_LENGTH, needed)
    if 32**length < rows * 2:
        raise LinkingError(f"{what}: {rows} distinct keys do not fit in {length} characters")

    def draw(n: int) -> np.ndarray:
        codes = _ALPHABET[rng.integers(0, 32, size=(n, length))]
        return codes.view(f"S{length}").ravel().astype(f"U{length}")

    return _distinct(draw, rows).astype(object)


def _uuid_texts(rows: int, rng: np.random.Generator) -> np.ndarray:
    octets = rng.integers(0, 256, size=(rows, 16), dtype=np.uint8)
    octets[:, 6] = (octets[:, 6] & 0x0F) | 0x40  # version 4
    octets[:, 8] = (octets[:, 8] & 0x3F) | 0x80  # RFC 4122 variant
    digits = np.empty((rows, 32), dtype=np.uint8)
    digits[:, 0::2] = _HEX[octets >> 4]
    digits[:, 1::2] = _HEX[octets & 0x0F]
    dash = np.full((rows, 1), ord("-"), dtype=np.uint8)
    parts = [
        digits[:, :8],
        dash,
        digits[:, 8:12],
        dash,
        digits[:, 12:16],
        dash,
        digits[:, 16:20],
        dash,
        digits[:, 20:],
    ]
    return np.hstack(parts).view("S36").ravel().astype("U36").astype(object)


def _distinct(draw, rows: int) -> np.ndarray:
    """Draw until `rows` distinct values are collected, keeping the draw order (not sorted)."""
    values = draw(rows + rows // 8 + 16)
    while True:
        _, first = np.unique(values, return_index=True)
        if len(first) >= rows:
            return values[np.sort(first)][:rows]
        values = np.concatenate([values[np.sort(first)], draw(rows - len(first) + 16)])
