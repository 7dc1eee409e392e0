"""One output of a table run (the whole table or one column set), from the engine's call to the
written copy: synthesize, review (the output's quality and risk figures, the quality gate), write it
with its lineage row, report.

run_table reads the source once and hands each of its outputs here in turn; what the outputs share
(the config, the source, the target, the salt, the source's own figures) is one `TableRun`.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from syndiffix_core.memory import return_freed_memory
from syndiffix_ops.config import EffectiveTable, PipelineConfig, WriteMode
from syndiffix_ops.dp_budget import DpRelease, plan_release
from syndiffix_ops.engines import get_engine
from syndiffix_ops.failed_runs import RunStage
from syndiffix_ops.forked_call import ForkedCall
from syndiffix_ops.lineage import LineageRecord, SourceIdentity, insert_lineage
from syndiffix_ops.output_quality import html_report, quality_against_source, quality_gate
from syndiffix_ops.provenance import code_version
from syndiffix_ops.run_checks import derive_rules, refuse_too_few_rows
from syndiffix_ops.run_errors import DpBudgetError, PipelineError, QualityGateError
from syndiffix_ops.run_result import (
    AirflowIds,
    PlannedOutput,
    Progress,
    TableRunResult,
    qualified_name,
    run_parameters,
    table_run_result,
    target_columns,
)
from syndiffix_ops.source_figures import PendingSourceFigures, SourceFigures
from syndiffix_ops.warehouse import SourceTable, TargetColumn, target_type_sql, write_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TableRun:
    """What the outputs of one table run share."""

    config: PipelineConfig
    effective: EffectiveTable
    source: SourceTable
    source_url: sa.URL
    target: sa.Engine
    aids: list[str]
    salt: bytes
    run_id: str
    airflow: AirflowIds | None
    started: dt.datetime
    read_seconds: float
    report_dir: Path | None
    source_figures: PendingSourceFigures
    stage: RunStage

    @property
    def source_identity(self) -> SourceIdentity:
        return SourceIdentity.from_url(self.source_url, self.source.qualified_name)


class SourceRows:
    """The source frame of a run, shared by its outputs; the last output's engine takes it away, so
    that the engine can free it once encoded (the source half of the quality figures is computed before,
    one byte per cell)."""

    def __init__(self, frame: pd.DataFrame):
        self.frame: pd.DataFrame | None = frame

    def release(self) -> None:
        self.frame = None


class OutputFigures:
    """The quality figures and the risk figures (or None) of one output, computed from the moment this
    is made while the calling thread stages the write: the risk figures in a forked child (forked_call),
    the quality figures on a thread. All three only read the synthetic frame; on threads alone the
    risk and quality figures' Python between numpy calls took turns on the GIL (bench_scale's table at
    2M rows: 4.0-4.1 s side by side on two threads, 3.2-3.3 s with the risk figures in a child).
    `result()` waits for both; an error in the quality figures stops the child, an error in the risk
    figures is raised once the quality figures are done; leaving the `with` block stops the child and
    waits for the thread."""

    def __init__(
        self,
        quality: Callable[[], dict[str, Any] | None],
        risk: Callable[[], Any] | None,
    ):
        # forked before the thread starts: the child then starts from one thread's state
        self._risk = None if risk is None else ForkedCall(partial(_timed, risk), "the output's risk figures")
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="output-quality")
        self._quality = self._pool.submit(_timed, quality)

    def result(self) -> tuple[dict[str, Any] | None, Any, float, float]:
        """(quality figures, risk figures or None, seconds of each)."""
        try:
            metrics, quality_seconds = self._quality.result()
        except BaseException:
            if self._risk is not None:
                self._risk.close()
            raise
        risk, risk_seconds = (None, 0.0) if self._risk is None else self._risk.result()
        return metrics, risk, quality_seconds, risk_seconds

    def __enter__(self) -> OutputFigures:
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._risk is not None:
            self._risk.close()
        self._pool.shutdown(wait=True)


def _timed(function: Callable[[], Any]) -> tuple[Any, float]:
    clock = time.perf_counter()
    return function(), time.perf_counter() - clock


@dataclass
class _Synthesized:
    """An output's synthetic rows (derived columns completed) and what the run knows of their making."""

    frame: pd.DataFrame
    metadata: dict[str, Any]
    engine_name: str
    identity: str  # the source table, with `#column set` for one column set
    target_column: str | None
    original: pd.DataFrame | None  # the source rows ML efficacy trains on (with a target column only)


