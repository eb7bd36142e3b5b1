#!/usr/bin/env bash
# The veRL test environment: veRL pins transformers < 5.11 while TRL needs newer, so the veRL
# adapter is tested in its own virtual environment. Usage (from the repository root):
#   bash tests/verl/setup_venv.sh [.venv-verl]
#   .venv-verl/bin/python -m pytest -q -p no:cacheprovider tests/verl
# Installs the CPU build of torch first (never a CUDA one), veRL without its heavy optional
# dependencies (vllm, flash-attn, ...), then exactly what `verl.trainer.ppo.core_algos` imports.
set -euo pipefail
V="${1:-.venv-verl}"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$V"
python3 -m venv "$V"
PIP=("$V/bin/python" -m pip install -q --disable-pip-version-check)
WHEEL="$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -1 || true)"
"${PIP[@]}" "${WHEEL:-torch==2.13.0}"
"${PIP[@]}" --no-deps "verl==0.9.1"
"${PIP[@]}" "torch==2.13.0" "ray==2.60.0" "tensordict==0.10.0" "transformers==5.10.4" \
  "omegaconf==2.4.0" "codetiming==1.4.0" "orjson==3.13.0" packaging "numpy>=1.24" "rich>=13" \
  "pytest>=8" "hypothesis>=6.100"
# The trainer module (for its rollout-dump writer, the producer the importer tests read):
# torchdata without its torch pin, plus what the module imports at load time.
"${PIP[@]}" --no-deps "torchdata==0.11.0"
"${PIP[@]}" "torch==2.13.0" "datasets==5.2.0" "peft==0.21.2" "pillow" "cachetools" "uvicorn" \
  "fastapi"
"${PIP[@]}" --no-deps -e "$ROOT"
"$V/bin/python" -c "import torch, verl.trainer.ppo.core_algos, verl.trainer.ppo.ray_trainer; assert torch.__version__.startswith('2.13.0')"
