"""How strongly two columns are linked, read from their 2-dim pool (anonymized counts only).

Refinement draws a k-dim placeholder's other dimensions jointly from one sub-pool and its primary
dimension alone, so the primary dimension's links to the others survive only as far as the
placeholder's own ranges carry them. A dimension that follows another (a running month number and
its year, a length in two units) should not be the one drawn alone: this module rates the links and
picks the dimensions that may be.
"""

from __future__ import annotations

import numpy as np

# Each dimension is cut into at most this many bins of about equal count.
LINK_BINS = 8
# Two dimensions this linked follow each other: refinement keeps them in the jointly drawn sub-bucket.
# (At 0.6 more pools count as tied, and on the harness tables people's 2-dim TVD and Batting's ML
# efficacy got worse beyond the salts' noise.)
TIED_LINK = 0.8


def pair_link(low: np.ndarray, high: np.ndarray, count: np.ndarray) -> float:
    """Mutual information of a 2-dim pool's two dimensions over their entropy (the smaller one), in
    [0, 1]: 0 when the counts are independent on a grid of equal-count bins, 1 when one dimension
    determines the other. Entries are placed at their midpoints, weighted by their counts."""
    weights = count.astype(np.float64)
    total = weights.sum()
    if total <= 0:
        return 0.0
    middle = (low + high) / 2
    bins = [_equal_count_bins(middle[:, d], weights, total) for d in (0, 1)]
    joint = np.bincount(bins[0] * LINK_BINS + bins[1], weights=weights, minlength=LINK_BINS**2)
    joint = joint.reshape(LINK_BINS, LINK_BINS) / total
    first, second = _entropy(joint.sum(axis=1)), _entropy(joint.sum(axis=0))
    if min(first, second) <= 0:
        return 0.0
    mutual = first + second - _entropy(joint.ravel())
    return float(np.clip(mutual / min(first, second), 0.0, 1.0))


def _equal_count_bins(values: np.ndarray, weights: np.ndarray, total: float) -> np.ndarray:
    """A bin in [0, LINK_BINS) per value: equal values share one, bins hold about equal counts."""
    distinct, inverse = np.unique(values, return_inverse=True)
    per_value = np.bincount(inverse, weights=weights, minlength=distinct.size)
    before = np.cumsum(per_value) - per_value
    value_bin = np.minimum((before / total * LINK_BINS).astype(np.int64), LINK_BINS - 1)
    return value_bin[inverse]


def _entropy(probabilities: np.ndarray) -> float:
    p = probabilities[probabilities > 0]
    return float(-(p * np.log2(p)).sum())


def primary_choices(links: np.ndarray) -> np.ndarray | None:
    """The dimensions refinement may draw alone, given the pool's pairwise `links` (k x k, symmetric):
    those in no pair linked at least `TIED_LINK`, when there are such pairs and such dimensions;
    None (any dimension) otherwise."""
    tied = (links >= TIED_LINK).any(axis=1)
    if not tied.any() or tied.all():
        return None
    return np.flatnonzero(~tied)
