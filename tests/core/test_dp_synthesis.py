"""Aggregate-seeded synthesis and typed round trips through the DP engine."""

from __future__ import annotations

import datetime as dt
import decimal
import itertools

import numpy as np
import pandas as pd
import pytest

from syndiffix_core.dp import BinKind, ColumnBinning, DpError, DpParams, evaluate_dp, synthesize_dp
from syndiffix_core.dp.synthesis import MISSING


def categorical_frame(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=rows)
    data = {}
    for j in range(5):
        x = latent + rng.normal(size=rows)
        data[f"c{j}"] = np.array(list("abcdef"))[np.clip(np.floor(x + 3), 0, 5).astype(int)]
    return pd.DataFrame(data)


def assert_every_combination_is_reported(result) -> None:
    aggregates = result.aggregates
    records = result.records
    d = records.shape[1]
    for k in range(1, aggregates.reporting_length + 1):
        for columns in itertools.combinations(range(d), k):
            table = aggregates.tables[columns]
            rows = records[(records[:, list(columns)] != MISSING).all(axis=1)]
            keys = np.zeros(len(rows), dtype=np.int64)
            for column, stride in zip(columns, table.strides, strict=True):
                keys += rows[:, column].astype(np.int64) * stride
            assert (table.positions(keys) >= 0).all(), f"absent combination in columns {columns}"


@pytest.mark.parametrize(
    "params",
    [
        DpParams(epsilon=1.0),
        DpParams(epsilon=4.0, reporting_length=2, use_synthetic_counts=True),
        DpParams(epsilon=4.0, fabrication_mode="minimize", keep_partial_records=True),
        DpParams(epsilon=0.5, reporting_length=4, weight_selection_percentile=50),
    ],
    ids=["eps1", "r2-synthetic-counts", "minimize-keep-partial", "r4-p50"],
)
def test_no_synthetic_record_holds_a_combination_absent_from_the_aggregates(params):
    result = synthesize_dp(categorical_frame(8_000, seed=2), salt=b"s", table_identity="t", params=params)
    assert len(result.frame) > 0
    assert_every_combination_is_reported(result)
    if not params.keep_partial_records:
        # a partial record is written only after redrawing ran out: at least as many stuck draws were
        # thrown away as there are rows (a sparse 4-way table at epsilon 0.5 may get there)
        partial = (result.records == MISSING).any(axis=1)
        assert not partial.any() or result.discarded_partial_records >= len(result.records)
        assert (result.frame.isna().any(axis=1).to_numpy() == partial).all()


def test_synthetic_rows_follow_the_dp_record_count_and_the_marginals():
    frame = categorical_frame(20_000, seed=4)
    result = synthesize_dp(frame, salt=b"s", table_identity="t", params=DpParams(epsilon=4))
    assert len(result.frame) == result.protected_records == result.target_records
    assert abs(result.protected_records - 20_000) < 2_000  # Laplace(1/0.02): 2000 is 40 scales
    for column in frame.columns:
        true_share = frame[column].value_counts(normalize=True)
        synthetic_share = (
            result.frame[column].value_counts(normalize=True).reindex(true_share.index, fill_value=0)
        )
        assert (true_share - synthetic_share).abs().max() < 0.03
    metrics = evaluate_dp(result)
    assert metrics["by_length"]["1"]["mean_preservation"] > 0.9
    assert metrics["by_length"]["2"]["fabricated_share"] < 0.1


def test_pairwise_correlation_survives():
    frame = categorical_frame(20_000, seed=6)
    result = synthesize_dp(frame, salt=b"s", table_identity="t", params=DpParams(epsilon=4))
    true_same = (frame["c0"] == frame["c1"]).mean()
    independent = sum(
        frame["c0"].value_counts(normalize=True)
        * frame["c1"].value_counts(normalize=True).reindex(frame["c0"].value_counts().index, fill_value=0)
    )
    synthetic_same = (result.frame["c0"] == result.frame["c1"]).mean()
    assert abs(synthetic_same - true_same) < abs(independent - true_same) / 2


def every_kind_frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    z = rng.normal(size=rows)
    nulls = rng.random(rows) < 0.2
    return pd.DataFrame(
        {
            "flag": z > 0,
            "nullable_flag": pd.array(np.where(nulls, None, z > 0.3), dtype="boolean"),
            "count": (z * 3 + 20).round().astype("int64"),
            "small": (z + 5).round().astype("int16"),
            "nullable_int": pd.array(np.where(nulls, None, (z * 2).round()), dtype="Int64"),
            "price": np.round(z * 100 + 500, 2),
            "ratio": pd.array(np.where(nulls, None, z / 10), dtype="Float64"),
            "amount": [decimal.Decimal(f"{v:.2f}") for v in z * 5 + 50],
            "label": np.where(z > 0.5, "high", np.where(z < -0.5, "low", "mid")),
            "category": pd.Categorical(np.where(z > 0, "x", "y")),
            "nullable_label": pd.array(np.where(nulls, None, np.where(z > 0, "p", "q")), dtype="string"),
            "at": pd.Timestamp("2021-06-01") + pd.to_timedelta(np.round(z * 40 + 100).astype(int), unit="D"),
            "at_tz": pd.Timestamp("2021-06-01", tz="Europe/Berlin")
            + pd.to_timedelta(np.round(z * 40).astype(int), unit="D"),
            "day": [dt.date(2022, 1, 1) + dt.timedelta(days=int(v)) for v in np.round(z * 60 + 200)],
            "time": [dt.time(int(h), 30) for h in np.clip(np.round(z * 3 + 12), 0, 23)],
        }
    )


