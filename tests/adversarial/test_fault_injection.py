"""kill -9 of a real `syndiffix-ops run` at each pipeline stage leaves the previous table and lineage as
they were and no helper table behind (issue #11 item 13).

How a run is held at a stage: `run --progress-file` opens the file anew for each progress event, and
here the file is a named pipe. Opening a pipe for writing waits until a reader opens it (the kernel
reports the process in `wait_for_partner`), so the test hands the run through the events one at a
time and stops before the event that marks the kill point; the run waits there and is killed. The
event sequence comes from an uninterrupted run of the same config.

A run can slip past an event: it reopens the pipe before the test has closed its end (SQLite's
swap takes microseconds), and then either writes the next event before the test closes (the test reads
it, or the pipe drops it with the test's end) or after (the write fails with EPIPE and the CLI drops
the event, as it does for any monitor that goes away). So the test reads each hand-over to its end and
finds the events it read in the run's sequence (a dropped one leaves a gap), knows the event the run
was at least held at, and tries again until the hold is exact. So that a slipped run still cannot get
past the kill point's state, a guard holds the lock the next step needs: PostgreSQL's lineage table in
SHARE mode (readers pass, the lineage insert waits), SQLite's shared lock (the commit waits), MariaDB's
lineage rows FOR UPDATE and, before the swap, a metadata lock on the target table (the RENAME waits).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml
from dialect_cases import SALT, leftovers, lineage_rows, url_of

from syndiffix_ops.config import load_config
from syndiffix_ops.lineage import LINEAGE_TABLE
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.warehouse.identifiers import target_tag
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX

REPOSITORY = Path(__file__).resolve().parents[2]
WAIT_SECONDS = 120  # the longest a stage of this small table may take on a loaded machine
# Runs tried per kill point until one is held exactly there. SQLite's swap takes microseconds, and on
# a loaded machine (CI's test workers on 2 cores) a run slipped past it four times in a row.
HOLD_ATTEMPTS = 8


Event = tuple[str, float]  # (stage, fraction), as the CLI writes them to the progress file
BEFORE_SWAP = ("after read", "during synthesis", "during staging write")


def _held_at(events: list[Event], point: str) -> int:
    """Index of the event the run is held at for a kill point."""
    stages = [stage for stage, _ in events]
    synthesis = [i for i, stage in enumerate(stages) if stage.startswith("synthesize: ")]
    return {
        "after read": stages.index("synthesize"),  # the read has finished, synthesis not begun
        "during synthesis": synthesis[1],  # the engine has reported its first stage
        "during staging write": stages.index("write: staged"),  # rows in the staging table
        "between swap and lineage": stages.index("write: swapped"),  # renamed, lineage not inserted
    }[point]


def _source(engine: sa.Engine, schema: str | None, name: str) -> None:
    table = sa.Table(
        name,
        sa.MetaData(),
        sa.Column("amount", sa.Numeric(8, 2)),
        sa.Column("city", sa.String(12)),
        sa.Column("day", sa.Date),
        schema=schema,
    )
    table.create(engine)
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {"amount": i % 97 + 0.25, "city": f"city{i % 5}", "day": dt.date(2024, 1, 1 + i % 28)}
                for i in range(240)
            ],
        )


def _config_file(tmp_path: Path, engine: sa.Engine, schema: str | None, source: str, target: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    qualified = f"{schema}.{source}" if schema else source
    document = {
        "source": url_of(engine),
        "target": url_of(engine),
        "target_schema": schema,
        "tables": [{"source": qualified, "target": target}],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def _snapshot(engine: sa.Engine, schema: str | None, target: str) -> tuple:
    """The target table's column types and every row, and every lineage row: what must not change."""
    with engine.connect() as conn:
        table = sa.Table(target, sa.MetaData(), schema=schema, autoload_with=conn)
        types = [(c.name, repr(c.type)) for c in table.columns]
        rows = sorted(repr(tuple(r)) for r in conn.execute(sa.select(table)))
    return types, rows, lineage_rows(engine, schema, status=None)


