"""Small helpers shared by the data-loss adversarial tests: a source table, its rows, lineage, configs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import sqlalchemy as sa

from syndiffix_ops.config import PipelineConfig, parse_config
from syndiffix_ops.lineage import LINEAGE_TABLE, lineage_table

SALT = b"adversarial data-loss salt"


def url_of(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def make_orders(engine: sa.Engine, schema: str | None, name: str = "orders", rows: int = 120) -> None:
    """A small source table: an integer id, a label, an amount and a paid flag."""
    rng = np.random.default_rng(11)
    table = sa.Table(
        name,
        sa.MetaData(),
        sa.Column("id", sa.Integer),
        sa.Column("label", sa.String(40)),
        sa.Column("amount", sa.Float),
        sa.Column("paid", sa.Boolean),
        schema=schema,
    )
    table.create(engine)
    frame = pd.DataFrame(
        {
            "id": np.arange(rows),
            "label": rng.choice(["low", "mid", "high"], rows),
            "amount": np.round(rng.gamma(2.0, 30.0, rows), 2),
            "paid": rng.random(rows) < 0.5,
        }
    )
    with engine.begin() as conn:
        conn.execute(table.insert(), frame.to_dict("records"))


def rows_of(engine: sa.Engine, schema: str | None, name: str) -> list[tuple]:
    table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=engine)
    with engine.connect() as conn:
        return sorted((tuple(r) for r in conn.execute(sa.select(table))), key=repr)


def lineage_rows(engine: sa.Engine, schema: str | None) -> list[dict]:
    if not sa.inspect(engine).has_table(LINEAGE_TABLE, schema=schema):
        return []
    table = lineage_table(schema)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.select(table).order_by(table.c.finished_at)).mappings()]


def table_names(engine: sa.Engine, schema: str | None) -> set[str]:
    return set(sa.inspect(engine).get_table_names(schema=schema))


def config_for(
    engine: sa.Engine, schema: str | None, *, validated: bool = True, risk: bool = False, **entry
) -> PipelineConfig:
    """One-table config with the same database as source and target; `validated=False` skips the
    config-time checks so the run-time ones are tested on their own. The risk report (about a second
    per run) is off unless asked for."""
    data = {
        "risk": {"enabled": risk},
        "source": url_of(engine),
        "target": url_of(engine),
        "target_schema": schema,
        "tables": [{"source": f"{schema}.orders" if schema else "orders", "target": "orders_synth", **entry}],
    }
    return parse_config(data) if validated else PipelineConfig.model_validate(data)
