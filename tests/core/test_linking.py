"""Linked synthesis: keys that join, fresh surrogate keys, link statistics from the engine only."""

from __future__ import annotations

import uuid

import numpy as np
import pandas as pd
import pytest

from syndiffix_core.linking import (
    ForeignKey,
    LinkedTable,
    LinkingError,
    OrphanPolicy,
    entity_links,
    synthesize_linked,
)

SALT = b"linking tests"


def _customers_orders(seed: int = 1, customers: int = 2000, heavy: int = 0, null_share: float = 0.0):
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 90, customers)
    parents = pd.DataFrame(
        {"customer_id": np.arange(customers) + 1, "age": age, "segment": rng.choice(list("abc"), customers)}
    )
    per_parent = rng.poisson(1 + age / 15)
    per_parent[0] = max(per_parent[0], heavy)
    owner = np.repeat(parents.customer_id.to_numpy(), per_parent)
    children = pd.DataFrame(
        {
            "order_id": np.arange(len(owner)) + 1,
            "customer_id": pd.array(owner, dtype="Int64"),
            "amount": rng.gamma(2.0, 10 + np.repeat(age, per_parent) / 3),
        }
    )
    if null_share:
        children.loc[rng.random(len(children)) < null_share, "customer_id"] = pd.NA
    return parents, children


def _link(parents, children, **fk_options):
    return {
        "customers": LinkedTable("customers", parents, primary_key=("customer_id",)),
        "orders": LinkedTable(
            "orders",
            children,
            primary_key=("order_id",),
            foreign_keys=(ForeignKey(("customer_id",), "customers", ("customer_id",), **fk_options),),
        ),
    }


def _kept_pairs(tables) -> dict:
    """Per table, the column pairs synthesize_linked asks the engine to keep in one cluster."""
    given = {}

    def record(name, frame, aids, pairs):
        given[name] = pairs
        return frame.drop(columns=aids)

    synthesize_linked(tables, salt=SALT, synthesize_table=record)
    return given


def _children_per_parent(children: pd.DataFrame, parents: pd.DataFrame) -> pd.Series:
    return children.groupby("customer_id").size().reindex(parents.customer_id, fill_value=0)


def test_every_foreign_key_references_a_synthetic_parent_and_keys_are_unique():
    parents, children = _customers_orders()
    out = synthesize_linked(_link(parents, children), salt=SALT)
    customers, orders = out["customers"], out["orders"]
    assert list(customers.columns) == ["customer_id", "age", "segment"]
    assert list(orders.columns) == ["order_id", "customer_id", "amount"]
    assert customers.customer_id.is_unique and orders.order_id.is_unique
    assert orders.customer_id.notna().all()
    assert orders.customer_id.isin(customers.customer_id).all()
    joined = orders.merge(customers, on="customer_id")
    assert len(joined) == len(orders)


def test_children_per_parent_and_parent_column_correlation_survive():
    parents, children = _customers_orders()
    out = synthesize_linked(_link(parents, children), salt=SALT)
    source_counts = _children_per_parent(children, parents)
    synthetic_counts = _children_per_parent(out["orders"], out["customers"])
    assert abs(synthetic_counts.mean() - source_counts.mean()) < 0.15 * source_counts.mean()
    source_corr = np.corrcoef(parents.age, source_counts)[0, 1]
    synthetic_corr = np.corrcoef(out["customers"].age, synthetic_counts)[0, 1]
    assert source_corr > 0.3 and abs(synthetic_corr - source_corr) < 0.1


def test_a_heavy_parent_count_does_not_show_through():
    parents, children = _customers_orders(heavy=500)
    out = synthesize_linked(_link(parents, children), salt=SALT)
    synthetic_counts = _children_per_parent(out["orders"], out["customers"])
    assert _children_per_parent(children, parents).max() == 500
    assert synthetic_counts.max() < 100


def test_surrogate_keys_are_fresh_and_independent_of_the_real_key_values():
    parents, children = _customers_orders()
    out = synthesize_linked(_link(parents, children), salt=SALT)
    shifted_parents = parents.assign(customer_id=parents.customer_id + 7_000_000)
    shifted_children = children.assign(
        order_id=children.order_id * 3, customer_id=children.customer_id + 7_000_000
    )
    shifted = synthesize_linked(_link(shifted_parents, shifted_children), salt=SALT)
    pd.testing.assert_frame_equal(out["customers"], shifted["customers"])
    pd.testing.assert_frame_equal(out["orders"], shifted["orders"])
    overlap = out["customers"].customer_id.isin(parents.customer_id).mean()
    assert overlap < 0.01


