"""Exceptions raised by syndiffix_core.

One hierarchy for every engine so callers can catch `SyndiffixError` for "anything the core refused",
while bad input stays a `ValueError` for code that only knows the standard library.
"""

from __future__ import annotations

from typing import Any


class SyndiffixError(Exception):
    """Base of every error raised on purpose by syndiffix_core."""


class UnsupportedColumnError(SyndiffixError, ValueError):
    """A column whose dtype or values cannot be cast to a column kind.

    The message names the column, its dtype and, when one value is at fault, that value and its row
    label; the same facts are kept as attributes for callers that build their own messages.
    """

    def __init__(
        self,
        message: str,
        *,
        column: Any = None,
        dtype: Any = None,
        value: Any = None,
        row: Any = None,
    ) -> None:
        super().__init__(message)
        self.column = column
        self.dtype = dtype
        self.value = value
        self.row = row


class SynthesisError(SyndiffixError):
    """Synthesis could not produce a result."""


class InvalidInputError(SynthesisError, ValueError):
    """The caller passed input that the engine cannot work with (names the column/value at fault)."""
