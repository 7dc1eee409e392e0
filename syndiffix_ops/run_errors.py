"""The errors a run raises for a table it cannot synthesize or write as configured.

All of them are permanent (errors.PermanentError): retrying cannot help until the config, the source
or the target changes. Lineage records a failed run's error class by its qualified name.
"""

from __future__ import annotations

from syndiffix_ops.config import ConfigError
from syndiffix_ops.errors import PermanentError


class PipelineError(PermanentError, RuntimeError):
    """A table that cannot be synthesized as configured; the message names the table and the cause."""


class RefusedConfigError(ConfigError):
    """A config that would overwrite a source or run something other than one `where` expression:
    refused before anything is written, not even a failed lineage row."""


class TooFewRowsError(PipelineError):
    """The synthetic output has fewer rows than min_rows; nothing was written."""


class QualityGateError(PipelineError):
    """The synthetic copy fails the config's quality gate (quality.fail_below_score / fail_on_attention)."""


class DpBudgetError(PipelineError):
    """A DP release would bring its identity's total over the config's dp budget (dp.refuse_over_budget)."""


class SchemaDriftError(PipelineError):
    """The source schema changed since the last successful run and on_schema_change is fail."""
