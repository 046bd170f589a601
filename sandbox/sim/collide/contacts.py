"""The contact solver's numpy reference: one substep's contacts with static shapes,
walls and other particles (:class:`Contacts`), and the tolerances every backend shares.

One substep (``pipeline.substep`` drives it; Müller et al., "Detailed Rigid Body
Simulation with Extended Position Based Dynamics", 2020, sec. 3.5-3.6, and Macklin et
al., "Small Steps in Physics Simulation", 2019)::

    Colliders.begin()      broad phase (:mod:`.broad`), then continuous detection
                           (:meth:`Contacts.sweep`, a bounded time-of-impact loop: the
                           path stops at its first hit and the rest slides along the hit
                           face, swept again against every shape, never into an earlier
                           hit's plane; a particle that starts on or inside a shape
                           cannot move into the face it is on), the bounds walls,
                           the particle pairs (:meth:`Contacts.pair_impacts`: a pair
                           that met this substep goes back to its time of impact)
    Contacts.project()     in every constraint iteration: particle pairs, then shapes,
                           then walls; out along the normal of the face the path crossed,
                           friction in position space (at most mu times the normal
                           correction: static below it, kinetic above)
    Contacts.finish()      after the integrator's fold: the velocity pass (restitution
                           along each hit's own normal, at the time of impact for swept
                           hits, the rest of the Coulomb friction)

:class:`Contacts` is the numpy reference, vectorised over the contacts. Its compiled
twins are one module a stage, named as the stage is: :mod:`.begin`, :mod:`.project`,
:mod:`.finish` (with ``broad.pair_list``); :mod:`.frame` holds one substep's contacts flat
for them (:class:`FlatContacts`) and runs all the substeps of a Verlet-family world's
frame in one call (:func:`.frame.frame`), with the rules that keep the twins' numbers
the reference's bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

import numpy as np

from .broad import (
    _first_per_particle,
    _PairList,
    rank_batches,
)
from .geometry import (
    INF,
    _dot,
    _safe,
)

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
    # used, spent, nrm, vhit and tau are set by __post_init__ (None only as the
    # dataclass's default); gap and n0 stay None without paths (no sweep).
    used: np.ndarray = None         # type: ignore[assignment]  # friction spent in the velocity pass, m/s
    spent: np.ndarray = None        # type: ignore[assignment]  # friction spent on the positions, m
    nrm: np.ndarray = None          # type: ignore[assignment]  # the normal of the last hit or projection
    n0: np.ndarray | None = None    # the normal at the start, for starts on or inside
    vhit: np.ndarray = None         # type: ignore[assignment]  # normal velocity at a bouncing impact, m/s
    tau: np.ndarray = None          # type: ignore[assignment]  # when in the substep (0..1) the sweep hit it

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
    used: np.ndarray = None         # type: ignore[assignment]  # set by __post_init__: friction spent in the velocity pass, m/s

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

    def pair_impacts(self, x1: np.ndarray, w: np.ndarray) -> None:
        """Continuous detection between particles: a pair apart at the start of the
        substep (farther than ``reach + touch``) whose paths end it overlapping by more
        than ``skin`` met at the fraction ``t`` of the substep where ``|d0 + t (d1 -
        d0)| = reach`` (``d`` the centre-to-centre vector at the start and the end).
        Each movable particle goes back along its path to the earliest such time of its
        pairs (``x0 + t (x1 - x0)``), as a swept particle stops at the shape it hits,
        and its pairs count as touched; the velocity pass then bounces them from the
        approach they had (the velocity without ``dx``).

        Found only after the fact, the overlap would be pushed apart by the projection
        and become velocity: in Newton's cradle the first and the last ball of the row
        kept ~0.05 m/s they should not have, and every impact added energy."""
        P = self.pairs
        if P is None:
            return
        # In float64 whatever the world's float type, as the sweep: the compiled twin
        # (``project.pair_impacts``) repeats these operations in this order.
        x0, x1w = self.x0.astype(np.float64), x1.astype(np.float64)
        d0 = x0[P.j] - x0[P.i]
        d1 = x1w[P.j] - x1w[P.i]
        reach = P.reach.astype(np.float64)
        dd0 = _dot(d0, d0)
        apart = dd0 > (reach + self.touch) * (reach + self.touch)
        deep = _dot(d1, d1) < (reach - self.skin) * (reach - self.skin)
        k = np.flatnonzero(apart & deep)
        if not k.size:
            return
        e = d1[k] - d0[k]
        a = _dot(e, e)
        b = _dot(d0[k], e)
        c = dd0[k] - reach[k] * reach[k]
        t = (-b - np.sqrt(np.maximum(b * b - a * c, 0.0))) / a
        first = np.ones(x1.shape[0])
        np.minimum.at(first, P.i[k], t)
        np.minimum.at(first, P.j[k], t)
        rows = np.flatnonzero((first < 1) & (w > 0))
        new = x0[rows] + first[rows, None] * (x1w[rows] - x0[rows])
        self.dx[rows] += new - x1w[rows]
        x1[rows] = new
        P.touched[k] = True

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
        unused = [cast(np.ndarray, g.gap) <= self.touch for g in gs]  # starts on or inside
        bouncing = v0 is not None
        if bouncing:
            assert v0 is not None and a is not None     # the velocity and what changes it
            tau = np.zeros(m)
            vel = v0[q].astype(np.float64)
            acc = np.broadcast_to(a, x0.shape)[q].astype(np.float64)
        for it in range(MAX_HITS + 1):
            t_all, n_all = [], []
            for g, lg, st in zip(gs, loc, unused, strict=True):
                assert g.gap is not None and g.n0 is not None   # gs: the swept groups
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
                    swept[s] = cast(np.ndarray, g.gap)[ksel[s]] > self.touch
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
        assert P is not None                # project calls this only with pairs
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
        picked = [g.pi[a] for g, a, _ in act_groups]
        if pair_act is not None:
            P = cast(_Pairs, self.pairs)    # pair_act: there are pairs
            picked += [P.i[pair_act[0]], P.j[pair_act[0]]]
        rows = np.unique(np.concatenate(picked))
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
        if pair_act is not None and cast(_Pairs, self.pairs).e > 0:
            act, n = pair_act
            P = cast(_Pairs, self.pairs)
            vn = _dot(v_pre[P.j[act]] - v_pre[P.i[act]], n[act])
            return bool(np.any(vn < -v_th))
        return False

    def _velocity_sweep(self, v, w, act_groups,
                        pair_act: tuple[np.ndarray, np.ndarray] | None, v_th, v_start, v_ref,
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
                target: np.ndarray | float
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
        assert P is not None                # pair_act: there are pairs
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
