#!/usr/bin/env bash
# One command: bash bench/compare_reference/run.sh [--tables 10000x10,10000x20,100000x10] [--salts 3]
# syndiffix 1.0.8 lives in its OWN virtualenv (.venv-reference here, git-ignored; override with
# REFERENCE_VENV). pandas<3 is pinned there because 1.0.8 breaks on pandas 3 (read-only arrays).
# The package and its tests never import syndiffix.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${REFERENCE_VENV:-$here/.venv-reference}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import syndiffix" 2>/dev/null; then
  "$python" -m venv "$venv"
  # serialize pip with the rest of the team (see team brief); flock is optional elsewhere
  if command -v flock >/dev/null; then lock=(flock /tmp/pip.lock); else lock=(); fi
  "${lock[@]}" "$venv/bin/python" -m pip install --quiet "syndiffix==1.0.8" "pandas<3"
fi
exec "$python" "$here/compare.py" --reference-python "$venv/bin/python" "$@"
