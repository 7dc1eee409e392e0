"""run_table: read -> synthesize -> write -> lineage -> report, for one configured table.

The one function the CLI and the Airflow operators call. Everything that can be checked before data
moves is checked first (columns and types against the config, schema drift against lineage, max_rows,
the salt), so a misconfigured table fails in seconds with a message naming the table and column.
The source is read once; each of its outputs (the table, or each column set) is then synthesized,
reviewed and written by table_output.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import sqlalchemy as sa

from syndiffix_ops.config import PipelineConfig, TableConfig
from syndiffix_ops.connections import open_engines
from syndiffix_ops.failed_runs import RunStage, record_failed_outputs, tracking
from syndiffix_ops.lineage import ensure_lineage_table
from syndiffix_ops.provenance import new_run_id
from syndiffix_ops.risk import RunRisk, column_sets
from syndiffix_ops.run_checks import (
    check_drift,
    check_output_target,
    check_where,
    reflect_source,
    refuse_overwriting_sources,
    resolve_columns,
    run_salt,
)
from syndiffix_ops.run_errors import PipelineError, RefusedConfigError
from syndiffix_ops.run_result import AirflowIds, PlannedOutput, Progress, TableRunResult, table_run_result
from syndiffix_ops.source_figures import PendingSourceFigures
from syndiffix_ops.table_output import SourceRows, TableRun, run_output
from syndiffix_ops.warehouse import SourceTable, check_row_limit, read_columns


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
                run = TableRun(
                    config=config,
                    effective=effective,
                    source=source_table,
                    source_url=source_engine.url,
                    target=target_engine,
                    aids=aids,
                    salt=salt_bytes,
                    run_id=run_id,
                    airflow=airflow,
                    started=started,
                    read_seconds=read_seconds,
                    report_dir=report_dir,
                    source_figures=source_figures,
                    stage=stage,
                )
                source_rows = SourceRows(frame)
                del frame  # held by source_rows alone, so that the last output's engine can free it
                for number, output in enumerate(outputs):
                    results.append(
                        run_output(
                            run,
                            output,
                            source_rows,
                            number=number,
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
