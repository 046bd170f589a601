"""The contact solver: one substep's contacts with static shapes, walls and other
particles, in two backends, and a whole frame of them compiled.

One substep (``pipeline.substep`` drives it; Müller et al., "Detailed Rigid Body
Simulation with Extended Position Based Dynamics", 2020, sec. 3.5-3.6, and Macklin et
al., "Small Steps in Physics Simulation", 2019)::

    Colliders.begin()      broad phase (:mod:`.broad`), then continuous detection
                           (:meth:`Contacts.sweep`, a bounded time-of-impact loop: the
                           path stops at its first hit and the rest slides along the hit
                           face, swept again against every shape, never into an earlier
                           hit's plane; a particle that starts on or inside a shape
                           cannot move into the face it is on), the bounds walls
    Contacts.project()     in every constraint iteration: particle pairs, then shapes,
                           then walls; out along the normal of the face the path crossed,
                           friction in position space (at most mu times the normal
                           correction: static below it, kinetic above)
    Contacts.finish()      after the integrator's fold: the velocity pass (restitution
                           along each hit's own normal, at the time of impact for swept
                           hits, the rest of the Coulomb friction)

:class:`Contacts` is the numpy reference, vectorised over the contacts. The compiled
twins (:func:`begin`, :func:`project`, :func:`finish`, with ``broad.pair_list``) hold one
substep's contacts flat (:class:`_FlatContacts`); :func:`frame` runs all the substeps of
a Verlet-family world's frame in one call.

The compiled twins give the same numbers as the reference, bit for bit
(``tests/test_contact_kernels.py``):

- Every formula is the reference's, operation by operation and in its order, in the float
  types numpy gives it. In a float32 world a Python float next to a float32 array stays
  float32 (NEP 50), so those constants are rounded with ``_as`` before use (numba would
  widen the array instead); shape geometry is float64, so distances to shapes are float64
  in both.
- A contact with a static shape moves only its own particle, and the reference solves a
  particle's contacts one after another (shape type by shape type, then by rank batch, which
  follows the pair order). Walking the same contact list in order repeats that, particle by
  particle.
- Particle pairs are one Jacobi pass: every pair reads the same positions and the sums run
  over the pairs in list order, as ``np.bincount`` adds them; the pair list is built in the
  reference's order.
- The reference's ``np.where(ok, a / _safe(b), other)`` becomes ``a / b if ok else other``:
  ``ok`` implies ``b != 0``, so the quotient is the same and the discarded one is skipped.

Only signed zeros may differ (``np.maximum`` picks either zero on a tie), which no
later operation turns into a different value.

Hot loops never reassign an array variable (outputs go to arrays sized up front, and a
function that runs out of room returns -1 for its caller to retry with more): numba
reference-counts such a variable on every pass, which made the loops four times slower.
Nor does a substep allocate: :func:`frame` gives the contact stages arrays made once a
frame (:func:`begin_space`, :func:`finish_space`; ``begin_into``, ``finish_into``), and
:func:`begin` and :func:`finish` make their own for the substep path.
A particle index read from an index array (pairs, contacts, rows) is cast to ``uint64``
before use: numba tests every signed index for a negative value (wraparound), which cost
the velocity pass's pair sweep 30 % of its time; the indices are valid particle numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..kernels import _project_batches
from ..kernels import add_scaled_difference as _add_scaled_difference
from ..kernels import link_factors as _link_factors
from ..kernels import soft_scratch as _soft_scratch
from ..kernels import sweep_factored as _sweep_factored
from ..kernels import verlet_step as _verlet_step
from .broad import (
    _MASK_SHAPES,
    _broad_phase,
    _brute_masks,
    _first_per_particle,
    _PairList,
    any_moving,
    moved_less,
    pair_list,
    rank_batches,
    shape_boxes,
)
from .geometry import (
    INF,
    MU,
    SEGMENT,
    WALL,
    E,
    _contact_distance,
    _distance,
    _dot,
    _safe,
    _side,
    _sweep,
)
from .jit import _as, _key, _max, _min, _unkey, jit, jit_borrow, jit_inline

if TYPE_CHECKING:
    from .shapes import ShapeSet


# ------------------------------------------------------------------- tolerances

#: A projected or swept particle is left this far (m) outside the surface, so that the next
#: substep starts on a definite side even of a zero-thickness segment (float64 round-off on
#: coordinates of order 1e3 m is 1e-13 m). Scaled up for float32 worlds (see ``_tolerances``).
SKIN = 1e-9


#: Closer than ``radius + TOUCH`` (m) counts as touching: such a contact takes part in the
#: velocity pass, and a path that starts this close is resolved by projection, not swept
#: (a particle resting on or sliding along a surface must keep its tangential motion).
TOUCH = 1e-7


#: Extra reach (m) of a particle's box in the broad phase, for the distance the
#: constraint iterations move it after detection; plus its displacement this substep.
MARGIN = 1e-3


#: Up to this many (particle, shape) pairs the broad phase tests them all in one numpy
#: comparison, cheaper than the grid's bookkeeping; both give the same pairs (a test).
BRUTE_PAIRS = 20_000


#: Hits per particle and substep in the time-of-impact loop of ``Contacts.sweep``: a
#: ball in a corner or a wedge needs two (the second stops it), a third is rare.
MAX_HITS = 4
#: A slide along a new contact plane may enter an earlier plane by this fraction of its
#: length (two faces in one line, round-off) before it counts as a crease that stops it.
DIR_TOL = 1e-9
#: 1/c for the contact counts c of the Jacobi averaging (entry 0 unused).
_RECIP = 1.0 / np.maximum(np.arange(64.0), 1.0)


def _tolerances(x: np.ndarray) -> tuple[float, float]:
    """``(skin, touch)`` in m: the constants, or more for float32 coordinates, where
    ``16 eps |x|`` is the round-off of a position."""
    eps = float(np.finfo(x.dtype).eps)
    scale = 1.0 + (float(np.abs(x).max()) if x.size else 0.0)
    skin = max(SKIN, 16.0 * eps * scale)
    return skin, max(TOUCH, 100.0 * skin)

# ---------------------------------------------------------- the numpy reference

@dataclass
class _Group:
    """Candidate (particle, shape) pairs of one shape type in one substep."""

    shapes: ShapeSet
    pi: np.ndarray
    si: np.ndarray
    r: np.ndarray           # particle radius per pair
    e: np.ndarray
    mu: np.ndarray
    ref: np.ndarray | None
    batches: list[np.ndarray]
    depth: np.ndarray       # normal correction made so far this substep, m
    touched: np.ndarray     # projected or swept this substep
    stuck: np.ndarray       # static friction held it at its last projection
    gap: np.ndarray | None = None   # distance beyond contact at the start of the substep, m
    used: np.ndarray | None = None  # friction spent in the velocity pass, m/s
    spent: np.ndarray | None = None  # friction spent on the positions this substep, m
    nrm: np.ndarray | None = None   # the normal of the last sweep hit or projection
    n0: np.ndarray | None = None    # the normal at the start, for starts on or inside
    vhit: np.ndarray | None = None  # normal velocity at a sweep's bouncing impact, m/s
    tau: np.ndarray | None = None   # when in the substep (0..1) the sweep hit it

    def __post_init__(self):
        self.used = np.zeros(self.pi.size)
        self.spent = np.zeros(self.pi.size)
        self.nrm = np.zeros((self.pi.size, 2))
        self.vhit = np.zeros(self.pi.size)
        self.tau = np.zeros(self.pi.size)


@dataclass
class _Pairs:
    """Candidate particle pairs of one substep, with their particles numbered ``0..m-1``
    (``a``, ``b`` index ``nodes``) so the Jacobi sums run over the ``m`` involved only."""

    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    b: np.ndarray
    nodes: np.ndarray
    reach: np.ndarray       # r_i + r_j
    e: float
    mu: float
    depth: np.ndarray
    touched: np.ndarray
    stuck: np.ndarray
    used: np.ndarray | None = None  # friction spent in the velocity pass, m/s

    def __post_init__(self):
        self.used = np.zeros(self.i.size)


@dataclass
class Contacts:
    """One substep's contacts: shape groups, particle pairs, and the position corrections
    ``dx`` they made (projection, static friction, swept cuts): the velocity pass starts
    from the velocity without them."""

    x0: np.ndarray
    skin: float
    touch: float
    dx: np.ndarray
    groups: list[_Group] = field(default_factory=list)
    pairs: _Pairs | None = None

    def __bool__(self) -> bool:
        return bool(self.groups) or self.pairs is not None

    def add_group(self, shapes, pi, si, r, x0, e_def, mu_def, path=None, disp=None) -> None:
        """Keep the candidate pairs that can touch this substep. With the ``path``es, a
        pair whose start is farther from the shape than 1.5 times its path length plus
        ``MARGIN`` is dropped (the broad phase's boxes are loose around long or slanted
        shapes); the start distance is kept for the sweep."""
        gap = None
        if path is not None and pi.size:
            d0, _, _ = shapes.distance(x0[pi], si)
            gap = d0 - r[pi]
            near = gap < 1.5 * disp[pi] + MARGIN
            pi, si, gap = pi[near], si[near], gap[near]
        if not pi.size:
            return
        e = np.where(np.isnan(shapes.e[si]), e_def, shapes.e[si])
        mu = np.where(np.isnan(shapes.mu[si]), mu_def, shapes.mu[si])
        ref = shapes.reference(x0[pi], si)
        g = _Group(shapes, pi, si, r[pi], e, mu, ref, rank_batches(pi), np.zeros(pi.size),
                   np.zeros(pi.size, bool), np.zeros(pi.size, bool), gap)
        if gap is not None:
            # Starts on or inside the shape: the normal there, a plane for the sweep.
            g.n0 = np.zeros((pi.size, 2))
            k = np.flatnonzero(gap <= self.touch)
            if k.size:
                g.n0[k] = shapes.contact(x0[pi[k]], si[k], None if ref is None else ref[k],
                                         x0[pi[k]])[2]
        self.groups.append(g)

    def set_pairs(self, L: _PairList, w, e, mu) -> None:
        moving = (w[L.i] > 0) | (w[L.j] > 0)
        k = np.flatnonzero(moving)
        if k.size:
            self.pairs = _Pairs(L.i[k], L.j[k], L.a[k], L.b[k], L.nodes, L.reach[k],
                                float(e), float(mu), np.zeros(k.size), np.zeros(k.size, bool),
                                np.zeros(k.size, bool))

    # --- continuous detection ------------------------------------------------------------

    def sweep(self, p, path: np.ndarray, v0: np.ndarray | None = None,
              a: np.ndarray | None = None, h: float = 0.0, v_th: float = INF) -> None:
        """Continuous detection: move every particle along its path as far as the
        shapes let it, a bounded time-of-impact loop as Box2D's (at most ``MAX_HITS``
        hits a substep).

        From ``x0`` the path ``x1 - x0`` is swept against every candidate shape (a disc
        of the particle's radius against the shape: a ray against the shape grown by
        it, corners rounded). At the earliest hit the particle stops on the surface
        (``skin`` outside) and the rest of its path loses its approach along the hit's
        normal (it slides); the rest is swept again, against every shape, until nothing
        is hit. Every hit's normal joins a list of planes this substep, and the rest of
        the path must not enter any of them: when the slide along the new plane would
        enter an earlier one (a wedge, a corner), the particle stops there. Friction
        acts on the slide as on a projection: it shortens the rest by up to ``mu``
        times the approach that was cut. A pair that starts on or inside its shape
        (``gap <= touch``) is a plane at time 0 with the normal at the start, the face
        it rests on: its path can never go through that face, however thin the shape.
        If the loop runs out of hits the particle stays at the last point reached.

        A hit bounces at its time of impact. The loop follows each particle's time
        ``tau`` (fraction of the substep ``h``) and its velocity, from ``v0`` (the
        velocity at the start of the substep) under the acceleration ``a``: a hit at
        fraction ``t`` of the rest of the path is at ``tau + t (1 - tau)``, where the
        velocity is ``vel + a h (tau' - tau)``. If its normal part ``vn`` approaches
        faster than ``v_th`` and the contact has restitution ``e > 0``, the particle
        leaves the face at ``-e vn``: the rest of its path gains the climb
        ``-e vn T + (a.n) T^2/2`` along the normal (``T = (1 - tau) h``, the time
        left; none if it would not leave the face), unless that enters an earlier
        plane. The contact keeps ``vn`` (``vhit``) and ``tau`` for the velocity pass.
        Without ``v0`` nothing bounces here (the velocity pass's older rule then).

        Each hit contact counts as touched, with its normal (the velocity pass uses the
        hit face's normal), its cut approach as depth and the friction it spent.
        """
        x0, x1 = self.x0, p.x
        gs = [g for g in self.groups if g.gap is not None]
        if not gs:
            return
        q = np.unique(np.concatenate([g.pi for g in gs]))
        m = q.size
        loc = [np.searchsorted(q, g.pi) for g in gs]
        pos = x0[q].astype(np.float64)
        end = x1[q].astype(np.float64)
        planes = np.zeros((m, MAX_HITS, 2))
        count = np.zeros(m, np.int64)
        live = np.ones(m, bool)
        moved = np.zeros(m, bool)
        unused = [g.gap <= self.touch for g in gs]          # starts on or inside
        bouncing = v0 is not None
        if bouncing:
            tau = np.zeros(m)
            vel = v0[q].astype(np.float64)
            acc = np.broadcast_to(a, x0.shape)[q].astype(np.float64)
        for it in range(MAX_HITS + 1):
            t_all, n_all = [], []
            for g, lg, st in zip(gs, loc, unused, strict=True):
                t = np.full(g.pi.size, np.inf)
                n = np.zeros((g.pi.size, 2))
                on = live[lg]
                k = np.flatnonzero(on & st)
                if k.size:
                    rest = end[lg[k]] - pos[lg[k]]
                    into = _dot(rest, g.n0[k]) < 0
                    t[k[into]] = 0.0
                    n[k[into]] = g.n0[k[into]]
                far = on & (g.gap > self.touch)
                if it == 0:                     # a path shorter than the gap cannot hit
                    far &= _dot(path[g.pi], path[g.pi]) >= g.gap * g.gap
                k = np.flatnonzero(far)
                if k.size:
                    hit, th, nh = g.shapes.sweep(pos[lg[k]], end[lg[k]], g.si[k], g.r[k])
                    t[k[hit]] = th[hit]
                    n[k[hit]] = nh[hit]
                t_all.append(t)
                n_all.append(n)
            # Each particle's earliest hit, ties to the first contact in order.
            best = np.full(m, np.inf)
            which = np.full(m, -1)
            for gi, (lg, t) in enumerate(zip(loc, t_all, strict=True)):
                k = np.flatnonzero(np.isfinite(t))
                if not k.size:
                    continue
                o = _first_per_particle(lg[k], t[k])
                k, r = k[o], lg[k[o]]
                better = t[k] < best[r]
                k, r = k[better], r[better]
                best[r] = t[k]
                which[r] = gi * (1 << 40) + k
            hits = np.flatnonzero(live & (which >= 0))
            free = np.flatnonzero(live & (which < 0))
            pos[free] = end[free]
            live[free] = False
            if not hits.size:
                break
            if it == MAX_HITS:                  # out of hits: stay at the last point
                live[hits] = False
                break
            gsel = which[hits] >> 40
            ksel = which[hits] & ((1 << 40) - 1)
            t = best[hits]
            n = np.zeros((hits.size, 2))
            mu = np.zeros(hits.size)
            e = np.zeros(hits.size)
            swept = np.zeros(hits.size, bool)
            for gi, g in enumerate(gs):
                s = gsel == gi
                if s.any():
                    n[s] = n_all[gi][ksel[s]]
                    mu[s] = g.mu[ksel[s]]
                    e[s] = g.e[ksel[s]]
                    swept[s] = g.gap[ksel[s]] > self.touch
            rest = end[hits] - pos[hits]
            rem = (1.0 - t)[:, None] * rest
            c = pos[hits] + t[:, None] * rest
            cut = np.minimum(_dot(rem, n), 0.0)
            ra = rem - cut[:, None] * n                      # the approach dropped
            la = np.sqrt(_dot(ra, ra))
            P, cnt = planes[hits], count[hits]
            ok = ((_dot(P, ra[:, None, :]) >= -DIR_TOL * la[:, None])
                  | (np.arange(MAX_HITS) >= cnt[:, None])).all(axis=1)
            la = np.where(ok, la, 0.0)
            budget = mu * -cut
            stick = (la > 0) & (la < budget)
            f = np.where(stick | (la == 0), 0.0, 1.0 - budget / np.where(la > 0, la, 1.0))
            rem2 = np.where(ok[:, None], ra, 0.0) * f[:, None]
            spent = np.where(stick, la, np.where(la > 0, budget, 0.0))
            new = np.where(swept[:, None], c + self.skin * n, c)
            vn = np.zeros(hits.size)
            tau_h = np.zeros(hits.size)
            if bouncing:
                # The time and the velocity of the impact; a bounce climbs off the face.
                # Along the normal the path is exact under a constant acceleration
                # whatever the chord: vn^2 = vn0^2 + 2 an dn over the normal distance
                # dn to the face, in the time 2 dn / (vn0 + vn). Else the chord's time.
                t0 = tau[hits]
                vel_h, acc_h = vel[hits], acc[hits]
                vn0 = _dot(vel_h, n)
                an = _dot(acc_h, n)
                dn = _dot(c - pos[hits], n)
                s2 = vn0 * vn0 + 2.0 * an * dn
                vnh = -np.sqrt(np.maximum(s2, 0.0))
                den = vn0 + vnh
                exact = (s2 > 0) & (den < 0) & (dn <= 0)
                left = h * (1.0 - t0)
                dt = np.where(exact, 2.0 * dn / np.where(exact, den, 1.0),
                              h * (t * (1.0 - t0)))
                dt = np.minimum(dt, left)
                tau_h = t0 + dt / h
                vh = vel_h + acc_h * dt[:, None]
                vhn = _dot(vh, n)
                vn = np.where(exact, vnh, vhn)
                up = (e > 0) & (vn < -v_th)
                T = left - dt
                climb = np.maximum(-e * vn * T + 0.5 * an * T * T, 0.0)
                clear = ((_dot(P, n[:, None, :]) >= -DIR_TOL)
                         | (np.arange(MAX_HITS) >= cnt[:, None])).all(axis=1)
                climb = np.where(up & clear, climb, 0.0)
                rem2 = rem2 + climb[:, None] * n
                vnew = np.where(up, -e * vn, np.maximum(vn, 0.0))
                vel[hits] = vh + (vnew - vhn)[:, None] * n
                tau[hits] = tau_h
                vn = np.where(up, vn, 0.0)
            pos[hits] = new
            end[hits] = new + rem2
            planes[hits, cnt] = n
            count[hits] += 1
            moved[hits] = True
            for gi, g in enumerate(gs):
                s = gsel == gi
                if not s.any():
                    continue
                k = ksel[s]
                g.touched[k] = True
                g.nrm[k] = n[s]
                g.depth[k] += -cut[s]
                g.spent[k] += spent[s]
                g.stuck[k] = stick[s]
                g.vhit[k] = vn[s]
                g.tau[k] = tau_h[s]
                unused[gi][k] = False
        rows = q[moved]
        new = pos[moved]
        self.dx[rows] += new - x1[rows]
        x1[rows] = new

    # --- projection (inside the constraint iterations) -----------------------------------

    def project(self, x: np.ndarray, w: np.ndarray) -> None:
        """One pass: particle pairs, then shapes and walls (non-penetration has the last
        word in an iteration). A penetrating particle moves out along the contact's
        normal (:meth:`ShapeSet.contact`: through the face its path crossed), then
        friction acts on its tangential displacement since the start of the substep,
        in position space as position-based dynamics does it (Müller et al. 2020, sec.
        3.5, with the kinetic part there too): the contact's friction this substep
        is at most ``mu`` times its normal correction (``depth``, the swept cut
        included) less what it already spent. Below that the displacement is undone
        (static: ``stuck``), above it shortened by what is left (kinetic). Positions and
        velocities then agree: the velocity derived from them carries the friction."""
        if self.pairs is not None:
            self._project_pairs(x, w)
        for g in self.groups:
            for b in g.batches:
                pi = g.pi[b]
                ref = None if g.ref is None else g.ref[b]
                d, _, n = g.shapes.contact(x[pi], g.si[b], ref, self.x0[pi])
                pen = g.r[b] - d
                hit = (pen > 0) & (w[pi] > 0)
                if not hit.any():
                    continue
                k, pi, n, pen = b[hit], pi[hit], n[hit], pen[hit]
                corr = (pen + self.skin)[:, None] * n
                x[pi] += corr
                g.depth[k] += pen
                g.touched[k] = True
                g.nrm[k] = n
                rel = x[pi] - self.x0[pi]
                tang = rel - _dot(rel, n)[:, None] * n
                tl = np.sqrt(_dot(tang, tang))
                budget = g.mu[k] * g.depth[k] - g.spent[k]
                stick = tl < budget
                g.stuck[k] = stick
                f = np.where(stick, 1.0, np.where(budget > 0, budget / _safe(tl), 0.0))
                g.spent[k] += np.where(stick, tl, np.maximum(budget, 0.0))
                fr = tang * f[:, None]
                corr -= fr
                x[pi] -= fr
                self.dx[pi] += corr

    def _project_pairs(self, x, w) -> None:
        """Particle pairs, one Jacobi pass with constraint averaging (after Macklin et
        al., "Unified Particle Physics for Real-Time Applications", 2014): every
        overlapping pair computes its correction from the same positions. One vectorised
        pass however many contacts a ball has. Averaging keeps a ball squeezed from
        several sides from overshooting; it is done per pair, each scaled by one over the
        larger contact count of its two balls, the same at both ends, so that every pair
        and the pass conserve momentum (dividing each ball's sum by its own count does
        not: a ball with one contact would move twice as far as its partner with two)."""
        P = self.pairs
        i, j = P.i, P.j
        d = x[j] - x[i]
        dist = np.sqrt(_dot(d, d))
        pen = P.reach - dist
        wi, wj = w[i], w[j]
        wsum = wi + wj
        # Overlaps of the order of round-off (balls placed touching) would only dilute
        # the average of the real corrections: counted from the skin up.
        k = np.flatnonzero((pen > self.skin) & (dist > 0) & (wsum > 0))
        if not k.size:
            return
        i, j, d, dist, pen, wi, wj, wsum = (a[k] for a in (i, j, d, dist, pen, wi, wj, wsum))
        n = d / dist[:, None]
        P.depth[k] += pen
        P.touched[k] = True
        rel = (x[j] - self.x0[j]) - (x[i] - self.x0[i])
        tang = rel - _dot(rel, n)[:, None] * n
        stick = _dot(tang, tang) < (P.mu * P.depth[k]) ** 2
        P.stuck[k] = stick
        # Normal: split the overlap by inverse mass. Friction: undo the relative slide.
        c = (pen / wsum)[:, None] * n - tang * (stick / wsum)[:, None]
        a, b = P.a[k], P.b[k]
        c *= _pair_share(a, b, P.nodes.size)[:, None]
        total = np.zeros((P.nodes.size, 2))
        scatter_rows(total, a, -wi[:, None] * c)
        scatter_rows(total, b, wj[:, None] * c)
        x[P.nodes] += total
        self.dx[P.nodes] += total

    # --- velocity pass (after the integrator's fold) -------------------------------------

    def finish(self, p, integrator, v_start: np.ndarray, h: float, gravity,
               sweeps: int = 2) -> None:
        """Set the velocity of every particle in contact this substep (after the fold).

        Two candidate velocities, because a contact solve needs both views:

        ``v_pos``, what the positions say: ``(x - x0)/h`` for the position-based
            integrators, the folded ``v`` for the others (Müller et al. 2020 derive the
            velocity after the position solve). A ball wedged in a pile did not move, so it
            has no velocity -- however many contacts hold it.
        ``v_imp``, impulses from the pre-contact velocity: the velocity without this
            substep's contact corrections ``dx`` (``(x - dx - x0)/h``; ``v`` minus what
            ``fold`` made of ``dx``), then up to ``sweeps`` passes over the contacts
            (shapes: Gauss-Seidel by rank batch; particle pairs: Jacobi, averaged), at
            least 4 (a bounce crosses one more ball of a row per sweep). Only this view
            still knows how fast a contact hit, which a bounce needs.

        Rules for one contact (``n`` its normal, ``e`` and ``mu`` its material):

        - restitution: a shape contact the sweep bounced at its time of impact ``tau``
          (``vhit``, see :meth:`sweep`) leaves at ``-e vhit``, carried on by the
          acceleration ``p.a`` to the time the integrator's velocity holds
          (``velocity_time``: ``-e vhit + (a.n) h (velocity_time - tau)``); another
          one approaching faster than ``2 |g| h`` at the start of the substep leaves at
          ``-e vn_start`` (Müller et al. 2020, eq. 34). Slower ones stop, so resting
          contacts do not jitter. A particle pair leaves at ``e`` times
          the approach speed the sweep finds, so an impulse passes along a row of touching
          balls (Newton's cradle), whose approach speed before the substep was 0.
          Contacts only push: a separating one is left alone.
        - Coulomb friction: the tangential velocity drops by ``min(mu dvn, |vt|)``, ``dvn``
          the contact's normal velocity change from the pre-contact velocity (its impulse
          per mass). For a shape contact the friction its positions took this substep
          (``spent``, m) is already in ``v_pos`` (all of it, ``spent / h``, for the
          position-based integrators; the fold's share for the others) and counts
          against that budget, so nothing is taken twice and nothing is missed: a slide
          is as exact as the integrator (constant acceleration exactly, for the
          second-order ones). A particle pair that stuck (static friction) loses all of
          its relative tangential velocity.

        A particle that took part in a bouncing contact (a target above zero) takes
        ``v_imp``; every other contact particle takes ``v_pos`` after ``sweeps`` (at least
        2) inelastic sweeps (:func:`_stop`) with the same friction. (``v_imp`` alone
        leaves the velocity of a stack unconverged: support from the floor climbs one ball
        per sweep, and a pile at rest would report a velocity its positions never show.)

        The result overwrites the fold on contact rows only, so nothing is counted twice:
        ``v`` for velocity integrators; ``x_prev = x - v h`` (and the ``v`` estimate) for
        the position-based ones.
        """
        x, w = p.x, p.inv_mass
        act_groups = []
        for g in self.groups:
            d, _, n = g.shapes.contact(x[g.pi], g.si, g.ref, self.x0[g.pi])
            act = (g.touched | (d < g.r + self.touch)) & (w[g.pi] > 0)
            if act.any():
                # A hit or a push keeps its own normal: the face that was hit, not the
                # corner next to where the particle slid to.
                act_groups.append((g, act, np.where(g.touched[:, None], g.nrm, n)))
        pair_act = None
        if self.pairs is not None:
            P = self.pairs
            dd = x[P.j] - x[P.i]
            dist = np.sqrt(_dot(dd, dd))
            act = (P.touched | (dist < P.reach + self.touch)) & (dist > 0) & (
                w[P.i] + w[P.j] > 0)
            if act.any():
                pair_act = (np.flatnonzero(act), dd / _safe(dist)[:, None])
        if not act_groups and pair_act is None:
            return
        fold = integrator.contact_fold(h)      # the integrator's own view of v
        gain = fold.gain
        v_pos, v_pre = fold.views(p, self.x0, self.dx)
        v_th = 2.0 * math.hypot(*gravity) * h
        rows = [g.pi[a] for g, a, _ in act_groups]
        if pair_act is not None:
            rows += [self.pairs.i[pair_act[0]], self.pairs.j[pair_act[0]]]
        rows = np.unique(np.concatenate(rows))
        rows = rows[w[rows] > 0]
        bounced = np.zeros(x.shape[0], bool)
        v_imp = v_pre.copy()
        tol = 1e-9 * (1.0 + float(np.abs(v_pre[rows]).max(initial=0.0)))
        # A bounce the sweep made at its time of impact: the normal velocity it left
        # with, -e vn, carried under the acceleration to the time of the velocity.
        at = fold.velocity_time
        lifts = [np.where(g.vhit < 0, -g.e * g.vhit
                          + _dot(np.broadcast_to(p.a, x.shape)[g.pi], n)
                          * (h * (at - g.tau)), np.nan) for g, _, n in act_groups]
        if self._may_bounce(act_groups, pair_act, v_start, v_pre, v_th):
            for _ in range(max(sweeps, 4)):
                if self._velocity_sweep(v_imp, w, act_groups, pair_act, v_th, v_start,
                                        None, bounced, lifts) <= tol:
                    break
        for g in self.groups:
            # The friction the positions already took is in v_pos (its share of it for
            # a velocity integrator's fold): the inelastic sweeps only add the rest.
            g.used[:] = g.spent * gain
        if self.pairs is not None:
            self.pairs.used[:] = 0.0
        for _ in range(max(sweeps, 2)):
            if self._velocity_sweep(v_pos, w, act_groups, pair_act, v_th, None, v_pre,
                                    None) <= tol:
                break
        fold.write(p, rows, np.where(bounced[rows, None], v_imp[rows], v_pos[rows]))
        p.a_valid = False

    def _may_bounce(self, act_groups, pair_act, v_start, v_pre, v_th) -> bool:
        """Whether any contact starts with a bounce: restitution above 0 and an approach
        faster than ``v_th`` (a pair's can only grow out of another's)."""
        for g, act, n in act_groups:
            vn0 = _dot(v_start[g.pi], n)
            if np.any(act & (((g.e > 0) & (vn0 < -v_th)) | (g.vhit < 0))):
                return True
        if pair_act is not None and self.pairs.e > 0:
            act, n = pair_act
            P = self.pairs
            vn = _dot(v_pre[P.j[act]] - v_pre[P.i[act]], n[act])
            return bool(np.any(vn < -v_th))
        return False

    def _velocity_sweep(self, v, w, act_groups, pair_act, v_th, v_start, v_ref,
                        bounced, lifts=None) -> float:
        """One pass over the contacts, in place on ``v``; returns the largest change.

        With ``v_start`` contacts bounce (and mark ``bounced``) and the friction budget
        is this pass's normal change: to ``lifts`` (per group, the normal velocity of a
        bounce the sweep made, NaN for none), else ``-e`` times the normal velocity at
        the start if it approached faster than ``v_th``. Without, they follow
        :func:`_stop` against ``v_ref``, the pre-contact velocity."""
        change = 0.0
        for gi, (g, act, n) in enumerate(act_groups):
            for b in g.batches:
                b = b[act[b]]
                if not b.size:
                    continue
                pi, nb = g.pi[b], n[b]
                if v_start is not None:
                    vn0 = _dot(v_start[pi], nb)
                    target = np.where(vn0 < -v_th, -g.e[b] * vn0, 0.0)
                    lift = lifts[gi][b]
                    target = np.where(np.isnan(lift), target, lift)
                    bounced[pi[target > 0]] = True
                    ref = None
                else:
                    target, ref = 0.0, _dot(v_ref[pi], nb)
                change = max(change, _shape_velocity(v, pi, nb, target, ref, g.mu[b],
                                                     g.used, b))
        if pair_act is not None:
            change = max(change, self._pair_velocity(v, w, *pair_act, v_th,
                                                     v_start is not None, v_ref, bounced))
        return change

    def _pair_velocity(self, v, w, act, n, v_th, bounce, v_ref, bounced) -> float:
        """One Jacobi sweep over the pairs in contact, averaged as in the projection.

        Bouncing sweeps repeat until nothing changes, so an impulse moves one ball
        further along a row of touching balls per sweep (``k`` balls need ``k - 1``)."""
        P = self.pairs
        i, j, nb, stuck = P.i[act], P.j[act], n[act], P.stuck[act]
        wi, wj = w[i][:, None], w[j][:, None]
        wsum = wi + wj
        vrel = v[j] - v[i]
        vn = _dot(vrel, nb)
        if bounce:
            target = np.where(-vn > v_th, -P.e * vn, 0.0)
            up = target > 0
            bounced[i[up]] = bounced[j[up]] = True
            dvn = np.maximum(target - vn, 0.0)
            budget = P.mu * dvn
        else:
            dvn, budget = _stop(vn, _dot(v_ref[j] - v_ref[i], nb), P.mu)
            budget = np.maximum(budget - P.used[act], 0.0)    # one budget for the pass
        vt = vrel - vn[:, None] * nb
        vtl = np.sqrt(_dot(vt, vt))
        dvt = np.where(stuck, vtl, np.minimum(budget, vtl))
        # As in the projection: round-off changes (touching balls at rest) do not count.
        size = np.abs(dvn) + dvt
        live = size > 1e-9 + 1e-6 * float(np.max(size, initial=0.0))
        if not live.any():
            return 0.0
        # Relative velocity change dv = dvn n - dvt t; each end takes its w/wsum share.
        dv = dvn[:, None] * nb - (dvt / _safe(vtl))[:, None] * vt
        a, b = P.a[act][live], P.b[act][live]
        share = _pair_share(a, b, P.nodes.size)
        if not bounce:
            P.used[act[live]] += dvt[live] * share
        dv = dv[live] * share[:, None]
        delta = np.zeros((P.nodes.size, 2))
        scatter_rows(delta, a, -(wi / wsum)[live] * dv)
        scatter_rows(delta, b, (wj / wsum)[live] * dv)
        v[P.nodes] += delta
        return float(np.max(size[live]))


def _stop(vn, vn_ref, mu):
    """The inelastic rule on the position-consistent velocity: normal velocity ``vn`` goes
    to ``min(max(vn, 0), max(vn_ref, 0))``. It stops an approach, and removes separation
    that the projection made (an overlap pushed apart would otherwise fly apart) but not
    separation the particle had before this substep's contact corrections (``vn_ref``, a
    constraint pulling it away, say). Returns the change and the friction budget ``mu``
    times the normal change from ``vn_ref``."""
    new = np.minimum(np.maximum(vn, 0.0), np.maximum(vn_ref, 0.0))
    return new - vn, mu * np.maximum(new - vn_ref, 0.0)


def _pair_share(a: np.ndarray, b: np.ndarray, m: int) -> np.ndarray:
    """Per pair, one over the larger number of pairs in the list at either of its two
    particles ``a``, ``b`` (of ``m``): Jacobi averaging that conserves momentum."""
    count = np.bincount(a, minlength=m) + np.bincount(b, minlength=m)
    return 1.0 / np.maximum(count[a], count[b])


def scatter_rows(out: np.ndarray, idx: np.ndarray, vals: np.ndarray) -> None:
    """``out[idx] += vals`` with repeated indices summed; ``out (m, 2)``, ``vals (k, 2)``."""
    m = out.shape[0]
    out[:, 0] += np.bincount(idx, weights=vals[:, 0], minlength=m)
    out[:, 1] += np.bincount(idx, weights=vals[:, 1], minlength=m)


def _shape_velocity(v, pi, n, target, ref, mu, used, k) -> float:
    """Static contacts ``pi`` (unique) with normals ``n``. Bouncing (``ref`` None): raise
    the normal velocity to ``target`` (only pushes), friction budget ``mu`` times that
    change. Else the inelastic rule of :func:`_stop` against ``ref``, the pre-contact
    normal velocity, whose budget is for the whole pass: ``used[k]`` counts what the
    positions and earlier sweeps spent. In place on ``v``; returns the largest change."""
    vn = _dot(v[pi], n)
    if ref is None:
        dvn = np.maximum(target - vn, 0.0)
        budget = mu * dvn
    else:
        dvn, budget = _stop(vn, ref, mu)
        budget = np.maximum(budget - used[k], 0.0)
    vt = v[pi] - vn[:, None] * n
    vtl = np.sqrt(_dot(vt, vt))
    dvt = np.minimum(budget, vtl)
    if ref is not None:
        used[k] += dvt
    v[pi] += dvn[:, None] * n - (dvt / _safe(vtl))[:, None] * vt
    return float(np.max(np.abs(dvn) + dvt))

# ------------------------------------------------------------ the compiled twin

class _FlatContacts:
    """One substep's contacts for the compiled backend: the contacts :class:`Contacts`
    holds, flat, with the same ``project`` and ``finish``.

    ``cp``, ``cg`` give each contact's particle and row of the shape table, in the
    reference's order (its groups one after another, the walls last); ``e``, ``mu`` its
    material, ``ref`` a segment's side at the start of the substep, and the per-contact
    state of :class:`_Group`: ``depth``, ``touched``, ``stuck``, ``nrm``, ``spent`` (the
    velocity pass keeps ``used`` to itself). The particle pairs are the whole Verlet list
    (pairs of two pinned particles never pass the kernels' tests, so dropping them as
    :meth:`Contacts.set_pairs` does changes nothing) with the state of :class:`_Pairs`.
    """

    def __init__(self, x0, r, skin, touch, dx, shape_args, cp, cg, e, mu, ref, touched,
                 nrm, depth, spent, stuck, pairs: _PairList | None, pe: float,
                 pmu: float, vhit=None, tau=None) -> None:
        self.x0, self.r, self.skin, self.touch, self.dx = x0, r, skin, touch, dx
        self.shape_args = shape_args
        self.cp, self.cg, self.e, self.mu, self.ref, self.touched = cp, cg, e, mu, ref, touched
        self.nrm, self.depth, self.spent, self.stuck = nrm, depth, spent, stuck
        self.vhit = np.zeros(cp.size) if vhit is None else vhit
        self.tau = np.zeros(cp.size) if tau is None else tau
        self.pairs = pairs
        if pairs is None:
            z = np.zeros(0, np.int64)
            self.pair_args = (z, z, z, z, z, np.zeros(0, r.dtype))
        else:
            self.pair_args = (pairs.i, pairs.j, pairs.a, pairs.b, pairs.nodes, pairs.reach)
        m = self.pair_args[0].size
        self.pe, self.pmu = pe, pmu
        self.pdepth = np.zeros(m)
        self.ptouched = np.zeros(m, bool)
        self.pstuck = np.zeros(m, bool)
        self.scratch = None

    def __bool__(self) -> bool:
        return bool(self.cp.size) or self.pairs is not None

    def project(self, x: np.ndarray, w: np.ndarray) -> None:
        """:meth:`Contacts.project` (:func:`project`)."""
        if self.scratch is None:
            self.scratch = pair_scratch(x, self.pair_args[0].size, self.pair_args[4].size)
        project(x, w, self.x0, self.dx, self.r, self.skin, self.cp.size, self.cp, self.cg,
                self.mu, self.ref, self.depth, self.touched, self.stuck, self.nrm,
                self.spent, *self.shape_args, self.pair_args[0].size, *self.pair_args,
                self.pmu, self.pdepth, self.ptouched, self.pstuck, self.scratch)

    def finish(self, p, integrator, v_start: np.ndarray, h: float, gravity,
               sweeps: int = 2) -> None:
        """:meth:`Contacts.finish` (:func:`finish`)."""
        fold = integrator.contact_fold(h)
        v_th = 2.0 * math.hypot(*gravity) * h
        if finish(p.x, self.x0, p.v, p.x_prev, p.inv_mass, self.r, self.dx, v_start,
                     fold.from_positions, fold.gain, h, v_th, self.touch, int(sweeps),
                     self.cp, self.cg, self.e,
                     self.mu, self.ref, self.touched, self.stuck, self.nrm, self.spent,
                     *self.shape_args, *self.pair_args, self.pe, self.pmu, self.ptouched,
                     self.pstuck, np.broadcast_to(p.a, p.x.shape),
                     float(fold.velocity_time), self.vhit, self.tau):
            p.a_valid = False


@jit
def _share(count_a, count_b):  # pragma: no cover - compiled
    """``_pair_share`` of one pair: ``1.0 / max(count_a, count_b)``, looked up for
    small counts (the same quotient, without a division)."""
    c = max(count_a, count_b)
    return _RECIP[c] if c < _RECIP.size else 1.0 / c


@jit
def begin_space(x1, nshapes, nwalls, scratch):  # pragma: no cover - compiled
    """The arrays :func:`begin_into` fills, sized for any substep of a frame of
    ``x1``'s particles: the broad phase's room (``4 n``, at least 64, with shapes),
    the contacts' particles and table rows (that room plus one a particle and wall,
    plus one for the walls' branch-free store) and their state (``_contact_rows``:
    that room plus one wall a particle; more wall contacts grow them), and which
    particles are near the four walls of ``bounds`` (:func:`_near_walls`). Allocated once
    a frame: with :func:`finish_space`'s, ~50 allocations a substep (malloc, free,
    their reference counts: ~15 % of the soft blob's profile) are gone.

    The last item, a tuple of its own: with ``scratch`` (the frame's, kept by a
    world), what :func:`_begin_fast` works in: the shapes' boxes, the broad phase's
    masks, and the sort's and the sweep's (:func:`toi_space`) arrays for ``k`` shape
    contacts (a quarter of the particles, at least 1,024: the pile's 2,000 balls have
    70-150), with state rows for them and a wall contact per particle and wall; more
    shape contacts in a substep go to ``begin_into``. Without, those arrays are empty
    (``begin_into`` makes its own)."""
    n = x1.shape[0]
    cap = max(4 * n, 64) if nshapes else 0
    C = cap + n * nwalls + 1
    k = min(cap, max(1024, n // 4)) if scratch else 0
    ref, depth, touched, stuck, nrm, spent, vhit, tau, e, mu = _contact_rows(
        k + n * nwalls + 1 if scratch else cap + (n if nwalls else 0) + 1)
    return (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap),
            np.empty(n if nshapes else 0, x1.dtype), np.empty(C, np.int64),
            np.empty(C, np.int64), ref, depth, touched, stuck, nrm, spent, vhit, tau, e,
            mu, np.empty(n if nwalls == 4 else 0, np.bool_),
            (np.empty((nshapes if scratch else 0, 4)), np.empty(nshapes if scratch else 0),
             np.empty((2, n if k else 0)), np.empty((2, n if k else 0)),
             np.empty(n if k else 0, np.int64), np.empty(k, np.int64), np.empty(k),
             np.empty(WALL + 1, np.int64), toi_space(n if k else 0, k)))


@jit
def _contact_rows(C):  # pragma: no cover - compiled
    """Room for ``C`` contacts' state: ``ref, depth, touched, stuck, nrm, spent, vhit,
    tau, e, mu`` (:func:`begin_into`)."""
    return (np.empty(C), np.empty(C), np.empty(C, np.bool_), np.empty(C, np.bool_),
            np.empty((C, 2)), np.empty(C), np.empty(C), np.empty(C), np.empty(C),
            np.empty(C))


@jit_borrow
def _clear_rows(ref, touched, stuck, depth, spent, nrm, vhit, tau, lo,
                hi):  # pragma: no cover - compiled
    """Contacts ``lo .. hi`` of :func:`begin_into`'s rows as new: no side, not hit."""
    for c in range(lo, hi):
        ref[c] = 0.0
        touched[c] = False
        stuck[c] = False
        depth[c] = 0.0
        spent[c] = 0.0
        nrm[c, 0] = 0.0
        nrm[c, 1] = 0.0
        vhit[c] = 0.0
        tau[c] = 0.0


