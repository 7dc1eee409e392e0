"""KHLL against exact counts on generated populations whose uniqueness distribution is known by design."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from syndiffix_core.risk.hashing import ID_SEED, hash_column
from syndiffix_core.risk.khll import KHyperLogLog

THRESHOLDS = (1, 2, 5, 10)


@dataclass
class Population:
    """Value i is held by exactly ids_per_value[i] distinct ids; rows repeat some (value, id) pairs."""

    ids_per_value: np.ndarray
    value_hashes: np.ndarray  # per row
    id_hashes: np.ndarray  # per row
    hash_of_value: np.ndarray  # per value index

    @property
    def distinct_ids(self) -> int:
        return int(self.ids_per_value.sum())

    def potential(self, t: int) -> float:
        return float(np.mean(self.ids_per_value <= t))

    def id_share(self, t: int) -> float:
        small = self.ids_per_value[self.ids_per_value <= t]
        return float(small.sum() / self.ids_per_value.sum())


def make_population(seed: int, values: int, sizes: list[int], weights: list[float], value_offset: int = 0):
    rng = np.random.default_rng(seed)
    ids_per_value = rng.choice(sizes, size=values, p=np.asarray(weights) / sum(weights))
    value_of_row = np.repeat(np.arange(values), ids_per_value)
    id_of_row = rng.permutation(len(value_of_row)) + seed * 10_000_000  # every (value, id) pair distinct
    repeats = rng.random(len(value_of_row)) < 0.3  # duplicate rows must not count twice
    value_of_row = np.concatenate([value_of_row, value_of_row[repeats]])
    id_of_row = np.concatenate([id_of_row, id_of_row[repeats]])
    order = rng.permutation(len(value_of_row))
    hash_of_value = hash_column(np.arange(values) + value_offset)
    return Population(
        ids_per_value=ids_per_value,
        value_hashes=hash_of_value[value_of_row[order]],
        id_hashes=hash_column(id_of_row[order], seed=ID_SEED),
        hash_of_value=hash_of_value,
    )


POPULATIONS = {
    "mostly-unique": (11, 150_000, [1, 2, 3, 5, 40], [60, 20, 10, 7, 3]),
    "mixed": (12, 60_000, [1, 2, 4, 8, 10, 12, 30, 300], [25, 15, 15, 10, 10, 10, 10, 5]),
    "rarely-unique": (13, 40_000, [1, 3, 6, 15, 200, 1_500], [5, 5, 10, 40, 35, 5]),
}


@pytest.fixture(scope="module", params=sorted(POPULATIONS))
def built(request):
    population = make_population(*POPULATIONS[request.param])
    sketch = KHyperLogLog().update(population.value_hashes, population.id_hashes)
    return population, sketch


def test_distinct_counts_within_three_percent(built):
    population, sketch = built
    assert not sketch.is_exact
    assert sketch.distinct_values() == pytest.approx(len(population.ids_per_value), rel=0.03)
    assert sketch.distinct_ids() == pytest.approx(population.distinct_ids, rel=0.03)


def test_reidentification_potential_and_id_share_within_two_points(built):
    population, sketch = built
    for t in THRESHOLDS:
        assert abs(sketch.reidentification_potential(t) - population.potential(t)) <= 0.02, t
        assert abs(sketch.id_share(t) - population.id_share(t)) <= 0.02, t


def test_uniqueness_distribution_within_two_points_per_bucket(built):
    population, sketch = built
    size = 16
    truth = np.bincount(np.minimum(population.ids_per_value, size) - 1, minlength=size) / len(
        population.ids_per_value
    )
    assert np.max(np.abs(sketch.uniqueness_distribution(size) - truth)) <= 0.02
    assert sketch.uniqueness_distribution(size).sum() == pytest.approx(1.0)


def test_sampled_values_have_their_true_id_counts(built):
    population, sketch = built
    keys, counts = sketch.sampled_values()
    order = np.argsort(population.hash_of_value)
    truth = population.ids_per_value[order][np.searchsorted(population.hash_of_value[order], keys)]
    small = truth <= 10
    assert small.sum() > 0
    assert np.mean(counts[small] == truth[small]) >= 0.99
    exact_range = truth <= sketch.sparse_limit
    assert np.array_equal(counts[exact_range], truth[exact_range])  # the sparse level is exact
    large = ~exact_range
    if large.any():
        assert np.median(np.abs(counts[large] / truth[large] - 1)) <= 0.05


def test_merging_shards_equals_the_sketch_of_the_whole(built):
    population, whole = built
    shard_of_row = np.random.default_rng(5).integers(0, 5, len(population.value_hashes))
    shards = [
        KHyperLogLog().update(
            population.value_hashes[shard_of_row == s], population.id_hashes[shard_of_row == s]
        )
        for s in range(5)
    ]
    left_fold = shards[0]
    for shard in shards[1:]:
        left_fold = left_fold.merge(shard)
    tree = shards[4].merge(shards[2]).merge(shards[0].merge(shards[3].merge(shards[1])))
    assert left_fold == whole
    assert tree == whole
    chunked = KHyperLogLog()
    for start in range(0, len(population.value_hashes), 50_000):
        chunked.update(
            population.value_hashes[start : start + 50_000], population.id_hashes[start : start + 50_000]
        )
    assert chunked == whole


def test_serialization_round_trip(built):
    _, sketch = built
    blob = sketch.to_bytes()
    restored = KHyperLogLog.from_bytes(blob)
    assert restored == sketch
    assert restored.distinct_values() == sketch.distinct_values()
    assert restored.reidentification_potential(1) == sketch.reidentification_potential(1)
    assert len(blob) < 8 * 1024 * 1024


def test_below_k_values_everything_is_exact():
    population = make_population(21, 1_500, [1, 2, 7, 150], [4, 3, 2, 1])
    sketch = KHyperLogLog().update(population.value_hashes, population.id_hashes)
    assert sketch.is_exact
    assert sketch.distinct_values() == 1_500
    assert sketch.distinct_ids() == pytest.approx(population.distinct_ids, rel=0.03)
    keys, counts = sketch.sampled_values()
    assert len(keys) == 1_500
    assert np.array_equal(np.sort(keys), np.sort(population.hash_of_value))
    for t in THRESHOLDS:
        assert sketch.reidentification_potential(t) == pytest.approx(population.potential(t))


def overlap_sets(size_a: int, size_b: int, common: int):
    a = np.arange(size_a)
    b = np.arange(size_a - common, size_a - common + size_b)
    sketches = []
    for values in (a, b):
        sketches.append(KHyperLogLog().update(hash_column(values), hash_column(values, seed=ID_SEED)))
    true_common = len(np.intersect1d(a, b))
    return sketches, true_common / size_a, true_common / size_b, true_common / len(np.union1d(a, b))


@pytest.mark.parametrize(
    ("size_a", "size_b", "common"),
    [
        (200_000, 200_000, 60_000),
        (200_000, 200_000, 100_000),
        (200_000, 200_000, 180_000),
        (200_000, 200_000, 200_000),
        (100_000, 300_000, 50_000),
        (10_000, 500_000, 10_000),
        (3_000, 9_000, 1_500),
    ],
)
def test_containment_and_jaccard_within_five_points(size_a, size_b, common):
    (a, b), contain_a, contain_b, jaccard = overlap_sets(size_a, size_b, common)
    overlap = a.overlap(b)
    checked = 0
    for true, estimate in (
        (contain_a, overlap.containment_of_first),
        (contain_b, overlap.containment_of_second),
        (jaccard, overlap.jaccard),
    ):
        if true >= 0.3:
            assert abs(estimate - true) <= 0.05, (true, estimate)
            checked += 1
    assert checked >= 1
    assert a.containment_in(b) == overlap.containment_of_first
    assert b.overlap(a).containment_of_first == overlap.containment_of_second


def test_disjoint_sets_do_not_overlap():
    (a, b), *_ = overlap_sets(50_000, 50_000, 0)
    assert a.jaccard(b) == 0.0
    assert a.containment_in(b) == 0.0


def test_merging_different_k_keeps_the_smaller_resolution():
    population = make_population(31, 20_000, [1, 3], [1, 1])
    half = len(population.value_hashes) // 2
    small = KHyperLogLog(k=1024).update(population.value_hashes[:half], population.id_hashes[:half])
    large = KHyperLogLog(k=4096).update(population.value_hashes[half:], population.id_hashes[half:])
    assert large.merge(small) == KHyperLogLog(k=1024).update(population.value_hashes, population.id_hashes)


def test_bad_parameters_and_inputs_are_named():
    with pytest.raises(ValueError, match="k must be"):
        KHyperLogLog(k=1)
    with pytest.raises(ValueError, match="precision"):
        KHyperLogLog(hll_precision=2)
    with pytest.raises(ValueError, match="3 value hashes but 2 id hashes"):
        KHyperLogLog().update(np.zeros(3, dtype=np.uint64), np.zeros(2, dtype=np.uint64))
    with pytest.raises(ValueError, match="hll_precision"):
        KHyperLogLog(hll_precision=10).merge(KHyperLogLog(hll_precision=11))
    with pytest.raises(ValueError, match="not a serialized"):
        KHyperLogLog.from_bytes(b"nonsense")
    blob = bytearray(KHyperLogLog().update(hash_column(np.arange(10)), hash_column(np.arange(10))).to_bytes())
    blob[4] = 7
    with pytest.raises(ValueError, match="version 7"):
        KHyperLogLog.from_bytes(bytes(blob))


def test_empty_sketch_reports_zeros():
    empty = KHyperLogLog()
    assert empty.distinct_values() == 0.0
    assert empty.distinct_ids() == 0.0
    assert empty.reidentification_potential(1) == 0.0
    assert empty.id_share(1) == 0.0
    assert KHyperLogLog.from_bytes(empty.to_bytes()) == empty
    assert empty.update(np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64)) == KHyperLogLog()
