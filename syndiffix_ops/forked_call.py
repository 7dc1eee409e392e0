"""A call computed in a forked child process while the calling process goes on.

A run computes figures that only read a frame it holds (the source's risk sketches and quality half
while the engine synthesizes, an output's risk figures while its rows are staged). On a second thread
they gain little, for much of their time goes to Python between numpy calls, which the GIL
serializes; a process forked at that moment shares the frame copy-on-write and computes them on
another core. The child hands its result over in a file without a name, in memory (figures can hold
one bin code per source cell, which should not reach a disk), and exits with `os._exit`; its exit code
says whether the result is whole.

The child runs only code imported before the fork: in a process with other threads (an Airflow task)
an import in the child could wait forever on a module lock that one of them held at the fork. Callers
import what their function needs first (tests check it per caller).

Like the engine's workers, the child is forked, waited for and reaped by the calling thread. Without the
"fork" start method (the Windows and macOS defaults), or in a process that may have no children (a
daemonic one, such as a Celery prefork worker), the function is called in this process at once.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import tempfile
from collections.abc import Callable
from typing import Any, BinaryIO

from syndiffix_core.workers import can_fork

# (True, the value) or (False, the error)
_Result = tuple[bool, Any]


class ChildEnded(RuntimeError):
    """The child ended (killed, out of memory) without handing its result over."""


class ForkedCall:
    """`function()` computed in a forked child from the moment this is made; `result()` waits for it
    and returns its value or raises its error. `what` names the result in errors ("the output's risk
    figures"). The child's value and error are pickled: an error that cannot be is raised as a
    RuntimeError with its type's name and message, a value that cannot be as a RuntimeError saying why.
    Use it as a context manager: leaving it early stops the child. No reference to `function` (or what
    it holds) stays with this object."""

    def __init__(self, function: Callable[[], Any], what: str):
        self._what = what
        self._result: _Result | None = None
        self._pid: int | None = None
        self._handover: BinaryIO | None = None
        if not can_fork():
            self._result = _called(function)
            return
        self._handover = _anonymous_file(what)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: nothing may escape it, and os._exit ends it without any cleanup
            code = 1
            try:
                if os.getppid() == parent:  # else the caller is gone and nobody would read it
                    _hand_over(self._handover, _called(function), what)
                    code = 0  # the exit code says the result is whole
            finally:
                os._exit(code)
        self._pid = pid

    def result(self) -> Any:
        if self._result is None:
            assert self._handover is not None
            status = self._reap()
            try:
                if status != 0:
                    how = f"signal {-status}" if status < 0 else f"exit code {status}"
                    raise ChildEnded(f"the process computing {self._what} ended without them ({how})")
                self._handover.seek(0)
                self._result = pickle.load(self._handover)
            finally:
                self.close()
        succeeded, payload = self._result
        if not succeeded:
            raise payload
        return payload

    def close(self) -> None:
        """Stops the child if it still runs, reaps it and drops what it handed over."""
        if self._pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)
            self._reap()
        if self._handover is not None:
            self._handover.close()
            self._handover = None

    def _reap(self) -> int:
        """The child's exit status (negative: the signal that ended it)."""
        assert self._pid is not None
        _, status = os.waitpid(self._pid, 0)
        self._pid = None
        return os.waitstatus_to_exitcode(status)

    def __enter__(self) -> ForkedCall:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _called(function: Callable[[], Any]) -> _Result:
    try:
        return True, function()
    except Exception as error:
        return False, error


def _anonymous_file(what: str) -> BinaryIO:
    """A file with no name, shared with the child across the fork: in memory where the system has
    memfd (Linux), else an unnamed temporary file."""
    if hasattr(os, "memfd_create"):
        return os.fdopen(os.memfd_create(f"syndiffix {what}"), "w+b")
    return tempfile.TemporaryFile()


def _hand_over(file: BinaryIO, result: _Result, what: str) -> None:
    succeeded, payload = result
    if not succeeded:
        payload = passable_error(payload)
    try:
        pickle.dump((succeeded, payload), file, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:  # a value that cannot be passed on: only why, not its contents
        file.seek(0)
        file.truncate()
        pickle.dump((False, RuntimeError(f"{what} could not be passed on ({error})")), file)
    file.flush()


def passable_error(error: BaseException) -> BaseException:
    """The error, or what it said (its type's name and message) where it cannot be pickled to be handed
    over from a child."""
    try:
        pickle.dumps(error)
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error
