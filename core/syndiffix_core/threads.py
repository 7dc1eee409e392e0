"""Independent tasks of one synthesis run side by side on threads.

The trees of a cluster's column subsets of one size depend only on the trees one column smaller, and
each tree's harvest only on that tree, so they are built and harvested side by side. At scale about
three quarters of that work runs inside numpy kernels that release the GIL (sorts, gathers, searches,
cumulative sums; measured at 1M rows), so threads use an idle core without copying data between
processes. Every task computes a
value that depends only on its inputs (everything is seeded by the salt and the column names), never
on which task ran first, so the output does not depend on the thread count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_in_threads(function: Callable[[Item], Result], items: Iterable[Item], threads: int) -> list[Result]:
    """`[function(item) for item in items]` on up to `threads` threads (re-raising the first error)."""
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(threads, len(items))) as pool:
        return list(pool.map(function, items))
