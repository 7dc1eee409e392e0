"""Quality reports of a task copied to any Airflow object storage (file://, s3://, gs://, ...).

The pipeline writes each report into a local folder (`<table>/<run id>.html` next to its
`.metrics.json`, one pair per table and run); this module copies the pair to the same relative path
under an ObjectStoragePath and rebuilds that folder's `index.html` (every table's runs, newest first).
The reports hold only privacy-safe shares of coarse bins, never rows or exact counts, so they may go
where the synthetic tables go.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from airflow.sdk import ObjectStoragePath

if TYPE_CHECKING:
    from syndiffix_ops.run_result import TableRunResult


def storage_path(location: str) -> ObjectStoragePath:
    """A folder given as a URL (s3://bucket/reports, file:///srv/reports) or a local path."""
    return ObjectStoragePath(location if "://" in location else f"file://{Path(location).resolve()}")


def publish_reports(
    local_dir: Path, written: Sequence[TableRunResult], destination: ObjectStoragePath
) -> dict[str, str]:
    """Copy the written tables' reports from local_dir to destination; target table -> report URL."""
    from syndiffix_ops.report_index import write_report_index

    urls = {}
    for result in written:
        if result.report_path is None:
            continue
        html = Path(result.report_path)
        metrics = html.with_name(html.name.removesuffix(".html") + ".metrics.json")
        folder = destination / html.parent.relative_to(local_dir).as_posix()
        folder.mkdir(parents=True, exist_ok=True)
        for file in (metrics, html):  # the page last: a page that exists has its metrics beside it
            (folder / file.name).write_bytes(file.read_bytes())
        urls[result.target_table] = str(folder / html.name)
    if urls:
        write_report_index(destination)
    return urls
