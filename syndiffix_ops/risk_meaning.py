"""What a risk figure means: chance and copy baselines for output reproduction, and advice for
identifying columns with the config line that follows it.

"Synthetic rows reproducing a value unique in the source: 0.22" is alarming or harmless depending on
the column. Two reference points give it a scale:

- chance: a synthetic row whose value is drawn at random from the column's domain hits one of the
  source's unique values with probability (unique values) / (domain size). The domain of a column of
  whole numbers, dates or times is every value between its smallest and largest at its resolution (a
  day, a minute, 0.01, ...), of other columns the source's distinct values; of a column set, the product
  of its columns' domains. A 4,000-row table over 18,000 possible birth dates has about 3,600 unique
  dates: chance is 0.2.
- copy: a synthetic row copied from a random source row holds a source-unique value with probability
  `id_share[1]` (the share of ids alone in their class).

A figure near chance says the output gives back unique values no more often than random values would;
near copy, as often as copying rows would.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

# Resolutions tried for numbers, finest last: the domain counts values on the coarsest one that fits.
_DECIMALS = range(0, 7)
_TIME_UNITS_SECONDS = (86_400, 3_600, 60, 1)
# A figure within this factor of chance (plus half a point) reads as chance.
_CHANCE_FACTOR = 1.5
_CHANCE_SLACK = 0.005


def value_domains(frame: pd.DataFrame, columns: Sequence[str]) -> dict[str, float]:
    """Domain size per column: the values between min and max at the column's resolution for whole
    numbers, decimals, dates and timestamps; unbounded (chance 0) for reals with more than 6 decimals;
    the distinct values otherwise (strings, booleans). Only used to compute chance shares; never stored."""
    return {column: _domain(frame[column]) for column in columns}


def _domain(series: pd.Series) -> float:
    # Each figure depends only on which values occur, so it is computed over the distinct values: a
    # hash pass over the rows instead of a copy, a count and up to seven grid checks of them.
    present = pd.Series(series.unique()).dropna()
    distinct = float(len(present))
    if present.empty or pd.api.types.is_bool_dtype(series):
        return max(distinct, 1.0)
    if pd.api.types.is_datetime64_any_dtype(series):
        seconds = (pd.to_datetime(present, utc=True) - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
        return max(distinct, _span(seconds.to_numpy(np.float64), _TIME_UNITS_SECONDS))
    if pd.api.types.is_numeric_dtype(series):
        values = present.to_numpy(np.float64)
        for decimals in _DECIMALS:
            scaled = values * 10.0**decimals
            if np.allclose(scaled, np.round(scaled), rtol=0, atol=1e-6):
                return max(distinct, float(np.ptp(scaled)) + 1.0)
        return math.inf  # reals on no grid: a random value practically never equals a source value
    inferred = pd.api.types.infer_dtype(present, skipna=True)
    if inferred == "date":
        days = pd.to_datetime(present).to_numpy("datetime64[D]").astype(np.int64)
        return max(distinct, float(np.ptp(days)) + 1.0)
    return max(distinct, 1.0)


def _span(seconds: np.ndarray, units: Sequence[int]) -> float:
    """Values between min and max on the coarsest unit every value is a whole multiple of."""
    for unit in units:
        if np.all(np.mod(seconds, unit) == 0):
            return float(np.ptp(seconds)) / unit + 1.0
    return float(np.ptp(seconds)) + 1.0


def reproduction_baselines(
    summary: Mapping[str, Any], columns: Sequence[str], domains: Mapping[str, float]
) -> dict[str, float | None]:
    """{"chance", "copy"} shares of synthetic rows holding a source-unique value, for one column set
    (`summary` is its source uniqueness summary as a dict)."""
    unique_values = summary["reidentification_potential"]["1"] * summary["distinct_values"]
    domain = math.prod(domains.get(column, summary["distinct_values"]) for column in columns)
    chance = min(1.0, unique_values / domain) if domain > 0 else None
    return {"chance": chance, "copy": summary["id_share"]["1"]}


def reproduction_reading(share: float | None, chance: float | None, copy: float | None) -> str:
    """The figure in words, against its baselines."""
    if share is None:
        return "–"
    if chance is not None and share <= _CHANCE_FACTOR * chance + _CHANCE_SLACK:
        return "at chance"
    if copy is not None and copy > 0 and share >= 0.5 * copy:
        return "close to copying rows"
    return "above chance"


def advice(columns: Sequence[str], level: str, domain_kind: str, distinct_ratio: float) -> str | None:
    """What to do about an identifying or elevated column set, with the config line that does it;
    `domain_kind` is "number", "time" or "other" and `distinct_ratio` distinct values per distinct id."""
    if level not in {"identifying", "elevated"}:
        return None
    if len(columns) > 1:
        names = ", ".join(columns)
        return (
            f"Together, {names} single out {'most' if level == 'identifying' else 'some'} entities. "
            f"Generalize one of them or drop it: `columns: {{{columns[-1]}: drop}}`, or leave the "
            "combination to SynDiffix and check the reproduction figure below against its chance."
        )
    column = columns[0]
    if domain_kind == "other" and distinct_ratio >= 0.9:
        return (
            f"{column} holds about one value per entity, like an identifier. If it identifies the protected "
            f"entity, make it the AID: `aid_columns: [{column}]`; otherwise drop it: "
            f"`columns: {{{column}: drop}}`."
        )
    if domain_kind in {"number", "time"}:
        coarser = f"ROUND({column}, 1)" if domain_kind == "number" else f"DATE_TRUNC('month', {column})"
        return (
            f"{column} is fine-grained enough to single out entities. Generalize it in the source (a view "
            f"that selects e.g. `{coarser} AS {column}`, named in `source:`), or drop it: "
            f"`columns: {{{column}: drop}}`. SynDiffix does not copy single values; the reproduction figure "
            "below says whether the output gives them back more than chance."
        )
    return (
        f"{column} singles out entities. Drop it: `columns: {{{column}: drop}}`, or generalize it in a "
        "source view (e.g. a prefix of it)."
    )
