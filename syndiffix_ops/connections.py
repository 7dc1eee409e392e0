"""Source and target connections, with one-line errors that name the side and say what to fix.

Drivers fail in their own words ("Can't load plugin: sqlalchemy.dialects:postgres", "No module named
'psycopg2'", a multi-line libpq message); here each becomes one line naming `source` or `target`, the
database type, host, port and database (never the user's password, and never any part of a URL that
may hold one), the cause and the fix.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from syndiffix_ops.config import ConfigError, unknown_dialect_problem, url_shape_problem
from syndiffix_ops.errors import PermanentError, TransientError, is_permanent

# DBAPI modules SQLAlchemy may ask for, and what installs them.
_DRIVER_PACKAGES = {
    "psycopg2": "psycopg2-binary",
    "psycopg": "psycopg[binary]",
    "MySQLdb": "mysqlclient",
    "pymysql": "pymysql",
    "mysql": "mysql-connector-python",
    "asyncpg": "asyncpg",
    "pyodbc": "pyodbc",
    "oracledb": "oracledb",
}
_DEFAULT_DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mariadb+pymysql",
}
# What connection failures look like in the drivers' messages: (pattern, cause and fix, permanent).
_CAUSES = [
    (
        r"password authentication failed|access denied|authentication failed|role .* does not exist",
        "the server refused the user or password; check them in the {side} URL",
        True,
    ),
    (
        r"connection refused|can't connect|could not connect|timeout expired|timed out|no route",
        "nothing answers at {where}; check the host and port in the {side} URL and that the server runs",
        False,
    ),
    (
        r"failed to resolve host|name or service not known|unknown (mysql server )?host|nodename nor servname",
        "the host name does not resolve; check the host in the {side} URL",
        True,
    ),
    (
        r'database ".*" does not exist|unknown database',
        "the database does not exist on that server; check the database name in the {side} URL",
        True,
    ),
]


class ConnectFailure(RuntimeError):
    """The source or target cannot be reached or refuses the login; the message is one line."""


class PermanentConnectFailure(ConnectFailure, PermanentError):
    """Wrong user, password, host name or database: retrying will not help."""


class TransientConnectFailure(ConnectFailure, TransientError):
    """Nothing answered: the server may be restarting."""


def create_engine(
    side: str, given: sa.Engine | str | None, url: Callable[[], str], label: str
) -> tuple[sa.Engine, bool]:
    """The engine to use for `side` and whether it was created here (and so is disposed of by the
    caller); a malformed URL, an unknown database type or a missing driver module is a ConfigError
    naming the table (`label`) and the side."""
    if isinstance(given, sa.Engine):
        return given, False
    text = given if isinstance(given, str) else url()
    problem = url_shape_problem(text)
    if problem:
        raise ConfigError([f"{label}: {side}: not a SQLAlchemy URL ({problem})"])
    try:
        return sa.create_engine(text), True
    except sa.exc.NoSuchModuleError:
        problem = unknown_dialect_problem(make_url(text).drivername)
        raise ConfigError([f"{label}: {side}: {problem}"]) from None
    except ImportError as error:
        raise ConfigError([f"{label}: {_missing_driver(side, make_url(text), error)}"]) from None


@contextlib.contextmanager
def open_engines(
    source: sa.Engine | str | None,
    target: sa.Engine | str | None,
    source_url: Callable[[], str],
    target_url: Callable[[], str],
    label: str,
) -> Iterator[tuple[sa.Engine, sa.Engine]]:
    """The source and target engines of a run (see create_engine); those created here are disposed of
    when the run ends, those given are left to the caller."""
    source_engine, owns_source = create_engine("source", source, source_url, label)
    try:
        target_engine, owns_target = create_engine("target", target, target_url, label)
    except ConfigError:
        if owns_source:
            source_engine.dispose()
        raise
    try:
        yield source_engine, target_engine
    finally:
        if owns_source:
            source_engine.dispose()
        if owns_target:
            target_engine.dispose()


@contextlib.contextmanager
def connect(engine: sa.Engine, side: str, label: str) -> Iterator[sa.Connection]:
    """engine.connect() with a failure to connect (not a failing statement later) as one line."""
    try:
        conn = engine.connect()
    except sa.exc.DBAPIError as error:
        raise _connect_failure(side, engine.url, error, label) from None
    with conn:
        yield conn


def describe(url: sa.URL) -> str:
    """The database type, host, port and database of a URL: what a message may show of it."""
    if url.get_backend_name() == "sqlite":
        return f"sqlite file {url.database or '(in memory)'}"
    port = f":{url.port}" if url.port else ""
    return (
        f"{url.get_backend_name()} database {url.database or '(default)'} at {url.host or 'localhost'}{port}"
    )


def _connect_failure(side: str, url: sa.URL, error: sa.exc.DBAPIError, label: str) -> ConnectFailure:
    driver_text = " ".join(str(error.orig).split())
    where = f"{url.host or 'localhost'}:{url.port}" if url.port else (url.host or "localhost")
    for pattern, cause, permanent in _CAUSES:
        if re.search(pattern, driver_text, re.IGNORECASE):
            kind = PermanentConnectFailure if permanent else TransientConnectFailure
            fix = cause.format(side=side, where=where)
            return kind(f"{label}: {side}: cannot connect to {describe(url)}: {fix}")
    kind = PermanentConnectFailure if is_permanent(error) else TransientConnectFailure
    summary = driver_text if len(driver_text) <= 200 else driver_text[:200] + "..."
    if url.password:
        summary = summary.replace(str(url.password), "***")
    return kind(f"{label}: {side}: cannot connect to {describe(url)}: {summary}")


def _missing_driver(side: str, url: sa.URL, error: ImportError) -> str:
    module = getattr(error, "name", None) or str(error)
    package = _DRIVER_PACKAGES.get(module.split(".")[0], module)
    default = _DEFAULT_DRIVERS.get(url.get_backend_name())
    alternative = f", or use {default}:// (installed with syndiffix-ops)" if default else ""
    return (
        f"{side}: the {url.drivername} URL needs the Python module {module!r}, which is not installed; "
        f"pip install {package}{alternative}"
    )