def run_output(
    run: TableRun,
    output: PlannedOutput,
    source_rows: SourceRows,
    *,
    number: int,
    notify: Progress,
    last: bool,
) -> TableRunResult:
    """Synthesize, review, write and report output `number` of the run; `last` lets its engine take the
    source rows."""
    label = f"table {run.effective.table.display_name}" + (
        f" column set {output.column_set}" if output.column_set else ""
    )
    timings = {"read": run.read_seconds}
    clock = time.perf_counter()
    synthetic = _synthesize(run, output, source_rows, label, notify, last)
    timings["synthesize"] = time.perf_counter() - clock
    dp_release = _dp_release(run, synthetic.metadata)
    if dp_release is not None and dp_release.over_budget:
        if run.config.dp.refuse_over_budget:
            raise DpBudgetError(dp_release.refusal(label))
        # the task log of an Airflow run shows it too, not only the report
        log.warning("%s: over the DP budget: %s", label, dp_release.over_budget)
    review = _Review(
        run,
        output,
        synthetic,
        dp_release,
        run.source_figures.result(run.stage),
        number,
        label,
        notify,
        timings,
    )
    records = _write(run, output, synthetic, review, dp_release, notify)
    log.info(
        "%s: wrote %d synthetic rows to %s",
        label,
        len(synthetic.frame),
        qualified_name(run.config.target_schema, output.target),
    )
    report_path = review.write_report()
    return table_run_result(
        run.config,
        run.effective.table,
        run.effective,
        run.source,
        run.target,
        output,
        run.aids,
        run.run_id,
        rows_written=len(synthetic.frame),
        status="success",
        lineage_id=records[-1].lineage_id,
        metrics=review.metrics,
        timings=timings,
        report_path=report_path,
        risk=review.risk_metrics,
    )


def _synthesize(
    run: TableRun, output: PlannedOutput, source_rows: SourceRows, label: str, notify: Progress, last: bool
) -> _Synthesized:
    """The engine's run on the output's columns, checked, with its derived columns completed."""
    effective, aids = run.effective, run.aids
    engine = get_engine(effective.engine)
    notify("synthesize", 0.0)
    identity = run.source.qualified_name + (f"#{output.column_set}" if output.column_set else "")
    frame = source_rows.frame
    assert frame is not None, "the source rows are released only by the last output"
    derived = derive_rules(effective.table, frame[[*aids, *output.columns]], aids, label)
    target_column = getattr(effective.engine_params, "target_column", None)
    original = frame[output.columns] if target_column is not None else None  # ML efficacy trains on rows
    inputs = [frame[[*aids, *derived.synthesized]]]
    del frame
    if last:
        source_rows.release()
    result = engine.run(
        inputs.pop(),  # the engine holds the only reference: it frees the rows once encoded
        aid_columns=aids,
        salt=run.salt,
        params=effective.engine_params,
        table_identity=identity,
        # the engine's own stages fill the synthesize half of this output's progress (writing is the rest)
        progress=lambda stage, fraction: notify(f"synthesize: {stage}", 0.5 * fraction),
    )
    synthetic, metadata = result.frame, result.metadata
    del result  # one synthetic frame at a time
    if list(synthetic.columns) != derived.synthesized:
        raise PipelineError(
            f"{label}: engine {engine.name} returned columns {list(synthetic.columns)}, "
            f"expected {derived.synthesized}"
        )
    refuse_too_few_rows(
        label, len(synthetic), effective.min_rows, qualified_name(run.config.target_schema, output.target)
    )
    if derived.expressions:  # complete() builds a new frame: without derived columns, a copy
        synthetic = derived.complete(synthetic)
    # glibc keeps freed heap pages resident: the engine's, and below each stage's, would otherwise stay
    # in the run's memory through the stages after it (docs/engine.md "Ten million rows end to end")
    return_freed_memory()
    return _Synthesized(synthetic, metadata, engine.name, identity, target_column, original)


