"""synthesize_linked: a linked set of tables in, synthetic tables whose keys join out.

1. Orphans follow their foreign key's policy; referenced keys must be unique in the source.
2. Every table is synthesized once, extended with its link columns (extension.py) and protected by its
   own entity plus the entities of the parents that own it.
3. Single-column primary and unique keys get fresh surrogate values (surrogates.py); the other
   columns of composite keys were synthesized as data in step 2.
4. Parents first, each synthetic child is given a synthetic parent by capacity-limited matching on
   the context columns (assignment.py); its foreign key columns take that parent's key. Then repeated
   combinations of a composite key are dropped, before the table's own children link to it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..noise import Salt
from ..params import ClusteringParams
from ..synthesizer import synthesize
from .assignment import assign
from .extension import (
    Link,
    apply_orphan_policies,
    check_parent_keys,
    entity_codes,
    kept_together,
    links_of,
    parent_positions,
    synthesis_frame,
)
from .key_histogram import KeyHistogram, key_histogram
from .schema import LinkedTable, LinkingError, check_tables
from .surrogates import key_kind, surrogate_values

# (table name, frame to synthesize, its AID columns, column pairs to keep in one cluster) -> synthetic
# frame without the AID columns
TableSynthesizer = Callable[[str, pd.DataFrame, list[str], tuple[tuple[str, str], ...]], pd.DataFrame]


@dataclass(frozen=True)
class PreparedSet:
    """A linked set checked and ready to synthesize: the tables with their orphan policies applied,
    parents first, their links and entities. Each table can then be synthesized on its own
    (`synthesize_member`) and linked to its synthetic parents (`link_member`), in separate processes
    when a scheduler runs the set step by step: every step is a function of the source frames and
    the salt, so the steps give what `synthesize_linked` gives in one call."""

    tables: Mapping[str, LinkedTable]
    order: tuple[str, ...]
    links: tuple[Link, ...]
    entities: Mapping[str, list[np.ndarray]]
    secret: Salt


def prepare_linked(tables: Mapping[str, LinkedTable], *, salt: bytes | str) -> PreparedSet:
    """Check `tables` as a linked set; raises LinkingError naming what cannot be synthesized."""
    check_tables(tables)
    order = parents_first(tables)
    tables = apply_orphan_policies(tables, order)
    links = links_of(tables)
    check_parent_keys(tables, links)
    for link in links:
        if not link.entity and tables[link.child].anonymization is None:
            raise LinkingError(
                f"table {link.child}: its engine is not SynDiffix, and the children per {link.key.parent} "
                f"row ({link.key.label}) would be counted outside its privacy budget; make "
                f"{link.key.parent} its entity (an AID column of the parent) or synthesize it with syndiffix"
            )
    return PreparedSet(
        tables, tuple(order), tuple(links), entity_codes(tables, links), Salt.from_secret(salt)
    )


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
    salt=salt, **engine_options)`, with the pairs added to the clustering's `keep_together`)."""
    prepared = prepare_linked(tables, salt=salt)
    if synthesize_table is None:

        def synthesize_table(
            name: str, frame: pd.DataFrame, aids: list[str], pairs: tuple[tuple[str, str], ...]
        ) -> pd.DataFrame:
            options = dict(engine_options)
            clustering = options.pop("clustering", None) or ClusteringParams()
            clustering = replace(clustering, keep_together=clustering.keep_together + pairs)
            return synthesize(frame, aids, salt=salt, clustering=clustering, **options)

    synthetic = {name: synthesize_member(prepared, name, synthesize_table) for name in prepared.order}
    for name in prepared.order:  # a table's keys are complete, and unique, before its children link to it
        synthetic[name] = link_member(prepared, name, synthetic)
    return {name: output_frame(prepared.tables[name], synthetic[name]) for name in tables}


def synthesize_member(prepared: PreparedSet, name: str, synthesize_table: TableSynthesizer) -> pd.DataFrame:
    """Table `name` synthesized with its link columns, its single-column keys fresh, not linked yet."""
    frame, aids = synthesis_frame(name, prepared.tables, list(prepared.links), prepared.entities[name])
    pairs = kept_together(name, list(prepared.links), frame)
    synthetic = synthesize_table(name, frame, aids, pairs).reset_index(drop=True)
    _add_surrogate_keys(prepared.tables[name], synthetic, prepared.secret)
    return synthetic


