"""Capacity-limited matching of synthetic children to synthetic parents.

Each synthetic parent offers as many places as its synthetic child count (scaled so the places add up
to the synthetic children that have a parent). Children and parents are put in the same order: by the
context columns, coarsened into shared buckets, then by the first aggregate column (the child's value,
the parent's synthetic mean). The k-th child in that order takes the k-th place. Sorting does it all:
no per-row loop, O(n log n) for n children.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

CONTEXT_BUCKETS = 8  # entity links: the parents' counts decide, coarse buckets only order them
CHILD_SIDE_BUCKETS = 32  # other links: the children's context distribution decides (cells in all)
BLEND_STEPS = 6


def capacities(counts: np.ndarray, children: int) -> np.ndarray:
    """Integer places per parent, proportional to `counts` (NaN and negatives: none), summing to
    `children` (largest remainders get the rounding); equal places when no count is positive."""
    weights = np.nan_to_num(np.asarray(counts, dtype=float), nan=0.0).clip(min=0.0)
    if len(weights) == 0:
        return np.zeros(0, dtype=np.int64)
    if weights.sum() <= 0:
        weights = np.ones_like(weights)
    return _integer_places(weights * (children / weights.sum()), children)


def bucket_capacities(counts: np.ndarray, parent_bucket: np.ndarray, child_bucket: np.ndarray) -> np.ndarray:
    """Places per parent: each context bucket offers as many places as it has synthetic children
    (the child table's anonymized distribution over parent contexts), shared among the bucket's
    parents by their synthetic child counts (the parent table's anonymized statistics; equally when
    none is positive). Children in buckets without parents are shared among all parents by count."""
    weights = np.nan_to_num(np.asarray(counts, dtype=float), nan=0.0).clip(min=0.0)
    buckets = int(max(parent_bucket.max(initial=-1), child_bucket.max(initial=-1))) + 1
    wanted = np.bincount(child_bucket, minlength=buckets).astype(float)
    members = np.bincount(parent_bucket, minlength=buckets)
    total = np.bincount(parent_bucket, weights=weights, minlength=buckets)
    share = np.where(
        total[parent_bucket] > 0,
        weights / np.where(total[parent_bucket] > 0, total[parent_bucket], 1.0),
        1.0 / members[parent_bucket],
    )
    exact = wanted[parent_bucket] * share
    homeless = wanted[members == 0].sum()
    if homeless:
        exact += _proportional(weights, homeless)
    return _integer_places(exact, len(child_bucket))


def capped_places(wanted: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """`wanted` places cut at `limit` per parent; the places cut off go to the parents still below their
    limit, in proportion to their headroom (the total stays that of `limit`)."""
    places = np.minimum(wanted, limit)
    short = int(limit.sum() - places.sum())
    if short > 0:
        headroom = (limit - places).astype(float)
        places += _integer_places(headroom * (short / headroom.sum()), short)
    return places


def _proportional(weights: np.ndarray, amount: float) -> np.ndarray:
    if weights.sum() <= 0:
        weights = np.ones_like(weights)
    return weights * (amount / weights.sum())


def _integer_places(exact: np.ndarray, children: int) -> np.ndarray:
    places = np.floor(exact).astype(np.int64)
    short = children - int(places.sum())
    if short > 0:
        places[np.argsort(-(exact - places), kind="stable")[:short]] += 1
    return places


def assign(
    child_context: Sequence[pd.Series],
    parent_context: Sequence[pd.Series],
    child_value: np.ndarray | None,
    parent_mean: np.ndarray | None,
    counts: np.ndarray,
    rng: np.random.Generator,
    *,
    by_context: bool = True,
) -> np.ndarray:
    """The parent row (index into the parent arrays) of each child.

    Places per parent: when the parent is the child's entity (`by_context` false), its synthetic child
    count alone decides, so a parent never gets more children than its anonymized count allows (scaled
    to the synthetic children); otherwise `bucket_capacities` also follows the children's anonymized
    distribution over parent contexts (flights per airport context, protected per plane). Within a context bucket, children are ordered by
    their value of the first aggregate column blended with noise, parents by their synthetic mean of it.
    A pure sort would spread the parents' realized means more than the synthetic means do; pure noise
    would flatten them. The blend is chosen so that the realized means spread as much as the synthetic
    parents' means (bisection on the blend weight)."""
    children = len(child_value) if child_value is not None else len(child_context[0]) if child_context else 0
    if children == 0:
        return np.zeros(0, dtype=np.int64)
    # child-side buckets: about CHILD_SIDE_BUCKETS cells in all, or sparse cells would pile a bucket's
    # children onto its few parents
    buckets = (
        max(2, round(CHILD_SIDE_BUCKETS ** (1 / max(len(child_context), 1))))
        if by_context
        else CONTEXT_BUCKETS
    )
    child_bucket = np.zeros(children, dtype=np.int64)
    parent_bucket = np.zeros(len(counts), dtype=np.int64)
    for child_values, parent_values in zip(child_context, parent_context, strict=True):
        child_codes, parent_codes = _shared_buckets(child_values, parent_values, buckets)
        radix = int(max(child_codes.max(initial=0), parent_codes.max(initial=0))) + 1
        # one code per combination of context buckets, in lexicographic order, kept dense
        combined = np.concatenate([child_bucket * radix + child_codes, parent_bucket * radix + parent_codes])
        dense = np.unique(combined, return_inverse=True)[1].ravel()
        child_bucket, parent_bucket = dense[:children], dense[children:]
    places = capacities(counts, children)
    if len(child_context):
        by_bucket = bucket_capacities(counts, parent_bucket, child_bucket)
        places = by_bucket if by_context else capped_places(by_bucket, places)
    noise = rng.standard_normal(children)
    if child_value is None or parent_mean is None or np.isnan(parent_mean).all():
        return _fill(child_bucket, noise, np.argsort(parent_bucket, kind="stable"), places)
    parent_order = np.lexsort((_nan_last(parent_mean), parent_bucket))
    values = np.asarray(child_value, dtype=float)
    standard = np.nan_to_num((values - np.nanmean(values)) / (np.nanstd(values) or 1.0), nan=0.0)
    target = _spread(parent_mean, places)
    low, high, best = 0.0, 1.0, None
    for _ in range(BLEND_STEPS):
        weight = (low + high) / 2
        best = _fill(child_bucket, weight * standard + (1 - weight) * noise, parent_order, places)
        if _spread(_realized_means(best, values, len(places)), places) < target:
            low = weight
        else:
            high = weight
    return best


def _fill(bucket: np.ndarray, within: np.ndarray, parent_order: np.ndarray, places: np.ndarray) -> np.ndarray:
    """Children ordered by bucket, then by `within`; the k-th child takes the k-th place in parent order.
    One float key (bucket + a monotone squash of `within` into (0, 1)) sorts faster than a lexsort."""
    children = len(bucket)
    child_order = np.argsort(bucket + (0.5 + np.arctan(within) / np.pi))
    ends = np.cumsum(places[parent_order])
    slot = np.searchsorted(ends, np.arange(children), side="right")
    parents = np.empty(children, dtype=np.int64)
    parents[child_order] = parent_order[slot]
    return parents


def _realized_means(parents: np.ndarray, values: np.ndarray, parent_rows: int) -> np.ndarray:
    present = ~np.isnan(values)
    sums = np.bincount(parents[present], weights=values[present], minlength=parent_rows)
    counts = np.bincount(parents[present], minlength=parent_rows)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _spread(means: np.ndarray, places: np.ndarray) -> float:
    """Standard deviation of the parents' means, over parents with places."""
    used = (places > 0) & ~np.isnan(means)
    return float(np.std(means[used])) if used.any() else 0.0


def _shared_buckets(child: pd.Series, parent: pd.Series, buckets: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes of both sides on one scale: numeric columns by quantile buckets of the parents' values,
    other columns by their sorted distinct values; nulls last."""
    if pd.api.types.is_numeric_dtype(child.dtype) and pd.api.types.is_numeric_dtype(parent.dtype):
        child_values = pd.to_numeric(child).to_numpy(dtype=float, na_value=np.nan)
        parent_values = pd.to_numeric(parent).to_numpy(dtype=float, na_value=np.nan)
        present = parent_values[~np.isnan(parent_values)]
        if len(present) == 0:
            return np.zeros(len(child_values), dtype=np.int64), np.zeros(len(parent_values), dtype=np.int64)
        edges = np.unique(np.quantile(present, np.linspace(0, 1, buckets + 1)[1:-1]))
        return _bucket(child_values, edges), _bucket(parent_values, edges)
    both = pd.concat([child.astype(object), parent.astype(object)], ignore_index=True)
    codes, _ = pd.factorize(both.astype(str).where(both.notna(), None), sort=True)
    codes = np.where(codes < 0, codes.max(initial=0) + 1, codes)
    return codes[: len(child)], codes[len(child) :]


def _bucket(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    codes = np.searchsorted(edges, values, side="right")
    return np.where(np.isnan(values), len(edges) + 1, codes)


def _nan_last(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return np.where(np.isnan(values), np.inf, values)
