"""A headless demo: every integrator on article 000's moon orbit, one line each, and
what to conclude from the table, drawn from its own numbers."""

from __future__ import annotations

import numpy as np

from ..sim.integrators import INTEGRATORS, integrate
from .problems import moon


def _angle(x: np.ndarray) -> float:
    """The moon's angle around the planet (rad) in a state ``x (2, 2)``."""
    d = x[1] - x[0]
    return float(np.arctan2(d[1], d[0]))


def run_demo(steps_per_period: int = 40, periods: int = 20) -> int:
    p = moon(periods=periods)
    n = steps_per_period * periods
    h = p.T / n
    e0 = float(p.energy(p.x0, p.v0))
    print(f"Article 000's moon: planet 1000, moon 1, r = 10, G = 1; h = {h:.4f} s, "
          f"{n} steps ({periods} orbits)")
    print(f"{'integrator':18s} {'order':>5s} {'sympl.':>6s} {'max |dE/E0|':>12s} "
          f"{'final r':>9s}  {'position error':>14s}  {'phase error':>12s}")
    xe, _ = p.exact(np.array([p.T]))
    rows = {}
    for name, integ in INTEGRATORS.items():
        with np.errstate(all="ignore"):
            tr = integrate(p.accel, p.x0, p.v0, np.full(n, h), name)
            e = p.energy(tr.x, tr.v)
            drift = float(np.nanmax(np.abs((e - e0) / e0)))
            r = float(np.linalg.norm(tr.x[-1, 1] - tr.x[-1, 0]))
            err = float(np.max(np.abs(tr.x[-1] - xe[0])))
            lag = np.degrees(_angle(tr.x[-1]) - _angle(xe[0]))
        lag = float((lag + 180.0) % 360.0 - 180.0)
        rows[name] = (integ, drift, err, lag, tr.x[-1], r)
        print(f"{name:18s} {integ.order:5d} {str(integ.symplectic):>6s} {drift:12.3e} "
              f"{r:9.3f}  {err:14.3e}  {lag:+8.1f} deg")
    print()
    for line in conclusions(rows, radius=float(np.linalg.norm(p.x0[1] - p.x0[0]))):
        print(line)
    return 0


def conclusions(rows: dict, radius: float) -> list[str]:
    """What the table says, in sentences built from its numbers: ``rows[name] =
    (integrator, max |dE/E0|, position error, phase error in degrees, final state,
    final planet-moon distance)``; ``radius`` the exact orbit's."""
    out = []
    drift = {k: v[1] for k, v in rows.items()}
    best, worst = min(drift, key=drift.get), max(drift, key=drift.get)
    out.append(f"Energy is the fair score at this step: it falls with the order and stays "
               f"bounded for the symplectic methods ({best} best at {drift[best]:.1e}, "
               f"{worst} worst at {drift[worst]:.1e}).")
    # Still on an orbit near the right one, but far from the exact moon's place on it.
    lost = [k for k, v in rows.items() if v[2] > radius and v[5] < 2 * radius]
    if lost:
        out.append(f"The position error is not, once a method has lost the moon's place "
                   f"on its orbit ({len(lost)} of them here, phase errors up to "
                   f"{max(abs(rows[k][3]) for k in lost):.0f} degrees): the distance to the "
                   f"exact moon then only says where on the circle each one is, at most the "
                   f"two radii added (~{2 * radius:.0f}), so a larger phase error can show a "
                   f"smaller position error.")
        names = [k for k in lost if k == "velocity_verlet"] + [
            k for k in lost if k == "symplectic_euler"]
        if len(names) == 2 and rows[names[0]][2] > rows[names[1]][2]:
            vv, se = rows[names[0]], rows[names[1]]
            out.append(f"That is why velocity Verlet's position error ({vv[2]:.1f}) sits above "
                       f"symplectic Euler's ({se[2]:.1f}): its moon is {abs(vv[3]):.0f} degrees "
                       f"off, symplectic Euler's {abs(se[3]):.0f}, on an orbit whose energy "
                       f"velocity Verlet keeps {se[1] / vv[1]:.0f} times better.")
    ref = rows.get("velocity_verlet")
    same = [k for k, v in rows.items() if ref is not None and k != "velocity_verlet"
            and v[0].position_based and np.allclose(v[4], ref[4], rtol=1e-9, atol=1e-9)]
    if same:
        out.append(f"{', '.join(same)} follow velocity Verlet's positions exactly (the same "
                   f"trajectory at a fixed step); their larger energy error is their velocity, "
                   f"estimated from positions, not their motion.")
    return out
