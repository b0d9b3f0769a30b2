"""systemd's notify protocol (sd_notify) in a few lines of stdlib.

With `Type=notify`, systemd waits for `READY=1` before it considers the service started, and with
`WatchdogSec=` it restarts the service when `WATCHDOG=1` stops coming. Outside systemd
(no NOTIFY_SOCKET) every call is a no-op.
"""

from __future__ import annotations

import os
import socket

__all__ = ["Notifier"]


class Notifier:
    """Sends state lines to $NOTIFY_SOCKET (a path, or `@name` for the abstract namespace)."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        address = env.get("NOTIFY_SOCKET", "")
        if address.startswith("@"):
            address = "\0" + address[1:]
        self._address = address
        watchdog_usec = env.get("WATCHDOG_USEC", "")
        watchdog_pid = env.get("WATCHDOG_PID", "")
        # WATCHDOG_PID names the process the watchdog is meant for; ignore it when it is not us.
        owned = not watchdog_pid or watchdog_pid == str(os.getpid())
        self.watchdog_seconds = int(watchdog_usec) / 1e6 if watchdog_usec.isdigit() and owned else 0.0

    @property
    def enabled(self) -> bool:
        return bool(self._address)

    def notify(self, *lines: str) -> None:
        if not self._address:
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.sendto("\n".join(lines).encode(), self._address)
            except OSError:
                pass  # systemd gone (e.g. during shutdown): nothing to tell

    def ready(self, status: str) -> None:
        self.notify("READY=1", f"STATUS={status}")

    def status(self, status: str) -> None:
        self.notify(f"STATUS={status}")

    def watchdog(self) -> None:
        self.notify("WATCHDOG=1")

    def extend_timeout(self, seconds: float) -> None:
        self.notify(f"EXTEND_TIMEOUT_USEC={int(seconds * 1e6)}")

    def stopping(self) -> None:
        self.notify("STOPPING=1", "STATUS=stopping: draining in-flight requests")
