"""ISO 8601 dates and date-times written as text: which layout a column's strings follow, their
instants, and instants written back in that layout.

A layout is the date (`2004-01-31`), optionally followed by a `T` or a space and the time to the
minute (`13:40`), the second (`13:40:36`) or a fraction of 1-6 digits (`13:40:36.250`), and after a
time optionally `Z` (UTC). Other offsets are not read: such a column stays text. Instants are
microseconds since 1970-01-01 (int64), for years 0001-9999.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_PATTERN = (
    r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})"
    r"(?:(?P<sep>[T ])(?P<hour>\d{2}):(?P<minute>\d{2})(?::(?P<second>\d{2})(?:\.(?P<fraction>\d{1,6}))?)?"
    r"(?P<zone>Z)?)?$"
)
_MICROSECONDS_PER_DAY = 86_400 * 10**6
_SEPARATORS = ("", "T", " ")
_DATE, _MINUTE, _SECOND, _FRACTION = range(4)


@dataclass(frozen=True)
class IsoLayout:
    separator: str  # "" for a date alone, else "T" or " "
    precision: int  # _DATE, _MINUTE, _SECOND or _FRACTION
    fraction_digits: int  # 1-6 with _FRACTION, else 0
    zulu: bool = False  # the time ends in "Z"

    @classmethod
    def _of_code(cls, code: int) -> IsoLayout:
        return cls(_SEPARATORS[code // 100 % 10], code // 10 % 10, code % 10, code >= 1000)

    @property
    def _code(self) -> int:
        return _layout_code(
            self.zulu, _SEPARATORS.index(self.separator), self.precision, self.fraction_digits
        )

    def describe(self) -> str:
        time = ("", "HH:MM", "HH:MM:SS", "HH:MM:SS." + "f" * self.fraction_digits)[self.precision]
        return "YYYY-MM-DD" + (self.separator + time if time else "") + ("Z" if self.zulu else "")

    def format(self, microseconds: np.ndarray) -> np.ndarray:
        """Instants (int64 microseconds since 1970, years 1-9999) as text in this layout."""
        instants = np.asarray(microseconds, dtype=np.int64).view("datetime64[us]")
        unit = ("D", "m", "s", "us")[self.precision]
        text = np.datetime_as_string(instants, unit=unit)  # "YYYY-MM-DDTHH:MM:SS.ffffff" cut to `unit`
        # Fixed-width text with four-digit years: the separator and the fraction's digits are columns
        # of its UTF-32 code units.
        width = (10, 16, 19, 20 + self.fraction_digits)[self.precision]
        # Shaped by the item size, not -1: a column drawn all null formats no instant at all.
        chars = text.dtype.itemsize // 4
        units = np.ascontiguousarray(text.view(np.uint32).reshape(len(text), chars)[:, :width])
        if self.separator == " ":
            units[:, 10] = ord(" ")
        if self.zulu:
            units = np.c_[units, np.full(len(units), ord("Z"), dtype=np.uint32)]
            width += 1
        return np.ascontiguousarray(units).reshape(-1).view(f"<U{width}").astype(object)


@dataclass(frozen=True)
class ParsedText:
    """Strings read against one layout: the layout most of the rows follow, each string's instant and
    whether it follows that layout as a valid date and time (where it does not, its instant is 0)."""

    layout: IsoLayout
    microseconds: np.ndarray  # int64 per string
    valid: np.ndarray  # bool per string


def parse(
    strings: np.ndarray, rows_per_string: np.ndarray | None = None, *, layout: IsoLayout | None = None
) -> ParsedText | None:
    """Distinct strings read as ISO dates or date-times: None when none follows any layout. The
    layout is `layout`, or else the one followed by the most rows (`rows_per_string`; one each by
    default; ties to the shorter layout)."""
    groups = pc.extract_regex(pa.array(strings, type=pa.string()), _PATTERN)
    matched = np.asarray(groups.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    if not matched.any():
        return None
    number = {
        name: _digits(_field(groups, name)) for name in ("year", "month", "day", "hour", "minute", "second")
    }
    fraction_text = _field(groups, "fraction")
    digits = np.asarray(pc.fill_null(pc.utf8_length(fraction_text), 0).to_numpy(zero_copy_only=False))
    separator = np.asarray(_field(groups, "sep").to_numpy(zero_copy_only=False), dtype=object)
    precision = np.where(
        digits > 0,
        _FRACTION,
        np.where(number["second"] >= 0, _SECOND, np.where(number["hour"] >= 0, _MINUTE, _DATE)),
    )
    separator_code = np.where(separator == "T", 1, np.where(separator == " ", 2, 0))
    zulu = np.asarray(_field(groups, "zone").is_valid().to_numpy(zero_copy_only=False), dtype=int)
    codes = _layout_code(zulu, separator_code, precision, digits)
    if layout is None:
        weights = np.ones(len(strings)) if rows_per_string is None else np.asarray(rows_per_string, float)
        layouts, inverse = np.unique(codes[matched], return_inverse=True)
        chosen = int(layouts[np.argmax(np.bincount(inverse, weights=weights[matched]))])
    else:
        chosen = layout._code
    microseconds, valid = _instants(number, _fraction_microseconds(fraction_text, digits))
    valid &= matched & (codes == chosen)
    return ParsedText(IsoLayout._of_code(chosen), np.where(valid, microseconds, 0), valid)


def _layout_code(zulu, separator, precision, fraction_digits):
    """One number per layout (of scalars or per string of arrays): `IsoLayout._of_code` reads it back."""
    return zulu * 1000 + separator * 100 + precision * 10 + fraction_digits


def _field(groups: pa.StructArray, name: str) -> pa.Array:
    """One group's text, null where the string does not match or the (optional) group is empty."""
    text = pc.struct_field(groups, name)
    return pc.if_else(pc.greater(pc.utf8_length(text), 0), text, pa.scalar(None, pa.string()))


def _digits(column: pa.Array) -> np.ndarray:
    """The fields' numbers, -1 where absent."""
    return np.asarray(pc.fill_null(pc.cast(column, pa.int64()), -1).to_numpy(zero_copy_only=False))


def _fraction_microseconds(fraction_text: pa.Array, digits: np.ndarray) -> np.ndarray:
    value = np.asarray(pc.fill_null(pc.cast(fraction_text, pa.int64()), 0).to_numpy(zero_copy_only=False))
    return value * 10 ** (6 - np.minimum(digits, 6))


def _instants(number: dict[str, np.ndarray], fraction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Microseconds since 1970 and whether each is a real date and time of years 1-9999."""
    year, month, day = number["year"], number["month"], number["day"]
    hour, minute, second = (np.maximum(number[name], 0) for name in ("hour", "minute", "second"))
    valid = (
        (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (hour < 24) & (minute < 60) & (second < 60)
    )
    months = np.where(valid, (year - 1970) * 12 + month - 1, 0).astype("datetime64[M]")
    first_day = months.astype("datetime64[D]")
    month_days = ((months + np.timedelta64(1, "M")).astype("datetime64[D]") - first_day).astype(np.int64)
    valid &= day <= month_days
    days = (first_day.astype(np.int64) + np.where(valid, day - 1, 0)).astype(np.int64)
    seconds = hour * 3_600 + minute * 60 + second
    return days * _MICROSECONDS_PER_DAY + seconds * 10**6 + fraction, valid
