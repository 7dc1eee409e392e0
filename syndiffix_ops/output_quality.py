"""The quality of one synthetic output: its metrics, the config's quality gate and the HTML report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from syndiffix_ops.report import SourceQuality


def quality_metrics(
    original: pd.DataFrame,
    synthetic: pd.DataFrame,
    quality: Any = None,
    *,
    target_column: str | None = None,
) -> dict[str, Any]:
    """The report's metrics, scores and flags; `quality` is the config's `quality:` block (default: its
    defaults) and `target_column` an ML target whose prediction is scored too."""
    # Imported here: the report pulls in matplotlib, which a config validation or a DAG parse never needs.
    from syndiffix_ops.report import compute_quality
    from syndiffix_ops.verdict import QualityThresholds

    thresholds = QualityThresholds.from_config(quality) if quality is not None else None
    return compute_quality(original, synthetic, thresholds=thresholds, target_column=target_column)


def quality_of_source(original: pd.DataFrame) -> SourceQuality:
    """The source half of the metrics (bins, codes, correlations), computed before synthesis so that the
    source frame can be freed while the engine runs; quality_against_source completes them."""
    from syndiffix_ops.report import source_quality

    return source_quality(original)


def quality_against_source(
    source: SourceQuality,
    synthetic: pd.DataFrame,
    quality: Any = None,
    *,
    target_column: str | None = None,
    original: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """quality_metrics from the source half; ML efficacy (a `target_column`) needs the `original` rows."""
    from syndiffix_ops.report import compare_with_source
    from syndiffix_ops.verdict import QualityThresholds

    thresholds = QualityThresholds.from_config(quality) if quality is not None else None
    return compare_with_source(
        source, synthetic, thresholds=thresholds, target_column=target_column, original=original
    )


def quality_gate(metrics: dict[str, Any] | None, quality: Any) -> str | None:
    """Why the output fails the config's quality gate, or None (the gate is off by default)."""
    from syndiffix_ops.verdict import QualityThresholds, verdict

    if metrics is None:
        return None
    return verdict(metrics["scores"], metrics["attention"], QualityThresholds.from_config(quality))


def html_report(
    directory: Path,
    table_name: str,
    original: pd.DataFrame | None,
    synthetic: pd.DataFrame,
    metrics: dict | None,
    sections: Sequence[Any] = (),
    *,
    run_id: str,
    source_table: str | None = None,
    risk: dict[str, Any] | None = None,
) -> Path:
    from syndiffix_ops.report import write_html_report

    directory.mkdir(parents=True, exist_ok=True)
    return write_html_report(
        directory,
        table_name=table_name,
        original=original,
        synthetic=synthetic,
        metrics=metrics,
        sections=sections,
        run_id=run_id,
        source_table=source_table,
        risk=risk,
    )
