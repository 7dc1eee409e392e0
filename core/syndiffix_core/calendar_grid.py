"""The firsts of months (or of years) as a grid of instants, which are not evenly spaced: for timestamp
columns whose values fall on them (`timestamp_forms`), so that synthetic values can stay on them.

Instants here are the engines' encoding: float seconds since 1800-01-01 (`columns`).
"""

from __future__ import annotations

import numpy as np

# 1800-01-01 -> 1970-01-01 (as columns.EPOCH_1800_OFFSET_SECONDS, which imports this module).
_EPOCH_1970 = (170 * 365 + 41) * 86_400
_DAY = 86_400
_NUMPY_UNIT = {"month": "M", "year": "Y"}


def on_grid(seconds: np.ndarray, unit: str) -> np.ndarray:
    """Per instant, whether it is the first of a month ("month") or a 1 January ("year") at midnight."""
    seconds = np.asarray(seconds, dtype=np.float64)
    return _start_at_or_before(seconds, unit) == seconds


def starts_between(unit: str, low: float, high: float) -> np.ndarray:
    """The grid's instants in [low, high], ascending."""
    first, last = _grid_steps(np.array([low, high]), unit)
    instants = _seconds(np.arange(first, last + _step(unit)))
    return instants[(instants >= low) & (instants <= high)]


def nearest_start(seconds: np.ndarray, unit: str) -> np.ndarray:
    """Each instant moved to the nearest instant of the grid (half way: the later one)."""
    before = _start_at_or_before(seconds, unit)
    after = _seconds(_grid_steps(before, unit) + _step(unit))
    return np.where(seconds - before < after - seconds, before, after)


def _step(unit: str) -> np.timedelta64:
    return np.timedelta64(1, _NUMPY_UNIT[unit])


def _grid_steps(seconds: np.ndarray, unit: str) -> np.ndarray:
    days = np.floor((np.asarray(seconds, dtype=np.float64) - _EPOCH_1970) / _DAY).astype(np.int64)
    return days.astype("datetime64[D]").astype(f"datetime64[{_NUMPY_UNIT[unit]}]")


def _start_at_or_before(seconds: np.ndarray, unit: str) -> np.ndarray:
    return _seconds(_grid_steps(seconds, unit))


def _seconds(steps: np.ndarray) -> np.ndarray:
    return steps.astype("datetime64[D]").astype(np.int64).astype(np.float64) * _DAY + _EPOCH_1970
