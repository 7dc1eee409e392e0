"""syndiffix_core: the synthesis and risk engines of syndiffix-ops.

Only numpy and pandas (and the optional extras an engine names) are imported here: never SQLAlchemy,
never Airflow. The warehouse layer (`syndiffix_ops`) builds on this package, not the other way round.
"""

__version__ = "0.1.0"

from .params import (
    AnonymizationParams,
    BucketizationParams,
    ClusteringParams,
    FlatteningInterval,
    SuppressionParams,
)
from .synthesizer import synthesize

__all__ = [
    "AnonymizationParams",
    "BucketizationParams",
    "ClusteringParams",
    "FlatteningInterval",
    "SuppressionParams",
    "synthesize",
]
