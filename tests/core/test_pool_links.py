import numpy as np

from syndiffix_core.pool_links import TIED_LINK, pair_link, primary_choices


def _points(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    points = np.c_[x, y].astype(float)
    return points, points.copy(), np.ones(len(x), dtype=np.int64)


def test_independent_columns_are_barely_linked_and_a_function_fully():
    rng = np.random.default_rng(3)
    x, noise = rng.uniform(0, 100, 5000), rng.uniform(0, 100, 5000)
    assert pair_link(*_points(x, noise)) < 0.03
    assert pair_link(*_points(x, np.sqrt(x))) > 0.95
    assert 0.2 < pair_link(*_points(x, x + rng.normal(0, 20, 5000))) < 0.8


def test_a_category_that_fixes_a_range_links_strongly_and_counts_weigh():
    codes = np.repeat([0.0, 1.0, 2.0], 200)
    values = codes * 10 + np.tile(np.linspace(0, 5, 200), 3)
    # equal-count bins of the values straddle two categories at most at the bins' edges
    assert pair_link(*_points(codes, values)) > 0.8
    # ranges count at their midpoints, entries by their counts: one heavy entry dominates
    low = np.array([[0.0, 0.0], [1.0, 10.0], [0.0, 10.0], [1.0, 0.0]])
    high = low + np.array([0.0, 2.0])
    linked = pair_link(low, high, np.array([500, 500, 1, 1]))
    unlinked = pair_link(low, high, np.array([500, 500, 500, 500]))
    assert linked > 0.9 and unlinked < 0.01


def test_empty_or_constant_pools_have_no_link():
    assert pair_link(np.zeros((0, 2)), np.zeros((0, 2)), np.zeros(0, dtype=np.int64)) == 0.0
    assert pair_link(*_points(np.ones(50), np.arange(50))) == 0.0


def test_only_dimensions_outside_tied_pairs_are_drawn_alone():
    links = np.array([[0, 0.99, 0.05, 0.3], [0.99, 0, 0.04, 0.2], [0.05, 0.04, 0, 0.1], [0.3, 0.2, 0.1, 0]])
    np.testing.assert_array_equal(primary_choices(links), [2, 3])
    # no tied pair, or every dimension tied: any dimension
    assert primary_choices(np.minimum(links, TIED_LINK - 0.01)) is None
    assert primary_choices(np.full((3, 3), 0.95)) is None
