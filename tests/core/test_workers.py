"""Clusters materialized in worker processes give the same output as in one process."""

import logging
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from syndiffix_core import synthesize, synthesizer
from syndiffix_core.errors import InvalidInputError
from syndiffix_core.workers import ParallelMaterializer, WorkerDied, can_fork

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "compare_reference"))
from compare import generated_table

PARALLEL_CLUSTERS_MIN_ROWS = synthesizer.PARALLEL_CLUSTERS_MIN_ROWS


@pytest.fixture(autouse=True)
def small_tables_use_workers(monkeypatch):
    # These tests run the worker path on tables small enough to be quick; the size rule has its own test.
    monkeypatch.setattr(synthesizer, "PARALLEL_CLUSTERS_MIN_ROWS", 0)


def test_a_table_below_the_size_rule_materializes_its_clusters_in_the_calling_process(monkeypatch):
    monkeypatch.setattr(synthesizer, "PARALLEL_CLUSTERS_MIN_ROWS", PARALLEL_CLUSTERS_MIN_ROWS)
    table, _ = generated_table(4000, 10)
    logged: list[str] = []
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    synthesize(table, salt="workers", workers=2, progress=lambda stage, _: logged.append(stage))
    children_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert len(table) < PARALLEL_CLUSTERS_MIN_ROWS
    assert sum("stitched" in stage for stage in logged) >= 2  # several clusters, all in this process
    assert (children_after.ru_utime, children_after.ru_stime) == (
        children_before.ru_utime,
        children_before.ru_stime,
    )


def test_two_workers_give_the_single_worker_output():
    assert can_fork()
    table, _ = generated_table(4000, 10)
    logged: list[str] = []
    one = synthesize(table, salt="workers", workers=1)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    two = synthesize(table, salt="workers", workers=2, progress=lambda stage, _: logged.append(stage))
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime > children_before  # worker processes ran
    pd.testing.assert_frame_equal(one, two)
    assert sum("stitched" in stage for stage in logged) >= 2  # several clusters were materialized


def test_as_many_workers_as_clusters_start_at_once_and_give_the_same_output():
    # Every cluster's worker is forked before the first stitch: the calling process drops its forest then.
    table, _ = generated_table(3000, 8)
    pd.testing.assert_frame_equal(
        synthesize(table, salt="workers", workers=1), synthesize(table, salt="workers", workers=64)
    )


@pytest.mark.parametrize("workers", [1, 2])
def test_reusing_freed_memory_gives_the_same_output(monkeypatch, workers):
    # Large tables keep freed heap space for reuse while their clusters are materialized and stitched
    # (in the workers and in the calling process): it changes where arrays live, never what they hold.
    table, _ = generated_table(3000, 8)
    plain = synthesize(table, salt="workers", workers=workers)
    monkeypatch.setattr(synthesizer, "REUSE_MEMORY_MIN_ROWS", 0)
    pd.testing.assert_frame_equal(synthesize(table, salt="workers", workers=workers), plain)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_a_bad_worker_count_is_refused(workers):
    with pytest.raises(InvalidInputError, match="workers must be a positive integer"):
        synthesize(pd.DataFrame({"a": [1, 2, 3]}), salt="s", workers=workers)


def _square_or_fail(columns):
    if columns == (2,):
        raise ValueError("cluster 2 cannot be materialized")
    if columns == (3,):
        os.kill(os.getpid(), signal.SIGKILL)
    return sum(c * c for c in columns)


_OTHERS_CHILDREN: set[int] = set()


@pytest.fixture(autouse=True)
def children_of_other_tests():
    # Children this process had before the test are not the materializer's (Airflow's OpenLineage
    # listener, run by earlier tests in this process, keeps a process pool alive).
    _OTHERS_CHILDREN.update(child.pid for child in multiprocessing.active_children())
    yield
    _OTHERS_CHILDREN.clear()


def _live_children() -> list[multiprocessing.process.BaseProcess]:
    return [
        child
        for child in multiprocessing.active_children()
        if child.is_alive() and child.pid not in _OTHERS_CHILDREN
    ]


def test_the_materializer_returns_each_cluster_and_reaps_its_processes():
    clusters = [(0, 1), (1, 4), (5,)]
    parallel = ParallelMaterializer(clusters, _square_or_fail, workers=2)
    try:
        assert [parallel(columns) for columns in clusters] == [1, 17, 25]
    finally:
        parallel.close()
    assert _live_children() == []


