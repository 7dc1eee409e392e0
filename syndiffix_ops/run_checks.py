"""The checks that stop a run before it writes, each failing with one line naming the table.

Before data moves: the `where` expression, outputs that would overwrite a source, the salt, the source
table and its columns against the config, the target's existing tables, schema drift since the last
run, derive rules against the source's types. After synthesis: too few rows to write.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
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
    lineage_name_conflicts,
    sqlite_schema_problem,
)
from syndiffix_ops.connections import connect
from syndiffix_ops.lineage import last_lineage
from syndiffix_ops.run_errors import PipelineError, RefusedConfigError, SchemaDriftError, TooFewRowsError
from syndiffix_ops.run_result import PlannedOutput, qualified_name, target_columns
from syndiffix_ops.warehouse import IdentifierError, SourceTable, UnsupportedTypeError, reflect_table
from syndiffix_ops.warehouse.locations import overlaps
from syndiffix_ops.warehouse.target_checks import TargetCheckError, check_target
from syndiffix_ops.where import WhereError, render_where

if TYPE_CHECKING:
    from syndiffix_core.derive import DerivedColumns


def check_where(where: str | None, dialect: str, label: str) -> None:
    if where is not None:
        try:
            render_where(where, dialect)
        except WhereError as error:
            raise RefusedConfigError([f"{label}: {error}"]) from None


def refuse_overwriting_sources(
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
                f"output {qualified_name(*output)} is the source table {qualified_name(*overwritten)} "
                "(the same table in the same database); choose another target name or target_schema"
            )
    if problems:
        raise RefusedConfigError([f"{label}: {problem}; nothing was written" for problem in problems])


def run_salt(given: bytes | None, env_name: str, label: str) -> bytes:
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


def reflect_source(engine: sa.Engine, table: TableConfig, label: str) -> SourceTable:
    try:
        return reflect_table(engine, table.schema_name, table.table_name)
    except LookupError as error:
        raise PipelineError(f"{label}: {error}") from None


def resolve_columns(
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


def check_output_target(
    target: sa.Engine, schema: str | None, source: SourceTable, outputs: Sequence[PlannedOutput], label: str
) -> None:
    planned = [(output.target, target_columns(source, output.columns)) for output in outputs]
    try:
        check_target(target, schema, planned, source.dialect)
    except (TargetCheckError, IdentifierError) as error:
        raise PipelineError(f"{label}: {error}") from None


def check_drift(
    target: sa.Engine,
    schema: str | None,
    source: SourceTable,
    outputs: Sequence[PlannedOutput],
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


def refuse_too_few_rows(label: str, rows: int, min_rows: int, target: str) -> None:
    """TooFewRowsError when an output has fewer synthetic rows than min_rows. The synthetic count is
    anonymized and is what the table would show; the source's count is never told."""
    if rows < min_rows:
        raise TooFewRowsError(
            f"{label}: the synthetic output has {rows} rows, fewer than min_rows={min_rows}; nothing was "
            f"written, {target} and its lineage are as before. Check the where filter (few or no matching "
            "rows) or lower min_rows (0 allows an empty table)"
        )


def derive_rules(table: TableConfig, frame: pd.DataFrame, aids: list[str], label: str) -> DerivedColumns:
    """The output's derive rules checked against the source's types, before anything is synthesized."""
    from syndiffix_core.derive import DerivedColumns, DeriveError

    rules = {c: e for c, e in table.derived_columns.items() if c in frame.columns}
    try:
        return DerivedColumns(rules, frame, aids)
    except DeriveError as error:
        raise PipelineError(f"{label}: {error}") from None
