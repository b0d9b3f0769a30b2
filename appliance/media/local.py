"""Reading an image file from the allowed directory (blocking: call it in a thread).

`sources.parse_source` already refused paths that are relative, hold `..` or a NUL byte, or lie
lexically outside the directory. Here symlinks count: the real path must be inside the directory's
real path, compared by path components. The file is opened without following a final symlink and
without blocking (a FIFO would otherwise hang the thread), must be a regular file no larger than
`max_image_bytes`, and, where /proc is available, the opened descriptor's own path is checked again,
so swapping a directory for a symlink between the check and the open gains nothing.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from appliance.errors import InvalidRequest
from appliance.media.policy import MediaPolicy
from appliance.media.sources import LocalImage

__all__ = ["read_local"]

_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def _refuse(message: str, code: str = "invalid_image_url") -> InvalidRequest:
    return InvalidRequest(message, code=code)


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def read_local(source: LocalImage, policy: MediaPolicy) -> bytes:
    """The file's bytes; InvalidRequest if it is missing, outside the directory, or too large."""
    root = policy.local_root_real
    if root is None:
        raise _refuse("Local image paths are not enabled on this server.")
    try:
        real = Path(os.path.realpath(source.path, strict=True))
    except OSError:
        raise _refuse("Image path does not exist or cannot be read.") from None
    if not _inside(real, root):
        raise _refuse("Image path is not inside this server's allowed media directory.")
    try:
        fd = os.open(real, _OPEN_FLAGS)
    except OSError:
        raise _refuse("Image path does not exist or cannot be read.") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse("Image path is not a regular file.")
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb", buffering=0) as handle:
        opened = _descriptor_path(fd)
        if opened is not None and not _inside(opened, root):
            raise _refuse("Image path is not inside this server's allowed media directory.")
        if info.st_size > policy.max_image_bytes:
            raise _too_large(policy.max_image_bytes)
        # Up to one byte more than allowed: a file growing after fstat is still caught.
        data = bytearray()
        while len(data) <= policy.max_image_bytes:
            chunk = handle.read(policy.max_image_bytes + 1 - len(data))
            if not chunk:
                break
            data += chunk
    if len(data) > policy.max_image_bytes:
        raise _too_large(policy.max_image_bytes)
    return bytes(data)


def _descriptor_path(fd: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def _too_large(limit: int) -> InvalidRequest:
    return _refuse(
        f"The image file is larger than this server accepts ({limit} bytes, see --max-image-bytes).",
        code="image_too_large",
    )
