#!/usr/bin/env bash
# Install torchx 0.7.0 into bench/.venv-torchx, a venv of its own (jobkit's .venv stays as the
# README makes it), for the CLI start-up case of `python -m bench`. .ci/constraints.txt pins
# torch to the CPU wheel in case torchx ever pulls it in (0.7.0 does not).
# Idempotent; `python -m bench` runs it itself when the venv is missing (not with --quick).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=bench/.venv-torchx
if [ ! -x "$venv/bin/python" ]; then
  "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  -c .ci/constraints.txt torchx==0.7.0 2>&1 | grep -v 'is ignored' || true
"$venv/bin/python" -c "import torchx; assert torchx.__version__ == '0.7.0', torchx.__version__"
