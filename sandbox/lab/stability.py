"""The largest stable step of every integrator, measured and from theory.

Two linear test problems, because a method's stability region is a region of the
complex plane and these probe two edges of it:

``oscillator``  ``x'' = -w^2 x`` (eigenvalues ``+-i w``: the imaginary axis); ``w h``.
``damping``     ``x'' = -c v`` (``v' = -c v``: the negative real axis); ``c h``.

A run is *stable* when its amplitude, ``sqrt(x^2 + (v/w)^2)`` or ``|v|``, stays below
``THRESHOLD`` times its start over ``N`` steps. ``THRESHOLD`` is 1000, not 10: near
``w h = 2`` symplectic Euler's invariant ellipse ``x^2 - h x v + v^2 = 1`` (``w = 1``) has
a long axis ``1/sqrt(1 - w h/2)``, so a 10x bound would already stop at ``w h = 1.98``.

The limit is found by a vectorised bisection: a grid of ``GRID`` values of ``w h`` runs
as one batch, the first unstable one and its stable neighbour bracket the limit, and the
bracket is gridded again (``LEVELS`` times, ``6/GRID^LEVELS`` wide at the end).

Theory (``z = w h`` or ``c h``; ``R`` the step's amplification):

- oscillator: explicit Euler ``|R|^2 = 1 + z^2``: it grows at *every* ``h > 0``
  (limit 0; after ``N`` steps the 1000x bound is crossed at
  ``z = sqrt(1000^(2/N) - 1)``); symplectic Euler, velocity Verlet, leapfrog, position
  Verlet and both TCVs at a fixed step share ``tr = 2 - z^2``, ``det = 1``: stable for
  ``z < 2``; RK4 ``|R(iz)|^2 = 1 - z^6/72 + z^8/576``: ``z < 2 sqrt 2 = 2.828``. (2.785 is
  RK4's limit on the *real* axis, below.)
- damping: both Eulers ``R = 1 - z``: ``z < 2``; RK4 ``R = 1 - z + z^2/2 - z^3/6 +
  z^4/24``: ``z < 2.785``. Velocity Verlet and leapfrog evaluate the new force with the
  predicted velocity ``v + h a`` and keep it for the next step, so the state is
  ``(v, a)``: ``lambda^2 - (1 - 3z/2) lambda - z/2 = 0``, a root crosses ``-1`` at
  ``z = 1``. Position Verlet's force uses its three-point velocity estimate
  ``v_n = (3 u_n - u_{n-1})/2`` of the differences ``u_n = (x_n - x_{n-1})/h``, which
  gives the same polynomial: ``z < 1``. Velocity-dependent forces halve their limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sim.integrators import INTEGRATORS
from .batch import run_batch

#: Every registered integrator.
METHODS = tuple(INTEGRATORS)
PROBLEMS = ("oscillator", "damping")
THRESHOLD = 1000.0
GRID = 256
LEVELS = 2
Z_MAX = 6.0


#: Each method's stability edge on each problem, as the integrator states it
#: (``Integrator.stability``).
THEORY = {problem: {m: integ.stability[problem] for m, integ in INTEGRATORS.items()}
          for problem in PROBLEMS}


def euler_finite_n(n: int, threshold: float = THRESHOLD) -> float:
    """Explicit Euler on the oscillator: the ``w h`` at which ``n`` steps grow ``threshold``x."""
    return float(np.sqrt(threshold ** (2.0 / n) - 1.0))


def _problem(name: str):
    if name == "oscillator":
        return (lambda x, v: -x), np.array([1.0]), np.array([0.0]), \
            (lambda x, v: np.sqrt(x * x + v * v)[:, 0])
    if name == "damping":
        return (lambda x, v: -v), np.array([0.0]), np.array([1.0]), \
            (lambda x, v: np.abs(v)[:, 0])
    raise ValueError(f"unknown stability problem {name!r}; valid: {', '.join(PROBLEMS)}")


def unstable(method: str, problem: str, z: np.ndarray, n: int,
             threshold: float = THRESHOLD) -> np.ndarray:
    """For each ``z = w h`` (``c h``; ``w = c = 1``): did the amplitude exceed ``threshold``?"""
    accel, x0, v0, amplitude = _problem(problem)
    z = np.asarray(z, float)
    peak = np.zeros(z.size)

    def observe(x, v):
        a = amplitude(x, v)
        np.fmax(peak, np.where(np.isfinite(a), a, np.inf), out=peak)
        return np.zeros(0)

    run_batch(accel, x0, v0, np.broadcast_to(z, (n, z.size)), method, observe=observe)
    return peak > threshold


@dataclass(frozen=True)
class Limit:
    method: str
    problem: str
    n: int                  # steps per run
    limit: float            # largest stable z found (midpoint of the last bracket)
    bracket: tuple[float, float]
    theory: float
    capped: bool            # no instability found up to Z_MAX

    @property
    def rel_error(self) -> float:
        return abs(self.limit - self.theory) / self.theory if self.theory else float("nan")


def stable_limit(method: str, problem: str, n: int = 20000, grid: int = GRID,
                 levels: int = LEVELS, z_max: float = Z_MAX) -> Limit:
    """The largest stable ``z`` by vectorised bisection (see the module docstring)."""
    lo, hi = 0.0, z_max
    capped = False
    for _ in range(levels):
        z = lo + (hi - lo) * np.arange(1, grid + 1) / grid
        bad = unstable(method, problem, z, n)
        if not bad.any():
            capped = True
            lo = hi
            break
        j = int(np.argmax(bad))
        lo, hi = (lo if j == 0 else float(z[j - 1])), float(z[j])
    return Limit(method, problem, n, hi if capped else 0.5 * (lo + hi), (lo, hi),
                 THEORY[problem][method], capped)
