"""The contact solver's iteration stage, compiled: :func:`project` moves each particle
out of the shapes it hit and its particle pairs apart, with friction in position space;
the twin of :meth:`.contacts.Contacts.project` (the rules that keep it the reference's bit
for bit are in :mod:`.frame`). Also the pair helpers :mod:`.finish` shares.
"""

from __future__ import annotations

import math

import numpy as np

from .geometry import (
    _contact_distance,
)
from .jit import _as, _max, _min, jit, jit_borrow, jit_inline

_RECIP = 1.0 / np.maximum(np.arange(64.0), 1.0)

@jit
def _share(count_a, count_b):  # pragma: no cover - compiled
    """``_pair_share`` of one pair: ``1.0 / max(count_a, count_b)``, looked up for
    small counts (the same quotient, without a division)."""
    c = max(count_a, count_b)
    return _RECIP[c] if c < _RECIP.size else 1.0 / c

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
def _near_pairs(x, pairs, extra, touched, keep, out):  # pragma: no cover - compiled
    """The ``pairs`` (:class:`.records.Pairs`) whose ends may be closer than
    ``reach + extra`` (``keep``: or ``touched``) listed into ``out``'s ``near``, with
    their normals ``gx, gy`` and distances ``gd``; returns how many. Written always,
    kept if near: no branch on the random half of a pile's list that is; a pair surely
    apart (``_beyond``) takes no square root. Then the square roots and divisions over
    the list in one loop LLVM makes vector instructions (per pair they kept the scalar
    divider busy). Inlined into kernels that count no references (its arrays are not
    counted)."""
    i, j, reach = pairs.pi, pairs.pj, pairs.reach
    near, gx, gy, gd = out
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
def _project_pairs(moves, skin, pairs, state, mu, scratch):  # pragma: no cover - compiled
    """``Contacts._project_pairs``: one Jacobi pass over ``pairs`` (their ``state``:
    :class:`.records.PairState`; ``mu`` their friction), averaged per pair, in the
    arrays of ``scratch`` (:func:`pair_scratch`).

    The pairs within reach are listed first with their distances and normals
    (``_near_pairs``; the pile's pass: 38 -> 26 us a substep). The same operations on
    the same numbers: the same bits."""
    x, w, x0, dx = moves.x1, moves.w, moves.x0, moves.dx
    i, j, a, b, nodes, reach = pairs
    depth, touched, stuck = state
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
    nn = _near_pairs(x, pairs, zero, touched, False, (near, gx, gy, gd))
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
def pair_impacts(moves, skin, touch, pairs, touched, scratch):  # pragma: no cover - compiled
    """``Contacts.pair_impacts``: each movable particle back along its path to the
    earliest time of impact of its ``pairs`` that met this substep (``touched`` set for
    them), in float64 as the reference. ``scratch`` (:func:`pair_scratch`) lends its
    ``ta`` for each node's earliest time and leaves it all zero again."""
    x, w, x0, dx = moves.x1, moves.w, moves.x0, moves.dx
    i, j, a, b, nodes, reach = pairs
    first = scratch[3]
    M = nodes.size
    hits = 0
    for k in range(i.size):
        ii = np.uint64(i[k])
        jj = np.uint64(j[k])
        R = np.float64(reach[k])
        d1x = np.float64(x[jj, 0]) - np.float64(x[ii, 0])
        d1y = np.float64(x[jj, 1]) - np.float64(x[ii, 1])
        if not (d1x * d1x + d1y * d1y < (R - skin) * (R - skin)):
            continue
        d0x = np.float64(x0[jj, 0]) - np.float64(x0[ii, 0])
        d0y = np.float64(x0[jj, 1]) - np.float64(x0[ii, 1])
        dd0 = d0x * d0x + d0y * d0y
        if not dd0 > (R + touch) * (R + touch):
            continue
        ex = d1x - d0x
        ey = d1y - d0y
        qa = ex * ex + ey * ey
        qb = d0x * ex + d0y * ey
        qc = dd0 - R * R
        t = (-qb - math.sqrt(_max(qb * qb - qa * qc, 0.0))) / qa
        if hits == 0:
            for mm in range(M):
                first[mm, 0] = 1.0
        hits += 1
        ka = np.uint64(a[k])
        kb = np.uint64(b[k])
        first[ka, 0] = _min(first[ka, 0], t)
        first[kb, 0] = _min(first[kb, 0], t)
        touched[k] = True
    if hits == 0:
        return
    for mm in range(M):
        f = first[mm, 0]
        first[mm, 0] = 0.0
        p = np.uint64(nodes[mm])
        if not (f < 1 and w[p] > 0):
            continue
        for d in range(2):
            start = np.float64(x0[p, d])
            end = np.float64(x[p, d])
            new = start + f * (end - start)
            dx[p, d] += new - end
            x[p, d] = new


@jit_borrow
def project(moves, skin, rows, shapes, pairs, pstate, pmu,
            scratch):  # pragma: no cover - compiled
    """``Contacts.project`` on the particles of ``moves`` (:mod:`.records`): the
    particle ``pairs`` (their state ``pstate``, friction ``pmu``; in ``scratch``:
    :func:`pair_scratch`, room for them), then the contact ``rows`` with the shapes
    and walls, each contact after the previous one (a particle's contacts in the
    reference's order; different particles do not interact here).

    Every contact of ``rows`` and every pair of ``pairs``: the frame, which has room
    for more, passes views of the first ``C`` and ``P``, made where they cost nothing
    (``jit_borrow``; a view made in a kernel that counts references is a count)."""
    x, w, x0, dx, r = moves.x1, moves.w, moves.x0, moves.dx, moves.r
    cp, cg, mu, ref, depth = rows.cp, rows.cg, rows.cmu, rows.ref, rows.depth
    touched, stuck, nrm, spent = rows.touched, rows.stuck, rows.nrm, rows.spent
    if pairs.pi.size:
        _project_pairs(moves, skin, pairs, pstate, pmu, scratch)
    for c in range(cp.size):
        q = np.uint64(cp[c])
        d, nx, ny = _contact_distance(cg[c], x[q, 0], x[q, 1], ref[c], shapes, x0[q, 0],
                                      x0[q, 1])
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
