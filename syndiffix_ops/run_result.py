"""What a run reports per output: its planned columns, its result and the parameters lineage records.

Shared by run_table (one table) and run_linked_set (a linked set): both plan outputs, build results
and record the same run parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from syndiffix_ops.config import EffectiveTable, PipelineConfig, TableConfig
from syndiffix_ops.engines import get_engine, resolved_params
from syndiffix_ops.warehouse import SourceTable, TargetColumn, target_type_sql

Progress = Callable[[str, float], None]  # (stage, fraction done)


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


@dataclass(frozen=True)
class PlannedOutput:
    column_set: str | None
    target: str
    columns: list[str]


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


def target_columns(source: SourceTable, names: Sequence[str]) -> list[TargetColumn]:
    columns = []
    for name in names:
        column = source.column(name)
        assert column.kind is not None
        columns.append(TargetColumn(name=name, sql_type=column.sql_type, kind=column.kind))
    return columns


def qualified_name(schema: str | None, name: str) -> str:
    return f"{schema}.{name}" if schema else name


def table_run_result(
    config: PipelineConfig,
    table: TableConfig,
    effective: EffectiveTable,
    source: SourceTable,
    target: sa.Engine,
    output: PlannedOutput,
    aids: list[str],
    run_id: str,
    **done: Any,
) -> TableRunResult:
    outputs = target_columns(source, output.columns)
    return TableRunResult(
        table=table.display_name,
        source_table=source.qualified_name,
        target_table=qualified_name(config.target_schema, output.target),
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