def test_every_worker_is_forked_up_front_and_waits_for_its_turn():
    started: list[int] = []
    clusters = [(0, 1), (1, 4), (5,), (6,)]
    parallel = ParallelMaterializer(
        clusters, _square_or_fail, workers=1, all_started=lambda: started.append(len(_live_children()))
    )
    try:
        # One worker may run: the other three are forked and alive, waiting for their turn.
        assert started == [len(clusters)]
        assert len(_live_children()) >= len(clusters) - 1
        assert [parallel(columns) for columns in clusters] == [1, 17, 25, 36]
        assert started == [len(clusters)]
    finally:
        parallel.close()
    assert _live_children() == []


def test_a_failing_cluster_raises_its_error_and_leaves_no_process_behind():
    parallel = ParallelMaterializer([(0,), (2,), (4,), (6,)], _square_or_fail, workers=2)
    try:
        assert parallel((0,)) == 0
        with pytest.raises(ValueError, match="cluster 2 cannot be materialized"):
            parallel((2,))
    finally:
        parallel.close()
    assert _live_children() == []


def test_a_worker_that_dies_is_reported_instead_of_waited_for():
    parallel = ParallelMaterializer([(3,), (1,)], _square_or_fail, workers=2)
    try:
        with pytest.raises(WorkerDied, match=r"cluster \(3,\) died \(exit code -9\)"):
            parallel((3,))
        assert parallel((1,)) == 1
    finally:
        parallel.close()
    assert _live_children() == []


def test_each_cluster_of_a_worker_is_logged_with_its_own_cpu_seconds(caplog):
    # The calling process logs the wall and CPU seconds each worker spent on its cluster (for the
    # critical path: bench/bench_wide.py prints them), alongside its own stages.
    table, _ = generated_table(3000, 8)
    with caplog.at_level(logging.DEBUG, logger="syndiffix_core.synthesizer"):
        synthesize(table, salt="workers", workers=2)
    stages = [record for record in caplog.records if hasattr(record, "stage")]
    in_workers = [record for record in stages if record.stage.endswith("in a worker")]
    stitched = [record for record in stages if record.stage.endswith("stitched")]
    assert len(in_workers) == len(stitched) + 1 >= 3
    assert all(0 < record.cpu_s <= record.wall_s + 0.05 for record in in_workers)  # one thread each
    assert {record.stage for record in stages} >= {"encode", "forest", "clustering", "assemble"}


_TURNS_LOG: list[Path] = []


def _square_logging_its_turn(columns):
    with _TURNS_LOG[0].open("a") as log:
        log.write(f"start {columns[0]}\n")
    with _TURNS_LOG[0].open("a") as log:
        log.write(f"end {columns[0]}\n")
    return columns[0] ** 2


def test_a_finished_worker_hands_its_turn_on_without_the_caller_asking(tmp_path, monkeypatch):
    # The caller is busy stitching while workers finish: the next cluster starts anyway, and the
    # finished ones wait in files until they are asked for.
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _TURNS_LOG[:] = [tmp_path / "turns.log"]
    clusters = [(1,), (2,), (3,)]
    parallel = ParallelMaterializer(clusters, _square_logging_its_turn, workers=1)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and sum(line.startswith("end") for line in _turns_logged()) < len(
            clusters
        ):
            time.sleep(0.02)
        # One worker at a time, in plan order, all of them done before any cluster was asked for.
        assert _turns_logged() == ["start 1", "end 1", "start 2", "end 2", "start 3", "end 3"]
        assert [parallel(columns) for columns in clusters] == [1, 4, 9]
    finally:
        parallel.close()
    assert _live_children() == []
    assert [path.name for path in tmp_path.iterdir()] == ["turns.log"]  # no cluster file is left


def _turns_logged() -> list[str]:
    path = _TURNS_LOG[0]
    return path.read_text().split("\n")[:-1] if path.exists() else []


def test_clusters_start_in_the_given_order_and_are_returned_as_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    _TURNS_LOG[:] = [tmp_path / "turns.log"]
    clusters = [(1,), (2,), (3,), (4,)]
    parallel = ParallelMaterializer(clusters, _square_logging_its_turn, workers=1, start_order=[2, 0, 3, 1])
    try:
        # asked for in plan order: cluster (1,) comes second, (2,) last, so the caller waits for each
        assert [parallel(columns) for columns in clusters] == [1, 4, 9, 16]
        assert _turns_logged() == [
            "start 3",
            "end 3",
            "start 1",
            "end 1",
            "start 4",
            "end 4",
            "start 2",
            "end 2",
        ]
    finally:
        parallel.close()
    assert _live_children() == []
    with pytest.raises(ValueError, match="not an order of the 2 clusters"):
        ParallelMaterializer([(1,), (2,)], _square_logging_its_turn, workers=1, start_order=[0, 0])


def test_the_largest_clusters_start_first():
    clusters = [(0, 1), (1, 2, 3, 4, 5), (3, 6), (3, 5, 7, 8), (8, 9, 10, 11)]
    assert synthesizer._largest_first(clusters) == [1, 3, 4, 0, 2]
    assert synthesizer._largest_first([(0,), (1,)]) == [0, 1]