def test_typed_round_trip_of_every_column_kind():
    frame = every_kind_frame(12_000)
    params = DpParams(
        epsilon=8, reporting_length=2, column_binning={"count": ColumnBinning(kind=BinKind.EXACT)}
    )
    result = synthesize_dp(frame, salt=b"s", table_identity="t", params=params)
    out = result.frame
    assert list(out.columns) == list(frame.columns)
    assert out.dtypes.to_dict() == frame.dtypes.to_dict()
    assert len(out) > 10_000
    # exact attributes: only values of the input (the frequent ones)
    assert set(out["label"]) <= set(frame["label"])
    assert set(out["category"]) <= {"x", "y"}
    assert set(out["count"]) <= set(frame["count"])
    # nulls are an attribute of their own and come back at about their share
    assert 0.1 < out["nullable_int"].isna().mean() < 0.3
    assert 0.1 < out["nullable_label"].isna().mean() < 0.3
    assert out["flag"].notna().all() and out["price"].notna().all()
    # binned values are drawn inside the bins that hold data, on the input's grid
    assert out["price"].between(frame["price"].min() - 100, frame["price"].max() + 100).all()
    assert np.allclose(np.round(out["price"] * 100), out["price"] * 100, rtol=0, atol=1e-6)
    assert all(isinstance(v, decimal.Decimal) and v.as_tuple().exponent == -2 for v in out["amount"])
    assert all(isinstance(v, dt.date) for v in out["day"].dropna())
    assert all(isinstance(v, dt.time) for v in out["time"].dropna())
    assert out["at"].min() >= pd.Timestamp("2021-01-01") and out["at"].max() < pd.Timestamp("2022-03-01")
    assert (out["at"] == out["at"].dt.normalize()).all()  # day resolution kept
    assert str(out["at_tz"].dt.tz) == "Europe/Berlin"


def test_uniform_binning_within_declared_bounds():
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"x": rng.uniform(0, 100, 10_000), "g": rng.choice(["a", "b"], 10_000)})
    params = DpParams(column_binning={"x": ColumnBinning(kind="uniform", lower=0, upper=100, bins=10)})
    out = synthesize_dp(frame, salt=b"s", table_identity="t", params=params).frame
    assert out["x"].between(0, 100).all()
    counts = np.histogram(out["x"], bins=10, range=(0, 100))[0]
    assert (counts > 600).all()  # every decile occupied, roughly uniformly


def test_bad_input_names_the_column():
    frame = categorical_frame(100, seed=1)
    with pytest.raises(DpError, match="aid_column 'who'"):
        synthesize_dp(frame, salt=b"s", table_identity="t", aid_column="who")
    with pytest.raises(ValueError, match="salt"):
        synthesize_dp(frame, salt=b"", table_identity="t")
    inf = pd.DataFrame({"v": [1.0, float("inf")] * 50})
    with pytest.raises(ValueError, match="v"):
        synthesize_dp(inf, salt=b"s", table_identity="t")


def test_metadata_holds_only_dp_figures():
    frame = pd.DataFrame({"a": ["x"] * 500 + ["y"] * 300 + [f"rare{i}" for i in range(50)]})
    meta = synthesize_dp(frame, salt=b"s", table_identity="t").metadata()
    assert meta["binning"] == {"a": {"kind": "exact", "released_attributes": 2}}  # not the 52 distinct values
    assert "rare" not in repr(meta)
    assert meta["epsilon_spent"] == pytest.approx(4.0) and meta["lengths"][0]["allowed_sensitivity"] == 1


def test_sparse_wide_aggregates_fill_up_with_partial_records_never_with_absent_combinations():
    rng = np.random.default_rng(8)
    frame = pd.DataFrame({f"c{j}": rng.integers(0, 12, 4_000).astype(str) for j in range(8)})
    result = synthesize_dp(frame, salt=b"s", table_identity="t", params=DpParams(epsilon=1, delta=1e-6))
    assert len(result.frame) == result.target_records > 0
    assert result.partial_records > 0  # completing them would need combinations the aggregates lack
    assert result.frame.isna().to_numpy().sum() == (result.records == MISSING).sum()
    assert_every_combination_is_reported(result)


def test_the_default_delta_comes_from_the_noisy_record_count_never_the_true_one():
    # delta is published in lineage: 1/(n ln n) on the true n would publish n itself
    from syndiffix_core.dp.accounting import default_delta

    frame = categorical_frame(3_000, seed=5)
    result = synthesize_dp(frame, salt=b"s", table_identity="t", params=DpParams(epsilon=1.0))
    assert result.protected_records != len(frame)  # Laplace noise of scale 200 on the count
    assert result.delta_spent == default_delta(result.protected_records)
    assert result.delta_spent != default_delta(len(frame))
    assert result.metadata()["delta_spent"] == result.delta_spent
