#!/usr/bin/env bash
# Quick start: set up .venv, build the demo models, then serve graphs/ on 127.0.0.1:8000 until
# Ctrl+C. Safe to re-run: each step skips what is already done. Arguments go to `appliance serve`
# (e.g. ./run.sh --port 9000).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
.venv/bin/appliance demo .
exec .venv/bin/appliance serve --graphs graphs "$@"
