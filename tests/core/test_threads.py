"""The trees of a cluster built and harvested side by side on threads give the same output as one thread."""

import sys
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import stitching, synthesize, synthesizer
from syndiffix_core.forest import Forest
from syndiffix_core.harvest import Harvester
from syndiffix_core.params import ClusteringParams
from syndiffix_core.threads import map_in_threads

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "compare_reference"))
from compare import generated_table
from test_forest import make_forest


def test_map_in_threads_keeps_the_item_order_and_raises_a_task_error():
    assert map_in_threads(lambda x: x * x, range(7), threads=3) == [0, 1, 4, 9, 16, 25, 36]

    def fail_on_three(x):
        if x == 3:
            raise ValueError("three")
        return x

    with pytest.raises(ValueError, match="three"):
        map_in_threads(fail_on_three, range(6), threads=2)


def _matrix():
    rng = np.random.default_rng(7)
    latent = rng.normal(size=3000)
    return np.column_stack(
        [
            np.round(latent * 10 + rng.normal(size=3000)),
            latent + rng.normal(scale=0.3, size=3000),
            rng.integers(0, 5, size=3000),
            np.where(rng.random(3000) < 0.05, np.nan, latent * 3),
        ]
    )


def _pools_prepared(threads, monkeypatch):
    """Every pool of a 4-column cluster after `prepare_refinement` on `threads` threads; with two, the
    first two multi-column trees are only built once both builds have started (a barrier)."""
    forest = make_forest(_matrix())
    harvester = Harvester(forest)
    build = forest._build
    side_by_side = threading.Barrier(2)
    waiting = [True, True] if threads > 1 else []

    def build_after_the_barrier(columns):
        if len(columns) > 1 and waiting:
            waiting.pop()
            side_by_side.wait(timeout=30)  # raises BrokenBarrierError unless two builds run at once
        return build(columns)

    monkeypatch.setattr(forest, "_build", build_after_the_barrier)
    harvester.prepare_refinement((0, 1, 2, 3), threads)
    return {columns: harvester.pool(columns) for columns in list(harvester._pools)}


def test_trees_and_pools_built_on_two_threads_equal_those_built_on_one(monkeypatch):
    one = _pools_prepared(1, monkeypatch)
    two = _pools_prepared(2, monkeypatch)
    assert one.keys() == two.keys() and len(one) == 15
    for columns in one:
        for field in ("low", "high", "count", "origin", "depth", "subnodes"):
            np.testing.assert_array_equal(getattr(one[columns], field), getattr(two[columns], field))


def test_the_one_dim_trees_built_on_two_threads_equal_those_built_on_one(monkeypatch):
    one = make_forest(_matrix())
    side_by_side = threading.Barrier(2)
    build = Forest._build_column

    def build_after_the_barrier(self, j, values):
        if j < 2:
            side_by_side.wait(timeout=30)  # raises BrokenBarrierError unless two columns build at once
        return build(self, j, values)

    monkeypatch.setattr(Forest, "_build_column", build_after_the_barrier)
    two = make_forest(_matrix(), threads=2)
    assert list(one.trees) == list(two.trees) == [(0,), (1,), (2,), (3,)]
    np.testing.assert_array_equal(one.low, two.low)
    np.testing.assert_array_equal(one.size, two.size)
    for columns, tree in one.trees.items():
        assert len(tree.levels) == len(two.trees[columns].levels)
        for mine, theirs in zip(tree.levels, two.trees[columns].levels, strict=True):
            for field in ("key", "rep_row", "singular_dims", "lcf_low", "branch", "noisy_count"):
                np.testing.assert_array_equal(getattr(mine, field), getattr(theirs, field))
    np.testing.assert_array_equal(one.value_matrix(), two.value_matrix())


def test_a_single_cluster_on_two_threads_gives_the_single_worker_output(monkeypatch):
    # One cluster: no worker process, its trees are built on the calling process's threads.
    monkeypatch.setattr(synthesizer, "THREADED_TREES_MIN_ROWS", 0)
    table, _ = generated_table(3000, 5)
    single = ClusteringParams(enabled=False)
    one = synthesize(table, salt="threads", workers=1, clustering=single)
    two = synthesize(table, salt="threads", workers=2, clustering=single)
    pd.testing.assert_frame_equal(one, two)


def test_a_small_table_builds_its_trees_on_one_thread(monkeypatch):
    # Below THREADED_TREES_MIN_ROWS a second thread would only add CPU time.
    asked = []
    prepare = Harvester.prepare_refinement

    def recording(self, columns, threads=1, **options):
        asked.append(threads() if callable(threads) else threads)
        return prepare(self, columns, threads, **options)

    monkeypatch.setattr(Harvester, "prepare_refinement", recording)
    table, _ = generated_table(3000, 5)
    synthesize(table, salt="threads", workers=2, clustering=ClusteringParams(enabled=False))
    monkeypatch.setattr(synthesizer, "THREADED_TREES_MIN_ROWS", 3000)
    synthesize(table, salt="threads", workers=2, clustering=ClusteringParams(enabled=False))
    assert asked == [1, 2]


def test_the_one_dim_trees_of_a_large_table_are_built_on_threads(monkeypatch):
    # Below THREADED_FOREST_MIN_ROWS the forest stage is short and its peak close to the synthesis's.
    asked = []
    build = Forest.__init__

    def recording(self, *args, threads=1, **options):
        asked.append(threads() if callable(threads) else threads)
        build(self, *args, threads=threads, **options)

    monkeypatch.setattr(Forest, "__init__", recording)
    table, _ = generated_table(3000, 5)
    single = ClusteringParams(enabled=False)
    small = synthesize(table, salt="threads", workers=2, clustering=single)
    monkeypatch.setattr(synthesizer, "THREADED_FOREST_MIN_ROWS", 3000)
    large = synthesize(table, salt="threads", workers=2, clustering=single)
    # Each synthesis builds two forests: the columns' own, and the cluster's on their scales.
    assert asked == [1, 1, 2, 2]
    pd.testing.assert_frame_equal(small, large)


def test_the_stitches_of_a_large_table_calibrate_on_threads(monkeypatch):
    # Below THREADED_STITCH_MIN_ROWS the threads' sort keys would raise the peak for little gain. The
    # clusters are materialized in this process here, so every stitch may use both threads.
    asked = []
    stitch = stitching.stitch

    def recording(*args, threads=1, **options):
        asked.append(threads() if callable(threads) else threads)
        return stitch(*args, threads=threads, **options)

    monkeypatch.setattr(stitching, "stitch", recording)
    table, _ = generated_table(3000, 10)
    small = synthesize(table, salt="threads", workers=2)
    stitches = len(asked)
    monkeypatch.setattr(synthesizer, "THREADED_STITCH_MIN_ROWS", 3000)
    monkeypatch.setattr(synthesizer, "THREADED_TREES_MIN_ROWS", 3000)
    large = synthesize(table, salt="threads", workers=2)
    assert stitches >= 2
    assert asked == [1] * stitches + [2] * stitches
    pd.testing.assert_frame_equal(small, large)
