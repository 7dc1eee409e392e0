"""Run ids, the recorded code version and failure messages stripped of values."""

from __future__ import annotations

import datetime as dt
import re

from syndiffix_ops.provenance import code_version, new_run_id, safe_error_message


def test_run_ids_sort_by_start_time_and_are_file_name_safe():
    early = new_run_id(dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC))
    late = new_run_id(dt.datetime(2026, 1, 2, 3, 4, 6, tzinfo=dt.UTC))
    assert early.startswith("20260102T030405Z-") and early < late
    assert re.fullmatch(r"[0-9A-Za-z-]+", early)
    assert new_run_id() != new_run_id()


def test_error_messages_lose_urls_quoted_values_and_numbers_but_keep_their_words():
    error = ValueError(
        "table nycflights13: cannot connect to postgresql://reader:hunter2@db.internal:5432/sales; "
        "column 'birth_date' value \"1961-07-04\" in row 4,017 of 31415926 rows"
    )
    message = safe_error_message(error)
    for secret in ("hunter2", "reader", "db.internal", "1961", "4,017", "31415926", "birth_date"):
        assert secret not in message
    assert message == (
        "table nycflights13: cannot connect to <url> column <quoted> value <quoted> in row <number> "
        "of <number> rows"
    )
    assert safe_error_message(KeyError()) == "KeyError"
    assert len(safe_error_message(RuntimeError("x " * 1000))) <= 500


def test_the_code_version_names_the_package_and_the_checkout_commit():
    version = code_version()
    assert version.package_version
    # the tests run from a git work tree
    assert version.commit is not None and re.fullmatch(r"[0-9a-f]{40}(-dirty)?", version.commit)
    assert "/" not in version.commit
