"""A column synthesized with others keeps the distribution its own 1-dim tree gives (issue 12, tails).

The table mimics flight delays: a heavy right tail (most delays small, a few hours long) tied to a second
delay column, next to a categorical and two ordinary numbers, all in one 5-column cluster. Multi-column
trees lose the tail's sparse nodes, which pulled the mean delay down to about half before calibration.
"""

import numpy as np
import pandas as pd
import pytest

from syndiffix_core import synthesize


def _delays(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    late = rng.random(n) < 0.3
    departure = np.where(late, rng.exponential(60, n), -rng.exponential(5, n)).round()
    return pd.DataFrame(
        {
            "dep_delay": departure,
            "arr_delay": (departure + rng.normal(-5, 12, n)).round(),
            "carrier": rng.choice(list("ABCDEFGH"), n, p=[0.3, 0.2, 0.15, 0.1, 0.1, 0.07, 0.05, 0.03]),
            "distance": rng.integers(100, 3000, n),
            "hour": rng.integers(5, 23, n),
        }
    )


@pytest.mark.parametrize("salt", ["tail-0", "tail-1", "tail-2"])
def test_heavy_tail_keeps_its_mean_and_its_share_above_the_p90(salt):
    table = _delays(8000, seed=3)
    out = synthesize(table, salt=salt)
    for column in ("dep_delay", "arr_delay", "distance", "hour"):
        source, copy = table[column].to_numpy(float), out[column].to_numpy(float)
        assert abs(copy.mean() - source.mean()) <= 0.05 * source.std(), column
        p90 = np.quantile(source, 0.9)
        share = (copy > p90).mean() / (source > p90).mean()
        assert abs(share - 1) <= 0.1, (column, share)


@pytest.mark.parametrize("salt", ["tail-0", "tail-1"])
def test_calibration_keeps_the_joint_order_of_the_columns(salt):
    table = _delays(8000, seed=5)
    out = synthesize(table, salt=salt)
    # Rows are dealt the 1-dim values in the order of their own values: the rank correlation the 5-dim
    # tree keeps (source 0.71, the tree about 0.56) survives; dealing them out in any other order
    # would not.
    copy = out["dep_delay"].rank().corr(out["arr_delay"].rank())
    assert copy > 0.5
    # The categorical column's shares are those of its 1-dim tree (noise of a few rows per value);
    # the 5-column tree alone is off by up to 0.8 percentage points here.
    shares = out["carrier"].value_counts(normalize=True)
    expected = table["carrier"].value_counts(normalize=True)
    assert (shares.reindex(expected.index).fillna(0) - expected).abs().max() < 0.003


@pytest.mark.parametrize("with_number", [False, True])
def test_names_paired_one_to_one_stay_paired(with_number):
    # 22 makers' codes and names, one-to-one but in another order, of Zipf-like frequencies (1,100 rows).
    # The names' counts in the cluster and in their 1-dim trees differ by a few rows each; dealing the
    # 1-dim buckets out by rank alone moved those rows onto the next name and every later name's rows
    # with them: 91-93 % of the rows kept their pairing (75-81 % beside a number column, where
    # refinement also draws the two apart in some rows: 85-90 % now).
    rng = np.random.default_rng(11)
    weights = 1 / np.arange(1, 23) ** 0.8
    code = rng.choice(22, size=1100, p=weights / weights.sum())
    names = np.array([f"name-{chr(97 + (7 * i) % 22)}" for i in range(22)])
    table = pd.DataFrame({"code": [f"C{i:02d}" for i in code], "name": names[code]})
    if with_number:
        table["x"] = rng.normal(size=1100)
    pairing = dict(zip(table["code"], table["name"], strict=True))
    kept = [
        (out["code"].map(pairing) == out["name"]).mean()
        for out in (synthesize(table, salt=s) for s in "abcd")
    ]
    assert np.mean(kept) > (0.95 if not with_number else 0.85)
