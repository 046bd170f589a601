"""Test problems with exact solutions: an acceleration field paired with its solution.

Each :class:`Problem` gives ``accel(x, v)``, initial conditions, a time span and
``exact(t) -> (x, v)`` evaluated in closed form (Kepler orbits through Kepler's
equation, solved by Newton's method to round-off). The lab and the tests run every
integrator against every problem; nothing here depends on an integrator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Problem:
    """``x'' = accel(x, v)`` from ``(x0, v0)`` at ``t = 0`` over ``[0, T]``.

    ``exact(t)`` takes ``t (k,)`` and returns ``x, v`` shaped ``(k, *x0.shape)``.
    ``energy(x, v)`` is the conserved energy per unit mass (or ``None``).
    ``steps`` maps a method's order to a family of step counts that is in the
    asymptotic regime for that order and above round-off in float64.
    ``accel`` and ``exact`` accept a leading batch axis (many runs at once).
    ``polynomial`` is True when the solution is a polynomial of degree <= 2 in t, so
    any consistent second-order method integrates it exactly.
    """

    name: str
    title: str
    x0: np.ndarray
    v0: np.ndarray
    T: float
    accel: Callable[[np.ndarray, np.ndarray], np.ndarray]
    exact: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    energy: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    steps: dict[int, tuple[int, ...]] = field(default_factory=dict)
    polynomial: bool = False

    def step_counts(self, order: int) -> tuple[int, ...]:
        return self.steps.get(order) or self.steps[min(self.steps, key=lambda o: abs(o - order))]


# --- projectile ---------------------------------------------------------------------

def projectile(g: float = 9.81, v0=(3.0, 12.0), T: float = 2.0) -> Problem:
    """Constant acceleration ``(0, -g)``: ``x = x0 + v0 t + a t^2/2`` exactly."""
    a = np.array([0.0, -g])
    x0 = np.zeros(2)
    v0 = np.asarray(v0, dtype=float)

    def accel(x, v):
        return np.broadcast_to(a, x.shape).copy()

    def exact(t):
        t = np.asarray(t, float)[:, None]
        return x0 + v0 * t + 0.5 * a * t * t, v0 + a * t

    def energy(x, v):
        return 0.5 * np.sum(v * v, axis=-1) + g * x[..., 1]

    return Problem("projectile", "Projectile, constant g", x0, v0, T, accel, exact, energy,
                   steps={1: (20, 40, 80, 160, 320, 640), 2: (20, 40, 80, 160, 320, 640),
                          4: (20, 40, 80, 160, 320, 640)}, polynomial=True)


# --- harmonic oscillator ------------------------------------------------------------

def oscillator(omega: float = 1.0, x0: float = 1.0, v0: float = 0.0, T: float = 10.0) -> Problem:
    """``x'' = -w^2 x`` as a scalar of shape ``(1,)``: ``x = x0 cos wt + v0/w sin wt``."""
    w2 = omega * omega

    def accel(x, v):
        return -w2 * x

    def exact(t):
        t = np.asarray(t, float)[:, None]
        c, s = np.cos(omega * t), np.sin(omega * t)
        return x0 * c + (v0 / omega) * s, -x0 * omega * s + v0 * c

    def energy(x, v):
        return 0.5 * (v[..., 0] ** 2 + w2 * x[..., 0] ** 2)

    return Problem("oscillator", f"Harmonic oscillator, w = {omega:g} rad/s",
                   np.array([x0]), np.array([v0]), T, accel, exact, energy,
                   steps={1: (1000, 2000, 4000, 8000, 16000, 32000),
                          2: (100, 200, 400, 800, 1600, 3200),
                          4: (100, 200, 400, 800, 1600)})


# --- Kepler orbits ------------------------------------------------------------------

def kepler_propagate(x0, v0, mu: float, t):
    """Exact two-body (Kepler) motion of an elliptic orbit, 2-D, from ``(x0, v0)``.

    Lagrange f and g functions in the eccentric-anomaly difference ``dE``, which is
    regular for circular orbits (no angle of periapsis is needed)::

        n t = dE - (1 - r0/a) sin dE + s0 (1 - cos dE),   s0 = (x0.v0)/sqrt(mu a)
        x = f x0 + g v0,   v = fd x0 + gd v0

    Kepler's equation is solved by Newton's method to round-off. Returns ``x, v``
    of shape ``(k, 2)`` for ``t (k,)``.
    """
    x0 = np.asarray(x0, float)
    v0 = np.asarray(v0, float)
    t = np.atleast_1d(np.asarray(t, float))
    r0 = float(np.hypot(*x0))
    energy = 0.5 * float(v0 @ v0) - mu / r0
    if energy >= 0:
        raise ValueError("kepler_propagate handles bound (elliptic) orbits only")
    a = -mu / (2.0 * energy)
    n = np.sqrt(mu / a**3)
    s0 = float(x0 @ v0) / np.sqrt(mu * a)
    c0 = 1.0 - r0 / a
    M = n * t
    dE = M.copy()
    for _ in range(100):
        f = dE - c0 * np.sin(dE) + s0 * (1.0 - np.cos(dE)) - M
        fp = 1.0 - c0 * np.cos(dE) + s0 * np.sin(dE)
        step = f / fp
        dE -= step
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(dE))):
            break
    cE, sE = np.cos(dE), np.sin(dE)
    r = a + (r0 - a) * cE + s0 * a * sE
    fF = 1.0 - (a / r0) * (1.0 - cE)
    gG = t + (sE - dE) / n
    fd = -np.sqrt(mu * a) * sE / (r * r0)
    gd = 1.0 - (a / r) * (1.0 - cE)
    x = fF[:, None] * x0 + gG[:, None] * v0
    v = fd[:, None] * x0 + gd[:, None] * v0
    return x, v


def kepler(e: float = 0.0, mu: float = 1.0, a: float = 1.0, periods: float = 1.3,
           name: str | None = None) -> Problem:
    """A particle around a fixed centre of gravitational parameter ``mu`` (m^3/s^2).

    Starts at periapsis ``r = a (1 - e)`` with the vis-viva speed; runs ``periods``
    orbital periods ``2 pi sqrt(a^3/mu)``. Not a whole number by default: after exactly
    one period the first-order error terms of symplectic Euler (its half-kick offset
    ``h/2 (a(x_T) - a(x_0))``) and of TCV (``~ h (v_T - v_0)``) cancel, and both would
    look second order.
    """
    rp = a * (1.0 - e)
    x0 = np.array([rp, 0.0])
    v0 = np.array([0.0, np.sqrt(mu * (1.0 + e) / rp)])
    T = periods * 2.0 * np.pi * np.sqrt(a**3 / mu)

    def accel(x, v):
        r2 = np.sum(x * x, axis=-1, keepdims=True)
        return -mu * x / (r2 * np.sqrt(r2))

    def exact(t):
        return kepler_propagate(x0, v0, mu, t)

    def energy(x, v):
        return 0.5 * np.sum(v * v, axis=-1) - mu / np.sqrt(np.sum(x * x, axis=-1))

    # RK4 needs more steps than its error size suggests before its slope settles at 4.
    if e == 0:
        steps = {1: (2000, 4000, 8000, 16000, 32000, 64000),
                 2: (100, 200, 400, 800, 1600, 3200),
                 4: (200, 400, 800, 1600, 3200)}
    else:
        steps = {1: (8000, 16000, 32000, 64000, 128000),
                 2: (400, 800, 1600, 3200, 6400),
                 4: (400, 800, 1600, 3200, 6400)}
    title = "Circular Kepler orbit" if e == 0 else f"Kepler orbit, e = {e:g}"
    return Problem(name or ("kepler_circular" if e == 0 else "kepler_eccentric"), title,
                   x0, v0, T, accel, exact, energy, steps=steps)


# --- article 000: a moon around a heavy planet, both free ---------------------------

MOON_G = 1.0
MOON_PLANET_MASS = 1000.0
MOON_MASS = 1.0
MOON_RADIUS = 10.0
MOON_SPEED_FACTOR = 1.1     # times the circular speed: a mildly eccentric orbit (e = 0.21)


def moon(periods: float = 1.3, speed: float = MOON_SPEED_FACTOR) -> Problem:
    """Article 000's toy orbit: a heavy planet and a light moon, both free, ``x (2, 2)``.

    Units ``G = 1``; planet mass 1000, moon mass 1 at distance 10. The article's own
    numbers did not survive, so ours are stated here and in the orbit level. The exact
    solution: the centre of mass (at rest at the origin) does not move and the relative
    vector follows a Kepler orbit with ``mu = G (M + m)``. ``speed``: the launch speed in
    units of the circular speed (below ``sqrt 2``, the escape speed, so the orbit is bound).
    """
    G, M, m, r = MOON_G, MOON_PLANET_MASS, MOON_MASS, MOON_RADIUS
    mu = G * (M + m)
    rel_x0 = np.array([r, 0.0])
    rel_v0 = np.array([0.0, speed * np.sqrt(mu / r)])
    masses = np.array([M, m])
    wx = np.array([-m / (M + m), M / (M + m)])     # body = com + w * relative
    x0 = wx[:, None] * rel_x0
    v0 = wx[:, None] * rel_v0
    energy0 = 0.5 * rel_v0 @ rel_v0 - mu / r
    a = -mu / (2 * energy0)
    T = periods * 2 * np.pi * np.sqrt(a**3 / mu)

    def accel(x, v):
        d = x[..., 1, :] - x[..., 0, :]
        r3 = np.sum(d * d, axis=-1, keepdims=True) ** 1.5
        f = G * d / r3
        return np.stack([m * f, -M * f], axis=-2)

    def exact(t):
        rx, rv = kepler_propagate(rel_x0, rel_v0, mu, t)
        return wx[None, :, None] * rx[:, None, :], wx[None, :, None] * rv[:, None, :]

    def energy(x, v):
        ke = 0.5 * np.sum(masses[:, None] * v * v, axis=(-1, -2))
        d = x[..., 1, :] - x[..., 0, :]
        return ke - G * M * m / np.sqrt(np.sum(d * d, axis=-1))

    return Problem("moon", "Article 000: moon of a heavy planet (two free bodies)", x0, v0, T,
                   accel, exact, energy,
                   steps={1: (8000, 16000, 32000, 64000, 128000),
                          2: (200, 400, 800, 1600, 3200),
                          4: (200, 400, 800, 1600, 3200)})


def all_problems() -> dict[str, Problem]:
    """Every lab problem by name, in the order the reports list them."""
    ps = [projectile(), oscillator(), kepler(0.0), kepler(0.5), moon()]
    return {p.name: p for p in ps}
