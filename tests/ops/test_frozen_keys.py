"""`syndiffix-ops keys`: the database's declared keys printed as YAML plan the same linked sets."""

from __future__ import annotations

import sqlalchemy as sa
import yaml
from click.testing import CliRunner

from syndiffix_ops.cli import main
from syndiffix_ops.config import load_config
from syndiffix_ops.run_plan import database_key_reader, plan_run


def _create_tables(engine: sa.Engine, schema: str | None) -> None:
    """A composite primary key, two foreign keys to one parent, a self-reference, a nullable key."""
    meta = sa.MetaData(schema=schema)
    prefix = f"{schema}." if schema else ""
    sa.Table("airports", meta, sa.Column("faa", sa.String(3), primary_key=True), sa.Column("alt", sa.Integer))
    sa.Table(
        "teams",
        meta,
        sa.Column("year_id", sa.Integer, primary_key=True),
        sa.Column("team_id", sa.String(3), primary_key=True),
        sa.Column("wins", sa.Integer),
    )
    sa.Table(
        "patients",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("case_id", sa.Integer, sa.ForeignKey(f"{prefix}patients.id"), nullable=True),
        sa.Column("email", sa.String(40), unique=True),
    )
    sa.Table(
        "flights",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("origin", sa.String(3), sa.ForeignKey(f"{prefix}airports.faa"), nullable=False),
        sa.Column("dest", sa.String(3), sa.ForeignKey(f"{prefix}airports.faa"), nullable=True),
        sa.Column("year_id", sa.Integer),
        sa.Column("team_id", sa.String(3)),
        sa.Column("delay", sa.Integer),
        sa.ForeignKeyConstraint(["year_id", "team_id"], [f"{prefix}teams.year_id", f"{prefix}teams.team_id"]),
    )
    sa.Table("weather", meta, sa.Column("temp", sa.Integer))
    meta.create_all(engine)


def _config(tmp_path, engine: sa.Engine, schema: str | None, extra: dict | None = None):
    prefix = f"{schema}." if schema else ""
    names = ("flights", "airports", "teams", "patients", "weather")
    data = {
        "version": 1,
        "source": engine.url.render_as_string(hide_password=False),
        "target": f"sqlite:///{tmp_path / 'target.db'}",
        "tables": [{"source": f"{prefix}{n}", "name": n} for n in names],
        **(extra or {}),
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _pasted(path, printed: str):
    """The config with the printed declarations pasted into its table entries."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    declared = yaml.safe_load(printed)
    by_name = {t["name"]: t for t in declared["tables"]}
    data["keys_from_database"] = declared["keys_from_database"]
    for table in data["tables"]:
        table.update(
            {k: v for k, v in by_name.get(table["name"], {}).items() if k not in ("name", "source", "target")}
        )
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return load_config(path)


def _shape(plan):
    """Linked sets (tables in order) and every table's keys, without what the YAML cannot say."""
    return (
        [s.tables for s in plan.linked_sets],
        plan.single_tables,
        {
            name: (
                keys.primary_key,
                keys.unique,
                [(f.columns, f.parent, f.parent_columns) for f in keys.foreign_keys],
            )
            for name, keys in plan.keys.items()
        },
    )


def test_printed_keys_plan_the_same_linked_sets_as_the_database(warehouse_db, tmp_path):
    engine, schema = warehouse_db
    _create_tables(engine, schema)
    path = _config(tmp_path, engine, schema)
    database_plan = plan_run(load_config(path), database_key_reader(engine))
    assert {fk.parent for fk in database_plan.keys["flights"].foreign_keys} == {"airports", "teams"}
    assert len(database_plan.keys["flights"].foreign_keys) == 3  # origin and dest both to airports

    result = CliRunner().invoke(main, ["keys", str(path)])
    assert result.exit_code == 0, result.output
    assert "NOT NULL" in result.output and "(origin) -> airports(faa)" in result.output
    again = CliRunner().invoke(main, ["keys", str(path)])
    assert again.output == result.output  # deterministic

    frozen = _pasted(path, result.output)
    assert not frozen.keys_from_database
    assert _shape(plan_run(frozen)) == _shape(database_plan)
    patients = frozen.table("patients")
    assert patients.foreign_keys[0].parent == "patients" and patients.unique == [["email"]]
    assert frozen.table("teams").primary_key == ["year_id", "team_id"]

    check = CliRunner().invoke(main, ["keys", str(path), "--check"])
    assert check.exit_code == 0, check.output


def test_check_names_a_foreign_key_the_database_dropped(warehouse_db, tmp_path):
    engine, schema = warehouse_db
    _create_tables(engine, schema)
    path = _config(tmp_path, engine, schema)
    _pasted(path, CliRunner().invoke(main, ["keys", str(path)]).output)
    with engine.begin() as conn:  # recreate patients without its self-reference
        conn.execute(sa.text(f"DROP TABLE {_quoted(engine, schema, 'patients')}"))
    meta = sa.MetaData(schema=schema)
    sa.Table(
        "patients",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("case_id", sa.Integer),
        sa.Column("email", sa.String(40), unique=True),
    )
    meta.create_all(engine)

    check = CliRunner().invoke(main, ["keys", str(path), "--check"])
    assert check.exit_code == 1
    lines = [line for line in check.output.splitlines() if line.strip()]
    assert lines == [
        "keys differ from the source database: patients: foreign key (case_id) -> patients(id) only in the YAML"
    ]


def test_a_bad_config_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "version: 1\nsource: sqlite:///s.db\ntarget: sqlite:///t.db\ntables: []\n", encoding="utf-8"
    )
    result = CliRunner().invoke(main, ["keys", str(path)])
    assert result.exit_code == 2
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1
    assert "tables" in result.output


def _quoted(engine: sa.Engine, schema: str | None, name: str) -> str:
    preparer = engine.dialect.identifier_preparer
    return f"{preparer.quote_schema(schema)}.{preparer.quote(name)}" if schema else preparer.quote(name)


def test_a_cycle_only_not_null_breaks_is_refused_naming_it(tmp_path):
    """The YAML cannot say NOT NULL, and here it decides which table of the cycle goes first."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'source.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE a (id INTEGER PRIMARY KEY, b_id INTEGER NOT NULL REFERENCES b (id))"
        )
        conn.exec_driver_sql("CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER REFERENCES a (id))")
    path = tmp_path / "config.yaml"
    path.write_text(
        f"version: 1\nsource: sqlite:///{tmp_path / 'source.db'}\ntarget: sqlite:///{tmp_path / 't.db'}\n"
        "tables:\n  - source: a\n  - source: b\n",
        encoding="utf-8",
    )
    assert [s.tables for s in plan_run(load_config(path), database_key_reader(engine)).linked_sets] == [
        ("b", "a")
    ]
    result = CliRunner().invoke(main, ["keys", str(path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "error: source: the database's keys cannot be declared in the YAML: there they would plan linked "
        "sets a, b instead of b, a (NOT NULL, which the YAML cannot declare: a: foreign key (b_id) -> b(id))"
    ]
