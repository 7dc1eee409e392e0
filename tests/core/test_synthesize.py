import datetime as dt
import decimal

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import AnonymizationParams, synthesize
from syndiffix_core.errors import InvalidInputError, UnsupportedColumnError


def _mixed(n, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(40, 10, n)
    return pd.DataFrame(
        {
            "age": np.clip(x, 18, 90).astype(int),
            "income": np.round(x * 1000 + rng.normal(0, 3000, n), 2),
            "city": rng.choice([f"city_{i}" for i in range(12)], n),
            "joined": pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 86400 * 365, n), unit="s"),
            "active": rng.random(n) < 0.3,
        }
    )


def test_output_has_the_input_columns_dtypes_and_about_as_many_rows():
    frame = _mixed(3000)
    out = synthesize(frame, salt="s")
    assert list(out.columns) == list(frame.columns)
    assert list(out.dtypes) == list(frame.dtypes)
    assert abs(len(out) - len(frame)) < 30
    assert out.index.equals(pd.RangeIndex(len(out)))


def test_same_salt_same_output_other_salt_other_output():
    frame = _mixed(2000)
    first = synthesize(frame, salt="alpha")
    pd.testing.assert_frame_equal(first, synthesize(frame, salt="alpha"))
    assert not first.equals(synthesize(frame, salt="beta"))


def test_output_does_not_depend_on_input_row_order():
    frame = _mixed(2000)
    shuffled = frame.sample(frac=1.0, random_state=1).reset_index(drop=True)
    pd.testing.assert_frame_equal(synthesize(frame, salt="s"), synthesize(shuffled, salt="s"))


def test_rows_are_shuffled():
    frame = pd.DataFrame({"v": np.repeat(np.arange(20), 100)})
    out = synthesize(frame, salt="s")["v"].to_numpy()
    assert not np.all(np.diff(out) >= 0)


def test_rare_value_never_appears_over_many_salts():
    rng = np.random.default_rng(0)
    common = rng.choice(["a", "b", "c"], 500)
    for holders in (1, 2):
        frame = pd.DataFrame({"v": np.r_[common, ["RARE"] * holders], "n": rng.integers(0, 5, 500 + holders)})
        for salt in range(40):
            out = synthesize(frame, salt=f"salt-{salt}")
            assert "RARE" not in set(out["v"]), (holders, salt)


def test_value_of_one_entity_over_many_rows_is_suppressed():
    rng = np.random.default_rng(1)
    people = [f"p{i}" for i in range(600)]
    frame = pd.DataFrame({"person": people, "diagnosis": rng.choice(["flu", "cold", "none"], 600)})
    heavy = pd.DataFrame({"person": ["patient-zero"] * 60, "diagnosis": ["RARE-DISEASE"] * 60})
    frame = pd.concat([frame, heavy], ignore_index=True)
    for salt in range(20):
        out = synthesize(frame, aid_columns=["person"], salt=f"s{salt}")
        assert list(out.columns) == ["diagnosis"]
        assert "RARE-DISEASE" not in set(out["diagnosis"])
    # without the AID column, the 60 rows look like 60 people and the value is released
    assert "RARE-DISEASE" in set(synthesize(frame.drop(columns="person"), salt="s")["diagnosis"])


def test_frequent_value_counts_stay_within_noise():
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(
        {"v": rng.choice(["x", "y", "z"], 6000, p=[0.5, 0.3, 0.2]), "w": rng.integers(0, 3, 6000)}
    )
    original = frame["v"].value_counts()
    for salt in ("a", "b", "c"):
        synthetic = synthesize(frame, salt=salt)["v"].value_counts()
        for value, count in original.items():
            assert abs(synthetic[value] - count) <= 12, (value, count, synthetic[value])


def test_strongly_correlated_pair_keeps_its_correlation():
    rng = np.random.default_rng(3)
    x = rng.normal(size=10_000)
    frame = pd.DataFrame({"x": x, "y": x + rng.normal(size=10_000) * 0.3})
    original = frame.corr().iloc[0, 1]
    for salt in ("a", "b"):
        assert abs(synthesize(frame, salt=salt).corr().iloc[0, 1] - original) < 0.05


def test_empty_table_gives_empty_result_with_dtypes():
    frame = _mixed(10).iloc[0:0]
    out = synthesize(frame, salt="s")
    assert len(out) == 0
    assert list(out.dtypes) == list(frame.dtypes)


def test_one_row_table_is_fully_suppressed_but_valid():
    frame = _mixed(1)
    out = synthesize(frame, salt="s")
    assert list(out.dtypes) == list(frame.dtypes)
    assert len(out) <= 3
    assert frame["city"][0] not in set(out["city"])