def test_the_null_share_of_a_foreign_key_follows_the_source():
    parents, children = _customers_orders(null_share=0.3)
    out = synthesize_linked(_link(parents, children), salt=SALT)
    orders = out["orders"]
    assert abs(orders.customer_id.isna().mean() - 0.3) < 0.05
    assert orders.customer_id.dropna().isin(out["customers"].customer_id).all()


def test_orphans_follow_their_policy():
    parents, children = _customers_orders()
    orphaned = children.copy()
    orphaned.loc[orphaned.index % 5 == 0, "customer_id"] = (
        10_000_000 + orphaned.index[orphaned.index % 5 == 0]
    )
    with pytest.raises(
        LinkingError, match=r"table orders: foreign key \(customer_id\) -> customers\(customer_id\)"
    ):
        synthesize_linked(_link(parents, orphaned, on_orphan=OrphanPolicy.ERROR), salt=SALT)
    as_null = synthesize_linked(_link(parents, orphaned, on_orphan=OrphanPolicy.NULL), salt=SALT)["orders"]
    dropped = synthesize_linked(_link(parents, orphaned, on_orphan=OrphanPolicy.DROP), salt=SALT)["orders"]
    assert abs(as_null.customer_id.isna().mean() - 0.2) < 0.05
    assert dropped.customer_id.notna().all()
    assert len(dropped) < 0.9 * len(as_null)


def test_composite_keys_several_keys_to_one_parent_and_a_self_reference():
    rng = np.random.default_rng(5)
    airports = pd.DataFrame(
        {
            "code": [f"A{i:02d}" for i in range(60)],
            "kind": ["hub"] * 8 + ["regional"] * 52,
            "alt": rng.integers(0, 3000, 60),
        }
    )
    teams = pd.DataFrame(
        {"year": np.repeat(np.arange(2000, 2020), 10), "team": np.tile([f"T{i}" for i in range(10)], 20)}
    )
    teams["wins"] = rng.integers(40, 120, len(teams))
    rows = 6000
    flights = pd.DataFrame(
        {
            "flight_id": np.arange(rows),
            "origin": rng.choice(airports.code[:8], rows),
            "dest": rng.choice(airports.code, rows),
            "year": rng.choice(teams.year, rows),
            "team": rng.choice(teams.team.unique(), rows),
            "delay": rng.normal(10, 30, rows),
        }
    )
    flights["previous"] = pd.array(
        np.where(rng.random(rows) < 0.5, rng.integers(0, rows, rows), -1), dtype="Int64"
    )
    flights.loc[flights.previous == -1, "previous"] = pd.NA
    tables = {
        "airports": LinkedTable("airports", airports, primary_key=("code",), key_limits={"code": 3}),
        "teams": LinkedTable("teams", teams, primary_key=("year", "team")),
        "flights": LinkedTable(
            "flights",
            flights,
            primary_key=("flight_id",),
            foreign_keys=(
                ForeignKey(("origin",), "airports", ("code",), context=("kind",)),
                ForeignKey(("dest",), "airports", ("code",)),
                ForeignKey(("year", "team"), "teams", ("year", "team")),
                ForeignKey(("previous",), "flights", ("flight_id",)),
            ),
        ),
    }
    out = synthesize_linked(tables, salt=SALT)
    synthetic = out["flights"]
    assert out["airports"].code.str.len().le(3).all() and out["airports"].code.is_unique
    for column in ("origin", "dest"):
        assert synthetic[column].isin(out["airports"].code).all()
    # every flight leaves from a hub: the child side's context distribution places them on hubs
    origin_kind = synthetic.merge(out["airports"], left_on="origin", right_on="code").kind
    assert (origin_kind == "hub").mean() > 0.9
    assert synthetic.dest.nunique() > 20
    assert out["teams"][["year", "team"]].drop_duplicates().shape[0] == len(out["teams"])
    assert len(synthetic.merge(out["teams"], on=["year", "team"])) == len(synthetic)
    previous = synthetic.previous.dropna()
    assert previous.isin(synthetic.flight_id).all()
    assert abs(synthetic.previous.isna().mean() - 0.5) < 0.07


