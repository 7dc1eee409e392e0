"""Column kinds and casting (syndiffix_core.columns).

Expected values are written out by hand or computed with the standard library (datetime arithmetic,
sorted(), Decimal), never with the code under test.
"""

from __future__ import annotations

import datetime as dt
import decimal
import pickle

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syndiffix_core.columns import (
    EPOCH_1800_OFFSET_SECONDS,
    ColumnKind,
    codec_for,
    decode_frame,
    encode_frame,
)
from syndiffix_core.errors import InvalidInputError, SyndiffixError, UnsupportedColumnError

D = decimal.Decimal
EPOCH_1800 = dt.datetime(1800, 1, 1)


def seconds_since_1800(value: dt.datetime) -> float:
    return (value - EPOCH_1800).total_seconds()


def round_trip(series: pd.Series) -> pd.Series:
    codec = codec_for(series)
    return codec.decode(codec.encode(series))


# One column per supported input, each with a null where the dtype can hold one.
ROUND_TRIP_COLUMNS = {
    "bool": pd.Series([True, False, True]),
    "nullable_boolean": pd.Series([True, None, False], dtype="boolean"),
    "object_bool": pd.Series([True, None, False], dtype=object),
    "int8": pd.Series([1, -128, 127], dtype="int8"),
    "int64": pd.Series([0, -(2**53), 2**53], dtype="int64"),
    "uint8": pd.Series([0, 255, 7], dtype="uint8"),
    "uint64": pd.Series([0, 2**63, 5], dtype="uint64"),
    "Int64": pd.Series([1, None, -3], dtype="Int64"),
    "Int8": pd.Series([-128, None, 127], dtype="Int8"),
    "UInt16": pd.Series([1, None, 65535], dtype="UInt16"),
    "UInt64": pd.Series([1, None, 2**40], dtype="UInt64"),
    "object_int": pd.Series([1, None, 3], dtype=object),
    "float32": pd.Series([0.1, np.nan, 2.25, -1e30], dtype="float32"),
    "float64": pd.Series([0.1, np.nan, 2.25, 1e-20, 1 / 3, 1e300]),
    "Float32": pd.Series([0.5, None, 2.125], dtype="Float32"),
    "Float64": pd.Series([0.1, None, 2.5], dtype="Float64"),
    "object_float": pd.Series([0.5, None, 1.75], dtype=object),
    "decimal": pd.Series([D("1.50"), None, D("-2.25"), D("1000")], dtype=object),
    "str": pd.Series(["b", "a", None, "é", "B"], dtype="str"),
    "string": pd.Series(["b", "a", None], dtype="string"),
    "object_str": pd.Series(["b", "a", None], dtype=object),
    "category": pd.Series(["b", "a", None, "a"], dtype="category"),
    # pandas gives a category column of nulls alone an empty float index of categories
    "category_of_nulls": pd.Series([None, None, None], dtype="category"),
    "category_unused": pd.Series(
        pd.Categorical(["lo", None, "hi"], categories=["lo", "mid", "hi"], ordered=True)
    ),
    "datetime_ns_seconds": pd.Series(
        [pd.Timestamp("2020-01-01 10:00:01"), pd.NaT, pd.Timestamp("1700-03-04")], dtype="datetime64[ns]"
    ),
    "datetime_ms": pd.Series(
        [pd.Timestamp("2020-01-01 10:00:00.123"), pd.NaT, pd.Timestamp("2250-12-31 23:59:59.999")],
        dtype="datetime64[ms]",
    ),
    "datetime_us": pd.Series(
        [pd.Timestamp("2020-01-01 10:00:00.123456"), pd.NaT, pd.Timestamp("1600-05-06 07:08:09.000001")],
        dtype="datetime64[us]",
    ),
    "datetime_s": pd.Series(
        [pd.Timestamp("2020-01-01 10:00:00"), pd.NaT, pd.Timestamp("0100-01-01 00:00:01")],
        dtype="datetime64[s]",
    ),
    "datetime_day": pd.Series([pd.Timestamp("2020-01-01"), pd.NaT, pd.Timestamp("1999-12-31")]),
    "datetime_tz_berlin": pd.Series(
        pd.to_datetime(["2020-01-01 10:00", None, "2021-06-01 00:00"]).tz_localize("Europe/Berlin")
    ),
    "datetime_tz_utc_ns": pd.Series(
        pd.to_datetime(["2020-01-01 10:00:00.5", None]).tz_localize("UTC").astype("datetime64[ns, UTC]")
    ),
    "datetime_tz_kolkata": pd.Series(
        pd.to_datetime(["2020-01-01", "2020-01-02"]).tz_localize("Asia/Kolkata")
    ),
    "date": pd.Series([dt.date(2020, 1, 1), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)], dtype=object),
    "time": pd.Series([dt.time(1, 2, 3, 500), None, dt.time(23, 59, 59)], dtype=object),
}


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_COLUMNS))
def test_every_kind_and_null_round_trips_with_its_dtype(name):
    series = ROUND_TRIP_COLUMNS[name].rename(name)
    decoded = round_trip(series)
    assert decoded.dtype == series.dtype
    assert decoded.name == name
    pd.testing.assert_series_equal(decoded, series, check_exact=True)


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_COLUMNS))
def test_empty_and_all_null_columns_round_trip(name):
    series = ROUND_TRIP_COLUMNS[name].rename(name)
    empty = series.iloc[:0]
    pd.testing.assert_series_equal(round_trip(empty), empty.reset_index(drop=True))
    if series.isna().any():
        all_null = series[series.isna()].reset_index(drop=True)
        pd.testing.assert_series_equal(round_trip(all_null), all_null)


