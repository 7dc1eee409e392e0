"""Patching, recursive stitching and merging on given microtables."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Collection

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import stitching
from syndiffix_core.clustering import StitchOwner
from syndiffix_core.distinct_rows import DistinctRows
from syndiffix_core.stitching import Microtable, _root_ranges, _split_recursively, patch, stitch


def microtable(columns: dict[int, np.ndarray], names: Collection[int] = ()) -> Microtable:
    """`columns` as a microtable; `names`: its columns of names without an order."""
    keys = tuple(columns)
    values = np.column_stack([np.asarray(columns[k], dtype=float) for k in keys])
    typed = {k: pd.Series(columns[k]) for k in keys}
    return Microtable(keys, values, typed, names=frozenset(names))


def maker_codes(rng: np.random.Generator, rows: int) -> np.ndarray:
    """22 makers' codes with skewed shares, as floats."""
    weights = 1 / np.arange(1, 23) ** 0.8
    return rng.choice(22, size=rows, p=weights / weights.sum()).astype(float)


def binned_tvd(a: np.ndarray, b: np.ndarray, bins: int = 20) -> float:
    edges = np.histogram_bin_edges(np.concatenate([a, b]), bins=bins)
    pa, _ = np.histogram(a, edges)
    pb, _ = np.histogram(b, edges)
    return 0.5 * np.abs(pa / pa.sum() - pb / pb.sum()).sum()


@pytest.fixture
def chain():
    """Left (a, b) and right (a, c) drawn independently from one joint distribution where b and c both
    follow a: b and c are strongly dependent but never on the same side."""
    rng = np.random.default_rng(0)

    def side(n):
        a = rng.normal(50, 10, n)
        return a, 2 * a + rng.normal(0, 3, n), -a + rng.normal(0, 3, n)

    a1, b1, c1 = side(20_000)
    a2, _, c2 = side(19_700)
    return microtable({0: a1, 1: b1}), microtable({0: a2, 2: c2}), np.corrcoef(b1, c1)[0, 1]


def test_columns_on_different_sides_stay_correlated_through_the_stitch_column(chain):
    left, right, original = chain
    out = stitch(left, right, [0], rng=np.random.default_rng(1))
    assert out.columns == (0, 1, 2)
    b, c = out.column_values(1), out.column_values(2)
    assert original < -0.9
    assert np.corrcoef(b, c)[0, 1] == pytest.approx(original, abs=0.03)
    # Each right row still carries its own a: c follows the output's a as closely as on its side.
    assert np.corrcoef(out.column_values(0), c)[0, 1] < -0.9


def test_recursion_splits_down_to_ranges_of_single_values():
    rng = np.random.default_rng(3)
    left = np.round(rng.normal(50, 10, (20_000, 1)))
    right = np.round(rng.normal(50, 10, (19_950, 1)))
    lows, highs, integral = _root_ranges(left, right, None)
    distinct = DistinctRows.of(left), DistinctRows.of(right)
    left_group, right_group = _split_recursively(left, right, lows, highs, integral, distinct)
    assert left_group.max() > 30  # about one range per age that both sides hold
    # Both sides of a range hold (almost) the same values: most rows sit in single-value ranges.
    for group, values in ((left_group, left[:, 0]), (right_group, right[:, 0])):
        span = pd.Series(values).groupby(group).agg(lambda v: v.max() - v.min())
        assert (span.reindex(group).to_numpy() == 0).mean() > 0.8


