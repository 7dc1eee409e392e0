"""The DP budget per protected identity across releases: recorded in real lineage tables (SQLite,
PostgreSQL, MariaDB), summed by basic composition, shown in the report and the index, warned about and
(when asked) refused."""

from __future__ import annotations

import datetime as dt
import hashlib

import numpy as np
import pytest
import sqlalchemy as sa

from syndiffix_ops.config import ConfigError, parse_config
from syndiffix_ops.dp_budget import Release, Spending, protected_identity
from syndiffix_ops.lineage import (
    LineageRecord,
    SourceIdentity,
    ensure_lineage_table,
    insert_lineage,
    lineage_history,
    lineage_table,
)
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.report_index import payloads_from_lineage, write_report_index
from syndiffix_ops.run_errors import DpBudgetError

SALT = b"dp budget test salt"
ROWS = 2_000


def _make_source(engine: sa.Engine, schema: str | None) -> None:
    table = sa.Table(
        "visits",
        sa.MetaData(),
        sa.Column("patient_id", sa.Integer),
        sa.Column("ward", sa.String(20)),
        sa.Column("age", sa.Integer),
        schema=schema,
    )
    table.create(engine)
    rng = np.random.default_rng(3)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {
                    "patient_id": i // 2,
                    "ward": str(rng.choice(["north", "south"])),
                    "age": int(rng.integers(20, 80)),
                }
                for i in range(ROWS)
            ],
        )


def _config(engine: sa.Engine, schema: str | None, tables: list[dict], dp: dict | None = None):
    url = engine.url.render_as_string(hide_password=False)
    prefix = f"{schema}." if schema else ""
    entries = [
        {
            "source": f"{prefix}visits",
            "engine": "dp_marginals",
            **table,
            "engine_params": {"reporting_length": 2, "evaluate": False, **table.get("engine_params", {})},
        }
        for table in tables
    ]
    data = {"source": url, "target": url, "target_schema": schema, "tables": entries}
    if dp is not None:
        data["dp"] = dp
    return parse_config(data)


def _lineage(engine: sa.Engine, schema: str | None) -> list[dict]:
    table = lineage_table(schema)
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.select(table).order_by(table.c.finished_at)).mappings()]


def test_releases_about_the_same_people_add_up_and_a_repeated_release_counts_once(warehouse_db, tmp_path):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    # delta is given: the default one comes from a record count noised at scale 200 (0.5 % of epsilon 1),
    # and the noise follows the random schema name, so about one run in 150 drew a count of 0 and refused.
    # For the same reason the row-level release spends 5 % of its epsilon on its record count (scale 40
    # instead of 400): without AIDs that count is the output's size, and at scale 400 about one run in
    # 300 drew a count below 1 from its 2,000 rows and wrote nothing
    patients = {"aid_columns": ["patient_id"], "engine_params": {"epsilon": 1.0, "delta": 1e-6}}
    row_level = {"epsilon": 0.5, "delta": 1e-6, "number_of_records_epsilon_proportion": 0.05}
    config = _config(
        engine,
        schema,
        [
            {"name": "all", "target": "visits_dp", **patients},
            {"name": "older", "target": "older_dp", "where": "age >= 40", **patients},
            {"name": "rows", "target": "rows_dp", "engine_params": row_level},
        ],
    )
    reports = tmp_path / "reports"
    [first] = run_table(config, "all", salt=SALT, report_dir=reports)
    [rerun] = run_table(config, "all", salt=SALT, report_dir=reports)  # same data, salt and parameters
    [older] = run_table(config, "older", salt=SALT, report_dir=reports)  # other rows, same people
    [rows] = run_table(config, "rows", salt=SALT, report_dir=reports)  # another protected unit

    lineage = _lineage(engine, schema)
    assert [row["status"] for row in lineage] == ["success"] * 4
    identities = [row["dp_identity"] for row in lineage]
    assert identities[0] == identities[1] == identities[2] != identities[3]
    assert lineage[0]["dp_release"] == lineage[1]["dp_release"] != lineage[2]["dp_release"]
    assert [row["dp_epsilon"] for row in lineage] == pytest.approx([1.0, 1.0, 1.0, 0.5])

    # the first release alone; the rerun repeats it; the filtered release is a second one on the same people
    assert (first.metrics["dp_budget"]["total_releases"], first.metrics["dp_budget"]["total_epsilon"]) == (
        1,
        pytest.approx(1.0),
    )
    assert rerun.metrics["dp_budget"]["total_releases"] == 1
    spent = older.metrics["dp_budget"]
    assert (spent["total_releases"], spent["total_epsilon"]) == (2, pytest.approx(2.0))
    assert spent["total_delta"] == pytest.approx(lineage[0]["dp_delta"] + lineage[2]["dp_delta"])
    assert spent["protected_unit"] == "entities of patient_id" and spent["over_budget"] is None
    assert rows.metrics["dp_budget"]["total_epsilon"] == pytest.approx(0.5)  # rows are another identity

    page = older.report_path.read_text(encoding="utf-8")
    assert "over 2 release(s)" in page and "Basic composition" in page and "upper bound" in page

    # the index rebuilt from the lineage (syndiffix-ops report) shows the totals per identity
    index = write_report_index(
        tmp_path / "index", payloads_from_lineage(lineage_history(engine, schema), schema)
    )
    text = index.read_text(encoding="utf-8")
    assert "Differential privacy budget spent" in text
    assert "<td>entities of patient_id</td>" in text and "<td>2</td><td class='score'>2</td>" in text
    assert "<td>rows</td>" in text and "<td>1</td><td class='score'>0.5</td>" in text