def test_string_and_uuid_keys_stay_of_their_type_and_unique_columns_stay_unique():
    rng = np.random.default_rng(3)
    parents = pd.DataFrame(
        {
            "id": [str(uuid.UUID(int=int(v))) for v in rng.integers(0, 2**62, 800)],
            "email": [f"user{i}@example.org" for i in range(800)],
            "score": rng.normal(0, 1, 800),
        }
    )
    children = pd.DataFrame(
        {
            "code": [f"C-{i}" for i in range(3000)],
            "parent": rng.choice(parents.id, 3000),
            "x": rng.normal(0, 1, 3000),
        }
    )
    tables = {
        "parents": LinkedTable("parents", parents, primary_key=("id",), unique=(("email",),)),
        "children": LinkedTable(
            "children",
            children,
            primary_key=("code",),
            foreign_keys=(ForeignKey(("parent",), "parents", ("id",)),),
        ),
    }
    out = synthesize_linked(tables, salt=SALT)
    assert out["parents"].id.map(lambda v: str(uuid.UUID(v)) == v).all()
    assert out["parents"].email.is_unique and not out["parents"].email.isin(parents.email).any()
    assert out["children"].code.map(type).eq(str).all() and out["children"].code.is_unique
    assert out["children"].parent.isin(out["parents"].id).all()


def test_entity_links_follow_the_parents_aid_columns():
    frame = pd.DataFrame({"k": [1], "a": [1], "p": [1], "q": [1]})
    tables = {
        "people": LinkedTable("people", frame, primary_key=("k",), aid_columns=("k",)),
        "dim": LinkedTable("dim", frame, primary_key=("k",)),
        "facts": LinkedTable(
            "facts",
            frame,
            foreign_keys=(ForeignKey(("p",), "people", ("k",)), ForeignKey(("q",), "dim", ("k",))),
        ),
        "single": LinkedTable("single", frame, foreign_keys=(ForeignKey(("q",), "dim", ("k",)),)),
    }
    links = entity_links(tables)
    assert [fk.parent for fk in links["facts"]] == ["people"]
    assert [fk.parent for fk in links["single"]] == ["dim"]


def test_a_reference_to_a_missing_table_or_column_is_refused():
    parents, children = _customers_orders(customers=50)
    tables = _link(parents, children)
    tables["orders"] = LinkedTable(
        "orders", children, foreign_keys=(ForeignKey(("customer_id",), "clients", ("customer_id",)),)
    )
    with pytest.raises(LinkingError, match="parent table is not in the linked set"):
        synthesize_linked(tables, salt=SALT)
    tables["orders"] = LinkedTable(
        "orders", children, foreign_keys=(ForeignKey(("customer_id",), "customers", ("age",)),)
    )
    with pytest.raises(LinkingError, match="not a primary or unique key of customers"):
        synthesize_linked(tables, salt=SALT)


def test_a_not_null_key_gets_no_nulls_and_drops_its_orphans():
    parents, children = _customers_orders()
    orphaned = children.copy()
    orphans = orphaned.index % 5 == 0
    orphaned.loc[orphans, "customer_id"] = 10_000_000 + orphaned.index[orphans]
    out = synthesize_linked(_link(parents, orphaned, nullable=False), salt=SALT)["orders"]
    kept = synthesize_linked(_link(parents, orphaned), salt=SALT)["orders"]
    assert out.customer_id.notna().all()
    assert len(out) < 0.9 * len(kept)


def _teams(rng: np.random.Generator) -> tuple[list[str], pd.DataFrame]:
    """Lahman-like teams: 24 of 30 team codes in each year 1960-2019, keyed by (year, team), with wins."""
    codes = [f"T{i:02d}" for i in range(30)]
    teams = pd.DataFrame(
        {
            "year": np.repeat(np.arange(1960, 2020), 24),
            "team": np.concatenate([rng.choice(codes, 24, replace=False) for _ in range(60)]),
        }
    )
    teams["wins"] = rng.integers(50, 110, len(teams))
    return codes, teams


