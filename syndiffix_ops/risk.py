"""Privacy-risk reports with KHyperLogLog sketches, at warehouse scale (see docs/risk.md).

Source, before synthesis: for every synthesized column of a configured table and every configured
quasi-identifier combination, a KHLL sketch over the table's ids (its ``aid_columns``, or its rows when
it has none) gives the distinct values, distinct ids, re-identification potential (share of values with
at most t ids) and the share of ids in classes of at most t ids; single columns of different configured
tables are compared for joinability (containment both ways, Jaccard).

Output, after synthesis: the share of synthetic rows that reproduce a value (combination) unique or rare
in the source, and the containment of each synthetic column's values in the source column's.

Sketches are updated chunk by chunk as the table is read, so a large table streams through in bounded
memory; feeding one sketch chunk after chunk gives the same sketch as merging per-chunk sketches (see
``syndiffix_core.risk.khll``), and sketches of shards can be merged.

What is stored (lineage) or shown (HTML) goes through ``coarse``: counts rounded to two significant
digits but never finer than tens (a 37-row table shows 40 ids), and shares to 0.001 or, for few values
or ids, on a coarser step that fits every denominator the coarse count stands for, so neither an exact
source row count nor a rare value's exact count leaves the warehouse, however small the table. ``syndiffix-ops risk`` prints the unrounded estimates to whoever holds the source credentials.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import sqlalchemy as sa

from syndiffix_core.risk import (
    DEFAULT_HLL_PRECISION,
    DEFAULT_K,
    DEFAULT_THRESHOLDS,
    ID_SEED,
    Joinability,
    KHyperLogLog,
    Reproduction,
    UniquenessSummary,
    combine_hashes,
    hash_column,
    hash_row_numbers,
    joinability,
    reproduction,
    summarize,
)
from syndiffix_ops.config import ConfigError
from syndiffix_ops.risk_meaning import advice, reproduction_baselines, reproduction_reading, value_domains
from syndiffix_ops.warehouse.read import iter_column_chunks, reflect_table

if TYPE_CHECKING:
    from syndiffix_ops.config import PipelineConfig, TableConfig

ColumnSet = tuple[str, ...]
Progress = Callable[[str, float], None]

# Rows hashed at a time from a frame already in memory: bounds the hashing temporaries.
_IN_MEMORY_CHUNK_ROWS = 250_000
# Joinability pairs below this containment (both ways) are left out of the report as noise.
_REPORTED_CONTAINMENT = 0.1


class RiskError(ConfigError):
    """A risk setting that does not fit the table; the message names the table and column."""

    def __init__(self, message: str):
        super().__init__([message])


@dataclass(frozen=True)
class RiskParams:
    """Sketch parameters and report thresholds (the `risk:` section of the config)."""

    k: int = DEFAULT_K
    hll_precision: int = DEFAULT_HLL_PRECISION
    thresholds: tuple[int, ...] = DEFAULT_THRESHOLDS
    identifying_share: float = 0.5
    elevated_share: float = 0.05
    linkable_containment: float = 0.5

    @classmethod
    def from_config(cls, risk: Any) -> RiskParams:
        return cls(
            k=risk.k,
            hll_precision=risk.hll_precision,
            thresholds=tuple(risk.thresholds),
            identifying_share=risk.identifying_share,
            elevated_share=risk.elevated_share,
            linkable_containment=risk.linkable_containment,
        )

    def new_sketch(self) -> KHyperLogLog:
        return KHyperLogLog(k=self.k, hll_precision=self.hll_precision)


def set_name(columns: Sequence[str]) -> str:
    """How a column set is named in reports and JSON: its columns joined by '+'."""
    return "+".join(columns)


def column_sets(
    columns: Sequence[str], quasi_identifiers: Sequence[Sequence[str]] = (), *, table: str = "table"
) -> list[ColumnSet]:
    """Every column on its own, then every quasi-identifier combination (each checked against `columns`)."""
    known = set(columns)
    sets: list[ColumnSet] = [(column,) for column in columns]
    for combination in quasi_identifiers:
        missing = [column for column in combination if column not in known]
        if missing:
            raise RiskError(
                f"table {table}: quasi-identifier combination {list(combination)} names {missing}, which "
                f"are not among the columns read for synthesis ({', '.join(columns)})"
            )
        if tuple(combination) not in sets:
            sets.append(tuple(combination))
    return sets


def frame_chunks(frame: pd.DataFrame, rows: int) -> Iterator[pd.DataFrame]:
    """Consecutive row slices of an in-memory frame (views, no copies)."""
    for start in range(0, max(len(frame), 1), rows):
        yield frame.iloc[start : start + rows]


class TableSketcher:
    """KHLL sketches of several column sets of one table, fed one chunk at a time.

    Each AID column is its own kind of protected entity (e.g. sender and receiver), so with several AID
    columns every column set is sketched once per AID column, and `sketches` reports, per column set,
    the sketch under which it is most identifying: a value is as exposed as its rarest kind of entity.
    """

    def __init__(
        self,
        sets: Sequence[ColumnSet],
        id_columns: Sequence[str] = (),
        params: RiskParams = RiskParams(),
        *,
        table: str = "table",
    ):
        self.sets = list(sets)
        self.id_columns = list(id_columns)
        self.params = params
        self.table = table
        self.domains: dict[str, str] = {}
        # () stands for "every row is its own id".
        id_kinds = [(column,) for column in self.id_columns] or [()]
        self._by_id_kind = {
            kind: {columns: params.new_sketch() for columns in self.sets} for kind in id_kinds
        }
        self._rows_seen = 0

    @property
    def sketches(self) -> dict[ColumnSet, KHyperLogLog]:
        if len(self._by_id_kind) == 1:
            return next(iter(self._by_id_kind.values()))
        return {
            columns: max(
                (by_columns[columns] for by_columns in self._by_id_kind.values()),
                key=_exposure,
            )
            for columns in self.sets
        }

    def add(self, chunk: pd.DataFrame, column_hashes: Mapping[str, np.ndarray] | None = None) -> None:
        """Sketch the rows of `chunk`; `column_hashes` are hash_column's hashes of some of its columns,
        when the caller has them already."""
        needed = dict.fromkeys([*self.id_columns, *(c for s in self.sets for c in s)])
        missing = [column for column in needed if column not in chunk.columns]
        if missing:
            raise RiskError(f"table {self.table}: columns {missing} are missing from the data read")
        given = column_hashes or {}
        hashes: dict[str, np.ndarray] = {}
        value_hashes: dict[ColumnSet, np.ndarray] = {}
        for columns in self.sets:
            for column in columns:
                if column not in hashes:
                    hashes[column] = given[column] if column in given else hash_column(chunk[column])
                    self.domains.setdefault(column, _value_domain(chunk[column]))
            value_hashes[columns] = combine_hashes([hashes[c] for c in columns])
        for kind, by_columns in self._by_id_kind.items():
            if kind:
                ids = hash_column(chunk[kind[0]], seed=ID_SEED)
            else:
                ids = hash_row_numbers(len(chunk), start=self._rows_seen)
            for columns, sketch in by_columns.items():
                sketch.update(value_hashes[columns], ids)
        self._rows_seen += len(chunk)


def _exposure(sketch: KHyperLogLog) -> tuple[float, ...]:
    """Orders sketches of one column set over different AIDs: more ids alone, then in classes of at most
    5, then fewer ids per value (median) means more exposed."""
    counts = sketch.id_counts()
    return (sketch.id_share(1), sketch.id_share(5), -float(np.median(counts)) if len(counts) else 0.0)


def sketch_table(
    chunks: Iterable[pd.DataFrame],
    sets: Sequence[ColumnSet],
    id_columns: Sequence[str] = (),
    params: RiskParams = RiskParams(),
    *,
    table: str = "table",
) -> TableSketcher:
    """Stream `chunks` of one table into KHLL sketches of `sets`; ids are `id_columns`, or rows if none."""
    sketcher = TableSketcher(sets, id_columns, params, table=table)
    for chunk in chunks:
        sketcher.add(chunk)
    return sketcher


def _value_domain(series: pd.Series) -> str:
    """Values of different domains never hash alike, so joinability only compares within a domain."""
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(series):
        return "time"
    return "other"


# --------------------------------------------------------------------------------------- report data


def coarse(value: Any) -> Any:
    """What may leave the warehouse, recursively: counts (integers, and numbers above 1) to two
    significant digits but never finer than tens, shares (fractions up to 1) to 0.001, and the shares of
    a uniqueness summary on the coarser step of their denominator (`share_step`)."""
    if isinstance(value, Mapping) and {"distinct_values", "distinct_ids"} <= value.keys():
        return _coarse_uniqueness(value)
    if isinstance(value, Mapping):
        return {key: coarse(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [coarse(item) for item in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float | np.integer | np.floating):
        number = float(value)
        if not math.isfinite(number):
            return None
        if isinstance(value, float | np.floating) and abs(number) <= 1.0:
            return round(number, 3)
        return coarse_count(number)
    return value


def coarse_count(number: float) -> int:
    """A count rounded so that no small count is exact: 0 stays 0, 1-14 become 10, 15-24 become 20,
    37 becomes 40, 123 becomes 120, 4,567 becomes 4,600 (two significant digits, at least tens)."""
    magnitude = abs(number)
    if magnitude == 0:
        return 0
    step = max(10, 10 ** (int(math.floor(math.log10(magnitude))) - 1))
    rounded = max(int(math.floor(magnitude / step + 0.5)) * step, step)
    return int(math.copysign(rounded, number))


# Round steps of shares, finest first: a step is chosen no finer than 1 / (its denominator's lowest
# possible value), so the shown share fits every denominator its coarse count stands for.
_SHARE_STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


def share_step(denominator: float) -> float:
    """The round step of a share of `denominator` things (values, ids), so that it cannot reveal the
    exact denominator: 24 of 37 values at 0.001 is 0.649, which only 24/37 gives among denominators near
    37; the coarse count shows 40 (35 to 44), and a step of 1/35 or more leaves, for every denominator
    from 35 up, a numerator whose share rounds to the same figure. Tables of fewer than 15 values (coarse
    count 10) are stepped for denominators of 5 and up (0.2)."""
    count = coarse_count(denominator)
    if count == 0:
        return _SHARE_STEPS[-1]
    lowest = max(5.0, count - max(10, 10 ** (int(math.floor(math.log10(count))) - 1)) / 2)
    return next((step for step in _SHARE_STEPS if step >= 1.0 / lowest), _SHARE_STEPS[-1])


def round_share(share: float | None, step: float) -> float | None:
    if share is None or not math.isfinite(share):
        return None
    return round(round(share / step) * step, 3)


def _coarse_uniqueness(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A uniqueness summary with its shares of values and of ids on their denominators' steps."""
    values_step = share_step(float(summary["distinct_values"]))
    ids_step = share_step(float(summary["distinct_ids"]))
    data = {key: coarse(item) for key, item in summary.items()}
    if "reidentification_potential" in summary:
        data["reidentification_potential"] = {
            t: round_share(v, values_step) for t, v in summary["reidentification_potential"].items()
        }
    if "id_share" in summary:  # of (value, id) pairs: at least distinct_ids of them
        data["id_share"] = {t: round_share(v, ids_step) for t, v in summary["id_share"].items()}
    if "histogram" in summary:
        data["histogram"] = [
            {**coarse(dict(b)), "share_of_values": round_share(b["share_of_values"], values_step)}
            for b in summary["histogram"]
        ]
    return data


