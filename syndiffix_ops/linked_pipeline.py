"""run_linked_set: read every table of a linked set, synthesize them together so their keys join, and
write them as one unit (parents first, see warehouse.write_set) with a lineage row per table.

The per-table checks are the pipeline's own (columns and types against the config, schema drift,
max_rows, the salt); what is new is the linking (syndiffix_core.linking), the multi-table write
(warehouse.write_set) and the link figures in the report (linked_report).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
import sqlalchemy as sa

from syndiffix_ops import run_checks, run_result
from syndiffix_ops.config import ConfigError, ConstraintsPolicy, EffectiveTable, PipelineConfig, WriteMode
from syndiffix_ops.connections import open_engines
from syndiffix_ops.dp_budget import DpRelease, plan_release
from syndiffix_ops.engines import get_engine, syndiffix_anonymization, with_kept_together
from syndiffix_ops.failed_runs import RunStage, record_failed_outputs, tracking
from syndiffix_ops.forked_call import ForkedCall
from syndiffix_ops.lineage import LineageRecord, SourceIdentity, ensure_lineage_table, insert_lineage
from syndiffix_ops.output_quality import html_report, quality_gate, quality_metrics
from syndiffix_ops.provenance import code_version, new_run_id
from syndiffix_ops.risk import OutputRiskFigures, RunRisk
from syndiffix_ops.run_errors import DpBudgetError, PipelineError, QualityGateError, RefusedConfigError
from syndiffix_ops.run_plan import LinkedSet, TableKeys
from syndiffix_ops.run_result import AirflowIds, PlannedOutput, Progress, TableRunResult
from syndiffix_ops.warehouse import SourceTable, ValueKind, check_row_limit, read_columns, target_type_sql
from syndiffix_ops.warehouse.types import key_value_kind
from syndiffix_ops.warehouse.write_set import ForeignKeyConstraint, TableWrite, write_linked_tables

log = logging.getLogger(__name__)

_KEY_KINDS = (ValueKind.INTEGER, ValueKind.STRING, ValueKind.UUID, ValueKind.UUID_BINARY)
_INTEGER_LIMITS = {"SMALLINT": 2**15 - 1, "INTEGER": 2**31 - 1, "BIGINT": 2**63 - 1}


@dataclass
class Member:
    """One table of the set as read: its config, source, columns and rows."""

    name: str
    effective: EffectiveTable
    source: SourceTable
    aids: list[str]
    output: PlannedOutput  # the written columns (attributes and keys), in source order
    keys: TableKeys
    identifiers: set[str]  # key columns that hold identifiers, left out of the quality figures
    frame: pd.DataFrame | None = None
    risk: RunRisk | None = None


def run_linked_set(
    config: PipelineConfig,
    linked_set: LinkedSet,
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
    """Synthesize and write one linked set; one result per table, parents first.

    The set is written as one unit, so a run that fails after the target is reachable leaves a `failed`
    lineage row for every table of the set (error class and stage), as run_table does for its outputs.
    """
    run_id = run_id or new_run_id()
    stage = RunStage()
    notify = tracking(progress or (lambda stage, fraction: None), stage)
    with opened_set(config, linked_set, source, target, run_id, airflow, stage, dry_run) as opened:
        source_engine, target_engine, sources = opened
        return _run_set(
            config,
            linked_set,
            source_engine,
            target_engine,
            sources,
            run_id=run_id,
            airflow=airflow,
            salt=salt,
            report_dir=report_dir,
            dry_run=dry_run,
            notify=notify,
            stage=stage,
        )


@contextlib.contextmanager
def opened_set(
    config: PipelineConfig,
    linked_set: LinkedSet,
    source: sa.Engine | str | None,
    target: sa.Engine | str | None,
    run_id: str,
    airflow: AirflowIds | None,
    stage: RunStage,
    dry_run: bool = False,
) -> Iterator[tuple[sa.Engine, sa.Engine, dict[str, SourceTable]]]:
    """The engines of a run of the set, and the source tables reflected so far (filled by the run). A
    failure after the target is reachable leaves a `failed` lineage row for every table of the set
    (error class and stage), as run_table does for its outputs."""
    started = dt.datetime.now(dt.UTC)
    sources: dict[str, SourceTable] = {}
    label = f"linked set {', '.join(linked_set.tables)}"
    with open_engines(source, target, config.source_url, config.target_url, label) as engines:
        try:
            yield (*engines, sources)
        except Exception as error:
            if not dry_run and not isinstance(error, RefusedConfigError):
                record_failed_outputs(
                    config,
                    [(config.effective(config.table(name)), sources.get(name)) for name in linked_set.tables],
                    engines[0].url,
                    engines[1],
                    label=label,
                    run_id=run_id,
                    airflow=airflow,
                    started=started,
                    error=error,
                    stage=stage.name,
                    skip=set(),
                )
            raise


def _run_set(
    config: PipelineConfig,
    linked_set: LinkedSet,
    source_engine: sa.Engine,
    target_engine: sa.Engine,
    sources: dict[str, SourceTable],
    *,
    run_id: str,
    airflow: AirflowIds | None,
    salt: bytes | None,
    report_dir: Path | None,
    dry_run: bool,
    notify: Progress,
    stage: RunStage,
) -> list[TableRunResult]:
    members, salt = open_members(
        config, linked_set, source_engine, target_engine, sources, salt=salt, dry_run=dry_run
    )
    if dry_run:
        return [_member_result(config, m, target_engine, run_id) for m in members]
    started = dt.datetime.now(dt.UTC)
    read_seconds = read_members(config, members, source_engine, notify)
    clock = time.perf_counter()
    synthetic, metadata = _synthesize(members, salt, notify)
    synthesize_seconds = time.perf_counter() - clock
    return finish_set(
        config,
        linked_set,
        members,
        synthetic,
        metadata,
        salt,
        source_engine.url,
        target_engine,
        run_id=run_id,
        airflow=airflow,
        started=started,
        timings={"read": read_seconds, "synthesize": synthesize_seconds},
        report_dir=report_dir,
        notify=notify,
        stage=stage,
    )


def open_members(
    config: PipelineConfig,
    linked_set: LinkedSet,
    source_engine: sa.Engine,
    target_engine: sa.Engine,
    sources: dict[str, SourceTable],
    *,
    salt: bytes | None,
    dry_run: bool = False,
) -> tuple[list[Member], bytes | None]:
    """The set's tables checked and reflected (not read yet), and the set's one salt (None: dry run)."""
    label = f"linked set {', '.join(linked_set.tables)}"
    for name in linked_set.tables:  # the checks of a single table, before anything is read or written
        table, table_label = config.table(name), f"table {name}"
        run_checks.check_where(table.where, source_engine.dialect.name, table_label)
        run_checks.refuse_overwriting_sources(config, table, source_engine, target_engine, table_label)
    members = []
    for name in linked_set.tables:
        members.append(_member(config, linked_set, name, source_engine, target_engine))
        sources[name] = members[-1].source
    salts = (
        {run_checks.run_salt(salt, m.effective.salt_env, f"table {m.name}") for m in members}
        if not dry_run
        else set()
    )
    if len(salts) > 1:
        raise ConfigError(
            [f"{label}: its tables use different salt_env variables; a linked set needs one salt"]
        )
    return members, (salts.pop() if salts else None)


def read_members(
    config: PipelineConfig, members: list[Member], source_engine: sa.Engine, notify: Progress
) -> float:
    """Read every member's rows (and its risk figures); the seconds it took."""
    clock = time.perf_counter()
    notify("read", 0.0)
    for number, member in enumerate(members):
        _read(config, member, source_engine)
        notify("read", (number + 1) / len(members))
    return time.perf_counter() - clock


