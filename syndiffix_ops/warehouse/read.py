"""Reflect a source table and stream selected columns into pandas through a server-side cursor."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pandas as pd
import sqlalchemy as sa

from syndiffix_ops.errors import PermanentError
from syndiffix_ops.warehouse import postgres
from syndiffix_ops.warehouse.types import ColumnValueError, ValueKind, aid_values, to_series, value_kind
from syndiffix_ops.where import render_where


class SourceTableError(PermanentError, LookupError):
    """The source table or a configured column is missing."""


class RowLimitExceeded(PermanentError, RuntimeError):
    """The filtered source holds more rows than max_rows allows (the exact number is deliberately unknown)."""


@dataclass(frozen=True)
class SourceColumn:
    name: str
    sql_type: sa.types.TypeEngine
    type_sql: str  # the declared type as the source dialect spells it, e.g. NUMERIC(10, 2)
    kind: ValueKind | None  # None: no engine synthesizes this type
    nullable: bool


@dataclass(frozen=True)
class SourceTable:
    schema: str | None
    name: str
    table: sa.Table
    columns: tuple[SourceColumn, ...]
    dialect: str  # the source dialect's name: target types are copied as is only onto the same dialect

    @property
    def qualified_name(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def column(self, name: str) -> SourceColumn:
        for column in self.columns:
            if column.name == name:
                return column
        raise SourceTableError(
            f"source table {self.qualified_name} has no column {name!r} "
            f"(columns: {', '.join(c.name for c in self.columns)})"
        )

    def schema_snapshot(self) -> list[dict[str, object]]:
        """Names, declared types and nullability of all columns: what schema drift is measured on."""
        return [{"name": c.name, "type": c.type_sql, "nullable": c.nullable} for c in self.columns]

    def schema_hash(self) -> str:
        canonical = json.dumps(self.schema_snapshot(), separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def reflect_table(bind: sa.Engine | sa.Connection, schema: str | None, name: str) -> SourceTable:
    qualified = f"{schema}.{name}" if schema else name
    try:
        table = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=bind)
    except sa.exc.NoSuchTableError:
        raise SourceTableError(f"source table {qualified} does not exist") from None
    dialect = bind.dialect
    if dialect.name in ("mysql", "mariadb"):
        table = _with_mysql_column_names(bind, table, qualified)
    json_columns = (
        _mariadb_json_columns(bind, schema, name) if getattr(dialect, "is_mariadb", False) else set()
    )
    columns = tuple(
        SourceColumn(
            name=column.name,
            sql_type=sa.JSON() if column.name in json_columns else column.type,
            type_sql="JSON" if column.name in json_columns else _type_sql(column.type, dialect),
            kind=None if column.name in json_columns else value_kind(column.type),
            nullable=bool(column.nullable),
        )
        for column in table.columns
    )
    return SourceTable(schema=schema, name=name, table=table, columns=columns, dialect=dialect.name)


def _with_mysql_column_names(bind: sa.Engine | sa.Connection, table: sa.Table, qualified: str) -> sa.Table:
    """The reflected table with the server's own column names.

    SQLAlchemy reflects MySQL/MariaDB tables by parsing SHOW CREATE TABLE line by line: a backtick in a
    name comes back doubled, and a column whose name holds a line break is skipped with a warning.
    The names in information_schema are authoritative; a doubled backtick is undone, a skipped column
    refused (its type cannot be read, and dropping it silently would lose it from the output).
    """
    statement = sa.text(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = COALESCE(:schema, DATABASE()) "
        "AND table_name = :name ORDER BY ordinal_position"
    )
    with _connection(bind) as conn:
        actual = list(conn.execute(statement, {"schema": table.schema, "name": table.name}).scalars())
    reflected = {column.name: column for column in table.columns}
    missing = [n for n in actual if n not in reflected and n.replace("`", "``") not in reflected]
    if missing:
        server = "MariaDB" if getattr(bind.dialect, "is_mariadb", False) else "MySQL"
        raise SourceTableError(
            f"source table {qualified}: column {missing[0]!r} cannot be reflected on {server} "
            "(a name with a line break or similar); rename the column, or read the table through a view "
            "that gives it a plain name"
        )
    if all(name in reflected for name in actual):
        return table
    columns = []
    for name in actual:
        column = reflected.get(name, reflected.get(name.replace("`", "``")))
        columns.append(sa.Column(name, column.type, nullable=column.nullable))
    return sa.Table(table.name, sa.MetaData(), *columns, schema=table.schema)


def _mariadb_json_columns(bind: sa.Engine | sa.Connection, schema: str | None, name: str) -> set[str]:
    """MariaDB's JSON is LONGTEXT plus a json_valid() check, and reflects as LONGTEXT: find it by the check."""
    statement = sa.text(
        "SELECT constraint_name FROM information_schema.check_constraints "
        "WHERE constraint_schema = COALESCE(:schema, DATABASE()) AND table_name = :name "
        "AND level = 'Column' AND check_clause LIKE 'json_valid(%'"
    )
    with _connection(bind) as conn:
        return set(conn.execute(statement, {"schema": schema, "name": name}).scalars())


