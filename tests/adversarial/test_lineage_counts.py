"""No exact count below any size in lineage risk_metrics: small counts are rounded to tens.

The campaign found `risk_metrics...distinct_ids` rounded to two significant digits, so every count below
100 was stored exactly (a 37-row table without AIDs: 37).
"""

from __future__ import annotations

import pytest
from support_dataloss import SALT, config_for, lineage_rows, make_orders

from syndiffix_ops.pipeline import run_table
from syndiffix_ops.risk import coarse, coarse_count


def _numbers(value, path=""):
    """(path, number) of every number in a JSON-like value, booleans excluded."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, f"{path}[{index}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path, value


def test_a_37_row_table_stores_no_exact_count(warehouse_db):
    engine, schema = warehouse_db
    make_orders(engine, schema, rows=37)
    run_table(config_for(engine, schema, risk=True, min_rows=0), "orders_synth", salt=SALT)
    [row] = lineage_rows(engine, schema)
    risk = row["risk_metrics"]
    for column in ("id", "label", "amount", "paid"):
        assert risk["source"]["column_sets"][column]["distinct_ids"] == 40
    assert risk["source"]["column_sets"]["id"]["distinct_values"] == 40
    assert risk["source"]["column_sets"]["paid"]["distinct_values"] == 10  # 2 values
    counts = [(path, n) for path, n in _numbers(risk) if isinstance(n, int)]
    assert counts and all(n % 10 == 0 for _, n in counts), counts
    assert not [path for path, n in _numbers(risk) if n == 37]


@pytest.mark.parametrize(
    ("count", "stored"),
    [
        (0, 0),
        (1, 10),
        (2, 10),
        (14, 10),
        (15, 20),
        (37, 40),
        (99, 100),
        (123, 120),
        (995, 1000),
        (4567, 4600),
    ],
)
def test_counts_are_never_finer_than_tens(count, stored):
    assert coarse_count(count) == stored
    assert coarse({"distinct_ids": count}) == {"distinct_ids": stored}


def test_shares_stay_shares_and_float_counts_are_counts():
    assert coarse({"share": 0.1234, "whole": 1.0, "estimate": 36.6}) == {
        "share": 0.123,
        "whole": 1.0,
        "estimate": 40,
    }
