"""Which stitch columns pin down a column of either side (stitch_priority)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from syndiffix_core.stitch_priority import tied_columns
from syndiffix_core.stitching import Microtable


def table(
    columns: dict[int, np.ndarray], typed_only: tuple[int, ...] = (), numbers: tuple[int, ...] = ()
) -> Microtable:
    """Columns of names (codes of strings without an order), but `numbers`; `typed_only` keep no floats."""
    keys = tuple(columns)
    kept = tuple(k for k in keys if k not in typed_only)
    values = np.column_stack([np.asarray(columns[k], dtype=float) for k in kept])
    typed = {k: pd.Series(columns[k]) for k in keys}
    return Microtable(keys, values, typed, kept, frozenset(keys) - set(numbers))


def test_a_code_that_determines_a_name_on_either_side_is_tied():
    rng = np.random.default_rng(1)
    code = rng.integers(0, 22, size=2000)
    other = rng.integers(0, 6, size=2000)
    names = np.array([f"maker {(7 * c) % 22}" for c in code], dtype=object)
    right = table({0: code, 1: other, 2: names}, typed_only=(2,))
    left = table({0: rng.permutation(code), 1: other, 3: rng.normal(size=2000)}, numbers=(3,))
    assert tied_columns(left, right, [1, 0]) == [0]
    # The same link on the left side (the name came with an earlier cluster) ties the code as well.
    assert tied_columns(right, left, [1, 0]) == [0]


def test_a_stitch_column_with_an_order_is_never_tied():
    # A school's number determines its state; paired with a neighbouring school's row, a row keeps
    # its links roughly, so it pairs in order as before.
    rng = np.random.default_rng(4)
    school = rng.integers(0, 40, size=2000)
    state = school // 20
    right = table({0: school, 1: rng.integers(0, 4, size=2000), 2: state}, numbers=(0, 1))
    left = table({0: school, 1: rng.integers(0, 4, size=2000), 3: rng.normal(size=2000)}, numbers=(0, 1, 3))
    assert tied_columns(left, right, [1, 0]) == []
    # A column of names on one side only (the other found its order linked to a number) is not either.
    named = Microtable(right.columns, right.values, right.typed, names=frozenset({0}))
    assert tied_columns(left, named, [1, 0]) == []
    named_left = Microtable(left.columns, left.values, left.typed, names=frozenset({0}))
    assert tied_columns(named_left, named, [1, 0]) == [0]


def test_a_column_determined_by_a_stitch_column_ties_it_and_the_strongest_comes_first():
    rng = np.random.default_rng(2)
    code = rng.integers(0, 40, size=4000)
    kind = rng.integers(0, 8, size=4000)
    group = kind // 2  # a function of the kind
    noisy = np.where(rng.random(4000) < 0.9, code % 5, rng.integers(0, 5, size=4000))
    right = table({0: code, 1: kind, 2: group * 100 + 7, 3: noisy})
    left = table({0: code, 1: kind, 4: rng.normal(size=4000)}, numbers=(4,))
    # The kind determines column 2 (1.0); the code determines column 3 only at about 0.9.
    assert tied_columns(left, right, [0, 1]) == [1, 0]


def test_unrelated_and_near_unique_columns_tie_nothing():
    rng = np.random.default_rng(3)
    code = rng.integers(0, 22, size=1000)
    other = rng.integers(0, 6, size=1000)
    # An id of 500 values determines every column on 1,000 rows by chance: too few rows per value.
    ids = rng.integers(0, 500, size=1000)
    right = table({0: code, 1: other, 2: rng.integers(0, 22, size=1000), 3: ids})
    left = table({0: code, 1: other, 4: rng.normal(size=1000)}, numbers=(4,))
    assert tied_columns(left, right, [1, 0]) == []
