"""Scores on their scale, their reference points, attention flags from thresholds, and the quality gate."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from syndiffix_ops.config import QualityConfig
from syndiffix_ops.report import compute_quality
from syndiffix_ops.verdict import QualityThresholds, fidelity_scores, verdict


def _delays(rows: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    delay = np.round(rng.exponential(20.0, rows) - 10.0)
    return pd.DataFrame(
        {
            "delay": delay,
            "late": delay > 15,  # a relation the pair trends must see
            "carrier": rng.choice(["AA", "B6", "DL", "UA"], rows),
        }
    )


def test_identical_tables_score_100_and_a_sample_of_the_source_scores_just_below():
    source = _delays(5_000, 1)
    metrics = compute_quality(source, source.copy())
    scores = metrics["scores"]
    assert scores["overall"] == scores["column_shapes"]["score"] == scores["pair_trends"]["score"] == 100.0
    assert 97.0 < scores["sample"] < 100.0  # sampling noise of 5 000 rows over ~10 bins
    # losing the relation between delay and late costs pair trends, and the reference shows how much
    assert scores["pair_trends"]["independent"] < scores["pair_trends"]["sample"]
    assert metrics["attention"] == {"columns": [], "pairs": []}


def test_a_lost_tail_is_flagged_by_the_threshold_whatever_the_column_is_called():
    source = _delays(20_000, 2).rename(columns={"delay": "minutes"})
    synthetic = _delays(20_000, 3).rename(columns={"delay": "minutes"})
    tail_edge = np.quantile(source["minutes"], 0.99)
    in_tail = np.flatnonzero(synthetic["minutes"].to_numpy() > tail_edge)
    pulled = in_tail[: int(0.7 * len(in_tail))]  # 70 % of the top 1 % pulled in: about 0.3 % left
    synthetic.loc[pulled, "minutes"] = tail_edge - 5

    flags = compute_quality(source, synthetic)["attention"]
    [flag] = [f for f in flags["columns"] if f["column"] == "minutes"]
    assert any(
        r.startswith("tail >") and "1.0 % of source rows, 0.3 % of synthetic" in r for r in flag["reasons"]
    )
    # a looser ratio leaves the same table unflagged: the flag comes from the threshold
    loose = compute_quality(source, synthetic, thresholds=QualityThresholds(bin_share_ratio=5.0))
    assert loose["attention"]["columns"] == []


def test_shifted_bins_and_pairs_beyond_their_thresholds_are_flagged_with_reasons():
    source = _delays(10_000, 4)
    synthetic = source.copy()
    synthetic["late"] = synthetic["late"].sample(frac=1.0, random_state=5).to_numpy()  # relation lost
    synthetic.loc[synthetic["carrier"] == "AA", "carrier"] = "DL"  # a category vanishes
    flags = compute_quality(source, synthetic)["attention"]
    [carrier] = [f for f in flags["columns"] if f["column"] == "carrier"]
    assert any(r.startswith("TVD") for r in carrier["reasons"])
    assert any(r.startswith("bin AA:") and "0.0 % of synthetic rows" in r for r in carrier["reasons"])
    pairs = {tuple(f["columns"]): f["reasons"] for f in flags["pairs"]}
    assert any(r.startswith("correlation moved") for r in pairs[("delay", "late")])


def test_scores_over_shared_columns_compare_like_with_like():
    source = _delays(5_000, 6)
    synthetic = source.copy()
    synthetic["delay"] = synthetic["delay"].sample(frac=1.0, random_state=7).to_numpy() * 3  # a bad column
    wide = compute_quality(source, synthetic)
    narrow = compute_quality(source[["delay", "late"]], synthetic[["delay", "late"]])
    assert narrow["scores"]["overall"] < wide["scores"]["overall"]  # fewer easy columns to average in
    shared = ["delay", "late"]
    assert fidelity_scores(wide, columns=shared)["overall"] == narrow["scores"]["overall"]


def test_the_gate_is_off_by_default_and_fails_on_a_score_or_a_flag_when_asked():
    scores = {"overall": 80.0}
    flags = {"columns": [{"column": "delay"}], "pairs": []}
    assert verdict(scores, flags, QualityThresholds()) is None
    assert "below quality.fail_below_score 90" in verdict(
        scores, flags, QualityThresholds(fail_below_score=90)
    )
    assert verdict(scores, flags, QualityThresholds(fail_below_score=70)) is None
    assert "delay" in verdict(scores, flags, QualityThresholds(fail_on_attention=True))


def test_the_config_defaults_are_the_thresholds_defaults():
    assert QualityThresholds.from_config(QualityConfig()) == QualityThresholds()


def test_ml_efficacy_scores_a_declared_target_against_a_model_trained_on_the_source():
    pytest.importorskip("sklearn", reason="ML efficacy needs the ml extra")
    source = _delays(4_000, 8)
    noise = _delays(4_000, 9)
    good = compute_quality(source, source.copy(), target_column="late")["scores"]["ml_efficacy"]
    bad = compute_quality(
        source,
        noise.assign(late=noise["late"].sample(frac=1.0, random_state=1).to_numpy()),
        target_column="late",
    )["scores"]["ml_efficacy"]
    assert good["metric"] == "accuracy" and good["score"] > 95 and good["sample"] > 95
    assert bad["score"] < good["score"] - 10  # a target unrelated to its features predicts badly
