"""The YAML DAG factory as the dag-processor sees it: DAGs from the valid files only, an import error
naming the broken file and field, and the metadata DB keeping the valid DAGs schedulable."""

from __future__ import annotations

import datetime as dt
import importlib
import shutil
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


def _dag_folder(tmp_path: Path, configs: dict[str, str]) -> Path:
    folder = tmp_path / "dags"
    (folder / "configs").mkdir(parents=True)
    for name in ("syndiffix_warehouses.py", "syndiffix_config_check.py"):
        shutil.copy(REPO / "dags" / name, folder / name)
    for name, text in configs.items():
        (folder / "configs" / name).write_text(text)
    return folder


def test_a_valid_config_becomes_one_dag_with_one_mapped_instance_per_output(airflow_env, tmp_path):
    from airflow.sdk import AssetAlias

    from syndiffix_ops.airflow.dag_factory import build_dags

    folder = _dag_folder(tmp_path, {"good.yaml": GOOD})
    # The connections named in the file do not exist: building the DAG must not look them up.
    dags = build_dags(folder / "configs")
    dag = dags["syndiffix_good"]
    assert dag.schedule == "0 3 * * *"
    assert dag.start_date == dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    assert set(dag.tags) == {"finance", "syndiffix"}
    assert dag.max_active_tasks == 2
    [task] = dag.tasks
    assert task.task_id == "synthesize"
    assert task.partial_kwargs["pool"] == "synthesis_pool"
    assert task.partial_kwargs["retries"] == 3
    assert task.partial_kwargs["retry_delay"] == dt.timedelta(seconds=120)
    assert task.partial_kwargs["outlets"] == [AssetAlias(name="syndiffix/syndiffix_good")]
    assert task.expand_input.value == [
        {"table": "orders", "column_set": "by_region"},
        {"table": "orders", "column_set": "by_day"},
        {"table": "customers", "column_set": None},
    ]


def test_a_broken_file_is_an_import_error_naming_file_and_field_and_the_others_still_load(
    airflow_env, tmp_path
):
    from airflow.dag_processing.dagbag import DagBag

    folder = _dag_folder(tmp_path, {"good.yaml": GOOD, "broken.yaml": BROKEN})
    bag = DagBag(dag_folder=str(folder))
    assert "syndiffix_good" in bag.dags
    assert "syndiffix_broken" not in bag.dags
    [(error_file, message)] = bag.import_errors.items()
    assert Path(error_file).name == "syndiffix_config_check.py"
    assert "broken.yaml" in message
    assert "tables[0]" in message and "aid_colums" in message
    assert "good.yaml" not in message


def test_the_metadata_db_keeps_valid_dags_schedulable_next_to_a_broken_file(airflow_env, tmp_path):
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.dagbag import BundleDagBag, sync_bag_to_db
    from airflow.models.dag import DagModel
    from airflow.models.errors import ParseImportError
    from airflow.utils.session import create_session
    from sqlalchemy import select

    folder = _dag_folder(tmp_path, {"good.yaml": GOOD, "broken.yaml": BROKEN})
    DagBundlesManager().sync_bundles_to_db()
    bag = BundleDagBag(dag_folder=str(folder), bundle_path=folder, bundle_name="dags-folder")
    sync_bag_to_db(bag, "dags-folder", None)
    with create_session() as session:
        good = session.scalar(select(DagModel).where(DagModel.dag_id == "syndiffix_good"))
        errors = session.scalars(
            select(ParseImportError).where(ParseImportError.filename == "syndiffix_config_check.py")
        ).all()
        assert (good.is_stale, good.has_import_errors) == (False, False)
        assert len(errors) == 1 and "aid_colums" in errors[0].stacktrace


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
    from syndiffix_ops.airflow.dag_factory import load_dag_specs

    config = GOOD.replace(GOOD[GOOD.index("dag:\n") : GOOD.index("tables:")], "dag:\n" + dag_block)
    folder = _dag_folder(tmp_path, {"odd.yaml": config})
    specs, problems = load_dag_specs(folder / "configs")
    assert specs == []
    assert any(
        str(folder / "configs" / "odd.yaml") in p and f"{field}:" in p and message in p for p in problems
    ), problems


def test_two_files_with_one_dag_id_fail_the_second_only(airflow_env, tmp_path):
    from syndiffix_ops.airflow.dag_factory import load_dag_specs

    folder = _dag_folder(tmp_path, {"a.yaml": GOOD, "b.yaml": GOOD})
    specs, problems = load_dag_specs(folder / "configs")
    assert [s.path.name for s in specs] == ["a.yaml"]
    [problem] = problems
    assert "b.yaml: dag.dag_id" in problem and "a.yaml" in problem


def test_a_file_without_dag_block_gets_a_dag_id_from_its_name_and_no_schedule(airflow_env, tmp_path):
    from syndiffix_ops.airflow.dag_factory import build_dags

    config = GOOD[: GOOD.index("dag:\n")] + GOOD[GOOD.index("tables:") :]
    folder = _dag_folder(tmp_path, {"hr warehouse.yml": config})
    [(dag_id, dag)] = build_dags(folder / "configs").items()
    assert dag_id == "syndiffix_hr_warehouse"
    assert dag.schedule is None


def test_the_provider_info_satisfies_airflows_schema(airflow_env):
    import json

    import airflow
    import jsonschema

    from syndiffix_ops.airflow.provider import get_provider_info

    schema = json.loads((Path(airflow.__file__).parent / "provider_info.schema.json").read_text())
    info = get_provider_info()
    jsonschema.validate(info, schema)
    modules = info["operators"][0]["python-modules"]
    assert modules == ["syndiffix_ops.airflow.operators", "syndiffix_ops.airflow.risk_operator"]
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
        import syndiffix_ops.airflow.dag_factory, syndiffix_ops.airflow.operators
        heavy = sorted(m for m in ("pandas", "syndiffix_ops.pipeline", "syndiffix_core") if m in sys.modules)
        print(",".join(heavy))
        """
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_worker_parsing_for_one_task_builds_only_that_dag_and_skips_the_check(
    airflow_env, tmp_path, monkeypatch
):
    from syndiffix_ops.airflow.dag_factory import build_dags, check_configs
    from syndiffix_ops.config import ConfigError

    other = GOOD.replace("dag_id: syndiffix_good", "dag_id: syndiffix_other")
    folder = _dag_folder(tmp_path, {"good.yaml": GOOD, "other.yaml": other, "broken.yaml": BROKEN})
    # What Airflow sets while a worker loads the DAG file to run one task of syndiffix_other.
    monkeypatch.setenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID", "syndiffix_other")
    assert list(build_dags(folder / "configs")) == ["syndiffix_other"]
    check_configs(folder / "configs")  # the dag-processor reports broken files; the worker does not
    monkeypatch.delenv("_AIRFLOW_PARSING_CONTEXT_DAG_ID")
    assert sorted(build_dags(folder / "configs")) == ["syndiffix_good", "syndiffix_other"]
    with pytest.raises(ConfigError, match="broken.yaml"):
        check_configs(folder / "configs")
