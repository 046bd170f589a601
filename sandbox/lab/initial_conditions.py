"""Starting position Verlet from ``(x0, v0)``: the naive ``x_prev`` against article 001's eq. (2).

Position Verlet keeps ``(x, x_prev)``, so a start from ``(x0, v0)`` must invent
``x_prev = x(-h)``. The naive guess ``x0 - v0 h`` drops the ``a0 h^2/2`` of the Taylor
series ``x(-h) = x0 - v0 h + a0 h^2/2 - ...`` that article 001's equation (2) keeps.

What the naive start costs: the scheme's implied starting velocity
``(x0 - x_prev)/h`` is off by ``a0 h/2``, and Verlet carries a velocity error along
for ever. For constant acceleration the error solves ``e+ = 2e - e_prev`` with
``e_0 = 0``, ``e_-1 = -a h^2/2``, so ``e_n = n a h^2/2 = a h t/2``: linear in time, first
order in ``h``. With eq. (2) position Verlet is second order, and exact for a
projectile (a polynomial of degree two). Both starts are run here with ``verlet``
(identical to both TCVs at a fixed step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batch import run_batch
from .convergence import fit_order, roundoff_floor
from .problems import Problem, oscillator, projectile

STARTS = ("naive", "eq2")
PROBLEMS = ("projectile", "oscillator")
METHOD = "verlet"


def setup(name: str) -> tuple[Problem, tuple[int, ...]]:
    """A problem and its family of step counts (fixed steps over ``[0, T]``)."""
    if name == "projectile":
        return projectile(), (10, 20, 40, 80, 160, 320, 640)
    if name == "oscillator":
        return oscillator(T=10.0), (50, 100, 200, 400, 800, 1600, 3200)
    raise ValueError(f"unknown problem {name!r}; valid: {', '.join(PROBLEMS)}")


def naive_x_prev(s, h, accel) -> np.ndarray:
    """``x_prev = x0 - v0 h``: the start article 001 warns against."""
    return s.x - h * s.v


def run_start(p: Problem, start: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Times ``(n+1,)`` s and max-norm position errors ``(n+1,)`` m of one fixed-step run."""
    if start not in STARTS:
        raise ValueError(f"unknown start {start!r}; valid: {', '.join(STARTS)}")
    run = run_batch(p.accel, p.x0, p.v0, np.full(n, p.T / n), METHOD,
                    observe=lambda x, v: x,
                    start_x_prev=naive_x_prev if start == "naive" else None)
    t = run.t[:, 0]
    xe, _ = p.exact(t)
    err = np.max(np.abs(run.obs[:, 0] - xe).reshape(t.size, -1), axis=1)
    return t, err


@dataclass(frozen=True)
class StartSweep:
    problem: str
    start: str
    n: np.ndarray          # step counts
    h: np.ndarray          # s
    err: np.ndarray        # m, position error at T
    order: float           # fitted order (nan when exact)
    exact: bool            # every error at round-off level


def start_sweep(problem: str, start: str, counts: tuple[int, ...] | None = None) -> StartSweep:
    """Position error at ``T`` against the step for one start."""
    p, default = setup(problem)
    counts = tuple(counts or default)
    err = np.array([run_start(p, start, n)[1][-1] for n in counts])
    ns = np.array(counts)
    h = p.T / ns
    exact = bool(p.polynomial and all(err[j] <= roundoff_floor(p, n)
                                      for j, n in enumerate(counts)))
    return StartSweep(problem, start, ns, h, err, float("nan") if exact else fit_order(h, err),
                      exact)


def naive_error_theory(p: Problem, t: np.ndarray, h: float) -> np.ndarray:
    """The naive start's error for constant acceleration: ``|a| h t / 2`` (m)."""
    a = np.abs(p.accel(p.x0, p.v0)).max()
    return a * h * np.asarray(t) / 2.0
