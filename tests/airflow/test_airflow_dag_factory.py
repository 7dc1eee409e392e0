"""The YAML DAG factory as the dag-processor sees it: one DAG per DAG file and YAML file, a broken YAML an
import error of its own DAG file naming the YAML file and field, the other DAGs untouched."""

from __future__ import annotations

import datetime as dt
import importlib
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.airflow

REPO = Path(__file__).resolve().parents[2]

GOOD = """\
version: 1
source_conn_id: warehouse_that_does_not_exist
target_conn_id: synthetic_that_does_not_exist
target_schema: synthetic
dag:
  dag_id: syndiffix_good
  schedule: "0 3 * * *"
  start_date: 2024-05-01
  tags: [finance]
  pool: synthesis_pool
  max_active_tasks: 2
  default_args:
    owner: data-platform
    retries: 3
    retry_delay: 120
tables:
  - source: sales.orders
    aid_columns: [customer_id]
    column_sets:
      by_region: {columns: [region, amount]}
      by_day: {columns: [ordered_at, amount]}
  - source: sales.customers
"""

BROKEN = """\
version: 1
source_conn_id: warehouse
target_conn_id: synthetic
dag:
  dag_id: syndiffix_broken
tables:
  - source: sales.orders
    aid_colums: [customer_id]
"""


def _dag_folder(tmp_path: Path, add_config_dag, configs: dict[str, str]) -> Path:
    folder = tmp_path / "dags"
    for name, text in configs.items():
        add_config_dag(folder, name, text)
    return folder


def test_a_valid_config_becomes_one_dag_with_one_mapped_instance_per_output(airflow_env, tmp_path):
    from airflow.sdk import AssetAlias

    from syndiffix_ops.airflow.dag_factory import build_dag

    (tmp_path / "good.yaml").write_text(GOOD)
    # The connections named in the file do not exist: building the DAG must not look them up.
    dag = build_dag(tmp_path / "good.yaml")
    assert dag.dag_id == "syndiffix_good"
    assert dag.schedule == "0 3 * * *"
    assert dag.start_date == dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    assert set(dag.tags) == {"finance", "syndiffix"}
    assert dag.max_active_tasks == 2
    assert dag.max_active_runs == 1  # two runs at once would write the same tables
    tasks = {task.task_id: task for task in dag.tasks}
    assert set(tasks) == {"plan", "synthesize"}  # the plan task reads the source's keys when a run starts
    assert (tasks["plan"].pool, tasks["plan"].retries) == ("default_pool", 3)  # no synthesis slot taken
    task = tasks["synthesize"]
    assert task.partial_kwargs["pool"] == "synthesis_pool"
    assert task.partial_kwargs["retries"] == 3
    assert task.partial_kwargs["retry_delay"] == dt.timedelta(seconds=120)
    assert task.partial_kwargs["outlets"] == [AssetAlias(name="syndiffix/syndiffix_good")]
    (tmp_path / "good.yaml").write_text(GOOD + "keys_from_database: false\n")
    [task] = build_dag(tmp_path / "good.yaml").tasks  # every key is in the YAML: planned while parsing
    assert task.expand_input.value == [
        {"table": "orders", "column_set": "by_region", "linked_set": []},
        {"table": "orders", "column_set": "by_day", "linked_set": []},
        {"table": "customers", "column_set": None, "linked_set": []},
    ]


def test_max_active_runs_is_configurable(airflow_env, tmp_path):
    from syndiffix_ops.airflow.dag_factory import build_dag

    (tmp_path / "two.yaml").write_text(GOOD.replace("  max_active_tasks: 2\n", "  max_active_runs: 2\n"))
    assert build_dag(tmp_path / "two.yaml").max_active_runs == 2


def test_a_broken_file_is_an_import_error_of_its_own_dag_file_and_the_others_still_load(
    airflow_env, tmp_path, add_config_dag
):
    from airflow.dag_processing.dagbag import DagBag

    folder = _dag_folder(tmp_path, add_config_dag, {"good": GOOD, "broken": BROKEN})
    bag = DagBag(dag_folder=str(folder))
    assert "syndiffix_good" in bag.dags
    assert "syndiffix_broken" not in bag.dags
    [(error_file, message)] = bag.import_errors.items()
    assert Path(error_file).name == "broken_dag.py"
    assert "broken.yaml:8" in message
    assert "tables[0]" in message and "aid_colums" in message
    assert "good.yaml" not in message