@pytest.mark.parametrize("right_whole", [True, False])
def test_a_split_over_distinct_rows_gives_each_row_the_group_of_a_split_over_rows(right_whole):
    # Codes and dates: 20k rows on ~2k distinct pairs per side. A right side with one value off the
    # grid (a measurement) is split row by row next to the left's distinct rows.
    rng = np.random.default_rng(8)

    def side(n):
        code = rng.integers(0, 40, n)
        day = np.clip(np.round(code + rng.normal(0, 8, n)), -20, 60)
        return np.column_stack([code, 6.9e9 + 86_400.0 * day]).astype(float)

    left, right = side(20_000), side(19_000)
    if not right_whole:
        right[0, 0] = 3.5
    lows, highs, integral = _root_ranges(left, right, None)
    by_rows = stitching._split_items(left, right, None, None, lows, highs, integral)
    distinct = DistinctRows.of(left), DistinctRows.of(right)
    assert distinct[0] is not None and (distinct[1] is None) == (not right_whole)
    left_group, right_group = _split_recursively(left, right, lows, highs, integral, distinct)
    assert by_rows[0].max() > 100
    np.testing.assert_array_equal(left_group, by_rows[0])
    np.testing.assert_array_equal(right_group, by_rows[1])


def test_rows_sorted_in_their_groups_by_distinct_row_keep_the_order_of_a_lexsort():
    # Many rows share their group and values: ties must keep the (random) order the rows come in.
    rng = np.random.default_rng(9)
    values = np.column_stack([rng.integers(0, 5, 3_000), 86_400.0 * rng.integers(0, 9, 3_000)])
    rows = rng.integers(0, 3_000, 5_000)
    slot_group = np.sort(rng.integers(0, 40, 5_000))
    distinct = DistinctRows.of(values)
    by_lexsort = stitching._group_then_value_order(rows, slot_group, values, None)
    np.testing.assert_array_equal(by_lexsort, np.lexsort((values[rows, 1], values[rows, 0], slot_group)))
    np.testing.assert_array_equal(
        stitching._group_then_value_order(rows, slot_group, values, distinct), by_lexsort
    )


def test_stitch_column_keeps_its_one_dimensional_distribution(chain):
    left, right, _ = chain
    out = stitch(left, right, [0], rng=np.random.default_rng(1))
    a = out.column_values(0)
    assert binned_tvd(a, left.column_values(0)) < 0.02
    assert binned_tvd(a, right.column_values(0)) < 0.02
    assert abs(out.num_rows - (left.num_rows + right.num_rows) / 2) < 0.01 * left.num_rows


def largest_cdf_gap(a: np.ndarray, b: np.ndarray) -> float:
    """Kolmogorov-Smirnov distance: the largest gap between the two samples' cumulative shares."""
    points = np.union1d(a, b)
    share_a = np.searchsorted(np.sort(a), points, side="right") / len(a)
    share_b = np.searchsorted(np.sort(b), points, side="right") / len(b)
    return float(np.abs(share_a - share_b).max())


@pytest.mark.parametrize("owner", list(StitchOwner))
def test_columns_of_one_side_keep_their_values_through_the_merge(chain, owner):
    """The merge cuts or repeats rows to fit the sides; a column that only one side holds still comes out
    with that side's values, each as often as its share gives at the output's row count (the left's
    20 000 rows cut to 19 850 lose 150 values spread over the range; the right's 19 700 gain 150
    values, each repeated once), so no value is lost or repeated by chance."""
    left, right, _ = chain
    out = stitch(left, right, [0], owner=owner, rng=np.random.default_rng(1))
    for column, side in ((1, left), (2, right)):
        assert largest_cdf_gap(out.column_values(column), side.column_values(column)) < 2 / out.num_rows
    values, counts = np.unique(out.column_values(2), return_counts=True)
    if out.num_rows >= right.num_rows:
        np.testing.assert_array_equal(values, np.unique(right.column_values(2)))
        assert counts.max() <= 2 and counts.sum() == out.num_rows
    assert np.unique(out.column_values(1)).size == min(out.num_rows, left.num_rows)


def test_rows_are_whole_rows_of_their_side(chain):
    left, right, _ = chain
    out = stitch(left, right, [0], owner=StitchOwner.LEFT, rng=np.random.default_rng(2))
    pairs_left = set(zip(left.column_values(0), left.column_values(1), strict=True))
    assert set(zip(out.column_values(0), out.column_values(1), strict=True)) <= pairs_left
    assert set(out.column_values(2)) <= set(right.column_values(2))
    # The left owner keeps the left side's row count and stitch values.
    assert out.num_rows == left.num_rows
    assert out.typed[1].equals(pd.Series(out.column_values(1)))


