"""The stable region of every integrator over (w h, c h) for a damped oscillator.

``x'' = -w^2 x - c v`` from ``x0 = 1``, ``v0 = 1``. A linear method's step depends on ``w``,
``c`` and ``h`` only through ``w h`` and ``c h``, so every run takes ``h = 1`` with
``w = w h`` and ``c = c h``. The map is a ``RES x RES`` grid of ``(w h, c h)`` in
``[0, Z_MAX]^2``; every point is one run of ``N_STEPS`` steps, and a point is *unstable*
when the amplitude ``sqrt(w^2 x^2 + v^2)`` (the energy norm; ``|v|`` on the ``w = 0`` axis,
as in :mod:`sandbox.lab.stability`) exceeds ``THRESHOLD`` times its start. The map keeps
the step at which that happened, which shows how fast a method blows up past its edge.

A case of the sweep is ``ROWS`` consecutive values of ``w h`` (a row block of ``ROWS x
RES`` runs stacked on one batch axis): numpy's cost per step barely grows with the batch
at these sizes, so larger cases are cheaper per run.

Theory, two ways:

- on the axes, the closed forms of :mod:`sandbox.lab.stability`: undamped (``c h = 0``,
  the imaginary axis) symplectic Euler and the whole Verlet family are stable for
  ``w h < 2``, RK4 for ``w h < 2 sqrt 2``; undamped explicit Euler grows at any step
  (after ``N`` steps the bound is crossed at ``w h = sqrt(1000^(2/N) - 1)``); pure
  damping (``w h = 0``, the real axis): both Eulers to ``c h = 2``, RK4 to ``2.785``,
  the velocity-Verlet and position-Verlet families to ``c h = 1``;
- everywhere, the spectral radius ``rho`` of the method's one-step map. The step of a
  linear method is a linear map of its state ``(x, v, x_prev, a)``; applying one step to
  the four unit states gives its 4 x 4 matrix, and the method is stable where ``rho < 1``
  (``rho = 1`` on the undamped axis of a symplectic method: stable too). A run of ``N``
  steps crosses a ``1000x`` bound only where ``rho^N`` can reach it, so the measured map may
  call a point with ``rho`` just above 1 stable (about ``rho < 1000^(1/N)``, a little more
  when the start barely excites the growing mode): those points hug the boundary, and the
  experiment counts them. Explicit Euler is the one method with a visible band of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sim.integrators import INTEGRATORS, get_integrator
from ..sim.particles import State

#: Every registered integrator.
METHODS = tuple(INTEGRATORS)
RES = 400
Z_MAX = 3.2           # no analytic edge falls on a grid point (2/dz = 249.4 at RES 400)
N_STEPS = 2000
THRESHOLD = 1000.0
ROWS = 8              # rows of w h per case
RHO_TOL = 1e-9        # rho <= 1 + RHO_TOL counts as stable (rounding of the eigenvalues)
CHECK_EVERY = 50      # steps between checks for "every run of the case has blown up"


def grid(res: int = RES, z_max: float = Z_MAX) -> np.ndarray:
    """The ``res`` values of ``w h`` (and of ``c h``), from 0 to ``z_max``."""
    return np.linspace(0.0, z_max, res)


def _accel(w: np.ndarray, c: np.ndarray):
    w2 = w * w

    def accel(x, v):
        return -w2 * x - c * v
    return accel


def blowup_steps(method: str, w: np.ndarray, c: np.ndarray, n: int = N_STEPS,
                 threshold: float = THRESHOLD) -> np.ndarray:
    """Step at which each run's amplitude first exceeded ``threshold`` x its start (0: never).

    ``w``, ``c``: ``(S,)`` values of ``w h`` and ``c h`` (``h = 1``). Returns int32 ``(S,)``.
    """
    integ = get_integrator(method)
    w = np.asarray(w, float)[:, None]
    c = np.asarray(c, float)[:, None]
    S = w.shape[0]
    accel = _accel(w, c)
    s = State.from_xv(np.ones((S, 1)), np.ones((S, 1)))
    bound = threshold * np.sqrt(w[:, 0] ** 2 + 1.0)
    first = np.zeros(S, np.int32)
    with np.errstate(all="ignore"):
        integ.start(s, 1.0, accel)
        for i in range(1, n + 1):
            integ.step(s, 1.0, accel)
            a = np.sqrt(w[:, 0] ** 2 * s.x[:, 0] ** 2 + s.v[:, 0] ** 2)
            new = (first == 0) & ~(a <= bound)          # nan and inf count as blown up
            first[new] = i
            if i % CHECK_EVERY == 0 and np.all(first):
                break
    return first


def one_step_matrices(method: str, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``(S, 4, 4)``: the method's step as a linear map of ``(x, v, x_prev, a)`` at ``h = 1``.

    Column ``k`` is the state after one step from the ``k``-th unit state (``a_valid``
    set, so velocity Verlet and leapfrog take the kept ``a`` as a state variable; the
    others overwrite what they do not read, which adds zero eigenvalues only).
    """
    integ = get_integrator(method)
    w = np.asarray(w, float)[:, None]
    c = np.asarray(c, float)[:, None]
    S = w.shape[0]
    accel = _accel(w, c)
    M = np.empty((S, 4, 4))
    for k in range(4):
        e = [np.full((S, 1), 1.0 if j == k else 0.0) for j in range(4)]
        s = State(x=e[0], v=e[1], x_prev=e[2], a=e[3], h_prev=1.0, t=0.0, a_valid=True)
        integ.step(s, 1.0, accel)
        for j, arr in enumerate((s.x, s.v, s.x_prev, s.a)):
            M[:, j, k] = np.broadcast_to(arr, (S, 1))[:, 0]
    return M


