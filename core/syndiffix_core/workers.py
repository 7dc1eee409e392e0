"""Clusters of one table materialized side by side in forked worker processes.

A cluster's microdata depends only on the forest (trees are built from the data, every draw is seeded
by the salt and the cluster's column names), not on which clusters were materialized before, so the
clusters can be materialized at once and the output is the same as with one worker. Each cluster runs
in a process forked from the synthesizing one after the forest and the plan are built (the data and
the 1-dim trees are shared copy-on-write, a child's own trees die with it). Processes, not threads: a
cluster spends much of its time in Python-level bookkeeping between numpy calls, which threads would
serialize on the GIL.

Every worker is forked before any starts and waits on a pipe of its own for its turn, so each starts
from the parent's pages as they were before stitching began. Turns go in plan order, at most `workers`
at a time. A worker that is done writes its microdata to a file of a temporary directory, hands the
next turn on itself and exits: the parent, which stitches clusters in plan order as it needs them, is
often busy stitching when a worker finishes, and neither the next worker's start nor the finished
worker's memory waits for it. The parent reads a cluster's file when it stitches that cluster.

Every process is forked, waited for and reaped by the calling thread itself: no helper thread forks or
signals behind its back (a pool's replacement forks racing its terminate() hung tasks in Airflow
workers), and a child holds nothing the parent waits on, so stopping the others after a failure is a
plain kill. A worker that dies without handing its turn on (killed, out of memory) has it handed on by
the parent when it sees the death, so the clusters after it still run.

Without the "fork" start method (Windows, macOS defaults) or inside a daemonic process (which may not
have children, e.g. a Celery prefork worker) the clusters are materialized one after another.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Sequence
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from .memory import return_freed_memory

_FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None
# How long a process waits for the lock on the turn counter before giving up on it (a process killed
# while holding it would otherwise hang the others).
_TURN_LOCK_TIMEOUT_S = 30.0


def available_workers() -> int:
    """The number of CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def can_fork() -> bool:
    return _FORK is not None and not multiprocessing.current_process().daemon


class WorkerDied(RuntimeError):
    """A worker process ended without passing its cluster on (killed, out of memory)."""


class _Turns:
    """Who runs next: one pipe per cluster on which its worker waits, a shared counter of the next
    cluster to start, and per cluster whether its turn has been handed on. Shared by the parent and
    every worker (all are forked after it is made)."""

    def __init__(self, count: int):
        pipes = [_FORK.Pipe(duplex=False) for _ in range(count)]
        self.receivers = [receiver for receiver, _ in pipes]
        self.senders = [sender for _, sender in pipes]
        self.next = _FORK.Value("q", 0)
        self.handed_on = _FORK.RawArray("b", count)

    def start(self, index: int) -> None:
        with contextlib.suppress(OSError):  # a worker gone already is reported when collected
            self.senders[index].send(True)

    def start_first(self, count: int) -> None:
        self.next.value = count
        for index in range(count):
            self.start(index)

    def hand_on(self, finished: int) -> bool:
        """Start the next waiting cluster in place of `finished`, once per finished cluster; False if the
        counter's lock could not be had."""
        lock = self.next.get_lock()
        if not lock.acquire(timeout=_TURN_LOCK_TIMEOUT_S):
            return False
        try:
            if self.handed_on[finished]:
                return True
            self.handed_on[finished] = 1
            index = self.next.value
            self.next.value = index + 1
        finally:
            lock.release()
        if index < len(self.senders):
            self.start(index)
        return True

    def wait_for_turn(self, index: int, parent: int) -> bool:
        """Whether this cluster's turn came (False: the parent is gone). Every process holds this pipe's
        sending end, so the parent's end closing is not seen: the parent's pid is watched instead."""
        while not self.receivers[index].poll(1.0):
            if os.getppid() != parent:
                return False
        return True


def _materialize_in_child(
    materialize: Callable[[tuple[int, ...]], Any],
    columns: tuple[int, ...],
    index: int,
    turns: _Turns,
    result: Path,
    parent: int,
) -> None:
    if not turns.wait_for_turn(index, parent):
        return
    try:
        try:
            outcome = (True, materialize(columns))
        except BaseException as error:  # the parent re-raises it; nothing may escape a forked child
            outcome = (False, error)
        try:
            _write(result, outcome)
        except Exception as error:  # an unpicklable exception, a full disk: pass on what went wrong
            del outcome
            _write(result, (False, RuntimeError(f"cluster {columns} could not be passed on: {error}")))
    finally:
        turns.hand_on(index)