def test_shared_owner_alternates_sides_for_the_stitch_column(chain):
    left, right, _ = chain
    out = stitch(left, right, [0], owner=StitchOwner.SHARED, rng=np.random.default_rng(3))
    a = out.column_values(0)
    from_left = np.isin(a, left.column_values(0))
    from_right = np.isin(a, right.column_values(0))
    assert 0.45 < from_left.mean() < 0.55
    assert 0.45 < from_right.mean() < 0.55


def test_splits_happen_in_the_space_of_the_values():
    """Ages 18-90 split at their own midpoints: each age group of one side meets the same group."""
    rng = np.random.default_rng(4)
    age_left = rng.integers(18, 91, 5000)
    age_right = rng.integers(18, 91, 5000)
    left = microtable({0: age_left, 1: age_left * 100})
    right = microtable({0: age_right, 2: -age_right})
    out = stitch(left, right, [0], owner=StitchOwner.LEFT, rng=np.random.default_rng(5))
    # Left's age (via column 1) and right's age (via column 2) are almost the same in every row.
    difference = out.column_values(1) / 100 + out.column_values(2)
    assert np.abs(difference).mean() < 1.0


def test_several_stitch_columns_and_nulls_are_matched():
    rng = np.random.default_rng(6)
    n = 8000
    city = rng.integers(0, 5, n).astype(float)
    income = np.where(rng.random(n) < 0.1, np.nan, rng.normal(50, 20, n) + 30 * city)
    left = microtable({0: city, 1: income, 2: city * 2})
    right = microtable({0: city[::-1].copy(), 1: income[::-1].copy(), 3: -city[::-1]})
    out = stitch(left, right, [0, 1], owner=StitchOwner.LEFT, rng=np.random.default_rng(7))
    # Column 2 (left) and 3 (right) both encode the city: the stitch keeps them consistent.
    assert np.mean(out.column_values(2) / 2 == -out.column_values(3)) > 0.95
    assert np.isnan(out.column_values(1)).mean() == pytest.approx(0.1, abs=0.01)


def test_stitching_is_deterministic_for_a_generator_state(chain):
    left, right, _ = chain
    first = stitch(left, right, [0], rng=np.random.default_rng(9))
    second = stitch(left, right, [0], rng=np.random.default_rng(9))
    assert np.array_equal(first.values, second.values)


def test_patched_columns_keep_their_distribution_and_the_left_row_count():
    rng = np.random.default_rng(8)
    left = microtable({0: rng.normal(size=1000)})
    right_values = rng.exponential(size=1000)
    same = patch(left, microtable({1: right_values}), rng=np.random.default_rng(0))
    assert same.num_rows == 1000
    assert np.array_equal(np.sort(same.column_values(1)), np.sort(right_values))
    assert np.array_equal(same.column_values(0), left.column_values(0))
    # Shuffled: no relation to the left rows.
    assert abs(np.corrcoef(same.column_values(0), same.column_values(1))[0, 1]) < 0.1

    fewer = patch(left, microtable({1: right_values[:600]}), rng=np.random.default_rng(0))
    assert fewer.num_rows == 1000
    assert set(fewer.column_values(1)) == set(right_values[:600])
    more = patch(
        left, microtable({1: np.concatenate([right_values, right_values])}), rng=np.random.default_rng(0)
    )
    assert more.num_rows == 1000
    assert binned_tvd(more.column_values(1), right_values) < 0.08


