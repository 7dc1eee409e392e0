"""The warehouse risk report: sketches streamed from chunks, checked against exact pandas counts, and
the same report read from real SQLite and PostgreSQL databases."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict

from syndiffix_core.risk import hash_column
from syndiffix_ops.config import parse_config
from syndiffix_ops.engines import ENGINES, EngineResult, register_engine
from syndiffix_ops.lineage import last_lineage
from syndiffix_ops.pipeline import run_table
from syndiffix_ops.risk import (
    RiskError,
    RiskParams,
    TableSketcher,
    assess_config,
    assess_output,
    coarse,
    coarse_count,
    column_sets,
    cross_table_joinability,
    frame_chunks,
    round_share,
    share_step,
    sketch_table,
    summarize_table,
)
from syndiffix_ops.run_errors import PipelineError

THRESHOLDS = (1, 2, 5, 10)
# The risk report reads sources only; a pipeline config still needs a target that is not its source.
SYNTHETIC_URL = "sqlite:///never-written.db"


def people(rows: int = 3_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "person": rng.integers(0, rows // 2, rows),  # people have about two rows each
            "zip": rng.integers(1_000, 1_400, rows),
            "age": rng.integers(18, 90, rows),
            "sex": rng.choice(["f", "m"], rows),
        }
    )


def exact_potential(frame: pd.DataFrame, columns: list[str], ids: str | None, t: int) -> float:
    id_column = frame[ids] if ids else pd.Series(np.arange(len(frame)), index=frame.index)
    counts = id_column.groupby([frame[c] for c in columns]).nunique()
    return float((counts <= t).mean())


@pytest.mark.parametrize("ids", ["person", None])
def test_chunked_sketches_match_exact_counts(ids):
    frame = people()
    sets = column_sets(["zip", "age", "sex"], [["zip", "age"], ["zip", "age", "sex"]])
    sketcher = sketch_table(frame_chunks(frame, 700), sets, [ids] if ids else [], table="people")
    risk = summarize_table("people", sketcher)
    for columns in sets:
        summary = risk.summary(columns)
        assert summary.distinct_values_exact  # fewer than K values: the figures are exact
        assert summary.distinct_values == frame.groupby(list(columns)).ngroups
        for t in THRESHOLDS:
            assert summary.reidentification_potential[t] == pytest.approx(
                exact_potential(frame, list(columns), ids, t)
            )
    expected_ids = frame["person"].nunique() if ids else len(frame)
    assert risk.summary(["zip"]).distinct_ids == pytest.approx(expected_ids, rel=0.01)
    assert risk.summary(["zip", "age", "sex"]).level == "identifying"
    assert risk.summary(["sex"]).level == "low"


def test_rows_are_numbered_across_chunks():
    frame = people(1_500)
    whole = sketch_table([frame], [("sex",)])
    chunked = sketch_table(frame_chunks(frame, 100), [("sex",)])
    assert chunked.sketches[("sex",)] == whole.sketches[("sex",)]
    assert whole.sketches[("sex",)].distinct_ids() == 1_500


def test_with_several_aids_a_column_is_as_identifying_as_under_its_rarest_entity():
    # Every account belongs to one sender but is paid by many receivers: it singles out senders only.
    rng = np.random.default_rng(4)
    transfers = pd.DataFrame({"sender": np.arange(4_000) % 200, "receiver": rng.integers(0, 50, 4_000)})
    transfers["account"] = transfers["sender"] * 7 + 1
    transfers["day"] = rng.integers(0, 5, 4_000)
    sets = [("account",), ("day",)]
    both = summarize_table("t", sketch_table([transfers], sets, ["sender", "receiver"]))
    by_sender = summarize_table("t", sketch_table([transfers], sets, ["sender"]))
    by_receiver = summarize_table("t", sketch_table([transfers], sets, ["receiver"]))
    assert by_receiver.summary(["account"]).level == "low"
    assert both.summary(["account"]) == by_sender.summary(["account"])
    assert both.summary(["account"]).level == "identifying"
    assert both.summary(["day"]) == by_receiver.summary(["day"])  # 50 receivers are rarer than 200 senders


def test_quasi_identifiers_must_be_read_columns():
    with pytest.raises(RiskError, match=r"table people: .*\['zip', 'salary'\] names \['salary'\]"):
        column_sets(["zip", "age"], [["zip", "salary"]], table="people")


def test_missing_columns_in_a_chunk_are_named():
    with pytest.raises(RiskError, match=r"table t: columns \['person'\] are missing"):
        sketch_table([pd.DataFrame({"zip": [1]})], [("zip",)], ["person"], table="t")


def test_output_assessment_counts_reproduced_unique_rows():
    source = pd.DataFrame({"zip": np.arange(2_000) % 1_000, "age": np.arange(2_000) % 7})
    sketcher = sketch_table([source], column_sets(["zip", "age"], [["zip", "age"]]))
    unique_combos = source.groupby(["zip", "age"]).size()
    unique_combos = unique_combos[unique_combos == 1].index.to_frame(index=False)
    synthetic = pd.concat(
        [unique_combos.iloc[:300], pd.DataFrame({"zip": np.arange(5_000, 5_700), "age": 3})],
        ignore_index=True,
    )
    output = assess_output(sketcher, frame_chunks(synthetic, 250))
    pair = output.reproduction["zip+age"]
    assert pair.rows_sampled == 1_000  # the source sketch is exact: every synthetic row is in range
    assert pair.rows_unique_in_source == 300
    synthetic_zips, source_zips = set(synthetic["zip"]), set(source["zip"])
    expected = len(synthetic_zips & source_zips) / len(synthetic_zips)
    assert output.containment["zip"]["synthetic_in_source"] == pytest.approx(expected)
    assert output.containment["age"]["synthetic_in_source"] == 1.0
    assert output.to_dict()["reproduction"]["zip+age"]["share_unique_in_source"] == pytest.approx(0.3)


def test_a_sketcher_fed_the_callers_column_hashes_holds_the_same_sketches():
    """assess_output hashes each synthetic column once and hands the hashes to the synthetic sketcher."""
    rng = np.random.default_rng(4)
    chunk = pd.DataFrame(
        {"zip": rng.integers(0, 900, 3_000), "city": rng.choice(["a", "b", "c", "d"], 3_000)}
    )
    sets = column_sets(["zip", "city"], [["zip", "city"]])
    hashing, fed = TableSketcher(sets), TableSketcher(sets)
    hashing.add(chunk)
    fed.add(chunk, {"zip": hash_column(chunk["zip"]), "city": hash_column(chunk["city"])})
    for columns in sets:
        overlap = hashing.sketches[columns].overlap(fed.sketches[columns])
        assert overlap.jaccard == 1.0 and overlap.containment_of_first == 1.0
    assert fed.domains == hashing.domains == {"zip": "number", "city": "other"}


def test_joinability_across_tables_and_domains():
    customers = pd.DataFrame({"id": np.arange(5_000), "email": [f"c{i}@x.org" for i in range(5_000)]})
    orders = pd.DataFrame(
        {"customer": np.arange(20_000) % 2_000, "note": [f"c{i}@x.org" for i in range(20_000)]}
    )
    params = RiskParams()
    sketchers = {
        "customers": sketch_table([customers], [("id",), ("email",)], params=params),
        "orders": sketch_table([orders], [("customer",), ("note",)], params=params),
    }
    links = {(j.left, j.right): j for j in cross_table_joinability(sketchers, params)}
    assert links[("customers.id", "orders.customer")].linkable
    assert links[("customers.id", "orders.customer")].containment_right_in_left == pytest.approx(1.0)
    assert links[("customers.email", "orders.note")].containment_left_in_right == pytest.approx(1.0)
    assert ("customers.id", "orders.note") not in links  # a number and a string never hash alike


def test_coarse_rounds_counts_and_shares():
    assert coarse({"n": 123_456, "share": 0.123456, "exact": True, "name": "x", "none": None}) == {
        "n": 120_000,
        "share": 0.123,
        "exact": True,
        "name": "x",
        "none": None,
    }
    assert coarse([17, 3, 0, 1, 0.5, 1.0, float("nan")]) == [20, 10, 0, 10, 0.5, 1.0, None]


# ----------------------------------------------------------------------------------- on databases


def make_warehouse(url: str, schema: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(7)
    customers = pd.DataFrame(
        {
            "customer_id": np.arange(1_200),
            "email": [f"user{i}@example.com" for i in range(1_200)],
            "zip": rng.integers(10_000, 10_060, 1_200),
            "birth_year": rng.integers(1940, 2005, 1_200),
            "segment": rng.choice(["a", "b", "c"], 1_200),
        }
    )
    orders = pd.DataFrame(
        {
            "order_id": np.arange(4_000),
            "customer_id": rng.integers(0, 800, 4_000),
            "amount": np.round(rng.gamma(2.0, 30.0, 4_000), 2),
            "zip": rng.integers(10_000, 10_060, 4_000),
        }
    )
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        customers.to_sql("customers", conn, schema=schema, index=False)
        orders.to_sql("orders", conn, schema=schema, index=False)
    engine.dispose()
    return customers, orders


def risk_config(url: str, chunk_rows: int):
    return parse_config(
        {
            "source": url,
            "target": SYNTHETIC_URL,
            "risk": {"thresholds": [1, 2, 5, 10]},
            "defaults": {"read_chunk_rows": chunk_rows},
            "tables": [
                {
                    "source": "customers",
                    "aid_columns": ["customer_id"],
                    "risk": {"quasi_identifiers": [["zip", "birth_year"], ["zip", "birth_year", "segment"]]},
                },
                {"source": "orders", "aid_columns": ["customer_id"], "columns": {"order_id": "drop"}},
            ],
        }
    )


def check_report(url: str, customers: pd.DataFrame, orders: pd.DataFrame) -> None:
    report = assess_config(risk_config(url, chunk_rows=333))
    data = json.loads(json.dumps(report.to_dict()))
    table = data["tables"]["customers"]
    assert table["ids"] == ["customer_id"]
    assert set(table["column_sets"]) == {
        "email",
        "zip",
        "birth_year",
        "segment",
        "zip+birth_year",
        "zip+birth_year+segment",
    }
    email = table["column_sets"]["email"]
    assert email["distinct_values"] == 1_200 and email["level"] == "identifying"
    assert email["reidentification_potential"] == {"1": 1.0, "2": 1.0, "5": 1.0, "10": 1.0}
    for name, columns in (("zip", ["zip"]), ("zip+birth_year", ["zip", "birth_year"])):
        entry = table["column_sets"][name]
        assert entry["distinct_values"] == customers.groupby(columns).ngroups
        for t in (1, 2, 5, 10):
            expected = exact_potential(customers, columns, "customer_id", t)
            assert entry["reidentification_potential"][str(t)] == pytest.approx(expected)
    assert "email" in table["identifying"]
    order_sets = data["tables"]["orders"]["column_sets"]
    assert set(order_sets) == {"amount", "zip"}  # order_id dropped by policy, customer_id is the id
    expected = exact_potential(orders, ["zip"], "customer_id", 10)
    assert order_sets["zip"]["reidentification_potential"]["10"] == pytest.approx(expected)
    links = {(j["left"], j["right"]) for j in data["joinability"] if j["linkable"]}
    assert ("customers.zip", "orders.zip") in links
    # streaming in small chunks gives exactly the report of one big chunk
    assert assess_config(risk_config(url, chunk_rows=100_000)).to_dict() == report.to_dict()


def test_report_from_sqlite(tmp_path):
    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    customers, orders = make_warehouse(url)
    check_report(url, customers, orders)


@pytest.mark.postgres
def test_report_from_postgresql(pg_url):
    customers, orders = make_warehouse(pg_url)
    check_report(pg_url, customers, orders)


def test_errors_name_the_table(tmp_path):
    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    make_warehouse(url)
    config = parse_config(
        {
            "source": url,
            "target": SYNTHETIC_URL,
            "tables": [
                {
                    "source": "orders",
                    "columns": {"zip": "drop"},
                    "risk": {"quasi_identifiers": [["zip", "amount"]]},
                }
            ],
        }
    )
    with pytest.raises(
        RiskError, match=r"table orders: quasi-identifier combination \['zip', 'amount'\] names \['zip'\]"
    ):
        assess_config(config)
    missing = parse_config({"source": url, "target": SYNTHETIC_URL, "tables": [{"source": "nope"}]})
    with pytest.raises(PipelineError, match="table nope: source table nope does not exist"):
        assess_config(missing)


# ---------------------------------------------------------------------------------------- the CLI


def write_config(tmp_path, url: str, extra_table: str = "") -> str:
    path = tmp_path / "risk.yaml"
    path.write_text(
        f"""