def test_composite_keys_of_data_columns_keep_synthesized_values_unique_and_joined():
    """Lahman's shape: teams keyed by (year, team), batting by (player, year, stint) with player ->
    people and (year, team) -> teams. Years, team codes and stints are data: synthesized, within the
    source's domain, each key unique; the identifiers (player) are fresh; every batting row's
    (year, team) is a synthetic team."""
    rng = np.random.default_rng(21)
    codes, teams = _teams(rng)
    people = pd.DataFrame({"player": np.arange(3000) + 10_000, "height": rng.normal(185, 7, 3000)})
    seasons = rng.integers(1, 8, 3000)
    player = np.repeat(people.player, seasons)
    team_rows = rng.integers(0, len(teams), len(player))
    batting = pd.DataFrame(
        {"player": player, "year": teams.year.to_numpy()[team_rows], "team": teams.team.to_numpy()[team_rows]}
    )
    batting["stint"] = batting.groupby(["player", "year"]).cumcount() + 1
    batting["hits"] = rng.poisson(60, len(batting))
    tables = {
        "people": LinkedTable("people", people, primary_key=("player",)),
        "teams": LinkedTable("teams", teams, primary_key=("year", "team")),
        "batting": LinkedTable(
            "batting",
            batting,
            primary_key=("player", "year", "stint"),
            foreign_keys=(
                ForeignKey(("player",), "people", ("player",)),
                ForeignKey(("year", "team"), "teams", ("year", "team"), context=("year",)),
            ),
        ),
    }
    out = synthesize_linked(tables, salt=SALT)
    synthetic_teams, synthetic_batting = out["teams"], out["batting"]
    assert synthetic_teams.year.between(1960, 2019).all() and synthetic_teams.team.isin(codes).all()
    assert not synthetic_teams.duplicated(["year", "team"]).any()
    assert len(synthetic_teams) > 0.9 * len(teams)  # repeated combinations take other codes, few are dropped
    per_year = synthetic_teams.groupby("year").size()
    assert per_year.median() >= 18  # about the source's 24 teams a year, not one row per year
    assert not set(synthetic_batting.player) & set(people.player)  # the identifier is fresh
    assert synthetic_batting.player.isin(out["people"].player).all()
    assert len(synthetic_batting.merge(synthetic_teams, on=["year", "team"])) == len(synthetic_batting)
    assert not synthetic_batting.duplicated(["player", "year", "stint"]).any()
    assert synthetic_batting.stint.between(1, batting.stint.max()).all()


def test_a_child_keys_years_stay_within_the_child_tables_own_years():
    """Lahman's salaries: teams span 1960-2019, salaries exist for 1985-2004 only. A salary takes the
    (year, team) of the synthetic team it is matched to, and only teams whose year lies within the
    salaries' own (synthetic, anonymized) years take any: no salary lands in a year without salaries."""
    rng = np.random.default_rng(22)
    _, teams = _teams(rng)
    paid = np.flatnonzero(teams.year.between(1985, 2004).to_numpy())
    team_rows = rng.choice(paid, 8000)
    salaries = pd.DataFrame(
        {
            "year": teams.year.to_numpy()[team_rows],
            "team": teams.team.to_numpy()[team_rows],
            "salary": rng.lognormal(13, 1, 8000).round(),
        }
    )
    tables = {
        "teams": LinkedTable("teams", teams, primary_key=("year", "team")),
        "salaries": LinkedTable(
            "salaries",
            salaries,
            foreign_keys=(ForeignKey(("year", "team"), "teams", ("year", "team"), context=("year", "wins")),),
        ),
    }
    out = synthesize_linked(tables, salt=SALT)
    synthetic = out["salaries"]
    assert len(synthetic) > 0.9 * len(salaries)
    assert len(synthetic.merge(out["teams"], on=["year", "team"])) == len(synthetic)
    assert synthetic.year.between(1985, 2004).all(), synthetic.year.agg(["min", "max"]).tolist()
    assert synthetic.year.nunique() >= 18  # the salaries' years, not a few of them


