"""The contact solver's first stage, compiled: a substep's continuous detection
(:func:`begin`, :func:`begin_into`): the shapes' broad phase, the bounded time-of-impact
loop, the bounds walls, each contact's row. The twin of :meth:`.contacts.Contacts.sweep`
and ``Colliders.begin``; the rules that keep it the reference's bit for bit are in
:mod:`.frame`.
"""

from __future__ import annotations

import math

import numpy as np

from .broad import (
    _MASK_SHAPES,
    _broad_phase,
    _brute_masks,
    shape_boxes,
)
from .contacts import DIR_TOL, MAX_HITS
from .geometry import (
    INF,
    MU,
    SEGMENT,
    WALL,
    E,
    _distance,
    _side,
    _sweep,
)
from .jit import _as, _key, _max, _min, _unkey, jit, jit_borrow, jit_inline
from .records import Rows


@jit
def begin_space(x1, nshapes, nwalls, scratch):  # pragma: no cover - compiled
    """The arrays :func:`begin_into` fills, sized for any substep of a frame of
    ``x1``'s particles: the broad phase's room (``4 n``, at least 64, with shapes:
    ``cp, cg, gap`` and each particle's move ``disp``), then the contacts' rows
    (:class:`.records.Rows`: their particles and table rows with room for that plus
    one a particle and wall, plus one for the walls' branch-free store; their state,
    ``_contact_rows``, for that room plus one wall a particle, more wall contacts grow
    them; which particles are near the four walls of ``bounds``,
    :func:`_near_walls`). Allocated once
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
    rows = Rows(np.empty(C, np.int64), np.empty(C, np.int64), ref, depth, touched, stuck,
                nrm, spent, vhit, tau, e, mu, np.empty(n if nwalls == 4 else 0, np.bool_))
    return (np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap),
            np.empty(n if nshapes else 0, x1.dtype), rows,
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
def _clear_rows(rows, lo, hi):  # pragma: no cover - compiled
    """Contacts ``lo .. hi`` of :func:`begin_into`'s ``rows`` as new: no side, not
    hit."""
    ref, touched, stuck, depth, spent = (rows.ref, rows.touched, rows.stuck, rows.depth,
                                         rows.spent)
    nrm, vhit, tau = rows.nrm, rows.vhit, rows.tau
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
def begin(moves, shapes, grid, rules, bounce):  # pragma: no cover
    """:func:`begin_into` in arrays of its own (the substep path): ``cp, cg, e, mu, ref,
    touched, nrm, depth, spent, stuck, vhit, tau, skin, touch``, one row a contact."""
    C, rows, skin, touch = begin_into(moves, shapes, grid, rules, bounce, begin_space(
        moves.x1, shapes.nshapes, shapes.nwalls, np.bool_(False)))
    return (rows.cp[:C], rows.cg[:C], rows.ce[:C], rows.cmu[:C], rows.ref[:C],
            rows.touched[:C], rows.nrm[:C], rows.depth[:C], rows.spent[:C],
            rows.stuck[:C], rows.vhit[:C], rows.tau[:C], skin, touch)


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
def _bounds_hits(xq, yq, lq, walls):  # pragma: no cover - compiled
    """Whether a particle at ``(xq, yq)`` with limit ``lq`` is near each of the four
    walls ``a x + b y - o`` (:func:`_near_walls`; ``walls``: their numbers ``a0, b0,
    o0, .. a3, b3, o3``)."""
    a0, b0, o0, a1, b1, o1, a2, b2, o2, a3, b3, o3 = walls
    return (((a0 * xq + b0 * yq) - o0) < lq, ((a1 * xq + b1 * yq) - o1) < lq,
            ((a2 * xq + b2 * yq) - o2) < lq, ((a3 * xq + b3 * yq) - o3) < lq)


@jit_borrow
def _near_walls(moves, disp, geo, W0, shapes, marg, rows,
                m):  # pragma: no cover - compiled
    """:func:`begin_into`'s four walls of ``bounds`` (table rows ``W0 ..``): the
    (particle, wall) pairs near each other stored from ``rows.cp[m]``, in that order.
    Returns their count. ``shapes``: whether the world has shapes (``disp`` is then
    each particle's move).

    First which particles may be near a wall (``near``, by :func:`_wall_limit`'s
    bound), in a loop LLVM makes vector instructions, then those few tested exactly
    and stored: in one loop the stores and their branch kept it scalar (the soft blob's 256
    particles: 2.4 -> 0.9 us; without the square root 0.7). The positions are read
    as flat arrays: with a row length unknown at compile time LLVM's vector loop
    assumed rows of one number, and the scalar loop ran."""
    x0, x1, r, w = moves.x0, moves.x1, moves.r, moves.w
    near, c_p, c_g = rows.near, rows.cp, rows.cg
    walls = (geo[W0, 0], geo[W0, 1], geo[W0, 2], geo[W0 + 1, 0], geo[W0 + 1, 1],
             geo[W0 + 1, 2], geo[W0 + 2, 0], geo[W0 + 2, 1], geo[W0 + 2, 2],
             geo[W0 + 3, 0], geo[W0 + 3, 1], geo[W0 + 3, 2])
    f0 = x0.reshape(-1)
    f1 = x1.reshape(-1)
    n = x1.shape[0]
    for q in range(n):                  # near: a superset (the bound)
        xq = f1[2 * q]
        yq = f1[2 * q + 1]
        lq = _wall_limit(r[q], disp[q] if shapes else marg, w[q], xq, yq, f0[2 * q],
                         f0[2 * q + 1], shapes, marg, False)
        h0, h1, h2, h3 = _bounds_hits(xq, yq, lq, walls)
        near[q] = h0 | h1 | h2 | h3
    nw = 0
    for q in range(n):                  # the exact test
        if not near[q]:
            continue
        lq = _wall_limit(r[q], disp[q] if shapes else marg, w[q], x1[q, 0], x1[q, 1],
                         x0[q, 0], x0[q, 1], shapes, marg, True)
        hits = _bounds_hits(x1[q, 0], x1[q, 1], lq, walls)
        for k in range(4):
            if hits[k]:
                c_p[m + nw] = q
                c_g[m + nw] = W0 + k
                nw += 1
    return nw


@jit_borrow
def _other_walls(moves, disp, geo, W0, nwalls, shapes, marg, rows,
                 m):  # pragma: no cover - compiled
    """:func:`begin_into`'s walls when they are not the four of ``bounds``: every
    (particle, wall) stored from ``rows.cp[m]``, the count moving on a hit only.
    Returns the count (the arguments as :func:`_near_walls`')."""
    x0, x1, r, w = moves.x0, moves.x1, moves.r, moves.w
    c_p, c_g = rows.cp, rows.cg
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
def _begin_tolerances(x1, rules):  # pragma: no cover - compiled
    """``_tolerances(x1)`` with the float type's ``eps`` and the constants
    ``skin_min``, ``touch_min`` of ``rules``: ``(skin, touch)``."""
    top = _largest_abs(x1)
    s16 = 16.0 * rules.eps * (1.0 + top)
    skin = s16 if s16 > rules.skin_min else rules.skin_min
    s100 = 100.0 * skin
    return skin, (s100 if s100 > rules.touch_min else rules.touch_min)


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
def _begin_walls(moves, shapes, rules, rows):  # pragma: no cover - compiled
    """:func:`begin_into` for a world without shapes (table rows ``0 ..`` are walls)
    in the arrays of its ``space`` (``rows``): the tolerances, the walls, the contacts' rows
    cleared and their materials. Returns ``(C, skin, touch)``; ``C`` is -1, the rows
    untouched, when more wall contacts than rows were found (particles in corners:
    ``begin_into`` grows them).

    Its own kernel counting no references, which the frame calls directly: a call of
    ``begin_into`` counted its 34 arguments (with ``space``'s 17) on entry and exit,
    and made twelve views to return, ~0.5 us of the soft blob's 2 us a substep."""
    x1, r = moves.x1, moves.r
    geo, nwalls = shapes.geo, shapes.nwalls
    skin, touch = _begin_tolerances(x1, rules)
    n = x1.shape[0]
    if nwalls == 0 or n == 0:
        return 0, skin, touch
    if rows.cp.size < n * nwalls + 1 or (nwalls == 4 and rows.near.size < n):
        return -1, skin, touch      # not begin_space's arrays for these particles
    marg = _as(x1, rules.margin)
    none = np.int64(0)              # no shape and no row yet (a number: see .jit)
    if nwalls == 4:
        C = _near_walls(moves, r, geo, none, none != 0, marg, rows, none)
    else:
        C = _other_walls(moves, r, geo, none, nwalls, none != 0, marg, rows, none)
    if C > rows.ref.size:
        return -1, skin, touch
    _rows_start(rows, geo, rules, none, C)
    return C, skin, touch


@jit_borrow
def _rows_start(rows, geo, rules, m, C):  # pragma: no cover - compiled
    """The contact rows ``m .. C`` cleared, and every row's materials (NaN in the
    table: the world's ``rules.e_def``, ``rules.mu_def``)."""
    e_def, mu_def = rules.e_def, rules.mu_def
    c_g, e, mu = rows.cg, rows.ce, rows.cmu
    _clear_rows(rows, m, C)
    for c in range(C):
        g = c_g[c]
        e[c] = e_def if math.isnan(geo[g, E]) else geo[g, E]
        mu[c] = mu_def if math.isnan(geo[g, MU]) else geo[g, MU]


@jit
def begin_into(moves, shapes, grid, rules, bounce, space):  # pragma: no cover
    """``Colliders.begin`` up to the particle pairs, after the integrator moved ``x1``
    from ``x0``: ``_tolerances``, the broad phase (``aabb_pairs_brute`` or
    ``ShapeGrid.query``, the same rule choosing), ``Contacts.add_group`` with its
    start-gap filter, ``Contacts.sweep`` (moves ``moves.x1``, adds to ``moves.dx``)
    and the walls (table rows ``nshapes ..``), in the arrays of ``space``
    (:func:`begin_space`; a broad phase that outgrows them gets new ones).

    ``bounce`` (:class:`.records.Bounce`; ``v0`` without rows: none): bounces at the
    time of impact (``Colliders.begin``'s ``v0``).

    Returns ``C, rows, skin, touch``: the first ``C`` of the contact ``rows``
    (:class:`.records.Rows`) are the contacts' particles and table rows in the
    reference's group order (shape type by shape type, each in ``(particle, shape)``
    order, then the walls), their materials, segment sides, and what the sweep did to
    them (``_toi_into``); ``space``'s arrays (valid until the next call with it) or,
    grown, new ones. Whole arrays and a count, not views: the frame would count a
    reference to each view (see :func:`frame`).
    """
    x0, x1, w, r = moves.x0, moves.x1, moves.w, moves.r
    n = x1.shape[0]
    geo, nshapes, nwalls = shapes.geo, shapes.nshapes, shapes.nwalls
    cp, cg, gap, disp, rows, _ = space
    if nshapes == 0:
        C, skin, touch = _begin_walls(moves, shapes, rules, rows)
        if C >= 0:
            return C, rows, skin, touch
    skin, touch = _begin_tolerances(x1, rules)
    marg = _as(x1, rules.margin)
    movable = _displacements(x0, x1, w, disp) if nshapes else 0  # only walls: unneeded
    m = 0
    if nshapes:
        brute = movable * nshapes <= rules.brute_pairs
        cap = cp.size       # no regrowing in the loop (module docstring)
        while True:
            m = _broad_phase(x0, x1, w, r, disp, shapes, grid, rules, brute, (cp, cg, gap))
            if m >= 0:
                break
            cap *= 4
            cp = np.empty(cap, np.int64)
            cg = np.empty(cap, np.int64)
            gap = np.empty(cap)
    nq = n if nwalls else 0
    c_p, c_g, e, mu = rows.cp, rows.cg, rows.ce, rows.cmu
    ref, depth, touched, stuck, nrm = rows.ref, rows.depth, rows.touched, rows.stuck, rows.nrm
    spent, vhit, tau = rows.spent, rows.vhit, rows.tau
    if m + nq * nwalls + 1 > c_p.size:      # outgrown: arrays of this call's own
        c_p = np.empty(m + nq * nwalls + 1, np.int64)
        c_g = np.empty(m + nq * nwalls + 1, np.int64)
    if m + 1 > ref.size:
        ref, depth, touched, stuck, nrm, spent, vhit, tau, e, mu = _contact_rows(
            m + nq + 1)
    tspace = toi_space(n if m else 0, m)
    rows = Rows(c_p, c_g, ref, depth, touched, stuck, nrm, spent, vhit, tau, e, mu,
                rows.near)
    C = m + _begin_sweep(moves, shapes, rules, (skin, touch, marg), bounce,
                         (m, cp, cg, gap, disp), rows,
                         (np.empty(m, np.int64), np.empty(m),
                          np.empty(WALL + 1, np.int64), tspace))
    if C > ref.size:        # more wall contacts than particles (corners): grown
        (ref2, depth2, touched2, stuck2, nrm2, spent2, vhit2, tau2, e,
         mu) = _contact_rows(C)
        # The shapes' contacts, swept: kept. A loop: a slice assignment of an array
        # compiles numba's shape-mismatch message (its string formatting), ~4 s of a
        # first start, for a copy whose sizes always agree.
        for k in range(m):
            ref2[k] = ref[k]
            depth2[k] = depth[k]
            touched2[k] = touched[k]
            stuck2[k] = stuck[k]
            nrm2[k, 0] = nrm[k, 0]
            nrm2[k, 1] = nrm[k, 1]
            spent2[k] = spent[k]
            vhit2[k] = vhit[k]
            tau2[k] = tau[k]
        ref, depth, touched, stuck, nrm, spent = ref2, depth2, touched2, stuck2, nrm2, spent2
        vhit, tau = vhit2, tau2
        rows = Rows(c_p, c_g, ref, depth, touched, stuck, nrm, spent, vhit, tau, e, mu,
                    rows.near)
    _rows_start(rows, geo, rules, m, C)
    return C, rows, skin, touch


@jit_borrow
def _begin_sweep(moves, shapes, rules, tol, bounce, found, rows,
                 work):  # pragma: no cover - compiled
    """:func:`begin_into` after its broad phase (``found``: ``m`` contacts in ``cp,
    cg, gap`` and the particles' moves ``disp``; ``tol``: ``skin, touch`` and the
    margin ``marg``): the contacts grouped by shape type into ``rows.cp, rows.cg``
    (a stable counting sort:
    the reference's groups), their rows cleared and segment sides found, the sweep
    (``_toi_into``: moves ``x1``, adds to ``dx``), then the walls after them. Returns
    the number of wall contacts ``nw`` (rows ``m .. m + nw``, not yet started).

    Room: ``rows.cp, rows.cg`` for ``m + n nwalls + 1``, the rows for ``m``; ``work``:
    ``order``, ``gap_o`` and ``tspace`` (:func:`toi_space`) for ``m``, ``start`` for
    ``WALL + 1``."""
    x0, x1 = moves.x0, moves.x1
    kinds, geo, nshapes, nwalls = shapes.kinds, shapes.geo, shapes.nshapes, shapes.nwalls
    skin, touch, marg = tol
    m, cp, cg, gap, disp = found
    order, gap_o, start, tspace = work
    c_p, c_g, ref = rows.cp, rows.cg, rows.ref
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
        _clear_rows(rows, np.int64(0), m)
        for c in range(m):
            g = c_g[c]
            if kinds[g] == SEGMENT:
                q = c_p[c]
                ref[c] = _side(x0[q, 0], x0[q, 1], geo[g, 0], geo[g, 1], geo[g, 2],
                               geo[g, 3])
        _toi_into(moves, skin, touch, gap_o[:m], Rows(
            c_p[:m], c_g[:m], ref[:m], rows.depth[:m], rows.touched[:m], rows.stuck[:m],
            rows.nrm[:m], rows.spent[:m], rows.vhit[:m], rows.tau[:m], rows.ce, rows.cmu,
            rows.near), shapes, rules, bounce, tspace)
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
        return _near_walls(moves, disp, geo, nshapes, nshapes != 0, marg, rows, m)
    if nwalls != 4 and nq:
        return _other_walls(moves, disp, geo, nshapes, nwalls, nshapes != 0, marg, rows,
                            m)
    return 0


@jit_borrow
def _begin_fast(moves, shapes, rules, bounce, rows, space):  # pragma: no cover - compiled
    """:func:`begin_into` where it makes no array: the brute-force broad phase
    (``_brute_masks``), in the scratch of ``space`` (:func:`begin_space` with
    ``scratch``) and the ``rows`` given, all with room for every contact (the rows for
    a wall contact per particle and wall). Returns ``(C, skin, touch)``, or ``C`` -1
    with nothing changed when it cannot (the shape grid's broad phase, or too little
    room): ``begin_into`` then does it.

    It counts no reference, and :func:`_frame_steps` calls it without leaving: a call
    of ``begin_into`` counted ~800 references a pile substep (its arguments, its
    views, the arrays it returned) and made ~20 arrays."""
    cp, cg, gap, disp = space[:4]
    box, inv_len, lo, hi, bits, order, gap_o, start, tspace = space[-1]
    x0, x1, w, r = moves.x0, moves.x1, moves.w, moves.r
    geo, nshapes, nwalls = shapes.geo, shapes.nshapes, shapes.nwalls
    skin, touch = _begin_tolerances(x1, rules)
    n = x1.shape[0]
    if not (0 < nshapes <= _MASK_SHAPES and box.shape[0] >= nshapes and disp.size >= n
            and bits.size >= n):
        return -1, skin, touch
    movable = _displacements(x0, x1, w, disp)
    if movable * nshapes > rules.brute_pairs:
        return -1, skin, touch      # the shape grid (its candidates sort makes arrays)
    marg = _as(x1, rules.margin)
    shape_boxes(shapes, box, inv_len)
    m = _brute_masks(x0, x1, w, r, disp, shapes, marg, (cp, cg, gap),
                     (box, inv_len, lo, hi, bits))
    room = m + (n if nwalls else 0) * nwalls + 1
    if (m < 0 or room > rows.cp.size or room > rows.ref.size or m > order.size
            or m > tspace[1].size):
        return -1, skin, touch
    C = m + _begin_sweep(moves, shapes, rules, (skin, touch, marg), bounce,
                         (m, cp, cg, gap, disp), rows, (order, gap_o, start, tspace))
    _rows_start(rows, geo, rules, m, C)
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
def _toi_into(moves, skin, touch, gap, rows, shapes, rules, bounce,
              space):  # pragma: no cover - compiled
    """``Contacts.sweep``: the time-of-impact loop over the contacts of ``rows`` (in
    the reference's order; ``gap`` their start gaps), moving ``moves.x1`` and adding
    to ``moves.dx``; fills the hit contacts' ``touched``, ``nrm``, ``depth``,
    ``spent``, ``stuck``, ``vhit`` and ``tau`` (bounces at the time of impact when
    ``bounce.v0`` has rows, under ``bounce.acc``).

    Every pass looks at every contact of a particle still moving, in order, and
    keeps each particle's earliest hit (the first on a tie), as the reference's
    groups one after another do; then every hit particle stops on the surface and
    slides on, and the next pass sweeps the rest.

    In the scratch ``space`` (:func:`toi_space`, room for ``m`` contacts): this part
    places each particle in it (``loc``, ``owner`` its particle, in order of first
    contact), :func:`_toi_passes` does the work. Neither counts references: a call of
    ``_distance`` or ``_sweep`` passes ten arrays, and counting them cost ~100 ns a
    contact (the pile's sweep 12 -> 6 us a substep)."""
    x0, x1 = moves.x0, moves.x1
    cp = rows.cp
    m = cp.size
    v0, acc0 = bounce.v0, bounce.acc
    loc, owner, path, state = space[0], space[1], space[2], space[3]
    flags = space[6]
    count = space[5]
    L = np.int64(0)         # a number from the start (see .jit)
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
    _toi_passes(moves, skin, touch, gap, rows, shapes, rules, bounce, space, L)
    for a in range(L):
        loc[owner[a]] = -1


@jit_borrow
def _toi_passes(moves, skin, touch, gap, rows, shapes, rules, bounce, space,
                L):  # pragma: no cover - compiled
    """:func:`_toi_into`'s passes over its ``L`` particles, in its scratch ``space``
    (its arguments, :func:`toi_space`'s arrays)."""
    x0, x1, r, dx = moves.x0, moves.x1, moves.r, moves.dx
    cp, cg, ref, touched, nrm = rows.cp, rows.cg, rows.ref, rows.touched, rows.nrm
    depth, spent, stuck, vhit, tauo = rows.depth, rows.spent, rows.stuck, rows.vhit, rows.tau
    m = cp.size
    h, v_th = bounce.h, bounce.v_th
    bouncing = bounce.v0.shape[0] > 0
    (loc, owners, path, state, planes, count, flags, best, best_k, unused, n0) = space
    owner = owners[:L]
    posx, posy, endx, endy = path[0], path[1], path[2], path[3]
    tau, velx, vely, accx, accy = state[0], state[1], state[2], state[3], state[4]
    live, moved = flags[0], flags[1]
    best_t, best_nx, best_ny = best[0], best[1], best[2]
    geo = shapes.geo
    e_def, mu_def = rules.e_def, rules.mu_def
    # Starts on or inside: the normal there, and whether the plane is still unused.
    for k in range(m):
        if gap[k] <= touch:
            unused[k] = True
            q = cp[k]
            _, n0[k, 0], n0[k, 1] = _distance(cg[k], x0[q, 0], x0[q, 1], ref[k],
                                              np.bool_(True), shapes, x0[q, 0], x0[q, 1])
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
                                   shapes)
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