def _write(path: Path, outcome: tuple[bool, Any]) -> None:
    # Written under another name and renamed: the parent never reads a half-written file.
    partial = path.with_suffix(".partial")
    with partial.open("wb") as file:
        pickle.dump(outcome, file, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(path)


class ParallelMaterializer:
    """Materializes the clusters in plan order, at most `workers` at a time; calling it with a cluster
    waits for that cluster's microdata (re-raising its error).

    Every cluster's worker is forked at once, from this process as it is now (its freed heap pages
    returned first), and waits for its turn: a worker's resident set starts from that, not from what
    this process holds later while it stitches. `all_started` then runs once, in this process (what
    only the workers read can be dropped). Finished clusters wait in files of a temporary directory
    (under TMPDIR) until they are asked for; `close` removes it."""

    def __init__(
        self,
        clusters: Sequence[tuple[int, ...]],
        materialize: Callable[[tuple[int, ...]], Any],
        workers: int,
        all_started: Callable[[], None] | None = None,
    ):
        assert _FORK is not None
        self._clusters = [tuple(columns) for columns in clusters]
        self._directory = Path(tempfile.mkdtemp(prefix="syndiffix-clusters-"))
        self._turns = _Turns(len(self._clusters))
        self._processes: dict[int, multiprocessing.process.BaseProcess] = {}  # not reaped yet
        self._exit_codes: dict[int, int] = {}  # reaped, their files not read yet
        return_freed_memory()  # a forked worker starts with every page this process holds
        for index, columns in enumerate(self._clusters):
            process = _FORK.Process(
                target=_materialize_in_child,
                args=(materialize, columns, index, self._turns, self._result(index), os.getpid()),
                daemon=True,
            )
            process.start()
            self._processes[index] = process
        for receiver in self._turns.receivers:
            receiver.close()  # the workers' ends
        if all_started is not None:
            all_started()
        self._workers = max(1, min(workers, len(self._clusters)))
        self._turns.start_first(self._workers)

    def __call__(self, columns: tuple[int, ...]) -> Any:
        columns = tuple(columns)
        if columns not in self._clusters:
            raise KeyError(f"cluster {columns} is not one of this materializer's")
        index = self._clusters.index(columns)
        while index not in self._exit_codes:
            if index not in self._processes:
                raise KeyError(f"cluster {columns} was collected already")
            sentinels = {process.sentinel: i for i, process in self._processes.items()}
            for sentinel in wait(list(sentinels)):
                self._reap(sentinels[sentinel])
        succeeded, payload = self._read(index, self._exit_codes.pop(index))
        if not succeeded:
            raise payload
        return payload

    def idle_cores(self) -> int:
        """How many threads the calling process may use now: the workers' cores that no cluster runs on
        or waits for any longer (at least one)."""
        sentinels = {process.sentinel: i for i, process in self._processes.items()}
        for sentinel in wait(list(sentinels), timeout=0):
            self._reap(sentinels[sentinel])
        return max(1, self._workers - len(self._processes))

    def close(self) -> None:
        """Stops what still runs or waits (after a failure elsewhere), reaps every process and removes
        the files of clusters not asked for."""
        for process in self._processes.values():
            process.kill()
            process.join()
        for sender in self._turns.senders:
            sender.close()
        self._processes.clear()
        self._exit_codes.clear()
        shutil.rmtree(self._directory, ignore_errors=True)

    def _result(self, index: int) -> Path:
        return self._directory / f"cluster-{index}.pickle"

    def _reap(self, index: int) -> None:
        process = self._processes.pop(index)
        process.join()
        self._exit_codes[index] = process.exitcode
        if process.exitcode != 0 and not self._turns.hand_on(index):
            raise WorkerDied(f"the worker for cluster {self._clusters[index]} died holding the turn lock")

    def _read(self, index: int, exit_code: int) -> tuple[bool, Any]:
        path = self._result(index)
        if exit_code != 0 or not path.exists():
            columns = self._clusters[index]
            return False, WorkerDied(f"the worker for cluster {columns} died (exit code {exit_code})")
        with path.open("rb") as file:
            outcome = pickle.load(file)
        path.unlink()
        return outcome