def test_an_entity_links_parents_beyond_every_childs_context_get_no_children():
    """Parents whose context value lies beyond the children's synthetic context values take none of
    them, even with a positive synthetic child count; the others take all."""
    from syndiffix_core.linking.assignment import assign

    rng = np.random.default_rng(12)
    context = np.linspace(0, 1, 400)
    owner = np.repeat(np.flatnonzero((context >= 0.2) & (context <= 0.8)), 5)
    assigned = assign(
        [pd.Series(context[owner] + rng.normal(0, 0.01, len(owner))).clip(0.2, 0.8)],
        [pd.Series(context)],
        None,
        None,
        np.full(400, 3.0),
        np.random.default_rng(1),
    )
    assert len(assigned) == len(owner)
    assert context[assigned].min() >= 0.2 and context[assigned].max() <= 0.8


# ------------------------------------------------------------------- dimension links (lookup parents)

DOUBLING_EDGES = [0, 1, 2, 4, 8, 16, 32, 64, 128]


def _count_shares(counts: np.ndarray) -> np.ndarray:
    """Share of parents per doubling bin of their child count (0, 1, 2-3, 4-7, ..., 128+)."""
    codes = np.searchsorted(DOUBLING_EDGES, counts, side="right") - 1
    return np.bincount(codes, minlength=len(DOUBLING_EDGES)) / max(len(counts), 1)


def _children_counts(children: pd.DataFrame, parents: pd.DataFrame, key: str, parent_key: str) -> np.ndarray:
    return children.groupby(key).size().reindex(parents[parent_key], fill_value=0).to_numpy()


def _tvd(left: np.ndarray, right: np.ndarray) -> float:
    return 0.5 * float(np.abs(left - right).sum())


def _resample_tvd(children, parents, key, parent_key, draws=5) -> float:
    """The children-per-parent TVD of both tables resampled with replacement (mean over draws): what
    a copy that keeps every row's statistics but resamples its rows reaches."""
    source = _count_shares(_children_counts(children, parents, key, parent_key))
    rng = np.random.default_rng(11)
    distances = []
    for _ in range(draws):
        child_sample = children.iloc[rng.integers(0, len(children), len(children))]
        parent_sample = parents.iloc[rng.integers(0, len(parents), len(parents))]
        per_key = child_sample.groupby(key).size()
        counts = per_key.reindex(parent_sample[parent_key], fill_value=0).to_numpy()
        distances.append(_tvd(source, _count_shares(counts)))
    return float(np.mean(distances))


def _hub_airports(seed: int = 3):
    """200 airports (a lookup table, no entity); three hubs hold most departures; flights are
    protected per plane (1,500 planes)."""
    rng = np.random.default_rng(seed)
    airports = pd.DataFrame(
        {
            "code": [f"X{i:03d}" for i in range(200)],
            "lon": np.r_[[-74.2, -73.9, -73.8], rng.uniform(-160, -70, 197)],
            "alt": rng.integers(0, 3000, 200),
        }
    )
    rows = 30_000
    origin = rng.choice(3, rows, p=[0.4, 0.35, 0.25])
    flights = pd.DataFrame(
        {
            "flight_id": np.arange(rows),
            "plane": rng.integers(0, 1500, rows),
            "origin": airports.code.to_numpy()[origin],
            "distance": rng.gamma(4.0, 250 + 100 * origin),
        }
    )
    return airports, flights


def _hub_tables(airports, flights, **flights_options) -> dict[str, LinkedTable]:
    return {
        "airports": LinkedTable("airports", airports, primary_key=("code",)),
        "flights": LinkedTable(
            "flights",
            flights,
            primary_key=("flight_id",),
            aid_columns=("plane",),
            foreign_keys=(ForeignKey(("origin",), "airports", ("code",), context=("lon",), nullable=False),),
            **flights_options,
        ),
    }


def test_a_few_hubs_keep_their_children_per_parent_through_a_dimension_link():
    airports, flights = _hub_airports()
    tables = _hub_tables(airports, flights)
    assert entity_links(tables)["flights"] == []  # airports is not the flights' entity
    out = synthesize_linked(tables, salt=SALT)
    source = _count_shares(_children_counts(flights, airports, "origin", "code"))
    synthetic_counts = _children_counts(out["flights"], out["airports"], "origin", "code")
    distance = _tvd(source, _count_shares(synthetic_counts))
    assert distance <= 2 * _resample_tvd(flights, airports, "origin", "code")
    # the three hubs' counts come out, not flattened onto dozens of airports
    assert (synthetic_counts > 0).sum() <= 4 and synthetic_counts.max() > 0.3 * len(out["flights"])


