"""The privacy accounting of DP marginals: the equations hold, and the showcase's published figures."""

from __future__ import annotations

import math

import pytest

from syndiffix_core.dp import DpError, DpParams
from syndiffix_core.dp.accounting import (
    adaptive_threshold,
    default_delta,
    epsilon_for,
    length1_threshold,
    rho_for,
    spent_epsilon,
    split_budget,
    zcdp_of_gaussians,
    zcdp_of_percentiles,
)

CASES = [(0.1, 1e-9), (1.0, 1e-6), (4.0, 8.7e-7), (10.0, 1e-3), (50.0, 1e-12)]


@pytest.mark.parametrize(("epsilon", "delta"), CASES)
@pytest.mark.parametrize(
    "mode", ["prioritize_long_combinations", "prioritize_short_combinations", "balanced"]
)
def test_the_budget_split_spends_exactly_epsilon(epsilon, delta, mode):
    params = DpParams(epsilon=epsilon, reporting_length=4, accuracy_mode=mode)
    split = split_budget(params, delta)
    # epsilon = epsilon_N + epsilon_M
    assert split.epsilon_records == pytest.approx(0.005 * epsilon)
    assert split.epsilon_records + split.epsilon_marginals == pytest.approx(epsilon)
    # rho converts back to epsilon_M at delta/2 and back again
    assert epsilon_for(split.rho, delta) == pytest.approx(split.epsilon_marginals, rel=1e-12)
    assert rho_for(epsilon_for(0.37, delta), delta) == pytest.approx(0.37, rel=1e-12)
    # the percentile share: R pure eps_Q-DP selections spend Q_p * rho
    assert zcdp_of_percentiles(split.percentile_epsilon, 4) == pytest.approx(0.01 * split.rho, rel=1e-12)
    # the gaussians spend the rest
    assert zcdp_of_gaussians(list(split.sigmas)) == pytest.approx(0.99 * split.rho, rel=1e-12)
    # and recomputed from the mechanisms' own parameters, the total is the budget
    assert spent_epsilon(split) == pytest.approx(epsilon, rel=1e-12)


def test_sigma_proportions_shape_the_scales():
    split = split_budget(DpParams(reporting_length=3), 1e-6)
    s1, s2, s3 = split.sigmas
    assert s2 / s1 == pytest.approx(1 / 2) and s3 / s1 == pytest.approx(1 / 3)
    short = split_budget(
        DpParams(reporting_length=3, accuracy_mode="prioritize_short_combinations"), 1e-6
    ).sigmas
    assert short[0] / short[2] == pytest.approx(1 / 3)
    custom = split_budget(DpParams(reporting_length=2, sigma_proportions=[1.0, 4.0]), 1e-6).sigmas
    assert custom[1] / custom[0] == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("records", "rho", "stds", "threshold"),
    [(100_000, 0.239, (15.4, 14.4, 13.6), 83), (1_000_000, 0.208, (16.5, 15.4, 14.6), 96)],
)
def test_the_showcase_noise_figures_for_8_columns_epsilon_4(records, rho, stds, threshold):
    # figures measured with the showcase's own script (dp-marginals-facts.md section 1.2)
    delta = default_delta(records)
    split = split_budget(DpParams(epsilon=4.0, reporting_length=3), delta)
    assert split.rho == pytest.approx(rho, abs=0.001)
    sensitivities = [math.comb(8, k) for k in (1, 2, 3)]
    for sigma, sensitivity, std in zip(split.sigmas, sensitivities, stds, strict=True):
        assert sigma * math.sqrt(sensitivity) == pytest.approx(std, abs=0.05)
    assert length1_threshold(split.sigmas[0], 8, delta) == pytest.approx(threshold, abs=1)


def test_epsilon_1_noise_is_about_four_times_larger():
    split = split_budget(DpParams(epsilon=1.0), default_delta(100_000))
    assert split.sigmas[0] * math.sqrt(8) == pytest.approx(59, abs=1)
    assert length1_threshold(split.sigmas[0], 8, default_delta(100_000)) == pytest.approx(314, abs=3)


def test_thresholds():
    assert adaptive_threshold(3.0, 10, 1.0) == 0.0
    # eta = 0.01 leaves about 1% of pure-noise (fabricated) tuples: z_(1 - 0.005) = 2.5758
    assert adaptive_threshold(3.0, 4, 0.01) == pytest.approx(3.0 * 2 * 2.5758, rel=1e-4)
    # smaller delta, higher length-1 threshold; tiny deltas keep their digits
    assert length1_threshold(2.0, 8, 1e-12) > length1_threshold(2.0, 8, 1e-6) > 1.0
    assert math.isfinite(length1_threshold(2.0, 8, 1e-300))


def test_default_delta_comes_from_the_protected_count_and_refuses_tiny_tables():
    assert default_delta(100_000) == pytest.approx(1 / (100_000 * math.log(100_000)))
    assert default_delta(3) < 1 / 3
    with pytest.raises(DpError, match="give delta explicitly"):
        default_delta(2)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"epsilon": 0}, "epsilon"),
        ({"delta": 1.5}, "delta"),
        ({"reporting_length": 0}, "reporting_length"),
        ({"percentile_epsilon_proportion": 1.0}, "percentile_epsilon_proportion"),
        ({"sigma_proportions": [1.0]}, "sigma_proportions"),
        ({"adaptive_thresholds": {1: 0.5}}, "adaptive_thresholds"),
        ({"fixed_thresholds": {2: -1}}, r"fixed_thresholds\[2\]"),
        ({"accuracy_mode": "nope"}, "nope"),
    ],
)
def test_bad_parameters_name_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DpParams(**kwargs)


def test_fabrication_modes():
    assert DpParams(reporting_length=4).resolved_thresholds() == ("adaptive", {2: 1.0, 3: 1.0, 4: 1.0})
    kind, etas = DpParams(reporting_length=4, fabrication_mode="progressive").resolved_thresholds()
    assert kind == "adaptive" and etas == pytest.approx({2: 0.1, 3: 0.55, 4: 1.0})
    assert DpParams(reporting_length=3, fabrication_mode="balanced").resolved_thresholds()[1] == {
        2: 0.55,
        3: 1.0,
    }
    assert DpParams(fixed_thresholds={3: 20}).resolved_thresholds() == ("fixed", {2: 0.0, 3: 20.0})
