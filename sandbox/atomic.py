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

``replace=False`` never replaces anything: the finished file is hard-linked into place,
which fails if the name exists, even when it appeared while the file was written (a
checked-then-replaced unique name is a race). Without hard links the name is first
created empty with ``O_EXCL``, then replaced.

Reading: :func:`read_bounded` opens regular files only (a FIFO or a device would block
or never end) and reads at most a limit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
          | getattr(os, "O_CLOEXEC", 0))
_READ = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
         | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0))


def atomic_write_text(path: str | os.PathLike, text: str, *, replace: bool = True) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same folder and ``os.replace``."""
    atomic_write_bytes(path, text.encode("utf-8"), replace=replace)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, replace: bool = True) -> None:
    """Write ``data`` atomically: a reader sees the old file or the new one, never half.

    A new file's mode is ``0o666 & ~umask``; an existing file keeps its mode. With
    ``replace=False`` an existing ``path`` raises ``FileExistsError`` and stays as it was.
    """
    with atomic_writer(path, replace=replace) as f:
        try:
            f.write(data)
        except OSError as e:                 # a full disk: no file name of its own
            raise _naming(e, Path(path)) from None


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike, *, replace: bool = True) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into (streamed: nothing is held in
    memory); it takes ``path``'s place when the block ends without an exception, else it
    is removed and ``path`` is untouched. ``replace`` as :func:`atomic_write_bytes`."""
    path = Path(path)
    folder = path.parent
    try:
        keep = stat.S_IMODE(os.stat(path).st_mode) & 0o777
    except OSError:
        keep = None
    if keep is not None and not replace:
        raise FileExistsError(errno.EEXIST, "file exists", str(path))
    try:
        fd, tmp = _create_temporary(folder, path.name)
    except OSError as e:
        raise _naming(e, path) from None
    inside = False                           # in the caller's block: its errors are its own
    try:
        with os.fdopen(fd, "wb") as f:
            inside = True
            yield f
            inside = False
            f.flush()
            if keep is not None:
                os.chmod(tmp, keep)
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            place_new(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) and (e.filename in (tmp, str(tmp)) if e.filename is not None
                                       else not inside):
            raise _naming(e, path) from None
        raise
    _fsync_folder(folder)


def _naming(e: OSError, path: Path) -> OSError:
    """``e`` about ``path``, the file the caller asked for, not the temporary file that
    the system call was given (``.name.1a2b3c.tmp`` means nothing to a user): a full disk
    or a folder removed meanwhile says "cannot write out/map.csv"."""
    if e.errno is None:
        return e
    named = OSError(e.errno, e.strerror, str(path))    # the errno's own subclass
    return named if type(named) is type(e) else e      # never another kind of error


def place_new(tmp: str | os.PathLike, path: str | os.PathLike) -> None:
    """Move the finished file ``tmp`` to ``path`` unless ``path`` exists
    (``FileExistsError``, ``tmp`` kept), atomically."""
    try:
        os.link(tmp, path)                   # fails, whatever the timing, if path exists
    except FileExistsError:
        raise
    except OSError:                          # no hard links here: reserve the name first
        os.close(os.open(path, _FLAGS, 0o600))
        os.replace(tmp, path)
        return
    os.unlink(tmp)


class NotRegularFile(OSError):
    """A path that is not a regular file (a FIFO, a device, a socket, a folder)."""


class FileTooLarge(OSError):
    """A file larger than the reader's limit; ``limit`` is that limit in bytes."""

    def __init__(self, path: str, limit: int) -> None:
        super().__init__(errno.EFBIG, f"larger than {limit:,} bytes", path)
        self.limit = limit


_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder"}


def read_bounded(path: str | os.PathLike, limit: int) -> bytes:
    """The content of the regular file ``path``, at most ``limit`` bytes.

    Never blocks and never reads without end: anything but a regular file raises
    :class:`NotRegularFile` (checked before opening, and again on the open file, opened
    non-blocking); more than ``limit`` bytes raises :class:`FileTooLarge`, from the size
    or after reading ``limit + 1`` bytes (a size can lie: ``/proc``, a growing file).
    Other failures are the ``OSError`` of the system call.
    """
    shown = os.fsdecode(os.fspath(path))

    def check(st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
            raise NotRegularFile(errno.EINVAL, f"not a regular file ({kind})", shown)

    check(os.stat(path))
    fd = os.open(path, _READ)
    try:
        st = os.fstat(fd)
        check(st)
        if st.st_size > limit:              # no need to read what is already too much
            raise FileTooLarge(shown, limit)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise FileTooLarge(shown, limit)
    return b"".join(chunks)


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
