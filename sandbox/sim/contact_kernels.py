"""Compiled contact kernels (numba), each mirroring a numpy reference in ``colliders.py``.

numba is optional: without it ``AVAILABLE`` is False and ``Colliders`` keeps its numpy
path. The compiled path holds one substep's contacts flat (see ``colliders._FlatContacts``)
and runs each stage of a substep in one call:

``begin``             ``Colliders.begin``: broad phase against the shapes (brute force or
                      ``ShapeGrid``), the start-gap filter of ``Contacts.add_group``, the
                      swept cut of ``Contacts.sweep`` and the bounds walls
``pair_list``         ``particle_pairs`` and ``_PairList.build`` (the Verlet list)
``project``           ``Contacts.project`` with ``Contacts._project_pairs``
``finish``            ``Contacts.finish`` with its velocity sweeps

The same numbers as the reference, bit for bit (``tests/test_contact_kernels.py``):

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
"""

from __future__ import annotations

import math

import numpy as np

from . import backend
from .backend import INSTALLED, njit

if INSTALLED:
    from .kernels import _project_batches
    from .kernels import add_scaled_difference as _add_scaled_difference
    from .kernels import verlet_step as _verlet_step


def __getattr__(name):
    # ``AVAILABLE``: the compiled kernels may run now (``backend.usable``): False while
    # the app's background warm-up compiles them, and without numba.
    if name == "AVAILABLE":
        return backend.usable("contacts")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")



#: Shape kinds in the compiled contact list (the order of ``colliders.SHAPE_TYPES``, then
#: the bounds walls).
CIRCLE, SEGMENT, POLYGON, BOX, WALL = 0, 1, 2, 3, 4
#: Columns of the shape table ``geo (G, 11)``: the geometry (circle: centre, radius;
#: segment: a, b, thickness; box: lo, hi; wall: normal, offset), restitution and friction
#: (NaN: the world's), the shape's bounding box for the broad phase.
E, MU, LO_X, LO_Y, HI_X, HI_Y = 5, 6, 7, 8, 9, 10
INF = math.inf
#: ``colliders.MAX_HITS`` and ``colliders.DIR_TOL`` (the time-of-impact loop).
MAX_HITS = 4
DIR_TOL = 1e-9
#: 1/c for the contact counts c of the Jacobi averaging (entry 0 unused).
_RECIP = 1.0 / np.maximum(np.arange(64.0), 1.0)

