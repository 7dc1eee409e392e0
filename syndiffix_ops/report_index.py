"""The report index: per table, its runs newest first, how fidelity and risk moved, and what needs attention.

Its input is one payload per run and table, either the `<table>/<run id>.metrics.json` files of a report
folder (`read_report_payloads`) or the lineage table (`payloads_from_lineage`, for `syndiffix-ops
report`): `{"table", "source_table", "run_id", "generated_at", "status", "metrics", "risk", "report"}`.

Scores compare like with like: across runs of a table only when the run compared the same columns, and
outputs of one source table on the columns they all hold (a narrow copy of the worst columns must not
look worse than a wide copy that also holds easy ones).
"""

from __future__ import annotations

import datetime as dt
import html
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from syndiffix_ops.dp_budget import Release, Spending
from syndiffix_ops.report import (
    PAGE,
    SCALE_NOTE,
    STYLE,
    ReportSection,
    fmt_number,
    render_section,
    report_relative_path,
)
from syndiffix_ops.verdict import fidelity_scores

Payload = Mapping[str, Any]


def read_report_payloads(directory: str | Path) -> list[dict[str, Any]]:
    """The metrics files of every report in `directory`, each with `report` set to its HTML file relative
    to `directory`, oldest first."""
    directory = Path(directory) if isinstance(directory, str) else directory
    payloads = []
    for metrics_path in directory.glob("*/*.metrics.json"):
        payload = json.loads(metrics_path.read_text(encoding="utf-8"))
        html_name = metrics_path.name.removesuffix(".metrics.json") + ".html"
        payload["report"] = f"{metrics_path.parent.name}/{html_name}"
        payload.setdefault("status", "success")
        payloads.append(payload)
    payloads.sort(key=lambda p: (str(p.get("generated_at", "")), str(p.get("run_id", ""))))
    return payloads


def payloads_from_lineage(
    rows: Iterable[Mapping[str, Any]], schema: str | None, directory: str | Path | None = None
) -> list[dict[str, Any]]:
    """Index payloads from lineage rows (oldest first); `report` links a run's HTML when `directory`
    holds it. Failed runs are kept: the history shows them with their error class and stage. A DP
    release's totals are recounted from the rows (the ledger as of that release), so releases a run did
    not see when it counted (two runs at once) are in the index."""
    directory = Path(directory) if isinstance(directory, str) else directory
    payloads = []
    ledger: dict[str, list[Release]] = {}
    for row in rows:
        table = f"{schema}.{row['target_table']}" if schema else str(row["target_table"])
        relative = str(report_relative_path(table, str(row["run_id"])))
        finished = row.get("finished_at")
        payloads.append(
            {
                "table": table,
                "source_table": row.get("source_table"),
                "run_id": row["run_id"],
                "generated_at": finished.replace(microsecond=0).isoformat()
                if isinstance(finished, dt.datetime)
                else str(finished),
                "status": row.get("status", "success"),
                "error": " in ".join(filter(None, [row.get("error_class"), row.get("error_stage")])) or None,
                "metrics": _recounted(row, ledger),
                "risk": row.get("risk_metrics"),
                "report": relative if directory is not None and (directory / relative).is_file() else None,
            }
        )
    return payloads


def _recounted(row: Mapping[str, Any], ledger: dict[str, list[Release]]) -> Any:
    """The row's quality metrics with its DP budget totals over the ledger's releases up to this row."""
    metrics = row.get("quality_metrics")
    identity = row.get("dp_identity")
    if not identity or row.get("status", "success") != "success" or row.get("dp_epsilon") is None:
        return metrics
    releases = ledger.setdefault(identity, [])
    releases.append(
        Release(row.get("dp_release"), float(row["dp_epsilon"]), float(row.get("dp_delta") or 0.0))
    )
    budget = (metrics or {}).get("dp_budget")
    if budget is None or "total_epsilon" not in budget:
        return metrics
    total = Spending.of(releases)
    recounted = {
        "total_releases": total.releases,
        "total_epsilon": total.epsilon,
        "total_delta": total.delta,
        "over_budget": total.beyond(budget.get("budget_epsilon"), budget.get("budget_delta")),
    }
    return {**metrics, "dp_budget": {**budget, **recounted}}


def write_report_index(directory: str | Path, payloads: Sequence[Payload] | None = None) -> Path:
    """Write `index.html` in `directory` from `payloads` (default: the metrics files found there)."""
    directory = Path(directory) if isinstance(directory, str) else directory
    payloads = read_report_payloads(directory) if payloads is None else payloads
    by_table: dict[str, list[Payload]] = {}
    for payload in payloads:
        by_table.setdefault(str(payload.get("table")), []).append(payload)
    by_source: dict[str, list[str]] = {}
    for table, runs in by_table.items():
        by_source.setdefault(str(runs[-1].get("source_table") or table), []).append(table)

    sections = [ReportSection("How to read this", f'<p class="note">{SCALE_NOTE}</p>')]
    if by_table:
        sections.append(_overview_section(by_table))
    budgets = _dp_budgets(payloads)
    if budgets:
        sections.append(_dp_budget_section(budgets))
    for source in sorted(by_source):
        tables = sorted(by_source[source])
        if len(tables) > 1:
            sections.append(_like_with_like_section(source, {t: by_table[t] for t in tables}))
        sections += [_history_section(table, by_table[table]) for table in tables]
    if not by_table:
        sections.append(ReportSection("Reports", "<p>No reports yet.</p>"))
    page = PAGE.format(
        title="Synthetic data quality reports",
        table="all tables",
        generated_at=html.escape(dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()),
        metrics_file="&lt;table&gt;/&lt;run id&gt;.metrics.json",
        style=STYLE,
        body="\n".join(render_section(section) for section in sections),
    )
    directory.mkdir(parents=True, exist_ok=True)
    index_path = directory / "index.html"
    index_path.write_text(page, encoding="utf-8")
    return index_path


