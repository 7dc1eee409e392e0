"""The OpenLineage facets of a task from its config alone (what START and FAIL events carry): AID columns
as read-only input columns, one output per column set, the effective parameters and the DP budget; and the
events of a linked set's task instance, run for real with dag.test() against PostgreSQL: every table of
the set, on START, COMPLETE and FAIL."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.airflow

CONFIG = """\
version: 1
source_conn_id: lineage_source
target_conn_id: lineage_target
target_schema: synthetic
tables:
  - source: fleet.planes
    aid_columns: [tailnum]
    engine: dp_marginals
    engine_params: {epsilon: 2.5}
    column_sets:
      sizes: {columns: [seats, engines]}
      ages: {columns: [year]}
"""


def test_the_plan_of_a_task_names_its_datasets_aid_columns_and_dp_budget(airflow_env, tmp_path, monkeypatch):
    from airflow.providers.openlineage.extractors import OperatorLineage

    from syndiffix_ops.airflow.operators import SyntheticTableOperator

    for conn_id, host in (("LINEAGE_SOURCE", "source-db"), ("LINEAGE_TARGET", "target-db")):
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id}", json.dumps({"conn_type": "postgres", "host": host, "schema": "wh"})
        )
    monkeypatch.setenv("SYNDIFFIX_SALT", "a-salt-from-the-environment")
    (tmp_path / "fleet.yaml").write_text(CONFIG)
    operator = SyntheticTableOperator(task_id="t", config_path=str(tmp_path / "fleet.yaml"), table="planes")

    start = operator.get_openlineage_facets_on_start()
    assert isinstance(start, OperatorLineage)
    [source] = start.inputs
    assert (source.namespace, source.name) == ("postgres://source-db:5432", "wh.fleet.planes")
    aid = source.facets["syndiffix_aidColumns"]
    assert (aid.columns, aid.written) == (["tailnum"], False)
    assert [(o.namespace, o.name) for o in start.outputs] == [
        ("postgres://target-db:5432", "wh.synthetic.planes_sizes"),
        ("postgres://target-db:5432", "wh.synthetic.planes_ages"),
    ]
    facet = start.run_facets["syndiffix"]
    assert (facet.engine, facet.parameters["epsilon"], facet.epsilonSpent) == ("dp_marginals", 2.5, 0.0)
    assert facet.saltFingerprint and "a-salt-from-the-environment" not in repr(start)

    # Nothing written before the failure: the FAIL event names the same datasets and spent no budget.
    failed = operator.get_openlineage_facets_on_failure(task_instance=None)
    assert [o.name for o in failed.outputs] == [o.name for o in start.outputs]
    assert failed.run_facets["syndiffix"].epsilonSpent == 0.0


STANDALONE_SET_CONFIG = """\
version: 1
source_conn_id: lineage_source
target_conn_id: lineage_target
target_schema: synthetic
keys_from_database: false
tables:
  - source: shop.customers
    primary_key: [customer_id]
  - source: shop.orders
    primary_key: [order_id]
    engine: dp_marginals
    engine_params: {epsilon: 1.5}
    foreign_keys:
      - {columns: [customer_id], references: customers(customer_id)}
"""


def test_an_operator_on_its_own_names_its_whole_linked_set_before_it_runs(airflow_env, tmp_path, monkeypatch):
    """An operator outside the DAG factory given a child table writes the child's whole set, parents
    first: its START and FAIL events name every table of the set, and each table's engine."""
    from syndiffix_ops.airflow.operators import SyntheticTableOperator

    for conn_id, host in (("LINEAGE_SOURCE", "source-db"), ("LINEAGE_TARGET", "target-db")):
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id}", json.dumps({"conn_type": "postgres", "host": host, "schema": "wh"})
        )
    (tmp_path / "shop.yaml").write_text(STANDALONE_SET_CONFIG)
    operator = SyntheticTableOperator(task_id="t", config_path=str(tmp_path / "shop.yaml"), table="orders")

    start = operator.get_openlineage_facets_on_start()
    failed = operator.get_openlineage_facets_on_failure(task_instance=None)
    for lineage in (start, failed):
        assert [i.name for i in lineage.inputs] == ["wh.shop.customers", "wh.shop.orders"]
        assert [o.name for o in lineage.outputs] == ["wh.synthetic.customers", "wh.synthetic.orders"]
        facet = lineage.run_facets["syndiffix"]
        assert (facet.table, facet.linkedSet) == ("customers", ["customers", "orders"])
        assert facet.engines == {"customers": "syndiffix", "orders": "dp_marginals"}
        assert facet.epsilonSpent == 0.0


