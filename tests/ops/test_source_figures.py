"""The source's risk sketches and quality halves, computed in a forked child while the run goes on."""

from __future__ import annotations

import gc
import multiprocessing
import os

import numpy as np
import pandas as pd
import pytest

from syndiffix_ops.config import parse_config
from syndiffix_ops.failed_runs import RunStage
from syndiffix_ops.output_quality import quality_against_source, quality_of_source
from syndiffix_ops.risk import RiskError, RunRisk
from syndiffix_ops.source_figures import PendingSourceFigures

ROWS = 3_001  # a length no other frame of these tests has


def _source() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "customer": rng.integers(0, 700, ROWS),
            "amount": np.round(rng.lognormal(3.0, 1.0, ROWS), 2),
            "city": rng.choice(["Oslo", "Rome", "Lima", "Kyiv"], ROWS),
            "paid": rng.random(ROWS) < 0.7,
            "at": np.datetime64("2024-01-01") + rng.integers(0, 10**7, ROWS).astype("timedelta64[s]"),
        }
    )


def _sketch(frame: pd.DataFrame) -> RunRisk | None:
    config = parse_config(
        {
            "source": "postgresql://u@h/db",
            "target": "postgresql://u@h/db",
            "target_schema": "s",
            "tables": [{"source": "sales.orders", "aid_columns": ["customer"]}],
        }
    )
    columns = ["amount", "city", "paid", "at"]
    return RunRisk.of_frame(
        config, config.tables[0], frame, ["customer"], columns, source_table="sales.orders", chunk_rows=1000
    )


OUTPUTS = [["amount", "city", "paid", "at"], ["city", "paid"]]


def test_the_figures_from_the_child_are_those_computed_in_this_process():
    source = _source()
    synthetic = source.sample(frac=1.0, replace=True, random_state=2).reset_index(drop=True)

    with PendingSourceFigures(source, OUTPUTS, _sketch) as pending:
        figures = pending.result(RunStage())

    expected_risk = _sketch(source)
    assert figures.risk.source.to_dict() == expected_risk.source.to_dict()
    assert (
        figures.risk.output_figures(synthetic, OUTPUTS[0]).record
        == expected_risk.output_figures(synthetic, OUTPUTS[0]).record
    )
    assert len(figures.quality) == 2
    for columns, quality in zip(OUTPUTS, figures.quality, strict=True):
        expected = quality_against_source(quality_of_source(source[columns]), synthetic[columns])
        assert quality_against_source(quality, synthetic[columns]) == expected


def _pid_of_sketch(frame: pd.DataFrame) -> int:
    return os.getpid()


def test_they_are_computed_in_another_process_which_holds_the_frame_and_not_the_caller():
    def frames_alive() -> int:
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, pd.DataFrame) and len(o) == ROWS)

    frame = _source()
    pending = PendingSourceFigures(frame, OUTPUTS, _pid_of_sketch)
    del frame
    assert frames_alive() == 0  # the caller may free the rows while the child computes
    with pending:
        figures = pending.result(RunStage())
    assert figures.risk != os.getpid()
    assert figures.risk_seconds >= 0.0


def _stage_it_stopped(output_columns, sketch, error: type[BaseException], match: str) -> str:
    """The run stage `result()` names when it raises `error` (matching `match`)."""
    stage = RunStage("synthesize")
    with (
        PendingSourceFigures(_source(), output_columns, sketch) as pending,
        pytest.raises(error, match=match),
    ):
        pending.result(stage)
    return stage.name


def _failing_sketch(frame: pd.DataFrame) -> RunRisk | None:
    raise RiskError("table orders: the sketch of column 'city' failed")


def test_an_error_in_the_child_is_raised_by_result_with_the_stage_it_stopped():
    assert _stage_it_stopped(OUTPUTS, _failing_sketch, RiskError, "column 'city'") == "risk"
    assert _stage_it_stopped([["no such column"]], _pid_of_sketch, KeyError, "no such column") == "quality"


def test_an_error_that_cannot_be_pickled_reaches_the_run_as_what_it_said():
    class LocalError(Exception):  # a class inside a function cannot be pickled
        pass

    def failing(frame: pd.DataFrame) -> RunRisk | None:
        raise LocalError("column 'city' broke")

    assert _stage_it_stopped(OUTPUTS, failing, RuntimeError, "LocalError: column 'city' broke") == "risk"


def _sketch_until_killed(frame: pd.DataFrame) -> RunRisk | None:
    os.kill(os.getpid(), 9)
    raise AssertionError("not reached")


def test_a_child_that_dies_fails_the_run_with_how_it_ended():
    assert (
        _stage_it_stopped(OUTPUTS, _sketch_until_killed, RuntimeError, r"ended without them \(signal 9\)")
        == "risk"
    )


def _in_a_daemonic_process(results) -> None:
    figures = PendingSourceFigures(_source(), OUTPUTS, _pid_of_sketch).result(RunStage())
    results.put((figures.risk, os.getpid(), len(figures.quality)))


def test_a_process_that_may_have_no_children_computes_them_itself():
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    process = context.Process(target=_in_a_daemonic_process, args=(results,), daemon=True)
    process.start()
    sketched_in, own_pid, outputs = results.get(timeout=120)
    process.join()
    assert sketched_in == own_pid and outputs == 2


def test_the_child_imports_none_of_the_packages_modules(imports_of_a_child_call):
    # see forked_call: everything the child runs is imported before it forks
    outcome = "syndiffix_ops.source_figures._outcome(frame, [['amount', 'city']], sketch)[0]"
    assert imports_of_a_child_call("syndiffix_ops.source_figures", outcome) == ["True", "[]"]
