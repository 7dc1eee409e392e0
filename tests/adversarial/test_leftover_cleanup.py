"""MariaDB: the next replace of a target drops what an interrupted replace of it left, and says so (item 12)."""

from __future__ import annotations

import logging

import sqlalchemy as sa
from dialect_cases import SALT, config_for, leftovers, lineage_rows

from syndiffix_ops.pipeline import run_table
from syndiffix_ops.warehouse.identifiers import derived_name
from syndiffix_ops.warehouse.write import OLD_PREFIX, STAGING_PREFIX


def test_leftovers_of_the_same_target_are_dropped_with_a_warning_and_others_kept(mariadb_url, caplog):
    engine = sa.create_engine(mariadb_url)
    with engine.begin() as conn:
        for name in ("orders_src", "orders_synth"):
            conn.exec_driver_sql(f"DROP TABLE IF EXISTS {name}")
        conn.exec_driver_sql("CREATE TABLE orders_src (amount INT, city VARCHAR(10))")
        conn.exec_driver_sql(
            "INSERT INTO orders_src VALUES " + ", ".join(f"({i % 70}, 'c{i % 4}')" for i in range(300))
        )
    config = config_for(engine, engine, "orders_src", "orders_synth")
    run_table(config, "orders_synth", salt=SALT)

    def lineage():  # the per-session database holds other tests' lineage too
        return [r for r in lineage_rows(engine, None) if r["target_table"] == "orders_synth"]

    before = lineage()

    # What a crash leaves: a staging table (killed before RENAME) and the previous table (killed after it).
    crashed_stage = derived_name(STAGING_PREFIX, "orders_synth", "a" * 16)
    crashed_old = derived_name(OLD_PREFIX, "orders_synth", "b" * 16)
    someone_elses = derived_name(STAGING_PREFIX, "other_target", "c" * 16)
    with engine.begin() as conn:
        for name in (crashed_stage, crashed_old, someone_elses):
            conn.exec_driver_sql(f"CREATE TABLE `{name}` (amount INT)")

    with caplog.at_level(logging.WARNING, logger="syndiffix_ops"):
        run_table(config, "orders_synth", salt=SALT)
    assert [n for n in leftovers(engine, None) if n in (crashed_stage, crashed_old, someone_elses)] == [
        someone_elses
    ]
    [warning] = [r for r in caplog.records if "interrupted" in r.getMessage()]
    assert warning.levelno == logging.WARNING
    assert crashed_stage in warning.getMessage() and crashed_old in warning.getMessage()
    assert someone_elses not in warning.getMessage()
    assert lineage()[:1] == before and len(lineage()) == 2

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="syndiffix_ops"):
        run_table(config, "orders_synth", salt=SALT)
    assert not [r for r in caplog.records if "interrupted" in r.getMessage()]  # nothing left to say
    with engine.begin() as conn:
        conn.exec_driver_sql(f"DROP TABLE `{someone_elses}`")
    engine.dispose()
