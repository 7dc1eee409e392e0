"""Report figures of a linked set, per foreign key: validity, children per parent (source vs synthetic),
parent column x child aggregate correlations, and a KHLL check that no real key value survives.

Every figure is coarse: shares rounded to 0.01, correlations to 0.01, children-per-parent as shares of
parents in doubling bins (0, 1, 2-3, 4-7, ...); no exact source count or value leaves this module.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from syndiffix_core.linking.extension import key_index
from syndiffix_core.risk import KHyperLogLog, hash_column, hash_row_numbers
from syndiffix_ops.run_plan import LinkedSet, PlannedForeignKey

STRONGEST_PAIRS = 3
# A correlation over n parents has a standard error of about 1/sqrt(n - 3): over fewer than 20 parents
# it is more than 0.24, so its source and synthetic values say nothing about each other (three origin
# airports: a correlation of three points is near +-1 whatever the data).
MIN_CORRELATION_PARENTS = 20
TOO_FEW_PARENTS = f"not measurable: fewer than {MIN_CORRELATION_PARENTS} parents have children in the source"
KEY_SKETCH_K = 4096


def link_metrics(
    linked_set: LinkedSet,
    sources: Mapping[str, pd.DataFrame],
    synthetic: Mapping[str, pd.DataFrame],
    aids: Mapping[str, Sequence[str]],
) -> dict[str, dict[str, Any]]:
    """Per table: its foreign keys' figures (as the child) and its key columns' survival check."""
    metrics: dict[str, dict[str, Any]] = {}
    for name in linked_set.tables:
        keys = linked_set.keys[name]
        foreign = {}
        for fk in keys.foreign_keys:
            foreign[fk.label] = foreign_key_figures(
                fk,
                sources[name],
                sources[fk.parent],
                synthetic[name],
                synthetic[fk.parent],
                skip={
                    *aids.get(fk.parent, ()),
                    *_keys(linked_set, fk.parent),
                    *aids.get(name, ()),
                    *_keys(linked_set, name),
                },
            )
        key_columns = sorted(_keys(linked_set, name))
        metrics[name] = {
            "foreign_keys": foreign,
            "key_values_in_source": {
                c: round(key_survival(sources[name][c], synthetic[name][c]), 3) for c in key_columns
            },
        }
    return metrics


def _keys(linked_set: LinkedSet, table: str) -> set[str]:
    return linked_set.identifier_columns(table)  # data columns of composite keys keep real values


def foreign_key_figures(
    fk: PlannedForeignKey,
    child: pd.DataFrame,
    parent: pd.DataFrame,
    synthetic_child: pd.DataFrame,
    synthetic_parent: pd.DataFrame,
    *,
    skip: set[str],
) -> dict[str, Any]:
    source_counts = children_per_parent(child, parent, fk)
    synthetic_counts = children_per_parent(synthetic_child, synthetic_parent, fk)
    source_bins, synthetic_bins = count_bins(source_counts), count_bins(synthetic_counts)
    present = synthetic_child[list(fk.columns)].notna().all(axis=1)
    valid = _positions(synthetic_child[present], synthetic_parent, fk) >= 0
    return {
        "valid_share": round(float(valid.mean()) if len(valid) else 1.0, 4),
        "null_share": {"source": _share(_null(child, fk)), "synthetic": _share(_null(synthetic_child, fk))},
        "children_per_parent": {
            "bins": list(source_bins.index),
            "source": _rounded(source_bins),
            "synthetic": _rounded(synthetic_bins),
        },
        "children_per_parent_tvd": round(tvd(source_bins, synthetic_bins), 3),
        **correlation_figures(
            fk, child, parent, synthetic_child, synthetic_parent, skip=skip, source_counts=source_counts
        ),
    }


def correlation_figures(
    fk: PlannedForeignKey,
    child: pd.DataFrame,
    parent: pd.DataFrame,
    synthetic_child: pd.DataFrame,
    synthetic_parent: pd.DataFrame,
    *,
    skip: set[str],
    source_counts: np.ndarray,
) -> dict[str, Any]:
    """`correlations`: the strongest pairs (strongest_correlations), none when too few parents of the
    source have children to measure a correlation; `correlations_note` then says why. `source_counts`:
    the source's children_per_parent."""
    if (source_counts > 0).sum() < MIN_CORRELATION_PARENTS:
        return {"correlations": [], "correlations_note": TOO_FEW_PARENTS}
    pairs = strongest_correlations(fk, child, parent, synthetic_child, synthetic_parent, skip=skip)
    return {"correlations": pairs, "correlations_note": None}


def _rounded(bins: pd.Series) -> list[float]:
    return [round(float(v), 2) for v in bins.to_numpy()]


def _share(mask: pd.Series) -> float:
    return round(float(mask.mean()), 2) if len(mask) else 0.0


def _null(frame: pd.DataFrame, fk: PlannedForeignKey) -> pd.Series:
    return frame[list(fk.columns)].isna().any(axis=1)


def _positions(child: pd.DataFrame, parent: pd.DataFrame, fk: PlannedForeignKey) -> np.ndarray:
    return key_index(parent, fk.parent_columns).get_indexer(key_index(child, fk.columns))


def children_per_parent(child: pd.DataFrame, parent: pd.DataFrame, fk: PlannedForeignKey) -> np.ndarray:
    """Children of each parent row (0 for none), orphans and nulls left out."""
    positions = _positions(child, parent, fk)
    return np.bincount(positions[positions >= 0], minlength=len(parent))