def test_the_identity_is_keyed_by_the_salt_and_holds_no_name_or_unkeyed_hash():
    source = SourceIdentity("postgresql", "DB.internal", "clinic", "public.visits")
    identity = protected_identity(SALT, source, ["patient_id"])
    assert identity == protected_identity(
        SALT, SourceIdentity("postgresql", "db.internal", "clinic", "public.visits"), ["patient_id"]
    )
    assert identity != protected_identity(b"another salt", source, ["patient_id"])
    assert identity != protected_identity(SALT, source, [])
    assert "visits" not in identity and len(identity) == 32
    plain = "\x1f".join(["postgresql", "db.internal", "clinic", "public.visits", "entities of patient_id"])
    assert identity not in {
        hashlib.sha256(plain.encode()).hexdigest()[:32],
        hashlib.md5(plain.encode()).hexdigest(),
    }


def test_basic_composition_counts_each_distinct_release_once():
    spending = Spending.of(
        [Release("a", 1.0, 1e-6), Release("a", 1.0, 1e-6), Release("b", 0.5, 2e-6), Release(None, 0.25, 0.0)]
    )
    assert (spending.releases, spending.epsilon, spending.delta) == (3, 1.75, pytest.approx(3e-6))
    assert spending.beyond(2.0, None) is None
    assert (
        spending.beyond(1.5, 1e-6)
        == "epsilon 1.75 > dp.budget_epsilon 1.5 and delta 3e-06 > dp.budget_delta 1e-06"
    )


