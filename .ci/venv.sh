#!/usr/bin/env bash
# Create or refresh ./.venv with jobkit (editable) and what it needs; torch pinned to the CPU
# build by .ci/constraints.txt. Usage: bash .ci/venv.sh [EXTRAS]   (default extras: train)
# Idempotent: a stamp of pyproject.toml + constraints skips the install when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-train}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
fi
stamp=".venv/.jobkit-stamp"
want="$(cat pyproject.toml .ci/constraints.txt | sha256sum | cut -d' ' -f1) $extras"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
.venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v 'is ignored' || true
PIP_CONSTRAINT="$PWD/.ci/constraints.txt" .venv/bin/python -m pip install --quiet \
  -c .ci/constraints.txt -e ".[$extras]" 2>&1 | grep -v 'is ignored' || true
.venv/bin/python -c "import jobkit, jinja2, yaml, pydantic, click" # fail loudly if it did not
echo "$want" > "$stamp"
