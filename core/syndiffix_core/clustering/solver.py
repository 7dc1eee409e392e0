"""Simulated annealing over column permutations: find the clustering that leaves the least dependence
between columns unsatisfied (pairs that never share a cluster)."""

from __future__ import annotations

import math

import numpy as np

from syndiffix_core.clustering.builder import ClusterBuilder, Clusters

INITIAL_TEMPERATURE = 5.0
MINIMUM_TEMPERATURE = 0.0035
# Annealing runs of `solve_stable`, from fixed seeds: near-equal clusterings are many, and one run lands
# on any of them; the best of a few is the same for every salt and rarely drops a strong pair.
STABLE_RUNS = 4


def solve_stable(builder: ClusterBuilder, *, alpha: float, runs: int = STABLE_RUNS) -> Clusters:
    """The clustering whose permutation has the least unsatisfied dependence (the solver's objective)
    over `runs` annealing runs seeded 0..runs-1 (the first on ties): a function of the dependence matrix
    alone."""
    best, best_quality = None, math.inf
    for seed in range(runs):
        permutation = solve_permutation(builder, alpha=alpha, rng=np.random.default_rng(seed))
        quality = builder.unsatisfied_dependence_of(permutation)
        if quality < best_quality - 1e-12:
            best, best_quality = permutation, quality
    return builder.build(best)


def solve(builder: ClusterBuilder, *, alpha: float, rng: np.random.Generator) -> Clusters:
    """The clustering of one annealing run (`solve_permutation`)."""
    return builder.build(solve_permutation(builder, alpha=alpha, rng=rng))


def solve_permutation(builder: ClusterBuilder, *, alpha: float, rng: np.random.Generator) -> list[int]:
    """The best permutation of one annealing run from the identity permutation, with the cooling curve
    T <- T / (1 + alpha * T).

    Deterministic for a given ``rng`` state. With a main column it stays first in every permutation,
    so it always opens (and stays in) the initial cluster.
    """
    num_columns = builder.num_columns
    main = builder.main_column
    permutation = list(range(num_columns))
    if main is not None:
        permutation.remove(main)
        permutation.insert(0, main)
    first_free = 1 if main is not None else 0
    free = num_columns - first_free
    if free < 2:
        return permutation

    # At low temperature the chain keeps proposing the same few neighbours: with a small alpha (1.0.8's
    # 0.01 gives 28,552 steps) most steps become dictionary look-ups. The default's 1,428 steps rarely
    # repeat a permutation; there the builder's own cache of what stitches cover does the saving.
    energies: dict[tuple[int, ...], float] = {}
    score = builder.unsatisfied_dependence_of

    steps = _number_of_steps(alpha)
    # Draw all randomness up front: one vectorized call instead of three per step (as Python lists,
    # whose items index and compare faster than numpy scalars).
    swaps_a = rng.integers(first_free, num_columns, size=steps)
    swaps_b = (first_free + (swaps_a - first_free + rng.integers(1, free, size=steps)) % free).tolist()
    swaps_a = swaps_a.tolist()
    uniforms = rng.random(steps).tolist()

    current_energy = score(permutation)
    energies[tuple(permutation)] = current_energy
    best, best_energy = list(permutation), current_energy
    temperature = INITIAL_TEMPERATURE
    for a, b, uniform in zip(swaps_a, swaps_b, uniforms, strict=True):
        if best_energy <= 0.0:
            break
        permutation[a], permutation[b] = permutation[b], permutation[a]
        key = tuple(permutation)
        new_energy = energies.get(key)
        if new_energy is None:
            new_energy = energies[key] = score(permutation)
        delta = new_energy - current_energy
        if delta <= 0 or math.exp(-delta / temperature) > uniform:
            current_energy = new_energy
            if new_energy < best_energy:
                best, best_energy = list(permutation), new_energy
        else:
            permutation[a], permutation[b] = permutation[b], permutation[a]
        temperature = temperature / (1.0 + alpha * temperature)
    return best


def _number_of_steps(alpha: float) -> int:
    """Steps until the cooling curve reaches the minimum temperature (28 552 for alpha = 0.01)."""
    if alpha <= 0:
        raise ValueError(f"solver alpha must be positive, got {alpha}")
    # 1/T grows by alpha per step: 1/T_n = 1/T_0 + n * alpha.
    return max(1, math.ceil((1.0 / MINIMUM_TEMPERATURE - 1.0 / INITIAL_TEMPERATURE) / alpha))
