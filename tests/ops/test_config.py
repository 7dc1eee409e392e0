"""The YAML config: what is accepted, what is refused, and how refusals are worded."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from syndiffix_ops.config import (
    ColumnPolicy,
    ConfigError,
    SchemaChangePolicy,
    WriteMode,
    interpolate_env,
    load_config,
)
from syndiffix_ops.engines import SyndiffixParams


def write(tmp_path: Path, text: str, name: str = "pipeline.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return path


GOOD = """
source: postgresql+psycopg://reader:${SRC_PASSWORD}@db.internal:5432/sales
target: postgresql+psycopg://writer@dw.internal:5432/analytics  # a SQLite target has no target_schema
target_schema: synthetic
report_dir: reports
dag:
  schedule: "@daily"
  start_date: 2024-01-01
  tags: [synthetic]
  default_args: {retries: 2}
  pool: synth
defaults:
  mode: append
  max_rows: 5000000
  engine_params:
    anonymization: {low_threshold: 4}
    bucketization: {range_low_threshold: 20}
tables:
  - source: sales.orders
    aid_columns: [customer_id]
    columns: {notes: drop}
    mode: replace
    engine_params:
      anonymization: {layer_sd: 1.5}
    column_sets:
      money: {columns: [amount, currency]}
      when: {columns: [created_at], target: orders_by_time}
  - name: people
    source: people
    target: people_synth
    columns: [age, city]
    where: "country = 'NL'"
    on_schema_change: ignore
"""


def test_a_good_config_loads_with_defaults_applied_in_the_documented_order(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    orders, people = config.tables
    assert config.report_dir == tmp_path / "reports"
    assert config.dag.schedule == "@daily" and config.dag.default_args == {"retries": 2}

    effective = config.effective(orders)
    assert effective.mode is WriteMode.REPLACE  # table beats defaults
    assert effective.max_rows == 5_000_000  # inherited from defaults
    assert effective.on_schema_change is SchemaChangePolicy.FAIL  # built-in default
    assert effective.salt_env == "SYNDIFFIX_SALT"
    assert isinstance(effective.engine_params, SyndiffixParams)
    # engine_params are deep-merged: the table's layer_sd joins the defaults' low_threshold
    assert effective.engine_params.anonymization.low_threshold == 4
    assert effective.engine_params.anonymization.layer_sd == 1.5
    assert effective.engine_params.bucketization.range_low_threshold == 20
    assert orders.output_targets() == {"money": "orders_money", "when": "orders_by_time"}
    assert effective.other_columns is ColumnPolicy.SYNTHESIZE

    people_effective = config.effective(people)
    assert people.display_name == "people"
    assert people.output_targets() == {None: "people_synth"}
    assert people_effective.mode is WriteMode.APPEND
    # the list form of columns means "exactly these columns"
    assert people_effective.other_columns is ColumnPolicy.DROP
    assert people.column_policies == {"age": ColumnPolicy.SYNTHESIZE, "city": ColumnPolicy.SYNTHESIZE}
    assert config.table("people") is people and config.table("sales.orders") is orders


def test_urls_interpolate_environment_variables_only_when_a_connection_is_made(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    assert "${SRC_PASSWORD}" in config.source  # the secret is not resolved (or kept) at load time
    url = config.source_url(environ={"SRC_PASSWORD": "s3cret"})
    assert url == "postgresql+psycopg://reader:s3cret@db.internal:5432/sales"
    with pytest.raises(ConfigError, match=r"source: environment variable\(s\) SRC_PASSWORD not set"):
        config.source_url(environ={})


def test_a_url_taken_whole_from_one_variable_is_checked_when_resolved(tmp_path):
    config = load_config(
        write(
            tmp_path,
            GOOD.replace(
                "postgresql+psycopg://reader:${SRC_PASSWORD}@db.internal:5432/sales", "${SOURCE_URL}"
            ),
        )
    )
    assert config.source == "${SOURCE_URL}"
    assert config.source_url(environ={"SOURCE_URL": "sqlite:///x.db"}) == "sqlite:///x.db"
    with pytest.raises(
        ConfigError, match=r"source: \$\{SOURCE_URL\} does not hold a SQLAlchemy URL"
    ) as error:
        config.source_url(environ={"SOURCE_URL": "hunter2-not-a-url"})
    assert "hunter2" not in str(error.value)


def test_interpolation_replaces_every_reference():
    assert interpolate_env("${A}-${B}-${A}", what="x", environ={"A": "1", "B": "2"}) == "1-2-1"


def test_the_config_hash_follows_content_not_formatting(tmp_path):
    first = load_config(write(tmp_path, GOOD, "a.yaml"))
    reformatted = load_config(write(tmp_path, GOOD.replace("{retries: 2}", "\n    retries: 2"), "b.yaml"))
    changed = load_config(write(tmp_path, GOOD.replace("layer_sd: 1.5", "layer_sd: 2.5"), "c.yaml"))
    assert first.config_hash() == reformatted.config_hash()
    assert first.config_hash() != changed.config_hash()


def test_every_problem_is_listed_with_file_line_table_and_field(tmp_path):
    path = write(
        tmp_path,
        """
        source: postgresql+psycopg://u@db/src
        target: sqlite:///out.db
        tables:
          - source: public.orders
            aid_columns: [customer_id]
            colums: [a]
          - name: people
            source: hr.people
            engine_params:
              anonymization: {low_threshold: 0, bogus: 1}
            mode: overwrite
          - source: a.b.c
          - source: fine.table
            engine: nope
          - source: good.table
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    problems = caught.value.problems
    expected = [
        f"{path}:6: tables[0] (public.orders) -> colums: unknown key",
        f"{path}:11: tables[1] (people) -> mode: Input should be 'replace' or 'append'",
        f"{path}:10: tables[1] (people) -> engine_params.anonymization.low_threshold: Input should be greater",
        f"{path}:10: tables[1] (people) -> engine_params.anonymization.bogus: unknown key",
        f"{path}:12: tables[2] (a.b.c) -> source: 'a.b.c' is not of the form schema.table",
        f"{path}:14: tables[3] (fine.table) -> engine: unknown engine 'nope'",
    ]
    for prefix in expected:
        assert any(p.startswith(prefix) for p in problems), (prefix, problems)
    assert len(problems) == len(expected)
    assert all(prefix.split(" -> ")[0] in str(caught.value) for prefix in expected)


