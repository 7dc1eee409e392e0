import numpy as np
import pandas as pd

from syndiffix_core.noise import Salt, hash_strings, mix64, row_content_hashes


def test_mix64_is_a_bijection_on_a_sample():
    values = np.arange(100_000, dtype=np.uint64)
    assert np.unique(mix64(values)).size == values.size


def test_noise_is_sticky_per_salt_and_seed():
    seeds = np.arange(1000, dtype=np.uint64)
    first = Salt.from_secret("secret").gaussian(seeds, "noise")
    again = Salt.from_secret(b"secret").gaussian(seeds, "noise")
    other_salt = Salt.from_secret("other").gaussian(seeds, "noise")
    other_step = Salt.from_secret("secret").gaussian(seeds, "suppress")
    np.testing.assert_array_equal(first, again)
    assert np.mean(first == other_salt) < 0.01
    assert np.mean(first == other_step) < 0.01


def test_gaussian_of_joined_seeds_equals_each_part_alone():
    # The anonymizer draws a node's bucket and entity layers in one call on the joined seeds.
    rng = np.random.default_rng(3)
    salt = Salt.from_secret("s")
    for size in (1, 2, 7, 500):
        first = rng.integers(0, 2**64, size=size, dtype=np.uint64)
        second = rng.integers(0, 2**64, size=size, dtype=np.uint64)
        joined = salt.gaussian(np.concatenate((first, second)), "noise", sd=1.7)
        np.testing.assert_array_equal(joined[:size], salt.gaussian(first, "noise", sd=1.7))
        np.testing.assert_array_equal(joined[size:], salt.gaussian(second, "noise", sd=1.7))


def test_gaussian_layer_is_standard_normal():
    noise = Salt.from_secret("s").gaussian(np.arange(200_000, dtype=np.uint64), "noise", sd=2.0)
    assert abs(noise.mean()) < 0.03
    assert abs(noise.std() - 2.0) < 0.03


def test_uniform_int_stays_in_bounds_and_covers_them():
    draws = Salt.from_secret("s").uniform_int(np.arange(10_000, dtype=np.uint64), "outlier", 2, 5)
    assert set(np.unique(draws)) == {2, 3, 4, 5}


def test_entity_hashes_depend_on_salt_and_reserve_zero_for_null():
    values = pd.Series(["alice", "bob", None, "alice"], dtype=object)
    hashed = Salt.from_secret("a").hash_entities(values)
    assert hashed[2] == 0
    assert hashed[0] == hashed[3] != hashed[1]
    assert (hashed[[0, 1, 3]] != 0).all()
    assert Salt.from_secret("b").hash_entities(values)[0] != hashed[0]


def test_row_entities_do_not_depend_on_row_order():
    frame = pd.DataFrame({"a": [1, 2, 2, 3, 2], "b": ["x", "y", "y", "z", "y"]})
    salt = Salt.from_secret("s")
    forward = salt.hash_rows(row_content_hashes(frame))
    backward = salt.hash_rows(row_content_hashes(frame.iloc[::-1].reset_index(drop=True)))
    assert sorted(forward) == sorted(backward)
    # identical rows are still distinct entities
    assert np.unique(forward).size == len(frame)


def test_string_set_seed_is_order_free():
    assert hash_strings(["a", "b"]) == hash_strings(["b", "a", "a"])
    assert hash_strings(["a"]) != hash_strings(["b"])


def test_salt_repr_hides_the_secret():
    assert "secret" not in repr(Salt.from_secret("secret"))