def link_member(prepared: PreparedSet, name: str, synthetic: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """`synthetic[name]` (from synthesize_member) with its foreign keys assigned to the synthetic
    parents in `synthetic` (each one linked already, when it comes earlier in `prepared.order`) and
    its composite keys made unique (the returned frame; the caller keeps it for the table's children)."""
    table = prepared.tables[name]
    frame = synthetic[name]
    own = [link for link in prepared.links if link.child == name]
    for link in sorted(own, key=lambda link: link.key.parent == name):  # self-references last
        if link.key.parent == name:
            frame = _unique_keys(table, frame)
        parent = frame if link.key.parent == name else synthetic[link.key.parent]
        rng = prepared.secret.rng("link", name, str(link.number))
        histogram = (
            None
            if link.entity
            else _children_per_key(link, prepared.tables, prepared.entities[link.child], prepared.secret)
        )
        _link_children(link, frame, parent, rng, histogram)
    return _unique_keys(table, frame)


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


def _children_per_key(
    link: Link, tables: Mapping[str, LinkedTable], entities: list[np.ndarray], secret: Salt
) -> KeyHistogram:
    child, parent = tables[link.child].frame, tables[link.key.parent].frame
    anonymization = tables[link.child].anonymization
    positions = parent_positions(child, link.key, parent)
    return key_histogram(
        positions,
        parent[list(link.key.parent_columns)],
        entities,
        child,
        secret,
        f"{link.child} {link.key.label}",
        anonymization,
    )


def _link_children(
    link: Link,
    child: pd.DataFrame,
    parent: pd.DataFrame,
    rng: np.random.Generator,
    histogram: KeyHistogram | None,
) -> None:
    fk = link.key
    if fk.nullable:
        null = child[link.null_column].astype("boolean").fillna(True).to_numpy(dtype=bool)
    else:
        null = np.zeros(len(child), dtype=bool)
    counts = parent[link.count_column].to_numpy(dtype=float, na_value=np.nan) if len(parent) else np.zeros(0)
    if len(parent) == 0:
        null[:] = True  # no synthetic parent: every key stays null
    linked = np.flatnonzero(~null)
    aggregates = list(link.aggregates)
    child_values = parent_means = None
    if aggregates:
        child_values = np.column_stack(
            [pd.to_numeric(child[c].iloc[linked]).to_numpy(dtype=float, na_value=np.nan) for c in aggregates]
        )
        parent_means = np.column_stack(
            [parent[link.mean_column(c)].to_numpy(dtype=float, na_value=np.nan) for c in aggregates]
        )
    parents = assign(
        [child[link.context_column(c)].iloc[linked] for c in link.context],
        [parent[c] for c in link.context],
        child_values,
        parent_means,
        counts,
        rng,
        histogram=histogram,
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


def output_frame(table: LinkedTable, synthetic: pd.DataFrame) -> pd.DataFrame:
    """The written columns of a linked synthetic table (link and AID-only columns left out)."""
    written = {*table.key_columns, *table.foreign_key_columns}
    columns = [
        c for c in table.frame.columns if (c not in table.aid_columns or c in written) and c in synthetic
    ]
    missing = [c for c in table.frame.columns if c in written and c not in synthetic]
    if missing:
        raise LinkingError(f"table {table.name}: key columns {missing} were not produced")
    return synthetic[columns].reset_index(drop=True)


def _unique_keys(table: LinkedTable, synthetic: pd.DataFrame) -> pd.DataFrame:
    """The synthetic rows with each composite key unique. A repeated combination (two rows for team
    BOS in 1990, two stints 1 of one player in one year) gets another value in the key's last column
    that is not a foreign key: the most frequent synthetic value of that column still unused with the
    same other key values (BOS -> another team code of 1990, stint 1 -> 2). Where none is left, or
    every key column is a foreign key, the repeated row is dropped. Null parts never repeat."""
    linked = set(table.foreign_key_columns)
    for key in table.composite_keys:
        free = next((c for c in reversed(key) if c not in linked), None)
        synthetic = _with_free_values(synthetic, list(key), free) if free else synthetic
        complete = synthetic[list(key)].notna().all(axis=1)
        repeated = synthetic[list(key)].duplicated() & complete
        if repeated.any():
            synthetic = synthetic[~repeated].reset_index(drop=True)
    return synthetic


_FREE_VALUE_POOL = 64  # the most frequent synthetic values a repeated key may take instead


def _with_free_values(synthetic: pd.DataFrame, key: list[str], free: str) -> pd.DataFrame:
    complete = synthetic[key].notna().all(axis=1)
    repeated = synthetic[key].duplicated() & complete
    if not repeated.any():
        return synthetic
    prefix = [c for c in key if c != free]
    pool = synthetic[free].value_counts().index[:_FREE_VALUE_POOL]
    candidates = (
        synthetic.loc[repeated, prefix]
        .drop_duplicates()
        .merge(pd.DataFrame({free: pool, "__rank": np.arange(len(pool))}), how="cross")
    )
    used = synthetic.loc[complete, key].drop_duplicates()
    candidates = candidates.merge(used, on=key, how="left", indicator="__used")
    candidates = candidates[candidates["__used"] == "left_only"].sort_values("__rank", kind="stable")
    candidates["__n"] = candidates.groupby(prefix, sort=False).cumcount()
    rows = synthetic.loc[repeated, prefix].assign(__row=np.flatnonzero(repeated.to_numpy()))
    rows["__n"] = rows.groupby(prefix, sort=False).cumcount()
    given = rows.merge(candidates[[*prefix, "__n", free]], on=[*prefix, "__n"], how="inner")
    synthetic = synthetic.copy()
    synthetic.iloc[given["__row"].to_numpy(), synthetic.columns.get_loc(free)] = given[free].to_numpy()
    return synthetic
