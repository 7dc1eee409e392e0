from itertools import combinations

import numpy as np
import pytest

from syndiffix_core import forest as forest_module
from syndiffix_core.anonymizer import CountAnonymizer, Entities
from syndiffix_core.forest import Forest, TreeLevel, null_mapping, snap_range
from syndiffix_core.noise import Salt
from syndiffix_core.params import AnonymizationParams, BucketizationParams


def make_forest(matrix, salt="s", bucketization=None, threads=1):
    matrix = np.asarray(matrix, dtype=np.float64)
    secret = Salt.from_secret(salt)
    bucketization = bucketization or BucketizationParams()
    entities = Entities((secret.hash_rows(np.arange(matrix.shape[0], dtype=np.uint64)),), None, None)
    anonymizer = CountAnonymizer(AnonymizationParams(), bucketization, secret)
    names = [f"c{j}" for j in range(matrix.shape[1])]
    return Forest(matrix, names, entities, anonymizer, bucketization, secret, threads=threads)


@pytest.mark.parametrize(
    ("low", "high"), [(0.0, 1.0), (3.0, 5.0), (-7.5, 100.0), (0.3, 0.30001), (5.0, 5.0), (-1e9, 2e9)]
)
def test_snapped_range_is_an_aligned_power_of_two_covering_the_values(low, high):
    start, size = snap_range(low, high)
    assert start <= low and high < start + size
    assert 2.0 ** np.round(np.log2(size)) == size
    assert start / (size / 2) == np.floor(start / (size / 2))


def test_null_mapping_lies_above_the_values_by_their_spread():
    assert null_mapping(np.array([1.0, 4.0, np.nan])) == 7.0
    assert null_mapping(np.array([-3.0, -1.0])) == 1.0
    assert null_mapping(np.array([7.0, 7.0])) == 14.0
    assert null_mapping(np.array([-2.0, -2.0])) == 0.0
    assert null_mapping(np.array([0.0, 0.0])) == 1.0
    assert null_mapping(np.array([np.nan])) == 1.0


def _check_tree_invariants(forest, columns):
    tree = forest.tree(columns)
    k = tree.dims
    for depth in range(1, len(tree.levels)):
        level, parent_level = tree.levels[depth], tree.levels[depth - 1]
        parents = level.key >> k
        assert np.all(np.diff(level.key) > 0), "keys sorted and unique"
        assert parent_level.branch[parents].all(), "only branches have children"
        assert not (parent_level.singular | parent_level.stub | parent_level.lcf_low)[parents].any()
        # children's ranges lie inside their parent's
        child_low, child_high = tree.node_ranges(forest, depth, np.arange(level.size))
        parent_low, parent_high = tree.node_ranges(forest, depth - 1, parents)
        assert np.all(child_low >= parent_low - 1e-12) and np.all(child_high <= parent_high + 1e-12)


def test_tree_structure_invariants_on_correlated_data():
    rng = np.random.default_rng(3)
    x = rng.normal(size=3000)
    matrix = np.c_[x, 2 * x + rng.normal(size=3000) * 0.1, rng.integers(0, 4, 3000)]
    forest = make_forest(matrix)
    for columns in [(0,), (1,), (2,), (0, 1), (0, 2), (0, 1, 2)]:
        _check_tree_invariants(forest, columns)


def test_subnodes_cover_the_same_ranges():
    rng = np.random.default_rng(4)
    matrix = rng.normal(size=(4000, 2))
    forest = make_forest(matrix)
    tree = forest.tree((0, 1))
    checked = 0
    for depth, level in enumerate(tree.levels):
        low, high = tree.node_ranges(forest, depth, np.arange(level.size))
        for i, sub_columns in enumerate([(1,), (0,)]):  # subnode i drops dimension i
            sub_tree = forest.tree(sub_columns)
            present = np.flatnonzero(tree.subnodes[depth][:, i] >= 0)
            if present.size == 0:
                continue
            sub_low, sub_high = sub_tree.node_ranges(forest, depth, tree.subnodes[depth][present, i])
            kept = 1 - i
            singular = sub_low[:, 0] == sub_high[:, 0]
            assert np.all((sub_low[:, 0] <= low[present, kept]) | singular)
            assert np.all((high[present, kept] <= sub_high[:, 0]) | singular)
            checked += present.size
    assert checked > 100


