"""The OpenLineage facets of a task from its config alone (what START and FAIL events carry): AID columns
as read-only input columns, one output per column set, the effective parameters and the DP budget."""

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
