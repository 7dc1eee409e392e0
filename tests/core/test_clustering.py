"""Cluster building, the annealing solver and the dependence measure, on given matrices and data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from syndiffix_core.clustering import (
    ClusterBuilder,
    Clusters,
    DerivedCluster,
    measure_dependence,
    solve,
    solve_stable,
)
from syndiffix_core.clustering import builder as builder_module
from syndiffix_core.clustering.builder import column_weights
from syndiffix_core.clustering.dependence import ConditionalDependence, conditional_excess, content_sample
from syndiffix_core.clustering.plan import with_pairs_joined
from syndiffix_core.clustering.solver import solve_permutation


def block_matrix(blocks: list[list[int]], size: int, strong: float = 0.8, weak: float = 0.02) -> np.ndarray:
    matrix = np.full((size, size), weak)
    for block in blocks:
        for a in block:
            for b in block:
                matrix[a, b] = strong
    np.fill_diagonal(matrix, 1.0)
    return matrix


def test_column_weight_is_one_plus_root_of_entropy_floored_at_one():
    assert column_weights(np.array([0.0, 1.0, 4.0, 9.0])).tolist() == [2.0, 2.0, 3.0, 4.0]


def test_dependent_columns_are_placed_together_and_the_best_placed_column_stitches():
    # Two blocks of dependent columns; weights of 2 each let a derived cluster take 5 columns.
    dependence = block_matrix([[0, 1, 2], [3, 4, 5]], 6)
    dependence[3, 1] = dependence[1, 3] = 0.3  # column 1 is the best link from block {3, 4, 5}
    builder = ClusterBuilder(dependence, np.zeros(6), max_weight=15, merge_threshold=0.1)
    clusters = builder.build([0, 3, 1, 4, 2, 5])
    assert set(clusters.initial) == {0, 1, 2}
    assert len(clusters.derived) == 1
    assert set(clusters.derived[0].columns) == {3, 4, 5}
    assert clusters.derived[0].stitch_columns[0] == 1


def test_weak_columns_open_their_own_clusters_and_capacity_limits_the_initial_cluster():
    dependence = block_matrix([[0, 1, 2, 3, 4, 5]], 6)
    # Weight 1 + sqrt(9) = 4 per column: the initial cluster (15) takes 3 columns, a derived one (10.5) 2.
    builder = ClusterBuilder(dependence, np.full(6, 9.0), max_weight=15, merge_threshold=0.1)
    clusters = builder.build(range(6))
    assert clusters.initial == (0, 1, 2)
    assert [c.columns for c in clusters.derived] == [(3, 4), (5,)]


def test_a_further_stitch_column_is_the_one_most_tied_to_a_cluster_member():
    # Initial cluster {0, 1, 2, 5, 6} is full (weight 3 each); {3, 4} opens a derived cluster with room for
    # two stitch columns. Column 0 is the best link on average; column 1 is tied a little to both members,
    # column 2 strongly to member 3 only: the second stitch column is 2, which carries the strongest link.
    dependence = block_matrix([[0, 1, 2, 5, 6], [3, 4]], 7)
    for candidate, (to_3, to_4) in {0: (0.35, 0.35), 1: (0.25, 0.25), 2: (0.45, 0.02)}.items():
        dependence[candidate, 3] = dependence[3, candidate] = to_3
        dependence[candidate, 4] = dependence[4, candidate] = to_4
    builder = ClusterBuilder(dependence, np.full(7, 4.0), max_weight=15, merge_threshold=0.1)
    clusters = builder.build([0, 1, 2, 5, 6, 3, 4])
    assert set(clusters.initial) == {0, 1, 2, 5, 6}
    assert [c.columns for c in clusters.derived] == [(3, 4)]
    assert clusters.derived[0].stitch_columns == (0, 2)


def _full_initial_cluster_and_a_derived_pair(link_to_1: float) -> ClusterBuilder:
    """Initial cluster {0, 1, 2} is full (weight 4 each); {3, 4} is a derived cluster with room for one
    stitch column. Column 0 is tied to both members (0.45), column 1 to member 3 only (``link_to_1``)."""
    dependence = block_matrix([[0, 1, 2], [3, 4]], 5)
    for member in (3, 4):
        dependence[0, member] = dependence[member, 0] = 0.45
    dependence[1, 3] = dependence[3, 1] = link_to_1
    return ClusterBuilder(dependence, np.full(5, 9.0), max_weight=15, merge_threshold=0.1)


def test_a_members_much_stronger_link_joins_the_stitch_columns_past_the_weight_limit():
    # Member 3 depends on column 1 (0.6) far more than on the stitch column 0 (0.45), like a running
    # total on its duration: column 1 becomes a stitch column although the weight limit leaves no room.
    builder = _full_initial_cluster_and_a_derived_pair(0.6)
    clusters = builder.build([0, 1, 2, 3, 4])
    assert clusters.initial == (0, 1, 2)
    assert [(c.stitch_columns, c.columns) for c in clusters.derived] == [((0, 1), (3, 4))]
    # The solver scores the clusters without it: one stitch column, as the weight limit allows.
    without = builder.build([0, 1, 2, 3, 4], refine_stitches=False)
    assert [(c.stitch_columns, c.columns) for c in without.derived] == [((0,), (3, 4))]
    assert builder.unsatisfied_dependence_of([0, 1, 2, 3, 4]) == pytest.approx(
        builder.unsatisfied_dependence(without)
    )
    assert builder.unsatisfied_dependence(clusters) < builder.unsatisfied_dependence(without)


def test_a_members_link_barely_stronger_than_its_stitch_link_stays_out():
    builder = _full_initial_cluster_and_a_derived_pair(0.48)
    clusters = builder.build([0, 1, 2, 3, 4])
    assert [(c.stitch_columns, c.columns) for c in clusters.derived] == [((0,), (3, 4))]


def test_main_column_is_the_first_stitch_column_of_every_derived_cluster():
    dependence = block_matrix([[0, 1], [2, 3], [4, 5]], 6)
    builder = ClusterBuilder(dependence, np.full(6, 9.0), max_weight=15, merge_threshold=0.1, main_column=0)
    clusters = builder.build([0, 1, 2, 3, 4, 5])
    assert 0 in clusters.initial
    assert clusters.derived
    assert all(c.stitch_columns[0] == 0 for c in clusters.derived)


def test_fast_quality_matches_the_quality_of_the_built_clusters():
    rng = np.random.default_rng(7)
    for size in (6, 11, 23):
        matrix = rng.random((size, size)) ** 3
        builder = ClusterBuilder(matrix, rng.uniform(0, 9, size), max_weight=15, merge_threshold=0.1)
        for _ in range(50):
            permutation = rng.permutation(size).tolist()
            assert builder.unsatisfied_dependence_of(permutation) == pytest.approx(
                builder.unsatisfied_dependence(builder.build(permutation, refine_stitches=False))
            )


def test_quality_kept_for_a_placement_is_that_of_every_permutation_placed_alike():
    # The solver's swaps mostly reorder columns within the same clusters; what the stitch columns
    # cover is then looked up, and must equal what a builder that never saw the placement computes.
    rng = np.random.default_rng(11)
    matrix = block_matrix([[0, 1, 2], [3, 4], [5, 6, 7]], 8, strong=0.6, weak=0.05)
    matrix = matrix + rng.uniform(0, 0.1, (8, 8))
    entropies = rng.uniform(0, 9, 8)
    kept = ClusterBuilder(matrix, entropies, max_weight=15, merge_threshold=0.1)
    permutation = list(range(8))
    placements = set()
    for _ in range(300):
        a, b = rng.choice(8, size=2, replace=False)
        permutation[a], permutation[b] = permutation[b], permutation[a]
        fresh = ClusterBuilder(matrix, entropies, max_weight=15, merge_threshold=0.1)
        placements.add(tuple(map(frozenset, fresh.build(permutation, refine_stitches=False).all_clusters())))
        assert kept.unsatisfied_dependence_of(permutation) == pytest.approx(
            fresh.unsatisfied_dependence_of(permutation), abs=1e-12
        )
    assert len(placements) < 150  # placements did repeat under other permutations


def test_quality_counts_only_pairs_that_share_no_cluster():
    dependence = block_matrix([[0, 1], [2, 3]], 4, strong=0.5, weak=0.0)
    builder = ClusterBuilder(dependence, np.zeros(4), max_weight=15, merge_threshold=0.1)
    together = Clusters((0, 1), (DerivedCluster((3,), (2,)),))
    apart = Clusters((0, 2), (DerivedCluster((1,), (0,)), DerivedCluster((3,), (1,))))
    assert builder.unsatisfied_dependence(together) == 0.0
    # Pair (2, 3) is never together: 2 * 0.5 unsatisfied over 2 * 4 columns.
    assert builder.unsatisfied_dependence(apart) == pytest.approx(1.0 / 8)


def test_solver_finds_the_blocks_from_a_scrambled_start_and_is_deterministic():
    blocks = [[0, 5, 9], [1, 6, 8], [2, 3, 7]]
    dependence = block_matrix(blocks, 10)
    builder = ClusterBuilder(dependence, np.full(10, 4.0), max_weight=15, merge_threshold=0.1)
    first = solve(builder, alpha=0.2, rng=np.random.default_rng(3))
    second = solve(builder, alpha=0.2, rng=np.random.default_rng(3))
    assert first == second
    assert builder.unsatisfied_dependence(first) < builder.unsatisfied_dependence(builder.build(range(10)))
    for block in blocks:
        assert any(set(block) <= set(columns) for columns in first.all_clusters())


def test_solver_keeps_the_main_column_in_the_initial_cluster():
    dependence = block_matrix([[0, 1, 2], [3, 4, 5], [6, 7, 8]], 9)
    for main in (0, 4, 8):
        builder = ClusterBuilder(
            dependence, np.full(9, 4.0), max_weight=15, merge_threshold=0.1, main_column=main
        )
        clusters = solve(builder, alpha=0.2, rng=np.random.default_rng(0))
        assert main in clusters.initial
        assert all(c.stitch_columns[0] == main for c in clusters.derived)


def three_way_sample(seed: int) -> np.ndarray:
    """Columns cut, x, y, table, depth of a diamonds-like table (1000 rows): the grade (cut) sets the
    typical depth and size, x is tied to depth only through cut, y is a near copy of x, and table
    moves against depth within every grade."""
    rng = np.random.default_rng(seed)
    cut = rng.integers(0, 5, 1000)
    center = np.array([59.0, 60.5, 61.5, 62.0, 63.0])[cut]
    depth = center + rng.normal(0, 0.6, 1000)
    x = 4.5 + 0.4 * cut + rng.normal(0, 0.8, 1000)
    y = x + rng.normal(0, 0.05, 1000)
    table = 57 + 0.8 * cut - 2.0 * (depth - center) + rng.normal(0, 0.8, 1000)
    return np.column_stack([cut.astype(float), x, y, table, depth])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conditional_excess_sees_what_the_given_column_does_not_carry(seed):
    measured = measure_dependence(three_way_sample(seed), sample_size=1000)
    # Pairwise, depth looks tied to x about as much as to table ...
    assert measured.dependence[4, 1] > 0.25 and measured.dependence[4, 3] > 0.25
    # ... but given cut, only the link to table is left.
    assert abs(conditional_excess(measured.sample, 4, 1, 0)) < 0.02
    assert abs(conditional_excess(measured.sample, 4, 2, 0)) < 0.02
    assert conditional_excess(measured.sample, 4, 3, 0) > 0.15


def test_one_conditional_dependence_asked_many_triples_gives_what_separate_ones_give():
    """The strata, shuffles and per-stratum trees it keeps between calls change no value, whatever
    the order of the calls (the shuffles are not drawn from one stream shared by all calls)."""
    sample = measure_dependence(three_way_sample(3), sample_size=1000).sample
    triples = [(4, 3, 0), (4, 1, 0), (1, 3, 0), (4, 3, 0), (3, 4, 1), (0, 2, 4), (4, 1, 3), (2, 1, 0)]
    shared = ConditionalDependence(sample)
    for x, y, given in triples[::-1] + triples:
        assert shared.excess(x, y, given) == ConditionalDependence(sample).excess(x, y, given)


def test_a_near_tie_that_carries_more_given_the_first_stitch_column_replaces_the_taken_one():
    # Columns cut, x, y, table, depth with diamonds' measured dependences and weights: cut, x, y and
    # table fill the initial cluster, depth is a cluster of its own. The weight limit takes cut, then x
    # (0.22) over y (0.21) and table (0.205); given cut, only table still tells anything about depth.
    dependence = np.array(
        [
            [1.00, 0.21, 0.20, 0.42, 0.27],
            [0.21, 1.00, 0.67, 0.20, 0.22],
            [0.20, 0.67, 1.00, 0.20, 0.21],
            [0.42, 0.20, 0.20, 1.00, 0.205],
            [0.27, 0.22, 0.21, 0.205, 1.00],
        ]
    )
    entropies = (np.array([2.40, 3.84, 3.84, 2.81, 3.37]) - 1) ** 2
    sample = measure_dependence(three_way_sample(0), sample_size=1000).sample
    params = {"max_weight": 15, "merge_threshold": 0.1}
    with_sample = ClusterBuilder(dependence, entropies, sample=sample, **params).build(range(5))
    assert with_sample.initial == (0, 1, 2, 3)
    assert [(c.stitch_columns, c.columns) for c in with_sample.derived] == [((0, 3), (4,))]
    without_sample = ClusterBuilder(dependence, entropies, **params).build(range(5))
    assert [(c.stitch_columns, c.columns) for c in without_sample.derived] == [((0, 1), (4,))]
    # The solver's objective scores the stitch columns as the weight limit ranks them.
    builder = ClusterBuilder(dependence, entropies, sample=sample, **params)
    assert [c.stitch_columns for c in builder.build(range(5), refine_stitches=False).derived] == [(0, 1)]


def test_dependence_is_high_for_related_columns_and_low_for_independent_ones():
    rng = np.random.default_rng(0)
    n = 20_000
    x = rng.normal(size=n)
    related = x + rng.normal(scale=0.2, size=n)
    independent = rng.normal(size=n)
    category = rng.integers(0, 4, n).astype(float)
    derived_category = category * 10 + rng.integers(0, 2, n)
    values = np.column_stack([x, related, independent, category, derived_category])
    result = measure_dependence(values, sample_size=1000)
    dependence = result.dependence
    assert np.allclose(dependence, dependence.T)
    assert np.all(np.diag(dependence) == 1.0)
    assert dependence[0, 1] > 0.6
    assert dependence[3, 4] > 0.6
    assert dependence[0, 2] < 0.35
    assert dependence[3, 0] < 0.2
    assert dependence[0, 1] > 2 * dependence[0, 2]


def test_entropy_counts_the_bits_of_the_column():
    rng = np.random.default_rng(0)
    values = np.column_stack(
        [
            np.zeros(1000),
            rng.integers(0, 8, 1000).astype(float),
            np.where(rng.random(1000) < 0.5, np.nan, 1.0),
        ]
    )
    entropies = measure_dependence(values, sample_size=1000).entropies
    assert entropies[0] == pytest.approx(0.0)
    assert entropies[1] == pytest.approx(3.0, abs=0.05)
    assert entropies[2] == pytest.approx(1.0, abs=0.01)  # null is a value of its own


def test_dependence_sample_depends_on_the_rows_values_only():
    rng = np.random.default_rng(0)
    values = rng.normal(size=(50_000, 3))
    values[:, 1] += values[:, 0]
    shuffled = rng.permutation(values.shape[0])
    first = measure_dependence(values, sample_size=500)
    again = measure_dependence(values[shuffled], sample_size=500)
    assert np.array_equal(first.dependence, again.dependence)
    sample = content_sample(values, 500)
    assert sample.size == 500 and np.unique(sample).size == 500
    # The same rows are taken whatever their order.
    taken = {tuple(row) for row in values[sample]}
    assert taken == {tuple(row) for row in values[shuffled][content_sample(values[shuffled], 500)]}
    # The sample is not biased towards some values (the column's mean is 0).
    assert values[sample, 0].mean() == pytest.approx(0.0, abs=0.15)


def test_stable_solver_is_no_worse_than_any_of_its_runs_and_ignores_the_generator():
    rng = np.random.default_rng(4)
    dependence = rng.uniform(0.0, 0.6, size=(14, 14))
    dependence = (dependence + dependence.T) / 2
    np.fill_diagonal(dependence, 1.0)
    builder = ClusterBuilder(dependence, rng.uniform(1.0, 6.0, 14), max_weight=15, merge_threshold=0.1)
    stable = solve_stable(builder, alpha=0.2, runs=4)
    runs = [
        builder.unsatisfied_dependence_of(solve_permutation(builder, alpha=0.2, rng=np.random.default_rng(s)))
        for s in range(4)
    ]
    best = [solve(builder, alpha=0.2, rng=np.random.default_rng(s)) for s in range(4)][int(np.argmin(runs))]
    assert stable == best
    assert stable == solve_stable(builder, alpha=0.2, runs=4)


def _tree_walk_dependence(x: np.ndarray, y: np.ndarray) -> float:
    """Independent oracle: the §2.8 walk over explicit row sets of the 1-dim trees and of the 2-dim tree,
    whose nodes split only when they hold at least 3 rows that are not all one point."""
    from syndiffix_core.forest import snap_range

    n = len(x)
    scores: list[tuple[float, float]] = []

    def halves(rows, values, low, size):
        middle = low + size / 2
        return [(rows[values[rows] < middle], low), (rows[values[rows] >= middle], middle)]

    def walk(xy, xs, x_low, x_size, ys, y_low, y_size):
        if len(xs) < 15 or len(ys) < 15:
            return
        actual = 0 if xy is None else len(xy)
        expected = len(xs) * len(ys) / n
        scores.append((abs(expected - actual) / max(expected, actual), expected))
        x_single, y_single = np.ptp(x[xs]) == 0, np.ptp(y[ys]) == 0
        if x_single and y_single:
            return
        xy_splits = xy is not None and len(xy) >= 3 and (np.ptp(x[xy]) > 0 or np.ptp(y[xy]) > 0)
        x_children = [(xs, x_low)] if x_single else halves(xs, x, x_low, x_size)
        y_children = [(ys, y_low)] if y_single else halves(ys, y, y_low, y_size)
        for x_rows, x_child_low in x_children:
            for y_rows, y_child_low in y_children:
                child = np.intersect1d(np.intersect1d(xy, x_rows), y_rows) if xy_splits else None
                walk(
                    child,
                    x_rows,
                    x_child_low,
                    x_size if x_single else x_size / 2,
                    y_rows,
                    y_child_low,
                    y_size if y_single else y_size / 2,
                )

    rows = np.arange(n)
    walk(rows, rows, *snap_range(x.min(), x.max()), rows, *snap_range(y.min(), y.max()))
    below_root = scores[1:]
    return sum(s * e for s, e in below_root) / sum(e for _, e in below_root)


def test_dependence_matches_a_walk_of_the_two_dim_tree_that_stops_at_small_and_single_point_nodes():
    rng = np.random.default_rng(3)
    n = 600
    x = rng.integers(0, 64, n).astype(float)
    x[:5], x[5:10] = 0, 63  # both ends populated: no root push-down
    y = np.clip(x + rng.integers(-6, 7, n), 0, 63)
    y[:5], y[5:10] = 0, 63
    # A repeated point: a 2-dim node of one point never splits although its 1-dim nodes do.
    x[10:60], y[10:60] = 20.0, 40.0
    values = np.column_stack([x, y])
    measured = measure_dependence(values, sample_size=0).dependence[0, 1]
    assert measured == pytest.approx(_tree_walk_dependence(x, y), rel=1e-9)


def implied_links_sample(seed: int, depth_follows_table: bool) -> np.ndarray:
    """Columns cut (a category), x, y (two measures of one size), table (tied to size) and depth. With
    ``depth_follows_table`` false, depth moves against what table holds beyond size (as on diamonds):
    depth–table is strong while depth–size is 0, so a join through table alone gives depth a false link
    to size; with it true, depth follows table as a whole and the join through table is right."""
    rng = np.random.default_rng(seed)
    cut = rng.integers(0, 5, 1000).astype(float)
    size = rng.normal(0, 1, 1000)
    x, y = size + rng.normal(0, 0.1, 1000), size + rng.normal(0, 0.1, 1000)
    table = 0.5 * size + rng.normal(0, 1, 1000) + 0.2 * cut
    beyond_size = table - 0.5 * size if not depth_follows_table else table
    depth = -beyond_size + rng.normal(0, 0.8, 1000)
    return np.column_stack([cut, x, y, table, depth])


def _depth_cluster_builder(sample: np.ndarray, ordered: list[bool] | None) -> ClusterBuilder:
    # cut, x, y and table fill the initial cluster; depth, weakly tied to all, is a cluster of its own,
    # stitched on table (its strongest link) and cut (the weight limit leaves out x and y).
    dependence = np.array(
        [
            [1.00, 0.21, 0.20, 0.42, 0.27],
            [0.21, 1.00, 0.67, 0.20, 0.20],
            [0.20, 0.67, 1.00, 0.20, 0.20],
            [0.42, 0.20, 0.20, 1.00, 0.30],
            [0.27, 0.20, 0.20, 0.30, 1.00],
        ]
    )
    entropies = (np.array([2.40, 3.84, 3.84, 2.81, 3.37]) - 1) ** 2
    return ClusterBuilder(
        dependence, entropies, max_weight=15, merge_threshold=0.1, sample=sample, ordered=ordered
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_stitch_column_joins_where_the_stitch_implies_a_false_link_to_earlier_columns(seed):
    sample = implied_links_sample(seed, depth_follows_table=False)
    ordered = [False, True, True, True, True]
    clusters = _depth_cluster_builder(sample, ordered).build(range(5))
    assert clusters.initial == (0, 1, 2, 3)
    # x (or y: the same size) becomes a further stitch column: depth's link to size is then met.
    [derived] = clusters.derived
    assert derived.columns == (4,)
    assert derived.stitch_columns[:2] == (3, 0) and derived.stitch_columns[2:] in ((1,), (2,))
    # Without knowing which columns are ordered (or without the sample) the rule is off, and the
    # solver's objective never scores it.
    unordered = _depth_cluster_builder(sample, None).build(range(5))
    assert [c.stitch_columns for c in unordered.derived] == [(3, 0)]
    builder = _depth_cluster_builder(sample, ordered)
    assert [c.stitch_columns for c in builder.build(range(5), refine_stitches=False).derived] == [(3, 0)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_stitch_column_joins_where_the_stitch_implies_the_links_right(seed):
    sample = implied_links_sample(seed, depth_follows_table=True)
    clusters = _depth_cluster_builder(sample, [False, True, True, True, True]).build(range(5))
    assert [c.stitch_columns for c in clusters.derived] == [(3, 0)]


def test_no_stitch_column_joins_a_cluster_that_has_reached_the_column_cap(monkeypatch):
    # depth stitched on table and cut is 3 columns: the rule may add a fourth, never a column past the cap.
    sample = implied_links_sample(0, depth_follows_table=False)
    ordered = [False, True, True, True, True]
    monkeypatch.setattr(builder_module, "IMPLIED_LINKS_MAX_COLUMNS", 3)
    clusters = _depth_cluster_builder(sample, ordered).build(range(5))
    assert [c.stitch_columns for c in clusters.derived] == [(3, 0)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_four_column_cluster_takes_a_fifth_column_for_a_false_link(seed):
    # depth and a column that follows it (the 6th) are a cluster of their own, stitched on table and cut:
    # 4 columns. The join through table still gives depth a false link to size, so x or y joins as a
    # fifth column (as on 50,000 rows of diamonds: depth stitched on table and z, with y).
    sample = implied_links_sample(seed, depth_follows_table=False)
    follows_depth = sample[:, 4] + np.random.default_rng(seed).normal(0, 0.3, len(sample))
    sample = np.column_stack([sample, follows_depth])
    dependence = np.full((6, 6), 0.05)
    dependence[:5, :5] = _depth_cluster_builder(sample, None).dependence
    dependence[4, 5] = dependence[5, 4] = dependence[5, 5] = 1.0
    entropies = (np.array([2.40, 3.84, 3.84, 2.81, 3.37, 2.0]) - 1) ** 2
    builder = ClusterBuilder(
        dependence, entropies, max_weight=15, merge_threshold=0.1, sample=sample, ordered=[False] + [True] * 5
    )
    clusters = builder.build(range(6))
    [derived] = clusters.derived
    assert clusters.initial == (0, 1, 2, 3) and derived.columns == (4, 5)
    assert derived.stitch_columns[:2] == (3, 0) and derived.stitch_columns[2:] in ((1,), (2,))


def _cluster_at_the_cap(seed: int, cut_to_depth: float) -> ClusterBuilder:
    # depth and two columns that follow it are a cluster of their own, stitched on table and cut: 5
    # columns, the cap. The weight limit left x and y out, and the join through table gives depth a
    # false link to size.
    sample = implied_links_sample(seed, depth_follows_table=False)
    rng = np.random.default_rng(seed)
    followers = sample[:, [4, 4]] + rng.normal(0, 0.3, (len(sample), 2))
    sample = np.column_stack([sample, followers])
    dependence = np.full((7, 7), 0.05)
    dependence[:5, :5] = _depth_cluster_builder(sample, None).dependence
    dependence[0, 4] = dependence[4, 0] = cut_to_depth
    dependence[4:, 4:] = 1.0
    entropies = (np.array([2.40, 3.84, 3.84, 2.81, 3.37, 2.5, 2.5]) - 1) ** 2
    return ClusterBuilder(
        dependence, entropies, max_weight=15, merge_threshold=0.1, sample=sample, ordered=[False] + [True] * 6
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cluster_at_the_cap_takes_the_implied_link_in_place_of_a_weaker_stitch_column(seed):
    # cut reaches depth's cluster more weakly (0.12) than x does (0.20): x (or y) replaces it.
    [derived] = _cluster_at_the_cap(seed, cut_to_depth=0.12).build(range(7)).derived
    assert derived.columns == (4, 5, 6)
    assert derived.stitch_columns in ((3, 1), (3, 2))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cluster_at_the_cap_keeps_a_stitch_column_tied_to_it_more_strongly(seed):
    # cut reaches depth more strongly (0.27) than x would: it stays, and nothing is added past the cap.
    [derived] = _cluster_at_the_cap(seed, cut_to_depth=0.27).build(range(7)).derived
    assert derived.columns == (4, 5, 6) and derived.stitch_columns == (3, 0)


def _stitch_choice_by_the_rule(
    builder: ClusterBuilder, cluster: list[int], weight: float, available: list[int]
):
    """The stitch choice ranked among the available columns alone (the rule of `_choose_stitch_columns`):
    the best candidate (or the main column) first, then the others by maximum while the weight allows."""
    dep = builder.dependence
    average_step, max_step = builder_module.AVERAGE_DEPENDENCE_STEP, builder_module.MAX_DEPENDENCE_STEP
    scored = []
    for candidate in available:
        values = [dep[candidate][member] for member in cluster]
        total, maximum = sum(values), max(values)
        key = (
            math.floor(total / len(cluster) / average_step),
            math.floor(maximum / max_step),
            builder.total_dependence[candidate],
        )
        scored.append((key, maximum, total, candidate))
    scored.sort(reverse=True)
    main = builder.main_column
    first = next(i for i in scored if i[3] == main) if main in available else scored[0]
    stitch, covered = [first[3]], first[2]
    used = max(weight, builder_module.STITCH_RESERVED_SHARE * builder.max_weight) + builder.weights[first[3]]
    for _, maximum, total, candidate in sorted(
        scored, key=lambda i: (math.floor(i[1] / max_step), i[2]), reverse=True
    ):
        fits = used + builder.weights[candidate] <= builder.max_weight
        if candidate != first[3] and maximum >= builder.merge_threshold and fits:
            stitch.append(candidate)
            covered += total
            used += builder.weights[candidate]
    return tuple(stitch), covered


@pytest.mark.parametrize("seed", range(20))
def test_stitch_choices_from_the_kept_candidate_orders_are_those_of_the_available_columns_alone(seed: int):
    """The builder ranks every candidate of a cluster once and picks the available ones from that order:
    the same choice and score as ranking the available columns alone, for every set of them (ties in the
    rounded keys included: equal keys keep their order among any subset)."""
    rng = np.random.default_rng(seed)
    size = 9
    dependence = np.round(rng.random((size, size)) ** 2, 1)  # coarse values: many tied keys
    entropies = rng.choice([1.0, 4.0], size)  # equal weights: which tied candidate is tried first matters
    main = int(rng.integers(size)) if seed % 2 else None
    builder = ClusterBuilder(dependence, entropies, max_weight=15, merge_threshold=0.1, main_column=main)
    columns = rng.permutation(size).tolist()
    cluster, others = columns[:3], columns[3:]
    for _ in range(12):
        available = [c for c in others if rng.random() < 0.6] or others[:1]
        mask = sum(1 << c for c in available)
        assert builder._choose_stitch_columns(cluster, 7.5, mask) == _stitch_choice_by_the_rule(
            builder, cluster, 7.5, available
        )


def test_kept_stitch_choices_are_not_changed_by_their_callers() -> None:
    """`build` extends the stitch list it gets; the next permutation with the same cluster must not see that."""
    rng = np.random.default_rng(3)
    dependence = rng.random((6, 6))
    builder = ClusterBuilder(dependence, np.full(6, 2.0), max_weight=30, merge_threshold=0.05)
    available = 0b1111  # columns 0-3
    first, _ = builder._stitch_columns([4, 5], 3.0, available)
    first.append(99)
    again, _ = builder._stitch_columns([4, 5], 3.0, available)
    assert 99 not in again


def test_pairs_kept_together_that_the_solver_left_apart_are_joined_by_a_stitch_column() -> None:
    """A pair whose columns the solver put into two clusters gets the earlier column as a further
    stitch column of the later column's cluster; pairs that already share a cluster, own or stitch
    column, change nothing."""
    clusters = Clusters((0, 1, 2), (DerivedCluster((3, 4), (1,)), DerivedCluster((5, 6), (3,))))
    assert with_pairs_joined(clusters, [(0, 1), (1, 4), (3, 5)]) == clusters
    joined = with_pairs_joined(clusters, [(6, 0), (4, 2), (5, 4), (0, 6)])
    assert joined.initial == (0, 1, 2)
    assert joined.derived[0] == DerivedCluster((3, 4), (1, 2))
    assert joined.derived[1] == DerivedCluster((5, 6), (3, 0, 4))