@pytest.mark.parametrize(
    ("series", "kind"),
    [
        (pd.Series([True]), ColumnKind.BOOLEAN),
        (pd.Series([True], dtype="boolean"), ColumnKind.BOOLEAN),
        (pd.Series([True, None], dtype=object), ColumnKind.BOOLEAN),
        (pd.Series([1], dtype="uint16"), ColumnKind.INTEGER),
        (pd.Series([1, None], dtype="Int32"), ColumnKind.INTEGER),
        (pd.Series([1.5], dtype="float32"), ColumnKind.REAL),
        (pd.Series([D("1.5")], dtype=object), ColumnKind.REAL),
        (pd.Series(["x"], dtype=object), ColumnKind.STRING),
        (pd.Series(["x"], dtype="string"), ColumnKind.STRING),
        (pd.Series(["x"], dtype="category"), ColumnKind.STRING),
        (pd.Series([], dtype=object), ColumnKind.STRING),
        (pd.Series([pd.Timestamp("2020-01-01")]), ColumnKind.TIMESTAMP),
        (pd.Series([pd.Timestamp("2020-01-01", tz="UTC")]), ColumnKind.TIMESTAMP),
        (pd.Series([dt.date(2020, 1, 1)], dtype=object), ColumnKind.TIMESTAMP),
        (pd.Series([dt.time(12, 0)], dtype=object), ColumnKind.TIMESTAMP),
    ],
)
def test_kind_detection(series, kind):
    assert codec_for(series.rename("c")).kind == kind


def test_encoded_values_follow_the_casting_rules():
    assert codec_for(pd.Series([True, None, False], dtype="boolean")).encode(
        pd.Series([True, None, False], dtype="boolean")
    ).tolist() == pytest.approx([1.0, np.nan, 0.0], nan_ok=True)

    ints = pd.Series([5, None, -7], dtype="Int64")
    np.testing.assert_array_equal(codec_for(ints).encode(ints), [5.0, np.nan, -7.0])

    # Code-point order: "B" (66) < "a" (97) < "b" (98) < "é" (233).
    strings = pd.Series(["b", "a", None, "é", "B"])
    codec = codec_for(strings)
    np.testing.assert_array_equal(codec.encode(strings), [2.0, 1.0, np.nan, 3.0, 0.0])
    assert codec.strings.tolist() == ["B", "a", "b", "é"]


def test_timestamps_are_seconds_since_1800_utc():
    assert seconds_since_1800(dt.datetime(1970, 1, 1)) == EPOCH_1800_OFFSET_SECONDS
    moments = [dt.datetime(1800, 1, 1), dt.datetime(1970, 1, 1), dt.datetime(2024, 2, 29, 12, 30, 15, 250000)]
    for unit in ("s", "ms", "us", "ns"):
        series = pd.Series(moments, dtype=f"datetime64[{unit}]")
        expected = [seconds_since_1800(m) for m in moments]
        if unit == "s":
            expected[2] = seconds_since_1800(dt.datetime(2024, 2, 29, 12, 30, 15))
            series = pd.Series([*moments[:2], dt.datetime(2024, 2, 29, 12, 30, 15)], dtype="datetime64[s]")
        np.testing.assert_array_equal(codec_for(series).encode(series), expected)


def test_tz_aware_timestamps_encode_as_utc_and_decode_to_their_zone():
    local = pd.Series(pd.to_datetime(["2020-07-01 02:00"]).tz_localize("Europe/Berlin"))  # UTC+2 in summer
    codec = codec_for(local)
    assert codec.encode(local).tolist() == [seconds_since_1800(dt.datetime(2020, 7, 1, 0, 0))]
    decoded = codec.decode(np.array([seconds_since_1800(dt.datetime(2020, 1, 1, 12, 0))]))
    assert decoded.dtype == local.dtype
    assert decoded.iloc[0] == pd.Timestamp("2020-01-01 13:00", tz="Europe/Berlin")  # UTC+1 in winter


