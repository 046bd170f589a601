"""Compiled hot kernels (numba), each mirroring a numpy reference that the tests compare to.

numba is optional: without it ``AVAILABLE`` is False and the callers keep their numpy
path. Kernels are compiled once and cached on disk (``cache=True``), so the app does not
pause on later starts. The arithmetic is written in the same order as the numpy
reference, so both agree to round-off (the tests check it).
"""

from __future__ import annotations

import math

import numpy as np

try:  # pragma: no cover - exercised whenever numba is installed
    from numba import njit, prange
    AVAILABLE = True
except ImportError:  # pragma: no cover
    AVAILABLE = False

ROPE = 1

if AVAILABLE:
    @njit(cache=True, fastmath=False, inline="always")
    def _project_one(x, w, ci, cj, rest, compliance, kind, inv_h2, lam,
                     k):  # pragma: no cover - compiled
        """One XPBD projection of constraint ``k`` (see ``Constraints.project_numpy``)."""
        i = ci[k]
        j = cj[k]
        dx = x[j, 0] - x[i, 0]
        dy = x[j, 1] - x[i, 1]
        L = math.sqrt(dx * dx + dy * dy)
        C = L - rest[k]
        if kind[k] == ROPE and C < 0:
            return
        at = compliance[k] * inv_h2
        wi = w[i]
        wj = w[j]
        denom = wi + wj + at
        if denom <= 0 or L <= 1e-12:
            return
        dlam = (-C - at * lam[k]) / denom
        lam[k] += dlam
        s = dlam / L
        cx = s * dx
        cy = s * dy
        x[i, 0] -= wi * cx
        x[i, 1] -= wi * cy
        x[j, 0] += wj * cx
        x[j, 1] += wj * cy

    @njit(cache=True, fastmath=False, parallel=True)
    def project_batches(x, w, ci, cj, rest, compliance, kind, offsets, inv_h2, lam,
                        min_parallel):  # pragma: no cover - compiled
        """XPBD sweep over constraints sorted batch after batch (``offsets`` bound them).

        Batches run in order. A batch shares no particle, so any order within it gives
        the numpy reference's numbers bit for bit (tested); batches of at least
        ``min_parallel`` links are spread over the cores (``prange``), smaller ones run
        in one thread, where starting threads would cost more than it saves. Measured on
        the 200x200 shear cloth on an idle 2-core machine: 0.65 ms a pass in parallel
        against 1.1-1.3 ms in one thread (numpy: 18.5 ms). The projection is a helper
        inlined into this parallel function; in a plain ``njit`` loop the same helper ran
        9x slower, which is why there is one kernel with a switch and not two.
        """
        for b in range(offsets.size - 1):
            lo, hi = offsets[b], offsets[b + 1]
            if hi - lo >= min_parallel:
                for k in prange(lo, hi):
                    _project_one(x, w, ci, cj, rest, compliance, kind, inv_h2, lam, k)
            else:
                for k in range(lo, hi):
                    _project_one(x, w, ci, cj, rest, compliance, kind, inv_h2, lam, k)

    @njit(cache=True, fastmath=False)
    def point_gravity(x, m, G, e2, out):  # pragma: no cover - compiled
        """Softened all-pairs gravity (see ``forces.point_gravity``), into ``out (n, 2)``.

        Each particle sums over all others in index order, as the numpy reference does
        row by row; ``j == i`` contributes nothing because its difference is zero.
        """
        n = x.shape[0]
        for i in range(n):
            ax = 0.0
            ay = 0.0
            xi = x[i, 0]
            yi = x[i, 1]
            for j in range(n):
                dx = x[j, 0] - xi
                dy = x[j, 1] - yi
                r2 = dx * dx + dy * dy + e2
                if r2 == 0.0:
                    continue
                w = m[j] / (r2 * math.sqrt(r2))
                ax += w * dx
                ay += w * dy
            out[i, 0] = G * ax
            out[i, 1] = G * ay

    @njit(cache=True, fastmath=False)
    def verlet_step(x, x_prev, a, r, ca, c1, c2, x_new, v):  # pragma: no cover - compiled
        """One position-Verlet-family step in one pass (see ``_PositionVerlet.step``).

        ``x+ = a*ca + x + back*r`` with ``back = x - x_prev``, and the three-point velocity
        ``v = fwd*c1 - back*c2`` with ``fwd = x+ - x``: the numpy reference's operations in
        its order, without its seven temporary arrays.
        """
        n, d = x.shape
        for i in range(n):
            for k in range(d):
                back = x[i, k] - x_prev[i, k]
                xn = a[i, k] * ca + x[i, k] + back * r
                fwd = xn - x[i, k]
                v[i, k] = fwd * c1 - back * c2
                x_new[i, k] = xn
else:  # pragma: no cover
    project_batches = None
    point_gravity = None
    verlet_step = None


def warm_up() -> None:
    """Compile (or load from the cache) every kernel on a tiny problem."""
    if not AVAILABLE:
        return
    x = np.zeros((2, 2))
    x[1, 0] = 1.0
    project_batches(x, np.ones(2), np.array([0]), np.array([1]), np.array([0.5]),
                    np.zeros(1), np.zeros(1, np.int8), np.array([0, 1]), 3600.0,
                    np.zeros(1), 1)
    point_gravity(x, np.ones(2), 1.0, 0.01, np.zeros((2, 2)))
    verlet_step(x, x.copy(), np.zeros((2, 2)), 1.0, 1e-4, 60.0, 30.0, np.empty((2, 2)),
                np.empty((2, 2)))
