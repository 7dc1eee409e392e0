"""syndiffix_ops: warehouse pipeline and Airflow integration around the syndiffix_core engines."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("syndiffix-ops")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"
