"""Virtual keys in the YAML and the run plan they give, without a database."""

from __future__ import annotations

import pytest

from syndiffix_ops.config import ConfigError, OrphanPolicy, load_config, parse_config
from syndiffix_ops.run_plan import plan_run

BASE = {"source": "sqlite:///s.db", "target": "sqlite:///t.db"}


def test_yaml_keys_parse_with_yamls_null_as_the_null_policy(tmp_path):
    path = tmp_path / "linked.yaml"
    path.write_text(
        """
version: 1
source: sqlite:///s.db
target: sqlite:///t.db
constraints: copy
tables:
  - source: flights
    primary_key: [id]
    foreign_keys:
      - {columns: [tailnum], references: planes(tailnum), on_orphan: null}
      - {columns: [origin], references: "airports (faa)", on_orphan: drop, context: [alt], aggregates: [delay]}
  - source: planes
    primary_key: [tailnum]
  - source: airports
    unique: [[faa]]
  - source: weather
""",
        encoding="utf-8",
    )
    config = load_config(path)
    tailnum, origin = config.table("flights").foreign_keys
    assert (
        tailnum.on_orphan is OrphanPolicy.NULL
        and tailnum.parent == "planes"
        and tailnum.parent_columns == ["tailnum"]
    )
    assert origin.on_orphan is OrphanPolicy.DROP and origin.parent == "airports" and origin.context == ["alt"]
    plan = plan_run(config)
    (linked,) = plan.linked_sets
    assert linked.tables == ("planes", "airports", "flights")
    assert plan.single_tables == ("weather",)


@pytest.mark.parametrize(
    ("foreign_key", "message"),
    [
        ({"columns": ["a"], "references": "planes"}, "is not of the form table(column, ...)"),
        ({"columns": ["a", "b"], "references": "planes(x)"}, "2 column(s) ['a', 'b'] reference 1"),
        ({"columns": ["a"], "references": "planes(x)", "on_orphan": "keep"}, "on_orphan"),
        (
            {"columns": ["a"], "references": "ghosts(x)"},
            "references 'ghosts', which is not a configured table",
        ),
    ],
)
def test_a_bad_foreign_key_is_named(foreign_key, message):
    data = {**BASE, "tables": [{"source": "planes"}, {"source": "flights", "foreign_keys": [foreign_key]}]}
    with pytest.raises(ConfigError) as error:
        parse_config(data)
    assert message in str(error.value)


def test_key_columns_cannot_be_dropped_or_split_into_column_sets():
    dropped = {
        **BASE,
        "tables": [{"source": "planes", "primary_key": ["tailnum"], "columns": {"tailnum": "drop"}}],
    }
    with pytest.raises(ConfigError, match=r"key column\(s\) \['tailnum'\] have policy drop"):
        parse_config(dropped)
    split = {
        **BASE,
        "tables": [
            {"source": "planes", "primary_key": ["tailnum"], "column_sets": {"a": {"columns": ["year"]}}}
        ],
    }
    with pytest.raises(ConfigError, match="a table with keys cannot have column_sets"):
        parse_config(split)


def test_tables_joined_by_keys_form_one_set_parents_first_and_unrelated_tables_run_alone():
    data = {
        **BASE,
        "tables": [
            {"source": "lines", "foreign_keys": [{"columns": ["order_id"], "references": "orders(id)"}]},
            {
                "source": "orders",
                "foreign_keys": [{"columns": ["customer_id"], "references": "customers(id)"}],
            },
            {"source": "customers", "primary_key": ["id"]},
            {"source": "ledger", "primary_key": ["id"]},
            {"source": "weather"},
        ],
    }
    plan = plan_run(parse_config(data))
    assert [s.tables for s in plan.linked_sets] == [("customers", "orders", "lines"), ("ledger",)]
    assert plan.single_tables == ("weather",)


def test_each_set_the_keys_form_is_one_mapped_task_instance_and_every_other_output_one_of_its_own():
    """The DAG's mapped task expands over the run plan: the source's keys join YAML-declared and
    undeclared tables into one set, which is one instance (its first table a parent); each table outside
    the sets is one instance per column set."""
    from syndiffix_ops.airflow.dag_factory import task_kwargs
    from syndiffix_ops.warehouse.keys import DeclaredForeignKey, DeclaredKeys

    data = {
        **BASE,
        "tables": [
            {"source": "payments", "column_sets": {"a": {"columns": ["x"]}, "b": {"columns": ["y"]}}},
            {
                "source": "orders",
                "foreign_keys": [{"columns": ["customer_id"], "references": "customers(id)"}],
            },
            {"source": "customers", "primary_key": ["id"]},
            {"source": "regions"},
            {"source": "stores"},
            {"source": "ledger", "primary_key": ["id"]},
        ],
    }
    config = parse_config(data)
    none = DeclaredKeys((), (), (), frozenset())

    def declared(table):  # payments -> orders, customers -> regions, stores -> regions (the source's keys)
        parent = {"payments": "orders", "customers": "regions", "stores": "regions"}.get(table.table_name)
        if parent is None:
            return none
        return DeclaredKeys(
            ("id",), (), (DeclaredForeignKey(("parent_id",), None, parent, ("id",)),), frozenset()
        )

    yaml_only = task_kwargs(config, plan_run(config))
    assert yaml_only == [
        {"table": "payments", "column_set": "a", "linked_set": []},
        {"table": "payments", "column_set": "b", "linked_set": []},
        {"table": "customers", "column_set": None, "linked_set": ["customers", "orders"]},
        {"table": "regions", "column_set": None, "linked_set": []},
        {"table": "stores", "column_set": None, "linked_set": []},
        {"table": "ledger", "column_set": None, "linked_set": ["ledger"]},
    ]
    instances = task_kwargs(config, plan_run(config, declared))
    assert instances == [
        {
            "table": "regions",
            "column_set": None,
            "linked_set": ["regions", "customers", "stores", "orders", "payments"],
        },
        {"table": "ledger", "column_set": None, "linked_set": ["ledger"]},
    ]


def test_a_set_runs_in_steps_parent_by_parent_unless_its_keys_form_a_cycle():
    """customers -> orders -> lines run one table at a time, each after its parents (a self-reference
    stays within its table's step); employees <-> departments, a cycle broken at a nullable key, links
    a table to a parent synthesized after it, so that set runs in one step."""
    data = {
        **BASE,
        "tables": [
            {"source": "lines", "foreign_keys": [{"columns": ["order_id"], "references": "orders(id)"}]},
            {
                "source": "orders",
                "foreign_keys": [
                    {"columns": ["customer_id"], "references": "customers(id)"},
                    {"columns": ["previous_id"], "references": "orders(id)"},
                ],
            },
            {"source": "customers", "primary_key": ["id"]},
            {
                "source": "employees",
                "foreign_keys": [{"columns": ["dept_id"], "references": "departments(id)"}],
            },
            {
                "source": "departments",
                "foreign_keys": [{"columns": ["head_id"], "references": "employees(id)"}],
            },
        ],
    }
    acyclic, cycle = plan_run(parse_config(data)).linked_sets
    assert acyclic.tables == ("customers", "orders", "lines")
    assert [acyclic.parents(t) for t in acyclic.tables] == [(), ("customers",), ("orders",)]
    assert acyclic.runs_in_steps
    assert set(cycle.tables) == {"employees", "departments"} and not cycle.runs_in_steps