def test_singular_nodes_do_not_split_and_keep_their_point():
    matrix = np.r_[np.full(50, 7.0), np.linspace(0, 100, 200)][:, None]
    forest = make_forest(matrix)
    tree = forest.tree((0,))
    points = []
    for depth, level in enumerate(tree.levels):
        assert not (level.singular & level.branch).any()
        nodes = np.flatnonzero(level.singular & ~level.lcf_low)
        low, high = tree.node_ranges(forest, depth, nodes)
        points.extend(low[low == high])
    assert 7.0 in points


def test_push_down_anonymizes_a_lone_outlier():
    values = np.r_[np.random.default_rng(5).uniform(0, 10, 2000), 1000.0]
    forest = make_forest(values[:, None])
    low, size = forest.column_range(0)
    assert low + size <= 16.0  # the single outlier does not stretch the range
    assert forest.tree((0,)).levels[0].noisy_count[0] > 1900  # but its row still counts


def test_precision_limit_stops_deep_1dim_splits_of_small_nodes():
    values = np.random.default_rng(6).uniform(0, 1, 30_000)

    def params(depth):
        return BucketizationParams(precision_limit_depth_threshold=depth, precision_limit_row_fraction=100)

    limited = make_forest(values[:, None], bucketization=params(4))  # row limit 300 +- 15 below depth 4
    free = make_forest(values[:, None], bucketization=params(40))
    assert len(limited.tree((0,)).levels) <= 8  # 30000 / 2^7 < 300
    assert len(limited.tree((0,)).levels) < len(free.tree((0,)).levels)


def test_forest_is_deterministic_and_salt_dependent():
    matrix = np.random.default_rng(7).normal(size=(2000, 2))
    a, b, c = make_forest(matrix, "x"), make_forest(matrix, "x"), make_forest(matrix, "y")
    counts = [f.tree((0, 1)).levels[3].noisy_count for f in (a, b, c)]
    np.testing.assert_array_equal(counts[0], counts[1])
    assert not np.array_equal(counts[0], counts[2])


def test_nulls_get_their_own_region():
    values = np.r_[np.arange(100.0), np.full(40, np.nan)]
    forest = make_forest(values[:, None])
    assert forest.null_values[0] == 198.0
    assert np.all(np.isnan(forest.value_matrix()[100:, 0]))
    assert np.all(forest.values_at(np.arange(100, 140), (0,)) == 198.0)


def test_nulls_leave_the_data_a_quarter_of_the_root_far_from_zero():
    """Birth years 1844-2004 with nulls: mapped to twice the maximum, the root was [0, 4096) and every
    multi-column tree spent five levels before a cell was as narrow as the data."""
    years = np.r_[np.linspace(1844, 2004, 4000).round(), np.full(400, np.nan)]
    forest = make_forest(years[:, None])
    assert forest.null_values[0] == 2164.0
    low, size = forest.column_range(0)
    assert (low, size) == (1792.0, 512.0)
    assert (2004 - 1844) / size > 0.25


def test_leaves_hold_about_all_rows_of_a_1dim_tree():
    values = np.repeat(np.arange(40.0), 50)[:, None]  # 40 values x 50 rows: every value is a leaf
    forest = make_forest(values)
    tree = forest.tree((0,))
    leaf_total = sum(int(tree.levels[depth].noisy_count[nodes].sum()) for depth, nodes in tree.leaves())
    assert abs(leaf_total - 2000) < 40
    singular_leaves = sum(int(tree.levels[depth].singular[nodes].sum()) for depth, nodes in tree.leaves())
    assert singular_leaves == 40


