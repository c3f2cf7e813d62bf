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
# --no-compile: pip would byte-compile all ~10,000 installed modules (torch's 2,300 alone take
# ~15 s of CPU) on CI's critical path; Python compiles the few that are imported when they
# are first imported.
PIP_CONSTRAINT="$PWD/.ci/constraints.txt" .venv/bin/python -m pip install --quiet --no-compile \
  -c .ci/constraints.txt -e ".[$extras]" 2>&1 | grep -v 'is ignored' || true
.venv/bin/python -c "import jobkit, jinja2, yaml, pydantic, click" # fail loudly if it did not
echo "$want" > "$stamp"
