"""No synthetic value lies outside the column's anonymized range (issue 12, bounded values).

Two date columns like the ones that went out of range on real tables: one covering 2013-2016 with
nulls (the null mapping, far beyond the maximum, kept the 1-dim root from being pushed down, so the
multi-column trees' shallow cells spanned decades), one covering 2017 only (the snapped root reaches
from mid-2016 into 2018, and the multi-column trees' edge cells overhang the data). The dates are dense
up to both ends, so the 1-dim trees resolve the ends to well under a day.
"""

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import ClusteringParams, synthesize

DAY = pd.Timedelta(days=1)


def _dated_table(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    seconds_2013_2016 = int((pd.Timestamp("2017-01-01") - pd.Timestamp("2013-01-01")).total_seconds())
    booked = pd.Timestamp("2013-01-01") + pd.to_timedelta(rng.integers(0, seconds_2013_2016, n), unit="s")
    booked = pd.Series(booked).where(rng.random(n) > 0.1)  # 10 % nulls
    released = pd.Timestamp("2017-01-01") + pd.to_timedelta(rng.integers(0, 365 * 86400, n), unit="s")
    return pd.DataFrame(
        {
            "booked": booked,
            "released": released,
            "charge": rng.choice(["theft", "assault", "fraud", "drugs", "traffic"], n),
            "age": np.clip(rng.normal(35, 12, n), 18, 80).astype(int),
            "bail": np.where(rng.random(n) < 0.2, np.nan, np.round(rng.lognormal(8, 1, n), 2)),
        }
    )


@pytest.mark.parametrize("salt", ["bound-0", "bound-1", "bound-2"])
@pytest.mark.parametrize("clustering", [True, False])
def test_dates_stay_inside_the_data_range(salt, clustering):
    table = _dated_table(4000, seed=7)
    out = synthesize(table, salt=salt, clustering=ClusteringParams(enabled=clustering))
    booked, released = out["booked"].dropna(), out["released"]
    assert booked.size > 0.8 * len(out)
    assert booked.min() >= pd.Timestamp("2013-01-01") - DAY
    assert booked.max() < pd.Timestamp("2017-01-01") + DAY
    assert released.min() >= pd.Timestamp("2017-01-01") - DAY
    assert released.max() < pd.Timestamp("2018-01-01") + DAY


@pytest.mark.parametrize("salt", ["bound-0", "bound-1", "bound-2"])
def test_numbers_with_nulls_and_tails_stay_inside_the_data_range(salt):
    table = _dated_table(4000, seed=11)
    out = synthesize(table, salt=salt)
    for column in ("age", "bail"):
        values = out[column].dropna()
        assert values.min() >= table[column].min()
        assert values.max() <= table[column].max()
