"""Clusters materialized in worker processes give the same output as in one process."""

import resource
import sys
from pathlib import Path

import pandas as pd
import pytest

from syndiffix_core import synthesize
from syndiffix_core.errors import InvalidInputError
from syndiffix_core.workers import can_fork

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "compare_reference"))
from compare import generated_table


def test_two_workers_give_the_single_worker_output():
    assert can_fork()
    table, _ = generated_table(4000, 10)
    logged: list[str] = []
    one = synthesize(table, salt="workers", workers=1)
    children_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    two = synthesize(table, salt="workers", workers=2, progress=lambda stage, _: logged.append(stage))
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime > children_before  # worker processes ran
    pd.testing.assert_frame_equal(one, two)
    assert sum("stitched" in stage for stage in logged) >= 2  # several clusters were materialized


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_a_bad_worker_count_is_refused(workers):
    with pytest.raises(InvalidInputError, match="workers must be a positive integer"):
        synthesize(pd.DataFrame({"a": [1, 2, 3]}), salt="s", workers=workers)