@jit
def begin(x0, x1, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts, pnorm, pedge,
          bverts, bnorm, bedge, keys, sids, cell, origin, dims, e_def, mu_def, eps,
          skin_min, touch_min, margin, brute_pairs, max_cells, v0, acc, h,
          v_th):  # pragma: no cover
    """:func:`begin_into` in arrays of its own (the substep path): ``cp, cg, e, mu, ref,
    touched, nrm, depth, spent, stuck, vhit, tau, skin, touch``, one row a contact."""
    (C, cp, cg, e, mu, ref, touched, nrm, depth, spent, stuck, vhit, tau, skin,
     touch) = begin_into(x0, x1, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts,
                         pnorm, pedge, bverts, bnorm, bedge, keys, sids, cell, origin,
                         dims, e_def, mu_def, eps, skin_min, touch_min, margin,
                         brute_pairs, max_cells, v0, acc, h, v_th,
                         begin_space(x1, nshapes, nwalls, False))
    return (cp[:C], cg[:C], e[:C], mu[:C], ref[:C], touched[:C], nrm[:C], depth[:C],
            spent[:C], stuck[:C], vhit[:C], tau[:C], skin, touch)


@jit
def _largest_abs(x):  # pragma: no cover - compiled
    """The largest ``|x|`` over an ``(n, 2)`` array as ``_max`` from 0.0 would find it
    (NaN if there is one): the largest key (``_key``), an integer maximum in vector
    instructions. ``_max``'s chains waited for the last step (four of them: 1.5 us a
    substep of the pile's 2,000 particles, 0.1 now). The maximum of the same numbers
    in another order is the same number."""
    f = x.reshape(-1)
    kt = np.uint64(0)
    for q in range(f.size):
        kt = max(kt, _key(f[q]))
    return _unkey(kt)


