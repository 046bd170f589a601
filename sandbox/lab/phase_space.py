"""A cat in phase space (article 002): does an integrator keep the area of a cloud of states?

The pendulum ``q'' = -sin q`` (``p = q'``, unit mass, length and gravity) is
Hamiltonian: its flow keeps the area of any region of the ``(q, p)`` plane (Liouville).
Article 002 draws a cat-shaped region. We sample the cat's outline densely (a few
hundred points, every vertex included, so the sampled polygon *is* the cat), evolve all
points as one batch (``x0`` of shape ``(k, 1)``) and measure the enclosed area with the
shoelace formula on the evolved outline.

What theory says, per step, from the Jacobian of the map ``(q, p) -> (q+, p+)``:

- explicit Euler: ``det = 1 + h^2 cos q``. The true motion of the cat stays within
  ``|q| <= 0.96 rad`` (``cos q > 0``), and Euler's outward spiral stays inside
  ``|q| < pi/2`` at ``h <= 0.05`` over ``T = 20 s``, so there its area grows at every
  step, roughly like ``exp(h t <cos q>)`` (at ``h = 0.1`` it swings past ``pi/2`` and the
  growth is no longer monotone);
- symplectic Euler, velocity Verlet, leapfrog: ``det = 1`` exactly. The region keeps
  its area; the outline drifts from the true one by the method's error ``O(h^p)``;
- RK4: not symplectic; it shrinks the area slowly (on the linear oscillator
  ``det = 1 - (w h)^6/72`` a step, and the pendulum's area error at ``T`` measures fifth
  order, as that suggests);
- position Verlet and the TCVs keep ``(x, x_prev)`` and are symplectic in *those*
  variables; their ``p`` is an estimate from three positions,
  ``p = (3 x - 4 x_prev + x_prev2)/(2h) = p_true + O(h^2)``. The ``(q, p)`` picture is a
  near-identity change of coordinates of the symplectic one: its area is off by
  ``O(h^2)`` and oscillates with the motion, but does not drift.

A polygon through the evolved points is not the evolved region: the true image has
curved edges. So every area is also compared with the same outline carried by a
reference flow (RK4 at a step 1/8 of the smallest ``h``, error ``~1e-11``):
``(A - A_ref)/A0`` is the part the integrator is responsible for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sim.integrators import INTEGRATORS, integrate
from .convergence import fit_order

#: Every registered integrator.
METHODS = tuple(INTEGRATORS)
T_END = 20.0               # s: about three periods at the cat's amplitudes
SNAPSHOTS = 5              # outlines drawn at t = 0, T/4, ..., T
H_SHOW = 0.05              # s: the step of the drawn cats
CENTRE = (0.7, 0.0)        # rad, rad/s
SIZE = 0.25                # half-width of the cat, rad

# A cat's head, counter-clockwise, in units of its half-width: chin, jaw, cheek tuft,
# right ear, the crown between the ears, left ear, left cheek tuft, jaw.
CAT = np.array([
    (0.00, -0.75), (0.30, -0.68), (0.55, -0.50), (0.72, -0.28), (0.95, -0.22),
    (0.78, -0.08), (1.00, 0.05), (0.80, 0.15), (0.78, 0.42), (0.85, 1.05),
    (0.52, 0.72), (0.25, 0.78), (0.00, 0.80), (-0.25, 0.78), (-0.52, 0.72),
    (-0.85, 1.05), (-0.78, 0.42), (-0.80, 0.15), (-1.00, 0.05), (-0.78, -0.08),
    (-0.95, -0.22), (-0.72, -0.28), (-0.55, -0.50), (-0.30, -0.68),
])


def pendulum(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``q'' = -sin q`` (rad/s^2) for angles ``x`` of any shape."""
    return -np.sin(x)


