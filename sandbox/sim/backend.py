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
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

try:  # pragma: no cover - exercised whenever numba is installed
    from numba import njit, prange
    INSTALLED = True
except ImportError:  # pragma: no cover
    njit = prange = None
    INSTALLED = False

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
