"""DAGs from a folder of syndiffix-ops YAML configs: one DAG per file, one mapped task per output.

Each `*.yaml`/`*.yml` file in the folder becomes one DAG (dag_id, schedule, start_date, tags,
default_args, pool from its `dag:` block) whose single mapped task `synthesize` expands to one task
instance per table, or per column set of a table that has several, so a Celery or Kubernetes executor
spreads a warehouse over its workers. Parsing reads only the YAML files: no connection, Variable or
database is touched until a task runs.

Broken files and Airflow's import errors: Airflow records import errors per Python file and, in its
metadata database, marks every DAG defined by a file with an import error as broken (unscheduled,
hidden). If the DAGs of good and broken YAML files came from one Python file, one typo would stop the
whole warehouse. So the work is split over two DAG files that call this module on the same folder:

- one calls `build_dags` and defines the DAGs of the valid files only;
- one calls `check_configs`, defines no DAG, and raises a `ConfigError` naming each broken file and
  field: that is the import error the UI shows, while the valid files' DAGs keep running.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from syndiffix_ops.config import ConfigError, PipelineConfig, load_config

CONFIG_SUFFIXES = (".yaml", ".yml")
TASK_ID = "synthesize"

_DAG_ID = re.compile(r"^[A-Za-z0-9_.-]{1,250}$")
_SCHEDULE_PRESETS = {
    "@once",
    "@continuous",
    "@hourly",
    "@daily",
    "@weekly",
    "@monthly",
    "@quarterly",
    "@yearly",
}
# default_args a YAML file may set: the plain-data operator arguments. Durations are seconds.
_DURATION_ARGS = {"retry_delay", "max_retry_delay", "execution_timeout"}
_PLAIN_ARGS = {
    "owner": str,
    "email": (str, list),
    "email_on_retry": bool,
    "email_on_failure": bool,
    "retries": int,
    "retry_exponential_backoff": (bool, int, float),
    "depends_on_past": bool,
    "priority_weight": int,
    "weight_rule": str,
    "queue": str,
    "pool": str,
    "pool_slots": int,
    "trigger_rule": str,
    "max_active_tis_per_dag": int,
    "max_active_tis_per_dagrun": int,
    "executor": str,
}


@dataclass(frozen=True)
class DagSpec:
    """What one valid YAML file asks for, checked without Airflow or a database."""

    path: Path
    config: PipelineConfig
    dag_id: str
    schedule: str | None
    start_date: dt.datetime | None
    default_args: dict[str, Any]
    outputs: list[dict[str, str | None]]  # expand_kwargs of the mapped task: table and column_set


def config_files(configs_dir: str | Path) -> list[Path]:
    folder = Path(configs_dir)
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in CONFIG_SUFFIXES)


def load_dag_specs(configs_dir: str | Path) -> tuple[list[DagSpec], list[str]]:
    """(specs of the valid files, one line per problem of the broken files). Never raises for a file's
    content, so one broken file cannot hide the others."""
    specs: list[DagSpec] = []
    problems: list[str] = []
    owners: dict[str, Path] = {}
    for path in config_files(configs_dir):
        try:
            spec = _dag_spec(path)
        except ConfigError as error:
            problems.extend(error.problems)
            continue
        if spec.dag_id in owners:
            problems.append(
                f"{path}: dag.dag_id: {spec.dag_id!r} is already the dag_id of {owners[spec.dag_id]}; "
                "each config file needs its own dag_id"
            )
            continue
        owners[spec.dag_id] = path
        specs.append(spec)
    return specs, problems


def check_configs(configs_dir: str | Path) -> None:
    """Raise one ConfigError naming every broken file and field of the folder; quiet when all are valid."""
    if _parsing_context_dag_id() is not None:
        return  # a worker loading one DAG to run a task: the check belongs to the dag-processor
    _, problems = load_dag_specs(configs_dir)
    if problems:
        raise ConfigError(problems)


def build_dags(
    configs_dir: str | Path,
    *,
    salt_conn_id: str | None = "syndiffix_salt",
    salt_variable: str | None = None,
    report_dir: str | None = None,
) -> dict[str, Any]:
    """dag_id -> DAG for every valid config file in the folder (broken files are left to check_configs).

    The salt comes from the password of connection `salt_conn_id`, or from Variable `salt_variable`
    when salt_conn_id is None, or from the environment variable named by the config's salt_env when both
    are None. `report_dir` (templated) is where the HTML quality reports go when a config sets none.
    """
    from airflow.sdk import DAG, AssetAlias

    from syndiffix_ops.airflow.operators import SyntheticTableOperator

    specs, _ = load_dag_specs(configs_dir)
    wanted = _parsing_context_dag_id()
    dags: dict[str, Any] = {}
    for spec in specs:
        if wanted is not None and spec.dag_id != wanted:
            continue  # a worker running one task needs only that task's DAG
        block = spec.config.dag
        tables = ", ".join(dict.fromkeys(str(o["table"]) for o in spec.outputs))
        # Unset, max_active_tasks keeps Airflow's configured default ([core] max_active_tasks_per_dag).
        limits = {"max_active_tasks": block.max_active_tasks} if block and block.max_active_tasks else {}
        with DAG(
            dag_id=spec.dag_id,
            schedule=spec.schedule,
            start_date=spec.start_date,
            catchup=block.catchup if block else False,
            tags=sorted({"syndiffix", *(block.tags if block else [])}),
            default_args=spec.default_args,
            **limits,
            description=f"Synthetic copies of {tables} ({spec.path.name})",
            doc_md=(
                f"Generated by syndiffix-ops from `{spec.path}`: one `{TASK_ID}` task instance per table "
                "or column set. Edit the YAML file to change it."
            ),
        ) as dag:
            partial_args: dict[str, Any] = {
                "task_id": TASK_ID,
                "config_path": str(spec.path),
                "source_conn_id": spec.config.source_conn_id,
                "target_conn_id": spec.config.target_conn_id,
                "salt_conn_id": salt_conn_id,
                "salt_variable": salt_variable,
                "report_dir": report_dir,
                "outlets": [AssetAlias(name=f"syndiffix/{spec.dag_id}")],
                "map_index_template": (
                    "{{ task.table }}{{ ' / ' ~ task.column_set if task.column_set else '' }}"
                ),
            }
            if block and block.pool:
                partial_args["pool"] = block.pool
            SyntheticTableOperator.partial(**partial_args).expand_kwargs(spec.outputs)
        dags[spec.dag_id] = dag
    return dags


def _parsing_context_dag_id() -> str | None:
    from airflow.sdk import get_parsing_context

    return get_parsing_context().dag_id


def _dag_spec(path: Path) -> DagSpec:
    config = load_config(path)
    block = config.dag
    problems: list[str] = []
    dag_id = (block.dag_id if block and block.dag_id else None) or _default_dag_id(path)
    if not _DAG_ID.match(dag_id):
        problems.append(
            f"{path}: dag.dag_id: {dag_id!r} may hold only letters, digits, '_', '-' and '.' (at most 250)"
        )
    schedule = block.schedule if block else None
    if schedule is not None:
        problems.extend(_schedule_problems(path, schedule))
    default_args, arg_problems = _default_args(path, block.default_args if block else {})
    problems.extend(arg_problems)
    start_date = _start_date(block.start_date) if block and block.start_date else None
    if schedule not in (None, "@once") and start_date is None:
        problems.append(f"{path}: dag.start_date: required when dag.schedule is set (e.g. 2024-01-01)")
    if problems:
        raise ConfigError(problems)
    outputs: list[dict[str, str | None]] = []
    for table in config.tables:
        sets = list(table.column_sets) or [None]
        outputs.extend({"table": table.display_name, "column_set": name} for name in sets)
    return DagSpec(path, config, dag_id, schedule, start_date, default_args, outputs)


def _default_dag_id(path: Path) -> str:
    return "syndiffix_" + re.sub(r"[^A-Za-z0-9_.-]", "_", path.stem)


def _schedule_problems(path: Path, schedule: str) -> list[str]:
    if schedule.startswith("@"):
        if schedule in _SCHEDULE_PRESETS:
            return []
        return [f"{path}: dag.schedule: unknown preset {schedule!r} (presets: {sorted(_SCHEDULE_PRESETS)})"]
    from croniter import croniter

    if croniter.is_valid(schedule):
        return []
    return [f"{path}: dag.schedule: {schedule!r} is neither a cron expression nor a preset like @daily"]


def _default_args(path: Path, raw: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    args: dict[str, Any] = {}
    problems = []
    for key, value in raw.items():
        field = f"{path}: dag.default_args.{key}"
        if key in _DURATION_ARGS:
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                problems.append(f"{field}: give a duration in seconds (a number >= 0), not {value!r}")
            else:
                args[key] = dt.timedelta(seconds=value)
        elif key in _PLAIN_ARGS:
            expected = _PLAIN_ARGS[key]
            if isinstance(value, bool) and expected is int or not isinstance(value, expected):
                problems.append(f"{field}: expected {_type_names(expected)}, not {value!r}")
            else:
                args[key] = value
        else:
            known = sorted({*_PLAIN_ARGS, *_DURATION_ARGS})
            problems.append(f"{field}: not an operator argument a config can set (known: {', '.join(known)})")
    return args, problems


def _type_names(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(t.__name__ for t in types)


def _start_date(value: dt.date | dt.datetime) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