def test_all_null_and_constant_columns():
    frame = pd.DataFrame(
        {
            "nothing": pd.Series([None] * 400, dtype="Int64"),
            "constant": ["same"] * 400,
            "number": np.arange(400) % 7,
        }
    )
    out = synthesize(frame, salt="s")
    assert out["nothing"].isna().all()
    assert (out["constant"] == "same").all()
    assert out["number"].between(0, 6).all()


def test_unicode_and_very_long_strings():
    long_a, long_b = "ä" * 5000 + "α", "ä" * 5000 + "β"
    values = ["日本語", "Ελληνικά", "emoji 🎉", long_a, long_b] * 200
    frame = pd.DataFrame({"text": values})
    out = synthesize(frame, salt="s")
    assert set(out["text"]) <= set(values)
    assert long_a in set(out["text"])


@pytest.mark.parametrize(
    "series",
    [
        pd.Series([True, False, None] * 300, dtype="boolean"),
        pd.Series([1, 2, None] * 300, dtype="Int64"),
        pd.Series([1.25, None, 3.5] * 300, dtype="float64"),
        pd.Series(["a", None, "b"] * 300, dtype="string"),
        pd.Series(["a", None, "b"] * 300, dtype="category"),
        pd.Series([pd.Timestamp("2021-01-01"), None, pd.Timestamp("2022-06-01 12:00")] * 300),
        pd.Series([pd.Timestamp("2021-01-01", tz="UTC"), None, pd.Timestamp("2022-06-01", tz="UTC")] * 300),
        pd.Series([dt.date(2020, 1, 1), None, dt.date(2021, 5, 5)] * 300, dtype=object),
        pd.Series([decimal.Decimal("1.50"), None, decimal.Decimal("2.25")] * 300, dtype=object),
        pd.Series([dt.time(8, 30), None, dt.time(17, 45, 10)] * 300, dtype=object),
        pd.Series([1.5, None, 2.25] * 300, dtype="float32"),
        pd.Series([3, None, 200] * 300, dtype="UInt8"),
    ],
    ids=[
        "boolean",
        "Int64",
        "float",
        "string",
        "category",
        "timestamp",
        "timestamptz",
        "date",
        "decimal",
        "time",
        "float32",
        "UInt8",
    ],
)
def test_every_kind_with_nulls_round_trips_its_dtype(series):
    frame = pd.DataFrame({"v": series, "k": np.arange(len(series)) % 3})
    out = synthesize(frame, salt="s")
    assert out["v"].dtype == series.dtype
    assert out["v"].isna().any()
    non_null = set(out["v"].dropna())
    assert non_null <= set(series.dropna())


def test_bad_input_gives_clear_errors():
    frame = _mixed(50)
    with pytest.raises(InvalidInputError, match="nope"):
        synthesize(frame, aid_columns=["nope"], salt="s")
    with pytest.raises(InvalidInputError, match="salt"):
        synthesize(frame, salt="")
    with pytest.raises(InvalidInputError, match="every column"):
        synthesize(frame[["age"]], aid_columns=["age"], salt="s")
    with pytest.raises(UnsupportedColumnError, match="bad"):
        synthesize(pd.DataFrame({"bad": [1.0, np.inf, 2.0]}), salt="s")


def test_noise_parameters_are_used():
    frame = pd.DataFrame({"v": np.repeat(["a", "b"], 1000)})
    quiet = synthesize(frame, salt="s", anonymization=AnonymizationParams(layer_noise_sd=0.0))
    assert quiet["v"].value_counts().to_dict() == {"a": 1000, "b": 1000}


@pytest.mark.parametrize("aid", [None, "customer"])
def test_trees_built_side_by_side_give_the_output_of_trees_built_one_by_one(aid, monkeypatch):
    from syndiffix_core import forest

    rng = np.random.default_rng(21)
    frame = _mixed(3000, seed=21)
    frame["visits"] = rng.poisson(frame["age"] / 10)
    frame["score"] = np.round(frame["income"] / 1000 + rng.normal(0, 2, len(frame)), 1)
    frame["customer"] = rng.integers(0, 900, len(frame))
    columns = frame if aid else frame.drop(columns="customer")
    batched = synthesize(columns, aid, salt="s", workers=1)
    monkeypatch.setattr(forest, "BATCHED_TREE_POSITIONS", 1)  # every tree grown and harvested alone
    pd.testing.assert_frame_equal(batched, synthesize(columns, aid, salt="s", workers=1))
