"""What a linked set is made of: tables with primary keys, unique columns and foreign keys.

The warehouse layer reads these from database constraints or the YAML config; the core only needs the
frames and the declared keys. Column names are the source's; derived columns added by the linking
carry a `__link` prefix that cannot collide with a declared column (checked in `check_tables`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from ..errors import InvalidInputError
from ..params import AnonymizationParams

DERIVED_PREFIX = "__link"


class LinkingError(InvalidInputError):
    """A linked set that cannot be synthesized as declared (names the table, key and cause)."""


class OrphanPolicy(enum.StrEnum):
    """What to do with a child row whose non-null foreign key matches no parent row."""

    NULL = "null"  # the synthetic child keeps the row with a null foreign key
    DROP = "drop"  # the row is left out of the child's synthesis
    ERROR = "error"  # refuse the linked set


@dataclass(frozen=True)
class ForeignKey:
    """`columns` of the child reference `parent_columns` (the parent's primary key or a unique key).

    `context`: parent columns copied onto each child row for its synthesis and used to match synthetic
    children to synthetic parents. `aggregates`: numeric child columns whose per-parent means extend the
    parent. `entity`: whether the parent's entity also protects the child (None: automatic, see
    `entity_links`)."""

    columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]
    on_orphan: OrphanPolicy = OrphanPolicy.NULL
    context: tuple[str, ...] | None = None
    aggregates: tuple[str, ...] | None = None
    entity: bool | None = None
    nullable: bool = True  # False: the key is declared NOT NULL, so no null share is synthesized

    @property
    def label(self) -> str:
        return f"({', '.join(self.columns)}) -> {self.parent}({', '.join(self.parent_columns)})"


@dataclass(frozen=True)
class LinkedTable:
    """One table of a linked set. `aid_columns` are its own protected-entity columns (read, never
    written). A key of one column is an identifier: it gets fresh surrogate values. The other columns
    of a key of several columns (a year, a team code, a line number) are data: synthesized like any
    column, the key's uniqueness enforced on the synthetic rows (see `composite_keys`)."""

    name: str
    frame: pd.DataFrame
    primary_key: tuple[str, ...] = ()
    aid_columns: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    foreign_keys: tuple[ForeignKey, ...] = ()
    key_limits: Mapping[str, int] = field(default_factory=dict)  # key column -> max length or max value
    # The parameters of the counts released about this table outside its own synthesis (children per
    # parent of a dimension link, see key_histogram): the ones its engine uses. None: its engine is not
    # SynDiffix's (a DP engine), whose counts belong to its own budget; such a child needs an entity link.
    anonymization: AnonymizationParams | None = field(default_factory=AnonymizationParams)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """Columns that get surrogate values instead of being synthesized: single-column keys."""
        keys = [self.primary_key, *self.unique]
        return tuple(dict.fromkeys(k[0] for k in keys if len(k) == 1))

    @property
    def composite_keys(self) -> tuple[tuple[str, ...], ...]:
        """Keys of several columns that no surrogate column makes unique: their synthetic combinations
        are made unique by dropping repeated rows."""
        surrogate = set(self.key_columns)
        keys = [tuple(self.primary_key), *map(tuple, self.unique)]
        return tuple(k for k in dict.fromkeys(keys) if len(k) > 1 and not surrogate & set(k))

    @property
    def foreign_key_columns(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for fk in self.foreign_keys for c in fk.columns))


def check_tables(tables: Mapping[str, LinkedTable]) -> None:
    """Refuse undeclared parents, missing columns, key arity mismatches and reserved column names."""
    problems = []
    for name, table in tables.items():
        columns = set(table.frame.columns)
        declared = [*table.primary_key, *table.aid_columns, *(c for u in table.unique for c in u)]
        problems += [
            f"table {name}: key column {c!r} is not in the table" for c in declared if c not in columns
        ]
        problems += [
            f"table {name}: column {c!r} uses the reserved prefix {DERIVED_PREFIX}"
            for c in columns
            if str(c).startswith(DERIVED_PREFIX)
        ]
        for fk in table.foreign_keys:
            problems += _foreign_key_problems(name, table, fk, tables)
    if problems:
        raise LinkingError("; ".join(problems))


def _foreign_key_problems(
    name: str, table: LinkedTable, fk: ForeignKey, tables: Mapping[str, LinkedTable]
) -> list[str]:
    where = f"table {name}: foreign key {fk.label}"
    parent = tables.get(fk.parent)
    if parent is None:
        return [f"{where}: the parent table is not in the linked set (tables: {sorted(tables)})"]
    problems = [f"{where}: column {c!r} is not in {name}" for c in fk.columns if c not in table.frame]
    problems += [
        f"{where}: column {c!r} is not in {fk.parent}" for c in fk.parent_columns if c not in parent.frame
    ]
    if len(fk.columns) != len(fk.parent_columns):
        problems.append(f"{where}: {len(fk.columns)} column(s) reference {len(fk.parent_columns)}")
    keys = [parent.primary_key, *parent.unique]
    if tuple(fk.parent_columns) not in [tuple(k) for k in keys]:
        problems.append(f"{where}: the referenced columns are not a primary or unique key of {fk.parent}")
    for option, columns, owner in (("context", fk.context, parent), ("aggregates", fk.aggregates, table)):
        for column in columns or ():
            if column not in owner.frame.columns:
                problems.append(f"{where}: {option} column {column!r} is not in {owner.name}")
            elif column in owner.key_columns or column in owner.aid_columns:
                problems.append(f"{where}: {option} column {column!r} is a key or AID column of {owner.name}")
    return problems


def entity_links(tables: Mapping[str, LinkedTable]) -> dict[str, list[ForeignKey]]:
    """Per table, the foreign keys whose parent's entity also protects the child.

    Automatic (`entity` unset): yes when the parent has AID columns (its own or inherited through its
    own entity links), and for the only foreign key of a table without AID columns of its own
    (orders -> customers). A self-reference never is: the row is its own entity already."""
    memo: dict[str, bool] = {}

    def has_entity(name: str, path: frozenset[str]) -> bool:
        if name not in memo:
            table = tables[name]
            memo[name] = bool(table.aid_columns) or any(
                is_link(table, fk, path | {name}) for fk in _outgoing(table) if fk.parent not in path
            )
        return memo[name]

    def is_link(table: LinkedTable, fk: ForeignKey, path: frozenset[str]) -> bool:
        if fk.entity is not None:
            return fk.entity
        if not table.aid_columns and len(_outgoing(table)) == 1:
            return True
        return fk.parent not in path and has_entity(fk.parent, path)

    return {
        name: [fk for fk in _outgoing(table) if is_link(table, fk, frozenset({name}))]
        for name, table in tables.items()
    }


def _outgoing(table: LinkedTable) -> Sequence[ForeignKey]:
    return [fk for fk in table.foreign_keys if fk.parent != table.name]
