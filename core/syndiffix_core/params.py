"""Parameters of the SynDiffix engine, with the defaults of syndiffix 1.0.8.

Every class is a frozen dataclass that validates itself on construction, so a bad value fails where it
is written (config loading, CLI parsing) and not deep inside a forest build.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


@dataclass(frozen=True)
class SuppressionParams:
    """Noisy low-count threshold: a count c is low if c < low_threshold or c < noisy mean + N(0, layer_sd).

    The noisy mean is low_threshold + low_mean_gap * layer_sd (5 with the defaults).
    """

    low_threshold: int = 3
    layer_sd: float = 1.0
    low_mean_gap: float = 2.0

    def __post_init__(self) -> None:
        _check(self.low_threshold >= 1, f"low_threshold must be >= 1, got {self.low_threshold}")
        _check(self.layer_sd >= 0, f"layer_sd must be >= 0, got {self.layer_sd}")
        _check(self.low_mean_gap >= 0, f"low_mean_gap must be >= 0, got {self.low_mean_gap}")


@dataclass(frozen=True)
class FlatteningInterval:
    """Inclusive interval [lower, upper] from which a noisy entity count (outliers or top) is drawn."""

    lower: int = 2
    upper: int = 5

    def __post_init__(self) -> None:
        _check(self.lower >= 1, f"flattening interval lower bound must be >= 1, got {self.lower}")
        _check(
            self.upper >= self.lower,
            f"flattening interval upper bound {self.upper} is below its lower bound {self.lower}",
        )


@dataclass(frozen=True)
class AnonymizationParams:
    """Count anonymization: LCF threshold, flattening of heavy entities, count noise.

    `salt` is deliberately not a field: it is a secret that `synthesize` takes as its own argument so
    that parameter objects can be logged and written to lineage safely.
    """

    low_count_params: SuppressionParams = field(default_factory=SuppressionParams)
    outlier_count: FlatteningInterval = field(default_factory=FlatteningInterval)
    top_count: FlatteningInterval = field(default_factory=FlatteningInterval)
    layer_noise_sd: float = 1.0

    def __post_init__(self) -> None:
        _check(self.layer_noise_sd >= 0, f"layer_noise_sd must be >= 0, got {self.layer_noise_sd}")


@dataclass(frozen=True)
class BucketizationParams:
    """Tree shape: singularity/range thresholds (used for stubs) and the 1-dim precision limits."""

    singularity_low_threshold: int = 5
    range_low_threshold: int = 15
    precision_limit_row_fraction: int = 10_000
    precision_limit_depth_threshold: int = 15

    def __post_init__(self) -> None:
        _check(
            self.singularity_low_threshold >= 1,
            f"singularity_low_threshold must be >= 1, got {self.singularity_low_threshold}",
        )
        _check(
            self.range_low_threshold >= 1, f"range_low_threshold must be >= 1, got {self.range_low_threshold}"
        )
        _check(
            self.precision_limit_row_fraction >= 1,
            f"precision_limit_row_fraction must be >= 1, got {self.precision_limit_row_fraction}",
        )
        _check(
            self.precision_limit_depth_threshold >= 0,
            f"precision_limit_depth_threshold must be >= 0, got {self.precision_limit_depth_threshold}",
        )


@dataclass(frozen=True)
class ClusteringParams:
    """How wide tables are split into clusters of columns that are synthesized together."""

    enabled: bool = True
    sample_size: int = 1000
    max_weight: float = 15.0
    merge_threshold: float = 0.1
    # Cooling constant of the annealing solver (T <- T / (1 + alpha T), from 5 to 0.0035): 1.0.8 uses
    # 0.01 (28 552 steps); 0.2 (1 428 steps) reaches clusterings within ~3 % of the same unsatisfied
    # dependence on 10- and 20-column tables in 1/20 of the time (docs/clustering.md).
    solver_alpha: float = 0.2
    main_column: str | None = None
    main_features: tuple[str, ...] | None = None
    # ML-target mode: columns that are not features of the target are stitched on the target (False,
    # as syndiffix 1.0.8) or patched, i.e. zipped on at random (True, as the published algorithm).
    patch_non_features: bool = False
    # Pairs of columns the solver treats as fully dependent, so that it puts each pair in one cluster
    # (or one among the other's stitch columns) where the weight limit allows; default clustering only
    # (a linked set's parent: each child statistic with the columns the children are matched on).
    keep_together: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "keep_together", tuple(tuple(pair) for pair in self.keep_together))
        _check(
            all(len(pair) == 2 for pair in self.keep_together),
            f"keep_together must hold pairs of column names, got {self.keep_together}",
        )
        _check(self.sample_size >= 1, f"sample_size must be >= 1, got {self.sample_size}")
        _check(self.max_weight > 0, f"max_weight must be > 0, got {self.max_weight}")
        _check(
            0.0 <= self.merge_threshold <= 1.0,
            f"merge_threshold must be in [0, 1], got {self.merge_threshold}",
        )
        _check(0.0 < self.solver_alpha < 1.0, f"solver_alpha must be in (0, 1), got {self.solver_alpha}")
        if self.main_features is not None and not isinstance(self.main_features, tuple):
            object.__setattr__(self, "main_features", tuple(self.main_features))
