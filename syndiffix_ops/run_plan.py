"""The run plan: which configured tables form linked sets (joined by keys), in which order they run,
and the cycles that cannot be written.

Keys come from the YAML (`primary_key`, `unique`, `foreign_keys`: virtual keys) and, unless
`keys_from_database: false`, from the source's declared constraints; a YAML key wins over a declared
one on the same columns. A linked set is a group of tables connected by foreign keys, plus every table
with a YAML primary or unique key (a set of one: its keys get surrogate values). Other tables run alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from syndiffix_ops.config import ConfigError, OrphanPolicy, PipelineConfig, TableConfig

if TYPE_CHECKING:  # the Airflow DAG factory plans from the YAML alone: no SQLAlchemy or pandas at parse time
    import sqlalchemy as sa

    from syndiffix_ops.warehouse.keys import DeclaredKeys


@dataclass(frozen=True)
class PlannedForeignKey:
    columns: tuple[str, ...]
    parent: str  # the parent's display name in the config
    parent_columns: tuple[str, ...]
    on_orphan: OrphanPolicy = OrphanPolicy.NULL
    context: tuple[str, ...] | None = None
    aggregates: tuple[str, ...] | None = None
    entity: bool | None = None
    nullable: bool = True  # a nullable key can break a cycle; unknown (no database) counts as nullable

    @property
    def label(self) -> str:
        return f"({', '.join(self.columns)}) -> {self.parent}({', '.join(self.parent_columns)})"

    def describe(self) -> dict[str, object]:
        return {
            "columns": list(self.columns),
            "references": f"{self.parent}({', '.join(self.parent_columns)})",
            "on_orphan": self.on_orphan.value,
        }


@dataclass(frozen=True)
class TableKeys:
    primary_key: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    foreign_keys: tuple[PlannedForeignKey, ...] = ()
    not_null: frozenset[str] = frozenset()  # columns the source declares NOT NULL

    @property
    def declares_keys(self) -> bool:
        return bool(self.primary_key or self.unique or self.foreign_keys)


@dataclass(frozen=True)
class LinkedSet:
    """Tables (config display names) joined by keys, parents before children."""

    tables: tuple[str, ...]
    keys: Mapping[str, TableKeys]

    @property
    def name(self) -> str:
        return self.tables[0]

    def parents(self, table: str) -> tuple[str, ...]:
        """The other tables of the set that `table`'s foreign keys reference."""
        return tuple(dict.fromkeys(fk.parent for fk in self.keys[table].foreign_keys if fk.parent != table))

    @property
    def runs_in_steps(self) -> bool:
        """Whether the set can run one table at a time, each after its parents (linked_steps): every
        parent comes before its children. A cycle broken at a nullable key links a table to a parent
        synthesized after it, so such a set runs in one step."""
        return all(
            self.tables.index(parent) < position
            for position, table in enumerate(self.tables)
            for parent in self.parents(table)
        )

    def identifier_columns(self, table: str) -> set[str]:
        """The columns of `table` that hold identifiers, not data: single-column primary and unique
        keys (fresh surrogates) and foreign keys referencing one (their parent's surrogates). The other
        columns of composite keys (a year, a team code) are synthesized data, as in the core's
        LinkedTable.key_columns."""
        keys = self.keys[table]
        single = {k[0] for k in (keys.primary_key, *keys.unique) if len(k) == 1}
        references = {
            column
            for fk in keys.foreign_keys
            if len(fk.parent_columns) == 1
            and fk.parent_columns in (self.keys[fk.parent].primary_key, *self.keys[fk.parent].unique)
            for column in fk.columns
        }
        return single | references

    def describe(self) -> dict[str, object]:
        """What lineage records about the set: its tables and keys (names only, never values)."""
        return {
            "name": self.name,
            "tables": list(self.tables),
            "keys": {
                table: {
                    "primary_key": list(self.keys[table].primary_key),
                    "unique": [list(u) for u in self.keys[table].unique],
                    "foreign_keys": [fk.describe() for fk in self.keys[table].foreign_keys],
                }
                for table in self.tables
            },
        }


@dataclass(frozen=True)
class RunPlan:
    linked_sets: tuple[LinkedSet, ...]
    single_tables: tuple[str, ...]
    keys: Mapping[str, TableKeys] = field(default_factory=dict)

    def set_of(self, table: str) -> LinkedSet | None:
        return next((s for s in self.linked_sets if table in s.tables), None)


KeyReader = Callable[[TableConfig], "DeclaredKeys"]


def database_key_reader(source: sa.Engine) -> KeyReader:
    """Reads a configured table's declared keys from the source; a missing table has none (the
    pipeline names it when the table runs)."""
    import sqlalchemy as sa

    from syndiffix_ops.warehouse.keys import DeclaredKeys, declared_keys

    def read(table: TableConfig) -> DeclaredKeys:
        try:
            return declared_keys(source, table.schema_name, table.table_name)
        except sa.exc.NoSuchTableError:
            return DeclaredKeys((), (), (), frozenset())

    return read


