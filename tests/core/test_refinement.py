from itertools import combinations

import numpy as np
import pytest
from test_forest import make_forest

from syndiffix_core import refinement
from syndiffix_core.harvest import Harvester
from syndiffix_core.refinement import RefinementDraws


def _pairs(low: np.ndarray, high: np.ndarray) -> list[tuple[float, float]]:
    return list(zip(low.tolist(), high.tolist(), strict=True))


def _four_linked_columns(rows: int, seed: int) -> np.ndarray:
    """Four columns on disjoint value ranges, so a dimension written into another's place shows:
    x in [0, 1], a noisy copy of x in [10, 11], a 5-value code of x in {100..104}, noise in [1000, 2000]."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, rows)
    copy = np.clip(x + rng.normal(0, 0.02, rows), 0, 1) + 10
    code = 100 + np.minimum((x * 5).astype(int), 4)
    return np.c_[x, copy, code, rng.uniform(1000, 2000, rows)]


@pytest.mark.parametrize("chunk_rows", [refinement._CHUNK_ROWS, 257])
def test_refined_buckets_keep_each_dimension_in_its_column_and_the_links(monkeypatch, chunk_rows):
    monkeypatch.setattr(refinement, "_CHUNK_ROWS", chunk_rows)
    matrix = _four_linked_columns(8000, seed=4)
    harvester = Harvester(make_forest(matrix))
    columns = (0, 1, 2, 3)
    pool = harvester.pool(columns)
    lazy = pool.placeholder
    entries = np.repeat(np.flatnonzero(lazy), pool.count[lazy])
    assert entries.size > 1000
    # some sub-pools hold placeholders themselves: requests go down more than one level
    assert harvester.pool((0, 1, 2)).placeholder.any()
    low, high = RefinementDraws(harvester, np.random.default_rng(9)).concretize(columns, entries)
    assert low.shape == high.shape == (entries.size, 4)
    for j, (bottom, top) in enumerate([(0, 1), (10, 11), (100, 104), (1000, 2000)]):
        assert np.all(low[:, j] >= bottom - 1e-9) and np.all(high[:, j] <= top + 1e-9), f"dimension {j}"
    assert np.all(low <= high)
    # the placeholders' singular dimensions keep their points
    single = pool.low[entries] == pool.high[entries]
    assert single.any()
    np.testing.assert_array_equal(low[single], pool.low[entries][single])
    np.testing.assert_array_equal(high[single], pool.low[entries][single])
    # the code is an exact value everywhere; the refined rows keep x with its copy and with its code
    assert np.all(low[:, 2] == high[:, 2])
    centers = (low + high) / 2
    assert np.corrcoef(centers[:, 0], centers[:, 1])[0, 1] > 0.9
    assert np.corrcoef(centers[:, 0], centers[:, 2])[0, 1] > 0.9
    assert abs(np.corrcoef(centers[:, 0], centers[:, 3])[0, 1]) < 0.1
    # drawn placeholders of the narrower pools were concretized in turn: next to no range is one that
    # only a placeholder of a narrower pool has (it stays only where that one's own subnode was empty)
    for j in range(4):
        concrete, placeholder = set(), set()
        for size in (1, 2, 3):
            for sub in (s for s in combinations(columns, size) if j in s):
                sub_pool, position = harvester.pool(sub), sub.index(j)
                ranges = _pairs(sub_pool.low[:, position], sub_pool.high[:, position])
                for pair, lazy_entry in zip(ranges, sub_pool.placeholder, strict=True):
                    (placeholder if lazy_entry else concrete).add(pair)
        unfilled = placeholder - concrete - set(_pairs(pool.low[entries, j], pool.high[entries, j]))
        assert sum(pair in unfilled for pair in _pairs(low[:, j], high[:, j])) < 0.01 * entries.size


def test_refined_buckets_depend_only_on_the_random_numbers():
    matrix = _four_linked_columns(6000, seed=6)
    harvester = Harvester(make_forest(matrix))
    pool = harvester.pool((0, 1, 2))
    entries = np.repeat(np.flatnonzero(pool.placeholder), pool.count[pool.placeholder])
    first = RefinementDraws(harvester, np.random.default_rng(3)).concretize((0, 1, 2), entries)
    again = RefinementDraws(harvester, np.random.default_rng(3)).concretize((0, 1, 2), entries)
    other = RefinementDraws(harvester, np.random.default_rng(4)).concretize((0, 1, 2), entries)
    np.testing.assert_array_equal(first[0], again[0])
    np.testing.assert_array_equal(first[1], again[1])
    assert np.any(first[0] != other[0])


def _monthly_series(years: int) -> np.ndarray:
    """year, a running month number t and the month of the year: year and t follow each other, the
    month is linked to neither (a table such as a monthly measurement series)."""
    months = np.arange(12 * years)
    return np.c_[1990 + months // 12, months, 1 + months % 12]


def test_tied_dimensions_are_never_drawn_alone_so_their_link_survives():
    harvester = Harvester(make_forest(_monthly_series(30)))
    columns = (0, 1, 2)
    np.testing.assert_array_equal(harvester.primary_choices(columns), [2])
    pool = harvester.pool(columns)
    entries = np.repeat(np.flatnonzero(pool.placeholder), pool.count[pool.placeholder])
    assert entries.size > 0.5 * 360
    low, high = RefinementDraws(harvester, np.random.default_rng(5)).concretize(columns, entries)
    # a refined row's year and t range come from one drawn bucket of the (year, t) pool, so they agree:
    # the t range overlaps the months of the row's year (with any dimension drawn alone, about half did)
    year_start = (low[:, 0] - 1990) * 12
    agree = (high[:, 1] >= year_start) & (low[:, 1] < year_start + 12) & (low[:, 0] == high[:, 0])
    assert agree.mean() > 0.9