def test_typed_values_follow_their_rows():
    left = microtable({0: np.arange(100.0), 1: np.arange(100.0)})
    words = np.array([f"w{i}" for i in range(100)])
    right = Microtable(
        (0, 2),
        np.column_stack([np.arange(100.0), np.arange(100.0)]),
        {0: pd.Series(np.arange(100.0)), 2: pd.Series(words, dtype="string")},
    )
    out = stitch(left, right, [0], owner=StitchOwner.RIGHT, rng=np.random.default_rng(0))
    assert out.typed[2].dtype == "string"
    assert (out.typed[2].to_numpy() == np.array([f"w{int(v)}" for v in out.column_values(2)])).all()


def test_an_empty_side_gives_an_empty_table_with_every_column():
    left = microtable({0: np.arange(10.0), 1: np.arange(10.0)})
    empty = microtable({0: np.zeros(0), 2: np.zeros(0)})
    for joined in (
        stitch(left, empty, [0], rng=np.random.default_rng(0)),
        patch(left, microtable({3: np.zeros(0)}), rng=np.random.default_rng(0)),
    ):
        assert joined.num_rows == 0
        assert len(joined.columns) == 3


def test_bad_inputs_are_refused():
    left = microtable({0: np.arange(10.0)})
    with pytest.raises(ValueError, match="not on both sides"):
        stitch(left, microtable({1: np.arange(10.0)}), [0], rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="disjoint"):
        patch(left, microtable({0: np.arange(10.0)}), rng=np.random.default_rng(0))


def test_a_join_keeps_floats_only_for_the_columns_asked_and_joins_the_same_rows(chain):
    left, right, _ = chain
    full = stitch(left, right, [0], rng=np.random.default_rng(5))
    kept = stitch(left, right, [0], rng=np.random.default_rng(5), keep_values={2})
    assert kept.columns == full.columns and kept.value_columns == (2,) and kept.values.shape[1] == 1
    np.testing.assert_array_equal(kept.column_values(2), full.column_values(2))
    for column in full.columns:
        pd.testing.assert_series_equal(kept.typed[column], full.typed[column])
    with pytest.raises(ValueError):
        kept.column_values(0)
    patched = patch(left, microtable({3: np.arange(100.0)}), rng=np.random.default_rng(2), keep_values=())
    assert patched.values.shape == (left.num_rows, 0) and patched.num_rows == left.num_rows


def test_assemble_holds_no_cluster_of_its_own_while_the_next_one_is_materialized():
    import weakref

    from syndiffix_core.clustering import Clusters, DerivedCluster
    from syndiffix_core.stitching import assemble

    rng = np.random.default_rng(4)
    made: list[weakref.ref] = []
    alive_at_start: list[bool] = []

    def materialize(columns):
        alive_at_start.append(len(made) >= 2 and made[-1]() is not None)  # the previous derived cluster
        table = microtable({c: rng.normal(size=400) for c in columns})
        made.append(weakref.ref(table))
        return table

    clusters = Clusters((0, 1), (DerivedCluster((2,), (0,)), DerivedCluster((3,), (1,))))
    joined = assemble(clusters, materialize, entropies=None, rng=rng)
    assert joined.columns == (0, 1, 2, 3)
    assert alive_at_start == [False, False, False]


def test_one_sided_columns_calibrated_on_two_threads_give_the_one_thread_join(monkeypatch):
    rng = np.random.default_rng(3)
    n_left, n_right = 5_000, 4_900
    left = microtable(
        {
            0: rng.integers(0, 50, n_left),
            1: rng.normal(size=n_left),
            2: rng.integers(0, 4, n_left),
            3: rng.random(n_left),
        }
    )
    right = microtable(
        {0: rng.integers(0, 50, n_right), 4: rng.normal(size=n_right), 5: rng.integers(0, 9, n_right)}
    )
    one = stitch(left, right, [0], rng=np.random.default_rng(7))

    side_by_side = threading.Barrier(2)
    calibrate = stitching._calibrated_rows
    calls = []

    def calibrate_after_the_barrier(*args):
        calls.append(args)
        if len(calls) <= 2:
            side_by_side.wait(timeout=30)  # raises BrokenBarrierError unless two columns run at once
        return calibrate(*args)

    monkeypatch.setattr(stitching, "_calibrated_rows", calibrate_after_the_barrier)
    two = stitch(left, right, [0], rng=np.random.default_rng(7), threads=2)
    assert len(calls) == 5  # columns 1, 2, 3 of the left and 4, 5 of the right
    assert one.columns == two.columns
    np.testing.assert_array_equal(one.values, two.values)
    for column in one.columns:
        pd.testing.assert_series_equal(one.typed[column], two.typed[column])


