"""ML efficacy: does a model trained on the synthetic table predict the target as well on source rows?

The source rows are split once (fixed seed) into a training part (70 %) and a test part. The reference
is a model trained on the training part; the synthetic score is the same model trained on (at most as
many) synthetic rows. Both are tested on the same source test rows. The score is accuracy (in %) for a
categorical target, R² (in %, negative values shown as 0) for a numeric one. The synthetic table was
made from all source rows, test rows included, so its score is an upper estimate of what it would reach
on new rows.

Needs scikit-learn (`pip install scikit-learn`, or the `ml` extra); without it the part is reported as missing.
Only the two scores leave this module: no prediction, row or split is stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

_SEED = 20_240_101
_TEST_SHARE = 0.3
_MAX_TRAIN_ROWS = 10_000
_MAX_CLASSES = 50
# Boosting rounds: enough to rank tables by how well they predict, at a few CPU seconds per model.
_ITERATIONS = 50
_SCORE_DECIMALS = 1


def ml_efficacy(original: pd.DataFrame, synthetic: pd.DataFrame, target: str) -> dict[str, Any]:
    """{"target", "task", "metric", "score", "sample"}: scores of the synthetic-trained and the
    source-trained model on the source test rows; "score" is None (with a "note") when it cannot run."""
    base = {"target": target, "score": None, "sample": None}
    if target not in original.columns or target not in synthetic.columns:
        return {**base, "note": f"the target column {target} is not in both tables"}
    try:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    except ImportError:
        return {**base, "note": "needs scikit-learn: pip install scikit-learn"}
    features = [c for c in synthetic.columns if c != target and c in original.columns]
    source_target = original[target]
    classify = not _is_numeric(source_target) or source_target.nunique(dropna=True) <= 10
    task = "classification" if classify else "regression"
    encode = _Encoder(original, features)
    rows = np.random.default_rng(_SEED).permutation(len(original))
    test_rows = rows[: int(len(rows) * _TEST_SHARE)]
    train_rows = rows[len(test_rows) :][:_MAX_TRAIN_ROWS]
    if classify:
        labels = _class_labels(original[target])
        y_source, y_synthetic = (
            _class_codes(original[target], labels),
            _class_codes(synthetic[target], labels),
        )
    else:
        y_source = pd.to_numeric(original[target], errors="coerce").to_numpy(dtype=np.float64)
        y_synthetic = pd.to_numeric(synthetic[target], errors="coerce").to_numpy(dtype=np.float64)
    x_source, x_synthetic = encode(original), encode(synthetic)
    test = test_rows[~np.isnan(y_source[test_rows])]
    train = train_rows[~np.isnan(y_source[train_rows])]
    synthetic_rows = np.flatnonzero(~np.isnan(y_synthetic))[: len(train)]
    if len(test) < 10 or len(train) < 10 or len(synthetic_rows) < 10:
        return {**base, "task": task, "note": "too few rows with a target value"}

    def fitted_score(x_train: np.ndarray, y_train: np.ndarray) -> float:
        model_type = HistGradientBoostingClassifier if classify else HistGradientBoostingRegressor
        model = model_type(random_state=_SEED, max_iter=_ITERATIONS).fit(x_train, y_train)
        return float(model.score(x_source[test], y_source[test]))  # accuracy or R²

    reference = fitted_score(x_source[train], y_source[train])
    score = fitted_score(x_synthetic[synthetic_rows], y_synthetic[synthetic_rows])
    return {
        **base,
        "task": task,
        "metric": "accuracy" if classify else "R²",
        "score": _percent(score),
        "sample": _percent(reference),
    }


def _percent(value: float) -> float:
    return round(100.0 * max(value, 0.0), _SCORE_DECIMALS)


def _is_numeric(series: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)


def _class_labels(series: pd.Series) -> pd.Index:
    """The most frequent source classes; rarer ones are one class, so no rare value is a label."""
    counts = series.dropna().astype(str).value_counts()
    return pd.Index(counts.index[:_MAX_CLASSES])


def _class_codes(series: pd.Series, labels: pd.Index) -> np.ndarray:
    codes = labels.get_indexer(series.astype(str)).astype(np.float64)
    codes[codes < 0] = len(labels)  # a rare or unseen class
    codes[series.isna().to_numpy()] = np.nan
    return codes


class _Encoder:
    """Features as floats: numbers as is, timestamps in seconds, other values as their rank in the
    source's frequency order (unseen ones missing); gradient boosting handles the missing values."""

    def __init__(self, original: pd.DataFrame, features: list[str]):
        self.features = features
        self.categories = {
            name: pd.Index(original[name].dropna().astype(str).value_counts().index)
            for name in features
            if not (_is_numeric(original[name]) or pd.api.types.is_datetime64_any_dtype(original[name]))
        }

    def __call__(self, frame: pd.DataFrame) -> np.ndarray:
        columns = []
        for name in self.features:
            series = frame[name]
            if name in self.categories:
                codes = self.categories[name].get_indexer(series.astype(str)).astype(np.float64)
                codes[(codes < 0) | series.isna().to_numpy()] = np.nan
                columns.append(codes)
            elif pd.api.types.is_datetime64_any_dtype(series):
                stamps = pd.to_datetime(series, utc=True)
                columns.append((stamps - pd.Timestamp(0, tz="UTC")).dt.total_seconds().to_numpy(np.float64))
            else:
                columns.append(
                    pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
                )
        return np.column_stack(columns) if columns else np.zeros((len(frame), 0))
