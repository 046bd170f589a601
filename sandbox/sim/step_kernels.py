"""The compiled kernels of a substep's integrate and bookkeeping stages: the Verlet
position step (:func:`verlet_step`, :func:`verlet_positions`), the velocity finish
(:func:`add_scaled_difference`), the finite check and the backup a diverged step goes
back to (:func:`all_finite`, :func:`back_up`), and the point masses' gravity sum
(:func:`point_gravity`). Each mirrors a numpy reference that the tests compare to, bit
for bit (``tests/test_kernels.py``); ``kernels.warm_up`` compiles them.
"""

from __future__ import annotations

import math

import numpy as np

from .backend import njit


@njit(cache=True, fastmath={"reassoc"}, error_model="numpy")
def point_gravity(x, m, G, e2, out):  # pragma: no cover - compiled
    """Softened all-pairs gravity (see ``forces.point_gravity``), into ``out (n, 2)``.

    Each particle sums over all others; ``j == i`` contributes nothing (``r2 == 0``
    only there, or for coincident particles without softening: a zero weight, not
    ``0 / 0``). Written so that LLVM vectorises the inner loop: positions in planar
    copies, the zero weight a select instead of a branch, and the sums allowed to
    be reassociated (``fastmath={"reassoc"}``: four partial sums), which changes
    them by rounding only; the numpy reference sums with ``einsum`` in an order of
    its own, and the test compares the two to 1e-12. 1,000 bodies: 4.4 -> 1.1 ms.
    """
    n = x.shape[0]
    X = np.empty(n)
    Y = np.empty(n)
    for k in range(n):
        X[k] = x[k, 0]
        Y[k] = x[k, 1]
    for i in range(n):
        xi = X[i]
        yi = Y[i]
        ax = 0.0
        ay = 0.0
        for j in range(n):
            dx = X[j] - xi
            dy = Y[j] - yi
            r2 = dx * dx + dy * dy + e2
            w = m[j] / (r2 * math.sqrt(r2))
            w = w if r2 != 0.0 else 0.0
            ax += w * dx
            ay += w * dy
        out[i, 0] = G * ax
        out[i, 1] = G * ay


@njit(cache=True, fastmath=False, error_model="numpy")
def verlet_step(x, x_prev, a, r, ca, c1, c2, v):  # pragma: no cover - compiled
    """One position-Verlet-family step in one pass (see ``_PositionVerlet.step``),
    the new positions written over ``x_prev``.

    ``x+ = a*ca + x + back*r`` with ``back = x - x_prev``, and the three-point velocity
    ``v = fwd*c1 + -(back*c2)`` with ``fwd = x+ - x``; ``c1 == 0`` leaves only
    ``-(back*c2)`` for a caller that adds ``fwd*c1`` after correcting ``x+``. The
    numpy reference's operations in its order, without its temporaries. Flat loops
    (LLVM does not vectorise over ``(n, 2)`` rows, whose length it does not know),
    and in place rather than into a separate output: an output that is ``x_prev``
    fails LLVM's run-time overlap check and runs the scalar loop, 2x slower.
    """
    xf = x.reshape(-1)
    pf = x_prev.reshape(-1)
    af = a.reshape(-1)
    vf = v.reshape(-1)
    for k in range(xf.size):
        back = xf[k] - pf[k]
        xn = af[k] * ca + xf[k] + back * r
        vf[k] = (xn - xf[k]) * c1 + -(back * c2)
        pf[k] = xn


@njit(cache=True, fastmath=False, error_model="numpy")
def verlet_positions(x, x_prev, a, r, ca):  # pragma: no cover - compiled
    """``verlet_step`` without the velocity: ``x+`` over ``x_prev``, same arithmetic."""
    xf = x.reshape(-1)
    pf = x_prev.reshape(-1)
    af = a.reshape(-1)
    for k in range(xf.size):
        pf[k] = af[k] * ca + xf[k] + (xf[k] - pf[k]) * r


@njit(cache=True, fastmath=False, error_model="numpy")
def all_finite(x, v, x_prev):  # pragma: no cover - compiled
    """``State.is_finite`` of three C-contiguous arrays in one pass each: ``a - a``
    is 0 for a finite number, NaN otherwise, and the non-zero ones are counted (an
    integer sum: a vector loop). A world checks this after every step: numpy's
    three ``isfinite(...).all()`` cost 7 us on 256 particles, this ~0.6 us."""
    for a in (x, v, x_prev):
        f = a.reshape(-1)
        bad = 0
        for k in range(f.size):
            bad += (f[k] - f[k]) != 0
        if bad:
            return False
    return True


@njit(cache=True, fastmath=False, error_model="numpy", _nrt=False)
def back_up(x, v, x_prev, w, bx, bv, bxp, bw, movable):  # pragma: no cover
    """``World.step``'s backup in one call: ``x``, ``v``, ``x_prev`` and ``w`` copied
    bit for bit into ``bx``, ``bv``, ``bxp``, ``bw`` (C-contiguous, same shapes), and
    whether ``w > 0`` row by row is ``movable`` (the cached gravity field's rows: the
    pins unchanged). A frame after a frame of drawing, numpy's four ``copyto``,
    ``w > 0`` and ``array_equal`` cost ~35 us of the soft blob's Python around its
    compiled frame (their calls, not their work: 256 rows)."""
    for src, dst in ((x, bx), (v, bv), (x_prev, bxp)):
        s = src.reshape(-1)
        d = dst.reshape(-1)
        for k in range(s.size):
            d[k] = s[k]
    for k in range(w.size):
        bw[k] = w[k]
    if movable.size != w.size:
        return False
    changed = 0
    for k in range(w.size):
        changed += (w[k] > 0) != movable[k]
    return changed == 0


@njit(cache=True, fastmath=False, error_model="numpy")
def add_scaled_difference(v, x, x0, c):  # pragma: no cover - compiled
    """``v += (x - x0) * c`` in one pass (``_PositionVerlet.finish_velocity``)."""
    vf = v.reshape(-1)
    xf = x.reshape(-1)
    of = x0.reshape(-1)
    for k in range(vf.size):
        vf[k] = (xf[k] - of[k]) * c + vf[k]