@jit_inline
def _wall_limit(rq, dq, wq, x1x, x1y, x0x, x0y, shapes, marg,
                exact):  # pragma: no cover - compiled
    """How far from a wall a particle of radius ``rq``, inverse mass ``wq``, that moved
    from ``(x0x, x0y)`` to ``(x1x, x1y)`` counts as near (:func:`begin_into`), in
    float64; -inf for a pinned particle. ``dq``: its ``disp`` (read with shapes only).
    Numbers in, no arrays: inlined in a loop it adds no reference counts, and the
    caller reads the positions as a vector loop can.

    ``exact`` False (a constant at each call): a limit never below the exact one,
    without its square root: the path ``|d|`` bounded by ``2 (|dx| + |dy|)`` (at least
    ``|d|`` whatever the rounding), infinite beyond 1e15 m (where the exact square may
    overflow to infinity, in float32 from 1.8e19 m). For :func:`_near_walls`' vector
    loop, whose few near particles then take the exact test: the square root in the
    loop over every particle cost half of it (the soft blob's 256 particles: 1.35 ->
    0.70 us)."""
    if shapes:
        lo = rq + dq + marg
        hi = -np.inf
    else:
        lo = rq + marg
        ddx = x1x - x0x
        ddy = x1y - x0y
        if exact:
            hi = rq + math.sqrt(ddx * ddx + ddy * ddy) + marg
        else:
            path = abs(ddx) + abs(ddy)
            hi = rq + (path + path) + marg
            hi = np.inf if path > 1e15 else hi
    top = hi if hi > lo else lo
    return np.float64(top) if wq > 0 else -np.inf


