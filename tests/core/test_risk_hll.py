from __future__ import annotations

import numpy as np
import pytest

from syndiffix_core.risk.hashing import hash_column
from syndiffix_core.risk.hll import (
    HyperLogLog,
    estimate_from_registers,
    register_updates,
    registers_from_hashes,
    trailing_zeros,
)


def hashes(start: int, stop: int) -> np.ndarray:
    return hash_column(np.arange(start, stop))


def test_trailing_zeros_is_exact():
    words = np.array([0, 1, 2, 3, 8, 1 << 40, 1 << 63, (1 << 64) - 1, 12 << 20], dtype=np.uint64)
    assert trailing_zeros(words).tolist() == [64, 0, 1, 0, 3, 40, 63, 0, 22]


def test_register_updates_follow_the_definition():
    precision = 10
    h = np.array([(5 << 54) | (1 << 7), (1023 << 54), (7 << 54) | 1], dtype=np.uint64)
    index, rank = register_updates(h, precision)
    assert index.tolist() == [5, 1023, 7]
    assert rank.tolist() == [8, 55, 1]  # zero remainder: capped at q + 1 = 55


def test_small_sets_are_counted_exactly_while_sparse():
    sketch = HyperLogLog(10)
    sketch.update(hashes(0, 100))
    sketch.update(hashes(50, 120))  # 70 new, 50 repeated
    assert sketch.is_sparse
    assert sketch.estimate() == 120.0


def test_turns_dense_past_the_limit_and_keeps_the_set_registers():
    sketch = HyperLogLog(10, sparse_limit=128)
    sketch.update(hashes(0, 129))
    assert not sketch.is_sparse
    assert np.array_equal(sketch.registers(), registers_from_hashes(hashes(0, 129), 10))


@pytest.mark.parametrize("n", [500, 3_000, 20_000, 300_000])
def test_estimates_are_within_three_standard_errors(n):
    for precision in (10, 14):
        sketch = HyperLogLog(precision, sparse_limit=0).update(hashes(0, n))
        error = abs(sketch.estimate() / n - 1)
        assert error <= 3 * 1.04 / np.sqrt(1 << precision), (precision, n, sketch.estimate())


def test_estimator_has_no_small_range_bias_over_many_sketches():
    # 200 independent dense sketches of 2 000 hashes each (m = 1024: the linear-counting/raw hand-over zone)
    rows = np.stack([registers_from_hashes(hashes(i * 2_000, (i + 1) * 2_000), 10) for i in range(200)])
    mean = estimate_from_registers(rows, 10).mean()
    assert abs(mean / 2_000 - 1) < 0.01


def test_empty_and_single():
    assert HyperLogLog(12).estimate() == 0.0
    assert estimate_from_registers(np.zeros(1024, dtype=np.uint8), 10) == 0.0
    one = registers_from_hashes(hashes(0, 1), 10)
    assert round(estimate_from_registers(one, 10)) == 1


def test_merge_is_the_union_whatever_the_modes():
    whole = HyperLogLog(10).update(hashes(0, 5_000))
    dense_a = HyperLogLog(10).update(hashes(0, 3_000))
    dense_b = HyperLogLog(10).update(hashes(2_000, 5_000))
    assert dense_a.merge(dense_b) == whole
    sparse = HyperLogLog(10).update(hashes(4_990, 5_000))
    assert HyperLogLog(10).update(hashes(0, 4_990)).merge(sparse) == whole
    assert sparse.merge(HyperLogLog(10).update(hashes(0, 4_990))) == whole
    small = HyperLogLog(10).update(hashes(0, 60)).merge(HyperLogLog(10).update(hashes(40, 100)))
    assert small.is_sparse and small.estimate() == 100.0


def test_merge_refuses_different_precisions():
    with pytest.raises(ValueError, match="precision"):
        HyperLogLog(10).merge(HyperLogLog(11))


@pytest.mark.parametrize("n", [0, 7, 5_000])
def test_serialization_round_trip(n):
    sketch = HyperLogLog(12).update(hashes(0, n))
    blob = sketch.to_bytes()
    assert HyperLogLog.from_bytes(blob) == sketch
    assert HyperLogLog.from_bytes(blob).estimate() == sketch.estimate()


def test_corrupt_bytes_are_rejected_with_a_reason():
    blob = bytearray(HyperLogLog(10).update(hashes(0, 10)).to_bytes())
    with pytest.raises(ValueError, match="magic"):
        HyperLogLog.from_bytes(b"XXXX" + bytes(blob[4:]))
    blob[4] = 99
    with pytest.raises(ValueError, match="version 99"):
        HyperLogLog.from_bytes(bytes(blob))
    with pytest.raises(ValueError, match="precision"):
        HyperLogLog(30)
