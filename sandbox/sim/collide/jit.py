"""The compiled path's decorator and the scalar helpers every compiled contact kernel uses.

``jit`` compiles a kernel with numba when it is installed (cached on disk, IEEE arithmetic,
numpy's error model: a division by zero gives inf or NaN, as in the numpy references) and
returns the plain function otherwise: every kernel still imports and runs, as Python.
numba itself is imported by :mod:`sandbox.sim.backend` alone; whether the compiled kernels
*may* run now (the app's warm-up) is ``backend.usable("contacts")``, read by
``Colliders.compiled``, the one place the contact pipeline chooses its backend.
"""

from __future__ import annotations

import numpy as np

from ..backend import INSTALLED, njit

if INSTALLED:
    jit = njit(cache=True, fastmath=False, error_model="numpy")
else:  # pragma: no cover - without numba the kernels are plain Python
    def jit(fn):
        return fn


@jit
def _as(x, value):  # pragma: no cover - compiled
    """``value`` in the float type of the array ``x``: numpy rounds a Python float that
    meets a float32 array to float32 (NEP 50), where numba would widen the array."""
    return np.asarray(value, dtype=x.dtype)[()]


@jit
def _max(a, b):  # pragma: no cover - compiled
    """``np.maximum`` of two numbers: NaN wins."""
    return a if (a >= b or a != a) else b


@jit
def _min(a, b):  # pragma: no cover - compiled
    """``np.minimum`` of two numbers: NaN wins."""
    return a if (a <= b or a != a) else b


@jit
def _clip(t, lo, hi):  # pragma: no cover - compiled
    """``np.clip(t, lo, hi)``: ``min(max(t, lo), hi)``, NaN kept."""
    if t != t:
        return t
    u = lo if t < lo else t
    return hi if u > hi else u


@jit
def _better(t, best):  # pragma: no cover - compiled
    """Whether ``t`` replaces ``best`` in ``np.argmin`` (the first minimum; the first
    NaN wins over any number)."""
    return t < best or (t != t and best == best)


@jit
def _above(t, best):  # pragma: no cover - compiled
    """Whether ``t`` replaces ``best`` in ``np.argmax`` (the first maximum; the
    first NaN wins over any number)."""
    return t > best or (t != t and best == best)


@jit
def _sign(v):  # pragma: no cover - compiled
    """``np.sign``."""
    if v > 0:
        return 1.0
    if v < 0:
        return -1.0
    return v            # zero or NaN