SET_SOURCE = "ol_set_src"
SET_CONFIG = f"""\
version: 1
source_conn_id: syndiffix_source
target_conn_id: syndiffix_target
target_schema: {{target}}
keys_from_database: {{keys_from_database}}
dag:
  dag_id: {{dag_id}}
tables:
  - source: {SET_SOURCE}.customers
    primary_key: [customer_id]
    aid_columns: [household_id]
  - source: {SET_SOURCE}.orders
    primary_key: [order_id]
    foreign_keys:
      - {{{{columns: [customer_id], references: customers(customer_id)}}}}
{{orders_columns}}"""


@pytest.fixture(scope="module")
def set_source(pg_url):
    import numpy as np
    import pandas as pd
    import sqlalchemy as sa

    rng = np.random.default_rng(5)
    customers = pd.DataFrame(
        {
            "customer_id": np.arange(1, 401),
            "household_id": rng.integers(1, 300, 400),
            "age": rng.integers(18, 90, 400),
        }
    )
    per_customer = rng.poisson(3, 400)
    orders = pd.DataFrame(
        {
            "order_id": np.arange(1, per_customer.sum() + 1),
            "customer_id": np.repeat(customers.customer_id, per_customer),
            "amount": rng.gamma(2.0, 20.0, per_customer.sum()),
        }
    )
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {SET_SOURCE} CASCADE")
        conn.exec_driver_sql(f"CREATE SCHEMA {SET_SOURCE}")
        for name, frame in (("customers", customers), ("orders", orders)):
            frame.to_sql(name, conn, schema=SET_SOURCE, index=False)
    engine.dispose()
    return pg_url


def _run_set(
    airflow_env,
    add_config_dag,
    run_dag,
    dag_id: str,
    target: str,
    orders_columns: str = "",
    *,
    task: str = "synthesize",
    keys_from_database: bool = False,
):
    """Run the set's DAG; (its run, the OpenLineage events of `task` in that run by type)."""
    config = SET_CONFIG.format(
        dag_id=dag_id, target=target, orders_columns=orders_columns, keys_from_database=keys_from_database
    )
    files = add_config_dag(airflow_env.dags_folder, dag_id, config)
    try:
        dag_run = run_dag(dag_id)
    finally:
        for file in files:
            file.unlink()
    events = [json.loads(line) for line in airflow_env.openlineage_file.read_text().splitlines()]
    by_type = {}
    for event in events:
        if (
            event["job"]["name"] == f"{dag_id}.{task}"
            and event["run"]["facets"].get("airflow", {}).get("dagRun", {}).get("run_id") == dag_run.run_id
        ):
            by_type.setdefault(event["eventType"], []).append(event)
    return dag_run, by_type


def _names(datasets: list[dict]) -> list[str]:
    return [d["name"] for d in datasets]


