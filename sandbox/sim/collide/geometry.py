"""Geometry: distances and sweeps of points and discs against static shapes.

Each numpy reference, vectorised over pairs (one row per (point, shape)), sits beside its
compiled twin (``@jit``, one point against one row of the shape table), which repeats
its operations in its order and in its float types, so both give the same bits
(``tests/test_contact_kernels.py``). Conventions follow pymunk's ``Shape.point_query`` and
``segment_query`` (``tests/test_pymunk_crosscheck.py``):

``distance(p) -> d, q, n``
    signed distance (negative inside; a segment's thickness is part of its surface), the
    closest point on the surface and the unit normal, the gradient of ``d``.
``contact(p, p0) -> d, q, n``
    the distance as the solver sees it for a point that started its substep at ``p0``:
    polygons and boxes push out through the face the path crossed (:func:`_face_contact`),
    segments keep the side the point started on (``shapes.Segments.contact``).
``sweep(p0, p1, r) -> hit, t, n``
    a disc of radius ``r`` from ``p0`` to ``p1``: whether and when (``t`` in [0, 1]) it
    first touches the shape, and the normal there (a ray against the shape grown by
    ``r``: corners and segment ends are rounded). A start inside is no hit.
"""

from __future__ import annotations

import math

import numpy as np

from .jit import _above, _better, _clip, _max, _min, _sign, jit, jit_borrow, jit_inline

_UP = np.array([0.0, 1.0])
INF = math.inf

#: Shape kinds in the compiled kernels' table (the order of ``shapes.SHAPE_SETS``, then
#: the bounds walls).
CIRCLE, SEGMENT, POLYGON, BOX, WALL = 0, 1, 2, 3, 4
#: Columns of the shape table ``geo (G, 11)``: the geometry (circle: centre, radius;
#: segment: a, b, thickness; box: lo, hi; wall: normal, offset), restitution and friction
#: (NaN: the world's), the shape's bounding box for the broad phase.
E, MU, LO_X, LO_Y, HI_X, HI_Y = 5, 6, 7, 8, 9, 10


# ---------------------------------------------------------------------- helpers

