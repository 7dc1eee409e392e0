import numpy as np
import pandas as pd

from syndiffix_core.anonymizer import CountAnonymizer, Entities
from syndiffix_core.noise import Salt
from syndiffix_core.params import AnonymizationParams, BucketizationParams


def _anonymizer(salt="s", **kwargs):
    return CountAnonymizer(AnonymizationParams(**kwargs), BucketizationParams(), Salt.from_secret(salt))


def _implicit(n, salt="s"):
    hashes = Salt.from_secret(salt).hash_rows(np.arange(n, dtype=np.uint64))
    return Entities((hashes,), None, None)


def _explicit(aids, salt="s"):
    codes, uniques = pd.factorize(pd.Series(aids), sort=True)
    unique_hashes = Salt.from_secret(salt).hash_entities(pd.Series(np.asarray(uniques, dtype=object)))
    row_hashes = np.r_[unique_hashes, np.uint64(0)][codes].astype(np.uint64)
    return Entities((row_hashes,), (codes.astype(np.int64),), (unique_hashes,))


def _segments(sizes):
    starts = np.r_[0, np.cumsum(sizes)[:-1]].astype(np.int64)
    return np.arange(int(np.sum(sizes))), starts


def test_counts_below_hard_floor_are_always_low_and_large_counts_never():
    sizes = [1, 2] * 50 + [40] * 50
    rows, starts = _segments(sizes)
    seeds = np.arange(len(sizes), dtype=np.uint64)
    counts = _anonymizer().count_nodes(_implicit(rows.size), rows, starts, seeds)
    assert counts.lcf_low[:100].all()
    assert not counts.lcf_low[100:].any()
    assert not counts.range_low[100:].any()
    assert counts.singularity_low[:100].all()


def test_lcf_threshold_is_noisy_around_five():
    sizes = [5] * 400
    rows, starts = _segments(sizes)
    counts = _anonymizer().count_nodes(_implicit(rows.size), rows, starts, np.arange(400, dtype=np.uint64))
    share_low = counts.lcf_low.mean()
    assert 0.3 < share_low < 0.7  # P(5 < 5 + N(0,1)) = 0.5


def test_noisy_counts_have_two_unit_layers():
    sizes = [100] * 2000
    rows, starts = _segments(sizes)
    counts = _anonymizer().count_nodes(_implicit(rows.size), rows, starts, np.arange(2000, dtype=np.uint64))
    error = counts.noisy_count - 100
    assert abs(error.mean()) < 0.15
    assert 1.2 < error.std() < 1.65  # sqrt(2) plus rounding


def test_one_heavy_entity_is_flattened_and_cannot_pass_lcf_alone():
    aids = ["heavy"] * 500 + ["a", "a", "b", "c", "d", "e", "f"]
    rows, starts = _segments([len(aids)])
    counts = _anonymizer().count_nodes(_explicit(aids), rows, starts, np.zeros(1, np.uint64))
    # 7 entities: the heavy one is flattened to about the top group's average, not 500
    assert counts.noisy_count[0] < 60

    only_heavy = ["heavy"] * 500
    rows, starts = _segments([500])
    counts = _anonymizer().count_nodes(_explicit(only_heavy), rows, starts, np.zeros(1, np.uint64))
    assert counts.lcf_low[0]
    assert counts.noisy_count[0] == 1


def test_null_aids_are_not_entities_but_count_as_rows():
    aids = [None] * 50 + [f"e{i}" for i in range(30)]
    rows, starts = _segments([80])
    counts = _anonymizer().count_nodes(_explicit(aids), rows, starts, np.zeros(1, np.uint64))
    assert not counts.lcf_low[0]
    assert 65 < counts.noisy_count[0] < 95

    rows, starts = _segments([50])
    counts = _anonymizer().count_nodes(_explicit([None] * 50), rows, starts, np.zeros(1, np.uint64))
    assert counts.lcf_low[0]


def test_any_low_aid_column_makes_the_bucket_low():
    n = 60
    many = pd.Series([f"p{i}" for i in range(n)])
    one = pd.Series(["same"] * n)
    salt = Salt.from_secret("s")
    columns = [_explicit(many), _explicit(one)]
    entities = Entities(
        tuple(e.hashes[0] for e in columns),
        tuple(e.ids[0] for e in columns),
        tuple(e.entity_hashes[0] for e in columns),
    )
    rows, starts = _segments([n])
    counts = CountAnonymizer(AnonymizationParams(), BucketizationParams(), salt).count_nodes(
        entities, rows, starts, np.zeros(1, np.uint64)
    )
    assert counts.lcf_low[0]


def test_run_starts_gives_each_element_the_first_index_of_its_run():
    from syndiffix_core.anonymizer import run_starts

    rng = np.random.default_rng(5)
    for values in (np.zeros(0, np.int64), np.array([4]), np.sort(rng.integers(0, 30, 500))):
        np.testing.assert_array_equal(run_starts(values), values.searchsorted(values))
    np.testing.assert_array_equal(run_starts(np.array([2, 2, 3, 9, 9, 9])), [0, 0, 2, 3, 3, 3])
