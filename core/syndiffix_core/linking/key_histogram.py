"""Children per parent of a dimension link: the anonymized histogram of the child's foreign key.

When the parent is not the child's entity (flights -> airports: the flights are protected per plane, an
airport is a row of a lookup table), how many children a parent has is the count of child rows per
foreign-key value: a 1-dim histogram of one child column, anonymized with the child's entities like
every count of the child's synthesis (low-count filter, flattening of heavy entities, sticky noise).
Values that the low-count filter suppresses are pooled into one bucket, itself anonymized. Only the
anonymized counts leave this module, without the key values they belong to.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..anonymizer import CountAnonymizer, Entities, SortedEntities
from ..noise import Salt, hash_string, row_content_hashes
from ..params import AnonymizationParams, BucketizationParams


@dataclass(frozen=True)
class KeyHistogram:
    """Anonymized child counts of the key values that pass the low-count filter (largest first) and the
    anonymized count of the children of all suppressed values together (0 when that is low too)."""

    counts: np.ndarray
    pooled: int


def key_histogram(
    positions: np.ndarray,
    parent_keys: pd.DataFrame,
    entities: list[np.ndarray],
    child_rows: pd.DataFrame,
    salt: Salt,
    label: str,
    anonymization: AnonymizationParams,
) -> KeyHistogram:
    """`positions`: the parent row of each child row (-1: null key or orphan, left out). `entities`:
    the child's entity codes per AID (empty: each row is its own entity, identified by `child_rows`'
    content). `label` names the key so that its noise is its own. `anonymization`: the child's own
    parameters, so that this count is filtered and flattened as strictly as the child's synthesis."""
    anonymizer = CountAnonymizer(anonymization, BucketizationParams(), salt)
    linked = np.flatnonzero(positions >= 0)
    order = linked[np.argsort(positions[linked], kind="stable")]
    if order.size == 0:
        return KeyHistogram(np.zeros(0, dtype=np.int64), 0)
    sorted_positions = positions[order]
    starts = np.flatnonzero(np.r_[True, sorted_positions[1:] != sorted_positions[:-1]])
    ends = np.r_[starts[1:], order.size]
    label_seed = np.uint64(hash_string(f"link key histogram {label}"))
    value_seeds = row_content_hashes(parent_keys.iloc[sorted_positions[starts]]) ^ label_seed
    rows = _entities(entities, child_rows, salt)
    counts = anonymizer.count_ranges(SortedEntities(rows, order), starts, ends, value_seeds)
    kept = ~counts.lcf_low
    suppressed_rows = np.concatenate(
        [order[s:e] for s, e in zip(starts[~kept], ends[~kept], strict=True)] or [[]]
    )
    pooled = 0
    if suppressed_rows.size:
        pool = anonymizer.count_ranges(
            SortedEntities(rows, suppressed_rows.astype(np.int64)),
            np.zeros(1, dtype=np.int64),
            np.array([suppressed_rows.size], dtype=np.int64),
            np.array([label_seed ^ np.uint64(hash_string("suppressed"))], dtype=np.uint64),
        )
        pooled = 0 if pool.lcf_low[0] else int(pool.noisy_count[0])
    return KeyHistogram(np.sort(counts.noisy_count[kept])[::-1].astype(np.int64), pooled)


def _entities(codes: list[np.ndarray], child_rows: pd.DataFrame, salt: Salt) -> Entities:
    if not codes:
        return Entities((salt.hash_rows(row_content_hashes(child_rows)),), None, None)
    hashes, ids, entity_hashes = [], [], []
    for column in codes:
        dense, uniques = pd.factorize(column, sort=True)
        unique_hashes = salt.hash_entities(np.asarray(uniques, dtype=np.int64))
        hashes.append(unique_hashes[dense])
        ids.append(dense.astype(np.int64))
        entity_hashes.append(unique_hashes)
    return Entities(tuple(hashes), tuple(ids), tuple(entity_hashes))
