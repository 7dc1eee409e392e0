"""Parameters of the DP-marginals engine (defaults as in the synthetic data showcase / pac-synth 0.0.8)."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from syndiffix_core.errors import SyndiffixError


class DpError(SyndiffixError, ValueError):
    """Bad parameters or input for the DP-marginals engine; the message names the field or column at fault."""


class AccuracyMode(enum.StrEnum):
    """How the marginal budget is spread over combination lengths (the sigma proportions p_k)."""

    PRIORITIZE_LONG_COMBINATIONS = "prioritize_long_combinations"  # p_k = 1/k
    PRIORITIZE_SHORT_COMBINATIONS = "prioritize_short_combinations"  # p_k = 1/(R-k+1)
    BALANCED = "balanced"  # p_k = 1


class FabricationMode(enum.StrEnum):
    """How thresholds for lengths k >= 2 are chosen (length 1 is fixed by the DP proof)."""

    UNCONTROLLED = "uncontrolled"  # adaptive, eta_k = 1: threshold 0, maximum fabrication
    PROGRESSIVE = "progressive"  # adaptive, eta_k = 0.1 + 0.9 (k-2)/(R-2)
    BALANCED = "balanced"  # adaptive, eta_2 = 0.55, the rest 1
    MINIMIZE = "minimize"  # adaptive, eta_k = 0.01


class BinKind(enum.StrEnum):
    EXACT = "exact"  # every distinct value is its own attribute
    SIGNIFICANT_DIGITS = (
        "significant_digits"  # fixed decimal grid: value rounded down to s significant digits
    )
    UNIFORM = "uniform"  # `bins` equal-width bins between declared public bounds (values outside are clamped)
    CALENDAR = "calendar"  # timestamps: calendar unit (year, month, day, hour, minute)


CALENDAR_UNITS = ("year", "month", "day", "hour", "minute")


@dataclass(frozen=True)
class ColumnBinning:
    """How one numeric or timestamp column becomes categorical attributes.

    Every choice is a fixed, data-independent map from a value to a bin, so no privacy is spent on bin
    edges: which bins are occupied is protected by the same length-1 threshold that protects which
    categorical values occur.
    """

    kind: BinKind = BinKind.SIGNIFICANT_DIGITS
    significant_digits: int = 1
    lower: float | None = None
    upper: float | None = None
    bins: int | None = None
    calendar_unit: str = "month"

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", BinKind(self.kind))
        if self.kind is BinKind.SIGNIFICANT_DIGITS and not 1 <= self.significant_digits <= 15:
            raise DpError(f"significant_digits must be in 1..15, got {self.significant_digits}")
        if self.kind is BinKind.UNIFORM:
            if self.lower is None or self.upper is None or self.bins is None:
                raise DpError("uniform binning needs lower, upper and bins")
            if not (math.isfinite(self.lower) and math.isfinite(self.upper) and self.lower < self.upper):
                raise DpError(f"uniform binning needs finite lower < upper, got {self.lower}, {self.upper}")
            if self.bins < 1:
                raise DpError(f"uniform binning needs bins >= 1, got {self.bins}")
        if self.kind is BinKind.CALENDAR and self.calendar_unit not in CALENDAR_UNITS:
            raise DpError(f"calendar_unit must be one of {CALENDAR_UNITS}, got {self.calendar_unit!r}")


@dataclass(frozen=True)
class DpParams:
    """All knobs of DP aggregation and aggregate-seeded synthesis.

    `delta=None` derives delta = 1/(n ln n) from the DP-protected record count n (never the true count:
    delta is published in lineage, so a delta computed from the true count would publish the count itself;
    computed from the Laplace-protected count it is post-processing of an epsilon_N-DP release).
    """

    epsilon: float = 4.0
    delta: float | None = None
    reporting_length: int = 3
    percentile_percentage: float = 99.0
    percentile_epsilon_proportion: float = 0.01
    number_of_records_epsilon_proportion: float = 0.005
    accuracy_mode: AccuracyMode | str = AccuracyMode.PRIORITIZE_LONG_COMBINATIONS
    sigma_proportions: Sequence[float] | None = None  # overrides accuracy_mode; one per length 1..R
    fabrication_mode: FabricationMode | str = FabricationMode.UNCONTROLLED
    fixed_thresholds: Mapping[int, float] | None = None  # {k: threshold} for k >= 2, overrides the mode
    adaptive_thresholds: Mapping[int, float] | None = None  # {k: eta in (0, 1]} for k >= 2
    weight_selection_percentile: float = 95.0
    weight_selection_lengths: str = "longest"  # "longest": length-R sub-combinations; "all": the showcase's
    use_synthetic_counts: bool = False
    number_of_records: int | None = None  # synthetic rows; None: the DP record count
    keep_partial_records: bool = False  # False: redraw records that got stuck instead of writing nulls
    max_rows_per_entity: int = 100  # public bound used by the DP percentile when an entity has several rows
    default_real_binning: ColumnBinning = field(default_factory=ColumnBinning)
    default_integer_binning: ColumnBinning = field(default_factory=ColumnBinning)
    default_timestamp_binning: ColumnBinning = field(
        default_factory=lambda: ColumnBinning(kind=BinKind.CALENDAR, calendar_unit="month")
    )
    column_binning: Mapping[str, ColumnBinning] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "accuracy_mode", AccuracyMode(self.accuracy_mode))
        object.__setattr__(self, "fabrication_mode", FabricationMode(self.fabrication_mode))
        if not (math.isfinite(self.epsilon) and self.epsilon > 0):
            raise DpError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if self.delta is not None and not 0 < self.delta < 1:
            raise DpError(f"delta must be in (0, 1), got {self.delta}")
        if self.reporting_length < 1:
            raise DpError(f"reporting_length must be >= 1, got {self.reporting_length}")
        if not 0 < self.percentile_percentage <= 100:
            raise DpError(f"percentile_percentage must be in (0, 100], got {self.percentile_percentage}")
        for name in ("percentile_epsilon_proportion", "number_of_records_epsilon_proportion"):
            value = getattr(self, name)
            if not 0 < value < 1:
                raise DpError(f"{name} must be in (0, 1), got {value}")
        if self.percentile_epsilon_proportion + self.number_of_records_epsilon_proportion >= 1:
            raise DpError("percentile_epsilon_proportion + number_of_records_epsilon_proportion must be < 1")
        if self.sigma_proportions is not None:
            if len(self.sigma_proportions) != self.reporting_length:
                raise DpError(
                    f"sigma_proportions needs one value per length 1..{self.reporting_length}, "
                    f"got {len(self.sigma_proportions)}"
                )
            if any(not (math.isfinite(p) and p > 0) for p in self.sigma_proportions):
                raise DpError(f"sigma_proportions must all be > 0, got {list(self.sigma_proportions)}")
        if self.fixed_thresholds is not None and self.adaptive_thresholds is not None:
            raise DpError("give fixed_thresholds or adaptive_thresholds, not both")
        for name, bad in (
            ("fixed_thresholds", lambda v: not (math.isfinite(v) and v >= 0)),
            ("adaptive_thresholds", lambda v: not 0 < v <= 1),
        ):
            thresholds = getattr(self, name)
            for k, value in (thresholds or {}).items():
                if not 2 <= int(k) <= self.reporting_length:
                    raise DpError(f"{name} keys are lengths 2..{self.reporting_length}, got {k}")
                if bad(value):
                    raise DpError(f"{name}[{k}] = {value} is out of range")
        if not 0 <= self.weight_selection_percentile <= 100:
            raise DpError(
                f"weight_selection_percentile must be in [0, 100], got {self.weight_selection_percentile}"
            )
        if self.weight_selection_lengths not in ("longest", "all"):
            raise DpError(
                f"weight_selection_lengths must be 'longest' or 'all', got {self.weight_selection_lengths!r}"
            )
        if self.number_of_records is not None and self.number_of_records < 0:
            raise DpError(f"number_of_records must be >= 0, got {self.number_of_records}")
        if self.max_rows_per_entity < 1:
            raise DpError(f"max_rows_per_entity must be >= 1, got {self.max_rows_per_entity}")

    def resolved_sigma_proportions(self) -> list[float]:
        r = self.reporting_length
        if self.sigma_proportions is not None:
            return [float(p) for p in self.sigma_proportions]
        if self.accuracy_mode is AccuracyMode.PRIORITIZE_LONG_COMBINATIONS:
            return [1.0 / k for k in range(1, r + 1)]
        if self.accuracy_mode is AccuracyMode.PRIORITIZE_SHORT_COMBINATIONS:
            return [1.0 / (r - k + 1) for k in range(1, r + 1)]
        return [1.0] * r

    def resolved_thresholds(self) -> tuple[str, dict[int, float]]:
        """("fixed", {k: count}) or ("adaptive", {k: eta}) for lengths 2..R."""
        r = self.reporting_length
        if self.fixed_thresholds is not None:
            given = {int(k): float(v) for k, v in self.fixed_thresholds.items()}
            return "fixed", {k: given.get(k, 0.0) for k in range(2, r + 1)}
        if self.adaptive_thresholds is not None:
            given = {int(k): float(v) for k, v in self.adaptive_thresholds.items()}
            return "adaptive", {k: given.get(k, 1.0) for k in range(2, r + 1)}
        mode = self.fabrication_mode
        if mode is FabricationMode.UNCONTROLLED:
            etas = {k: 1.0 for k in range(2, r + 1)}
        elif mode is FabricationMode.PROGRESSIVE:
            etas = {k: min(1.0, 0.1 + 0.9 * (k - 2) / (r - 2)) if r > 2 else 0.1 for k in range(2, r + 1)}
        elif mode is FabricationMode.BALANCED:
            etas = {k: (0.55 if k == 2 else 1.0) for k in range(2, r + 1)}
        else:
            etas = {k: 0.01 for k in range(2, r + 1)}
        return "adaptive", etas

    def binning_for(self, column: str, kind: str) -> ColumnBinning:
        if column in self.column_binning:
            return self.column_binning[column]
        if kind == "real":
            return self.default_real_binning
        if kind == "integer":
            return self.default_integer_binning
        if kind == "timestamp":
            return self.default_timestamp_binning
        return ColumnBinning(kind=BinKind.EXACT)
