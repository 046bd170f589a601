"""A headless demo: every integrator on article 000's moon orbit, one line each."""

from __future__ import annotations

import numpy as np

from ..sim.integrators import INTEGRATORS, integrate
from .problems import moon


def run_demo(steps_per_period: int = 40, periods: int = 20) -> int:
    p = moon(periods=periods)
    n = steps_per_period * periods
    h = p.T / n
    e0 = float(p.energy(p.x0, p.v0))
    print(f"Article 000's moon: planet 1000, moon 1, r = 10, G = 1; h = {h:.4f} s, "
          f"{n} steps ({periods} orbits)")
    print(f"{'integrator':18s} {'order':>5s} {'sympl.':>6s} {'max |dE/E0|':>12s} "
          f"{'final r':>9s}  {'position error':>14s}")
    xe, _ = p.exact(np.array([p.T]))
    for name, integ in INTEGRATORS.items():
        with np.errstate(all="ignore"):
            tr = integrate(p.accel, p.x0, p.v0, np.full(n, h), name)
            e = p.energy(tr.x, tr.v)
            drift = float(np.nanmax(np.abs((e - e0) / e0)))
            r = float(np.linalg.norm(tr.x[-1, 1] - tr.x[-1, 0]))
            err = float(np.max(np.abs(tr.x[-1] - xe[0])))
        print(f"{name:18s} {integ.order:5d} {str(integ.symplectic):>6s} {drift:12.3e} "
              f"{r:9.3f}  {err:14.3e}")
    return 0