@dataclass(frozen=True)
class TableRisk:
    """Source-side risk of one table: one uniqueness summary per column set."""

    table: str
    source_table: str | None
    id_columns: list[str]  # empty: every row is its own id
    summaries: list[UniquenessSummary]

    def summary(self, columns: Sequence[str]) -> UniquenessSummary:
        for summary in self.summaries:
            if summary.columns == tuple(columns):
                return summary
        raise KeyError(f"table {self.table}: no risk summary for {set_name(columns)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "source_table": self.source_table,
            "ids": list(self.id_columns) or "rows",
            "column_sets": {set_name(s.columns): _summary_dict(s) for s in self.summaries},
            "identifying": [set_name(s.columns) for s in self.summaries if s.level == "identifying"],
        }


def _summary_dict(summary: UniquenessSummary) -> dict[str, Any]:
    data = summary.to_dict()
    del data["columns"]  # the key of the entry
    return data


def summarize_table(
    table: str,
    sketcher: TableSketcher,
    params: RiskParams = RiskParams(),
    *,
    source_table: str | None = None,
) -> TableRisk:
    return TableRisk(
        table=table,
        source_table=source_table,
        id_columns=list(sketcher.id_columns),
        summaries=[
            summarize(
                sketch,
                columns,
                thresholds=params.thresholds,
                identifying_share=params.identifying_share,
                elevated_share=params.elevated_share,
            )
            for columns, sketch in sketcher.sketches.items()
        ],
    )