def _wchan(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except FileNotFoundError:
        return ""


class _Guard:
    """Holds the lock the run's next step needs (see the module doc); `waited_on` says the run waits
    for it. `target`: on MariaDB also hold the swap of this table (a kill point before the swap)."""

    def __init__(self, engine: sa.Engine, schema: str | None, target: str | None = None):
        self.engine, self.schema = engine, schema
        self.conn = engine.connect()
        lineage = LINEAGE_TABLE if schema is None else f'"{schema}".{LINEAGE_TABLE}'
        if engine.dialect.name == "postgresql":
            self.conn.exec_driver_sql(f"LOCK TABLE {lineage} IN SHARE MODE")
        elif engine.dialect.name == "sqlite":
            self.conn.exec_driver_sql("BEGIN")
            self.conn.exec_driver_sql(f"SELECT count(*) FROM {LINEAGE_TABLE}").all()
        else:
            self.conn.exec_driver_sql(f"SELECT lineage_id FROM {LINEAGE_TABLE} FOR UPDATE").all()
            if target is not None:  # reading it in this open transaction holds its metadata lock
                self.conn.exec_driver_sql(f"SELECT 1 FROM `{target}` LIMIT 1").all()

    def waited_on(self, pid: int) -> bool:
        dialect = self.engine.dialect.name
        if dialect == "sqlite":
            return "nanosleep" in _wchan(pid)  # SQLite's busy handler sleeps until the lock is free
        if dialect == "postgresql":
            statement = (
                "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE NOT l.granted AND a.datname = current_database()"
            )
        else:
            statement = f"SELECT count(*) FROM ({_MARIADB_WAITING}) waiting"
        with self.engine.connect() as conn:  # pooled: one connection serves every poll
            return conn.exec_driver_sql(statement).scalar_one() > 0

    def release(self) -> None:
        if self.engine.dialect.name not in ("sqlite", "postgresql"):
            self._end_waiting_sessions()
        self.conn.rollback()
        self.conn.close()

    def _end_waiting_sessions(self) -> None:
        """End the MariaDB sessions a killed run left waiting on the guard before letting them go: the
        server notices a dead client only between statements, so a waiting RENAME would run (and
        commit) as soon as the guard is released."""
        deadline = time.monotonic() + WAIT_SECONDS
        with self.engine.connect() as conn:
            while waiting := conn.exec_driver_sql(_MARIADB_WAITING).scalars().all():
                for thread in waiting:
                    with contextlib.suppress(sa.exc.OperationalError):  # it ended meanwhile
                        conn.exec_driver_sql(f"KILL {int(thread)}")
                assert time.monotonic() < deadline, f"sessions {waiting} still wait on the guard"


# The sessions of the test's own database that wait for a row lock (the lineage insert) or a metadata
# lock (the RENAME): on MariaDB only the guard holds such locks against a run.
_MARIADB_WAITING = (
    "SELECT p.id FROM information_schema.processlist p "
    "LEFT JOIN information_schema.innodb_trx t ON p.id = t.trx_mysql_thread_id "
    "WHERE p.db = DATABASE() AND (t.trx_state = 'LOCK WAIT' OR p.state = 'Waiting for table metadata lock')"
)


def _wait_until_held(process: subprocess.Popen, guard: _Guard | None = None) -> str:
    """Until the run waits to open the pipe ("pipe") or for the guard's lock ("guard")."""
    deadline = time.monotonic() + WAIT_SECONDS
    for polls in itertools.count():
        if _wchan(process.pid) == "wait_for_partner":
            return "pipe"
        if guard is not None and polls % 20 == 19 and guard.waited_on(process.pid):  # a query: less often
            return "guard"
        if process.poll() is not None:
            pytest.fail(f"the run ended (exit {process.returncode}): {process.stderr.read()}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the run was not held within {WAIT_SECONDS} s")
        time.sleep(0.01)


def _cli(config: Path, progress_file: Path, **popen) -> subprocess.Popen:
    executable = shutil.which("syndiffix-ops")
    assert executable, "the syndiffix-ops command is not installed"
    environment = {
        **os.environ,
        "SYNDIFFIX_SALT": SALT.decode(),
        "PYTHONPATH": os.pathsep.join([str(REPOSITORY / "core"), str(REPOSITORY)]),
    }
    command = [sys.executable, executable, "run", str(config), "--progress-file", str(progress_file)]
    return subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL, text=True, **popen)


def _baseline(config: Path) -> list[Event]:
    """An uninterrupted run: the previous table and lineage, and the events a run reports (the CLI
    reports the same ones; the hand-over finds what it reads in this list)."""
    events: list[Event] = []
    run_table(
        load_config(config),
        load_config(config).tables[0].target_name,
        salt=SALT,
        progress=lambda stage, fraction: events.append((stage, round(fraction, 4))),
    )
    assert len(set(events)) == len(events), f"events repeat, so a hand-over could not place them: {events}"
    return events


def _placed(events: list[Event], reported: list[Event], handed: int) -> int:
    """How many events the run has passed, given that it reported `reported` (in one hand-over) after
    the first `handed`; events in between were dropped on the way (see the module doc)."""
    start = events.index(reported[0], handed)  # ValueError: an event the run should not report (now)
    assert reported == events[start : start + len(reported)], (reported, events[handed:])
    return start + len(reported)


