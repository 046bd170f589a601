"""Velocities from Verlet positions, and the orders behind "4th order" (article 004).

Position Verlet keeps positions only; a velocity has to be read off them (article 004).
From a position Verlet run at a fixed step ``h`` (positions themselves ``O(h^2)``
accurate globally), at every interior step ``i``:

``backward``  ``(x_i - x_{i-1}) / h``                  order 1 (off by ``a h/2``)
``forward``   ``(x_{i+1} - x_i) / h``                  order 1 (off by ``-a h/2``)
``central``   ``(x_{i+1} - x_{i-1}) / (2h)``           order 2; it is exactly velocity
              Verlet's velocity (the two methods are one map when started consistently)
``own``       the integrator's three-point backward estimate
              ``(3 x_i - 4 x_{i-1} + x_{i-2}) / (2h)``, order 2 and needing no future
              position (it is what the sandbox shows live).

Errors are the largest max-norm difference from the exact velocity over the run.

Why article 004 says "O(dt^4)" and "velocity Verlet is two orders worse": those are
*local* errors, of one step started from exact data. Position Verlet's step
``x+ = 2x - x_prev + a h^2`` errs by ``x'''' h^4/12``; velocity Verlet's
``x+ = x + v h + a h^2/2`` by ``x''' h^3/6``. Global errors are what a user sees: a
two-step method's local errors accumulate twice (``n^2 h^4 = T^2 h^2``), a one-step
method's once (``n h^3 = T h^2``), so both are second order globally, and in fact the
same trajectory. :func:`local_sweep` measures the local orders of every integrator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sim.integrators import INTEGRATORS, get_integrator, integrate
from ..sim.particles import State
from .convergence import fit_order
from .problems import Problem, kepler, oscillator

ESTIMATES = ("backward", "forward", "central", "own")
EXPECTED = {"backward": 1, "forward": 1, "central": 2, "own": 2}
PROBLEMS = ("oscillator", "kepler_eccentric")
#: Local error of one step from exact data, in position (``Integrator.local_order``).
LOCAL_THEORY = {m: integ.local_order for m, integ in INTEGRATORS.items()}


def setup(name: str) -> tuple[Problem, tuple[int, ...]]:
    """A problem and its family of step counts for the velocity estimates.

    The eccentric orbit needs small steps: at periapsis the backward difference's
    second-order part adds to its first-order ``a h/2`` and its slope reads 1.4 at 400
    steps an orbit, settling to 1.02 by 25600.
    """
    if name == "oscillator":
        return oscillator(T=10.0), (100, 200, 400, 800, 1600, 3200)
    if name == "kepler_eccentric":
        return kepler(0.5), (1600, 3200, 6400, 12800, 25600)
    raise ValueError(f"unknown problem {name!r}; valid: {', '.join(PROBLEMS)}")


def estimate_errors(p: Problem, n: int) -> dict[str, float]:
    """Largest velocity error (m/s) of each estimate over a position Verlet run of ``n`` steps.

    Also ``"vv_gap"``: the largest difference between the central difference and
    velocity Verlet's own velocity, and ``"x_gap"`` between the two methods' positions.
    """
    h = p.T / n
    dts = np.full(n, h)
    tr = integrate(p.accel, p.x0, p.v0, dts, "verlet")
    vv = integrate(p.accel, p.x0, p.v0, dts, "velocity_verlet")
    x = tr.x
    _, ve = p.exact(tr.t)
    i = slice(1, n)                   # interior steps: both neighbours exist
    est = {
        "backward": (x[1:n] - x[0:n - 1]) / h,
        "forward": (x[2:] - x[1:n]) / h,
        "central": (x[2:] - x[0:n - 1]) / (2 * h),
        "own": tr.v[i],
    }
    out = {k: float(np.max(np.abs(e - ve[i]))) for k, e in est.items()}
    out["vv_gap"] = float(np.max(np.abs(est["central"] - vv.v[i])))
    out["x_gap"] = float(np.max(np.abs(tr.x - vv.x)))
    return out


@dataclass(frozen=True)
class EstimateSweep:
    problem: str
    n: np.ndarray
    h: np.ndarray                       # s
    err: dict[str, np.ndarray]          # estimate -> (k,) m/s
    order: dict[str, float]
    vv_gap: float                       # max |central - velocity Verlet v| over the sweep
    x_gap: float                        # max |x_verlet - x_velocity_verlet|


def estimate_sweep(problem: str, counts: tuple[int, ...] | None = None) -> EstimateSweep:
    """Velocity-estimate errors against the step, and their fitted orders."""
    p, default = setup(problem)
    counts = tuple(counts or default)
    rows = [estimate_errors(p, n) for n in counts]
    ns = np.array(counts)
    h = p.T / ns
    err = {k: np.array([r[k] for r in rows]) for k in ESTIMATES}
    return EstimateSweep(problem, ns, h, err, {k: fit_order(h, e) for k, e in err.items()},
                         max(r["vv_gap"] for r in rows), max(r["x_gap"] for r in rows))


def local_error(p: Problem, method: str, h: float, t0: float = 1.0) -> float:
    """Position error of one step of ``h`` from the exact state at ``t0`` (m).

    Position-based integrators start from the exact ``x(t0 - h)`` as ``x_prev``.
    """
    integ = get_integrator(method)
    (x0, xm), (v0, _) = p.exact(np.array([t0, t0 - h]))
    s = State.from_xv(x0, v0)
    integ.start(s, h, p.accel)
    if integ.position_based:
        s.x_prev = xm.copy()
        s.h_prev = h
    integ.step(s, h, p.accel)
    xe, _ = p.exact(np.array([t0 + h]))
    return float(np.max(np.abs(s.x - xe[0])))


@dataclass(frozen=True)
class LocalSweep:
    problem: str
    h: np.ndarray                        # s
    err: dict[str, np.ndarray]           # method -> (k,) m
    order: dict[str, float]


def local_sweep(problem: str, hs=(0.1, 0.05, 0.025, 0.0125, 0.00625)) -> LocalSweep:
    """Local (one-step) position error against ``h`` for every integrator."""
    p, _ = setup(problem)
    hs = np.asarray(hs, float)
    err = {m: np.array([local_error(p, m, h) for h in hs]) for m in INTEGRATORS}
    return LocalSweep(problem, hs, err, {m: fit_order(hs, e) for m, e in err.items()})
