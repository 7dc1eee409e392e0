"""Column kinds and casting: pandas columns <-> float64 arrays for the engines, and back.

Every engine works on float64 columns where NaN means null. A `ColumnCodec` is fitted once per input
column; `encode` turns the column into that float64 form and `decode` turns engine output (floats,
possibly in between the original values) back into a Series of exactly the input dtype.

Casting (the SynDiffix "casting to real"): boolean -> 0/1; integer -> its value; real -> its value;
string -> index in the sorted list of distinct non-null strings (code-point order); timestamp ->
seconds since 1800-01-01 00:00:00 UTC. There is no min-max normalization here: engines see values in
their natural units. See docs/columns.md for the decisions (NaN/inf, rounding, precision limits).
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import os
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

from syndiffix_core import calendar_grid, iso_layouts
from syndiffix_core.errors import InvalidInputError, UnsupportedColumnError
from syndiffix_core.iso_layouts import IsoLayout

__all__ = [
    "EPOCH_1800_OFFSET_SECONDS",
    "BooleanCodec",
    "ColumnCodec",
    "ColumnKind",
    "DateCodec",
    "DecimalCodec",
    "IntegerCodec",
    "IsoTextCodec",
    "RealCodec",
    "StringCodec",
    "TimeCodec",
    "TimestampCodec",
    "UnsupportedColumnError",
    "codec_for",
    "decode_frame",
    "encode_frame",
]


class ColumnKind(enum.StrEnum):
    BOOLEAN = "boolean"
    INTEGER = "integer"
    REAL = "real"
    STRING = "string"
    TIMESTAMP = "timestamp"


# 1800-01-01 -> 1970-01-01 is 170 years with 41 leap days (1800 and 1900 are not leap years).
EPOCH_1800_OFFSET_SECONDS = (170 * 365 + 41) * 86_400

# Number of decimal digits tried when detecting the precision of a real column. Beyond 15 digits a
# float64 no longer holds every decimal exactly, so "rounding to the precision" would be meaningless.
_MAX_REAL_DECIMALS = 15
_PRECISION_SAMPLE = 10_000

_UNITS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
# Coarsest first; values are in nanoseconds.
_RESOLUTIONS_NS = (
    ("day", 86_400 * 10**9),
    ("hour", 3_600 * 10**9),
    ("minute", 60 * 10**9),
    ("second", 10**9),
    ("millisecond", 10**6),
    ("microsecond", 10**3),
    ("nanosecond", 1),
)


# --------------------------------------------------------------------------------------------------
# small helpers


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to the nearest integer, ties away from zero (SQL ROUND), without the x + 0.5 pitfall."""
    floor = np.floor(x)
    frac = x - floor
    return floor + np.where(x >= 0, frac >= 0.5, frac > 0.5)


def _row_label(series: pd.Series, position: int) -> Any:
    return series.index[position]


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _unsupported(series: pd.Series, reason: str, position: int | None = None) -> UnsupportedColumnError:
    name = series.name
    if position is None:
        return UnsupportedColumnError(
            f"column {name!r} (dtype {series.dtype}): {reason}", column=name, dtype=series.dtype
        )
    # numpy scalars print as np.int64(12); messages should show 12.
    value = _plain(series.iloc[position])
    row = _plain(_row_label(series, position))
    return UnsupportedColumnError(
        f"column {name!r} (dtype {series.dtype}): {reason}; first offending value {value!r} at row {row!r}",
        column=name,
        dtype=series.dtype,
        value=value,
        row=row,
    )


def _is_object(dtype: Any) -> bool:
    return isinstance(dtype, np.dtype) and dtype.kind == "O"


def _null_mask(series: pd.Series) -> np.ndarray:
    return np.asarray(series.isna(), dtype=bool)