def test_two_workers_starting_the_largest_cluster_first_give_the_single_worker_output(caplog):
    table, _ = generated_table(3000, 8)
    one = synthesize(table, salt="start order", workers=1)
    # An earlier test in this process may have left the plan's logger at INFO: only the second run counts.
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="syndiffix_core.clustering.plan"):
        two = synthesize(table, salt="start order", workers=2)
    pd.testing.assert_frame_equal(one, two)
    # the plan's clusters (e.g. "[a, b] + [b, c | d, e]") are not in largest-first order already
    [plan] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("clusters (")]
    clusters = [tuple(part.replace("|", ",").split(",")) for part in plan.split(": ", 1)[1].split(" + ")]
    assert synthesizer._largest_first(clusters) != sorted(range(len(clusters)))


def test_the_turn_of_a_worker_that_dies_goes_on_to_the_next_cluster():
    parallel = ParallelMaterializer([(3,), (1,), (4,)], _square_or_fail, workers=1)
    try:
        assert parallel((4,)) == 16  # its turn came after both before it ended
        with pytest.raises(WorkerDied, match=r"cluster \(3,\) died"):
            parallel((3,))
        assert parallel((1,)) == 1
    finally:
        parallel.close()
    assert _live_children() == []


def test_a_cluster_asked_for_twice_is_refused():
    parallel = ParallelMaterializer([(0, 1), (1, 4)], _square_or_fail, workers=2)
    try:
        assert parallel((1, 4)) == 17
        with pytest.raises(KeyError, match="collected already"):
            parallel((1, 4))
        with pytest.raises(KeyError, match="not one of"):
            parallel((7,))
    finally:
        parallel.close()


_RELEASES: list[Path] = []  # the directory in which cluster c's worker waits for a file release-c


def _square_once_released(columns):
    while not (_RELEASES[0] / f"release-{columns[0]}").exists():
        time.sleep(0.01)
    return columns[0] ** 2


def _release(*clusters: int) -> None:
    for cluster in clusters:
        (_RELEASES[0] / f"release-{cluster}").touch()


def test_stitches_get_the_cores_of_workers_that_are_done(tmp_path):
    _RELEASES[:] = [tmp_path]
    parallel = ParallelMaterializer([(1,), (2,), (3,)], _square_once_released, workers=2)
    try:
        assert parallel.idle_cores() == 1  # two workers run, the third waits for a turn
        _release(1, 2, 3)
        assert [parallel(columns) for columns in [(1,), (2,), (3,)]] == [1, 4, 9]
        assert parallel.idle_cores() == 2
    finally:
        parallel.close()


def test_the_caller_holds_a_slot_from_the_cluster_it_gets_until_it_asks_for_one_not_done(tmp_path):
    # While the caller stitches, it takes a slot: a stitch never runs next to `workers` clusters.
    _RELEASES[:] = [tmp_path]
    _release(3)
    parallel = ParallelMaterializer([(1,), (2,), (3,)], _square_once_released, workers=2)

    def release_cluster_1_once_the_caller_waits_for_it():
        while parallel._turns.wanted.value != 0:
            time.sleep(0.01)
        _release(1)

    releaser = threading.Thread(target=release_cluster_1_once_the_caller_waits_for_it)
    releaser.start()
    try:
        assert parallel((1,)) == 1
        # Cluster 1's slot went to the caller, not to cluster 3; cluster 2 still runs.
        assert parallel._turns.next.value == 2
        assert parallel.idle_cores() == 1
        _release(2)
        assert [parallel((2,)), parallel((3,))] == [4, 9]
        assert parallel.idle_cores() == 2
    finally:
        releaser.join(timeout=60)
        parallel.close()
    assert _live_children() == []


_KILLED_CALLER = """
import os, sys, time
from pathlib import Path
sys.path[:0] = {paths!r}
from syndiffix_core.workers import ParallelMaterializer

release = Path({release!r})

def square_once_released(columns):
    while not release.exists():
        time.sleep(0.01)
    return columns[0] ** 2

ParallelMaterializer([(1,), (2,)], square_once_released, workers=2)
os._exit(0)  # killed before it reads or removes anything
"""


def test_the_workers_of_a_killed_caller_leave_no_files_behind(tmp_path):
    release = tmp_path / "release"
    script = _KILLED_CALLER.format(paths=sys.path, release=str(release))
    environment = {**os.environ, "TMPDIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", script], env=environment, check=True, timeout=60)
    [directory] = [path for path in tmp_path.iterdir() if path.name.startswith("syndiffix-clusters-")]
    release.touch()  # the orphaned workers finish now
    deadline = time.monotonic() + 60
    while directory.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not directory.exists()
