"""Freed heap memory handed back to the operating system between the stages of a synthesis.

glibc's malloc keeps freed blocks for reuse, and its mmap threshold adapts upwards once large blocks
are freed (up to 32 MiB), so most of a cluster's arrays (tree levels, pools, lookups) end up inside the
heap. When a stage releases them, the process keeps their pages resident and its RSS stays at the
stage's peak; a forked worker then starts with those pages too. `malloc_trim(0)` returns every free
page of the heap (also between blocks still in use). Elsewhere (no glibc) this does nothing.
"""

from __future__ import annotations

import ctypes


def _malloc_trim():
    try:
        return ctypes.CDLL(None).malloc_trim  # the C library the interpreter runs on
    except (OSError, AttributeError, TypeError):  # not glibc (musl, macOS, Windows)
        return None


_MALLOC_TRIM = _malloc_trim()


def return_freed_memory() -> None:
    """Give the heap's free pages back to the operating system (glibc only)."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