def finish_set(
    config: PipelineConfig,
    linked_set: LinkedSet,
    members: list[Member],
    synthetic: dict[str, pd.DataFrame],
    metadata: dict[str, dict],
    salt: bytes,
    source_url: sa.URL,
    target_engine: sa.Engine,
    *,
    run_id: str,
    airflow: AirflowIds | None,
    started: dt.datetime,
    timings: dict[str, float],
    report_dir: Path | None,
    notify: Progress,
    stage: RunStage,
    before_commit: Callable[[sa.Connection], None] | None = None,
) -> list[TableRunResult]:
    """Check, measure and write the synthetic set (`synthetic`: each member's written columns) as one
    unit; `before_commit` runs in the write's transaction after the lineage rows."""
    for member in members:  # the set is written as one unit: one short table stops it
        run_checks.refuse_too_few_rows(
            f"table {member.name}",
            len(synthetic[member.name]),
            member.effective.min_rows,
            run_result.qualified_name(config.target_schema, member.output.target),
        )
    stage.name = "dp_budget"
    dp_releases = _dp_releases(config, linked_set, members, metadata, salt, source_url, target_engine)
    stage.name = "quality"  # _write measures quality (and may stop at a gate) before it reports "write"
    return _write(
        config,
        linked_set,
        members,
        synthetic,
        metadata,
        source_url,
        target_engine,
        run_id=run_id,
        airflow=airflow,
        started=started,
        timings=timings,
        report_dir=report_dir or config.report_dir,
        notify=notify,
        dp_releases=dp_releases,
        before_commit=before_commit,
    )


