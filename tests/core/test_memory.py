"""Freed heap memory goes back to the operating system between stages (glibc)."""

import platform
import subprocess
import sys
import textwrap

import pytest

# Run in a fresh interpreter: a long-lived test process (an xdist worker that ran hundreds of tests)
# has a heap whose free holes and adapted mmap threshold the blocks below would partly reuse.
_SCENARIO = textwrap.dedent(
    """
    import ctypes
    from syndiffix_core.memory import _MALLOC_TRIM, return_freed_memory

    def resident_mib():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * 4096 / 2**20

    assert _MALLOC_TRIM is not None
    libc = ctypes.CDLL(None)  # the C library the interpreter runs on, as syndiffix_core.memory
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]

    def filled(size, byte):
        block = libc.malloc(size)
        libc.memset(block, byte, size)
        return block

    # Blocks below glibc's smallest mmap threshold (128 KiB) come from the heap; each is followed by
    # a small block that stays, so the freed ones are holes that free() keeps resident. A small block
    # is often served from a hole the interpreter's start left lower in the heap: without one after
    # them, the freed blocks would join the heap's top, which free() itself hands back. (malloc itself,
    # not numpy arrays: how numpy allocates small arrays differs between its versions.)
    blocks, pins = [], []
    for _ in range(1500):
        blocks.append(filled(96 * 2**10, 1))
        pins.append(filled(2**10, 7))
        while pins[-1] < blocks[-1]:
            pins.append(filled(2**10, 7))
    for block in blocks:
        libc.free(block)
    before = resident_mib()
    return_freed_memory()
    intact = sum(ctypes.string_at(pin, 2**10) == bytes([7]) * 2**10 for pin in pins)
    print(before - resident_mib(), intact, len(pins))
    """
)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_freed_heap_blocks_leave_the_resident_set():
    out = subprocess.run(
        [sys.executable, "-c", _SCENARIO], capture_output=True, text=True, check=True, timeout=120
    )
    released_mib, intact, pinned = out.stdout.split()
    assert float(released_mib) > 100  # of the ~141 MiB freed
    assert int(intact) == int(pinned) >= 1500  # the blocks still in use are intact


# Page faults of a fresh 64 MiB array (above glibc's largest mmap threshold) after one as large was
# freed: outside `reusing_freed_memory` (before and after it), inside it, and inside with a trim
# threshold below the block (which hands its space back).
_REUSE_SCENARIO = textwrap.dedent(
    """
    import resource
    import numpy as np
    from syndiffix_core.memory import _MALLOPT, reusing_freed_memory

    def faults_of_a_second_array():
        first = np.ones(2**23)
        del first
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        second = np.ones(2**23)
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        assert second.sum() == 2**23
        return faults

    assert _MALLOPT is not None
    outside = faults_of_a_second_array()
    with reusing_freed_memory(2**31 - 1):
        inside = faults_of_a_second_array()
    after = faults_of_a_second_array()
    with reusing_freed_memory(2**20):
        trimmed = faults_of_a_second_array()
    print(outside, inside, after, trimmed)
    """
)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_freed_large_blocks_are_reused_only_while_reusing():
    out = subprocess.run(
        [sys.executable, "-c", _REUSE_SCENARIO], capture_output=True, text=True, check=True, timeout=120
    )
    outside, inside, after, trimmed = map(int, out.stdout.split())
    # 64 MiB on fresh pages: 32 faults with 2 MiB pages, 16,384 with 4 KiB ones.
    assert outside >= 32 and after >= 32 and trimmed >= 32
    assert inside < 8
