"""`columns: {name: {derive: EXPRESSION}}` in the YAML config and the pipeline; `--derive` in the CLI."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from syndiffix_core import cli as syndiffix_cli
from syndiffix_ops.config import ConfigError, load_config, parse_config
from syndiffix_ops.lineage import lineage_table
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.run_errors import PipelineError

SALT = b"derive test salt"


def _flights_source(engine: sa.Engine, schema: str | None, rows: int = 600) -> None:
    table = sa.Table(
        "flights",
        sa.MetaData(),
        sa.Column("tailnum", sa.String(10)),
        sa.Column("hour", sa.Integer),
        sa.Column("minute", sa.Integer),
        sa.Column("sched_dep_time", sa.Integer),
        sa.Column("carrier", sa.String(5)),
        sa.Column("day", sa.Date),
        schema=schema,
    )
    table.create(engine)
    rng = np.random.default_rng(3)
    hours, minutes = rng.integers(5, 23, rows), rng.choice([0, 15, 30, 45], rows)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {
                    "tailnum": f"N{i % 90}",
                    "hour": int(h),
                    "minute": int(m),
                    "sched_dep_time": int(h * 100 + m),
                    "carrier": ["UA", "AA", "B6"][i % 3],
                    "day": dt.date(2013, 1, 1) + dt.timedelta(days=i % 60),
                }
                for i, (h, m) in enumerate(zip(hours, minutes, strict=True))
            ],
        )


def _config(engine: sa.Engine, schema: str | None, columns: dict, **table) -> object:
    url = engine.url.render_as_string(hide_password=False)
    entry = {"source": f"{schema}.flights" if schema else "flights", "target": "flights_synth"}
    entry.update(columns=columns, aid_columns=["tailnum"], **table)
    return parse_config({"source": url, "target": url, "target_schema": schema, "tables": [entry]})


def test_a_derived_column_holds_its_rule_on_every_written_row_and_keeps_the_source_type(warehouse_db):
    engine, schema = warehouse_db
    _flights_source(engine, schema)
    rule = "hour * 100 + minute"
    config = _config(engine, schema, {"sched_dep_time": {"derive": rule}})

    run_table(config, "flights_synth", salt=SALT, run_id="derive-run")

    target = sa.Table("flights_synth", sa.MetaData(), schema=schema, autoload_with=engine)
    source = sa.Table("flights", sa.MetaData(), schema=schema, autoload_with=engine)
    assert [c.name for c in target.columns] == ["hour", "minute", "sched_dep_time", "carrier", "day"]
    assert target.c.sched_dep_time.type.compile(engine.dialect) == source.c.sched_dep_time.type.compile(
        engine.dialect
    )
    with engine.connect() as conn:
        rows = conn.execute(sa.select(target.c.hour, target.c.minute, target.c.sched_dep_time)).all()
        [parameters] = conn.execute(sa.select(lineage_table(schema).c.parameters)).scalars().all()
    assert rows and all(hour * 100 + minute == sched for hour, minute, sched in rows)
    parameters = json.loads(parameters) if isinstance(parameters, str) else parameters
    assert parameters["derive"] == {"sched_dep_time": rule}


def test_a_rule_whose_type_does_not_fit_the_column_fails_before_anything_is_written(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    _flights_source(engine, None)
    config = _config(engine, None, {"sched_dep_time": {"derive": "carrier || 'x'"}})
    with pytest.raises(PipelineError) as caught:
        run_table(config, "flights_synth", salt=SALT)
    message = str(caught.value)
    assert message.startswith("table flights_synth: derive of column 'sched_dep_time': ")
    assert "gives string values, the column holds number" in message
    assert "flights_synth" not in sa.inspect(engine).get_table_names()


def test_a_rule_using_a_column_the_source_lacks_is_named_before_reading(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    _flights_source(engine, None)
    config = _config(engine, None, {"sched_dep_time": {"derive": "hours * 100 + minute"}})
    with pytest.raises(PipelineError, match="derive of column 'sched_dep_time' uses 'hours', which is not"):
        run_table(config, "flights_synth", salt=SALT, dry_run=True)


def test_derived_date_column_keeps_dates(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    _flights_source(engine, None)
    config = _config(engine, None, {"day": {"derive": "CASE WHEN hour < 12 THEN NULL ELSE NULL END"}})
    run_table(config, "flights_synth", salt=SALT)
    frame = pd.read_sql_table("flights_synth", engine)
    assert frame["day"].isna().all() and len(frame) > 0


BASE = """\
source: sqlite:///source.db
target: sqlite:///target.db
tables:
  - source: flights
    aid_columns: [tailnum]
    columns:
      carrier: drop
      sched_dep_time:
        derive: {rule}
