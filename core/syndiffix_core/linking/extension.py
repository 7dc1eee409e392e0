"""The frames the engine synthesizes for a linked set: each table plus the columns that carry its links.

For a foreign key number i from child C to parent P:
- P gains `__link_n_i` (how many C rows reference the parent row) and `__link_mean_i_<col>` (the mean
  of a few numeric C columns over those rows). P's synthesis anonymizes them with P's entity, like any
  other column of P: a parent whose count is its own (a heavy entity) is suppressed or flattened.
- C gains `__link_null_i` (the foreign key is null or, with on_orphan: null, an orphan) and
  `__link_ctx_i_<col>` (a few columns of the referenced P row), synthesized with C's entity.
- When the parent's entity protects the child (an entity link), C's AID columns include P's entity:
  every row that belongs to one parent entity is protected together.
Entity identities are int64 codes (never the real values) so they can be passed down the links.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..clustering import measure_dependence
from ..columns import encode_frame
from ..params import ClusteringParams
from .schema import DERIVED_PREFIX, ForeignKey, LinkedTable, LinkingError, OrphanPolicy, entity_links

DEFAULT_CONTEXT_COLUMNS = 1
DEFAULT_AGGREGATE_COLUMNS = 1
# Rows the dependence of a link's mean on the parent's columns is measured on (strongest_partners): more
# than the clustering's 1000, as the candidates' dependences can differ by a few hundredths only (Lahman
# teams: runs 0.41, losses 0.39, team code 0.36 against the batters' mean home runs on all 3,075 rows).
PARTNER_SAMPLE_ROWS = 10_000


@dataclass(frozen=True)
class Link:
    """A foreign key of the set with its number (for the derived column names) and its choices."""

    number: int
    child: str
    key: ForeignKey
    context: tuple[str, ...]
    aggregates: tuple[str, ...]
    entity: bool  # the parent's entity protects the child

    @property
    def count_column(self) -> str:
        return f"{DERIVED_PREFIX}_n_{self.number}"

    @property
    def null_column(self) -> str:
        return f"{DERIVED_PREFIX}_null_{self.number}"

    def mean_column(self, column: str) -> str:
        return f"{DERIVED_PREFIX}_mean_{self.number}_{column}"

    def context_column(self, column: str) -> str:
        return f"{DERIVED_PREFIX}_ctx_{self.number}_{column}"


def links_of(tables: Mapping[str, LinkedTable]) -> list[Link]:
    entity_keys = entity_links(tables)
    links = []
    for name, table in tables.items():
        for fk in table.foreign_keys:
            parent = tables[fk.parent]
            context = fk.context if fk.context is not None else _default_context(parent, fk)
            aggregates = fk.aggregates if fk.aggregates is not None else _default_aggregates(table)
            entity = any(fk is link for link in entity_keys[name])
            links.append(Link(len(links), name, fk, tuple(context), tuple(aggregates), entity))
    return links


def attribute_columns(table: LinkedTable) -> list[str]:
    """The columns synthesized as values: neither keys, foreign keys nor AID columns."""
    reserved = {*table.key_columns, *table.foreign_key_columns, *table.aid_columns}
    return [c for c in table.frame.columns if c not in reserved]


def _default_context(parent: LinkedTable, fk: ForeignKey) -> list[str]:
    """The referenced data columns of a composite key (a team's year: the child's own year, so children
    are matched to parents of their year), else the parent's first attribute column."""
    attributes = attribute_columns(parent)
    referenced = [c for c in fk.parent_columns if c in attributes]
    return (referenced or attributes)[:DEFAULT_CONTEXT_COLUMNS]


def _default_aggregates(child: LinkedTable) -> list[str]:
    numeric = [
        c
        for c in attribute_columns(child)
        if pd.api.types.is_numeric_dtype(child.frame[c].dtype)
        and not pd.api.types.is_bool_dtype(child.frame[c].dtype)
    ]
    return numeric[:DEFAULT_AGGREGATE_COLUMNS]


