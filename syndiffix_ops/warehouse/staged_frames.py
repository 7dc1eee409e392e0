"""Synthetic frames staged in the target between the steps of a run, in `<schema>.syndiffix_staging`.

A linked set run step by step (syndiffix_ops.linked_steps) passes each table's synthetic frame, with its
link columns, to the steps of its children and to the step that publishes the set. Those steps may run
in other processes or on other machines, and a retried step must find what the steps before it staged:
the target database is the one place every step reaches. A frame is stored as Parquet (pandas' dtypes
survive exactly, so a child is matched to the same parents as in one process), cut into parts that fit
MySQL's default max_allowed_packet, with a JSON document beside it (the engine's metadata).

Only synthetic data is staged: the engine's output and the keys the linking gave it, never a source row.
A frame is replaced as a whole, in one transaction, so a step that fails while staging leaves the
previous attempt's frame or none. `discard_staged` removes what a run staged.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from syndiffix_ops.warehouse.write import ensure_table

STAGING_TABLE = "syndiffix_staging"
_PART_BYTES = 4 * 1024 * 1024  # under MySQL's and MariaDB's smallest default max_allowed_packet
_METADATA_KEY = b"syndiffix"
_PAYLOAD = sa.LargeBinary().with_variant(mysql.LONGBLOB(), "mysql", "mariadb")


@dataclass(frozen=True)
class StagedKey:
    """Which run staged a frame (Airflow: `<dag id>/<run id>`), for which linked set and table."""

    run: str
    linked_set: str
    table: str


def staging_table(schema: str | None, metadata: sa.MetaData | None = None) -> sa.Table:
    return sa.Table(
        STAGING_TABLE,
        metadata or sa.MetaData(),
        sa.Column("run", sa.String(255), primary_key=True),
        sa.Column("linked_set", sa.String(255), primary_key=True),
        sa.Column("table_name", sa.String(255), primary_key=True),
        sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("payload", _PAYLOAD, nullable=False),
        sa.Column("staged_at", sa.DateTime(timezone=True), nullable=False),
        schema=schema,
    )


def stage_frame(
    engine: sa.Engine, schema: str | None, key: StagedKey, frame: pd.DataFrame, document: dict[str, Any]
) -> None:
    """Store `frame` and `document` (plain JSON) under `key`, replacing what was there."""
    table = staging_table(schema)
    with engine.connect() as conn:
        ensure_table(conn, table)
    payload = _parquet(frame, document)
    now = dt.datetime.now(dt.UTC)
    rows = [
        {
            "run": key.run,
            "linked_set": key.linked_set,
            "table_name": key.table,
            "part": number,
            "payload": payload[start : start + _PART_BYTES],
            "staged_at": now,
        }
        for number, start in enumerate(range(0, max(len(payload), 1), _PART_BYTES))
    ]
    with engine.begin() as conn:
        conn.execute(sa.delete(table).where(*_matching(table, key)))
        for row in rows:  # one statement per part: each stays under the packet limit
            conn.execute(sa.insert(table), row)


def load_staged(
    engine: sa.Engine, schema: str | None, key: StagedKey
) -> tuple[pd.DataFrame, dict[str, Any]] | None:
    """The frame and document staged under `key`, or None when nothing is."""
    table = staging_table(schema)
    if not sa.inspect(engine).has_table(STAGING_TABLE, schema=schema):
        return None
    with engine.connect() as conn:
        parts = conn.execute(
            sa.select(table.c.payload).where(*_matching(table, key)).order_by(table.c.part)
        ).scalars()
        payload = b"".join(bytes(part) for part in parts)
    if not payload:
        return None
    parquet = pq.read_table(io.BytesIO(payload))
    document = json.loads(parquet.schema.metadata[_METADATA_KEY])
    return parquet.to_pandas(), document


def discard_staged(conn: sa.Connection, schema: str | None, run: str, linked_set: str) -> None:
    """Remove every frame `run` staged for `linked_set` (within the caller's transaction)."""
    if not sa.inspect(conn).has_table(STAGING_TABLE, schema=schema):
        return
    table = staging_table(schema)
    conn.execute(sa.delete(table).where(table.c.run == run, table.c.linked_set == linked_set))


def _matching(table: sa.Table, key: StagedKey) -> tuple[sa.ColumnElement[bool], ...]:
    return (table.c.run == key.run, table.c.linked_set == key.linked_set, table.c.table_name == key.table)


def _parquet(frame: pd.DataFrame, document: dict[str, Any]) -> bytes:
    arrow = pa.Table.from_pandas(frame, preserve_index=False)
    metadata = {**(arrow.schema.metadata or {}), _METADATA_KEY: json.dumps(document).encode()}
    buffer = io.BytesIO()
    pq.write_table(arrow.replace_schema_metadata(metadata), buffer)
    return buffer.getvalue()
