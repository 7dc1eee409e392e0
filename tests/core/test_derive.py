"""Declared row rules (`derive`): parsing, typing, SQL NULL semantics, casting and synthesize(derive=)."""

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import synthesize
from syndiffix_core.derive import DerivedColumns, DeriveError, parse_expression


def _flights(rows: int = 3000, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    hour = rng.integers(5, 23, rows)
    minute = rng.choice([0, 10, 15, 30, 45, 59], rows)
    return pd.DataFrame(
        {
            "hour": hour,
            "minute": minute,
            "sched_dep_time": hour * 100 + minute,
            "carrier": rng.choice(["UA", "AA", "B6", "DL"], rows).astype(object),
            "dep_delay": np.round(rng.gamma(1.5, 12.0, rows) - 5.0),
        }
    )


def _derive(frame: pd.DataFrame, column: str, expression: str) -> pd.Series:
    return DerivedColumns({column: expression}, frame).complete(frame.drop(columns=[column]))[column]


def test_synthesize_with_derive_holds_the_rule_on_every_row_and_keeps_type_and_order():
    source = _flights()
    synthetic = synthesize(source, salt="derive", derive={"sched_dep_time": "hour * 100 + minute"})
    assert list(synthetic.columns) == list(source.columns)
    assert synthetic["sched_dep_time"].dtype == source["sched_dep_time"].dtype
    assert (synthetic["sched_dep_time"] == synthetic["hour"] * 100 + synthetic["minute"]).all()


def test_derived_column_is_not_synthesized_its_source_values_do_not_matter():
    source = _flights()
    scrambled = source.assign(sched_dep_time=np.arange(len(source)))
    rule = {"sched_dep_time": "hour * 100 + minute"}
    pd.testing.assert_frame_equal(
        synthesize(source, salt="s", derive=rule), synthesize(scrambled, salt="s", derive=rule)
    )


def test_arithmetic_precedence_division_and_sql_remainder():
    frame = pd.DataFrame({"a": [7.0, -7.0, 5.0], "b": [2.0, 3.0, 0.0], "y": [0.0, 0.0, 0.0]})
    assert _derive(frame, "y", "a + b * 2 - 1").tolist() == [10.0, -2.0, 4.0]
    assert _derive(frame, "y", "(a + b) * 2").tolist() == [18.0, -8.0, 10.0]
    divided = _derive(frame, "y", "a / b")
    assert divided.iloc[0] == 3.5 and np.isnan(divided.iloc[2])  # division by zero is NULL
    remainder = _derive(frame, "y", "a % b")
    assert remainder.iloc[0] == 1.0 and remainder.iloc[1] == -1.0 and np.isnan(remainder.iloc[2])
    assert _derive(frame, "y", "-a").tolist() == [-7.0, 7.0, -5.0]


def test_nulls_propagate_and_an_integer_column_with_nulls_becomes_nullable():
    frame = pd.DataFrame({"h": pd.array([5, None, 7], dtype="Int64"), "m": [1, 2, 3], "t": [0, 0, 0]})
    result = _derive(frame, "t", "h * 100 + m")
    assert str(result.dtype) == "Int64"
    assert result.iloc[0] == 501 and pd.isna(result.iloc[1]) and result.iloc[2] == 703


def test_case_coalesce_comparisons_and_strings():
    frame = pd.DataFrame(
        {"delay": [-5.0, 20.0, np.nan, 90.0], "carrier": ["UA", None, "AA", "DL"], "label": ["x"] * 4}
    )
    label = _derive(
        frame,
        "label",
        "CASE WHEN delay > 60 THEN 'late' WHEN delay >= 0 THEN 'delayed' ELSE COALESCE(carrier, '?') || '-early' END",
    )
    # a NULL condition is not true: row 2 falls through to ELSE
    assert label.tolist() == ["UA-early", "delayed", "AA-early", "late"]
    simple = _derive(frame, "label", "CASE carrier WHEN 'UA' THEN 'united' ELSE lower(carrier) END")
    assert simple.iloc[[0, 2, 3]].tolist() == ["united", "aa", "dl"] and pd.isna(simple.iloc[1])


def test_boolean_logic_is_three_valued_and_is_null():
    frame = pd.DataFrame({"a": [1.0, np.nan, 3.0], "flag": [True, True, True]})
    flags = _derive(frame, "flag", "a > 2 OR a IS NULL")
    assert flags.tolist() == [False, True, True]
    unknown = _derive(frame, "flag", "a > 2 AND TRUE")
    assert unknown.iloc[0] is False or unknown.iloc[0] == False  # noqa: E712
    assert pd.isna(unknown.iloc[1])
    assert str(unknown.dtype) == "boolean"


def test_functions_round_half_away_from_zero_and_least_greatest_ignore_nulls():
    frame = pd.DataFrame({"x": [2.5, -2.5, 1.234], "y": [1.0, np.nan, 9.0], "z": [0.0, 0.0, 0.0]})
    assert _derive(frame, "z", "ROUND(x)").tolist() == [3.0, -3.0, 1.0]
    assert _derive(frame, "z", "ROUND(x, 1)").tolist()[2] == pytest.approx(1.2)
    assert _derive(frame, "z", "GREATEST(x, y)").tolist() == [2.5, -2.5, 9.0]
    assert _derive(frame, "z", "ABS(FLOOR(x)) + CEIL(0.5)").tolist() == [3.0, 4.0, 2.0]
    assert np.isnan(_derive(frame, "z", "NULLIF(y, 9)").iloc[2])


def test_timestamps_compare_with_date_literals_and_date_columns_stay_dates():
    frame = pd.DataFrame(
        {
            "at": pd.to_datetime(["2013-01-01 05:00", "2013-03-01 00:00", None]),
            "day": [dt.date(2013, 1, 1), dt.date(2013, 3, 1), dt.date(2013, 4, 1)],
            "winter": [False] * 3,
            "copy": [dt.date(2000, 1, 1)] * 3,
        }
    )
    winter = _derive(frame, "winter", "at < '2013-02-01'")
    assert winter.iloc[0] == True and winter.iloc[1] == False and pd.isna(winter.iloc[2])  # noqa: E712
    copied = _derive(frame, "copy", "day")
    assert copied.tolist() == frame["day"].tolist()


def test_quoted_identifiers_and_case_insensitive_keywords():
    frame = pd.DataFrame({"dep time": [1.0, 2.0], "Out": [0.0, 0.0]})
    assert _derive(frame, "Out", 'case when "dep time" > 1 then 1 else 0 end').tolist() == [0.0, 1.0]


@pytest.mark.parametrize(
    ("expression", "token", "message"),
    [
        ("hour * 100 +", "end of expression", "expected a value"),
        ("hour ^ 2", "^", "unexpected character"),
        ("hour 100", "100", "unexpected token"),
        ("hour + carrier", "carrier", "expected number, got string"),
        ("frobnicate(hour)", "frobnicate", "unknown function"),
        ("hours * 100", "hours", "unknown column"),
        ("(hour + 1", "end of expression", "expected )"),
        ("'0515'", None, "gives string values, the column holds number"),
        ("CASE WHEN hour > 5 THEN 1 ELSE 'x' END", "x", "mixes number and string"),
        ("ROUND(hour, minute)", "minute", "digits must be a whole number"),
        ("", None, "empty"),
    ],
)
def test_errors_name_the_derived_column_and_the_offending_token(expression, token, message):
    with pytest.raises(DeriveError) as caught:
        DerivedColumns({"sched_dep_time": expression}, _flights(50))
    text = str(caught.value)
    assert text.startswith("derive of column 'sched_dep_time': ")
    assert message in text
    assert caught.value.token == token


def test_rules_may_not_use_aids_derived_columns_or_name_missing_columns():
    frame = _flights(50).assign(pid=1, twice=0)
    with pytest.raises(DeriveError, match="AID columns are never output") as caught:
        DerivedColumns({"sched_dep_time": "pid + 1"}, frame, ["pid"])
    assert caught.value.token == "pid"
    with pytest.raises(DeriveError, match="cannot use another derived column"):
        DerivedColumns({"sched_dep_time": "hour * 100", "twice": "sched_dep_time * 2"}, frame)
    with pytest.raises(DeriveError, match="not a column of the table"):
        DerivedColumns({"nowhere": "hour"}, frame)


def test_references_in_order_of_first_use():
    assert parse_expression("x", "minute + hour * 100 + minute").references == ("minute", "hour")


def test_derived_ml_target_is_refused_by_synthesize():
    with pytest.raises(ValueError, match="target column"):
        synthesize(_flights(200), salt="s", derive={"dep_delay": "hour * 2"}, target_column="dep_delay")
