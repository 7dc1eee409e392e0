"""A linked set run step by step, each step its own process (in Airflow, each a task of the set's group).

- `stage_linked_table`, one per table, parents first: synthesizes the table with its link columns and
  links it to its parents' synthetic rows, which the parents' steps staged in the target
  (warehouse.staged_frames); then stages its own synthetic rows, link columns included, for its
  children and for the publish step. A retried step finds its parents' rows there and redoes only
  itself.
- `publish_linked_set`: writes every table of the set from the staged rows as one unit with its lineage
  rows, the quality figures and reports, exactly as `run_linked_set` writes it, and removes the staged
  rows in the same transaction. A failure leaves the previous set in place.
- `discard_linked_set`: removes what a run staged for a set (after a failure; nothing is left after a
  publish).

Every step reads the set's source tables: a table's synthesis needs its children's rows (for its link
statistics) and its parents' (for context and entities), and the checks of the whole set. A step is a
function of the source rows and the salt, so the set comes out as `run_linked_set` makes it in one
call, as long as the source does not change between the steps. Only synthetic rows are staged.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pandas as pd
import sqlalchemy as sa

from syndiffix_ops.config import PipelineConfig
from syndiffix_ops.failed_runs import RunStage, tracking
from syndiffix_ops.lineage import plain_json
from syndiffix_ops.linked_pipeline import (
    finish_set,
    linked_tables,
    linking_errors,
    open_members,
    opened_set,
    read_members,
    table_synthesizer,
)
from syndiffix_ops.provenance import new_run_id
from syndiffix_ops.run_errors import PipelineError
from syndiffix_ops.run_plan import LinkedSet
from syndiffix_ops.run_result import AirflowIds, Progress, TableRunResult
from syndiffix_ops.warehouse.staged_frames import StagedKey, discard_staged, load_staged, stage_frame


def stage_linked_table(
    config: PipelineConfig,
    linked_set: LinkedSet,
    table: str,
    *,
    run: str,
    source: sa.Engine | str | None = None,
    target: sa.Engine | str | None = None,
    run_id: str | None = None,
    airflow: AirflowIds | None = None,
    salt: bytes | None = None,
    progress: Progress | None = None,
) -> int:
    """Synthesize `table` of the set, link it to its parents staged by this `run`, and stage it; the
    rows staged. Its parents' steps must have run in this `run` (`LinkedSet.parents`)."""
    if not linked_set.runs_in_steps:
        raise PipelineError(
            f"linked set {', '.join(linked_set.tables)}: its foreign keys form a cycle, so it runs in one step"
        )
    stage = RunStage()
    notify = tracking(progress or (lambda stage, fraction: None), stage)
    with opened_set(config, linked_set, source, target, run_id or new_run_id(), airflow, stage) as opened:
        source_engine, target_engine, sources = opened
        members, salt = open_members(config, linked_set, source_engine, target_engine, sources, salt=salt)
        read_members(config, members, source_engine, notify)
        from syndiffix_core.linking import link_member, prepare_linked, synthesize_member

        clock = time.perf_counter()
        metadata: dict[str, dict] = {}
        with linking_errors(members):
            prepared = prepare_linked(linked_tables(members), salt=salt)
            synthetic = {
                parent: _staged(target_engine, config, StagedKey(run, linked_set.name, parent))[0]
                for parent in linked_set.parents(table)
            }
            synthetic[table] = synthesize_member(
                prepared, table, table_synthesizer(members, salt, notify, metadata)
            )
            stage.name = "link"
            linked = link_member(prepared, table, synthetic)
        stage.name = "stage"
        document = {"engine_metadata": plain_json(metadata[table]), "seconds": time.perf_counter() - clock}
        stage_frame(
            target_engine, config.target_schema, StagedKey(run, linked_set.name, table), linked, document
        )
        return len(linked)


def publish_linked_set(
    config: PipelineConfig,
    linked_set: LinkedSet,
    *,
    run: str,
    source: sa.Engine | str | None = None,
    target: sa.Engine | str | None = None,
    run_id: str | None = None,
    airflow: AirflowIds | None = None,
    salt: bytes | None = None,
    report_dir: Path | None = None,
    progress: Progress | None = None,
) -> list[TableRunResult]:
    """Write the set from the rows its steps staged in this `run`, as one unit; one result per table,
    parents first. The staged rows go in the same transaction."""
    run_id = run_id or new_run_id()
    stage = RunStage()
    notify = tracking(progress or (lambda stage, fraction: None), stage)
    with opened_set(config, linked_set, source, target, run_id, airflow, stage) as opened:
        source_engine, target_engine, sources = opened
        members, salt = open_members(config, linked_set, source_engine, target_engine, sources, salt=salt)
        started = dt.datetime.now(dt.UTC)
        read_seconds = read_members(config, members, source_engine, notify)
        from syndiffix_core.linking import output_frame

        tables = linked_tables(members)
        staged = {
            m.name: _staged(target_engine, config, StagedKey(run, linked_set.name, m.name)) for m in members
        }
        synthetic = {name: output_frame(tables[name], frame) for name, (frame, _) in staged.items()}
        return finish_set(
            config,
            linked_set,
            members,
            synthetic,
            {name: document["engine_metadata"] for name, (_, document) in staged.items()},
            salt,
            source_engine.url,
            target_engine,
            run_id=run_id,
            airflow=airflow,
            started=started,
            timings={"read": read_seconds, "synthesize": sum(d["seconds"] for _, d in staged.values())},
            report_dir=report_dir,
            notify=notify,
            stage=stage,
            before_commit=lambda conn: discard_staged(conn, config.target_schema, run, linked_set.name),
        )


def discard_linked_set(target: sa.Engine, schema: str | None, linked_set: str, *, run: str) -> None:
    """Remove the rows `run` staged for the set named `linked_set` (its first table)."""
    with target.begin() as conn:
        discard_staged(conn, schema, run, linked_set)


def _staged(target: sa.Engine, config: PipelineConfig, key: StagedKey) -> tuple[pd.DataFrame, dict]:
    staged = load_staged(target, config.target_schema, key)
    if staged is None:
        raise PipelineError(
            f"linked set {key.linked_set}: nothing staged for table {key.table} in this run; run its step "
            "first (in Airflow: clear the set's task group, not only the failed task)"
        )
    return staged
