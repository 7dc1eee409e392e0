"""run_table: read -> synthesize -> write -> lineage -> report, for one configured table.

The one function the CLI and the Airflow operators call. Everything that can be checked before data
moves is checked first (columns and types against the config, schema drift against lineage, max_rows,
the salt), so a misconfigured table fails in seconds with a message naming the table and column.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import sqlalchemy as sa

from syndiffix_ops.config import (
    ColumnPolicy,
    ConfigError,
    EffectiveTable,
    PipelineConfig,
    SchemaChangePolicy,
    TableConfig,
    WriteMode,
    lineage_name_conflicts,
    sqlite_schema_problem,
)
from syndiffix_ops.connections import connect, create_engine
from syndiffix_ops.engines import get_engine, resolved_params
from syndiffix_ops.errors import PermanentError
from syndiffix_ops.lineage import (
    LineageRecord,
    SourceIdentity,
    ensure_lineage_table,
    insert_lineage,
    last_lineage,
    record_failure,
)
from syndiffix_ops.provenance import code_version, new_run_id, safe_error_message
from syndiffix_ops.risk import RunRisk, column_sets
from syndiffix_ops.warehouse import (
    IdentifierError,
    SourceTable,
    TargetColumn,
    UnsupportedTypeError,
    check_row_limit,
    read_columns,
    reflect_table,
    target_type_sql,
    write_table,
)
from syndiffix_ops.warehouse.locations import overlaps
from syndiffix_ops.warehouse.target_checks import TargetCheckError, check_target
from syndiffix_ops.where import WhereError, render_where

if TYPE_CHECKING:
    from syndiffix_core.derive import DerivedColumns

log = logging.getLogger(__name__)

Progress = Callable[[str, float], None]


class PipelineError(PermanentError, RuntimeError):
    """A table that cannot be synthesized as configured; the message names the table and the cause."""


class RefusedConfigError(ConfigError):
    """A config that would overwrite a source or run something other than one `where` expression:
    refused before anything is written, not even a failed lineage row."""


class TooFewRowsError(PipelineError):
    """The synthetic output has fewer rows than min_rows; nothing was written."""


class QualityGateError(PipelineError):
    """The synthetic copy fails the config's quality gate (quality.fail_below_score / fail_on_attention)."""


class SchemaDriftError(PipelineError):
    """The source schema changed since the last successful run and on_schema_change is fail."""


@dataclass(frozen=True)
class AirflowIds:
    dag_id: str
    task_id: str
    run_id: str


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    sql_type: str
    kind: str | None = None


@dataclass(frozen=True)
class TableRunResult:
    """One written (or, in a dry run, planned) output: the whole table or one column set."""

    table: str  # the config entry's name
    source_table: str  # schema.table
    target_table: str  # schema.table (or table without a target schema)
    column_set: str | None
    rows_written: int
    status: str  # "success" | "dry_run"
    lineage_id: str | None
    metrics: dict[str, Any] | None
    timings: dict[str, float]
    report_path: Path | None
    input_columns: list[ColumnInfo]  # source columns read for this output, AID columns included
    output_columns: list[ColumnInfo]  # target columns with their target SQL types
    engine: str
    run_id: str
    target_schema: str | None = None
    aid_columns: list[str] = field(default_factory=list)
    risk: dict[str, Any] | None = None  # coarse KHLL risk summary of the source and the output


@dataclass
class _Stage:
    """Where a run is, so a failure can be recorded with the stage it stopped in."""

    name: str = "check"