def _latest_success(runs: Sequence[Payload]) -> Payload | None:
    return next((run for run in reversed(runs) if run.get("metrics")), None)


def _overview_section(by_table: Mapping[str, Sequence[Payload]]) -> ReportSection:
    """One line per table: the latest run's score, its reference and what needs attention."""
    rows = []
    for table in sorted(by_table):
        latest = _latest_success(by_table[table])
        if latest is None:
            rows.append(f"<tr><td>{_anchor(table)}</td><td colspan='4'>no successful run</td></tr>")
            continue
        metrics = latest["metrics"]
        scores = metrics.get("scores") or {}
        rows.append(
            f"<tr><td>{_anchor(table)}</td><td class='score'>{fmt_number(scores.get('overall'), 1)}</td>"
            f"<td>{fmt_number(scores.get('sample'), 1)}</td><td>{_attention_text(metrics)}</td>"
            f"<td>{_risk_text(latest.get('risk'))}</td></tr>"
        )
    return ReportSection(
        "Tables (latest run)",
        "<table><tr><th>table</th><th>fidelity (0&ndash;100)</th><th>sample of the source</th>"
        f"<th>needs attention</th><th>risk</th></tr>{''.join(rows)}</table>",
    )


def _dp_budgets(payloads: Sequence[Payload]) -> dict[str, tuple[Payload, list[str]]]:
    """Per protected identity: the newest successful run's DP budget record (its totals cover every
    release recorded before it) and the outputs that released about it."""
    budgets: dict[str, tuple[Payload, list[str]]] = {}
    for payload in payloads:  # oldest first: the newest run of an identity wins
        budget = (payload.get("metrics") or {}).get("dp_budget") or {}
        if payload.get("status", "success") != "success" or budget.get("total_epsilon") is None:
            continue
        outputs = budgets.get(budget["identity_id"], (None, []))[1]
        table = str(payload.get("table"))
        budgets[budget["identity_id"]] = (budget, outputs + ([table] if table not in outputs else []))
    return budgets


def _dp_budget_section(budgets: Mapping[str, tuple[Payload, list[str]]]) -> ReportSection:
    rows = []
    for budget, outputs in budgets.values():
        limits = ", ".join(
            f"{name} {budget[key]:g}"
            for name, key in (("&epsilon;", "budget_epsilon"), ("&delta;", "budget_delta"))
            if budget.get(key) is not None
        )
        over = budget.get("over_budget")
        status = f"<strong class='over'>over budget: {html.escape(over)}</strong>" if over else "within"
        rows.append(
            f"<tr{' class=risk-identifying' if over else ''}><td>{html.escape(str(budget['source_table']))}</td>"
            f"<td>{html.escape(str(budget['protected_unit']))}</td><td>{html.escape(', '.join(outputs))}</td>"
            f"<td>{budget['total_releases']}</td><td class='score'>{budget['total_epsilon']:.3g}</td>"
            f"<td>{budget['total_delta']:.3g}</td><td>{limits or 'none set'}</td>"
            f"<td>{status if limits else '–'}</td></tr>"
        )
    return ReportSection(
        "Differential privacy budget spent, per protected source table",
        "<p class='note'>Per source table and protected unit (the entities of its AID column, or its rows): "
        "the &epsilon; and &delta; of every distinct DP release recorded in the lineage, summed (basic "
        "composition, an upper bound on the privacy loss), as of each identity's newest release. Another "
        "<code>where</code>, column set or output of the same table protects the same people and counts "
        "too. Budget: the config's <code>dp:</code> block.</p>"
        "<table><tr><th>source table</th><th>protected unit</th><th>outputs</th><th>releases</th>"
        "<th>&epsilon; spent</th><th>&delta; spent</th><th>budget</th><th>status</th></tr>"
        f"{''.join(rows)}</table>",
    )


def _anchor(table: str) -> str:
    return f'<a href="#{html.escape(_anchor_id(table))}">{html.escape(table)}</a>'


def _anchor_id(table: str) -> str:
    return "table-" + "".join(ch if ch.isalnum() else "-" for ch in table)