def test_a_release_over_the_budget_is_flagged_and_refused_when_asked(warehouse_db, tmp_path, caplog):
    engine, schema = warehouse_db
    _make_source(engine, schema)
    # explicit delta: the default one needs a DP record count of at least 3, and at Laplace scale 200 a
    # few hundred patients draw one below that in about one run in 200 (the noise follows the schema name)
    tables = [
        {
            "name": "all",
            "target": "visits_dp",
            "aid_columns": ["patient_id"],
            "engine_params": {"epsilon": 1.0, "delta": 1e-6},
        },
        {
            "name": "older",
            "target": "older_dp",
            "where": "age >= 40",
            "aid_columns": ["patient_id"],
            "engine_params": {"epsilon": 1.0, "delta": 1e-6},
        },
    ]
    warn = _config(engine, schema, tables, dp={"budget_epsilon": 1.5})
    run_table(warn, "all", salt=SALT)
    [over] = run_table(warn, "older", salt=SALT, report_dir=tmp_path / "r")
    assert over.metrics["dp_budget"]["over_budget"] == "epsilon 2 > dp.budget_epsilon 1.5"
    assert "Over the DP budget" in over.report_path.read_text(encoding="utf-8")
    assert "table older: over the DP budget: epsilon 2 > dp.budget_epsilon 1.5" in caplog.text  # task logs

    refuse = _config(
        engine,
        schema,
        [{**tables[1], "engine_params": {"epsilon": 0.5, "delta": 1e-6}}],
        dp={"budget_epsilon": 2.2, "refuse_over_budget": True},
    )
    with pytest.raises(DpBudgetError) as refused:
        run_table(refuse, "older", salt=SALT)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("table older: ")
    assert "over 3 releases to epsilon 2.5 > dp.budget_epsilon 2.2; nothing written" in message
    lineage = _lineage(engine, schema)
    assert [row["status"] for row in lineage] == ["success", "success", "failed"]
    assert lineage[-1]["error_stage"] == "dp_budget" and lineage[-1]["dp_identity"] is None
    # the refused release wrote nothing: the previous copy and its lineage stand, and spend nothing
    with engine.connect() as conn:
        quoted = engine.dialect.identifier_preparer
        name = (
            f"{quoted.quote_schema(schema)}.{quoted.quote('older_dp')}"
            if schema
            else quoted.quote("older_dp")
        )
        assert conn.execute(sa.text(f"SELECT COUNT(*) FROM {name}")).scalar() == over.rows_written
    assert [row["dp_epsilon"] for row in lineage[:2]] == pytest.approx([1.0, 1.0])
    assert lineage[-1]["dp_epsilon"] is None


def test_a_wrong_dp_budget_is_one_line_naming_the_key():
    with pytest.raises(ConfigError) as caught:
        parse_config(
            {
                "source": "sqlite://",
                "target": "sqlite:///t.db",
                "dp": {"budget_epsilon": -1, "budget_delta": 2},
                "tables": [{"source": "t"}],
            }
        )
    assert caught.value.problems == [
        "<config>: dp.budget_epsilon: Input should be greater than 0",
        "<config>: dp.budget_delta: Input should be less than 1",
    ]


def test_the_index_rebuilt_from_lineage_recounts_releases_a_run_did_not_see(tmp_path):
    # two runs at once: each counted the ledger before the other's row was in it, and recorded total 1
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'target.db'}")
    ensure_lineage_table(engine, None)
    now = dt.datetime.now(dt.UTC)
    stale = {"total_releases": 1, "total_epsilon": 1.0, "total_delta": 1e-6, "budget_epsilon": 1.5}
    stale |= {"budget_delta": None, "over_budget": None, "identity_id": "i" * 32}
    stale |= {"source_table": "clinic.visits", "protected_unit": "entities of patient_id"}
    with engine.begin() as conn:
        for number, target in enumerate(["visits_dp", "older_dp"]):
            insert_lineage(
                conn,
                None,
                LineageRecord(
                    run_id=f"run-{number}",
                    target_table=target,
                    column_set=None,
                    source=SourceIdentity("postgresql", "db", "clinic", "clinic.visits"),
                    columns=[],
                    aid_columns=["patient_id"],
                    engine="dp_marginals",
                    package_version="0",
                    parameters={},
                    config_hash="c" * 64,
                    source_schema_hash="s" * 64,
                    source_schema=[],
                    synthetic_rows=100,
                    started_at=now,
                    finished_at=now + dt.timedelta(seconds=number),
                    quality_metrics={"columns": {}, "pairs": [], "dp_budget": stale},
                    dp_identity="i" * 32,
                    dp_release=f"release-{number}",
                    dp_epsilon=1.0,
                    dp_delta=1e-6,
                ),
            )
    payloads = payloads_from_lineage(lineage_history(engine, None), None)
    recounted = [payload["metrics"]["dp_budget"] for payload in payloads]
    assert [(b["total_releases"], b["total_epsilon"]) for b in recounted] == [(1, 1.0), (2, 2.0)]
    assert recounted[1]["over_budget"] == "epsilon 2 > dp.budget_epsilon 1.5"
    text = write_report_index(tmp_path / "index", payloads).read_text(encoding="utf-8")
    assert "over budget: epsilon 2 &gt; dp.budget_epsilon 1.5" in text and "visits_dp, older_dp" in text
    engine.dispose()