if INSTALLED:
    _jit = njit(cache=True, fastmath=False, error_model="numpy")

    # ------------------------------------------------------------------ scalar helpers

    @_jit
    def _as(x, value):  # pragma: no cover - compiled
        """``value`` in the float type of the array ``x``: numpy rounds a Python float that
        meets a float32 array to float32 (NEP 50), where numba would widen the array."""
        return np.asarray(value, dtype=x.dtype)[()]

    @_jit
    def _max(a, b):  # pragma: no cover - compiled
        """``np.maximum`` of two numbers: NaN wins."""
        return a if (a >= b or a != a) else b

    @_jit
    def _min(a, b):  # pragma: no cover - compiled
        """``np.minimum`` of two numbers: NaN wins."""
        return a if (a <= b or a != a) else b

    @_jit
    def _clip(t, lo, hi):  # pragma: no cover - compiled
        """``np.clip(t, lo, hi)``: ``min(max(t, lo), hi)``, NaN kept."""
        if t != t:
            return t
        u = lo if t < lo else t
        return hi if u > hi else u

    @_jit
    def _better(t, best):  # pragma: no cover - compiled
        """Whether ``t`` replaces ``best`` in ``np.argmin`` (the first minimum; the first
        NaN wins over any number)."""
        return t < best or (t != t and best == best)

    @_jit
    def _share(count_a, count_b):  # pragma: no cover - compiled
        """``_pair_share`` of one pair: ``1.0 / max(count_a, count_b)``, looked up for
        small counts (the same quotient, without a division)."""
        c = max(count_a, count_b)
        return _RECIP[c] if c < _RECIP.size else 1.0 / c

    @_jit
    def _sign(v):  # pragma: no cover - compiled
        """``np.sign``."""
        if v > 0:
            return 1.0
        if v < 0:
            return -1.0
        return v            # zero or NaN

    # ------------------------------------------------------------------ distances
    # One point against one shape; each returns (d, nx, ny) as its vectorised reference.

    @_jit
    def _circle(px, py, cx, cy, R):  # pragma: no cover - compiled
        """``circle_distance``."""
        dx = px - cx
        dy = py - cy
        L = math.sqrt(dx * dx + dy * dy)
        if L > 0:
            return L - R, dx / L, dy / L
        return L - R, 0.0, 1.0

    @_jit
    def _segment_normal(abx, aby):  # pragma: no cover - compiled
        """``_segment_normal`` from ``ab = b - a``."""
        L = math.sqrt(abx * abx + aby * aby)
        if L > 0:
            return aby / L, -abx / L
        return 0.0, 1.0

    @_jit
    def _capsule(px, py, ax, ay, bx, by, r):  # pragma: no cover - compiled
        """``_capsule`` (via ``_segment_closest``): ``(d, nx, ny, t)``."""
        abx = bx - ax
        aby = by - ay
        L2 = abx * abx + aby * aby
        num = (px - ax) * abx + (py - ay) * aby
        t = _clip(num / (L2 if L2 != 0 else 1.0), 0.0, 1.0) * (1.0 if L2 > 0 else 0.0)
        dx = px - (ax + t * abx)
        dy = py - (ay + t * aby)
        L = math.sqrt(dx * dx + dy * dy)
        cr = abx * (py - ay) - aby * (px - ax)
        if L > 0 and not (t > 0 and t < 1 and cr != 0):
            return L - r, dx / L, dy / L, t
        nx, ny = _segment_normal(abx, aby)
        if L > 0:                       # beside the segment: its normal, towards p
            sg = -_sign(cr)
            return L - r, sg * nx, sg * ny, t
        return L - r, nx, ny, t

    @_jit
    def _side(px, py, ax, ay, bx, by):  # pragma: no cover - compiled
        """``Segments._side``: the sign of ``(b - a) x (p - a)``."""
        return _sign((bx - ax) * (py - ay) - (by - ay) * (px - ax))

    @_jit
    def _segment_contact(px, py, ax, ay, bx, by, r, ref):  # pragma: no cover - compiled
        """``Segments.contact``: a point that crossed the line since the start of the
        substep (``ref``, its side then) is inside, its normal pointing back."""
        d, nx, ny, t = _capsule(px, py, ax, ay, bx, by, r)
        side = _side(px, py, ax, ay, bx, by)
        if t > 0 and t < 1 and side != 0 and side * ref <= 0:
            dist = d + r
            return -dist - r, -nx, -ny
        return d, nx, ny

    @_jit
    def _polygon(px, py, verts, normals, edges, s):  # pragma: no cover - compiled
        """``polygon_distance`` against polygon ``s`` of ``verts, normals, edges (k, K, 2)``
        (padding included: it never wins, as in the reference). Indexed, not sliced: a
        view would cost reference counting per call."""
        best = -1
        bd = 0.0
        bt = 0.0
        qx = 0.0
        qy = 0.0
        outside = False
        for k in range(verts.shape[1]):
            relx = px - verts[s, k, 0]
            rely = py - verts[s, k, 1]
            ex = edges[s, k, 0]
            ey = edges[s, k, 1]
            L2 = ex * ex + ey * ey
            t = _clip((relx * ex + rely * ey) / (L2 if L2 != 0 else 1.0), 0.0, 1.0) * (
                1.0 if L2 > 0 else 0.0)
            cx = verts[s, k, 0] + t * ex
            cy = verts[s, k, 1] + t * ey
            gx = px - cx
            gy = py - cy
            dd = gx * gx + gy * gy
            if best < 0 or _better(dd, bd):
                best = k
                bd = dd
                bt = t
                qx = cx
                qy = cy
            if normals[s, k, 0] * relx + normals[s, k, 1] * rely > 0:
                outside = True
        dist = math.sqrt(bd)
        d = dist if outside else -dist
        if dist > 0 and (bt <= 0 or bt >= 1):        # nearest a vertex: radial
            return d, (px - qx) / d, (py - qy) / d
        return d, normals[s, best, 0], normals[s, best, 1]

    @_jit
    def _box(px, py, lox, loy, hix, hiy):  # pragma: no cover - compiled
        """``box_distance``."""
        hx = 0.5 * (hix - lox)
        hy = 0.5 * (hiy - loy)
        rx = px - 0.5 * (hix + lox)
        ry = py - 0.5 * (hiy + loy)
        ax = abs(rx) - hx
        ay = abs(ry) - hy
        outside = ax > 0 or ay > 0
        gx = px - _clip(px, lox, hix)
        gy = py - _clip(py, loy, hiy)
        dist = math.sqrt(gx * gx + gy * gy)
        if outside and dist > 0:
            return dist, gx / dist, gy / dist
        if ay > ax:
            return (dist if outside else ay), 0.0, (-1.0 if ry < 0 else 1.0)
        return (dist if outside else ax), (-1.0 if rx < 0 else 1.0), 0.0

    @_jit
    def _above(t, best):  # pragma: no cover - compiled
        """Whether ``t`` replaces ``best`` in ``np.argmax`` (the first maximum; the
        first NaN wins over any number)."""
        return t > best or (t != t and best == best)

    @_jit
    def _face_contact(px, py, p0x, p0y, verts, normals, s, d, nx,
                      ny):  # pragma: no cover - compiled
        """``_face_contact`` for polygon ``s`` of ``verts, normals (k, K, 2)`` given its
        plain distance ``d, nx, ny``: the entry face of the path ``p0 -> p`` when the
        path enters the polygon, the face nearest ``p0`` when it starts inside and ``p``
        is inside, else the plain distance."""
        any_out = False
        any_enter = False
        miss = False
        t_in = -INF
        k_in = 0
        t_out = INF
        s0_top = -INF
        k0 = 0
        for k in range(verts.shape[1]):
            fx = normals[s, k, 0]
            fy = normals[s, k, 1]
            valid = fx * fx + fy * fy > 0
            s0 = fx * (p0x - verts[s, k, 0]) + fy * (p0y - verts[s, k, 1])
            s1 = fx * (px - verts[s, k, 0]) + fy * (py - verts[s, k, 1])
            out0 = s0 > 0 and valid
            enter = out0 and s1 < 0
            ti = s0 / (s0 - s1) if enter else -INF
            if k == 0 or _above(ti, t_in):
                t_in, k_in = ti, k
            if not out0 and valid and s1 > 0:
                t_out = _min(t_out, s0 / (s0 - s1))
            sv = s0 if valid else -INF
            if k == 0 or _above(sv, s0_top):
                s0_top, k0 = sv, k
            any_out |= out0
            any_enter |= enter
            miss |= out0 and not enter
        if any_enter and not miss and t_in < t_out:
            k = k_in
        elif not any_out and d < 0:
            k = k0
        else:
            return d, nx, ny
        fx = normals[s, k, 0]
        fy = normals[s, k, 1]
        return fx * (px - verts[s, k, 0]) + fy * (py - verts[s, k, 1]), fx, fy

    @_jit
    def _distance(g, px, py, ref, contact, kinds, rows, geo, pverts, pnorm, pedge, bverts,
                  bnorm, bedge, p0x, p0y):  # pragma: no cover - compiled
        """Point ``p`` against row ``g`` of the shape table: ``ShapeSet.distance``, or
        ``ShapeSet.contact`` when ``contact`` for a point that started the substep at
        ``p0`` (segments then keep the side ``ref``, polygons and boxes push out through
        the face the path crossed)."""
        kind = kinds[g]
        if kind == CIRCLE:
            return _circle(px, py, geo[g, 0], geo[g, 1], geo[g, 2])
        if kind == SEGMENT:
            if contact:
                return _segment_contact(px, py, geo[g, 0], geo[g, 1], geo[g, 2], geo[g, 3],
                                        geo[g, 4], ref)
            d, nx, ny, _ = _capsule(px, py, geo[g, 0], geo[g, 1], geo[g, 2], geo[g, 3],
                                    geo[g, 4])
            return d, nx, ny
        if kind == POLYGON:
            d, nx, ny = _polygon(px, py, pverts, pnorm, pedge, rows[g])
            if contact:
                return _face_contact(px, py, p0x, p0y, pverts, pnorm, rows[g], d, nx, ny)
            return d, nx, ny
        if kind == BOX:
            d, nx, ny = _box(px, py, geo[g, 0], geo[g, 1], geo[g, 2], geo[g, 3])
            if contact:
                return _face_contact(px, py, p0x, p0y, bverts, bnorm, rows[g], d, nx, ny)
            return d, nx, ny
        # Walls.distance: n . p - offset
        return (geo[g, 0] * px + geo[g, 1] * py) - geo[g, 2], geo[g, 0], geo[g, 1]

    # ------------------------------------------------------------------ sweeps

    @_jit
    def _sweep_circle(p0x, p0y, dx, dy, cx, cy, RR):  # pragma: no cover - compiled
        """``sweep_circle`` with ``RR = R * R`` (computed by the caller in the reference's
        type): the time of impact, inf when missed."""
        fx = p0x - cx
        fy = p0y - cy
        A = dx * dx + dy * dy
        B = fx * dx + fy * dy
        C = (fx * fx + fy * fy) - RR
        disc = B * B - A * C
        if C >= 0 and B < 0 and disc >= 0 and A > 0:
            t = C / (-B + math.sqrt(_max(disc, 0.0)))
            if t <= 1.0:
                return t
        return INF

    @_jit
    def _toi_normal(p0x, p0y, dx, dy, t, cx, cy):  # pragma: no cover - compiled
        """``_toi_normal``."""
        tt = t if math.isfinite(t) else 0.0
        x = p0x + tt * dx - cx
        y = p0y + tt * dy - cy
        L = math.sqrt(x * x + y * y)
        if L > 0:
            return x / L, y / L
        s = math.sqrt(dx * dx + dy * dy)
        if s != 0:
            return -dx / s, -dy / s
        return -dx, -dy

    @_jit
    def _sweep_face(p0x, p0y, p1x, p1y, vx, vy, ex, ey, nx, ny,
                    rs):  # pragma: no cover - compiled
        """``_sweep_faces`` for one face: the time of impact, inf when missed."""
        d0 = (nx * (p0x - vx) + ny * (p0y - vy)) - rs
        d1 = (nx * (p1x - vx) + ny * (p1y - vy)) - rs
        if d0 >= 0 and d1 < 0:
            t = d0 / (d0 - d1)
            qx = p0x + t * (p1x - p0x)
            qy = p0y + t * (p1y - p0y)
            w = (qx - vx) * ex + (qy - vy) * ey
            if w >= 0 and w <= ex * ex + ey * ey and nx * nx + ny * ny > 0:
                return t
        return INF

    @_jit
    def _sweep_capsule(p0x, p0y, p1x, p1y, ax, ay, bx, by,
                       rs):  # pragma: no cover - compiled
        """``sweep_capsule``: ``(t, nx, ny)``, the sides first, then the end discs."""
        abx = bx - ax
        aby = by - ay
        gate = 1.0 if abx * abx + aby * aby > 0 else 0.0   # a point has no sides
        nx, ny = _segment_normal(abx, aby)
        nx = nx * gate
        ny = ny * gate
        t = _sweep_face(p0x, p0y, p1x, p1y, ax, ay, abx, aby, nx, ny, rs)
        t2 = _sweep_face(p0x, p0y, p1x, p1y, ax, ay, abx, aby, -nx, -ny, rs)
        fx, fy = nx, ny
        if _better(t2, t):
            t, fx, fy = t2, -nx, -ny
        dx = p1x - p0x
        dy = p1y - p0y
        RR = rs * rs
        ta = _sweep_circle(p0x, p0y, dx, dy, ax, ay, RR)
        tb = _sweep_circle(p0x, p0y, dx, dy, bx, by, RR)
        pick = 0
        if _better(ta, t):
            t, pick = ta, 1
        if _better(tb, t):
            t, pick = tb, 2
        if pick == 1:
            fx, fy = _toi_normal(p0x, p0y, dx, dy, ta, ax, ay)
        elif pick == 2:
            fx, fy = _toi_normal(p0x, p0y, dx, dy, tb, bx, by)
        return t, fx, fy

    @_jit
    def _sweep_polygon(p0x, p0y, p1x, p1y, verts, normals, edges, s,
                       rs):  # pragma: no cover - compiled
        """``sweep_polygon`` for polygon ``s`` of ``verts, normals, edges (k, K, 2)``:
        ``(t, nx, ny)``."""
        K = verts.shape[1]
        tf = INF
        kf = 0
        for k in range(K):
            t = _sweep_face(p0x, p0y, p1x, p1y, verts[s, k, 0], verts[s, k, 1], edges[s, k, 0],
                            edges[s, k, 1], normals[s, k, 0], normals[s, k, 1], rs)
            if k == 0 or _better(t, tf):
                tf, kf = t, k
        nx = normals[s, kf, 0]
        ny = normals[s, kf, 1]
        if rs > 0:
            dx = p1x - p0x
            dy = p1y - p0y
            RR = rs * rs
            tv = INF
            kv = 0
            for k in range(K):
                t = _sweep_circle(p0x, p0y, dx, dy, verts[s, k, 0], verts[s, k, 1], RR)
                if k == 0 or _better(t, tv):
                    tv, kv = t, k
            if _better(tv, tf):
                tf = tv
                nx, ny = _toi_normal(p0x, p0y, dx, dy, tv, verts[s, kv, 0], verts[s, kv, 1])
        return tf, nx, ny

    @_jit
    def _sweep(g, p0x, p0y, p1x, p1y, r, kinds, rows, geo, pverts, pnorm, pedge, bverts,
               bnorm, bedge):  # pragma: no cover - compiled
        """``ShapeSet.sweep`` of a disc of radius ``r`` against row ``g`` of the table."""
        kind = kinds[g]
        if kind == CIRCLE:
            dx = p1x - p0x
            dy = p1y - p0y
            R = geo[g, 2] + r
            t = _sweep_circle(p0x, p0y, dx, dy, geo[g, 0], geo[g, 1], R * R)
            nx, ny = _toi_normal(p0x, p0y, dx, dy, t, geo[g, 0], geo[g, 1])
            return t, nx, ny
        if kind == SEGMENT:
            return _sweep_capsule(p0x, p0y, p1x, p1y, geo[g, 0], geo[g, 1], geo[g, 2],
                                  geo[g, 3], geo[g, 4] + r)
        if kind == POLYGON:
            return _sweep_polygon(p0x, p0y, p1x, p1y, pverts, pnorm, pedge, rows[g], r)
        # BOX: its box_polygon row of the table
        return _sweep_polygon(p0x, p0y, p1x, p1y, bverts, bnorm, bedge, rows[g], r)

    # ------------------------------------------------------------------ begin

    @_jit
    def _grid_candidates(lox, loy, hix, hiy, keys, sids, cell, origin, dims, max_cells,
                         stamp, q, buf):  # pragma: no cover - compiled
        """``ShapeGrid.query`` for one particle box: the shapes listed in the cells it
        covers, sorted and distinct, into ``buf``; returns their count, or -1 when the
        box covers more than ``max_cells`` cells (then every shape is a candidate).
        ``cell`` is in the positions' float type, as numpy divides them."""
        c0x = max(np.int64(np.floor(lox / cell)), origin[0])
        c0y = max(np.int64(np.floor(loy / cell)), origin[1])
        c1x = min(np.int64(np.floor(hix / cell)), origin[0] + dims[0] - 1)
        c1y = min(np.int64(np.floor(hiy / cell)), origin[1] + dims[1] - 1)
        sx = max(c1x - c0x + 1, 0)
        sy = max(c1y - c0y + 1, 0)
        cells = sx * sy
        if cells > max_cells:
            return -1
        m = 0
        for k in range(cells):
            key = (c0x + k // sy - origin[0]) * dims[1] + (c0y + k % sy - origin[1])
            a = np.searchsorted(keys, key, side="left")
            b = np.searchsorted(keys, key, side="right")
            for t in range(a, b):
                g = sids[t]
                if stamp[g] != q:
                    stamp[g] = q
                    buf[m] = g
                    m += 1
        buf[:m].sort()
        return m

    @_jit
    def _broad_phase(x0, x1, w, r, disp, kinds, rows, geo, nshapes, pverts, pnorm, pedge,
                     bverts, bnorm, bedge, keys, sids, cell, origin, dims, brute, max_cells,
                     half, one_half, marg, cp, cg, gap):  # pragma: no cover - compiled
        """The broad phase of ``begin`` with ``Contacts.add_group``'s start-gap filter,
        particle by particle, shapes in table order, into ``cp, cg, gap``; returns their
        number, or -1 when they do not fit. ``half``, ``one_half``, ``marg`` are 0.5,
        1.5 and ``MARGIN``, ``cell`` the grid's cell, in the positions' float type."""
        n = x1.shape[0]
        m = 0
        stamp = np.full(nshapes, -1, np.int64)
        buf = np.empty(nshapes, np.int64)
        for q in range(n if nshapes else 0):
            if not w[q] > 0:
                continue
            pad = r[q] + half * disp[q] + marg
            lox = _min(x0[q, 0], x1[q, 0]) - pad
            loy = _min(x0[q, 1], x1[q, 1]) - pad
            hix = _max(x0[q, 0], x1[q, 0]) + pad
            hiy = _max(x0[q, 1], x1[q, 1]) + pad
            count = -1
            if not brute:
                count = _grid_candidates(lox, loy, hix, hiy, keys, sids, cell, origin, dims,
                                         max_cells, stamp, q, buf)
            if count < 0:
                for g in range(nshapes):
                    buf[g] = g
                count = nshapes
            near = one_half * disp[q] + marg
            for k in range(count):
                g = buf[k]
                # One branch for the four tests (& does not short-circuit).
                if not ((lox <= geo[g, HI_X]) & (loy <= geo[g, HI_Y]) & (hix >= geo[g, LO_X])
                        & (hiy >= geo[g, LO_Y])):
                    continue
                d0, _, _ = _distance(g, x0[q, 0], x0[q, 1], 0.0, False, kinds, rows, geo,
                                     pverts, pnorm, pedge, bverts, bnorm, bedge, x0[q, 0],
                                     x0[q, 1])
                gq = d0 - r[q]
                if gq < near:
                    if m == cp.size:
                        return -1
                    cp[m] = q
                    cg[m] = g
                    gap[m] = gq
                    m += 1
        return m

    @_jit
    def begin(x0, x1, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts, pnorm, pedge,
              bverts, bnorm, bedge, keys, sids, cell, origin, dims, e_def, mu_def, eps,
              skin_min, touch_min, margin, brute_pairs, max_cells):  # pragma: no cover
        """``Colliders.begin`` up to the particle pairs, after the integrator moved ``x1``
        from ``x0``: ``_tolerances``, the broad phase (``aabb_pairs_brute`` or
        ``ShapeGrid.query``, the same rule choosing), ``Contacts.add_group`` with its
        start-gap filter, ``Contacts.sweep`` (moves ``x1``, adds to ``dx``) and the walls
        (table rows ``nshapes ..``).

        Returns ``cp, cg, e, mu, ref, touched, nrm, depth, spent, stuck, skin, touch``:
        the contacts' particles and table rows in the reference's group order (shape
        type by shape type, each in ``(particle, shape)`` order, then the walls), their
        materials, segment sides, and what the sweep did to them (``_toi``).
        """
        n = x1.shape[0]
        # _tolerances(x1)
        top = 0.0
        for q in range(n):
            top = _max(top, abs(x1[q, 0]))
            top = _max(top, abs(x1[q, 1]))
        s16 = 16.0 * eps * (1.0 + top)
        skin = s16 if s16 > skin_min else skin_min
        s100 = 100.0 * skin
        touch = s100 if s100 > touch_min else touch_min
        marg = _as(x1, margin)
        cell_f = _as(x1, cell)
        disp = np.empty(n if nshapes else 0, x1.dtype)
        movable = 0
        for q in range(n if nshapes else 0):     # without shapes only walls need it
            ddx = x1[q, 0] - x0[q, 0]
            ddy = x1[q, 1] - x0[q, 1]
            disp[q] = math.sqrt(ddx * ddx + ddy * ddy)
            if w[q] > 0:
                movable += 1
        brute = movable * nshapes <= brute_pairs
        cap = max(4 * n, 64) if nshapes else 0  # no regrowing in the loop (module docstring)
        while True:
            cp = np.empty(cap, np.int64)
            cg = np.empty(cap, np.int64)
            gap = np.empty(cap)
            m = 0
            if nshapes:
                m = _broad_phase(x0, x1, w, r, disp, kinds, rows, geo, nshapes, pverts,
                                 pnorm, pedge, bverts, bnorm, bedge, keys, sids, cell_f,
                                 origin, dims, brute, max_cells, _as(x1, 0.5), _as(x1, 1.5),
                                 _as(x1, margin), cp, cg, gap)
            if m >= 0:
                break
            cap *= 4
        # Shape type by shape type (a stable counting sort): the reference's groups.
        start = np.zeros(WALL + 1, np.int64)
        for c in range(m):
            start[kinds[cg[c]] + 1] += 1
        for k in range(WALL):
            start[k + 1] += start[k]
        order = np.empty(m, np.int64)
        for c in range(m):
            kd = kinds[cg[c]]
            order[start[kd]] = c
            start[kd] += 1
        out_p = np.empty(m, np.int64)
        out_g = np.empty(m, np.int64)
        gap_o = np.empty(m)
        for k in range(m):
            out_p[k] = cp[order[k]]
            out_g[k] = cg[order[k]]
            gap_o[k] = gap[order[k]]
        ref_s = np.zeros(m)
        for c in range(m):
            g = out_g[c]
            if kinds[g] == SEGMENT:
                q = out_p[c]
                ref_s[c] = _side(x0[q, 0], x0[q, 1], geo[g, 0], geo[g, 1], geo[g, 2],
                                 geo[g, 3])
        touched_s = np.zeros(m, np.bool_)
        stuck_s = np.zeros(m, np.bool_)
        depth_s = np.zeros(m)
        spent_s = np.zeros(m)
        nrm_s = np.zeros((m, 2))
        if m:
            _toi(x0, x1, r, dx, skin, touch, out_p, out_g, gap_o, ref_s, m, mu_def, kinds,
                 rows, geo, pverts, pnorm, pedge, bverts, bnorm, bedge, touched_s, nrm_s,
                 depth_s, spent_s, stuck_s)
        # Walls: n . x1 - offset below r + disp + MARGIN, after the sweep.
        wq = np.empty(n * nwalls, np.int64)
        wg = np.empty(n * nwalls, np.int64)
        nw = 0
        two = _as(x1, 2.0)
        for q in range(n if nwalls else 0):
            if not w[q] > 0:
                continue
            rq = r[q]
            near = rq + marg
            for k in range(nwalls):
                g = nshapes + k
                dw = (geo[g, 0] * x1[q, 0] + geo[g, 1] * x1[q, 1]) - geo[g, 2]
                if nshapes:
                    hit = dw < rq + disp[q] + marg
                elif dw < near:                 # disp >= 0: below the limit anyway
                    hit = True
                else:
                    # The exact test needs disp, the path's length: a square root, only
                    # for walls within 2 (|dx| + |dy|) >= disp of the limit.
                    ddx = x1[q, 0] - x0[q, 0]
                    ddy = x1[q, 1] - x0[q, 1]
                    if dw >= (rq + (abs(ddx) + abs(ddy)) * two) + marg:
                        hit = False
                    else:
                        hit = dw < rq + math.sqrt(ddx * ddx + ddy * ddy) + marg
                if hit:
                    wq[nw] = q
                    wg[nw] = g
                    nw += 1
        C = m + nw
        if nw:
            c_p = np.empty(C, np.int64)
            c_g = np.empty(C, np.int64)
            c_p[:m] = out_p
            c_g[:m] = out_g
            c_p[m:] = wq[:nw]
            c_g[m:] = wg[:nw]
            ref = np.zeros(C)
            ref[:m] = ref_s
            touched = np.zeros(C, np.bool_)
            touched[:m] = touched_s
            stuck = np.zeros(C, np.bool_)
            stuck[:m] = stuck_s
            depth = np.zeros(C)
            depth[:m] = depth_s
            spent = np.zeros(C)
            spent[:m] = spent_s
            nrm = np.zeros((C, 2))
            nrm[:m] = nrm_s
        else:
            c_p, c_g, ref, touched, stuck = out_p, out_g, ref_s, touched_s, stuck_s
            depth, spent, nrm = depth_s, spent_s, nrm_s
        # Materials (NaN: the world's).
        e = np.empty(C)
        mu = np.empty(C)
        for c in range(C):
            g = c_g[c]
            e[c] = e_def if math.isnan(geo[g, E]) else geo[g, E]
            mu[c] = mu_def if math.isnan(geo[g, MU]) else geo[g, MU]
        return c_p, c_g, e, mu, ref, touched, nrm, depth, spent, stuck, skin, touch

    @_jit
    def _toi(x0, x1, r, dx, skin, touch, cp, cg, gap, ref, m, mu_def, kinds, rows, geo,
             pverts, pnorm, pedge, bverts, bnorm, bedge, touched, nrm, depth, spent,
             stuck):  # pragma: no cover - compiled
        """``Contacts.sweep``: the time-of-impact loop over the contacts ``0..m-1`` (in
        the reference's order), moving ``x1`` and adding to ``dx``; fills the hit
        contacts' ``touched``, ``nrm``, ``depth``, ``spent`` and ``stuck``.

        Every pass looks at every contact of a particle still moving, in order, and
        keeps each particle's earliest hit (the first on a tie), as the reference's
        groups one after another do; then every hit particle stops on the surface and
        slides on, and the next pass sweeps the rest."""
        n = x1.shape[0]
        loc = np.full(n, -1, np.int64)
        L = 0
        for k in range(m):
            q = cp[k]
            if loc[q] < 0:
                loc[q] = L
                L += 1
        owner = np.empty(L, np.int64)
        for q in range(n):
            if loc[q] >= 0:
                owner[loc[q]] = q
        posx = np.empty(L)
        posy = np.empty(L)
        endx = np.empty(L)
        endy = np.empty(L)
        for a in range(L):
            q = owner[a]
            posx[a] = np.float64(x0[q, 0])
            posy[a] = np.float64(x0[q, 1])
            endx[a] = np.float64(x1[q, 0])
            endy[a] = np.float64(x1[q, 1])
        planes = np.zeros((L, MAX_HITS, 2))
        count = np.zeros(L, np.int64)
        live = np.ones(L, np.bool_)
        moved = np.zeros(L, np.bool_)
        best_t = np.empty(L)
        best_k = np.empty(L, np.int64)
        best_nx = np.empty(L)
        best_ny = np.empty(L)
        # Starts on or inside: the normal there, and whether the plane is still unused.
        unused = np.zeros(m, np.bool_)
        n0 = np.zeros((m, 2))
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
                unused[k] = False
        for a in range(L):
            if moved[a]:
                q = owner[a]
                dx[q, 0] += posx[a] - x1[q, 0]
                dx[q, 1] += posy[a] - x1[q, 1]
                x1[q, 0] = posx[a]
                x1[q, 1] = posy[a]

    # ------------------------------------------------------------------ particle pairs

    @_jit
    def _stable_order(key, start, table):  # pragma: no cover - compiled
        """``np.argsort(key, kind="stable")``: a counting sort over the cell starts
        ``start`` when ``table``, else a merge sort."""
        if not table:
            return np.argsort(key, kind="mergesort")
        order = np.empty(key.size, np.int64)
        fill = start[:-1].copy()
        for k in range(key.size):
            order[fill[key[k]]] = k
            fill[key[k]] += 1
        return order

    @_jit
    def _scan_pairs(x, r, idx, c0, c1, order, start, sk, table, ny, marg, exclude, pi,
                    pj):  # pragma: no cover - compiled
        """The pairs of ``particle_pairs`` into ``pi, pj`` in its order; returns their
        number, or -1 when they do not fit.

        The reference visits the 3 x 3 cell offsets one after another, for each the
        particles ``own`` (ranks into ``idx``) in order and their partners in sorted-key
        order (``order``, keys ``sk``), keeping ``own < other`` within reach and not
        excluded: every pair is looked at from both ends and kept from its lower rank.
        Here every pair is looked at once, from a half shell (a particle's own cell
        after it in sorted order and the cell above it, then the three cells of the
        column to the right: consecutive keys, one run each), over copies of positions
        and radii in sorted order; the test is symmetric (``(a - b)^2 == (b - a)^2``,
        ``r_a + r_b == r_b + r_a`` exactly). The pairs found are then put in the
        reference's order, which is by offset, then ``own``, then ``other`` (partners in
        one cell sort by rank): a radix sort, by ``other``, then by offset and ``own``.
        """
        n = x.shape[0]
        m = idx.size
        xs = np.empty(m, x.dtype)
        ys = np.empty(m, x.dtype)
        rs = np.empty(m, r.dtype)
        for t in range(m):
            j = idx[order[t]]
            xs[t] = x[j, 0]
            ys[t] = x[j, 1]
            rs[t] = r[j]
        P = 0
        po = np.empty(pi.size, np.int64)         # the cell offset, 3 (dx + 1) + (dy + 1)
        pa = np.empty(pi.size, np.int64)         # own: the lower rank
        pb = np.empty(pi.size, np.int64)         # other
        for u in range(m):                       # in sorted order
            ku = sk[u]
            for col in range(2):
                if col == 0:
                    a = u + 1
                    b = start[ku + 2] if table else np.searchsorted(sk, ku + 1, side="right")
                elif table:
                    a = start[ku + ny - 1]
                    b = start[ku + ny + 2]
                else:
                    a = np.searchsorted(sk, ku + ny - 1, side="left")
                    b = np.searchsorted(sk, ku + ny + 1, side="right")
                for t in range(a, b):
                    ddx = xs[t] - xs[u]
                    ddy = ys[t] - ys[u]
                    reach = rs[u] + rs[t] + marg
                    if not ddx * ddx + ddy * ddy < reach * reach:
                        continue
                    own = min(order[u], order[t])
                    other = max(order[u], order[t])
                    i = idx[own]
                    j = idx[other]
                    if exclude.size:
                        kk = i * n + j           # i < j: the key min * n + max
                        q = min(np.searchsorted(exclude, kk), exclude.size - 1)
                        if exclude[q] == kk:
                            continue
                    if P == pi.size:
                        return -1
                    pi[P] = i
                    pj[P] = j
                    po[P] = 3 * (c0[other] - c0[own] + 1) + (c1[other] - c1[own] + 1)
                    pa[P] = own
                    pb[P] = other
                    P += 1
        # Radix sort: by other, then (stable) by offset and own.
        count = np.zeros(m + 1, np.int64)
        for k in range(P):
            count[pb[k] + 1] += 1
        for v in range(m):
            count[v + 1] += count[v]
        by_other = np.empty(P, np.int64)
        for k in range(P):
            by_other[count[pb[k]]] = k
            count[pb[k]] += 1
        first = np.zeros(9 * m + 1, np.int64)
        for k in range(P):
            first[po[k] * m + pa[k] + 1] += 1
        for v in range(9 * m):
            first[v + 1] += first[v]
        si = np.empty(P, np.int64)
        sj = np.empty(P, np.int64)
        for q in range(P):
            k = by_other[q]
            slot = po[k] * m + pa[k]
            si[first[slot]] = pi[k]
            sj[first[slot]] = pj[k]
            first[slot] += 1
        pi[:P] = si
        pj[:P] = sj
        return P

    @_jit
    def pair_list(x, r, margin, exclude):  # pragma: no cover - compiled
        """``particle_pairs`` and ``_PairList.build``: ``i, j, a, b, nodes, reach``.

        The same grid and the same pairs in the same order (see ``_scan_pairs``). Cells
        are looked up in a table of cell starts (a counting sort, stable as the
        reference's argsort) when the grid is small, else by binary search.
        """
        n = x.shape[0]
        m = 0
        for p in range(n):
            if r[p] > 0:
                m += 1
        ei = np.zeros(0, np.int64)
        if m < 2:
            return ei, ei, ei, ei, ei, np.zeros(0, r.dtype)
        idx = np.empty(m, np.int64)
        m = 0
        for p in range(n):
            if r[p] > 0:
                idx[m] = p
                m += 1
        rmax = r[idx[0]]
        lo0 = x[idx[0], 0]
        lo1 = x[idx[0], 1]
        hi0 = lo0
        hi1 = lo1
        for k in range(1, m):
            p = idx[k]
            rmax = _max(rmax, r[p])
            lo0 = _min(lo0, x[p, 0])
            lo1 = _min(lo1, x[p, 1])
            hi0 = _max(hi0, x[p, 0])
            hi1 = _max(hi1, x[p, 1])
        if not (math.isfinite(lo0) and math.isfinite(lo1) and math.isfinite(hi0)
                and math.isfinite(hi1)):
            # A diverging world (World.step restores it): no pairs, where the reference
            # would put every particle in one garbage cell; cell keys must stay in range.
            return ei, ei, ei, ei, ei, np.zeros(0, r.dtype)
        cell = 2.0 * np.float64(rmax) + margin
        span = np.float64(_max(hi0 - lo0, hi1 - lo1))
        if span / 2.0 ** 30 > cell:                 # keeps cell keys within int64
            cell = span / 2.0 ** 30
        cell_f = _as(x, cell)
        c0 = np.empty(m, np.int64)
        c1 = np.empty(m, np.int64)
        for k in range(m):
            p = idx[k]
            c0[k] = np.int64(np.floor((x[p, 0] - lo0) / cell_f)) + 1
            c1[k] = np.int64(np.floor((x[p, 1] - lo1) / cell_f)) + 1
        ny = c1.max() + 2
        key = c0 * ny + c1
        size = (c0.max() + 2) * ny               # every neighbour key is below this
        table = size <= 16 * m + 65536
        start = np.zeros(size + 1 if table else 1, np.int64)
        if table:
            for k in range(m):
                start[key[k] + 1] += 1
            for s in range(size):
                start[s + 1] += start[s]
        order = _stable_order(key, start, table)
        sk = key[order]
        cap = max(8 * m, 16)
        while True:                 # no regrowing in the loop (see the module docstring)
            pi = np.empty(cap, np.int64)
            pj = np.empty(cap, np.int64)
            P = _scan_pairs(x, r, idx, c0, c1, order, start, sk, table, ny,
                            _as(x, margin), exclude, pi, pj)
            if P >= 0:
                break
            cap *= 4
        pi = pi[:P].copy()
        pj = pj[:P].copy()
        # _PairList.build: nodes = np.unique(i, j), a and b number the pairs' ends in it.
        local = np.full(n, -1, np.int64)
        for k in range(P):
            local[pi[k]] = 0
            local[pj[k]] = 0
        M = 0
        for p in range(n):
            if local[p] == 0:
                M += 1
        nodes = np.empty(M, np.int64)
        M = 0
        for p in range(n):
            if local[p] == 0:
                nodes[M] = p
                local[p] = M
                M += 1
        pa = np.empty(P, np.int64)
        pb = np.empty(P, np.int64)
        reach = np.empty(P, r.dtype)
        for k in range(P):
            pa[k] = local[pi[k]]
            pb[k] = local[pj[k]]
            reach[k] = r[pi[k]] + r[pj[k]]
        return pi, pj, pa, pb, nodes, reach

    @_jit
    def max_moved2(x, x_ref):  # pragma: no cover - compiled
        """``np.max(_dot(x - x_ref, x - x_ref), initial=0.0)``: the Verlet list's test."""
        top = _as(x, 0.0)
        for q in range(x.shape[0]):
            mx = x[q, 0] - x_ref[q, 0]
            my = x[q, 1] - x_ref[q, 1]
            top = _max(top, mx * mx + my * my)
        return top

    @_jit
    def any_moving(i, j, w):  # pragma: no cover - compiled
        """Whether a pair has a movable end (``Contacts.set_pairs``)."""
        for k in range(i.size):
            if w[i[k]] > 0 or w[j[k]] > 0:
                return True
        return False

    # ------------------------------------------------------------------ projection

    @_jit
    def _project_pairs(x, w, x0, dx, skin, i, j, a, b, nodes, reach, mu, depth, touched,
                       stuck):  # pragma: no cover - compiled
        """``Contacts._project_pairs``: one Jacobi pass, averaged per pair."""
        P = i.size
        M = nodes.size
        skin_f = _as(x, skin)
        one = _as(x, 1.0)
        zero = _as(x, 0.0)
        live = np.empty(P, np.int64)
        c = np.empty((P, 2), x.dtype)
        count = np.zeros(M, np.int64)
        nl = 0
        for k in range(P):
            ii = i[k]
            jj = j[k]
            ddx = x[jj, 0] - x[ii, 0]
            ddy = x[jj, 1] - x[ii, 1]
            dist = math.sqrt(ddx * ddx + ddy * ddy)
            pen = reach[k] - dist
            wsum = w[ii] + w[jj]
            if not (pen > skin_f and dist > 0 and wsum > 0):
                continue
            live[nl] = k
            nl += 1
            nx = ddx / dist
            ny = ddy / dist
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
            count[a[k]] += 1
            count[b[k]] += 1
        if not nl:
            return
        # Sums in pair order from zero, the a ends then the b ends, as np.bincount.
        ta = np.zeros((M, 2))
        tb = np.zeros((M, 2))
        for q in range(nl):
            k = live[q]
            share = _share(count[a[k]], count[b[k]])
            c[k, 0] = c[k, 0] * share                  # rounded to the positions' type
            c[k, 1] = c[k, 1] * share
            wi = w[i[k]]
            wj = w[j[k]]
            ta[a[k], 0] += -wi * c[k, 0]
            ta[a[k], 1] += -wi * c[k, 1]
            tb[b[k], 0] += wj * c[k, 0]
            tb[b[k], 1] += wj * c[k, 1]
        for mm in range(M):
            p = nodes[mm]
            sx = ta[mm, 0] + tb[mm, 0]
            sy = ta[mm, 1] + tb[mm, 1]
            x[p, 0] += sx
            x[p, 1] += sy
            dx[p, 0] += sx
            dx[p, 1] += sy

    @_jit
    def project(x, w, x0, dx, r, skin, cp, cg, mu, ref, depth, touched, stuck, nrm, spent,
                kinds, rows, geo, pverts, pnorm, pedge, bverts, bnorm, bedge, pi, pj, pa, pb,
                nodes, reach, pmu, pdepth, ptouched, pstuck):  # pragma: no cover - compiled
        """``Contacts.project``: the particle pairs, then the shapes and walls, each
        contact after the previous one (a particle's contacts in the reference's
        order; different particles do not interact here)."""
        if pi.size:
            _project_pairs(x, w, x0, dx, skin, pi, pj, pa, pb, nodes, reach, pmu, pdepth,
                           ptouched, pstuck)
        for c in range(cp.size):
            q = cp[c]
            d, nx, ny = _distance(cg[c], x[q, 0], x[q, 1], ref[c], True, kinds, rows, geo,
                                  pverts, pnorm, pedge, bverts, bnorm, bedge, x0[q, 0],
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

    # ------------------------------------------------------------------ velocity pass

    @_jit
    def _stop(vn, vn_ref, mu):  # pragma: no cover - compiled
        """``_stop``: the inelastic rule, ``(change, friction budget)``."""
        new = _min(_max(vn, 0.0), _max(vn_ref, 0.0))
        return new - vn, mu * _max(new - vn_ref, 0.0)

    @_jit
    def _shape_sweep(v, bounce, v_start, v_ref, bounced, v_th, cp, cact, cnx, cny, e, mu,
                     used):  # pragma: no cover - compiled
        """The shape contacts' part of ``Contacts._velocity_sweep`` (``_shape_velocity``
        per contact, one after another); returns the largest change."""
        change = 0.0
        for c in range(cp.size):
            if not cact[c]:
                continue
            q = cp[c]
            nx = cnx[c]
            ny = cny[c]
            vn = v[q, 0] * nx + v[q, 1] * ny
            if bounce:
                vn0 = v_start[q, 0] * nx + v_start[q, 1] * ny
                target = -e[c] * vn0 if vn0 < -v_th else 0.0
                if target > 0:
                    bounced[q] = True
                dvn = _max(target - vn, 0.0)
                budget = mu[c] * dvn
            else:
                dvn, budget = _stop(vn, v_ref[q, 0] * nx + v_ref[q, 1] * ny, mu[c])
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

    @_jit
    def _pair_sweep(v, bounce, v_th, bounced, ai, aj, aa, ab, anx, any_, afi, afj, astuck,
                    aref, aused, e, mu, nodes, dn, dt, sv, vtx, vty, size, live, count, da,
                    db):  # pragma: no cover - compiled
        """``Contacts._pair_velocity``: one Jacobi sweep over the pairs in contact,
        averaged as in the projection; returns the largest change.

        The pairs come as a compact list (``ai, aj`` particles, ``aa, ab`` their rows of
        ``nodes``, the normal, ``afi = -wi/(wi + wj)``, ``afj = wj/(wi + wj)``, whether
        it stuck, ``aref`` the pre-contact normal velocity, ``aused`` the friction spent
        by earlier sweeps), in the reference's pair order; the rest is scratch."""
        na = ai.size
        top = 0.0
        for s in range(na):
            ii = ai[s]
            jj = aj[s]
            nx = anx[s]
            ny = any_[s]
            vrx = v[jj, 0] - v[ii, 0]
            vry = v[jj, 1] - v[ii, 1]
            vn = vrx * nx + vry * ny
            if bounce:
                target = -e * vn if -vn > v_th else 0.0
                if target > 0:
                    bounced[ii] = True
                    bounced[jj] = True
                d = _max(target - vn, 0.0)
                budget = mu * d
            else:
                d, budget = _stop(vn, aref[s], mu)
                budget = _max(budget - aused[s], 0.0)
            tx = vrx - vn * nx
            ty = vry - vn * ny
            vtl = math.sqrt(tx * tx + ty * ty)
            t = vtl if astuck[s] else _min(budget, vtl)
            dn[s] = d
            dt[s] = t
            sv[s] = t / vtl if vtl != 0 else t
            vtx[s] = tx
            vty[s] = ty
            size[s] = abs(d) + t
            top = _max(top, size[s])
        # As in the projection: round-off changes (touching balls at rest) do not count.
        floor = 1e-9 + 1e-6 * top
        count[:] = 0
        nl = 0
        for s in range(na):
            if size[s] > floor:
                live[nl] = s
                nl += 1
                count[aa[s]] += 1
                count[ab[s]] += 1
        if not nl:
            return 0.0
        da[:] = 0.0
        db[:] = 0.0
        change = 0.0
        for q in range(nl):
            s = live[q]
            share = _share(count[aa[s]], count[ab[s]])
            if not bounce:
                aused[s] += dt[s] * share
            # Relative velocity change dv = dvn n - dvt t; each end takes its w/wsum share.
            dvx = (dn[s] * anx[s] - sv[s] * vtx[s]) * share
            dvy = (dn[s] * any_[s] - sv[s] * vty[s]) * share
            da[aa[s], 0] += afi[s] * dvx
            da[aa[s], 1] += afi[s] * dvy
            db[ab[s], 0] += afj[s] * dvx
            db[ab[s], 1] += afj[s] * dvy
            if size[s] > change:
                change = size[s]
        for mm in range(nodes.size):
            if count[mm]:   # others gain exactly 0 (and are not in contact: not filled)
                p = nodes[mm]
                v[p, 0] += da[mm, 0] + db[mm, 0]
                v[p, 1] += da[mm, 1] + db[mm, 1]
        return change

    @_jit
    def _velocity_sweep(v, bounce, v_start, v_pre, bounced, v_th, cp, cact, cnx, cny, e, mu,
                        used, pairs):  # pragma: no cover - compiled
        """``Contacts._velocity_sweep``: the shape contacts, then the particle pairs (the
        active ones, packed in ``pairs``); returns the largest change."""
        change = _shape_sweep(v, bounce, v_start, v_pre, bounced, v_th, cp, cact, cnx, cny,
                              e, mu, used)
        (ai, aj, aa, ab, anx, any_, afi, afj, astuck, aref, aused, pe, pmu, nodes, scratch,
         live, count, da, db) = pairs
        if ai.size:
            change = max(change, _pair_sweep(
                v, bounce, v_th, bounced, ai, aj, aa, ab, anx, any_, afi, afj, astuck, aref,
                aused, pe, pmu, nodes, scratch[0], scratch[1], scratch[2], scratch[3],
                scratch[4], scratch[5], live, count, da, db))
        return change

    @_jit
    def finish(x, x0, v, x_prev, w, r, dx, v_start, position_based, gain, h, v_th, touch,
               sweeps, cp, cg, e, mu, ref, touched, stuck, nrm, spent, kinds, rows, geo,
               pverts, pnorm, pedge, bverts, bnorm, bedge, pi, pj, pa, pb, nodes, reach, pe,
               pmu, ptouched, pstuck):  # pragma: no cover - compiled
        """``Contacts.finish``: the velocity pass, written over ``v`` (and ``x_prev`` for
        position-based integrators; ``gain`` is ``fold_gain / h`` for the others) on the
        contact rows. Returns False when no contact was active (nothing written)."""
        n = x.shape[0]
        touch_f = _as(x, touch)
        C = cp.size
        P = pi.size
        cact = np.zeros(C, np.bool_)
        cnx = np.empty(C)
        cny = np.empty(C)
        active = False
        for c in range(C):
            q = cp[c]
            if touched[c]:          # a hit or a push keeps its own normal
                cnx[c] = nrm[c, 0]
                cny[c] = nrm[c, 1]
                cact[c] = w[q] > 0
            else:
                d, nx, ny = _distance(cg[c], x[q, 0], x[q, 1], ref[c], True, kinds, rows,
                                      geo, pverts, pnorm, pedge, bverts, bnorm, bedge,
                                      x0[q, 0], x0[q, 1])
                cnx[c] = nx
                cny[c] = ny
                cact[c] = d < r[q] + touch_f and w[q] > 0
            active |= cact[c]
        # The pairs in contact, as a compact list with what every sweep reuses.
        ai = np.empty(P, np.int64)
        aj = np.empty(P, np.int64)
        aa = np.empty(P, np.int64)
        ab = np.empty(P, np.int64)
        anx = np.empty(P, x.dtype)
        any_ = np.empty(P, x.dtype)
        afi = np.empty(P, x.dtype)
        afj = np.empty(P, x.dtype)
        astuck = np.empty(P, np.bool_)
        na = 0
        for k in range(P):
            ii = pi[k]
            jj = pj[k]
            ddx = x[jj, 0] - x[ii, 0]
            ddy = x[jj, 1] - x[ii, 1]
            dist = math.sqrt(ddx * ddx + ddy * ddy)
            wsum = w[ii] + w[jj]
            if (ptouched[k] or dist < reach[k] + touch_f) and dist > 0 and wsum > 0:
                ai[na] = ii
                aj[na] = jj
                aa[na] = pa[k]
                ab[na] = pb[k]
                anx[na] = ddx / dist
                any_[na] = ddy / dist
                fi = w[ii] / wsum
                afi[na] = -fi
                afj[na] = fi if w[jj] == w[ii] else w[jj] / wsum    # same operands: same bits
                astuck[na] = pstuck[k]
                na += 1
        if not active and not na:
            return False
        # The particles in contact (pinned ends of pairs included: the sweeps read them);
        # only their rows of the velocity views are ever read, so only they are filled.
        seen = np.zeros(n, np.bool_)
        rowlist = np.empty(C + 2 * na, np.int64)
        nr = 0
        for c in range(C):
            q = cp[c]
            if cact[c] and not seen[q]:
                seen[q] = True
                rowlist[nr] = q
                nr += 1
        for s in range(na):
            for q in (ai[s], aj[s]):
                if not seen[q]:
                    seen[q] = True
                    rowlist[nr] = q
                    nr += 1
        # The two views: v_pos (what the positions say) and v_pre (without dx).
        h_f = _as(x, h)
        v_pos = np.empty_like(x)
        v_pre = np.empty((n, 2))
        v_imp = np.empty((n, 2))
        bounced = np.empty(n, np.bool_)
        top = 0.0
        for t in range(nr):
            q = rowlist[t]
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
                top = _max(top, abs(v_pre[q, 0]))
                top = _max(top, abs(v_pre[q, 1]))
        tol = 1e-9 * (1.0 + top)
        # Each pair's pre-contact normal velocity: _may_bounce's test and _stop's reference.
        aref = np.empty(na)
        for s in range(na):
            ii = ai[s]
            jj = aj[s]
            aref[s] = ((v_pre[jj, 0] - v_pre[ii, 0]) * anx[s]
                       + (v_pre[jj, 1] - v_pre[ii, 1]) * any_[s])
        # _may_bounce: a shape contact with restitution approaching faster than v_th, or
        # a particle pair approaching that fast.
        bounce = False
        for c in range(C):
            q = cp[c]
            if cact[c] and e[c] > 0 and v_start[q, 0] * cnx[c] + v_start[q, 1] * cny[c] < -v_th:
                bounce = True
                break
        if not bounce and pe > 0:
            for s in range(na):
                if aref[s] < -v_th:
                    bounce = True
                    break
        M = nodes.size
        scratch = np.empty((6, na))
        live = np.empty(na, np.int64)
        count = np.zeros(M, np.int64)
        da = np.empty((M, 2))
        db = np.empty((M, 2))
        used = np.zeros(C)
        aused = np.zeros(na)
        pairs = (ai[:na], aj[:na], aa[:na], ab[:na], anx[:na], any_[:na], afi[:na],
                 afj[:na], astuck[:na], aref, aused, pe, pmu, nodes, scratch, live, count,
                 da, db)
        for _ in range(max(sweeps, 4) if bounce else 0):
            if _velocity_sweep(v_imp, True, v_start, v_pre, bounced, v_th, cp, cact, cnx,
                               cny, e, mu, used, pairs) <= tol:
                break
        # The friction the positions already took is in v_pos (its share of it for a
        # velocity integrator's fold): the inelastic sweeps only add the rest.
        g_used = 1.0 / h if position_based else gain
        for c in range(C):
            used[c] = spent[c] * g_used
        for _ in range(max(sweeps, 2)):
            if _velocity_sweep(v_pos, False, v_start, v_pre, bounced, v_th, cp, cact, cnx,
                               cny, e, mu, used, pairs) <= tol:
                break
        for t in range(nr):
            q = rowlist[t]
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

    @_jit
    def frame(x, x_prev, v, a, w, r, v_old, dx, rc, ca, c1s, c2s, h, v_th, iterations,
              sweeps, links, ci, cj, rest, compliance, kind, plan, offsets, inv_h2, lam,
              zero_lam, kinds, rows, geo, nshapes, nwalls, pverts, pnorm, pedge, bverts,
              bnorm, bedge, keys, sids, cell, origin, dims, e_def, mu_def, eps, skin_min,
              touch_min, margin, brute_pairs, max_cells, collide, exclude, valid, pi, pj,
              pa, pb, nodes, reach, x_ref, pskin, new_skin):  # pragma: no cover - compiled
        """A whole frame of ``rc.size`` substeps of a Verlet-family world with contacts
        (and links), gravity its only force: what ``World._substep`` does, substep by
        substep, in one call. The same operations in the same order, so the same bits
        (tested against the substep path), without a dozen Python calls a substep.

        Per substep ``s``: ``v_old = v``; the position step over ``x_prev``
        (``kernels.verlet_step`` with ``c1 = 0``: the velocity "later") and the two
        buffers swap roles; ``begin``; the Verlet list checked (``max_moved2`` against
        half its ``pskin``) and rebuilt when stale (``pair_list`` with ``new_skin``,
        ``x_ref`` a copy of the positions), used if some pair can move (``any_moving``);
        ``lam`` zeroed if ``zero_lam``; ``iterations`` times the links' sweep
        (``links``: one thread) and the contacts' ``project``; ``v += (x - x_prev) c1``
        (``add_scaled_difference``); ``finish`` (position based, ``sweeps``).

        Returns ``swapped`` (the new positions are in ``x_prev``'s array: the caller
        swaps the two) and the Verlet list as it stands: ``valid, pi, pj, pa, pb,
        nodes, reach, x_ref, pskin``.
        """
        n = x.shape[0]
        X = x
        PX = x_prev
        zero = c1s[0] - c1s[0]
        steps = rc.size
        z = np.zeros(0, np.int64)
        zr = np.zeros(0, r.dtype)
        for s in range(steps):
            for k in range(n):
                v_old[k, 0] = v[k, 0]
                v_old[k, 1] = v[k, 1]
            _verlet_step(X, PX, a, rc[s], ca[s], zero, c2s[s], v)
            X, PX = PX, X
            dx[:] = 0.0
            (cp, cg, ce, cmu, ref, touched, nrm, depth, spent, stuck, skin,
             touch) = begin(PX, X, w, r, dx, kinds, rows, geo, nshapes, nwalls, pverts,
                            pnorm, pedge, bverts, bnorm, bedge, keys, sids, cell, origin,
                            dims, e_def, mu_def, eps, skin_min, touch_min, margin,
                            brute_pairs, max_cells)
            use = False
            if collide:
                if not (valid and max_moved2(X, x_ref) < (0.5 * pskin) ** 2):
                    pi, pj, pa, pb, nodes, reach = pair_list(X, r, new_skin, exclude)
                    x_ref = X.copy()
                    pskin = new_skin
                    valid = True
                use = pi.size > 0 and any_moving(pi, pj, w)
            if use:
                qi, qj, qa, qb, qn, qr = pi, pj, pa, pb, nodes, reach
            else:
                qi, qj, qa, qb, qn, qr = z, z, z, z, z, zr
            have = cp.size > 0 or use
            P = qi.size
            pdepth = np.zeros(P)
            ptouched = np.zeros(P, np.bool_)
            pstuck = np.zeros(P, np.bool_)
            if zero_lam:
                lam[:] = 0
            for _ in range(iterations):
                if links:
                    _project_batches(X, w, ci, cj, rest, compliance, kind, plan, offsets,
                                     inv_h2, lam, 2**62)
                if have:
                    project(X, w, PX, dx, r, skin, cp, cg, cmu, ref, depth, touched, stuck,
                            nrm, spent, kinds, rows, geo, pverts, pnorm, pedge, bverts,
                            bnorm, bedge, qi, qj, qa, qb, qn, qr, mu_def, pdepth, ptouched,
                            pstuck)
            _add_scaled_difference(v, X, PX, c1s[s])
            if have:
                finish(X, PX, v, PX, w, r, dx, v_old, True, 0.0, h, v_th, touch, sweeps, cp,
                       cg, ce, cmu, ref, touched, stuck, nrm, spent, kinds, rows, geo,
                       pverts, pnorm, pedge, bverts, bnorm, bedge, qi, qj, qa, qb, qn, qr,
                       e_def, mu_def, ptouched, pstuck)
        return steps % 2 == 1, valid, pi, pj, pa, pb, nodes, reach, x_ref, pskin

    _threads = []

    def launch_threads() -> None:
        """Dispatch the links' sweep (``kernels._project_batches``, ``parallel=True``)
        once from Python before the first :func:`frame`. ``frame`` is a serial kernel
        that calls it: loaded from numba's disk cache into a process where no parallel
        kernel has run yet, the threading layer's entry points it calls are unresolved
        and the call jumps to address 0 (a segfault on the second run, the first that
        loads the cache). Dispatching a parallel kernel resolves them."""
        if not _threads:
            z = np.zeros(0, np.int64)
            _project_batches(np.zeros((0, 2)), np.zeros(0), z, z, np.zeros(0), np.zeros(0),
                             np.zeros(0, np.int8), np.zeros((0, 6), np.int64),
                             np.zeros(1, np.int64), 1.0, np.zeros(0), 2**62)
            _threads.append(True)
else:  # pragma: no cover
    begin = pair_list = max_moved2 = any_moving = project = finish = frame = None
    launch_threads = None
