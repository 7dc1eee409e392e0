"""OpenLineage datasets and facets of SyntheticTableOperator's task: START, COMPLETE and FAIL events.

The tables a task reads and writes are known from its config before it runs (every table of a linked
set, when the task writes one; a linked set's step reads every table of the set and writes none of its
targets), so START and FAIL events carry the input and output datasets too;
COMPLETE adds what only the run knows (schemas as written, column lineage, rows written, lineage ids).
Two facets of this provider:

- run facet `syndiffix`: engine and effective engine parameters (a linked set's first table's), each
  table's engine, table (a linked set's first, or its step's table) and column set, the tables of the
  linked set, the lineage ids of the tables written, the epsilon spent (dp_marginals; None when no
  table has a DP budget) and a salt fingerprint (see syndiffix_ops.fingerprint), never the salt;
- input dataset facet `syndiffix_aidColumns`: the AID columns read to protect entities, never written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import attr
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import (
    DatasetFacet,
    RunFacet,
    column_lineage_dataset,
    output_statistics_output_dataset,
    schema_dataset,
)

from syndiffix_ops.airflow.operators import authority, target_parts
from syndiffix_ops.airflow.provider import DOCUMENTATION_URL

if TYPE_CHECKING:
    import sqlalchemy as sa

    from syndiffix_ops.run_result import ColumnInfo, TableRunResult


@attr.define
class SyndiffixRunFacet(RunFacet):
    engine: str
    parameters: dict[str, Any]
    table: str
    columnSet: str | None = None
    engines: dict[str, str] = attr.field(factory=dict)
    linkedSet: list[str] = attr.field(factory=list)
    lineageIds: list[str] = attr.field(factory=list)
    epsilonSpent: float | None = None
    saltFingerprint: str | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{DOCUMENTATION_URL}#SyndiffixRunFacet"


@attr.define
class AidColumnsDatasetFacet(DatasetFacet):
    columns: list[str]
    written: bool = False

    @staticmethod
    def _get_schema() -> str:
        return f"{DOCUMENTATION_URL}#AidColumnsDatasetFacet"


@dataclass(frozen=True)
class PlannedTable:
    """One source table a task reads and the target tables it writes from it (one per column set)."""

    name: str  # the config entry's name
    source_schema: str | None
    source_table: str
    targets: list[str]
    aid_columns: list[str]
    epsilon_per_output: float | None
    engine: str


@dataclass(frozen=True)
class TaskPlan:
    """What a task reads and writes, from its config and connections, before anything runs: one table,
    or every table of its linked set (parents first). Engine and parameters are the first table's."""

    source_url: sa.URL
    target_url: sa.URL
    tables: list[PlannedTable]
    target_schema: str | None
    engine: str
    parameters: dict[str, Any]
    column_set: str | None
    salt_fingerprint: str | None
    step_table: str | None = None  # a linked set's step: it reads the set's sources and stages this table


def on_start(plan: TaskPlan) -> OperatorLineage:
    inputs = [
        _input_dataset(plan.source_url, t.source_schema, t.source_table, t.aid_columns, columns=None)
        for t in plan.tables
    ]
    return OperatorLineage(
        inputs=list({i.name: i for i in inputs}.values()),  # two entries may read one source table
        outputs=[
            _output_dataset(plan.target_url, plan.target_schema, target)
            for t in plan.tables
            for target in t.targets
            if plan.step_table is None  # a step writes no target table: its rows are staged
        ],
        run_facets={"syndiffix": _run_facet(plan, written=[])},
    )


def on_failure(plan: TaskPlan, written: Sequence[TableRunResult]) -> OperatorLineage:
    """The planned datasets; the run facet counts what was written before the failure."""
    lineage = on_start(plan)
    lineage.run_facets["syndiffix"] = _run_facet(plan, written=written)
    return lineage


