#!/usr/bin/env bash
# The GPU run, ready for any machine with CUDA (issue 25): the GPU tests (tests/train/test_gpu.py:
# NCCL, bf16/fp16, GradScaler, the shared-GPU check), then bench's GPU case (trainer vs the
# plain loop in bf16 and fp16, model FLOP utilisation, 1 GPU against all of them), then its
# tables into docs/benchmarks.md between the gpu-table markers (bench/gpu_table.py).
# Under 8 minutes by its limits: the tests get 100 s (72-88 s on an H200), the bench 375 s with
# a 345 s budget (--budget-s: it starts no round of 4 runs that would end past it and notes the
# rounds it kept). On an H200 a run takes 18-24 s (13 s of it start-up; 100 steps ~5 s), so a
# round ~82 s: 4 rounds fit, 5 do not (2026-11-27: the bench's 370 s limit cut round 5 short).
#
# Usage: bash bench/gpu.sh            PYTHON=/path/to/python (default .venv/bin/python) must
#                                     have jobkit (editable) and a CUDA build of torch, and
#                                     jobkit's dependencies installed in its own environment:
#                                     bench's runs do not pass PYTHONPATH on (a GPU machine
#                                     without network: pip install --no-index the wheels).
# Exit: 0 all done; 2 no CUDA here; else the failing step's status (124: its timeout). The
#       document is only written after a good bench run.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-.venv/bin/python}
out=bench/results
mkdir -p "$out"
stamp=$(date -u +%Y%m%dT%H%M%SZ)
began=$SECONDS

gpus=$("$python" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)')
if [ "$gpus" = 0 ]; then
  echo "bench/gpu.sh: no CUDA device for $python (torch.cuda.is_available() is false)" >&2
  exit 2
fi
echo "bench/gpu.sh: $gpus GPU(s): $("$python" -c 'import torch; print(torch.cuda.get_device_name(0))')"

echo "=== GPU tests (at most 100 s)"
timeout 100 "$python" -m pytest -q -p no:cacheprovider -m gpu tests/train/test_gpu.py

echo "=== bench, GPU case (at most 375 s; no round that would end past 345 s)"
timeout 375 "$python" -m bench --cases gpu --budget-s 345 --python "$python" \
  --out "$out/gpu-$stamp.json" --markdown "$out/gpu-$stamp.md"

echo "=== docs/benchmarks.md"
"$python" -m bench.gpu_table "$out/gpu-$stamp.md" docs/benchmarks.md
echo "bench/gpu.sh: done in $((SECONDS - began)) s; results in $out/gpu-$stamp.json"
