"""Synthesis engines as the pipeline sees them: a name, a params model, and `run`.

Config validation imports this module to check `engine_params`, so an engine's `run` must import its
heavy machinery lazily: validating a config never loads an engine.

To add an engine, build an object with `name`, `params_model` and `run` (see `Engine`) and call
`register_engine` for it at the bottom of this module, next to the built-in ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class EngineResult:
    """The synthetic frame and what the engine wants recorded in lineage (never the salt)."""

    frame: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)


EngineProgress = Callable[[str, float], None]


class Engine(Protocol):
    name: str
    params_model: type[BaseModel]

    def run(
        self,
        df: pd.DataFrame,
        *,
        aid_columns: Sequence[str],
        salt: bytes,
        params: BaseModel,
        table_identity: str,
        progress: EngineProgress | None = None,
    ) -> EngineResult:
        """Synthesize `df`; the result holds every column of df except the AID columns, in order.

        `progress(stage, fraction)`, when given, is called as the engine advances (fraction 0..1 of its
        own work, stage a short label such as "cluster 2/4 stitched"); an engine may also never call it."""
        ...


ENGINES: dict[str, Engine] = {}


def register_engine(engine: Engine) -> Engine:
    if engine.name in ENGINES and ENGINES[engine.name] is not engine:
        raise ValueError(f"an engine named {engine.name!r} is already registered")
    ENGINES[engine.name] = engine
    return engine


def get_engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise KeyError(f"unknown engine {name!r}; registered engines: {sorted(ENGINES)}") from None


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AnonymizationSettings(_Params):
    """Overrides of syndiffix_core.params.AnonymizationParams; unset fields keep the engine's defaults.

    low_threshold, layer_sd and low_mean_gap are the low-count filter (the engine's low_count_params);
    outlier_count and top_count are [lower, upper] flattening intervals.
    """

    low_threshold: int | None = Field(default=None, ge=1)
    layer_sd: float | None = Field(default=None, ge=0)
    low_mean_gap: float | None = Field(default=None, ge=0)
    outlier_count: tuple[int, int] | None = None
    top_count: tuple[int, int] | None = None
    layer_noise_sd: float | None = Field(default=None, ge=0)

    @field_validator("outlier_count", "top_count")
    @classmethod
    def _interval(cls, interval: tuple[int, int] | None) -> tuple[int, int] | None:
        if interval is not None and not 1 <= interval[0] <= interval[1]:
            raise ValueError(f"must be [lower, upper] with 1 <= lower <= upper, got {list(interval)}")
        return interval


class BucketizationSettings(_Params):
    singularity_low_threshold: int | None = Field(default=None, ge=1)
    range_low_threshold: int | None = Field(default=None, ge=1)
    precision_limit_row_fraction: int | None = Field(default=None, ge=1)
    precision_limit_depth_threshold: int | None = Field(default=None, ge=0)


class ClusteringSettings(_Params):
    enabled: bool | None = None
    sample_size: int | None = Field(default=None, ge=1)
    max_weight: float | None = Field(default=None, gt=0)
    merge_threshold: float | None = Field(default=None, ge=0, le=1)
    solver_alpha: float | None = Field(default=None, gt=0, lt=1)
    main_column: str | None = None
    main_features: list[str] | None = None
    keep_together: list[tuple[str, str]] | None = None


class SyndiffixParams(_Params):
    anonymization: AnonymizationSettings = Field(default_factory=AnonymizationSettings)
    bucketization: BucketizationSettings = Field(default_factory=BucketizationSettings)
    clustering: ClusteringSettings = Field(default_factory=ClusteringSettings)
    target_column: str | None = Field(default=None, description="ML target: clusters favour predicting it")
    workers: int | None = Field(
        default=None,
        ge=1,
        description="processes for the clusters of one table (default: the CPUs available)",
    )


def resolved_params(engine: Engine, params: BaseModel) -> dict[str, Any]:
    """The parameters a run used, every default filled in (what lineage records): an engine that leaves
    defaults to its core says which through `resolved_params`; otherwise the params model holds them."""
    resolve = getattr(engine, "resolved_params", None)
    return resolve(params) if resolve is not None else params.model_dump(mode="json")


def _syndiffix_resolved_params(params: SyndiffixParams) -> dict[str, Any]:
    """The syndiffix params in the config's own keys, unset ones taken from the core's defaults."""
    from syndiffix_core import params as core

    core_params = _core_params(params)
    anonymization = core_params["anonymization"] or core.AnonymizationParams()
    bucketization = core_params["bucketization"] or core.BucketizationParams()
    clustering = core_params["clustering"] or core.ClusteringParams()
    low_count = anonymization.low_count_params
    resolved = {
        "anonymization": {
            "low_threshold": low_count.low_threshold,
            "layer_sd": low_count.layer_sd,
            "low_mean_gap": low_count.low_mean_gap,
            "outlier_count": [anonymization.outlier_count.lower, anonymization.outlier_count.upper],
            "top_count": [anonymization.top_count.lower, anonymization.top_count.upper],
            "layer_noise_sd": anonymization.layer_noise_sd,
        },
        "bucketization": {name: getattr(bucketization, name) for name in BucketizationSettings.model_fields},
        "clustering": {name: getattr(clustering, name) for name in ClusteringSettings.model_fields},
        "target_column": params.target_column,
    }
    features = resolved["clustering"]["main_features"]
    resolved["clustering"]["main_features"] = list(features) if features is not None else None
    resolved["clustering"]["keep_together"] = [list(pair) for pair in clustering.keep_together]
    return resolved


def with_kept_together(params: BaseModel, pairs: Sequence[tuple[str, str]]) -> BaseModel:
    """SynDiffix params whose clustering also keeps `pairs` in one cluster each (a linked set's parent:
    its child statistics with the columns children are matched on); other engines' params unchanged."""
    if not pairs or not isinstance(params, SyndiffixParams):
        return params
    kept = [*(params.clustering.keep_together or []), *map(tuple, pairs)]
    return params.model_copy(
        update={"clustering": params.clustering.model_copy(update={"keep_together": kept})}
    )


def syndiffix_anonymization(params: BaseModel) -> Any:
    """The core AnonymizationParams a SynDiffix table is synthesized with (for counts released about it
    outside its own synthesis, e.g. a linked set's children per parent); None for another engine's
    params, whose counts belong to that engine (a DP budget)."""
    from syndiffix_core import params as core

    if not isinstance(params, SyndiffixParams):
        return None
    return _core_params(params)["anonymization"] or core.AnonymizationParams()


def _core_params(params: SyndiffixParams) -> dict[str, Any]:
    """The engine's parameter dataclasses with only the configured fields changed from its defaults."""
    from syndiffix_core import params as core

    anonymization = params.anonymization.model_dump(exclude_none=True)
    low_count = {
        k: anonymization.pop(k) for k in ("low_threshold", "layer_sd", "low_mean_gap") if k in anonymization
    }
    for interval in ("outlier_count", "top_count"):
        if interval in anonymization:
            anonymization[interval] = core.FlatteningInterval(*anonymization[interval])
    if low_count:
        anonymization["low_count_params"] = core.SuppressionParams(**low_count)
    bucketization = params.bucketization.model_dump(exclude_none=True)
    clustering = params.clustering.model_dump(exclude_none=True)
    if "main_features" in clustering:
        clustering["main_features"] = tuple(clustering["main_features"])
    if "keep_together" in clustering:
        clustering["keep_together"] = tuple(map(tuple, clustering["keep_together"]))
    return {
        "anonymization": core.AnonymizationParams(**anonymization) if anonymization else None,
        "bucketization": core.BucketizationParams(**bucketization) if bucketization else None,
        "clustering": core.ClusteringParams(**clustering) if clustering else None,
        "target_column": params.target_column,
        "workers": params.workers,
    }


@dataclass(frozen=True)
class SyndiffixEngine:
    name: str = "syndiffix"
    params_model: type[BaseModel] = SyndiffixParams

    def run(
        self,
        df: pd.DataFrame,
        *,
        aid_columns: Sequence[str],
        salt: bytes,
        params: BaseModel,
        table_identity: str,
        progress: EngineProgress | None = None,
    ) -> EngineResult:
        import syndiffix_core
        from syndiffix_core import synthesize

        assert isinstance(params, SyndiffixParams)
        core = _core_params(params)
        inputs = [df]
        del df  # synthesize gets the only reference (when the caller kept none) and frees it once encoded;
        # no ** in the call: it would pack the arguments in a tuple that lives as long as the call
        frame = synthesize(
            inputs.pop(),
            list(aid_columns) or None,
            salt=salt,
            progress=progress,
            anonymization=core["anonymization"],
            bucketization=core["bucketization"],
            clustering=core["clustering"],
            target_column=core["target_column"],
            workers=core["workers"],
        )
        return EngineResult(frame=frame, metadata={"syndiffix_core_version": syndiffix_core.__version__})

    def resolved_params(self, params: BaseModel) -> dict[str, Any]:
        assert isinstance(params, SyndiffixParams)
        return _syndiffix_resolved_params(params)


register_engine(SyndiffixEngine())


class DpBinningSettings(_Params):
    """How one numeric or timestamp column becomes attributes (fixed grids: no privacy spent on edges)."""

    kind: Literal["exact", "significant_digits", "uniform", "calendar"]
    significant_digits: int = Field(default=1, ge=1, le=15)
    lower: float | None = None
    upper: float | None = None
    bins: int | None = Field(default=None, ge=1)
    calendar_unit: Literal["year", "month", "day", "hour", "minute"] = "month"

    @model_validator(mode="after")
    def _uniform_needs_bounds(self) -> DpBinningSettings:
        if self.kind == "uniform" and (self.lower is None or self.upper is None or self.bins is None):
            raise ValueError("uniform binning needs lower, upper and bins")
        if self.kind == "uniform" and not self.lower < self.upper:
            raise ValueError(f"uniform binning needs lower < upper, got {self.lower} and {self.upper}")
        return self


class DpMarginalsParams(_Params):
    """engine_params of `dp_marginals` (defaults of the synthetic data showcase / pac-synth 0.0.8).

    The noise is seeded from the salt, the table identity and the data's content: re-runs on unchanged
    data give the same output (nothing new leaks), changed data gets fresh noise (so two releases never
    expose the exact change of a count) and spends epsilon again. `release` is mixed in too and recorded
    in the lineage: a new value draws fresh noise even for unchanged data, which is one more release of the
    same people (basic composition; see docs/dp-marginals.md).
    """

    epsilon: float = Field(default=4.0, gt=0, allow_inf_nan=False)
    delta: float | None = Field(default=None, gt=0, lt=1)
    reporting_length: int = Field(default=3, ge=1)
    percentile_percentage: float = Field(default=99.0, gt=0, le=100)
    percentile_epsilon_proportion: float = Field(default=0.01, gt=0, lt=1)
    number_of_records_epsilon_proportion: float = Field(default=0.005, gt=0, lt=1)
    accuracy_mode: Literal["prioritize_long_combinations", "prioritize_short_combinations", "balanced"] = (
        "prioritize_long_combinations"
    )
    sigma_proportions: list[float] | None = None
    fabrication_mode: Literal["uncontrolled", "progressive", "balanced", "minimize"] = "uncontrolled"
    fixed_thresholds: dict[int, float] | None = None
    adaptive_thresholds: dict[int, float] | None = None
    weight_selection_percentile: float = Field(default=95.0, ge=0, le=100)
    weight_selection_lengths: Literal["longest", "all"] = "longest"
    use_synthetic_counts: bool = False
    number_of_records: int | None = Field(default=None, ge=0)
    keep_partial_records: bool = False
    max_rows_per_entity: int = Field(default=100, ge=1)
    significant_digits: int = Field(default=1, ge=1, le=15, description="default grid of reals and integers")
    calendar_unit: Literal["year", "month", "day", "hour", "minute"] = "month"
    binning: dict[str, DpBinningSettings] = Field(default_factory=dict)
    release: str | None = None
    evaluate: bool = Field(default=True, description="add the showcase's evaluation to the quality metrics")

    @model_validator(mode="after")
    def _consistent(self) -> DpMarginalsParams:
        if self.percentile_epsilon_proportion + self.number_of_records_epsilon_proportion >= 1:
            raise ValueError(
                "percentile_epsilon_proportion + number_of_records_epsilon_proportion must be < 1"
            )
        if self.sigma_proportions is not None and len(self.sigma_proportions) != self.reporting_length:
            raise ValueError(
                f"sigma_proportions needs {self.reporting_length} values (one per length), "
                f"got {len(self.sigma_proportions)}"
            )
        if self.sigma_proportions is not None and min(self.sigma_proportions) <= 0:
            raise ValueError("sigma_proportions must all be > 0")
        if self.fixed_thresholds is not None and self.adaptive_thresholds is not None:
            raise ValueError("give fixed_thresholds or adaptive_thresholds, not both")
        for name in ("fixed_thresholds", "adaptive_thresholds"):
            for k, value in (getattr(self, name) or {}).items():
                if not 2 <= k <= self.reporting_length:
                    raise ValueError(
                        f"{name} keys are combination lengths 2..{self.reporting_length}, got {k}"
                    )
                if name == "adaptive_thresholds" and not 0 < value <= 1:
                    raise ValueError(f"adaptive_thresholds[{k}] must be in (0, 1], got {value}")
                if name == "fixed_thresholds" and value < 0:
                    raise ValueError(f"fixed_thresholds[{k}] must be >= 0, got {value}")
        return self


def _dp_core_params(params: DpMarginalsParams):
    from syndiffix_core.dp import BinKind, ColumnBinning, DpParams

    grid = ColumnBinning(kind=BinKind.SIGNIFICANT_DIGITS, significant_digits=params.significant_digits)
    fields = params.model_dump(
        exclude={"significant_digits", "calendar_unit", "binning", "release", "evaluate"}, exclude_none=True
    )
    return DpParams(
        **fields,
        default_real_binning=grid,
        default_integer_binning=grid,
        default_timestamp_binning=ColumnBinning(kind=BinKind.CALENDAR, calendar_unit=params.calendar_unit),
        column_binning={name: ColumnBinning(**b.model_dump()) for name, b in params.binning.items()},
    )


@dataclass(frozen=True)
class DpMarginalsEngine:
    """(epsilon, delta)-differential privacy from DP marginals (syndiffix_core.dp).

    One AID column at most: its entities, not rows, are what the guarantee protects.
    """

    name: str = "dp_marginals"
    params_model: type[BaseModel] = DpMarginalsParams

    def run(
        self,
        df: pd.DataFrame,
        *,
        aid_columns: Sequence[str],
        salt: bytes,
        params: BaseModel,
        table_identity: str,
        progress: EngineProgress | None = None,
    ) -> EngineResult:
        from syndiffix_core.dp import evaluate_dp, synthesize_dp

        report = progress or (lambda stage, fraction: None)

        assert isinstance(params, DpMarginalsParams)
        if len(aid_columns) > 1:
            raise ValueError(
                f"engine dp_marginals protects the entities of one AID column, got {list(aid_columns)}: "
                "give one (e.g. the person) or none (every row is a record)"
            )
        unknown = sorted(set(params.binning) - set(df.columns))
        if unknown:
            raise ValueError(f"engine_params.binning names columns not in the table: {unknown}")
        identity = (
            table_identity if params.release is None else f"{table_identity}\x1frelease={params.release}"
        )
        report("dp marginals", 0.0)
        result = synthesize_dp(
            df,
            salt=salt,
            table_identity=identity,
            params=_dp_core_params(params),
            aid_column=aid_columns[0] if aid_columns else None,
        )
        metadata = result.metadata()
        if params.release is not None:
            metadata["release"] = params.release
        if params.evaluate:
            # the showcase's evaluation recounts every k-tuple of the source: a visible share of the time
            report("evaluation", 0.8)
            metadata["evaluation"] = evaluate_dp(result)
        report("done", 1.0)
        return EngineResult(frame=result.frame, metadata=metadata)


register_engine(DpMarginalsEngine())
