"""Where each integrator lets article 000's moon escape: fate over (steps per orbit, speed).

The orbit experiment (:mod:`sandbox.lab.orbit`) launches the moon at 1.1 times the
circular speed and sweeps the step. Here the launch speed varies too, from ``SPEEDS[0]``
to ``SPEEDS[-1]`` circular speeds at ``r = 10 m`` (the exact orbit is bound below
``sqrt 2``; eccentricity ``|s^2 - 1|``: a slow launch starts at apoapsis and dives close
to the planet, a fast one swings far out), and for every integrator and speed the moon
runs ``ORBITS`` orbits at every step from ``SPO[0]`` to ``SPO[1]`` steps per (exact)
orbit. Fate as in the orbit experiment: **escaped** when the energy at the end is not
negative, the state is not finite, or the distance exceeded :func:`orbit.escape_distance`
(100 m, scaled with the exact apoapsis for the faster launches); otherwise **bound**.

A case is one integrator at one speed: every step size of the row runs in one batch, so
the row at 1.1 circular speeds is the orbit experiment's sweep, number for number.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import orbit as ob

METHODS = ob.METHODS
SPEEDS = tuple(float(s) for s in np.round(np.arange(0.70, 1.3001, 0.02), 2))
SPO = (4, 100)
ORBITS = ob.ORBITS
QUICK_SPEEDS = (0.8, 1.1, 1.3)
QUICK_SPO = (4, 24)
QUICK_ORBITS = 10


def escape_row(method: str, speed: float, spo_lo: int, spo_hi: int, orbits: int) -> ob.Sweep:
    """One case: ``method`` at launch ``speed`` over ``spo_lo .. spo_hi`` steps per orbit."""
    return ob.sweep(method, np.arange(spo_lo, spo_hi + 1), orbits, speed)


def cases(speeds=SPEEDS, spo=SPO, orbits: int = ORBITS, methods=METHODS) -> list[dict]:
    return [{"method": m, "speed": float(s), "spo_lo": spo[0], "spo_hi": spo[1],
             "orbits": orbits} for m in methods for s in speeds]


@dataclass(frozen=True)
class EscapeMap:
    method: str
    orbits: int
    speeds: np.ndarray         # (k,) circular speeds
    spo: np.ndarray            # (j,) steps per orbit
    bound: np.ndarray          # bool (k, j)
    escape_orbit: np.ndarray   # (k, j) first orbit beyond the escape distance (nan: never)

    def bound_from(self) -> list[int | None]:
        """Per speed: the smallest steps per orbit from which every larger one is bound."""
        out = []
        for row in self.bound:
            if not row[-1]:
                out.append(None)
                continue
            bad = np.flatnonzero(~row)
            out.append(int(self.spo[bad[-1] + 1]) if bad.size else int(self.spo[0]))
        return out

    @property
    def escaped_share(self) -> float:
        return float(np.mean(~self.bound))


def assemble(sweeps: list[ob.Sweep], cases_: list[dict]) -> dict[str, EscapeMap]:
    """The sweep's rows, in case order, as one map per integrator (speeds ascending)."""
    rows: dict[str, list[tuple[float, ob.Sweep]]] = {}
    for s, c in zip(sweeps, cases_, strict=True):
        rows.setdefault(c["method"], []).append((c["speed"], s))
    out = {}
    for m, rs in rows.items():
        rs.sort(key=lambda r: r[0])
        out[m] = EscapeMap(m, rs[0][1].orbits, np.array([r[0] for r in rs]), rs[0][1].spo,
                           np.stack([r[1].bound for r in rs]),
                           np.stack([r[1].escape_orbit for r in rs]))
    return out