def count_bins(counts: np.ndarray) -> pd.Series:
    """Share of parents per doubling bin of their child count: 0, 1, 2-3, 4-7, ..., the last open."""
    edges = [0, 1, 2, 4, 8, 16, 32, 64, 128]
    labels = ["0", "1", "2-3", "4-7", "8-15", "16-31", "32-63", "64-127", "128+"]
    codes = np.searchsorted(edges, counts, side="right") - 1
    shares = np.bincount(codes, minlength=len(labels)) / max(len(counts), 1)
    return pd.Series(shares, index=labels)


def tvd(left: pd.Series, right: pd.Series) -> float:
    return 0.5 * float(np.abs(left.to_numpy() - right.to_numpy()).sum())


def parent_aggregates(
    child: pd.DataFrame, parent: pd.DataFrame, fk: PlannedForeignKey, skip: set[str]
) -> pd.DataFrame:
    """Per parent row: its child count and the mean of each numeric child column."""
    positions = _positions(child, parent, fk)
    linked = positions >= 0
    frame = {"children": np.bincount(positions[linked], minlength=len(parent)).astype(float)}
    for column in child.columns:
        if column in fk.columns or column in skip or not _numeric(child[column]):
            continue
        values = pd.to_numeric(child[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        present = linked & ~np.isnan(values)
        sums = np.bincount(positions[present], weights=values[present], minlength=len(parent))
        counts = np.bincount(positions[present], minlength=len(parent))
        frame[f"mean {column}"] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return pd.DataFrame(frame)


def _numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype)


def strongest_correlations(
    fk: PlannedForeignKey,
    child: pd.DataFrame,
    parent: pd.DataFrame,
    synthetic_child: pd.DataFrame,
    synthetic_parent: pd.DataFrame,
    *,
    skip: set[str],
    pairs: int = STRONGEST_PAIRS,
) -> list[dict[str, Any]]:
    """The `pairs` parent column x child aggregate pairs with the strongest source correlation, with the
    synthetic correlation of the same pair."""
    source = parent_aggregates(child, parent, fk, skip | set(fk.parent_columns))
    synthetic = parent_aggregates(synthetic_child, synthetic_parent, fk, skip | set(fk.parent_columns))
    found = []
    for column in parent.columns:
        if column in skip or column in fk.parent_columns or not _numeric(parent[column]):
            continue
        for aggregate in source.columns:
            if aggregate not in synthetic:
                continue
            real = _correlation(parent[column], source[aggregate])
            fake = _correlation(synthetic_parent[column], synthetic[aggregate])
            if real is not None:
                found.append((abs(real), column, aggregate, real, fake))
    found.sort(key=lambda item: -item[0])
    return [
        {
            "parent_column": c,
            "child_aggregate": a,
            "source": round(r, 2),
            "synthetic": None if f is None else round(f, 2),
        }
        for _, c, a, r, f in found[:pairs]
    ]


def _correlation(left: pd.Series, right: pd.Series) -> float | None:
    x = pd.to_numeric(pd.Series(left.to_numpy()), errors="coerce").astype(float)
    y = pd.Series(right.to_numpy(), dtype=float)
    both = x.notna() & y.notna()
    if both.sum() < 3 or x[both].std() == 0 or y[both].std() == 0:
        return None
    return float(np.corrcoef(x[both], y[both])[0, 1])


def key_survival(source: pd.Series, synthetic: pd.Series) -> float:
    """Estimated share of the distinct synthetic key values that are also real key values (KHLL
    containment over coordinated samples of the two value sets)."""
    sketches = []
    for values in (synthetic, source):
        present = values.dropna()
        sketch = KHyperLogLog(k=KEY_SKETCH_K)
        sketch.update(hash_column(present.to_numpy()), hash_row_numbers(len(present)))
        sketches.append(sketch)
    if len(synthetic.dropna()) == 0:
        return 0.0
    return float(sketches[0].overlap(sketches[1]).containment_of_first)


def links_section(table: str, figures: Mapping[str, Any]):
    """The HTML report section of one table of a linked set."""
    from syndiffix_ops.report import ReportSection

    rows = []
    for label, fk in figures.get("foreign_keys", {}).items():
        pairs = fk.get("correlations_note") or "; ".join(
            f"{p['parent_column']} x {p['child_aggregate']}: {p['source']} / {p['synthetic']}"
            for p in fk["correlations"]
        )
        rows.append(
            f"<tr><td>{html.escape(label)}</td><td>{fk['valid_share']:.4f}</td>"
            f"<td>{fk['null_share']['source']:.2f} / {fk['null_share']['synthetic']:.2f}</td>"
            f"<td>{fk['children_per_parent_tvd']:.3f}</td><td>{html.escape(pairs)}</td></tr>"
        )
    survival = ", ".join(
        f"{html.escape(c)}: {s:.3f}" for c, s in figures.get("key_values_in_source", {}).items()
    )
    body = (
        "<p>Foreign keys of this table (source / synthetic). Children per parent: total variation distance "
        "between the shares of parents with 0, 1, 2-3, 4-7, ... children.</p>"
        "<table><tr><th>foreign key</th><th>valid</th><th>null share</th><th>children per parent TVD</th>"
        f"<th>strongest parent column x child aggregate correlations</th></tr>{''.join(rows)}</table>"
        f"<p>Synthetic key values found among the real ones (KHLL estimate; fresh keys: about 0): {survival or 'no keys'}</p>"
    )
    return ReportSection(f"Links of {table}", body)