def shoelace(q: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Signed area of closed polygons with vertices along the last axis (rad^2/s)."""
    return 0.5 * np.sum(q * np.roll(p, -1, axis=-1) - np.roll(q, -1, axis=-1) * p, axis=-1)


def cat_outline(k: int = 400, centre=CENTRE, size: float = SIZE) -> np.ndarray:
    """About ``k`` points ``(k', 2)`` on the cat's outline in ``(q, p)``, every vertex kept.

    Points are spread over the edges in proportion to their length, so the polygon
    through them is exactly the cat (same area) and the outline is evenly resolved.
    """
    P = CAT * size + np.asarray(centre, float)
    Q = np.roll(P, -1, axis=0)
    length = np.hypot(*(Q - P).T)
    per = np.maximum(1, np.round(k * length / length.sum()).astype(int))
    pts = [P[i] + np.outer(np.arange(m) / m, Q[i] - P[i]) for i, m in enumerate(per)]
    return np.concatenate(pts)


@dataclass(frozen=True)
class Cloud:
    """Every sampled outline point carried by one integrator at a fixed step."""

    method: str
    h: float
    t: np.ndarray        # (n+1,) s
    q: np.ndarray        # (n+1, k) rad
    p: np.ndarray        # (n+1, k) rad/s (the integrator's velocity, estimated or kept)

    @property
    def area(self) -> np.ndarray:
        return shoelace(self.q, self.p)


def evolve(method: str, h: float, T: float = T_END, k: int = 400) -> Cloud:
    """Carry the cat's outline with ``method`` at the step ``h`` up to ``T`` (``T/h`` steps)."""
    pts = cat_outline(k)
    n = int(round(T / h))
    with np.errstate(all="ignore"):
        tr = integrate(pendulum, pts[:, :1], pts[:, 1:], np.full(n, T / n), method)
    return Cloud(method, T / n, tr.t, tr.x[..., 0], tr.v[..., 0])


def reference(steps: tuple[int, ...], T: float = T_END, k: int = 400, fine: int = 8) -> Cloud:
    """The outline carried by RK4 at ``T / (fine * max(steps))``, a multiple of every run.

    ``reference(...).area[::m]`` lines up with a run of ``n`` steps when ``m = N/n``.
    """
    N = fine * int(np.lcm.reduce(np.asarray(steps, dtype=np.int64)))
    return evolve("rk4", T / N, T, k)


def on_grid(ref: Cloud, n: int) -> Cloud:
    """The reference sampled at the times of a run of ``n`` steps."""
    m = (ref.t.size - 1) // n
    if m * n != ref.t.size - 1:
        raise ValueError(f"reference of {ref.t.size - 1} steps does not divide into {n}")
    return Cloud(ref.method, ref.h * m, ref.t[::m], ref.q[::m], ref.p[::m])


@dataclass(frozen=True)
class AreaSweep:
    method: str
    h: np.ndarray          # s
    rel_change: np.ndarray  # (A(T) - A0)/A0
    rel_error: np.ndarray   # (A(T) - A_ref(T))/A0
    order: float            # fitted order of |rel_error|


def area_sweep(method: str, hs=(0.1, 0.05, 0.025, 0.0125), T: float = T_END,
               k: int = 400, ref: Cloud | None = None) -> AreaSweep:
    """Relative area change and area error at ``T`` against the step."""
    hs = np.asarray(hs, float)
    ns = [int(round(T / h)) for h in hs]
    ref = ref or reference(tuple(ns), T, k)
    a0 = float(shoelace(ref.q[0], ref.p[0]))
    a_ref = ref.area[-1]
    change, error = [], []
    for n in ns:
        a = evolve(method, T / n, T, k).area[-1]
        change.append((a - a0) / a0)
        error.append((a - a_ref) / a0)
    error = np.array(error)
    return AreaSweep(method, T / np.array(ns), np.array(change), error,
                     fit_order(T / np.array(ns), np.abs(error)))


def snapshot_indices(n: int, count: int = SNAPSHOTS) -> np.ndarray:
    """Step indices of ``count`` evenly spaced snapshots of a run of ``n`` steps."""
    return np.round(np.linspace(0, n, count)).astype(int)


def verdict(method: str, dev: np.ndarray) -> str:
    """Classify an area-error series ``(A(t) - A_ref(t))/A0`` by what it does in time.

    ``grows``/``shrinks``: it moves the same way in at least 95% of the steps;
    otherwise ``keeps`` (it oscillates about a level). For the position-based methods
    the ``(q, p)`` map uses their velocity estimate, noted in the verdict.
    """
    d = np.diff(dev)
    if np.mean(d > 0) >= 0.95:
        out = "grows"
    elif np.mean(d < 0) >= 0.95:
        out = "shrinks"
    else:
        out = "keeps"
    if INTEGRATORS[method].position_based and out == "keeps":
        out += " to O(h^2) (p estimated)"
    return out