def test_dates_and_times_encode_on_the_1800_scale():
    dates = pd.Series([dt.date(1800, 1, 2), None], dtype=object)
    np.testing.assert_array_equal(codec_for(dates).encode(dates), [86_400.0, np.nan])
    times = pd.Series([dt.time(0, 1, 0, 500_000)], dtype=object)
    assert codec_for(times).encode(times).tolist() == [60.5]


def test_integer_decode_rounds_half_away_from_zero_and_clips_to_the_dtype():
    codec = codec_for(pd.Series([0, 1], dtype="int8"))
    decoded = codec.decode(np.array([2.6, 2.5, 2.4, -2.5, -2.6, -0.4, 1e30, -1e30]))
    assert decoded.dtype == np.dtype("int8")
    assert decoded.tolist() == [3, 3, 2, -3, -3, 0, 127, -128]

    unsigned = codec_for(pd.Series([3], dtype="uint8")).decode(np.array([-5.0, 0.5, 300.0]))
    assert unsigned.tolist() == [0, 1, 255]

    int64 = codec_for(pd.Series([0], dtype="int64")).decode(np.array([1e19, -1e19]))
    assert int64.tolist() == [2**63 - 1024, -(2**63)]


def test_nullable_integer_decode_keeps_nulls():
    codec = codec_for(pd.Series([1, None], dtype="Int64"))
    decoded = codec.decode(np.array([np.nan, 4.5, -0.6]))
    assert decoded.dtype == pd.Int64Dtype()
    assert decoded.isna().tolist() == [True, False, False]
    assert decoded.iloc[1:].tolist() == [5, -1]


def test_nulls_into_a_numpy_dtype_without_nulls_use_the_nullable_counterpart():
    assert codec_for(pd.Series([1, 2])).decode(np.array([np.nan, 1.0])).dtype == pd.Int64Dtype()
    assert codec_for(pd.Series([1], dtype="uint32")).decode(np.array([np.nan])).dtype == pd.UInt32Dtype()
    assert codec_for(pd.Series([True])).decode(np.array([np.nan])).dtype == pd.BooleanDtype()


def test_boolean_decode_is_at_least_one_half():
    codec = codec_for(pd.Series([True, None], dtype="boolean"))
    decoded = codec.decode(np.array([0.49, 0.5, 0.9, -3.0, np.nan]))
    assert decoded.dtype == pd.BooleanDtype()
    assert decoded.tolist()[:4] == [False, True, True, False]
    assert decoded.isna().tolist() == [False, False, False, False, True]

    objects = codec_for(pd.Series([True, None], dtype=object)).decode(np.array([0.7, np.nan]))
    assert objects.dtype == object
    assert objects.tolist() == [True, None]


@pytest.mark.parametrize(
    ("values", "dtype", "decimals"),
    [
        ([1.25, 3.5, -0.75], "float64", 2),
        ([1.0, 2.0, -1e15], "float64", 0),
        ([0.1, 0.2], "float32", 1),  # judged as float32: float64(float32(0.1)) has many more digits
        ([1 / 3], "float64", None),
        ([0.001, np.nan], "Float64", 3),
    ],
)
def test_real_precision_detection(values, dtype, decimals):
    assert codec_for(pd.Series(values, dtype=dtype)).decimals == decimals


def test_real_precision_is_verified_on_all_values_not_only_a_sample():
    values = np.round(np.linspace(0, 1000, 100_001), 1)
    values[77_777] = 0.123  # not in the evenly spaced sample
    assert codec_for(pd.Series(values)).decimals == 3


def test_real_decode_rounds_to_the_detected_precision_and_keeps_the_dtype():
    codec = codec_for(pd.Series([1.25, np.nan], dtype="float32"))
    decoded = codec.decode(np.array([1.23456, np.nan, 1e300]))
    assert decoded.dtype == np.dtype("float32")
    assert decoded.iloc[0] == np.float32(1.23)
    assert np.isnan(decoded.iloc[1])
    assert decoded.iloc[2] == np.finfo(np.float32).max  # clipped: inf is never produced

    unrounded = codec_for(pd.Series([1 / 3])).decode(np.array([0.123456789012345678]))
    assert unrounded.iloc[0] == 0.123456789012345678


def test_decimals_decode_to_the_input_scale():
    codec = codec_for(pd.Series([D("1.50"), D("2"), None], dtype=object))
    assert codec.kind == ColumnKind.REAL
    assert codec.scale == 2
    decoded = codec.decode(np.array([1.234, 1.0, np.nan, -0.005, 0.125, -0.001]))
    assert decoded.dtype == object
    assert [str(v) for v in decoded.drop(2)] == ["1.23", "1.00", "-0.01", "0.13", "0.00"]
    assert decoded.iloc[2] is None
    assert all(isinstance(v, D) for v in decoded.drop(2))


