"""Output files of the window: timestamped names that never overwrite, written atomically.

``unique_path(folder, "screenshot", ".png")`` gives ``screenshot-20250101-120000.png``,
or ``...-120000-2.png`` when that exists. Screenshots go to a temporary file in the same
folder (with the real extension: pygame picks the format from it) and are then linked
into place: ``os.link`` fails instead of replacing an existing file, so a name taken in
between is never overwritten (``os.replace`` is the fallback where links are not
supported). Snapshots go through ``World.save``, which is atomic itself.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path


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
    """Save ``surface`` as a new PNG in ``folder``; returns its path."""
    import pygame

    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{stem}-", suffix=".png", dir=folder)
    os.close(fd)
    try:
        pygame.image.save(surface, tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)              # mkstemp made it private (0600)
        for _ in range(1000):
            path = unique_path(folder, stem, ".png")
            try:
                os.link(tmp, path)                 # fails if the name was taken meanwhile
                return path
            except FileExistsError:
                continue
            except OSError:                        # no hard links here: replace instead
                os.replace(tmp, path)
                return path
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
