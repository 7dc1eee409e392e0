"""Scores of one synthetic table against its source (runs in the harness venv).

- 1-dim / 2-dim TVD: total variation distance of each column's (each pair's) distribution over bins fixed
  on the source: 10 quantile bins for numbers and timestamps, the 20 most frequent values (+ "other")
  for strings and booleans, nulls in a bin of their own. Mean over columns (pairs).
- correlation error: mean |Spearman(source) - Spearman(synthetic)| over pairs of numeric/timestamp columns
  (every pair's two coefficients are kept, `correlation_pairs`).
- SDMetrics QualityReport: Column Shapes, Column Pair Trends (all pairs) and their mean (overall).
- ML efficacy: a gradient-boosted model trained on the synthetic rows, tested on the real hold-out rows
  that no synthesizer saw (ROC AUC for a classification target, R^2 for a numeric one).
- tails: per numeric column the mean, p90, p99 and the share of rows above the source's p90.
- out of range: values of numeric/timestamp columns below the source's minimum or above its maximum.
"""

from __future__ import annotations

import logging
import warnings
from itertools import combinations

import numpy as np
import pandas as pd

NUMBER_BINS = 10
TOP_VALUES = 20
NUMERIC_KINDS = ("integer", "real")
# "date_text": a text column of ISO dates (`tables.is_date_text`), scored as the instants it holds; a
# synthetic value that is not a date (a "2004-0*57" label) scores as null.
ORDERED_KINDS = ("integer", "real", "timestamp", "date_text")


def _ordered_values(series: pd.Series, kind: str) -> np.ndarray:
    if kind == "date_text":
        values = pd.to_datetime(series, errors="coerce", utc=True, format="ISO8601")
        seconds = (values - pd.Timestamp("1970-01-01", tz="UTC")).dt.total_seconds()
        return seconds.to_numpy(dtype="float64", na_value=np.nan)
    if kind == "timestamp":
        values = pd.to_datetime(series)
        seconds = (values - pd.Timestamp("1970-01-01")).dt.total_seconds()
        return seconds.to_numpy(dtype="float64", na_value=np.nan)
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype="float64", na_value=np.nan)


class Binning:
    """Bins of every column, fixed on the source, applied to any table with the same columns."""

    def __init__(self, source: pd.DataFrame, kinds: dict[str, str]):
        self.kinds = kinds
        self.edges, self.categories = {}, {}
        for name, kind in kinds.items():
            if kind in ORDERED_KINDS:
                values = _ordered_values(source[name], kind)
                values = values[~np.isnan(values)]
                quantiles = (
                    np.quantile(values, np.linspace(0, 1, NUMBER_BINS + 1)[1:-1]) if len(values) else []
                )
                self.edges[name] = np.unique(quantiles)
            else:
                counts = source[name].dropna().astype(str).value_counts()
                self.categories[name] = list(counts.index[:TOP_VALUES])

    def size(self, name: str) -> int:
        if name in self.edges:
            return len(self.edges[name]) + 2
        return len(self.categories[name]) + 2

    def codes(self, frame: pd.DataFrame, name: str) -> np.ndarray:
        """Bin index per row; the last bin is null, the one before it 'other' for strings."""
        null_bin = self.size(name) - 1
        if name in self.edges:
            values = _ordered_values(frame[name], self.kinds[name])
            codes = np.searchsorted(self.edges[name], values, side="right")
            return np.where(np.isnan(values), null_bin, codes)
        series = frame[name]
        lookup = {value: index for index, value in enumerate(self.categories[name])}
        codes = series.astype(str).map(lookup).fillna(null_bin - 1).to_numpy(dtype="int64")
        return np.where(series.isna().to_numpy(), null_bin, codes)


def _tvd(first: np.ndarray, second: np.ndarray, size: int) -> float:
    p = np.bincount(first, minlength=size) / max(len(first), 1)
    q = np.bincount(second, minlength=size) / max(len(second), 1)
    return 0.5 * float(np.abs(p - q).sum())