def _member(
    config: PipelineConfig,
    linked_set: LinkedSet,
    name: str,
    source_engine: sa.Engine,
    target_engine: sa.Engine,
) -> Member:
    table = config.table(name)
    effective = config.effective(table)
    label = f"table {name}"
    if effective.mode is WriteMode.APPEND:
        raise ConfigError(
            [
                f"{label}: mode append cannot be used in a linked set (fresh keys each run would not join the old rows)"
            ]
        )
    keys = linked_set.keys[name]
    key_columns = [
        *keys.primary_key,
        *(c for u in keys.unique for c in u),
        *(c for fk in keys.foreign_keys for c in fk.columns),
    ]
    source = _with_key_kinds(run_checks.reflect_source(source_engine, table, label), key_columns)
    aids, synthesized = run_checks.resolve_columns(source, effective, label)
    names = {c.name for c in source.columns}
    problems = [
        f"key column {c!r} is not in the source" for c in dict.fromkeys(key_columns) if c not in names
    ]
    problems += [
        f"key column {c!r} has type {source.column(c).type_sql}, for which no surrogate keys are made "
        "(integers, strings and UUIDs are)"
        for c in dict.fromkeys(key_columns)
        if c in names and source.column(c).kind not in _KEY_KINDS
    ]
    if problems:
        raise PipelineError(f"{label}: " + "; ".join(problems))
    written = [c.name for c in source.columns if c.name in synthesized or c.name in key_columns]
    output = PlannedOutput(None, table.target_name, written)
    run_checks.check_output_target(target_engine, config.target_schema, source, [output], label)
    run_checks.check_drift(target_engine, config.target_schema, source, [output], effective, label)
    if effective.max_rows is not None:
        check_row_limit(source_engine, source, table.where, effective.max_rows)
    return Member(name, effective, source, aids, output, keys, linked_set.identifier_columns(name))


def _with_key_kinds(source: SourceTable, key_columns: list[str]) -> SourceTable:
    """The source with its key columns' kinds as keys have them: a uuid or BINARY(16) key is read as
    UUID text for the linking (it gets fresh UUIDs, never synthesized values)."""
    columns = tuple(
        dataclasses.replace(c, kind=key_value_kind(c.sql_type)) if c.name in key_columns else c
        for c in source.columns
    )
    return dataclasses.replace(source, columns=columns)


def _read(config: PipelineConfig, member: Member, source_engine: sa.Engine) -> None:
    table = member.effective.table
    member.frame = read_columns(
        source_engine,
        member.source,
        member.output.columns,
        aid_columns=member.aids,
        where=table.where,
        chunk_rows=member.effective.read_chunk_rows,
        max_rows=member.effective.max_rows,
    )
    member.risk = RunRisk.of_frame(
        config,
        table,
        member.frame,
        member.aids,
        member.output.columns,
        source_table=member.source.qualified_name,
        chunk_rows=member.effective.read_chunk_rows,
    )


def _synthesize(members: list[Member], salt: bytes, notify: Progress) -> tuple[dict[str, pd.DataFrame], dict]:
    from syndiffix_core.linking import synthesize_linked

    metadata: dict[str, dict[str, Any]] = {}
    with linking_errors(members):
        synthetic = synthesize_linked(
            linked_tables(members),
            salt=salt,
            synthesize_table=table_synthesizer(members, salt, notify, metadata),
        )
    return synthetic, metadata


