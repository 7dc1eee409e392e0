"""The source's own figures of a run (its risk sketches and the source half of each output's quality
figures), computed in a forked child (forked_call) while the engine synthesizes.

Both only read the source frame, and the run needs them only after synthesis, when the output's risk
and quality figures are compared with them. Computed on the run's own thread before synthesis, they
held the engine back (at 10M rows by half a minute); in a child forked after the read they are
computed on another core while the engine encodes the rows, builds its 1-dim trees and plans its
clusters, and the child's exit lets go of the source rows' pages that the engine frees once it has
encoded them. The handed-over figures take the memory the run's own figures took when it computed
them itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import pandas as pd

from syndiffix_ops.failed_runs import RunStage
from syndiffix_ops.forked_call import ForkedCall, passable_error
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
        # no reference to the frame stays with this object: the engine may free the rows
        self._call = ForkedCall(
            partial(_outcome, frame, output_columns, sketch_risk), "the source's risk and quality figures"
        )

    def result(self, stage: RunStage) -> SourceFigures:
        """The figures; their error, if any, with `stage` set to the stage it stopped."""
        try:
            outcome = self._call.result()
        except Exception:  # the child ended without them, or they could not be passed on
            stage.name = "risk"
            raise
        if not outcome[0]:
            _, error, stage.name = outcome
            raise error
        return outcome[1]

    def close(self) -> None:
        """Stops the child if it still runs, reaps it and drops the figures it handed over."""
        self._call.close()

    def __enter__(self) -> PendingSourceFigures:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


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
        return False, passable_error(error), "risk"
    risk_seconds = time.perf_counter() - clock
    try:
        quality = [quality_of_source(frame[list(columns)]) for columns in output_columns]
    except Exception as error:
        return False, passable_error(error), "quality"
    return True, SourceFigures(risk, risk_seconds, quality)