def test_timestamp_resolution_detection_and_rounding():
    seconds = pd.Series(pd.to_datetime(["2020-01-01 10:00:01", "2020-01-02 00:00:00"]))
    codec = codec_for(seconds)
    assert codec.resolution == "second"
    base = seconds_since_1800(dt.datetime(2020, 1, 1, 10, 0, 1))
    decoded = codec.decode(np.array([base + 0.4, base + 0.6, np.nan]))
    assert decoded.dtype == seconds.dtype
    assert decoded.iloc[0] == pd.Timestamp("2020-01-01 10:00:01")
    assert decoded.iloc[1] == pd.Timestamp("2020-01-01 10:00:02")
    assert decoded.isna().tolist() == [False, False, True]

    days = pd.Series(pd.to_datetime(["2020-01-01", "2020-03-01"]))
    day_codec = codec_for(days)
    assert day_codec.resolution == "day"
    noon_and_after = seconds_since_1800(dt.datetime(2020, 1, 1, 12, 0, 1))
    assert day_codec.decode(np.array([noon_and_after])).iloc[0] == pd.Timestamp("2020-01-02")

    expectations = {
        "2020-01-01 10:00": "hour",
        "2020-01-01 10:05": "minute",
        "2020-01-01 10:05:00.250": "millisecond",
        "2020-01-01 10:05:00.000250": "microsecond",
        "2020-01-01 10:05:00.000000250": "nanosecond",
    }
    for text, resolution in expectations.items():
        series = pd.Series([pd.Timestamp(text), pd.Timestamp("2020-01-01")], dtype="datetime64[ns]")
        assert codec_for(series).resolution == resolution, text


def test_timestamp_decode_clips_to_the_unit_range():
    codec = codec_for(pd.Series([pd.Timestamp("2000-01-01")], dtype="datetime64[ns]"))
    decoded = codec.decode(np.array([1e12, -1e12]))
    assert decoded.iloc[0] <= pd.Timestamp.max
    assert decoded.iloc[0] > pd.Timestamp("2262-04-10")
    assert decoded.iloc[1] == pd.Timestamp("1677-09-22")  # first midnight (day resolution) in range
    assert decoded.notna().all()


def test_date_and_time_decode():
    dates = codec_for(pd.Series([dt.date(2020, 1, 1)], dtype=object))
    out = dates.decode(np.array([seconds_since_1800(dt.datetime(2020, 1, 1, 13)), np.nan, -1e20, 1e20]))
    assert out.tolist() == [dt.date(2020, 1, 2), None, dt.date(1, 1, 1), dt.date(9999, 12, 31)]

    times = codec_for(pd.Series([dt.time(10, 0, 1)], dtype=object))
    assert times.resolution == "second"
    out = times.decode(np.array([3600.4, 3600.6, np.nan, 90_000.0, -5.0]))
    assert out.tolist() == [dt.time(1, 0, 0), dt.time(1, 0, 1), None, dt.time(23, 59, 59), dt.time(0, 0)]


def test_string_decode_takes_the_nearest_valid_index():
    codec = codec_for(pd.Series(["x", "y", "z"]))
    decoded = codec.decode(np.array([0.4, 1.6, 7.0, -2.0, np.nan]))
    assert decoded.dtype == pd.Series(["x"]).dtype
    assert decoded.tolist()[:4] == ["x", "z", "z", "x"]
    assert decoded.isna().tolist() == [False, False, False, False, True]


def test_string_ordering_is_code_point_order():
    values = ["ä", "z", "Z", "😀", "a", "", "ab", "a b", "\x00"]
    codec = codec_for(pd.Series(values, dtype=object))
    assert codec.strings.tolist() == sorted(values, key=lambda s: [ord(c) for c in s])


def test_strings_with_nul_characters_stay_distinct():
    series = pd.Series(["", "\x00", "a\x00b", "a\x00c", "a", None, "a\x00b"], dtype=object)
    codec = codec_for(series)
    assert codec.strings.tolist() == ["", "\x00", "a", "a\x00b", "a\x00c"]
    np.testing.assert_array_equal(codec.encode(series), [0, 1, 3, 4, 2, np.nan, 3])
    pd.testing.assert_series_equal(codec.decode(codec.encode(series)), series)


def test_unicode_and_very_long_strings_round_trip():
    long_a = "α" * 200_000
    long_b = long_a + "β"
    series = pd.Series([long_b, "😀 emoji", long_a, None, "ﬀ ligature", "\u00e9", "e\u0301"], dtype="str")
    decoded = round_trip(series)
    pd.testing.assert_series_equal(decoded, series)
    assert codec_for(series).strings.tolist().index(long_a) + 1 == codec_for(series).strings.tolist().index(
        long_b
    )


