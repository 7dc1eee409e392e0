"""CPU time of a synthesis in the project's environment, worker processes included."""

import resource


def process_tree_cpu_seconds() -> float:
    """User + system seconds of this process and of its reaped children: synthesize() materializes
    clusters in forked worker processes, whose time process_time() would leave out."""
    return sum(
        usage.ru_utime + usage.ru_stime
        for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )
