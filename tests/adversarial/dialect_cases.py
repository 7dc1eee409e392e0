"""Helpers shared by the dialect, identifier and fault-injection tests: configs, table contents, leftovers."""

from __future__ import annotations

import sqlalchemy as sa

from syndiffix_ops.config import parse_config
from syndiffix_ops.lineage import LINEAGE_TABLE, lineage_table
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX

SALT = b"adversarial dialect salt"


def url_of(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def config_for(
    source: sa.Engine, target: sa.Engine, source_table: str, target_table: str, target_schema=None, **table
):
    entry = {"source": source_table, "target": target_table, **table}
    return parse_config(
        {
            "source": url_of(source),
            "target": url_of(target),
            "target_schema": target_schema,
            "risk": {"enabled": False},
            "tables": [entry],
        }
    )


def table_rows(engine: sa.Engine, schema: str | None, name: str) -> list[tuple]:
    table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=engine)
    with engine.connect() as conn:
        return sorted((tuple(r) for r in conn.execute(sa.select(table))), key=repr)


def lineage_rows(engine: sa.Engine, schema: str | None, status: str | None = "success") -> list[dict]:
    """Lineage rows oldest first: those of successful runs, or of every run with status=None."""
    if not sa.inspect(engine).has_table(LINEAGE_TABLE, schema=schema):
        return []
    table = lineage_table(schema)
    statement = sa.select(table).order_by(table.c.finished_at, table.c.lineage_id)
    if status is not None:
        statement = statement.where(table.c.status == status)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(statement).mappings()]


def leftovers(engine: sa.Engine, schema: str | None) -> list[str]:
    names = sa.inspect(engine).get_table_names(schema=schema)
    return sorted(n for n in names if n.startswith((STAGING_PREFIX, OLD_PREFIX)))


def one_line(error: BaseException) -> str:
    """The error's message, checked to be a single line (what the CLI prints)."""
    text = str(error)
    assert "\n" not in text, text
    return text