def cross_table_joinability(
    sketchers: Mapping[str, TableSketcher], params: RiskParams = RiskParams()
) -> list[Joinability]:
    """Single columns of different tables that share values, most contained first.

    Pairs whose values cannot hash alike (a string and a number column) are skipped, as are pairs with
    less than ``_REPORTED_CONTAINMENT`` containment either way.
    """
    singles = [
        (table, columns[0], sketch, sketcher.domains.get(columns[0], "other"))
        for table, sketcher in sketchers.items()
        for columns, sketch in sketcher.sketches.items()
        if len(columns) == 1
    ]
    found = []
    for i, (left_table, left_column, left, left_domain) in enumerate(singles):
        for right_table, right_column, right, right_domain in singles[i + 1 :]:
            if left_table == right_table or left_domain != right_domain:
                continue
            link = joinability(
                f"{left_table}.{left_column}",
                left,
                f"{right_table}.{right_column}",
                right,
                linkable_containment=params.linkable_containment,
            )
            if max(link.containment_left_in_right, link.containment_right_in_left) >= _REPORTED_CONTAINMENT:
                found.append(link)
    found.sort(key=lambda j: -max(j.containment_left_in_right, j.containment_right_in_left))
    return found


@dataclass(frozen=True)
class OutputRisk:
    """What a synthetic table gives back of its source."""

    reproduction: dict[str, Reproduction]  # column set name -> synthetic rows reproducing source values
    containment: dict[str, dict[str, float]]  # column -> containment both ways, Jaccard

    def to_dict(self) -> dict[str, Any]:
        return {
            "reproduction": {name: counts.to_dict() for name, counts in self.reproduction.items()},
            "containment": self.containment,
        }


