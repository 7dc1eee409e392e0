"""Scores and verdicts on top of the quality metrics: is this synthetic copy fit for use, and where not?

Scale: every score is 0-100, `100 * (1 - mean TVD)` over the report's bins (TVD: total variation distance,
the share of rows that would have to move to another bin to make the two distributions equal).

- column shapes: over the columns (1-dim TVD);
- pair trends: over the column pairs (2-dim TVD): did the relations between columns survive?
- ML efficacy (when the engine has a `target_column`): see syndiffix_ops.ml_efficacy;
- overall: the mean of the parts present.

Each part comes with reference points computed on the source itself, so "good" has a scale:
- `sample`: a random sample of source rows (with replacement) as large as the synthetic table, scored the
  same way: the best a copy of that size can do, as it differs from the source by sampling noise only
  (and protects nobody);
- `independent` (pair trends): the source's own columns made independent (the product of their shares):
  what pair trends score when every relation between columns is lost.

Flags ("needs attention") come from thresholds (the config's `quality:` block), never from a column's
name: a column whose 1-dim TVD exceeds `column_tvd`, or where a bin holding at least `min_bin_share` of
the source rows, or a tail beyond the source's 1st, 5th, 95th or 99th percentile, changes its share by
more than a factor `bin_share_ratio` either way (a lost tail: 1 % of the source rows below the 1st
percentile, 0.1 % of the synthetic ones); a pair whose 2-dim TVD exceeds
`pair_tvd` or whose correlation moved by more than `correlation_diff`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

# The sample reference is the same on every run of unchanged data.
_SAMPLE_SEED = 20_240_101
_SCORE_DECIMALS = 1


@dataclass(frozen=True)
class QualityThresholds:
    column_tvd: float = 0.05
    pair_tvd: float = 0.15
    correlation_diff: float = 0.3
    bin_share_ratio: float = 2.0
    min_bin_share: float = 0.05
    fail_below_score: float | None = None
    fail_on_attention: bool = False

    @classmethod
    def from_config(cls, quality: Any) -> QualityThresholds:
        return cls(**{name: getattr(quality, name) for name in cls.__dataclass_fields__})

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------------------- references


def tvd(first: np.ndarray, second: np.ndarray) -> float:
    return float(0.5 * np.abs(first - second).sum())


def joint_shares(first: np.ndarray, first_bins: int, second: np.ndarray, second_bins: int) -> np.ndarray:
    # int64 first: the codes may be uint8, whose product would wrap
    counts = np.bincount(first.astype(np.int64) * second_bins + second, minlength=first_bins * second_bins)
    return counts / max(counts.sum(), 1)


def sample_rows(source_rows: int, size: int) -> np.ndarray:
    """Row numbers of the sample reference: `size` source rows drawn with replacement."""
    if source_rows == 0:
        return np.empty(0, dtype=np.int64)
    return np.random.default_rng(_SAMPLE_SEED).integers(0, source_rows, size=size)


def independence_tvd(joint: np.ndarray, first_shares: np.ndarray, second_shares: np.ndarray) -> float:
    """2-dim TVD between a pair's `joint` shares (as joint_shares gives them) and the product of its two
    columns' own shares."""
    return tvd(joint, np.outer(first_shares, second_shares).ravel())


# ------------------------------------------------------------------------------------------------ scores


def _score(tvds: Sequence[float | None]) -> float | None:
    present = [value for value in tvds if value is not None]
    return round(100.0 * (1.0 - float(np.mean(present))), _SCORE_DECIMALS) if present else None


def fidelity_scores(
    metrics: Mapping[str, Any], columns: Sequence[str] | None = None, ml_efficacy: Mapping | None = None
) -> dict[str, Any]:
    """Scores of `metrics` over `columns` (default all compared columns) and the pairs among them, each
    with its reference points; `ml_efficacy` (from syndiffix_ops.ml_efficacy) adds that part."""
    names = list(metrics["columns"]) if columns is None else [c for c in columns if c in metrics["columns"]]
    inside = set(names)
    column_rows = [metrics["columns"][name] for name in names]
    pairs = [pair for pair in metrics["pairs"] if set(pair["columns"]) <= inside]
    parts = {
        "column_shapes": {
            "score": _score([c["tvd"] for c in column_rows]),
            "sample": _score([c.get("sample_tvd") for c in column_rows]),
        },
        "pair_trends": {
            "score": _score([p["tvd"] for p in pairs]),
            "sample": _score([p.get("sample_tvd") for p in pairs]),
            "independent": _score([p.get("independent_tvd") for p in pairs]),
        },
    }
    if ml_efficacy:
        parts["ml_efficacy"] = dict(ml_efficacy)
    present = [part for part in parts.values() if part.get("score") is not None]
    references = [part.get("sample") for part in present]
    overall = round(float(np.mean([part["score"] for part in present])), _SCORE_DECIMALS) if present else None
    sample = (
        round(float(np.mean(references)), _SCORE_DECIMALS)
        if present and all(r is not None for r in references)
        else None
    )
    return {"overall": overall, "sample": sample, "columns": names, **parts}


