"""The value hash is a stored format: pin it against an independent plain-Python rendering of its spec."""

from __future__ import annotations

import datetime as dt
import decimal
import struct

import numpy as np
import pandas as pd
import pytest

from syndiffix_core.risk.hashing import (
    ID_SEED,
    VALUE_SEED,
    combine_hashes,
    hash_column,
    hash_columns,
    hash_row_numbers,
)

MASK = (1 << 64) - 1
TAGS = {
    "null": 0x6E756C6C00000000,
    "number": 0x6E756D6265720000,
    "time": 0x74696D6500000000,
    "string": 0x737472696E670000,
    "bytes": 0x6279746573000000,
}


def ref_mix(z: int) -> int:
    z &= MASK
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & MASK
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def ref_finish(payload: int, domain: str, seed: int) -> int:
    return ref_mix(payload ^ TAGS[domain] ^ ref_mix(seed + 0x9E3779B97F4A7C15))


def ref_number(x, seed=VALUE_SEED) -> int:
    if isinstance(x, float) and not (x == int(x) and abs(x) < 2.0**63):
        payload = struct.unpack("<Q", struct.pack("<d", x))[0]
    else:
        payload = int(x) & MASK
    return ref_finish(payload, "number", seed)


def ref_string(s: str, seed=VALUE_SEED, domain="string") -> int:
    points = [ord(c) for c in s] + ([0] if len(s) % 2 else [])
    acc = 0
    for j in range(0, len(points), 2):
        acc = ((acc ^ (points[j] | points[j + 1] << 32)) * 0xBF58476D1CE4E5B9) & MASK
        acc ^= acc >> 31
    return ref_finish(ref_mix(acc ^ len(s)), domain, seed)


def ref_time(seconds: int, nanos: int, seed=VALUE_SEED) -> int:
    return ref_finish(ref_mix(seconds & MASK) ^ nanos, "time", seed)


def test_numbers_match_the_specification():
    values = [0, 1, -1, 7, 2**62, -(2**63), 1.5, -0.25, 1e300]
    got = hash_column(np.array(values, dtype=object))
    assert [int(h) for h in got] == [ref_number(v) for v in values]
    ints = np.array([0, 1, -1, 123456789012345], dtype=np.int64)
    assert [int(h) for h in hash_column(ints)] == [ref_number(int(v)) for v in ints]


def test_strings_match_the_specification_including_odd_lengths_non_ascii_and_nul():
    values = ["", "a", "ab", "abc", "Zürich", "日本語テキスト", "emoji 🙂", "a\0", "x" * 1001]
    got = hash_column(np.array(values, dtype=object))
    assert [int(h) for h in got] == [ref_string(v) for v in values]
    assert len(set(got.tolist())) == len(values)  # "a" and "a\0" differ


def test_timestamps_match_the_specification_in_every_unit():
    stamp = np.datetime64("2021-03-04T05:06:07.123456789", "ns")
    seconds = int(stamp.astype("datetime64[s]").astype(np.int64))
    assert int(hash_column(np.array([stamp]))[0]) == ref_time(seconds, 123456789)
    whole = np.datetime64("1969-12-31T23:59:59", "s")
    expected = ref_time(-1, 0)
    for unit in ("s", "ms", "us", "ns"):
        assert int(hash_column(np.array([whole]).astype(f"datetime64[{unit}]"))[0]) == expected


def test_ids_use_their_own_seed_and_row_numbers_hash_as_numbers():
    assert int(hash_column(np.array([5]), seed=ID_SEED)[0]) == ref_number(5, ID_SEED)
    assert [int(h) for h in hash_row_numbers(3, start=10)] == [ref_number(i, ID_SEED) for i in (10, 11, 12)]
    assert hash_column(np.array([5]))[0] != hash_column(np.array([5]), seed=ID_SEED)[0]


