"""Dates and times held as text (syndiffix_core.iso_layouts, IsoTextCodec, timestamp_forms).

Expected instants and texts come from the standard library's datetime, never from the code under test.
"""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from syndiffix_core import synthesize
from syndiffix_core.columns import ColumnKind, IsoTextCodec, StringCodec, codec_for
from syndiffix_core.errors import UnsupportedColumnError
from syndiffix_core.iso_layouts import IsoLayout, parse

EPOCH = dt.datetime(1970, 1, 1)


def microseconds(value: dt.datetime) -> int:
    return (value - EPOCH) // dt.timedelta(microseconds=1)


def test_parse_reads_real_dates_and_refuses_impossible_ones():
    strings = np.array(
        ["2004-02-29", "2003-02-29", "2004-13-01", "2004-04-31", "0001-01-01", "9999-12-31", "n/a"]
    )
    parsed = parse(strings)
    assert parsed.layout == IsoLayout("", 0, 0)
    assert parsed.valid.tolist() == [True, False, False, False, True, True, False]
    expected = [dt.datetime(2004, 2, 29), dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)]
    assert parsed.microseconds[parsed.valid].tolist() == [microseconds(value) for value in expected]


def test_parse_takes_the_layout_most_rows_follow_and_checks_the_time():
    strings = np.array(["2004-01-31 13:40", "2004-01-31T13:40:36", "2004-01-31 24:00", "2004-01-31 23:60"])
    by_strings = parse(strings)
    assert by_strings.layout == IsoLayout(" ", 1, 0)
    assert by_strings.valid.tolist() == [True, False, False, False]
    assert by_strings.microseconds[0] == microseconds(dt.datetime(2004, 1, 31, 13, 40))
    by_rows = parse(strings, np.array([1, 5, 0, 0]))
    assert by_rows.layout == IsoLayout("T", 2, 0)
    assert by_rows.valid.tolist() == [False, True, False, False]
    assert by_rows.microseconds[1] == microseconds(dt.datetime(2004, 1, 31, 13, 40, 36))


def test_parse_reads_utc_marks_and_refuses_offsets_and_other_text():
    parsed = parse(np.array(["2013-01-01T06:00:00Z", "2013-01-01T06:00:00+01:00", "2013-01-01Z"]))
    assert parsed.layout == IsoLayout("T", 2, 0, zulu=True)
    assert parsed.valid.tolist() == [True, False, False]
    assert parsed.microseconds[0] == microseconds(dt.datetime(2013, 1, 1, 6))
    assert parse(np.array(["2004-01-31T13:40+01:00", "31.01.2004", "abc"])) is None


LAYOUTS = [
    (IsoLayout("", 0, 0), lambda value: value.date().isoformat()),
    (IsoLayout(" ", 1, 0), lambda value: value.isoformat(" ", "minutes")),
    (IsoLayout("T", 2, 0), lambda value: value.isoformat("T", "seconds")),
    (IsoLayout("T", 3, 3), lambda value: value.isoformat("T", "milliseconds")),
    (IsoLayout(" ", 3, 6), lambda value: value.isoformat(" ", "microseconds")),
    (IsoLayout("T", 3, 2), lambda value: value.isoformat("T", "microseconds")[:-4]),
    (IsoLayout("T", 2, 0, zulu=True), lambda value: value.isoformat("T", "seconds") + "Z"),
    (IsoLayout(" ", 3, 1, zulu=True), lambda value: value.isoformat(" ", "microseconds")[:-5] + "Z"),
]


@settings(max_examples=60, deadline=None)
@given(
    instants=st.lists(
        st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31)), min_size=1
    ),
    layout=st.sampled_from(range(len(LAYOUTS))),
)
def test_texts_round_trip_through_their_layout(instants, layout):
    layout, isoformat = LAYOUTS[layout]
    texts = np.array([isoformat(value) for value in instants], dtype=object)
    parsed = parse(texts, layout=layout)
    assert parsed.valid.all()
    assert layout.format(parsed.microseconds).tolist() == texts.tolist()


@pytest.mark.parametrize("layout", [layout for layout, _ in LAYOUTS])
def test_no_instants_format_as_no_texts(layout):
    assert layout.format(np.array([], dtype=np.int64)).tolist() == []


def test_a_text_date_column_of_mostly_nulls_can_come_out_all_null():
    # survival udca's death date: 170 patients, a handful of dates; its synthetic rows were all null and
    # formatting no date at all raised.
    rng = np.random.default_rng(8)
    _, text = _days(rng, 170)
    died = [value if index % 40 == 0 else None for index, value in enumerate(text)]
    frame = pd.DataFrame({"died": died, "entry": text, "bili": rng.gamma(2.0, 1.0, 170)})
    synthetic = synthesize(frame, salt="mostly null dates")
    assert synthetic["died"].dtype == frame["died"].dtype
    assert synthetic["died"].isna().mean() > 0.9
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) for value in synthetic["entry"])


