"""Clusters of one table materialized side by side in forked worker processes.

A cluster's microdata depends only on the forest (trees are built from the data, every draw is seeded
by the salt and the cluster's column names), not on which clusters were materialized before, so the
clusters can be materialized at once and the output is the same as with one worker. Each cluster runs
in a process forked from the synthesizing one after the forest and the plan are built (the data and
the 1-dim trees are shared copy-on-write, a child's own trees die with it), and its microdata comes
back pickled through a pipe of its own. The parent stitches clusters in plan order as they arrive, so
stitching overlaps with the materialization of later clusters. Processes, not threads: a cluster spends
much of its time in Python-level bookkeeping between numpy calls, which threads would serialize on the
GIL.

Every process is forked, waited for and reaped by the calling thread itself: no helper thread forks or
signals behind its back (a pool's replacement forks racing its terminate() hung tasks in Airflow
workers), and a child holds nothing the parent waits on but its own pipe, so stopping the others after
a failure is a plain kill.

Without the "fork" start method (Windows, macOS defaults) or inside a daemonic process (which may not
have children, e.g. a Celery prefork worker) the clusters are materialized one after another.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

_FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def available_workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    return _FORK is not None and not multiprocessing.current_process().daemon


class WorkerDied(RuntimeError):
    """A worker process ended without sending its cluster back (killed, out of memory)."""


def _materialize_in_child(materialize: Callable[[tuple[int, ...]], Any], columns, sender: Connection) -> None:
    try:
        outcome = (True, materialize(columns))
    except BaseException as error:  # the parent re-raises it; nothing may escape a forked child
        outcome = (False, error)
    try:
        sender.send(outcome)
    except Exception as error:  # an unpicklable exception: send its text
        sender.send((False, RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]} ({error})")))


class ParallelMaterializer:
    """Materializes the clusters in plan order, at most `workers` at a time; calling it with a cluster
    waits for that cluster's microdata (re-raising its error)."""

    def __init__(
        self, clusters: Sequence[tuple[int, ...]], materialize: Callable[[tuple[int, ...]], Any], workers: int
    ):
        assert _FORK is not None
        self._materialize = materialize
        self._workers = max(1, min(workers, len(clusters)))
        self._waiting = [tuple(columns) for columns in clusters]
        self._running: dict[Connection, tuple[multiprocessing.process.BaseProcess, tuple[int, ...]]] = {}
        self._finished: dict[tuple[int, ...], tuple[bool, Any]] = {}
        self._start_more()

    def __call__(self, columns: tuple[int, ...]) -> Any:
        columns = tuple(columns)
        while columns not in self._finished:
            if not self._running:
                raise KeyError(f"cluster {columns} is not one of this materializer's")
            for receiver in wait(list(self._running)):
                self._collect(receiver)
            self._start_more()
        succeeded, payload = self._finished.pop(columns)
        if not succeeded:
            raise payload
        return payload

    def close(self) -> None:
        """Stops what still runs (after a failure elsewhere) and reaps every process."""
        for receiver, (process, _) in self._running.items():
            process.kill()
            process.join()
            receiver.close()
        self._running.clear()
        self._waiting.clear()
        self._finished.clear()

    def _start_more(self) -> None:
        while self._waiting and len(self._running) < self._workers:
            columns = self._waiting.pop(0)
            receiver, sender = _FORK.Pipe(duplex=False)
            process = _FORK.Process(
                target=_materialize_in_child, args=(self._materialize, columns, sender), daemon=True
            )
            process.start()
            sender.close()
            self._running[receiver] = (process, columns)

    def _collect(self, receiver: Connection) -> None:
        process, columns = self._running.pop(receiver)
        try:
            outcome = receiver.recv()
        except EOFError:
            process.join()
            outcome = (
                False,
                WorkerDied(f"the worker for cluster {columns} died (exit code {process.exitcode})"),
            )
        receiver.close()
        process.join()
        self._finished[columns] = outcome
