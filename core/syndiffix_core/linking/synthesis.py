"""synthesize_linked: a linked set of tables in, synthetic tables whose keys join out.

1. Orphans follow their foreign key's policy; referenced keys must be unique in the source.
2. Every table is synthesized once, extended with its link columns (extension.py) and protected by its
   own entity plus the entities of the parents that own it.
3. Primary and unique keys get fresh surrogate values (surrogates.py).
4. Parents first, each synthetic child is given a synthetic parent by capacity-limited matching on
   the context columns (assignment.py); its foreign key columns take that parent's surrogate key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from ..noise import Salt
from ..synthesizer import synthesize
from .assignment import assign
from .extension import (
    Link,
    apply_orphan_policies,
    check_parent_keys,
    entity_codes,
    links_of,
    synthesis_frame,
)
from .schema import LinkedTable, LinkingError, check_tables
from .surrogates import key_kind, surrogate_values

# (table name, frame to synthesize, its AID columns) -> synthetic frame without the AID columns
TableSynthesizer = Callable[[str, pd.DataFrame, list[str]], pd.DataFrame]


def synthesize_linked(
    tables: Mapping[str, LinkedTable],
    *,
    salt: bytes | str,
    synthesize_table: TableSynthesizer | None = None,
    **engine_options,
) -> dict[str, pd.DataFrame]:
    """Synthetic copies of `tables` (name -> frame, every column but the AID-only ones, source order)
    whose non-null foreign keys all reference a synthetic parent and whose keys are fresh and unique.

    `synthesize_table` runs the engine on one extended table (default: `synthesize(frame, aids,
    salt=salt, **engine_options)`)."""
    check_tables(tables)
    order = parents_first(tables)
    tables = apply_orphan_policies(tables, order)
    links = links_of(tables)
    check_parent_keys(tables, links)
    entities = entity_codes(tables, links)
    if synthesize_table is None:

        def synthesize_table(name: str, frame: pd.DataFrame, aids: list[str]) -> pd.DataFrame:
            return synthesize(frame, aids, salt=salt, **engine_options)

    secret = Salt.from_secret(salt)
    synthetic = {}
    for name in order:
        frame, aids = synthesis_frame(name, tables, links, entities[name])
        synthetic[name] = synthesize_table(name, frame, aids).reset_index(drop=True)
        _add_surrogate_keys(tables[name], synthetic[name], secret)
    for name in order:
        for link in (link for link in links if link.child == name):
            rng = secret.rng("link", name, str(link.number))
            _link_children(link, synthetic[name], synthetic[link.key.parent], rng)
    return {name: _output_frame(tables[name], synthetic[name]) for name in tables}


def parents_first(tables: Mapping[str, LinkedTable]) -> list[str]:
    """Table names, every parent before its children (self-references aside). Tables on a cycle keep
    their given order after the rest; the run plan refuses cycles no nullable key breaks before this."""
    parents = {
        name: {fk.parent for fk in table.foreign_keys if fk.parent != name} for name, table in tables.items()
    }
    order: list[str] = []
    while len(order) < len(tables):
        ready = [n for n in tables if n not in order and parents[n] <= set(order)]
        order += ready or [n for n in tables if n not in order]
    return order


def _add_surrogate_keys(table: LinkedTable, synthetic: pd.DataFrame, secret: Salt) -> None:
    linked = set(table.foreign_key_columns)
    for column in table.key_columns:
        if column in linked:
            continue  # takes the referenced parent's key
        what = f"table {table.name}: key column {column!r}"
        kind = key_kind(table.frame[column])
        rng = secret.rng("surrogate key", table.name, column)
        synthetic[column] = surrogate_values(
            kind, len(synthetic), rng, limit=table.key_limits.get(column), what=what
        ).to_numpy()


def _link_children(link: Link, child: pd.DataFrame, parent: pd.DataFrame, rng: np.random.Generator) -> None:
    fk = link.key
    if fk.nullable:
        null = child[link.null_column].astype("boolean").fillna(True).to_numpy(dtype=bool)
    else:
        null = np.zeros(len(child), dtype=bool)
    counts = parent[link.count_column].to_numpy(dtype=float, na_value=np.nan) if len(parent) else np.zeros(0)
    if len(parent) == 0:
        null[:] = True  # no synthetic parent: every key stays null
    linked = np.flatnonzero(~null)
    first = link.aggregates[0] if link.aggregates else None
    parents = assign(
        [child[link.context_column(c)].iloc[linked] for c in link.context],
        [parent[c] for c in link.context],
        None
        if first is None
        else pd.to_numeric(child[first].iloc[linked]).to_numpy(dtype=float, na_value=np.nan),
        None if first is None else parent[link.mean_column(first)].to_numpy(dtype=float, na_value=np.nan),
        counts,
        rng,
        by_context=not link.entity,
    )
    for column, parent_column in zip(fk.columns, fk.parent_columns, strict=True):
        keys = parent[parent_column]
        values = pd.Series(pd.array([None] * len(child), dtype=_nullable(keys.dtype)))
        values.iloc[linked] = keys.iloc[parents].to_numpy()
        child[column] = values.to_numpy() if values.dtype == object else values


def _nullable(dtype) -> object:
    if pd.api.types.is_integer_dtype(dtype):
        return "Int64"
    return object


def _output_frame(table: LinkedTable, synthetic: pd.DataFrame) -> pd.DataFrame:
    written = {*table.key_columns, *table.foreign_key_columns}
    columns = [
        c for c in table.frame.columns if (c not in table.aid_columns or c in written) and c in synthetic
    ]
    missing = [c for c in table.frame.columns if c in written and c not in synthetic]
    if missing:
        raise LinkingError(f"table {table.name}: key columns {missing} were not produced")
    frame = synthetic[columns]
    if table.primary_key and set(table.primary_key) <= set(table.foreign_key_columns):
        # a key made only of foreign keys (a link table) may repeat after matching: keep one of each
        frame = frame.drop_duplicates(subset=list(table.primary_key), ignore_index=True)
    return frame.reset_index(drop=True)
