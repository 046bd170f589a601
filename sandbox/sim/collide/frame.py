"""The compiled contact stages put together: one substep's contacts held flat for the
substep path (:class:`FlatContacts`), and :func:`frame`, every substep of a Verlet-family
world's frame with contacts in one call.

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

import numpy as np

from ..kernels import _project_batches
from ..serial_links import Links
from ..serial_links import link_factors as _link_factors
from ..serial_links import soft_scratch as _soft_scratch
from ..serial_links import sweep_factored as _sweep_factored
from ..step_kernels import add_scaled_difference as _add_scaled_difference
from ..step_kernels import verlet_step as _verlet_step
from .begin import _begin_fast, _begin_walls, begin_into
from .broad import (
    _PairList,
    any_moving,
    moved_less,
    pair_list,
)
from .finish import finish, finish_into, finish_space
from .jit import jit, jit_borrow
from .project import pair_impacts, pair_scratch, project
from .records import (
    Bodies,
    Bounce,
    Fold,
    Grid,
    Moves,
    Pairs,
    PairState,
    Rows,
    Rules,
    Shapes,
    Steps,
)

# ------------------------------------------------------------ the compiled twin

class FlatContacts:
    """One substep's contacts for the compiled backend: the contacts :class:`Contacts`
    holds, flat, with the same ``project`` and ``finish``.

    ``rows`` (:class:`.records.Rows`; also as attributes: ``cp``, ``cg``, ``e``,
    ``mu``, ``ref``, ``touched``, ``nrm``, ``depth``, ``spent``, ``stuck``, ``vhit``,
    ``tau``) give each contact's particle and row of the shape table ``shapes``, in the
    reference's order (its groups one after another, the walls last), its material, a
    segment's side at the start of the substep, and the per-contact state of
    :class:`_Group` (the velocity pass keeps ``used`` to itself). The particle pairs
    are the whole Verlet list (pairs of two pinned particles never pass the kernels'
    tests, so dropping them as :meth:`Contacts.set_pairs` does changes nothing) with
    the state of :class:`_Pairs` (``pstate``); ``rules`` the world's materials.
    """

    def __init__(self, x0, r, skin, touch, dx, shapes, rows: Rows,
                 pairs: _PairList | None, rules: Rules) -> None:
        self.x0, self.r, self.skin, self.touch, self.dx = x0, r, skin, touch, dx
        self.shapes, self.rows, self.rules = shapes, rows, rules
        self.cp, self.cg, self.e, self.mu, self.ref = (rows.cp, rows.cg, rows.ce, rows.cmu,
                                                       rows.ref)
        self.touched, self.nrm, self.depth, self.spent = (rows.touched, rows.nrm,
                                                          rows.depth, rows.spent)
        self.stuck, self.vhit, self.tau = rows.stuck, rows.vhit, rows.tau
        self.pairs = pairs
        if pairs is None:
            z = np.zeros(0, np.int64)
            self.pair_rows = Pairs(z, z, z, z, z, np.zeros(0, r.dtype))
        else:
            self.pair_rows = Pairs(pairs.i, pairs.j, pairs.a, pairs.b, pairs.nodes,
                                   pairs.reach)
        m = self.pair_rows.pi.size
        self.pstate = PairState(np.zeros(m), np.zeros(m, bool), np.zeros(m, bool))
        self.scratch = None

    def __bool__(self) -> bool:
        return bool(self.cp.size) or self.pairs is not None

    def project(self, x: np.ndarray, w: np.ndarray) -> None:
        """:meth:`Contacts.project` (:func:`project`)."""
        if self.scratch is None:
            self.scratch = pair_scratch(x, self.pair_rows.pi.size,
                                        self.pair_rows.nodes.size)
        project(Moves(self.x0, x, w, self.r, self.dx), self.skin, self.rows, self.shapes,
                self.pair_rows, self.pstate, self.rules.mu_def, self.scratch)

    def finish(self, p, integrator, v_start: np.ndarray, h: float, gravity,
               sweeps: int = 2) -> None:
        """:meth:`Contacts.finish` (:func:`finish`)."""
        fold = integrator.contact_fold(h)
        v_th = 2.0 * math.hypot(*gravity) * h
        if finish(Moves(self.x0, p.x, p.inv_mass, self.r, self.dx), p.v, p.x_prev,
                  Fold(v_start, np.broadcast_to(p.a, p.x.shape), float(fold.velocity_time),
                       fold.from_positions, fold.gain, h, v_th, self.touch, int(sweeps)),
                  self.rows, self.shapes, self.pair_rows, self.pstate, self.rules):
            p.a_valid = False

# ---------------------------------------------------------------- a whole frame

#: Where :func:`_frame_steps` stops and goes on within a substep: before ``begin_into``
#: (``_BEGIN``; ``_begin_walls`` or ``_begin_fast`` could not: too little room, or the
#: shape grid's broad phase), at the Verlet list (``_LIST``; stale: ``_REBUILD``), at
#: the room of the stages' arrays (``_ROOM``; too small: ``_GROW``), at the solve
#: (``_SOLVE``).
_START, _BEGIN, _LIST, _REBUILD, _ROOM, _GROW, _SOLVE = 0, 1, 2, 3, 4, 5, 6


@jit_borrow
def _frame_steps(where, bodies, coef, links, shapes, rules, solve, vlist,
                 work):  # pragma: no cover - compiled
    """:func:`frame`'s substeps from substep ``s`` at ``stage`` (``where``: ``s, stage``
    with the ``C, skin, touch, use`` found before it), until the last is done or one
    needs an array made: returns ``s, stage, C, skin, touch, use``, ``stage`` the one
    to go on at after :func:`frame` made it (``_BEGIN``, ``_REBUILD``, ``_GROW``), or
    ``s == rc.size``. Makes no array and counts no reference (``jit_borrow``).

    The records of :mod:`.records`: ``bodies``, ``coef`` (:class:`.records.Steps`),
    ``links``, ``shapes``, ``rules``; ``solve``: ``iterations, sweeps, zero_lam,
    collide, has_links``; ``vlist``, the Verlet list: ``valid``, its ``Pairs``,
    ``x_ref``, ``pskin``; ``work``, the frame's arrays: ``v_old, dx``, the contact
    ``Rows``, ``fspace`` (:func:`finish_space`), the pairs' ``PairState``,
    ``pscratch`` (:func:`pair_scratch`), ``bspace`` (:func:`begin_space`)."""
    s, stage, C, skin, touch, use = where
    x, x_prev, v, a, w, r = bodies
    rc, ca, c1s, c2s, at, h, v_th = coef
    iterations, sweeps, zero_lam, collide, has_links = solve
    valid, pairs, x_ref, pskin = vlist
    v_old, dx, rows, fspace, pstate, pscratch, bspace = work
    pi, nodes = pairs.pi, pairs.nodes
    pdepth, ptouched, pstuck = pstate
    lam = links.lam
    n = x.shape[0]
    nshapes = shapes.nshapes
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
                C, skin, touch = _begin_walls(Moves(PX, X, w, r, dx), shapes, rules, rows)
            else:
                C, skin, touch = _begin_fast(Moves(PX, X, w, r, dx), shapes, rules,
                                             Bounce(v_old, a, h, v_th), rows, bspace)
            if C < 0:
                return s, _BEGIN, C, skin, touch, use
            stage = _LIST
        if stage == _LIST:
            use = False
            if collide and not (valid and moved_less(X, x_ref, (0.5 * pskin) ** 2)):
                return s, _REBUILD, C, skin, touch, use
            stage = _ROOM
        if stage == _ROOM:
            use = collide and pi.size > 0 and any_moving(pi, pairs.pj, w)
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
        # The first C contacts and P pairs: views, free here (no reference counts).
        moves = Moves(PX, X, w, r, dx)
        crows = Rows(rows.cp[:C], rows.cg[:C], rows.ref[:C], rows.depth[:C],
                     rows.touched[:C], rows.stuck[:C], rows.nrm[:C], rows.spent[:C],
                     rows.vhit[:C], rows.tau[:C], rows.ce[:C], rows.cmu[:C], rows.near)
        cpairs = Pairs(pi[:P], pairs.pj[:P], pairs.pa[:P], pairs.pb[:P], nodes,
                       pairs.reach[:P])
        cstate = PairState(pdepth[:P], ptouched[:P], pstuck[:P])
        if use:
            pair_impacts(moves, skin, touch, cpairs, cstate.ptouched, pscratch)
        for _ in range(iterations):
            if has_links:
                _sweep_factored(X, w, links)
            if have:
                project(moves, skin, crows, shapes, cpairs, cstate, rules.mu_def, pscratch)
        _add_scaled_difference(v, X, PX, c1s[s])
        if have:
            finish_into(moves, v, PX, Fold(v_old, a, at, True, 1.0 / h, h, v_th, touch,
                                           sweeps),
                        crows, shapes, cpairs, cstate, rules, fspace)
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
    (``step_kernels.verlet_step`` with ``c1 = 0``: the velocity "later") and the two
    buffers swap roles; ``begin``; the Verlet list checked (``moved_less`` against
    half its ``pskin``) and rebuilt when stale (``pair_list`` with ``new_skin``,
    ``x_ref`` a copy of the positions), used if some pair can move (``any_moving``),
    its pairs that met this substep put back at their time of impact
    (``project.pair_impacts``);
    ``lam`` zeroed if ``zero_lam``; ``iterations`` times the links' sweep
    (``links``: ``serial_links.sweep_factored`` with the frame's ``link_factors``, one
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
    # The records the stages take (:mod:`.records`), built here: free in a compiled
    # entry, ~2 us a call passed in from Python (this entry's arguments are their
    # fields, in order: tests/test_contact_kernels.py).
    bodies = Bodies(x, x_prev, v, a, w, r)
    coef = Steps(rc, ca, c1s, c2s, at, h, v_th)
    shapes = Shapes(kinds, rows, geo, nshapes, nwalls, pverts, pnorm, pedge, bverts, bnorm,
                    bedge)
    grid = Grid(keys, sids, cell, origin, dims)
    rules = Rules(e_def, mu_def, eps, skin_min, touch_min, margin, brute_pairs, max_cells)
    den = np.empty(ci.size, rest.dtype)          # the links' factors, fixed this frame
    even = np.empty(ci.size, np.bool_)
    lost = _link_factors(w, ci, cj, compliance, inv_h2, den, even)
    buf = _soft_scratch(x)
    chain = Links(ci, cj, rest, compliance, kind, plan, inv_h2, lam, den, even, buf, lost)
    solve = (iterations, sweeps, zero_lam, collide, links)
    # The contact stages' arrays: the start's (``bspace``, begin_space's with scratch)
    # from the caller, kept from frame to frame (made each frame, their 3 MB came back
    # from the system with ~90 page faults a frame); the rest once a frame (grown when
    # a rebuilt list needs more).
    contacts = bspace[4]
    # Room for half as many pairs and nodes again as the list has: a rebuilt list with
    # more grew them, its new arrays came back from the system page by page (the
    # pile: 7 page faults a frame, ~30 us).
    room = pi.size + pi.size // 2 + 64
    mroom = min(nodes.size + nodes.size // 2 + 64, x.shape[0])
    fspace = finish_space(x, contacts.ref.size, room, mroom)
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
            (s, stage, C, skin, touch, use), bodies, coef, chain, shapes, rules, solve,
            (valid, Pairs(pi, pj, pa, pb, nodes, reach), x_ref, pskin),
            (v_old, dx, contacts, fspace, PairState(pdepth, ptouched, pstuck), pscratch,
             bspace))
        X = x_prev if s % 2 == 0 else x         # this substep's positions (swapped)
        PX = x if s % 2 == 0 else x_prev
        if stage == _BEGIN:
            C, contacts, skin, touch = begin_into(Moves(PX, X, w, r, dx), shapes, grid,
                                                  rules, Bounce(v_old, a, h, v_th), bspace)
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
                fspace = finish_space(X, max(C, contacts.ref.size), room, mroom)
            if P > pdepth.size:
                pdepth = np.zeros(room)
                ptouched = np.zeros(room, np.bool_)
                pstuck = np.zeros(room, np.bool_)
            if P > pscratch[0].size or M > pscratch[2].size:
                pscratch = pair_scratch(X, room, mroom)
            stage = _SOLVE
    return steps % 2 == 1, valid, pi, pj, pa, pb, nodes, reach, x_ref, pskin


_threads: list[bool] = []


def launch_threads() -> None:
    """Dispatch the links' parallel sweep (``kernels._project_batches``) once from
    Python. :func:`frame` used to call it from a serial kernel: loaded from numba's
    disk cache into a process where no parallel kernel had run yet, the threading
    layer's entry points it called were unresolved and the call jumped to address 0
    (a segfault on the second run, the first that loads the cache). ``frame`` now
    sweeps its links with ``serial_links.sweep_factored`` and calls no parallel kernel; this
    stays harmless for the callers that still make it."""
    if not _threads:
        z = np.zeros(0, np.int64)
        _project_batches(np.zeros((0, 2)), np.zeros(0),
                         (z, z, np.zeros(0), np.zeros(0), np.zeros(0, np.int8),
                          np.zeros((0, 6), np.int64), np.zeros(1, np.int64)),
                         1.0, np.zeros(0), 2**62)
        _threads.append(True)