@jit_inline
def _bounds_hits(xq, yq, lq, a0, b0, o0, a1, b1, o1, a2, b2, o2, a3, b3,
                 o3):  # pragma: no cover - compiled
    """Whether a particle at ``(xq, yq)`` with limit ``lq`` is near each of the four
    walls ``a x + b y - o`` (:func:`_near_walls`)."""
    return (((a0 * xq + b0 * yq) - o0) < lq, ((a1 * xq + b1 * yq) - o1) < lq,
            ((a2 * xq + b2 * yq) - o2) < lq, ((a3 * xq + b3 * yq) - o3) < lq)


@jit_borrow
def _near_walls(x0, x1, r, w, disp, geo, W0, shapes, marg, near, c_p, c_g,
                m):  # pragma: no cover - compiled
    """:func:`begin_into`'s four walls of ``bounds`` (table rows ``W0 ..``): the
    (particle, wall) pairs near each other stored from ``c_p[m]``, in that order.
    Returns their count.

    First which particles may be near a wall (``near``, by :func:`_wall_limit`'s
    bound), in a loop LLVM makes vector instructions, then those few tested exactly
    and stored: in one loop the stores and their branch kept it scalar (the soft blob's 256
    particles: 2.4 -> 0.9 us; without the square root 0.7). The positions are read
    as flat arrays: with a row length unknown at compile time LLVM's vector loop
    assumed rows of one number, and the scalar loop ran."""
    a0, b0, o0 = geo[W0, 0], geo[W0, 1], geo[W0, 2]
    a1, b1, o1 = geo[W0 + 1, 0], geo[W0 + 1, 1], geo[W0 + 1, 2]
    a2, b2, o2 = geo[W0 + 2, 0], geo[W0 + 2, 1], geo[W0 + 2, 2]
    a3, b3, o3 = geo[W0 + 3, 0], geo[W0 + 3, 1], geo[W0 + 3, 2]
    f0 = x0.reshape(-1)
    f1 = x1.reshape(-1)
    n = x1.shape[0]
    for q in range(n):                  # near: a superset (the bound)
        xq = f1[2 * q]
        yq = f1[2 * q + 1]
        lq = _wall_limit(r[q], disp[q] if shapes else marg, w[q], xq, yq, f0[2 * q],
                         f0[2 * q + 1], shapes, marg, False)
        h0, h1, h2, h3 = _bounds_hits(xq, yq, lq, a0, b0, o0, a1, b1, o1, a2, b2, o2,
                                      a3, b3, o3)
        near[q] = h0 | h1 | h2 | h3
    nw = 0
    for q in range(n):                  # the exact test
        if not near[q]:
            continue
        lq = _wall_limit(r[q], disp[q] if shapes else marg, w[q], x1[q, 0], x1[q, 1],
                         x0[q, 0], x0[q, 1], shapes, marg, True)
        hits = _bounds_hits(x1[q, 0], x1[q, 1], lq, a0, b0, o0, a1, b1, o1, a2, b2, o2,
                            a3, b3, o3)
        for k in range(4):
            if hits[k]:
                c_p[m + nw] = q
                c_g[m + nw] = W0 + k
                nw += 1
    return nw


@jit_borrow
def _other_walls(x0, x1, r, w, disp, geo, W0, nwalls, shapes, marg, c_p, c_g,
                 m):  # pragma: no cover - compiled
    """:func:`begin_into`'s walls when they are not the four of ``bounds``: every
    (particle, wall) stored from ``c_p[m]``, the count moving on a hit only. Returns
    the count."""
    nw = 0
    for q in range(x1.shape[0]):
        xq = x1[q, 0]
        yq = x1[q, 1]
        lq = _wall_limit(r[q], disp[q] if shapes else marg, w[q], xq, yq, x0[q, 0],
                         x0[q, 1], shapes, marg, True)
        for k in range(nwalls):
            dw = (geo[W0 + k, 0] * xq + geo[W0 + k, 1] * yq) - geo[W0 + k, 2]
            c_p[m + nw] = q
            c_g[m + nw] = W0 + k
            nw += dw < lq
    return nw


@jit
def _begin_tolerances(x1, eps, skin_min, touch_min):  # pragma: no cover - compiled
    """``_tolerances(x1)`` with the float type's ``eps`` and the constants
    ``skin_min``, ``touch_min``: ``(skin, touch)``."""
    top = _largest_abs(x1)
    s16 = 16.0 * eps * (1.0 + top)
    skin = s16 if s16 > skin_min else skin_min
    s100 = 100.0 * skin
    return skin, (s100 if s100 > touch_min else touch_min)


@jit_borrow
def _displacements(x0, x1, w, disp):  # pragma: no cover - compiled
    """Each particle's move ``|x1 - x0|`` into ``disp``; returns how many can move
    (``w > 0``). Flat: a loop of vector instructions (as in _near_walls), 2x faster."""
    movable = 0
    f0 = x0.reshape(-1)
    f1 = x1.reshape(-1)
    for q in range(x1.shape[0]):
        ddx = f1[2 * q] - f0[2 * q]
        ddy = f1[2 * q + 1] - f0[2 * q + 1]
        disp[q] = math.sqrt(ddx * ddx + ddy * ddy)
        movable += np.int64(w[q] > 0)
    return movable


@jit_borrow
def _begin_walls(x0, x1, w, r, geo, nwalls, e_def, mu_def, eps, skin_min, touch_min, margin,
                 c_p, c_g, ref, depth, touched, stuck, nrm, spent, vhit, tau, e, mu,
                 near):  # pragma: no cover - compiled
    """:func:`begin_into` for a world without shapes (table rows ``0 ..`` are walls)
    in the arrays of its ``space``: the tolerances, the walls, the contacts' rows
    cleared and their materials. Returns ``(C, skin, touch)``; ``C`` is -1, the rows
    untouched, when more wall contacts than rows were found (particles in corners:
    ``begin_into`` grows them).

    Its own kernel counting no references, which the frame calls directly: a call of
    ``begin_into`` counted its 34 arguments (with ``space``'s 17) on entry and exit,
    and made twelve views to return, ~0.5 us of the soft blob's 2 us a substep."""
    skin, touch = _begin_tolerances(x1, eps, skin_min, touch_min)
    n = x1.shape[0]
    if nwalls == 0 or n == 0:
        return 0, skin, touch
    if c_p.size < n * nwalls + 1 or (nwalls == 4 and near.size < n):
        return -1, skin, touch      # not begin_space's arrays for these particles
    marg = _as(x1, margin)
    if nwalls == 4:
        C = _near_walls(x0, x1, r, w, r, geo, 0, False, marg, near, c_p, c_g, 0)
    else:
        C = _other_walls(x0, x1, r, w, r, geo, 0, nwalls, False, marg, c_p, c_g, 0)
    if C > ref.size:
        return -1, skin, touch
    _rows_start(ref, touched, stuck, depth, spent, nrm, vhit, tau, e, mu, c_g, geo,
                e_def, mu_def, 0, C)
    return C, skin, touch


@jit_borrow
def _rows_start(ref, touched, stuck, depth, spent, nrm, vhit, tau, e, mu, c_g, geo, e_def,
                mu_def, m, C):  # pragma: no cover - compiled
    """The contact rows ``m .. C`` cleared, and every row's materials (NaN in the
    table: the world's ``e_def``, ``mu_def``)."""
    _clear_rows(ref, touched, stuck, depth, spent, nrm, vhit, tau, m, C)
    for c in range(C):
        g = c_g[c]
        e[c] = e_def if math.isnan(geo[g, E]) else geo[g, E]
        mu[c] = mu_def if math.isnan(geo[g, MU]) else geo[g, MU]


@jit
def begin_into(x0, x1, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts, pnorm, pedge,
               bverts, bnorm, bedge, keys, sids, cell, origin, dims, e_def, mu_def, eps,
               skin_min, touch_min, margin, brute_pairs, max_cells, v0, acc, h,
               v_th, space):  # pragma: no cover
    """``Colliders.begin`` up to the particle pairs, after the integrator moved ``x1``
    from ``x0``: ``_tolerances``, the broad phase (``aabb_pairs_brute`` or
    ``ShapeGrid.query``, the same rule choosing), ``Contacts.add_group`` with its
    start-gap filter, ``Contacts.sweep`` (moves ``x1``, adds to ``dx``) and the walls
    (table rows ``nshapes ..``), in the arrays of ``space`` (:func:`begin_space`; a
    broad phase that outgrows them gets new ones).

    ``v0`` (no rows: none), ``acc``, ``h``, ``v_th``: bounces at the time of impact
    (``Colliders.begin``'s ``v0``).

    Returns ``C, cp, cg, e, mu, ref, touched, nrm, depth, spent, stuck, vhit, tau,
    skin, touch``: the first ``C`` rows of the arrays are the contacts' particles and
    table rows in the reference's group order (shape type by shape type, each in
    ``(particle, shape)`` order, then the walls), their materials, segment sides, and
    what the sweep did to them (``_toi_into``); ``space``'s arrays (valid until the next
    call with it) or, grown, new ones. Whole arrays and a count, not views: the frame
    would count a reference to each view (see :func:`frame`).
    """
    n = x1.shape[0]
    (cp, cg, gap, disp, c_p, c_g, ref, depth, touched, stuck, nrm, spent, vhit, tau, e,
     mu, near, _) = space
    if nshapes == 0:
        C, skin, touch = _begin_walls(x0, x1, w, r, geo, nwalls, e_def, mu_def, eps,
                                      skin_min, touch_min, margin, c_p, c_g, ref, depth,
                                      touched, stuck, nrm, spent, vhit, tau, e, mu, near)
        if C >= 0:
            return (C, c_p, c_g, e, mu, ref, touched, nrm, depth, spent, stuck, vhit,
                    tau, skin, touch)
    skin, touch = _begin_tolerances(x1, eps, skin_min, touch_min)
    marg = _as(x1, margin)
    movable = _displacements(x0, x1, w, disp) if nshapes else 0  # only walls: unneeded
    m = 0
    if nshapes:
        brute = movable * nshapes <= brute_pairs
        cap = cp.size       # no regrowing in the loop (module docstring)
        while True:
            m = _broad_phase(x0, x1, w, r, disp, kinds, rows, geo, nshapes, pverts,
                             pnorm, pedge, bverts, bnorm, bedge, keys, sids, _as(x1, cell),
                             origin, dims, brute, max_cells, _as(x1, 0.5), _as(x1, 1.5),
                             marg, cp, cg, gap)
            if m >= 0:
                break
            cap *= 4
            cp = np.empty(cap, np.int64)
            cg = np.empty(cap, np.int64)
            gap = np.empty(cap)
    nq = n if nwalls else 0
    if m + nq * nwalls + 1 > c_p.size:      # outgrown: arrays of this call's own
        c_p = np.empty(m + nq * nwalls + 1, np.int64)
        c_g = np.empty(m + nq * nwalls + 1, np.int64)
    if m + 1 > ref.size:
        ref, depth, touched, stuck, nrm, spent, vhit, tau, e, mu = _contact_rows(
            m + nq + 1)
    tspace = toi_space(n if m else 0, m)
    C = m + _begin_sweep(x0, x1, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts,
                         pnorm, pedge, bverts, bnorm, bedge, e_def, mu_def, skin, touch,
                         marg, v0, acc, h, v_th, m, cp, cg, gap, disp, c_p, c_g, ref,
                         depth, touched, stuck, nrm, spent, vhit, tau, near,
                         np.empty(m, np.int64), np.empty(m), np.empty(WALL + 1, np.int64),
                         tspace)
    if C > ref.size:        # more wall contacts than particles (corners): grown
        (ref2, depth2, touched2, stuck2, nrm2, spent2, vhit2, tau2, e,
         mu) = _contact_rows(C)
        ref2[:m] = ref[:m]                  # the shapes' contacts, swept: kept
        depth2[:m] = depth[:m]
        touched2[:m] = touched[:m]
        stuck2[:m] = stuck[:m]
        nrm2[:m] = nrm[:m]
        spent2[:m] = spent[:m]
        vhit2[:m] = vhit[:m]
        tau2[:m] = tau[:m]
        ref, depth, touched, stuck, nrm, spent = ref2, depth2, touched2, stuck2, nrm2, spent2
        vhit, tau = vhit2, tau2
    _rows_start(ref, touched, stuck, depth, spent, nrm, vhit, tau, e, mu, c_g, geo, e_def,
                mu_def, m, C)
    return (C, c_p, c_g, e, mu, ref, touched, nrm, depth, spent, stuck, vhit, tau, skin,
            touch)


