"""DP aggregates: convergence, thresholds, closure and normalization, entities, determinism."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from syndiffix_core.dp import DpParams, synthesize_dp
from syndiffix_core.dp.accounting import split_budget
from syndiffix_core.dp.aggregation import aggregate, canonical_row_order
from syndiffix_core.dp.noise import NoiseSource, content_digest


def correlated_codes(rows: int, columns: int, values: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(rows, 1))
    x = latent + 0.9 * rng.normal(size=(rows, columns))
    return np.clip(np.floor(x * values / 4 + values / 2), 0, values - 1).astype(np.int32)


def true_counts(codes: np.ndarray, columns: tuple[int, ...]) -> dict[tuple[int, ...], int]:
    frame = pd.DataFrame(codes[:, list(columns)])
    return {tuple(int(v) for v in k): int(c) for k, c in frame.value_counts().items()}


def reported(agg, columns: tuple[int, ...]) -> dict[tuple[int, ...], float]:
    table = agg.tables[columns]
    return {
        tuple(int(v) for v in row): float(c) for row, c in zip(table.digits().T, table.counts, strict=True)
    }


def run_aggregate(codes, epsilon, *, salt=b"salt", delta=1e-6, **kwargs):
    params = DpParams(epsilon=epsilon, delta=delta, **kwargs)
    order = canonical_row_order(codes, None)
    codes = codes[order]
    return aggregate(
        codes,
        codes.max(axis=0) + 1,
        params=params,
        budget=split_budget(params, delta),
        protected_records=len(codes),
        noise=NoiseSource(salt, "table"),
    )


CODES = correlated_codes(20_000, 4, 5, seed=3)


def mean_error(agg, codes, k):
    errors = []
    for columns in itertools.combinations(range(codes.shape[1]), k):
        truth, noisy = true_counts(codes, columns), reported(agg, columns)
        errors += [abs(noisy.get(key, 0.0) - count) for key, count in truth.items()]
        errors += [count for key, count in noisy.items() if key not in truth]
    return float(np.mean(errors))


def test_aggregates_converge_to_the_true_counts_as_epsilon_grows():
    errors = {
        eps: [mean_error(run_aggregate(CODES, eps), CODES, k) for k in (1, 2, 3)] for eps in (0.5, 5, 5000)
    }
    for k in range(3):
        assert errors[0.5][k] > errors[5][k] > errors[5000][k]
    # at epsilon 5000 the noise std is ~0.05: every count >= 2 is exact, nothing is fabricated
    agg = run_aggregate(CODES, 5000)
    for k in (1, 2, 3):
        for columns in itertools.combinations(range(4), k):
            truth, noisy = true_counts(CODES, columns), reported(agg, columns)
            assert {key for key, c in truth.items() if c >= 2} <= set(noisy)
            assert all(noisy[key] == truth[key] for key in noisy if truth.get(key, 0) >= 2)
            assert set(noisy) <= set(truth)


def test_rare_values_below_the_length1_threshold_never_appear():
    codes = CODES.copy()
    codes[:5, 0] = 7  # a value held by 5 rows, over 4.5 noise stds below the length-1 threshold
    agg = run_aggregate(codes, 4.0, delta=1e-9)
    assert agg.lengths[0].threshold > 5 + 4.5 * agg.lengths[0].noise_std
    assert 7 not in agg.tables[(0,)].keys
    for columns, table in agg.tables.items():
        if 0 in columns:
            assert not (table.digits()[columns.index(0)] == 7).any()


def test_fixed_thresholds_suppress_combinations_whose_true_count_is_far_below():
    agg = run_aggregate(CODES, 4.0, fixed_thresholds={2: 150, 3: 300})
    for k, threshold in ((2, 150), (3, 300)):
        std = agg.lengths[k - 1].noise_std
        for columns in itertools.combinations(range(4), k):
            truth = true_counts(CODES, columns)
            # 6 noise stds above the true count is a 1e-9 event per combination
            assert all(truth.get(key, 0) + 6 * std > threshold for key in reported(agg, columns))
    # an unreachable threshold reports nothing at that length or beyond
    high = run_aggregate(CODES, 4.0, fixed_thresholds={2: 1e9})
    assert high.count_by_length().get(2, 0) == 0 and high.count_by_length().get(3, 0) == 0


@pytest.mark.parametrize("epsilon", [0.3, 4.0])
def test_reported_tuples_are_closed_and_never_exceed_their_sub_tuples(epsilon):
    agg = run_aggregate(CODES, epsilon)
    for columns, table in agg.tables.items():
        if len(columns) < 2:
            continue
        digits = table.digits()
        for drop in range(len(columns)):
            parent_columns = tuple(c for i, c in enumerate(columns) if i != drop)
            parent = reported(agg, parent_columns)
            for row, count in zip(np.delete(digits, drop, axis=0).T, table.counts, strict=True):
                key = tuple(int(v) for v in row)
                assert key in parent
                assert count <= parent[key]
    assert all((t.counts >= 1).all() and (t.counts == np.rint(t.counts)).all() for t in agg.tables.values())


def test_uncontrolled_fabrication_reports_unseen_combinations_and_minimize_mostly_not():
    sparse = np.random.default_rng(5).integers(0, 30, size=(3_000, 3)).astype(np.int32)  # ~4% of pairs unseen

    def fabricated(agg):
        return sum(
            len(set(reported(agg, c)) - set(true_counts(sparse, c)))
            for c in itertools.combinations(range(3), 2)
        )

    assert fabricated(run_aggregate(sparse, 4.0)) > 3 * max(
        1, fabricated(run_aggregate(sparse, 4.0, fabrication_mode="minimize"))
    )


def test_an_entity_with_many_rows_counts_once():
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "person": np.arange(5_000),
            "city": rng.choice(["a", "b", "c"], 5_000),
            "kind": rng.choice(["x", "y"], 5_000),
        }
    )
    whale = pd.DataFrame({"person": [-1] * 2_000, "city": ["whale"] * 2_000, "kind": ["x"] * 2_000})
    frame = pd.concat([frame, whale], ignore_index=True)
    as_rows = synthesize_dp(
        frame.drop(columns="person"), salt=b"s", table_identity="t", params=DpParams(epsilon=2)
    )
    as_entities = synthesize_dp(
        frame, salt=b"s", table_identity="t", params=DpParams(epsilon=2), aid_column="person"
    )
    assert "whale" in set(as_rows.frame["city"])
    # one entity contributes at most 1 to each tuple: 2000 rows of it look like one row, far below threshold
    assert "whale" not in set(as_entities.frame["city"])
    assert list(as_entities.frame.columns) == ["city", "kind"]
    assert as_entities.protected_records == pytest.approx(5_001, abs=2_000)


def test_same_salt_and_table_same_output_whatever_the_row_order():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(CODES[:5_000], columns=list("abcd")).astype(str)
    shuffled = frame.sample(frac=1.0, random_state=7).reset_index(drop=True)
    params = DpParams(epsilon=3)
    one = synthesize_dp(frame, salt=b"k", table_identity="db.t", params=params)
    two = synthesize_dp(shuffled, salt=b"k", table_identity="db.t", params=params)
    pd.testing.assert_frame_equal(one.frame, two.frame)
    other_salt = synthesize_dp(frame, salt=b"other", table_identity="db.t", params=params)
    other_table = synthesize_dp(frame, salt=b"k", table_identity="db.t2", params=params)
    assert not one.frame.equals(other_salt.frame) and not one.frame.equals(other_table.frame)
    assert rng is not None


def test_changed_data_under_the_same_identity_gets_fresh_noise():
    # With shared noise, the difference of two releases would be the exact difference of the true counts.
    frame = pd.DataFrame(CODES[:5_000], columns=list("abcd")).astype(str)
    changed = frame.copy()
    changed.loc[0, "a"] = "changed"  # same number of records, one value differs
    params = DpParams(epsilon=3)
    one = synthesize_dp(frame, salt=b"k", table_identity="db.t", params=params)
    two = synthesize_dp(changed, salt=b"k", table_identity="db.t", params=params)
    # the noisy record count of 5000 records: the same true count, noise drawn afresh
    assert one.protected_records != two.protected_records


def test_content_digest_is_the_row_multiset():
    frame = pd.DataFrame({"a": [1, 2, 2, 3], "b": ["x", "y", "y", None]})
    digest = content_digest(frame)
    assert content_digest(frame.iloc[::-1]) == digest
    assert content_digest(frame.iloc[[0, 1, 3]]) != digest  # a duplicate row removed
    edited = frame.copy()
    edited.loc[3, "b"] = "z"
    assert content_digest(edited) != digest
    assert content_digest(frame.rename(columns={"b": "c"})) != digest


def test_each_entity_contributes_at_most_the_allowed_sensitivity_and_distinct_tuples_once():
    from syndiffix_core.dp.aggregation import CombinationTable, _count_length, _Records

    rng = np.random.default_rng(9)
    # 400 entities; most have 1-3 rows, a few have 40 rows of distinct values; duplicates inside an entity
    sizes = np.where(rng.random(400) < 0.97, rng.integers(1, 4, 400), 40)
    entities = np.repeat(np.arange(400), sizes)
    codes = rng.integers(0, 50, size=(len(entities), 1)).astype(np.int32)
    codes[1] = codes[0]  # a repeated value within entity 0 counts once
    entities[1] = entities[0]
    order = canonical_row_order(codes, entities)
    codes, entities = codes[order], entities[order]
    table = CombinationTable((0,), np.array([50]), np.arange(50, dtype=np.int64), np.zeros(50))
    params = DpParams(epsilon=50.0, delta=1e-6, percentile_percentage=90)
    counts, allowed = _count_length(
        _Records(codes, entities),
        {(0,): table},
        sensitivity_bound=100,
        params=params,
        budget=split_budget(params, 1e-6),
        noise=NoiseSource(b"s", "t"),
        k=1,
    )
    distinct = pd.DataFrame({"e": entities, "v": codes[:, 0]}).drop_duplicates()
    per_entity = distinct.groupby("e").size().to_numpy()
    assert 2 <= allowed < 40  # the 90th percentile of distinct values per entity, not the whales' 40
    assert counts.sum() == np.minimum(per_entity, allowed).sum()
    assert counts.sum() < len(distinct)


def test_changed_parameters_on_unchanged_data_get_fresh_noise_and_another_fingerprint():
    # Shared noise at two scales would solve for the true count: n + 50 L and n + 100 L give n = 2 a - b.
    frame = pd.DataFrame(CODES[:5_000], columns=list("abcd")).astype(str)
    first = synthesize_dp(frame, salt=b"k", table_identity="db.t", params=DpParams(epsilon=4))
    repeated = synthesize_dp(frame.iloc[::-1], salt=b"k", table_identity="db.t", params=DpParams(epsilon=4))
    halved = synthesize_dp(frame, salt=b"k", table_identity="db.t", params=DpParams(epsilon=2))
    assert repeated.release_fingerprint == first.release_fingerprint  # a rerun repeats the release
    assert halved.release_fingerprint != first.release_fingerprint
    # the count noise at epsilon 2 is not the epsilon-4 draw scaled by 2
    noise_4, noise_2 = first.protected_records - 5_000, halved.protected_records - 5_000
    assert abs(noise_2 - 2 * noise_4) > 2
    assert len(first.release_fingerprint) == 32 and first.metadata()["release_fingerprint"] == (
        first.release_fingerprint
    )
