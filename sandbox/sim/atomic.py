"""Atomic file writes: a reader sees the old file or the new one, never half of either.

The new content goes to a temporary file in the same folder, is flushed and fsynced, and
replaces the target with ``os.replace`` (atomic on POSIX and Windows); the folder is
fsynced too where the platform allows, so the rename itself survives a crash.

Permissions: a new file gets what ``open()`` would give it, ``0o666`` less the user's
umask (``0o644`` under the usual ``022``). The temporary file is created with mode
``0o666`` and the kernel applies the umask (and a folder's default ACL) itself, so the
umask is never read through ``os.umask``, which would briefly change it for every thread
of the process. Overwriting an existing file keeps that file's permission bits (a save
the user made private stays private). ``tempfile.mkstemp``, used before, made every
output ``0o600``.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
          | getattr(os, "O_CLOEXEC", 0))


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` atomically: a reader sees the old file or the new one, never half.

    A new file's mode is ``0o666 & ~umask``; an existing file keeps its mode.
    """
    path = Path(path)
    folder = path.parent
    try:
        keep = stat.S_IMODE(os.stat(path).st_mode) & 0o777
    except OSError:
        keep = None
    fd, tmp = _create_temporary(folder, path.name)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if keep is not None:
                os.chmod(tmp, keep)
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_folder(folder)


def _create_temporary(folder: Path, name: str) -> tuple[int, Path]:
    """A new, exclusively created ``.<name>.<random>.tmp`` in ``folder`` (mode 0o666 less
    the umask, applied by the kernel)."""
    for _ in range(100):
        tmp = folder / f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, _FLAGS, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name for {name!r} in {str(folder)!r}")


def _fsync_folder(folder: Path) -> None:
    """Make the rename durable (POSIX); a no-op where folders cannot be opened."""
    if not hasattr(os, "O_DIRECTORY"):
        return
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
