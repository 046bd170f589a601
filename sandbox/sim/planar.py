"""The compiled links frame's planar copies (``kernels._verlet_frame``): the particles'
rows ``(n, 2)`` copied into planar slots (all x, then all y) and back, in the order of
the frame's grid layout ``perm``.

A particle-by-particle loop through ``perm`` (a scatter) cannot be vectorised: 0.15 ms
in and 0.12 ms out for the 200x200 cloth in float32, a tenth of its frame.
:func:`copy_runs` describes ``perm`` as runs that the loops below take as whole vectors
(0.06 and 0.06 ms).
"""

from __future__ import annotations

import numpy as np

from .backend import njit


@njit(cache=True, fastmath=False, error_model="numpy", inline="always")
def _pairs_at(perm, k, n):  # pragma: no cover - compiled
    """Whether particles ``k .. k + 4`` start a run of pairs of ``copy_runs``."""
    return k + 3 < n and perm[k + 2] == perm[k] + 1 and perm[k + 3] == perm[k + 1] + 1


@njit(cache=True, fastmath=False, error_model="numpy")
def copy_runs(perm, n):  # pragma: no cover - compiled
    """``perm`` (particle ``k`` in slot ``perm[k]``; empty: slot ``k``) as runs
    ``(k0, m, qa, qb)``: ``m > 0``, particles ``k0 .. k0 + m`` in slots ``qa ..
    qa + m``; ``m < 0``, the ``2|m|`` particles from ``k0`` alternately in slots
    ``qa + u`` and ``qb + u`` (a row of a grid in parity order,
    ``Constraints.grid_order``). Any permutation: at worst runs of one particle."""
    if perm.size == 0:
        out = np.zeros((1 if n else 0, 4), np.int64)
        if n:
            out[0, 1] = n
        return out
    out = np.empty((n, 4), np.int64)
    m = 0
    k = 0
    while k < n:
        qa = perm[k]
        if _pairs_at(perm, k, n):
            qb = perm[k + 1]
            t = 2
            while (k + 2 * t + 1 < n and perm[k + 2 * t] == qa + t
                   and perm[k + 2 * t + 1] == qb + t):
                t += 1
            out[m, 0], out[m, 1], out[m, 2], out[m, 3] = k, -t, qa, qb
            k += 2 * t
        else:
            t = 1                       # up to where a run of pairs starts
            while k + t < n and perm[k + t] == qa + t and not _pairs_at(perm, k + t, n):
                t += 1
            out[m, 0], out[m, 1], out[m, 2], out[m, 3] = k, t, qa, 0
            k += t
        m += 1
    return out[:m].copy()


@njit(cache=True, fastmath=False, error_model="numpy")
def _rows_in(x, X, Y, runs):  # pragma: no cover - compiled
    """``X[slot], Y[slot] = x[k]`` over ``runs`` (``copy_runs``)."""
    xf = x.reshape(-1)
    for r in range(runs.shape[0]):
        k0, m, qa, qb = runs[r, 0], runs[r, 1], runs[r, 2], runs[r, 3]
        if m < 0:
            m = -m
            s = xf[2 * k0:2 * k0 + 4 * m]
            Xa, Ya, Xb, Yb = X[qa:qa + m], Y[qa:qa + m], X[qb:qb + m], Y[qb:qb + m]
            for u in range(m):
                Xa[u] = s[4 * u]
                Xb[u] = s[4 * u + 2]
            for u in range(m):
                Ya[u] = s[4 * u + 1]
                Yb[u] = s[4 * u + 3]
        else:
            s = xf[2 * k0:2 * k0 + 2 * m]
            Xa, Ya = X[qa:qa + m], Y[qa:qa + m]
            for u in range(m):
                Xa[u] = s[2 * u]
                Ya[u] = s[2 * u + 1]


@njit(cache=True, fastmath=False, error_model="numpy")
def _values_in(w, W, runs):  # pragma: no cover - compiled
    """``W[slot] = w[k]`` over ``runs``."""
    for r in range(runs.shape[0]):
        k0, m, qa, qb = runs[r, 0], runs[r, 1], runs[r, 2], runs[r, 3]
        if m < 0:
            m = -m
            s = w[k0:k0 + 2 * m]
            Wa, Wb = W[qa:qa + m], W[qb:qb + m]
            for u in range(m):
                Wa[u] = s[2 * u]
                Wb[u] = s[2 * u + 1]
        else:
            # A loop, not ``W[qa:qa + m] = w[k0:k0 + m]``: an array assigned to a slice
            # compiles numba's shape-mismatch message (its string formatting, seconds
            # of a first start) for sizes that always agree; and in a ``parallel=True``
            # kernel it would be a parallel region of its own, waiting for a second
            # thread (the 1,000-link rope's frame: 1.2-2.5 ms instead of 0.2 with a
            # busy process beside it, when the frame was one).
            Wa = W[qa:qa + m]
            s = w[k0:k0 + m]
            for u in range(m):
                Wa[u] = s[u]


@njit(cache=True, fastmath=False, error_model="numpy")
def _rows_out(x, X, Y, runs):  # pragma: no cover - compiled
    """``x[k] = X[slot], Y[slot]`` over ``runs`` (the inverse of ``_rows_in``). Not
    one function with a direction: each loop has few streams to store into (here
    one, a pair's four numbers; there two per loop), as LLVM checks every stored
    stream against the others before it takes the vector loop."""
    xf = x.reshape(-1)
    for r in range(runs.shape[0]):
        k0, m, qa, qb = runs[r, 0], runs[r, 1], runs[r, 2], runs[r, 3]
        if m < 0:
            m = -m
            s = xf[2 * k0:2 * k0 + 4 * m]
            Xa, Ya, Xb, Yb = X[qa:qa + m], Y[qa:qa + m], X[qb:qb + m], Y[qb:qb + m]
            for u in range(m):
                s[4 * u] = Xa[u]
                s[4 * u + 1] = Ya[u]
                s[4 * u + 2] = Xb[u]
                s[4 * u + 3] = Yb[u]
        else:
            s = xf[2 * k0:2 * k0 + 2 * m]
            Xa, Ya = X[qa:qa + m], Y[qa:qa + m]
            for u in range(m):
                s[2 * u] = Xa[u]
                s[2 * u + 1] = Ya[u]
