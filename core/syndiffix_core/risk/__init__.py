"""Privacy-risk sketches: HyperLogLog, KHyperLogLog (uniqueness and joinability), and report structures.

Only numpy is needed by the sketches; ``hashing`` also accepts pandas objects.
"""

from syndiffix_core.risk.hashing import (
    ID_SEED,
    VALUE_SEED,
    combine_hashes,
    hash_column,
    hash_columns,
    hash_row_numbers,
)
from syndiffix_core.risk.hll import HyperLogLog
from syndiffix_core.risk.khll import (
    DEFAULT_HLL_PRECISION,
    DEFAULT_ID_PRECISION,
    DEFAULT_K,
    KHyperLogLog,
    SetOverlap,
)
from syndiffix_core.risk.report import (
    DEFAULT_THRESHOLDS,
    HistogramBin,
    Joinability,
    Reproduction,
    UniquenessSummary,
    joinability,
    reproduction,
    summarize,
)

__all__ = [
    "DEFAULT_HLL_PRECISION",
    "DEFAULT_ID_PRECISION",
    "DEFAULT_K",
    "DEFAULT_THRESHOLDS",
    "ID_SEED",
    "VALUE_SEED",
    "HistogramBin",
    "HyperLogLog",
    "Joinability",
    "KHyperLogLog",
    "Reproduction",
    "SetOverlap",
    "UniquenessSummary",
    "combine_hashes",
    "hash_column",
    "hash_columns",
    "hash_row_numbers",
    "joinability",
    "reproduction",
    "summarize",
]
