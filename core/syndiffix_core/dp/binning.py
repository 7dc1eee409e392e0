"""Typed columns <-> categorical attributes for DP marginals, without spending privacy on bin edges.

Each column is cast to float64 by its `syndiffix_core.columns` codec, then mapped to attribute codes by a
fixed, data-independent function of the value (see `ColumnBinning`): the exact value (booleans, strings,
declared-exact columns), a decimal significant-digit grid (reals, integers), equal-width bins between
declared public bounds, or calendar units (timestamps). Which bins are occupied is data, but it is
protected like a categorical value: a bin is released only if its noisy count passes the length-1
threshold. Null is an attribute of its own. Synthetic codes are turned back into values by drawing
uniformly among the values of the bin on the codec's grid (whole numbers, the timestamp resolution, the
real's decimals), then decoding with the codec to the input dtype.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from syndiffix_core.columns import EPOCH_1800_OFFSET_SECONDS, ColumnCodec, ColumnKind, codec_for

from .params import BinKind, ColumnBinning, DpParams

_CALENDAR_DTYPES = {
    "year": "datetime64[Y]",
    "month": "datetime64[M]",
    "day": "datetime64[D]",
    "hour": "datetime64[h]",
    "minute": "datetime64[m]",
}
# One calendar unit, as a timedelta of that unit (numpy deprecates adding a bare integer to a date).
_ONE_STEP = {name: np.timedelta64(1, np.datetime_data(dtype)[0]) for name, dtype in _CALENDAR_DTYPES.items()}


def _value_step(codec: ColumnCodec) -> float:
    """The spacing of the values the codec can decode to exactly (0: continuous)."""
    if codec.kind is ColumnKind.INTEGER:
        return 1.0
    if codec.kind is ColumnKind.TIMESTAMP:
        return float(getattr(codec, "resolution_seconds", 1.0))
    if hasattr(codec, "scale"):
        return 10.0**-codec.scale
    decimals = getattr(codec, "decimals", None)
    return 10.0**-decimals if decimals is not None else 0.0


def _significant_digit_bins(values: np.ndarray, digits: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin id, lower and upper edge of each (finite) value on the grid of `digits` significant digits."""
    magnitude = np.abs(values)
    zero = magnitude == 0
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log10(np.where(zero, 1.0, magnitude))).astype(np.int64) - (digits - 1)
    width = 10.0 ** exponent.astype(np.float64)
    mantissa = np.floor(magnitude / width)
    # log10 can be off by one ulp at powers of ten: put the value back into [10^(s-1), 10^s)
    high = mantissa >= 10**digits
    low = (mantissa < 10 ** (digits - 1)) & ~zero
    exponent = exponent + high - low
    width = 10.0 ** exponent.astype(np.float64)
    mantissa = np.floor(magnitude / width)
    sign = np.sign(values)
    lower_mag, upper_mag = mantissa * width, (mantissa + 1) * width
    lower = np.where(sign < 0, -upper_mag, lower_mag)
    upper = np.where(sign < 0, -lower_mag, upper_mag)
    lower[zero], upper[zero] = 0.0, 0.0
    # ids: exponent in [-400, 400] and mantissa < 10^digits pack into one int64 per sign
    bin_id = (exponent + 400) * 10**digits + mantissa.astype(np.int64)
    bin_id = np.where(sign < 0, -bin_id - 1, bin_id + 1)
    bin_id[zero] = 0
    return bin_id, lower, upper


