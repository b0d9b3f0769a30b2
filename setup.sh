#!/usr/bin/env bash
# One-shot setup: a virtual environment in .venv with the appliance, its model-export tools
# (CPU-only torch) and the test tools. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first and pinned: otherwise pip resolves optimum-intel's torchvision to a CUDA torch (GBs).
.venv/bin/python -m pip install -q -c constraints.txt torch==2.13.0
.venv/bin/python -m pip install -q -c constraints.txt -e '.[export,test]'
# PyPI's torchvision is a CUDA build that breaks `import transformers` beside CPU torch; export
# of text and vision models does not need it.
.venv/bin/python -m pip uninstall -q -y torchvision
.venv/bin/appliance --version
