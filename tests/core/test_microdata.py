import datetime as dt

import numpy as np
import pandas as pd
from test_forest import make_forest

from syndiffix_core import dealing, microdata
from syndiffix_core.columns import encode_frame
from syndiffix_core.harvest import Buckets
from syndiffix_core.microdata import MicrodataBuilder


def _builder(frame):
    codecs, matrix = encode_frame(frame)
    return MicrodataBuilder(make_forest(matrix), codecs)


def test_strings_exact_when_frequent_masked_when_rare():
    frequent = [f"town_{i:02d}" for i in range(8)]
    rare = [f"village_{i:03d}" for i in range(40)]  # each once: never safe to show
    values = np.r_[np.repeat(frequent, 200), rare]
    builder = _builder(pd.DataFrame({"place": values}))
    data = builder.materialize((0,))
    out = data.values[0]
    assert set(out) - set(frequent) - {None}, "rare values are still represented"
    assert not set(out) & set(rare)
    masked = [v for v in out if v not in frequent]
    assert all("*" in v for v in masked)


def test_floats_and_typed_values_agree():
    frame = pd.DataFrame({"n": np.arange(3000) % 50, "r": np.linspace(0, 1, 3000)})
    data = _builder(frame).materialize((0, 1))
    assert data.values[0].dtype == frame["n"].dtype
    np.testing.assert_allclose(np.rint(data.floats[:, 0]), data.values[0].to_numpy(), atol=1)
    assert data.row_count == len(data.values[1])


def test_nulls_come_back_as_nulls():
    values = pd.Series([1.5, 2.5, None] * 500, dtype="Float64")
    data = _builder(pd.DataFrame({"v": values})).materialize((0,))
    share = data.values[0].isna().mean()
    assert 0.25 < share < 0.42
    assert np.isnan(data.floats[:, 0]).mean() == share


def _draw_one_bucket(frame, low, high, count=4000):
    # 50 copies of every value: each is a 1-dim bucket of its own, so the column's known values are its
    # exact minimum and maximum, and the bucket drawn from lies inside them.
    builder = _builder(pd.concat([frame] * 50, ignore_index=True))
    buckets = Buckets(np.array([[low]]), np.array([[high]]), np.array([count]), np.zeros(1, dtype=np.int64))
    return builder.from_buckets((0,), buckets, np.random.default_rng(7)).values[0]


def test_integer_values_are_drawn_evenly_inside_the_range():
    # [12, 14) holds 12 and 13. A continuous draw rounded by the decoder would give 12 and 14 a
    # quarter each and 13 half: 14 lies outside the range.
    out = _draw_one_bucket(pd.DataFrame({"n": np.arange(10, 30)}), 12.0, 14.0)
    shares = out.value_counts(normalize=True)
    assert set(shares.index) == {12, 13}
    assert abs(shares[12] - 0.5) < 0.05


def test_timestamps_are_drawn_evenly_on_their_resolution_inside_the_range():
    days = pd.Series(pd.date_range("2024-01-01", periods=30, freq="D"))
    codecs, matrix = encode_frame(pd.DataFrame({"t": days}))
    first = matrix[3, 0]  # 2024-01-04 in codec seconds
    out = _draw_one_bucket(pd.DataFrame({"t": days}), first, first + 4 * 86_400.0)
    shares = out.value_counts(normalize=True)
    assert sorted(shares.index) == list(days[3:7])
    assert shares.min() > 0.2


def test_strings_and_dates_are_held_as_categories_until_output():
    # An object per row (a date, a string of a str column) costs 40-70 bytes; microdata rows are taken,
    # stitched and shuffled many times before output, so they hold codes into the distinct values.
    rng = np.random.default_rng(3)
    days = np.datetime64("2024-01-01") + rng.integers(0, 60, 20_000).astype("timedelta64[D]")
    frame = pd.DataFrame(
        {
            "day": pd.Series(days.astype(object), dtype=object),
            "city": pd.Series(rng.choice([f"city {i:02d}" for i in range(12)], 20_000), dtype="str"),
        }
    )
    builder = _builder(frame)
    data = builder.materialize((0, 1))
    for position, column in enumerate(frame.columns):
        held = data.values[position]
        assert isinstance(held.dtype, pd.CategoricalDtype)
        assert held.memory_usage(deep=True) < 2 * data.row_count
        typed = builder.codecs[position].expand(held)
        assert typed.dtype == frame[column].dtype
        assert set(typed) <= set(frame[column])
    assert all(type(day) is dt.date for day in builder.codecs[0].expand(data.values[0]))


def test_index_set_look_up_is_np_isin():
    rng = np.random.default_rng(5)
    indices = rng.integers(0, 40, 5_000).astype(float)
    indices[rng.random(5_000) < 0.1] = np.nan
    members = np.array([0.0, 3.0, 39.0, 17.0, 2.5, -1.0, 40.0, 1e9])  # the last four can match nothing
    np.testing.assert_array_equal(microdata._in_index_set(indices, members, 40), np.isin(indices, members))
    assert not microdata._in_index_set(indices, np.zeros(0), 40).any()


def test_values_find_the_disjoint_bucket_that_holds_them():
    low, high = np.array([0.0, 2.0, 3.0, 7.0]), np.array([2.0, 2.0, 6.0, 7.0])
    values = np.array([-1.0, 0.0, 1.5, 2.0, 2.5, 3.0, 5.9, 6.0, 7.0, 8.0])
    np.testing.assert_array_equal(
        dealing.matching_buckets(values, low, high), [-1, 0, 0, 1, -1, 2, 2, -1, 3, -1]
    )


def test_dealing_keeps_each_rank_in_its_matching_bucket_while_there_is_room():
    # Ranks 0-2 match bucket 0 (room for 2), rank 3 bucket 1, rank 4 none, ranks 5-6 bucket 2 (room 4).
    match = np.array([0, 0, 0, 1, -1, 2, 2])
    dealt, kept = dealing.deal_keeping_matches(match, np.array([2, 1, 4]))
    # The surplus rank 2 and the unmatched rank 4 fill bucket 2's room; nothing else moves.
    np.testing.assert_array_equal(dealt, [0, 0, 2, 1, 2, 2, 2])
    np.testing.assert_array_equal(kept, [True, True, False, True, False, True, True])
    # Dealt by rank alone, bucket 0's surplus would push every later rank one bucket on.
    np.testing.assert_array_equal(
        dealing.deal_keeping_matches(np.full(7, -1), np.array([2, 1, 4]))[0], [0, 0, 1, 2, 2, 2, 2]
    )
