"""Screenshots of HTML quality reports with headless Chromium: look at the reports as a reader would.

    python scripts/screenshot_reports.py REPORT_DIR OUT_DIR [--width 1400] [--height 2600]

Writes OUT_DIR/index.png and one PNG per report (`<table>__<run id>.png`), each the top `--height`
pixels of the page at `--width`. Needs a Chromium or Chrome binary (Debian: `apt-get install chromium`);
set CHROMIUM to its path if it is not on PATH as chromium, chromium-browser or google-chrome.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_TIMEOUT_SECONDS = 120


def find_browser() -> str:
    for candidate in (os.environ.get("CHROMIUM"), *_BROWSERS):
        if candidate and shutil.which(candidate):
            return shutil.which(candidate)
    raise SystemExit(
        "error: no Chromium found: apt-get install chromium (or set CHROMIUM to a Chrome/Chromium binary)"
    )


def screenshot(browser: str, page: Path, png: Path, width: int, height: int) -> None:
    with tempfile.TemporaryDirectory() as profile:  # a fresh profile: no state between pages
        subprocess.run(
            [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                f"--screenshot={png}",
                page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=_TIMEOUT_SECONDS,
        )
    if not png.is_file():
        raise SystemExit(f"error: Chromium wrote no screenshot of {page}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=2600)
    args = parser.parse_args(argv)
    browser = find_browser()
    pages = [args.report_dir / "index.html", *sorted(args.report_dir.glob("*/*.html"))]
    pages = [page for page in pages if page.is_file()]
    if not pages:
        raise SystemExit(f"error: no index.html or <table>/<run id>.html in {args.report_dir}")
    args.out_dir.mkdir(parents=True, exist_ok=True)
    for page in pages:
        relative = page.relative_to(args.report_dir)
        name = "__".join(relative.with_suffix(".png").parts)
        screenshot(browser, page, args.out_dir / name, args.width, args.height)
        print(args.out_dir / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