def _teams_and_batting(seed: int = 4):
    """600 teams (a lookup table); batting rows protected per player; a team's runs drive the mean
    home runs of its batting rows (0.7 per team, 0.2 per row: weak enough that the batting synthesis,
    with its other columns, keeps little of it)."""
    rng = np.random.default_rng(seed)
    teams_n = 600
    strength = rng.normal(0, 1, teams_n)
    teams = pd.DataFrame(
        {
            "team_id": np.arange(teams_n) + 100,
            "runs": np.rint(700 + 80 * strength + rng.normal(0, 40, teams_n)).astype(int),
            "wins": np.rint(81 + 8 * strength + rng.normal(0, 8, teams_n)).astype(int),
        }
    )
    per_team = rng.integers(25, 45, teams_n)
    team = np.repeat(np.arange(teams_n), per_team)
    games = rng.integers(1, 160, len(team))
    batting = pd.DataFrame(
        {
            "row_id": np.arange(len(team)),
            "player": rng.integers(0, 4000, len(team)),
            "team_id": teams.team_id.to_numpy()[team],
            "games": games,
            "at_bats": games * 3 + rng.integers(0, 50, len(team)),
            "hr": rng.poisson(games / 40 * np.exp(0.25 * strength[team])),
        }
    )
    return teams, batting


def _mean_correlation(children: pd.DataFrame, parents: pd.DataFrame) -> float:
    means = children.groupby("team_id").hr.mean().reindex(parents.team_id)
    both = means.notna().to_numpy()
    return float(np.corrcoef(parents.runs.to_numpy()[both], means.to_numpy()[both])[0, 1])


def test_a_parent_column_x_child_mean_correlation_survives_a_dimension_link():
    teams, batting = _teams_and_batting()
    tables = {
        "teams": LinkedTable("teams", teams, primary_key=("team_id",)),
        "batting": LinkedTable(
            "batting",
            batting,
            primary_key=("row_id",),
            aid_columns=("player",),
            foreign_keys=(
                ForeignKey(
                    ("team_id",),
                    "teams",
                    ("team_id",),
                    context=("wins", "runs"),
                    aggregates=("hr",),
                    nullable=False,
                ),
            ),
        ),
    }
    out = synthesize_linked(tables, salt=SALT)
    source = _mean_correlation(batting, teams)
    assert source > 0.4
    assert abs(_mean_correlation(out["batting"], out["teams"]) - source) < 0.1


def test_the_children_per_parent_of_a_dimension_link_follow_the_childs_own_parameters():
    """A child synthesized with a stricter low-count filter gets the same filter on its key histogram:
    key values held by 8 entities pass the default filter and are suppressed at low_threshold 20."""
    from syndiffix_core.linking.key_histogram import key_histogram
    from syndiffix_core.noise import Salt
    from syndiffix_core.params import AnonymizationParams, SuppressionParams

    entities_per_value = [60, 50, 40] + [8] * 20
    positions = np.repeat(np.arange(len(entities_per_value)), 3 * np.array(entities_per_value))
    entity = np.concatenate([np.repeat(np.arange(n), 3) + 1000 * v for v, n in enumerate(entities_per_value)])
    parents = pd.DataFrame({"code": [f"P{i}" for i in range(len(entities_per_value))]})
    children = pd.DataFrame({"row": np.arange(len(positions))})

    def histogram(anonymization):
        return key_histogram(
            positions, parents, [entity], children, Salt.from_secret(SALT), "children code", anonymization
        )

    default = histogram(AnonymizationParams())
    strict = histogram(AnonymizationParams(low_count_params=SuppressionParams(low_threshold=20)))
    assert len(default.counts) > 3
    assert len(strict.counts) == 3 and strict.pooled > 0


def test_a_dimension_link_to_a_child_of_another_engine_is_refused_naming_it():
    airports, flights = _hub_airports()
    tables = _hub_tables(airports, flights, anonymization=None)
    with pytest.raises(
        LinkingError, match="table flights: its engine is not SynDiffix.*make airports its entity"
    ):
        synthesize_linked(tables, salt=SALT)


