"""Clusters of one table materialized side by side in forked worker processes.

A cluster's microdata depends only on the forest (trees are built from the data, every draw is seeded
by the salt and the cluster's column names), not on which clusters were materialized before, so the
clusters can be materialized at once and the output is the same as with one worker. Each cluster runs
in a process forked from the synthesizing one after the forest and the plan are built (the data and
the 1-dim trees are shared copy-on-write, a child's own trees die with it). Processes, not threads: a
cluster spends much of its time in Python-level bookkeeping between numpy calls, which threads would
serialize on the GIL.

Every worker is forked before any starts and waits on a pipe of its own for its turn, so each starts
from the parent's pages as they were before stitching began. Turns go in a start order the caller
chooses (plan order by default), at most `workers` at a time. A worker that is done writes its
microdata to a file of a temporary directory, hands the next turn on itself and exits: the parent,
which stitches clusters in plan order as it needs them, is often busy stitching when a worker
finishes, and neither the next worker's start nor the finished worker's memory waits for it. The
parent reads a cluster's file when it stitches that cluster.

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
    """Who runs: `workers` slots, held by the workers that run and by the calling process while it
    reads and stitches clusters. One pipe per cluster on which its worker waits for a slot, one on
    which the calling process does; under one lock, the next cluster to start, the free slots, which
    cluster the calling process waits for, and per cluster whether it is done (its slot handed on).
    Shared by the parent and every worker (all are forked after it is made)."""

    NOBODY, ANY = -1, -2  # `wanted` when the calling process waits for no slot / for any slot

    def __init__(self, count: int, start_order: Sequence[int]):
        self.start_order = list(start_order)  # cluster indices in the order their turns come
        pipes = [_FORK.Pipe(duplex=False) for _ in range(count)]
        self.receivers = [receiver for receiver, _ in pipes]
        self.senders = [sender for _, sender in pipes]
        self.caller_receiver, self.caller_sender = _FORK.Pipe(duplex=False)
        self.lock = _FORK.Lock()
        self.next = _FORK.RawValue("q", 0)
        self.free = _FORK.RawValue("q", 0)
        self.wanted = _FORK.RawValue("q", self.NOBODY)
        self.done = _FORK.RawArray("b", count)

    def begin(self, slots: int) -> None:
        """The first `slots` clusters start."""
        with self.lock:
            self.next.value = slots
        for position in range(slots):
            self._send(self.senders[self.start_order[position]])

    def finished(self, index: int) -> bool:
        """Hand on the slot of a finished (or dead) cluster, once; False if the lock could not be had (a
        process killed while holding it)."""
        if not self.lock.acquire(timeout=_TURN_LOCK_TIMEOUT_S):
            return False
        try:
            if not self.done[index]:
                self.done[index] = 1
                self._hand_on()
        finally:
            self.lock.release()
        return True

    def release(self) -> None:
        """The calling process gives its slot back."""
        with self.lock:
            self._hand_on()

    def ask(self, index: int) -> bool:
        """The calling process asks for a slot to read cluster `index` with: True if it has one now,
        else it is sent one on `caller_receiver` once that cluster is done and a slot is free."""
        with self.lock:
            if self.done[index] and self.free.value > 0:
                self.free.value -= 1
                return True
            self.wanted.value = self.ANY if self.done[index] else index
            return False

    def spare(self) -> int:
        """Slots nobody holds (no cluster is left to start)."""
        return self.free.value

    def wait_for_slot(self, index: int, parent: int) -> bool:
        """Whether this cluster's slot came (False: the parent is gone). Every process holds this pipe's
        sending end, so the parent's end closing is not seen: the parent's pid is watched instead."""
        while not self.receivers[index].poll(1.0):
            if os.getppid() != parent:
                return False
        return True

    def _hand_on(self) -> None:
        # Under the lock: the slot goes to the calling process if it waits for it, else to the next
        # cluster, else it stays free.
        wanted = self.wanted.value
        if wanted == self.ANY or (wanted >= 0 and self.done[wanted]):
            self.wanted.value = self.NOBODY
            self._send(self.caller_sender)
        elif self.next.value < len(self.senders):
            self._send(self.senders[self.start_order[self.next.value]])
            self.next.value += 1
        else:
            self.free.value += 1

    @staticmethod
    def _send(sender) -> None:
        with contextlib.suppress(OSError):  # a worker gone already is reported when collected
            sender.send(True)


def _materialize_in_child(
    materialize: Callable[[tuple[int, ...]], Any],
    columns: tuple[int, ...],
    index: int,
    turns: _Turns,
    result: Path,
    parent: int,
) -> None:
    if not turns.wait_for_slot(index, parent):
        return
    try:
        try:
            outcome = (True, materialize(columns))
        except BaseException as error:  # the parent re-raises it; nothing may escape a forked child
            outcome = (False, error)
        if os.getppid() != parent:
            return  # nobody would read it
        try:
            _write(result, outcome)
        except Exception as error:  # an unpicklable exception, a full disk: pass on what went wrong
            del outcome
            _write(result, (False, RuntimeError(f"cluster {columns} could not be passed on: {error}")))
    finally:
        turns.finished(index)
        if os.getppid() != parent:  # the calling process was killed: nobody reads or removes the file
            with contextlib.suppress(OSError):
                result.unlink()
            with contextlib.suppress(OSError):
                result.parent.rmdir()  # once the last file is gone


def _write(path: Path, outcome: tuple[bool, Any]) -> None:
    # Written under another name and renamed: the parent never reads a half-written file.
    partial = path.with_suffix(".partial")
    with partial.open("wb") as file:
        pickle.dump(outcome, file, protocol=pickle.HIGHEST_PROTOCOL)
    partial.replace(path)


class ParallelMaterializer:
    """Materializes the clusters on at most `workers` cores, starting them in `start_order` (indices
    into `clusters`; default: their order); calling it with a cluster waits for that cluster's
    microdata (re-raising its error).

    Every cluster's worker is forked at once, from this process as it is now (its freed heap pages
    returned first), and waits for its turn: a worker's resident set starts from that, not from what
    this process holds later while it stitches. `all_started` then runs once, in this process (what
    only the workers read can be dropped). Finished clusters wait in files of a temporary directory
    (under TMPDIR) until they are asked for; `close` removes it.

    From the call that returns a cluster until the next call, this process holds one of the `workers`
    slots (it stitches then), so that a stitch never runs next to `workers` materializing clusters: the
    cores stay busy all the same, and memory holds at most `workers` large working sets. While it waits
    for a cluster that is not done, the slot is a worker's."""

    def __init__(
        self,
        clusters: Sequence[tuple[int, ...]],
        materialize: Callable[[tuple[int, ...]], Any],
        workers: int,
        all_started: Callable[[], None] | None = None,
        start_order: Sequence[int] | None = None,
    ):
        assert _FORK is not None
        self._clusters = [tuple(columns) for columns in clusters]
        order = range(len(self._clusters)) if start_order is None else start_order
        if sorted(order) != list(range(len(self._clusters))):
            raise ValueError(
                f"start_order {list(order)} is not an order of the {len(self._clusters)} clusters"
            )
        self._directory = Path(tempfile.mkdtemp(prefix="syndiffix-clusters-"))
        self._turns = _Turns(len(self._clusters), order)
        self._processes: dict[int, multiprocessing.process.BaseProcess] = {}  # not reaped yet
        self._exit_codes: dict[int, int] = {}
        self._read_already: set[int] = set()
        self._holding = False  # whether this process holds a slot
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
        self._turns.begin(self._workers)

    def __call__(self, columns: tuple[int, ...]) -> Any:
        columns = tuple(columns)
        if columns not in self._clusters:
            raise KeyError(f"cluster {columns} is not one of this materializer's")
        index = self._clusters.index(columns)
        if index in self._read_already:
            raise KeyError(f"cluster {columns} was collected already")
        if self._holding and not self._turns.done[index]:
            self._turns.release()  # a worker runs while this process waits
            self._holding = False
        if not self._holding:
            self._wait_for_slot(index)
        self._read_already.add(index)
        succeeded, payload = self._read(index)
        if not succeeded:
            raise payload
        return payload

    def idle_cores(self) -> int:
        """How many threads this process may use now: its own slot's and the slots nobody holds."""
        return 1 + self._turns.spare()

    def close(self) -> None:
        """Stops what still runs or waits (after a failure elsewhere), reaps every process and removes
        the files of clusters not asked for."""
        for process in self._processes.values():
            process.kill()
            process.join()
        for end in [*self._turns.senders, self._turns.caller_sender, self._turns.caller_receiver]:
            end.close()
        self._processes.clear()
        shutil.rmtree(self._directory, ignore_errors=True)

    def _wait_for_slot(self, index: int) -> None:
        """Until cluster `index` is done and this process holds a slot (reaping the workers that end
        meanwhile: a dead one's slot is handed on here)."""
        if not self._turns.ask(index):
            receiver = self._turns.caller_receiver
            while not receiver.poll():
                sentinels = {process.sentinel: i for i, process in self._processes.items()}
                for ready in wait([receiver, *sentinels]):
                    if ready is not receiver:
                        self._reap(sentinels[ready])
            receiver.recv()
        self._holding = True

    def _result(self, index: int) -> Path:
        return self._directory / f"cluster-{index}.pickle"

    def _reap(self, index: int) -> None:
        process = self._processes.pop(index)
        process.join()
        self._exit_codes[index] = process.exitcode
        if process.exitcode != 0 and not self._turns.finished(index):
            raise WorkerDied(f"the worker for cluster {self._clusters[index]} died holding the turn lock")

    def _read(self, index: int) -> tuple[bool, Any]:
        path = self._result(index)
        if not path.exists():
            if index in self._processes:
                self._reap(index)
            columns, code = self._clusters[index], self._exit_codes[index]
            return False, WorkerDied(f"the worker for cluster {columns} died (exit code {code})")
        with path.open("rb") as file:
            outcome = pickle.load(file)
        path.unlink()
        return outcome
