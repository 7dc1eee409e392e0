"""Linked sets end to end on real databases: keys from the source or the YAML, one atomic write per set,
constraints copied, lineage recording the set, and the keys joining with the source's SQL."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import uuid

import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa

from syndiffix_ops.config import ConfigError, DpBudgetConfig, QualityConfig, parse_config
from syndiffix_ops.lineage import LINEAGE_TABLE
from syndiffix_ops.linked_pipeline import run_linked_set
from syndiffix_ops.run_errors import DpBudgetError, PipelineError, QualityGateError
from syndiffix_ops.run_plan import database_key_reader, plan_run
from syndiffix_ops.warehouse import TargetColumn, value_kind
from syndiffix_ops.warehouse.identifiers import derived_name
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX
from syndiffix_ops.warehouse.write_set import ForeignKeyConstraint, TableWrite, write_linked_tables

SALT = b"linked pipeline test salt"


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def linked_db(request, tmp_path):
    """(engine, schema): source and target in one database (MariaDB: a database of its own, as other
    tests of the session write tables named orders there)."""
    if request.param == "sqlite":
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}")
        yield engine, None
    elif request.param == "mariadb":
        server = sa.create_engine(request.getfixturevalue("mariadb_url"))
        database = f"{server.url.database}_linked_{uuid.uuid4().hex[:6]}"
        with server.begin() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE `{database}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        engine = sa.create_engine(server.url.set(database=database))
        yield engine, None
        engine.dispose()
        with server.begin() as conn:
            conn.exec_driver_sql(f"DROP DATABASE `{database}`")
        server.dispose()
        return
    else:
        engine = sa.create_engine(request.getfixturevalue("pg_url"))
        schema = f"linked {uuid.uuid4().hex[:8]}"
        with engine.begin() as conn:
            conn.execute(sa.schema.CreateSchema(schema))
        yield engine, schema
    engine.dispose()


RISK_TITLE = "Re-identification risk (KHLL)"


def _q(engine: sa.Engine, schema: str | None, name: str) -> str:
    preparer = engine.dialect.identifier_preparer
    return f"{preparer.quote_schema(schema)}.{preparer.quote(name)}" if schema else preparer.quote(name)


def _make_source(engine: sa.Engine, schema: str | None, *, declare_keys: bool) -> None:
    rng = np.random.default_rng(7)
    customers = 600
    age = rng.integers(18, 90, customers)
    per_customer = rng.poisson(1 + age / 15)
    owner = np.repeat(np.arange(customers) + 1, per_customer)
    metadata = sa.MetaData(schema=schema)
    key = {"primary_key": True} if declare_keys else {}
    parent = sa.Table(
        "customers",
        metadata,
        sa.Column("customer_id", sa.Integer, nullable=False, **key),
        sa.Column("age", sa.Integer, nullable=False),
        sa.Column("segment", sa.String(8)),
    )
    reference = [sa.ForeignKey(parent.c.customer_id)] if declare_keys else []
    child = sa.Table(
        "orders",
        metadata,
        sa.Column("order_id", sa.Integer, nullable=False, **key),
        sa.Column("customer_id", sa.Integer, *reference, nullable=False),
        sa.Column("amount", sa.Float),
    )
    with engine.begin() as conn:
        metadata.create_all(conn)
        conn.execute(
            parent.insert(),
            [
                {"customer_id": i + 1, "age": int(a), "segment": str(s)}
                for i, (a, s) in enumerate(
                    zip(age, rng.choice(["gold", "silver", "bronze"], customers), strict=True)
                )
            ],
        )
        amounts = rng.gamma(2.0, 10 + np.repeat(age, per_customer) / 3)
        conn.execute(
            child.insert(),
            [
                {"order_id": i + 1, "customer_id": int(o), "amount": float(a)}
                for i, (o, a) in enumerate(zip(owner, amounts, strict=True))
            ],
        )


def _config(engine: sa.Engine, schema: str | None, *, virtual_keys: bool, constraints: str = "copy"):
    url = engine.url.render_as_string(hide_password=False)
    prefix = f"{schema}." if schema else ""
    customers = {"source": f"{prefix}customers", "target": "customers_synth"}
    orders = {"source": f"{prefix}orders", "target": "orders_synth"}
    if virtual_keys:
        customers["primary_key"] = ["customer_id"]
        orders["primary_key"] = ["order_id"]
        orders["foreign_keys"] = [
            {"columns": ["customer_id"], "references": "customers_synth(customer_id)", "on_orphan": None}
        ]
    data = {"source": url, "target": url, "constraints": constraints, "tables": [customers, orders]}
    if schema:
        data["target_schema"] = schema
    return parse_config(data)


def _linked_set(config, engine):
    plan = plan_run(config, database_key_reader(engine))
    assert len(plan.linked_sets) == 1 and plan.single_tables == ()
    return plan.linked_sets[0]


def _frame(engine, schema, name) -> pd.DataFrame:
    with engine.connect() as conn:
        return pd.read_sql(sa.text(f"SELECT * FROM {_q(engine, schema, name)}"), conn)


def _lineage(engine, schema) -> pd.DataFrame:
    with engine.connect() as conn:
        return pd.read_sql(
            sa.text(f"SELECT run_id, target_table, parameters FROM {_q(engine, schema, LINEAGE_TABLE)}"), conn
        )


@pytest.mark.parametrize("virtual_keys", [False, True], ids=["database keys", "yaml keys"])
def test_a_linked_set_joins_with_the_sources_sql_and_keeps_its_keys(linked_db, virtual_keys, tmp_path):
    engine, schema = linked_db
    _make_source(engine, schema, declare_keys=not virtual_keys)
    config = _config(engine, schema, virtual_keys=virtual_keys)
    linked_set = _linked_set(config, engine)
    assert linked_set.tables == ("customers_synth", "orders_synth")

    results = run_linked_set(config, linked_set, salt=SALT, run_id="first", report_dir=tmp_path / "reports")
    assert "Links of orders_synth" in results[1].report_path.read_text(encoding="utf-8")
    for result in results:  # each member's risk figures, computed in a child beside the quality figures
        assert set(result.risk["output"]["reproduction"]) and result.risk["source"]["column_sets"]
        assert RISK_TITLE in result.report_path.read_text(encoding="utf-8")
    assert [r.target_table.split(".")[-1] for r in results] == ["customers_synth", "orders_synth"]
    customers, orders = _frame(engine, schema, "customers_synth"), _frame(engine, schema, "orders_synth")
    assert customers.customer_id.is_unique and orders.order_id.is_unique
    join = (
        f"SELECT count(*) FROM {_q(engine, schema, 'orders_synth')} o "
        f"JOIN {_q(engine, schema, 'customers_synth')} c ON o.customer_id = c.customer_id"
    )
    with engine.connect() as conn:
        assert conn.exec_driver_sql(join).scalar_one() == len(orders) > 0
    source_ids = set(_frame(engine, schema, "customers").customer_id)
    assert len(source_ids & set(customers.customer_id)) <= 2  # fresh keys: only chance coincidences

    inspector = sa.inspect(engine)
    assert inspector.get_pk_constraint("orders_synth", schema=schema)["constrained_columns"] == ["order_id"]
    (fk,) = inspector.get_foreign_keys("orders_synth", schema=schema)
    assert (fk["constrained_columns"], fk["referred_table"]) == (["customer_id"], "customers_synth")
    if engine.dialect.name == "sqlite":
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA foreign_key_check").fetchall() == []

    lineage = _lineage(engine, schema)
    assert sorted(lineage.target_table) == ["customers_synth", "orders_synth"]
    recorded = lineage.parameters.iloc[0]
    recorded = recorded if isinstance(recorded, dict) else json.loads(recorded)
    assert recorded["linked_set"]["tables"] == ["customers_synth", "orders_synth"]
    assert (
        recorded["linked_set"]["keys"]["orders_synth"]["foreign_keys"][0]["references"]
        == "customers_synth(customer_id)"
    )
    links = results[1].metrics["links"]["foreign_keys"]["(customer_id) -> customers_synth(customer_id)"]
    assert links["valid_share"] == 1.0
    # 600 customers: measurable; a customer's age drives its number of orders and their amounts
    assert links["correlations_note"] is None
    pairs = {(p["parent_column"], p["child_aggregate"]) for p in links["correlations"][:2]}
    assert pairs == {("age", "children"), ("age", "mean amount")}
    assert results[0].metrics["links"]["key_values_in_source"]["customer_id"] < 0.01


def _first_set(engine, schema):
    """Write the set once (run "first"): (config, linked set, what a failed later run must leave)."""
    _make_source(engine, schema, declare_keys=True)
    config = _config(engine, schema, virtual_keys=False)
    linked_set = _linked_set(config, engine)
    run_linked_set(config, linked_set, salt=SALT, run_id="first")
    previous = (
        [_frame(engine, schema, t) for t in ("customers_synth", "orders_synth")],
        _lineage(engine, schema),
    )
    return config, linked_set, previous


def _assert_unchanged(engine, schema, previous) -> None:
    """The previous set and its lineage are as they were, and no staging or old table is left."""
    frames, lineage = previous
    for name, frame in zip(("customers_synth", "orders_synth"), frames, strict=True):
        pd.testing.assert_frame_equal(_frame(engine, schema, name), frame)
    pd.testing.assert_frame_equal(_lineage(engine, schema), lineage)
    tables = sa.inspect(engine).get_table_names(schema=schema)
    assert not [t for t in tables if t.startswith((STAGING_PREFIX, OLD_PREFIX))]


def test_a_failure_while_writing_the_set_leaves_every_previous_table_and_lineage(linked_db):
    engine, schema = linked_db
    config, linked_set, previous = _first_set(engine, schema)
    with engine.begin() as conn:  # the database refuses the second run's lineage: after both swaps
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql(
                f"CREATE TRIGGER refuse BEFORE INSERT ON {LINEAGE_TABLE} WHEN NEW.run_id = 'second' "
                "BEGIN SELECT RAISE(ABORT, 'lineage refused'); END"
            )
        else:
            conn.exec_driver_sql(
                f"ALTER TABLE {_q(engine, schema, LINEAGE_TABLE)} ADD CONSTRAINT refuse CHECK (run_id <> 'second')"
            )

    with pytest.raises(sa.exc.DBAPIError):
        run_linked_set(config, linked_set, salt=b"another salt", run_id="second")
    _assert_unchanged(engine, schema, previous)


def test_a_set_failing_mid_write_leaves_the_previous_set_as_it_was(linked_db):
    """The second table of a set breaks its primary key while it is staged, after the first table is
    staged (and, on MySQL/MariaDB, committed): the previous set stays, no helper table is left."""
    engine, schema = linked_db
    _, _, previous = _first_set(engine, schema)
    columns = {
        name: [
            TargetColumn(c["name"], c["type"], value_kind(c["type"]))
            for c in sa.inspect(engine).get_columns(name, schema=schema)
        ]
        for name in ("customers_synth", "orders_synth")
    }
    parents = pd.DataFrame({"customer_id": [1, 2, 3], "age": [30, 40, 50], "segment": ["a", "b", "c"]})
    children = pd.DataFrame({"order_id": [7, 7], "customer_id": [1, 2], "amount": [1.0, 2.0]})
    writes = [
        TableWrite(
            "customers_synth", columns["customers_synth"], parents, engine.dialect.name, ("customer_id",)
        ),
        TableWrite(
            "orders_synth",
            columns["orders_synth"],
            children,
            engine.dialect.name,
            ("order_id",),
            foreign_keys=(ForeignKeyConstraint(("customer_id",), "customers_synth", ("customer_id",)),),
        ),
    ]
    recorded = []
    with pytest.raises(sa.exc.IntegrityError):
        write_linked_tables(
            engine, schema=schema, tables=writes, constraints=True, before_commit=recorded.append
        )
    assert recorded == []
    _assert_unchanged(engine, schema, previous)


def test_a_cycle_of_not_null_keys_is_refused_naming_it(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'cycle.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE a (id INTEGER PRIMARY KEY, b_id INTEGER NOT NULL REFERENCES b(id), x REAL)"
        )
        conn.exec_driver_sql(
            "CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER NOT NULL REFERENCES a(id), y REAL)"
        )
        conn.exec_driver_sql("CREATE TABLE c (id INTEGER PRIMARY KEY, c_id INTEGER REFERENCES c(id), z REAL)")
    url, target = str(engine.url), f"sqlite:///{tmp_path / 'target.db'}"
    config = parse_config({"source": url, "target": target, "tables": [{"source": "a"}, {"source": "b"}]})
    with pytest.raises(
        ConfigError, match=r"the foreign keys a -> b -> a form a cycle and none of them is nullable"
    ):
        plan_run(config, database_key_reader(engine))
    nullable_self_reference = parse_config({"source": url, "target": target, "tables": [{"source": "c"}]})
    (linked,) = plan_run(nullable_self_reference, database_key_reader(engine)).linked_sets
    assert linked.tables == ("c",) and linked.keys["c"].foreign_keys[0].parent == "c"
    engine.dispose()


def test_the_cli_runs_a_linked_set_once_even_when_one_of_its_tables_is_named(tmp_path):
    from syndiffix_ops.cli import run_tables

    engine = sa.create_engine(f"sqlite:///{tmp_path / 'source.db'}")
    _make_source(engine, None, declare_keys=True)
    target = f"sqlite:///{tmp_path / 'target.db'}"
    config = parse_config(
        {
            "source": str(engine.url),
            "target": target,
            "tables": [{"source": "customers"}, {"source": "orders"}],
        }
    )
    outcomes = run_tables(config, [config.table("orders")], salt=SALT)
    assert [(o.name, o.error) for o in outcomes] == [("linked set customers, orders", None)]
    assert [r.target_table for r in outcomes[0].results] == ["customers", "orders"]
    dry = run_tables(config, list(config.tables), salt=SALT, dry_run=True)
    assert [r.status for r in dry[0].results] == ["dry_run", "dry_run"]
    engine.dispose()


def test_a_members_own_quality_gate_stops_the_whole_set(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'warehouse.db'}")
    _make_source(engine, None, declare_keys=True)
    config = _config(engine, None, virtual_keys=False)
    orders = config.tables[1].model_copy(update={"quality": QualityConfig(fail_below_score=99.99)})
    config = config.model_copy(update={"tables": [config.tables[0], orders]})
    with pytest.raises(
        QualityGateError, match="table orders_synth of linked set .*below quality.fail_below_score"
    ):
        run_linked_set(config, _linked_set(config, engine), salt=SALT, report_dir=tmp_path / "r")
    assert not sa.inspect(engine).has_table("customers_synth")  # the parent, which passed, is not written
    assert not sa.inspect(engine).has_table("orders_synth")
    assert list((tmp_path / "r" / "orders_synth").glob("*.html"))  # the reviewer sees why
    with engine.connect() as conn:  # the auditor sees the attempt: a failed row per table of the set
        failed = conn.exec_driver_sql(
            f"SELECT target_table, status, error_class, error_stage, synthetic_rows FROM {LINEAGE_TABLE}"
        ).all()
    assert sorted(failed) == [
        (target, "failed", "syndiffix_ops.run_errors.QualityGateError", "quality", 0)
        for target in ("customers_synth", "orders_synth")
    ]
    engine.dispose()


def _uuid_key_types(dialect: str) -> tuple[sa.types.TypeEngine, sa.types.TypeEngine]:
    """(customers' key type, orders' key type) as a source on `dialect` would declare UUID keys."""
    if dialect == "postgresql":
        return sa.Uuid(), sa.Uuid()
    if dialect == "mariadb":
        return sa.BINARY(16), sa.UUID()  # 16 bytes, and MariaDB's own uuid type
    return sa.CHAR(36), sa.CHAR(36)


def test_uuid_keys_get_fresh_uuids_of_the_sources_type_and_still_join(linked_db):
    engine, schema = linked_db
    customer_key, order_key = _uuid_key_types(engine.dialect.name)
    rng = np.random.default_rng(11)
    metadata = sa.MetaData(schema=schema)
    customers = sa.Table(
        "customers",
        metadata,
        sa.Column("customer_id", customer_key, primary_key=True),
        sa.Column("age", sa.Integer, nullable=False),
    )
    orders = sa.Table(
        "orders",
        metadata,
        sa.Column("order_id", order_key, primary_key=True),
        sa.Column("customer_id", customer_key, sa.ForeignKey(customers.c.customer_id)),
        sa.Column("amount", sa.Float),
    )
    ids = [uuid.UUID(int=int(rng.integers(1, 2**62)) << 64 | n) for n in range(400)]

    def stored(key: uuid.UUID, sql_type):
        return (
            key.bytes
            if isinstance(sql_type, sa.BINARY)
            else str(key)
            if isinstance(sql_type, sa.CHAR)
            else key
        )

    with engine.begin() as conn:
        metadata.create_all(conn)
        conn.execute(
            customers.insert(),
            [
                {"customer_id": stored(k, customer_key), "age": int(a)}
                for k, a in zip(ids, rng.integers(18, 90, 400), strict=True)
            ],
        )
        owners = rng.integers(0, 400, 1500)
        conn.execute(
            orders.insert(),
            [
                {
                    "order_id": stored(uuid.uuid4(), order_key),
                    "customer_id": stored(ids[o], customer_key),
                    "amount": float(a),
                }
                for o, a in zip(owners, rng.gamma(2.0, 10.0, 1500), strict=True)
            ],
        )
    config = _config(engine, schema, virtual_keys=False)
    run_linked_set(config, _linked_set(config, engine), salt=SALT)

    inspector = sa.inspect(engine)
    for table in ("customers", "orders"):
        source_types = {c["name"]: repr(c["type"]) for c in inspector.get_columns(table, schema=schema)}
        synthetic = {
            c["name"]: repr(c["type"]) for c in inspector.get_columns(f"{table}_synth", schema=schema)
        }
        assert synthetic == source_types  # uuid stays uuid, BINARY(16) and CHAR(36) stay as declared
    source_keys = {str(k) for k in ids}
    with engine.connect() as conn:
        parents = [
            _as_uuid(v)
            for v in conn.execute(
                sa.select(
                    sa.Table(
                        "customers_synth", sa.MetaData(), schema=schema, autoload_with=conn
                    ).c.customer_id
                )
            ).scalars()
        ]
        children = conn.execute(
            sa.select(
                sa.Table("orders_synth", sa.MetaData(), schema=schema, autoload_with=conn).c[
                    "order_id", "customer_id"
                ]
            )
        ).all()
    assert len(set(parents)) == len(parents) > 0 and all(p.version == 4 for p in parents)
    assert not source_keys & {str(p) for p in parents}  # fresh keys, never the source's
    order_ids = [_as_uuid(o) for o, _ in children]
    assert len(set(order_ids)) == len(order_ids) > 0
    references = {_as_uuid(c) for _, c in children if c is not None}
    assert references and references <= set(parents)  # every order's customer exists


def _as_uuid(value) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    return uuid.UUID(bytes=value) if isinstance(value, bytes) else uuid.UUID(str(value))


def test_a_self_reference_is_copied_and_what_an_interrupted_write_left_is_dropped(linked_db):
    """patients.case_id -> patients.patient_id with constraints: copy: the target's key references its
    own table and holds on every row (added after the rows, or checked as they go in). Helper tables a
    crashed write of the same target left behind on MySQL/MariaDB are dropped by the next write."""
    engine, schema = linked_db
    rng = np.random.default_rng(4)
    metadata = sa.MetaData(schema=schema)
    patients = sa.Table(
        "patients",
        metadata,
        sa.Column("patient_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column(
            "case_id",
            sa.Integer,
            sa.ForeignKey("patients.patient_id" if not schema else f"{schema}.patients.patient_id"),
        ),
        sa.Column("age", sa.Integer, nullable=False),
    )
    rows = 800
    case = np.where(rng.random(rows) < 0.4, rng.integers(1, rows + 1, rows), 0)
    with engine.begin() as conn:
        metadata.create_all(conn)
        conn.execute(
            patients.insert(),
            [
                {"patient_id": i + 1, "case_id": None, "age": int(a)}
                for i, a in enumerate(rng.integers(1, 95, rows))
            ],
        )
        for i in np.flatnonzero(case):
            conn.execute(
                patients.update().where(patients.c.patient_id == int(i + 1)).values(case_id=int(case[i]))
            )
    # a staging table as a write killed mid-set leaves it on MySQL/MariaDB (elsewhere a rollback undoes it)
    leftover = derived_name(STAGING_PREFIX, "patients_synth", "crashed0000000000")
    by_rename = engine.dialect.name in ("mysql", "mariadb")
    if by_rename:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE TABLE {_q(engine, schema, leftover)} (x INTEGER)")
    url = engine.url.render_as_string(hide_password=False)
    prefix = f"{schema}." if schema else ""
    config = parse_config(
        {
            "source": url,
            "target": url,
            "constraints": "copy",
            **({"target_schema": schema} if schema else {}),
            "tables": [{"source": f"{prefix}patients", "target": "patients_synth"}],
        }
    )
    (linked_set,) = plan_run(config, database_key_reader(engine)).linked_sets
    run_linked_set(config, linked_set, salt=SALT)

    if engine.dialect.name == "sqlite":  # SQLAlchemy's SQLite reflection misses a renamed self-reference
        with contextlib.closing(sqlite3.connect(engine.url.database)) as conn:
            (key,) = conn.execute("PRAGMA foreign_key_list(patients_synth)").fetchall()
        assert (key[3], key[2], key[4]) == ("case_id", "patients_synth", "patient_id")
    else:
        (fk,) = sa.inspect(engine).get_foreign_keys("patients_synth", schema=schema)
        assert (fk["constrained_columns"], fk["referred_table"]) == (["case_id"], "patients_synth")
    synthetic = _frame(engine, schema, "patients_synth")
    assert synthetic.patient_id.is_unique
    cases = synthetic.case_id.dropna()
    assert len(cases) > 0 and cases.isin(synthetic.patient_id).all()
    if by_rename:
        assert leftover not in sa.inspect(engine).get_table_names(schema=schema)


def test_dp_members_of_a_linked_set_spend_from_their_tables_budgets(linked_db):
    engine, schema = linked_db
    _make_source(engine, schema, declare_keys=True)
    plain = _config(engine, schema, virtual_keys=False)

    def with_dp(epsilon: float, budget: DpBudgetConfig):
        params = {"epsilon": epsilon, "delta": 1e-6, "reporting_length": 2, "evaluate": False}
        tables = [
            t.model_copy(update={"engine": "dp_marginals", "engine_params": params}) for t in plain.tables
        ]
        return plain.model_copy(update={"tables": tables, "dp": budget})

    config = with_dp(2.0, DpBudgetConfig(budget_epsilon=3.0, refuse_over_budget=True))
    results = run_linked_set(config, _linked_set(config, engine), salt=SALT)
    spent = {r.target_table.split(".")[-1]: r.metrics["dp_budget"] for r in results}
    assert {name: (b["total_releases"], b["total_epsilon"]) for name, b in spent.items()} == {
        "customers_synth": (1, pytest.approx(2.0)),
        "orders_synth": (1, pytest.approx(2.0)),
    }
    assert spent["customers_synth"]["source_table"].endswith("customers")
    with engine.connect() as conn:
        lineage = conn.execute(
            sa.text(f"SELECT target_table, dp_identity, dp_epsilon FROM {_q(engine, schema, LINEAGE_TABLE)}")
        ).all()
    assert len({row.dp_identity for row in lineage}) == 2
    assert [row.dp_epsilon for row in lineage] == pytest.approx([2.0, 2.0])
    written = len(_frame(engine, schema, "orders_synth"))

    # a second release of the same tables would bring each to 3.5 > 3: refused, nothing of the set written
    again = with_dp(1.5, DpBudgetConfig(budget_epsilon=3.0, refuse_over_budget=True))
    with pytest.raises(
        DpBudgetError, match="of linked set .* over 2 releases to epsilon 3.5 > dp.budget_epsilon 3"
    ):
        run_linked_set(again, _linked_set(again, engine), salt=SALT)
    assert len(_frame(engine, schema, "orders_synth")) == written


def test_text_keys_from_postgresql_are_indexable_on_mariadb(pg_url, mariadb_url):
    """A PostgreSQL `text` key becomes TEXT on MariaDB, which cannot be indexed: with constraints: copy
    the key columns become VARCHARs as long as their longest synthetic value, and the keys hold."""
    source = sa.create_engine(pg_url)
    schema = f"text_keys_{uuid.uuid4().hex[:6]}"
    with source.begin() as conn:
        conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        conn.exec_driver_sql(f"CREATE TABLE {schema}.cust (code text PRIMARY KEY, age integer)")
        conn.exec_driver_sql(
            f"CREATE TABLE {schema}.ord (id integer PRIMARY KEY, code text REFERENCES {schema}.cust (code), n integer)"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {schema}.cust SELECT 'customer-' || g, 20 + mod(g, 50) FROM generate_series(1, 500) g"
        )
        conn.exec_driver_sql(
            f"INSERT INTO {schema}.ord SELECT g, 'customer-' || (1 + mod(g * 7, 500)), mod(g, 97) "
            "FROM generate_series(1, 3000) g"
        )
    target = sa.create_engine(mariadb_url)
    config = parse_config(
        {
            "source": pg_url,
            "target": mariadb_url,
            "constraints": "copy",
            "tables": [
                {"source": f"{schema}.cust", "target": "text_cust"},
                {"source": f"{schema}.ord", "target": "text_ord"},
            ],
        }
    )
    try:
        (linked_set,) = plan_run(config, database_key_reader(source)).linked_sets
        run_linked_set(config, linked_set, salt=SALT)
        types = {c["name"]: c["type"] for c in sa.inspect(target).get_columns("text_cust")}
        assert isinstance(types["code"], sa.String) and 0 < types["code"].length <= 768
        assert not isinstance(types["code"], sa.Text)
        (fk,) = sa.inspect(target).get_foreign_keys("text_ord")
        assert fk["referred_table"] == "text_cust"
        with target.connect() as conn:
            orders, joined = conn.exec_driver_sql(
                "SELECT count(*), count(c.code) FROM text_ord o LEFT JOIN text_cust c ON o.code = c.code"
            ).one()
        assert orders == joined > 0
    finally:
        with source.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        source.dispose()
        target.dispose()


def test_a_member_the_target_cannot_hold_is_refused_before_data_moves(tmp_path, pg_url):
    # The checks of a single table's target (name limits, types, names only case tells apart) hold for
    # every member of a set: PostgreSQL keeps `segment` and `SEGMENT` apart, SQLite would refuse the table.
    source = sa.create_engine(pg_url)
    schema = f"linked {uuid.uuid4().hex[:8]}"
    with source.begin() as conn:
        conn.execute(sa.schema.CreateSchema(schema))
    target = sa.create_engine(f"sqlite:///{tmp_path / 'target.db'}")
    try:
        _make_source(source, schema, declare_keys=True)
        customers = _q(source, schema, "customers")
        with source.begin() as conn:
            conn.exec_driver_sql(f'ALTER TABLE {customers} ADD COLUMN "SEGMENT" varchar(8)')
            conn.exec_driver_sql(f"UPDATE {customers} SET \"SEGMENT\" = 'b'")
        config = parse_config(
            {
                "source": source.url.render_as_string(hide_password=False),
                "target": str(target.url),
                "tables": [
                    {"source": f"{schema}.customers", "target": "customers_synth"},
                    {"source": f"{schema}.orders", "target": "orders_synth"},
                ],
            }
        )
        linked_set = _linked_set(config, source)
        for dry_run in (True, False):
            with pytest.raises(PipelineError, match="columns 'segment' and 'SEGMENT' differ only in case"):
                run_linked_set(config, linked_set, salt=SALT, run_id="cases", dry_run=dry_run)
        assert not {"customers_synth", "orders_synth"} & set(sa.inspect(target).get_table_names())
    finally:
        with source.begin() as conn:
            conn.execute(sa.schema.DropSchema(schema, cascade=True))
        source.dispose()
        target.dispose()