def assess_output(
    source: TableSketcher,
    synthetic_chunks: Iterable[pd.DataFrame],
    params: RiskParams = RiskParams(),
    *,
    columns: Sequence[str] | None = None,
) -> OutputRisk:
    """Compare synthetic rows with the source sketches, for the column sets within `columns` (default:
    every column set the synthetic chunks hold)."""
    totals: dict[ColumnSet, Reproduction] = {}
    source_sketches = source.sketches
    synthetic: TableSketcher | None = None
    for chunk in synthetic_chunks:
        if synthetic is None:
            allowed = set(chunk.columns) if columns is None else set(columns) & set(chunk.columns)
            sets = [s for s in source.sets if set(s) <= allowed]
            synthetic = TableSketcher([s for s in sets if len(s) == 1], params=params, table=source.table)
        column_hashes = {c: hash_column(chunk[c]) for c in dict.fromkeys(c for s in sets for c in s)}
        for columns_ in sets:
            counts = reproduction(
                source_sketches[columns_],
                combine_hashes([column_hashes[c] for c in columns_]),
                params.thresholds,
            )
            totals[columns_] = totals.get(columns_, Reproduction()) + counts
        synthetic.add(chunk, column_hashes)
    containment = {}
    for columns_, sketch in (synthetic.sketches if synthetic else {}).items():
        overlap = sketch.overlap(source_sketches[columns_])
        containment[columns_[0]] = {
            "synthetic_in_source": overlap.containment_of_first,
            "source_in_synthetic": overlap.containment_of_second,
            "jaccard": overlap.jaccard,
        }
    return OutputRisk({set_name(s): totals[s] for s in totals}, containment)


@dataclass(frozen=True)
class RiskReport:
    tables: list[TableRisk]
    joinability: list[Joinability] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "tables": {table.table: table.to_dict() for table in self.tables},
            "joinability": [link.to_dict() for link in self.joinability],
        }


# ------------------------------------------------------------------------------------------- HTML