def test_constant_columns_round_trip():
    for series in (
        pd.Series([7] * 5),
        pd.Series([2.5] * 5),
        pd.Series(["same"] * 5),
        pd.Series([pd.Timestamp("2020-01-01")] * 5),
        pd.Series([False] * 5),
    ):
        pd.testing.assert_series_equal(round_trip(series), series)


def test_decode_in_ranges_builds_prefix_star_index():
    codec = codec_for(pd.Series(["city_a", "city_b", "city_c", "town", "city_a"], dtype=object))
    assert codec.strings.tolist() == ["city_a", "city_b", "city_c", "town"]
    out = codec.decode_in_ranges(
        index=np.array([0.0, 1.0, 2.0, 3.0, np.nan, 1.0]),
        exact=np.array([True, False, False, True, False, False]),
        range_lo=np.array([0, 0, 0, 0, 0, 1]),
        range_hi=np.array([0, 2, 3, 3, 0, 2]),
    )
    assert out.dtype == object
    assert out.tolist() == ["city_a", "city_*1", "*2", "town", None, "city_*1"]


def test_decode_in_ranges_keeps_string_dtype_and_extends_categories():
    strings = pd.Series(["city_a", "city_b"], dtype="string")
    out = codec_for(strings).decode_in_ranges(
        np.array([1.0]), np.array([False]), np.array([0]), np.array([1])
    )
    assert out.dtype == strings.dtype
    assert out.tolist() == ["city_*1"]

    category = pd.Series(
        pd.Categorical(["city_a", "city_b"], categories=["city_b", "city_a", "x"], ordered=True)
    )
    codec = codec_for(category)
    exact = codec.decode_in_ranges(np.array([0.0]), np.array([True]), np.array([0]), np.array([0]))
    assert exact.dtype == category.dtype
    mixed = codec.decode_in_ranges(
        np.array([0.0, 1.0]), np.array([True, False]), np.array([0, 0]), np.array([0, 1])
    )
    assert mixed.tolist() == ["city_a", "city_*1"]
    assert mixed.dtype.categories.tolist() == ["city_b", "city_a", "x", "city_*1"]
    assert mixed.dtype.ordered


def test_decode_in_ranges_rejects_ranges_outside_the_strings():
    codec = codec_for(pd.Series(["a", "b"]))
    with pytest.raises(InvalidInputError, match="inclusive indices"):
        codec.decode_in_ranges(np.array([1.0]), np.array([False]), np.array([0]), np.array([2]))


@pytest.mark.parametrize(
    ("series", "value_text", "row_text", "dtype_text"),
    [
        (pd.Series(["a", "b", 3, "c"], index=[10, 11, 12, 13], dtype=object), "3", "12", "object"),
        (pd.Series([None, b"raw", b"x"], index=["r0", "r1", "r2"], dtype=object), "b'raw'", "'r1'", "object"),
        (pd.Series(["a", {"k": 1}], dtype=object), "{'k': 1}", "1", "object"),
        (pd.Series([1.0, np.nan, -np.inf, np.inf], index=[5, 6, 7, 8]), "-inf", "7", "float64"),
        (pd.Series([1.0, np.inf], dtype="float32"), "inf", "1", "float32"),
        (pd.Series([D("1.5"), D("Infinity")], dtype=object), "Decimal('Infinity')", "1", "object"),
        (pd.Series([True, 1], dtype=object), "1", "1", "object"),
        (pd.Series([None, 5, 2**70], dtype=object), str(2**70), "2", "object"),
        (
            pd.Series([dt.date(2020, 1, 1), dt.datetime(2020, 1, 2)], dtype=object),
            "datetime.datetime",
            "1",
            "object",
        ),
        (pd.Series([dt.time(1, tzinfo=dt.UTC)], dtype=object), "datetime.time", "0", "object"),
    ],
)
def test_bad_values_raise_naming_column_dtype_value_and_row(series, value_text, row_text, dtype_text):
    with pytest.raises(UnsupportedColumnError) as caught:
        codec_for(series.rename("amount"))
    message = str(caught.value)
    assert "'amount'" in message
    assert dtype_text in message
    assert value_text in message
    assert f"row {row_text}" in message
    assert caught.value.column == "amount"
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, SyndiffixError)


@pytest.mark.parametrize(
    ("series", "value_text"),
    [
        (
            pd.Series([None, pd.Timedelta(seconds=1)], index=["a", "b"], dtype="timedelta64[ns]"),
            "Timedelta('0 days 00:00:01')",
        ),
        (pd.Series([1 + 2j, 3j], index=["b", "c"]), "(1+2j)"),
        (
            pd.Series(pd.period_range("2020-01", periods=2, freq="M"), index=["b", "c"]),
            "Period('2020-01', 'M')",
        ),
        (pd.Series(pd.Categorical([None, 1, 2]), index=["a", "b", "c"]), "1"),
    ],
)
def test_unsupported_dtypes_raise_naming_column_dtype_and_first_value(series, value_text):
    with pytest.raises(UnsupportedColumnError) as caught:
        codec_for(series.rename("weird"))
    message = str(caught.value)
    assert "'weird'" in message
    assert str(series.dtype) in message
    assert f"first offending value {value_text} at row 'b'" in message


