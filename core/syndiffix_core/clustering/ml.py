"""Clusters for an ML target column: the target's best features (scikit-learn, the optional ``ml`` extra)
chunked into clusters that are all stitched on the target.

Feature selection looks at the real data, like the rest of the clustering decision; every value it
leads to is still anonymized by the cluster forests.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from syndiffix_core.clustering.builder import Clusters, DerivedCluster, StitchOwner, column_weights
from syndiffix_core.errors import SynthesisError

# Columns with at most this many distinct values are treated as categories (classifier targets).
CATEGORY_THRESHOLD = 15
# Feature selection fits many trees (recursive elimination with 5-fold cross-validation): a sample of
# this many rows decides as well as the whole table on the sizes it is meant for, in a fraction of the time.
FEATURE_SAMPLE_SIZE = 10_000
# Features whose variance (after scaling) is below this carry nothing.
VARIANCE_THRESHOLD = 1e-5


class MissingExtraError(SynthesisError, ImportError):
    """An optional dependency of the requested mode is not installed."""


def select_features(
    values: np.ndarray, target: int, *, rng: np.random.Generator, sample_size: int = FEATURE_SAMPLE_SIZE
) -> list[int]:
    """The columns that best predict column ``target`` of ``values`` (rows x columns, floats, NaN = null),
    best first: recursive feature elimination with cross-validation over a decision tree (a classifier
    when the target has at most 15 distinct values, else a regressor)."""
    try:
        from sklearn.feature_selection import RFECV, VarianceThreshold
        from sklearn.preprocessing import RobustScaler
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
    except ImportError as error:
        raise MissingExtraError(
            "ML-target clustering needs scikit-learn: pip install scikit-learn"
        ) from error

    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values).any(axis=1)]
    if len(values) > sample_size:
        values = values[np.sort(rng.choice(len(values), size=sample_size, replace=False))]
    candidates = [j for j in range(values.shape[1]) if j != target]
    if len(values) < 10 or not candidates:
        return []

    columns = []
    for j in candidates:
        column = values[:, j]
        if len(np.unique(column)) <= CATEGORY_THRESHOLD:
            columns.append(np.unique(column, return_inverse=True)[1].astype(float))
        else:
            columns.append(RobustScaler().fit_transform(column[:, None])[:, 0])
    features = np.column_stack(columns)
    keep = VarianceThreshold(VARIANCE_THRESHOLD).fit(features).get_support()
    candidates = [j for j, kept in zip(candidates, keep, strict=True) if kept]
    features = features[:, keep]
    if not candidates:
        return []

    y = values[:, target]
    if len(np.unique(y)) <= CATEGORY_THRESHOLD:
        y = np.unique(y, return_inverse=True)[1]
        estimator = DecisionTreeClassifier(random_state=0)
    else:
        estimator = DecisionTreeRegressor(random_state=0)
    with warnings.catch_warnings():
        # Rare target classes make stratified folds uneven; the selection is still sound.
        warnings.filterwarnings("ignore", message="The least populated class", category=UserWarning)
        selector = RFECV(estimator).fit(features, y)
    order = np.argsort(selector.ranking_, kind="stable")[: selector.n_features_]
    return [candidates[i] for i in order]


def feature_clusters(
    target: int,
    features: Sequence[int],
    num_columns: int,
    entropies: np.ndarray,
    *,
    max_weight: float,
    patch_non_features: bool,
) -> Clusters:
    """The target with its features, chunked by weight: the first chunk is the initial cluster, every
    further chunk is stitched on the target. Every other column rides along on its own: stitched on the
    target keeping the table's target values, or (``patch_non_features``) patched at random."""
    features = [f for f in dict.fromkeys(features) if f != target]
    weights = column_weights(entropies)
    chunks: list[list[int]] = [[target]]
    weight = weights[target]
    for feature in features:
        if len(chunks[-1]) > 1 and weight + weights[feature] > max_weight:
            chunks.append([target])
            weight = weights[target]
        chunks[-1].append(feature)
        weight += weights[feature]

    # Chunks alternate the target's values (the mode was measured that way, docs/clustering.md).
    derived = [DerivedCluster(tuple(chunk[1:]), (target,), StitchOwner.SHARED) for chunk in chunks[1:]]
    chosen = {target, *features}
    for column in range(num_columns):
        if column in chosen:
            continue
        if patch_non_features:
            derived.append(DerivedCluster((column,)))
        else:
            derived.append(DerivedCluster((column,), (target,), StitchOwner.LEFT))
    return Clusters(tuple(chunks[0]), tuple(derived))
