"""The keys a source database declares: primary key, unique constraints/indexes and foreign keys."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa


@dataclass(frozen=True)
class DeclaredForeignKey:
    columns: tuple[str, ...]
    referred_schema: str | None
    referred_table: str
    referred_columns: tuple[str, ...]


@dataclass(frozen=True)
class DeclaredKeys:
    primary_key: tuple[str, ...]
    unique: tuple[tuple[str, ...], ...]
    foreign_keys: tuple[DeclaredForeignKey, ...]
    not_null: frozenset[str]  # columns declared NOT NULL

    @property
    def empty(self) -> bool:
        return not (self.primary_key or self.unique or self.foreign_keys)


def declared_keys(bind: sa.Engine | sa.Connection, schema: str | None, name: str) -> DeclaredKeys:
    """The keys of one table as SQLAlchemy's inspector reflects them (unique indexes count as unique keys)."""
    inspector = sa.inspect(bind)
    primary = tuple(inspector.get_pk_constraint(name, schema=schema).get("constrained_columns") or ())
    unique = [tuple(u["column_names"]) for u in inspector.get_unique_constraints(name, schema=schema)]
    unique += [
        tuple(i["column_names"])
        for i in inspector.get_indexes(name, schema=schema)
        if i.get("unique") and all(c is not None for c in i["column_names"])
    ]
    foreign = tuple(
        DeclaredForeignKey(
            tuple(fk["constrained_columns"]),
            fk.get("referred_schema"),
            fk["referred_table"],
            tuple(fk["referred_columns"]),
        )
        for fk in inspector.get_foreign_keys(name, schema=schema)
    )
    not_null = frozenset(
        c["name"] for c in inspector.get_columns(name, schema=schema) if not c.get("nullable", True)
    )
    unique_keys = tuple(u for u in dict.fromkeys(unique) if u and u != primary)
    return DeclaredKeys(primary, unique_keys, foreign, not_null)