def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a . b`` over the last axis (length 2), as ``a0 b0 + a1 b1``. Written out rather
    than ``np.vecdot``, whose BLAS loop may fuse a multiply-add (its result then depends on
    the CPU and on the arrays' strides): this order is the one the compiled kernels of
    this package repeat, so the two backends agree bit for bit."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1]


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _safe(x: np.ndarray) -> np.ndarray:
    """``x`` with zeros replaced by 1, for divisions whose zero case is masked anyway."""
    return np.where(x != 0, x, 1.0)

# ---------------------------------------------------------------- point queries

def circle_distance(p, c, R):
    """Points ``p (m, 2)`` against discs (centre ``c (m, 2)``, radius ``R (m,)``).

    ``d = |p - c| - R``, ``n = (p - c)/|p - c|`` (up when ``p`` is the centre, as pymunk),
    ``q = c + R n``.
    """
    delta = p - c
    L = np.sqrt(_dot(delta, delta))
    n = np.where((L > 0)[:, None], delta / _safe(L)[:, None], _UP)
    return L - R, c + R[:, None] * n, n


@jit
def _circle(px, py, cx, cy, R):  # pragma: no cover - compiled
    """``circle_distance``."""
    dx = px - cx
    dy = py - cy
    L = math.sqrt(dx * dx + dy * dy)
    if L > 0:
        return L - R, dx / L, dy / L
    return L - R, 0.0, 1.0


def _segment_closest(p, a, b):
    """Closest point ``c`` to ``p`` on segment ``a b`` and its parameter ``t`` in [0, 1]."""
    ab = b - a
    L2 = _dot(ab, ab)
    t = np.clip(_dot(p - a, ab) / _safe(L2), 0.0, 1.0) * (L2 > 0)
    return a + t[:, None] * ab, t


def _segment_normal(a, b):
    """pymunk's ``Segment.normal``: ``(b - a)`` turned clockwise, unit; up if ``a == b``."""
    ab = b - a
    L = np.sqrt(_dot(ab, ab))
    n = np.stack([ab[:, 1], -ab[:, 0]], axis=1) / _safe(L)[:, None]
    return np.where((L > 0)[:, None], n, _UP)


@jit
def _segment_normal_k(abx, aby):  # pragma: no cover - compiled
    """``_segment_normal`` from ``ab = b - a``."""
    L = math.sqrt(abx * abx + aby * aby)
    if L > 0:
        return aby / L, -abx / L
    return 0.0, 1.0


def capsule_distance(p, a, b, r):
    """Points against capsules: segments ``a b (m, 2)`` with half-width ``r (m,)``.

    With ``c`` the closest point of the segment, ``d = |p - c| - r``, ``n = (p - c)/|p - c|``
    and ``q = c + r n``. On the segment itself (``p == c``) the normal is the segment's
    normal, as pymunk's.
    """
    return _capsule(p, a, b, r)[:3]


def _capsule(p, a, b, r):
    """:func:`capsule_distance` plus the closest point ``c`` on the segment and its ``t``.

    Beside the segment (``0 < t < 1``) the normal is the segment's own, turned towards
    ``p``: ``(p - c)/|p - c|`` is the same direction, but a point a nanometre off a thin
    segment would give it only to round-off over a nanometre (1e-7), enough to tilt a
    resting contact's plane."""
    c, t = _segment_closest(p, a, b)
    delta = p - c
    L = np.sqrt(_dot(delta, delta))
    ok = L > 0
    n = delta / _safe(L)[:, None]
    cr = _cross(b - a, p - a)
    side = ok & (t > 0) & (t < 1) & (cr != 0)
    if side.any() or not ok.all():
        sn = _segment_normal(a, b)
        n = np.where(side[:, None], -np.sign(cr)[:, None] * sn, n)
        n = np.where(ok[:, None], n, sn)
    return L - r, c + r[:, None] * n, n, c, t


@jit
def _capsule_k(px, py, ax, ay, bx, by, r):  # pragma: no cover - compiled
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
    nx, ny = _segment_normal_k(abx, aby)
    if L > 0:                       # beside the segment: its normal, towards p
        sg = -_sign(cr)
        return L - r, sg * nx, sg * ny, t
    return L - r, nx, ny, t


@jit
def _side(px, py, ax, ay, bx, by):  # pragma: no cover - compiled
    """``Segments._side``: the sign of ``(b - a) x (p - a)``."""
    return _sign((bx - ax) * (py - ay) - (by - ay) * (px - ax))


@jit
def _segment_contact(px, py, ax, ay, bx, by, r, ref):  # pragma: no cover - compiled
    """``Segments.contact``: a point that crossed the line since the start of the
    substep (``ref``, its side then) is inside, its normal pointing back."""
    d, nx, ny, t = _capsule_k(px, py, ax, ay, bx, by, r)
    side = _side(px, py, ax, ay, bx, by)
    if t > 0 and t < 1 and side != 0 and side * ref <= 0:
        dist = d + r
        return -dist - r, -nx, -ny
    return d, nx, ny


def polygon_distance(p, verts, normals, edges=None):
    """Points ``p (m, 2)`` against convex polygons ``verts (m, K, 2)``, counter-clockwise,
    padded after the last vertex with copies of the first (zero-length edges whose
    ``normals (m, K, 2)`` are zero).

    The distance to the boundary is the smallest distance to an edge; the point is outside
    when it lies on the outer side of some edge's line, and then ``d`` is that distance,
    else minus it (the exact signed distance of a convex polygon, as Chipmunk computes it).
    ``n = (p - q)/d`` where ``q`` is a vertex; where it lies inside an edge (and on the
    boundary itself) the normal of that edge, the same direction without the round-off
    of a short ``p - q``. ``edges`` (each vertex to the next) may be given precomputed.
    """
    v0 = verts
    e = np.roll(verts, -1, axis=1) - v0 if edges is None else edges
    rel = p[:, None, :] - v0
    L2 = _dot(e, e)
    t = np.clip(_dot(rel, e) / _safe(L2), 0.0, 1.0) * (L2 > 0)
    c = v0 + t[..., None] * e
    gap = p[:, None, :] - c
    dd = _dot(gap, gap)
    k = np.argmin(dd, axis=1)
    rows = np.arange(p.shape[0])
    q = c[rows, k]
    dist = np.sqrt(dd[rows, k])
    outside = (_dot(normals, rel) > 0).any(axis=1)
    d = np.where(outside, dist, -dist)
    tk = t[rows, k]
    corner = (dist > 0) & ((tk <= 0) | (tk >= 1))
    n = np.where(corner[:, None], (p - q) / _safe(d)[:, None], normals[rows, k])
    return d, q, n


@jit_borrow
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


def box_distance(p, lo, hi):
    """Points against axis-aligned boxes ``[lo, hi]`` (closed form of the polygon case).

    Outside: ``q`` is ``p`` clamped into the box. Inside: the nearest face wins (x on a tie),
    ``d`` is minus the distance to it and ``n`` its outward axis.
    """
    half = 0.5 * (hi - lo)
    rel = p - 0.5 * (hi + lo)
    a = np.abs(rel) - half                      # per axis: > 0 outside that slab
    outside = (a > 0).any(axis=1)
    q_out = np.clip(p, lo, hi)
    gap = p - q_out
    dist = np.sqrt(_dot(gap, gap))
    axis = (a[:, 1] > a[:, 0]).astype(np.intp)  # the face nearest to an inside point
    rows = np.arange(p.shape[0])
    sgn = np.where(rel[rows, axis] < 0, -1.0, 1.0)
    n_in = np.zeros_like(p, dtype=float)
    n_in[rows, axis] = sgn
    q_in = np.array(p, dtype=float)
    q_in[rows, axis] = np.where(sgn > 0, hi[rows, axis], lo[rows, axis])
    d = np.where(outside, dist, a[rows, axis])
    n = np.where((outside & (dist > 0))[:, None], gap / _safe(dist)[:, None], n_in)
    q = np.where(outside[:, None], q_out, q_in)
    return d, q, n


@jit
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


def _face_contact(p, p0, verts, normals, d, q, n):
    """Signed distance, closest point and normal of points ``p`` that came from ``p0``
    (this substep's start) to convex polygons, given their plain ``distance`` ``d, q,
    n``: the face to push out through is the one the path crossed, not the nearest.

    A thin plate's nearest face past its middle is the far one: a point pushed there (by
    a constraint, or a step longer than the plate is thick) would come out on the wrong
    side. So when the path ``p0 -> p`` enters the polygon (clipped against every face's
    half-plane, as Liang and Barsky clip a segment to a convex window) the entry face
    wins: ``d = n_k . (p - v_k)`` (negative: below it) and its normal, even when ``p`` is
    already out through the far side. A path that starts inside keeps the face nearest
    to its start (the largest ``n_k . (p0 - v_k)``) while ``p`` is inside. Otherwise
    (``p`` outside and the path never inside) the plain distance stands, which is what
    gives a particle with a radius its rounded corners.
    """
    s0 = _dot(normals, p0[:, None, :] - verts)
    s1 = _dot(normals, p[:, None, :] - verts)
    valid = _dot(normals, normals) > 0
    out0 = (s0 > 0) & valid
    enter = out0 & (s1 < 0)
    leave = ~out0 & valid & (s1 > 0)
    t_in = np.where(enter, s0 / np.where(enter, s0 - s1, 1.0), -np.inf)
    t_out = np.where(leave, s0 / np.where(leave, s0 - s1, 1.0), np.inf)
    miss = (out0 & ~enter).any(axis=1)          # wholly outside one face's half-plane
    k_in = np.argmax(t_in, axis=1)
    rows = np.arange(p.shape[0])
    crossed = enter.any(axis=1) & ~miss & (t_in[rows, k_in] < t_out.min(axis=1))
    k0 = np.argmax(np.where(valid, s0, -np.inf), axis=1)
    from_start = ~out0.any(axis=1) & (d < 0)
    use = crossed | from_start
    if not use.any():
        return d, q, n
    k = np.where(crossed, k_in, k0)
    ds = s1[rows, k]
    ns = normals[rows, k]
    return (np.where(use, ds, d), np.where(use[:, None], p - ds[:, None] * ns, q),
            np.where(use[:, None], ns, n))


@jit_borrow
def _face_contact_k(px, py, p0x, p0y, verts, normals, s, d, nx,
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


def polygon_contact(p, p0, verts, normals, edges=None):
    """:func:`polygon_distance` for a point that came from ``p0`` (see
    :func:`_face_contact`)."""
    d, q, n = polygon_distance(p, verts, normals, edges)
    return _face_contact(p, p0, verts, normals, d, q, n)


def box_contact(p, p0, lo, hi):
    """:func:`box_distance` for a point that came from ``p0`` (see :func:`_face_contact`)."""
    d, q, n = box_distance(p, lo, hi)
    verts, normals = box_polygon(lo, hi)
    return _face_contact(p, p0, verts, normals, d, q, n)


def box_polygon(lo, hi):
    """The boxes ``[lo, hi] (m, 2)`` as counter-clockwise polygons ``(m, 4, 2)`` and normals."""
    verts = np.stack([lo, np.stack([hi[:, 0], lo[:, 1]], 1), hi,
                      np.stack([lo[:, 0], hi[:, 1]], 1)], axis=1)
    normals = np.broadcast_to(np.array([[0.0, -1.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]),
                              verts.shape)
    return verts, normals


@jit_borrow
def _distance(g, px, py, ref, contact, shapes, p0x, p0y):  # pragma: no cover - compiled
    """Point ``p`` against row ``g`` of the shape table ``shapes``
    (:class:`.records.Shapes`): ``ShapeSet.distance``, or ``ShapeSet.contact`` when
    ``contact`` for a point that started the substep at ``p0`` (segments then keep
    the side ``ref``, polygons and boxes push out through the face the path
    crossed)."""
    kinds, rows, geo = shapes.kinds, shapes.rows, shapes.geo
    pverts, pnorm, bverts, bnorm = shapes.pverts, shapes.pnorm, shapes.bverts, shapes.bnorm
    pedge = shapes.pedge
    kind = kinds[g]
    if kind == CIRCLE:
        return _circle(px, py, geo[g, 0], geo[g, 1], geo[g, 2])
    if kind == SEGMENT:
        if contact:
            return _segment_contact(px, py, geo[g, 0], geo[g, 1], geo[g, 2], geo[g, 3],
                                    geo[g, 4], ref)
        d, nx, ny, _ = _capsule_k(px, py, geo[g, 0], geo[g, 1], geo[g, 2], geo[g, 3],
                                geo[g, 4])
        return d, nx, ny
    if kind == POLYGON:
        d, nx, ny = _polygon(px, py, pverts, pnorm, pedge, rows[g])
        if contact:
            return _face_contact_k(px, py, p0x, p0y, pverts, pnorm, rows[g], d, nx, ny)
        return d, nx, ny
    if kind == BOX:                     # its inner box and corner radius (Boxes.inner)
        d, nx, ny = _box(px, py, geo[g, 0], geo[g, 1], geo[g, 2], geo[g, 3])
        if contact:
            d, nx, ny = _face_contact_k(px, py, p0x, p0y, bverts, bnorm, rows[g], d, nx, ny)
        return d - geo[g, 4], nx, ny
    # Walls.distance: n . p - offset
    return (geo[g, 0] * px + geo[g, 1] * py) - geo[g, 2], geo[g, 0], geo[g, 1]


@jit_inline
def _contact_distance(g, px, py, ref, shapes, p0x, p0y):  # pragma: no cover - compiled
    """``_distance(..., contact=True)`` with the walls' case where it is called: every
    bounded world's contacts are mostly walls, and a call of ``_distance`` (ten arrays
    passed) cost more than the wall's three loads. Inlined in ``project`` and
    ``finish_into`` (``jit_borrow``: with the reference counts gone too, the soft blob's
    projection 1.9 -> 0.5 us a substep). The same expression: the same bits."""
    geo = shapes.geo
    if shapes.kinds[g] == WALL:
        return (geo[g, 0] * px + geo[g, 1] * py) - geo[g, 2], geo[g, 0], geo[g, 1]
    return _distance(g, px, py, ref, np.bool_(True), shapes, p0x, p0y)

# ----------------------------------------------------------------------- sweeps

def sweep_circle(p0, p1, c, R):
    """First touch of the path ``p0 -> p1`` with the circles ``|x - c| = R`` (``R`` already
    includes the moving disc's radius). Returns ``hit (m,)``, ``t (m,)``.

    ``|f + t d|^2 = R^2`` with ``f = p0 - c``, ``d = p1 - p0``: ``A t^2 + 2 B t + C = 0``,
    ``A = d.d``, ``B = f.d``, ``C = f.f - R^2``. The entry root is written
    ``t = C / (-B + sqrt(B^2 - A C))``, which does not cancel when ``A`` is small. A start
    inside (``C < 0``) is no hit, as in pymunk: projection handles penetration.
    """
    f = p0 - c
    d = p1 - p0
    A = _dot(d, d)
    B = _dot(f, d)
    C = _dot(f, f) - R * R
    disc = B * B - A * C
    hit = (C >= 0) & (B < 0) & (disc >= 0) & (A > 0)
    t = C / _safe(np.where(hit, -B + np.sqrt(np.maximum(disc, 0.0)), 1.0))
    hit &= t <= 1.0
    return hit, np.where(hit, t, np.inf)


@jit
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


def _toi_normal(p0, d, t, c):
    """Unit normal at the time of impact ``t`` on a circle centred at ``c``; against a
    circle of radius 0 (a point) it is minus the direction of motion."""
    x = p0 + np.where(np.isfinite(t), t, 0.0)[:, None] * d - c
    L = np.sqrt(_dot(x, x))
    back = -d / _safe(np.sqrt(_dot(d, d)))[:, None]
    return np.where((L > 0)[:, None], x / _safe(L)[:, None], back)


@jit
def _toi_normal_k(p0x, p0y, dx, dy, t, cx, cy):  # pragma: no cover - compiled
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


def _sweep_faces(p0, p1, v0, e, normals, rs):
    """Paths against the flat faces of shapes grown by ``rs``: each edge ``v0 -> v0 + e``
    (``(m, K, 2)``) moved out by ``rs`` along its outward normal. A face is hit when the
    path starts on or beyond its line and ends inside it, crossing within the edge's
    extent. Returns ``t (m, K)`` (inf where missed)."""
    d0 = _dot(normals, p0[:, None, :] - v0) - rs[:, None]
    d1 = _dot(normals, p1[:, None, :] - v0) - rs[:, None]
    cross = (d0 >= 0) & (d1 < 0)
    t = d0 / _safe(np.where(cross, d0 - d1, 1.0))
    x = p0[:, None, :] + t[..., None] * (p1 - p0)[:, None, :]
    w = _dot(x - v0, e)
    cross &= (w >= 0) & (w <= _dot(e, e)) & (_dot(normals, normals) > 0)
    return np.where(cross, t, np.inf)


@jit
def _sweep_face(path, vx, vy, ex, ey, nx, ny, rs):  # pragma: no cover - compiled
    """``_sweep_faces`` for one face, the edge ``v -> v + e`` with outward normal ``n``,
    of the path ``(p0x, p0y, p1x, p1y)``: the time of impact, inf when missed."""
    p0x, p0y, p1x, p1y = path
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


def _pick(ts: list[np.ndarray], ns: list[np.ndarray]):
    """The earliest of several candidate hits: ``ts`` each ``(m,)``, ``ns`` each ``(m, 2)``."""
    T = np.stack(ts, axis=1)
    k = np.argmin(T, axis=1)
    rows = np.arange(T.shape[0])
    t = T[rows, k]
    return np.isfinite(t), t, np.stack(ns, axis=1)[rows, k]


def sweep_capsule(p0, p1, a, b, rs):
    """First touch of the paths with capsules ``a b`` of half-width ``rs`` (shape thickness
    plus the disc's radius): the two flat sides and the two end discs, earliest wins.

    Every candidate lies in the closed capsule, so none comes before the true entry, and
    the entry itself is on a side or on an end's arc, where it is found. A start inside the
    band between the sides' lines can only enter through an end: the side test needs the
    start on or beyond the side's line.
    """
    ab = b - a
    nrm = _segment_normal(a, b) * (_dot(ab, ab) > 0)[:, None]   # a point has no sides
    normals = np.stack([nrm, -nrm], axis=1)
    faces = _sweep_faces(p0, p1, np.stack([a, a], 1), np.stack([ab, ab], 1), normals, rs)
    k = np.argmin(faces, axis=1)
    rows = np.arange(p0.shape[0])
    d = p1 - p0
    _, t_a = sweep_circle(p0, p1, a, rs)
    _, t_b = sweep_circle(p0, p1, b, rs)
    return _pick([faces[rows, k], t_a, t_b],
                 [normals[rows, k], _toi_normal(p0, d, t_a, a), _toi_normal(p0, d, t_b, b)])


@jit
def _sweep_capsule(p0x, p0y, p1x, p1y, ax, ay, bx, by,
                   rs):  # pragma: no cover - compiled
    """``sweep_capsule``: ``(t, nx, ny)``, the sides first, then the end discs."""
    abx = bx - ax
    aby = by - ay
    gate = 1.0 if abx * abx + aby * aby > 0 else 0.0   # a point has no sides
    nx, ny = _segment_normal_k(abx, aby)
    nx = nx * gate
    ny = ny * gate
    path = (p0x, p0y, p1x, p1y)
    t = _sweep_face(path, ax, ay, abx, aby, nx, ny, rs)
    t2 = _sweep_face(path, ax, ay, abx, aby, -nx, -ny, rs)
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
        fx, fy = _toi_normal_k(p0x, p0y, dx, dy, ta, ax, ay)
    elif pick == 2:
        fx, fy = _toi_normal_k(p0x, p0y, dx, dy, tb, bx, by)
    return t, fx, fy


def sweep_polygon(p0, p1, verts, normals, rs, edges=None):
    """First touch of the paths with convex polygons (padded as in :func:`polygon_distance`)
    grown by ``rs``: the moved-out faces and, when ``rs > 0``, the discs at the vertices."""
    e = np.roll(verts, -1, axis=1) - verts if edges is None else edges
    faces = _sweep_faces(p0, p1, verts, e, normals, rs)
    k = np.argmin(faces, axis=1)
    rows = np.arange(p0.shape[0])
    ts, ns = [faces[rows, k]], [normals[rows, k]]
    if np.any(rs > 0):
        m, K = verts.shape[:2]
        q0 = np.repeat(p0, K, axis=0)
        q1 = np.repeat(p1, K, axis=0)
        R = np.repeat(rs, K)
        c = verts.reshape(-1, 2)
        _, tv = sweep_circle(q0, q1, c, R)
        tv = np.where(np.repeat(rs > 0, K), tv, np.inf).reshape(m, K)
        kv = np.argmin(tv, axis=1)
        t_v = tv[rows, kv]
        ts.append(t_v)
        ns.append(_toi_normal(p0, p1 - p0, t_v, verts[rows, kv]))
    return _pick(ts, ns)


@jit_borrow
def _sweep_polygon(p0x, p0y, p1x, p1y, verts, normals, edges, s,
                   rs):  # pragma: no cover - compiled
    """``sweep_polygon`` for polygon ``s`` of ``verts, normals, edges (k, K, 2)``:
    ``(t, nx, ny)``."""
    K = verts.shape[1]
    tf = INF
    kf = 0
    path = (p0x, p0y, p1x, p1y)
    for k in range(K):
        t = _sweep_face(path, verts[s, k, 0], verts[s, k, 1], edges[s, k, 0],
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
            nx, ny = _toi_normal_k(p0x, p0y, dx, dy, tv, verts[s, kv, 0], verts[s, kv, 1])
    return tf, nx, ny


@jit_borrow
def _sweep(g, p0x, p0y, p1x, p1y, r, shapes):  # pragma: no cover - compiled
    """``ShapeSet.sweep`` of a disc of radius ``r`` against row ``g`` of the table
    ``shapes`` (:class:`.records.Shapes`)."""
    kinds, rows, geo = shapes.kinds, shapes.rows, shapes.geo
    pverts, pnorm, pedge = shapes.pverts, shapes.pnorm, shapes.pedge
    bverts, bnorm, bedge = shapes.bverts, shapes.bnorm, shapes.bedge
    kind = kinds[g]
    if kind == CIRCLE:
        dx = p1x - p0x
        dy = p1y - p0y
        R = geo[g, 2] + r
        t = _sweep_circle(p0x, p0y, dx, dy, geo[g, 0], geo[g, 1], R * R)
        nx, ny = _toi_normal_k(p0x, p0y, dx, dy, t, geo[g, 0], geo[g, 1])
        return t, nx, ny
    if kind == SEGMENT:
        return _sweep_capsule(p0x, p0y, p1x, p1y, geo[g, 0], geo[g, 1], geo[g, 2],
                              geo[g, 3], geo[g, 4] + r)
    if kind == POLYGON:
        return _sweep_polygon(p0x, p0y, p1x, p1y, pverts, pnorm, pedge, rows[g], r)
    # BOX: its inner box's box_polygon row of the table, for a disc its radius larger
    return _sweep_polygon(p0x, p0y, p1x, p1y, bverts, bnorm, bedge, rows[g], r + geo[g, 4])
