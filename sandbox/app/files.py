"""Output files of the window: timestamped names that never overwrite, written atomically.

``unique_path(folder, "screenshot", ".png")`` gives ``screenshot-20250101-120000.png``,
or ``...-120000-2.png`` when that exists. A name that was free when checked can be taken
a moment later, so nothing here trusts the check: files are written to a temporary file
in the same folder and then placed without replacing (``sandbox.atomic.place_new``:
a hard link, which fails if the name exists), taking the next name if needed.
Screenshots are placed that way; snapshots go through ``sandbox.snapshot.save``, which never
replaces a file either. New files get ``0o666`` less the umask, applied by the kernel
(the umask is never changed to read it: that would race every other thread).
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import time
from pathlib import Path

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def default_out_dir() -> Path:
    """``$VERLET_SANDBOX_OUT`` if set, else ``out/`` in the working directory."""
    return Path(os.environ.get("VERLET_SANDBOX_OUT") or "out")


def unique_path(folder: Path, stem: str, suffix: str) -> Path:
    """A path in ``folder`` (created) named ``stem-YYYYmmdd-HHMMSS[-k]suffix`` that does
    not exist yet."""
    folder.mkdir(parents=True, exist_ok=True)
    base = f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    path = folder / f"{base}{suffix}"
    k = 2
    while path.exists():
        path = folder / f"{base}-{k}{suffix}"
        k += 1
    return path


def save_png(surface, folder: Path, stem: str = "screenshot") -> Path:
    """Save ``surface`` as a new PNG in ``folder``; returns its path. Never replaces a
    file, even one that appears while the PNG is written."""
    import pygame

    from ..atomic import place_new

    folder.mkdir(parents=True, exist_ok=True)
    # Encoded in memory and written by us, every byte checked: pygame.image.save to a
    # path does not raise on a full disk, and a truncated screenshot (0 bytes once) was
    # put at its final name and reported saved.
    buf = io.BytesIO()
    pygame.image.save(surface, buf, f"{stem}.png")     # the name hint picks PNG
    data = buf.getvalue()
    if not data.startswith(b"\x89PNG"):
        raise OSError("the PNG could not be encoded")
    tmp = folder / f".{stem}-{secrets.token_hex(6)}.png"
    fd = os.open(tmp, _NEW, 0o666)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        for _ in range(1000):
            path = unique_path(folder, stem, ".png")
            try:
                place_new(tmp, path)               # fails if the name was taken meanwhile
                return path
            except FileExistsError:
                continue
        raise OSError(f"{folder}: no free name for a {stem}")  # pragma: no cover
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def latest(folder: Path, pattern: str) -> Path | None:
    """The most recently modified file in ``folder`` matching ``pattern``, or None."""
    if not folder.is_dir():
        return None
    files = [p for p in folder.glob(pattern) if p.is_file() and not p.name.startswith(".")]
    return max(files, key=lambda p: (p.stat().st_mtime_ns, p.name), default=None)
