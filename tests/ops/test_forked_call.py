"""A call computed in a forked child while the calling process goes on (source figures, output risk)."""

from __future__ import annotations

import multiprocessing
import os
import time

import pytest

from syndiffix_ops.forked_call import ChildEnded, ForkedCall


def _pid() -> int:
    return os.getpid()


def test_the_value_is_computed_in_another_process_and_handed_back():
    with ForkedCall(lambda: {"pid": os.getpid(), "rows": list(range(5))}, "the figures") as call:
        value = call.result()
    assert value["rows"] == [0, 1, 2, 3, 4]
    assert value["pid"] != os.getpid()


def test_the_functions_error_is_raised_by_result():
    def failing():
        raise KeyError("no such column")

    with ForkedCall(failing, "the figures") as call, pytest.raises(KeyError, match="no such column"):
        call.result()


def test_an_error_that_cannot_be_pickled_is_raised_as_what_it_said():
    class LocalError(Exception):  # a class inside a function cannot be pickled
        pass

    def failing():
        raise LocalError("column 'city' broke")

    with ForkedCall(failing, "the figures") as call, pytest.raises(RuntimeError) as raised:
        call.result()
    assert str(raised.value) == "LocalError: column 'city' broke"


def test_a_value_that_cannot_be_pickled_says_why_without_its_contents():
    with (
        ForkedCall(lambda: {"secret": 41, "hook": lambda: None}, "the figures") as call,
        pytest.raises(RuntimeError, match="the figures could not be passed on") as raised,
    ):
        call.result()
    assert "41" not in str(raised.value)


def _killed() -> None:
    os.kill(os.getpid(), 9)


def test_a_child_that_dies_says_how_it_ended():
    with (
        ForkedCall(_killed, "the figures") as call,
        pytest.raises(ChildEnded, match=r"computing the figures ended without them \(signal 9\)"),
    ):
        call.result()


def test_leaving_early_stops_and_reaps_the_child():
    call = ForkedCall(lambda: time.sleep(60), "the figures")  # stopped long before by close()
    child = call._pid
    call.close()
    with pytest.raises(ChildProcessError):  # reaped: no such child any more
        os.waitpid(child, os.WNOHANG)


def test_the_result_is_handed_over_in_memory_not_in_a_file_on_disk():
    with ForkedCall(lambda: time.sleep(60), "the figures") as call:
        # a memfd: /proc shows it as "/memfd:<name> (deleted)", a file of no file system
        assert os.readlink(f"/proc/self/fd/{call._handover.fileno()}").startswith("/memfd:")


def _in_a_daemonic_process(results) -> None:
    results.put((ForkedCall(_pid, "the figures").result(), os.getpid()))


def test_a_process_that_may_have_no_children_calls_the_function_itself():
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    process = context.Process(target=_in_a_daemonic_process, args=(results,), daemon=True)
    process.start()
    computed_in, own_pid = results.get(timeout=120)
    process.join()
    assert computed_in == own_pid
