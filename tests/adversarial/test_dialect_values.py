"""Values and names a dialect lets through that must not be read silently wrong (issue #11 item 4)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from dialect_cases import SALT, config_for, lineage_rows, one_line

from syndiffix_ops.pipeline import run_table
from syndiffix_ops.run_errors import PipelineError
from syndiffix_ops.warehouse import ColumnValueError, read_columns, reflect_table


@pytest.fixture
def sqlite_engine(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'affinity.db'}")
    yield engine
    engine.dispose()


@pytest.mark.parametrize("stored", ["2.5", "'two'", "1e30"])
def test_a_non_integer_in_a_sqlite_integer_column_is_refused_naming_table_column_and_value(
    sqlite_engine, stored
):
    with sqlite_engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE counts (n INTEGER, label TEXT)")
        conn.exec_driver_sql(f"INSERT INTO counts VALUES (1, 'a'), ({stored}, 'b'), (NULL, 'c'), (3, 'd')")
        value = conn.exec_driver_sql(f"SELECT {stored}").scalar_one()
    source = reflect_table(sqlite_engine, None, "counts")
    with pytest.raises(ColumnValueError) as caught:
        read_columns(sqlite_engine, source, ["n", "label"])
    message = one_line(caught.value)
    assert message.startswith("source table counts: column 'n'") and repr(value) in message

    config = config_for(sqlite_engine, sqlite_engine, "counts", "counts_synth")
    with pytest.raises(ColumnValueError, match=r"source table counts: column 'n' .* holds"):
        run_table(config, "counts_synth", salt=SALT)
    assert not sa.inspect(sqlite_engine).has_table("counts_synth")
    assert lineage_rows(sqlite_engine, None) == []


def test_whole_numbers_in_a_sqlite_integer_column_still_read_as_integers(sqlite_engine):
    with sqlite_engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE counts (n INTEGER)")
        conn.exec_driver_sql("INSERT INTO counts VALUES (1), (2.0), (-9223372036854775808), (NULL)")
    frame = read_columns(sqlite_engine, reflect_table(sqlite_engine, None, "counts"), ["n"])
    assert frame["n"].dtype == "Int64"
    assert frame["n"].tolist()[:3] == [1, 2, -(2**63)] and frame["n"].isna().tolist() == [False] * 3 + [True]


@pytest.fixture
def mariadb(mariadb_url):
    engine = sa.create_engine(mariadb_url)
    yield engine
    engine.dispose()


def test_a_mariadb_column_named_with_a_line_break_is_refused_not_dropped(mariadb):
    with mariadb.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS broken_names")
        conn.exec_driver_sql("CREATE TABLE broken_names (`first\nline` INT, plain INT)")
        conn.exec_driver_sql("INSERT INTO broken_names VALUES (1, 2), (3, 4)")
    config = config_for(mariadb, mariadb, "broken_names", "broken_names_synth")
    with pytest.warns(sa.exc.SAWarning), pytest.raises(PipelineError) as caught:
        run_table(config, "broken_names_synth", salt=SALT)
    message = one_line(caught.value)
    assert "source table broken_names: column 'first\\nline' cannot be reflected on MariaDB" in message
    assert not sa.inspect(mariadb).has_table("broken_names_synth")


def test_mariadb_backticks_in_column_names_survive_reading_and_writing(mariadb):
    with mariadb.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS ticks")
        conn.exec_driver_sql("DROP TABLE IF EXISTS ticks_synth")
        conn.exec_driver_sql("CREATE TABLE ticks (`a``b` INT, ```edge``` VARCHAR(10))")
        conn.exec_driver_sql(
            "INSERT INTO ticks VALUES " + ", ".join(f"({i % 5}, 'v{i % 3}')" for i in range(300))
        )
    source = reflect_table(mariadb, None, "ticks")
    assert [c.name for c in source.columns] == ["a`b", "`edge`"]
    frame = read_columns(mariadb, source, ["a`b", "`edge`"])
    assert sorted(set(frame["a`b"])) == [0, 1, 2, 3, 4] and sorted(set(frame["`edge`"])) == ["v0", "v1", "v2"]

    run_table(config_for(mariadb, mariadb, "ticks", "ticks_synth"), "ticks_synth", salt=SALT)
    with mariadb.connect() as conn:
        names = conn.exec_driver_sql(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() "
            "AND table_name = 'ticks_synth' ORDER BY ordinal_position"
        ).scalars()
        assert list(names) == ["a`b", "`edge`"]
        rows = conn.exec_driver_sql("SELECT * FROM ticks_synth").all()
    assert len(rows) > 200 and {row[1] for row in rows} <= {"v0", "v1", "v2"}


def test_mariadb_double_values_are_read_as_floats_not_decimals_of_ten_places(mariadb):
    with mariadb.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS doubles")
        conn.exec_driver_sql("CREATE TABLE doubles (x DOUBLE)")
        conn.exec_driver_sql("INSERT INTO doubles VALUES (6.185418091487019e-286), (-2.5e-12), (1.5e300)")
    frame = read_columns(mariadb, reflect_table(mariadb, None, "doubles"), ["x"])
    assert frame["x"].tolist() == [6.185418091487019e-286, -2.5e-12, 1.5e300]
