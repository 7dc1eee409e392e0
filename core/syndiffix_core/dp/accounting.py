"""Privacy accounting of DP marginals: the budget split and the equations that make it checkable.

The release is the composition of
  * the record count: n + Laplace(1/epsilon_N), pure epsilon_N-DP, epsilon_N = N_p * epsilon;
  * R DP percentiles (one per length), each pure epsilon_Q-DP, i.e. epsilon_Q^2/2-zCDP;
  * R Gaussian mechanisms, length k adds N(0, sigma_k^2 * Delta_k) to counts whose L2 sensitivity is
    sqrt(Delta_k) (a record adds at most 1 to each of at most Delta_k distinct k-tuples): 1/(2 sigma_k^2)-zCDP;
  * the length-1 threshold, which hides whether a value that only the neighbouring record has occurs at
    all, except with probability delta/2.
The zCDP part totals rho and converts to (rho + 2 sqrt(rho ln(2/delta)), delta/2)-DP; with the threshold's
delta/2 and the count's epsilon_N the whole release is (epsilon, delta)-DP.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist

from .params import DpError, DpParams

_STANDARD_NORMAL = NormalDist()


def rho_for(epsilon_marginals: float, delta: float) -> float:
    """The zCDP budget rho whose conversion to (epsilon, delta/2)-DP spends exactly epsilon_marginals."""
    log_term = math.log(2.0 / delta)
    return (math.sqrt(epsilon_marginals + log_term) - math.sqrt(log_term)) ** 2


def epsilon_for(rho: float, delta: float) -> float:
    """The epsilon of the standard rho-zCDP -> (epsilon, delta/2)-DP conversion (inverse of `rho_for`)."""
    return rho + 2.0 * math.sqrt(rho * math.log(2.0 / delta))


def zcdp_of_gaussians(sigmas: list[float]) -> float:
    """rho spent by the per-length Gaussian mechanisms (noise std sigma_k * sqrt(L2 sensitivity^2))."""
    return sum(1.0 / (2.0 * s * s) for s in sigmas)


def zcdp_of_percentiles(percentile_epsilon: float, reporting_length: int) -> float:
    """rho spent by R pure percentile_epsilon-DP percentile selections (pure eps-DP is eps^2/2-zCDP)."""
    return reporting_length * percentile_epsilon**2 / 2.0


def default_delta(protected_records: int) -> float:
    """delta = 1/(n ln n) on the DP record count n (n must exceed e for delta < 1/n)."""
    if protected_records < 3:
        raise DpError(
            f"the DP record count is {protected_records}: too small to derive delta = 1/(n ln n); "
            "give delta explicitly"
        )
    return 1.0 / (protected_records * math.log(protected_records))


@dataclass(frozen=True)
class BudgetSplit:
    epsilon: float
    delta: float
    epsilon_records: float
    epsilon_marginals: float
    rho: float
    rho_percentiles: float
    rho_noise: float
    percentile_epsilon: float  # spent once per length
    sigmas: tuple[float, ...]  # sigma_k; the noise std at length k is sigma_k * sqrt(Delta_k)

    def as_dict(self) -> dict:
        out = asdict(self)
        out["sigmas"] = list(self.sigmas)
        return out


def epsilon_records(params: DpParams) -> float:
    return params.number_of_records_epsilon_proportion * params.epsilon


def split_budget(params: DpParams, delta: float) -> BudgetSplit:
    eps_n = epsilon_records(params)
    eps_m = params.epsilon - eps_n
    rho = rho_for(eps_m, delta)
    q_p = params.percentile_epsilon_proportion
    r = params.reporting_length
    percentile_epsilon = math.sqrt(2.0 * rho * q_p / r)
    proportions = params.resolved_sigma_proportions()
    base_sigma = math.sqrt(sum(p**-2 for p in proportions) / (2.0 * rho * (1.0 - q_p)))
    sigmas = tuple(p * base_sigma for p in proportions)
    return BudgetSplit(
        epsilon=params.epsilon,
        delta=delta,
        epsilon_records=eps_n,
        epsilon_marginals=eps_m,
        rho=rho,
        rho_percentiles=zcdp_of_percentiles(percentile_epsilon, r),
        rho_noise=zcdp_of_gaussians(list(sigmas)),
        percentile_epsilon=percentile_epsilon,
        sigmas=sigmas,
    )


def spent_epsilon(split: BudgetSplit) -> float:
    """Epsilon actually spent by the mechanisms as run, recomputed from their own parameters."""
    rho = split.rho_percentiles + split.rho_noise
    return split.epsilon_records + epsilon_for(rho, split.delta)


def length1_threshold(sigma_1: float, sensitivity_1: int, delta: float) -> float:
    """rho_1 = 1 + sigma_1 sqrt(Delta_1) Phi^-1((1 - delta/2)^(1/Delta_1)).

    Computed through the upper tail q = 1 - (1 - delta/2)^(1/Delta_1) so that tiny delta keeps its digits.
    """
    sensitivity_1 = max(int(sensitivity_1), 1)
    upper_tail = -math.expm1(math.log1p(-delta / 2.0) / sensitivity_1)
    return 1.0 + sigma_1 * math.sqrt(sensitivity_1) * -_STANDARD_NORMAL.inv_cdf(upper_tail)


def adaptive_threshold(sigma_k: float, sensitivity_k: int, eta: float) -> float:
    """rho_k = sigma_k sqrt(Delta_k) Phi^-1(1 - eta/2): eta = 1 gives 0 (maximum fabrication)."""
    if eta >= 1.0:
        return 0.0
    return sigma_k * math.sqrt(max(int(sensitivity_k), 1)) * -_STANDARD_NORMAL.inv_cdf(eta / 2.0)
