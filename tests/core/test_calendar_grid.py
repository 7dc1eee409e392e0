"""Timestamps on the first of a month or year stay there (syndiffix_core.calendar_grid, the timestamp
codecs, the microdata draw). Expected instants come from the standard library's datetime."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import synthesize
from syndiffix_core.calendar_grid import nearest_start, on_grid, starts_between
from syndiffix_core.columns import codec_for

EPOCH_1800 = dt.datetime(1800, 1, 1)


def seconds(*parts: int) -> float:
    return (dt.datetime(*parts) - EPOCH_1800).total_seconds()


def instants(values: np.ndarray) -> list[dt.datetime]:
    return [EPOCH_1800 + dt.timedelta(seconds=float(value)) for value in values]


def test_on_grid_tells_the_firsts_of_months_and_years_at_midnight():
    values = np.array([seconds(2004, 1, 1), seconds(1871, 3, 1), seconds(2004, 2, 2), seconds(2004, 2, 1, 6)])
    assert on_grid(values, "month").tolist() == [True, True, False, False]
    assert on_grid(values, "year").tolist() == [True, False, False, False]


def test_instants_move_to_the_nearest_start_and_the_grid_lists_the_starts_in_a_range():
    moved = nearest_start(
        np.array([seconds(2004, 1, 16), seconds(2004, 1, 17), seconds(2004, 2, 15, 12)]), "month"
    )
    assert instants(moved) == [dt.datetime(2004, 1, 1), dt.datetime(2004, 2, 1), dt.datetime(2004, 3, 1)]
    # 2004 is a leap year: 2 July is 183 days from either 1 January, and a tie goes to the later one
    moved = nearest_start(np.array([seconds(2004, 7, 1), seconds(2004, 7, 2)]), "year")
    assert instants(moved) == [dt.datetime(2004, 1, 1), dt.datetime(2005, 1, 1)]
    grid = starts_between("month", seconds(2003, 11, 2), seconds(2004, 2, 1))
    assert instants(grid) == [dt.datetime(2003, 12, 1), dt.datetime(2004, 1, 1), dt.datetime(2004, 2, 1)]


@pytest.mark.parametrize(
    "series",
    [
        pd.Series(pd.to_datetime(["2004-01-01", "2004-03-01", None])),
        pd.Series([dt.date(2004, 1, 1), dt.date(2004, 3, 1), None], dtype=object),
        pd.Series(["2004-01-01", "2004-03-01", None], dtype=object),
    ],
    ids=["datetime64", "date", "text"],
)
def test_a_codec_on_months_decodes_to_the_nearest_first_of_a_month(series):
    codec = codec_for(series.rename("month"), "timestamp")
    codec.calendar = "month"
    decoded = codec.decode(np.array([seconds(2004, 2, 14), seconds(2004, 2, 16), np.nan]))
    expected = [dt.datetime(2004, 2, 1), dt.datetime(2004, 3, 1)]
    assert [pd.Timestamp(str(value)).to_pydatetime() for value in decoded[:2]] == expected
    assert pd.isna(decoded[2])


def _monthly(rng: np.random.Generator, rows: int) -> pd.Series:
    """Firsts of months from 1800 to 2099, mostly one row each: synthetic values come from ranges."""
    months = rng.integers(0, 3_600, rows)
    return pd.Series([dt.date(1800 + m // 12, m % 12 + 1, 1) for m in months])


@pytest.mark.parametrize("form", ["datetime64", "date", "text"])
def test_a_monthly_table_is_synthesized_on_firsts_of_months(form):
    rng = np.random.default_rng(4)
    firsts = _monthly(rng, 2_000)
    column = {
        "datetime64": pd.to_datetime(firsts),
        "date": firsts.astype(object),
        "text": firsts.map(dt.date.isoformat),
    }[form]
    price = pd.to_datetime(firsts).dt.year * 3.0 + rng.normal(0, 5, firsts.size)
    synthetic = synthesize(pd.DataFrame({"month": column, "price": price}), salt="monthly")
    days = pd.to_datetime(synthetic["month"].astype(str))
    assert (days.dt.day == 1).all() and (days.dt.hour == 0).all()
    assert days.min() >= pd.Timestamp(firsts.min()) and days.max() <= pd.Timestamp(firsts.max())
    assert days.nunique() > 1_000  # not a few rounded-to values


def test_a_few_odd_days_keep_the_calendar_and_many_do_not():
    rng = np.random.default_rng(5)
    firsts = pd.to_datetime(_monthly(rng, 2_000))
    one_odd = firsts.copy()
    one_odd[0] = pd.Timestamp("2007-03-14")
    synthetic = synthesize(pd.DataFrame({"month": one_odd, "x": rng.normal(size=2_000)}), salt="one odd")
    assert (synthetic["month"].dt.day == 1).all()

    many_odd = firsts + pd.to_timedelta(np.where(np.arange(2_000) % 3 == 0, 13, 0), unit="D")
    synthetic = synthesize(pd.DataFrame({"month": many_odd, "x": rng.normal(size=2_000)}), salt="many odd")
    assert (synthetic["month"].dt.day != 1).mean() > 0.2


def test_yearly_values_stay_on_the_first_of_january():
    rng = np.random.default_rng(6)
    years = pd.Series(
        pd.to_datetime([f"{year}-01-01" for year in rng.integers(1000, 2500, 2_000)], format="%Y-%m-%d")
    )
    synthetic = synthesize(pd.DataFrame({"year": years, "x": rng.normal(size=2_000)}), salt="yearly")
    assert ((synthetic["year"].dt.month == 1) & (synthetic["year"].dt.day == 1)).all()
    assert synthetic["year"].dt.year.nunique() > 500
