#!/usr/bin/env bash
# Install the appliance as a systemd service:
#   /opt/appliance            the code and its .venv (from this checkout)
#   /etc/appliance/graphs/    graph files (one per served model)
#   /var/lib/appliance/models model folders (StateDirectory of the service)
#   /etc/systemd/system/appliance.service
#
# Usage: sudo systemd/install.sh [--demo] [--no-start]
#   --demo      also build the offline demo model and its graph (serves "demo-chat")
#   --no-start  install and enable, but do not start now
# DESTDIR=/some/root installs into a staging root and skips systemctl (packaging and tests);
# SKIP_SETUP=1 skips creating the virtual environment (tests).
set -euo pipefail

demo=0
start=1
for arg in "$@"; do
  case "$arg" in
    --demo) demo=1 ;;
    --no-start) start=0 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

src=$(cd "$(dirname "$0")/.." && pwd)
root=${DESTDIR:-}
prefix="$root/opt/appliance"
etc="$root/etc/appliance"
state="$root/var/lib/appliance"

if [ -z "$root" ] && [ "$(id -u)" -ne 0 ]; then
  echo "install.sh: run as root (sudo), or set DESTDIR for a staging install" >&2
  exit 1
fi

echo "installing code to $prefix"
mkdir -p "$prefix"
# Copy the tracked tree (not .venv, caches or built models).
(cd "$src" && git ls-files -z 2>/dev/null || find . -type f -not -path './.venv/*' -not -path './.git/*' -print0) \
  | (cd "$src" && xargs -0 tar -cf - 2>/dev/null) | tar -xf - -C "$prefix"
if [ "${SKIP_SETUP:-0}" != 1 ]; then
  (cd "$prefix" && ./setup.sh)
fi

mkdir -p "$etc/graphs" "$state/models"
chmod 0755 "$etc" "$etc/graphs"
if [ ! -f "$etc/appliance.toml" ]; then
  install -m 0644 "$src/systemd/appliance.toml" "$etc/appliance.toml"
fi

if [ "$demo" = 1 ]; then
  echo "building the demo model into $state/models"
  "$prefix/.venv/bin/appliance" demo "$state"
  # The service reads graphs from /etc/appliance/graphs: point the copy at the model by absolute path.
  sed "s#^model_path = .*#model_path = \"/var/lib/appliance/models/demo-chat\"#" \
    "$state/graphs/demo-chat.toml" > "$etc/graphs/demo-chat.toml"
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
