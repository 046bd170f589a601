"""Article 000's orbit test: does the moon of a heavy planet stay bound at a large step?

Article 000 raises the planet's mass, keeps the step "fairly large", and shows
symplectic Euler flinging the moon off while (velocity) Verlet keeps it. Its numbers did
not survive, so we use :func:`sandbox.lab.problems.moon` (``G = 1``, planet 1000, moon 1,
distance 10, 1.1 times the circular speed: ``e = 0.21``, period ``P = 8.94 s``), and count
the step in *steps per orbit* ``P/h``.

A run is **bound** after ``N`` orbits when the two-body energy at the end is negative
and the distance never exceeded ``R_FAR = 100 m`` (ten times the start, 6.5 times the
exact apoapsis 15.3 m). Otherwise it **escaped** (a non-finite state counts as escaped).

Why symplectic Euler should *not* escape at a moderate step: at a fixed step a
symplectic method conserves a modified energy ``H + O(h)`` (``O(h^2)`` for Verlet), so
the orbit stays near a closed level set; escape needs a step so large that this
expansion fails near periapsis, where the moon is fastest. The sweep finds that step for
every integrator; all runs of one integrator share a batch (one row per step size).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sim.integrators import INTEGRATORS
from .batch import run_batch
from .problems import MOON_RADIUS, MOON_SPEED_FACTOR, Problem, moon

#: Every registered integrator.
METHODS = tuple(INTEGRATORS)
R_FAR = 100.0                 # m
LARGE_STEP_SPO = 20           # "a large step": 20 steps per orbit, h = P/20 = 0.447 s
ORBITS = 100


def moon_problem(speed: float = MOON_SPEED_FACTOR) -> tuple[Problem, float]:
    """The moon problem over one orbit, and its period ``P`` (s); ``speed`` in units of the
    circular speed."""
    p = moon(periods=1.0, speed=speed)
    return p, p.T


def apoapsis(speed: float = MOON_SPEED_FACTOR) -> float:
    """The exact orbit's largest planet-moon distance (m) for a launch ``speed`` (circular
    speeds) at ``r = 10 m``: the start itself when ``speed <= 1``."""
    e = abs(speed * speed - 1.0)
    a = MOON_RADIUS / (2.0 - speed * speed)
    return a * (1.0 + e)


def escape_distance(speed: float = MOON_SPEED_FACTOR) -> float:
    """``R_FAR`` (m), scaled with the exact apoapsis for orbits larger than the default's."""
    return R_FAR * max(1.0, apoapsis(speed) / apoapsis(MOON_SPEED_FACTOR))


def separation(x: np.ndarray) -> np.ndarray:
    """Planet-moon distance (m) of states ``x (..., 2, 2)``."""
    d = x[..., 1, :] - x[..., 0, :]
    return np.sqrt(np.sum(d * d, axis=-1))


@dataclass(frozen=True)
class Sweep:
    """One integrator over steps-per-orbit values ``spo (k,)``, ``orbits`` orbits each."""

    method: str
    orbits: int
    spo: np.ndarray
    bound: np.ndarray          # bool (k,)
    energy_ratio: np.ndarray   # final energy / initial energy (negative: now unbound)
    r_max: np.ndarray          # m, max distance over the run
    escape_orbit: np.ndarray   # first orbit at which r > R_FAR (nan if never)

    def at(self, spo: int) -> int:
        return int(np.flatnonzero(self.spo == spo)[0])

    @property
    def largest_escaping(self) -> int | None:
        """The largest steps-per-orbit in the sweep at which the moon escaped."""
        esc = self.spo[~self.bound]
        return int(esc.max()) if esc.size else None

    @property
    def smallest_always_bound(self) -> int | None:
        """The smallest steps-per-orbit from which every larger one in the sweep is bound."""
        if not self.bound[-1]:
            return None
        bad = np.flatnonzero(~self.bound)
        return int(self.spo[bad[-1] + 1]) if bad.size else int(self.spo[0])


def sweep(method: str, spo: np.ndarray, orbits: int = ORBITS,
          speed: float = MOON_SPEED_FACTOR) -> Sweep:
    """Run the moon at every ``spo`` value at once (rows of one batch) for ``orbits``.

    ``speed``: launch speed in circular speeds; escaped means r above
    :func:`escape_distance` (``R_FAR`` up to the default speed) or ``E >= 0`` at the end.
    """
    p, P = moon_problem(speed)
    r_far = escape_distance(speed)
    spo = np.asarray(spo, dtype=int)
    S = spo.size
    h = P / spo
    n_row = orbits * spo
    n = int(n_row.max())
    e0 = float(p.energy(p.x0, p.v0))
    # Every row takes its own h; a row that has done its orbits keeps stepping (cheaper
    # than ragged batches) but nothing after its end is recorded.
    r_max = np.zeros(S)
    e_end = np.full(S, np.nan)
    escape = np.full(S, np.nan)
    step = [0]

    def observe(x, v):
        i = step[0]
        live = i <= n_row
        r = separation(x)
        r = np.where(np.isfinite(r), r, np.inf)
        np.copyto(r_max, np.fmax(r_max, r), where=live)
        e = p.energy(x, v)
        np.copyto(e_end, e, where=(i == n_row))
        new = live & np.isnan(escape) & (r > r_far)
        escape[new] = i / spo[new]
        step[0] += 1
        return np.zeros(0)

    run_batch(p.accel, p.x0, p.v0, np.broadcast_to(h, (n, S)), method, observe=observe)
    ratio = e_end / e0
    bound = np.isfinite(ratio) & (ratio > 0) & (r_max <= r_far)
    return Sweep(method, orbits, spo, bound, ratio, r_max, escape)


def trajectory(method: str, spo: int, orbits: float) -> tuple[np.ndarray, np.ndarray]:
    """The moon's position relative to the planet, ``(n+1, 2)`` m, and times ``(n+1,)`` s."""
    p, P = moon_problem()
    n = int(round(orbits * spo))
    run = run_batch(p.accel, p.x0, p.v0, np.full(n, P / spo), method,
                    observe=lambda x, v: x[..., 1, :] - x[..., 0, :])
    return run.obs[:, 0], run.t[:, 0]


def exact_orbit(k: int = 400) -> np.ndarray:
    """The exact relative orbit (an ellipse), ``(k, 2)`` m."""
    p, P = moon_problem()
    x, _ = p.exact(np.linspace(0.0, P, k))
    return x[:, 1] - x[:, 0]


def ranges(xs) -> str:
    """``[9, 10, 11, 14]`` -> ``"9-11, 14"`` (an empty list gives ``""``)."""
    out, start = [], None
    xs = list(xs)
    for i, x in enumerate(xs):
        if start is None:
            start = x
        if i + 1 == len(xs) or xs[i + 1] != x + 1:
            out.append(f"{start}-{x}" if x != start else f"{x}")
            start = None
    return ", ".join(out)