@jit_borrow
def _begin_sweep(x0, x1, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts, pnorm,
                 pedge, bverts, bnorm, bedge, e_def, mu_def, skin, touch, marg, v0, acc, h,
                 v_th, m, cp, cg, gap, disp, c_p, c_g, ref, depth, touched, stuck, nrm,
                 spent, vhit, tau, near, order, gap_o, start,
                 tspace):  # pragma: no cover - compiled
    """:func:`begin_into` after its broad phase (``m`` contacts in ``cp, cg, gap``):
    the contacts grouped by shape type into ``c_p, c_g`` (a stable counting sort:
    the reference's groups), their rows cleared and segment sides found, the sweep
    (``_toi_into``: moves ``x1``, adds to ``dx``), then the walls after them. Returns
    the number of wall contacts ``nw`` (rows ``m .. m + nw``, not yet started).

    Room: ``c_p, c_g`` for ``m + n nwalls + 1``, the rows for ``m``, ``order``,
    ``gap_o`` and ``tspace`` (:func:`toi_space`) for ``m``, ``start`` for ``WALL + 1``."""
    if m:
        start[:] = 0
        for c in range(m):
            start[kinds[cg[c]] + 1] += 1
        for k in range(WALL):
            start[k + 1] += start[k]
        for c in range(m):
            kd = kinds[cg[c]]
            order[start[kd]] = c
            start[kd] += 1
        for k in range(m):
            c_p[k] = cp[order[k]]
            c_g[k] = cg[order[k]]
            gap_o[k] = gap[order[k]]
        _clear_rows(ref, touched, stuck, depth, spent, nrm, vhit, tau, 0, m)
        for c in range(m):
            g = c_g[c]
            if kinds[g] == SEGMENT:
                q = c_p[c]
                ref[c] = _side(x0[q, 0], x0[q, 1], geo[g, 0], geo[g, 1], geo[g, 2],
                               geo[g, 3])
        _toi_into(x0, x1, r, dx, skin, touch, c_p[:m], c_g[:m], gap_o[:m], ref[:m], m,
                  mu_def, kinds, rows, geo, pverts, pnorm, pedge, bverts, bnorm, bedge,
                  touched[:m], nrm[:m], depth[:m], spent[:m], stuck[:m], v0, acc, h, v_th,
                  e_def, vhit[:m], tau[:m], tspace)
    # Walls: n . x1 - offset below r + disp + MARGIN, after the sweep. Each particle's
    # limit (``_wall_limit``), then the walls, the hits in (particle, wall) order after
    # the shapes' contacts: the four walls of ``bounds`` in ``_near_walls``, any other
    # number in ``_other_walls``.
    # hit = dw < lo or dw < hi. With shapes: lo = r + disp + margin (hi never). Without,
    # disp is not computed: lo = r + margin, and hi = r + |path| + margin, the exact
    # test; it is at most r + 2 (|dx| + |dy|) + margin, below which the reference
    # needs it, so "dw < hi" decides alike. Stored in float64: exactly as computed;
    # one limit, the larger (a NaN path keeps lo, as "dw < hi" is then false).
    nq = x1.shape[0] if nwalls else 0
    if nwalls == 4 and nq:
        return _near_walls(x0, x1, r, w, disp, geo, nshapes, nshapes != 0, marg, near,
                           c_p, c_g, m)
    if nwalls != 4 and nq:
        return _other_walls(x0, x1, r, w, disp, geo, nshapes, nwalls, nshapes != 0, marg,
                            c_p, c_g, m)
    return 0


@jit_borrow
def _begin_fast(x0, x1, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts, pnorm,
                pedge, bverts, bnorm, bedge, e_def, mu_def, eps, skin_min, touch_min,
                margin, brute_pairs, v0, acc, h, v_th, c_p, c_g, ref, depth, touched,
                stuck, nrm, spent, vhit, tau, e, mu, near,
                space):  # pragma: no cover - compiled
    """:func:`begin_into` where it makes no array: the brute-force broad phase
    (``_brute_masks``), in the scratch of ``space`` (:func:`begin_space` with
    ``scratch``) and the rows given, all with room for every contact (the rows for
    a wall contact per particle and wall). Returns ``(C, skin, touch)``, or ``C`` -1
    with nothing changed when it cannot (the shape grid's broad phase, or too little
    room): ``begin_into`` then does it.

    It counts no reference, and :func:`_frame_steps` calls it without leaving: a call
    of ``begin_into`` counted ~800 references a pile substep (its arguments, its
    views, the arrays it returned) and made ~20 arrays."""
    cp, cg, gap, disp = space[:4]
    box, inv_len, lo, hi, bits, order, gap_o, start, tspace = space[-1]
    skin, touch = _begin_tolerances(x1, eps, skin_min, touch_min)
    n = x1.shape[0]
    if not (0 < nshapes <= _MASK_SHAPES and box.shape[0] >= nshapes and disp.size >= n
            and bits.size >= n):
        return -1, skin, touch
    movable = _displacements(x0, x1, w, disp)
    if movable * nshapes > brute_pairs:
        return -1, skin, touch      # the shape grid (its candidates sort makes arrays)
    marg = _as(x1, margin)
    shape_boxes(kinds, geo, nshapes, box, inv_len)
    m = _brute_masks(x0, x1, w, r, disp, kinds, rows, geo, nshapes, pverts, pnorm, pedge,
                     bverts, bnorm, bedge, _as(x1, 0.5), _as(x1, 1.5), marg, cp, cg, gap,
                     box, inv_len, lo, hi, bits)
    room = m + (n if nwalls else 0) * nwalls + 1
    if (m < 0 or room > c_p.size or room > ref.size or m > order.size
            or m > tspace[1].size):
        return -1, skin, touch
    C = m + _begin_sweep(x0, x1, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts,
                         pnorm, pedge, bverts, bnorm, bedge, e_def, mu_def, skin, touch,
                         marg, v0, acc, h, v_th, m, cp, cg, gap, disp, c_p, c_g, ref,
                         depth, touched, stuck, nrm, spent, vhit, tau, near, order, gap_o,
                         start, tspace)
    _rows_start(ref, touched, stuck, depth, spent, nrm, vhit, tau, e, mu, c_g, geo, e_def,
                mu_def, m, C)
    return C, skin, touch


@jit
def toi_space(n, cap):  # pragma: no cover - compiled
    """The scratch of :func:`_toi_into` for ``n`` particles and up to ``cap`` contacts:
    ``loc`` (all -1, and every call leaves it so), ``owner``, the paths (4 rows), the
    bounce state (5 rows), the planes hit, their counts, the live and moved flags,
    the best hits (3 rows), their contacts, ``unused``, ``n0``."""
    return (np.full(n, -1, np.int64), np.empty(cap, np.int64), np.empty((4, cap)),
            np.empty((5, cap)), np.empty((cap, MAX_HITS, 2)), np.empty(cap, np.int64),
            np.empty((2, cap), np.bool_), np.empty((3, cap)), np.empty(cap, np.int64),
            np.empty(cap, np.bool_), np.empty((cap, 2)))


@jit_borrow
def _toi_into(x0, x1, r, dx, skin, touch, cp, cg, gap, ref, m, mu_def, kinds, rows, geo,
              pverts, pnorm, pedge, bverts, bnorm, bedge, touched, nrm, depth, spent,
              stuck, v0, acc0, h, v_th, e_def, vhit, tauo,
              space):  # pragma: no cover - compiled
    """``Contacts.sweep``: the time-of-impact loop over the contacts ``0..m-1`` (in
    the reference's order), moving ``x1`` and adding to ``dx``; fills the hit
    contacts' ``touched``, ``nrm``, ``depth``, ``spent``, ``stuck``, ``vhit`` and
    ``tauo`` (bounces at the time of impact when ``v0`` has rows, under ``acc0``).

    Every pass looks at every contact of a particle still moving, in order, and
    keeps each particle's earliest hit (the first on a tie), as the reference's
    groups one after another do; then every hit particle stops on the surface and
    slides on, and the next pass sweeps the rest.

    In the scratch ``space`` (:func:`toi_space`, room for ``m`` contacts): this part
    places each particle in it (``loc``, ``owner`` its particle, in order of first
    contact), :func:`_toi_passes` does the work. Neither counts references: a call of
    ``_distance`` or ``_sweep`` passes ten arrays, and counting them cost ~100 ns a
    contact (the pile's sweep 12 -> 6 us a substep)."""
    (loc, owner, path, state, planes, count, flags, best, best_k, unused, n0) = space
    L = 0
    for k in range(m):
        q = cp[k]
        if loc[q] < 0:
            loc[q] = L
            owner[L] = q
            L += 1
    bouncing = v0.shape[0] > 0
    for a in range(L):
        q = owner[a]
        path[0, a] = np.float64(x0[q, 0])
        path[1, a] = np.float64(x0[q, 1])
        path[2, a] = np.float64(x1[q, 0])
        path[3, a] = np.float64(x1[q, 1])
        state[0, a] = 0.0
        if bouncing:
            state[1, a] = np.float64(v0[q, 0])
            state[2, a] = np.float64(v0[q, 1])
            state[3, a] = np.float64(acc0[q, 0])
            state[4, a] = np.float64(acc0[q, 1])
        count[a] = 0
        flags[0, a] = True          # live
        flags[1, a] = False         # moved
    _toi_passes(x0, x1, r, dx, skin, touch, cp, cg, gap, ref, m, mu_def, kinds, rows,
                geo, pverts, pnorm, pedge, bverts, bnorm, bedge, touched, nrm, depth,
                spent, stuck, h, v_th, e_def, vhit, tauo, loc, owner[:L], path[0],
                path[1], path[2], path[3], bouncing, state[0], state[1], state[2],
                state[3], state[4], planes, count, flags[0], flags[1], best[0], best_k,
                best[1], best[2], unused, n0)
    for a in range(L):
        loc[owner[a]] = -1


@jit_borrow
def _toi_passes(x0, x1, r, dx, skin, touch, cp, cg, gap, ref, m, mu_def, kinds, rows,
                geo, pverts, pnorm, pedge, bverts, bnorm, bedge, touched, nrm, depth,
                spent, stuck, h, v_th, e_def, vhit, tauo, loc, owner, posx, posy, endx,
                endy, bouncing, tau, velx, vely, accx, accy, planes, count, live, moved,
                best_t, best_k, best_nx, best_ny, unused, n0):  # pragma: no cover
    """:func:`_toi_into`'s passes, in its scratch."""
    L = owner.size
    # Starts on or inside: the normal there, and whether the plane is still unused.
    for k in range(m):
        if gap[k] <= touch:
            unused[k] = True
            q = cp[k]
            _, n0[k, 0], n0[k, 1] = _distance(cg[k], x0[q, 0], x0[q, 1], ref[k], True,
                                              kinds, rows, geo, pverts, pnorm, pedge,
                                              bverts, bnorm, bedge, x0[q, 0], x0[q, 1])
    left = L
    for it in range(MAX_HITS + 1):
        if not left:
            break
        for a in range(L):
            best_t[a] = INF
            best_k[a] = -1
        for k in range(m):
            q = cp[k]
            a = loc[q]
            if not live[a]:
                continue
            if gap[k] <= touch:
                if not unused[k]:
                    continue
                if not ((endx[a] - posx[a]) * n0[k, 0] + (endy[a] - posy[a]) * n0[k, 1]
                        < 0):
                    continue
                t, nx, ny = 0.0, n0[k, 0], n0[k, 1]
            else:
                if it == 0:                 # a path shorter than the gap cannot hit
                    px = x1[q, 0] - x0[q, 0]
                    py = x1[q, 1] - x0[q, 1]
                    if not px * px + py * py >= gap[k] * gap[k]:
                        continue
                t, nx, ny = _sweep(cg[k], posx[a], posy[a], endx[a], endy[a], r[q],
                                   kinds, rows, geo, pverts, pnorm, pedge, bverts,
                                   bnorm, bedge)
                if not math.isfinite(t):
                    continue
            if t < best_t[a]:
                best_t[a] = t
                best_k[a] = k
                best_nx[a] = nx
                best_ny[a] = ny
        for a in range(L):
            if not live[a]:
                continue
            k = best_k[a]
            if k < 0:
                posx[a] = endx[a]
                posy[a] = endy[a]
                live[a] = False
                left -= 1
                continue
            if it == MAX_HITS:              # out of hits: stay at the last point
                live[a] = False
                left -= 1
                continue
            t = best_t[a]
            nx = best_nx[a]
            ny = best_ny[a]
            g = cg[k]
            mu = mu_def if math.isnan(geo[g, MU]) else geo[g, MU]
            restx = endx[a] - posx[a]
            resty = endy[a] - posy[a]
            remx = (1.0 - t) * restx
            remy = (1.0 - t) * resty
            cx = posx[a] + t * restx
            cy = posy[a] + t * resty
            cut = _min(remx * nx + remy * ny, 0.0)
            rax = remx - cut * nx                   # the approach dropped
            ray = remy - cut * ny
            la = math.sqrt(rax * rax + ray * ray)
            ok = True
            for j in range(count[a]):
                if not planes[a, j, 0] * rax + planes[a, j, 1] * ray >= -DIR_TOL * la:
                    ok = False
            if not ok:
                la = 0.0
            budget = mu * -cut
            stick = la > 0 and la < budget
            f = 0.0 if (stick or la == 0) else 1.0 - budget / la
            r2x = (rax if ok else 0.0) * f
            r2y = (ray if ok else 0.0) * f
            sp = la if stick else (budget if la > 0 else 0.0)
            if gap[k] > touch:
                nxp = cx + skin * nx
                nyp = cy + skin * ny
            else:
                nxp = cx
                nyp = cy
            vn = 0.0
            tau_h = 0.0
            if bouncing:
                # The time and the velocity of the impact; a bounce climbs off the face.
                ek = e_def if math.isnan(geo[g, E]) else geo[g, E]
                t0 = tau[a]
                vn0 = velx[a] * nx + vely[a] * ny
                an = accx[a] * nx + accy[a] * ny
                dn = (cx - posx[a]) * nx + (cy - posy[a]) * ny
                s2 = vn0 * vn0 + 2.0 * an * dn
                vnh = -math.sqrt(_max(s2, 0.0))
                den = vn0 + vnh
                exact = s2 > 0 and den < 0 and dn <= 0
                left = h * (1.0 - t0)
                dt_ = 2.0 * dn / den if exact else h * (t * (1.0 - t0))
                dt_ = _min(dt_, left)
                tau_h = t0 + dt_ / h
                vhx = velx[a] + accx[a] * dt_
                vhy = vely[a] + accy[a] * dt_
                vhn = vhx * nx + vhy * ny
                vn = vnh if exact else vhn
                up = ek > 0 and vn < -v_th
                T = left - dt_
                climb = _max(-ek * vn * T + 0.5 * an * T * T, 0.0)
                clear = True
                for j in range(count[a]):
                    if not planes[a, j, 0] * nx + planes[a, j, 1] * ny >= -DIR_TOL:
                        clear = False
                if not (up and clear):
                    climb = 0.0
                r2x = r2x + climb * nx
                r2y = r2y + climb * ny
                vnew = -ek * vn if up else _max(vn, 0.0)
                velx[a] = vhx + (vnew - vhn) * nx
                vely[a] = vhy + (vnew - vhn) * ny
                tau[a] = tau_h
                if not up:
                    vn = 0.0
            posx[a] = nxp
            posy[a] = nyp
            endx[a] = nxp + r2x
            endy[a] = nyp + r2y
            planes[a, count[a], 0] = nx
            planes[a, count[a], 1] = ny
            count[a] += 1
            moved[a] = True
            touched[k] = True
            nrm[k, 0] = nx
            nrm[k, 1] = ny
            depth[k] += -cut
            spent[k] += sp
            stuck[k] = stick
            vhit[k] = vn
            tauo[k] = tau_h
            unused[k] = False
    for a in range(L):
        if moved[a]:
            q = owner[a]
            dx[q, 0] += posx[a] - x1[q, 0]
            dx[q, 1] += posy[a] - x1[q, 1]
            x1[q, 0] = posx[a]
            x1[q, 1] = posy[a]