def test_values_too_wide_for_float_arithmetic_are_a_clear_error():
    from syndiffix_core.errors import InvalidInputError

    with pytest.raises(InvalidInputError, match="c0"):
        make_forest(np.array([[-1e308], [1e308]]))


def test_stub_flags_follow_the_subnodes():
    rng = np.random.default_rng(8)
    matrix = np.c_[rng.normal(size=5000), rng.exponential(size=5000), rng.integers(0, 6, 5000)]
    forest = make_forest(matrix)
    stubs = 0
    for columns in [(0, 1), (0, 2), (0, 1, 2)]:
        tree = forest.tree(columns)
        # subnode i drops dimension i
        sub_trees = [forest.tree(columns[:i] + columns[i + 1 :]) for i in range(len(columns))]
        for depth, level in enumerate(tree.levels):
            expected = np.ones(level.size, dtype=bool)
            for i, sub_tree in enumerate(sub_trees):
                index = tree.subnodes[depth][:, i]
                if depth >= len(sub_tree.levels):
                    continue
                sub = sub_tree.levels[depth]
                safe = np.maximum(index, 0)
                fails = np.where(sub.singular[safe], sub.singularity_low[safe], sub.range_low[safe])
                expected &= (index < 0) | sub.stub[safe] | fails
            np.testing.assert_array_equal(level.stub, expected)
            assert not (level.stub & level.branch).any()
            stubs += int(level.stub.sum())
    assert stubs > 0


@pytest.mark.parametrize("code_bits", [20, 62])
def test_packed_code_sort_orders_rows_by_their_whole_code(code_bits):
    from syndiffix_core.forest import _sort_codes

    rng = np.random.default_rng(code_bits)
    # Few distinct high parts and many low parts: with 62-bit codes the packed key drops the low bits,
    # so the runs it leaves out of order must be sorted again.
    high = rng.integers(0, 4, 5000).astype(np.uint64) << np.uint64(code_bits - 2)
    code = high | rng.integers(0, 1 << min(code_bits - 2, 40), 5000).astype(np.uint64)
    order, sorted_code = _sort_codes(code, code_bits)
    assert np.array_equal(sorted_code, np.sort(code))
    assert np.array_equal(code[order], sorted_code)
    assert np.array_equal(np.sort(order), np.arange(code.size))


@pytest.mark.parametrize(("k", "shift"), [(1, 0), (2, 1), (3, 34), (5, 4), (5, 60), (7, 63)])
def test_spread_table_spreads_each_bit_of_a_chunk_with_stride_k(k, shift):
    from syndiffix_core.forest import _spread_table

    chunk = np.arange(1 << 16, dtype=np.uint64)
    expected = np.zeros(1 << 16, dtype=np.uint64)
    for bit in range(16):
        if bit * k + shift < 64:  # bits that would land past bit 63 are dropped
            expected |= ((chunk >> np.uint64(bit)) & np.uint64(1)) << np.uint64(bit * k + shift)
    np.testing.assert_array_equal(_spread_table(k, shift), expected)


def _growing(code, code_levels, k, columns):
    from syndiffix_core.forest import Tree, _Growing

    tree = Tree(columns, np.zeros(k), np.ones(k), 7, code_levels)
    order = np.arange(code.size, dtype=np.int32)
    return _Growing(tree, [], code_levels, 0, 0, order, code, [], None)


