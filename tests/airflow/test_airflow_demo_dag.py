"""The example DAG (dags/syndiffix_demo_warehouse.py + dags/configs/demo_warehouse.yaml), run for real with
dag.test() against PostgreSQL: tables, lineage rows, OpenLineage events, Asset events, no salt leaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = [pytest.mark.airflow, pytest.mark.postgres, pytest.mark.slow]

DAG_ID = "syndiffix_demo_warehouse"
TARGET_SCHEMA = "synthetic"
# target table -> (source table, columns), as dags/configs/demo_warehouse.yaml configures them
EXPECTED = {
    "flights_delays": ("flights", ["carrier", "origin", "dest", "dep_delay", "arr_delay"]),
    "flights_schedule": ("flights", ["month", "day", "hour", "origin", "distance", "air_time"]),
    "planes": ("planes", ["year", "type", "manufacturer", "engines", "seats", "engine"]),
    "weather": (
        "weather",
        ["origin", "month", "temp", "humid", "wind_speed", "precip", "pressure", "visib", "time_hour"],
    ),
}


@pytest.fixture(scope="module")
def demo_run(airflow_env, demo_source, run_dag):
    dag_run = run_dag(DAG_ID)
    return dag_run


def _database(url: str) -> str:
    import sqlalchemy as sa

    return sa.make_url(url).database


def test_the_demo_dag_synthesizes_every_configured_table_into_the_target_schema(demo_run, demo_source):
    import sqlalchemy as sa

    assert demo_run.state == "success"
    engine = sa.create_engine(demo_source)
    try:
        inspector = sa.inspect(engine)
        tables = set(inspector.get_table_names(schema=TARGET_SCHEMA))
        assert set(EXPECTED) <= tables
        assert not [t for t in tables if t.startswith("_sdx_")], "a staging table was left behind"
        with engine.connect() as conn:
            for target, (_, columns) in EXPECTED.items():
                assert [c["name"] for c in inspector.get_columns(target, schema=TARGET_SCHEMA)] == columns
                rows = conn.execute(
                    sa.select(sa.func.count()).select_from(sa.table(target, schema=TARGET_SCHEMA))
                )
                assert rows.scalar_one() > 100, f"{target} is (nearly) empty"
    finally:
        engine.dispose()


def test_each_mapped_task_instance_is_one_output(demo_run):
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        instances = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == demo_run.run_id)
        ).all()
        labels = {ti.rendered_map_index for ti in instances if ti.task_id == "synthesize"}
        states = {ti.state for ti in instances}
    assert labels == {"flights / delays", "flights / schedule", "planes", "weather"}
    assert states == {"success"}


def test_lineage_rows_carry_the_airflow_dag_task_and_run_ids(demo_run, demo_source):
    import sqlalchemy as sa

    engine = sa.create_engine(demo_source)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT target_table, airflow_dag_id, airflow_task_id, airflow_run_id, status "
                    f"FROM {TARGET_SCHEMA}.syndiffix_lineage WHERE airflow_run_id = :run_id"
                ),
                {"run_id": demo_run.run_id},
            ).all()
    finally:
        engine.dispose()
    assert sorted(r.target_table for r in rows) == sorted(EXPECTED)
    assert {(r.airflow_dag_id, r.airflow_task_id, r.status) for r in rows} == {
        (DAG_ID, "synthesize", "success")
    }


def test_openlineage_events_carry_schema_and_column_lineage_facets(demo_run, airflow_env, demo_source):
    database = _database(demo_source)
    events = [json.loads(line) for line in airflow_env.openlineage_file.read_text().splitlines()]
    completes = [
        e
        for e in events
        if e["eventType"] == "COMPLETE"
        and e["job"]["name"] == f"{DAG_ID}.synthesize"
        and e["run"]["facets"].get("airflow", {}).get("dagRun", {}).get("run_id") == demo_run.run_id
    ]
    outputs = {o["name"]: (e, o) for e in completes for o in e["outputs"]}
    assert set(outputs) == {f"{database}.{TARGET_SCHEMA}.{t}" for t in EXPECTED}
    for target, (source, columns) in EXPECTED.items():
        event, output = outputs[f"{database}.{TARGET_SCHEMA}.{target}"]
        assert output["namespace"].startswith("postgres://127.0.0.1:")
        assert [f["name"] for f in output["facets"]["schema"]["fields"]] == columns
        source_name = f"{database}.demo.{source}"
        [source_dataset] = event["inputs"]
        assert source_dataset["name"] == source_name
        assert set(columns) <= {f["name"] for f in source_dataset["facets"]["schema"]["fields"]}
        assert output["outputFacets"]["outputStatistics"]["rowCount"] > 100
        lineage = output["facets"]["columnLineage"]["fields"]
        assert set(lineage) == set(columns)
        for column in columns:
            [input_field] = lineage[column]["inputFields"]
            assert (input_field["name"], input_field["field"]) == (source_name, column)


def test_asset_events_are_recorded_once_per_table_through_the_alias(demo_run, demo_source):
    from airflow.models.asset import AssetAliasModel, AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    database = _database(demo_source)
    with create_session() as session:
        events = session.execute(
            select(AssetModel.uri, AssetEvent.source_map_index)
            .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
            .where(AssetEvent.source_dag_id == DAG_ID, AssetEvent.source_run_id == demo_run.run_id)
        ).all()
        alias = session.scalar(select(AssetAliasModel).where(AssetAliasModel.name == f"syndiffix/{DAG_ID}"))
        aliased = {event.asset.uri for event in alias.asset_events if event.source_run_id == demo_run.run_id}
    uris = sorted(uri for uri, _ in events)
    assert len(uris) == len(EXPECTED), f"expected one event per table, got {uris}"
    assert all(uri.startswith("postgres://127.0.0.1:") for uri in uris)
    assert {uri.split("/", 3)[3] for uri in uris} == {f"{database}/{TARGET_SCHEMA}/{t}" for t in EXPECTED}
    assert aliased == set(uris)


def test_each_table_gets_this_runs_html_report_and_the_task_links_to_it(demo_run, airflow_env):
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(XComModel.key, XComModel.value, XComModel.map_index).where(
                XComModel.dag_id == DAG_ID,
                XComModel.run_id == demo_run.run_id,
                XComModel.task_id == "synthesize",
            )
        ).all()
    values = [_loaded(value) for key, value, _ in rows if key == "return_value"]
    links = {index: value for key, value, index in rows if key == "_link_SyntheticReportLink"}
    reports = {entry["target_table"]: entry["report_path"] for value in values for entry in value}
    assert set(reports) == {f"{TARGET_SCHEMA}.{t}" for t in EXPECTED}
    assert sorted(links.values()) == sorted(reports.values())
    for target, url in reports.items():
        # SYNDIFFIX_REPORT_DIR is a local folder: the report is there as a file:// object-storage path.
        assert url.startswith(f"file://{airflow_env.report_dir}/"), (target, url)
        assert url.endswith(".html") and url.count("/") > str(airflow_env.report_dir).count("/") + 3
        page = Path(url.removeprefix("file://")).read_text(encoding="utf-8")
        assert "<img" in page and target in page, f"the report of {target} is not its run's report"
    assert (airflow_env.report_dir / "index.html").is_file()


def _loaded(value):
    return json.loads(value) if isinstance(value, str) else value


def test_the_salt_is_in_no_airflow_record_lineage_row_or_lineage_event(
    demo_run, airflow_env, demo_source, salt
):
    import sqlalchemy as sa

    # Everything Airflow persisted (XCom, rendered template fields, task logs, OpenLineage events).
    for path in airflow_env.home.rglob("*"):
        if path.is_file():
            assert salt.encode() not in path.read_bytes(), f"the salt leaked into {path}"
    engine = sa.create_engine(demo_source)
    try:
        with engine.connect() as conn:
            lineage = conn.execute(sa.text(f"SELECT * FROM {TARGET_SCHEMA}.syndiffix_lineage")).all()
    finally:
        engine.dispose()
    assert lineage
    assert salt not in repr(lineage)


def _task_events(airflow_env, run_id: str, event_type: str) -> list[dict]:
    events = [json.loads(line) for line in airflow_env.openlineage_file.read_text().splitlines()]
    return [
        e
        for e in events
        if e["eventType"] == event_type
        and e["job"]["name"] == f"{DAG_ID}.synthesize"
        and e["run"]["facets"].get("airflow", {}).get("dagRun", {}).get("run_id") == run_id
    ]


def test_start_events_name_inputs_and_outputs_before_the_run_with_the_syndiffix_facets(
    demo_run, airflow_env, demo_source, salt
):
    from syndiffix_ops.fingerprint import salt_fingerprint

    database = _database(demo_source)
    starts = _task_events(airflow_env, demo_run.run_id, "START")
    assert len(starts) == len(EXPECTED)
    outputs = {o["name"] for e in starts for o in e["outputs"]}
    assert outputs == {f"{database}.{TARGET_SCHEMA}.{t}" for t in EXPECTED}
    for event in starts:
        [source] = event["inputs"]
        assert source["name"] in {f"{database}.demo.{s}" for s, _ in EXPECTED.values()}
        assert source["facets"]["syndiffix_aidColumns"] | {"_producer": None, "_schemaURL": None} == {
            "columns": [],
            "written": False,
            "_producer": None,
            "_schemaURL": None,
        }
        run_facet = event["run"]["facets"]["syndiffix"]
        assert run_facet["engine"] == "syndiffix"
        assert run_facet["parameters"]["anonymization"]  # resolved: every default filled in
        assert run_facet["saltFingerprint"] == salt_fingerprint(salt.encode())
        assert run_facet["lineageIds"] == [] and run_facet.get("epsilonSpent") is None  # not a DP engine
        assert salt not in json.dumps(event)


def test_complete_events_carry_the_lineage_ids_of_the_rows_written(demo_run, airflow_env, demo_source):
    import sqlalchemy as sa

    engine = sa.create_engine(demo_source)
    try:
        with engine.connect() as conn:
            ids = set(
                conn.execute(
                    sa.text(
                        f"SELECT lineage_id FROM {TARGET_SCHEMA}.syndiffix_lineage WHERE airflow_run_id = :r"
                    ),
                    {"r": demo_run.run_id},
                ).scalars()
            )
    finally:
        engine.dispose()
    completes = _task_events(airflow_env, demo_run.run_id, "COMPLETE")
    assert {i for e in completes for i in e["run"]["facets"]["syndiffix"]["lineageIds"]} == ids