def test_the_metadata_db_flags_the_broken_dag_and_keeps_the_others_schedulable(
    airflow_env, tmp_path, add_config_dag
):
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.models.errors import ParseImportError
    from airflow.utils.session import create_session
    from sqlalchemy import select

    # First both configs are valid: two DAGs. Then one YAML breaks: its own DAG carries the error.
    folder = _dag_folder(tmp_path, add_config_dag, {"good": GOOD, "sales": GOOD.replace("_good", "_sales")})
    DagBundlesManager().sync_bundles_to_db()

    def parse():
        bag = BundleDagBag(dag_folder=str(folder), bundle_path=folder, bundle_name="dags-folder")
        sync_bag_to_db(bag, "dags-folder", None)

    parse()
    (folder / "configs" / "sales.yaml").write_text(
        GOOD.replace("_good", "_sales").replace("retries: 3", "retries: x")
    )
    parse()
    with create_session() as session:
        good = session.scalar(select(DagModel).where(DagModel.dag_id == "syndiffix_good"))
        sales = session.scalar(select(DagModel).where(DagModel.dag_id == "syndiffix_sales"))
        [error] = session.scalars(
            select(ParseImportError).where(ParseImportError.filename.in_(["good_dag.py", "sales_dag.py"]))
        ).all()
        assert (good.is_stale, good.has_import_errors) == (False, False)
        assert sales.has_import_errors is True
        assert error.filename == "sales_dag.py"
        assert "sales.yaml" in error.stacktrace and "dag.default_args.retries" in error.stacktrace


@pytest.mark.parametrize(
    ("dag_block", "field", "message"),
    [
        ("  schedule: '61 * * * *'\n  start_date: 2024-01-01\n", "dag.schedule", "neither a cron expression"),
        ("  schedule: '@daily'\n", "dag.start_date", "required when dag.schedule is set"),
        ("  default_args: {retries: two}\n", "dag.default_args.retries", "expected int"),
        ("  default_args: {retry_delay: 5m}\n", "dag.default_args.retry_delay", "duration in seconds"),
        (
            "  default_args: {on_failure_callback: x}\n",
            "dag.default_args.on_failure_callback",
            "not an operator",
        ),
        ("  dag_id: 'has space'\n", "dag.dag_id", "may hold only"),
    ],
)
def test_dag_block_problems_name_the_file_and_the_field(airflow_env, tmp_path, dag_block, field, message):
    from syndiffix_ops.airflow.dag_factory import dag_spec
    from syndiffix_ops.config import ConfigError

    config = GOOD.replace(GOOD[GOOD.index("dag:\n") : GOOD.index("tables:")], "dag:\n" + dag_block)
    (tmp_path / "odd.yaml").write_text(config)
    with pytest.raises(ConfigError) as raised:
        dag_spec(tmp_path / "odd.yaml")
    problems = raised.value.problems
    assert any(str(tmp_path / "odd.yaml") in p and f"{field}:" in p and message in p for p in problems), (
        problems
    )


def test_two_files_with_one_dag_id_fail_the_second_only(airflow_env, tmp_path, add_config_dag):
    from airflow.dag_processing.dagbag import DagBag

    folder = _dag_folder(tmp_path, add_config_dag, {"a": GOOD, "b": GOOD})
    bag = DagBag(dag_folder=str(folder))
    assert bag.dags["syndiffix_good"].fileloc == str(folder / "a_dag.py")
    [(error_file, message)] = bag.import_errors.items()
    assert Path(error_file).name == "b_dag.py" and "syndiffix_good" in message


def test_a_file_without_dag_block_gets_a_dag_id_from_its_name_and_no_schedule(airflow_env, tmp_path):
    from syndiffix_ops.airflow.dag_factory import build_dag

    config = GOOD[: GOOD.index("dag:\n")] + GOOD[GOOD.index("tables:") :]
    (tmp_path / "hr warehouse.yml").write_text(config)
    dag = build_dag(tmp_path / "hr warehouse.yml")
    assert dag.dag_id == "syndiffix_hr_warehouse"
    assert dag.schedule is None
    assert dag.max_active_runs == 1


def test_the_provider_info_satisfies_airflows_schema(airflow_env):
    import json

    import airflow
    import jsonschema

    from syndiffix_ops.airflow.provider import get_provider_info

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    modules = info["operators"][0]["python-modules"]
    assert modules == [
        "syndiffix_ops.airflow.operators",
        "syndiffix_ops.airflow.plan_operator",
        "syndiffix_ops.airflow.risk_operator",
    ]
    # Every module Airflow is told about must import and hold an operator.
    from airflow.models import BaseOperator

    for module in modules:
        imported = importlib.import_module(module)
        assert any(
            isinstance(obj, type) and issubclass(obj, BaseOperator) and obj.__module__ == module
            for obj in vars(imported).values()
        ), module
    # Airflow finds it through the installed entry point, as every Airflow process does on start-up.
    from airflow.providers_manager import ProvidersManager

    assert "syndiffix-ops" in ProvidersManager().providers


def test_the_operator_keeps_the_salt_out_of_templates_and_the_heavy_imports_out_of_parsing(airflow_env):
    import subprocess
    import sys

    from syndiffix_ops.airflow.operators import SyntheticTableOperator

    assert not {"salt_conn_id", "salt_variable"} & set(SyntheticTableOperator.template_fields)
    # Parsing a DAG file imports the operator and the factory; neither may pull in the warehouse layer.
    probe = textwrap.dedent(
        """
        import sys
        import syndiffix_ops.airflow.dag_factory, syndiffix_ops.airflow.operators, syndiffix_ops.airflow.plan_operator
        heavy = sorted(m for m in ("pandas", "syndiffix_ops.pipeline", "syndiffix_core") if m in sys.modules)
        print(",".join(heavy))
        """
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
