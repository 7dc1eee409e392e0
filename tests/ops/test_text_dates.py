"""A warehouse text column of ISO dates is written back as dates in the same layout and type."""

from __future__ import annotations

import datetime as dt
import re

import numpy as np
import sqlalchemy as sa

from syndiffix_ops.config import parse_config
from syndiffix_ops.pipeline import run_table

SALT = b"text dates test salt"


def _readings_source(engine: sa.Engine, schema: str | None, rows: int = 1_500) -> None:
    table = sa.Table(
        "readings",
        sa.MetaData(),
        sa.Column("taken_at", sa.String(19)),
        sa.Column("level", sa.Float),
        schema=schema,
    )
    table.create(engine)
    rng = np.random.default_rng(11)
    minutes = rng.integers(0, 200 * 24, rows) * 60
    start = dt.datetime(2021, 3, 1)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {
                    "taken_at": (start + dt.timedelta(minutes=int(m))).isoformat(" "),
                    "level": float(m) / 60 + rng.normal(0, 50),
                }
                for m in minutes
            ],
        )


def test_a_text_date_column_comes_back_as_text_dates_in_its_layout(warehouse_db):
    engine, schema = warehouse_db
    _readings_source(engine, schema)
    url = engine.url.render_as_string(hide_password=False)
    source = f"{schema}.readings" if schema else "readings"
    config = parse_config(
        {
            "source": url,
            "target": url,
            "target_schema": schema,
            "tables": [{"source": source, "target": "readings_synth"}],
        }
    )

    run_table(config, "readings_synth", salt=SALT, run_id="text-dates")

    target = sa.Table("readings_synth", sa.MetaData(), schema=schema, autoload_with=engine)
    assert target.c.taken_at.type.compile(engine.dialect) == sa.String(19).compile(engine.dialect)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(target.c.taken_at, target.c.level)).all()
    taken = [value for value, _ in rows]
    assert len(rows) > 1_000
    # on the hour, as every source value is
    assert all(re.fullmatch(r"2021-\d{2}-\d{2} \d{2}:00:00", value) for value in taken)
    assert min(taken) >= "2021-03-01 00:00:00" and max(taken) <= "2021-09-17 00:00:00"
    instants = np.array([dt.datetime.fromisoformat(value).timestamp() for value in taken])
    levels = np.array([level for _, level in rows])
    assert np.corrcoef(instants, levels)[0, 1] > 0.8