def html_section(
    source: TableRisk,
    output: OutputRisk | None = None,
    *,
    baselines: Mapping[str, Mapping[str, float | None]] | None = None,
    kinds: Mapping[str, str] | None = None,
):
    """The risk part of a table's HTML report: column sets by risk with advice for the identifying ones,
    the uniqueness of every column set, and the output's reproduction against its chance and copy
    baselines (syndiffix_ops.risk_meaning)."""
    from syndiffix_ops.report import ReportSection, figure_to_img_tag

    summaries = sorted(source.summaries, key=_risk_order)
    thresholds = sorted(summaries[0].reidentification_potential) if summaries else []
    head = "".join(f"<th>values &le;{t} ids</th>" for t in thresholds)
    rows, advices = [], []
    for summary in summaries:
        data = coarse(summary.to_dict())
        cells = "".join(f"<td>{data['reidentification_potential'][str(t)]:.3f}</td>" for t in thresholds)
        rows.append(
            f"<tr class='risk-{html.escape(summary.level)}'><td>{html.escape(set_name(summary.columns))}</td>"
            f"<td>{html.escape(summary.level)}</td><td>{data['distinct_values']}</td>"
            f"<td>{data['id_share']['1']:.3f}</td>{cells}</tr>"
        )
        kind = (kinds or {}).get(summary.columns[0], "other") if len(summary.columns) == 1 else "other"
        text = advice(
            summary.columns, summary.level, kind, summary.distinct_values / max(summary.distinct_ids, 1.0)
        )
        if text:
            advices.append(
                f"<li><strong>{html.escape(set_name(summary.columns))}</strong>: {_code(text)}</li>"
            )
    ids = ", ".join(source.id_columns) if source.id_columns else "rows (no AID columns)"
    parts = [
        f"<p>Ids: {html.escape(ids)}. Estimates from KHLL sketches; counts rounded to 2 significant digits (at least"
        " to tens), "
        "shares to 0.001, or coarser for a column set of few values or ids (to 0.2 below 15), so that no "
        "share reveals an exact small count. Column sets most at risk first. <em>identifying</em>: at least half of the ids "
        "are alone in their class; <em>elevated</em>: at least 5 % of the ids are in classes of at most 5.</p>",
    ]
    if advices:
        parts.append(f'<div class="attention"><h3>Advice</h3><ul>{"".join(advices)}</ul></div>')
    parts.append(
        "<table><tr><th>column set</th><th>risk</th><th>distinct values</th><th>ids alone in class</th>"
        f"{head}</tr>{''.join(rows)}</table>"
    )
    if summaries:
        parts.append(figure_to_img_tag(_histogram_figure(summaries), "uniqueness of every column set"))
    if output is not None and output.reproduction:
        rows = []
        order = {set_name(s.columns): n for n, s in enumerate(summaries)}
        for name, counts in sorted(output.reproduction.items(), key=lambda item: order.get(item[0], 0)):
            data = coarse(counts.to_dict())
            base = coarse(dict((baselines or {}).get(name, {})))
            share = data["share_unique_in_source"]
            rows.append(
                f"<tr><td>{html.escape(name)}</td><td>{_share(share)}</td><td>{_share(base.get('chance'))}</td>"
                f"<td>{_share(base.get('copy'))}</td>"
                f"<td>{reproduction_reading(share, base.get('chance'), base.get('copy'))}</td>"
                f"<td>{_share(data['share_in_source'])}</td></tr>"
            )
        parts.append(
            "<h3>Synthetic output</h3><p class='note'>Share of synthetic rows whose value is unique in the "
            "source, next to <em>chance</em> (random values over the column's domain: every value between "
            "its smallest and largest at its resolution, or its distinct values) and <em>copy</em> (rows "
            "copied from the source). Near chance: the output gives unique values back no more often than "
            "random values would.</p><table><tr><th>column set</th>"
            "<th>synthetic rows reproducing a source-unique value</th><th>by chance</th><th>by copying rows</th>"
            "<th>reading</th><th>synthetic rows with any source value</th></tr>" + "".join(rows) + "</table>"
        )
    return ReportSection("Re-identification risk (KHLL)", "\n".join(parts))


def _risk_order(summary: UniquenessSummary) -> tuple[float, float, str]:
    """Most exposed first: more ids alone in their class, then in classes of at most 5."""
    five = summary.id_share.get(5, summary.id_share[max(summary.id_share)])
    return (-summary.id_share.get(1, 0.0), -five, set_name(summary.columns))


