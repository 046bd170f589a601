"""The contact solver's last stage, compiled: :func:`finish`, the velocity pass after
the integrator's fold (restitution along each hit's own normal, at the time of impact for
swept hits, the rest of the Coulomb friction); the twin of
:meth:`.contacts.Contacts.finish` (the rules that keep it the reference's bit for bit are
in :mod:`.frame`).
"""

from __future__ import annotations

import math

import numpy as np

from .geometry import (
    _contact_distance,
)
from .jit import _as, _key, _max, _min, _unkey, jit, jit_borrow, jit_inline
from .project import _near_pairs, _share


@jit
def _stop_k(vn, vn_ref, mu):  # pragma: no cover - compiled
    """``_stop``: the inelastic rule, ``(change, friction budget)``."""
    new = _min(_max(vn, 0.0), _max(vn_ref, 0.0))
    return new - vn, mu * _max(new - vn_ref, 0.0)


@jit_borrow
def _shape_sweep(v, bounce, v_start, v_ref, bounced, v_th,
                 shape_rows):  # pragma: no cover - compiled
    """The shape contacts' part of ``Contacts._velocity_sweep`` (``_shape_velocity``
    per contact, one after another; ``shape_rows``: :func:`finish_into`'s ``cp,
    cact, cnx, cny, e, mu, used, lift``); returns the largest change."""
    cp, cact, cnx, cny, e, mu, used, lift = shape_rows
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
def _pair_sweep(v, bounce, v_th, bounced, pairs):  # pragma: no cover - compiled
    """``Contacts._pair_velocity``: one Jacobi sweep over the pairs in contact,
    averaged as in the projection; returns the largest change.

    The pairs come as a compact list (``pairs``, :func:`finish_into`'s: ``ai, aj``
    particles, ``aa, ab`` their rows of
    ``nodes``, the normal, ``afi = -wi/(wi + wj)``, ``afj = wj/(wi + wj)``, whether
    it stuck, ``aref`` the pre-contact normal velocity, ``aused`` the friction spent
    by earlier sweeps), in the reference's pair order, with their restitution ``e``
    and friction ``mu`` and ``nodes``; the rest is scratch: ``gx, dt, gy, size, g0,
    g1, g2, g3, live, count, da, db``.

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
    (ai, aj, aa, ab, anx, any_, afi, afj, astuck, aref, aused, e, mu, nodes, gx, dt, gy,
     size, g0, g1, g2, g3, live, count, da, db) = pairs
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
def _velocity_sweep(v, bounce, v_start, v_pre, bounced, v_th, shape_rows,
                    pairs):  # pragma: no cover - compiled
    """``Contacts._velocity_sweep``: the shape contacts (``shape_rows``), then the
    particle pairs (the active ones, packed in ``pairs``); returns the largest
    change."""
    change = _shape_sweep(v, bounce, v_start, v_pre, bounced, v_th, shape_rows)
    if pairs[0].size:
        change = max(change, _pair_sweep(v, bounce, v_th, bounced, pairs))
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
def finish(moves, v, x_prev, fold, rows, shapes, pairs, pstate,
           rules):  # pragma: no cover - compiled
    """:func:`finish_into` in arrays of its own (the substep path)."""
    return finish_into(moves, v, x_prev, fold, rows, shapes, pairs, pstate, rules,
                       finish_space(moves.x1, rows.cp.size, pairs.pi.size,
                                    pairs.nodes.size))


@jit_borrow
def finish_into(moves, v, x_prev, fold, rows, shapes, pairs, pstate, rules,
                space):  # pragma: no cover - compiled
    """``Contacts.finish``: the velocity pass on the particles of ``moves``, written
    over ``v`` (and ``x_prev`` when ``fold.position_based``: the integrator's
    ``ContactFold.from_positions``; ``fold.gain`` its ``ContactFold.gain``;
    :class:`.records.Fold`) on the contact ``rows`` (their ``vhit``, ``tau``: the
    sweep's bounces) and the particle ``pairs`` (``pstate``; restitution and friction
    from ``rules``); in the arrays of ``space`` (:func:`finish_space`, room for at
    least these contacts, pairs and nodes). Returns False when no contact was active
    (nothing written). Every contact and pair given, as in :func:`project`."""
    x, x0, w, r, dx = moves.x1, moves.x0, moves.w, moves.r, moves.dx
    v_start, a, at, position_based = fold.v_start, fold.a, fold.at, fold.position_based
    gain, h, v_th, touch, sweeps = fold.gain, fold.h, fold.v_th, fold.touch, fold.sweeps
    cp, cg, e, mu, ref = rows.cp, rows.cg, rows.ce, rows.cmu, rows.ref
    touched, nrm, spent = rows.touched, rows.nrm, rows.spent
    vhit, tau = rows.vhit, rows.tau
    C = cp.size
    pi, pj, pa, pb, reach = pairs.pi, pairs.pj, pairs.pa, pairs.pb, pairs.reach
    P = pi.size
    ptouched, pstuck = pstate.ptouched, pstate.pstuck
    nodes = pairs.nodes[:pairs.nodes.size if P else 0]
    pe, pmu = rules.e_def, rules.mu_def
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
            d, nx, ny = _contact_distance(cg[c], x[q, 0], x[q, 1], ref[c], shapes,
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
    nn = _near_pairs(x, pairs, touch_f, ptouched, True, (near, anx, any_, gd))
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
    compact = (ai[:na], aj[:na], aa[:na], ab[:na], anx[:na], any_[:na], afi[:na],
               afj[:na], astuck[:na], aref, aused, pe, pmu, nodes, sp_scr[0, :na],
               sp_scr[1, :na], sp_scr[2, :na], sp_scr[3, :na], sp_scr[4, :na],
               sp_scr[5, :na], sp_scr[6, :na], sp_scr[7, :na], live, count, da, db)
    shape_rows = (cp, cact, cnx, cny, e, mu, used, lift)
    for _ in range(max(sweeps, 4) if bounce else 0):
        if _velocity_sweep(v_imp, np.bool_(True), v_start, v_pre, bounced, v_th,
                           shape_rows, compact) <= tol:
            break
    # The friction the positions already took is in v_pos (its share of it for a
    # velocity integrator's fold): the inelastic sweeps only add the rest.
    g_used = gain
    for c in range(C):
        used[c] = spent[c] * g_used
    for _ in range(max(sweeps, 2)):
        if _velocity_sweep(v_pos, np.bool_(False), v_start, v_pre, bounced, v_th,
                           shape_rows, compact) <= tol:
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