def _dp_release(run: TableRun, metadata: Mapping[str, Any]) -> DpRelease | None:
    """A DP engine's release with its identity's total from the target's lineage (None for other engines)."""
    if "epsilon_spent" not in metadata:
        return None
    run.stage.name = "dp_budget"
    return plan_release(
        run.target,
        run.config.target_schema,
        salt=run.salt,
        source=run.source_identity,
        aid_columns=run.aids,
        metadata=metadata,
        budget=run.config.dp,
    )


class _Review:
    """The output's figures and the quality gate. Called once the rows are staged and before the target
    is touched (write_table's before_swap), so a refused copy leaves the target as it was; it keeps the
    figures for the lineage row, the result and the report."""

    def __init__(
        self,
        run: TableRun,
        output: PlannedOutput,
        synthetic: _Synthesized,
        dp_release: DpRelease | None,
        source_figures: SourceFigures,
        number: int,
        label: str,
        notify: Progress,
        timings: dict[str, float],
    ):
        self.run, self.output, self.synthetic, self.dp_release = run, output, synthetic, dp_release
        self.source_figures, self.number, self.label = source_figures, number, label
        self.notify, self.timings = notify, timings
        self.metrics: dict[str, Any] | None = None
        self.risk_metrics: dict[str, Any] | None = None
        self.risk_sections: list[Any] = []
        self.waited = 0.0  # by the write, for the figures

    def figures(self) -> OutputFigures:
        """The output's quality and risk figures, started now: the risk figures' numbers in a forked
        child (their report section is drawn here), the quality figures on a thread."""
        run, synthetic, run_risk = self.run, self.synthetic, self.source_figures.risk
        return OutputFigures(
            lambda: quality_against_source(
                self.source_figures.quality[self.number],
                synthetic.frame,
                run.effective.quality,
                target_column=synthetic.target_column,
                original=synthetic.original,
            ),
            None
            if run_risk is None
            else partial(run_risk.output_figures, synthetic.frame, self.output.columns),
        )

    def __call__(self, output_figures: OutputFigures) -> None:
        self.run.stage.name = "quality"
        clock = time.perf_counter()
        self.metrics, risk, quality_seconds, risk_seconds = output_figures.result()
        self.waited = time.perf_counter() - clock
        self._add_engine_sections()
        self.timings["quality"] = quality_seconds
        if risk is not None:
            self.notify("risk", 0.5)
            self.risk_metrics = risk.record
            self.risk_sections.append(self.source_figures.risk.output_section(risk))
            self.timings["risk"] = self.source_figures.risk_seconds + risk_seconds
        gate = quality_gate(self.metrics, self.run.effective.quality)
        if gate is not None:
            self.write_report()  # the reviewer sees why the copy was not written
            self.run.stage.name = "quality"
            raise QualityGateError(f"{self.label}: {gate}; nothing written, the previous copy is kept")
        self.notify("write", 0.5)

    def _add_engine_sections(self) -> None:
        metrics, metadata = self.metrics, self.synthetic.metadata
        if metrics is None:
            return
        if "evaluation" in metadata:
            # engines that evaluate themselves (dp_marginals: the showcase's k-tuple metrics) add a section
            metrics[f"{self.synthetic.engine_name}_evaluation"] = metadata["evaluation"]
        if "epsilon_spent" in metadata:
            from syndiffix_ops.report import dp_budget

            metrics["dp_budget"] = {
                **dp_budget(metadata, self.synthetic.identity, self.run.effective.engine_params),
                **(self.dp_release.report_fields() if self.dp_release is not None else {}),
            }

    def write_report(self) -> Path | None:
        if self.run.report_dir is None:
            return None
        self.run.stage.name = "report"
        clock = time.perf_counter()
        path = html_report(
            Path(self.run.report_dir),
            qualified_name(self.run.config.target_schema, self.output.target),
            None,  # the report is drawn from the metrics
            self.synthetic.frame,
            self.metrics,
            sections=self.risk_sections,
            run_id=self.run.run_id,
            source_table=self.run.source.qualified_name,
            risk=self.risk_metrics,
        )
        self.timings["report"] = time.perf_counter() - clock
        return path