def _code(text: str) -> str:
    """Escape `text` and show its `back-quoted` parts as code."""
    pieces = html.escape(text).split("`")
    return "".join(f"<code>{piece}</code>" if n % 2 else piece for n, piece in enumerate(pieces))


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


# Uniqueness histogram bins merged into five groups, from identifying (red) to safe (green).
_ID_GROUPS = (
    ("1 id", ("1",)),
    ("2-5", ("2", "3", "4", "5")),
    ("6-20", ("6-10", "11-20")),
    ("21-100", ("21-50", "51-100")),
    ("> 100", ("101-1000", ">=1001")),
)
_ID_GROUP_COLOURS = ("#c0392b", "#e67e22", "#f1c40f", "#9ccc65", "#2e7d32")


def _histogram_figure(summaries: Sequence[UniquenessSummary]):
    """One horizontal bar per column set (all of them, most at risk on top), split by how many ids hold
    each value: readable for any number of column sets, the legend above the bars."""
    from matplotlib.figure import Figure

    names = [set_name(summary.columns) for summary in summaries]
    shares = np.zeros((len(summaries), len(_ID_GROUPS)))
    for row, summary in enumerate(summaries):
        # the coarse shares: a bar drawn to the pixel would show what the table's rounding hides
        by_label = {b["ids"]: b["share_of_values"] or 0.0 for b in coarse(summary.to_dict())["histogram"]}
        for column, (_, labels) in enumerate(_ID_GROUPS):
            shares[row, column] = sum(by_label.get(label, 0.0) for label in labels)
    height = 1.3 + 0.28 * len(names)
    figure = Figure(figsize=(7.5, height))
    longest = max(len(name) for name in names)
    figure.subplots_adjust(
        left=min(0.45, 0.04 + 0.0105 * longest), right=0.97, top=1 - 0.55 / height, bottom=0.45 / height
    )
    axes = figure.add_subplot()
    positions = np.arange(len(names))
    left = np.zeros(len(names))
    for column, ((label, _), colour) in enumerate(zip(_ID_GROUPS, _ID_GROUP_COLOURS, strict=True)):
        axes.barh(positions, shares[:, column], left=left, height=0.7, color=colour, label=f"{label}")
        left += shares[:, column]
    axes.set_yticks(positions, [name if len(name) <= 40 else name[:39] + "…" for name in names], fontsize=8)
    axes.invert_yaxis()
    axes.set_xlim(0, 1)
    axes.tick_params(axis="x", labelsize=8)
    axes.set_xlabel("share of distinct values, by the number of ids holding the value", fontsize=8)
    axes.legend(
        fontsize=8,
        frameon=False,
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        ncol=5,
        borderaxespad=0.2,
        title="ids per value",
        title_fontsize=8,
        alignment="left",
    )
    return figure


# ------------------------------------------------------------------------------------- warehouse


def sketch_source(
    config: PipelineConfig,
    table: TableConfig,
    engine: sa.Engine,
    params: RiskParams,
    *,
    progress: Callable[[int], None] | None = None,
) -> tuple[TableSketcher, str]:
    """Stream one configured table's synthesized columns from the source into sketches, without holding
    the table in memory. Returns the sketches and the source's qualified name."""
    from syndiffix_ops.run_checks import resolve_columns
    from syndiffix_ops.run_errors import PipelineError

    label = f"table {table.display_name}"
    effective = config.effective(table)
    try:
        source = reflect_table(engine, table.schema_name, table.table_name)
    except LookupError as error:
        raise PipelineError(f"{label}: {error}") from None
    # The same column policies as run_table: the risk is assessed on what would leave the warehouse.
    aids, synthesized = resolve_columns(source, effective, label)
    sets = column_sets(synthesized, table.risk.quasi_identifiers, table=table.display_name)
    chunks = iter_column_chunks(
        engine,
        source,
        synthesized,
        aid_columns=aids,
        where=table.where,
        chunk_rows=effective.read_chunk_rows,
        max_rows=effective.max_rows,
        progress=progress,
    )
    return sketch_table(chunks, sets, aids, params, table=table.display_name), source.qualified_name


