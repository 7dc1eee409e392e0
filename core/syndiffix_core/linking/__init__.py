"""Linked tables: synthetic copies of tables related by keys that still join.

`synthesize_linked(tables, salt=...)` takes `LinkedTable`s with their primary, unique and foreign keys
and returns synthetic tables with fresh surrogate keys whose foreign keys reference synthetic parents.
The same in steps, one table at a time (a scheduler's tasks): `prepare_linked`, then per table, parents
first, `synthesize_member` and `link_member`, and `output_frame` for what is written.
How many children each parent has, and what they look like, comes only from the engine's anonymized
output (docs/linked-tables.md).
"""

from .schema import DERIVED_PREFIX, ForeignKey, LinkedTable, LinkingError, OrphanPolicy, entity_links
from .synthesis import (
    PreparedSet,
    link_member,
    output_frame,
    parents_first,
    prepare_linked,
    synthesize_linked,
    synthesize_member,
)

__all__ = [
    "DERIVED_PREFIX",
    "ForeignKey",
    "LinkedTable",
    "LinkingError",
    "OrphanPolicy",
    "PreparedSet",
    "entity_links",
    "link_member",
    "output_frame",
    "parents_first",
    "prepare_linked",
    "synthesize_linked",
    "synthesize_member",
]