def test_divergence_finds_where_neighbouring_codes_part_at_each_level_of_every_tree_of_a_batch():
    from syndiffix_core.forest import _Rows

    rng = np.random.default_rng(1)
    k, n = 2, 3000
    codes, expected_by_tree = [], []
    for code_levels in (31, 12):  # a batch's trees may hold different numbers of levels
        bits = code_levels * k
        code = np.sort(
            rng.integers(0, 1 << bits, n, dtype=np.uint64) >> rng.integers(0, bits, n).astype(np.uint64)
        )
        codes.append((code, code_levels))
        expected = {}
        for level in range(1, code_levels + 1):
            shift = np.uint64((code_levels - level) * k)
            prefix, above = code >> shift, code >> (shift + np.uint64(k))
            expected[level] = np.flatnonzero((prefix[1:] != prefix[:-1]) & (above[1:] == above[:-1])) + 1
        expected_by_tree.append(expected)
    entities = Entities((np.arange(1, 2 * n + 1, dtype=np.uint64),), None, None)
    batch = [_growing(code, levels, k, (t, t + 2)) for t, (code, levels) in enumerate(codes)]
    rows = _Rows(batch, entities)
    alone = _Rows(batch[:1], entities)
    for level in range(1, 32):
        wanted = [expected_by_tree[t].get(level, np.zeros(0, np.int64)) + t * n for t in range(2)]
        assert np.array_equal(rows.divergence(level), np.concatenate(wanted)), level
        assert np.array_equal(alone.divergence(level), wanted[0]), level


def _aid_forest(matrix, salt="s", bucketization=None):
    """A forest whose rows belong to entities of two AID columns (some rows with a null AID)."""
    matrix = np.asarray(matrix, dtype=np.float64)
    n = matrix.shape[0]
    secret = Salt.from_secret(salt)
    rng = np.random.default_rng(4)
    ids, hashes, entity_hashes = [], [], []
    for entity_count in (n // 4, n // 10):
        column_ids = rng.integers(0, entity_count, n)
        column_ids[rng.random(n) < 0.05] = -1
        table = secret.hash_rows(np.arange(1, entity_count + 1, dtype=np.uint64))
        ids.append(column_ids)
        entity_hashes.append(table)
        hashes.append(np.where(column_ids >= 0, table[column_ids], np.uint64(0)))
    entities = Entities(tuple(hashes), tuple(ids), tuple(entity_hashes))
    bucketization = bucketization or BucketizationParams()
    anonymizer = CountAnonymizer(AnonymizationParams(), bucketization, secret)
    names = [f"c{j}" for j in range(matrix.shape[1])]
    return Forest(matrix, names, entities, anonymizer, bucketization, secret)


@pytest.mark.parametrize("aid", [False, True])
def test_trees_grown_side_by_side_are_the_trees_grown_one_by_one(aid, monkeypatch):
    rng = np.random.default_rng(8)
    n = 4000
    x = rng.normal(size=n)
    matrix = np.c_[
        x,
        np.round(2 * x + rng.normal(size=n) * 0.3, 2),
        rng.integers(0, 3, n),  # a shallow 1-dim tree: pairs with it hold fewer levels
        rng.lognormal(2, 1, n).round(1),
        np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 40, n)),
    ]
    # A precision limit that stops 1-dim trees at depths that differ per column (each has its own
    # push-down and row limit).
    limited = BucketizationParams(precision_limit_depth_threshold=3, precision_limit_row_fraction=50)

    def make(matrix):
        return (_aid_forest if aid else make_forest)(matrix, bucketization=limited)

    batched = make(matrix)  # the 1-dim trees too
    sets = {size: list(combinations(range(matrix.shape[1]), size)) for size in (1, 2, 3, 4)}
    for size in (2, 3, 4):
        batched.build(sets[size])
    assert len({batched.trees[c].code_levels for c in sets[2]}) > 1, "the batch mixes depth limits"
    monkeypatch.setattr(forest_module, "BATCHED_TREE_POSITIONS", 1)
    alone = make(matrix)
    for size in (2, 3, 4):
        alone.build(sets[size])
    for columns in [c for size in (1, 2, 3, 4) for c in sets[size]]:
        one, other = batched.trees[columns], alone.trees[columns]
        assert len(one.levels) == len(other.levels), columns
        for depth, (level, expected) in enumerate(zip(one.levels, other.levels, strict=True)):
            for name in TreeLevel.__dataclass_fields__:
                got, want = getattr(level, name), getattr(expected, name)
                assert got.dtype == want.dtype and np.array_equal(got, want), (columns, depth, name)
            np.testing.assert_array_equal(one.subnodes[depth], other.subnodes[depth])