def test_the_matching_targets_take_the_context_profile_of_whichever_synthesis_shows_it_stronger():
    """A parent synthesis that kept a context dependency at about 0.7 of the children's strength (half
    the variance across buckets) has lost part of it: the targets take the children's bucket levels
    and keep each parent's deviation from its own bucket's level. Where the parent's profile is the
    stronger one, the targets are the parents' synthetic means."""
    from syndiffix_core.linking.assignment import context_levels

    rng = np.random.default_rng(3)
    buckets = 6
    parent_bucket = np.repeat(np.arange(buckets), 50)
    child_bucket = np.repeat(np.arange(buckets), 400)
    profile = np.linspace(-1.0, 1.0, buckets)
    deviation = rng.normal(0, 0.5, len(parent_bucket))
    places = np.full(len(parent_bucket), 8)

    def targets(child_strength: float, parent_strength: float) -> np.ndarray:
        children = child_strength * profile[child_bucket] + rng.normal(0, 1.0, len(child_bucket))
        parents = parent_strength * profile[parent_bucket] + deviation
        return context_levels(children[:, None], parents[:, None], child_bucket, parent_bucket, places)[:, 0]

    moved = targets(1.0, 0.7)
    levels = np.array([moved[parent_bucket == b].mean() for b in range(buckets)])
    assert np.abs(levels - profile).max() < 0.15  # the children's levels, not 0.7 of them
    own_level = np.array([deviation[parent_bucket == b].mean() for b in range(buckets)])
    # each parent keeps its deviation from its bucket's level
    np.testing.assert_allclose(moved - levels[parent_bucket], deviation - own_level[parent_bucket])
    kept = targets(0.7, 1.0)
    np.testing.assert_allclose(kept, profile[parent_bucket] + deviation)


def test_a_parents_child_statistics_are_clustered_with_the_columns_children_are_matched_on():
    """The engine gets, per parent, each link's child count and child means paired with the link's
    context columns, and its solver keeps such pairs in one cluster where the weights allow: two
    independent blocks of columns are clustered apart, and the pairs across them are kept anyway."""
    from syndiffix_core.clustering.plan import plan_table
    from syndiffix_core.params import ClusteringParams

    parents, children = _customers_orders(customers=300)
    tables = _link(parents, children, context=("age",), aggregates=("amount",))
    given = _kept_pairs(tables)
    assert given == {"customers": (("age", "__link_n_0"), ("age", "__link_mean_0_amount")), "orders": ()}

    rng = np.random.default_rng(7)
    blocks = [rng.normal(0, 1, (2000, 1)) + rng.normal(0, 0.2, (2000, 4)) for _ in range(2)]
    values = np.hstack(blocks)
    names = [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]

    def clusters(pairs):
        params = ClusteringParams(keep_together=pairs)
        plan = plan_table(values, names, params, target_column=None, rng=np.random.default_rng(1))
        return [{names[c] for c in cluster} for cluster in plan.clusters.all_clusters()]

    pairs = (("a0", "b3"), ("b1", "a2"))
    assert not any(set(pair) <= cluster for pair in pairs for cluster in clusters(()))
    assert all(any(set(pair) <= cluster for cluster in clusters(pairs)) for pair in pairs)


def test_an_entity_links_parents_get_their_synthetic_means_from_children_of_their_context():
    """Ten children per parent are a sample whose mean is off its parent's synthetic mean by about a
    third of the means' spread; swaps within the context buckets bring the realized means to the
    synthetic ones and keep every child with a parent of its own context bucket."""
    from syndiffix_core.linking.assignment import assign

    rng = np.random.default_rng(11)
    parents = 800
    context = rng.random(parents)
    means = rng.normal(0, 1, parents) + 2 * context
    counts = np.full(parents, 10.0)
    owner = np.repeat(np.arange(parents), 10)
    children = means[owner] + rng.normal(0, 1.5, len(owner))
    assigned = assign(
        [pd.Series(context[owner])],
        [pd.Series(context)],
        children[:, None],
        means[:, None],
        counts,
        np.random.default_rng(1),
    )
    realized = np.bincount(assigned, weights=children, minlength=parents) / np.bincount(
        assigned, minlength=parents
    )
    assert np.abs(realized - means).mean() < 0.1
    edges = np.quantile(context, np.linspace(0, 1, 9)[1:-1])
    own_bucket = np.searchsorted(edges, context[owner], side="right")
    assert (own_bucket == np.searchsorted(edges, context[assigned], side="right")).mean() > 0.97