def _codes(keys: np.ndarray, null: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per row the index of its key among the sorted distinct keys of the rows not `null`, -1 where
    null; those distinct keys)."""
    codes = np.full(len(keys), -1, dtype=np.int64)
    present_codes, uniques = pd.factorize(keys[~null], sort=True)
    codes[~null] = present_codes
    return codes, np.asarray(uniques)


def _categorical(codes: np.ndarray, values: np.ndarray, name: Any) -> pd.Series:
    """values[codes] (code -1 = null) as a Categorical Series: its categories are the distinct values
    used, sorted, so that category codes order the rows as their values do."""
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(values)))
    used_values = values[used]
    order = np.argsort(used_values, kind="stable")
    ordered = used_values[order]
    first = np.ones(len(ordered), dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]  # two codes can stand for one value (a label, a decimal)
    lookup = np.full(len(values) + 1, -1, dtype=np.int64)  # the last entry serves code -1
    lookup[used[order]] = np.cumsum(first) - 1
    categories = pd.Index(ordered[first], dtype=object)
    return pd.Series(pd.Categorical.from_codes(lookup[codes], categories=categories), name=name)


def _expanded(series: pd.Series, dtype: Any, name: Any) -> pd.Series:
    """A Categorical Series as a Series of `dtype` (object or a string dtype), null as None."""
    categories = np.append(np.asarray(series.cat.categories, dtype=object), None)
    out = categories.take(np.asarray(series.cat.codes))  # code -1 takes the None at the end
    if _is_object(dtype):
        return pd.Series(out, name=name, dtype=object)
    return pd.Series(pd.array(out, dtype=dtype), name=name)


def _floats(series: pd.Series) -> np.ndarray:
    """float64 copy of a numeric/boolean column, NaN where null."""
    return series.to_numpy(dtype=np.float64, na_value=np.nan)


def _nullable_counterpart(dtype: np.dtype) -> Any:
    """The pandas masked dtype that can hold nulls for a numpy bool/int dtype."""
    if dtype.kind == "b":
        return pd.BooleanDtype()
    if dtype.kind == "u":
        return pd.api.types.pandas_dtype("UInt" + dtype.name[4:])
    return pd.api.types.pandas_dtype("Int" + dtype.name[3:])


def _masked_array_type(dtype: Any) -> type | None:
    if not isinstance(dtype, pd.api.extensions.ExtensionDtype):
        return None
    array_type = dtype.construct_array_type()
    masked = (pd.arrays.BooleanArray, pd.arrays.IntegerArray, pd.arrays.FloatingArray)
    return array_type if issubclass(array_type, masked) else None


def _build_series(values: np.ndarray, null: np.ndarray, dtype: Any, name: Any) -> pd.Series:
    """Series of `dtype` from plain numpy values (any content where `null`) and a null mask.

    numpy bool/int dtypes cannot hold nulls: if nulls are present the pandas nullable counterpart is
    used (the engines only emit nulls for columns that had nulls, so this is a safety net).
    """
    has_null = bool(null.any())
    if isinstance(dtype, np.dtype):
        if _is_object(dtype):
            out = values.astype(object)
            out[null] = None
            return pd.Series(out, name=name, dtype=object)
        if dtype.kind == "f":
            out = values.astype(dtype)
            out[null] = np.nan
            return pd.Series(out, name=name)
        if not has_null:
            return pd.Series(values.astype(dtype), name=name)
        dtype = _nullable_counterpart(dtype)
    array_type = _masked_array_type(dtype)
    if array_type is not None:
        data = values.astype(dtype.numpy_dtype)
        return pd.Series(array_type(data, null.copy()), name=name)
    # Other extension dtypes (e.g. pyarrow-backed): go through a masked array, then let pandas cast.
    inner = _nullable_counterpart(values.dtype) if values.dtype.kind in "biu" else pd.Float64Dtype()
    return _build_series(values, null, inner, name).astype(dtype)


def _first_position(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def _first_value_of_other_type(series: pd.Series, null: np.ndarray) -> int:
    """Position of the first non-null value whose type differs from the first non-null value's type.

    Only used to build error messages, so a Python loop over the rows is acceptable here.
    """
    positions = np.flatnonzero(~null)
    values = series.to_numpy(dtype=object)
    first_type = type(values[positions[0]])
    if first_type not in (str, bool, int, float, decimal.Decimal, dt.date, dt.datetime, dt.time):
        return int(positions[0])
    for position in positions:
        if type(values[position]) is not first_type:
            return int(position)
    return int(positions[0])


def _check_decodable(values: Any) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise InvalidInputError(f"decode expects a 1-dimensional array, got shape {array.shape}")
    return array


# --------------------------------------------------------------------------------------------------
# codecs


class ColumnCodec:
    """Casts one column to float64 and back. Fitted on the input column by `codec_for`.

    `name` is the column name, `kind` its ColumnKind and `dtype` the input pandas dtype, which `decode`
    restores exactly.
    """

    kind: ColumnKind
    # A timestamp column on the firsts of months or years: "month" or "year" (`calendar_grid`; set by
    # `timestamp_forms`); decoded values are the nearest such instants.
    calendar: str | None = None

    def __init__(self, name: Any, dtype: Any) -> None:
        self.name = name
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, kind={self.kind.value}, dtype={self.dtype})"

    def encode(self, series: pd.Series) -> np.ndarray:
        """float64 array, NaN where null."""
        raise NotImplementedError

    def decode(self, values: np.ndarray) -> pd.Series:
        """float64 values (NaN = null) -> Series of the input dtype, named like the input column."""
        raise NotImplementedError

    def decode_compact(self, values: np.ndarray) -> pd.Series:
        """`decode`'s values held in at most 8 bytes per row, for tables of many rows that are taken,
        joined and shuffled before they are output: a codec that decodes to Python objects or strings
        gives a Categorical of them (its categories the distinct values, sorted; null = code -1) instead
        of an object per row. `expand` turns it into `decode`'s Series."""
        return self.decode(values)

    def expand(self, series: pd.Series) -> pd.Series:
        """A Series of `decode_compact` (taken or joined) as `decode` gives it: of the input dtype."""
        if isinstance(series.dtype, pd.CategoricalDtype) and not isinstance(self.dtype, pd.CategoricalDtype):
            return _expanded(series, self.dtype, self.name)
        return series


class _ObjectValuesCodec(ColumnCodec):
    """A codec whose values are Python objects or strings: it decodes them as categories first
    (`decode_compact`), and `decode` is their expansion to the input dtype."""

    def decode(self, values: np.ndarray) -> pd.Series:
        return self.expand(self.decode_compact(values))