@pytest.mark.parametrize("dtype", [object, "string"])
def test_a_declared_timestamp_text_column_decodes_to_text_in_its_layout(dtype):
    series = pd.Series(["2016-07-02 06:30:00", None, "2016-07-02 18:45:00"], name="arrival", dtype=dtype)
    codec = codec_for(series, ColumnKind.TIMESTAMP)
    assert isinstance(codec, IsoTextCodec) and codec.resolution == "minute"
    encoded = codec.encode(series)
    assert encoded[2] - encoded[0] == 12 * 3600 + 15 * 60
    shifted = codec.decode(encoded + [29.0, 0.0, -31.0])  # rounded to the minute, in the layout
    assert shifted.dtype == series.dtype
    assert [shifted[0], shifted[2]] == ["2016-07-02 06:30:00", "2016-07-02 18:44:00"]
    assert pd.isna(shifted[1])


def test_a_declared_timestamp_text_column_names_the_value_outside_its_layout():
    series = pd.Series(["2016-07-02", "2016-07-03", "2016-02-30"], name="arrival")
    with pytest.raises(UnsupportedColumnError, match=r"column 'arrival'.*YYYY-MM-DD.*'2016-02-30' at row 2"):
        codec_for(series, ColumnKind.TIMESTAMP)
    with pytest.raises(
        UnsupportedColumnError, match=r"column 'arrival' \(dtype category\).*cannot be treated as"
    ):
        codec_for(series.iloc[:2].astype("category"), ColumnKind.TIMESTAMP)


def test_a_string_codec_without_dates_is_not_read_as_text_time():
    series = pd.Series(["2016-07-02 is a date", "abc", "n/a"], name="note")
    codec, encoded = StringCodec.fit(series)
    assert IsoTextCodec.from_strings(codec, encoded) is None


def _days(rng: np.random.Generator, rows: int) -> tuple[np.ndarray, list[str]]:
    day = rng.integers(0, 730, rows)
    return day, [(dt.date(2015, 1, 1) + dt.timedelta(days=int(d))).isoformat() for d in day]


def _spearman(a, b) -> float:
    return float(pd.Series(a).rank().corr(pd.Series(b).rank()))


def test_a_text_date_column_is_synthesized_as_dates_in_the_source_layout_and_range():
    rng = np.random.default_rng(5)
    day, text = _days(rng, 3_000)
    frame = pd.DataFrame({"day": text, "load": day * 2.0 + rng.normal(0, 40, day.size)})
    synthetic = synthesize(frame, salt="text dates")
    assert synthetic["day"].dtype == frame["day"].dtype
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) for value in synthetic["day"])
    assert min(text) <= synthetic["day"].min() and synthetic["day"].max() <= max(text)
    synthetic_days = pd.to_datetime(synthetic["day"]).to_numpy().astype("datetime64[D]").astype(np.int64)
    assert _spearman(day, frame["load"]) > 0.95
    assert _spearman(synthetic_days, synthetic["load"]) > 0.85


def test_a_few_odd_values_become_null_and_many_keep_the_column_text():
    rng = np.random.default_rng(6)
    _, text = _days(rng, 2_000)
    one_odd = pd.DataFrame({"day": [*text[:-1], "unknown"], "x": rng.normal(size=2_000)})
    synthetic = synthesize(one_odd, salt="one odd")
    assert "unknown" not in set(synthetic["day"])
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) for value in synthetic["day"].dropna())

    many_odd = pd.DataFrame({"day": [*text[:1_200], *["unknown"] * 800], "x": rng.normal(size=2_000)})
    synthetic = synthesize(many_odd, salt="many odd")
    assert (synthetic["day"] == "unknown").mean() > 0.3
    assert any("*" in value for value in synthetic["day"])


def test_odd_values_are_counted_by_entity():
    """60 rows of odd text are a low count when one person holds them all, and not when 60 do."""
    rng = np.random.default_rng(7)
    _, text = _days(rng, 2_000)
    day = ["unknown"] * 60 + text[60:]
    one_person = pd.DataFrame({"person": np.r_[np.zeros(60, dtype=int), np.arange(1, 1_941)], "day": day})
    synthetic = synthesize(one_person, ["person"], salt="by entity")
    assert "unknown" not in set(synthetic["day"])
    assert all(re.fullmatch(r"\d{4}-\d{2}-\d{2}", value) for value in synthetic["day"].dropna())

    sixty_people = pd.DataFrame({"person": np.arange(2_000), "day": day})
    synthetic = synthesize(sixty_people, ["person"], salt="by entity")
    assert "unknown" in set(synthetic["day"])


def test_declared_string_and_category_columns_stay_text():
    rng = np.random.default_rng(8)
    _, text = _days(rng, 2_000)
    frame = pd.DataFrame({"day": text, "x": rng.normal(size=2_000)})
    declared = synthesize(frame, salt="declared", column_kinds={"day": ColumnKind.STRING})
    assert any("*" in value for value in declared["day"])
    categories = synthesize(frame.astype({"day": "category"}), salt="category")
    assert any("*" in value for value in categories["day"].astype(str))