@contextlib.contextmanager
def linking_errors(members: list[Member]) -> Iterator[None]:
    """The core's LinkingError as a PipelineError naming the set."""
    from syndiffix_core.linking import LinkingError

    try:
        yield
    except LinkingError as error:
        raise PipelineError(f"linked set {', '.join(m.name for m in members)}: {error}") from None


def table_synthesizer(
    members: list[Member], salt: bytes, notify: Progress, metadata: dict[str, dict[str, Any]]
) -> Callable[..., pd.DataFrame]:
    """The core's `synthesize_table` for the members: each one's engine, parameters and derived
    columns; each table's engine metadata goes into `metadata`."""
    by_name = {m.name: m for m in members}

    def synthesize_table(
        name: str, frame: pd.DataFrame, aids: list[str], pairs: tuple[tuple[str, str], ...]
    ) -> pd.DataFrame:
        member = by_name[name]
        engine = get_engine(member.effective.engine)
        notify(f"synthesize {name}", 0.0)
        derived = run_checks.derive_rules(member.effective.table, frame, aids, f"table {name}")
        result = engine.run(
            frame[[*aids, *derived.synthesized]],
            aid_columns=aids,
            salt=salt,
            # a derived column is computed, not clustered: its pairs go
            params=with_kept_together(
                member.effective.engine_params,
                [pair for pair in pairs if set(pair) <= set(derived.synthesized)],
            ),
            table_identity=_noise_identity(member),
        )
        metadata[name] = result.metadata
        return derived.complete(result.frame)

    return synthesize_table


def linked_tables(members: list[Member]) -> dict[str, Any]:
    """The core's LinkedTable of each member (read already), parents first."""
    return {m.name: _linked_table(m) for m in members}


def _linked_table(member: Member):
    from syndiffix_core.linking import ForeignKey, LinkedTable, OrphanPolicy

    keys = member.keys
    limits = {}
    for column in {*keys.primary_key, *(c for u in keys.unique for c in u)}:
        sql_type = member.source.column(column).sql_type
        if member.source.column(column).kind is ValueKind.STRING and getattr(sql_type, "length", None):
            limits[column] = int(sql_type.length)
        elif member.source.column(column).kind is ValueKind.INTEGER:
            limits[column] = _INTEGER_LIMITS.get(type(sql_type.as_generic()).__name__.upper(), 2**31 - 1)
    return LinkedTable(
        member.name,
        member.frame,
        primary_key=keys.primary_key,
        aid_columns=tuple(member.aids),
        unique=keys.unique,
        foreign_keys=tuple(
            ForeignKey(
                fk.columns,
                fk.parent,
                fk.parent_columns,
                OrphanPolicy(fk.on_orphan.value),
                fk.context,
                fk.aggregates,
                fk.entity,
                nullable=fk.nullable,
            )
            for fk in keys.foreign_keys
        ),
        key_limits=limits,
        anonymization=syndiffix_anonymization(member.effective.engine_params),
    )


