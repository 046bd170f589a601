"""The mouse spring: how a person's hand pulls a particle, as Box2D's mouse joint does.

Pinning the grabbed particle to the cursor with infinite mass lets a hand apply any
force: a dragged cloth corner stretched its links past 1000 % and the cloth was flung
over its own pins on release. Box2D's mouse joint is instead a stiff, damped spring
with a *maximum force*; we write it as an XPBD constraint (Macklin, Mueller and
Chentanez 2016, "XPBD", eqs. 18 and 26) so that it is unconditionally stable whatever
the particle's mass, and solve it with the distance constraints in every iteration.

The constraint is the vector ``C = x_k - p`` (zero rest length, ``p`` the cursor in
m). With a spring of stiffness ``k = M w^2`` and damping ``b = 2 zeta M w`` (``M`` the
mass of the body the particle belongs to, ``w = 2 pi hertz``: the body follows the hand
like a damped oscillator of that frequency and damping ratio ``zeta``), XPBD's
compliance is ``alpha = 1/k``, ``alpha~ = alpha/h^2``, ``gamma = alpha~ b h``, and one
iteration is::

    dlam = (-C - alpha~ lam - gamma ((x_k - x_k_prev) - (p - p_prev))) / ((1 + gamma) w_k + alpha~)
    x_k += w_k dlam

The damping acts on the velocity relative to the hand (Box2D damps the absolute one,
which makes a body trail a steadily moving hand by ``2 zeta v / w``); the hand glides to
each new cursor position over a step's substeps.

The force the spring exerts over the substep is ``lam / h^2``; clamping ``|lam|`` to
``F_max h^2`` caps it at ``F_max = max_weight * M * g``: a hand can swing, lift and
throw a body at up to ``max_weight`` times its weight, never more, so the solver's
links are never asked to carry an unbounded load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

#: Box2D's samples: 5 Hz, damping ratio 0.7. The force limit: a hand lifts a body at
#: up to this many times its weight (measured in tests/test_mouse.py: a cloth corner
#: dragged at 5 m/s stays below 40 % stretch; a ball still leaves the hand at 10 m/s).
HERTZ = 5.0
DAMPING_RATIO = 0.7
MAX_WEIGHT = 3.0
#: The weight of a body in a world without gravity (an orbit) is taken at 9.81 m/s^2.
G_REF = 9.81


def component(n: int, i: np.ndarray, j: np.ndarray, k: int) -> np.ndarray:
    """Sorted indices of the particles linked to ``k`` through the pairs ``(i, j)`` (links
    and springs): the body a hand holds. Breadth first over a CSR adjacency, one numpy
    pass a level (a 200x200 cloth: ~400 levels, a few ms)."""
    i = np.asarray(i, np.int64)
    j = np.asarray(j, np.int64)
    if not len(i):
        return np.array([k], np.int64)
    a = np.concatenate([i, j])
    b = np.concatenate([j, i])
    order = np.argsort(a, kind="stable")
    nbr = b[order]
    start = np.searchsorted(a[order], np.arange(n + 1))
    seen = np.zeros(n, bool)
    seen[k] = True
    frontier = np.array([k], np.int64)
    while len(frontier):
        lo, hi = start[frontier], start[frontier + 1]
        counts = hi - lo
        if not counts.sum():
            break
        # Every neighbour of the frontier: the ranges [lo, hi) concatenated.
        idx = np.repeat(lo - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        new = np.unique(nbr[idx])
        new = new[~seen[new]]
        seen[new] = True
        frontier = new
    return np.flatnonzero(seen)


@dataclass
class MouseSpring:
    """A hand: springs from the particles ``idx`` to ``target + offset`` (m).

    The hand holds a patch, not a point: every movable particle of the body within the
    pick radius, each at its offset from the grab point (a rigid hand that does not
    turn). The spring's stiffness, damping and force limit are shared among them in
    proportion to their mass, so the patch moves as one spring of the body's mass
    would move it; spreading the pull over a patch is what keeps a fine cloth's links
    from carrying the whole load through one particle (a 200x200 cloth held by one
    1 g particle stretched its links 30-fold).

    ``body_mass`` kg (the whole connected body) sets the stiffness and the force
    limit; ``g`` m/s^2 the weight. ``lam (k, 2)`` are the XPBD multipliers of the
    current substep, reset by :meth:`begin`.
    """

    idx: np.ndarray
    offset: np.ndarray
    target: np.ndarray
    body_mass: float
    g: float = G_REF
    hertz: float = HERTZ
    damping_ratio: float = DAMPING_RATIO
    max_weight: float = MAX_WEIGHT
    lam: np.ndarray = field(default=None)            # type: ignore[arg-type]
    _x0: np.ndarray = field(default=None)            # type: ignore[arg-type]

    def __post_init__(self) -> None:
        self.idx = np.asarray(self.idx, np.int64).reshape(-1)
        self.offset = np.asarray(self.offset, float).reshape(-1, 2)
        self.target = np.asarray(self.target, float).reshape(2)
        self.lam = np.zeros((len(self.idx), 2))
        self._x0 = np.zeros((len(self.idx), 2))
        # The hand moves once a frame (a mouse event); within a step it glides from
        # where it was to the new target over the substeps, and the damping acts on
        # the velocity *relative to the hand*: a hand moving steadily is followed
        # without lag, as a held object follows a hand.
        self._at = self.target.copy()                # the hand at the end of the last step
        self._now = self.target.copy()               # the hand during this substep
        self._moved = np.zeros(2)                    # and how far it moved in it
        self._frac = 1.0
        self._from = self.target.copy()

    @property
    def k(self) -> int:
        """The particle the hand took first (the nearest to the cursor)."""
        return int(self.idx[0])

    @property
    def stiffness(self) -> float:
        """``k = M w^2`` in N/m."""
        w = 2.0 * math.pi * self.hertz
        return self.body_mass * w * w

    @property
    def damping(self) -> float:
        """``b = 2 zeta M w`` in N s/m."""
        return 2.0 * self.damping_ratio * self.body_mass * 2.0 * math.pi * self.hertz

    @property
    def max_force(self) -> float:
        """``F_max = max_weight M g`` in N."""
        return self.max_weight * self.body_mass * max(self.g, 1e-9)

    def anchors(self) -> np.ndarray:
        """Where the springs pull each held particle to at the end of the step (the
        cursor plus each particle's offset), ``(k, 2)`` m."""
        return self.target + self.offset

    def start_step(self, substeps: int) -> None:
        """A step of ``substeps`` substeps begins: the hand glides from where it was to
        ``target`` over them."""
        self._frac = 1.0 / max(int(substeps), 1)
        self._from = self._at.copy()

    def begin(self, x_old: np.ndarray) -> None:
        """A new substep: move the hand on, zero the multipliers and remember where the
        particles were before the integrator moved them (the damping term reads the
        displacement relative to the hand's)."""
        goal = self.target
        step = (goal - self._from) * self._frac
        nxt = self._now + step
        # Land exactly on the target at the end of the step (no round-off creep).
        if np.dot(goal - nxt, step) <= 0:
            nxt = goal.copy()
        self._moved = nxt - self._now
        self._now = nxt
        self._at = nxt
        self.lam[:] = 0.0
        self._x0 = np.asarray(x_old[self.idx], dtype=float)

    def project(self, x: np.ndarray, inv_mass: np.ndarray, h: float) -> None:
        """One XPBD iteration of the springs on ``x (n, 2)`` in place (module docstring)."""
        w = np.asarray(inv_mass[self.idx], float)
        live = w > 0                                   # pinned meanwhile: nothing moves
        if not live.any():
            return
        m = np.where(live, 1.0 / np.where(live, w, 1.0), 0.0)
        share = m / m.sum()                            # of k, b and F_max, by mass
        xk = np.asarray(x[self.idx], float)
        with np.errstate(divide="ignore", invalid="ignore"):
            a = np.where(live, 1.0 / (self.stiffness * share * h * h), np.inf)   # alpha~
        gamma = (self.damping / self.stiffness) / h    # alpha~ b h, the same for all
        C = xk - (self._now + self.offset)
        denom = ((1.0 + gamma) * w + a)[:, None]
        rel = (xk - self._x0) - self._moved             # displacement relative to the hand
        with np.errstate(invalid="ignore"):
            dlam = (-C - a[:, None] * self.lam - gamma * rel) / denom
        dlam[~live] = 0.0
        lam = self.lam + dlam
        cap = self.max_force * share * h * h
        norm = np.hypot(lam[:, 0], lam[:, 1])
        over = norm > cap
        lam[over] *= (cap[over] / norm[over])[:, None]
        dlam = lam - self.lam
        self.lam = lam
        x[self.idx] = xk + w[:, None] * dlam

    def force(self, h: float) -> np.ndarray:
        """The total force (N) the hand applied over the last substep of length ``h``."""
        return self.lam.sum(axis=0) / (h * h)