def one_sided_columns(seed: int) -> tuple[Microtable, Microtable]:
    """Sides stitched on column 0, with 2 columns only the left holds and 3 only the right holds."""
    rng = np.random.default_rng(seed)
    left = microtable({0: rng.integers(0, 30, 3_000), 1: rng.normal(size=3_000), 2: rng.random(3_000)})
    right = microtable(
        {0: rng.integers(0, 30, 2_900), 3: rng.normal(size=2_900), 4: rng.random(2_900), 5: rng.random(2_900)}
    )
    return left, right


def test_a_stitch_asks_for_its_threads_as_it_goes_with_the_same_result(monkeypatch):
    # Cores free up while a stitch runs (the last worker finishes): each batch of one-sided columns
    # takes as many threads as it is told then.
    left, right = one_sided_columns(6)
    expected = stitch(left, right, [0], rng=np.random.default_rng(5))
    answers, batches = iter([1, 3, 2]), []
    calibrate = stitching.map_in_threads
    monkeypatch.setattr(
        stitching,
        "map_in_threads",
        lambda function, tasks, threads: (
            batches.append((len(tasks), threads)) or calibrate(function, tasks, threads)
        ),
    )
    out = stitch(left, right, [0], rng=np.random.default_rng(5), threads=lambda: next(answers))
    assert batches == [(1, 1), (3, 3), (1, 2)]  # columns 1 | 2, 3, 4 | 5
    np.testing.assert_array_equal(out.values, expected.values)
    for column in out.columns:
        pd.testing.assert_series_equal(out.typed[column], expected.typed[column])


def test_a_stitch_holds_the_calibrated_rows_of_few_columns_at_a_time(monkeypatch):
    # Each one-sided column's rows (8 bytes per output row) are taken into the joined table as they
    # come: with 5 such columns, holding them all until the join would be 5 arrays at once.
    left, right = one_sided_columns(4)
    expected = stitch(left, right, [0], rng=np.random.default_rng(5))
    calibrate = stitching._calibrated_rows
    live, most_live = [0], [0]

    def counted(*args):
        rows = calibrate(*args)
        live[0] += 1
        most_live[0] = max(most_live[0], live[0])
        weakref.finalize(rows, lambda: live.__setitem__(0, live[0] - 1))
        return rows

    monkeypatch.setattr(stitching, "_calibrated_rows", counted)
    joined = stitch(left, right, [0], rng=np.random.default_rng(5))
    assert most_live[0] <= 2  # the column being taken and the next one
    np.testing.assert_array_equal(joined.values, expected.values)
    for column in expected.columns:
        pd.testing.assert_series_equal(joined.typed[column], expected.typed[column])


def _words(indices: np.ndarray) -> np.ndarray:
    return np.array([f"w{int(i):03d}" for i in indices], dtype=object)


def _as_categories(words: np.ndarray) -> pd.Series:
    """Words held as the codecs' compact form does: categories the side's own distinct words, sorted,
    in an object Index (pandas would type an inferred one as str)."""
    categories = pd.Index(sorted(set(words)), dtype=object)
    return pd.Series(pd.Categorical.from_codes(categories.get_indexer(words), categories=categories))