@jit
def _beyond(d2, limit):  # pragma: no cover - compiled
    """Whether ``math.sqrt(d2) < limit`` is surely False, decided without the square
    root (most pairs of a Verlet list are apart). ``d2`` and ``limit`` in the world's
    float type, compared in float64: ``limit**2`` is exact to 2**-53 there, so ``d2``
    above it by 1e-12 puts the exact root above ``limit`` by more than its rounding,
    and the rounded root (monotonic) is >= ``limit``: the test that follows would have
    said False too, bit for bit. The margin leaves the few pairs near it to the exact
    test."""
    lim = np.float64(limit)
    return np.float64(d2) > lim * lim * (1.0 + 1e-12)


@jit
def pair_scratch(x, P, M):  # pragma: no cover - compiled
    """What :func:`_project_pairs` works in for ``P`` pairs on ``M`` nodes (or more):
    ``live, c, count, ta, tb, near, geo`` (``near`` the pairs within reach, ``geo``
    their differences and distances). Made by its callers: :func:`project` makes no
    array (``jit_borrow``). The sums ``ta, tb`` start all zero, and every call leaves
    them so."""
    return (np.empty(P, np.int64), np.empty((P, 2), x.dtype), np.empty(M, np.int64),
            np.zeros((M, 2)), np.zeros((M, 2)), np.empty(P, np.int64),
            np.empty((3, P), x.dtype))


@jit_inline
def _near_pairs(x, i, j, reach, extra, touched, keep, near, gx, gy,
                gd):  # pragma: no cover - compiled
    """The pairs ``i, j`` whose ends may be closer than ``reach + extra`` (``keep``:
    or ``touched``) listed into ``near``, with their normals ``gx, gy`` and distances
    ``gd``; returns how many. Written always, kept if near: no branch on the random
    half of a pile's list that is; a pair surely apart (``_beyond``) takes no square
    root. Then the square roots and divisions over the list in one loop LLVM makes
    vector instructions (per pair they kept the scalar divider busy). Inlined into
    kernels that count no references (its arrays are not counted)."""
    nn = 0
    for k in range(i.size):
        ii = np.uint64(i[k])        # unsigned: no wraparound tests (module docstring)
        jj = np.uint64(j[k])
        ddx = x[jj, 0] - x[ii, 0]
        ddy = x[jj, 1] - x[ii, 1]
        d2 = ddx * ddx + ddy * ddy
        near[nn] = k
        gx[nn] = ddx
        gy[nn] = ddy
        gd[nn] = d2
        nn += np.int64(keep & touched[k]) | np.int64(not _beyond(d2, reach[k] + extra))
    for t in range(nn):             # vector instructions
        dist = math.sqrt(gd[t])
        gd[t] = dist
        gx[t] = gx[t] / dist
        gy[t] = gy[t] / dist
    return nn


@jit_borrow
def _project_pairs(x, w, x0, dx, skin, i, j, a, b, nodes, reach, mu, depth, touched,
                   stuck, scratch):  # pragma: no cover - compiled
    """``Contacts._project_pairs``: one Jacobi pass, averaged per pair, in the arrays
    of ``scratch`` (:func:`pair_scratch`).

    The pairs within reach are listed first with their distances and normals
    (``_near_pairs``; the pile's pass: 38 -> 26 us a substep). The same operations on
    the same numbers: the same bits."""
    M = nodes.size
    skin_f = _as(x, skin)
    one = _as(x, 1.0)
    zero = _as(x, 0.0)
    live = scratch[0]
    c = scratch[1]
    count = scratch[2][:M]
    count[:] = 0
    near = scratch[5]
    gx = scratch[6][0]
    gy = scratch[6][1]
    gd = scratch[6][2]
    # Beyond reach: pen <= 0, the pair is skipped without a square root.
    nn = _near_pairs(x, i, j, reach, zero, touched, False, near, gx, gy, gd)
    nl = 0
    for t in range(nn):
        k = np.uint64(near[t])
        ii = np.uint64(i[k])
        jj = np.uint64(j[k])
        dist = gd[t]
        pen = reach[k] - dist
        wsum = w[ii] + w[jj]
        if not (pen > skin_f and dist > 0 and wsum > 0):
            continue
        live[nl] = k
        nl += 1
        nx = gx[t]
        ny = gy[t]
        depth[k] += pen
        touched[k] = True
        relx = (x[jj, 0] - x0[jj, 0]) - (x[ii, 0] - x0[ii, 0])
        rely = (x[jj, 1] - x0[jj, 1]) - (x[ii, 1] - x0[ii, 1])
        rn = relx * nx + rely * ny
        tx = relx - rn * nx
        ty = rely - rn * ny
        lim = mu * depth[k]
        stick = tx * tx + ty * ty < lim * lim
        stuck[k] = stick
        # Normal: split the overlap by inverse mass. Friction: undo the relative slide.
        # (stick / wsum is 0 for a slide: wsum > 0 here.)
        s = one / wsum if stick else zero
        c[k, 0] = (pen / wsum) * nx - tx * s
        c[k, 1] = (pen / wsum) * ny - ty * s
        count[np.uint64(a[k])] += 1
        count[np.uint64(b[k])] += 1
    if not nl:
        return
    # Sums in pair order from zero, the a ends then the b ends, as np.bincount; all
    # zero on entry, cleared as they are read.
    ta = scratch[3][:M]
    tb = scratch[4][:M]
    for q in range(nl):
        k = np.uint64(live[q])
        ka = np.uint64(a[k])
        kb = np.uint64(b[k])
        share = _share(count[ka], count[kb])
        c[k, 0] = c[k, 0] * share                  # rounded to the positions' type
        c[k, 1] = c[k, 1] * share
        wi = w[np.uint64(i[k])]
        wj = w[np.uint64(j[k])]
        ta[ka, 0] += -wi * c[k, 0]
        ta[ka, 1] += -wi * c[k, 1]
        tb[kb, 0] += wj * c[k, 0]
        tb[kb, 1] += wj * c[k, 1]
    for mm in range(M):
        p = np.uint64(nodes[mm])
        sx = ta[mm, 0] + tb[mm, 0]
        sy = ta[mm, 1] + tb[mm, 1]
        ta[mm, 0] = 0.0
        ta[mm, 1] = 0.0
        tb[mm, 0] = 0.0
        tb[mm, 1] = 0.0
        x[p, 0] += sx
        x[p, 1] += sy
        dx[p, 0] += sx
        dx[p, 1] += sy


@jit_borrow
def project(x, w, x0, dx, r, skin, C, cp, cg, mu, ref, depth, touched, stuck, nrm,
            spent, kinds, rows, geo, pverts, pnorm, pedge, bverts, bnorm, bedge, P, pi, pj,
            pa, pb, nodes, reach, pmu, pdepth, ptouched, pstuck,
            scratch):  # pragma: no cover - compiled
    """``Contacts.project``: the particle pairs (in ``scratch``: :func:`pair_scratch`,
    room for them), then the shapes and walls, each contact after the previous one (a
    particle's contacts in the reference's order; different particles do not
    interact here).

    The first ``C`` contacts and ``P`` pairs of the arrays given (room for more): the
    frame passes its arrays whole, as views made here cost nothing (``jit_borrow``)
    and views made there a reference count each (see :func:`frame`)."""
    cp, cg, mu, ref, depth = cp[:C], cg[:C], mu[:C], ref[:C], depth[:C]
    touched, stuck, nrm, spent = touched[:C], stuck[:C], nrm[:C], spent[:C]
    pi, pj, pa, pb, reach = pi[:P], pj[:P], pa[:P], pb[:P], reach[:P]
    pdepth, ptouched, pstuck = pdepth[:P], ptouched[:P], pstuck[:P]
    if P:
        _project_pairs(x, w, x0, dx, skin, pi, pj, pa, pb, nodes, reach, pmu, pdepth,
                       ptouched, pstuck, scratch)
    for c in range(cp.size):
        q = np.uint64(cp[c])
        d, nx, ny = _contact_distance(cg[c], x[q, 0], x[q, 1], ref[c], kinds, rows, geo,
                                      pverts, pnorm, pedge, bverts, bnorm, bedge,
                                      x0[q, 0], x0[q, 1])
        pen = r[q] - d
        if not (pen > 0 and w[q] > 0):
            continue
        cx = (pen + skin) * nx
        cy = (pen + skin) * ny
        x[q, 0] += cx
        x[q, 1] += cy
        depth[c] += pen
        touched[c] = True
        nrm[c, 0] = nx
        nrm[c, 1] = ny
        relx = x[q, 0] - x0[q, 0]
        rely = x[q, 1] - x0[q, 1]
        rn = relx * nx + rely * ny
        tx = relx - rn * nx
        ty = rely - rn * ny
        tl = math.sqrt(tx * tx + ty * ty)
        budget = mu[c] * depth[c] - spent[c]
        stick = tl < budget
        stuck[c] = stick
        f = 1.0 if stick else (budget / tl if budget > 0 else 0.0)
        spent[c] += tl if stick else _max(budget, 0.0)
        fx = tx * f
        fy = ty * f
        cx -= fx
        cy -= fy
        x[q, 0] -= fx
        x[q, 1] -= fy
        dx[q, 0] += cx
        dx[q, 1] += cy


@jit
def _stop_k(vn, vn_ref, mu):  # pragma: no cover - compiled
    """``_stop``: the inelastic rule, ``(change, friction budget)``."""
    new = _min(_max(vn, 0.0), _max(vn_ref, 0.0))
    return new - vn, mu * _max(new - vn_ref, 0.0)


@jit_borrow
def _shape_sweep(v, bounce, v_start, v_ref, bounced, v_th, cp, cact, cnx, cny, e, mu,
                 used, lift):  # pragma: no cover - compiled
    """The shape contacts' part of ``Contacts._velocity_sweep`` (``_shape_velocity``
    per contact, one after another); returns the largest change."""
    change = 0.0
    for c in range(cp.size):
        if not cact[c]:
            continue
        q = np.uint64(cp[c])
        nx = cnx[c]
        ny = cny[c]
        vn = v[q, 0] * nx + v[q, 1] * ny
        if bounce:
            vn0 = v_start[q, 0] * nx + v_start[q, 1] * ny
            target = -e[c] * vn0 if vn0 < -v_th else 0.0
            if lift.size and not math.isnan(lift[c]):   # bounced by the sweep
                target = lift[c]
            if target > 0:
                bounced[q] = True
            dvn = _max(target - vn, 0.0)
            budget = mu[c] * dvn
        else:
            dvn, budget = _stop_k(vn, v_ref[q, 0] * nx + v_ref[q, 1] * ny, mu[c])
            budget = _max(budget - used[c], 0.0)
        vtx = v[q, 0] - vn * nx
        vty = v[q, 1] - vn * ny
        vtl = math.sqrt(vtx * vtx + vty * vty)
        dvt = _min(budget, vtl)
        if not bounce:
            used[c] += dvt
        s = dvt / vtl if vtl != 0 else dvt
        v[q, 0] += dvn * nx - s * vtx
        v[q, 1] += dvn * ny - s * vty
        size = abs(dvn) + dvt
        if size > change:
            change = size
    return change


@jit_inline
def _pair_change(vrx, vry, vn, nx, ny, d, budget, stuck):  # pragma: no cover - compiled
    """A pair's part of :func:`_pair_sweep` once its normal change ``d`` and friction
    ``budget`` are known, from the relative velocity ``vrx, vry`` (its normal part
    ``vn`` along ``nx, ny``): ``(t, dvx, dvy, size)``, the tangential change ``t``
    (all of the slip when ``stuck``), the change of relative velocity before its share
    ``d n - t (slip direction)`` in float64, and ``|d| + t``. Numbers in and out."""
    tx = vrx - vn * nx
    ty = vry - vn * ny
    vtl = math.sqrt(tx * tx + ty * ty)
    t = vtl if stuck else _min(budget, vtl)
    sv = np.float64(t / vtl if vtl != 0 else t)
    d64 = np.float64(d)
    return (t, d64 * nx - sv * np.float64(tx), d64 * ny - sv * np.float64(ty),
            abs(d) + t)


