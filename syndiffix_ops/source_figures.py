"""The source's own figures of a run (its risk sketches and the source half of each output's quality
figures), computed in a forked process while the engine synthesizes.

Both only read the source frame, and the run needs them only after synthesis, when the output's risk
and quality figures are compared with them. Computed on the run's own thread before synthesis, they
held the engine back (at 10M rows by half a minute); on a second thread they gain little, for much of
their time goes to Python between numpy calls, which the GIL serializes. A process forked after the
read shares the frame copy-on-write and computes them on another core while the engine encodes the
rows, builds its 1-dim trees and plans its clusters; it hands them over in a file without a name, in
memory (they hold one bin code per source cell, which should not reach a disk), and exits, which also
lets go of the source rows' pages that the engine frees once it has encoded them. The handed-over
figures take the memory the run's own figures took when it computed them itself.

Like the engine's workers, the process is forked, waited for and reaped by the calling thread. Without
the "fork" start method (the Windows and macOS defaults), or in a process that may have no children (a
daemonic one, such as a Celery prefork worker), the figures are computed in this process when started.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import pandas as pd

# The child runs only code imported before the fork (RunRisk.of_frame imports risk_meaning when
# called; quality_of_source, report): an import in a child forked from a process with other threads,
# such as an Airflow task, could wait forever on a module lock one of them held at the fork.
import syndiffix_ops.risk_meaning  # noqa: F401
from syndiffix_core.workers import can_fork
from syndiffix_ops.failed_runs import RunStage
from syndiffix_ops.output_quality import quality_of_source
from syndiffix_ops.report import SourceQuality
from syndiffix_ops.risk import RunRisk


@dataclass
class SourceFigures:
    risk: RunRisk | None  # None when the config disables risk
    risk_seconds: float
    quality: list[SourceQuality]  # one per output, in the order of `output_columns`


# (True, figures) or (False, the error, the run stage it stopped: "risk" or "quality")
_Outcome = tuple[bool, Any] | tuple[bool, BaseException, str]


class PendingSourceFigures:
    """The source's figures, computed in a forked child from the moment this is made; `result()` waits
    for them. Use it as a context manager: leaving it early (a failed run) stops the child."""

    def __init__(
        self,
        frame: pd.DataFrame,
        output_columns: Sequence[Sequence[str]],
        sketch_risk: Callable[[pd.DataFrame], RunRisk | None],
    ):
        self._outcome: _Outcome | None = None
        self._pid: int | None = None
        self._handover: BinaryIO | None = None
        if not can_fork():
            self._outcome = _outcome(frame, output_columns, sketch_risk)
            return
        self._handover = _anonymous_file()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: nothing may escape it, and os._exit ends it without any cleanup
            code = 1
            try:
                if os.getppid() == parent:  # else the run is gone and nobody would read it
                    _hand_over(self._handover, _outcome(frame, output_columns, sketch_risk))
                    code = 0  # the exit code says the figures are whole
            finally:
                os._exit(code)
        self._pid = pid  # and no reference to the frame stays with this object

    def result(self, stage: RunStage) -> SourceFigures:
        """The figures; their error, if any, with `stage` set to the stage it stopped."""
        if self._outcome is None:
            assert self._handover is not None
            status = self._reap()
            try:
                if status != 0:
                    how = f"signal {-status}" if status < 0 else f"exit code {status}"
                    stage.name = "risk"
                    raise RuntimeError(
                        f"the process computing the source's risk and quality figures ended without them ({how})"
                    )
                self._handover.seek(0)
                self._outcome = pickle.load(self._handover)
            finally:
                self.close()
        if not self._outcome[0]:
            _, error, stage.name = self._outcome
            raise error
        return self._outcome[1]

    def close(self) -> None:
        """Stops the child if it still runs, reaps it and drops the figures it handed over."""
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

    def __enter__(self) -> PendingSourceFigures:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _anonymous_file() -> BinaryIO:
    """A file with no name, shared with the child across the fork: in memory where the system has
    memfd (Linux), so the source's figures (one bin code per source cell) never reach a disk; else an
    unnamed temporary file."""
    if hasattr(os, "memfd_create"):
        return os.fdopen(os.memfd_create("syndiffix-source-figures"), "w+b")
    return tempfile.TemporaryFile()


def _outcome(
    frame: pd.DataFrame,
    output_columns: Sequence[Sequence[str]],
    sketch_risk: Callable[[pd.DataFrame], RunRisk | None],
) -> _Outcome:
    """The risk sketches, then each output's source quality half."""
    clock = time.perf_counter()
    try:
        risk = sketch_risk(frame)
    except Exception as error:
        return False, error, "risk"
    risk_seconds = time.perf_counter() - clock
    try:
        quality = [quality_of_source(frame[list(columns)]) for columns in output_columns]
    except Exception as error:
        return False, error, "quality"
    return True, SourceFigures(risk, risk_seconds, quality)


def _hand_over(file: BinaryIO, outcome: _Outcome) -> None:
    try:
        pickle.dump(outcome, file, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as error:  # what cannot be pickled: an error says what it said, figures only why
        if outcome[0]:
            failed, stage = RuntimeError(f"the source's figures could not be passed on ({error})"), "quality"
        else:
            failed, stage = RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]}"), outcome[2]
        file.seek(0)
        file.truncate()
        pickle.dump((False, failed, stage), file)
    file.flush()
