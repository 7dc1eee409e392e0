"""Property tests (hypothesis): hostile configs, and tables with hostile names, types and values, give a
correct result or one clear error, never a partial or silent one (issue #11 item 13).

The table properties run the real pipeline with an engine that passes its input through the engines'
column codecs and nothing else, so what reaches the target must be what the source holds, up to the
documented conversions: NaN is read as null, NUMERIC and integers beyond 2**53 travel as float64, and
NUMERIC is rounded to its scale; infinities are refused, as every engine refuses them. Example counts are modest and
the search derandomized: the suite runs the same examples every time.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from decimal import Decimal

import pytest
import sqlalchemy as sa
from dialect_cases import SALT, config_for, leftovers, lineage_rows
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict

from syndiffix_core.columns import decode_frame, encode_frame
from syndiffix_core.errors import SyndiffixError
from syndiffix_ops.config import ConfigError, parse_config
from syndiffix_ops.engines import ENGINES, EngineResult, register_engine
from syndiffix_ops.errors import PermanentError
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.warehouse import reflect_table

HOSTILE = [
    'quo"te',
    "apo'strophe",
    "back`tick",
    "100%",
    "%s%%",
    "sp ace",
    "semi;colon--",
    "ünï©ødé ✓",
    "line\nbreak",
    "tab\tbed",
    "SELECT",
    "x" * 70,
    "é" * 40,
]


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Identity:
    """Returns the source columns through the engines' column codecs, unchanged otherwise: what the
    target gets is what the warehouse layer and the codec contract carry (infinities are refused there,
    as by every engine; integers beyond 2**53 are rounded to float64, as documented in columns.md)."""

    name = "test_identity"
    params_model = _NoParams

    def run(self, df, *, aid_columns, salt, params, table_identity, progress=None):
        codecs, matrix = encode_frame(df.drop(columns=list(aid_columns)).reset_index(drop=True))
        return EngineResult(decode_frame(codecs, [matrix[:, i] for i in range(matrix.shape[1])]))


@pytest.fixture(autouse=True, scope="module")
def identity_engine():
    register_engine(Identity())
    yield
    ENGINES.pop(Identity.name)


def _names(exclude: str = "") -> st.SearchStrategy[str]:
    characters = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00" + exclude)
    return st.sampled_from(HOSTILE).filter(lambda n: not set(n) & set(exclude)) | st.text(
        characters, min_size=1, max_size=24
    )


# ------------------------------------------------------------------------------------------- configs

_POLICIES = st.sampled_from(["synthesize", "drop", "keep", "", None, 3])


@st.composite
def _raw_configs(draw) -> dict:
    tables = []
    for _ in range(draw(st.integers(1, 3))):
        entry: dict = {"source": draw(_names() | st.sampled_from(["a.b.c", ".x", "x.", "s.t"]))}
        if draw(st.booleans()):
            entry["target"] = draw(_names())
        if draw(st.booleans()):
            entry["columns"] = draw(
                st.dictionaries(_names(), _POLICIES, max_size=3) | st.lists(_names(), max_size=3)
            )
        if draw(st.booleans()):
            entry["aid_columns"] = draw(st.lists(_names(), max_size=2))
        if draw(st.booleans()):
            entry["max_rows"] = draw(st.integers(-5, 2**70) | st.text(max_size=3))
        if draw(st.booleans()):
            entry["mode"] = draw(st.sampled_from(["replace", "append", "upsert", 1]))
        tables.append(entry)
    config = {"source": "sqlite:///source.db", "target": "sqlite:///target.db", "tables": tables}
    if draw(st.booleans()):
        config["target_schema"] = draw(_names())
    return config


@settings(max_examples=80, deadline=None, derandomize=True)
@given(_raw_configs())
def test_any_config_is_accepted_as_written_or_refused_line_by_line(raw):
    try:
        config = parse_config(raw)
    except ConfigError as error:
        assert error.problems
        for problem in error.problems:
            assert problem.startswith("<config>") and "\n" not in problem, problem
        return
    assert [t.source for t in config.tables] == [t["source"] for t in raw["tables"]]
    for table, entry in zip(config.tables, raw["tables"], strict=True):
        assert table.target_name == entry.get("target", entry["source"].split(".")[-1])
        assert list(table.aid_columns) == entry.get("aid_columns", [])
    assert config.target_schema == raw.get("target_schema")


# -------------------------------------------------------------------------------------------- tables

_INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def _columns(draw, dialect: str):
    """(SQL type, values strategy) for one column, with the values that dialect can store."""
    kind = draw(st.sampled_from(["integer", "real", "numeric", "string", "boolean", "date"]))
    if kind == "integer":
        return sa.BigInteger(), _INT64
    if kind == "real":
        return sa.Float(precision=53), st.floats(
            allow_infinity=dialect != "mariadb", allow_nan=dialect != "mariadb"
        )
    if kind == "numeric":
        precision = draw(st.integers(1, 38))
        scale = draw(st.integers(0, min(precision, 10)))
        bound = Decimal(10) ** (precision - scale) - 1
        return sa.Numeric(precision, scale), st.decimals(
            -bound, bound, places=scale, allow_nan=False, allow_infinity=False
        )
    if kind == "string":
        text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
        return sa.String(60), text
    if kind == "boolean":
        return sa.Boolean(), st.booleans()
    return sa.Date(), st.dates(dt.date(1000, 1, 1), dt.date(9999, 12, 31))


@st.composite
def _tables(draw, dialect: str):
    names = draw(st.lists(_names(), min_size=1, max_size=4, unique_by=lambda n: n.casefold().strip()))
    columns = [(name, *draw(_columns(dialect))) for name in names]
    rows = draw(
        st.lists(
            st.tuples(*(st.none() | values for _, _, values in columns)),
            min_size=0,
            max_size=6,
        )
    )
    return draw(_names(exclude=".")), draw(_names(exclude=".")), columns, rows


def _same(source_value, target_value, sql_type) -> bool:
    if isinstance(source_value, float) and math.isnan(source_value):
        return target_value is None  # NaN is read as null (docs/columns.md)
    if source_value is None or target_value is None:
        return source_value is None and target_value is None
    if isinstance(sql_type, sa.Numeric) and not isinstance(sql_type, sa.Float):
        # float64 carries ~15.9 significant digits; the write rounds to the scale
        source, target = Decimal(source_value), Decimal(target_value)
        unit = Decimal(10) ** -(sql_type.scale or 0)
        return abs(source - target) <= unit / 2 + abs(source) * Decimal(2) ** -51
    if isinstance(sql_type, sa.Integer):  # exact up to 2**53, the nearest float64 beyond (columns.md)
        return abs(source_value - target_value) <= abs(source_value) * 2**-52
    return source_value == target_value


def _round_trip(engine: sa.Engine, schema: str | None, table: tuple) -> None:
    """Create the source, run the pipeline; assert an exact copy, or one clear error and nothing written."""
    source_name, target_name, columns, rows = table
    source_name = f"{source_name[:20]}_{uuid.uuid4().hex[:6]}"  # fresh per example
    target_name = f"{target_name}_{uuid.uuid4().hex[:6]}"
    assume(target_name.casefold() != source_name.casefold())
    source = sa.Table(source_name, sa.MetaData(), *(sa.Column(n, t) for n, t, _ in columns), schema=schema)
    try:
        source.create(engine)
        with engine.begin() as conn:
            if rows:
                conn.execute(
                    source.insert(), [dict(zip([n for n, _, _ in columns], r, strict=True)) for r in rows]
                )
    except (sa.exc.DBAPIError, sa.exc.CompileError):
        assume(False)  # the dialect itself refuses this name or value: nothing to synthesize
    qualified = f"{schema}.{source_name}" if schema else source_name
    config = config_for(engine, engine, qualified, target_name, target_schema=schema, engine=Identity.name)
    try:
        run_table(config, target_name, salt=SALT)
    except (PermanentError, ConfigError, SyndiffixError) as error:
        event(f"refused: {type(error).__name__}")
        assert "\n" not in str(error), str(error)
        assert target_name not in sa.inspect(engine).get_table_names(schema=schema)
        assert not [r for r in lineage_rows(engine, schema) if r["target_table"] == target_name]
        return
    # names as the server has them (MySQL reflection doubles backticks), types as the test declared them
    names = [c.name for c in reflect_table(engine, schema, target_name).columns]
    types = [t for _, t, _ in columns]
    written = sa.Table(target_name, sa.MetaData(), *map(sa.Column, names, types), schema=schema)
    with engine.connect() as conn:
        target_rows = conn.execute(sa.select(written)).all()
        source_rows = conn.execute(sa.select(source)).all()
    assert len(target_rows) == len(source_rows)
    unmatched = list(target_rows)
    for row in source_rows:
        match = next(
            (t for t in unmatched if all(_same(s, v, k) for s, v, k in zip(row, t, types, strict=True))), None
        )
        assert match is not None, (row, unmatched)
        unmatched.remove(match)
    assert not [n for n in leftovers(engine, schema) if target_name in n]
    event("round trip")


_NUMERIC_MAX = Decimal("9999999999999999999999999999.9999999999")
_HOSTILE_COLUMNS = [
    ("pct%col", sa.Float(precision=53), None),
    ("back`tick", sa.BigInteger(), None),
    ('quo"te', sa.Numeric(38, 10), None),
    ("ünï ✓", sa.String(60), None),
]
_HOSTILE_ROWS = [
    (1.5e308, -(2**63), _NUMERIC_MAX, ""),
    (-0.0, 2**63 - 1, _NUMERIC_MAX.copy_negate(), None),
    (None, 0, Decimal("0.0000000001"), "'; DROP TABLE x; --"),
]
# hand-picked extremes every run tries besides the generated tables (MariaDB stores no NaN or inf)
_EXTREMES = ("100% 'src'", "tgt`%s", _HOSTILE_COLUMNS, _HOSTILE_ROWS)
_NON_FINITE = (
    "nan src",
    'tgt "nan"',
    _HOSTILE_COLUMNS,
    [(math.nan, 1, None, "a"), (math.inf, 2, None, "b"), (-math.inf, 3, None, "c")],
)

_TABLE_SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
}


@settings(max_examples=25, **_TABLE_SETTINGS)
@given(table=_tables("sqlite"))
@example(table=_EXTREMES)
@example(table=_NON_FINITE)
def test_hostile_tables_round_trip_or_fail_clearly_on_sqlite(tmp_path_factory, table):
    engine = sa.create_engine(f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'w.db'}")
    try:
        _round_trip(engine, None, table)
    finally:
        engine.dispose()


@settings(max_examples=15, **_TABLE_SETTINGS)
@given(table=_tables("postgresql"))
@example(table=_EXTREMES)
@example(table=_NON_FINITE)
def test_hostile_tables_round_trip_or_fail_clearly_on_postgresql(pg_url, table):
    engine = sa.create_engine(pg_url)
    schema = f"hostile {uuid.uuid4().hex[:6]}"
    with engine.begin() as conn:
        conn.execute(sa.schema.CreateSchema(schema))
    try:
        _round_trip(engine, schema, table)
    finally:
        with engine.begin() as conn:
            conn.execute(sa.schema.DropSchema(schema, cascade=True))
        engine.dispose()


@settings(max_examples=12, **_TABLE_SETTINGS)
@given(table=_tables("mariadb"))
@example(table=_EXTREMES)
def test_hostile_tables_round_trip_or_fail_clearly_on_mariadb(mariadb_url, table):
    engine = sa.create_engine(mariadb_url)
    try:
        _round_trip(engine, None, table)
    finally:
        engine.dispose()