@jit_borrow
def _pair_sweep(v, bounce, v_th, bounced, ai, aj, aa, ab, anx, any_, afi, afj, astuck,
                aref, aused, e, mu, nodes, gx, dt, gy, size, g0, g1, g2, g3, live,
                count, da, db):  # pragma: no cover - compiled
    """``Contacts._pair_velocity``: one Jacobi sweep over the pairs in contact,
    averaged as in the projection; returns the largest change.

    The pairs come as a compact list (``ai, aj`` particles, ``aa, ab`` their rows of
    ``nodes``, the normal, ``afi = -wi/(wi + wj)``, ``afj = wj/(wi + wj)``, whether
    it stuck, ``aref`` the pre-contact normal velocity, ``aused`` the friction spent
    by earlier sweeps), in the reference's pair order; the rest is scratch.

    Each pair's change of relative velocity before its share, ``dvn n - dvt t``, is
    formed in the first loop, in float64 as the scratch would have held its parts
    (the same bits), and only scaled in the scatter, which so reads 2 arrays where it
    read 6. In the inelastic sweep (``not bounce``, the one every contact frame runs)
    the ends' velocities are gathered first (``g0..g3``), so that loop reads only
    contiguous arrays and LLVM makes it vector instructions, square roots and
    divisions included: the pile's frame 2.12 -> 2.00 ms. (Splitting it after the
    gathers' arithmetic instead, only the roots and divisions vectorised, was no
    faster.)

    ``da, db`` come all zero and are left so (each row read is cleared): no clearing
    of all of them a sweep (the pile's 2,000 nodes: 64 kB)."""
    na = ai.size
    if not bounce:
        # The inelastic sweep: the ends' velocities gathered (g0..g3, float64 holding
        # either float type exactly), then every pair in a loop of vector instructions.
        for s in range(na):
            ii = np.uint64(ai[s])      # unsigned: no wraparound tests (module docstring)
            jj = np.uint64(aj[s])
            g0[s] = v[ii, 0]
            g1[s] = v[ii, 1]
            g2[s] = v[jj, 0]
            g3[s] = v[jj, 1]
        for s in range(na):
            nx = anx[s]
            ny = any_[s]
            vrx = _as(v, g2[s]) - _as(v, g0[s])
            vry = _as(v, g3[s]) - _as(v, g1[s])
            vn = vrx * nx + vry * ny
            d, budget = _stop_k(vn, aref[s], mu)
            budget = _max(budget - aused[s], 0.0)
            dt[s], gx[s], gy[s], size[s] = _pair_change(vrx, vry, vn, nx, ny, d, budget,
                                                        astuck[s])
    for s in range(na if bounce else 0):    # bouncing: it marks what it bounces
        ii = np.uint64(ai[s])
        jj = np.uint64(aj[s])
        nx = anx[s]
        ny = any_[s]
        vrx = v[jj, 0] - v[ii, 0]
        vry = v[jj, 1] - v[ii, 1]
        vn = vrx * nx + vry * ny
        target = -e * vn if -vn > v_th else 0.0
        if target > 0:
            bounced[ii] = True
            bounced[jj] = True
        d = _max(target - vn, 0.0)
        dt[s], gx[s], gy[s], size[s] = _pair_change(vrx, vry, vn, nx, ny, d, mu * d,
                                                    astuck[s])
    # The largest change: sizes are >= 0 or NaN, so the largest key (_key) is theirs,
    # in vector instructions (_max's chain took 5.7 us of a pile sweep's 30).
    kt = np.uint64(0)
    for s in range(na):
        kt = max(kt, _key(size[s]))
    top = _unkey(kt)
    # As in the projection: round-off changes (touching balls at rest) do not count.
    floor = 1e-9 + 1e-6 * top
    count[:] = 0
    nl = 0
    # Written always, kept if live: no branch (the pile's 4 % of pairs not live fall at
    # random; 3.6 -> 2.4 us a sweep).
    for s in range(na):
        keep = np.int64(size[s] > floor)
        live[nl] = s
        nl += keep
        count[np.uint64(aa[s])] += keep
        count[np.uint64(ab[s])] += keep
    if not nl:             # none above the floor (or top NaN: none compares)
        return 0.0
    change = top           # the largest live size: top is above its floor
    for q in range(nl):
        s = np.uint64(live[q])
        sa = np.uint64(aa[s])
        sb = np.uint64(ab[s])
        share = _share(count[sa], count[sb])
        if not bounce:
            aused[s] += dt[s] * share
        # Relative velocity change dv = dvn n - dvt t; each end takes its w/wsum share.
        dvx = gx[s] * share
        dvy = gy[s] * share
        da[sa, 0] += afi[s] * dvx
        da[sa, 1] += afi[s] * dvy
        db[sb, 0] += afj[s] * dvx
        db[sb, 1] += afj[s] * dvy
    for mm in range(nodes.size):
        if count[mm]:   # others gain exactly 0 (and are not in contact: not filled)
            p = np.uint64(nodes[mm])
            v[p, 0] += da[mm, 0] + db[mm, 0]
            v[p, 1] += da[mm, 1] + db[mm, 1]
            da[mm, 0] = 0.0
            da[mm, 1] = 0.0
            db[mm, 0] = 0.0
            db[mm, 1] = 0.0
    return change


@jit_borrow
def _velocity_sweep(v, bounce, v_start, v_pre, bounced, v_th, cp, cact, cnx, cny, e, mu,
                    used, lift, pairs):  # pragma: no cover - compiled
    """``Contacts._velocity_sweep``: the shape contacts, then the particle pairs (the
    active ones, packed in ``pairs``); returns the largest change."""
    change = _shape_sweep(v, bounce, v_start, v_pre, bounced, v_th, cp, cact, cnx, cny,
                          e, mu, used, lift)
    (ai, aj, aa, ab, anx, any_, afi, afj, astuck, aref, aused, pe, pmu, nodes, s0, s1,
     s2, s3, s4, s5, s6, s7, live, count, da, db) = pairs
    if ai.size:
        change = max(change, _pair_sweep(
            v, bounce, v_th, bounced, ai, aj, aa, ab, anx, any_, afi, afj, astuck, aref,
            aused, pe, pmu, nodes, s0, s1, s2, s3, s4, s5, s6, s7, live, count, da,
            db))
    return change


@jit
def finish_space(x, C, P, M):  # pragma: no cover - compiled
    """The arrays :func:`finish_into` works in, for up to ``C`` contacts, ``P``
    particle pairs and ``M`` pair nodes with ``x``'s particles; ``seen`` (the last)
    starts all False and the velocity sums ``da, db`` all zero, and every call leaves
    them so."""
    n = x.shape[0]
    return (np.empty(C, np.bool_), np.empty(C), np.empty(C), np.empty(P, np.int64),
            np.empty(P, np.int64), np.empty(P, np.int64), np.empty(P, np.int64),
            np.empty(P, x.dtype), np.empty(P, x.dtype), np.empty(P, x.dtype),
            np.empty(P, x.dtype), np.empty(P, np.bool_),
            np.empty(max(C + 2 * P, n), np.int64), np.empty_like(x), np.empty((n, 2)),
            np.empty((n, 2)), np.empty(n, np.bool_),
            np.empty(P), np.empty(C), np.empty((8, P)), np.empty(P, np.int64),
            np.empty(M, np.int64), np.zeros((M, 2)), np.zeros((M, 2)), np.empty(C),
            np.empty(P), np.zeros(n, np.bool_))


@jit
def finish(x, x0, v, x_prev, w, r, dx, v_start, position_based, gain, h, v_th, touch,
           sweeps, cp, cg, e, mu, ref, touched, stuck, nrm, spent, kinds, rows, geo,
           pverts, pnorm, pedge, bverts, bnorm, bedge, pi, pj, pa, pb, nodes, reach, pe,
           pmu, ptouched, pstuck, a, at, vhit, tau):  # pragma: no cover - compiled
    """:func:`finish_into` in arrays of its own (the substep path)."""
    return finish_into(x, x0, v, x_prev, w, r, dx, v_start, position_based, gain, h,
                       v_th, touch, sweeps, cp.size, cp, cg, e, mu, ref, touched, stuck,
                       nrm, spent, kinds, rows, geo, pverts, pnorm, pedge, bverts, bnorm,
                       bedge, pi.size, pi, pj, pa, pb, nodes, reach, pe, pmu, ptouched,
                       pstuck, a, at, vhit, tau,
                       finish_space(x, cp.size, pi.size, nodes.size))


@jit_borrow
def finish_into(x, x0, v, x_prev, w, r, dx, v_start, position_based, gain, h, v_th,
                touch, sweeps, C, cp, cg, e, mu, ref, touched, stuck, nrm, spent, kinds,
                rows, geo, pverts, pnorm, pedge, bverts, bnorm, bedge, P, pi, pj, pa, pb,
                nodes, reach, pe, pmu, ptouched, pstuck, a, at, vhit, tau,
                space):  # pragma: no cover - compiled
    """``Contacts.finish``: the velocity pass, written over ``v`` (and ``x_prev`` when
    ``position_based``: the integrator's ``ContactFold.from_positions``; ``gain`` its
    ``ContactFold.gain``) on the contact rows; ``a`` the acceleration, ``at`` its
    ``velocity_time``, ``vhit``, ``tau`` the sweep's bounces; in the arrays of
    ``space`` (:func:`finish_space`, room for at least these contacts, pairs and
    nodes). Returns False when no contact was active (nothing written). The first
    ``C`` contacts and ``P`` pairs of the arrays given, as in :func:`project`."""
    cp, cg, e, mu, ref, touched = cp[:C], cg[:C], e[:C], mu[:C], ref[:C], touched[:C]
    stuck, nrm, spent, vhit, tau = stuck[:C], nrm[:C], spent[:C], vhit[:C], tau[:C]
    pi, pj, pa, pb, reach = pi[:P], pj[:P], pa[:P], pb[:P], reach[:P]
    ptouched, pstuck = ptouched[:P], pstuck[:P]
    nodes = nodes[:nodes.size if P else 0]
    touch_f = _as(x, touch)
    (sp_cact, sp_cnx, sp_cny, sp_ai, sp_aj, sp_aa, sp_ab, sp_anx, sp_any, sp_afi, sp_afj,
     sp_astuck, sp_rows, v_pos, v_pre, v_imp, bounced, sp_aref, sp_lift, sp_scr, sp_live,
     sp_count, sp_da, sp_db, sp_used, sp_aused, seen) = space
    cact = sp_cact[:C]
    cnx = sp_cnx[:C]
    cny = sp_cny[:C]
    active = False
    for c in range(C):
        q = cp[c]
        if touched[c]:          # a hit or a push keeps its own normal
            cnx[c] = nrm[c, 0]
            cny[c] = nrm[c, 1]
            cact[c] = w[q] > 0
        else:
            d, nx, ny = _contact_distance(cg[c], x[q, 0], x[q, 1], ref[c], kinds, rows,
                                          geo, pverts, pnorm, pedge, bverts, bnorm, bedge,
                                          x0[q, 0], x0[q, 1])
            cnx[c] = nx
            cny[c] = ny
            cact[c] = d < r[q] + touch_f and w[q] > 0
        active |= cact[c]
    # The pairs in contact, as a compact list with what every sweep reuses.
    ai = sp_ai[:P]
    aj = sp_aj[:P]
    aa = sp_aa[:P]
    ab = sp_ab[:P]
    anx = sp_anx[:P]
    any_ = sp_any[:P]
    afi = sp_afi[:P]
    afj = sp_afj[:P]
    astuck = sp_astuck[:P]
    # The pairs near enough with their distances and normals (_near_pairs), listed into
    # the arrays the compact list is then written over, never ahead of what it reads.
    # The pile: 28 -> 25 us a substep.
    near = sp_live[:P]
    gd = afi
    # Apart (dist >= reach + touch) unless touched: skipped, no square root.
    nn = _near_pairs(x, pi, pj, reach, touch_f, ptouched, True, near, anx, any_, gd)
    # The particles in contact (pinned ends of pairs included: the sweeps read them);
    # only their rows of the velocity views are ever read, so only they are filled.
    # Marked in ``seen`` as their contacts and pairs are listed, then listed once each.
    for c in range(C):
        seen[np.uint64(cp[c])] |= cact[c]
    na = 0
    for t in range(nn):
        k = np.uint64(near[t])
        ii = np.uint64(pi[k])
        jj = np.uint64(pj[k])
        dist = gd[t]
        wsum = w[ii] + w[jj]
        # Written always, kept if in contact: one test, no branches (10 us a pile frame).
        keep = (ptouched[k] | (dist < reach[k] + touch_f)) & (dist > 0) & (wsum > 0)
        ai[na] = pi[k]
        aj[na] = pj[k]
        aa[na] = pa[k]
        ab[na] = pb[k]
        anx[na] = anx[t]
        any_[na] = any_[t]
        fi = w[ii] / wsum
        afi[na] = -fi
        afj[na] = fi if w[jj] == w[ii] else w[jj] / wsum    # same operands: same bits
        astuck[na] = pstuck[k]
        na += np.int64(keep)
        seen[ii] |= keep
        seen[jj] |= keep
    if not active and not na:       # nothing marked: seen is all False
        return False
    # The rows listed, written always and kept if marked, the marks cleared for the
    # next call: in a walk over all particles when contacts are many, else over the
    # contacts' own particles (each where first met). The order of the rows changes
    # no result: each row is computed on its own, and the largest |v_pre| is the same
    # in any order. Listing them as the pairs were listed had every pair wait for the
    # mark of the last (the pile's compaction: 17.6 -> 13 us a substep).
    rowlist = sp_rows
    nr = 0
    if 4 * (C + 2 * na) >= x.shape[0]:
        for q in range(x.shape[0]):
            rowlist[nr] = q
            nr += np.int64(seen[q])
            seen[q] = False
    else:
        for c in range(C):
            q = np.uint64(cp[c])
            rowlist[nr] = q
            nr += np.int64(seen[q])
            seen[q] = False
        for s in range(na):
            ii = np.uint64(ai[s])
            rowlist[nr] = ii
            nr += np.int64(seen[ii])
            seen[ii] = False
            jj = np.uint64(aj[s])
            rowlist[nr] = jj
            nr += np.int64(seen[jj])
            seen[jj] = False
    # The two views: v_pos (what the positions say) and v_pre (without dx).
    h_f = _as(x, h)
    ktop = np.uint64(0)        # the largest |v_pre| of a moving row, as a _key
    for t in range(nr):
        q = np.uint64(rowlist[t])
        for k in range(2):
            if position_based:
                v_pos[q, k] = (x[q, k] - x0[q, k]) / h_f
                v_pre[q, k] = v_pos[q, k] - dx[q, k] / h
            else:
                v_pos[q, k] = v[q, k]
                v_pre[q, k] = v_pos[q, k] - gain * dx[q, k]
            v_imp[q, k] = v_pre[q, k]
        bounced[q] = False
        if w[q] > 0:
            ktop = max(ktop, _key(v_pre[q, 0]), _key(v_pre[q, 1]))
    tol = 1e-9 * (1.0 + _unkey(ktop))
    # Each pair's pre-contact normal velocity: _may_bounce's test and _stop's reference.
    aref = sp_aref[:na]
    for s in range(na):
        ii = np.uint64(ai[s])
        jj = np.uint64(aj[s])
        aref[s] = ((v_pre[jj, 0] - v_pre[ii, 0]) * anx[s]
                   + (v_pre[jj, 1] - v_pre[ii, 1]) * any_[s])
    # _may_bounce: a shape contact with restitution approaching faster than v_th, or
    # a particle pair approaching that fast.
    bounce = False
    for c in range(C):
        q = cp[c]
        if cact[c] and ((e[c] > 0 and v_start[q, 0] * cnx[c] + v_start[q, 1] * cny[c]
                         < -v_th) or vhit[c] < 0):
            bounce = True
            break
    # The sweep's bounces: the normal velocity they left with, carried to time ``at``.
    swept_bounce = False
    for c in range(C):
        swept_bounce |= vhit[c] < 0
    lift = sp_lift[:C if swept_bounce else 0]           # none: nothing to fill
    lift[:] = np.nan
    for c in range(C if swept_bounce else 0):
        if vhit[c] < 0:
            q = cp[c]
            lift[c] = -e[c] * vhit[c] + (a[q, 0] * cnx[c] + a[q, 1] * cny[c]) * (
                h * (at - tau[c]))
    if not bounce and pe > 0:
        for s in range(na):
            if aref[s] < -v_th:
                bounce = True
                break
    M = nodes.size
    live = sp_live[:na]
    count = sp_count[:M]
    da = sp_da[:M]
    db = sp_db[:M]
    used = sp_used[:C]
    used[:] = 0.0
    aused = sp_aused[:na]
    aused[:] = 0.0
    pairs = (ai[:na], aj[:na], aa[:na], ab[:na], anx[:na], any_[:na], afi[:na],
             afj[:na], astuck[:na], aref, aused, pe, pmu, nodes, sp_scr[0, :na],
             sp_scr[1, :na], sp_scr[2, :na], sp_scr[3, :na], sp_scr[4, :na],
             sp_scr[5, :na], sp_scr[6, :na], sp_scr[7, :na], live, count, da, db)
    for _ in range(max(sweeps, 4) if bounce else 0):
        if _velocity_sweep(v_imp, True, v_start, v_pre, bounced, v_th, cp, cact, cnx,
                           cny, e, mu, used, lift, pairs) <= tol:
            break
    # The friction the positions already took is in v_pos (its share of it for a
    # velocity integrator's fold): the inelastic sweeps only add the rest.
    g_used = gain
    for c in range(C):
        used[c] = spent[c] * g_used
    for _ in range(max(sweeps, 2)):
        if _velocity_sweep(v_pos, False, v_start, v_pre, bounced, v_th, cp, cact, cnx,
                           cny, e, mu, used, lift, pairs) <= tol:
            break
    for t in range(nr):
        q = np.uint64(rowlist[t])
        if not w[q] > 0:
            continue
        if bounced[q]:
            vx = v_imp[q, 0]
            vy = v_imp[q, 1]
        else:
            vx = np.float64(v_pos[q, 0])
            vy = np.float64(v_pos[q, 1])
        if position_based:
            x_prev[q, 0] = x[q, 0] - h * vx
            x_prev[q, 1] = x[q, 1] - h * vy
        v[q, 0] = vx
        v[q, 1] = vy
    return True

