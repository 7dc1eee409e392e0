"""Chance and copy baselines of output reproduction, and advice for identifying columns."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from syndiffix_ops.risk import RiskParams, TableSketcher, assess_output, coarse, summarize_table
from syndiffix_ops.risk_meaning import advice, reproduction_baselines, reproduction_reading, value_domains


def test_domains_count_every_value_between_min_and_max_at_the_columns_resolution():
    frame = pd.DataFrame(
        {
            "age": [18, 30, 90],
            "price": [0.5, 1.25, 10.0],
            "lat": [40.6398262, 40.7772497, 40.6925],
            "day": [dt.date(2000, 1, 1), dt.date(2000, 1, 11), dt.date(2000, 1, 2)],
            "stamp": pd.to_datetime(["2020-01-01 00:00", "2020-01-01 10:00", "2020-01-01 05:00"]),
            "city": ["Oslo", "Rome", "Oslo"],
        }
    )
    assert value_domains(frame, list(frame.columns)) == {
        "age": 73.0,
        "price": 951.0,  # 0.50 .. 10.00 in steps of 0.01
        "lat": float("inf"),  # on no grid: a random value never hits a source value
        "day": 11.0,
        "stamp": 11.0,  # whole hours
        "city": 2.0,
    }
    # repeated values and nulls change no domain (they are counted over the distinct values)
    nulls = pd.DataFrame({column: [None] for column in frame.columns}).astype(
        {"age": "Int64", "price": float, "lat": float, "stamp": "datetime64[ns]"}
    )
    repeated = pd.concat([frame, frame.iloc[::-1], nulls], ignore_index=True)
    assert value_domains(repeated, list(frame.columns)) == value_domains(frame, list(frame.columns))


def _birth_dates(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    days = rng.integers(0, 18_000, rows)
    return pd.DataFrame({"birth_date": pd.Timestamp("1950-01-01") + pd.to_timedelta(days, "D")})


def test_random_birth_dates_reproduce_unique_ones_at_chance_and_copies_at_the_copy_rate():
    source = _birth_dates(4_000, 1)
    params = RiskParams()
    sketcher = TableSketcher([("birth_date",)], params=params)
    sketcher.add(source)
    summary = coarse(summarize_table("people", sketcher, params).to_dict())["column_sets"]["birth_date"]
    baselines = reproduction_baselines(summary, ["birth_date"], value_domains(source, ["birth_date"]))
    # each of 4,000 dates is unique with probability (1 - 1/18,000)^3,999 ~ 0.80: ~3,200 unique dates
    # over ~18,000 possible days
    expected_unique = 4_000 * (1 - 1 / 18_000) ** 3_999
    assert baselines["chance"] == pytest.approx(expected_unique / 18_000, abs=0.01)
    assert baselines["copy"] == pytest.approx(expected_unique / 4_000, abs=0.03)

    random_dates = assess_output(sketcher, [_birth_dates(4_000, 2)], params).reproduction["birth_date"]
    share = random_dates.to_dict()["share_unique_in_source"]
    assert reproduction_reading(share, baselines["chance"], baselines["copy"]) == "at chance"
    copied = assess_output(sketcher, [source.sample(frac=1.0, random_state=3)], params).reproduction[
        "birth_date"
    ]
    share = copied.to_dict()["share_unique_in_source"]
    assert reproduction_reading(share, baselines["chance"], baselines["copy"]) == "close to copying rows"


def test_identifying_columns_get_advice_with_the_config_line():
    key = advice(["email"], "identifying", "other", distinct_ratio=1.0)
    assert "`aid_columns: [email]`" in key and "`columns: {email: drop}`" in key
    coordinate = advice(["lat"], "identifying", "number", distinct_ratio=0.4)
    assert "ROUND(lat, 1)" in coordinate and "`columns: {lat: drop}`" in coordinate
    combination = advice(["zip", "birth_year"], "elevated", "other", distinct_ratio=0.5)
    assert "`columns: {birth_year: drop}`" in combination
    assert advice(["city"], "low", "other", distinct_ratio=0.01) is None