def _attention_text(metrics: Mapping[str, Any]) -> str:
    flags = metrics.get("attention")
    if flags is None:
        return "–"
    names = [html.escape(flag["column"]) for flag in flags["columns"]]
    names += [html.escape(" + ".join(flag["columns"])) for flag in flags["pairs"]]
    if not names:
        return '<span class="ok-text">nothing</span>'
    shown = ", ".join(f"<strong>{name}</strong>" for name in names[:6])
    return shown + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _like_with_like_section(source: str, tables: Mapping[str, Sequence[Payload]]) -> ReportSection:
    latest = {table: _latest_success(runs) for table, runs in tables.items()}
    latest = {table: payload for table, payload in latest.items() if payload is not None}
    column_sets = [set(payload["metrics"]["columns"]) for payload in latest.values()]
    common = sorted(set.intersection(*column_sets)) if column_sets else []
    if len(latest) < 2 or not common:
        return ReportSection(f"Outputs of {source}", "<p>The outputs share no compared column.</p>")
    rows = []
    for table, payload in latest.items():
        scores = fidelity_scores(payload["metrics"], columns=common)
        rows.append(
            f"<tr><td>{html.escape(table)}</td><td>{len(payload['metrics']['columns'])}</td>"
            f"<td class='score'>{fmt_number(scores['overall'], 1)}</td>"
            f"<td>{fmt_number(scores['column_shapes']['score'], 1)}</td>"
            f"<td>{fmt_number(scores['pair_trends']['score'], 1)}</td><td>{fmt_number(scores['sample'], 1)}</td></tr>"
        )
    return ReportSection(
        f"Outputs of {source}, compared on the same columns",
        f"<p>Scored only on the {len(common)} columns every output holds ({html.escape(', '.join(common))}) "
        "and the pairs among them, so the scores compare like with like (each output's own score also "
        "depends on which columns it holds).</p>"
        "<table><tr><th>output</th><th>columns in output</th><th>fidelity on shared columns</th>"
        "<th>column shapes</th><th>pair trends</th><th>sample of the source</th></tr>"
        f"{''.join(rows)}</table>",
    )


def _history_section(table: str, runs: Sequence[Payload]) -> ReportSection:
    rows = []
    newest_columns = None
    for payload in reversed(runs):
        metrics = payload.get("metrics") or {}
        scores = metrics.get("scores") or {}
        report = payload.get("report")
        run = html.escape(str(payload.get("run_id") or "–"))
        link = f'<a href="{html.escape(report)}">{run}</a>' if report else run
        columns = list(metrics.get("columns") or [])
        if newest_columns is None and columns:
            newest_columns = columns
        changed = bool(columns) and newest_columns is not None and columns != newest_columns
        status = html.escape(str(payload.get("status", "success")))
        if payload.get("error"):
            status += f"<br><span class='note'>{html.escape(payload['error'])}</span>"
        efficacy = (scores.get("ml_efficacy") or {}).get("score")
        rows.append(
            "<tr>"
            f"<td>{link}</td><td>{html.escape(str(payload.get('generated_at', '')))}</td><td>{status}</td>"
            f"<td class='score'>{fmt_number(scores.get('overall'), 1)}"
            f"{' <span class=note>(other columns)</span>' if changed else ''}</td>"
            f"<td>{fmt_number((scores.get('column_shapes') or {}).get('score'), 1)}</td>"
            f"<td>{fmt_number((scores.get('pair_trends') or {}).get('score'), 1)}</td>"
            f"<td>{fmt_number(efficacy, 1)}</td>"
            f"<td>{_attention_text(metrics) if metrics else '–'}</td>"
            f"<td>{_risk_text(payload.get('risk'))}</td>"
            f"<td>{fmt_number(metrics.get('row_ratio'), 2)}</td>"
            "</tr>"
        )
    source = runs[-1].get("source_table")
    head = f"<p>Source: {html.escape(str(source))}. Newest run first.</p>" if source else ""
    body = (
        "<table><tr><th>run</th><th>finished (UTC)</th><th>status</th><th>fidelity</th><th>column shapes</th>"
        "<th>pair trends</th><th>ML efficacy</th><th>needs attention</th><th>risk</th><th>row ratio</th></tr>"
        + "".join(rows)
        + "</table>"
    )
    return ReportSection(table, f'<div id="{html.escape(_anchor_id(table))}">{head}{body}</div>')


def _risk_text(risk: Mapping[str, Any] | None) -> str:
    """Identifying column sets of the source, and the output's largest reproduction of unique values."""
    if not risk:
        return "–"
    source = risk.get("source") or {}
    identifying = source.get("identifying") or []
    parts = [
        f"identifying: {html.escape(', '.join(identifying))}" if identifying else "no identifying column"
    ]
    output = risk.get("output") or {}
    baselines = output.get("reproduction_baselines") or {}
    shares = [
        (values.get("share_unique_in_source"), name)
        for name, values in (output.get("reproduction") or {}).items()
        if values.get("share_unique_in_source") is not None
    ]
    if shares:
        share, name = max(shares)
        chance = (baselines.get(name) or {}).get("chance")
        versus = f" (chance {chance:.3f})" if chance is not None else ""
        parts.append(f"most reproduced source-unique values: {html.escape(name)} {share:.3f}{versus}")
    return "<br>".join(parts)