def test_category_columns_join_as_their_values_would():
    # Column 0 (stitched) and column 1 (one-sided, no floats kept on the left) are words; each side
    # holds its own set of them. Held as categories, the join must pair and calibrate the same rows
    # as with the words themselves, and keep the columns as categories (not an object per row).
    rng = np.random.default_rng(4)
    left_keys, right_keys = rng.integers(0, 40, 3000), rng.integers(5, 50, 2800)
    left_other, right_other = rng.integers(0, 300, 3000), rng.normal(size=2800)

    def sides(as_typed):
        left = Microtable(
            (0, 1),
            left_keys[:, None].astype(float),
            {0: as_typed(_words(left_keys)), 1: as_typed(_words(left_other))},
            value_columns=(0,),
        )
        right = Microtable(
            (0, 2),
            np.column_stack([right_keys, right_other]).astype(float),
            {0: as_typed(_words(right_keys)), 2: pd.Series(right_other)},
        )
        return stitch(left, right, [0], rng=np.random.default_rng(9), keep_values={0})

    plain = sides(lambda words: pd.Series(words, dtype=object))
    compact = sides(_as_categories)
    # A second stitch on the joined column: its categories, the union of two sides', meet a third set.
    third_keys = rng.integers(30, 60, 2500)

    def third(as_typed):
        return Microtable(
            (0, 3),
            np.column_stack([third_keys, third_keys]).astype(float),
            {0: as_typed(_words(third_keys)), 3: pd.Series(third_keys)},
        )

    plain, compact = (
        stitch(table, third(as_typed), [0], rng=np.random.default_rng(2), keep_values={0})
        for table, as_typed in (
            (plain, lambda words: pd.Series(words, dtype=object)),
            (compact, _as_categories),
        )
    )
    for column in (0, 1):
        assert isinstance(compact.typed[column].dtype, pd.CategoricalDtype)
        assert compact.typed[column].cat.categories.is_monotonic_increasing
        np.testing.assert_array_equal(compact.typed[column].to_numpy(dtype=object), plain.typed[column])
    for column in (2, 3):
        np.testing.assert_array_equal(compact.typed[column], plain.typed[column])


def drifting_pairs(rng: np.random.Generator, rows: int = 5000):
    """Two sides of one column and pairs that take the right side's values below 30 twice, as a merge
    whose ranges hold more right rows where the sides relate the stitch columns differently does."""
    left = microtable({0: rng.uniform(0, 100, rows), 1: rng.uniform(0, 1, rows)})
    right = microtable({0: rng.uniform(0, 100, rows), 2: rng.uniform(0, 1, rows)})
    right_rows = np.concatenate([np.arange(rows), np.flatnonzero(right.column_values(0) < 30)])
    left_rows = rng.integers(0, rows, right_rows.size)
    return left, right, left_rows, right_rows


def test_stitch_values_that_drift_from_their_side_are_calibrated_back_in_their_order():
    rng = np.random.default_rng(5)
    left, right, left_rows, right_rows = drifting_pairs(rng)
    take_right = np.ones(right_rows.size, dtype=bool)
    rows = stitching._stitch_value_rows(left, right, [0], left_rows, right_rows, take_right, rng)[0]
    a = right.column_values(0)
    drifted, calibrated = a[right_rows], a[rows - left.num_rows]  # rows of both sides, left first
    assert rows.min() >= left.num_rows
    assert largest_cdf_gap(drifted, a) > 0.1
    assert largest_cdf_gap(calibrated, a) < 2 / rows.size
    # Each output row keeps its place in the column's order (ties aside).
    assert pd.Series(calibrated).corr(pd.Series(drifted), method="spearman") > 0.999


def test_stitch_values_drifting_within_the_noise_stay_the_paired_rows_values():
    rng = np.random.default_rng(6)
    left, right, _, _ = drifting_pairs(rng)
    right_rows = rng.permutation(right.num_rows)[:4900]
    left_rows = rng.permutation(left.num_rows)[:4900]
    for take_right, expected in (
        (np.ones(4900, dtype=bool), left.num_rows + right_rows),
        (np.zeros(4900, dtype=bool), left_rows),
        (np.arange(4900) % 2 == 1, np.where(np.arange(4900) % 2 == 1, left.num_rows + right_rows, left_rows)),
    ):
        rows = stitching._stitch_value_rows(left, right, [0], left_rows, right_rows, take_right, rng)[0]
        np.testing.assert_array_equal(rows, expected)