def _kill_at(config: Path, pipe: Path, events: list[Event], held_at: int, guard: _Guard) -> int:
    """Run the CLI, hand it through events[:held_at], kill -9 it where it is then held; return the
    index of the event it was held at at the least (held_at, unless it slipped past on the way)."""
    os.mkfifo(pipe)
    process = _cli(config, pipe, stderr=subprocess.PIPE)
    handed = 0
    try:
        while handed < held_at:
            if _wait_until_held(process, guard) == "guard":
                handed = len(events)  # slipped all the way to the step the guard holds back
                break
            with pipe.open(encoding="utf-8") as reader:
                lines = [json.loads(line) for line in reader.read().splitlines()]
            handed = _placed(events, [(e["stage"], e["fraction"]) for e in lines], handed)
        _wait_until_held(process, guard)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=WAIT_SECONDS) == -signal.SIGKILL
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()
        pipe.unlink()
    return handed


def _kill_until_held_at(config, pipe, engine, schema, events, point, check, target=None) -> None:
    """Kill runs until one is held exactly at the kill point; every killed run must pass `check`.
    `target`: the target table, whose swap the guard holds back at a kill point before it."""
    wanted = _held_at(events, point)
    for _ in range(HOLD_ATTEMPTS):
        guard = _Guard(engine, schema, target if point in BEFORE_SWAP else None)
        try:
            held = _kill_at(config, pipe, events, wanted, guard)
        finally:
            guard.release()
        check(point)
        if held == wanted:
            return
    pytest.fail(f"{HOLD_ATTEMPTS} runs slipped past {events[wanted][0]!r} before they could be held there")


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_transactional_dialects_keep_the_previous_table_and_lineage_at_every_kill_point(
    dialect, tmp_path, request
):
    if dialect == "sqlite":
        # timeout: a run held back by the guard waits for the lock instead of giving up after 5 s
        engine, schema = (
            sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}?timeout={WAIT_SECONDS}"),
            None,
        )
    else:
        engine, schema = sa.create_engine(request.getfixturevalue("pg_url")), f"faults {uuid.uuid4().hex[:6]}"
        with engine.begin() as conn:
            conn.execute(sa.schema.CreateSchema(schema))
    _source(engine, schema, "sales")
    config = _config_file(tmp_path, engine, schema, "sales", "sales_synth")
    events = _baseline(config)
    before = _snapshot(engine, schema, "sales_synth")

    def unchanged(point: str) -> None:
        assert _snapshot(engine, schema, "sales_synth") == before, point
        assert leftovers(engine, schema) == [], point

    for point in ("after read", "during synthesis", "during staging write", "between swap and lineage"):
        _kill_until_held_at(config, tmp_path / "events.pipe", engine, schema, events, point, unchanged)
    engine.dispose()


def test_mariadb_leftovers_of_a_killed_replace_are_cleaned_by_the_next_run(mariadb_url, tmp_path):
    engine = sa.create_engine(mariadb_url)
    source, target = f"sales_{uuid.uuid4().hex[:6]}", f"synth_{uuid.uuid4().hex[:6]}"
    _source(engine, None, source)
    config = _config_file(tmp_path, engine, None, source, target)
    events = _baseline(config)
    pipe = tmp_path / "events.pipe"

    def own_leftovers() -> list[str]:
        return [n for n in leftovers(engine, None) if target_tag(target) in n]

    before = _snapshot(engine, None, target)

    def staging_left(point: str) -> None:
        """Killed with the rows in the staging table: the previous table and lineage are untouched."""
        assert _snapshot(engine, None, target) == before
        [stage] = own_leftovers()  # a retry's run dropped the one before it on its way
        assert stage.startswith(STAGING_PREFIX)

    _kill_until_held_at(config, pipe, engine, None, events, "during staging write", staging_left, target)

    def previous_table_left(point: str) -> None:
        """Killed between RENAME and the lineage insert: the new table is in place, lineage still
        describes the previous run (docs/warehouse.md), the previous table waits as _sdx_old_*."""
        types, _, lineage = _snapshot(engine, None, target)
        assert types == before[0] and lineage == before[2]
        [old] = own_leftovers()  # the killed run itself dropped the staging table left before it
        assert old.startswith(OLD_PREFIX)

    _kill_until_held_at(config, pipe, engine, None, events, "between swap and lineage", previous_table_left)

    run_table(load_config(config), target, salt=SALT)  # the next run cleans up and agrees with lineage
    assert own_leftovers() == []
    latest = [r for r in lineage_rows(engine, None) if r["target_table"] == target][-1]
    assert latest["synthetic_rows"] == len(_snapshot(engine, None, target)[1])
    engine.dispose()
