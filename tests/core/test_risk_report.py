from __future__ import annotations

import json

import numpy as np
import pytest

from syndiffix_core.risk import (
    ID_SEED,
    KHyperLogLog,
    Reproduction,
    hash_column,
    hash_row_numbers,
    joinability,
    reproduction,
    summarize,
)
from syndiffix_core.risk.report import risk_level, uniqueness_histogram


def sketch_of(values: np.ndarray, ids: np.ndarray | None = None) -> KHyperLogLog:
    id_hashes = hash_row_numbers(len(values)) if ids is None else hash_column(ids, seed=ID_SEED)
    return KHyperLogLog().update(hash_column(values), id_hashes)


def test_an_id_like_column_is_identifying_and_a_category_is_low():
    rng = np.random.default_rng(1)
    email_like = sketch_of(np.arange(50_000))
    category = sketch_of(rng.integers(0, 12, 50_000))
    identifying = summarize(email_like, ["email"])
    assert identifying.level == "identifying"
    assert identifying.reidentification_potential[1] == 1.0
    low = summarize(category, ["country"])
    assert low.level == "low"
    assert low.distinct_values == 12 and low.distinct_values_exact
    assert low.reidentification_potential == {1: 0.0, 2: 0.0, 5: 0.0, 10: 0.0}


def test_rare_tail_is_elevated():
    # 1 000 common values of 100 rows each, plus 2 000 values of 3 rows: 6% of rows in classes of 3
    values = np.concatenate([np.repeat(np.arange(1_000), 100), np.repeat(np.arange(1_000, 3_000), 3)])
    summary = summarize(sketch_of(values), ["zip"])
    assert summary.id_share[5] == pytest.approx(6_000 / 106_000)
    assert summary.level == "elevated"
    assert risk_level({1: 0.01, 5: 0.01}) == "low"


def test_histogram_bins_cover_every_value_once():
    values = np.concatenate([np.arange(100), np.repeat(np.arange(100, 150), 7), np.repeat([999], 5_000)])
    bins = uniqueness_histogram(sketch_of(values))
    by_label = {b.label: b.share_of_values for b in bins}
    assert by_label["1"] == pytest.approx(100 / 151)
    assert by_label["6-10"] == pytest.approx(50 / 151)
    assert by_label[">=1001"] == pytest.approx(1 / 151)
    assert sum(by_label.values()) == pytest.approx(1.0)


def test_summary_is_json_ready_and_holds_no_values():
    summary = summarize(sketch_of(np.arange(10_000) % 3_000), ["a", "b"], thresholds=(1, 3))
    data = json.loads(json.dumps(summary.to_dict()))
    assert data["columns"] == ["a", "b"]
    assert set(data["reidentification_potential"]) == {"1", "3", "5"}
    assert data["histogram"][0]["ids"] == "1"


def test_joinability_flags_a_contained_identifier_space():
    customers = sketch_of(np.arange(200_000))
    orders_customer = sketch_of(np.random.default_rng(2).integers(0, 50_000, 300_000))
    unrelated = sketch_of(np.arange(10_000_000, 10_100_000))
    link = joinability("orders.customer_id", orders_customer, "customers.id", customers)
    assert link.linkable
    assert link.containment_left_in_right == pytest.approx(1.0)
    assert link.containment_right_in_left == pytest.approx(0.25, abs=0.05)
    assert not joinability("a", unrelated, "b", customers).linkable
    flags = sketch_of(np.arange(1_000) % 2)
    assert not joinability("x", flags, "y", sketch_of(np.arange(1_000) % 2)).linkable  # only 2 common values


def test_reproduction_estimates_the_share_of_synthetic_rows_copying_unique_source_values():
    rng = np.random.default_rng(3)
    # Source: 100 000 unique values (0..99 999) and 2 000 values held by 50 rows each.
    source_values = np.concatenate([np.arange(100_000), np.repeat(np.arange(100_000, 102_000), 50)])
    source = sketch_of(source_values)
    assert not source.is_exact
    # Synthetic: 20% copies of unique source values, 50% common values, 30% values the source lacks.
    synthetic = np.concatenate(
        [
            rng.integers(0, 100_000, 40_000),
            rng.integers(100_000, 102_000, 100_000),
            rng.integers(5_000_000, 6_000_000, 60_000),
        ]
    )
    rng.shuffle(synthetic)
    hashes = hash_column(synthetic)
    total = Reproduction()
    for start in range(0, len(hashes), 30_000):
        total = total + reproduction(source, hashes[start : start + 30_000])
    whole = reproduction(source, hashes)
    assert total == whole
    shares = whole.to_dict()
    assert whole.rows_sampled > 1_000
    assert shares["share_unique_in_source"] == pytest.approx(0.2, abs=0.03)
    # Rows are sampled by value: the 2 000 common values enter as ~80 sampled clusters of 50 rows, so
    # this share is coarser than the one over 100 000 unique values.
    assert shares["share_in_source"] == pytest.approx(0.7, abs=0.07)
    assert shares["share_rare_in_source"]["10"] == pytest.approx(0.2, abs=0.03)


def test_reproduction_against_an_empty_source_samples_everything_and_finds_nothing():
    counts = reproduction(KHyperLogLog(), hash_column(np.arange(10)))
    assert counts.rows_sampled == 10 and counts.rows_in_source == 0
    assert Reproduction().to_dict()["share_unique_in_source"] is None
