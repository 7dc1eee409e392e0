"""The lineage table: one row per synthetic table written per run, in the target schema.

A row says where a synthetic table came from and how it was made, and is inserted in the same
transaction as the table swap (see warehouse.write). A run that fails leaves a row with status `failed`,
the error's class and stage and a message stripped of values (syndiffix_ops.provenance), inserted on its
own after the failed write rolled back. It never holds credentials, the salt, or exact
source row counts: the source is described by dialect, host, database and table name, and the only count
is the number of synthetic rows written, which anyone can read off the synthetic table anyway.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from syndiffix_ops.warehouse.write import ensure_table

LINEAGE_TABLE = "syndiffix_lineage"
# UTC instants; MySQL/MariaDB get microseconds (DATETIME(6)) so runs within one second still order.
_TIMESTAMP = sa.DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), "mysql", "mariadb")


def lineage_table(schema: str | None, metadata: sa.MetaData | None = None) -> sa.Table:
    return sa.Table(
        LINEAGE_TABLE,
        metadata or sa.MetaData(),
        sa.Column("lineage_id", sa.String(36), primary_key=True),
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("target_table", sa.String(255), nullable=False),
        sa.Column("column_set", sa.String(255)),
        sa.Column("source_dialect", sa.String(32), nullable=False),
        sa.Column("source_host", sa.String(255)),
        sa.Column("source_database", sa.String(1024)),
        sa.Column("source_table", sa.String(512), nullable=False),
        sa.Column("columns", sa.JSON, nullable=False),
        sa.Column("aid_columns", sa.JSON, nullable=False),
        sa.Column("engine", sa.String(64), nullable=False),
        sa.Column("package_version", sa.String(64), nullable=False),
        sa.Column("parameters", sa.JSON, nullable=False),
        sa.Column("config_hash", sa.String(64), nullable=False),
        sa.Column("source_schema_hash", sa.String(64), nullable=False),
        sa.Column("source_schema", sa.JSON, nullable=False),
        sa.Column("synthetic_rows", sa.BigInteger, nullable=False),
        sa.Column("started_at", _TIMESTAMP, nullable=False),
        sa.Column("finished_at", _TIMESTAMP, nullable=False),
        sa.Column("airflow_dag_id", sa.String(250)),
        sa.Column("airflow_task_id", sa.String(250)),
        sa.Column("airflow_run_id", sa.String(250)),
        sa.Column("quality_metrics", sa.JSON),
        sa.Column("engine_metadata", sa.JSON),
        sa.Column("risk_metrics", sa.JSON),  # coarse KHLL risk summary (syndiffix_ops.risk), or null
        sa.Column("code_commit", sa.String(64)),  # git commit of the code (-dirty: changed), or null
        # failed runs (status "failed"): the exception's class, the stage it stopped in and its message
        # with quoted text, numbers and URLs replaced (syndiffix_ops.provenance.safe_error_message)
        sa.Column("error_class", sa.String(128)),
        sa.Column("error_stage", sa.String(64)),
        sa.Column("error_message", sa.Text),
        # DP releases (syndiffix_ops.dp_budget): the keyed id of the protected people (source table and
        # unit), the release's keyed fingerprint, and the epsilon and delta it spent; null otherwise
        sa.Column("dp_identity", sa.String(64)),
        sa.Column("dp_release", sa.String(64)),
        sa.Column("dp_epsilon", sa.Float(precision=53)),
        sa.Column("dp_delta", sa.Float(precision=53)),
        schema=schema,
    )


@dataclass(frozen=True)
class SourceIdentity:
    """Where the data came from, without credentials."""

    dialect: str
    host: str | None
    database: str | None
    table: str  # schema.table

    @classmethod
    def from_url(cls, url: sa.URL, table: str) -> SourceIdentity:
        return cls(dialect=url.get_backend_name(), host=url.host, database=url.database, table=table)


@dataclass(frozen=True)
class LineageRecord:
    run_id: str
    target_table: str
    column_set: str | None
    source: SourceIdentity
    columns: Sequence[Mapping[str, Any]]  # name, source_type, target_type, kind
    aid_columns: Sequence[str]
    engine: str
    package_version: str
    parameters: Mapping[str, Any]
    config_hash: str
    source_schema_hash: str
    source_schema: Sequence[Mapping[str, Any]]
    synthetic_rows: int
    started_at: dt.datetime
    finished_at: dt.datetime
    status: str = "success"
    airflow_dag_id: str | None = None
    airflow_task_id: str | None = None
    airflow_run_id: str | None = None
    quality_metrics: Mapping[str, Any] | None = None
    engine_metadata: Mapping[str, Any] = field(default_factory=dict)
    risk_metrics: Mapping[str, Any] | None = None
    code_commit: str | None = None
    error_class: str | None = None
    error_stage: str | None = None
    error_message: str | None = None
    dp_identity: str | None = None
    dp_release: str | None = None
    dp_epsilon: float | None = None
    dp_delta: float | None = None
    lineage_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def row(self) -> dict[str, Any]:
        row = asdict(self)
        source = row.pop("source")
        row.update(
            source_dialect=source["dialect"],
            source_host=source["host"],
            source_database=source["database"],
            source_table=source["table"],
            columns=list(row["columns"]),
            aid_columns=list(row["aid_columns"]),
            source_schema=list(row["source_schema"]),
        )
        for key in ("parameters", "quality_metrics", "engine_metadata", "risk_metrics"):
            row[key] = plain_json(row[key])
        return row


def plain_json(value: Any) -> Any:
    """Plain JSON values: numpy scalars become Python numbers and NaN/inf become null, which strict JSON
    columns (PostgreSQL, MariaDB's json_valid) would otherwise refuse."""
    if isinstance(value, Mapping):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_json(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def ensure_lineage_table(engine: sa.Engine, schema: str | None) -> sa.Table:
    """Create the lineage table (and a missing PostgreSQL schema) if needed (see ensure_table)."""
    table = lineage_table(schema)
    with engine.connect() as conn:
        ensure_table(conn, table)
        _add_missing_columns(conn, table)
    return table


def _add_missing_columns(conn: sa.Connection, table: sa.Table) -> None:
    """A lineage table written by an older release lacks the newer (nullable) columns: add them, so an
    upgrade does not break the lineage insert and with it every run."""
    existing = {c["name"] for c in sa.inspect(conn).get_columns(table.name, schema=table.schema)}
    preparer = conn.dialect.identifier_preparer
    for column in table.columns:
        if column.name not in existing and column.nullable:
            definition = sa.schema.CreateColumn(column).compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {preparer.format_table(table)} ADD COLUMN {definition}")
    conn.commit()


def insert_lineage(conn: sa.Connection, schema: str | None, record: LineageRecord) -> None:
    row = record.row()
    if conn.dialect.name != "postgresql":
        # Only PostgreSQL stores the offset; elsewhere the columns hold naive UTC.
        for key in ("started_at", "finished_at"):
            row[key] = row[key].astimezone(dt.UTC).replace(tzinfo=None)
    conn.execute(lineage_table(schema).insert(), [row])


def last_lineage(
    bind: sa.Engine | sa.Connection, schema: str | None, target_table: str, column_set: str | None = None
) -> dict[str, Any] | None:
    """The newest successful lineage row of a target table (and column set), or None."""
    table = lineage_table(schema)
    statement = (
        sa.select(table)
        .where(table.c.target_table == target_table, table.c.status == "success")
        .where(table.c.column_set.is_(None) if column_set is None else table.c.column_set == column_set)
        .order_by(table.c.finished_at.desc())
        .limit(1)
    )
    if isinstance(bind, sa.Connection):
        row = bind.execute(statement).mappings().first()
    else:
        with bind.connect() as conn:
            if not sa.inspect(conn).has_table(LINEAGE_TABLE, schema=schema):
                return None
            row = conn.execute(statement).mappings().first()
    return dict(row) if row is not None else None


def record_failure(engine: sa.Engine, schema: str | None, records: Sequence[LineageRecord]) -> None:
    """Insert the rows of a failed run in their own transaction (the run's own one has rolled back)."""
    ensure_lineage_table(engine, schema)
    with engine.begin() as conn:
        for record in records:
            insert_lineage(conn, schema, record)


def lineage_history(bind: sa.Engine, schema: str | None) -> list[dict[str, Any]]:
    """Every lineage row, oldest first (empty when there is no lineage table yet)."""
    table = lineage_table(schema)
    with bind.connect() as conn:
        if not sa.inspect(conn).has_table(LINEAGE_TABLE, schema=schema):
            return []
        existing = {c["name"] for c in sa.inspect(conn).get_columns(LINEAGE_TABLE, schema=schema)}
        # a table from an older release lacks the newer columns until its next run adds them
        statement = sa.select(*(c for c in table.columns if c.name in existing)).order_by(
            table.c.finished_at, table.c.lineage_id
        )
        return [dict(row) for row in conn.execute(statement).mappings()]
