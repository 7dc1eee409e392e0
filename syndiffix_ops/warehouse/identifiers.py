"""Identifiers per dialect: length limits, quoting for statements sent without parameters, MySQL fixes.

PostgreSQL truncates identifiers longer than 63 bytes (UTF-8) without an error, so a long target name
would be written under a shorter name and found missing on the next run; MySQL/MariaDB refuse names
longer than 64 characters with a raw driver error. Both are checked before any data moves.

SQLAlchemy's identifier preparer doubles `%` for drivers whose placeholders start with `%` (psycopg,
PyMySQL): right for statements executed with parameters, wrong for `COPY`, which psycopg sends as is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import sqlalchemy as sa

from syndiffix_ops.errors import PermanentError

# (limit, unit) per dialect; SQLite has no limit.
_LIMITS = {"postgresql": (63, "bytes"), "mysql": (64, "characters"), "mariadb": (64, "characters")}


class IdentifierError(PermanentError, ValueError):
    """A name the target database cannot hold as given; the message names it, the limit and the fix."""


def identifier_limit(dialect: sa.Dialect) -> tuple[int, str] | None:
    """(maximum length, unit) of one identifier on `dialect`, or None when it has no limit."""
    return _LIMITS.get(dialect.name)


def _length(name: str, unit: str) -> int:
    return len(name.encode()) if unit == "bytes" else len(name)


def check_identifiers(dialect: sa.Dialect, names: Iterable[tuple[str, str]]) -> None:
    """Raise IdentifierError for the first (what, name) pair whose name exceeds the dialect's limit.

    `what` says what the name is, side first, e.g. "target table" or "target table t: column".
    """
    limit = identifier_limit(dialect)
    if limit is None:
        return
    maximum, unit = limit
    for what, name in names:
        if dialect.name in ("mysql", "mariadb"):
            _check_mysql_characters(what, name)
        length = _length(name, unit)
        if length > maximum:
            raise IdentifierError(
                f"{what} {name!r} is {length} {unit} long, but {dialect.name} allows at most "
                f"{maximum} {unit} per name (it would be cut short or refused); choose a shorter name"
            )


def _check_mysql_characters(what: str, name: str) -> None:
    """MySQL/MariaDB store names in 3-byte UTF-8 and drop trailing spaces: refuse what they cannot hold."""
    beyond = [c for c in name if ord(c) > 0xFFFF]
    if beyond:
        raise IdentifierError(
            f"{what} {name!r} holds {beyond[0]!r} (U+{ord(beyond[0]):X}), a character MySQL/MariaDB names "
            "cannot hold (only the Basic Multilingual Plane); choose another name"
        )
    if name != name.rstrip(" "):
        raise IdentifierError(
            f"{what} {name!r} ends with a space, which MySQL/MariaDB names cannot; choose another name"
        )


def derived_name(prefix: str, target: str, run: str) -> str:
    """A helper table's name for `target`: the prefix, a hash of the target's name and the run's id.

    Fixed length (prefix + 25 characters), so it fits every dialect's limit whatever the target's name,
    and the hash lets a later run find what an interrupted run of the same target left behind.
    """
    return f"{prefix}{target_tag(target)}_{run}"


def target_tag(target: str) -> str:
    return hashlib.sha256(target.encode()).hexdigest()[:8]


def quote_plain(name: str) -> str:
    """A PostgreSQL identifier quoted for a statement sent without parameters (no `%` doubling)."""
    return '"' + name.replace('"', '""') + '"'


def plain_table_name(schema: str | None, name: str) -> str:
    return f"{quote_plain(schema)}.{quote_plain(name)}" if schema else quote_plain(name)
