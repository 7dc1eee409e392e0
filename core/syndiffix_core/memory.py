"""Freed heap memory: handed back to the operating system between the stages of a synthesis, or kept
for reuse while a stage allocates and frees many large arrays.

glibc's malloc keeps freed blocks for reuse, and its mmap threshold adapts upwards once large blocks
are freed (up to 32 MiB), so most of a cluster's arrays (tree levels, pools, lookups) end up inside the
heap. When a stage releases them, the process keeps their pages resident and its RSS stays at the
stage's peak; a forked worker then starts with those pages too. `malloc_trim(0)` returns every free
page of the heap (also between blocks still in use).

Blocks above 32 MiB (a float column of more than 4M rows) are always mapped on their own and unmapped
when freed, so each such array starts on fresh pages that the kernel zeroes on first touch: at 10M rows
that zeroing was a quarter of the CPU time of the cluster stage (`perf`: `clear_page_erms` under huge-page
faults). `reusing_freed_memory` serves every block from the heap instead and keeps freed space there
for the next array, at the cost of the heap's free space held between arrays.

Elsewhere (no glibc) all of this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
from collections.abc import Iterator

# mallopt parameters and glibc's defaults for them (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4
_DEFAULT_TRIM_THRESHOLD, _DEFAULT_MMAP_MAX = 128 * 1024, 65536
# mallopt takes a C int.
_NO_TRIM = 2**31 - 1


def _libc_function(name: str):
    try:
        return getattr(ctypes.CDLL(None), name)  # the C library the interpreter runs on
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS, Windows)
        return None


_MALLOC_TRIM = _libc_function("malloc_trim")
_MALLOPT = _libc_function("mallopt")


def return_freed_memory() -> None:
    """Give the heap's free pages back to the operating system (glibc only)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def reuse_freed_memory(trim_threshold: int = _NO_TRIM) -> None:
    """From now on, serve large blocks from the heap and hand free space at its top back only beyond
    `trim_threshold` bytes (glibc only). For a process that exits when its work is done (a forked
    worker); otherwise use `reusing_freed_memory`."""
    if _MALLOPT is not None:
        _MALLOPT(_M_MMAP_MAX, 0)
        _MALLOPT(_M_TRIM_THRESHOLD, min(trim_threshold, _NO_TRIM))


@contextlib.contextmanager
def reusing_freed_memory(trim_threshold: int) -> Iterator[None]:
    """`reuse_freed_memory` for the duration of the block; then glibc's defaults again and the heap's
    free pages handed back. (The mmap threshold stays where it had adapted to: glibc stops adapting it
    once a threshold is set.)"""
    reuse_freed_memory(trim_threshold)
    try:
        yield
    finally:
        if _MALLOPT is not None:
            _MALLOPT(_M_MMAP_MAX, _DEFAULT_MMAP_MAX)
            _MALLOPT(_M_TRIM_THRESHOLD, _DEFAULT_TRIM_THRESHOLD)
        return_freed_memory()