source: {url}
target: sqlite:///{tmp_path / "target.db"}
tables:
  - source: customers
    aid_columns: [customer_id]
    risk:
      quasi_identifiers: [[zip, birth_year]]
  - source: orders
    aid_columns: [customer_id]
{extra_table}"""
    )
    return str(path)


def test_cli_prints_json_per_table_and_column_set(tmp_path):
    from click.testing import CliRunner

    from syndiffix_ops.cli import main

    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    customers, _ = make_warehouse(url)
    result = CliRunner().invoke(main, ["risk", write_config(tmp_path, url), "--json", "--table", "customers"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert list(data["tables"]) == ["customers"]
    entry = data["tables"]["customers"]["column_sets"]["zip+birth_year"]
    assert entry["distinct_values"] == customers.groupby(["zip", "birth_year"]).ngroups
    assert set(entry["reidentification_potential"]) == {"1", "2", "5", "10"}
    assert entry["distinct_ids"] == 1_200

    human = CliRunner().invoke(main, ["risk", write_config(tmp_path, url)])
    assert human.exit_code == 0, human.output
    assert "identifying" in human.output and "linkable columns across tables" in human.output


def test_cli_exit_codes_for_bad_configs(tmp_path):
    from click.testing import CliRunner

    from syndiffix_ops.cli import main

    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    make_warehouse(url)
    unknown = CliRunner().invoke(main, ["risk", write_config(tmp_path, url), "--table", "nope"])
    assert unknown.exit_code == 2
    bad_qi = "    risk:\n      quasi_identifiers: [[zip, amount, colour]]\n"
    config = write_config(
        tmp_path, url, extra_table="  - source: orders\n    name: orders2\n    target: orders2\n" + bad_qi
    )
    result = CliRunner().invoke(main, ["risk", config])
    assert result.exit_code == 2
    assert (
        "table orders2: quasi-identifier combination ['zip', 'amount', 'colour'] names ['colour']"
        in " ".join(result.output.split())
    )


# ------------------------------------------------------------------------------ inside run_table


class _NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HalfCopyEngine:
    """A deliberately leaky engine: copies every other source row, so the output reproduces the source's
    unique combinations at a rate known in advance."""

    name = "risk_test_half_copy"
    params_model = _NoParams

    def run(self, df, *, aid_columns, salt, params, table_identity, progress=None):
        return EngineResult(df.drop(columns=list(aid_columns)).iloc[::2].reset_index(drop=True), {})


@pytest.fixture
def half_copy_engine():
    engine = register_engine(HalfCopyEngine())
    yield engine
    ENGINES.pop(engine.name)


def pipeline_config(url: str, target_url: str, report_dir, enabled: bool = True):
    return parse_config(
        {
            "source": url,
            "target": target_url,
            "report_dir": str(report_dir),
            "risk": {"enabled": enabled},
            "tables": [
                {
                    "source": "customers",
                    "target": "customers_synthetic",
                    "engine": "risk_test_half_copy",
                    "aid_columns": ["customer_id"],
                    "columns": {"email": "drop"},
                    "risk": {"quasi_identifiers": [["zip", "birth_year"]]},
                }
            ],
        }
    )


def check_run_records_risk(source_url: str, target_url: str, report_dir) -> None:
    customers, _ = make_warehouse(source_url)
    [result] = run_table(pipeline_config(source_url, target_url, report_dir), "customers", salt=b"s")
    target = sa.create_engine(target_url)
    lineage = last_lineage(target, None, "customers_synthetic")
    target.dispose()
    stored = lineage["risk_metrics"]
    assert stored == json.loads(json.dumps(result.risk))
    assert set(stored["source"]["column_sets"]) == {"zip", "birth_year", "segment", "zip+birth_year"}
    expected = exact_potential(customers, ["zip", "birth_year"], "customer_id", 1)
    combinations = customers.groupby(["zip", "birth_year"]).ngroups
    # rounded on the step of its denominator's coarse count, so that the count cannot be read back
    assert stored["source"]["column_sets"]["zip+birth_year"]["reidentification_potential"][
        "1"
    ] == pytest.approx(expected, abs=share_step(combinations) / 2 + 1e-9)
    # The engine copied rows 0, 2, 4, ...: the share of them whose (zip, birth_year) is unique in the source.
    ids_per_combo = customers.groupby(["zip", "birth_year"])["customer_id"].transform("nunique")
    copied_unique = float((ids_per_combo.iloc[::2] == 1).mean())
    output = stored["output"]
    assert output["reproduction"]["zip+birth_year"]["share_unique_in_source"] == pytest.approx(
        copied_unique, abs=0.0005
    )
    assert output["containment"]["zip"]["synthetic_in_source"] == 1.0
    assert "customer_id" not in json.dumps(stored["output"])  # the AID is not an output column
    # copying rows reproduces source-unique values as often as the copy baseline says, far above chance
    baseline = output["reproduction_baselines"]["zip+birth_year"]
    combination = stored["source"]["column_sets"]["zip+birth_year"]
    assert baseline["copy"] == combination["id_share"]["1"]
    assert baseline["chance"] < 0.5 * copied_unique
    html = result.report_path.read_text()
    assert "Re-identification risk (KHLL)" in html and 'alt="uniqueness of every column set"' in html
    assert "close to copying rows" in html


def test_run_table_stores_risk_in_lineage_and_report_sqlite(tmp_path, half_copy_engine):
    check_run_records_risk(
        f"sqlite:///{tmp_path / 'source.db'}", f"sqlite:///{tmp_path / 'target.db'}", tmp_path / "reports"
    )


@pytest.mark.postgres
def test_run_table_stores_risk_in_lineage_and_report_postgresql(pg_url, tmp_path, half_copy_engine):
    engine = sa.create_engine(pg_url)
    with engine.begin() as conn:
        for name in ("customers", "orders", "customers_synthetic", "syndiffix_lineage"):
            conn.exec_driver_sql(f'DROP TABLE IF EXISTS "{name}"')
    engine.dispose()
    check_run_records_risk(pg_url, pg_url, tmp_path / "reports")


def test_risk_can_be_switched_off(tmp_path, half_copy_engine):
    source, target = f"sqlite:///{tmp_path / 'source.db'}", f"sqlite:///{tmp_path / 'target.db'}"
    make_warehouse(source)
    config = pipeline_config(source, target, tmp_path / "reports", enabled=False)
    [result] = run_table(config, "customers", salt=b"s")
    assert result.risk is None
    engine = sa.create_engine(target)
    assert last_lineage(engine, None, "customers_synthetic")["risk_metrics"] is None
    engine.dispose()


def test_run_table_refuses_a_bad_quasi_identifier_before_reading(tmp_path, half_copy_engine):
    source, target = f"sqlite:///{tmp_path / 'source.db'}", f"sqlite:///{tmp_path / 'target.db'}"
    make_warehouse(source)
    config = parse_config(
        {
            "source": source,
            "target": target,
            "tables": [
                {
                    "source": "customers",
                    "engine": "risk_test_half_copy",
                    "aid_columns": ["customer_id"],
                    "columns": {"email": "drop"},
                    "risk": {"quasi_identifiers": [["zip", "email"]]},
                }
            ],
        }
    )
    with pytest.raises(RiskError, match=r"table customers: .*\['zip', 'email'\] names \['email'\]"):
        run_table(config, "customers", salt=b"s")
    engine = sa.create_engine(target)
    assert not sa.inspect(engine).has_table("customers")  # nothing written
    engine.dispose()


@pytest.mark.mariadb
def test_report_from_mariadb(mariadb_url):
    customers, orders = make_warehouse(mariadb_url)
    try:
        check_report(mariadb_url, customers, orders)
    finally:  # the session's database is shared: leave no customers/orders for the next test
        engine = sa.create_engine(mariadb_url)
        with engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE IF EXISTS orders, customers")
        engine.dispose()


def test_a_summarys_shares_cannot_reveal_a_small_denominator():
    summary = {
        "distinct_values": 37.0,
        "distinct_ids": 37.0,
        "distinct_values_exact": True,
        "reidentification_potential": {"1": 24 / 37, "2": 1.0},
        "id_share": {"1": 24 / 37},
        "histogram": [{"ids": "1", "share_of_values": 24 / 37}, {"ids": "2", "share_of_values": 13 / 37}],
        "level": "identifying",
    }
    shown = coarse(summary)
    assert shown["distinct_values"] == 40 and shown["reidentification_potential"] == {"1": 0.65, "2": 1.0}
    assert shown["id_share"] == {"1": 0.65} and [b["share_of_values"] for b in shown["histogram"]] == [
        0.65,
        0.35,
    ]
    assert share_step(5_000) == 0.001 and share_step(150) == 0.01 and share_step(3) == 0.2


@pytest.mark.parametrize("denominator", [*range(1, 120), 123, 456, 999, 1_234])
def test_every_shown_share_fits_every_denominator_its_coarse_count_stands_for(denominator):
    # what the figures show (coarse count, rounded share) must not narrow the denominator further: every
    # denominator of the same coarse count, from 5 up, can produce the same shown share
    same_count = [b for b in range(5, 2 * denominator + 20) if coarse_count(b) == coarse_count(denominator)]
    producible = {
        other: {round_share(a / other, share_step(other)) for a in range(other + 1)} for other in same_count
    }
    step = share_step(denominator)
    for numerator in range(denominator + 1):
        shown = round_share(numerator / denominator, step)
        assert all(shown in shares for shares in producible.values()), (numerator, shown)
