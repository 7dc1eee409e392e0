"""PostgreSQL fast path: COPY text format both ways, parsed and formatted a chunk at a time.

Fetching rows through a cursor builds a Python tuple per row and a driver object per value, and psycopg's
`write_row` formats a row per call; on a million rows that costs several times the COPY itself. Here
the read parses whole COPY chunks with pandas' C CSV parser, and the write formats whole columns at
once, so the client keeps up with the server (and works while the server ingests the previous chunk).

COPY text format: tab-separated, one row per line, NULL is `\\N`, and inside values a backslash escapes
itself, tab, newline, carriage return (and, on output, backspace, form feed, vertical tab). Only string
columns can contain backslashes, so only they are unescaped or escaped. The session is set to ISO dates
and UTC for the duration of the read so timestamps parse without guessing.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import functools
import io
import queue
import re
import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import psycopg
import sqlalchemy as sa
from psycopg import pq

from syndiffix_ops.warehouse.copy_binary import SIGNATURE, TRAILER, binary_encoders, encode_rows
from syndiffix_ops.warehouse.copy_binary_read import binary_plan, decode
from syndiffix_ops.warehouse.identifiers import plain_table_name, quote_plain
from syndiffix_ops.warehouse.types import ColumnValueError, ValueKind, to_python

NULL = "\\N"
_READ_CHUNK_BYTES = 16 * 1024 * 1024
_WRITE_CHUNK_ROWS = 50_000
_UNESCAPE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_ESCAPED = re.compile(r"\\(.)", re.DOTALL)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def is_psycopg(conn: sa.Connection) -> bool:
    return conn.dialect.name == "postgresql" and conn.dialect.driver == "psycopg"


# --------------------------------------------------------------------------------------------- read


def copy_out(
    conn: sa.Connection,
    statement: sa.Select,
    names: Sequence[str],
    kinds: Sequence[ValueKind | None],
    *,
    as_text: Sequence[bool],
    binary: bool = True,
) -> Iterator[list[pd.Series]]:
    """Run `COPY (statement) TO STDOUT` and yield the rows a chunk at a time, one Series per column:
    in binary where every column has an exact binary reading (see copy_binary_read), else (or with
    binary=False) as text.

    Columns flagged in `as_text` (AID columns of non-integer types) stay strings.
    """
    plan = binary_plan(list(statement.selected_columns), kinds, as_text) if binary else None
    if plan is not None:
        selected, decoders = plan
        yield from _copy_out_binary(conn, statement.with_only_columns(*selected), names, decoders)
        return
    compiled = statement.compile(dialect=conn.dialect)
    conn.exec_driver_sql("SET LOCAL DateStyle = 'ISO, YMD'")
    conn.exec_driver_sql("SET LOCAL TimeZone = 'UTC'")
    conn.exec_driver_sql("SET LOCAL extra_float_digits = 1")  # shortest exact float text
    conn.exec_driver_sql("SET LOCAL client_encoding = 'UTF8'")
    parsers = [_string if text else _PARSERS[kind] for kind, text in zip(kinds, as_text, strict=True)]
    timestamps = [
        i
        for i, (kind, text) in enumerate(zip(kinds, as_text, strict=True))
        if kind in (ValueKind.TIMESTAMP, ValueKind.TIMESTAMP_TZ, ValueKind.DATE) and not text
    ]
    dtypes = {
        i: "Int64"
        if kind is ValueKind.INTEGER and not text
        else "float64"
        if kind is ValueKind.REAL
        else object
        for i, (kind, text) in enumerate(zip(kinds, as_text, strict=True))
        if i not in timestamps
    }
    driver = conn.connection.driver_connection
    query = psycopg.ClientCursor(driver).mogrify(f"COPY ({compiled}) TO STDOUT", compiled.params)
    try:
        for data, _ in _copy_out_chunks(driver, query, binary=False):
            yield _parse(data, names, dtypes, parsers, timestamps)
    except psycopg.Error as error:
        raise sa.exc.DBAPIError.instance(query, None, error, psycopg.Error, dialect=conn.dialect) from error


def _copy_out_binary(conn: sa.Connection, statement: sa.Select, names, decoders) -> Iterator[list[pd.Series]]:
    compiled = statement.compile(dialect=conn.dialect)
    conn.exec_driver_sql("SET LOCAL client_encoding = 'UTF8'")
    driver = conn.connection.driver_connection
    query = psycopg.ClientCursor(driver).mogrify(
        f"COPY ({compiled}) TO STDOUT (FORMAT BINARY)", compiled.params
    )
    try:
        for data, message_lengths in _copy_out_chunks(driver, query, binary=True):
            columns = decode(data, message_lengths, names, decoders)
            if len(columns[0]):  # not just the trailer
                yield columns
    except psycopg.Error as error:
        raise sa.exc.DBAPIError.instance(query, None, error, psycopg.Error, dialect=conn.dialect) from error


_END = object()


def _copy_out_chunks(
    driver: psycopg.Connection, query: str, *, binary: bool
) -> Iterator[tuple[bytes, np.ndarray | None]]:
    """The COPY output in chunks of whole rows, received by a background thread: text cut after a line
    break; binary cut between CopyData messages (one per row), with the messages' lengths.

    Receiving (libpq, GIL released while it waits) and parsing (pandas' tokenizer releases the GIL too)
    then overlap instead of taking turns. The connection belongs to the thread until it finishes; the
    consumer only parses. Stopping early (max_rows, an error) tells the thread to stop, which cancels
    the COPY, and waits for it.
    """
    chunks: queue.Queue = queue.Queue(maxsize=2)
    stop = threading.Event()

    def hand_over(item: object) -> bool:
        while not stop.is_set():
            try:
                chunks.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def receive() -> None:
        pending, lengths = bytearray(), []
        try:
            with contextlib.closing(_copy_out_blocks(driver, query)) as blocks:
                for block in blocks:
                    pending += block
                    if binary:
                        lengths.append(len(block))
                    if len(pending) >= _READ_CHUNK_BYTES:
                        cut = len(pending) if binary else pending.rfind(b"\n") + 1
                        if not hand_over((bytes(pending[:cut]), np.array(lengths) if binary else None)):
                            return  # leaving the with block cancels the COPY
                        del pending[:cut]
                        lengths = []
            if pending and not hand_over((bytes(pending), np.array(lengths) if binary else None)):
                return
            hand_over(_END)
        except BaseException as error:  # handed to the consumer, which raises it in its own thread
            hand_over(error)

    receiver = threading.Thread(target=receive, name="syndiffix-copy-out", daemon=True)
    receiver.start()
    try:
        while (item := chunks.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        receiver.join()


def _copy_out_blocks(driver: psycopg.Connection, query: str) -> Iterator[memoryview]:
    """COPY OUT data messages (one per row) straight from libpq, inside the connection's transaction.

    psycopg's Copy object costs a generator round trip per row, about as much as parsing the row, so
    the COPY runs on the documented low-level libpq interface (psycopg.pq) with a blocking
    PQgetCopyData loop instead; that halves the read. A consumer that stops early (max_rows) cancels
    the COPY, so the connection is usable (and rolled back) afterwards.
    """
    pgconn = driver.pgconn
    pgconn.send_query(query.encode())
    while pgconn.flush():
        pass
    started = pgconn.get_result()
    if started.status != pq.ExecStatus.COPY_OUT:
        _drain(pgconn)
        raise psycopg.OperationalError(f"reading the source failed: {started.error_message.decode()}")
    finished = False
    try:
        while True:
            size, data = pgconn.get_copy_data(0)
            if size <= 0:
                finished = True
                break
            yield data
    finally:
        if not finished:
            driver.cancel()
            while pgconn.get_copy_data(0)[0] > 0:
                pass
            _drain(pgconn)
    final = pgconn.get_result()
    _drain(pgconn)
    if final is None or final.status != pq.ExecStatus.COMMAND_OK:
        message = final.error_message.decode() if final is not None else "COPY ended without a result"
        raise psycopg.OperationalError(f"reading the source failed: {message}")


def _drain(pgconn) -> None:
    while pgconn.get_result() is not None:
        pass


def _parse(data: bytes, names, dtypes, parsers, timestamps: list[int]) -> list[pd.Series]:
    escapes = b"\\" in data  # only then can a string value hold an escape sequence
    frame = pd.read_csv(
        io.BytesIO(data),
        sep="\t",
        header=None,
        quoting=csv.QUOTE_NONE,
        # NaN in real, double and numeric columns is null, as everywhere in the engines (docs/columns.md);
        # elsewhere (a string 'NaN') it is a value.
        na_values={i: [NULL, "NaN"] if dtypes.get(i) == "float64" else [NULL] for i in range(len(names))},
        keep_default_na=False,
        skip_blank_lines=False,
        dtype=dtypes,
        parse_dates=timestamps,  # faster than strings first: no Python object per value
        date_format="ISO8601",
        encoding="utf-8",
        engine="c",
    )
    columns = []
    for i, (name, parse) in enumerate(zip(names, parsers, strict=True)):
        try:
            columns.append(_string(frame[i], name, escapes) if parse is _string else parse(frame[i], name))
        except (ValueError, TypeError, OverflowError) as error:  # e.g. 'infinity' or BC timestamps
            raise ColumnValueError(
                f"column {name!r}: a value cannot be read for synthesis ({error})"
            ) from error
    return columns


def _integer(column: pd.Series, name: str) -> pd.Series:
    if column.hasnans:
        return column.rename(name).reset_index(drop=True)
    return pd.Series(column.to_numpy(dtype=np.int64), name=name)


def _real(column: pd.Series, name: str) -> pd.Series:
    return pd.Series(column.to_numpy(dtype=np.float64), name=name)


def _boolean(column: pd.Series, name: str) -> pd.Series:
    values = column.to_numpy(dtype=object)
    truth = values == "t"
    missing = column.isna().to_numpy()
    if missing.any():
        return pd.Series(pd.arrays.BooleanArray(truth, missing), name=name)
    return pd.Series(truth, name=name)


def _timestamp(column: pd.Series, name: str) -> pd.Series:
    return pd.Series(pd.to_datetime(column, format="ISO8601").astype("datetime64[us]"), name=name)


def _timestamp_tz(column: pd.Series, name: str) -> pd.Series:
    return pd.Series(
        pd.to_datetime(column, format="ISO8601", utc=True).astype("datetime64[us, UTC]"), name=name
    )


def _from_iso(convert: Callable[[str], object]) -> Callable[[pd.Series, str], pd.Series]:
    def parse(column: pd.Series, name: str) -> pd.Series:
        # Days and times of day repeat: parse each distinct text once and spread the objects by code.
        codes, uniques = pd.factorize(column, use_na_sentinel=True)
        parsed = np.empty(len(uniques) + 1, dtype=object)
        parsed[:-1] = [convert(text) for text in uniques]
        parsed[-1] = None  # code -1 is null
        return pd.Series(parsed[codes], name=name, dtype=object)

    return parse


def _string(column: pd.Series, name: str, escapes: bool = True) -> pd.Series:
    values = column.to_numpy(dtype=object, copy=True)
    missing = column.isna().to_numpy()
    values[missing] = None
    if escapes:
        for i in np.flatnonzero(~missing):
            if "\\" in values[i]:
                values[i] = _ESCAPED.sub(lambda m: _UNESCAPE.get(m.group(1), m.group(1)), values[i])
    return pd.Series(values, name=name, dtype=object)


def _date(column: pd.Series, name: str) -> pd.Series:
    """DATE columns arrive parsed as datetime64 by read_csv; the codecs take datetime.date objects."""
    if not pd.api.types.is_datetime64_any_dtype(column):
        return _from_iso(dt.date.fromisoformat)(column, name)  # e.g. all null, or years read_csv refuses
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    dates = np.empty(len(uniques) + 1, dtype=object)
    dates[:-1] = [stamp.date() for stamp in uniques]
    dates[-1] = None  # code -1 is null
    return pd.Series(dates[codes], name=name, dtype=object)


_PARSERS = {
    ValueKind.INTEGER: _integer,
    ValueKind.REAL: _real,
    ValueKind.BOOLEAN: _boolean,
    ValueKind.STRING: _string,
    ValueKind.TIMESTAMP: _timestamp,
    ValueKind.TIMESTAMP_TZ: _timestamp_tz,
    ValueKind.DATE: _date,
    ValueKind.TIME: _from_iso(dt.time.fromisoformat),
    ValueKind.UUID: _string,  # PostgreSQL writes a uuid as its canonical text
}


# --------------------------------------------------------------------------------------------- write


def copy_in(
    conn: sa.Connection,
    table: sa.Table,
    frame: pd.DataFrame,
    kinds: Sequence[ValueKind],
    *,
    binary: bool = True,
) -> None:
    """`COPY table FROM STDIN` of the frame's columns (in the table's column order), chunk by chunk:
    in binary where every column has an exact binary form (see copy_binary), else (or with
    binary=False) as text."""
    # COPY goes to the server without parameters: names are quoted without the preparer's `%` doubling.
    column_list = ", ".join(quote_plain(c.name) for c in table.columns)
    statement = f"COPY {plain_table_name(table.schema, table.name)} ({column_list}) FROM STDIN"
    encoders = binary_encoders(table, frame, kinds) if binary else None
    if encoders is not None:
        statement += " (FORMAT BINARY)"
    driver = conn.connection.driver_connection
    driver_error = conn.dialect.loaded_dbapi.Error
    try:
        with driver.cursor() as cursor, cursor.copy(statement) as copy:
            if encoders is not None:
                copy.write(SIGNATURE)
            for start in range(0, len(frame), _WRITE_CHUNK_ROWS):
                chunk = [frame[c.name].iloc[start : start + _WRITE_CHUNK_ROWS] for c in table.columns]
                if encoders is None:
                    copy.write(_text_rows(chunk, kinds))
                else:
                    copy.write(encode_rows([encode(s) for encode, s in zip(encoders, chunk, strict=True)]))
            if encoders is not None:
                copy.write(TRAILER)
    except driver_error as error:
        # Same exception family as every other statement SQLAlchemy runs, so callers catch one kind.
        raise sa.exc.DBAPIError.instance(
            statement, None, error, driver_error, dialect=conn.dialect
        ) from error


def _text_rows(chunk: Sequence[pd.Series], kinds: Sequence[ValueKind]) -> str:
    columns = [_text(series, kind) for series, kind in zip(chunk, kinds, strict=True)]
    return "\n".join(map("\t".join, zip(*columns, strict=True))) + "\n"


def _text(series: pd.Series, kind: ValueKind) -> list[str]:
    """One column in COPY text format (NULL as \\N)."""
    if kind is ValueKind.STRING:
        values = to_python(series, kind)
        present = [v for v in values if v is not None]
        if not any(special in "\0".join(present) for special in "\\\t\n\r"):
            return [NULL if v is None else v for v in values]
        return [NULL if v is None else _escape(v) for v in values]
    if kind is ValueKind.BOOLEAN:
        return [NULL if v is None else "t" if v else "f" for v in to_python(series, kind)]
    if kind is ValueKind.UUID_BINARY:  # a bytea in COPY's text format: \\x and hex digits
        return [NULL if v is None else "\\\\x" + v.hex() for v in to_python(series, kind)]
    if kind is ValueKind.INTEGER:
        if isinstance(series.dtype, np.dtype):
            return list(map(str, series.tolist()))
        return [NULL if v is None else str(v) for v in to_python(series, kind)]
    if pd.api.types.is_datetime64_any_dtype(series):
        return _timestamp_text(series)
    # Reals, dates and times repeat (rounded amounts, days): format each distinct value once and
    # spread the texts by code, which beats formatting every row.
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    texts = np.empty(len(uniques) + 1, dtype=object)
    texts[:-1] = _distinct_text(uniques, kind)
    texts[-1] = NULL  # code -1 is null
    return texts[codes].tolist()


def _timestamp_text(series: pd.Series) -> list[str]:
    tz_aware = series.dt.tz is not None
    if tz_aware:
        series = series.dt.tz_convert("UTC").dt.tz_localize(None)
    stamps = series.to_numpy("datetime64[us]")
    missing = series.isna().to_numpy()
    suffix = "Z" if tz_aware else ""  # 'Z' marks UTC for timestamptz
    present = stamps[~missing]
    days = present.astype("datetime64[D]")
    micros = (present - days).astype(np.int64)
    if (micros % 1_000_000).any():
        texts = np.datetime_as_string(stamps, unit="us").astype(object) + suffix
    else:
        # Whole seconds (what synthetic timestamps mostly are): a day text per distinct day plus a
        # precomputed text per second of the day is several times faster than numpy's formatter.
        day_codes, distinct_days = pd.factorize(days)
        day_texts = np.datetime_as_string(np.asarray(distinct_days, dtype="datetime64[D]"), unit="D").astype(
            object
        )
        texts = np.empty(len(stamps), dtype=object)
        texts[~missing] = (day_texts + " ")[day_codes] + _seconds_of_day(suffix)[micros // 1_000_000]
    texts[missing] = NULL
    return texts.tolist()


@functools.cache
def _seconds_of_day(suffix: str) -> np.ndarray:
    return np.array(
        [f"{h:02d}:{m:02d}:{s:02d}{suffix}" for h in range(24) for m in range(60) for s in range(60)],
        dtype=object,
    )


def _distinct_text(uniques: pd.Index | np.ndarray, kind: ValueKind) -> list[str]:
    values = uniques.tolist() if hasattr(uniques, "tolist") else list(uniques)
    if kind in (ValueKind.DATE, ValueKind.TIME, ValueKind.TIMESTAMP, ValueKind.TIMESTAMP_TZ):
        return [v.isoformat() for v in values]
    return [str(v) for v in values]  # reals: shortest exact float text, or a Decimal's digits
