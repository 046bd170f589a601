"""Whether the compiled kernels may run now: the one place that imports numba's names and
holds the switch between the numpy references and the compiled kernels.

``INSTALLED``: numba can be imported. ``usable()``: the compiled kernels may be called
now. It is True from the start in scripts, tests and the bench (a first call compiles or
loads a kernel from numba's disk cache, as before). The app instead starts with
``warmup.start_background``, which turns it off until every kernel is compiled and
loaded, so the first frames run the numpy references (the same numbers: the tests
compare them bit for bit) and no frame waits for the compiler. The loading thread may
call the kernels before everyone else (``loading()``).

``kernels.AVAILABLE`` and ``contact_kernels.AVAILABLE`` read ``usable()`` on every
access (module ``__getattr__``), so every caller switches at the same moment.

Stale kernels. numba's disk cache knows a kernel's own source file, not the files of
the kernels it calls and compiles into itself: after an update that changed only
``collide/broad.py``, ``collide/solver.py``'s cached whole frame would go on running
the old broad phase. So the first import drops this package's cached kernels when
the sources of the kernel modules differ from those the cache was filled from
(:func:`drop_stale_kernels`, a stamp file beside the cache); they compile again.
"""

from __future__ import annotations

import hashlib
import os
import threading
from contextlib import contextmanager
from pathlib import Path

try:  # pragma: no cover - exercised whenever numba is installed
    from numba import njit, prange
    INSTALLED = True
except ImportError:  # pragma: no cover
    njit = prange = None
    INSTALLED = False

PACKAGE = Path(__file__).resolve().parents[1]     # the sandbox package
STAMP = "sandbox-kernel-sources"


def _kernel_sources() -> list[Path]:
    """The package's modules that define compiled kernels."""
    out = []
    for src in sorted(PACKAGE.rglob("*.py")):
        try:
            text = src.read_text(encoding="utf-8")
        except OSError:                                   # pragma: no cover
            continue
        if "njit" in text or "@jit" in text:
            out.append(src)
    return out


def _cache_dir_of(src: Path) -> Path:
    """Where numba keeps the kernels of ``src`` (``NUMBA_CACHE_DIR`` or ``__pycache__``
    beside it, as numba's cache locators put them)."""
    from numba.core import config
    from numba.core.caching import UserProvidedCacheLocator
    if config.CACHE_DIR:
        return Path(config.CACHE_DIR) / UserProvidedCacheLocator.get_suitable_cache_subpath(
            str(src))
    return src.parent / "__pycache__"


def _marker_dir() -> Path:
    """Where ``warmup`` marks the cache full (its ``_cache_dir``)."""
    from numba.core import config
    if config.CACHE_DIR:
        return Path(config.CACHE_DIR)
    return PACKAGE / "sim" / "__pycache__"


def drop_stale_kernels() -> int:
    """Delete this package's cached kernels if the kernel sources changed since the
    cache was filled (or the cache predates the stamp); returns the files deleted.
    Harmless when another process loads meanwhile: numba skips a missing file and
    compiles. Never raises: at worst the stale check is skipped."""
    if not INSTALLED:
        return 0
    try:
        sources = _kernel_sources()
        h = hashlib.sha256()
        for src in sources:
            h.update(src.name.encode() + src.read_bytes())
        digest = h.hexdigest()
        stamp = _cache_dir_of(PACKAGE / "sim" / "backend.py") / STAMP
        try:
            if stamp.read_text() == digest:
                return 0
        except OSError:
            pass
        dropped = 0
        for src in sources:
            folder = _cache_dir_of(src)
            for f in list(folder.glob(f"{src.stem}.*.nbi")) + list(
                    folder.glob(f"{src.stem}.*.nbc")):
                try:
                    f.unlink()
                    dropped += 1
                except OSError:                           # pragma: no cover
                    pass
        # And the warm-up's marks that the cache was full (sim/warmup.py): it no longer
        # is, so the next start takes the compiling path and says so.
        for f in _marker_dir().glob("sandbox-warm-*"):
            try:
                f.unlink()
            except OSError:                               # pragma: no cover
                pass
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(f"{STAMP}.{os.getpid()}.tmp")
        tmp.write_text(digest)
        os.replace(tmp, stamp)
        return dropped
    except Exception:                                     # pragma: no cover - read-only
        return 0


drop_stale_kernels()

PARTS = ("kernels", "contacts")         # the constraint/Verlet kernels, the contact stages
_ready: set[str] = set(PARTS) if INSTALLED else set()
_local = threading.local()


def usable(part: str = "kernels") -> bool:
    """True when the calling thread may use the compiled kernels of ``part``."""
    return part in _ready or getattr(_local, "loading", False)


def set_ready(ready: bool, part: str | None = None) -> None:
    """Switch every thread to the compiled kernels (True) or to the numpy references,
    for one ``part`` of :data:`PARTS` or (None) all of them."""
    parts = PARTS if part is None else (part,)
    for p in parts:
        if ready and INSTALLED:
            _ready.add(p)
        else:
            _ready.discard(p)


def ready(part: str | None = None) -> bool:
    return all(p in _ready for p in (PARTS if part is None else (part,)))


@contextmanager
def loading():
    """Within this block the calling thread uses the compiled kernels even while the
    others still run numpy (the background warm-up loads them this way)."""
    before = getattr(_local, "loading", False)
    _local.loading = INSTALLED
    try:
        yield
    finally:
        _local.loading = before
