"""A linked set in one call (`run_linked_set`) against the same set in steps (`linked_steps`: one step per
table, parents first, then publish), as Airflow's task group runs it: CPU seconds of each and whether
the written tables are identical.

    python bench/bench_linked_steps.py [--customers 20000] [--salt "bench_linked_steps salt"]

Generated data (numpy, seed 1) in a temporary SQLite file: customers (age, segment) and their orders
(Poisson(1 + age / 15) per customer, amounts growing with the age); keys declared in the config. The
steps read the set's source tables once per step and once more to publish, and pass each table's
synthetic rows through the target (Parquet in `syndiffix_staging`); the one call reads them once.
CPU seconds are user + sys of this process (the machine is shared, so wall time is not reported).
"""

from __future__ import annotations

import argparse
import hashlib
import resource
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import sqlalchemy as sa

from syndiffix_ops.config import parse_config
from syndiffix_ops.linked_pipeline import run_linked_set
from syndiffix_ops.linked_steps import publish_linked_set, stage_linked_table
from syndiffix_ops.run_plan import plan_run

TARGETS = ("customers_synth", "orders_synth")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--customers", type=int, default=20_000)
    parser.add_argument("--salt", default="bench_linked_steps salt")
    args = parser.parse_args()
    salt = args.salt.encode()
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'warehouse.db'}"
        engine = sa.create_engine(url)
        orders = _make_source(engine, args.customers)
        config = parse_config({"source": url, "target": url, "tables": _tables()})
        [linked_set] = plan_run(config).linked_sets
        before = _cpu_seconds()
        run_linked_set(config, linked_set, salt=salt)
        one_call, one_call_hash = _cpu_seconds() - before, _written_hash(engine)
        before = _cpu_seconds()
        for table in linked_set.tables:
            stage_linked_table(config, linked_set, table, run="bench", salt=salt)
        publish_linked_set(config, linked_set, run="bench", salt=salt)
        steps, steps_hash = _cpu_seconds() - before, _written_hash(engine)
        engine.dispose()
    print(f"customers {args.customers:,}, orders {orders:,}")
    print(f"one call: {one_call:.1f} CPU-s, output hash {one_call_hash}")
    print(f"in steps: {steps:.1f} CPU-s ({steps / one_call:.2f}x), output hash {steps_hash}")


def _make_source(engine: sa.Engine, customers: int) -> int:
    rng = np.random.default_rng(1)
    age = rng.integers(18, 90, customers)
    per_customer = rng.poisson(1 + age / 15)
    ids = np.arange(customers) + 1
    pd.DataFrame({"customer_id": ids, "age": age, "segment": rng.choice(list("abc"), customers)}).to_sql(
        "customers", engine, index=False
    )
    pd.DataFrame(
        {
            "order_id": np.arange(per_customer.sum()) + 1,
            "customer_id": np.repeat(ids, per_customer),
            "amount": rng.gamma(2.0, 10 + np.repeat(age, per_customer) / 3),
        }
    ).to_sql("orders", engine, index=False)
    return int(per_customer.sum())


def _tables() -> list[dict]:
    return [
        {"source": "customers", "target": TARGETS[0], "primary_key": ["customer_id"]},
        {
            "source": "orders",
            "target": TARGETS[1],
            "primary_key": ["order_id"],
            "foreign_keys": [{"columns": ["customer_id"], "references": f"{TARGETS[0]}(customer_id)"}],
        },
    ]


def _written_hash(engine: sa.Engine) -> str:
    digest = hashlib.sha256()
    with engine.connect() as conn:
        for name in TARGETS:
            frame = pd.read_sql(sa.text(f"SELECT * FROM {name}"), conn)
            digest.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    return digest.hexdigest()[:16]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