def test_unsupported_dtype_of_an_empty_column_names_column_and_dtype():
    with pytest.raises(UnsupportedColumnError, match=r"'weird' \(dtype timedelta64\[ns\]\)"):
        codec_for(pd.Series([], dtype="timedelta64[ns]", name="weird"))


def test_encode_frame_errors_name_the_frames_own_row_labels():
    df = pd.DataFrame({"v": pd.Series([1.0, np.inf], index=["first", "second"])})
    with pytest.raises(UnsupportedColumnError, match="at row 'second'"):
        encode_frame(df)


def test_encode_checks_values_again():
    booleans = codec_for(pd.Series([True, None], dtype=object, name="b"))
    with pytest.raises(UnsupportedColumnError, match="first offending value 1 at row 1"):
        booleans.encode(pd.Series([False, 1], dtype=object, name="b"))
    reals = codec_for(pd.Series([1.5], name="r"))
    with pytest.raises(UnsupportedColumnError, match="inf at row 0"):
        reals.encode(pd.Series([np.inf], name="r"))


def test_encode_rejects_strings_the_codec_was_not_fitted_on():
    codec = codec_for(pd.Series(["a", "b"], name="s"))
    with pytest.raises(UnsupportedColumnError, match="'zz'"):
        codec.encode(pd.Series(["a", "zz"], name="s"))


def test_forced_kinds():
    floats = pd.Series([1.5, 2.0, np.nan], name="n")
    as_integer = codec_for(floats, ColumnKind.INTEGER)
    assert as_integer.kind == ColumnKind.INTEGER
    decoded = as_integer.decode(np.array([2.6, np.nan]))
    assert decoded.dtype == np.dtype("float64")
    assert decoded.iloc[0] == 3.0

    as_real = codec_for(pd.Series([1, 2], dtype="int16"), ColumnKind.REAL)
    assert as_real.kind == ColumnKind.REAL
    assert as_real.decode(np.array([2.6])).tolist() == [3]

    with pytest.raises(UnsupportedColumnError, match="cannot be treated as integer"):
        codec_for(pd.Series(["a"], name="s"), ColumnKind.INTEGER)


def test_encode_frame_and_decode_frame():
    df = pd.DataFrame(
        {
            "flag": pd.Series([True, None, False], dtype="boolean"),
            "n": pd.Series([3, 1, 2], dtype="int32"),
            "city": ["b", "a", None],
            "when": pd.to_datetime(["1800-01-01", "1800-01-02", None]),
        }
    ).set_axis([7, 8, 9])
    codecs, matrix = encode_frame(df)
    assert [c.name for c in codecs] == ["flag", "n", "city", "when"]
    assert matrix.shape == (3, 4)
    assert matrix.flags.f_contiguous
    np.testing.assert_array_equal(
        matrix,
        [[1.0, 3.0, 1.0, 0.0], [np.nan, 1.0, 0.0, 86_400.0], [0.0, 2.0, np.nan, np.nan]],
    )
    decoded = decode_frame(codecs, [matrix[:, i] for i in range(4)])
    pd.testing.assert_frame_equal(decoded, df.reset_index(drop=True))

    city = codecs[2].decode_in_ranges(np.array([1.0]), np.array([False]), np.array([0]), np.array([1]))
    mixed = decode_frame(codecs, [np.array([0.0]), np.array([2.6]), city, np.array([43_200.0])])
    assert mixed.dtypes.tolist() == df.dtypes.tolist()
    assert mixed.iloc[0].tolist() == [False, 3, "*1", pd.Timestamp("1800-01-02")]


def test_encode_frame_rejects_kinds_for_unknown_columns_and_names_the_bad_column():
    df = pd.DataFrame({"a": [1], "b": ["x"]})
    with pytest.raises(InvalidInputError, match="'zzz'"):
        encode_frame(df, {"zzz": ColumnKind.REAL})
    bad = pd.DataFrame({"ok": [1, 2], "mixed": pd.Series(["x", 2], dtype=object)})
    with pytest.raises(UnsupportedColumnError, match="'mixed'"):
        encode_frame(bad)


def test_decode_frame_rejects_columns_of_different_lengths():
    codecs, _ = encode_frame(pd.DataFrame({"a": [1], "b": [2]}))
    with pytest.raises(InvalidInputError, match="different lengths"):
        decode_frame(codecs, [np.array([1.0]), np.array([1.0, 2.0])])


# Property tests --------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-(2**53), 2**53)), max_size=50))
def test_property_nullable_int64_round_trips(values):
    series = pd.Series(values, dtype="Int64")
    pd.testing.assert_series_equal(round_trip(series), series)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(allow_infinity=False, allow_nan=True), max_size=50))