def test_alternating_stitch_values_are_calibrated_to_both_sides():
    rng = np.random.default_rng(7)
    left, right, left_rows, right_rows = drifting_pairs(rng)
    take_right = np.arange(right_rows.size) % 2 == 1
    rows = stitching._stitch_value_rows(left, right, [0], left_rows, right_rows, take_right, rng)[0]
    both = np.concatenate([left.column_values(0), right.column_values(0)])
    paired = both[np.where(take_right, left.num_rows + right_rows, left_rows)]
    assert largest_cdf_gap(paired, both) > 0.05
    assert largest_cdf_gap(both[rows], both) < 2 / rows.size


def test_drift_is_the_largest_gap_between_the_cumulative_shares():
    keys = np.arange(100, dtype=float)
    assert stitching._drift([keys], np.arange(50)) == pytest.approx(0.5)  # the lower half only
    assert stitching._drift([keys], np.arange(100)[::-1]) == 0.0  # every row once, in any order
    # Two sides laid end to end: rows of the second side are found past the first side's length.
    left, right = np.zeros(10), np.ones(10)
    assert stitching._drift([left, right], np.arange(10, 20)) == pytest.approx(0.5)
    assert stitching._drift([left, right], np.r_[0:5, 10:15]) == 0.0


@pytest.mark.parametrize("as_names", [False, True])
def test_names_of_one_side_keep_their_rows_through_the_stitch(as_names):
    # The right side holds 22 makers' codes and names, one-to-one but in another order; the stitch
    # column x pairs some right rows twice and leaves others out, so each name's count in the output
    # differs from the side's by a few rows and the one-sided columns are dealt their side's counts.
    rng = np.random.default_rng(8)
    code = maker_codes(rng, 3000)
    name = (7 * code) % 22
    right = microtable({0: rng.normal(size=3000), 1: code, 2: name}, names={1, 2} if as_names else ())
    left = microtable({0: rng.normal(size=2900), 3: rng.normal(size=2900)})
    out = stitch(left, right, [0], owner=StitchOwner.LEFT, rng=np.random.default_rng(2))
    paired = np.mean((7 * out.column_values(1)) % 22 == out.column_values(2))
    # Either way each column keeps its side's distribution of names.
    for column in (1, 2):
        counts = np.bincount(out.column_values(column).astype(int), minlength=22) / out.num_rows
        side = np.bincount(right.column_values(column).astype(int), minlength=22) / right.num_rows
        assert np.abs(counts - side).max() < 0.002
    # Dealt out by rank, every name's rows shift by the count differences of the names before it.
    assert paired > 0.95 if as_names else paired < 0.9, paired
    assert out.names == right.names


def test_rows_of_equal_stitch_values_pair_first_within_each_group():
    # Two groups of 6 and 3 rows; each side is sorted by group, then value, as `_align` lays it out.
    target = np.array([6, 3])
    left_keys = np.array([1, 2, 3, 4, 5, 5, 7, 8, 8], dtype=float)[:, None]
    right_keys = np.array([1, 1, 2, 3, 4, 5, 7, 7, 8], dtype=float)[:, None]
    distinct = DistinctRows.of(left_keys), DistinctRows.of(right_keys)
    keys = stitching._common_keys(target, distinct, np.arange(9), np.arange(9), 1)
    right_rows = np.arange(100, 109)
    paired = stitching._matching_equal_values(iter([keys]), right_rows)
    paired_keys = right_keys[paired - 100, 0]
    # Zipped, one surplus 1 shifts every later row of the group: 2 of 6 pairs agree, now 5 of 6.
    np.testing.assert_array_equal(paired_keys, [1, 2, 3, 4, 5, 1, 7, 8, 7])
    # Each right row is used once and stays in its group.
    assert sorted(paired[:6]) == list(range(100, 106)) and sorted(paired[6:]) == [106, 107, 108]


