"""Failed runs in lineage: where a run stopped, and a `failed` row for each output it did not write.

An auditor reading lineage sees every attempt, not only the ones that wrote a table: the error class,
the stage it stopped in and a message with no values or counts in it (provenance.safe_error_message).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from syndiffix_ops.config import EffectiveTable, PipelineConfig
from syndiffix_ops.lineage import LineageRecord, SourceIdentity, record_failure
from syndiffix_ops.provenance import code_version, safe_error_message
from syndiffix_ops.run_result import AirflowIds, Progress, qualified_name, run_parameters
from syndiffix_ops.warehouse import SourceTable

log = logging.getLogger(__name__)


@dataclass
class RunStage:
    """Where a run is, so a failure can be recorded with the stage it stopped in."""

    name: str = "check"


def tracking(notify: Progress, stage: RunStage) -> Progress:
    """`notify`, also remembering in `stage` the stage each report names ("synthesize: trees" and
    "synthesize orders" are both "synthesize")."""

    def report(name: str, fraction: float) -> None:
        stage.name = name.split(":")[0].split(" ")[0]
        notify(name, fraction)

    return report


def record_failed_outputs(
    config: PipelineConfig,
    tables: Sequence[tuple[EffectiveTable, SourceTable | None]],
    source_url: sa.URL,
    target: sa.Engine,
    *,
    label: str,
    run_id: str,
    airflow: AirflowIds | None,
    started: dt.datetime,
    error: Exception,
    stage: str,
    skip: set[tuple[str | None, str]],
) -> None:
    """One `failed` lineage row per output of `tables` (each with its source, None when not reflected
    yet) that the run did not write, in one write. Best effort: when the target itself is what failed,
    the error is logged and the original error stands."""
    version = code_version()
    finished = dt.datetime.now(dt.UTC)
    records = [
        LineageRecord(
            run_id=run_id,
            target_table=target_name,
            column_set=column_set,
            source=SourceIdentity.from_url(
                source_url, source.qualified_name if source else effective.table.source
            ),
            columns=[],
            aid_columns=list(effective.table.aid_columns),
            engine=effective.engine,
            package_version=version.package_version,
            code_commit=version.commit,
            parameters=run_parameters(effective),
            config_hash=config.config_hash(),
            source_schema_hash=source.schema_hash() if source else "",
            source_schema=source.schema_snapshot() if source else [],
            synthetic_rows=0,
            started_at=started,
            finished_at=finished,
            status="failed",
            airflow_dag_id=airflow.dag_id if airflow else None,
            airflow_task_id=airflow.task_id if airflow else None,
            airflow_run_id=airflow.run_id if airflow else None,
            error_class=f"{type(error).__module__}.{type(error).__qualname__}",
            error_stage=stage,
            error_message=safe_error_message(error),
        )
        for effective, source in tables
        for column_set, target_name in effective.table.output_targets().items()
        if (column_set, qualified_name(config.target_schema, target_name)) not in skip
    ]
    try:
        record_failure(target, config.target_schema, records)
    except Exception as lineage_error:
        log.warning(
            "%s: could not record the failed run in lineage (%s)", label, type(lineage_error).__name__
        )