@pytest.mark.postgres
def test_a_linked_sets_events_carry_every_table_of_the_set(airflow_env, add_config_dag, run_dag, set_source):
    import sqlalchemy as sa

    database = sa.make_url(set_source).database
    dag_run, events = _run_set(
        airflow_env, add_config_dag, run_dag, "ol_linked_set", "ol_set_out", task="customers.publish"
    )
    assert dag_run.state == "success"
    [start], [complete] = events["START"], events["COMPLETE"]
    sources = [f"{database}.{SET_SOURCE}.customers", f"{database}.{SET_SOURCE}.orders"]
    targets = [f"{database}.ol_set_out.customers", f"{database}.ol_set_out.orders"]
    # Each step reads every source of the set (a table's link statistics come from its children) and
    # writes no target table (its rows are staged for the publish task).
    log = [json.loads(line) for line in airflow_env.openlineage_file.read_text().splitlines()]
    for table in ("customers", "orders"):
        step = [
            e
            for e in log
            if e["job"]["name"] == f"ol_linked_set.customers.synthesize_{table}"
            and e["run"]["facets"].get("airflow", {}).get("dagRun", {}).get("run_id") == dag_run.run_id
        ]
        assert {e["eventType"] for e in step} == {"START", "COMPLETE"}
        for event in step:
            assert (_names(event["inputs"]), _names(event["outputs"])) == (sources, []), event["eventType"]
            facet = event["run"]["facets"]["syndiffix"]
            assert (facet["table"], facet["linkedSet"], facet["lineageIds"]) == (
                table,
                ["customers", "orders"],
                [],
            )
    for event in (start, complete):
        assert (_names(event["inputs"]), _names(event["outputs"])) == (sources, targets), event["eventType"]
        aids = {i["name"]: i["facets"]["syndiffix_aidColumns"]["columns"] for i in event["inputs"]}
        assert aids == {sources[0]: ["household_id"], sources[1]: []}
        assert event["run"]["facets"]["syndiffix"]["linkedSet"] == ["customers", "orders"]
    assert start["run"]["facets"]["syndiffix"]["lineageIds"] == []
    assert len(set(complete["run"]["facets"]["syndiffix"]["lineageIds"])) == 2
    # COMPLETE: each table with its own schema; the AID column is read, never written.
    inputs = {i["name"]: [f["name"] for f in i["facets"]["schema"]["fields"]] for i in complete["inputs"]}
    assert inputs == {
        sources[0]: ["customer_id", "household_id", "age"],
        sources[1]: ["order_id", "customer_id", "amount"],
    }
    outputs = {o["name"]: o for o in complete["outputs"]}
    assert [f["name"] for f in outputs[targets[0]]["facets"]["schema"]["fields"]] == ["customer_id", "age"]
    assert [f["name"] for f in outputs[targets[1]]["facets"]["schema"]["fields"]] == [
        "order_id",
        "customer_id",
        "amount",
    ]
    for target, source in zip(targets, sources, strict=True):
        lineage = outputs[target]["facets"]["columnLineage"]["fields"]
        assert {f["name"] for c in lineage.values() for f in c["inputFields"]} == {source}
    # Synthetic rows only: each output's rowCount is what its synthetic table holds.
    engine = sa.create_engine(set_source)
    try:
        with engine.connect() as conn:
            for target in ("customers", "orders"):
                rows = conn.exec_driver_sql(f"SELECT count(*) FROM ol_set_out.{target}").scalar_one()
                output = outputs[f"{database}.ol_set_out.{target}"]
                assert output["outputFacets"]["outputStatistics"]["rowCount"] == rows > 0
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_a_failed_linked_sets_event_names_every_table_it_was_to_read_and_write(
    airflow_env, add_config_dag, run_dag, set_source
):
    """orders names a column its source lacks: the set fails before writing anything, and its FAIL event
    names both sources and both targets, as its START event did, with no lineage ids."""
    import sqlalchemy as sa

    database = sa.make_url(set_source).database
    dag_run, events = _run_set(
        airflow_env,
        add_config_dag,
        run_dag,
        "ol_failed_set",
        "ol_failed_out",
        "    columns: [no_such_column]\n",
        keys_from_database=True,  # the source declares no keys: one task, planned by `plan`, writes the set
    )
    assert dag_run.state == "failed"
    [start], [fail] = events["START"], events["FAIL"]
    for event in (start, fail):
        assert _names(event["inputs"]) == [
            f"{database}.{SET_SOURCE}.customers",
            f"{database}.{SET_SOURCE}.orders",
        ], event["eventType"]
        assert _names(event["outputs"]) == [
            f"{database}.ol_failed_out.customers",
            f"{database}.ol_failed_out.orders",
        ], event["eventType"]
        aids = [i["facets"]["syndiffix_aidColumns"]["columns"] for i in event["inputs"]]
        assert aids == [["household_id"], []]
    facet = fail["run"]["facets"]["syndiffix"]
    assert (facet["linkedSet"], facet["lineageIds"]) == (["customers", "orders"], [])