def test_a_context_bucket_with_more_children_than_its_parents_take_does_not_shift_the_other_buckets():
    """The first context bucket holds half again as many children as its parents' counts let them take.
    Its surplus children go elsewhere, but every other bucket's children still go to parents of their
    own bucket, so the parents' realized means follow the context as their synthetic means do."""
    from syndiffix_core.linking.assignment import assign

    rng = np.random.default_rng(5)
    parents = 800
    context = rng.random(parents)
    means = 4 * context + rng.normal(0, 0.3, parents)
    per_parent = np.where(context < 0.125, 15, 10)
    owner = np.repeat(np.arange(parents), per_parent)
    children = means[owner] + rng.normal(0, 1.0, len(owner))
    assigned = assign(
        [pd.Series(context[owner])],
        [pd.Series(context)],
        children[:, None],
        means[:, None],
        np.full(parents, 10.0),
        np.random.default_rng(1),
    )
    edges = np.quantile(context, np.linspace(0, 1, 9)[1:-1])
    own_bucket = np.searchsorted(edges, context[owner], side="right")
    later = own_bucket > 0
    assert (own_bucket[later] == np.searchsorted(edges, context[assigned[later]], side="right")).mean() > 0.97
    realized = np.bincount(assigned, weights=children, minlength=parents) / np.bincount(
        assigned, minlength=parents
    )
    assert np.corrcoef(context, realized)[0, 1] > 0.9 * np.corrcoef(context, means)[0, 1]


def test_a_childs_mean_is_also_kept_with_the_parent_column_outside_the_context_it_depends_on_most():
    """Orders' amounts follow their customer's income, not the age the orders are matched on: the
    customers' synthesis keeps the mean amount with the income as well as with the age, and with no
    column the mean does not depend on."""
    parents, children = _customers_orders(customers=1500)
    rng = np.random.default_rng(2)
    parents["income"] = rng.gamma(2.0, 20.0, len(parents))
    parents["visits"] = rng.integers(0, 50, len(parents))
    owner = children.customer_id.to_numpy(dtype=np.int64) - 1
    children["amount"] = parents.income.to_numpy()[owner] * rng.gamma(8.0, 1 / 8, len(children))
    tables = _link(parents, children, context=("age",), aggregates=("amount",))
    given = _kept_pairs(tables)
    kept = set(given["customers"])
    assert ("income", "__link_mean_0_amount") in kept
    assert not {("visits", "__link_mean_0_amount"), ("segment", "__link_mean_0_amount")} & kept
    assert ("age", "__link_mean_0_amount") in kept


def test_a_childs_count_is_kept_with_the_parent_column_it_depends_on_most_never_with_a_key_column():
    """Teams of a season: how many players a team has is its franchise's habit, and its payroll follows
    it; the wins the players are matched on do not. The team code, a column of the referenced
    composite key, depends on the count most, but it names the team rather than describing it: the
    count is kept with the payroll instead."""
    rng = np.random.default_rng(4)
    franchise = np.tile(np.arange(30), 40)
    roster = rng.integers(3, 40, 30)[franchise]
    teams = pd.DataFrame(
        {
            "year": np.repeat(np.arange(2000, 2040), 30),
            "team": np.array([f"T{i:02d}" for i in range(30)])[franchise],
            "wins": rng.integers(50, 110, 1200),
            "payroll": roster * 3.0 + rng.normal(0, 40, 1200),
        }
    )
    owner = np.repeat(np.arange(len(teams)), rng.poisson(roster))
    players = pd.DataFrame(
        {
            "player_id": np.arange(len(owner)) + 1,
            "year": teams.year.to_numpy()[owner],
            "team": teams.team.to_numpy()[owner],
            "games": rng.integers(1, 160, len(owner)),
        }
    )
    key = ForeignKey(("year", "team"), "teams", ("year", "team"), context=("wins",), aggregates=("games",))
    tables = {
        "teams": LinkedTable("teams", teams, primary_key=("year", "team")),
        "players": LinkedTable("players", players, primary_key=("player_id",), foreign_keys=(key,)),
    }
    given = _kept_pairs(tables)
    kept = set(given["teams"])
    assert ("payroll", "__link_n_0") in kept
    assert not {pair for pair in kept if pair[0] in ("team", "year") and pair[1] == "__link_n_0"}