def on_complete(plan: TaskPlan, written: Sequence[TableRunResult]) -> OperatorLineage:
    """Inputs and outputs with schema facets, column lineage and rows written, per table written."""
    if not written:
        return on_start(plan)
    inputs: dict[str, InputDataset] = {}
    outputs = []
    for result in written:
        # A linked set's task writes several tables, each from its own source table.
        source_schema, _, source_table = result.source_table.rpartition(".")
        source = _input_dataset(
            plan.source_url, source_schema or None, source_table, result.aid_columns, result.input_columns
        )
        inputs.setdefault(source.name, source)
        target_schema, target_table = target_parts(result)
        target = _output_dataset(plan.target_url, target_schema, target_table)
        target.facets = {
            "schema": _schema_facet(result.output_columns),
            "columnLineage": _column_lineage(source, result),
        }
        # Synthetic rows only: the source's exact row count is never published.
        target.outputFacets = {
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=result.rows_written
            )
        }
        outputs.append(target)
    return OperatorLineage(
        inputs=list(inputs.values()),
        outputs=outputs,
        run_facets={"syndiffix": _run_facet(plan, written=written)},
    )


def _run_facet(plan: TaskPlan, *, written: Sequence[TableRunResult]) -> SyndiffixRunFacet:
    # Each output is one release of the same entities: DP budgets add up over the outputs written.
    epsilon = {t.name: t.epsilon_per_output for t in plan.tables if t.epsilon_per_output is not None}
    spent = sum((epsilon.get(r.table, 0.0) for r in written), 0.0) if epsilon else None
    return SyndiffixRunFacet(
        engine=plan.engine,
        parameters=plan.parameters,
        table=plan.step_table or plan.tables[0].name,
        columnSet=plan.column_set,
        engines={t.name: t.engine for t in plan.tables},
        linkedSet=[t.name for t in plan.tables] if len(plan.tables) > 1 else [],
        lineageIds=[r.lineage_id for r in written if r.lineage_id],
        epsilonSpent=spent,
        saltFingerprint=plan.salt_fingerprint,
    )


def _input_dataset(
    url: sa.URL,
    schema: str | None,
    table: str,
    aid_columns: Sequence[str],
    columns: Sequence[ColumnInfo] | None,
) -> InputDataset:
    namespace, name = openlineage_dataset(url, schema, table)
    facets: dict[str, Any] = {"syndiffix_aidColumns": AidColumnsDatasetFacet(columns=list(aid_columns))}
    if columns is not None:
        facets["schema"] = _schema_facet(columns)
    return InputDataset(namespace=namespace, name=name, facets=facets)


def _output_dataset(url: sa.URL, schema: str | None, table: str) -> OutputDataset:
    namespace, name = openlineage_dataset(url, schema, table)
    return OutputDataset(namespace=namespace, name=name)


def _column_lineage(source: InputDataset, result: TableRunResult):
    def field(column: str, kind: str, subtype: str, description: str):
        return column_lineage_dataset.InputField(
            namespace=source.namespace,
            name=source.name,
            field=column,
            transformations=[
                column_lineage_dataset.Transformation(
                    type=kind, subtype=subtype, description=description, masking=True
                )
            ],
        )

    described = f"anonymized synthesis ({result.engine})"
    aid_inputs = [
        field(aid, "INDIRECT", "FILTER", "AID column: decides suppression and noise, not output")
        for aid in result.aid_columns
    ]
    fields = {
        column.name: column_lineage_dataset.Fields(
            inputFields=[field(column.name, "DIRECT", "TRANSFORMATION", described)],
            transformationDescription=described,
            transformationType="MASKED",
        )
        for column in result.output_columns
    }
    return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields, dataset=aid_inputs)


def _schema_facet(columns: Sequence[ColumnInfo]):
    return schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.sql_type) for c in columns]
    )


def openlineage_dataset(url: sa.URL, schema: str | None, table: str) -> tuple[str, str]:
    """(namespace, name) as the OpenLineage naming spec and the SQL providers form them: PostgreSQL
    postgres://host:port and database.schema.table; MySQL mysql://host:port and database.table."""
    backend = url.get_backend_name()
    if backend == "postgresql":
        return f"postgres://{authority(url)}", f"{url.database}.{schema or 'public'}.{table}"
    if backend in ("mysql", "mariadb"):
        return f"mysql://{authority(url)}", f"{schema or url.database}.{table}"
    qualified_table = f"{schema}.{table}" if schema else table
    if backend == "sqlite":
        return f"sqlite://{url.database}", qualified_table
    return f"{backend}://{authority(url)}", f"{url.database}.{qualified_table}"
