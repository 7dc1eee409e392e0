"""Link figures of the report: which parent column x child aggregate pairs are shown, and when none are."""

from __future__ import annotations

import numpy as np
import pandas as pd

from syndiffix_ops.linked_report import foreign_key_figures, links_section
from syndiffix_ops.run_plan import PlannedForeignKey

FK = PlannedForeignKey(("origin",), "airports", ("faa",))


def _airports_and_flights(airports: int, seed: int = 5):
    """Flights whose distance grows with their origin's longitude, and whose delay does not."""
    rng = np.random.default_rng(seed)
    parents = pd.DataFrame(
        {"faa": [f"A{i:02d}" for i in range(airports)], "lon": rng.uniform(-120, -70, airports)}
    )
    origin = rng.integers(0, airports, 3000)
    children = pd.DataFrame(
        {
            "origin": parents.faa.to_numpy()[origin],
            "distance": 2000 + 20 * parents.lon.to_numpy()[origin] + rng.normal(0, 300, 3000),
            "delay": rng.normal(10, 30, 3000),
        }
    )
    return parents, children


def _figures(parents, children):
    return foreign_key_figures(FK, children, parents, children, parents, skip={"faa"})


def test_the_strongest_pair_of_a_link_with_enough_parents_is_measured_on_both_sides():
    parents, children = _airports_and_flights(40)
    figures = _figures(parents, children)
    strongest = figures["correlations"][0]
    means = children.groupby("origin").distance.mean().reindex(parents.faa).to_numpy()
    expected = np.corrcoef(parents.lon, means)[0, 1]
    assert (strongest["parent_column"], strongest["child_aggregate"]) == ("lon", "mean distance")
    assert strongest["source"] == strongest["synthetic"] == round(expected, 2)
    assert len(figures["correlations"]) == 3 and figures["correlations_note"] is None


def test_a_link_with_a_handful_of_parents_says_its_correlations_are_not_measurable():
    parents, children = _airports_and_flights(3)
    figures = _figures(parents, children)
    assert figures["correlations"] == []
    assert figures["correlations_note"] == (
        "not measurable: fewer than 20 parents have children in the source"
    )
    assert figures["children_per_parent_tvd"] == 0.0  # the other figures are still there
    section = links_section("flights", {"foreign_keys": {FK.label: figures}})
    assert "not measurable: fewer than 20 parents have children" in section.html


def test_parents_without_children_do_not_count_towards_a_measurable_link():
    parents, children = _airports_and_flights(3)
    unused = pd.DataFrame({"faa": [f"U{i:02d}" for i in range(40)], "lon": np.linspace(-120, -70, 40)})
    figures = _figures(pd.concat([parents, unused], ignore_index=True), children)
    assert figures["correlations"] == [] and figures["correlations_note"] is not None