def test_a_salt_in_the_file_is_refused_wherever_it_appears_and_never_echoed(tmp_path):
    path = write(
        tmp_path,
        """
        source: sqlite:///a.db
        target: sqlite:///b.db
        salt: hunter2-top-secret
        defaults:
          salt: hunter2-top-secret
        tables:
          - source: t
            salt: hunter2-top-secret
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert f"{path}:3: salt: the salt is a secret" in message
    assert f"{path}:5: defaults.salt: the salt is a secret" in message
    assert f"{path}:8: tables[0] (t) -> salt: the salt is a secret" in message
    assert "hunter2" not in message


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ("source: sqlite:///a.db\ntables: [{source: t}]\n", "target: give either target"),
        (
            "source: sqlite:///a.db\nsource_conn_id: src\ntarget: sqlite:///b.db\ntables: [{source: t}]\n",
            "source: give source or source_conn_id, not both",
        ),
        (
            "source: 'not a url'\ntarget: sqlite:///b.db\ntables: [{source: t}]\n",
            "source: not a SQLAlchemy URL",
        ),
        (
            "source: sqlite:///a.db\ntarget: sqlite:///b.db\ntables: []\n",
            "tables: List should have at least 1",
        ),
        (
            "source: sqlite:///a.db\ntarget: sqlite:///b.db\ntables: [{source: t}, {source: s.t}]\n",
            "target table 't' is written by more than one output",
        ),
        (
            "source: sqlite:///a.db\ntarget: sqlite:///b.db\ntables:\n"
            "  - {source: t, aid_columns: [id], columns: {id: drop}}\n",
            "tables[0] (t) -> (table entry): AID column 'id' has policy drop",
        ),
        (
            "source: sqlite:///a.db\ntarget: sqlite:///b.db\ntables:\n"
            "  - {source: t, columns: [a, b], column_sets: {s: {columns: [a, c]}}}\n",
            "column set 's' lists column 'c', which is dropped",
        ),
        (
            "source: sqlite:///a.db\ntarget: sqlite:///b.db\nsalt_env: 'bad-name'\ntables: [{source: t}]\n",
            "salt_env: 'bad-name' is not a valid environment variable name",
        ),
        (
            "source: sqlite:///a.db\ntarget: sqlite:///b.db\ndefaults: {max_rows: 0}\ntables: [{source: t}]\n",
            "defaults.max_rows: Input should be greater than 0",
        ),
        ("- just\n- a list\n", "the config must be a mapping"),
        ("source: [unclosed\n", "not valid YAML"),
    ],
)
def test_bad_configs_name_the_field_at_fault(tmp_path, snippet, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(snippet, encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(path) in str(caught.value)
    assert expected in str(caught.value)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "absent.yaml")


def test_connection_ids_are_left_to_the_airflow_shell(tmp_path):
    config = load_config(
        write(tmp_path, "source_conn_id: warehouse\ntarget_conn_id: synth\ntables: [{source: s.t}]\n")
    )
    assert config.source_conn_id == "warehouse"
    with pytest.raises(
        ConfigError, match="source_conn_id='warehouse', which only the Airflow operator resolves"
    ):
        config.source_url()


def test_asking_for_an_unknown_table_lists_the_known_ones(tmp_path):
    config = load_config(write(tmp_path, GOOD))
    with pytest.raises(ConfigError, match=r"no table named 'nope' \(tables: sales.orders|orders, people\)"):
        config.table("nope")


def test_validating_a_config_does_not_import_the_engine(tmp_path):
    import subprocess
    import sys

    path = write(tmp_path, GOOD)
    code = (
        "import sys; from syndiffix_ops.config import load_config; "
        f"load_config({str(path)!r}); "
        "print(sorted(m for m in sys.modules if m.startswith('syndiffix_core')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_engine_params_become_the_engines_own_parameter_objects_with_only_set_fields_changed():
    from syndiffix_core import params as core
    from syndiffix_ops.engines import _core_params

    params = SyndiffixParams.model_validate(
        {
            "anonymization": {"low_threshold": 4, "outlier_count": [3, 6]},
            "bucketization": {"range_low_threshold": 30},
            "clustering": {"enabled": False, "main_features": ["a"]},
            "target_column": "a",
        }
    )
    converted = _core_params(params)
    assert converted["anonymization"] == core.AnonymizationParams(
        low_count_params=core.SuppressionParams(low_threshold=4), outlier_count=core.FlatteningInterval(3, 6)
    )
    assert converted["bucketization"] == core.BucketizationParams(range_low_threshold=30)
    assert converted["clustering"] == core.ClusteringParams(enabled=False, main_features=("a",))
    assert converted["target_column"] == "a"
    assert _core_params(SyndiffixParams()) == dict.fromkeys(
        ["anonymization", "bucketization", "clustering", "target_column", "workers"]
    )


def test_an_inverted_flattening_interval_is_refused_at_validation():
    with pytest.raises(ValueError, match=r"must be \[lower, upper\] with 1 <= lower <= upper, got \[5, 2\]"):
        SyndiffixParams.model_validate({"anonymization": {"top_count": [5, 2]}})


def test_the_example_in_docs_config_md_is_a_valid_config(tmp_path):
    docs = Path(__file__).resolve().parents[2] / "docs" / "config.md"
    example = docs.read_text(encoding="utf-8").split("```yaml\n", 1)[1].split("```", 1)[0]
    config = load_config(write(tmp_path, example))
    assert [t.display_name for t in config.tables] == ["orders", "people"]
    assert config.table("people").output_targets() == {
        "demographics": "people_demographics",
        "pay": "people_salary",
    }


def test_a_tables_quality_block_overrides_only_the_keys_it_sets(tmp_path):
    config = load_config(
        write(
            tmp_path,
            """
            source: sqlite:///source.db
            target: sqlite:///target.db
            quality: {column_tvd: 0.08, fail_below_score: 90}
            tables:
              - source: flights
                quality: {column_tvd: 0.2, fail_on_attention: true}
              - source: airports
            """,
        )
    )
    flights, airports = (config.effective(table).quality for table in config.tables)
    # the table's keys win; the keys it leaves out keep the top-level value, not the built-in default
    assert (flights.column_tvd, flights.fail_on_attention, flights.fail_below_score) == (0.2, True, 90)
    assert flights.pair_tvd == airports.pair_tvd == 0.15
    assert (airports.column_tvd, airports.fail_on_attention, airports.fail_below_score) == (0.08, False, 90)


def test_a_wrong_per_table_quality_key_is_one_line_naming_its_config_line(tmp_path):
    path = write(
        tmp_path,
        """
        source: sqlite:///source.db
        target: sqlite:///target.db
        tables:
          - source: flights
            quality:
              column_tvd: 2
              pair_tdv: 0.1
        """,
    )
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.problems == [
        f"{path}:6: tables[0] (flights) -> quality.column_tvd: Input should be less than or equal to 1",
        f"{path}:7: tables[0] (flights) -> quality.pair_tdv: unknown key (check the spelling; see docs/config.md)",
    ]
