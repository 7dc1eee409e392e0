"""Which failures a retry can fix: the error classes of the warehouse layer and `is_permanent`.

A scheduler retries failed work. That helps when the cause passes (a connection dropped, a lock was
held, the server restarted) and only wastes time and hides the cause when it does not (a config
mistake, a missing table or column, a type the policy refuses, a source schema that drifted). Every
error this package raises for the second kind derives from PermanentError; `is_permanent` also sorts
the database drivers' errors by their SQLSTATE (PostgreSQL) or error number (MySQL/MariaDB).
Anything unknown counts as transient: a retry of it costs time, never data.
"""

from __future__ import annotations


class PermanentError(Exception):
    """Retrying cannot succeed until someone changes the config, the source or the target."""


class TransientError(Exception):
    """The same work may succeed when tried again."""


class LockTimeout(TransientError):
    """Another run held the lock on a target table for longer than the wait allowed."""


# PostgreSQL SQLSTATE classes and codes that pass with time (connection, resources, locks, shutdown,
# serialization). Classes 22 (data), 28 (authorization), 3D/3F (database/schema), 42 (syntax or an
# undefined table/column) and 0A (feature) do not.
_PG_TRANSIENT_CLASSES = {"08", "40", "53", "57", "58"}
# Concurrent DDL (two runs creating one schema, table or type) fails with a "duplicate" error that a
# retry, which finds the object in place, does not meet again.
_PG_TRANSIENT_CODES = {"55P03", "55006", "42P06", "42P07", "42710", "23505"}
_PG_PERMANENT_CLASSES = {"0A", "22", "28", "3D", "3F", "42", "44"}
# MySQL/MariaDB error numbers: lock wait timeout, deadlock, gone away, lost connection, can't connect,
# too many connections, server shutdown.
_MYSQL_TRANSIENT = {1205, 1213, 2002, 2003, 2006, 2013, 1040, 1053, 1927}
# unknown database/table/column, access denied, syntax, data too long/out of range/incorrect value.
_MYSQL_PERMANENT = {1044, 1045, 1049, 1054, 1064, 1146, 1264, 1292, 1366, 1406}


def is_permanent(error: BaseException) -> bool:
    """True when retrying `error` cannot help (see the module docstring)."""
    if isinstance(error, PermanentError):
        return True
    if isinstance(error, TransientError):
        return False
    driver_error = getattr(error, "orig", None)  # SQLAlchemy's DBAPIError wraps the driver's error
    if getattr(error, "connection_invalidated", False):
        return False
    verdict = _driver_verdict(driver_error if driver_error is not None else error)
    if verdict is not None:
        return verdict
    cause = error.__cause__
    return cause is not None and cause is not error and is_permanent(cause)


def _driver_verdict(error: BaseException) -> bool | None:
    sqlstate = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
    if isinstance(sqlstate, str) and len(sqlstate) == 5:
        if sqlstate in _PG_TRANSIENT_CODES or sqlstate[:2] in _PG_TRANSIENT_CLASSES:
            return False
        return True if sqlstate[:2] in _PG_PERMANENT_CLASSES else None
    code = error.args[0] if error.args and isinstance(error.args[0], int) else None
    if type(error).__module__.startswith("pymysql") and code is not None:
        if code in _MYSQL_TRANSIENT:
            return False
        return True if code in _MYSQL_PERMANENT else None
    if type(error).__module__.startswith("sqlite3"):
        # "database is locked"/"busy" pass when the other writer commits; a missing table does not.
        message = str(error).lower()
        if "locked" in message or "busy" in message:
            return False
        return True if "no such table" in message or "no such column" in message else None
    return None