def assess_config(
    config: PipelineConfig,
    *,
    tables: Sequence[str] | None = None,
    source: sa.Engine | str | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> RiskReport:
    """The source-side risk report of the configured tables (all, or those named), with cross-table
    joinability. `source` overrides the config's source URL; `progress(table, rows read)` is optional."""
    params = RiskParams.from_config(config.risk)
    selected = [config.table(name) for name in tables] if tables else list(config.tables)
    from syndiffix_ops.connections import connect, create_engine

    label = f"{config.config_path or 'config'} (risk report)"
    engine, _ = create_engine("source", source, config.source_url, label)
    try:
        with connect(engine, "source", label):  # a wrong URL fails here, as one line naming the side
            pass
        sketchers: dict[str, TableSketcher] = {}
        results = []
        for table in selected:
            name = table.display_name
            sketcher, source_name = sketch_source(
                config,
                table,
                engine,
                params,
                progress=None if progress is None else (lambda rows, n=name: progress(n, rows)),
            )
            sketchers[name] = sketcher
            results.append(summarize_table(name, sketcher, params, source_table=source_name))
        links = cross_table_joinability(sketchers, params) if config.risk.joinability else []
    finally:
        if not isinstance(source, sa.Engine):
            engine.dispose()
    return RiskReport(results, links)


@dataclass(frozen=True)
class OutputRiskFigures:
    """An output's risk figures: the coarse record lineage keeps, and what its report section shows."""

    record: dict[str, Any]
    source: TableRisk  # the source's column sets within the output
    output: OutputRisk
    baselines: dict[str, dict[str, Any]]


@dataclass
class RunRisk:
    """The source sketches a run keeps between reading the source and writing each output."""

    source: TableRisk
    sketcher: TableSketcher
    params: RiskParams
    domains: dict[str, float] = field(default_factory=dict)  # chance baselines; never stored

    @classmethod
    def of_frame(
        cls,
        config: PipelineConfig,
        table: TableConfig,
        frame: pd.DataFrame,
        aid_columns: Sequence[str],
        columns: Sequence[str],
        *,
        source_table: str,
        chunk_rows: int,
    ) -> RunRisk | None:
        """Sketch a source already read into memory (run_table reads it whole for the engine anyway), in
        chunks of `chunk_rows`; None when the config disables risk."""
        if not config.risk.enabled:
            return None
        params = RiskParams.from_config(config.risk)
        sets = column_sets(columns, table.risk.quasi_identifiers, table=table.display_name)
        sketcher = sketch_table(
            frame_chunks(frame, chunk_rows), sets, aid_columns, params, table=table.display_name
        )
        return cls(
            summarize_table(table.display_name, sketcher, params, source_table=source_table),
            sketcher,
            params,
            value_domains(frame, columns),
        )

    def output_figures(self, synthetic: pd.DataFrame, columns: Sequence[str]) -> OutputRiskFigures:
        """The figures of one output with these columns, without their HTML (numbers only: a run
        computes them in a forked child, forked_call, and draws the section itself)."""
        inside = set(columns)
        source = TableRisk(
            self.source.table,
            self.source.source_table,
            self.source.id_columns,
            [s for s in self.source.summaries if set(s.columns) <= inside],
        )
        chunk_rows = max(1, self.params.k * 64)
        output = assess_output(
            self.sketcher, frame_chunks(synthetic, chunk_rows), self.params, columns=columns
        )
        # baselines from the coarse summaries, the chance share on their step: a baseline is itself a
        # share of the source's values and must not reveal what the summary's rounding hides
        summaries = coarse(source.to_dict())["column_sets"]
        columns_of = {set_name(summary.columns): summary.columns for summary in source.summaries}
        baselines = {}
        for name in (name for name in output.reproduction if name in summaries):
            baseline = reproduction_baselines(summaries[name], columns_of[name], self.domains)
            step = share_step(summaries[name]["distinct_values"])
            baselines[name] = {**baseline, "chance": round_share(baseline["chance"], step)}
        record = coarse(
            {"source": source.to_dict(), "output": {**output.to_dict(), "reproduction_baselines": baselines}}
        )
        return OutputRiskFigures(record, source, output, baselines)

    def output_section(self, figures: OutputRiskFigures):
        """The HTML report section of an output's figures."""
        return html_section(
            figures.source, figures.output, baselines=figures.baselines, kinds=self.sketcher.domains
        )