"""


def _load(tmp_path, rule: str, extra: str = ""):
    path = tmp_path / "pipeline.yaml"
    path.write_text(BASE.format(rule=rule) + extra)
    return load_config(path)


def test_yaml_derive_is_read_with_its_expression_and_counts_as_an_output_column(tmp_path):
    config = _load(tmp_path, '"hour * 100 + minute"')
    table = config.tables[0]
    assert table.derived_columns == {"sched_dep_time": "hour * 100 + minute"}
    assert table.column_policies["sched_dep_time"].value == "synthesize"
    other = _load(tmp_path, '"hour * 100 + minute + 0"')
    assert config.config_hash() != other.config_hash()


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (
            '"hour * 100 +"',
            "derive of column 'sched_dep_time': expected a value, a column or ( at 'end of expression'",
        ),
        ('"hour ^ 2"', "derive of column 'sched_dep_time': unexpected character at '^'"),
        ('"tailnum || hour"', "uses AID column 'tailnum', which is never output"),
        ('"carrier"', "uses column 'carrier', which is dropped"),
        ("42", "derive takes an expression in quotes"),
    ],
)
def test_yaml_errors_name_file_line_table_column_and_token(tmp_path, rule, expected):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, rule)
    [problem] = caught.value.problems
    assert problem.startswith(f"{tmp_path / 'pipeline.yaml'}:")
    assert "tables[0] (flights) -> columns" in problem
    assert expected in problem


def test_yaml_column_entries_other_than_policies_or_derive_are_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError) as caught:
        _load(tmp_path, '"hour"\n        compute: "x"')
    [problem] = caught.value.problems
    assert "-> columns: sched_dep_time: a column entry is synthesize, drop or {derive: EXPRESSION}" in problem


def test_a_column_set_with_a_derived_column_needs_its_inputs(tmp_path):
    extra = "    column_sets:\n      times: {columns: [hour, sched_dep_time]}\n"
    with pytest.raises(
        ConfigError,
        match=r"derive of column 'sched_dep_time' is in column set 'times' without its inputs \['minute'\]",
    ):
        _load(tmp_path, '"hour * 100 + minute"', extra)


def test_cli_derive_computes_the_column_and_names_the_file_and_token_on_errors(tmp_path, capsys):
    rng = np.random.default_rng(1)
    hour, minute = rng.integers(5, 23, 1500), rng.choice([0, 30], 1500)
    source = tmp_path / "flights.csv"
    pd.DataFrame({"hour": hour, "minute": minute, "sched_dep_time": hour * 100 + minute}).to_csv(
        source, index=False
    )
    out = tmp_path / "synthetic.csv"
    code = syndiffix_cli.main(
        [str(source), "--salt", "s", "-o", str(out), "--derive", "sched_dep_time=hour * 100 + minute"]
    )
    assert code == 0
    synthetic = pd.read_csv(out)
    assert list(synthetic.columns) == ["hour", "minute", "sched_dep_time"]
    assert (synthetic["sched_dep_time"] == synthetic["hour"] * 100 + synthetic["minute"]).all()

    assert syndiffix_cli.main([str(source), "--salt", "s", "--derive", "sched_dep_time=hour # 2"]) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error == f"syndiffix: error: {source}: derive of column 'sched_dep_time': unexpected character at '#'"
    )
    assert syndiffix_cli.main([str(source), "--salt", "s", "--derive", "no rule"]) == 2
    assert "expected NAME=EXPRESSION" in capsys.readouterr().err


def test_derive_holds_in_a_linked_set_too(tmp_path):
    from syndiffix_ops.linked_pipeline import run_linked_set
    from syndiffix_ops.run_plan import database_key_reader, plan_run

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    rng = np.random.default_rng(5)
    metadata = sa.MetaData()
    customers = sa.Table(
        "customers",
        metadata,
        sa.Column("customer_id", sa.Integer, primary_key=True),
        sa.Column("age", sa.Integer, nullable=False),
        sa.Column("band", sa.String(8)),
    )
    orders = sa.Table(
        "orders",
        metadata,
        sa.Column("order_id", sa.Integer, primary_key=True),
        sa.Column("customer_id", sa.Integer, sa.ForeignKey(customers.c.customer_id), nullable=False),
        sa.Column("amount", sa.Float),
    )
    ages = rng.integers(18, 90, 400)
    with engine.begin() as conn:
        metadata.create_all(conn)
        conn.execute(
            customers.insert(),
            [
                {"customer_id": i + 1, "age": int(a), "band": "senior" if a >= 60 else "adult"}
                for i, a in enumerate(ages)
            ],
        )
        conn.execute(
            orders.insert(),
            [
                {"order_id": i + 1, "customer_id": int(i % 400) + 1, "amount": float(i % 37)}
                for i in range(1200)
            ],
        )
    url = engine.url.render_as_string(hide_password=False)
    rule = "CASE WHEN age >= 60 THEN 'senior' ELSE 'adult' END"
    config = parse_config(
        {
            "source": url,
            "target": url,
            "tables": [
                {"source": "customers", "target": "customers_synth", "columns": {"band": {"derive": rule}}},
                {"source": "orders", "target": "orders_synth"},
            ],
        }
    )
    [linked_set] = plan_run(config, database_key_reader(engine)).linked_sets

    run_linked_set(config, linked_set, salt=SALT)

    synthetic = pd.read_sql_table("customers_synth", engine)
    assert len(synthetic) > 0
    assert (synthetic["band"] == np.where(synthetic["age"] >= 60, "senior", "adult")).all()
