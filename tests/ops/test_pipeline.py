"""run_table end to end on real databases: outputs, lineage, fail-fast checks and atomic failure."""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
import os
import re
import threading
import time
from decimal import Decimal

import pytest
import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict

import syndiffix_core
import syndiffix_core.params
import syndiffix_ops
from syndiffix_ops.config import ConfigError, parse_config
from syndiffix_ops.engines import ENGINES, register_engine
from syndiffix_ops.lineage import LINEAGE_TABLE, lineage_table
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.run_errors import PipelineError, QualityGateError, SchemaDriftError
from syndiffix_ops.table_output import OutputFigures
from syndiffix_ops.warehouse import RowLimitExceeded
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX

SALT = b"pipeline test salt"


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class FailingEngine:
    name = "test_failing"
    params_model = _NoParams

    def run(self, df, *, aid_columns, salt, params, table_identity, progress=None):
        raise RuntimeError("injected failure during synthesis at value 'Oslo' of row 17")


@pytest.fixture(autouse=True)
def test_engines():
    register_engine(FailingEngine())
    yield
    ENGINES.pop(FailingEngine.name)


def _qualified(engine: sa.Engine, schema: str | None, name: str) -> str:
    preparer = engine.dialect.identifier_preparer
    return f"{preparer.quote_schema(schema)}.{preparer.quote(name)}" if schema else preparer.quote(name)


def _make_source(engine: sa.Engine, schema: str | None, name: str = "orders", rows: int = 200) -> sa.Table:
    table = sa.Table(
        name,
        sa.MetaData(),
        sa.Column("customer_id", sa.Integer),
        sa.Column("amount", sa.Numeric(10, 2)),
        sa.Column("city", sa.String(30)),
        sa.Column("paid", sa.Boolean),
        sa.Column("ordered_on", sa.Date),
        sa.Column("note", sa.Text),
        schema=schema,
    )
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {
                    "customer_id": i % 50,
                    "amount": Decimal(i) / 4,
                    "city": ["Berlin", "Paris", "Rome"][i % 3],
                    "paid": i % 2 == 0,
                    "ordered_on": dt.date(2024, 1, 1) + dt.timedelta(days=i % 30),
                    "note": None if i % 7 else f"note {i}",
                }
                for i in range(rows)
            ],
        )
    return table


def _config(db: sa.Engine, schema: str | None, **table):
    entry = {
        "source": f"{schema}.orders" if schema else "orders",
        "target": "orders_synth",
    }
    entry.update(table)
    return parse_config(
        {
            "source": db.url.render_as_string(hide_password=False),
            "target": db.url.render_as_string(hide_password=False),
            "target_schema": schema,
            "tables": [entry],
        }
    )


def _rows(engine, schema, name) -> list[tuple]:
    table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=engine)
    with engine.connect() as conn:
        return sorted((tuple(r) for r in conn.execute(sa.select(table))), key=repr)


def _lineage(engine, schema) -> list[dict]:
    table = lineage_table(schema)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.select(table).order_by(table.c.finished_at)).mappings()]


def _leftovers(engine, schema) -> list[str]:
    return [
        n
        for n in sa.inspect(engine).get_table_names(schema=schema)
        if n.startswith((STAGING_PREFIX, OLD_PREFIX))
    ]


