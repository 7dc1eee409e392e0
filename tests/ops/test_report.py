"""Quality metrics against hand-computed values, and the HTML report's content and privacy rules."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import re

import numpy as np
import pandas as pd
import pytest

from syndiffix_ops import report as report_module
from syndiffix_ops.report import (
    ReportSection,
    compare_with_source,
    compute_quality,
    report_file_stem,
    source_quality,
    write_html_report,
)
from syndiffix_ops.report_index import write_report_index
from syndiffix_ops.verdict import joint_shares


def _mixed_frame(rows: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    stamps = pd.Timestamp("2024-01-01", tz="Europe/Berlin") + pd.to_timedelta(
        rng.integers(0, 10**7, rows), "s"
    )
    return pd.DataFrame(
        {
            "flag": pd.array(rng.random(rows) < 0.3, dtype="boolean"),
            "count": pd.array(rng.integers(0, 50, rows), dtype="Int64"),
            "amount": [decimal.Decimal(f"{value:.2f}") for value in rng.normal(100, 20, rows)],
            "ratio": rng.random(rows),
            "stamp": stamps,
            "day": [dt.date(2024, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 300, rows)],
            "clock": [
                dt.time(int(h), int(m))
                for h, m in zip(rng.integers(0, 24, rows), rng.integers(0, 60, rows), strict=True)
            ],
            "city": pd.Categorical(rng.choice(["Oslo", "Rome", "Lima"], rows)),
            "name": rng.choice(["ann", "bob", "cy"], rows).astype(object),
        }
    )


def test_identical_frames_have_zero_distances_and_ratio_one():
    frame = _mixed_frame()
    metrics = compute_quality(frame, frame.copy())
    assert metrics["columns_compared"] == 9
    assert metrics["tvd_1dim_max"] == 0.0
    assert metrics["tvd_2dim_max"] == 0.0
    assert metrics["corr_abs_diff_max"] == 0.0
    assert metrics["row_ratio"] == 1.0
    kinds = {name: column["kind"] for name, column in metrics["columns"].items()}
    assert kinds == {
        "flag": "boolean",
        "count": "number",
        "amount": "number",
        "ratio": "number",
        "stamp": "timestamp",
        "day": "date",
        "clock": "time",
        "city": "string",
        "name": "string",
    }
    # strings have no meaningful order, so only the numeric encodings are correlated
    assert metrics["correlation"]["columns"] == ["flag", "count", "amount", "ratio", "stamp", "day", "clock"]
    json.dumps(metrics, allow_nan=False)  # JSON-able, no NaN


def test_disjoint_categories_have_distance_one():
    original = pd.DataFrame({"colour": ["red"] * 20 + ["blue"] * 20})
    synthetic = pd.DataFrame({"colour": ["green"] * 40})
    metrics = compute_quality(original, synthetic)
    assert metrics["columns"]["colour"]["tvd"] == 1.0
    assert metrics["columns"]["colour"]["bins"] == ["blue", "red", "other (rare)"]  # ties by value
    assert metrics["columns"]["colour"]["synthetic_share"] == [0.0, 0.0, 1.0]


def test_numeric_distance_uses_rounded_quantile_bins_of_the_original():
    # 0..99 in 4 quantile bins: edges 24.75, 49.5, 74.25 rounded to whole numbers (integer column): 25, 50, 74
    # -> bins of 25, 25, 24, 26 source rows. The synthetic half at 10, half at 80: shares .5, 0, 0, .5.
    original = pd.DataFrame({"x": np.arange(100)})
    synthetic = pd.DataFrame({"x": np.repeat([10, 80], 50)})
    metrics = compute_quality(original, synthetic, bins=4)
    column = metrics["columns"]["x"]
    assert column["bins"] == ["< 25", "25 – 50", "50 – 74", "≥ 74"]
    assert column["original_share"] == [0.25, 0.25, 0.24, 0.26]
    assert column["synthetic_share"] == [0.5, 0.0, 0.0, 0.5]
    assert column["tvd"] == pytest.approx(0.5 * (0.25 + 0.25 + 0.24 + 0.24))


def test_two_dim_distance_sees_a_broken_relation_that_marginals_miss():
    same = ["a"] * 50 + ["b"] * 50
    original = pd.DataFrame({"x": same, "y": same})
    synthetic = pd.DataFrame({"x": same, "y": same[::-1]})
    metrics = compute_quality(original, synthetic)
    assert metrics["tvd_1dim_max"] == 0.0
    [pair] = metrics["pairs"]
    assert (pair["columns"], pair["tvd"], pair["corr_abs_diff"]) == (["x", "y"], 1.0, None)
    # columns made independent would have half the rows in the wrong cell
    assert pair["independent_tvd"] == 0.5
    assert metrics["tvd_2dim_mean"] == 1.0


def test_correlation_difference_of_a_reversed_relation_is_two():
    x = np.arange(100, dtype=float)
    original = pd.DataFrame({"x": x, "y": x})
    synthetic = pd.DataFrame({"x": x, "y": x[::-1].copy()})
    metrics = compute_quality(original, synthetic)
    assert metrics["tvd_1dim_max"] == 0.0
    assert metrics["corr_abs_diff_mean"] == pytest.approx(2.0)
    assert metrics["correlation"]["original"] == [[1.0, 1.0], [1.0, 1.0]]
    assert metrics["correlation"]["synthetic"] == [[1.0, -1.0], [-1.0, 1.0]]


@pytest.mark.parametrize("size", [1e200, 1e307])
def test_correlations_of_huge_values_are_measured_without_overflow(size):
    # Squares of values beyond ~1e154 overflow a float: the moments must not, or the column's
    # correlations come out undefined (and numpy warns).
    x = np.linspace(-1.0, 1.0, 101)
    frame = pd.DataFrame({"x": x * size, "y": x * size / 2, "z": np.abs(x)})
    with np.errstate(all="raise"):
        metrics = compute_quality(frame, frame, min_correlation_rows=10)
    original = np.array(metrics["correlation"]["original"], dtype=float)
    assert original[0, 1] == pytest.approx(1.0)
    assert original[0, 2] == pytest.approx(0.0, abs=1e-9)


def test_correlation_uses_rows_where_both_columns_are_present():
    x = np.arange(20, dtype=float)
    y = 2 * x
    y[[3, 7]] = np.nan
    x[11] = np.nan
    frame = pd.DataFrame({"x": x, "y": y})
    expected = frame.corr().loc["x", "y"]  # pandas' pairwise-complete Pearson
    metrics = compute_quality(frame, frame, min_correlation_rows=10)
    assert metrics["correlation"]["original"][0][1] == pytest.approx(expected, abs=1e-3)


def test_correlations_summed_over_many_blocks_of_rows_are_pandas_pairwise_correlations(monkeypatch):
    # 7-row blocks: the sums run over ~140 blocks, with nulls and an infinity in different blocks per column
    monkeypatch.setattr(report_module, "_PEARSON_BLOCK_ROWS", 7)
    rng = np.random.default_rng(11)
    x = rng.normal(size=1000) * 1e9 + 1.7e9  # timestamps in seconds: large values, small spread
    frame = pd.DataFrame({"x": x, "y": x / 1e9 + rng.normal(size=1000), "z": rng.normal(size=1000)})
    frame.loc[rng.choice(1000, 150, replace=False), "y"] = np.nan
    frame.loc[[5, 500], "z"] = [np.inf, np.nan]
    expected = frame.replace(np.inf, np.nan).corr().to_numpy()  # pandas' pairwise-complete Pearson
    metrics = compute_quality(frame, frame)
    assert np.allclose(np.array(metrics["correlation"]["original"], dtype=float), expected, atol=1e-3)


def test_pair_shares_from_narrow_codes_do_not_wrap():
    # 42 bins x 42 bins: a pair's cell number reaches 1763, far past what the uint8 codes hold
    rng = np.random.default_rng(5)
    first, second = rng.integers(0, 42, 5000), rng.integers(0, 42, 5000)
    narrow = joint_shares(first.astype(np.uint8), 42, second.astype(np.uint8), 42)
    assert np.array_equal(narrow, joint_shares(first, 42, second, 42))
    assert narrow[42 * 41 + 41] > 0  # the last cell is counted where it is


def test_many_string_categories_give_the_same_pair_tvd_as_a_crosstab():
    rng = np.random.default_rng(9)
    values = np.array([f"v{i:02d}" for i in range(40)], dtype=object)
    original = pd.DataFrame({"a": values[rng.integers(0, 40, 4000)], "b": values[rng.integers(0, 40, 4000)]})
    synthetic = pd.DataFrame({"a": values[rng.integers(0, 40, 4000)], "b": values[rng.integers(0, 40, 4000)]})
    metrics = compute_quality(original, synthetic, max_categories=40)
    share = [pd.crosstab(frame["a"], frame["b"]) / len(frame) for frame in (original, synthetic)]
    expected = 0.5 * share[0].sub(share[1], fill_value=0).abs().to_numpy().sum()
    assert metrics["pairs"][0]["tvd"] == pytest.approx(expected, abs=1e-4)


def test_correlations_over_too_few_rows_are_left_out_of_the_mean():
    # `sparse` is present in 30 rows only: its correlations are noise and must not swamp the mean
    rng = np.random.default_rng(3)
    x = rng.normal(size=500)
    sparse = np.full(500, np.nan)
    sparse[:30] = rng.normal(size=30)
    original = pd.DataFrame({"x": x, "y": x + rng.normal(scale=0.1, size=500), "sparse": sparse})
    synthetic = original.assign(sparse=np.r_[-original["sparse"].to_numpy()[:30], np.full(470, np.nan)])
    metrics = compute_quality(original, synthetic)  # default: at least 100 rows per pair
    assert metrics["pairs"][1]["columns"] == ["x", "sparse"]
    assert metrics["pairs"][1]["corr_abs_diff"] is None
    assert metrics["corr_abs_diff_max"] == 0.0  # only the x-y pair counts
    assert metrics["correlation"]["original"][2][2] is None
    loose = compute_quality(original, synthetic, min_correlation_rows=10)
    assert loose["corr_abs_diff_max"] > 0.1


def test_row_ratio_is_rounded_so_the_source_count_cannot_be_computed_back():
    original = pd.DataFrame({"x": np.arange(1003)})
    metrics = compute_quality(original, original.head(337))
    assert metrics["row_ratio"] == 0.34  # 337 / 1003 = 0.33599...
    assert metrics["synthetic_rows"] == 337
    assert "1003" not in json.dumps(metrics)


def test_empty_tables_have_no_distances_and_still_get_a_report(tmp_path):
    original = pd.DataFrame({"x": np.arange(30), "s": ["k"] * 30})
    metrics = compute_quality(original, original.head(0))
    assert metrics["row_ratio"] == 0.0
    assert metrics["tvd_1dim_mean"] is None
    assert metrics["tvd_2dim_mean"] is None
    json.dumps(metrics, allow_nan=False)
    both_empty = compute_quality(original.head(0), original.head(0))
    assert both_empty["row_ratio"] is None
    for name, source, synthetic in [
        ("a", original, original.head(0)),
        ("b", original.head(0), original.head(0)),
    ]:
        page = write_html_report(
            tmp_path, table_name=name, original=source, synthetic=synthetic, metrics=None
        )
        assert "Summary" in page.read_text(encoding="utf-8")


def test_aid_columns_missing_from_the_output_are_listed_not_compared():
    original = pd.DataFrame({"person": np.arange(40), "age": np.arange(40) % 7})
    synthetic = pd.DataFrame({"age": np.arange(40) % 7})
    metrics = compute_quality(original, synthetic)
    assert list(metrics["columns"]) == ["age"]
    assert metrics["not_compared"] == {"only_in_original": ["person"], "only_in_synthetic": []}


def test_rare_categories_nulls_and_bins_are_merged_not_shown():
    original = pd.DataFrame(
        {
            "name": ["common"] * 40 + ["Zebulon Quartermaine"] * 3 + [None] * 2,
            "salary": list(range(1000, 1044)) + [987654321],
        }
    )
    metrics = compute_quality(original, original.copy(), rare_threshold=10)
    name = metrics["columns"]["name"]
    assert name["bins"] == ["common", "other (rare)"]  # the rare value and the 2 rare nulls go together
    assert name["original_share"] == [round(40 / 45, 3), round(5 / 45, 3)]
    salary = metrics["columns"]["salary"]
    assert all(share >= round(10 / 45, 3) for share in salary["original_share"])  # every bin >= 10 rows
    text = json.dumps(metrics)
    assert "Zebulon" not in text and "987" not in text
    assert "1000" not in text and "1043" not in text  # minimum and maximum of the ordinary values too


def test_report_has_a_plot_per_column_the_heat_maps_and_extra_sections(tmp_path):
    frame = _mixed_frame()
    synthetic = frame.sample(frac=0.8, random_state=3)
    metrics = compute_quality(frame, synthetic)
    path = write_html_report(
        tmp_path / "reports",
        table_name="public.orders",
        original=frame,
        synthetic=synthetic,
        metrics=metrics,
        sections=[ReportSection("Risk histogram", "<p>risk-marker</p>"), ("DP budget", "<p>dp-marker</p>")],
        run_id="manual__2024-01-01T00:00:00+00:00",
    )
    # one file per table and run, under file-system-safe names
    assert path.parent == tmp_path / "reports" / "public.orders"
    assert re.fullmatch(r"manual__2024-01-01T00_00_00_00_00-[0-9a-f]{8}\.html", path.name)
    page = path.read_text(encoding="utf-8")
    for name in frame.columns:
        assert f'alt="distribution of {name}"' in page
    assert page.count('alt="distribution of ') == len(frame.columns)
    assert 'alt="correlations"' in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == len(frame.columns) + 1
    assert all(base64.b64decode(image).startswith(b"\x89PNG") for image in images)
    assert "<h2>Risk histogram</h2>" in page and "risk-marker" in page and "dp-marker" in page
    assert "What this report does not show" in page
    saved = json.loads(path.with_name(path.stem + ".metrics.json").read_text(encoding="utf-8"))
    assert saved["table"] == "public.orders"
    assert saved["run_id"] == "manual__2024-01-01T00:00:00+00:00"
    assert saved["metrics"] == json.loads(json.dumps(metrics))


def test_rare_source_values_never_reach_the_html(tmp_path):
    rng = np.random.default_rng(1)
    original = pd.DataFrame(
        {
            "diagnosis": ["flu"] * 60 + ["cold"] * 35 + ["Rarissima syndrome"] * 2,
            "income": np.r_[rng.normal(50_000, 5_000, 96), 31_415_926.0],
        }
    )
    # worst case: the "synthetic" table repeats the rare rows verbatim
    path = write_html_report(
        tmp_path, table_name="patients", original=original, synthetic=original, metrics=None
    )
    page = path.read_text(encoding="utf-8")
    metrics_text = path.with_name(path.stem + ".metrics.json").read_text(encoding="utf-8")
    for text in (page, metrics_text):
        assert "Rarissima" not in text
        assert "31415926" not in text and "31,415,926" not in text and "3.14159" not in text
    assert "flu" in metrics_text and "cold" in metrics_text


def test_report_file_names_are_safe_and_distinct():
    assert report_file_stem("flights") == "flights"
    awkward = ['sales."Q1; drop"', "sales/Q1 drop", "ünïcode table"]
    stems = [report_file_stem(name) for name in awkward]
    assert len(set(stems)) == len(stems)
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", stem) for stem in stems)


def test_index_links_every_report_of_every_run(tmp_path):
    frame = pd.DataFrame({"x": np.arange(50) % 5})
    for run in ("run-1", "run-2"):
        for table in ("alpha", "beta"):
            write_html_report(
                tmp_path, table_name=table, original=frame, synthetic=frame, metrics=None, run_id=run
            )
    page = write_report_index(tmp_path).read_text(encoding="utf-8")
    for table in ("alpha", "beta"):
        assert f'href="{table}/run-1.html"' in page and f'href="{table}/run-2.html"' in page
        assert (tmp_path / table / "run-1.html").is_file() and (tmp_path / table / "run-2.html").is_file()


def test_a_report_without_run_id_never_overwrites_another(tmp_path):
    frame = pd.DataFrame({"x": np.arange(50) % 5})
    paths = {
        write_html_report(tmp_path, table_name="t", original=frame, synthetic=frame, metrics=None)
        for _ in range(3)
    }
    assert len(paths) == 3 and all(path.is_file() for path in paths)


def test_a_zero_inflated_column_shows_its_zeros_and_the_spread_of_the_rest():
    rng = np.random.default_rng(11)
    rain = np.where(rng.random(5_000) < 0.93, 0.0, np.round(rng.exponential(0.2, 5_000), 2) + 0.01)
    column = compute_quality(pd.DataFrame({"rain": rain}), pd.DataFrame({"rain": rain}))["columns"]["rain"]
    assert column["bins"][0] == "= 0"
    assert 0.92 <= column["original_share"][0] <= 0.94
    rest = column["original_share"][1:]
    assert len(rest) >= 5 and all(0.005 <= share <= 0.03 for share in rest)  # the 7 % spread over bins


def test_no_bin_of_unnamed_values_is_larger_than_the_largest_named_one():
    rng = np.random.default_rng(12)
    # 20 frequent airports and a long tail of 80 smaller ones holding a third of the rows
    frequent = rng.choice([f"A{i:02d}" for i in range(20)], 6_600)
    tail = rng.choice([f"T{i:02d}" for i in range(80)], 3_400)
    dest = pd.DataFrame({"dest": np.concatenate([frequent, tail])})
    column = compute_quality(dest, dest.copy())["columns"]["dest"]
    named = [
        share
        for label, share in zip(column["bins"], column["original_share"], strict=True)
        if label[0] == "A"
    ]
    grouped = [
        share
        for label, share in zip(column["bins"], column["original_share"], strict=True)
        if label[0] == "v"
    ]
    assert len(named) == 20 and grouped and max(grouped) <= max(named)
    assert abs(sum(named) + sum(grouped) - 1.0) < 0.01
    # many similar-sized values (a tail number): rank groups of about 5 % each, no value named
    tails = pd.DataFrame({"tailnum": rng.choice([f"N{i:04d}" for i in range(3_000)], 20_000)})
    column = compute_quality(tails, tails.copy())["columns"]["tailnum"]
    assert all(label.startswith("values ranked ") for label in column["bins"])
    assert 15 <= len(column["bins"]) <= 21 and max(column["original_share"]) < 0.1


def test_the_values_beside_point_bins_are_other_values_or_rare():
    zone = pd.DataFrame({"tz": [-5] * 60 + [-6] * 25 + [-8] * 12 + [10] * 3})
    column = compute_quality(zone, zone.copy())["columns"]["tz"]
    assert column["bins"] == ["= -8", "= -6", "= -5", "other (rare)"]  # 3 rows: never a bin of their own
    zone = pd.DataFrame({"tz": [-5] * 600 + [-6] * 250 + [-8] * 130 + [9] * 15 + [10] * 5})
    column = compute_quality(zone, zone.copy())["columns"]["tz"]
    assert column["bins"] == ["= -8", "= -6", "= -5", "other values"]  # 20 rows, too few to cut in two
    assert column["original_share"] == [0.13, 0.25, 0.6, 0.02]


def test_infinite_values_on_either_side_fall_into_outer_or_point_bins_and_out_of_correlations():
    # a float column may hold -inf/inf (PostgreSQL double precision does), and so may another engine's output
    rng = np.random.default_rng(11)
    source = pd.DataFrame({"x": rng.normal(size=2_000), "y": rng.normal(size=2_000)})
    source["y"] += source["x"]
    source.loc[:299, "x"] = np.inf  # 15 %: a point bin of its own
    source.loc[300:304, "x"] = -np.inf  # 5 rows: never shown alone, inside the lowest open bin
    synthetic = source.sample(frac=1.0, random_state=1).reset_index(drop=True)
    synthetic.loc[:99, "y"] = -np.inf  # 5 % of the rows: about 0.5 % were in the lowest decile already

    metrics = compute_quality(source, synthetic)
    json.dumps(metrics, allow_nan=False)  # strict JSON for the lineage column
    x, y = metrics["columns"]["x"], metrics["columns"]["y"]
    assert x["bins"][0] == "= inf" and x["original_share"][0] == 0.15 and x["tvd"] == 0.0
    assert x["bins"][1].startswith("< ") and "-inf" not in " ".join(x["bins"])
    assert y["bins"][0].startswith("< ") and y["synthetic_share"][0] == pytest.approx(
        0.1 * 0.95 + 0.05, abs=0.01
    )
    # the relation of x and y over their finite rows survives in the correlation, not a NaN
    assert metrics["correlation"]["original"][0][1] == pytest.approx(0.7, abs=0.05)
    assert metrics["corr_abs_diff_max"] is not None and metrics["corr_abs_diff_max"] < 0.05


def test_source_tails_count_the_rows_beyond_their_edges_as_the_synthetic_side_does():
    """The source's tail shares come from its sorted values, the synthetic side's from a comparison per
    row: on the same table they agree, with values tied at the edges, nulls and infinities."""
    rng = np.random.default_rng(5)
    x = np.round(rng.lognormal(0, 1, 5_000), 1)  # many rows share each value, so edges fall on ties
    x[::9], x[::50] = np.nan, np.inf
    x[1::70] = -np.inf
    frame = pd.DataFrame({"x": x, "n": rng.integers(0, 40, 5_000)})

    for name in ("x", "n"):
        tails = compute_quality(frame, frame.copy())["columns"][name]["tails"]
        assert {tail["side"] for tail in tails} == {"low", "high"}
        for tail in tails:
            assert tail["original_share"] == tail["synthetic_share"]


def test_source_figures_are_the_same_on_any_number_of_threads():
    frame = _mixed_frame(3_000)
    synthetic = frame.sample(frac=1.0, random_state=2).reset_index(drop=True)
    figures = [
        compare_with_source(source_quality(frame, threads=threads), synthetic, threads=threads)
        for threads in (1, 2, 4)
    ]
    assert figures[0]["columns"] and figures[0] == figures[1] == figures[2]