class AttributeEncoder:
    """One column: typed values <-> attribute codes 0..cardinality-1 (null included when present)."""

    def __init__(self, codec: ColumnCodec, binning: ColumnBinning):
        self.codec = codec
        self.binning = binning
        self.step = _value_step(codec)
        self.cardinality = 0
        self._exact: np.ndarray | None = None  # code -> value (exact binning)
        self._lower = np.empty(0)
        self._upper = np.empty(0)
        self.null_code: int | None = None

    @property
    def name(self):
        return self.codec.name

    def fit_transform(self, values: np.ndarray) -> np.ndarray:
        null = np.isnan(values)
        present = values[~null]
        kind = self.binning.kind
        if kind is BinKind.EXACT:
            labels, inverse = np.unique(present, return_inverse=True)
            self._exact = labels
        else:
            ids, lower, upper = self._bins(present)
            uniq, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
            labels = uniq
            self._lower, self._upper = lower[first], upper[first]
        codes = np.empty(len(values), dtype=np.int32)
        codes[~null] = inverse.reshape(-1)
        self.cardinality = len(labels)
        if null.any():
            self.null_code = self.cardinality
            codes[null] = self.null_code
            self.cardinality += 1
        return codes

    def _bins(self, present: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        binning = self.binning
        if binning.kind is BinKind.SIGNIFICANT_DIGITS:
            return _significant_digit_bins(present, binning.significant_digits)
        if binning.kind is BinKind.UNIFORM:
            width = (binning.upper - binning.lower) / binning.bins
            ids = np.clip(np.floor((present - binning.lower) / width), 0, binning.bins - 1).astype(np.int64)
            return ids, binning.lower + ids * width, binning.lower + (ids + 1) * width
        unit = _CALENDAR_DTYPES[binning.calendar_unit]
        seconds = np.floor(present - EPOCH_1800_OFFSET_SECONDS).astype(np.int64).astype("datetime64[s]")
        start = seconds.astype(unit)
        ids = start.astype(np.int64)
        lower = (start.astype("datetime64[s]").astype(np.int64) + EPOCH_1800_OFFSET_SECONDS).astype(
            np.float64
        )
        upper = (
            (start + _ONE_STEP[binning.calendar_unit]).astype("datetime64[s]").astype(np.int64)
            + EPOCH_1800_OFFSET_SECONDS
        ).astype(np.float64)
        return ids, lower, upper

    def describe(self, code: int) -> str:
        """Human-readable attribute (for DP aggregates export): the value or the bin."""
        if code == self.null_code:
            return "NULL"
        if self._exact is not None:
            return str(self.codec.decode(self._exact[[code]]).iloc[0])
        return f"[{self._lower[code]:g}, {self._upper[code]:g})"

    def sample(self, codes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """float64 values for the codec (NaN for null and for MISSING cells, code -1)."""
        out = np.full(len(codes), np.nan)
        valid = codes >= 0
        if self.null_code is not None:
            valid &= codes != self.null_code
        c = codes[valid]
        if self._exact is not None:
            out[valid] = self._exact[c]
            return out
        lower, upper = self._lower[c], self._upper[c]
        u = rng.random(len(c))
        if self.step > 0:
            first = np.ceil(lower / self.step - 1e-9) * self.step
            steps = np.maximum(np.ceil((upper - first) / self.step - 1e-9), 1)
            out[valid] = first + np.floor(u * steps) * self.step
        else:
            out[valid] = lower + u * (upper - lower)
        return out


def default_binning(codec: ColumnCodec, params: DpParams) -> ColumnBinning:
    binning = params.binning_for(codec.name, codec.kind.value)
    if (
        codec.kind is ColumnKind.TIMESTAMP
        and type(codec).__name__ == "TimeCodec"
        and codec.name not in params.column_binning
    ):
        # times of day all fall on 1800-01-01: calendar months would make one bin
        return ColumnBinning(kind=BinKind.CALENDAR, calendar_unit="hour")
    return binning


def encode_columns(df: pd.DataFrame, params: DpParams, columns) -> tuple[list[AttributeEncoder], np.ndarray]:
    """Attribute encoders and the (rows, columns) int32 code matrix of `columns` of df."""
    encoders = []
    codes = np.empty((len(df), len(columns)), dtype=np.int32)
    for j, column in enumerate(columns):
        series = df[column].reset_index(drop=True)
        codec = codec_for(series)
        encoder = AttributeEncoder(codec, default_binning(codec, params))
        codes[:, j] = encoder.fit_transform(codec.encode(series))
        encoders.append(encoder)
    return encoders, codes


def decode_columns(
    encoders: list[AttributeEncoder], codes: np.ndarray, rng: np.random.Generator
) -> pd.DataFrame:
    data = {}
    for j, encoder in enumerate(encoders):
        data[encoder.name] = encoder.codec.decode(encoder.sample(codes[:, j], rng))
    return pd.DataFrame(data)
