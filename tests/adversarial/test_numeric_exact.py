"""NUMERIC(p, s) near its limits: synthetic values rounded to the scale and within the precision (item 7)."""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np
import pandas as pd
import sqlalchemy as sa
from dialect_cases import SALT, config_for, lineage_rows
from sqlalchemy.dialects import mysql

from syndiffix_ops.pipeline import run_table
from syndiffix_ops.warehouse.types import declared_numeric_bounds, within_declared_numeric

HIGHEST = Decimal("9999999999999999999999999999.9999999999")  # NUMERIC(38, 10)
LOWEST = HIGHEST.copy_negate()  # exact: unary minus would round to the default context's 28 digits


def test_values_are_rounded_to_the_scale_and_clamped_to_the_exact_bounds():
    values = pd.Series([1.005, 999.994, 999.996, -1e9, np.nan, 12.3456], name="x")
    out = within_declared_numeric(values, sa.Numeric(5, 2)).tolist()
    exact = [None if v is None else Decimal(str(v)) for v in out]
    assert exact == [
        Decimal("1.0"),
        Decimal("999.99"),
        Decimal("999.99"),
        Decimal("-999.99"),
        None,
        Decimal("12.35"),
    ]
    assert out[2] == Decimal("999.99")  # clamped: the exact bound itself, not a float near it

    near_max = pd.Series([float(HIGHEST), -float(HIGHEST), 1e27, 0.5])
    out = within_declared_numeric(near_max, sa.Numeric(38, 10)).tolist()
    assert out[:2] == [HIGHEST, LOWEST] and out[2] == 1e27 and out[3] == 0.5

    unsigned = within_declared_numeric(pd.Series([-0.4, -3.0, 7.0]), mysql.DECIMAL(4, 1, unsigned=True))
    assert unsigned.tolist() == [Decimal(0), Decimal(0), 7.0]


def test_types_without_a_declared_precision_are_left_alone():
    for sql_type in (sa.Numeric(), sa.Float(), sa.Integer(), sa.String(5)):
        assert declared_numeric_bounds(sql_type) is None
    series = pd.Series([1e300, -1e300])
    assert within_declared_numeric(series, sa.Numeric()) is series


def test_numeric_38_10_near_its_maximum_round_trips_on_every_dialect(warehouse_db):
    engine, schema = warehouse_db
    table = sa.Table(
        "big_amounts",
        sa.MetaData(),
        sa.Column("amount", sa.Numeric(38, 10)),
        sa.Column("small", sa.Numeric(6, 3)),
        schema=schema,
    )
    table.create(engine)
    with localcontext(prec=50):
        near = [HIGHEST, HIGHEST - 1, LOWEST, HIGHEST / 2, Decimal("123.4567890123")]
    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {"amount": near[i % len(near)], "small": Decimal(i % 997) + Decimal("0.125")}
                for i in range(400)
            ],
        )
    source = f"{schema}.big_amounts" if schema else "big_amounts"
    [result] = run_table(
        config_for(engine, engine, source, "big_synth", target_schema=schema), "big_synth", salt=SALT
    )
    with engine.connect() as conn:
        written = sa.Table("big_synth", sa.MetaData(), schema=schema, autoload_with=conn)
        rows = conn.execute(sa.select(written.c.amount, written.c.small)).all()
    assert len(rows) == result.rows_written > 0
    amounts = [Decimal(str(a)) for a, _ in rows if a is not None]
    smalls = [Decimal(str(s)) for _, s in rows if s is not None]
    assert amounts and all(LOWEST <= a <= HIGHEST for a in amounts)
    assert max(amounts) > HIGHEST / 10  # the top of the range is kept, not collapsed to something small
    assert smalls and all(Decimal("-999.999") <= s <= Decimal("999.999") for s in smalls)
    assert all(s == s.quantize(Decimal("0.001")) for s in smalls)
    assert [r["target_table"] for r in lineage_rows(engine, schema)] == ["big_synth"]