def test_property_float64_round_trips(values):
    series = pd.Series(values, dtype="float64")
    pd.testing.assert_series_equal(round_trip(series), series, check_exact=True)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=8)), max_size=50))
def test_property_strings_round_trip_in_code_point_order(values):
    series = pd.Series(values, dtype=object)
    codec = codec_for(series)
    assert codec.strings.tolist() == sorted({v for v in values if v is not None})
    pd.testing.assert_series_equal(codec.decode(codec.encode(series)), series)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            # Microseconds survive float64 seconds-since-1800 for roughly 1528..2072 (see docs/columns.md).
            st.datetimes(min_value=dt.datetime(1530, 1, 1), max_value=dt.datetime(2070, 12, 31)),
        ),
        max_size=30,
    )
)
def test_property_microsecond_timestamps_round_trip(values):
    series = pd.Series(values, dtype="datetime64[us]")
    pd.testing.assert_series_equal(round_trip(series), series)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.datetimes(min_value=dt.datetime(1678, 1, 1), max_value=dt.datetime(2262, 1, 1)).map(
            lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000)
        ),
        max_size=30,
    ),
    st.sampled_from(["UTC", "America/New_York", "Asia/Kathmandu"]),
)
def test_property_tz_aware_millisecond_timestamps_round_trip(values, zone):
    series = pd.Series(pd.DatetimeIndex(values, dtype="datetime64[ns]").tz_localize("UTC").tz_convert(zone))
    pd.testing.assert_series_equal(round_trip(series), series)


def test_decode_in_ranges_reuses_a_category_equal_to_a_label():
    category = pd.Series(["a*1", "ab", "ac"], dtype="category")
    codec = codec_for(category)
    assert codec.strings.tolist() == ["a*1", "ab", "ac"]
    out = codec.decode_in_ranges(np.array([1.0]), np.array([False]), np.array([1]), np.array([2]))
    assert out.tolist() == ["a*1"]
    assert out.dtype == category.dtype


def test_encode_frame_rejects_duplicate_column_names():
    df = pd.DataFrame([[1, 2]], columns=["a", "a"])
    with pytest.raises(InvalidInputError, match="duplicate"):
        encode_frame(df)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.text(alphabet="ab*é😀", max_size=6), min_size=1, max_size=12, unique=True),
    st.data(),
)
def test_property_decode_in_ranges_labels_are_longest_common_prefix_star_index(values, data):
    codec = codec_for(pd.Series(values, dtype=object))
    count = len(codec.strings)
    lo = data.draw(st.integers(0, count - 1))
    hi = data.draw(st.integers(lo, count - 1))
    index = data.draw(st.integers(lo, hi))
    label = codec.decode_in_ranges(
        np.array([float(index)]), np.array([False]), np.array([lo]), np.array([hi])
    )[0]
    first, last = codec.strings[lo], codec.strings[hi]
    prefix, star, number = label.rpartition("*")
    assert star == "*"
    assert number == str(index)
    if lo == hi:  # one index: its "prefix" would be the masked string itself
        assert prefix == ""
        return
    assert first.startswith(prefix)
    assert last.startswith(prefix)
    # Longest: the next characters differ, or one of the two strings ends there.
    n = len(prefix)
    assert n == min(len(first), len(last)) or first[n] != last[n]


def test_microsecond_timestamps_round_trip_up_to_2072():
    edge = pd.Series(
        np.array(
            ["2072-03-14T23:59:59.999999", "2072-03-01T12:34:56.000001", "1528-01-01T00:00:00.000001"],
            dtype="datetime64[us]",
        )
    )
    pd.testing.assert_series_equal(round_trip(edge), edge)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.sampled_from(["x", "y", "zz", "Ω"])), max_size=30),
    st.booleans(),
)
def test_property_categories_round_trip_with_their_exact_dtype(values, ordered):
    dtype = pd.CategoricalDtype(["zz", "x", "unused", "Ω", "y"], ordered=ordered)
    series = pd.Series(values, dtype=dtype)
    decoded = round_trip(series)
    assert decoded.dtype == dtype
    pd.testing.assert_series_equal(decoded, series)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(st.none(), st.decimals(min_value=-(10**9), max_value=10**9, places=2, allow_nan=False)),
        max_size=30,
    )
)
def test_property_numeric_10_2_decimals_round_trip(values):
    series = pd.Series(values, dtype=object)
    decoded = round_trip(series)
    assert decoded.dtype == object
    assert [None if v is None else str(v) for v in decoded] == [
        None if v is None else str(v.quantize(D("0.01"))) for v in values
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.none(), st.dates(), st.times()), max_size=30))
def test_property_dates_and_times_round_trip(values):
    dates = pd.Series([v for v in values if not isinstance(v, dt.time)], dtype=object)
    times = pd.Series([v for v in values if not isinstance(v, dt.date)], dtype=object)
    pd.testing.assert_series_equal(round_trip(dates), dates)
    pd.testing.assert_series_equal(round_trip(times), times)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(st.none(), st.booleans()), max_size=30))
