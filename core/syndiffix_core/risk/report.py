"""Pure functions from KHLL sketches to the data structures of a privacy-risk report.

Everything here is a share or an estimate over the sketches' uniform value samples; no raw value and no
exact count of a rare value ever appears, so the structures can go into lineage and HTML reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from syndiffix_core.risk.khll import KHyperLogLog

__all__ = [
    "DEFAULT_THRESHOLDS",
    "HISTOGRAM_EDGES",
    "HistogramBin",
    "Joinability",
    "Reproduction",
    "UniquenessSummary",
    "joinability",
    "reproduction",
    "summarize",
]

DEFAULT_THRESHOLDS = (1, 2, 5, 10)
# Lower edges of the uniqueness-histogram bins (ids per value): fine where privacy thresholds live,
# coarse beyond.
HISTOGRAM_EDGES = (1, 2, 3, 4, 5, 6, 11, 21, 51, 101, 1001)


@dataclass(frozen=True)
class HistogramBin:
    low: int  # ids per value, inclusive
    high: int | None  # inclusive; None = unbounded
    share_of_values: float

    @property
    def label(self) -> str:
        if self.high is None:
            return f">={self.low}"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


@dataclass(frozen=True)
class UniquenessSummary:
    """How identifying one column or column combination is, per id (protected entity)."""

    columns: tuple[str, ...]
    distinct_values: float
    distinct_values_exact: bool  # True when fewer than K values were seen: every figure is then exact
    distinct_ids: float
    sampled_values: int
    reidentification_potential: dict[int, float]  # t -> share of distinct values with <= t ids
    id_share: dict[int, float]  # t -> share of (value, id) associations in values with <= t ids
    histogram: tuple[HistogramBin, ...]
    level: str  # "identifying" | "elevated" | "low", see ``risk_level``

    def to_dict(self) -> dict:
        data = asdict(self)
        data["columns"] = list(self.columns)
        data["reidentification_potential"] = {str(t): v for t, v in self.reidentification_potential.items()}
        data["id_share"] = {str(t): v for t, v in self.id_share.items()}
        data["histogram"] = [{"ids": b.label, "share_of_values": b.share_of_values} for b in self.histogram]
        return data


def risk_level(
    id_share: dict[int, float], *, identifying_share: float = 0.5, elevated_share: float = 0.05
) -> str:
    """ "identifying" when at least ``identifying_share`` of the ids sit alone in their class (the column
    singles out most people: drop or pseudonymize it rather than copy it); "elevated" when at least
    ``elevated_share`` of the ids sit in classes of at most 5 (k-anonymity's usual k); else "low"."""
    if id_share.get(1, 0.0) >= identifying_share:
        return "identifying"
    if id_share.get(5, id_share.get(max(id_share), 0.0)) >= elevated_share:
        return "elevated"
    return "low"


def uniqueness_histogram(
    sketch: KHyperLogLog, edges: Sequence[int] = HISTOGRAM_EDGES
) -> tuple[HistogramBin, ...]:
    """Share of distinct values per bin of ids-per-value (value-weighted, from the sample)."""
    counts = sketch.id_counts()
    bins = np.searchsorted(np.asarray(edges), counts, side="right") - 1
    shares = np.bincount(bins[bins >= 0], minlength=len(edges)) / max(len(counts), 1)
    highs = [edge - 1 for edge in edges[1:]] + [None]
    return tuple(
        HistogramBin(int(low), high, float(share))
        for low, high, share in zip(edges, highs, shares, strict=True)
    )


def summarize(
    sketch: KHyperLogLog,
    columns: Sequence[str],
    *,
    thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
    identifying_share: float = 0.5,
    elevated_share: float = 0.05,
) -> UniquenessSummary:
    thresholds = sorted({int(t) for t in (*thresholds, 1, 5)})
    id_share = {t: sketch.id_share(t) for t in thresholds}
    return UniquenessSummary(
        columns=tuple(columns),
        distinct_values=sketch.distinct_values(),
        distinct_values_exact=sketch.is_exact,
        distinct_ids=sketch.distinct_ids(),
        sampled_values=sketch.sample_size,
        reidentification_potential={t: sketch.reidentification_potential(t) for t in thresholds},
        id_share=id_share,
        histogram=uniqueness_histogram(sketch),
        level=risk_level(id_share, identifying_share=identifying_share, elevated_share=elevated_share),
    )


@dataclass(frozen=True)
class Joinability:
    """Whether two columns (of the same or different tables) share values: a linkage route."""

    left: str
    right: str
    containment_left_in_right: float
    containment_right_in_left: float
    jaccard: float
    estimated_common_values: float
    sample_size: int
    linkable: bool

    def to_dict(self) -> dict:
        return asdict(self)


def joinability(
    left_name: str,
    left: KHyperLogLog,
    right_name: str,
    right: KHyperLogLog,
    *,
    linkable_containment: float = 0.5,
    min_common_values: float = 10,
) -> Joinability:
    """``linkable`` when either side has at least ``linkable_containment`` of its distinct values in the
    other and they share at least ``min_common_values`` values (two booleans always "overlap")."""
    overlap = left.overlap(right)
    containment = max(overlap.containment_of_first, overlap.containment_of_second)
    return Joinability(
        left=left_name,
        right=right_name,
        containment_left_in_right=overlap.containment_of_first,
        containment_right_in_left=overlap.containment_of_second,
        jaccard=overlap.jaccard,
        estimated_common_values=overlap.intersection,
        sample_size=overlap.sample_size,
        linkable=containment >= linkable_containment and overlap.intersection >= min_common_values,
    )


@dataclass(frozen=True)
class Reproduction:
    """Synthetic rows that reproduce a value (combination) that is rare in the source.

    Counted over the synthetic rows whose value hash falls in the source sample's hash range, a uniform
    sample of the synthetic rows. Add the counts of successive chunks with ``+``.
    """

    rows_sampled: int = 0
    rows_in_source: int = 0  # sampled rows whose value occurs in the source at all
    rows_unique_in_source: int = 0  # ... with exactly one id there
    rows_rare_in_source: dict[int, int] = field(default_factory=dict)  # t -> ... with at most t ids

    def __add__(self, other: Reproduction) -> Reproduction:
        keys = set(self.rows_rare_in_source) | set(other.rows_rare_in_source)
        return Reproduction(
            self.rows_sampled + other.rows_sampled,
            self.rows_in_source + other.rows_in_source,
            self.rows_unique_in_source + other.rows_unique_in_source,
            {
                t: self.rows_rare_in_source.get(t, 0) + other.rows_rare_in_source.get(t, 0)
                for t in sorted(keys)
            },
        )

    def share(self, count: int) -> float | None:
        return count / self.rows_sampled if self.rows_sampled else None

    def to_dict(self) -> dict:
        return {
            "rows_sampled": self.rows_sampled,
            "share_in_source": self.share(self.rows_in_source),
            "share_unique_in_source": self.share(self.rows_unique_in_source),
            "share_rare_in_source": {str(t): self.share(c) for t, c in self.rows_rare_in_source.items()},
        }


def reproduction(
    source: KHyperLogLog, synthetic_value_hashes: np.ndarray, thresholds: Sequence[int] = DEFAULT_THRESHOLDS
) -> Reproduction:
    """Reproduction counts of one chunk of synthetic rows against the source's sketch."""
    covered, source_ids = source.sampled_id_counts_of(synthetic_value_hashes)
    in_sample = source_ids[covered]
    present = in_sample > 0
    return Reproduction(
        rows_sampled=int(covered.sum()),
        rows_in_source=int(present.sum()),
        rows_unique_in_source=int(np.count_nonzero(in_sample == 1)),
        rows_rare_in_source={int(t): int(np.count_nonzero(present & (in_sample <= t))) for t in thresholds},
    )
