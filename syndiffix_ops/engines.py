"""Synthesis engines as the pipeline sees them: a name, a params model, and `run`.

Config validation imports this module to check `engine_params`, so an engine's `run` must import its
heavy machinery lazily: validating a config never loads an engine.

To add an engine, build an object with `name`, `params_model` and `run` (see `Engine`) and call
`register_engine` for it at the bottom of this module, next to the built-in ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class EngineResult:
    """The synthetic frame and what the engine wants recorded in lineage (never the salt)."""

    frame: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)


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
    ) -> EngineResult:
        """Synthesize `df`; the result holds every column of df except the AID columns, in order."""
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


class SyndiffixParams(_Params):
    anonymization: AnonymizationSettings = Field(default_factory=AnonymizationSettings)
    bucketization: BucketizationSettings = Field(default_factory=BucketizationSettings)
    clustering: ClusteringSettings = Field(default_factory=ClusteringSettings)
    target_column: str | None = Field(default=None, description="ML target: clusters favour predicting it")


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
    return {
        "anonymization": core.AnonymizationParams(**anonymization) if anonymization else None,
        "bucketization": core.BucketizationParams(**bucketization) if bucketization else None,
        "clustering": core.ClusteringParams(**clustering) if clustering else None,
        "target_column": params.target_column,
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
    ) -> EngineResult:
        import syndiffix_core
        from syndiffix_core import synthesize

        assert isinstance(params, SyndiffixParams)
        frame = synthesize(df, list(aid_columns) or None, salt=salt, **_core_params(params))
        return EngineResult(frame=frame, metadata={"syndiffix_core_version": syndiffix_core.__version__})


register_engine(SyndiffixEngine())