def tvd_scores(source: pd.DataFrame, synthetic: pd.DataFrame, binning: Binning) -> dict[str, float]:
    names = list(binning.kinds)
    src = {name: binning.codes(source, name) for name in names}
    syn = {name: binning.codes(synthetic, name) for name in names}
    one = [_tvd(src[n], syn[n], binning.size(n)) for n in names]
    two = {}
    for a, b in combinations(names, 2):
        width = binning.size(b)
        two[f"{a}+{b}"] = _tvd(src[a] * width + src[b], syn[a] * width + syn[b], binning.size(a) * width)
    return {
        "tvd_1dim": float(np.mean(one)),
        "tvd_2dim": float(np.mean(list(two.values()))) if two else 0.0,
        "tvd_1dim_columns": dict(zip(names, map(float, one), strict=True)),
        "tvd_2dim_pairs": two,
    }


def correlation_pairs(
    source: pd.DataFrame, synthetic: pd.DataFrame, kinds: dict[str, str]
) -> dict[str, list[float]]:
    """Per pair of numeric/timestamp columns ("a+b"): [Spearman(source), Spearman(synthetic)]; the
    synthetic one is NaN where a column came out constant."""
    names = [name for name, kind in kinds.items() if kind in ORDERED_KINDS]

    def spearman(frame: pd.DataFrame) -> np.ndarray:
        numbers = pd.DataFrame({name: _ordered_values(frame[name], kinds[name]) for name in names})
        return numbers.corr(method="spearman", min_periods=30).to_numpy()

    src, syn = spearman(source), spearman(synthetic)
    return {
        f"{names[i]}+{names[j]}": [float(src[i, j]), float(syn[i, j])]
        for i, j in zip(*np.triu_indices(len(names), k=1), strict=True)
    }


def correlation_error(pairs: dict[str, list[float]]) -> float | None:
    """Mean of `pair_correlation_errors` over the pairs of `correlation_pairs`; None where no pair has a
    source correlation (a constant column's pairs have none)."""
    errors = pair_correlation_errors(list(pairs.values())) if pairs else np.zeros(0)
    errors = errors[~np.isnan(errors)]
    return float(errors.mean()) if errors.size else None


def pair_correlation_errors(pairs: list[list[float | None]]) -> np.ndarray:
    """|Spearman(source) - Spearman(synthetic)| per [source, synthetic] pair (NaN or None: none); a
    constant synthetic column has no correlation: it counts as the full loss of the source's. NaN where
    the source has none."""
    src, syn = np.array(pairs, dtype=float).reshape(-1, 2).T
    return np.where(np.isnan(syn), np.abs(src), np.abs(src - syn))


def out_of_range(source: pd.DataFrame, synthetic: pd.DataFrame, kinds: dict[str, str]) -> dict[str, int]:
    """Per numeric/timestamp column: synthetic values outside [source min, source max] (only columns with any)."""
    found = {}
    for name, kind in kinds.items():
        if kind not in ORDERED_KINDS:
            continue
        src, syn = _ordered_values(source[name], kind), _ordered_values(synthetic[name], kind)
        outside = int(np.sum((syn < np.nanmin(src)) | (syn > np.nanmax(src))))
        if outside:
            found[name] = outside
    return found


def tails(
    source: pd.DataFrame, synthetic: pd.DataFrame, kinds: dict[str, str]
) -> dict[str, dict[str, float]]:
    out = {}
    for name, kind in kinds.items():
        if kind not in NUMERIC_KINDS:
            continue
        src, syn = _ordered_values(source[name], kind), _ordered_values(synthetic[name], kind)
        src, syn = src[~np.isnan(src)], syn[~np.isnan(syn)]
        if len(syn) == 0:
            out[name] = {
                "mean": np.nan,
                "p90": np.nan,
                "p99": np.nan,
                "above_p90": np.nan,
                "mean_diff_sd": np.nan,
            }
            continue
        p90 = np.quantile(src, 0.9)
        sd = float(np.std(src)) or 1.0
        out[name] = {
            "mean": float(np.mean(syn)),
            "p90": float(np.quantile(syn, 0.9)),
            "p99": float(np.quantile(syn, 0.99)),
            "above_p90": float(np.mean(syn > p90)),
            "mean_diff_sd": float(abs(np.mean(syn) - np.mean(src)) / sd),
        }
    return out