class BooleanCodec(ColumnCodec):
    """bool, nullable `boolean` and object columns of bools + nulls. False -> 0.0, True -> 1.0."""

    kind = ColumnKind.BOOLEAN

    def encode(self, series: pd.Series) -> np.ndarray:
        if _is_object(series.dtype):
            null = _null_mask(series)
            values = series.to_numpy(dtype=object)
            # infer_dtype is strict: 1 and 0 are not booleans, although 1 == True.
            if infer_dtype(values, skipna=True) not in ("boolean", "empty"):
                position = _first_value_of_other_type(series, null)
                raise _unsupported(series, "expected only booleans and nulls", position)
            out = np.full(len(values), np.nan)
            out[~null] = values[~null].astype(bool)
            return out
        return _floats(series)

    def decode(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        null = np.isnan(values)
        return _build_series(values >= 0.5, null, self.dtype, self.name)


class IntegerCodec(ColumnCodec):
    """Integer columns (numpy int/uint, nullable Int*/UInt*, object of Python ints + nulls).

    Decoding rounds half away from zero and clips to the dtype's range. The same codec serves a float
    column forced to the INTEGER kind (rounded, float dtype kept) and an integer column forced to REAL.
    """

    kind = ColumnKind.INTEGER

    def __init__(self, name: Any, dtype: Any, kind: ColumnKind = ColumnKind.INTEGER) -> None:
        super().__init__(name, dtype)
        self.kind = kind
        numpy_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        if _is_object(numpy_dtype):
            numpy_dtype = np.dtype(np.int64)
        self._numpy_dtype = numpy_dtype
        if numpy_dtype.kind in "iu":
            info = np.iinfo(numpy_dtype)
            low, high = float(info.min), float(info.max)
            # float(2**63 - 1) rounds up to 2**63, which would overflow the cast back.
            if int(high) > info.max:
                high = float(np.nextafter(high, -np.inf))
            self._range = (low, high)
        else:
            self._range = (-np.inf, np.inf)

    def encode(self, series: pd.Series) -> np.ndarray:
        if _is_object(series.dtype):
            null = _null_mask(series)
            values = series.to_numpy(dtype=object)
            kind = infer_dtype(values, skipna=True)
            if kind not in ("integer", "empty"):
                position = _first_value_of_other_type(series, null)
                raise _unsupported(series, "expected only integers and nulls", position)
            out = np.full(len(values), np.nan)
            present = values[~null]
            try:
                out[~null] = present.astype(np.int64)
            except OverflowError:
                too_big = [not (-(2**63) <= v < 2**63) for v in present]  # error path only
                position = np.flatnonzero(~null)[_first_position(np.array(too_big))]
                raise _unsupported(series, "integer outside the int64 range", int(position)) from None
            return out
        out = _floats(series)
        if self._numpy_dtype.kind == "f":
            _reject_infinities(series, out)
        return out

    def decode(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        null = np.isnan(values)
        rounded = np.clip(_round_half_away(np.where(null, 0.0, values)), *self._range)
        if self._numpy_dtype.kind in "iu":
            rounded = rounded.astype(self._numpy_dtype)
        return _build_series(rounded, null, self.dtype, self.name)


def _reject_infinities(series: pd.Series, values: np.ndarray) -> None:
    infinite = np.isinf(values)
    if infinite.any():
        raise _unsupported(
            series,
            "+-inf is not supported in a real column (NaN is read as null; replace infinities "
            "with null or a finite sentinel before synthesis)",
            _first_position(infinite),
        )


def _detect_decimals(values: np.ndarray) -> int | None:
    """Smallest d in 0..15 with round(x, d) == x for every value, or None if there is none.

    The search runs on an evenly spaced sample and the answer is verified on all values (rounding
    happens in the values' own dtype, so float32 columns are judged as float32).
    """
    if values.size == 0:
        return 0
    if values.size > _PRECISION_SAMPLE:
        sample = values[np.linspace(0, values.size - 1, _PRECISION_SAMPLE).astype(np.intp)]
    else:
        sample = values
    with np.errstate(over="ignore", invalid="ignore"):
        for decimals in range(_MAX_REAL_DECIMALS + 1):
            if np.array_equal(np.round(sample, decimals), sample) and np.array_equal(
                np.round(values, decimals), values
            ):
                return decimals
    return None


class RealCodec(ColumnCodec):
    """float16/32/64, nullable Float32/64 and object columns of floats + nulls.

    NaN (and NA) are nulls; +-inf is rejected. `decimals` is the detected precision (digits after the
    decimal point, None when the values need more than 15); decoded values are rounded to it.
    """

    kind = ColumnKind.REAL

    def __init__(self, name: Any, dtype: Any, decimals: int | None) -> None:
        super().__init__(name, dtype)
        self.decimals = decimals
        numpy_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        self._numpy_dtype = np.dtype(np.float64) if _is_object(numpy_dtype) else numpy_dtype

    @classmethod
    def fit(cls, series: pd.Series) -> tuple[RealCodec, np.ndarray]:
        encoded = cls._encode(series)
        present = encoded[~np.isnan(encoded)]
        dtype = getattr(series.dtype, "numpy_dtype", series.dtype)
        if not _is_object(dtype):
            present = present.astype(dtype)
        return cls(series.name, series.dtype, _detect_decimals(present)), encoded

    @staticmethod
    def _encode(series: pd.Series) -> np.ndarray:
        if _is_object(series.dtype):
            null = _null_mask(series)
            values = series.to_numpy(dtype=object)
            if infer_dtype(values, skipna=True) not in ("floating", "empty", "mixed-integer-float"):
                raise _unsupported(
                    series, "expected only floats and nulls", _first_value_of_other_type(series, null)
                )
            out = np.full(len(values), np.nan)
            out[~null] = values[~null].astype(np.float64)
        else:
            out = _floats(series)
        _reject_infinities(series, out)
        return out

    def encode(self, series: pd.Series) -> np.ndarray:
        return self._encode(series)

    def decode(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        null = np.isnan(values)
        limit = np.finfo(self._numpy_dtype).max
        out = np.clip(values, -limit, limit).astype(self._numpy_dtype)
        if self.decimals is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                rounded = np.round(out, self.decimals)
            # Huge values overflow when scaled by 10**decimals; they carry no digits to round anyway.
            out = np.where(np.isfinite(rounded), rounded, out)
        return _build_series(out, null, self.dtype, self.name)


class DecimalCodec(_ObjectValuesCodec):
    """Object columns of decimal.Decimal (SQL NUMERIC) + nulls: REAL, decoded back to Decimal.

    `scale` is the number of digits after the point that decoded Decimals are quantized to: the larger
    of the digits the values need as floats (the real-precision rule) and the largest scale written in
    an evenly spaced sample of the inputs (so NUMERIC(10, 2) keeps 2 for 1.50). Values are carried as
    float64, so digits beyond ~15 significant ones are not kept.
    """

    kind = ColumnKind.REAL

    def __init__(self, name: Any, dtype: Any, scale: int) -> None:
        super().__init__(name, dtype)
        self.scale = scale

    @classmethod
    def fit(cls, series: pd.Series) -> tuple[DecimalCodec, np.ndarray]:
        encoded = cls._encode(series)
        present = series.to_numpy(dtype=object)[~np.isnan(encoded)]
        sample = present[
            np.linspace(0, present.size - 1, min(present.size, _PRECISION_SAMPLE)).astype(np.intp)
        ]
        written = [-value.as_tuple().exponent for value in sample]
        needed = _detect_decimals(encoded[~np.isnan(encoded)])
        scale = max([0, *written, needed or 0])
        return cls(series.name, series.dtype, scale), encoded

    @staticmethod
    def _encode(series: pd.Series) -> np.ndarray:
        null = _null_mask(series)
        values = series.to_numpy(dtype=object)
        if infer_dtype(values, skipna=True) not in ("decimal", "empty"):
            raise _unsupported(
                series,
                "expected only decimal.Decimal values and nulls",
                _first_value_of_other_type(series, null),
            )
        out = np.full(len(values), np.nan)
        out[~null] = values[~null].astype(np.float64)
        _reject_infinities(series, out)
        return out

    def encode(self, series: pd.Series) -> np.ndarray:
        return self._encode(series)

    def decode_compact(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        codes, uniques = _codes(values, np.isnan(values))
        return _categorical(codes, self._decimals(uniques), self.name)

    def _decimals(self, uniques: np.ndarray) -> np.ndarray:
        """Decimal objects for distinct floats, built in Python (one per distinct value only)."""
        quantum = decimal.Decimal(1).scaleb(-self.scale)
        # Enough digits for any float64 at this scale, so quantize never runs out of precision.
        context = decimal.Context(prec=330 + self.scale, rounding=decimal.ROUND_HALF_UP)
        # repr() is the shortest decimal that reads back as the same float, so -0.005 rounds like the
        # decimal it stands for; half away from zero as for integers; "+ 0" turns -0.00 into 0.00.
        return np.array(
            [
                context.add(decimal.Decimal(repr(float(u))).quantize(quantum, context=context), 0)
                for u in uniques
            ],
            dtype=object,
        )


class StringCodec(_ObjectValuesCodec):
    """String columns (object of str, pandas `string`/`str`, category of strings) + nulls.

    `strings` holds the sorted distinct non-null values (Python code-point order) and a value is encoded
    as its index there. Unused categories of a category column are not in `strings`.
    """

    kind = ColumnKind.STRING

    def __init__(self, name: Any, dtype: Any, strings: np.ndarray) -> None:
        super().__init__(name, dtype)
        self.strings = strings

    @classmethod
    def fit(cls, series: pd.Series) -> tuple[StringCodec, np.ndarray]:
        null, codes, uniques = _factorize_strings(series)
        order = np.argsort(uniques, kind="stable")
        strings = uniques[order]
        rank = np.empty(len(order), dtype=np.float64)
        rank[order] = np.arange(len(order))
        encoded = np.full(len(series), np.nan)
        encoded[~null] = rank[codes]
        return cls(series.name, series.dtype, strings), encoded

    def encode(self, series: pd.Series) -> np.ndarray:
        null, codes, uniques = _factorize_strings(series)
        positions = np.searchsorted(self.strings, uniques)
        known = positions < len(self.strings)
        known[known] = self.strings[positions[known]] == uniques[known]
        if not known.all():
            unknown_code = int(np.flatnonzero(~known)[0])
            position = np.flatnonzero(~null)[_first_position(codes == unknown_code)]
            raise _unsupported(series, "value not among the strings this codec was fitted on", int(position))
        encoded = np.full(len(series), np.nan)
        encoded[~null] = positions[codes]
        return encoded

    def _indices(self, values: np.ndarray, null: np.ndarray) -> np.ndarray:
        if len(self.strings) == 0 and not null.all():
            raise InvalidInputError(
                f"column {self.name!r}: cannot decode string indices, the column had no non-null values"
            )
        indices = np.clip(_round_half_away(np.where(null, 0.0, values)), 0, max(len(self.strings) - 1, 0))
        return indices.astype(np.intp)

    def decode_compact(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        null = np.isnan(values)
        return self._assemble(self._indices(values, null), ~null, np.zeros(len(values), dtype=bool))

    def decode_in_ranges(
        self, index: np.ndarray, exact: np.ndarray, range_lo: np.ndarray, range_hi: np.ndarray
    ) -> pd.Series:
        """`decode_in_ranges_compact` as a Series of the input dtype."""
        return self.expand(self.decode_in_ranges_compact(index, exact, range_lo, range_hi))

    def decode_in_ranges_compact(
        self, index: np.ndarray, exact: np.ndarray, range_lo: np.ndarray, range_hi: np.ndarray
    ) -> pd.Series:
        """Strings for synthetic indices, as `decode_compact` holds them: the exact string where
        `exact`, else `prefix*index`.

        `prefix` is the common prefix of strings[range_lo[i]] and strings[range_hi[i]] (inclusive integer
        indices into `strings`), e.g. "city_*37"; empty for a range of one index. A NaN index gives null. Prefixes are computed once per
        distinct (range_lo, range_hi) pair and labels once per distinct (pair, index).
        """
        index = _check_decodable(index)
        exact = np.asarray(exact, dtype=bool)
        range_lo = np.asarray(range_lo, dtype=np.int64)
        range_hi = np.asarray(range_hi, dtype=np.int64)
        if not (len(index) == len(exact) == len(range_lo) == len(range_hi)):
            raise InvalidInputError(f"column {self.name!r}: decode_in_ranges arrays differ in length")
        null = np.isnan(index)
        indices = self._indices(index, null)
        ranged = ~exact & ~null
        if not ranged.any():
            return self._assemble(indices, ~null, ranged)
        count = len(self.strings)
        lo, hi = range_lo[ranged], range_hi[ranged]
        if lo.min() < 0 or hi.max() >= count or (lo > hi).any():
            raise InvalidInputError(
                f"column {self.name!r}: string ranges must be inclusive indices within "
                f"0..{count - 1} with lo <= hi"
            )
        pair_codes, pairs = pd.factorize(lo * count + hi)
        # A range of one index has no common prefix to show: the "prefix" would be the string itself.
        prefixes = [
            os.path.commonprefix([self.strings[p // count], self.strings[p % count]])
            if p // count != p % count
            else ""
            for p in pairs
        ]
        label_codes, label_keys = pd.factorize(pair_codes.astype(np.int64) * count + indices[ranged])
        labels = np.array([f"{prefixes[key // count]}*{key % count}" for key in label_keys], dtype=object)
        return self._assemble(indices, ~null & exact, ranged, labels, label_codes)

    def _assemble(
        self,
        indices: np.ndarray,
        exact: np.ndarray,
        ranged: np.ndarray,
        labels: np.ndarray | None = None,
        label_codes: np.ndarray | None = None,
    ) -> pd.Series:
        """strings[indices] where `exact`, labels[label_codes] where `ranged`, null elsewhere, compact."""
        codes = np.full(len(indices), -1, dtype=np.int64)
        codes[exact] = indices[exact]
        values = self.strings
        if labels is not None:
            codes[ranged] = len(self.strings) + label_codes
            values = np.concatenate([self.strings, labels])
        return _categorical(codes, np.asarray(values, dtype=object), self.name)

    def expand(self, series: pd.Series) -> pd.Series:
        if not isinstance(self.dtype, pd.CategoricalDtype):
            return super().expand(series)
        values = np.asarray(series.cat.categories, dtype=object)
        categories = self.dtype.categories
        position = categories.get_indexer(values)
        new = np.flatnonzero(position < 0)
        if new.size:
            # `prefix*N` labels are not categories of the input: they are appended after the input's
            # categories (sorted, as the compact categories are), so the dtype differs only by these.
            position[new] = len(categories) + np.arange(new.size)
            categories = categories.append(pd.Index(values[new], dtype=categories.dtype))
        codes = np.append(position, -1).take(np.asarray(series.cat.codes))  # code -1 stays -1
        dtype = pd.CategoricalDtype(categories, self.dtype.ordered)
        return pd.Series(pd.Categorical.from_codes(codes, dtype=dtype), name=self.name)


def _factorize_strings(series: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(null mask, codes of the non-null rows, distinct non-null values as an object array of str)."""
    null = _null_mask(series)
    if isinstance(series.dtype, pd.CategoricalDtype):
        category_codes = np.asarray(series.cat.codes, dtype=np.int64)[~null]
        used, codes = np.unique(category_codes, return_inverse=True)
        uniques = np.asarray(series.cat.categories, dtype=object)[used]
    else:
        values = series.to_numpy(dtype=object)[~null]
        codes, uniques = pd.factorize(values)
        uniques = np.asarray(uniques, dtype=object)
        # pandas < 3 hashes object strings as C strings, so "a" and "a\x00b" collide; one cheap
        # elementwise comparison catches that, and the exact sort-based np.unique takes over.
        if not np.array_equal(uniques[codes], values):
            uniques, codes = np.unique(values, return_inverse=True)
    not_str = np.array([not isinstance(u, str) for u in uniques], dtype=bool)
    if not_str.any():
        if isinstance(series.dtype, pd.CategoricalDtype):
            first_bad = int(np.flatnonzero(not_str)[0])
            position = np.flatnonzero(~null)[_first_position(codes.reshape(-1) == first_bad)]
        else:
            position = _first_value_of_other_type(series, null)
        raise _unsupported(series, "expected only strings and nulls", int(position))
    return null, codes.reshape(-1), uniques


def _detect_resolution(units: np.ndarray, units_per_second: int) -> tuple[str, int]:
    """Coarsest of day..nanosecond dividing every value (values and the step are in the dtype's units).

    The loop always returns: the dtype's own unit (step 1) divides everything.
    """
    for name, nanoseconds in _RESOLUTIONS_NS:
        step, remainder = divmod(nanoseconds * units_per_second, 10**9)
        if remainder == 0 and (units.size == 0 or not np.any(units % step)):
            return name, step
    raise AssertionError("unreachable: step 1 divides every value")


class TimestampCodec(ColumnCodec):
    """datetime64 columns of any unit (s/ms/us/ns), naive or tz-aware -> seconds since 1800-01-01 UTC.

    tz-aware values are encoded as UTC instants and decoded back into the input's timezone. Naive values
    are read as UTC wall time. `resolution` is the coarsest of day, hour, minute, second, millisecond,
    microsecond, nanosecond dividing every input value; decoded values are rounded to it (half away
    from zero) and clipped to the unit's representable range, or first moved to the nearest first of a
    month or year (`calendar`).
    """

    kind = ColumnKind.TIMESTAMP

    def __init__(self, name: Any, dtype: Any, resolution: str, resolution_units: int) -> None:
        super().__init__(name, dtype)
        self.unit = np.datetime_data(_naive_numpy_dtype(dtype))[0]
        self.resolution = resolution
        self._resolution_units = resolution_units
        per_second = _UNITS_PER_SECOND[self.unit]
        self.resolution_seconds = resolution_units / per_second
        info = np.iinfo(np.int64)
        # The int64 minimum is NaT; stay one resolution step inside the range after rounding.
        low = (info.min // resolution_units + 1) * resolution_units
        high = (info.max // resolution_units) * resolution_units
        self._range = (_units_to_seconds(low, per_second), _units_to_seconds(high, per_second))

    @classmethod
    def fit(cls, series: pd.Series) -> tuple[TimestampCodec, np.ndarray]:
        units, null = _utc_units(series)
        unit = np.datetime_data(_naive_numpy_dtype(series.dtype))[0]
        resolution, step = _detect_resolution(units[~null], _UNITS_PER_SECOND[unit])
        if isinstance(series.dtype, pd.DatetimeTZDtype):
            # Rounding happens in UTC but must not move values off the local grid either (local
            # midnights are 23:00 UTC in Berlin): take the step that divides both readings.
            wall = series.dt.tz_localize(None).to_numpy().view(np.int64)[~null]
            wall_resolution, wall_step = _detect_resolution(wall, _UNITS_PER_SECOND[unit])
            if wall_step < step:
                resolution, step = wall_resolution, wall_step
        codec = cls(series.name, series.dtype, resolution, step)
        return codec, codec._encode_units(units, null)

    def _encode_units(self, units: np.ndarray, null: np.ndarray) -> np.ndarray:
        per_second = _UNITS_PER_SECOND[self.unit]
        encoded = _units_to_seconds(units, per_second)
        encoded[null] = np.nan
        return encoded

    def encode(self, series: pd.Series) -> np.ndarray:
        if series.dtype != self.dtype:
            raise _unsupported(series, f"expected dtype {self.dtype}")
        return self._encode_units(*_utc_units(series))

    def decode(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        null = np.isnan(values)
        seconds = _on_calendar(np.clip(np.where(null, 0.0, values), *self._range), self.calendar)
        units = _seconds_to_units(seconds, _UNITS_PER_SECOND[self.unit], self._resolution_units)
        units[null] = np.iinfo(np.int64).min  # NaT
        naive = pd.Series(units.view(f"datetime64[{self.unit}]"), name=self.name)
        if isinstance(self.dtype, pd.DatetimeTZDtype):
            return naive.dt.tz_localize("UTC").dt.tz_convert(self.dtype.tz).astype(self.dtype)
        return naive.astype(self.dtype)


def _on_calendar(seconds: np.ndarray, calendar: str | None) -> np.ndarray:
    return seconds if calendar is None else calendar_grid.nearest_start(seconds, calendar)


def _naive_numpy_dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, pd.DatetimeTZDtype):
        return np.dtype(f"datetime64[{dtype.unit}]")
    return np.dtype(dtype)


def _utc_units(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(int64 units since 1970-01-01 UTC, null mask) of a datetime64 column."""
    if isinstance(series.dtype, pd.DatetimeTZDtype):
        series = series.dt.tz_convert("UTC").dt.tz_localize(None)
    units = series.to_numpy().view(np.int64)
    return units, _null_mask(series)


def _units_to_seconds(units: np.ndarray | int, per_second: int) -> np.ndarray:
    """Seconds since 1800 as float64, with only one rounding (whole seconds are exact up to 2**53)."""
    units = np.asarray(units, dtype=np.int64)
    whole, fraction = np.divmod(units, per_second)
    return (whole.astype(np.float64) + EPOCH_1800_OFFSET_SECONDS) + fraction / per_second


def _seconds_to_units(seconds: np.ndarray, per_second: int, step: int) -> np.ndarray:
    """Seconds since 1800 -> int64 units since 1970, rounded to a multiple of `step` units."""
    if step >= per_second:
        step_seconds = step // per_second
        whole = _round_half_away(seconds / step_seconds) * step_seconds
        return (whole - EPOCH_1800_OFFSET_SECONDS).astype(np.int64) * per_second
    whole = np.floor(seconds)
    steps = _round_half_away((seconds - whole) * (per_second // step)).astype(np.int64)
    return (whole - EPOCH_1800_OFFSET_SECONDS).astype(np.int64) * per_second + steps * step


class DateCodec(_ObjectValuesCodec):
    """Object columns of datetime.date (+ nulls): TIMESTAMP at midnight UTC, decoded to date objects."""

    kind = ColumnKind.TIMESTAMP
    resolution: ClassVar[str] = "day"
    resolution_seconds: ClassVar[float] = 86_400.0
    # datetime.date covers years 1..9999.
    _range = (
        (dt.date.min.toordinal() - dt.date(1800, 1, 1).toordinal()) * 86_400.0,
        (dt.date.max.toordinal() - dt.date(1800, 1, 1).toordinal()) * 86_400.0,
    )

    def encode(self, series: pd.Series) -> np.ndarray:
        null = _null_mask(series)
        values = series.to_numpy(dtype=object)
        present = values[~null]
        # A type check as infer_dtype does it, but exact: datetime is a subclass of date and would lose
        # its time of day; this set-building pass costs ~0.1 s per million values.
        if {type(value) for value in present} - {dt.date}:
            position = _first_value_of_other_type(series, null)
            raise _unsupported(series, "expected only datetime.date values and nulls", position)
        # pandas parses date objects in C; "datetime64[s]" holds years 1..9999 on pandas 2 and 3.
        seconds = np.asarray(pd.array(present, dtype="datetime64[s]")).view(np.int64)
        encoded = np.full(len(values), np.nan)
        encoded[~null] = seconds.astype(np.float64) + EPOCH_1800_OFFSET_SECONDS
        return encoded

    def decode_compact(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        null = np.isnan(values)
        seconds = _on_calendar(np.clip(np.where(null, 0.0, values), *self._range), self.calendar)
        days = _round_half_away((seconds - EPOCH_1800_OFFSET_SECONDS) / 86_400.0).astype(np.int64)
        codes, uniques = _codes(days, null)
        return _categorical(codes, uniques.view("datetime64[D]").astype(object), self.name)


class IsoTextCodec(_ObjectValuesCodec):
    """Text columns of ISO 8601 dates or date-times in one layout (`iso_layouts`): TIMESTAMP, decoded
    to text in that layout, rounded to the coarsest of day..microsecond that divides every value (a
    layout of dates alone: days), or to the nearest first of a month or year (`calendar`), and clipped
    to years 1-9999."""

    kind = ColumnKind.TIMESTAMP
    # A quick look at this many of a column's distinct strings (spread over their sorted order) tells
    # whether it is worth reading them all.
    _SAMPLE = 64

    def __init__(self, name: Any, dtype: Any, layout: IsoLayout, resolution: str, step_microseconds: int):
        super().__init__(name, dtype)
        self.layout = layout
        self.resolution = resolution
        self._step = step_microseconds
        self.resolution_seconds = step_microseconds / 10**6
        last = DateCodec._range[1] + 86_400.0 - self.resolution_seconds
        self._range = (DateCodec._range[0], last)

    @classmethod
    def from_strings(
        cls, codec: StringCodec, encoded: np.ndarray
    ) -> tuple[IsoTextCodec, np.ndarray, np.ndarray] | None:
        """A fitted string column read as ISO text instead: (the codec, its encoding, per row whether
        its string is outside the layout, null in the encoding), or None when fewer than half of a
        sample of its distinct strings, or none of them, follow one layout."""
        strings = codec.strings
        if len(strings) == 0:
            return None
        sample = strings[np.linspace(0, len(strings) - 1, min(len(strings), cls._SAMPLE)).astype(np.intp)]
        parsed = iso_layouts.parse(sample)
        if parsed is None or 2 * np.count_nonzero(parsed.valid) < len(sample):
            return None
        null = np.isnan(encoded)
        index = np.where(null, 0, encoded).astype(np.intp)
        parsed = iso_layouts.parse(strings, np.bincount(index[~null], minlength=len(strings)))
        if parsed is None or not parsed.valid.any():
            return None
        outside = ~null & ~parsed.valid[index]
        iso = cls._fitted(codec.name, codec.dtype, parsed, index, null | outside)
        return iso, iso._encode_instants(parsed.microseconds[index], null | outside), outside

    @classmethod
    def fit(cls, series: pd.Series) -> tuple[IsoTextCodec, np.ndarray]:
        """Every non-null value must be ISO text in the layout most rows follow."""
        null, codes, uniques = _factorize_strings(series)
        parsed = iso_layouts.parse(uniques, np.bincount(codes, minlength=len(uniques)))
        if parsed is None:
            raise _unsupported(
                series, "expected ISO 8601 dates or date-times as text", _first_position(~null)
            )
        index = np.zeros(len(series), dtype=np.intp)
        index[~null] = codes
        codec = cls._fitted(series.name, series.dtype, parsed, index, null)
        return codec, codec.encode(series)

    @classmethod
    def _fitted(cls, name, dtype, parsed: iso_layouts.ParsedText, index, skip) -> IsoTextCodec:
        used = parsed.microseconds[np.unique(index[~skip])]
        resolution, step = _detect_resolution(used, 10**6)
        return cls(name, dtype, parsed.layout, resolution, step)

    def encode(self, series: pd.Series) -> np.ndarray:
        null, codes, uniques = _factorize_strings(series)
        parsed = iso_layouts.parse(uniques, layout=self.layout)
        valid = np.zeros(len(uniques), dtype=bool) if parsed is None else parsed.valid
        if not valid[codes].all():
            position = np.flatnonzero(~null)[_first_position(~valid[codes])]
            raise _unsupported(series, f"expected ISO 8601 text as {self.layout.describe()}", int(position))
        microseconds = np.zeros(len(series), dtype=np.int64)
        if parsed is not None:
            microseconds[~null] = parsed.microseconds[codes]
        return self._encode_instants(microseconds, null)

    @staticmethod
    def _encode_instants(microseconds: np.ndarray, null: np.ndarray) -> np.ndarray:
        encoded = _units_to_seconds(microseconds, 10**6)
        encoded[null] = np.nan
        return encoded

    def decode_compact(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        null = np.isnan(values)
        seconds = _on_calendar(np.clip(np.where(null, 0.0, values), *self._range), self.calendar)
        codes, uniques = _codes(_seconds_to_units(seconds, 10**6, self._step), null)
        return _categorical(codes, self.layout.format(uniques), self.name)


class TimeCodec(_ObjectValuesCodec):
    """Object columns of naive datetime.time (+ nulls): TIMESTAMP on 1800-01-01, decoded to time objects.

    `resolution` is hour, minute, second, millisecond or microsecond (datetime.time has no finer unit).
    """

    kind = ColumnKind.TIMESTAMP

    def __init__(self, name: Any, dtype: Any, resolution: str, resolution_microseconds: int) -> None:
        super().__init__(name, dtype)
        self.resolution = resolution
        self._step = resolution_microseconds
        self.resolution_seconds = resolution_microseconds / 1e6

    @classmethod
    def fit(cls, series: pd.Series) -> tuple[TimeCodec, np.ndarray]:
        microseconds, null = _time_microseconds(series)
        resolution, step = _detect_resolution(microseconds[~null], 10**6)
        codec = cls(series.name, series.dtype, resolution, step)
        return codec, codec._to_seconds(microseconds, null)

    @staticmethod
    def _to_seconds(microseconds: np.ndarray, null: np.ndarray) -> np.ndarray:
        encoded = microseconds / 1e6
        encoded[null] = np.nan
        return encoded

    def encode(self, series: pd.Series) -> np.ndarray:
        return self._to_seconds(*_time_microseconds(series))

    def decode_compact(self, values: np.ndarray) -> pd.Series:
        values = _check_decodable(values)
        null = np.isnan(values)
        last = 86_400 * 10**6 - self._step
        microseconds = np.clip(np.where(null, 0.0, values) * 1e6, 0, last)
        microseconds = (_round_half_away(microseconds / self._step) * self._step).astype(np.int64)
        codes, uniques = _codes(microseconds, null)
        times = np.asarray(pd.to_datetime(uniques, unit="us").time, dtype=object)
        return _categorical(codes, times, self.name)


def _time_microseconds(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    null = _null_mask(series)
    values = series.to_numpy(dtype=object)
    codes, uniques = pd.factorize(values[~null])
    bad = np.array([type(u) is not dt.time or u.tzinfo is not None for u in uniques], dtype=bool)
    if bad.any():
        position = np.flatnonzero(~null)[_first_position(np.isin(codes, np.flatnonzero(bad)))]
        raise _unsupported(series, "expected only naive datetime.time values and nulls", int(position))
    unique_us = np.array(
        [((u.hour * 60 + u.minute) * 60 + u.second) * 10**6 + u.microsecond for u in uniques], dtype=np.int64
    )
    microseconds = np.zeros(len(values), dtype=np.int64)
    microseconds[~null] = unique_us[codes]
    return microseconds, null


# --------------------------------------------------------------------------------------------------
# detection


def _fit(series: pd.Series) -> tuple[ColumnCodec, np.ndarray]:
    """Detect the column's kind from its dtype (and, for object columns, its values) and fit a codec."""
    dtype = series.dtype
    name = series.name
    if isinstance(dtype, pd.CategoricalDtype):
        # A column of nulls only has no categories, whatever their index's dtype (pandas makes it float).
        category_kind = infer_dtype(dtype.categories, skipna=True) if len(dtype.categories) else "empty"
        if category_kind not in ("string", "empty"):
            raise _unsupported_dtype(
                series,
                f"only categories of strings are supported (these are {category_kind}); "
                "cast the column to its categories' dtype",
            )
        return StringCodec.fit(series)
    if pd.api.types.is_bool_dtype(dtype) and not _is_object(dtype):
        codec = BooleanCodec(name, dtype)
        return codec, codec.encode(series)
    if pd.api.types.is_integer_dtype(dtype):
        codec = IntegerCodec(name, dtype)
        return codec, codec.encode(series)
    if pd.api.types.is_float_dtype(dtype):
        return RealCodec.fit(series)
    if isinstance(dtype, pd.DatetimeTZDtype) or (isinstance(dtype, np.dtype) and dtype.kind == "M"):
        if np.datetime_data(_naive_numpy_dtype(dtype))[0] not in _UNITS_PER_SECOND:
            raise _unsupported_dtype(series, "datetime64 units other than s, ms, us, ns are not supported")
        return TimestampCodec.fit(series)
    if isinstance(dtype, pd.StringDtype):
        return StringCodec.fit(series)
    if _is_object(dtype):
        return _fit_object(series)
    raise _unsupported_dtype(
        series,
        "dtype not supported (supported: bool, int, float, decimal, string, category of strings, "
        "datetime64, date, time)",
    )


def _unsupported_dtype(series: pd.Series, reason: str) -> UnsupportedColumnError:
    """The whole dtype is at fault; still show the first non-null value so the user can recognise it."""
    present = np.flatnonzero(~_null_mask(series))
    return _unsupported(series, reason, int(present[0]) if present.size else None)


def _fit_object(series: pd.Series) -> tuple[ColumnCodec, np.ndarray]:
    inferred = infer_dtype(series, skipna=True)
    if inferred in ("string", "empty"):
        return StringCodec.fit(series)
    if inferred == "boolean":
        codec: ColumnCodec = BooleanCodec(series.name, series.dtype)
        return codec, codec.encode(series)
    if inferred == "integer":
        codec = IntegerCodec(series.name, series.dtype)
        return codec, codec.encode(series)
    if inferred in ("floating", "mixed-integer-float"):
        return RealCodec.fit(series)
    if inferred == "decimal":
        return DecimalCodec.fit(series)
    if inferred == "date":
        codec = DateCodec(series.name, series.dtype)
        return codec, codec.encode(series)
    if inferred == "time":
        return TimeCodec.fit(series)
    null = _null_mask(series)
    reason = {
        "bytes": "bytes values are not supported (decode them to str first)",
        "datetime": "object columns of datetime values are not supported (convert with pd.to_datetime)",
    }.get(inferred, f"values of mixed or unsupported types ({inferred})")
    position = _first_position(~null) if inferred == "bytes" else _first_value_of_other_type(series, null)
    raise _unsupported(series, reason, position)


# Forcing a kind is allowed where the cast back to the input dtype stays meaningful.
_ALLOWED_KIND_OVERRIDES = {
    (ColumnKind.INTEGER, ColumnKind.REAL),
    (ColumnKind.REAL, ColumnKind.INTEGER),
    (ColumnKind.BOOLEAN, ColumnKind.INTEGER),
}


def _fit_with_kind(series: pd.Series, kind: ColumnKind | None) -> tuple[ColumnCodec, np.ndarray]:
    if not isinstance(series, pd.Series):
        raise InvalidInputError(f"expected a pandas Series, got {type(series).__name__}")
    codec, encoded = _fit(series)
    if kind is None or ColumnKind(kind) == codec.kind:
        return codec, encoded
    kind = ColumnKind(kind)
    string = isinstance(codec, StringCodec) and not isinstance(series.dtype, pd.CategoricalDtype)
    if kind == ColumnKind.TIMESTAMP and string:
        return IsoTextCodec.fit(series)
    if (codec.kind, kind) not in _ALLOWED_KIND_OVERRIDES or isinstance(codec, DecimalCodec):
        raise _unsupported(series, f"a {codec.kind.value} column cannot be treated as {kind.value}")
    if codec.kind == ColumnKind.BOOLEAN:
        # Rounding then clipping to 0..1 is the same as x >= 0.5, so the boolean codec stays.
        codec.kind = kind
        return codec, encoded
    return IntegerCodec(series.name, series.dtype, kind=kind), encoded


def codec_for(series: pd.Series, kind: ColumnKind | None = None) -> ColumnCodec:
    """Fit a codec on `series`, detecting its kind, or forcing `kind` where that makes sense.

    Allowed overrides: an integer column as REAL, a real column as INTEGER (decoded values rounded to
    whole numbers, dtype kept), a boolean column as INTEGER, a string column of ISO 8601 dates or
    date-times as TIMESTAMP (`IsoTextCodec`: decoded to text in the same layout). Anything else raises
    UnsupportedColumnError.
    """
    return _fit_with_kind(series, kind)[0]


def encode_frame(
    df: pd.DataFrame, kinds: Mapping[str, ColumnKind] | None = None
) -> tuple[list[ColumnCodec], np.ndarray]:
    """Fit one codec per column and return them with the encoded (rows, columns) float64 matrix.

    The matrix is Fortran-ordered so that each column is contiguous, as the engines read by column.
    """
    kinds = dict(kinds or {})
    unknown = set(kinds) - set(df.columns)
    if unknown:
        raise InvalidInputError(
            f"column kinds given for columns not in the table: {sorted(map(str, unknown))}"
        )
    if not df.columns.is_unique:
        duplicated = df.columns[df.columns.duplicated()].tolist()
        raise InvalidInputError(f"duplicate column names: {duplicated}")
    codecs: list[ColumnCodec] = []
    matrix = np.empty((len(df), len(df.columns)), dtype=np.float64, order="F")
    for position, column in enumerate(df.columns):
        codec, encoded = _fit_with_kind(df[column], kinds.get(column))
        codecs.append(codec)
        matrix[:, position] = encoded
    return codecs, matrix


def _is_decoded(codec: ColumnCodec, column: pd.Series) -> bool:
    if column.dtype == codec.dtype:
        return True
    # decode_in_ranges may add categories; string output is never float.
    return isinstance(codec, StringCodec) and not pd.api.types.is_numeric_dtype(column.dtype)


def decode_frame(codecs: Sequence[ColumnCodec], columns: Sequence[Any]) -> pd.DataFrame:
    """Assemble a DataFrame from engine output, one entry of `columns` per codec, in order.

    An entry is either float64 values to decode (ndarray or float Series) or a Series already decoded,
    e.g. by `StringCodec.decode_in_ranges`: a Series whose dtype equals the codec's dtype is taken as
    is (for float dtypes decoding again would change nothing, as rounding is idempotent).
    """
    if len(codecs) != len(columns):
        raise InvalidInputError(f"decode_frame got {len(codecs)} codecs but {len(columns)} columns")
    decoded: dict[Any, pd.Series] = {}
    lengths = set()
    for codec, column in zip(codecs, columns, strict=True):
        if isinstance(column, pd.Series) and _is_decoded(codec, column):
            series = column.reset_index(drop=True).rename(codec.name)
        else:
            series = codec.decode(np.asarray(column, dtype=np.float64))
        decoded[codec.name] = series
        lengths.add(len(series))
    if len(lengths) > 1:
        raise InvalidInputError(f"decode_frame got columns of different lengths: {sorted(lengths)}")
    if not decoded:
        return pd.DataFrame()
    return pd.DataFrame(decoded)