def test_property_nullable_booleans_round_trip(values):
    series = pd.Series(values, dtype="boolean")
    pd.testing.assert_series_equal(round_trip(series), series)


def test_empty_frame_round_trips_through_encode_and_decode_frame():
    df = pd.DataFrame(
        {
            "a": pd.Series([], dtype="Int64"),
            "b": pd.Series([], dtype="str"),
            "c": pd.Series([], dtype="datetime64[us, UTC]"),
        }
    )
    codecs, matrix = encode_frame(df)
    assert matrix.shape == (0, 3)
    pd.testing.assert_frame_equal(decode_frame(codecs, [matrix[:, i] for i in range(3)]), df)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_infinity=False, allow_nan=True), max_size=40))
def test_property_float32_round_trips(values):
    series = pd.Series(values, dtype="float32")
    pd.testing.assert_series_equal(round_trip(series), series, check_exact=True)


@pytest.mark.parametrize("name", sorted(ROUND_TRIP_COLUMNS))
def test_codecs_survive_pickling(name):
    series = ROUND_TRIP_COLUMNS[name].rename(name)
    codec = pickle.loads(pickle.dumps(codec_for(series)))
    pd.testing.assert_series_equal(codec.decode(codec.encode(series)), series)


# --- the compact form (decode_compact / expand) that microdata and stitching hold rows in ---------------

COMPACT_COLUMNS = {
    "object strings": pd.Series(["b", "a", None, "c", "a"], dtype=object),
    "str strings": pd.Series(["b", "a", None, "c", "a"], dtype="str"),
    "dates": pd.Series([dt.date(2021, 5, 1), dt.date(2020, 1, 1), None, dt.date(2022, 2, 2)], dtype=object),
    "times": pd.Series([dt.time(10, 30), None, dt.time(8, 0), dt.time(23, 59)], dtype=object),
    "decimals": pd.Series([D("2.50"), D("-1.25"), None, D("10.00")], dtype=object),
}


@pytest.mark.parametrize("name", COMPACT_COLUMNS)
def test_compact_decode_holds_distinct_values_as_sorted_categories(name):
    series = COMPACT_COLUMNS[name]
    codec = codec_for(series)
    compact = codec.decode_compact(codec.encode(series))
    assert isinstance(compact.dtype, pd.CategoricalDtype)
    assert compact.cat.codes.dtype.itemsize == 1  # a handful of values: one byte per row
    assert compact.cat.categories.tolist() == sorted(set(series.dropna()))
    # Rows taken out of order come back as the input's values, nulls as the input's nulls.
    order = np.array([3, 2, 0, 1])
    pd.testing.assert_series_equal(
        codec.expand(compact.take(order).reset_index(drop=True)),
        series.take(order).reset_index(drop=True),
    )


def test_compact_decimals_merge_floats_that_quantize_to_one_decimal():
    codec = codec_for(pd.Series([D("0.10"), D("0.20")], dtype=object))
    compact = codec.decode_compact(np.array([0.1, 0.10000000000000002, 0.2, np.nan]))
    assert compact.cat.categories.tolist() == [D("0.10"), D("0.20")]
    assert compact.cat.codes.tolist() == [0, 0, 1, -1]


def test_compact_strings_merge_a_label_equal_to_a_string():
    codec = codec_for(pd.Series(["a*1", "ab", "ac"], dtype=object))
    compact = codec.decode_in_ranges_compact(
        np.array([0.0, 1.0, 2.0]), np.array([True, False, True]), np.array([0, 1, 2]), np.array([0, 2, 2])
    )
    assert compact.cat.categories.tolist() == ["a*1", "ac"]
    assert codec.expand(compact).tolist() == ["a*1", "a*1", "ac"]


def test_joined_compact_category_columns_expand_to_the_input_categories_and_all_labels():
    category = pd.Series(
        pd.Categorical(["city_a", "city_b", "town"], categories=["town", "city_b", "city_a"])
    )
    codec = codec_for(category)
    one = codec.decode_in_ranges_compact(np.array([2.0, 1.0]), np.array([True, False]), [2, 0], [2, 1])
    other = codec.decode_in_ranges_compact(np.array([0.0, 2.0]), np.array([True, False]), [0, 1], [0, 2])
    joined = pd.Series(pd.api.types.union_categoricals([one, other], sort_categories=True))
    out = codec.expand(joined)
    assert out.tolist() == ["town", "city_*1", "city_a", "*2"]
    assert out.dtype.categories.tolist() == ["town", "city_b", "city_a", "*2", "city_*1"]