def plan_run(config: PipelineConfig, read_keys: KeyReader | None = None) -> RunPlan:
    """The run plan of a config. `read_keys` reads a table's declared keys from the source (None: the
    YAML's keys only, as the Airflow DAG factory plans without touching a database)."""
    use_database = read_keys is not None and config.keys_from_database
    keys = {
        table.display_name: _table_keys(config, table, read_keys(table) if use_database else None)
        for table in config.tables
    }
    names = [t.display_name for t in config.tables]
    parents = {name: {fk.parent for fk in keys[name].foreign_keys} for name in names}
    groups = _connected_groups(names, parents)
    linked, single = [], []
    for group in groups:
        is_linked = len(group) > 1 or any(keys[n].foreign_keys or _yaml_keys(config.table(n)) for n in group)
        if not is_linked:
            single.extend(group)
            continue
        _refuse_unbreakable_cycles(group, keys)
        order = _parents_first(group, keys)
        linked.append(LinkedSet(tuple(order), {n: keys[n] for n in order}))
    return RunPlan(tuple(linked), tuple(single), keys)


def _yaml_keys(table: TableConfig) -> bool:
    return bool(table.primary_key or table.unique or table.foreign_keys)


def _table_keys(config: PipelineConfig, table: TableConfig, declared: DeclaredKeys | None) -> TableKeys:
    primary = tuple(table.primary_key or (declared.primary_key if declared else ()))
    unique = [tuple(u) for u in table.unique]
    if declared:
        unique += [u for u in declared.unique if u not in unique and u != primary]
    not_null = declared.not_null if declared else frozenset()
    foreign = [
        PlannedForeignKey(
            tuple(fk.columns),
            config.table(fk.parent).display_name,
            tuple(fk.parent_columns),
            fk.on_orphan,
            tuple(fk.context) if fk.context is not None else None,
            tuple(fk.aggregates) if fk.aggregates is not None else None,
            fk.entity,
            nullable=not all(c in not_null for c in fk.columns),
        )
        for fk in table.foreign_keys
    ]
    declared_columns = {fk.columns for fk in foreign}
    for fk in declared.foreign_keys if declared else ():
        parent = _configured_parent(config, fk.referred_schema, fk.referred_table, table)
        if parent is None or fk.columns in declared_columns:
            continue  # a parent that is not synthesized: the column stays an ordinary column
        foreign.append(
            PlannedForeignKey(
                fk.columns,
                parent.display_name,
                fk.referred_columns,
                nullable=not all(c in not_null for c in fk.columns),
            )
        )
    return TableKeys(primary, tuple(dict.fromkeys(unique)), tuple(foreign), not_null)


def _configured_parent(
    config: PipelineConfig, schema: str | None, name: str, child: TableConfig
) -> TableConfig | None:
    schema = schema if schema is not None else child.schema_name
    candidates = [t for t in config.tables if t.table_name == name and t.schema_name in (schema, None)]
    if not candidates:
        return None
    return next((t for t in candidates if t.target_name == name), candidates[0])


def _connected_groups(names: Sequence[str], parents: Mapping[str, set[str]]) -> list[list[str]]:
    neighbours = {n: set(parents[n]) for n in names}
    for name in names:
        for parent in parents[name]:
            neighbours[parent].add(name)
    groups, seen = [], set()
    for start in names:
        if start in seen:
            continue
        group, stack = [], [start]
        seen.add(start)
        while stack:
            node = stack.pop()
            group.append(node)
            for other in sorted(neighbours[node] - seen):
                seen.add(other)
                stack.append(other)
        groups.append([n for n in names if n in group])
    return groups


def _refuse_unbreakable_cycles(group: Sequence[str], keys: Mapping[str, TableKeys]) -> None:
    """A cycle of NOT NULL foreign keys cannot be written (no row could go first): refuse it by name."""
    edges = {n: [fk.parent for fk in keys[n].foreign_keys if not fk.nullable] for n in group}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for parent in edges[node]:
            if state.get(parent) == 1:
                cycle = [*path[path.index(parent) :], parent] if parent in path else [node, parent]
                raise ConfigError(
                    [
                        "linked tables: the foreign keys "
                        + " -> ".join(cycle)
                        + " form a cycle and none of them is nullable, so no row could be written first; "
                        "make one of the keys nullable or leave it out of the config"
                    ]
                )
            if parent not in state:
                visit(parent, [*path, parent])
        state[node] = 2

    for name in group:
        if name not in state:
            visit(name, [name])


def _parents_first(group: Sequence[str], keys: Mapping[str, TableKeys]) -> list[str]:
    """Parents before children; a cycle is broken at its nullable keys (the set is written together)."""
    required = {n: {fk.parent for fk in keys[n].foreign_keys if fk.parent != n} for n in group}
    strict = {
        n: {fk.parent for fk in keys[n].foreign_keys if fk.parent != n and not fk.nullable} for n in group
    }
    order: list[str] = []
    while len(order) < len(group):
        done = set(order)
        ready = [n for n in group if n not in done and required[n] <= done]
        ready = ready or [n for n in group if n not in done and strict[n] <= done][:1]
        order += ready
    return order