def sdmetrics_quality(
    source: pd.DataFrame, synthetic: pd.DataFrame, kinds: dict[str, str]
) -> dict[str, float]:
    from sdmetrics.reports import QualityReport

    sdtypes = {"integer": "numerical", "real": "numerical", "string": "categorical", "boolean": "boolean"}
    columns = {name: {"sdtype": sdtypes.get(kind, "datetime")} for name, kind in kinds.items()}
    metadata = {"tables": {"table": {"columns": columns}}}
    real, fake = _sdmetrics_frame(source, kinds), _sdmetrics_frame(synthetic, kinds)
    report = QualityReport()
    logging.getLogger("sdmetrics").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report.generate({"table": real}, {"table": fake}, metadata, verbose=False)
    properties = report.get_properties().set_index("Property")["Score"]
    # Column Pair Trends averages only the pairs SDMetrics finds associated in the source (|Pearson| >
    # 0.5, else Cramer's V > 0.3); their scores say which pairs move the overall score.
    pairs = report.get_details("Column Pair Trends")
    counted = pairs[pairs["Meets Threshold?"].astype("boolean").fillna(False)]
    return {
        "sdm_overall": float(report.get_score()),
        "sdm_column_shapes": float(properties["Column Shapes"]),
        "sdm_pair_trends": float(properties["Column Pair Trends"]),
        "sdm_pairs": {
            f"{a}+{b}": float(score)
            for a, b, score in zip(counted["Column 1"], counted["Column 2"], counted["Score"], strict=True)
        },
    }


def _sdmetrics_frame(frame: pd.DataFrame, kinds: dict[str, str]) -> pd.DataFrame:
    out = {}
    for name, kind in kinds.items():
        if kind in NUMERIC_KINDS:
            out[name] = pd.to_numeric(frame[name], errors="coerce").astype("float64")
        elif kind == "timestamp":
            out[name] = pd.to_datetime(frame[name])
        elif kind == "date_text":
            out[name] = pd.to_datetime(
                frame[name], errors="coerce", utc=True, format="ISO8601"
            ).dt.tz_localize(None)
        else:
            out[name] = frame[name].astype(object)
    return pd.DataFrame(out)


def ml_efficacy(
    train: pd.DataFrame, holdout: pd.DataFrame, kinds: dict[str, str], target: str, classification: bool
) -> float:
    """ROC AUC of the hold-out's last class (sorted) vs the rest for a classification target, else R^2."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import r2_score, roc_auc_score

    train, holdout = train[train[target].notna()], holdout[holdout[target].notna()]
    features = [name for name in kinds if name != target]
    x_train, x_test = _features(train, holdout, features, kinds)
    if classification:
        classes = sorted(holdout[target].astype(str).unique())
        y_train = train[target].astype(str)
        if y_train.nunique() < 2:
            return 0.5
        model = HistGradientBoostingClassifier(random_state=0, categorical_features="from_dtype")
        model.fit(x_train, y_train)
        scores = model.predict_proba(x_test)
        positive = classes[-1]
        if positive not in model.classes_:
            return 0.5
        column = list(model.classes_).index(positive)
        return float(roc_auc_score(holdout[target].astype(str) == positive, scores[:, column]))
    y_train = pd.to_numeric(train[target]).astype("float64")
    model = HistGradientBoostingRegressor(random_state=0, categorical_features="from_dtype")
    model.fit(x_train, y_train)
    return float(r2_score(pd.to_numeric(holdout[target]).astype("float64"), model.predict(x_test)))


def _features(train: pd.DataFrame, test: pd.DataFrame, features: list[str], kinds: dict[str, str]):
    x_train, x_test = {}, {}
    for name in features:
        kind = kinds[name]
        if kind in ORDERED_KINDS:
            x_train[name], x_test[name] = (
                _ordered_values(train[name], kind),
                _ordered_values(test[name], kind),
            )
            continue
        # the 250 most frequent training values are categories (the model's limit is 255); the rest null
        top = list(train[name].dropna().astype(str).value_counts().index[:250])
        dtype = pd.CategoricalDtype(categories=top)
        x_train[name] = train[name].astype(str).where(train[name].notna()).astype(dtype)
        x_test[name] = test[name].astype(str).where(test[name].notna()).astype(dtype)
    return pd.DataFrame(x_train), pd.DataFrame(x_test)
