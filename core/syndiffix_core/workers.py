"""Clusters of one table materialized side by side in forked worker processes.

A cluster's microdata depends only on the forest (trees are built from the data, every draw is seeded
by the salt and the cluster's column names), not on which clusters were materialized before, so the
clusters can be materialized at once and the output is the same as with one worker. Each cluster runs
in a process forked from the synthesizing one after the forest and the plan are built (the data and
the 1-dim trees are shared copy-on-write, a child's own trees die with it), and its microdata comes
back pickled. The parent stitches clusters in plan order as they arrive, so stitching overlaps with the
materialization of later clusters. Processes, not threads: a cluster spends much of its time in
Python-level bookkeeping between numpy calls, which threads would serialize on the GIL.

Without the "fork" start method (Windows, macOS defaults) or inside a daemonic process (which may not
have children, e.g. a Celery prefork worker) the clusters are materialized one after another.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from multiprocessing.pool import AsyncResult
from typing import Any

_task: Callable[[tuple[int, ...]], Any] | None = None  # set before forking; the children inherit it


def available_workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def _run(columns: tuple[int, ...]) -> Any:
    assert _task is not None
    return _task(columns)


class ParallelMaterializer:
    """Starts every cluster's materialization at once (at most `workers` at a time, in plan order);
    calling it with a cluster waits for that cluster's result."""

    def __init__(
        self, clusters: Sequence[tuple[int, ...]], materialize: Callable[[tuple[int, ...]], Any], workers: int
    ):
        global _task
        _task = materialize
        # One fresh fork per cluster: a child's trees and caches never outlive its cluster.
        self._pool = multiprocessing.get_context("fork").Pool(min(workers, len(clusters)), maxtasksperchild=1)
        self._pending: dict[tuple[int, ...], AsyncResult] = {
            tuple(columns): self._pool.apply_async(_run, (tuple(columns),)) for columns in clusters
        }

    def __call__(self, columns: tuple[int, ...]) -> Any:
        return self._pending.pop(tuple(columns)).get()

    def close(self) -> None:
        global _task
        if self._pending:  # a cluster failed: stop the others
            self._pool.terminate()
        else:
            # Workers leave through the pool's own sentinels. terminate() here would SIGTERM a worker that
            # may hold the task queue's lock while the pool's handler thread forks a replacement
            # (maxtasksperchild=1), which then waits for that lock forever and join() with it: seen as a
            # hung task in an Airflow worker.
            self._pool.close()
        self._pool.join()
        _task = None
