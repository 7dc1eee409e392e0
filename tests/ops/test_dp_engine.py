"""The dp_marginals engine in the pipeline: YAML config, run_table on real databases, lineage."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from syndiffix_ops.config import ConfigError, load_config, parse_config
from syndiffix_ops.engines import DpMarginalsParams, get_engine
from syndiffix_ops.lineage import lineage_table
from syndiffix_ops.pipeline import run_table

SALT = b"dp engine test salt"
ROWS = 3_000


def _make_source(engine: sa.Engine, schema: str | None) -> None:
    table = sa.Table(
        "visits",
        sa.MetaData(),
        sa.Column("patient_id", sa.Integer),
        sa.Column("ward", sa.String(20)),
        sa.Column("age", sa.Integer),
        sa.Column("cost", sa.Numeric(10, 2)),
        sa.Column("admitted", sa.Boolean),
        sa.Column("day", sa.Date),
        schema=schema,
    )
    table.create(engine)
    rng = np.random.default_rng(0)
    latent = rng.normal(size=ROWS)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {
                    "patient_id": i // 2,
                    "ward": ["north", "south", "east"][int(z > 0) + int(z > 1)],
                    "age": int(np.clip(50 + 15 * z, 0, 99)),
                    "cost": Decimal(f"{200 + 50 * z + rng.uniform(0, 10):.2f}"),
                    "admitted": bool(z > -0.3),
                    "day": dt.date(2024, 1, 1) + dt.timedelta(days=int(rng.integers(0, 60))),
                }
                for i, z in enumerate(latent)
            ],
        )


def _config(db: sa.Engine, schema: str | None, **table):
    entry = {
        "source": f"{schema}.visits" if schema else "visits",
        "target": "visits_dp",
        "engine": "dp_marginals",
    }
    entry.update(table)
    url = db.url.render_as_string(hide_password=False)
    return parse_config({"source": url, "target": url, "target_schema": schema, "tables": [entry]})


def _lineage(engine, schema) -> list[dict]:
    table = lineage_table(schema)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.select(table).order_by(table.c.finished_at)).mappings()]


def _rows(engine, schema) -> list[tuple]:
    table = sa.Table("visits_dp", sa.MetaData(), schema=schema, autoload_with=engine)
    with engine.connect() as conn:
        return sorted((tuple(r) for r in conn.execute(sa.select(table))), key=repr)


def test_run_table_writes_a_dp_table_and_records_the_spent_budget(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    config = _config(
        engine,
        schema,
        aid_columns=["patient_id"],
        engine_params={"epsilon": 2.0, "reporting_length": 2, "binning": {"age": {"kind": "exact"}}},
    )
    [result] = run_table(config, "visits_dp", salt=SALT, run_id="dp-1")
    assert result.status == "success" and result.rows_written > ROWS / 4

    target = sa.Table("visits_dp", sa.MetaData(), schema=schema, autoload_with=engine)
    source = sa.Table("visits", sa.MetaData(), schema=schema, autoload_with=engine)
    declared = {c.name: c.type.compile(dialect=engine.dialect) for c in source.columns}
    assert [c.name for c in target.columns] == ["ward", "age", "cost", "admitted", "day"]
    assert {c.name: c.type.compile(dialect=engine.dialect) for c in target.columns} == {
        n: declared[n] for n in ["ward", "age", "cost", "admitted", "day"]
    }
    written = _rows(engine, schema)
    assert {r[0] for r in written} <= {"north", "south", "east"}
    assert all(0 <= r[1] <= 99 for r in written)

    [lineage] = _lineage(engine, schema)
    meta = lineage["engine_metadata"]
    assert lineage["engine"] == "dp_marginals"
    assert meta["epsilon_spent"] == pytest.approx(2.0)
    assert 0 < meta["delta_spent"] < 1 / meta["protected_records"]
    split = meta["budget_split"]
    assert split["epsilon_records"] + split["epsilon_marginals"] == pytest.approx(2.0)
    assert len(split["sigmas"]) == 2 and meta["reporting_length"] == 2
    assert set(meta["evaluation"]["by_length"]) == {"1", "2"}
    assert 0 <= meta["evaluation"]["by_length"]["2"]["fabricated_share"] <= 1
    assert SALT.decode() not in json.dumps(lineage, default=str)
    assert lineage["parameters"]["engine_params"]["epsilon"] == 2.0


def test_same_salt_same_rows_and_a_new_release_new_noise(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    _make_source(engine, None)
    config = _config(engine, None, engine_params={"epsilon": 3.0})
    run_table(config, "visits_dp", salt=SALT)
    first = _rows(engine, None)
    run_table(config, "visits_dp", salt=SALT)
    assert _rows(engine, None) == first
    run_table(
        _config(engine, None, engine_params={"epsilon": 3.0, "release": "2024-02-01"}), "visits_dp", salt=SALT
    )
    assert _rows(engine, None) != first
    assert _lineage(engine, None)[-1]["engine_metadata"]["release"] == "2024-02-01"


def test_the_quality_report_holds_the_dp_evaluation(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'w.db'}")
    _make_source(engine, None)
    stages = []
    [result] = run_table(
        _config(engine, None, engine_params={"epsilon": 4.0}),
        "visits_dp",
        salt=SALT,
        report_dir=tmp_path / "reports",
        progress=lambda stage, fraction: stages.append(stage),
    )
    assert [s for s in stages if s.startswith("synthesize")] == [
        "synthesize",
        "synthesize: dp marginals",
        "synthesize: evaluation",
        "synthesize: done",
    ]
    evaluation = result.metrics["dp_marginals_evaluation"]["by_length"]
    assert set(evaluation) == {"1", "2", "3"}
    assert all(0 <= evaluation[k]["suppressed_share"] <= 1 for k in evaluation)
    page = result.report_path.read_text(encoding="utf-8")
    assert "DP marginals: combinations by length" in page and "fabricated combinations" in page
    # the budget this output spent, next to what it is spent on
    budget = result.metrics["dp_budget"]
    assert budget["epsilon_spent"] == pytest.approx(4.0)  # the configured epsilon, all of it
    assert budget["epsilon_records"] + budget["epsilon_marginals"] == pytest.approx(4.0)
    assert budget["identity"] == result.source_table
    assert "Differential privacy budget" in page and "&epsilon; spent" in page
    saved = json.loads(result.report_path.with_name(result.report_path.stem + ".metrics.json").read_text())
    assert saved["metrics"]["dp_marginals_evaluation"]["by_length"]["3"] == evaluation["3"]


def test_yaml_config_selects_the_engine_and_rejects_bad_params(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(
        "source: sqlite:///a.db\ntarget: sqlite:///b.db\ntables:\n"
        "  - source: visits\n    target: visits_dp\n    engine: dp_marginals\n"
        "    engine_params:\n      epsilon: 1.5\n      delta: 1.0e-7\n      reporting_length: 2\n"
        "      fabrication_mode: minimize\n      binning:\n        cost: {kind: uniform, lower: 0, upper: 500, bins: 10}\n"
    )
    config = load_config(good)
    [table] = config.tables
    params = config.effective(table).engine_params
    assert isinstance(params, DpMarginalsParams)
    assert (params.epsilon, params.delta, params.reporting_length) == (1.5, 1e-7, 2)
    assert params.binning["cost"].bins == 10

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "source: sqlite:///a.db\ntarget: sqlite:///b.db\ntables:\n"
        "  - source: visits\n    target: visits_dp\n    engine: dp_marginals\n"
        "    engine_params:\n      epsilon: -1\n      fabrication: none\n"
        "      fixed_thresholds: {1: 5}\n"
    )
    with pytest.raises(ConfigError) as error:
        load_config(bad)
    message = str(error.value)
    assert "epsilon" in message and "fabrication" in message


def test_params_model_checks_cross_field_rules():
    with pytest.raises(ValueError, match="sigma_proportions needs 3 values"):
        DpMarginalsParams(sigma_proportions=[1.0, 0.5])
    with pytest.raises(ValueError, match="fixed_thresholds keys"):
        DpMarginalsParams(fixed_thresholds={1: 5.0})
    with pytest.raises(ValueError, match="uniform binning needs lower, upper and bins"):
        DpMarginalsParams(binning={"x": {"kind": "uniform"}})


def test_engine_refuses_several_aid_columns_and_unknown_binning_columns():
    engine = get_engine("dp_marginals")
    frame = pd.DataFrame({"a": [1, 2] * 50, "b": [3, 4] * 50, "c": ["x", "y"] * 50})
    with pytest.raises(ValueError, match=r"one AID column, got \['a', 'b'\]"):
        engine.run(frame, aid_columns=["a", "b"], salt=SALT, params=DpMarginalsParams(), table_identity="t")
    params = DpMarginalsParams(delta=1e-6, binning={"nope": {"kind": "exact"}})
    with pytest.raises(ValueError, match=r"binning names columns not in the table: \['nope'\]"):
        engine.run(frame, aid_columns=[], salt=SALT, params=params, table_identity="t")
