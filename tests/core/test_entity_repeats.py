"""Tree-level entity counting from repeat rows (EntityRepeats) against counting all (node, entity) pairs."""

from functools import partial

import numpy as np
import pandas as pd
import pytest

from syndiffix_core.anonymizer import CountAnonymizer, Entities, SortedEntities
from syndiffix_core.forest import _first_difference_levels, _shared_levels
from syndiffix_core.noise import Salt
from syndiffix_core.params import AnonymizationParams, BucketizationParams

CODE_LEVELS = 12


def _entities(aid_columns: list[np.ndarray], salt: Salt) -> Entities:
    hashes, ids, entity_hashes = [], [], []
    for aids in aid_columns:
        codes, uniques = pd.factorize(pd.Series(aids), sort=True)
        unique_hashes = salt.hash_entities(pd.Series(np.asarray(uniques, dtype=object)))
        hashes.append(np.r_[unique_hashes, np.uint64(0)][codes].astype(np.uint64))
        ids.append(codes.astype(np.int32))
        entity_hashes.append(unique_hashes)
    return Entities(tuple(hashes), tuple(ids), tuple(entity_hashes))


def _level_nodes(code: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """[start, end) of the runs of equal code prefix at `depth`, runs of fewer than 3 rows left out."""
    prefix = code >> np.uint64(CODE_LEVELS - depth)
    starts = np.flatnonzero(np.r_[True, prefix[1:] != prefix[:-1]])
    ends = np.r_[starts[1:], code.size]
    keep = ends - starts >= 3
    return starts[keep].astype(np.int64), ends[keep].astype(np.int64)


@pytest.mark.parametrize(
    ("rows", "entities", "null_share", "columns", "skewed"),
    [
        (3000, 40, 0.0, 1, True),
        (5000, 900, 0.05, 1, True),
        (4000, 300, 0.1, 2, True),
        (2000, 2000, 0.0, 1, True),
        (20000, 6000, 0.0, 1, False),
    ],
)
def test_tree_levels_count_like_all_pairs(rows, entities, null_share, columns, skewed):
    rng = np.random.default_rng(rows + entities)
    salt = Salt.from_secret("repeats")
    anonymizer = CountAnonymizer(AnonymizationParams(), BucketizationParams(), salt)
    # Heavy entities (Zipf) whose rows cluster in code space, so nodes hold entities of several rows,
    # some with fewer than ten of them (their light entities are ranked from all rows). Uniform
    # entities (about 3 rows each) put entities of several rows at every entity index, so light
    # nodes also rank such entities beyond their smallest indices.
    aid_columns = []
    for _ in range(columns):
        drawn = rng.zipf(1.5, rows) if skewed else rng.integers(0, entities, rows)
        aids = (drawn % entities).astype(object)
        aids[rng.random(rows) < null_share] = None
        aid_columns.append(aids)
    entity_base = pd.factorize(pd.Series(aid_columns[0]))[0] % 64
    noise = rng.integers(0, 2 ** (CODE_LEVELS - 6), rows)
    code = np.sort((entity_base.astype(np.uint64) << np.uint64(CODE_LEVELS - 6)) | noise.astype(np.uint64))
    order = rng.permutation(rows)  # the tree's row order: input rows in any order
    entities_data = _entities(aid_columns, salt)
    by_levels = SortedEntities(entities_data, order, partial(_shared_levels, code, CODE_LEVELS, 1))
    by_pairs = SortedEntities(entities_data, order)
    compared = 0
    for depth in range(CODE_LEVELS + 1):
        starts, ends = _level_nodes(code, depth)
        seeds = rng.integers(0, 2**63, starts.size).astype(np.uint64)
        fast = anonymizer.count_ranges(by_levels, starts, ends, seeds, depth)
        exact = anonymizer.count_ranges(by_pairs, starts, ends, seeds)
        for name in ("lcf_low", "singularity_low", "range_low", "noisy_count", "row_count"):
            np.testing.assert_array_equal(
                getattr(fast, name), getattr(exact, name), err_msg=f"{name} at {depth}"
            )
        compared += starts.size
    assert compared > 100


@pytest.mark.parametrize(("code_levels", "k"), [(20, 2), (62, 1), (12, 1)])
def test_shared_levels_of_many_pairs_match_whole_codes(code_levels, k):
    """Many pairs take the 16-bit head path; pairs equal in the head (near neighbours in a sorted code)
    still need their whole codes."""
    rng = np.random.default_rng(code_levels)
    code_bits = code_levels * k
    code = np.sort(rng.integers(0, 2**code_bits, 200_000, dtype=np.uint64))
    earlier = rng.integers(0, code.size - 1, 100_000)
    later = np.where(rng.random(earlier.size) < 0.5, earlier + 1, rng.integers(0, code.size, earlier.size))
    whole = _first_difference_levels(code[earlier] ^ code[later], code_levels, k) - np.uint8(1)
    np.testing.assert_array_equal(_shared_levels(code, code_levels, k, earlier, later), whole)