def test_rows_left_over_pair_on_the_first_stitch_columns_next():
    # One group, two stitch columns (a code, then a second code). Equal pairs of both come first; of
    # the rest, rows of equal first codes pair next; the last rows pair in order.
    target = np.array([6])
    left_keys = np.array([[1, 1], [1, 2], [2, 1], [2, 2], [3, 1], [3, 2]], dtype=float)
    right_keys = np.array([[1, 1], [1, 3], [2, 3], [3, 1], [3, 3], [3, 3]], dtype=float)
    distinct = DistinctRows.of(left_keys), DistinctRows.of(right_keys)
    rows = np.arange(6)
    levels = (stitching._common_keys(target, distinct, rows, rows, columns) for columns in (2, 1))
    paired = stitching._matching_equal_values(levels, rows)
    paired_keys = right_keys[paired]
    # (1,1) and (3,1) pair exactly; (1,3) and one (3,3) pair on their first code; (2,3) and the other
    # (3,3) take the positions left, in order.
    np.testing.assert_array_equal(paired_keys[:, 0], [1, 1, 2, 3, 3, 3])
    np.testing.assert_array_equal(paired_keys, [[1, 1], [1, 3], [2, 3], [3, 3], [3, 1], [3, 3]])
    assert sorted(paired) == list(range(6))


def second_code(rng: np.random.Generator, code: np.ndarray, shift: float) -> np.ndarray:
    """A code of 6 values beside makers' `code`s, whose link to the maker depends on `shift`: two
    sides with different joint counts of the pair."""
    rows = len(code)
    return ((code + rng.integers(0, 3, size=rows) + (rng.random(rows) < shift) * 3) % 6).astype(float)


def test_a_stitch_keeps_a_code_paired_with_the_name_it_determines():
    # 22 makers' codes (skewed shares, the same on both sides, as both are calibrated to the code's
    # 1-dim tree); the right side also holds each maker's name (a function of its code, in another
    # order). The sides relate the maker to the second stitch column differently, so many right rows
    # find no left row of both values in their range. Split and paired on the maker's code first, they
    # still agree on it.
    rng = np.random.default_rng(11)
    left_code = maker_codes(rng, 3000)
    right_code = rng.permutation(left_code)
    left = microtable(
        {0: left_code, 1: second_code(rng, left_code, 0.1), 3: rng.normal(size=3000)}, names={0, 1}
    )
    right = microtable(
        {0: right_code, 1: second_code(rng, right_code, 0.4), 2: (7 * right_code) % 22}, names={0, 1, 2}
    )
    out = stitch(
        left,
        right,
        [1, 0],
        entropies=[4.0, 1.0, 4.0, 5.0],
        owner=StitchOwner.LEFT,
        rng=np.random.default_rng(3),
    )
    named = np.mean((7 * out.column_values(0)) % 22 == out.column_values(2))
    assert named > 0.98, named


def test_a_tied_code_beside_a_measurement_still_splits_and_pairs_on_the_code():
    # The second stitch column is a measurement (no distinct rows over both columns): the split runs
    # on the maker's code alone, and rows pair on the code before they pair in order.
    rng = np.random.default_rng(13)
    left_code = maker_codes(rng, 3000)
    right_code = rng.permutation(left_code)
    left = microtable({0: left_code, 1: rng.normal(size=3000), 3: rng.normal(size=3000)}, names={0})
    right = microtable(
        {0: right_code, 1: rng.normal(size=3000) + right_code / 5, 2: (7 * right_code) % 22}, names={0, 2}
    )
    out = stitch(
        left,
        right,
        [1, 0],
        entropies=[4.0, 6.0, 4.0, 5.0],
        owner=StitchOwner.LEFT,
        rng=np.random.default_rng(5),
    )
    named = np.mean((7 * out.column_values(0)) % 22 == out.column_values(2))
    assert named > 0.98, named
