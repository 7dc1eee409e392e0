"""The source database's declared keys as YAML key declarations (`syndiffix-ops keys`, docs/cli.md).

Pasted into the config with `keys_from_database: false`, the declarations plan the same linked sets,
in the same order, with the same keys as reading the database does, so the Airflow DAG factory can plan
them while parsing. Only schema metadata is read and printed: table and column names, never a value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import yaml

from syndiffix_ops.config import OrphanPolicy, PipelineConfig, TableConfig
from syndiffix_ops.run_plan import KeyReader, PlannedForeignKey, RunPlan, TableKeys, plan_run


class UnexpressibleKeys(Exception):
    """A database key that the YAML cannot declare so that the plan stays the same."""


@dataclass(frozen=True)
class FrozenKeys:
    yaml_text: str  # the declarations to paste, `keys_from_database: false` first
    config: PipelineConfig  # the config with those declarations, keys_from_database false


def freeze_keys(config: PipelineConfig, read_keys: KeyReader) -> FrozenKeys:
    """The YAML declarations of the keys a run reads from the database (the YAML's own keys win, as
    in a run); raises UnexpressibleKeys when the declarations would plan differently."""
    database_plan = plan_run(config.model_copy(update={"keys_from_database": True}), read_keys)
    entries = {name: _entry(keys) for name, keys in database_plan.keys.items() if keys.declares_keys}
    frozen = config.model_copy(
        update={
            "keys_from_database": False,
            "tables": [_with_keys(t, entries.get(t.display_name, {})) for t in config.tables],
        }
    )
    problems = plan_differences(plan_run(frozen), database_plan)
    if problems:
        not_null = [f"{t}: foreign key {fk.label}" for t, fk in _not_null_keys(config, database_plan)]
        raise UnexpressibleKeys(
            f"source: the database's keys cannot be declared in the YAML: there they would plan {problems[0]}"
            + (f" (NOT NULL, which the YAML cannot declare: {'; '.join(not_null)})" if not_null else "")
        )
    return FrozenKeys(_document(config, entries, database_plan), frozen)


def key_drift(config: PipelineConfig, read_keys: KeyReader) -> list[str]:
    """Where the YAML's keys and the keys the source database declares differ (empty: none)."""
    stripped = [
        t.model_copy(update={"primary_key": None, "unique": [], "foreign_keys": []}) for t in config.tables
    ]
    database_only = config.model_copy(update={"keys_from_database": True, "tables": stripped})
    yaml_keys = plan_run(config).keys
    database_keys = plan_run(database_only, read_keys).keys
    return [
        f"{table}: {label} only in the {side}"
        for table in (t.display_name for t in config.tables)
        for side, mine, other in (("YAML", yaml_keys, database_keys), ("database", database_keys, yaml_keys))
        for label in sorted(_key_labels(mine[table]) - _key_labels(other[table]))
    ]


def plan_differences(plan: RunPlan, reference: RunPlan) -> list[str]:
    """How `plan` differs from `reference` in its linked sets (tables, order) and keys."""
    problems = []
    if {s.tables for s in plan.linked_sets} != {s.tables for s in reference.linked_sets}:
        problems.append(
            "linked sets "
            + "; ".join(", ".join(s.tables) for s in plan.linked_sets)
            + " instead of "
            + "; ".join(", ".join(s.tables) for s in reference.linked_sets)
        )
    for table, keys in reference.keys.items():
        for label in sorted(_key_labels(keys) ^ _key_labels(plan.keys[table])):
            problems.append(f"table {table}: {label} differs")
    return problems


def _key_labels(keys: TableKeys) -> set[str]:
    labels = {f"primary key ({', '.join(keys.primary_key)})"} if keys.primary_key else set()
    labels |= {f"unique key ({', '.join(u)})" for u in keys.unique}
    return labels | {f"foreign key {fk.label}" for fk in keys.foreign_keys}


def _entry(keys: TableKeys) -> dict[str, object]:
    entry: dict[str, object] = {}
    if keys.primary_key:
        entry["primary_key"] = list(keys.primary_key)
    if keys.unique:
        entry["unique"] = [list(u) for u in keys.unique]
    if keys.foreign_keys:
        entry["foreign_keys"] = [_foreign_key(fk) for fk in keys.foreign_keys]
    return entry


def _foreign_key(fk: PlannedForeignKey) -> dict[str, object]:
    declared: dict[str, object] = {
        "columns": list(fk.columns),
        "references": f"{fk.parent}({', '.join(fk.parent_columns)})",
    }
    if fk.on_orphan is not OrphanPolicy.NULL:
        declared["on_orphan"] = fk.on_orphan.value
    optional = {"context": fk.context, "aggregates": fk.aggregates, "entity": fk.entity}
    declared.update({k: list(v) if isinstance(v, tuple) else v for k, v in optional.items() if v is not None})
    return declared


def _with_keys(table: TableConfig, entry: Mapping[str, object]) -> TableConfig:
    from syndiffix_ops.config import ForeignKeyConfig

    return table.model_copy(
        update={
            "primary_key": entry.get("primary_key"),
            "unique": entry.get("unique", []),
            "foreign_keys": [ForeignKeyConfig.model_validate(fk) for fk in entry.get("foreign_keys", [])],
        }
    )


def _document(config: PipelineConfig, entries: Mapping[str, dict[str, object]], plan: RunPlan) -> str:
    """The declarations as YAML: tables in the config's order, each named as in the config (name,
    source, target), its keys in the order the run uses them."""
    tables = []
    for table in config.tables:
        if table.display_name in entries:
            names = {"name": table.name, "source": table.source, "target": table.target}
            named = {k: v for k, v in names.items() if v is not None}  # the entry as the config names it
            tables.append({**named, **entries[table.display_name]})
    text = yaml.safe_dump(
        {"keys_from_database": False, "tables": tables}, sort_keys=False, default_flow_style=None, width=1000
    )
    return "".join(f"{line}\n" for line in _not_null_notes(config, plan)) + text


def _not_null_notes(config: PipelineConfig, plan: RunPlan) -> Iterable[str]:
    """NOT NULL foreign keys: the YAML has no way to declare NOT NULL, so say which ones lose it."""
    for table, fk in _not_null_keys(config, plan):
        yield (
            f"# {table}: foreign key {fk.label} is NOT NULL in the source; "
            "the YAML cannot say so (its synthetic share of nulls follows the source's)"
        )


def _not_null_keys(config: PipelineConfig, plan: RunPlan) -> Iterable[tuple[str, PlannedForeignKey]]:
    for table in config.tables:
        for fk in plan.keys[table.display_name].foreign_keys:
            if not fk.nullable:
                yield table.display_name, fk