def test_same_value_in_different_storage_types_hashes_alike():
    three = [
        np.array([3], dtype=np.int8),
        np.array([3], dtype=np.uint64),
        np.array([3.0]),
        np.array([3.0], dtype=np.float32),
        pd.array([3], dtype="Int32"),
        pd.array([3.0], dtype="Float64"),
        np.array([decimal.Decimal("3.00")], dtype=object),
        pd.Series([3]).astype("category"),
    ]
    assert {int(hash_column(v)[0]) for v in three} == {ref_number(3)}
    assert hash_column(np.array(["3"], dtype=object))[0] != hash_column(np.array([3]))[0]
    assert hash_column(np.array([True]))[0] == hash_column(np.array([1]))[0]


def test_string_dtypes_agree():
    texts = ["a", "b", "Zürich"]
    forms = [
        np.array(texts, dtype=object),
        np.array(texts),  # '<U6'
        pd.Series(texts, dtype="string"),
        pd.Series(texts, dtype="category"),
        pd.Series(texts),
    ]
    expected = [ref_string(t) for t in texts]
    for form in forms:
        assert [int(h) for h in hash_column(form)] == expected


def test_every_null_spelling_is_one_value():
    null = ref_finish(0, "null", VALUE_SEED)
    columns = [
        np.array([None, np.nan, "a"], dtype=object),
        np.array([np.nan, 1.0, np.nan]),
        pd.array([None, 1, None], dtype="Int64"),
        pd.Series(["x", None, None], dtype="string"),
        np.array(["NaT", "2020-01-01", "NaT"], dtype="datetime64[ns]"),
        pd.Series([None, "a", None], dtype="category"),
    ]
    for column in columns:
        hashes = hash_column(column)
        nulls = np.asarray(pd.isna(pd.Series(column)))
        assert set(hashes[nulls].tolist()) == {null}
        assert null not in set(hashes[~nulls].tolist())


def test_tz_aware_timestamps_hash_as_their_utc_instant_and_dates_as_midnight():
    utc = pd.Series(pd.to_datetime(["2020-01-01 12:00"]).tz_localize("UTC"))
    paris = utc.dt.tz_convert("Europe/Paris")
    naive = pd.Series(pd.to_datetime(["2020-01-01 12:00"]))
    assert hash_column(utc)[0] == hash_column(paris)[0] == hash_column(naive)[0]
    midnight = hash_column(np.array(["2020-01-01"], dtype="datetime64[D]"))[0]
    assert hash_column(pd.Series([dt.date(2020, 1, 1)], dtype=object))[0] == midnight
    seconds = int(np.datetime64("2020-01-01", "s").astype(np.int64))
    assert int(midnight) == ref_time(seconds, 0)


def test_bytes_and_times_hash_by_their_canonical_text():
    got = hash_column(pd.Series([b"ab", dt.time(1, 2, 3)], dtype=object))
    assert int(got[0]) == ref_string("ab", domain="bytes")
    assert int(got[1]) == ref_string("01:02:03")


def test_combinations_are_order_sensitive_and_match_the_specification():
    frame = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    got = hash_columns(frame, ["a", "b"])
    expected = [
        ref_mix(((ref_number(a) * 0x9E3779B97F4A7C15) + ref_string(b)) & MASK)
        for a, b in zip([1, 2], "xy", strict=True)
    ]
    assert [int(h) for h in got] == expected
    assert not np.array_equal(got, hash_columns(frame, ["b", "a"]))
    assert np.array_equal(hash_columns(frame, ["a"]), hash_column(frame["a"]))
    assert np.array_equal(combine_hashes([hash_column(frame["a"]), hash_column(frame["b"])]), got)


def test_bad_input_is_named():
    with pytest.raises(KeyError, match="nope"):
        hash_columns(pd.DataFrame({"a": [1]}), ["a", "nope"])
    with pytest.raises(TypeError, match="complex"):
        hash_column(np.array([1 + 2j]))


def test_distinct_values_get_distinct_hashes_at_scale():
    values = np.arange(1_000_000)
    assert len(np.unique(hash_column(values))) == len(values)
    texts = pd.Series([f"user{i}@example.com" for i in range(200_000)])
    assert len(np.unique(hash_column(texts))) == len(texts)