# ---------------------------------------------------------------- a whole frame

#: Where :func:`_frame_steps` stops and goes on within a substep: before ``begin_into``
#: (``_BEGIN``; ``_begin_walls`` or ``_begin_fast`` could not: too little room, or the
#: shape grid's broad phase), at the Verlet list (``_LIST``; stale: ``_REBUILD``), at
#: the room of the stages' arrays (``_ROOM``; too small: ``_GROW``), at the solve
#: (``_SOLVE``).
_START, _BEGIN, _LIST, _REBUILD, _ROOM, _GROW, _SOLVE = 0, 1, 2, 3, 4, 5, 6


@jit_borrow
def _frame_steps(s, stage, C, skin, touch, use, x, x_prev, v, a, w, r, v_old, dx, rc, ca,
                 c1s, c2s, at, h, v_th, iterations, sweeps, links, ci, cj, rest,
                 compliance, kind, plan, inv_h2, lam, zero_lam, den, even, buf, lost,
                 kinds, rows, geo, nshapes, nwalls, pverts, pnorm, pedge, bverts, bnorm,
                 bedge, e_def, mu_def, eps, skin_min, touch_min, margin, collide, valid,
                 pi, pj, pa, pb, nodes, reach, x_ref, pskin, cp, cg, ref, depth, touched,
                 stuck, nrm, spent, vhit, tau, ce, cmu, near, fspace, pdepth, ptouched,
                 pstuck, pscratch, brute_pairs, bspace):  # pragma: no cover - compiled
    """:func:`frame`'s substeps from substep ``s`` at ``stage`` (with the ``C,
    skin, touch, use`` found before it), until the last is done or one needs an
    array made: returns ``s, stage, C, skin, touch, use``, ``stage`` the one to go on
    at after :func:`frame` made it (``_BEGIN``, ``_REBUILD``, ``_GROW``), or
    ``s == rc.size``. Makes no array and counts no reference (``jit_borrow``)."""
    n = x.shape[0]
    zero = c1s[0] - c1s[0]
    steps = rc.size
    # The positions: before substep s's step (X = x for an even s), or after it.
    after = stage != _START
    X = x_prev if (s % 2 == 0) == after else x
    PX = x if (s % 2 == 0) == after else x_prev
    while s < steps:
        if stage == _START:
            for k in range(n):
                v_old[k, 0] = v[k, 0]
                v_old[k, 1] = v[k, 1]
            _verlet_step(X, PX, a, rc[s], ca[s], zero, c2s[s], v)
            X, PX = PX, X
            dx[:] = 0.0
            # Straight into the arrays: walls only (_begin_walls), or shapes in a broad
            # phase that makes no array (_begin_fast).
            if nshapes == 0:
                C, skin, touch = _begin_walls(PX, X, w, r, geo, nwalls, e_def, mu_def,
                                              eps, skin_min, touch_min, margin, cp, cg,
                                              ref, depth, touched, stuck, nrm, spent,
                                              vhit, tau, ce, cmu, near)
            else:
                C, skin, touch = _begin_fast(PX, X, w, r, dx, kinds, rows, geo, nshapes,
                                             nwalls, pverts, pnorm, pedge, bverts, bnorm,
                                             bedge, e_def, mu_def, eps, skin_min,
                                             touch_min, margin, brute_pairs, v_old, a, h,
                                             v_th, cp, cg, ref, depth, touched, stuck, nrm,
                                             spent, vhit, tau, ce, cmu, near, bspace)
            if C < 0:
                return s, _BEGIN, C, skin, touch, use
            stage = _LIST
        if stage == _LIST:
            use = False
            if collide and not (valid and moved_less(X, x_ref, (0.5 * pskin) ** 2)):
                return s, _REBUILD, C, skin, touch, use
            stage = _ROOM
        if stage == _ROOM:
            use = collide and pi.size > 0 and any_moving(pi, pj, w)
            P = pi.size if use else 0
            M = nodes.size if use else 0
            if (C > fspace[0].size or P > fspace[3].size or M > fspace[21].size
                    or P > pdepth.size or P > pscratch[0].size or M > pscratch[2].size):
                return s, _GROW, C, skin, touch, use
        P = pi.size if use else 0
        have = C > 0 or use
        for k in range(P):
            pdepth[k] = 0.0
            ptouched[k] = False
            pstuck[k] = False
        if zero_lam:
            lam[:] = 0
        for _ in range(iterations):
            if links:
                _sweep_factored(X, w, ci, cj, rest, compliance, kind, plan, inv_h2, lam,
                                den, even, buf, lost)
            if have:
                project(X, w, PX, dx, r, skin, C, cp, cg, cmu, ref, depth, touched, stuck,
                        nrm, spent, kinds, rows, geo, pverts, pnorm, pedge, bverts,
                        bnorm, bedge, P, pi, pj, pa, pb, nodes, reach, mu_def, pdepth,
                        ptouched, pstuck, pscratch)
        _add_scaled_difference(v, X, PX, c1s[s])
        if have:
            finish_into(X, PX, v, PX, w, r, dx, v_old, True, 1.0 / h, h, v_th, touch,
                        sweeps, C, cp, cg, ce, cmu, ref, touched, stuck, nrm, spent,
                        kinds, rows, geo, pverts, pnorm, pedge, bverts, bnorm, bedge, P,
                        pi, pj, pa, pb, nodes, reach, e_def, mu_def, ptouched, pstuck, a,
                        at, vhit, tau, fspace)
        s += 1
        stage = _START
    return s, stage, C, skin, touch, use


@jit
def frame(x, x_prev, v, a, w, r, v_old, dx, bspace, rc, ca, c1s, c2s, at, h, v_th,
          iterations, sweeps, links, ci, cj, rest, compliance, kind, plan, offsets, inv_h2,
          lam, zero_lam, kinds, rows, geo, nshapes, nwalls, pverts, pnorm, pedge, bverts,
          bnorm, bedge, keys, sids, cell, origin, dims, e_def, mu_def, eps, skin_min,
          touch_min, margin, brute_pairs, max_cells, collide, exclude, valid, pi, pj,
          pa, pb, nodes, reach, x_ref, pskin, new_skin):  # pragma: no cover - compiled
    """A whole frame of ``rc.size`` substeps of a Verlet-family world with contacts
    (and links), gravity its only force: what ``pipeline.substep`` does, substep by
    substep, in one call. The same operations in the same order, so the same bits
    (tested against the substep path), without a dozen Python calls a substep.

    Per substep ``s``: ``v_old = v``; the position step over ``x_prev``
    (``kernels.verlet_step`` with ``c1 = 0``: the velocity "later") and the two
    buffers swap roles; ``begin``; the Verlet list checked (``moved_less`` against
    half its ``pskin``) and rebuilt when stale (``pair_list`` with ``new_skin``,
    ``x_ref`` a copy of the positions), used if some pair can move (``any_moving``);
    ``lam`` zeroed if ``zero_lam``; ``iterations`` times the links' sweep
    (``links``: ``kernels.sweep_factored`` with the frame's ``link_factors``, one
    thread, the same bits as the parallel sweep) and the contacts' ``project``;
    ``v += (x - x_prev) c1`` (``add_scaled_difference``); ``finish`` (position based,
    ``sweeps``). ``v_old``, ``dx`` and ``bspace`` (:func:`begin_space` with
    ``scratch`` for these particles and shapes) are the caller's scratch, kept from
    frame to frame.

    Returns ``swapped`` (the new positions are in ``x_prev``'s array: the caller
    swaps the two) and the Verlet list as it stands: ``valid, pi, pj, pa, pb,
    nodes, reach, x_ref, pskin``.
    """
    steps = rc.size
    den = np.empty(ci.size, rest.dtype)          # the links' factors, fixed this frame
    even = np.empty(ci.size, np.bool_)
    lost = _link_factors(w, ci, cj, compliance, inv_h2, den, even)
    buf = _soft_scratch(x)
    # The contact stages' arrays: the start's (``bspace``, begin_space's with scratch)
    # from the caller, kept from frame to frame (made each frame, their 3 MB came back
    # from the system with ~90 page faults a frame); the rest once a frame (grown when
    # a rebuilt list needs more).
    (_, _, _, _, cp, cg, ref, depth, touched, stuck, nrm, spent, vhit, tau, ce, cmu,
     near, _) = bspace
    # Room for half as many pairs and nodes again as the list has: a rebuilt list with
    # more grew them, its new arrays came back from the system page by page (the
    # pile: 7 page faults a frame, ~30 us).
    room = pi.size + pi.size // 2 + 64
    mroom = min(nodes.size + nodes.size // 2 + 64, x.shape[0])
    fspace = finish_space(x, ref.size, room, mroom)
    pdepth = np.zeros(room)                  # the pairs' state, room for the list
    ptouched = np.zeros(room, np.bool_)
    pstuck = np.zeros(room, np.bool_)
    pscratch = pair_scratch(x, room, mroom)
    # The substeps run in _frame_steps, a kernel that counts no references; it stops
    # where one must be counted (an array made: begin_into's contacts, a rebuilt Verlet
    # list, more room), this kernel does that and it goes on from there. In a kernel
    # that counts them, every array a loop may rebind costs a count at every branch
    # that does not (numba copies it there): ~230 atomic adds a substep, 13 % of the
    # soft blob's time, where one call a frame now runs all its substeps.
    # Loop state that starts from values, not constants: a constant (``s = 0``) is a
    # literal type to numba, which then compiles _frame_steps twice, for the literal
    # zeros and for the integers the loop makes of them (~30 s of CPU for nothing).
    s = steps - steps
    stage = s
    C = s
    skin = float(s)
    touch = skin
    use = steps < 0
    while s < steps:
        s, stage, C, skin, touch, use = _frame_steps(
            s, stage, C, skin, touch, use, x, x_prev, v, a, w, r, v_old, dx, rc, ca, c1s,
            c2s, at, h, v_th, iterations, sweeps, links, ci, cj, rest, compliance, kind,
            plan, inv_h2, lam, zero_lam, den, even, buf, lost, kinds, rows, geo, nshapes,
            nwalls, pverts, pnorm, pedge, bverts, bnorm, bedge, e_def, mu_def, eps,
            skin_min, touch_min, margin, collide, valid, pi, pj, pa, pb, nodes, reach,
            x_ref, pskin, cp, cg, ref, depth, touched, stuck, nrm, spent, vhit, tau, ce,
            cmu, near, fspace, pdepth, ptouched, pstuck, pscratch, brute_pairs, bspace)
        X = x_prev if s % 2 == 0 else x         # this substep's positions (swapped)
        PX = x if s % 2 == 0 else x_prev
        if stage == _BEGIN:
            (C, cp, cg, ce, cmu, ref, touched, nrm, depth, spent, stuck, vhit, tau, skin,
             touch) = begin_into(PX, X, w, r, dx, kinds, rows, geo, nshapes, nwalls,
                                 pverts, pnorm, pedge, bverts, bnorm, bedge, keys, sids,
                                 cell, origin, dims, e_def, mu_def, eps, skin_min,
                                 touch_min, margin, brute_pairs, max_cells, v_old, a, h,
                                 v_th, bspace)
            stage = _LIST
        elif stage == _REBUILD:
            pi, pj, pa, pb, nodes, reach = pair_list(X, r, new_skin, exclude)
            x_ref = X.copy()
            pskin = new_skin
            valid = True
            stage = _ROOM
        elif stage == _GROW:
            P = pi.size if use else 0
            M = nodes.size if use else 0
            room = P + P // 2 + 64          # with room to spare, as above
            mroom = min(M + M // 2 + 64, X.shape[0])
            if C > fspace[0].size or P > fspace[3].size or M > fspace[21].size:
                fspace = finish_space(X, max(C, ref.size), room, mroom)
            if P > pdepth.size:
                pdepth = np.zeros(room)
                ptouched = np.zeros(room, np.bool_)
                pstuck = np.zeros(room, np.bool_)
            if P > pscratch[0].size or M > pscratch[2].size:
                pscratch = pair_scratch(X, room, mroom)
            stage = _SOLVE
    return steps % 2 == 1, valid, pi, pj, pa, pb, nodes, reach, x_ref, pskin


_threads = []


def launch_threads() -> None:
    """Dispatch the links' parallel sweep (``kernels._project_batches``) once from
    Python. :func:`frame` used to call it from a serial kernel: loaded from numba's
    disk cache into a process where no parallel kernel had run yet, the threading
    layer's entry points it called were unresolved and the call jumped to address 0
    (a segfault on the second run, the first that loads the cache). ``frame`` now
    sweeps its links with ``kernels.sweep_factored`` and calls no parallel kernel; this
    stays harmless for the callers that still make it."""
    if not _threads:
        z = np.zeros(0, np.int64)
        _project_batches(np.zeros((0, 2)), np.zeros(0), z, z, np.zeros(0), np.zeros(0),
                         np.zeros(0, np.int8), np.zeros((0, 6), np.int64),
                         np.zeros(1, np.int64), 1.0, np.zeros(0), 2**62)
        _threads.append(True)
