#!/usr/bin/env bash
# The whole test suite: set up .venv, then pytest (it builds the demo models once, cached in
# .cache/). Arguments go to pytest (e.g. ./test.sh tests/unit -x).
set -euo pipefail
cd "$(dirname "$0")"
./setup.sh
exec .venv/bin/python -m pytest "$@"
