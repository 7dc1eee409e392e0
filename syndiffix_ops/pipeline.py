"""run_table: read -> synthesize -> write -> lineage -> report, for one configured table.

The one function the CLI and the Airflow operators call. Everything that can be checked before data
moves is checked first (columns and types against the config, schema drift against lineage, max_rows,
the salt), so a misconfigured table fails in seconds with a message naming the table and column.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from syndiffix_core.memory import return_freed_memory
from syndiffix_ops.config import EffectiveTable, PipelineConfig, TableConfig, WriteMode
from syndiffix_ops.connections import open_engines
from syndiffix_ops.dp_budget import DpRelease, plan_release
from syndiffix_ops.engines import get_engine
from syndiffix_ops.failed_runs import RunStage, record_failed_outputs, tracking
from syndiffix_ops.lineage import (
    LineageRecord,
    SourceIdentity,
    ensure_lineage_table,
    insert_lineage,
)
from syndiffix_ops.output_quality import html_report, quality_against_source, quality_gate
from syndiffix_ops.provenance import code_version, new_run_id
from syndiffix_ops.risk import RunRisk, column_sets
from syndiffix_ops.run_checks import (
    check_drift,
    check_output_target,
    check_where,
    derive_rules,
    reflect_source,
    refuse_overwriting_sources,
    refuse_too_few_rows,
    resolve_columns,
    run_salt,
)
from syndiffix_ops.run_errors import DpBudgetError, PipelineError, QualityGateError, RefusedConfigError
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
from syndiffix_ops.source_figures import PendingSourceFigures
from syndiffix_ops.warehouse import SourceTable, check_row_limit, read_columns, target_type_sql, write_table

log = logging.getLogger(__name__)


def run_table(
    config: PipelineConfig,
    table: str | TableConfig,
    *,
    source: sa.Engine | str | None = None,
    target: sa.Engine | str | None = None,
    run_id: str | None = None,
    airflow: AirflowIds | None = None,
    salt: bytes | None = None,
    report_dir: Path | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> list[TableRunResult]:
    """Synthesize one configured table into the target; one result per output (table or column set).

    `source`/`target` override the config's URLs (engines or URLs; the Airflow shell passes engines built
    from connections). `salt` overrides the environment variable named by salt_env. A dry run checks
    everything that needs no data (columns, types, drift, max_rows) and writes nothing.

    `run_id` is shared by the tables of one CLI or DAG run (default: a new one). A run that fails after
    the target is reachable leaves a `failed` lineage row per unwritten output (error class and stage).
    """
    table_config = config.table(table) if isinstance(table, str) else table
    effective = config.effective(table_config)
    run_id = run_id or new_run_id()
    report_dir = report_dir or config.report_dir
    stage = RunStage()
    notify = tracking(progress or (lambda stage, fraction: None), stage)
    label = f"table {table_config.display_name}"
    run_started = dt.datetime.now(dt.UTC)
    source_table: SourceTable | None = None
    results: list[TableRunResult] = []

    with open_engines(source, target, config.source_url, config.target_url, label) as (
        source_engine,
        target_engine,
    ):
        try:
            check_where(table_config.where, source_engine.dialect.name, label)
            refuse_overwriting_sources(config, table_config, source_engine, target_engine, label)
            salt_bytes = None if dry_run else run_salt(salt, effective.salt_env, label)
            source_table = reflect_source(source_engine, table_config, label)
            aids, synthesized = resolve_columns(source_table, effective, label)
            outputs = _outputs(table_config, synthesized, label)
            read_names = list(dict.fromkeys(c for o in outputs for c in o.columns))
            if config.risk.enabled:  # quasi-identifiers naming unread columns fail before data moves
                column_sets(read_names, table_config.risk.quasi_identifiers, table=table_config.display_name)
            check_output_target(target_engine, config.target_schema, source_table, outputs, label)
            check_drift(target_engine, config.target_schema, source_table, outputs, effective, label)
            if effective.max_rows is not None:
                check_row_limit(source_engine, source_table, table_config.where, effective.max_rows)
            if dry_run:
                return [
                    table_run_result(
                        config, table_config, effective, source_table, target_engine, output, aids, run_id
                    )
                    for output in outputs
                ]

            started = dt.datetime.now(dt.UTC)
            clock = time.perf_counter()
            notify("read", 0.0)
            frame = read_columns(
                source_engine,
                source_table,
                read_names,
                aid_columns=aids,
                where=table_config.where,
                chunk_rows=effective.read_chunk_rows,
                max_rows=effective.max_rows,
            )
            read_seconds = time.perf_counter() - clock
            notify("read", 1.0)
            source_figures = PendingSourceFigures(
                frame,
                [output.columns for output in outputs],
                lambda rows: RunRisk.of_frame(
                    config,
                    table_config,
                    rows,
                    aids,
                    read_names,
                    source_table=source_table.qualified_name,
                    chunk_rows=effective.read_chunk_rows,
                ),
            )
            with source_figures:
                ensure_lineage_table(target_engine, config.target_schema)
                source_rows = _SourceRows(frame)
                del frame  # held by source_rows alone, so that the last output's engine can free it
                for number, output in enumerate(outputs):
                    results.append(
                        _synthesize_output(
                            config,
                            effective,
                            source_table,
                            source_engine.url,
                            target_engine,
                            output,
                            source_rows,
                            aids,
                            salt_bytes,
                            run_id=run_id,
                            airflow=airflow,
                            started=started,
                            read_seconds=read_seconds,
                            report_dir=report_dir,
                            source_figures=source_figures,
                            number=number,
                            stage=stage,
                            notify=lambda stage, fraction, n=number: notify(
                                stage, (n + fraction) / len(outputs)
                            ),
                            last=number == len(outputs) - 1,
                        )
                    )
            return results
        except Exception as error:
            if not dry_run and not isinstance(error, RefusedConfigError):
                written = {(r.column_set, r.target_table) for r in results}
                record_failed_outputs(
                    config,
                    [(effective, source_table)],
                    source_engine.url,
                    target_engine,
                    label=label,
                    run_id=run_id,
                    airflow=airflow,
                    started=run_started,
                    error=error,
                    stage=stage.name,
                    skip=written,
                )
            raise


def _outputs(table: TableConfig, synthesized: list[str], label: str) -> list[PlannedOutput]:
    targets = table.output_targets()
    if not table.column_sets:
        return [PlannedOutput(None, targets[None], synthesized)]
    outputs = []
    for name, column_set in table.column_sets.items():
        missing = [c for c in column_set.columns if c not in synthesized]
        if missing:
            raise PipelineError(
                f"{label}: column set {name!r} lists {missing}, which are not synthesized "
                f"(synthesized columns: {synthesized})"
            )
        outputs.append(PlannedOutput(name, targets[name], list(column_set.columns)))
    return outputs


class _SourceRows:
    """The source frame of a run, shared by its outputs; the last output's engine takes it away, so
    that the engine can free it once encoded (the source half of the quality figures is computed before,
    one byte per cell)."""

    def __init__(self, frame: pd.DataFrame):
        self.frame: pd.DataFrame | None = frame

    def release(self) -> None:
        self.frame = None


class _OutputFigures:
    """The quality figures and the risk figures (or None) of one output, computed side by side on two
    threads from the moment this is made, while the calling thread stages the write: all three only
    read the synthetic frame, and most of their time is spent in numpy and pandas calls that release
    the GIL (bench_scale's table at 2M rows: figures 6.2 s one after the other, 4.1 s side by side).
    `result()` waits for both; an error in either is raised once both have ended, and leaving the
    `with` block waits for them too."""

    def __init__(
        self,
        quality: Callable[[], dict[str, Any] | None],
        risk: Callable[[], tuple[dict[str, Any], Any]] | None,
    ):
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="output-figures")
        self._quality = self._pool.submit(_timed, quality)
        self._risk = None if risk is None else self._pool.submit(_timed, risk)

    def result(self) -> tuple[dict[str, Any] | None, tuple[dict[str, Any], Any] | None, float, float]:
        """(quality figures, risk figures or None, seconds of each)."""
        wait([self._quality] + ([self._risk] if self._risk is not None else []))
        metrics, quality_seconds = self._quality.result()
        risk, risk_seconds = (None, 0.0) if self._risk is None else self._risk.result()
        return metrics, risk, quality_seconds, risk_seconds

    def __enter__(self) -> _OutputFigures:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._pool.shutdown(wait=True)


def _timed(function: Callable[[], Any]) -> tuple[Any, float]:
    clock = time.perf_counter()
    return function(), time.perf_counter() - clock


def _synthesize_output(
    config: PipelineConfig,
    effective: EffectiveTable,
    source: SourceTable,
    source_url: sa.URL,
    target: sa.Engine,
    output: PlannedOutput,
    source_rows: _SourceRows,
    aids: list[str],
    salt: bytes,
    *,
    run_id: str,
    airflow: AirflowIds | None,
    started: dt.datetime,
    read_seconds: float,
    report_dir: Path | None,
    source_figures: PendingSourceFigures,
    number: int,
    stage: RunStage,
    notify: Progress,
    last: bool,
) -> TableRunResult:
    table = effective.table
    label = f"table {table.display_name}" + (f" column set {output.column_set}" if output.column_set else "")
    engine = get_engine(effective.engine)
    timings = {"read": read_seconds}

    clock = time.perf_counter()
    notify("synthesize", 0.0)
    identity = source.qualified_name + (f"#{output.column_set}" if output.column_set else "")
    frame = source_rows.frame
    assert frame is not None, "the source rows are released only by the last output"
    derived = derive_rules(table, frame[[*aids, *output.columns]], aids, label)
    target_column = getattr(effective.engine_params, "target_column", None)
    original = frame[output.columns] if target_column is not None else None  # ML efficacy trains on rows
    inputs = [frame[[*aids, *derived.synthesized]]]
    del frame
    if last:
        source_rows.release()
    result = engine.run(
        inputs.pop(),  # the engine holds the only reference: it frees the rows once encoded
        aid_columns=aids,
        salt=salt,
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
        label, len(synthetic), effective.min_rows, qualified_name(config.target_schema, output.target)
    )
    if derived.expressions:  # complete() builds a new frame: without derived columns, a copy
        synthetic = derived.complete(synthetic)
    # glibc keeps freed heap pages resident: the engine's, and below each stage's, would otherwise stay
    # in the run's memory through the stages after it (docs/engine.md "Ten million rows end to end")
    return_freed_memory()
    timings["synthesize"] = time.perf_counter() - clock
    dp_release = _dp_release(
        config,
        target,
        salt,
        SourceIdentity.from_url(source_url, source.qualified_name),
        aids,
        metadata,
        stage,
    )
    if dp_release is not None and dp_release.over_budget:
        if config.dp.refuse_over_budget:
            raise DpBudgetError(dp_release.refusal(label))
        # the task log of an Airflow run shows it too, not only the report
        log.warning("%s: over the DP budget: %s", label, dp_release.over_budget)

    figures = source_figures.result(stage)  # computed while the engine ran (source_figures)
    run_risk, source_quality = figures.risk, figures.quality[number]
    metrics: dict[str, Any] | None = None
    risk_metrics, risk_sections = None, []

    def write_report() -> Path | None:
        if report_dir is None:
            return None
        stage.name = "report"
        clock = time.perf_counter()
        path = html_report(
            Path(report_dir),
            qualified_name(config.target_schema, output.target),
            None,  # the report is drawn from the metrics
            synthetic,
            metrics,
            sections=risk_sections,
            run_id=run_id,
            source_table=source.qualified_name,
            risk=risk_metrics,
        )
        timings["report"] = time.perf_counter() - clock
        return path

    def review(output_figures: _OutputFigures) -> None:
        """The output's figures and the quality gate: run once the rows are staged, before the target
        is touched, so a refused copy leaves it as it was."""
        nonlocal metrics, risk_metrics, waited
        stage.name = "quality"
        clock = time.perf_counter()
        metrics, risk, quality_seconds, risk_seconds = output_figures.result()
        waited = time.perf_counter() - clock
        if metrics is not None and "evaluation" in metadata:
            # engines that evaluate themselves (dp_marginals: the showcase's k-tuple metrics) add a section
            metrics[f"{engine.name}_evaluation"] = metadata["evaluation"]
        if metrics is not None and "epsilon_spent" in metadata:
            from syndiffix_ops.report import dp_budget

            metrics["dp_budget"] = {
                **dp_budget(metadata, identity, effective.engine_params),
                **(dp_release.report_fields() if dp_release is not None else {}),
            }
        timings["quality"] = quality_seconds
        if risk is not None:
            notify("risk", 0.5)
            risk_metrics, risk_section = risk
            risk_sections.append(risk_section)
            timings["risk"] = figures.risk_seconds + risk_seconds
        gate = quality_gate(metrics, effective.quality)
        if gate is not None:
            write_report()  # the reviewer sees why the copy was not written
            stage.name = "quality"
            raise QualityGateError(f"{label}: {gate}; nothing written, the previous copy is kept")
        notify("write", 0.5)

    waited = 0.0  # by the write, for the figures
    clock = time.perf_counter()
    notify("quality", 0.5)
    columns = target_columns(source, output.columns)
    record_columns = [
        {
            "name": c.name,
            "source_type": source.column(c.name).type_sql,
            "target_type": target_type_sql(c, source.dialect, target.dialect, config.target_schema),
            "kind": c.kind.value,
        }
        for c in columns
    ]
    parameters = run_parameters(effective)
    version = code_version()
    records: list[LineageRecord] = []

    def record_lineage(conn: sa.Connection) -> None:
        record = LineageRecord(
            run_id=run_id,
            target_table=output.target,
            column_set=output.column_set,
            source=SourceIdentity.from_url(source_url, source.qualified_name),
            columns=record_columns,
            aid_columns=aids,
            engine=engine.name,
            package_version=version.package_version,
            code_commit=version.commit,
            parameters=parameters,
            config_hash=config.config_hash(),
            source_schema_hash=source.schema_hash(),
            source_schema=source.schema_snapshot(),
            synthetic_rows=len(synthetic),
            started_at=started,
            finished_at=dt.datetime.now(dt.UTC),
            airflow_dag_id=airflow.dag_id if airflow else None,
            airflow_task_id=airflow.task_id if airflow else None,
            airflow_run_id=airflow.run_id if airflow else None,
            quality_metrics=metrics,
            engine_metadata=metadata,
            risk_metrics=risk_metrics,
            **(dp_release.lineage_fields() if dp_release is not None else {}),
        )
        insert_lineage(conn, config.target_schema, record)
        records.append(record)

    # The rows are staged while the output's figures are computed; the swap waits for their review.
    with _OutputFigures(
        lambda: quality_against_source(
            source_quality, synthetic, effective.quality, target_column=target_column, original=original
        ),
        None if run_risk is None else lambda: run_risk.for_output(synthetic, output.columns),
    ) as output_figures:
        stage.name = "write"
        write_table(
            target,
            schema=config.target_schema,
            name=output.target,
            columns=columns,
            frame=synthetic,
            source_dialect=source.dialect,
            replace=effective.mode is WriteMode.REPLACE,
            before_swap=lambda: review(output_figures),
            before_commit=record_lineage,
            progress=lambda step: notify(f"write: {step}", 0.8 if step == "staged" else 0.9),
        )
    return_freed_memory()
    timings["write"] = time.perf_counter() - clock - waited
    notify("write", 1.0)
    log.info(
        "%s: wrote %d synthetic rows to %s",
        label,
        len(synthetic),
        qualified_name(config.target_schema, output.target),
    )
    report_path = write_report()
    return table_run_result(
        config,
        table,
        effective,
        source,
        target,
        output,
        aids,
        run_id,
        rows_written=len(synthetic),
        status="success",
        lineage_id=records[-1].lineage_id,
        metrics=metrics,
        timings=timings,
        report_path=report_path,
        risk=risk_metrics,
    )


def _dp_release(
    config: PipelineConfig,
    target: sa.Engine,
    salt: bytes,
    source: SourceIdentity,
    aids: list[str],
    metadata: Mapping[str, Any],
    stage: RunStage,
) -> DpRelease | None:
    """A DP engine's release with its identity's total from the target's lineage (None for other engines)."""
    if "epsilon_spent" not in metadata:
        return None
    stage.name = "dp_budget"
    return plan_release(
        target,
        config.target_schema,
        salt=salt,
        source=source,
        aid_columns=aids,
        metadata=metadata,
        budget=config.dp,
    )
