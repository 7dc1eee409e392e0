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
a failure is a plain kill. Every worker is forked before any starts (each then waits for its turn on a
pipe of its own), so each starts from the parent's pages as they were before stitching began.

Without the "fork" start method (Windows, macOS defaults) or inside a daemonic process (which may not
have children, e.g. a Celery prefork worker) the clusters are materialized one after another.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from .memory import return_freed_memory

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


def _materialize_in_child(
    materialize: Callable[[tuple[int, ...]], Any], columns, go: Connection, sender: Connection, parent: int
) -> None:
    # Waits for this cluster's turn. Workers forked later hold copies of this pipe's sending end, so
    # the parent's end of it closing is not seen: a worker whose parent is gone stops by itself.
    while not go.poll(1.0):
        if os.getppid() != parent:
            return
    try:
        go.recv()
    except EOFError:
        return
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
    waits for that cluster's microdata (re-raising its error).

    Every cluster's worker is forked at once, from this process as it is now (its freed heap pages
    returned first), and waits for its turn: a worker's resident set starts from that, not from what
    this process holds later while it stitches. `all_started` then runs once, in this process (what
    only the workers read can be dropped)."""

    def __init__(
        self,
        clusters: Sequence[tuple[int, ...]],
        materialize: Callable[[tuple[int, ...]], Any],
        workers: int,
        all_started: Callable[[], None] | None = None,
    ):
        assert _FORK is not None
        self._workers = max(1, min(workers, len(clusters)))
        self._processes: dict[Connection, tuple[multiprocessing.process.BaseProcess, tuple[int, ...]]] = {}
        self._waiting: list[tuple[Connection, Connection]] = []  # (result receiver, turn sender), plan order
        self._running: list[Connection] = []
        self._finished: dict[tuple[int, ...], tuple[bool, Any]] = {}
        return_freed_memory()  # a forked worker starts with every page this process holds
        for columns in map(tuple, clusters):
            receiver, sender = _FORK.Pipe(duplex=False)
            go_receiver, go_sender = _FORK.Pipe(duplex=False)
            process = _FORK.Process(
                target=_materialize_in_child,
                args=(materialize, columns, go_receiver, sender, os.getpid()),
                daemon=True,
            )
            process.start()
            sender.close()
            go_receiver.close()
            self._processes[receiver] = (process, columns)
            self._waiting.append((receiver, go_sender))
        if all_started is not None:
            all_started()
        self._start_more()

    def __call__(self, columns: tuple[int, ...]) -> Any:
        columns = tuple(columns)
        while columns not in self._finished:
            if not self._running:
                raise KeyError(f"cluster {columns} is not one of this materializer's")
            for receiver in wait(self._running):
                self._collect(receiver)
            self._start_more()
        succeeded, payload = self._finished.pop(columns)
        if not succeeded:
            raise payload
        return payload

    def close(self) -> None:
        """Stops what still runs or waits (after a failure elsewhere) and reaps every process."""
        for receiver, (process, _) in self._processes.items():
            process.kill()
            process.join()
            receiver.close()
        for _, go_sender in self._waiting:
            go_sender.close()
        self._processes.clear()
        self._waiting.clear()
        self._running.clear()
        self._finished.clear()

    def _start_more(self) -> None:
        while self._waiting and len(self._running) < self._workers:
            receiver, go_sender = self._waiting.pop(0)
            with contextlib.suppress(OSError):  # a worker gone already is reported when collected
                go_sender.send(True)
            go_sender.close()
            self._running.append(receiver)

    def _collect(self, receiver: Connection) -> None:
        process, columns = self._processes.pop(receiver)
        self._running.remove(receiver)
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