def test_the_forest_keeps_ranks_in_the_narrowest_dtype_and_gives_back_the_exact_values():
    rng = np.random.default_rng(11)
    few = rng.integers(0, 200, 5000).astype(float)  # < 256 distinct values
    many = np.round(rng.normal(0, 100, 5000), 3)  # thousands of distinct values
    signed_zeros = rng.choice([-0.0, 0.0, 1.5], 5000)
    nulls = np.where(rng.random(5000) < 0.1, np.nan, few)
    matrix = np.c_[few, many, signed_zeros, nulls]
    forest = make_forest(matrix)
    assert [forest._ranks[j].dtype for j in range(4)] == [np.uint8, np.uint16, np.uint8, np.uint8]
    # no float copy of the table: nothing of rows x columns float64 stays in the forest
    held = [v for v in vars(forest).values() if isinstance(v, np.ndarray)]
    assert all(v.dtype != np.float64 or v.size < matrix.size for v in held)
    expected = np.where(np.isnan(matrix), forest.null_values[None, :], matrix)
    values = forest.value_matrix()
    np.testing.assert_array_equal(values, matrix)
    np.testing.assert_array_equal(np.signbit(values[:, 2]), np.signbit(signed_zeros))  # -0.0 kept
    rows = rng.integers(0, 5000, 300)
    np.testing.assert_array_equal(forest.values_at(rows, (2, 0)), expected[rows][:, [2, 0]])


def test_released_cells_and_trees_are_rebuilt_identically():
    rng = np.random.default_rng(12)
    x = rng.normal(size=4000)
    forest = make_forest(np.c_[x, x + rng.normal(0, 0.5, 4000), rng.integers(0, 9, 4000)])
    first = forest.tree((0, 1, 2))
    assert forest._cell_cache
    forest.release(lambda columns: len(columns) == 1, {0, 1, 2})
    assert not forest._cell_cache and (0, 1, 2) not in forest.trees
    again = forest.tree((0, 1, 2))
    assert again is not first
    for before, after in zip(first.levels, again.levels, strict=True):
        np.testing.assert_array_equal(before.noisy_count, after.noisy_count)
        np.testing.assert_array_equal(before.key, after.key)


def test_one_dim_trees_do_not_depend_on_the_order_of_equal_values(monkeypatch):
    """A 1-dim tree sorts its column with numpy's default (unstable) sort: whatever order rows of equal
    value come in, the tree, its counts and the values its nodes stand for are the same."""
    rng = np.random.default_rng(11)
    matrix = np.column_stack([rng.integers(0, 6, 4_000), np.round(rng.normal(size=4_000), 1)]).astype(float)
    matrix[rng.random(4_000) < 0.1, 1] = np.nan
    argsort = np.argsort

    def ties_reversed(values):
        # The stable order with every run of equal values reversed (NaNs count as equal).
        order = argsort(values, kind="stable")
        keys = np.nan_to_num(values[order], nan=np.inf)
        run = np.concatenate(([0], np.cumsum(keys[1:] != keys[:-1])))
        return order[np.lexsort((-np.arange(len(order)), run))]

    monkeypatch.setattr(forest_module, "_value_order", lambda values: argsort(values, kind="stable"))
    stable = make_forest(matrix)
    monkeypatch.setattr(forest_module, "_value_order", ties_reversed)
    shuffled = make_forest(matrix)
    for j in range(2):
        for a, b in zip(stable.trees[(j,)].levels, shuffled.trees[(j,)].levels, strict=True):
            for name in ("key", "singular_dims", "singular", "lcf_low", "branch", "noisy_count"):
                np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
            np.testing.assert_array_equal(
                stable.values_at(a.rep_row, [j]), shuffled.values_at(b.rep_row, [j])
            )
    assert not np.array_equal(stable.trees[(0,)].levels[-1].rep_row, shuffled.trees[(0,)].levels[-1].rep_row)
