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
from test_forest import make_forest

from syndiffix_core import ClusteringParams, synthesize
from syndiffix_core.columns import encode_frame
from syndiffix_core.microdata import MicrodataBuilder

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


def _edge_table(n: int, seed: int) -> pd.DataFrame:
    """Columns whose outermost 1-dim buckets are ranges reaching past the data: a heavy tail, a
    uniform real, integers, timestamps to the second."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "delay": np.round(rng.lognormal(3, 1.2, n), 1),
            "charges": np.round(rng.uniform(18.25, 118.65, n), 2),
            "tenure": rng.integers(1, 73, n),
            "rated": pd.Timestamp("2009-03-14")
            + pd.to_timedelta(rng.integers(0, 7 * 365 * 86400, n), unit="s"),
            "kind": rng.choice(["a", "b", "c"], n),
        }
    )


def _outside_source_range(table: pd.DataFrame, out: pd.DataFrame) -> dict[str, int]:
    counts = {}
    for column in out.columns:
        if column == "kind":
            continue
        values = out[column].dropna()
        counts[column] = int(((values < table[column].min()) | (values > table[column].max())).sum())
    return {column: count for column, count in counts.items() if count}


@pytest.mark.parametrize("columns", [None, ["delay"], ["charges"]], ids=["cluster", "delay", "charges"])
def test_no_value_beyond_the_source_extremes(columns):
    # Uniform draws in the outermost 1-dim buckets put 1-6 values per salt beyond the source's exact
    # minimum or maximum here (charges 18.25-118.65 came out up to 118.9) before those buckets were
    # moved inside the values the 1-dim harvest shows to exist.
    table = _edge_table(3000, seed=0)
    if columns is not None:
        table = table[columns]
    outside = {
        salt: _outside_source_range(table, synthesize(table, salt=salt)) for salt in ("r0", "r1", "r2")
    }
    assert outside == {"r0": {}, "r1": {}, "r2": {}}


@pytest.mark.parametrize("seed", range(4))
def test_known_values_lie_between_the_source_extremes(seed):
    table = _edge_table(2000, seed)
    codecs, matrix = encode_frame(table)
    builder = MicrodataBuilder(make_forest(matrix, salt=f"known-{seed}"), codecs)
    for j in range(4):
        lowest, highest = builder.known_values(j)
        assert matrix[:, j].min() <= lowest < highest <= matrix[:, j].max()


@pytest.mark.parametrize("salt", ["r0", "r1", "r2"])
def test_a_few_nulls_put_no_value_beyond_the_source_extremes(salt):
    # Nulls are mapped beyond the maximum (twice the minimum for a negative column, below it); a few
    # of them fail the low-count filter on their own and are counted in the edge cell on that side.
    rng = np.random.default_rng(5)
    n = 3000
    table = pd.DataFrame(
        {
            "gain": np.round(rng.lognormal(3, 1.2, n), 1),
            "loss": -np.round(rng.lognormal(3, 1.2, n), 1),
        }
    )
    table.loc[rng.choice(n, 3, replace=False), "gain"] = np.nan
    table.loc[rng.choice(n, 3, replace=False), "loss"] = np.nan
    out = synthesize(table, salt=salt)
    assert _outside_source_range(table, out) == {}
    assert out["gain"].notna().sum() > 0.95 * len(out)


def _cut_to_known_values(builder, lo, hi):
    return builder._inside_known_values(0, np.array(lo), np.array(hi), np.zeros(len(lo), dtype=bool))


def test_an_outermost_range_keeps_its_part_between_the_known_values():
    table = _edge_table(2000, seed=0)
    codecs, matrix = encode_frame(table)
    builder = MicrodataBuilder(make_forest(matrix, salt="edges"), codecs)
    lowest, highest = builder.known_values(0)  # delay: about 1 to a few hundred
    assert highest - lowest > 8
    inner = [lowest + 1] * 20, [lowest + 2] * 20  # the bulk: 20 rows inside
    lo, hi = _cut_to_known_values(
        builder,
        [lowest - 8, highest - 3, highest, *inner[0]],
        [lowest + 2, highest + 5, highest + 16, *inner[1]],
    )
    # A range reaching past a known value keeps its part between the two; the top bucket, which starts
    # at the highest known value and holds a tail's share of the rows, keeps that value alone.
    assert lo.tolist() == [lowest, highest - 3, highest, *inner[0]]
    assert hi.tolist() == [lowest + 2, highest, highest, *inner[1]]


def test_an_outermost_bucket_holding_much_of_the_column_spreads_inwards():
    table = _edge_table(2000, seed=0)
    codecs, matrix = encode_frame(table)
    builder = MicrodataBuilder(make_forest(matrix, salt="edges"), codecs)
    lowest, highest = builder.known_values(0)
    # Half the rows in the bucket ending at the lowest known value, half in the one starting at the
    # highest (a tiny table): piled onto the two values, the column would keep two values.
    lo, hi = _cut_to_known_values(builder, [lowest - 4] * 5 + [highest] * 5, [lowest] * 5 + [highest + 4] * 5)
    assert lo.tolist() == [lowest] * 5 + [highest - 4] * 5
    assert hi.tolist() == [lowest + 4] * 5 + [highest] * 5


@pytest.mark.parametrize("salt", ["tail-0", "tail-1", "tail-2", "tail-3"])
def test_a_heavy_tail_of_a_small_table_keeps_its_mean(salt):
    # 500 rows, 4 above 16 and up to 41: the top 1-dim bucket is a wide range holding a handful of rows.
    # Drawn at its start, they keep the mean within 0.05 sd (-0.038 to -0.046 over these salts); drawn
    # a bucket width inwards, the mean came out 0.052-0.059 sd low.
    rng = np.random.default_rng(1)
    table = pd.DataFrame(
        {"crime": np.round(rng.lognormal(0, 1.2, 500), 3), "rooms": np.round(rng.normal(6, 0.7, 500), 3)}
    )
    out = synthesize(table, salt=salt)
    assert abs(out["crime"].mean() - table["crime"].mean()) <= 0.05 * table["crime"].std()
    assert out["crime"].max() <= table["crime"].max()


@pytest.mark.parametrize("salt", ["point-0", "point-3", "point-4"])
def test_a_few_rows_below_a_dominant_top_value_stay_inside_the_source_extremes(salt):
    # sampleSelection RandHIE's share of the year observed: 1.0 for nearly everyone, 0.1-0.98 for a few.
    # The 1-dim harvest is the point 1.0 and one range reaching it, so the known values are the one
    # value 1.0; drawn over that range, a row came out at 0.05 against the source's minimum of 0.107
    # (here, over [0.75, 1): 0.777 and 0.761 for these salts' 0.8).
    n = 5000
    share = np.ones(n)
    share[:8] = np.round(np.linspace(0.8, 0.98, 8), 3)
    table = pd.DataFrame({"share": share, "visits": np.random.default_rng(9).poisson(3, n)})
    codecs, matrix = encode_frame(table)
    builder = MicrodataBuilder(make_forest(matrix, salt=salt), codecs)
    assert builder.known_values(0) == (1.0, 1.0)
    assert _outside_source_range(table, synthesize(table, salt=salt)) == {}
