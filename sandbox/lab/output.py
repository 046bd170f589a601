"""Files the lab writes: atomically (:mod:`sandbox.atomic`), into a folder made again if it
was removed while the run went on.

An experiment makes its output folder when it starts; a person who deletes that folder
mid-run (``rm -rf out/`` beside a long sweep) used to end the run on the next write
with "cannot write ...: No such file or directory". Now the next write makes the folder
again and says so once, in one line on stderr; what the folder held before is gone, and
the command's summary says which of its files are missing (:func:`missing`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

from ..atomic import atomic_write_bytes

_noted: set[Path] = set()


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically; a parent folder removed meanwhile is made
    again (and noted once). Other failures are the ``OSError`` that names ``path``."""
    path = Path(path)
    for attempt in range(3):
        try:
            atomic_write_bytes(path, data)
            return path
        except FileNotFoundError:
            if path.parent.is_dir() or attempt == 2:
                raise                         # not a vanished folder, or it keeps vanishing
            gone = _topmost_missing(path.parent)
            path.parent.mkdir(parents=True, exist_ok=True)
            if gone not in _noted:
                _noted.add(gone)
                print(f"note: {gone} was removed while the run went on; made it again "
                      "(what it held is gone)", file=sys.stderr)
    raise AssertionError("unreachable")


def write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`write_bytes` of ``text`` as UTF-8."""
    return write_bytes(path, text.encode("utf-8"))


def missing(files: Iterable[Path]) -> list[Path]:
    """The files of ``files`` that are not there (any more)."""
    return [f for f in files if not Path(f).is_file()]


def _topmost_missing(folder: Path) -> Path:
    """The outermost folder of ``folder``'s chain that does not exist."""
    gone = folder
    for parent in folder.parents:
        if parent.exists():
            break
        gone = parent
    return gone
