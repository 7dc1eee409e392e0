"""Wide tables end to end through synthesize(): clustering, stitching, ML-target mode."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import ClusteringParams, synthesize
from syndiffix_core.clustering.dependence import map_nulls
from syndiffix_core.clustering.plan import plan_table
from syndiffix_core.columns import encode_frame
from syndiffix_core.errors import InvalidInputError
from syndiffix_core.forest import null_mapping


def binned_tvd(a: pd.Series, b: pd.Series, bins: int = 10) -> float:
    a, b = a.dropna().astype(float), b.dropna().astype(float)
    edges = np.histogram_bin_edges(np.concatenate([a, b]), bins=bins)
    pa, _ = np.histogram(a, edges)
    pb, _ = np.histogram(b, edges)
    return 0.5 * np.abs(pa / pa.sum() - pb / pb.sum()).sum()


def wide_table(rows: int, columns: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    base = rng.normal(size=rows)
    data = {}
    for j in range(columns):
        kind = j % 5
        if kind == 0:
            data[f"real{j}"] = np.round(base * (1 + j % 3) + rng.normal(scale=0.5, size=rows), 2)
        elif kind == 1:
            data[f"int{j}"] = rng.integers(0, 50, rows)
        elif kind == 2:
            data[f"str{j}"] = pd.Series(rng.choice(["north", "south", "east", "west"], rows), dtype="string")
        elif kind == 3:
            data[f"bool{j}"] = rng.random(rows) < 0.3
        else:
            data[f"time{j}"] = pd.Timestamp("2024-01-01") + pd.to_timedelta(
                rng.integers(0, 10**7, rows), unit="s"
            )
    return pd.DataFrame(data)


@pytest.mark.slow
def test_a_fifty_column_table_synthesizes_with_every_column_and_dtype():
    table = wide_table(1500, 50)
    out = synthesize(table, salt="wide")
    assert list(out.columns) == list(table.columns)
    assert list(out.dtypes) == list(table.dtypes)
    assert abs(len(out) - len(table)) < 0.05 * len(table)
    # Correlated real columns in the table stay correlated on average.
    reals = [c for c in table.columns if c.startswith("real")]
    original = table[reals].corr().to_numpy()[np.triu_indices(len(reals), 1)]
    synthetic = out[reals].corr().to_numpy()[np.triu_indices(len(reals), 1)]
    assert synthetic.mean() > 0.5 * original.mean()
    for column in ("int1", "str2", "bool3"):
        assert (
            binned_tvd(table[column].astype("category").cat.codes, out[column].astype("category").cat.codes)
            < 0.1
        )


def test_the_main_column_is_in_the_initial_cluster():
    table = wide_table(3000, 12, seed=1)
    _, values = encode_frame(table)
    for main in ("int6", "bool8", "real10"):
        plan = plan_table(
            values,
            list(table.columns),
            ClusteringParams(main_column=main),
            target_column=None,
            rng=np.random.default_rng(0),
        )
        index = list(table.columns).index(main)
        assert index in plan.clusters.initial
        assert plan.clusters.derived
        assert all(cluster.stitch_columns[0] == index for cluster in plan.clusters.derived)


def chain_table(rows: int, seed: int = 0) -> pd.DataFrame:
    """b and c depend strongly on each other only through a; the rest is noise."""
    rng = np.random.default_rng(seed)
    a = rng.normal(50, 10, rows)
    data = {
        "a": np.round(a, 1),
        "b": np.round(2 * a + rng.normal(0, 4, rows), 1),
        "c": np.round(-a + rng.normal(0, 2, rows), 1),
    }
    for j in range(4):
        data[f"noise{j}"] = rng.integers(0, 1000, rows)
    return pd.DataFrame(data)


def test_a_dependent_pair_in_different_clusters_is_correlated_through_the_stitch_column():
    table = chain_table(10_000)
    # Explicit features put b with a in the initial cluster; c rides in its own cluster stitched on a.
    params = ClusteringParams(main_column="a", main_features=("b",))
    out = synthesize(table, salt="chain", clustering=params)
    original = table[["b", "c"]].corr().iloc[0, 1]
    assert original < -0.8
    assert out[["b", "c"]].corr().iloc[0, 1] == pytest.approx(original, abs=0.1)
    # The stitch column keeps its 1-dim distribution.
    assert binned_tvd(table["a"], out["a"], bins=20) < 0.03


def test_patched_columns_keep_their_distribution_but_not_their_relations():
    table = chain_table(10_000, seed=2)
    params = ClusteringParams(main_column="a", main_features=("b",), patch_non_features=True)
    out = synthesize(table, salt="patch", clustering=params)
    for column in ("c", "noise0", "noise3"):
        assert binned_tvd(table[column], out[column], bins=20) < 0.03
    # c was patched: zipped on at random, so its relation to a is gone.
    assert abs(out[["a", "c"]].corr().iloc[0, 1]) < 0.1


def xor_table(rows: int, seed: int = 0) -> pd.DataFrame:
    """The target is the XOR of two features: each feature alone says nothing about it."""
    rng = np.random.default_rng(seed)
    f1 = rng.integers(0, 2, rows)
    f2 = rng.integers(0, 2, rows)
    flip = rng.random(rows) < 0.05
    data = {"f1": f1, "f2": f2, "target": (f1 ^ f2) ^ flip}
    for j in range(5):
        data[f"other{j}"] = np.round(rng.normal(size=rows), 2)
    return pd.DataFrame(data)


def xor_accuracy(frame: pd.DataFrame) -> float:
    return float(((frame["f1"] ^ frame["f2"]) == frame["target"]).mean())


def test_ml_mode_keeps_the_target_relation_better_than_default_clustering():
    pytest.importorskip("sklearn")
    table = xor_table(8000)
    ml = synthesize(table, salt="ml", target_column="target")
    default = synthesize(table, salt="ml")
    assert xor_accuracy(table) > 0.9
    assert xor_accuracy(ml) > 0.85
    assert xor_accuracy(ml) > xor_accuracy(default) + 0.2


def test_no_clustering_synthesizes_one_cluster_and_refuses_too_many_columns():
    table = chain_table(2000)
    _, values = encode_frame(table)
    plan = plan_table(
        values,
        list(table.columns),
        ClusteringParams(enabled=False),
        target_column=None,
        rng=np.random.default_rng(0),
    )
    assert plan.clusters.initial == tuple(range(7))
    assert plan.clusters.derived == ()
    out = synthesize(table, salt="one", clustering=ClusteringParams(enabled=False))
    assert list(out.columns) == list(table.columns)
    with pytest.raises(InvalidInputError, match="cannot be synthesized as one cluster"):
        synthesize(wide_table(200, 14), salt="one", clustering=ClusteringParams(enabled=False))


def test_unknown_main_column_names_the_column():
    with pytest.raises(InvalidInputError, match="'nope'"):
        synthesize(chain_table(500), salt="s", clustering=ClusteringParams(main_column="nope"))


def test_the_cluster_plan_is_the_same_for_every_salt_and_row_order():
    table = wide_table(3000, 12, seed=2)
    _, values = encode_frame(table)
    names = list(table.columns)
    shuffled = np.random.default_rng(0).permutation(len(table))

    def plan_of(rows, seed):
        rng = np.random.default_rng(seed)
        return plan_table(values[rows], names, ClusteringParams(), target_column=None, rng=rng).clusters

    plans = {plan_of(slice(None), seed) for seed in range(5)} | {plan_of(shuffled, 7)}
    assert len(plans) == 1
    assert next(iter(plans)).derived


def test_clustered_synthesis_is_deterministic_for_a_salt():
    table = chain_table(3000, seed=5)
    first = synthesize(table, salt="same")
    pd.testing.assert_frame_equal(first, synthesize(table, salt="same"))
    assert not first.equals(synthesize(table, salt="other"))


def test_the_plan_places_nulls_by_its_own_rule_whatever_the_forest_maps_them_to():
    """The forest maps nulls to max + (max - min); the plan measures with nulls beyond twice the extreme,
    so the same table gives the same plan whether it arrives with NaN or with the plan's own mapping."""
    table = wide_table(3000, 12, seed=2)
    _, values = encode_frame(table)
    values[np.random.default_rng(3).random(values.shape) < 0.1] = np.nan
    mapped = map_nulls(values)
    for j in range(values.shape[1]):
        nulls = np.isnan(values[:, j])
        expected = 2 * np.nanmax(values[:, j]) if np.nanmax(values[:, j]) > 0 else 2 * np.nanmin(values[:, j])
        assert np.all(mapped[nulls, j] == expected)
        assert np.array_equal(mapped[~nulls, j], values[~nulls, j])
    names = list(table.columns)

    def plan_of(matrix):
        return plan_table(matrix, names, ClusteringParams(), target_column=None, rng=np.random.default_rng(0))

    assert plan_of(values).clusters == plan_of(mapped).clusters
    forest_mapped = np.where(np.isnan(values), [null_mapping(values[:, j]) for j in range(12)], values)
    assert not np.array_equal(forest_mapped, mapped)
