"""Capacity-limited matching of synthetic children to synthetic parents.

Places per parent: for an entity link, the parent's synthetic child count (scaled so the places add up
to the synthetic children that have a parent); for a dimension link, the anonymized children-per-key
histogram, laid onto the parents that the children's contexts and the parents' counts point at.
Children and parents are put in the same order: by the context columns, coarsened into shared buckets,
then by the first aggregate column (the child's value, the parent's synthetic mean). Within a bucket the
k-th child in that order takes the k-th place; a bucket's surplus children take the places left free in
other buckets, in bucket order. Sorting does it all: no per-row loop, O(n log n) for n children.
For a dimension link, swaps between parents then bring every parent's realized means of the aggregate
columns to its synthetic means (`match_means`), O(parents) per pass.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .key_histogram import KeyHistogram

CONTEXT_BUCKETS = 8  # entity links: the parents' counts decide, coarse buckets only order them
CHILD_SIDE_BUCKETS = 32  # other links: the children's context distribution decides (cells in all)
BLEND_STEPS = 6
LEVEL_MARGIN = 1.25  # the children's context profile wins when it is the stronger one (context_levels)
MEAN_PASSES = 64  # swap passes of match_means; each offers every parent one swap


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


def histogram_places(
    histogram: KeyHistogram, by_bucket: np.ndarray, with_children: int, rng: np.random.Generator
) -> np.ndarray:
    """Places per parent of a dimension link. The parents with the most `by_bucket` places (ties in
    random order) take the histogram's counts, largest first; the children of suppressed key values
    are shared equally by the next parents, as many as make up `with_children` (at least one). Only
    parents with `by_bucket` places take any: a parent whose context no synthetic child has gets no
    children. The counts are scaled to the synthetic children."""
    children = int(by_bucket.sum())
    exact = np.zeros(len(by_bucket))
    if children == 0:
        return exact.astype(np.int64)
    eligible = np.flatnonzero(by_bucket > 0)
    ranked = eligible[np.argsort(-(by_bucket[eligible] + rng.random(len(eligible)) * 0.5), kind="stable")]
    kept = histogram.counts[: len(ranked)].astype(float)
    exact[ranked[: len(kept)]] = kept
    if histogram.pooled > 0 and len(kept) < len(ranked):
        sharing = ranked[len(kept) : len(kept) + max(with_children - len(kept), 1)]
        exact[sharing] = histogram.pooled / len(sharing)
    if exact.sum() <= 0:
        exact = by_bucket.astype(float)
    return _integer_places(exact * (children / exact.sum()), children)


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
    child_values: np.ndarray | None,
    parent_means: np.ndarray | None,
    counts: np.ndarray,
    rng: np.random.Generator,
    *,
    histogram: KeyHistogram | None = None,
) -> np.ndarray:
    """The parent row (index into the parent arrays) of each child.

    `child_values` (children x aggregates) and `parent_means` (parents x aggregates): the aggregate
    columns of the children and the parents' synthetic means of them. `histogram`: given for a
    dimension link (the parent is not the child's entity), None for an entity link.

    Places per parent: for an entity link, the parent's synthetic child count alone decides, so a
    parent never gets more children than its anonymized count allows (scaled to the synthetic
    children); for a dimension link, the histogram's counts go to the parents in the order of
    `bucket_capacities` (the children's anonymized distribution over parent contexts, shared by the
    parents' synthetic counts). A parent whose value of a numeric context column lies beyond every
    child's takes none (`_context_buckets`). Within a context bucket, children are ordered by their
    value of the first aggregate column blended with noise, parents by their synthetic mean of it: the
    blend is chosen so that the realized means spread as much as the synthetic parents' means
    (bisection on the blend weight). For a dimension link, `match_means` then realizes every parent's
    synthetic means."""
    children = (
        len(child_values) if child_values is not None else len(child_context[0]) if child_context else 0
    )
    if children == 0:
        return np.zeros(0, dtype=np.int64)
    dimension = histogram is not None
    # child-side buckets: about CHILD_SIDE_BUCKETS cells in all, or sparse cells would pile a bucket's
    # children onto its few parents
    buckets = (
        max(2, round(CHILD_SIDE_BUCKETS ** (1 / max(len(child_context), 1))))
        if dimension
        else CONTEXT_BUCKETS
    )
    child_bucket, parent_bucket, beyond = _context_buckets(
        child_context, parent_context, buckets, children, len(counts)
    )
    # No count either: no child takes a context value (the year of a composite key, say) beyond those
    # of the child table's synthetic rows.
    counts = np.where(beyond, 0.0, counts)
    places = capacities(counts, children)
    if len(child_context):
        by_bucket = bucket_capacities(counts, parent_bucket, child_bucket)
        places = by_bucket if dimension else capped_places(by_bucket, places)
    if dimension:
        with_children = int((np.nan_to_num(np.asarray(counts, dtype=float)) >= 0.5).sum())
        places = histogram_places(histogram, places, with_children, rng)
    noise = rng.standard_normal(children)
    if child_values is None or parent_means is None or np.isnan(parent_means).all():
        return _fill(child_bucket, noise, parent_bucket, np.argsort(parent_bucket, kind="stable"), places)
    parent_order = np.lexsort((_nan_last(parent_means[:, 0]), parent_bucket))
    values = np.asarray(child_values[:, 0], dtype=float)
    standard = np.nan_to_num((values - np.nanmean(values)) / (np.nanstd(values) or 1.0), nan=0.0)
    target = _spread(parent_means[:, 0], places)
    low, high, best = 0.0, 1.0, None
    for _ in range(BLEND_STEPS):
        weight = (low + high) / 2
        best = _fill(
            child_bucket, weight * standard + (1 - weight) * noise, parent_bucket, parent_order, places
        )
        if _spread(_realized_means(best, values, len(places)), places) < target:
            low = weight
        else:
            high = weight
    if not dimension:
        # within context buckets: a child keeps a parent of the context it was synthesized with
        return match_means(best, child_values, parent_means, rng, groups=parent_bucket)
    targets = context_levels(child_values, parent_means, child_bucket, parent_bucket, places)
    return match_means(best, child_values, targets, rng)


def context_levels(
    child_values: np.ndarray,
    parent_means: np.ndarray,
    child_bucket: np.ndarray,
    parent_bucket: np.ndarray,
    places: np.ndarray,
) -> np.ndarray:
    """The parents' target means: their synthetic means, with the level of each context bucket taken
    from whichever synthesis shows it more strongly, per aggregate column.

    Both syntheses estimate how an aggregate column depends on the parent's context: the children's
    (their values by context bucket) and the parent's (its synthetic means by bucket, weighted by
    places). The engine loses weak dependencies rather than inventing them, and which table loses one
    depends on how the columns were clustered: the flatter profile is the one that lost it. When the
    children's profile varies more across buckets (LEVEL_MARGIN times the variance: a margin against
    noise in the bucket levels only; a dependency that the parent's synthesis keeps at half strength
    is half lost), each parent's mean keeps its deviation from its bucket's level and moves to the
    children's level."""
    targets = parent_means.copy()
    buckets = int(max(child_bucket.max(initial=-1), parent_bucket.max(initial=-1))) + 1
    weights = places.astype(float)
    for column in range(parent_means.shape[1]):
        values, means = child_values[:, column], parent_means[:, column]
        seen = ~np.isnan(values)
        child_level = _bucket_mean(child_bucket[seen], values[seen], np.ones(seen.sum()), buckets)
        known = ~np.isnan(means) & (weights > 0)
        parent_level = _bucket_mean(parent_bucket[known], means[known], weights[known], buckets)
        both = ~np.isnan(child_level) & ~np.isnan(parent_level)
        share = np.bincount(parent_bucket[known], weights=weights[known], minlength=buckets)[both]
        if share.sum() <= 0 or _weighted_var(child_level[both], share) <= LEVEL_MARGIN * _weighted_var(
            parent_level[both], share
        ):
            continue
        shift = np.where(both, child_level - parent_level, 0.0)
        targets[:, column] = means + shift[parent_bucket]
    return targets


