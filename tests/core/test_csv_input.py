"""The arrow CSV reader gives what pandas' reader gives, or None so that pandas takes over."""

import pandas as pd
import pytest

from syndiffix_core.csv_input import read_declared

DECLARED = {"id": str, "n": "Int64", "x": "float64", "s": "string", "flag": str}


def _pandas(path, columns):
    return pd.read_csv(path, usecols=list(columns), dtype=columns, keep_default_na=False, na_values=[""])[
        list(columns)
    ]


def test_values_nulls_and_quoting_come_out_as_pandas_reads_them(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text(
        "id,n,x,s,flag,unused\n"
        '1,7,1.5,"a, quoted",yes,z\n'
        '2,,2e3,"two\nlines",no,z\n'
        '3,-4,,"",,z\n'
        "4,9007199254740993,0.1,NA,True,z\n"
        "5,0,-0.0,Zürich,,z\n"
    )
    arrow = read_declared(path, DECLARED)
    assert arrow is not None
    pd.testing.assert_frame_equal(arrow, _pandas(path, DECLARED))
    assert arrow["s"].tolist()[:4] == ["a, quoted", "two\nlines", pd.NA, "NA"]
    assert arrow["n"].tolist()[3] == 9007199254740993


@pytest.mark.parametrize(
    "body",
    [
        "n,x\n3.0,2\n",  # integral float in an integer column
        "n,x\nseven,2\n",  # not a number: pandas names it
        "n,x\n1,2,3\n",  # ragged row
    ],
)
def test_what_arrow_rejects_is_left_to_pandas(tmp_path, body):
    path = tmp_path / "t.csv"
    path.write_text(body)
    assert read_declared(path, {"n": "Int64", "x": "float64"}) is None


def test_padded_numbers_read_as_pandas_reads_them(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("n,x\n 7 ,1\n8, 2.5 \n")
    columns = {"n": "Int64", "x": "float64"}
    pd.testing.assert_frame_equal(read_declared(path, columns), _pandas(path, columns))


def test_invalid_utf8_and_a_missing_column_are_left_to_pandas(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"s,x\n\xff\xfe,1\n")
    assert read_declared(path, {"s": "string", "x": "float64"}) is None
    path.write_text("s,x\na,1\n")
    assert read_declared(path, {"s": "string", "y": "float64"}) is None
