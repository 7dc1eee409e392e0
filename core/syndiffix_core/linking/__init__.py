"""Linked tables: synthetic copies of tables related by keys that still join.

`synthesize_linked(tables, salt=...)` takes `LinkedTable`s with their primary, unique and foreign keys
and returns synthetic tables with fresh surrogate keys whose foreign keys reference synthetic parents.
How many children each parent has, and what they look like, comes only from the engine's anonymized
output (docs/linked-tables.md).
"""

from .schema import DERIVED_PREFIX, ForeignKey, LinkedTable, LinkingError, OrphanPolicy, entity_links
from .synthesis import parents_first, synthesize_linked

__all__ = [
    "DERIVED_PREFIX",
    "ForeignKey",
    "LinkedTable",
    "LinkingError",
    "OrphanPolicy",
    "entity_links",
    "parents_first",
    "synthesize_linked",
]