@dataclass(frozen=True)
class _Output:
    column_set: str | None
    target: str
    columns: list[str]


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
    stage = _Stage()
    notify = _tracking(progress or (lambda stage, fraction: None), stage)
    label = f"table {table_config.display_name}"
    run_started = dt.datetime.now(dt.UTC)
    source_table: SourceTable | None = None
    results: list[TableRunResult] = []

    source_engine, owns_source = create_engine("source", source, config.source_url, label)
    try:
        target_engine, owns_target = create_engine("target", target, config.target_url, label)
    except ConfigError:
        if owns_source:
            source_engine.dispose()
        raise
    try:
        _check_where(table_config.where, source_engine.dialect.name, label)
        _refuse_overwriting_sources(config, table_config, source_engine, target_engine, label)
        salt_bytes = None if dry_run else _salt(salt, effective.salt_env, label)
        source_table = _reflect(source_engine, table_config, label)
        aids, synthesized = _resolve_columns(source_table, effective, label)
        outputs = _outputs(table_config, synthesized, label)
        read_names = list(dict.fromkeys(c for o in outputs for c in o.columns))
        if config.risk.enabled:  # quasi-identifiers naming unread columns fail before data moves
            column_sets(read_names, table_config.risk.quasi_identifiers, table=table_config.display_name)
        _check_target(target_engine, config.target_schema, source_table, outputs, label)
        _check_drift(target_engine, config.target_schema, source_table, outputs, effective, label)
        if effective.max_rows is not None:
            check_row_limit(source_engine, source_table, table_config.where, effective.max_rows)
        if dry_run:
            return [
                _result(config, table_config, effective, source_table, target_engine, output, aids, run_id)
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
        stage.name = "risk"
        clock = time.perf_counter()
        run_risk = RunRisk.of_frame(
            config,
            table_config,
            frame,
            aids,
            read_names,
            source_table=source_table.qualified_name,
            chunk_rows=effective.read_chunk_rows,
        )
        source_risk_seconds = time.perf_counter() - clock
        ensure_lineage_table(target_engine, config.target_schema)
        for number, output in enumerate(outputs):
            results.append(
                _synthesize_output(
                    config,
                    effective,
                    source_table,
                    source_engine.url,
                    target_engine,
                    output,
                    frame,
                    aids,
                    salt_bytes,
                    run_id=run_id,
                    airflow=airflow,
                    started=started,
                    read_seconds=read_seconds,
                    report_dir=report_dir,
                    run_risk=run_risk,
                    source_risk_seconds=source_risk_seconds,
                    stage=stage,
                    notify=lambda stage, fraction, n=number: notify(stage, (n + fraction) / len(outputs)),
                )
            )
        return results
    except Exception as error:
        if not dry_run and not isinstance(error, RefusedConfigError):
            written = {(r.column_set, r.target_table) for r in results}
            _record_failed_outputs(
                config,
                effective,
                source_engine.url,
                target_engine,
                source_table,
                run_id=run_id,
                airflow=airflow,
                started=run_started,
                error=error,
                stage=stage.name,
                skip=written,
            )
        raise
    finally:
        if owns_source:
            source_engine.dispose()
        if owns_target:
            target_engine.dispose()


def _tracking(notify: Progress, stage: _Stage) -> Progress:
    def report(name: str, fraction: float) -> None:
        stage.name = name.split(":")[0]
        notify(name, fraction)

    return report


def run_parameters(effective: EffectiveTable) -> dict[str, Any]:
    """The parameters lineage records: engine params with every default resolved, and the run's settings."""
    return {
        "engine_params": resolved_params(get_engine(effective.engine), effective.engine_params),
        "mode": effective.mode.value,
        "where": effective.table.where,
        "max_rows": effective.max_rows,
        "min_rows": effective.min_rows,
        "on_schema_change": effective.on_schema_change.value,
        "other_columns": effective.other_columns.value,
        "read_chunk_rows": effective.read_chunk_rows,
        **({"derive": effective.table.derived_columns} if effective.table.derived_columns else {}),
    }


def _record_failed_outputs(
    config: PipelineConfig,
    effective: EffectiveTable,
    source_url: sa.URL,
    target: sa.Engine,
    source: SourceTable | None,
    *,
    run_id: str,
    airflow: AirflowIds | None,
    started: dt.datetime,
    error: Exception,
    stage: str,
    skip: set[tuple[str | None, str]],
) -> None:
    """One `failed` lineage row per output the run did not write. Best effort: when the target itself is
    what failed, the error is logged and the original error stands."""
    table = effective.table
    version = code_version()
    records = [
        LineageRecord(
            run_id=run_id,
            target_table=target_name,
            column_set=column_set,
            source=SourceIdentity.from_url(source_url, source.qualified_name if source else table.source),
            columns=[],
            aid_columns=list(table.aid_columns),
            engine=effective.engine,
            package_version=version.package_version,
            code_commit=version.commit,
            parameters=run_parameters(effective),
            config_hash=config.config_hash(),
            source_schema_hash=source.schema_hash() if source else "",
            source_schema=source.schema_snapshot() if source else [],
            synthetic_rows=0,
            started_at=started,
            finished_at=dt.datetime.now(dt.UTC),
            status="failed",
            airflow_dag_id=airflow.dag_id if airflow else None,
            airflow_task_id=airflow.task_id if airflow else None,
            airflow_run_id=airflow.run_id if airflow else None,
            error_class=f"{type(error).__module__}.{type(error).__qualname__}",
            error_stage=stage,
            error_message=safe_error_message(error),
        )
        for column_set, target_name in table.output_targets().items()
        if (column_set, _qualified(config.target_schema, target_name)) not in skip
    ]
    try:
        record_failure(target, config.target_schema, records)
    except Exception as lineage_error:
        log.warning(
            "table %s: could not record the failed run in lineage (%s)",
            table.display_name,
            type(lineage_error).__name__,
        )


def _refuse_overwriting_sources(
    config: PipelineConfig, table: TableConfig, source: sa.Engine, target: sa.Engine, label: str
) -> None:
    """No output may replace a source table of the config (or the lineage table): checked on the live
    connections, where two URLs that look different can still reach the same table."""
    problems = lineage_name_conflicts(table)
    sources = [(t.schema_name, t.table_name) for t in config.tables]
    outputs = [(config.target_schema, name) for name in table.output_targets().values()]
    if target.dialect.name == "sqlite" and config.target_schema:
        problems.append(f"target: {sqlite_schema_problem(config.target_schema)}")
    with connect(source, "source", label) as source_conn, connect(target, "target", label) as target_conn:
        for output, overwritten in overlaps(source_conn, target_conn, sources, outputs):
            problems.append(
                f"output {_qualified(*output)} is the source table {_qualified(*overwritten)} "
                "(the same table in the same database); choose another target name or target_schema"
            )
    if problems:
        raise RefusedConfigError([f"{label}: {problem}; nothing was written" for problem in problems])


def refuse_too_few_rows(label: str, rows: int, min_rows: int, target: str) -> None:
    """TooFewRowsError when an output has fewer synthetic rows than min_rows. The synthetic count is
    anonymized and is what the table would show; the source's count is never told."""
    if rows < min_rows:
        raise TooFewRowsError(
            f"{label}: the synthetic output has {rows} rows, fewer than min_rows={min_rows}; nothing was "
            f"written, {target} and its lineage are as before. Check the where filter (few or no matching "
            "rows) or lower min_rows (0 allows an empty table)"
        )


def _check_where(where: str | None, dialect: str, label: str) -> None:
    if where is not None:
        try:
            render_where(where, dialect)
        except WhereError as error:
            raise RefusedConfigError([f"{label}: {error}"]) from None


def _salt(given: bytes | None, env_name: str, label: str) -> bytes:
    if given is not None:
        return given
    value = os.environ.get(env_name)
    if not value:
        raise ConfigError(
            [
                f"{label}: the salt environment variable {env_name} is not set (or empty); set it to a long random secret"
            ]
        )
    return value.encode()


def _reflect(engine: sa.Engine, table: TableConfig, label: str) -> SourceTable:
    try:
        return reflect_table(engine, table.schema_name, table.table_name)
    except LookupError as error:
        raise PipelineError(f"{label}: {error}") from None


def _resolve_columns(
    source: SourceTable, effective: EffectiveTable, label: str
) -> tuple[list[str], list[str]]:
    """(AID columns, synthesized columns in source order), after checking the config against the source."""
    table = effective.table
    names = {c.name for c in source.columns}
    policies = table.column_policies
    problems = [f"column {c!r} in columns is not in the source" for c in policies if c not in names]
    problems += [f"AID column {c!r} is not in the source" for c in table.aid_columns if c not in names]
    synthesized = []
    for column in source.columns:
        if column.name in table.aid_columns:
            continue
        policy = policies.get(column.name, effective.other_columns)
        if policy is ColumnPolicy.DROP:
            continue
        if column.kind is None:
            problems.append(str(UnsupportedTypeError(source.qualified_name, column.name, column.type_sql)))
            continue
        synthesized.append(column.name)
    for column, expression in table.derived_columns.items():
        problems += _derive_input_problems(column, expression, synthesized)
    if not problems and not set(synthesized) - set(table.derived_columns):
        problems.append("no column left to synthesize after applying the column policies")
    if problems:
        available = ", ".join(f"{c.name} {c.type_sql}" for c in source.columns)
        raise PipelineError(f"{label}: " + "; ".join(problems) + f" (source columns: {available})")
    return list(table.aid_columns), synthesized


def _derive_input_problems(column: str, expression: str, synthesized: list[str]) -> list[str]:
    from syndiffix_core.derive import parse_expression

    return [
        f"derive of column {column!r} uses {name!r}, which is not a synthesized column of the source"
        for name in parse_expression(column, expression).references
        if name not in synthesized
    ]


def _outputs(table: TableConfig, synthesized: list[str], label: str) -> list[_Output]:
    targets = table.output_targets()
    if not table.column_sets:
        return [_Output(None, targets[None], synthesized)]
    outputs = []
    for name, column_set in table.column_sets.items():
        missing = [c for c in column_set.columns if c not in synthesized]
        if missing:
            raise PipelineError(
                f"{label}: column set {name!r} lists {missing}, which are not synthesized "
                f"(synthesized columns: {synthesized})"
            )
        outputs.append(_Output(name, targets[name], list(column_set.columns)))
    return outputs


def _check_target(
    target: sa.Engine, schema: str | None, source: SourceTable, outputs: Sequence[_Output], label: str
) -> None:
    planned = [(output.target, _target_columns(source, output.columns)) for output in outputs]
    try:
        check_target(target, schema, planned, source.dialect)
    except (TargetCheckError, IdentifierError) as error:
        raise PipelineError(f"{label}: {error}") from None


def _check_drift(
    target: sa.Engine,
    schema: str | None,
    source: SourceTable,
    outputs: Sequence[_Output],
    effective: EffectiveTable,
    label: str,
) -> None:
    if effective.on_schema_change is SchemaChangePolicy.IGNORE:
        return
    for output in outputs:
        previous = last_lineage(target, schema, output.target, output.column_set)
        if previous is None or previous["source_schema_hash"] == source.schema_hash():
            continue
        changes = _schema_changes(previous["source_schema"], source.schema_snapshot())
        raise SchemaDriftError(
            f"{label}: source table {source.qualified_name} changed since the run that wrote {output.target} "
            f"(run {previous['run_id']}, {previous['finished_at']}): {'; '.join(changes)}. "
            "Update the config if needed and set on_schema_change: ignore to accept the new schema"
        )


def _schema_changes(before: Sequence[Mapping[str, Any]], after: Sequence[Mapping[str, Any]]) -> list[str]:
    old = {c["name"]: c for c in before}
    new = {c["name"]: c for c in after}
    changes = [f"column {n!r} added ({new[n]['type']})" for n in new if n not in old]
    changes += [f"column {n!r} removed" for n in old if n not in new]
    for name in new.keys() & old.keys():
        if new[name]["type"] != old[name]["type"]:
            changes.append(f"column {name!r} type {old[name]['type']} -> {new[name]['type']}")
        elif new[name]["nullable"] != old[name]["nullable"]:
            changes.append(f"column {name!r} nullable {old[name]['nullable']} -> {new[name]['nullable']}")
    if not changes and [c["name"] for c in before] != [c["name"] for c in after]:
        changes.append("columns reordered")
    return changes


def _target_columns(source: SourceTable, names: Sequence[str]) -> list[TargetColumn]:
    columns = []
    for name in names:
        column = source.column(name)
        assert column.kind is not None
        columns.append(TargetColumn(name=name, sql_type=column.sql_type, kind=column.kind))
    return columns


def _qualified(schema: str | None, name: str) -> str:
    return f"{schema}.{name}" if schema else name


def _result(
    config: PipelineConfig,
    table: TableConfig,
    effective: EffectiveTable,
    source: SourceTable,
    target: sa.Engine,
    output: _Output,
    aids: list[str],
    run_id: str,
    **done: Any,
) -> TableRunResult:
    outputs = _target_columns(source, output.columns)
    return TableRunResult(
        table=table.display_name,
        source_table=source.qualified_name,
        target_table=_qualified(config.target_schema, output.target),
        column_set=output.column_set,
        rows_written=done.get("rows_written", 0),
        status=done.get("status", "dry_run"),
        lineage_id=done.get("lineage_id"),
        metrics=done.get("metrics"),
        timings=done.get("timings", {}),
        report_path=done.get("report_path"),
        risk=done.get("risk"),
        input_columns=[
            ColumnInfo(c.name, c.type_sql, c.kind.value if c.kind else None)
            for c in source.columns
            if c.name in output.columns or c.name in aids
        ],
        output_columns=[
            ColumnInfo(
                c.name, target_type_sql(c, source.dialect, target.dialect, config.target_schema), c.kind.value
            )
            for c in outputs
        ],
        engine=effective.engine,
        run_id=run_id,
        target_schema=config.target_schema,
        aid_columns=list(aids),
    )


def _synthesize_output(
    config: PipelineConfig,
    effective: EffectiveTable,
    source: SourceTable,
    source_url: sa.URL,
    target: sa.Engine,
    output: _Output,
    frame: pd.DataFrame,
    aids: list[str],
    salt: bytes,
    *,
    run_id: str,
    airflow: AirflowIds | None,
    started: dt.datetime,
    read_seconds: float,
    report_dir: Path | None,
    run_risk: RunRisk | None,
    source_risk_seconds: float,
    stage: _Stage,
    notify: Progress,
) -> TableRunResult:
    table = effective.table
    label = f"table {table.display_name}" + (f" column set {output.column_set}" if output.column_set else "")
    engine = get_engine(effective.engine)
    timings = {"read": read_seconds}

    clock = time.perf_counter()
    notify("synthesize", 0.0)
    identity = source.qualified_name + (f"#{output.column_set}" if output.column_set else "")
    derived = _derived_columns(table, frame[[*aids, *output.columns]], aids, label)
    result = engine.run(
        frame[[*aids, *derived.synthesized]],
        aid_columns=aids,
        salt=salt,
        params=effective.engine_params,
        table_identity=identity,
        # the engine's own stages fill the synthesize half of this output's progress (writing is the rest)
        progress=lambda stage, fraction: notify(f"synthesize: {stage}", 0.5 * fraction),
    )
    synthetic = result.frame
    if list(synthetic.columns) != derived.synthesized:
        raise PipelineError(
            f"{label}: engine {engine.name} returned columns {list(synthetic.columns)}, "
            f"expected {derived.synthesized}"
        )
    refuse_too_few_rows(
        label, len(synthetic), effective.min_rows, _qualified(config.target_schema, output.target)
    )
    synthetic = derived.complete(synthetic)
    timings["synthesize"] = time.perf_counter() - clock

    stage.name = "quality"
    clock = time.perf_counter()
    metrics = quality_metrics(
        frame[output.columns],
        synthetic,
        effective.quality,
        target_column=getattr(effective.engine_params, "target_column", None),
    )
    if metrics is not None and "evaluation" in result.metadata:
        # engines that evaluate themselves (dp_marginals: the showcase's k-tuple metrics) add a section
        metrics[f"{engine.name}_evaluation"] = result.metadata["evaluation"]
    if metrics is not None and "epsilon_spent" in result.metadata:
        from syndiffix_ops.report import dp_budget

        metrics["dp_budget"] = dp_budget(result.metadata, identity, effective.engine_params)
    timings["quality"] = time.perf_counter() - clock

    risk_metrics, risk_sections = None, []
    if run_risk is not None:
        stage.name = "risk"
        clock = time.perf_counter()
        risk_metrics, risk_section = run_risk.for_output(synthetic, output.columns)
        risk_sections.append(risk_section)
        timings["risk"] = source_risk_seconds + time.perf_counter() - clock

    def write_report() -> Path | None:
        if report_dir is None:
            return None
        stage.name = "report"
        clock = time.perf_counter()
        path = html_report(
            Path(report_dir),
            _qualified(config.target_schema, output.target),
            frame[output.columns],
            synthetic,
            metrics,
            sections=risk_sections,
            run_id=run_id,
            source_table=source.qualified_name,
            risk=risk_metrics,
        )
        timings["report"] = time.perf_counter() - clock
        return path

    gate = quality_gate(metrics, effective.quality)
    if gate is not None:
        write_report()  # the reviewer sees why the copy was not written
        stage.name = "quality"
        raise QualityGateError(f"{label}: {gate}; nothing written, the previous copy is kept")

    clock = time.perf_counter()
    notify("write", 0.5)
    columns = _target_columns(source, output.columns)
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
            engine_metadata=result.metadata,
            risk_metrics=risk_metrics,
        )
        insert_lineage(conn, config.target_schema, record)
        records.append(record)

    write_table(
        target,
        schema=config.target_schema,
        name=output.target,
        columns=columns,
        frame=synthetic,
        source_dialect=source.dialect,
        replace=effective.mode is WriteMode.REPLACE,
        before_commit=record_lineage,
        progress=lambda step: notify(f"write: {step}", 0.8 if step == "staged" else 0.9),
    )
    timings["write"] = time.perf_counter() - clock
    notify("write", 1.0)
    log.info(
        "%s: wrote %d synthetic rows to %s",
        label,
        len(synthetic),
        _qualified(config.target_schema, output.target),
    )

    report_path = write_report()
    return _result(
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


def quality_metrics(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    quality: Any = None,
    *,
    target_column: str | None = None,
) -> dict[str, Any]:
    """The report's metrics, scores and flags; `quality` is the config's `quality:` block (default: its
    defaults) and `target_column` an ML target whose prediction is scored too."""
    # Imported here: the report pulls in matplotlib, which a config validation or a DAG parse never needs.
    from syndiffix_ops.report import compute_quality
    from syndiffix_ops.verdict import QualityThresholds

    thresholds = QualityThresholds.from_config(quality) if quality is not None else None
    return compute_quality(original, synthetic, thresholds=thresholds, target_column=target_column)


def quality_gate(metrics: dict[str, Any] | None, quality: Any) -> str | None:
    """Why the output fails the config's quality gate, or None (the gate is off by default)."""
    from syndiffix_ops.verdict import QualityThresholds, verdict

    if metrics is None:
        return None
    return verdict(metrics["scores"], metrics["attention"], QualityThresholds.from_config(quality))


def html_report(
    directory: Path,
    table_name: str,
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    metrics: dict | None,
    sections: Sequence[Any] = (),
    *,
    run_id: str,
    source_table: str | None = None,
    risk: dict[str, Any] | None = None,
) -> Path:
    from syndiffix_ops.report import write_html_report

    directory.mkdir(parents=True, exist_ok=True)
    return write_html_report(
        directory,
        table_name=table_name,
        original=original,
        synthetic=synthetic,
        metrics=metrics,
        sections=sections,
        run_id=run_id,
        source_table=source_table,
        risk=risk,
    )


def _derived_columns(table: TableConfig, frame: pd.DataFrame, aids: list[str], label: str) -> DerivedColumns:
    """The output's derive rules checked against the source's types, before anything is synthesized."""
    from syndiffix_core.derive import DerivedColumns, DeriveError

    rules = {c: e for c, e in table.derived_columns.items() if c in frame.columns}
    try:
        return DerivedColumns(rules, frame, aids)
    except DeriveError as error:
        raise PipelineError(f"{label}: {error}") from None