def test_a_table_is_synthesized_with_source_types_lineage_and_a_result_per_output(warehouse_db):
    engine, schema = warehouse_db
    source = _make_source(engine, schema)
    config = _config(engine, schema, aid_columns=["customer_id"], columns={"note": "drop"})

    [result] = run_table(config, "orders_synth", salt=SALT, run_id="run-1")

    target = sa.Table("orders_synth", sa.MetaData(), schema=schema, autoload_with=engine)
    reflected = sa.Table("orders", sa.MetaData(), schema=schema, autoload_with=engine)
    declared = {c.name: c.type.compile(dialect=engine.dialect) for c in reflected.columns}
    assert [c.name for c in target.columns] == ["amount", "city", "paid", "ordered_on"]
    assert {c.name: c.type.compile(dialect=engine.dialect) for c in target.columns} == {
        name: declared[name] for name in ["amount", "city", "paid", "ordered_on"]
    }
    written = _rows(engine, schema, "orders_synth")
    assert result.status == "success" and result.rows_written == len(written) > 0
    assert result.target_table == (f"{schema}.orders_synth" if schema else "orders_synth")
    assert [c.name for c in result.output_columns] == ["amount", "city", "paid", "ordered_on"]
    assert [c.name for c in result.input_columns] == ["customer_id", "amount", "city", "paid", "ordered_on"]
    assert set(result.timings) >= {"read", "synthesize", "write"}

    [lineage] = _lineage(engine, schema)
    assert lineage["lineage_id"] == result.lineage_id and lineage["run_id"] == "run-1"
    assert lineage["status"] == "success" and lineage["synthetic_rows"] == len(written)
    assert lineage["source_table"] == source.fullname and lineage["engine"] == "syndiffix"
    assert lineage["source_dialect"] == engine.dialect.name
    assert lineage["config_hash"] == config.config_hash()
    assert lineage["engine_metadata"] == {"syndiffix_core_version": syndiffix_core.__version__}
    assert lineage["quality_metrics"]["synthetic_rows"] == len(written)
    # the values used, defaults resolved from the engine's own parameter classes
    used = lineage["parameters"]["engine_params"]
    core_defaults = syndiffix_core.params
    assert used["anonymization"]["low_threshold"] == core_defaults.SuppressionParams().low_threshold
    assert used["anonymization"]["outlier_count"] == [2, 5]
    assert used["clustering"]["solver_alpha"] == core_defaults.ClusteringParams().solver_alpha
    assert (
        used["bucketization"]["range_low_threshold"]
        == core_defaults.BucketizationParams().range_low_threshold
    )
    assert used["target_column"] is None
    assert lineage["parameters"]["mode"] == "replace" and lineage["parameters"]["read_chunk_rows"] == 100_000
    assert lineage["package_version"] == syndiffix_ops.__version__
    # the tests run from a git checkout, so its commit is recorded (a tree with changes is marked -dirty)
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?", lineage["code_commit"])
    assert lineage["error_class"] is None and lineage["error_stage"] is None
    assert [c["name"] for c in lineage["columns"]] == ["amount", "city", "paid", "ordered_on"]
    assert lineage["columns"][0]["source_type"] == declared["amount"] == lineage["columns"][0]["target_type"]