def _type_sql(sql_type: sa.types.TypeEngine, dialect: sa.Dialect) -> str:
    try:
        return sql_type.compile(dialect=dialect)
    except sa.exc.CompileError:
        return repr(sql_type)


def _as_read(column: sa.Column) -> sa.ColumnElement:
    """The column as the engines need its values. MySQL's DOUBLE reflects with asdecimal=True, whose
    result conversion keeps 10 decimals: 6.2e-286 would arrive as 0. Floats are read as floats."""
    if isinstance(column.type, sa.Float) and column.type.asdecimal:
        return sa.type_coerce(column, sa.Float(asdecimal=False)).label(column.name)
    return column


def _filtered(source: SourceTable, where: str | None, columns: Sequence[sa.ColumnElement]) -> sa.Select:
    statement = sa.select(*columns).select_from(source.table)
    if not where:
        return statement
    # `where` is SQL by the config's author; what runs is its checked parse tree, as a literal (no binds).
    return statement.where(sa.literal_column(render_where(where, source.dialect)))


def check_row_limit(
    bind: sa.Engine | sa.Connection, source: SourceTable, where: str | None, max_rows: int
) -> None:
    """Fail fast when the filtered source has more than max_rows rows.

    The server stops counting at max_rows + 1, so the check costs at most max_rows row visits and the
    exact row count is never learned, logged or reported.
    """
    probe = _filtered(source, where, [sa.literal(1).label("one")]).limit(max_rows + 1).subquery()
    statement = sa.select(sa.func.count()).select_from(probe)
    with _connection(bind) as conn:
        seen = conn.execute(statement).scalar_one()
    if seen > max_rows:
        raise RowLimitExceeded(
            f"source table {source.qualified_name}{_where_note(where)} has more than max_rows={max_rows} rows; "
            "raise max_rows, narrow the where filter, or split the table"
        )


def _where_note(where: str | None) -> str:
    return f" (where {where})" if where else ""