def _write(
    config: PipelineConfig,
    linked_set: LinkedSet,
    members: list[Member],
    synthetic: dict[str, pd.DataFrame],
    metadata: dict[str, dict],
    source_url: sa.URL,
    target: sa.Engine,
    *,
    run_id: str,
    airflow: AirflowIds | None,
    started: dt.datetime,
    timings: dict[str, float],
    report_dir: Path | None,
    notify: Progress,
    dp_releases: dict[str, DpRelease],
    before_commit: Callable[[sa.Connection], None] | None = None,
) -> list[TableRunResult]:
    clock = time.perf_counter()
    sketched = {m.name: m for m in members if m.risk is not None}
    # the risk figures in a child, beside the quality figures
    pending = _output_risk(list(sketched.values()), synthetic) if sketched else None
    with pending if pending is not None else contextlib.nullcontext():
        per_table = _member_figures(members, synthetic, metadata, dp_releases, linked_set)
        for name, figures in (pending.result() if pending is not None else {}).items():
            per_table[name]["risk"] = figures.record
            per_table[name]["risk_section"] = sketched[name].risk.output_section(figures)
    timings["quality"] = time.perf_counter() - clock
    _gate(
        linked_set,
        members,
        per_table,
        lambda: _reports(config, members, synthetic, per_table, report_dir, run_id),
    )
    target_names = {m.name: m.output.target for m in members}
    writes = [
        TableWrite(
            name=m.output.target,
            columns=run_result.target_columns(m.source, m.output.columns),
            frame=synthetic[m.name],
            source_dialect=m.source.dialect,
            primary_key=m.keys.primary_key,
            unique=m.keys.unique,
            foreign_keys=tuple(
                ForeignKeyConstraint(fk.columns, target_names[fk.parent], fk.parent_columns)
                for fk in m.keys.foreign_keys
            ),
            not_null=m.keys.not_null,
        )
        for m in members
    ]
    records: list[LineageRecord] = []

    def record_lineage(conn: sa.Connection) -> None:
        for member in members:
            record = _lineage_record(
                config,
                linked_set,
                member,
                synthetic[member.name],
                metadata,
                per_table,
                source_url,
                target,
                run_id=run_id,
                airflow=airflow,
                started=started,
            )
            insert_lineage(conn, config.target_schema, record)
            records.append(record)
        if before_commit is not None:
            before_commit(conn)

    clock = time.perf_counter()
    notify("write", 0.5)
    ensure_lineage_table(target, config.target_schema)
    write_linked_tables(
        target,
        schema=config.target_schema,
        tables=writes,
        constraints=config.constraints is ConstraintsPolicy.COPY,
        before_commit=record_lineage,
    )
    timings["write"] = time.perf_counter() - clock
    notify("write", 1.0)
    report_paths = _reports(config, members, synthetic, per_table, report_dir, run_id)
    results = []
    for member, record in zip(members, records, strict=True):
        log.info(
            "%s: wrote %d synthetic rows (linked set %s)",
            member.name,
            len(synthetic[member.name]),
            linked_set.name,
        )
        results.append(
            _member_result(
                config,
                member,
                target,
                run_id,
                rows_written=len(synthetic[member.name]),
                status="success",
                lineage_id=record.lineage_id,
                metrics=per_table[member.name]["metrics"],
                timings=timings,
                report_path=report_paths.get(member.name),
                risk=per_table[member.name]["risk"],
            )
        )
    return results


def _member_figures(
    members: list[Member],
    synthetic: dict[str, pd.DataFrame],
    metadata: dict[str, dict],
    dp_releases: dict[str, DpRelease],
    linked_set: LinkedSet,
) -> dict[str, dict[str, Any]]:
    """Each member's quality figures, links and DP budget (its risk figures come from `_output_risk`)."""
    from syndiffix_ops.linked_report import link_metrics
    from syndiffix_ops.report import dp_budget

    sources = {m.name: m.frame for m in members}
    links = link_metrics(linked_set, sources, synthetic, {m.name: m.aids for m in members})
    per_table: dict[str, dict[str, Any]] = {}
    for member in members:
        attributes = [c for c in member.output.columns if c not in member.identifiers]
        metrics = (
            quality_metrics(
                member.frame[attributes], synthetic[member.name][attributes], member.effective.quality
            )
            if attributes
            else {}
        )
        metrics["links"] = links.get(member.name, {})
        release = dp_releases.get(member.name)
        if release is not None:
            metrics["dp_budget"] = {
                **dp_budget(metadata[member.name], _noise_identity(member), member.effective.engine_params),
                **release.report_fields(),
            }
        per_table[member.name] = {"metrics": metrics, "risk": None, "risk_section": None, "dp": release}
    return per_table


def _output_risk(members: list[Member], synthetic: dict[str, pd.DataFrame]) -> ForkedCall:
    """The risk figures (numbers) of `members` (those with source sketches), computed in one forked
    child (forked_call) while the run computes the quality figures; their sections are drawn after."""
    return ForkedCall(partial(_risk_figures, members, synthetic), "the risk figures of the set's tables")


def _risk_figures(members: list[Member], synthetic: dict[str, pd.DataFrame]) -> dict[str, OutputRiskFigures]:
    return {m.name: m.risk.output_figures(synthetic[m.name], m.output.columns) for m in members}


def _noise_identity(member: Member) -> str:
    return member.source.qualified_name + "#linked"


