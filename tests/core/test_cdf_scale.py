"""The columns' cumulative-count scales that the multi-column trees are built on."""

import numpy as np
import pandas as pd
import pytest
from test_forest import make_forest

from syndiffix_core import synthesize
from syndiffix_core.cdf_scale import LINEAR_SHARE, CdfScale
from syndiffix_core.harvest import Harvester


def _scale(buckets, column_range=(0.0, 16.0)):
    low, high, count = np.array(buckets, dtype=float).reshape(-1, 3).T
    return CdfScale.from_buckets(low, high, count, column_range)


def test_a_share_counts_the_rows_below_the_value():
    # 10 rows spread over [0, 2), 80 at the point 4, 10 over [8, 16)
    scale = _scale([(0, 2, 10), (4, 4, 80), (8, 16, 10)])
    values = np.array([-1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 8.0, 12.0, 16.0, 20.0])
    assert np.allclose(scale.shares(values), [0.0, 0.0, 0.05, 0.1, 0.1, 0.5, 0.9, 0.95, 1.0, 1.0])


def test_a_position_blends_the_share_with_the_place_on_the_range():
    scale = _scale([(0, 2, 10), (4, 4, 80), (8, 16, 10)])
    # Within the range, positions rise with the share by (1 - LINEAR_SHARE) and never less.
    low, high = scale.positions(np.array([2.0, 4.0]))
    assert high - low >= (1 - LINEAR_SHARE) * 0.4
    # Across the spike's rows the position jumps; across the empty [2, 4) it rises by the range part only.
    below, at, above = scale.positions(np.array([4.0 - 1e-9, 4.0, 4.0 + 1e-9]))
    assert at - below > 0.15 and above - at > 0.15


def test_positions_are_strictly_increasing_across_gaps_points_and_outliers():
    scale = _scale([(0, 2, 10), (4, 4, 80), (8, 16, 10)])
    values = np.array([-1e9, -5.0, 0.0, 1.9, 2.5, 3.9, 4.0, 4.1, 7.0, 8.0, 15.9, 17.0, 1e12])
    positions = scale.positions(values)
    assert np.all(np.diff(positions) > 0)
    assert positions.min() >= 0 and positions.max() <= 1


def test_a_heavy_tail_is_spread_over_the_scale():
    # Buckets of a column spanning seven orders of magnitude, with equal counts per decade.
    edges = 10.0 ** np.arange(8)
    scale = _scale([(lo, hi, 100) for lo, hi in zip(edges[:-1], edges[1:], strict=True)], (0.0, 2.0**24))
    assert np.allclose(np.diff(scale.shares(edges)), 1 / 7)
    # On the raw range the first six decades share 1/16 of the range; their positions get over a third.
    positions = scale.positions(edges)
    assert positions[6] - positions[0] > 0.35


@pytest.mark.parametrize(
    "buckets",
    [[(0, 2, 10), (4, 4, 80), (8, 16, 10)], [(3, 3, 5)], []],
    ids=["mixed", "one point", "no buckets"],
)
def test_values_come_back_from_their_positions(buckets):
    scale = _scale(buckets)
    values = np.array([-3.0, 0.0, 0.5, 3.0, 4.0, 4.5, 9.25, 16.0, 40.0])
    assert np.allclose(scale.to_values(scale.positions(values)), values, rtol=1e-12, atol=1e-9)
    # A point bucket's value (an exact value the trees may emit) comes back exactly.
    points = np.array([lo for lo, hi, _ in buckets if lo == hi], dtype=float)
    assert np.array_equal(scale.to_values(scale.positions(points)), points)


def test_overlapping_range_buckets_add_up():
    scale = _scale([(0, 8, 40), (4, 12, 40)])
    assert np.allclose(scale.shares(np.array([4.0, 8.0, 12.0])), [0.25, 0.75, 1.0])


def _spearman(frame, a, b):
    return frame[a].rank().corr(frame[b].rank())


def test_a_column_spanning_orders_of_magnitude_keeps_its_links():
    # GDP-like: the bulk of the rows in the lowest 1/1000 of the range; both other columns follow its log.
    # On the raw scale gdp-population came out at 0.46 (source 0.81), gdp-life at 0.37 (0.58).
    rng = np.random.default_rng(5)
    size = np.exp(rng.normal(22, 2.2, 3000))
    table = pd.DataFrame(
        {
            "gdp": np.round(size, -3),
            "life": np.round(50 + 3 * np.log(size) / 2.2 + rng.normal(0, 4, 3000), 1),
            "population": np.round(np.exp(0.8 * np.log(size) + rng.normal(0, 1.2, 3000))),
        }
    )
    synthetic = synthesize(table, salt="heavy tails")
    for a, b in (("gdp", "life"), ("gdp", "population"), ("life", "population")):
        assert abs(_spearman(synthetic, a, b) - _spearman(table, a, b)) < 0.08, (a, b)


def test_the_few_values_beside_a_spike_keep_their_link():
    # Oil-price-like: 0 in 82 % of rows; the other rows' small positive values follow another column.
    # On the raw scale their cells also hold the spike until the trees are deep (Spearman 0.86-0.95).
    rng = np.random.default_rng(8)
    production = rng.normal(0, 1, 2000)
    oil = np.where(rng.random(2000) < 0.82, 0.0, np.clip(0.05 + 0.03 * production, 0.001, 0.3))
    table = pd.DataFrame({"oil": np.round(oil, 4), "production": np.round(production, 3)})
    for salt in ("spike", "another salt"):
        synthetic = synthesize(table, salt=salt)
        assert _spearman(synthetic[synthetic["oil"] > 0], "oil", "production") > 0.97


def test_null_rows_stand_for_null_on_the_scale():
    # Column 0: 2,000 values and 500 nulls; column 1: no nulls.
    rng = np.random.default_rng(5)
    first = rng.normal(50.0, 10.0, 2500)
    first[rng.random(2500) < 0.2] = np.nan
    forest = make_forest(np.column_stack([first, rng.normal(0.0, 1.0, 2500)]))
    harvester = Harvester(forest)
    scales = []
    for j in range(2):
        buckets = harvester.harvest((j,))
        scales.append(
            CdfScale.from_buckets(
                buckets.low[:, 0], buckets.high[:, 0], buckets.count, forest.column_range(j)
            )
        )
    maps = [scale.positions for scale in scales]
    positions, null_values = forest.mapped_matrix(maps)
    assert null_values[1] is None
    null_rows = np.isnan(first)
    assert np.all(positions[null_rows, 0] == null_values[0])
    assert np.all(positions[~null_rows, 0] < null_values[0])

    on_scale = forest.over(positions, null_values)
    assert on_scale.null_values[0] == null_values[0]
    # The multi-column buckets are clipped to the values' hull, which leaves the nulls' bucket out.
    top = Harvester(on_scale).column_bounds(0)[1, 1]
    assert top <= positions[~null_rows, 0].max() + 0.05 < null_values[0]