def read_columns(
    bind: sa.Engine | sa.Connection,
    source: SourceTable,
    columns: Sequence[str],
    *,
    aid_columns: Sequence[str] = (),
    where: str | None = None,
    chunk_rows: int = 100_000,
    max_rows: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> pd.DataFrame:
    """Stream `columns` (and the AID columns) of the filtered source into a DataFrame, chunk by chunk.

    Values become the dtypes the engine codecs accept (see warehouse.types); AID columns become strings
    unless they are integers. Reading stops with RowLimitExceeded as soon as max_rows is passed.
    """
    names = list(dict.fromkeys([*aid_columns, *columns]))
    parts: dict[str, list[pd.Series]] = {name: [] for name in names}
    for chunk in _series_chunks(bind, source, columns, aid_columns, where, chunk_rows, max_rows, progress):
        for name, series in zip(names, chunk, strict=True):
            parts[name].append(series)
    if not parts[names[0]]:
        kinds = {name: source.column(name).kind for name in names}
        as_text = {name: name in aid_columns and kinds[name] is not ValueKind.INTEGER for name in names}
        empty = {name: _column_values((), kinds[name], name, as_text[name]) for name in names}
        return pd.DataFrame(empty, columns=names)
    # One concatenation per column (no DataFrame per chunk), each column's chunks dropped once joined, and
    # the columns kept as they are (copy=False): consolidating them into one block per dtype would hold
    # the table twice.
    frame = {}
    for name in names:
        column = parts.pop(name)
        frame[name] = pd.concat(column, ignore_index=True) if len(column) > 1 else column[0]
    return pd.DataFrame(frame, columns=names, copy=False)


def iter_column_chunks(
    bind: sa.Engine | sa.Connection,
    source: SourceTable,
    columns: Sequence[str],
    *,
    aid_columns: Sequence[str] = (),
    where: str | None = None,
    chunk_rows: int = 100_000,
    max_rows: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[pd.DataFrame]:
    """Like read_columns, but yield one DataFrame of at most `chunk_rows` rows at a time, so a consumer
    that only aggregates (the KHLL risk sketches) holds one chunk in memory, not the table."""
    names = list(dict.fromkeys([*aid_columns, *columns]))
    for chunk in _series_chunks(bind, source, columns, aid_columns, where, chunk_rows, max_rows, progress):
        yield pd.DataFrame(dict(zip(names, chunk, strict=True)), columns=names)


def _series_chunks(
    bind: sa.Engine | sa.Connection,
    source: SourceTable,
    columns: Sequence[str],
    aid_columns: Sequence[str],
    where: str | None,
    chunk_rows: int,
    max_rows: int | None,
    progress: Callable[[int], None] | None,
) -> Iterator[list[pd.Series]]:
    """The AID columns then `columns`, a chunk at a time as one Series per column, with the checks."""
    names = list(dict.fromkeys([*aid_columns, *columns]))
    kinds = {name: source.column(name).kind for name in names}
    for name in columns:
        if kinds[name] is None:
            raise SourceTableError(
                f"source table {source.qualified_name}: column {name!r} ({source.column(name).type_sql}) "
                "cannot be read for synthesis; set its policy to drop"
            )
    statement = _filtered(source, where, [_as_read(source.table.c[name]) for name in names])
    if max_rows is not None:
        statement = statement.limit(max_rows + 1)
    as_text = [name in aid_columns and kinds[name] is not ValueKind.INTEGER for name in names]
    rows = 0
    with _connection(bind) as conn:
        chunks = _chunks(conn, statement, names, [kinds[n] for n in names], as_text, chunk_rows)
        for chunk in _with_table_name(chunks, source.qualified_name):
            rows += len(chunk[0])
            if max_rows is not None and rows > max_rows:
                raise RowLimitExceeded(
                    f"source table {source.qualified_name}{_where_note(where)} has more than "
                    f"max_rows={max_rows} rows; raise max_rows, narrow the where filter, or split the table"
                )
            if progress is not None:
                progress(rows)
            yield chunk


def _with_table_name(chunks: Iterator[list[pd.Series]], table: str) -> Iterator[list[pd.Series]]:
    try:
        yield from chunks
    except ColumnValueError as error:
        raise ColumnValueError(f"source table {table}: {error}") from error


def _chunks(
    conn: sa.Connection,
    statement: sa.Select,
    names: Sequence[str],
    kinds: Sequence[ValueKind | None],
    as_text: Sequence[bool],
    chunk_rows: int,
) -> Iterator[list[pd.Series]]:
    """The selected rows, at most chunk_rows at a time, as one engine-ready Series per column."""
    if postgres.is_psycopg(conn):
        for columns in postgres.copy_out(conn, statement, names, kinds, as_text=as_text):
            for start in range(0, len(columns[0]), chunk_rows):
                yield [c.iloc[start : start + chunk_rows].reset_index(drop=True) for c in columns]
        return
    # Elsewhere a server-side cursor (stream_results) keeps only one chunk of rows in memory at a time.
    result = conn.execution_options(stream_results=True, yield_per=chunk_rows).execute(statement)
    try:
        parts = result.partitions()
        while True:
            try:
                part = next(parts)
            except StopIteration:
                return
            except (ValueError, TypeError, OverflowError) as error:  # the driver's or SQLAlchemy's conversion
                raise ColumnValueError(f"a value cannot be read for synthesis ({error})") from error
            columns = []
            for name, kind, values, text in zip(names, kinds, zip(*part, strict=True), as_text, strict=True):
                try:
                    columns.append(_column_values(values, kind, name, text))
                except ColumnValueError:
                    raise  # already names the column and the value
                except (ValueError, TypeError, OverflowError) as error:
                    raise ColumnValueError(
                        f"column {name!r}: a value cannot be read for synthesis ({error})"
                    ) from error
            yield columns
    finally:
        result.close()


def _column_values(values: Sequence[object], kind: ValueKind | None, name: str, as_text: bool) -> pd.Series:
    if as_text:
        return aid_values(values).rename(name)
    assert kind is not None
    return to_series(values, kind, name)


class _connection:
    """Use a given Connection as is, or open (and close) one from an Engine."""

    def __init__(self, bind: sa.Engine | sa.Connection):
        self._bind, self._owned = bind, None

    def __enter__(self) -> sa.Connection:
        if isinstance(self._bind, sa.Connection):
            return self._bind
        self._owned = self._bind.connect()
        return self._owned

    def __exit__(self, *exc_info: object) -> None:
        if self._owned is not None:
            self._owned.close()