def _dp_releases(
    config: PipelineConfig,
    linked_set: LinkedSet,
    members: list[Member],
    metadata: dict[str, dict],
    salt: bytes,
    source_url: sa.URL,
    target: sa.Engine,
) -> dict[str, DpRelease]:
    """The DP releases among the members (syndiffix_ops.dp_budget), each with its identity's total; one
    over the dp: budget stops the whole set when dp.refuse_over_budget is true."""
    releases = {}
    for member in members:
        if "epsilon_spent" not in metadata.get(member.name, {}):
            continue
        release = plan_release(
            target,
            config.target_schema,
            salt=salt,
            source=SourceIdentity.from_url(source_url, member.source.qualified_name),
            aid_columns=member.aids,
            metadata=metadata[member.name],
            budget=config.dp,
        )
        if release.over_budget and config.dp.refuse_over_budget:
            raise DpBudgetError(
                release.refusal(f"table {member.name} of linked set {', '.join(linked_set.tables)}")
            )
        if release.over_budget:
            log.warning("table %s: over the DP budget: %s", member.name, release.over_budget)
        releases[member.name] = release
    return releases


def _gate(linked_set: LinkedSet, members: list[Member], per_table: dict[str, dict], write_reports) -> None:
    """The quality gate of each member, with its own effective thresholds: one member that fails it stops
    the whole set (its tables are written together), after the reports show the reviewer why."""
    for member in members:
        metrics = per_table[member.name]["metrics"]
        why = quality_gate(metrics, member.effective.quality) if "scores" in metrics else None
        if why is not None:
            write_reports()
            raise QualityGateError(
                f"table {member.name} of linked set {', '.join(linked_set.tables)}: {why}; "
                "nothing of the set written, the previous copies are kept"
            )


def _lineage_record(
    config,
    linked_set,
    member,
    synthetic,
    metadata,
    per_table,
    source_url,
    target,
    *,
    run_id,
    airflow,
    started,
) -> LineageRecord:
    source = member.source
    columns = run_result.target_columns(source, member.output.columns)
    return LineageRecord(
        run_id=run_id,
        target_table=member.output.target,
        column_set=None,
        source=SourceIdentity.from_url(source_url, source.qualified_name),
        columns=[
            {
                "name": c.name,
                "source_type": source.column(c.name).type_sql,
                "target_type": target_type_sql(c, source.dialect, target.dialect),
                "kind": c.kind.value,
            }
            for c in columns
        ],
        aid_columns=member.aids,
        engine=member.effective.engine,
        package_version=code_version().package_version,
        code_commit=code_version().commit,
        parameters={
            **run_result.run_parameters(member.effective),
            "linked_set": linked_set.describe(),
            "constraints": config.constraints.value,
        },
        config_hash=config.config_hash(),
        source_schema_hash=source.schema_hash(),
        source_schema=source.schema_snapshot(),
        synthetic_rows=len(synthetic),
        started_at=started,
        finished_at=dt.datetime.now(dt.UTC),
        airflow_dag_id=airflow.dag_id if airflow else None,
        airflow_task_id=airflow.task_id if airflow else None,
        airflow_run_id=airflow.run_id if airflow else None,
        quality_metrics=per_table[member.name]["metrics"],
        engine_metadata=metadata.get(member.name, {}),
        risk_metrics=per_table[member.name]["risk"],
        **(per_table[member.name]["dp"].lineage_fields() if per_table[member.name]["dp"] else {}),
    )


def _reports(config, members, synthetic, per_table, report_dir, run_id) -> dict[str, Path]:
    if report_dir is None:
        return {}
    from syndiffix_ops.linked_report import links_section

    paths = {}
    for member in members:
        attributes = [c for c in member.output.columns if c not in member.identifiers]
        paths[member.name] = html_report(
            Path(report_dir),
            run_result.qualified_name(config.target_schema, member.output.target),
            member.frame[attributes],
            synthetic[member.name][attributes],
            per_table[member.name]["metrics"],
            sections=[
                links_section(member.name, per_table[member.name]["metrics"]["links"]),
                *filter(None, [per_table[member.name]["risk_section"]]),
            ],
            run_id=run_id,
            source_table=member.source.qualified_name,
            risk=per_table[member.name]["risk"],
        )
    return paths


def _member_result(
    config: PipelineConfig, member: Member, target: sa.Engine, run_id: str, **outcome: Any
) -> TableRunResult:
    """A member's run result; without `outcome` (rows written, status, ...) the one of a dry run."""
    return run_result.table_run_result(
        config,
        member.effective.table,
        member.effective,
        member.source,
        target,
        member.output,
        member.aids,
        run_id,
        **outcome,
    )
