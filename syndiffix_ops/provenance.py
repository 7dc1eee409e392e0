"""What an auditor needs to follow a run: its id, the exact code that ran, and a failure told safely.

- `new_run_id()`: one id per CLI invocation (a DAG run uses Airflow's run id), shared by every table of
  the run; it starts with the UTC start time, so ids sort by time, and holds only `[0-9A-Za-z-]`.
- `code_version()`: the package version plus, when the code runs from a git checkout (an editable
  install, or PYTHONPATH on a work tree) or was installed from a git URL, the commit (with `-dirty` when
  tracked files differ from it). Only the commit is recorded, never a path.
- `safe_error_message(error)`: an exception's message with quoted text, numbers and URLs replaced, so a
  failure recorded in lineage holds no raw value, count or credential.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
import secrets
import subprocess
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import syndiffix_ops

_DIST_NAME = "syndiffix-ops"
_GIT_TIMEOUT_SECONDS = 5
_MAX_ERROR_CHARS = 500


def new_run_id(now: dt.datetime | None = None) -> str:
    """`20261123T105512Z-4f2a9c`: the UTC start second, then 24 random bits against collisions."""
    now = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class CodeVersion:
    package_version: str
    commit: str | None  # 40 hex digits, with "-dirty" when the work tree has uncommitted changes

    def __str__(self) -> str:
        return self.package_version + (f" ({self.commit})" if self.commit else "")


@functools.cache
def code_version() -> CodeVersion:
    """Looked up once per process: a run's tables all record the same version."""
    return CodeVersion(syndiffix_ops.__version__, _checkout_commit() or _installed_vcs_commit())


def _checkout_commit() -> str | None:
    """The commit of the work tree this package's code is loaded from, if it is a git checkout."""
    root = Path(syndiffix_ops.__file__).resolve().parent.parent
    if not (root / ".git").exists():  # a directory in a clone, a file in a worktree
        return None
    try:
        head = _git(root, "rev-parse", "HEAD")
        changed = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    if not re.fullmatch(r"[0-9a-f]{40}", head):
        return None
    return head + ("-dirty" if changed else "")


def _git(root: Path, *arguments: str) -> str:
    completed = subprocess.run(
        ["git", "-C", str(root), *arguments],
        capture_output=True,
        text=True,
        timeout=_GIT_TIMEOUT_SECONDS,
        check=True,
    )
    return completed.stdout.strip()


def _installed_vcs_commit() -> str | None:
    """The commit pip recorded when installing from a git URL (PEP 610 direct_url.json)."""
    try:
        text = metadata.distribution(_DIST_NAME).read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    commit = json.loads(text).get("vcs_info", {}).get("commit_id")
    return commit if isinstance(commit, str) and re.fullmatch(r"[0-9a-f]{40}", commit) else None


# URLs first (they may hold a password), then quoted text, then numbers not inside a word.
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|`[^`]*`")
_NUMBER = re.compile(r"(?<![\w.])[-+]?\d[\d_,]*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])")


def safe_error_message(error: BaseException) -> str:
    """The message of `error` on one line with URLs, quoted text and numbers replaced by placeholders.

    Error messages quote what they found (a value that does not parse, a row count, a connection URL);
    a lineage row is read by more people than the source, so none of that is kept. The error class and
    the stage, recorded next to it, say what kind of failure it was."""
    text = " ".join(str(error).split())
    text = _URL.sub("<url>", text)
    text = _QUOTED.sub("<quoted>", text)
    text = _NUMBER.sub("<number>", text)
    if len(text) > _MAX_ERROR_CHARS:
        text = text[: _MAX_ERROR_CHARS - 1] + "…"
    return text or type(error).__name__
