#!/usr/bin/env bash
# One command: bash bench/compare_pacsynth/run.sh [rows]
# pac-synth lives in its OWN virtualenv (.venv-pacsynth here, git-ignored); the package never imports it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${PACSYNTH_VENV:-$here/.venv-pacsynth}"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import pacsynth" 2>/dev/null; then
  "$python" -m venv "$venv"
  # serialize pip with the rest of the team (see team brief); flock is optional elsewhere
  if command -v flock >/dev/null; then lock=(flock /tmp/pip.lock); else lock=(); fi
  "${lock[@]}" "$venv/bin/python" -m pip install --quiet "pac-synth==0.0.8" numpy
fi
exec "$python" "$here/compare.py" --pacsynth-python "$venv/bin/python" "$@"
