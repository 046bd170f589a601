"""The compiled path's decorator and the scalar helpers every compiled contact kernel uses.

``jit`` is :func:`sandbox.sim.backend.njit` with the contact kernels' options (cached on
disk, IEEE arithmetic, numpy's error model: a division by zero gives inf or NaN, as in the
numpy references): the one mechanism of every kernel module, so every kernel imports the
same way with or without numba (without it a kernel runs as Python). numba itself is
imported by :mod:`sandbox.sim.backend` alone; whether the compiled kernels run is
``backend.compiled(Colliders.backend, "contacts")``, read by ``Colliders.compiled``, the one
place the contact pipeline chooses its backend.

Numbers, not constants, into a compiled callee: numba compiles a function once for each
literal int or bool it is called with (``f(x, 0, False)`` and ``f(x, m, flag)`` are two
compiles of ``f`` and of everything it calls), and a variable that starts as a constant
(``L = 0``, then ``L += 1``) can be passed as the literal while its type is still being
inferred. ``np.int64(0)``, ``np.bool_(True)`` are numbers: each callee compiles once (ten
contact functions compiled twice, among them ``geometry._distance`` and
``finish._velocity_sweep``).
"""

from __future__ import annotations

import numpy as np

from ..backend import njit

jit = njit(cache=True, fastmath=False, error_model="numpy")
#: ``jit`` for a few-line helper called from the contact loops: inlined where it is
#: called (numba's IR), no call left. Its array arguments are still counted at each
#: use in a kernel that counts references: call it from ``jit_borrow`` kernels, or
#: give it numbers only.
jit_inline = njit(cache=True, fastmath=False, error_model="numpy", inline="always")
#: ``jit`` without numba's reference counts, for a kernel that only reads and writes
#: the arrays it is given: it makes no array and returns none, and what it calls
#: returns none either (an array made there would never be freed). numba counts a
#: reference to every array a kernel takes when it is called, and one to every view
#: and inlined helper's argument: an atomic add in a call that cannot be inlined,
#: ~5 ns each. The soft blob's contact projection took 1.8 us a substep for its 16
#: wall contacts (a ten-array helper per contact, 32 arrays a call), 0.5 us without.
jit_borrow = njit(cache=True, fastmath=False, error_model="numpy", _nrt=False)


@jit
def _as(x, value):  # pragma: no cover - compiled
    """``value`` in the float type of the array ``x``: numpy rounds a Python float that
    meets a float32 array to float32 (NEP 50), where numba would widen the array.
    ``x.dtype.type`` converts in a register; ``np.asarray(value, x.dtype)[()]``, the
    same number, allocated a 0-d array (~35 ns a call, six calls a contact substep)."""
    return x.dtype.type(value)


@jit
def _max(a, b):  # pragma: no cover - compiled
    """``np.maximum`` of two numbers: NaN wins."""
    return a if (a >= b or a != a) else b


@jit
def _min(a, b):  # pragma: no cover - compiled
    """``np.minimum`` of two numbers: NaN wins."""
    return a if (a <= b or a != a) else b


#: The bits of a float64 but its sign (``_key``).
_MAGNITUDE = 0x7FFFFFFFFFFFFFFF


@jit_inline
def _key(value):  # pragma: no cover - compiled
    """``abs(value)`` (a float64) as the integer its bits make. Keys order as the
    magnitudes do, NaN (of either sign) above infinity: the largest magnitude of many
    numbers is an integer maximum of their keys, a loop LLVM makes vector instructions,
    where ``_max``'s compare-and-pick waits for the last one (~4 cycles a number).
    Back to the number with :func:`_unkey`."""
    return np.float64(value).view(np.uint64) & np.uint64(_MAGNITUDE)


@jit_inline
def _unkey(key):  # pragma: no cover - compiled
    """The float64 whose bits are ``key`` (from :func:`_key`: ``>= 0`` or NaN)."""
    bits = np.uint64(key)
    return bits.view(np.float64)


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


@jit_borrow
def _sort_head(a, m):  # pragma: no cover - compiled
    """``a[:m].sort()`` for integers, in place: a heap sort (at most ~2 m log2 m
    compares, no array made). ``ndarray.sort`` would compile numba's quicksort and its
    helpers for this one call, ~2 s of a first start's compile. The values come out in
    the same order (equal integers are the same bits)."""
    for top in range(m // 2 - 1, -1, -1):
        _sift_down(a, top, m)
    for end in range(m - 1, 0, -1):
        a[0], a[end] = a[end], a[0]
        _sift_down(a, np.int64(0), end)


@jit_inline
def _sift_down(a, root, end):  # pragma: no cover - compiled
    """The heap ``a[root:end]`` mended below ``root`` (:func:`_sort_head`)."""
    while True:
        child = 2 * root + 1
        if child >= end:
            return
        if child + 1 < end and a[child] < a[child + 1]:
            child += 1
        if a[root] >= a[child]:
            return
        a[root], a[child] = a[child], a[root]
        root = child
