"""Many runs of one integrator at once, stacked on a leading batch axis, observed every step.

The lab's sweeps (random-step seeds, a range of step sizes, a cloud of initial
conditions) are independent runs of the same equations. Stacked on a leading axis of
length ``S``, with one step ``h`` per run broadcast against ``x``, they cost about one run
of numpy calls: the integrators accept ``h`` as an array (see
:mod:`sandbox.sim.integrators`). Each run is the same arithmetic as
:func:`sandbox.sim.integrators.integrate` on its own column of steps (a test checks it).

Blow-ups are results here (explicit Euler on an orbit, plain Verlet under random steps),
so floating-point overflow warnings are silenced inside :func:`run_batch`; the caller
sees ``inf``/``nan`` in the arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..sim.integrators import AccelFn, check_steps, get_integrator
from ..sim.particles import State

Observer = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class BatchRun:
    """``t (n+1, S)`` s; ``obs (n+1, S, ...)`` what ``observe(x, v)`` returned at each time
    (``None`` without an observer); ``state`` the final :class:`State` (``x (S, *shape)``)."""

    t: np.ndarray
    obs: np.ndarray | None
    state: State


def as_columns(H) -> np.ndarray:
    """Steps as a float array ``(n, S)``: a 1-D sequence is one run (``S = 1``)."""
    H = np.asarray(H, dtype=np.float64)
    if H.ndim == 1:
        H = H[:, None]
    if H.ndim != 2:
        raise ValueError(f"steps must have shape (n,) or (n, S), got {H.shape}")
    for j in range(H.shape[1]):
        check_steps(H[:, j])
    return H


def run_batch(accel: AccelFn, x0, v0, H, method: str, observe: Observer | None = None,
              start_x_prev: Callable[[State, np.ndarray, AccelFn], np.ndarray] | None = None,
              per_run: bool = False) -> BatchRun:
    """Run ``S`` copies of ``x'' = accel(x, v)``, copy ``j`` taking the steps ``H[:, j]``.

    ``x0``, ``v0``: the initial state shared by every run (``shape``), or with
    ``per_run`` one state per run (``(S, *shape)``). ``accel`` must accept the leading
    batch axis. ``observe(x, v)`` is called on the batched state ``(S, *shape)`` at
    ``t = 0`` and after every step.
    ``start_x_prev(s, h, accel)`` replaces the ``x_prev`` that the integrator's
    ``start()`` chose (the initial-conditions experiment uses it to start position
    Verlet the naive way); ``h`` is the first step, shaped to broadcast against ``x``.
    """
    integ = get_integrator(method)
    H = as_columns(H)
    n, S = H.shape
    x0 = np.asarray(x0, dtype=np.float64)
    v0 = np.asarray(v0, dtype=np.float64)
    if x0.shape != v0.shape:
        raise ValueError(f"x0 has shape {x0.shape} but v0 has shape {v0.shape}")
    if per_run and (x0.ndim < 2 or x0.shape[0] != S):
        raise ValueError(f"per_run states need shape ({S}, ...), got {x0.shape}")
    shape = x0.shape[1:] if per_run else x0.shape
    s = State.from_xv(np.broadcast_to(x0, (S, *shape)), np.broadcast_to(v0, (S, *shape)))
    bshape = (S,) + (1,) * len(shape)
    obs = []
    with np.errstate(all="ignore"):
        if observe is not None:
            obs.append(np.array(observe(s.x, s.v), dtype=np.float64))
        if n:
            h0 = H[0].reshape(bshape)
            integ.start(s, h0, accel)
            if start_x_prev is not None:
                s.x_prev = np.array(start_x_prev(s, h0, accel), dtype=np.float64)
        for i in range(n):
            integ.step(s, H[i].reshape(bshape), accel)
            if observe is not None:
                obs.append(np.array(observe(s.x, s.v), dtype=np.float64))
    t = np.zeros((n + 1, S))
    np.cumsum(H, axis=0, out=t[1:])
    return BatchRun(t=t, obs=np.stack(obs) if obs else None, state=s)


def window_max(t: np.ndarray, y: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Largest ``|y|`` of each run inside each time window ``[edges[k], edges[k+1])``.

    ``t``, ``y``: ``(n+1, S)``; returns ``(len(edges) - 1, S)``; ``0`` for an empty window,
    ``inf`` once a run is non-finite there. The last window includes its right edge.
    """
    W = len(edges) - 1
    out = np.zeros((W, t.shape[1]))
    k = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, W - 1)
    a = np.abs(y)
    a = np.where(np.isfinite(a), a, np.inf)
    for j in range(t.shape[1]):
        np.maximum.at(out[:, j], k[:, j], a[:, j])
    return out