def spectral_radius(method: str, w: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``rho`` of the one-step map at each ``(w h, c h)``."""
    with np.errstate(all="ignore"):
        return np.max(np.abs(np.linalg.eigvals(one_step_matrices(method, w, c))), axis=-1)


@dataclass(frozen=True)
class Rows:
    """A block of the map: rows ``row0 .. row0 + k - 1`` of ``w h``, all ``res`` of ``c h``."""

    method: str
    row0: int
    steps: np.ndarray     # int32 (k, res): step of blow-up, 0 if stable over the run
    rho: np.ndarray       # (k, res): spectral radius of the one-step map


def map_rows(method: str, row0: int, rows: int = ROWS, res: int = RES, n: int = N_STEPS,
             z_max: float = Z_MAX) -> Rows:
    """One case of the sweep: ``rows`` rows of the map of ``method``."""
    z = grid(res, z_max)
    wz = z[row0:row0 + rows]
    w = np.repeat(wz, res)
    c = np.tile(z, wz.size)
    steps = blowup_steps(method, w, c, n).reshape(wz.size, res)
    rho = spectral_radius(method, w, c).reshape(wz.size, res)
    return Rows(method, row0, steps, rho)


def cases(res: int = RES, n: int = N_STEPS, rows: int = ROWS, methods=METHODS) -> list[dict]:
    return [{"method": m, "row0": r, "rows": rows, "res": res, "n": n}
            for m in methods for r in range(0, res, rows)]


@dataclass(frozen=True)
class Map:
    method: str
    z: np.ndarray          # (res,) the values of w h (rows) and c h (columns)
    n: int
    steps: np.ndarray      # int32 (res, res) [w index, c index]; 0 = stable
    rho: np.ndarray        # (res, res)

    @property
    def stable(self) -> np.ndarray:
        return self.steps == 0

    @property
    def theory(self) -> np.ndarray:
        return self.rho <= 1.0 + RHO_TOL

    def axis_edge(self, axis: str) -> tuple[float, float]:
        """Along ``c h = 0`` ("undamped", w h varies) or ``w h = 0`` ("damping"): the last
        stable value of the run of stable points from 0, and the first unstable one
        (``inf`` if none)."""
        line = self.stable[:, 0] if axis == "undamped" else self.stable[0, :]
        bad = np.flatnonzero(~line)
        if not bad.size:
            return float(self.z[-1]), float("inf")
        k = int(bad[0])
        return (float(self.z[k - 1]) if k else float("nan")), float(self.z[k])

    def disagreement(self) -> dict:
        """Where the runs and ``rho`` disagree: ``stable_rho_above_1`` points measured
        stable with ``rho > 1`` (growth too slow to reach the bound in ``n`` steps from this
        start), ``unstable_rho_at_most_1`` points that blew up with ``rho <= 1``, and the
        largest ``|rho - 1|`` among all of them (0 if none)."""
        a = self.stable & ~self.theory
        b = ~self.stable & self.theory
        diff = a | b
        return {"points": int(diff.sum()), "stable_rho_above_1": int(a.sum()),
                "unstable_rho_at_most_1": int(b.sum()),
                "max_rho_gap": float(np.abs(self.rho[diff] - 1).max()) if diff.any() else 0.0}


def assemble(blocks: list[Rows], res: int = RES, n: int = N_STEPS,
             z_max: float = Z_MAX) -> dict[str, Map]:
    """The sweep's row blocks, in case order, as one map per method."""
    out: dict[str, Map] = {}
    by: dict[str, list[Rows]] = {}
    for b in blocks:
        by.setdefault(b.method, []).append(b)
    for m, bs in by.items():
        bs.sort(key=lambda b: b.row0)
        out[m] = Map(m, grid(res, z_max), n, np.concatenate([b.steps for b in bs]),
                     np.concatenate([b.rho for b in bs]))
    return out


def axis_theory(method: str, axis: str, n: int = N_STEPS) -> float:
    """The closed-form edge on an axis; explicit Euler undamped: the ``n``-step bound."""
    from .stability import THEORY, euler_finite_n
    if axis == "undamped":
        return euler_finite_n(n) if method == "euler" else THEORY["oscillator"][method]
    return THEORY["damping"][method]
