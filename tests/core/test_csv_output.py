"""The CLI's arrow CSV writer produces exactly the text of DataFrame.to_csv(index=False)."""

import io

import numpy as np
import pandas as pd
import pytest

from syndiffix_core.csv_output import BATCH_ROWS, write_csv


def _written(frame: pd.DataFrame) -> str:
    buffer = io.BytesIO()
    write_csv(frame, buffer)
    return buffer.getvalue().decode("utf-8")


def _mixed(rows: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    reals = np.round(rng.normal(50, 30, rows), 2)
    reals[rng.random(rows) < 0.1] = np.nan
    odd = rng.choice(
        [0.1, 1e-5, 1.5e-7, 1e16, 123456789012.0, -0.0, 55.0, 2.5e15, 0.30000000000000004, -0.5], rows
    )
    ints = pd.array(rng.integers(-5, 90, rows), dtype="Int64")
    ints[rng.random(rows) < 0.1] = pd.NA
    flags = pd.array(rng.random(rows) < 0.5, dtype="boolean")
    flags[rng.random(rows) < 0.1] = pd.NA
    words = pd.array(
        rng.choice(["plain", 'has "quotes"', "a,b", "line\nbreak", "", "ünï"], rows), dtype="string"
    )
    words[rng.random(rows) < 0.1] = pd.NA
    seconds = pd.Timestamp("2020-01-01") + pd.to_timedelta(rng.integers(0, 10**8, rows), unit="s")
    stamps = pd.Series(seconds).where(rng.random(rows) > 0.1)
    return pd.DataFrame(
        {
            "real": reals,
            "odd reals": odd,
            "int": ints,
            "numpy int": rng.integers(0, 10**12, rows),
            "flag": flags,
            "numpy bool": rng.random(rows) < 0.3,
            'quoted, "name"': words,
            "objects": rng.choice(["x", "y,z"], rows).astype(object),
            "stamp": stamps,
            "day": pd.Timestamp("2021-03-01") + pd.to_timedelta(rng.integers(0, 900, rows), unit="D"),
            "fraction": pd.Timestamp("2021-03-01") + pd.to_timedelta(rng.integers(0, 10**9, rows), unit="ms"),
            "float32": rng.random(rows).astype(np.float32),
            "category": pd.Categorical(rng.choice(["a", "b"], rows)),
        }
    )


@pytest.mark.parametrize("rows", [1, 5, 1000, BATCH_ROWS + 17])
def test_text_equals_to_csv(rows):
    frame = _mixed(rows, seed=rows)
    assert _written(frame) == frame.to_csv(index=False)


def test_empty_and_one_column_frames_match_to_csv():
    for frame in (_mixed(5).iloc[0:0], pd.DataFrame({"only": ["", None, "x"]})):
        assert _written(frame) == frame.to_csv(index=False)