def test_rerunning_with_the_same_salt_writes_identical_rows_and_another_salt_does_not(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    config = _config(engine, schema, aid_columns=["customer_id"])
    run_table(config, "orders_synth", salt=SALT)
    first = _rows(engine, schema, "orders_synth")
    run_table(config, "orders_synth", salt=SALT)
    assert _rows(engine, schema, "orders_synth") == first
    run_table(config, "orders_synth", salt=b"another salt")
    assert _rows(engine, schema, "orders_synth") != first
    assert len(_lineage(engine, schema)) == 3


def test_column_sets_write_one_narrower_table_each(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    config = _config(
        engine,
        schema,
        aid_columns=["customer_id"],
        column_sets={
            "money": {"columns": ["amount", "paid"]},
            "where": {"columns": ["city"], "target": "cities"},
        },
    )
    results = run_table(config, "orders_synth", salt=SALT)
    assert [(r.column_set, r.target_table.split(".")[-1]) for r in results] == [
        ("money", "orders_synth_money"),
        ("where", "cities"),
    ]
    money = sa.Table("orders_synth_money", sa.MetaData(), schema=schema, autoload_with=engine)
    assert [c.name for c in money.columns] == ["amount", "paid"]
    assert [(r["target_table"], r["column_set"]) for r in _lineage(engine, schema)] == [
        ("orders_synth_money", "money"),
        ("cities", "where"),
    ]


def test_progress_follows_the_engine_through_the_synthesize_stage_of_each_output(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    config = _config(
        engine,
        schema,
        aid_columns=["customer_id"],
        column_sets={"money": {"columns": ["amount", "paid"]}, "where": {"columns": ["city", "note"]}},
    )
    reported: list[tuple[str, float]] = []
    run_table(
        config, "orders_synth", salt=SALT, progress=lambda stage, fraction: reported.append((stage, fraction))
    )
    # "read" has a scale of its own (the CLI maps it to a share of the bar); the rest is over all outputs
    fractions = [fraction for stage, fraction in reported if stage != "read"]
    assert fractions == sorted(fractions) and fractions[0] >= 0.0 and fractions[-1] == 1.0
    engine_stages = [(stage, fraction) for stage, fraction in reported if stage.startswith("synthesize: ")]
    # the SynDiffix engine's own stages, within the synthesize half of each of the two outputs
    assert {"synthesize: forest", "synthesize: done"} <= {stage for stage, _ in engine_stages}
    first_output = [fraction for stage, fraction in engine_stages if fraction <= 0.25]
    second_output = [fraction for stage, fraction in engine_stages if fraction > 0.25]
    assert first_output and max(first_output) == 0.25  # output 1 of 2: synthesis ends at half of its share
    assert second_output and min(second_output) >= 0.5 and max(second_output) == 0.75
    # each output's quality and risk figures come between its synthesis and its write (a monitor such as
    # bench/bench_scale.py measures them as stages of their own)
    stages = [stage.split(":")[0] for stage, _ in reported]
    per_output = [name for name in dict.fromkeys(stages) if name != "read"]
    assert per_output == ["synthesize", "quality", "risk", "write"]
    assert stages.count("quality") == stages.count("risk") == 2
    second_quality = [i for i, name in enumerate(stages) if name == "quality"][1]
    assert stages[second_quality - 1] == "synthesize" and stages[second_quality + 1] == "risk"


def test_a_failure_during_synthesis_leaves_the_previous_table_and_records_the_failed_run(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    run_table(_config(engine, schema), "orders_synth", salt=SALT)
    before_rows, before_lineage = _rows(engine, schema, "orders_synth"), _lineage(engine, schema)

    with pytest.raises(RuntimeError, match="injected failure during synthesis"):
        run_table(_config(engine, schema, engine="test_failing"), "orders_synth", salt=SALT, run_id="bad")
    assert _rows(engine, schema, "orders_synth") == before_rows
    *unchanged, failed = _lineage(engine, schema)
    assert unchanged == before_lineage
    assert (failed["run_id"], failed["status"], failed["target_table"]) == ("bad", "failed", "orders_synth")
    assert (failed["error_class"], failed["error_stage"]) == ("builtins.RuntimeError", "synthesize")
    # the message keeps its words, not the value or the row number it quoted
    assert failed["error_message"] == "injected failure during synthesis at value <quoted> of row <number>"
    assert failed["synthetic_rows"] == 0 and failed["engine"] == "test_failing"
    assert failed["source_schema_hash"] == before_lineage[0]["source_schema_hash"]
    assert _leftovers(engine, schema) == []


def _refuse_lineage_of_run(engine: sa.Engine, schema: str | None, run_id: str) -> None:
    """Make the database itself refuse the lineage row of one run: a failure after the staging write."""
    lineage = _qualified(engine, schema, LINEAGE_TABLE)
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql(
                f"CREATE TRIGGER refuse BEFORE INSERT ON {LINEAGE_TABLE} WHEN NEW.run_id = '{run_id}' "
                "BEGIN SELECT RAISE(ABORT, 'lineage refused'); END"
            )
        else:
            conn.exec_driver_sql(f"ALTER TABLE {lineage} ADD CONSTRAINT refuse CHECK (run_id <> '{run_id}')")


def test_a_failure_after_the_staging_write_leaves_the_previous_table_and_lineage_untouched(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    config = _config(engine, schema)
    run_table(config, "orders_synth", salt=SALT, run_id="first")
    before_rows, before_lineage = _rows(engine, schema, "orders_synth"), _lineage(engine, schema)
    _refuse_lineage_of_run(engine, schema, "second")

    with pytest.raises(sa.exc.DBAPIError):
        run_table(config, "orders_synth", salt=b"a salt that changes the rows", run_id="second")
    assert _rows(engine, schema, "orders_synth") == before_rows
    assert _lineage(engine, schema) == before_lineage
    assert _leftovers(engine, schema) == []


def test_max_rows_fails_fast_without_writing_or_revealing_the_count(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema, rows=200)
    with pytest.raises(RowLimitExceeded) as caught:
        run_table(_config(engine, schema, max_rows=150, where="paid = paid"), "orders_synth", salt=SALT)
    message = str(caught.value)
    assert "more than max_rows=150 rows" in message and "where paid = paid" in message
    # as a number of its own: the random schema name may hold the digits
    assert re.search(r"(?<!\d)200(?!\d)", message) is None
    assert not sa.inspect(engine).has_table("orders_synth", schema=schema)
    [result] = run_table(_config(engine, schema, max_rows=200), "orders_synth", salt=SALT)
    assert result.status == "success"


def test_the_where_filter_limits_the_rows_read(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    run_table(_config(engine, schema, where="city = 'Rome'"), "orders_synth", salt=SALT)
    assert {row[2] for row in _rows(engine, schema, "orders_synth")} == {"Rome"}


def test_schema_drift_fails_fast_naming_the_change_unless_ignored(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    run_table(_config(engine, schema), "orders_synth", salt=SALT)
    before_rows = _rows(engine, schema, "orders_synth")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"ALTER TABLE {_qualified(engine, schema, 'orders')} ADD COLUMN discount INTEGER"
        )

    with pytest.raises(SchemaDriftError) as caught:
        run_table(_config(engine, schema), "orders_synth", salt=SALT)
    message = str(caught.value)
    assert "table orders_synth" in message and "column 'discount' added (INTEGER" in message
    assert "on_schema_change: ignore" in message
    assert _rows(engine, schema, "orders_synth") == before_rows

    [result] = run_table(_config(engine, schema, on_schema_change="ignore"), "orders_synth", salt=SALT)
    assert "discount" in [c.name for c in result.output_columns]
    # the new schema is now the reference: the next default run passes
    run_table(_config(engine, schema), "orders_synth", salt=SALT)


def test_columns_the_config_names_wrongly_or_types_without_a_policy_fail_before_reading(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    with pytest.raises(PipelineError) as caught:
        run_table(
            _config(engine, schema, columns={"nope": "drop"}, aid_columns=["missing_id"]),
            "orders_synth",
            salt=SALT,
        )
    assert "table orders_synth: column 'nope' in columns is not in the source" in str(caught.value)
    assert "AID column 'missing_id' is not in the source" in str(caught.value)

    blob = sa.LargeBinary() if engine.dialect.name != "postgresql" else sa.dialects.postgresql.BYTEA()
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"ALTER TABLE {_qualified(engine, schema, 'orders')} ADD COLUMN payload {blob.compile(dialect=engine.dialect)}"
        )
    with pytest.raises(
        PipelineError, match=r"column 'payload' has type \w+, which cannot be synthesized; set its policy"
    ):
        run_table(_config(engine, schema), "orders_synth", salt=SALT)
    [result] = run_table(_config(engine, schema, columns={"payload": "drop"}), "orders_synth", salt=SALT)
    assert "payload" not in [c.name for c in result.output_columns]


def test_a_dry_run_checks_everything_and_writes_nothing(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    [planned] = run_table(_config(engine, schema, aid_columns=["customer_id"]), "orders_synth", dry_run=True)
    assert planned.status == "dry_run" and planned.rows_written == 0
    assert [c.name for c in planned.output_columns] == ["amount", "city", "paid", "ordered_on", "note"]
    assert sa.inspect(engine).get_table_names(schema=schema) == ["orders"]


def test_the_salt_comes_from_the_environment_and_its_absence_is_named(warehouse_db, monkeypatch):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    config = _config(engine, schema, salt_env="MY_TEST_SALT")
    monkeypatch.delenv("MY_TEST_SALT", raising=False)
    with pytest.raises(ConfigError, match="the salt environment variable MY_TEST_SALT is not set"):
        run_table(config, "orders_synth")
    monkeypatch.setenv("MY_TEST_SALT", SALT.decode())
    run_table(config, "orders_synth")
    from_env = _rows(engine, schema, "orders_synth")
    run_table(config, "orders_synth", salt=SALT)
    assert _rows(engine, schema, "orders_synth") == from_env


def test_names_with_quotes_spaces_semicolons_unicode_and_reserved_words_run_end_to_end(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema, rows=10)  # the table the name below tries to drop
    table_name = 'order "items"; DROP TABLE orders; -- ü'
    columns = ["select", 'the "quoted"', "semi;colon", "spa ce", "naïve ✓"]
    source = sa.Table(
        table_name,
        sa.MetaData(),
        sa.Column("from", sa.Integer),  # a reserved word as the AID column
        *(sa.Column(name, sa.Integer if i % 2 else sa.String(20)) for i, name in enumerate(columns)),
        schema=schema,
    )
    source.create(engine)
    with engine.begin() as conn:
        conn.execute(
            source.insert(),
            [
                {"from": i % 40, **{n: (i % 5 if j % 2 else f"v{i % 4}") for j, n in enumerate(columns)}}
                for i in range(200)
            ],
        )
    target_name = 'synthetic "items" ✓; --'
    config = parse_config(
        {
            "source": engine.url.render_as_string(hide_password=False),
            "target": engine.url.render_as_string(hide_password=False),
            "target_schema": schema,
            "tables": [
                {
                    "name": "weird",
                    "source": f"{schema}.{table_name}" if schema else table_name,
                    "target": target_name,
                    "aid_columns": ["from"],
                }
            ],
        }
    )
    [result] = run_table(config, "weird", salt=SALT)
    target = sa.Table(target_name, sa.MetaData(), schema=schema, autoload_with=engine)
    assert [c.name for c in target.columns] == columns
    assert result.rows_written == len(_rows(engine, schema, target_name)) > 0
    assert _lineage(engine, schema)[0]["target_table"] == target_name
    assert sa.inspect(engine).has_table("orders", schema=schema)  # the name was data, never SQL
    assert _leftovers(engine, schema) == []


def test_a_report_dir_gets_the_html_quality_report_of_each_output(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}")
    _make_source(engine, None)
    [result] = run_table(
        _config(engine, None, aid_columns=["customer_id"]),
        "orders_synth",
        salt=SALT,
        report_dir=tmp_path / "reports",
    )
    assert result.report_path == tmp_path / "reports" / "orders_synth" / f"{result.run_id}.html"
    page = result.report_path.read_text(encoding="utf-8")
    assert "orders_synth" in page and "<html" in page.lower()
    assert result.metrics["synthetic_rows"] == result.rows_written
    engine.dispose()


def test_append_mode_adds_each_runs_rows_with_a_lineage_row_per_run(warehouse_db):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    config = _config(engine, schema, mode="append", columns=["city", "paid"])
    [first] = run_table(config, "orders_synth", salt=SALT)
    [second] = run_table(config, "orders_synth", salt=b"second salt")
    assert len(_rows(engine, schema, "orders_synth")) == first.rows_written + second.rows_written
    assert [r["synthetic_rows"] for r in _lineage(engine, schema)] == [
        first.rows_written,
        second.rows_written,
    ]
    assert [r["parameters"]["mode"] for r in _lineage(engine, schema)] == ["append", "append"]


def test_the_quality_gate_keeps_the_previous_copy_and_records_why(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}")
    _make_source(engine, None)
    run_table(_config(engine, None), "orders_synth", salt=SALT)
    before_rows = _rows(engine, None, "orders_synth")
    strict = _config(engine, None).model_copy(
        update={"quality": _config(engine, None).quality.model_copy(update={"fail_below_score": 99.99})}
    )
    with pytest.raises(QualityGateError, match="below quality.fail_below_score 99.99; nothing written"):
        run_table(strict, "orders_synth", salt=b"another salt", run_id="gated", report_dir=tmp_path / "r")
    assert _rows(engine, None, "orders_synth") == before_rows
    failed = _lineage(engine, None)[-1]
    assert (failed["run_id"], failed["status"], failed["error_stage"]) == ("gated", "failed", "quality")
    assert failed["error_class"] == "syndiffix_ops.run_errors.QualityGateError"
    # the reviewer gets the report of the copy that was held back
    assert (tmp_path / "r" / "orders_synth" / "gated.html").is_file()
    engine.dispose()


def test_a_copy_refused_by_the_gate_after_its_rows_were_staged_leaves_no_trace(warehouse_db, tmp_path):
    # the rows are staged while the figures are computed; the gate refuses before the swap
    engine, schema = warehouse_db
    _make_source(engine, schema)
    config = _config(engine, schema)
    run_table(config, "orders_synth", salt=SALT)
    before_rows = _rows(engine, schema, "orders_synth")
    before_tables = sorted(sa.inspect(engine).get_table_names(schema=schema))
    strict = config.model_copy(
        update={"quality": config.quality.model_copy(update={"fail_below_score": 99.99})}
    )
    reported = []
    with pytest.raises(QualityGateError, match="nothing written"):
        run_table(
            strict,
            "orders_synth",
            salt=b"another salt",
            report_dir=tmp_path / "r",
            progress=lambda stage, fraction: reported.append(stage),
        )
    assert _rows(engine, schema, "orders_synth") == before_rows
    assert sorted(sa.inspect(engine).get_table_names(schema=schema)) == before_tables  # no staging table
    assert _lineage(engine, schema)[-1]["error_stage"] == "quality"
    assert not any(stage.startswith("write:") for stage in reported)  # neither "staged" nor "swapped"


def test_a_tables_own_quality_thresholds_flag_and_gate_only_that_table(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}")
    _make_source(engine, None)
    url = engine.url.render_as_string(hide_password=False)
    config = parse_config(
        {
            "source": url,
            "target": url,
            "quality": {"column_tvd": 0.5},
            "tables": [
                {"source": "orders", "target": "orders_loose", "columns": ["city", "paid", "amount"]},
                {
                    "source": "orders",
                    "target": "orders_strict",
                    "columns": ["city", "paid", "amount"],
                    "quality": {"column_tvd": 0.001, "fail_below_score": 99.99},
                },
            ],
        }
    )
    [loose] = run_table(config, "orders_loose", salt=SALT)
    assert loose.metrics["thresholds"]["column_tvd"] == 0.5 and loose.metrics["attention"]["columns"] == []
    with pytest.raises(
        QualityGateError, match="orders_strict: fidelity score .* below quality.fail_below_score"
    ):
        run_table(config, "orders_strict", salt=SALT, report_dir=tmp_path / "r")
    assert not sa.inspect(engine).has_table("orders_strict")
    # the held-back copy's report shows the table's own thresholds and the columns beyond them
    [metrics_file] = (tmp_path / "r" / "orders_strict").glob("*.metrics.json")
    payload = json.loads(metrics_file.read_text(encoding="utf-8"))
    assert payload["metrics"]["thresholds"]["column_tvd"] == 0.001
    assert payload["metrics"]["attention"]["columns"]  # flagged at 0.001, not at the top-level 0.5
    engine.dispose()


def test_an_outputs_risk_figures_are_computed_beside_its_quality_figures():
    risk_started = multiprocessing.get_context("fork").Event()  # set in the risk figures' child

    def quality():
        # sequentially (quality first) the risk figures would not have started: the wait times out
        assert risk_started.wait(timeout=30)
        return {"scores": {}}

    def risk():
        risk_started.set()
        return {"risk": 1, "computed_in": os.getpid()}

    with OutputFigures(quality, risk) as figures:
        metrics, risk_result, _, _ = figures.result()
    assert metrics == {"scores": {}} and risk_result["risk"] == 1
    assert risk_result["computed_in"] != os.getpid()
    with OutputFigures(lambda: None, None) as figures:
        assert figures.result()[:2] == (None, None)


def test_an_outputs_figures_are_computed_while_the_calling_thread_goes_on():
    written = threading.Event()

    def quality():
        # the calling thread stages the write meanwhile: waiting for the figures first would time out
        assert written.wait(timeout=30)
        return {"scores": {}}

    with OutputFigures(quality, None) as figures:
        written.set()
        assert figures.result()[0] == {"scores": {}}


def test_an_error_in_the_risk_figures_is_raised_once_the_quality_figures_are_done():
    ended = []

    def failing_risk():
        raise ValueError("risk sketch broke")

    def quality():
        ended.append("quality")
        return {}

    with (
        pytest.raises(ValueError, match="risk sketch broke"),
        OutputFigures(quality, failing_risk) as figures,
    ):
        figures.result()
    assert ended == ["quality"]


def test_an_error_in_the_quality_figures_stops_the_risk_figures_child():
    finished = multiprocessing.get_context("fork").Event()

    def failing_quality():
        raise RuntimeError("binning broke")

    def risk_for_a_minute():
        time.sleep(60)  # stopped long before
        finished.set()
        return {}

    with (
        pytest.raises(RuntimeError, match="binning broke"),
        OutputFigures(failing_quality, risk_for_a_minute) as figures,
    ):
        child = figures._risk._pid
        figures.result()
    assert not finished.is_set()  # killed, not waited for
    with pytest.raises(ChildProcessError):  # and reaped
        os.waitpid(child, os.WNOHANG)


def test_the_risk_figures_child_imports_none_of_the_packages_modules(imports_of_a_child_call):
    # see forked_call: everything the child runs is imported before it forks
    figures = "risk.output_figures(frame[['amount', 'city']], ['amount', 'city']).record"
    assert imports_of_a_child_call("syndiffix_ops.table_output", figures) == ["True", "[]"]
