"""One DAG from one syndiffix-ops YAML config: a task group per linked set, a mapped task for the rest.

Each DAG file calls `build_dag` on its own YAML file: the DAG (dag_id, schedule, start_date, tags,
default_args, pool, max_active_tasks, max_active_runs from the `dag:` block) has a mapped task
`synthesize` that expands to one task instance per table and per column set of a table that has
several, so a Celery or Kubernetes executor spreads a warehouse over its workers.

Parsing reads only the YAML file: no connection, Variable or database is touched until a task runs.
With `keys_from_database: false` the YAML holds every key, so the linked sets (tables joined by keys,
docs/linked-tables.md) are known while parsing: each set is a task group of one task per table, each
after its parents' tasks, then `publish`, which writes the set as one unit, and the teardown
`discard_staged` (syndiffix_ops.linked_steps). The keys the source declares can only be read when a
run starts, and a DAG's tasks are fixed when it is parsed; so with `keys_from_database` (the default)
a first task `plan` reads them and `synthesize` expands over what it plans (dynamic task mapping),
each linked set one instance that writes the whole set.

Why one DAG file per YAML file: Airflow records import errors per Python file and marks the DAGs of a
file with an import error as broken. With one YAML per DAG file, a mistake in a YAML file is an import
error of its own DAG file that names the YAML file, line and field, shown on that DAG; the other
configs' DAGs are not touched.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from syndiffix_ops.config import ConfigError, DagConfig, PipelineConfig, load_config

if TYPE_CHECKING:
    from syndiffix_ops.run_plan import LinkedSet, RunPlan

TASK_ID = "synthesize"
PLAN_TASK_ID = "plan"
# The name of a mapped instance in the UI: the table (and column set), or the tables of a linked set.
MAP_INDEX_TEMPLATE = (
    "{{ task.linked_set | join(', ') ~ ' (linked set)' if task.linked_set else "
    "task.table ~ (' / ' ~ task.column_set if task.column_set else '') }}"
)

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
    # the run plan when the YAML holds every key; None: the `plan` task plans each run
    plan: RunPlan | None

    @property
    def grouped_sets(self) -> list[LinkedSet]:
        """The linked sets that get a task group: known while parsing, and free of cycles."""
        return [s for s in self.plan.linked_sets if s.runs_in_steps] if self.plan else []

    @property
    def task_kwargs(self) -> list[dict[str, Any]] | None:
        """expand_kwargs of `synthesize` (None: the `plan` task plans them when a run starts)."""
        if self.plan is None:
            return None
        return task_kwargs(self.config, self.plan, {s.name for s in self.grouped_sets})


def build_dag(
    config_path: str | Path,
    *,
    salt_conn_id: str | None = "syndiffix_salt",
    salt_variable: str | None = None,
    report_dir: str | None = None,
) -> Any:
    """The DAG of one config file; raises ConfigError naming the file, line and field of every problem.

    The salt comes from the password of connection `salt_conn_id`, or from Variable `salt_variable`
    when salt_conn_id is None, or from the environment variable named by the config's salt_env when both
    are None. `report_dir` (templated) is where the HTML quality reports go when the config sets none.
    """
    from airflow.sdk import DAG, AssetAlias

    from syndiffix_ops.airflow.operators import SyntheticTableOperator
    from syndiffix_ops.airflow.plan_operator import RunPlanOperator

    spec = dag_spec(Path(config_path))
    block = spec.config.dag
    tables = ", ".join(table.display_name for table in spec.config.tables)
    # Unset, max_active_tasks keeps Airflow's configured default ([core] max_active_tasks_per_dag).
    limits = {"max_active_tasks": block.max_active_tasks} if block and block.max_active_tasks else {}
    with DAG(
        dag_id=spec.dag_id,
        schedule=spec.schedule,
        start_date=spec.start_date,
        catchup=block.catchup if block else False,
        tags=sorted({"syndiffix", *(block.tags if block else [])}),
        default_args=spec.default_args,
        max_active_runs=block.max_active_runs if block else DagConfig().max_active_runs,
        **limits,
        description=f"Synthetic copies of {tables} ({spec.path.name})",
        doc_md=(
            f"Generated by syndiffix-ops from `{spec.path}`: one `{TASK_ID}` task instance per table "
            "or column set, a task group per linked set (or, with keys read from the source, one "
            "instance). Edit the YAML file to change it."
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
            "map_index_template": MAP_INDEX_TEMPLATE,
        }
        if block and block.pool:
            partial_args["pool"] = block.pool
        if spec.task_kwargs is None:
            plan = RunPlanOperator(
                task_id=PLAN_TASK_ID,
                config_path=str(spec.path),
                source_conn_id=spec.config.source_conn_id,
            )
            SyntheticTableOperator.partial(**partial_args).expand_kwargs(plan.output)
        elif spec.task_kwargs:
            SyntheticTableOperator.partial(**partial_args).expand_kwargs(spec.task_kwargs)
        task_args = {k: v for k, v in partial_args.items() if k not in ("task_id", "map_index_template")}
        for linked_set in spec.grouped_sets:
            _linked_set_group(linked_set, spec.path, task_args)
    return dag


def _linked_set_group(linked_set: LinkedSet, config_path: Path, task_args: dict[str, Any]) -> None:
    """The task group of a linked set: one step per table, each after its parents' steps, then
    `publish` (the whole set as one unit) and the teardown `discard_staged`, which removes what the
    steps staged when the set is not published (a teardown: it runs after a failure too, and the
    DAG run's state ignores it). Clearing a failed step also clears the steps before it and the teardown
    (Airflow clears a teardown's setups with it), since after a failed run the staged rows are gone."""
    from airflow.sdk import TaskGroup

    from syndiffix_ops.airflow.linked_set_operators import (
        DiscardStagedSetOperator,
        LinkedTableStepOperator,
        PublishLinkedSetOperator,
    )

    tables = list(linked_set.tables)
    with TaskGroup(
        group_id=_task_id(linked_set.name),
        tooltip=f"linked set {', '.join(tables)}: parents first, published as one unit",
    ):
        steps = {
            name: LinkedTableStepOperator(
                **{**task_args, "outlets": []},
                task_id=f"synthesize_{_task_id(name)}",
                table=name,
                linked_set=tables,
            )
            for name in tables
        }
        for name, step in steps.items():
            for parent in linked_set.parents(name):
                steps[parent] >> step
        publish = PublishLinkedSetOperator(
            **task_args, task_id="publish", table=linked_set.name, linked_set=tables
        )
        list(steps.values()) >> publish
        discard = DiscardStagedSetOperator(
            task_id="discard_staged",
            config_path=str(config_path),
            linked_set=linked_set.name,
            target_conn_id=task_args["target_conn_id"],
        )
        publish >> discard.as_teardown(setups=list(steps.values()))


def _task_id(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)


def task_kwargs(
    config: PipelineConfig, plan: RunPlan, grouped: frozenset[str] | set[str] = frozenset()
) -> list[dict[str, Any]]:
    """The mapped task's instances for a run plan, in the config's order: one per output of a table
    that runs alone (`linked_set` empty), one per linked set (`table` its first table) not named in
    `grouped` (the sets run by a task group of their own)."""
    instances: list[dict[str, Any]] = []
    for table in config.tables:
        name = table.display_name
        linked_set = plan.set_of(name)
        if linked_set is not None and linked_set.name in grouped:
            continue
        if linked_set is None:
            sets = list(table.column_sets) or [None]
            instances.extend({"table": name, "column_set": cs, "linked_set": []} for cs in sets)
        elif linked_set.tables[0] == name:
            instances.append({"table": name, "column_set": None, "linked_set": list(linked_set.tables)})
    return instances


def dag_spec(path: Path) -> DagSpec:
    """What one YAML file asks for, checked without Airflow; ConfigError lists every problem."""
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
    from syndiffix_ops.run_plan import plan_run

    plan = plan_run(config)  # the YAML's keys only (parsing touches no database): refuses their cycles
    return DagSpec(
        path, config, dag_id, schedule, start_date, default_args, None if config.keys_from_database else plan
    )


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