def key_index(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.Index:
    if len(columns) == 1:
        return pd.Index(frame[columns[0]])
    return pd.MultiIndex.from_frame(frame[list(columns)])


def apply_orphan_policies(tables: Mapping[str, LinkedTable], order: list[str]) -> dict[str, LinkedTable]:
    """Tables with `drop` orphans removed (parents first, so a dropped parent row orphans its children)
    and `error` orphans refused. The message names the table and key, never a value or a count."""
    result = dict(tables)
    for name in order:
        table = result[name]
        keep = np.ones(len(table.frame), dtype=bool)
        for fk in table.foreign_keys:
            parent = result[fk.parent] if fk.parent != name else table
            orphan = _orphans(table.frame, fk, parent.frame)
            if not orphan.any():
                continue
            if fk.on_orphan is OrphanPolicy.ERROR:
                raise LinkingError(
                    f"table {name}: foreign key {fk.label} has values that match no {fk.parent} row "
                    "(on_orphan: error; use null or drop to accept them)"
                )
            if fk.on_orphan is OrphanPolicy.DROP or not fk.nullable:
                keep &= ~orphan
        if not keep.all():
            result[name] = _with_frame(table, table.frame[keep].reset_index(drop=True))
    return result


def parent_positions(child: pd.DataFrame, fk: ForeignKey, parent: pd.DataFrame) -> np.ndarray:
    """Row number of each child row's parent; -1 for a null key or an orphan."""
    return key_index(parent, fk.parent_columns).get_indexer(key_index(child, fk.columns))


def _orphans(child: pd.DataFrame, fk: ForeignKey, parent: pd.DataFrame) -> np.ndarray:
    present = child[list(fk.columns)].notna().all(axis=1).to_numpy()
    return present & (parent_positions(child, fk, parent) < 0)


def _with_frame(table: LinkedTable, frame: pd.DataFrame) -> LinkedTable:
    return LinkedTable(
        table.name,
        frame,
        table.primary_key,
        table.aid_columns,
        table.unique,
        table.foreign_keys,
        table.key_limits,
    )


def check_parent_keys(tables: Mapping[str, LinkedTable], links: list[Link]) -> None:
    for columns, name in {(link.key.parent_columns, link.key.parent) for link in links}:
        frame = tables[name].frame
        if key_index(frame, columns).has_duplicates or frame[list(columns)].isna().any(axis=None):
            raise LinkingError(
                f"table {name}: the referenced key ({', '.join(columns)}) has duplicate or null values in the source"
            )


def entity_codes(tables: Mapping[str, LinkedTable], links: list[Link]) -> dict[str, list[np.ndarray]]:
    """Per table, its entities as int64 code arrays: its own AID columns, then the entities of the
    parents that protect it. An empty list: every row is its own entity."""
    entity_keys = entity_links(tables)
    codes: dict[str, list[np.ndarray]] = {}

    def of(name: str, path: tuple[str, ...]) -> list[np.ndarray]:
        if name in path:
            raise LinkingError(f"entity links form a cycle: {' -> '.join((*path, name))}")
        if name not in codes:
            table = tables[name]
            own = [
                _row_unique_codes(pd.factorize(table.frame[c], use_na_sentinel=True)[0])
                for c in table.aid_columns
            ]
            inherited = []
            for fk in entity_keys[name]:
                parent_codes = of(fk.parent, (*path, name))
                inherited += _inherited_codes(table.frame, fk, tables[fk.parent].frame, parent_codes)
            codes[name] = own + inherited
        return codes[name]

    for name in tables:
        of(name, ())
    return codes


def _inherited_codes(
    child: pd.DataFrame, fk: ForeignKey, parent: pd.DataFrame, parent_codes: list[np.ndarray]
) -> list[np.ndarray]:
    # A child row without a parent row still belongs to the entity its key value names (an orphan's
    # plane is a real plane): it gets a code of its own key value; a null key makes the row its own entity.
    positions = parent_positions(child, fk, parent)
    own_value = pd.factorize(key_index(child, fk.columns))[0]
    own_value = np.where(child[list(fk.columns)].isna().any(axis=1).to_numpy(), -1, own_value)
    if not parent_codes:
        parent_codes = [np.arange(len(parent), dtype=np.int64)]
    result = []
    for codes in parent_codes:
        offset = int(codes.max(initial=-1)) + 1
        value = np.where(positions >= 0, codes[np.maximum(positions, 0)], offset + own_value)
        result.append(_row_unique_codes(np.where(own_value < 0, -1, value)))
    return result


def _row_unique_codes(codes: np.ndarray) -> np.ndarray:
    """-1 (null) becomes a code no other row has."""
    codes = np.asarray(codes, dtype=np.int64)
    missing = codes < 0
    if missing.any():
        codes = codes.copy()
        codes[missing] = codes.max(initial=-1) + 1 + np.arange(int(missing.sum()))
    return codes


def synthesis_frame(
    name: str, tables: Mapping[str, LinkedTable], links: list[Link], entities: list[np.ndarray]
) -> tuple[pd.DataFrame, list[str]]:
    """The frame the engine synthesizes for one table, and its AID columns."""
    table = tables[name]
    columns: dict[str, object] = {c: table.frame[c].reset_index(drop=True) for c in attribute_columns(table)}
    for link in links:
        if link.key.parent == name:
            columns.update(_parent_statistics(link, tables, len(table.frame)))
        if link.child == name:
            columns.update(_child_context(link, tables))
    aid_names = [f"{DERIVED_PREFIX}_aid_{j}" for j in range(len(entities))]
    columns.update(zip(aid_names, entities, strict=True))
    frame = pd.DataFrame(columns)
    if frame.shape[1] == len(aid_names):
        raise LinkingError(f"table {name}: nothing to synthesize (only key and AID columns)")
    return frame, aid_names


def kept_together(name: str, links: list[Link], frame: pd.DataFrame) -> tuple[tuple[str, str], ...]:
    """Pairs of the parent's columns to synthesize in one cluster: each link column of the parent (child
    count, child means) with each context column of its link, and the child count and the mean of the
    link's first aggregate each with its strongest partner outside the context (`strongest_partners`).
    The children are matched to parents on the context, so a child statistic the parent's clusters
    separate from the context would reach the matched children only through whichever columns the
    stitching kept between them; the pairs with the context take cluster room from the other columns a
    statistic depends on, so the one it depends on most is kept with it too (a team's runs with its
    batters' mean home runs, its losses with its number of pitchers)."""
    partners = strongest_partners(name, links, frame)
    pairs = []
    for link in links:
        if link.key.parent != name:
            continue
        statistics = [link.count_column, *map(link.mean_column, link.aggregates)]
        pairs += [(c, s) for c in link.context if c in frame.columns for s in statistics]
        pairs += [(partners[s], s) for s in statistics if s in partners]
    return tuple(dict.fromkeys(pairs))


def strongest_partners(name: str, links: list[Link], frame: pd.DataFrame) -> dict[str, str]:
    """Per link of parent `name`: its child count column and its first aggregate's mean column -> the
    parent column outside the link's context that the statistic depends on most, by the clustering's
    dependence measure (docs/clustering.md) on up to PARTNER_SAMPLE_ROWS rows, where that dependence
    reaches the clustering's merge threshold. Like the clustering's own measure, it only steers which
    columns are synthesized together: every value is still anonymized by the cluster forests."""
    statistics = {}
    for link in links:
        if link.key.parent != name:
            continue
        first_mean = [link.mean_column(link.aggregates[0])] if link.aggregates else []
        statistics.update((c, link.context) for c in [link.count_column, *first_mean] if c in frame)
    own = [c for c in frame.columns if not str(c).startswith(DERIVED_PREFIX)]
    if not statistics or not own:
        return {}
    _, matrix = encode_frame(frame[own + list(statistics)])
    dependence = measure_dependence(matrix, sample_size=PARTNER_SAMPLE_ROWS).dependence
    partners = {}
    referenced = {c for link in links if link.key.parent == name for c in link.key.parent_columns}
    for row, (statistic, context) in enumerate(statistics.items(), start=len(own)):
        outside = [j for j, column in enumerate(own) if column not in context and column not in referenced]
        best = max(outside, key=lambda j: dependence[row, j], default=None)
        if best is not None and dependence[row, best] >= ClusteringParams().merge_threshold:
            partners[statistic] = own[best]
    return partners


def _parent_statistics(
    link: Link, tables: Mapping[str, LinkedTable], parent_rows: int
) -> dict[str, np.ndarray]:
    child = tables[link.child].frame
    positions = parent_positions(child, link.key, tables[link.key.parent].frame)
    linked = positions >= 0
    statistics = {link.count_column: np.bincount(positions[linked], minlength=parent_rows).astype(np.int64)}
    for column in link.aggregates:
        values = pd.to_numeric(child[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        present = linked & ~np.isnan(values)
        sums = np.bincount(positions[present], weights=values[present], minlength=parent_rows)
        counts = np.bincount(positions[present], minlength=parent_rows)
        with np.errstate(invalid="ignore", divide="ignore"):
            statistics[link.mean_column(column)] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return statistics


def _child_context(link: Link, tables: Mapping[str, LinkedTable]) -> dict[str, object]:
    child = tables[link.child].frame
    parent = tables[link.key.parent].frame
    positions = parent_positions(child, link.key, parent)
    context: dict[str, object] = {link.null_column: positions < 0} if link.key.nullable else {}
    for column in link.context:
        context[link.context_column(column)] = (
            parent[column].reset_index(drop=True).reindex(positions).reset_index(drop=True)
        )
    return context