def _write(
    run: TableRun,
    output: PlannedOutput,
    synthetic: _Synthesized,
    review: _Review,
    dp_release: DpRelease | None,
    notify: Progress,
) -> list[LineageRecord]:
    """Stage the rows while the output's figures are computed, review them, swap them in with the
    lineage row; the lineage records written."""
    clock = time.perf_counter()
    notify("quality", 0.5)
    columns = target_columns(run.source, output.columns)
    lineage = _LineageOf(run, output, synthetic, review, dp_release, columns)
    # The rows are staged while the output's figures are computed; the swap waits for their review.
    with review.figures() as output_figures:
        run.stage.name = "write"
        write_table(
            run.target,
            schema=run.config.target_schema,
            name=output.target,
            columns=columns,
            frame=synthetic.frame,
            source_dialect=run.source.dialect,
            replace=run.effective.mode is WriteMode.REPLACE,
            before_swap=lambda: review(output_figures),
            before_commit=lineage.insert,
            progress=lambda step: notify(f"write: {step}", 0.8 if step == "staged" else 0.9),
        )
    return_freed_memory()
    review.timings["write"] = time.perf_counter() - clock - review.waited
    notify("write", 1.0)
    return lineage.records


class _LineageOf:
    """The lineage row of one output, inserted in the write's transaction (before_commit)."""

    def __init__(
        self,
        run: TableRun,
        output: PlannedOutput,
        synthetic: _Synthesized,
        review: _Review,
        dp_release: DpRelease | None,
        columns: list[TargetColumn],
    ):
        self.run, self.output, self.synthetic = run, output, synthetic
        self.review, self.dp_release = review, dp_release
        source, target = run.source, run.target
        self.columns = [
            {
                "name": c.name,
                "source_type": source.column(c.name).type_sql,
                "target_type": target_type_sql(c, source.dialect, target.dialect, run.config.target_schema),
                "kind": c.kind.value,
            }
            for c in columns
        ]
        self.parameters = run_parameters(run.effective)
        self.version = code_version()
        self.records: list[LineageRecord] = []

    def insert(self, conn: sa.Connection) -> None:
        run, airflow = self.run, self.run.airflow
        record = LineageRecord(
            run_id=run.run_id,
            target_table=self.output.target,
            column_set=self.output.column_set,
            source=run.source_identity,
            columns=self.columns,
            aid_columns=run.aids,
            engine=self.synthetic.engine_name,
            package_version=self.version.package_version,
            code_commit=self.version.commit,
            parameters=self.parameters,
            config_hash=run.config.config_hash(),
            source_schema_hash=run.source.schema_hash(),
            source_schema=run.source.schema_snapshot(),
            synthetic_rows=len(self.synthetic.frame),
            started_at=run.started,
            finished_at=dt.datetime.now(dt.UTC),
            airflow_dag_id=airflow.dag_id if airflow else None,
            airflow_task_id=airflow.task_id if airflow else None,
            airflow_run_id=airflow.run_id if airflow else None,
            quality_metrics=self.review.metrics,
            engine_metadata=self.synthetic.metadata,
            risk_metrics=self.review.risk_metrics,
            **(self.dp_release.lineage_fields() if self.dp_release is not None else {}),
        )
        insert_lineage(conn, run.config.target_schema, record)
        self.records.append(record)