def _bucket_mean(bucket: np.ndarray, values: np.ndarray, weights: np.ndarray, buckets: int) -> np.ndarray:
    total = np.bincount(bucket, weights=weights, minlength=buckets)
    sums = np.bincount(bucket, weights=values * weights, minlength=buckets)
    return np.where(total > 0, sums / np.where(total > 0, total, 1.0), np.nan)


def _weighted_var(values: np.ndarray, weights: np.ndarray) -> float:
    mean = np.average(values, weights=weights)
    return float(np.average((values - mean) ** 2, weights=weights))


def _context_buckets(
    child_context: Sequence[pd.Series],
    parent_context: Sequence[pd.Series],
    buckets: int,
    children: int,
    parents: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One code per combination of context buckets, in lexicographic order, kept dense, and whether
    each parent's value of a numeric context column lies below or above every child's (the children's
    synthetic context values, inside the range their synthesis anonymized): such parents get a bucket
    of their own, which no child has."""
    child_bucket = np.zeros(children, dtype=np.int64)
    parent_bucket = np.zeros(parents, dtype=np.int64)
    beyond = np.zeros(parents, dtype=bool)
    for child_values, parent_values in zip(child_context, parent_context, strict=True):
        child_codes, parent_codes, parent_beyond = _shared_buckets(child_values, parent_values, buckets)
        beyond |= parent_beyond
        radix = int(max(child_codes.max(initial=0), parent_codes.max(initial=0))) + 1
        combined = np.concatenate([child_bucket * radix + child_codes, parent_bucket * radix + parent_codes])
        dense = np.unique(combined, return_inverse=True)[1].ravel()
        child_bucket, parent_bucket = dense[:children], dense[children:]
    if beyond.any():
        parent_bucket = np.where(beyond, max(child_bucket.max(), parent_bucket.max()) + 1, parent_bucket)
    return child_bucket, parent_bucket, beyond


def match_means(
    parents: np.ndarray,
    child_values: np.ndarray,
    parent_means: np.ndarray,
    rng: np.random.Generator,
    *,
    groups: np.ndarray | None = None,
) -> np.ndarray:
    """Swaps of children between parents that bring the parents' realized means of the aggregate
    columns closer to their synthetic means; the number of children per parent does not change.

    The filled order realizes the means only on average: a parent's children are a sample, whose mean
    is off by its sampling error, which for parents with dozens of children is as large as the spread
    of the synthetic means itself. Each pass projects the parents' errors (standardized, all aggregate
    columns) on a random direction, pairs the parent most above with the one most below and so on, and
    swaps one random child of each pair when that lowers the sum over parents of children x squared
    error. Children are kept in slots grouped by parent, so a pass costs O(parents). `groups` (one
    code per parent): parents are paired only within their group."""
    center = np.nanmean(child_values, axis=0)
    scale = np.nanstd(child_values, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    values = np.nan_to_num((child_values - center) / scale, nan=0.0)  # a missing value counts as the mean
    targets = (parent_means - center) / scale
    weight = (~np.isnan(targets)).astype(float)  # a parent without a synthetic mean has no target
    targets = np.nan_to_num(targets, nan=0.0)
    rows = len(parent_means)
    slots = np.argsort(parents, kind="stable")  # slot -> child; slots of one parent are contiguous
    sizes = np.bincount(parents, minlength=rows)
    first_slot = np.cumsum(sizes) - sizes
    used = np.flatnonzero(sizes > 0)
    group = np.zeros(rows, dtype=np.int64) if groups is None else np.asarray(groups, dtype=np.int64)
    n = np.maximum(sizes, 1).astype(float)[:, None]
    sums = np.stack([np.bincount(parents, weights=column, minlength=rows) for column in values.T], axis=1)
    for _ in range(MEAN_PASSES):
        error = (sums / n - targets) * weight
        direction = rng.standard_normal(values.shape[1])
        low, high = _opposite_pairs(used, error[used] @ direction, group[used])
        half = len(low)
        slot_high = first_slot[high] + (rng.random(half) * sizes[high]).astype(np.int64)
        slot_low = first_slot[low] + (rng.random(half) * sizes[low]).astype(np.int64)
        a, b = slots[slot_high], slots[slot_low]
        moved = values[b] - values[a]  # high's change in sum; low's is its negative
        change = (weight[high] * (2 * error[high] * moved + moved * moved / n[high])).sum(axis=1) + (
            weight[low] * (-2 * error[low] * moved + moved * moved / n[low])
        ).sum(axis=1)
        better = change < 0
        slots[slot_high[better]], slots[slot_low[better]] = b[better], a[better]
        sums[high[better]] += moved[better]
        sums[low[better]] -= moved[better]
    result = np.empty_like(parents)
    result[slots] = np.repeat(np.arange(rows), sizes)
    return result


def _opposite_pairs(
    members: np.ndarray, score: np.ndarray, group: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Within each group, the member with the lowest score paired with the highest, the second lowest
    with the second highest, and so on: (low, high) arrays of members."""
    order = np.lexsort((score, group))
    ranked, group = members[order], group[order]
    start = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    size = np.diff(np.r_[start, len(ranked)])
    first = np.repeat(start, size)
    position = np.arange(len(ranked)) - first
    partner = first + np.repeat(size, size) - 1 - position
    lower = position < np.repeat(size // 2, size)
    return ranked[lower], ranked[partner[lower]]


def _fill(
    bucket: np.ndarray,
    within: np.ndarray,
    parent_bucket: np.ndarray,
    parent_order: np.ndarray,
    places: np.ndarray,
) -> np.ndarray:
    """The parent of each child: children ordered by bucket, then by `within`; places in `parent_order`
    (by bucket, then by the parents' means). Each bucket pairs its children with its own places
    (`_even_pairs`), so a bucket with more children than places (its parents' counts cap them) does
    not shift every later bucket's children onto parents of another context; the children left over
    take the places left over, both in the same orders. One float key (bucket + a monotone squash of
    `within` into (0, 1)) sorts faster than a lexsort."""
    child_order = np.argsort(bucket + (0.5 + np.arctan(within) / np.pi))
    slots = np.repeat(parent_order, places[parent_order])  # place -> parent, bucket by bucket
    buckets = int(max(bucket.max(initial=-1), parent_bucket.max(initial=-1))) + 1
    child_at, slot_at = _even_pairs(
        np.bincount(bucket, minlength=buckets), np.bincount(parent_bucket[slots], minlength=buckets)
    )
    left_child = np.ones(len(bucket), dtype=bool)
    left_child[child_at] = False
    left_slot = np.ones(len(slots), dtype=bool)
    left_slot[slot_at] = False
    parents = np.empty(len(bucket), dtype=np.int64)
    parents[child_order[child_at]] = slots[slot_at]
    parents[child_order[left_child]] = slots[left_slot]
    return parents


def _even_pairs(wanted: np.ndarray, offered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of paired children and places in their bucket-major orders (`wanted` children and
    `offered` places per bucket): per bucket as many pairs as the smaller of the two, picked evenly
    along both orders, so the pairs keep the bucket's whole range of values on both sides."""
    paired = np.minimum(wanted, offered)
    pair_bucket = np.repeat(np.arange(len(paired)), paired)
    rank = np.arange(len(pair_bucket)) - np.repeat(np.cumsum(paired) - paired, paired)
    step = (rank + 0.5) / paired[pair_bucket]
    child_at = (np.cumsum(wanted) - wanted)[pair_bucket] + (step * wanted[pair_bucket]).astype(np.int64)
    slot_at = (np.cumsum(offered) - offered)[pair_bucket] + (step * offered[pair_bucket]).astype(np.int64)
    return child_at, slot_at


def _realized_means(parents: np.ndarray, values: np.ndarray, parent_rows: int) -> np.ndarray:
    present = ~np.isnan(values)
    sums = np.bincount(parents[present], weights=values[present], minlength=parent_rows)
    counts = np.bincount(parents[present], minlength=parent_rows)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _spread(means: np.ndarray, places: np.ndarray) -> float:
    """Standard deviation of the parents' means, over parents with places."""
    used = (places > 0) & ~np.isnan(means)
    return float(np.std(means[used])) if used.any() else 0.0


def _shared_buckets(
    child: pd.Series, parent: pd.Series, buckets: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes of both sides on one scale: numeric columns by quantile buckets of the parents' values,
    other columns by their sorted distinct values; nulls last. And whether each parent's numeric value
    lies below or above every child's (never for other columns)."""
    beyond = np.zeros(len(parent), dtype=bool)
    if pd.api.types.is_numeric_dtype(child.dtype) and pd.api.types.is_numeric_dtype(parent.dtype):
        child_values = pd.to_numeric(child).to_numpy(dtype=float, na_value=np.nan)
        parent_values = pd.to_numeric(parent).to_numpy(dtype=float, na_value=np.nan)
        known = child_values[~np.isnan(child_values)]
        if len(known):
            beyond = (parent_values < known.min()) | (parent_values > known.max())
        present = parent_values[~np.isnan(parent_values)]
        if len(present) == 0:
            return (
                np.zeros(len(child_values), dtype=np.int64),
                np.zeros(len(parent_values), dtype=np.int64),
                beyond,
            )
        edges = np.unique(np.quantile(present, np.linspace(0, 1, buckets + 1)[1:-1]))
        return _bucket(child_values, edges), _bucket(parent_values, edges), beyond
    both = pd.concat([child.astype(object), parent.astype(object)], ignore_index=True)
    codes, _ = pd.factorize(both.astype(str).where(both.notna(), None), sort=True)
    codes = np.where(codes < 0, codes.max(initial=0) + 1, codes)
    return codes[: len(child)], codes[len(child) :], beyond


def _bucket(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    codes = np.searchsorted(edges, values, side="right")
    return np.where(np.isnan(values), len(edges) + 1, codes)


def _nan_last(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    return np.where(np.isnan(values), np.inf, values)