# ------------------------------------------------------------------------------------------------- flags


def attention(metrics: Mapping[str, Any], thresholds: QualityThresholds) -> dict[str, list[dict[str, Any]]]:
    """The columns and pairs beyond the thresholds, worst first, each with the reason in words."""
    columns = []
    for name, column in metrics["columns"].items():
        reasons = []
        if column["tvd"] is not None and column["tvd"] > thresholds.column_tvd:
            reasons.append(f"TVD {column['tvd']:.3f} > {thresholds.column_tvd:g}")
        reasons += [
            reason
            for reason in (_shifted_bin(column, thresholds), _shifted_tail(column, thresholds))
            if reason
        ]
        if reasons:
            columns.append({"column": name, "tvd": column["tvd"], "reasons": reasons})
    pairs = []
    for pair in metrics["pairs"]:
        reasons = []
        if pair["tvd"] is not None and pair["tvd"] > thresholds.pair_tvd:
            reasons.append(f"2-dim TVD {pair['tvd']:.3f} > {thresholds.pair_tvd:g}")
        diff = pair.get("corr_abs_diff")
        if diff is not None and diff > thresholds.correlation_diff:
            reasons.append(f"correlation moved by {diff:.2f} > {thresholds.correlation_diff:g}")
        if reasons:
            pairs.append({"columns": list(pair["columns"]), "tvd": pair["tvd"], "reasons": reasons})
    columns.sort(key=lambda flag: -(flag["tvd"] or 0.0))
    pairs.sort(key=lambda flag: -(flag["tvd"] or 0.0))
    return {"columns": columns, "pairs": pairs}


def _shifted_bin(column: Mapping[str, Any], thresholds: QualityThresholds) -> str | None:
    """The bin whose share changed most by ratio, among bins of at least min_bin_share of the source."""
    worst, worst_ratio = None, thresholds.bin_share_ratio
    for label, source, synthetic in zip(
        column["bins"], column["original_share"], column["synthetic_share"], strict=True
    ):
        if source is None or synthetic is None or source < thresholds.min_bin_share:
            continue
        ratio = source / synthetic if synthetic > 0 else float("inf")
        ratio = max(ratio, synthetic / source)
        if ratio > worst_ratio:
            worst, worst_ratio = (label, source, synthetic), ratio
    if worst is None:
        return None
    label, source, synthetic = worst
    return f"bin {label}: {100 * source:.1f} % of source rows, {100 * synthetic:.1f} % of synthetic rows"


def _shifted_tail(column: Mapping[str, Any], thresholds: QualityThresholds) -> str | None:
    """The tail (beyond the source's 1st/5th or 95th/99th percentile) whose share changed most by ratio."""
    worst, worst_ratio = None, thresholds.bin_share_ratio
    for tail in column.get("tails", []):
        source, synthetic = tail["original_share"], tail["synthetic_share"]
        if not source:
            continue
        ratio = source / synthetic if synthetic else float("inf")
        ratio = max(ratio, (synthetic or 0.0) / source)
        if ratio > worst_ratio:
            worst, worst_ratio = tail, ratio
    if worst is None:
        return None
    return (
        f"tail {worst['label']}: {100 * worst['original_share']:.1f} % of source rows, "
        f"{100 * worst['synthetic_share']:.1f} % of synthetic rows"
    )


def verdict(
    scores: Mapping[str, Any], flags: Mapping[str, Sequence[Any]], thresholds: QualityThresholds
) -> str | None:
    """Why a table fails the quality gate, or None when it passes (the gate is off by default)."""
    overall = scores.get("overall")
    if (
        thresholds.fail_below_score is not None
        and overall is not None
        and overall < thresholds.fail_below_score
    ):
        return (
            f"fidelity score {overall:.1f} is below quality.fail_below_score {thresholds.fail_below_score:g}"
        )
    if thresholds.fail_on_attention and (flags["columns"] or flags["pairs"]):
        named = [f["column"] for f in flags["columns"]] + ["+".join(f["columns"]) for f in flags["pairs"]]
        return f"needs attention ({', '.join(named[:5])}) and quality.fail_on_attention is true"
    return None
