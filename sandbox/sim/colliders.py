"""Static colliders and contacts: shapes as arrays, signed distances, sweeps, projection,
particle-particle contacts and the contact velocity pass.

Shapes are static and held as a structure of arrays per type (:class:`Circles`,
:class:`Segments` (capsules), :class:`Polygons` (convex), :class:`Boxes` (axis aligned)),
collected in :class:`Colliders`; the world's ``bounds`` box is four half-planes
(:class:`Walls`). Conventions follow pymunk's ``Shape.point_query`` so the two can be
compared number for number:

``distance(p, s) -> d, q, n``
    signed distance ``d (m,)`` from points ``p (m, 2)`` to the surface of shapes ``s (m,)``
    (negative inside; a segment's thickness is part of its surface), the closest point
    ``q (m, 2)`` on that surface and the unit normal ``n (m, 2)``, the gradient of ``d``:
    it points out of the shape, towards ``p`` when ``p`` is outside.
``sweep(p0, p1, s, r) -> hit, t, n``
    a disc of radius ``r`` moving from ``p0`` to ``p1`` (a ray against the shape grown by
    ``r``): whether it touches the shape, the time of impact ``t`` in ``[0, 1]`` and the
    normal there; the contact point on the shape's surface is ``p0 + t (p1 - p0) - r n``
    (pymunk's ``segment_query``). A start inside the grown shape is no hit.

One substep of contacts (``World._substep`` drives it; Müller et al., "Detailed Rigid
Body Simulation with Extended Position Based Dynamics", 2020, sec. 3.5-3.6, and Macklin
et al., "Small Steps in Physics Simulation", 2019)::

    Colliders.begin()      broad phase: candidate (particle, shape) pairs whose AABBs overlap
                           (the particle's box covers its path this substep, grown by its
                           radius and a margin) -- a uniform grid over the shapes' boxes;
                           particle pairs from a uniform grid of particles (Verlet list)
                           continuous detection, a bounded time-of-impact loop: the path
                           stops at its first hit on the near side and the rest slides
                           along the hit face, swept again against every shape, never
                           into an earlier hit's plane (a wedge stops it); a particle
                           that starts on or inside a shape cannot move into the face
                           it is on, however thin the shape
    Contacts.project()     in every constraint iteration: particle pairs, then shapes, then
                           walls; a penetrating particle is moved out along the normal of
                           the face its path crossed, and friction limits its tangential
                           displacement to mu times the normal correction (static below
                           it, kinetic above: Coulomb friction in position space)
    Contacts.finish()      after the integrator folded the corrections into its velocity:
                           the velocity pass over this substep's contacts (restitution
                           along each hit's own normal, the rest of the Coulomb friction
                           the positions did not take), written back as v or as x_prev

Pinned (and grabbed) particles have ``inv_mass == 0``: every correction is scaled by the
inverse mass, so nothing here moves them.

Two backends (``Colliders.backend``): the numpy code here, vectorised over the contacts, is
the reference; :mod:`contact_kernels` compiles each stage above with numba into one call per
substep (``begin``, ``project``, ``finish``, the pair list), repeating the reference's
operations in its order, so both give the same numbers bit for bit. "auto" (the default)
runs the compiled one when numba is installed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import numpy as np

from . import contact_kernels as ck

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

#: Hits per particle and substep in the time-of-impact loop of ``Contacts.sweep``: a
#: ball in a corner or a wedge needs two (the second stops it), a third is rare.
MAX_HITS = ck.MAX_HITS
#: A slide along a new contact plane may enter an earlier plane by this fraction of its
#: length (two faces in one line, round-off) before it counts as a crease that stops it.
DIR_TOL = ck.DIR_TOL

#: Up to this many (particle, shape) pairs the broad phase tests them all in one numpy
#: comparison, cheaper than the grid's bookkeeping; both give the same pairs (a test).
BRUTE_PAIRS = 20_000

_UP = np.array([0.0, 1.0])


# ----------------------------------------------------------------------------- helpers

def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a . b`` over the last axis (length 2), as ``a0 b0 + a1 b1``. Written out rather
    than ``np.vecdot``, whose BLAS loop may fuse a multiply-add (its result then depends on
    the CPU and on the arrays' strides): this order is the one the compiled kernels of
    :mod:`contact_kernels` repeat, so the two backends agree bit for bit."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1]


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _safe(x: np.ndarray) -> np.ndarray:
    """``x`` with zeros replaced by 1, for divisions whose zero case is masked anyway."""
    return np.where(x != 0, x, 1.0)


def _first_per_particle(pi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Indices of the pair with the smallest ``t`` for each distinct particle in ``pi``."""
    order = np.lexsort((t, pi))
    sp = pi[order]
    first = np.ones(sp.size, bool)
    first[1:] = sp[1:] != sp[:-1]
    return order[first]


def rank_batches(pi: np.ndarray) -> list[np.ndarray]:
    """Split pairs into batches in which no particle repeats: batch ``k`` holds the
    ``k``-th contact of every particle. A batch can then be solved at once with fancy
    indexing (no two writes to one row), the batches one after another (Gauss-Seidel)."""
    if pi.size == 0:
        return []
    if (pi[1:] > pi[:-1]).all():           # sorted and distinct: one contact per particle
        return [np.arange(pi.size)]
    order = np.argsort(pi, kind="stable")
    sp = pi[order]
    starts = np.flatnonzero(np.r_[True, sp[1:] != sp[:-1]])
    rank = np.arange(sp.size) - np.repeat(starts, np.diff(np.r_[starts, sp.size]))
    o2 = np.argsort(rank, kind="stable")
    cuts = np.flatnonzero(np.diff(rank[o2])) + 1
    return np.split(order[o2], cuts)


# ----------------------------------------------------------------------------- geometry
# Pure functions, vectorised over pairs: every argument has one row per (point, shape).

def circle_distance(p, c, R):
    """Points ``p (m, 2)`` against discs (centre ``c (m, 2)``, radius ``R (m,)``).

    ``d = |p - c| - R``, ``n = (p - c)/|p - c|`` (up when ``p`` is the centre, as pymunk),
    ``q = c + R n``.
    """
    delta = p - c
    L = np.sqrt(_dot(delta, delta))
    n = np.where((L > 0)[:, None], delta / _safe(L)[:, None], _UP)
    return L - R, c + R[:, None] * n, n


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


def _toi_normal(p0, d, t, c):
    """Unit normal at the time of impact ``t`` on a circle centred at ``c``; against a
    circle of radius 0 (a point) it is minus the direction of motion."""
    x = p0 + np.where(np.isfinite(t), t, 0.0)[:, None] * d - c
    L = np.sqrt(_dot(x, x))
    back = -d / _safe(np.sqrt(_dot(d, d)))[:, None]
    return np.where((L > 0)[:, None], x / _safe(L)[:, None], back)


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


# ----------------------------------------------------------------------------- shape sets

def _point(v, what: str) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if a.shape != (2,) or not np.isfinite(a).all():
        raise ValueError(f"{what}: expected a finite point [x, y], got {v!r}")
    return a


def _number(v, what: str, low: float = -math.inf, strict: bool = False) -> float:
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{what}: expected a number, got {v!r}") from None
    if not math.isfinite(x) or x < low or (strict and x == low):
        raise ValueError(f"{what}: expected a finite number {'>' if strict else '>='} {low}, "
                         f"got {v!r}")
    return x


def _material(restitution, friction) -> tuple[float, float]:
    """Per-shape restitution and friction; NaN stores "the world's default"."""
    e = math.nan if restitution is None else _number(restitution, "restitution", 0.0)
    mu = math.nan if friction is None else _number(friction, "friction", 0.0)
    if e > 1.0:
        raise ValueError(f"restitution: expected a number in 0..1, got {restitution!r}")
    return e, mu


def _opt(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


@dataclass
class ShapeSet:
    """Static shapes of one type as a structure of arrays.

    Subclasses name their geometry arrays in ``_ARRAYS`` (name -> trailing shape) and give
    ``_parse`` (fields -> one row), ``spec`` (row -> the level file's dict), ``aabb``,
    ``distance`` and ``sweep``. ``e`` and ``mu (k,)`` are restitution and friction, NaN
    where the world's default applies.
    """

    kind: ClassVar[str]
    _ARRAYS: ClassVar[dict[str, tuple[int, ...]]]
    e: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mu: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self):
        for name, shape in self._ARRAYS.items():
            if getattr(self, name, None) is None:
                setattr(self, name, np.zeros((0, *shape)))

    def __len__(self) -> int:
        return self.e.size

    def add(self, restitution=None, friction=None, **geometry) -> int:
        """Append one shape (``ValueError`` naming the bad field); returns its row."""
        row = self._parse(**geometry)
        e, mu = _material(restitution, friction)
        self._append(row)
        self.e = np.append(self.e, e)
        self.mu = np.append(self.mu, mu)
        return len(self) - 1

    def _append(self, row: dict[str, np.ndarray]) -> None:
        for name, value in row.items():
            setattr(self, name, np.concatenate([getattr(self, name), value[None]]))

    def spec(self, k: int) -> dict:
        out = {"type": self.kind, **self._spec(k)}
        out["restitution"], out["friction"] = _opt(self.e[k]), _opt(self.mu[k])
        return out

    def reference(self, x0: np.ndarray, s: np.ndarray) -> np.ndarray | None:
        """Per-pair data taken at the start of the substep (segments: the side)."""
        return None

    def contact(self, x, s, ref, x0):
        """``distance`` as the solver sees it for points ``x`` that started this substep
        at ``x0``: segments keep a particle on its side, polygons and boxes push it out
        through the face its path crossed (:func:`_face_contact`)."""
        return self.distance(x, s)

    def _parse(self, **geometry) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _spec(self, k: int) -> dict:
        raise NotImplementedError

    def aabb(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def distance(self, p, s):
        raise NotImplementedError

    def sweep(self, p0, p1, s, r):
        raise NotImplementedError


@dataclass
class Circles(ShapeSet):
    """Static discs: ``center (k, 2)``, ``radius (k,)`` m."""

    kind: ClassVar[str] = "circle"
    _ARRAYS: ClassVar = {"center": (2,), "radius": ()}
    center: np.ndarray | None = None
    radius: np.ndarray | None = None

    def _parse(self, center, radius):
        return {"center": _point(center, "center"),
                "radius": np.array(_number(radius, "radius", 0.0, strict=True))}

    def _spec(self, k):
        return {"center": self.center[k].tolist(), "radius": float(self.radius[k])}

    def aabb(self):
        r = self.radius[:, None]
        return self.center - r, self.center + r

    def distance(self, p, s):
        return circle_distance(p, self.center[s], self.radius[s])

    def sweep(self, p0, p1, s, r):
        c = self.center[s]
        hit, t = sweep_circle(p0, p1, c, self.radius[s] + r)
        return hit, t, _toi_normal(p0, p1 - p0, t, c)


@dataclass
class Segments(ShapeSet):
    """Static segments ``a b (k, 2)`` with a half-width ``thickness (k,)`` m: capsules.

    A thin segment has no inside to speak of, so the solver keeps a particle on the side
    it started the substep on: if the point nearest to it is inside the segment (not an
    end) and it is now on the other side of the line, it has crossed (pushed through by a
    constraint, say) and its distance counts as negative, the normal pointing back.
    """

    kind: ClassVar[str] = "segment"
    _ARRAYS: ClassVar = {"a": (2,), "b": (2,), "thickness": ()}
    a: np.ndarray | None = None
    b: np.ndarray | None = None
    thickness: np.ndarray | None = None

    def _parse(self, a, b, thickness=0.0):
        return {"a": _point(a, "a"), "b": _point(b, "b"),
                "thickness": np.array(_number(thickness, "thickness", 0.0))}

    def _spec(self, k):
        return {"a": self.a[k].tolist(), "b": self.b[k].tolist(),
                "thickness": float(self.thickness[k])}

    def aabb(self):
        r = self.thickness[:, None]
        return np.minimum(self.a, self.b) - r, np.maximum(self.a, self.b) + r

    def distance(self, p, s):
        return capsule_distance(p, self.a[s], self.b[s], self.thickness[s])

    def sweep(self, p0, p1, s, r):
        return sweep_capsule(p0, p1, self.a[s], self.b[s], self.thickness[s] + r)

    def _side(self, x, s):
        a = self.a[s]
        return np.sign(_cross(self.b[s] - a, x - a))

    def reference(self, x0, s):
        return self._side(x0, s)

    def contact(self, x, s, ref, x0):
        a, b, r = self.a[s], self.b[s], self.thickness[s]
        d, q, n, c, t = _capsule(x, a, b, r)
        side = np.sign(_cross(b - a, x - a))
        # side0 == 0 (started on the line): any side counts as through.
        crossed = (t > 0) & (t < 1) & (side != 0) & (side * ref <= 0)
        dist = d + r
        d = np.where(crossed, -dist - r, d)
        n = np.where(crossed[:, None], -n, n)
        q = np.where(crossed[:, None], c + r[:, None] * n, q)
        return d, q, n


@dataclass
class Polygons(ShapeSet):
    """Static convex polygons: ``verts (k, K, 2)`` counter-clockwise, padded after the last
    vertex with copies of the first, outward edge ``normals (k, K, 2)`` (zero on padding),
    ``count (k,)``. ``K`` grows to the largest polygon added (at most 64 in level files)."""

    kind: ClassVar[str] = "polygon"
    _ARRAYS: ClassVar = {"verts": (0, 2), "normals": (0, 2), "edges": (0, 2), "count": (),
                         "given_ccw": ()}
    verts: np.ndarray | None = None
    normals: np.ndarray | None = None
    edges: np.ndarray | None = None         # each vertex to the next, (k, K, 2)
    count: np.ndarray | None = None
    given_ccw: np.ndarray | None = None

    def _append(self, row):
        K = max(self.verts.shape[1], row["verts"].shape[0])
        self.verts = self._pad(self.verts, K, self.verts[:, :1] if len(self) else None)
        self.normals = self._pad(self.normals, K, None)
        row["verts"] = self._pad(row["verts"][None], K, row["verts"][None, :1])[0]
        row["normals"] = self._pad(row["normals"][None], K, None)[0]
        super()._append(row)
        self.edges = np.roll(self.verts, -1, axis=1) - self.verts

    def _parse(self, points):
        try:
            v = np.array(points, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"points: expected an array of [x, y] points, got {points!r}") \
                from None
        if v.ndim != 2 or v.shape[1] != 2 or not 3 <= v.shape[0] <= 64 or \
                not np.isfinite(v).all():
            raise ValueError("points: expected 3..64 finite [x, y] points")
        e = np.roll(v, -1, axis=0) - v
        turn = _cross(e, np.roll(e, -1, axis=0))
        area = 0.5 * np.sum(_cross(v, np.roll(v, -1, axis=0)))
        L = np.sqrt(_dot(e, e))
        if (L == 0).any() or area == 0 or not ((turn >= 0).all() or (turn <= 0).all()):
            raise ValueError("points: expected a convex polygon with non-zero area, points "
                             "in order around it")
        ccw = area > 0
        vv = v if ccw else v[::-1]
        ee = np.roll(vv, -1, axis=0) - vv
        nrm = np.stack([ee[:, 1], -ee[:, 0]], axis=1) / np.sqrt(_dot(ee, ee))[:, None]
        return {"verts": vv, "normals": nrm, "count": np.array(v.shape[0]),
                "given_ccw": np.array(float(ccw))}

    @staticmethod
    def _pad(a, K, fill):
        if a.shape[1] >= K:
            return a
        extra = np.zeros((a.shape[0], K - a.shape[1], 2))
        if fill is not None:
            extra = extra + fill
        return np.concatenate([a, extra], axis=1)

    def _spec(self, k):
        v = self.verts[k, :int(self.count[k])]
        return {"points": (v if self.given_ccw[k] else v[::-1]).tolist()}

    def aabb(self):
        return self.verts.min(axis=1), self.verts.max(axis=1)

    def distance(self, p, s):
        return _chunked(polygon_distance, p, self.verts[s], self.normals[s], self.edges[s])

    def sweep(self, p0, p1, s, r):
        return sweep_polygon(p0, p1, self.verts[s], self.normals[s], r, self.edges[s])

    def contact(self, x, s, ref, x0):
        return _chunked(polygon_contact, x, x0, self.verts[s], self.normals[s],
                        self.edges[s])


@dataclass
class Boxes(ShapeSet):
    """Static axis-aligned boxes ``[min, max]``: ``lo``, ``hi (k, 2)`` m."""

    kind: ClassVar[str] = "box"
    _ARRAYS: ClassVar = {"lo": (2,), "hi": (2,)}
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None

    def _parse(self, min, max):     # noqa: A002 - the level file's field names
        lo, hi = _point(min, "min"), _point(max, "max")
        if not (lo < hi).all():
            raise ValueError(f"max: expected max > min in both x and y, got {max!r}")
        return {"lo": lo, "hi": hi}

    def _spec(self, k):
        return {"min": self.lo[k].tolist(), "max": self.hi[k].tolist()}

    def aabb(self):
        return self.lo, self.hi

    def distance(self, p, s):
        return box_distance(p, self.lo[s], self.hi[s])

    def sweep(self, p0, p1, s, r):
        verts, normals = box_polygon(self.lo[s], self.hi[s])
        return sweep_polygon(p0, p1, verts, normals, r)

    def contact(self, x, s, ref, x0):
        return box_contact(x, x0, self.lo[s], self.hi[s])


def _chunked(fn, p, *arrays, rows: int = 1 << 14):
    """``fn`` over row blocks so ``(m, K, 2)`` temporaries stay a few MiB."""
    m = p.shape[0]
    if m <= rows:
        return fn(p, *arrays)
    parts = [fn(p[i:i + rows], *(a[i:i + rows] for a in arrays)) for i in range(0, m, rows)]
    return tuple(np.concatenate(z) for z in zip(*parts, strict=True))


@dataclass
class Walls(ShapeSet):
    """The world's ``bounds`` box seen from inside: four half-planes ``n . x >= offset``
    (floor, ceiling, left, right walls) with the world's restitution and friction. Walls are
    never swept: a half-plane has no far side to tunnel to."""

    kind: ClassVar[str] = "wall"
    _ARRAYS: ClassVar = {"n": (2,), "offset": ()}
    n: np.ndarray | None = None
    offset: np.ndarray | None = None

    @classmethod
    def from_bounds(cls, bounds) -> Walls:
        xmin, ymin, xmax, ymax = (float(b) for b in bounds)
        n = np.array([[0.0, 1.0], [0.0, -1.0], [1.0, 0.0], [-1.0, 0.0]])
        return cls(e=np.full(4, np.nan), mu=np.full(4, np.nan), n=n,
                   offset=np.array([ymin, -ymax, xmin, -xmax]))

    def distance(self, p, s):
        n = self.n[s]
        d = _dot(n, p) - self.offset[s]
        return d, p - d[:, None] * n, n


#: Shape types by the name level files use (``[[shapes]] type = ...``).
SHAPE_TYPES: dict[str, type[ShapeSet]] = {
    cls.kind: cls for cls in (Circles, Segments, Polygons, Boxes)}

#: Shape types as the compiled kernels number them.
_KIND = {"circle": ck.CIRCLE, "segment": ck.SEGMENT, "polygon": ck.POLYGON, "box": ck.BOX}
#: Each type's geometry columns in the compiled shape table (see ``contact_kernels``);
#: polygons keep their own (k, K, 2) arrays.
_GEOMETRY = {
    "circle": lambda s: np.column_stack([s.center, s.radius]),
    "segment": lambda s: np.column_stack([s.a, s.b, s.thickness]),
    "polygon": lambda s: np.zeros((len(s), 0)),
    "box": lambda s: np.column_stack([s.lo, s.hi]),
}


# ----------------------------------------------------------------------------- broad phase

def _expand(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ``counts (m,)``: the owner row of each of ``sum(counts)`` items and its rank
    within its row (``np.repeat`` plus a running offset: a ragged ``arange``)."""
    owner = np.repeat(np.arange(counts.size), counts)
    first = np.cumsum(counts) - counts
    return owner, np.arange(owner.size) - first[owner]


def aabb_pairs_brute(plo, phi, lo, hi, block: int = 1 << 20):
    """All ``(particle, shape)`` whose boxes overlap, testing every pair (in blocks)."""
    n, S = plo.shape[0], lo.shape[0]
    if n == 0 or S == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows = max(1, block // S)
    P, Q = [], []
    for a in range(0, n, rows):
        ov = ((plo[a:a + rows, None, :] <= hi[None]) & (phi[a:a + rows, None, :] >= lo[None])
              ).all(axis=2)
        pi, si = np.nonzero(ov)
        P.append(pi + a)
        Q.append(si)
    return np.concatenate(P).astype(np.int64), np.concatenate(Q).astype(np.int64)


class ShapeGrid:
    """Uniform grid over static shapes' bounding boxes; finds the (particle, shape) pairs
    whose boxes overlap without testing all ``n x S`` of them.

    Each shape is listed in every cell its box covers (one sorted array of cell keys). The
    cell is the median shape size, doubled until the listing is at most ``4 S + 4096``
    entries, so a few huge shapes (a floor) do not blow it up. A particle's box looks up
    the cells it covers (``searchsorted`` on the keys), the candidates are de-duplicated
    and kept when the boxes really overlap. A particle box covering more than 64 cells (a
    very fast particle) is tested against every shape instead.
    """

    MAX_CELLS = 64

    def __init__(self, lo: np.ndarray, hi: np.ndarray) -> None:
        self.lo, self.hi = lo, hi
        S = lo.shape[0]
        ext = (hi - lo).max(axis=1)
        cell = max(float(np.median(ext)), 1e-3 * float(ext.max()), 1e-9)
        while True:
            c0 = np.floor(lo / cell).astype(np.int64)
            c1 = np.floor(hi / cell).astype(np.int64)
            span = c1 - c0 + 1
            if int(span.prod(axis=1).sum()) <= 4 * S + 4096:
                break
            cell *= 2.0
        self.cell = cell
        self.origin = c0.min(axis=0)
        self.dims = c1.max(axis=0) - self.origin + 1
        sid, k = _expand(span.prod(axis=1))
        cx = c0[sid, 0] + k // span[sid, 1]
        cy = c0[sid, 1] + k % span[sid, 1]
        key = self._key(cx, cy)
        order = np.argsort(key, kind="stable")
        self.keys, self.sids = key[order], sid[order]

    def _key(self, cx, cy):
        return (cx - self.origin[0]) * self.dims[1] + (cy - self.origin[1])

    def query(self, plo: np.ndarray, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pairs ``(particle row, shape)`` whose boxes overlap; ``plo, phi (n, 2)``."""
        top = self.origin + self.dims - 1
        c0 = np.maximum(np.floor(plo / self.cell).astype(np.int64), self.origin)
        c1 = np.minimum(np.floor(phi / self.cell).astype(np.int64), top)
        span = np.maximum(c1 - c0 + 1, 0)
        cells = span.prod(axis=1)
        big = cells > self.MAX_CELLS
        small = np.flatnonzero(~big & (cells > 0))
        pid, k = _expand(cells[small])
        p = small[pid]
        key = self._key(c0[p, 0] + k // span[p, 1], c0[p, 1] + k % span[p, 1])
        a = np.searchsorted(self.keys, key, "left")
        b = np.searchsorted(self.keys, key, "right")
        own, off = _expand(b - a)
        pi = p[own]
        si = self.sids[a[own] + off]
        S = self.lo.shape[0]
        uniq = np.unique(pi * S + si)
        pi, si = uniq // S, uniq % S
        keep = ((plo[pi] <= self.hi[si]) & (phi[pi] >= self.lo[si])).all(axis=1)
        pi, si = pi[keep], si[keep]
        if big.any():
            rows = np.flatnonzero(big)
            bp, bs = aabb_pairs_brute(plo[rows], phi[rows], self.lo, self.hi)
            pi, si = np.concatenate([pi, rows[bp]]), np.concatenate([si, bs])
        return pi, si


def particle_pairs(x: np.ndarray, r: np.ndarray, margin: float,
                   exclude: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pairs ``i < j`` of particles with radius > 0 closer than ``r_i + r_j + margin``.

    Uniform grid with cells of ``2 max(r) + margin``: particles are sorted by cell key, and
    every particle looks up the 3 x 3 cells around its own (``searchsorted`` on the sorted
    keys), so a pair is found from both ends and kept once (``i < j``). ``exclude`` holds
    sorted keys ``min * n + max`` of pairs never to collide (particles joined by a
    constraint, which holds them at its own distance).
    """
    n = x.shape[0]
    idx = np.flatnonzero(r > 0)
    empty = np.zeros(0, np.int64)
    if idx.size < 2:
        return empty, empty
    xr, rr = x[idx], r[idx]
    cell = 2.0 * float(rr.max()) + margin
    span = float(np.max(xr.max(axis=0) - xr.min(axis=0)))
    cell = max(cell, span / 2.0 ** 30)          # keeps cell keys within int64
    c = np.floor((xr - xr.min(axis=0)) / cell).astype(np.int64) + 1
    ny = int(c[:, 1].max()) + 2
    key = c[:, 0] * ny + c[:, 1]
    order = np.argsort(key, kind="stable")
    sk = key[order]
    ii, jj = [], []
    for dx in (-1, 0, 1):
        for dy in (-1, 0, 1):
            nk = key + dx * ny + dy
            a = np.searchsorted(sk, nk, "left")
            b = np.searchsorted(sk, nk, "right")
            own, off = _expand(b - a)
            other = order[a[own] + off]
            keep = own < other
            ii.append(own[keep])
            jj.append(other[keep])
    i, j = np.concatenate(ii), np.concatenate(jj)
    d = xr[j] - xr[i]
    reach = rr[i] + rr[j] + margin
    near = _dot(d, d) < reach * reach
    i, j = idx[i[near]], idx[j[near]]
    if exclude is not None and exclude.size and i.size:
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        pos = np.searchsorted(exclude, lo * n + hi)
        found = exclude[np.minimum(pos, exclude.size - 1)] == lo * n + hi
        i, j = i[~found], j[~found]
    return i, j


def _tolerances(x: np.ndarray) -> tuple[float, float]:
    """``(skin, touch)`` in m: the constants, or more for float32 coordinates, where
    ``16 eps |x|`` is the round-off of a position."""
    eps = float(np.finfo(x.dtype).eps)
    scale = 1.0 + (float(np.abs(x).max()) if x.size else 0.0)
    skin = max(SKIN, 16.0 * eps * scale)
    return skin, max(TOUCH, 100.0 * skin)


# ----------------------------------------------------------------------------- colliders

_NO_KEYS = np.zeros(0, np.int64)


class _Table(NamedTuple):
    """The compiled kernels' view of the shapes: ``kinds``, ``rows`` (row within its type),
    ``geo`` (see ``contact_kernels``) and the polygons' ``verts``, ``normals``, ``edges``
    (``shape_args``); ``begin_args`` adds the counts of shapes and walls and the
    ``ShapeGrid`` (keys, shape ids, cell, origin, dims)."""

    shape_args: tuple
    begin_args: tuple


class Colliders:
    """Every static shape of a world, by type (``sets``), in the order they were added.

    >>> c = Colliders()
    >>> c.add("circle", center=(0, 0), radius=0.5)
    0
    >>> c.specs[0]["type"], len(c)
    ('circle', 1)
    """

    def __init__(self) -> None:
        self.sets: dict[str, ShapeSet] = {name: cls() for name, cls in SHAPE_TYPES.items()}
        self.order: list[tuple[str, int]] = []
        self._grid: tuple[ShapeGrid, np.ndarray, np.ndarray] | None = None
        self._specs: list[dict] | None = None
        self._pair_list: _PairList | None = None
        self._table: tuple | None = None
        self._frame_args: tuple | None = None   # what Colliders.frame keeps between frames
        #: "auto" (the compiled kernels of :mod:`contact_kernels` when numba is installed),
        #: "numba" (compiled) or "numpy" (the reference, vectorised over the contacts)
        self.backend = "auto"

    def __len__(self) -> int:
        return len(self.order)

    def add(self, kind: str, **fields) -> int:
        """Add a static shape of type ``kind`` with the level file's fields; returns its
        index in :attr:`specs`. ``ValueError`` names the type or the field at fault."""
        if kind not in self.sets:
            raise ValueError(f"unknown shape type {kind!r}; valid types: "
                             f"{', '.join(self.sets)}")
        try:
            row = self.sets[kind].add(**fields)
        except TypeError as e:          # a missing or unknown field
            raise ValueError(f"{kind}: {e}") from None
        self.order.append((kind, row))
        self._grid = self._specs = self._table = None
        return len(self.order) - 1

    @property
    def specs(self) -> list[dict]:
        """The shapes as level-file dicts (``type``, geometry in m, restitution, friction;
        ``None`` means the world's default), in the order added."""
        if self._specs is None:
            self._specs = [self.sets[kind].spec(k) for kind, k in self.order]
        return [dict(s) for s in self._specs]

    @classmethod
    def from_specs(cls, specs) -> Colliders:
        out = cls()
        for s in specs:
            s = dict(s)
            out.add(s.pop("type", None), **s)
        return out

    def _broad(self):
        """The grid over every shape, with each grid entry's type index and row."""
        if self._grid is None:
            boxes = [(self.sets[k].aabb(), t, len(self.sets[k]))
                     for t, k in enumerate(self.sets) if len(self.sets[k])]
            lo = np.concatenate([b[0][0] for b in boxes])
            hi = np.concatenate([b[0][1] for b in boxes])
            tid = np.concatenate([np.full(n, t) for _, t, n in boxes])
            row = np.concatenate([np.arange(n) for _, _, n in boxes])
            self._grid = (ShapeGrid(lo, hi), tid, row)
        return self._grid

    def candidates(self, plo: np.ndarray, phi: np.ndarray, brute: bool = False):
        """``{kind: (particle rows, shape rows)}`` whose boxes overlap (grid or brute)."""
        grid, tid, row = self._broad()
        if brute:
            pi, gi = aabb_pairs_brute(plo, phi, grid.lo, grid.hi)
        else:
            pi, gi = grid.query(plo, phi)
        out = {}
        for t, kind in enumerate(self.sets):
            m = tid[gi] == t
            if m.any():
                out[kind] = (pi[m], row[gi[m]])
        return out

    def begin(self, p, x0: np.ndarray, config, exclude_pairs=None) -> Contacts | None:
        """Detect this substep's contacts after the integrator moved ``p.x`` from ``x0``.

        Broad phase against the shapes (the particle's box covers its path), continuous
        detection (paths that enter a shape stop at the time of impact), the bounds
        walls, and particle pairs if ``config.collide_particles``. Moves swept particles.
        Runs the compiled kernels when :meth:`compiled` says so.
        """
        if self.compiled(p, x0):
            return self._begin_compiled(p, x0, config, exclude_pairs)
        x1 = p.x
        w, r = p.inv_mass, p.radius
        skin, touch = _tolerances(x1)
        movable = np.flatnonzero(w > 0)
        disp = np.sqrt(_dot(x1 - x0, x1 - x0))
        contacts = Contacts(x0=x0, skin=skin, touch=touch, dx=np.zeros(x1.shape, float))
        e_def, mu_def = float(config.restitution), float(config.friction)
        if len(self) and movable.size:
            pad = (r + 0.5 * disp + MARGIN)[movable, None]
            plo = np.minimum(x0[movable], x1[movable]) - pad
            phi = np.maximum(x0[movable], x1[movable]) + pad
            brute = movable.size * len(self) <= BRUTE_PAIRS
            path = x1 - x0
            for kind, (pr, sr) in self.candidates(plo, phi, brute).items():
                contacts.add_group(self.sets[kind], movable[pr], sr, r, x0, e_def, mu_def,
                                   path, disp)
            contacts.sweep(p, path)
        if config.bounds is not None and movable.size:
            walls = Walls.from_bounds(config.bounds)
            d = x1[movable] @ walls.n.T - walls.offset            # (m, 4)
            pr, sr = np.nonzero(d < (r[movable] + disp[movable] + MARGIN)[:, None])
            contacts.add_group(walls, movable[pr], sr, r, x0, e_def, mu_def)
        if config.collide_particles:
            pairs = self._neighbours(x1, r, exclude_pairs)
            if pairs is not None:
                contacts.set_pairs(pairs, w, e_def, mu_def)
        return contacts if contacts else None

    def _neighbours(self, x: np.ndarray, r: np.ndarray, exclude,
                    compiled: bool = False) -> _PairList | None:
        """Candidate particle pairs from a Verlet list (as in molecular dynamics): pairs
        closer than ``r_i + r_j + skin`` when the list was built, reused until a particle
        has moved ``skin / 2`` since (two such cannot have closed the gap). The skin is
        the larger radius, so a list lasts many substeps; it is rebuilt when particles,
        radii or the excluded (linked) pairs change. Both backends build the same list."""
        key = (x.shape[0], r, exclude)           # the arrays compared by identity
        L = self._pair_list
        if L is not None and L.key[0] == key[0] and L.key[1] is r and L.key[2] is exclude:
            if compiled:
                moved2 = float(ck.max_moved2(x, L.x_ref))
            else:
                moved = x - L.x_ref
                moved2 = float(np.max(_dot(moved, moved), initial=0.0))
            if moved2 < (0.5 * L.skin) ** 2:
                return L if L.i.size else None
        skin = max(float(r.max(initial=0.0)), MARGIN)
        if compiled:
            ex = _NO_KEYS if exclude is None else exclude
            self._pair_list = L = _PairList(key, x.copy(), skin,
                                            *ck.pair_list(x, r, skin, ex))
        else:
            i, j = particle_pairs(x, r, skin, exclude)
            self._pair_list = L = _PairList.build(key, x.copy(), skin, i, j, r)
        return L if L.i.size else None

    # --- the compiled backend -------------------------------------------------------------

    def compiled(self, p, x0: np.ndarray) -> bool:
        """Whether a substep runs the compiled kernels: ``backend`` asks for them (or is
        "auto" and numba is installed) and the state is what they take: float (n, 2)
        positions, every per-particle array in their float type and contiguous."""
        if self.backend == "numpy":
            return False
        if self.backend not in ("auto", "numba"):
            raise ValueError(f"backend: expected 'auto', 'numba' or 'numpy', got "
                             f"{self.backend!r}")
        if not ck.AVAILABLE:
            if self.backend == "numba":
                raise RuntimeError("colliders backend 'numba': numba is not installed")
            return False
        x = p.x
        return (x.ndim == 2 and x.shape[1] == 2 and x.dtype.kind == "f"
                and all(a.dtype == x.dtype and a.flags.c_contiguous
                        for a in (x, x0, p.v, p.x_prev, p.inv_mass, p.radius)))

    def tables(self, bounds) -> _Table:
        """The shapes and the ``bounds`` walls as the compiled kernels take them (cached
        until a shape is added or the bounds change)."""
        if self._table is not None and self._table[0] == bounds:
            return self._table[1]
        S = len(self)
        nw = 0 if bounds is None else 4
        kinds = np.full(S + nw, ck.WALL, np.int64)
        rows = np.zeros(S + nw, np.int64)
        geo = np.full((S + nw, 11), np.nan)
        keys = sids = np.zeros(0, np.int64)
        cell, origin, dims = 1.0, np.zeros(2, np.int64), np.ones(2, np.int64)
        if S:
            grid, tid, row = self._broad()
            keys, sids, cell, origin, dims = grid.keys, grid.sids, grid.cell, grid.origin, \
                grid.dims
            geo[:S, ck.LO_X:ck.HI_Y + 1] = np.concatenate([grid.lo, grid.hi], axis=1)
            rows[:S] = row
            for t, (kind, shapes) in enumerate(self.sets.items()):
                m = np.flatnonzero(tid == t)
                if m.size:
                    kinds[m] = _KIND[kind]
                    g = _GEOMETRY[kind](shapes)[row[m]]
                    geo[m, :g.shape[1]] = g
                    geo[m, ck.E], geo[m, ck.MU] = shapes.e[row[m]], shapes.mu[row[m]]
        if nw:
            walls = Walls.from_bounds(bounds)
            geo[S:, :3] = np.column_stack([walls.n, walls.offset])
            rows[S:] = np.arange(nw)
        poly, box = self.sets["polygon"], self.sets["box"]
        bverts, bnorm = box_polygon(box.lo, box.hi)
        bedge = np.roll(bverts, -1, axis=1) - bverts
        shapes = tuple(np.ascontiguousarray(a, dtype=float)
                       for a in (poly.verts, poly.normals, poly.edges, bverts, bnorm, bedge))
        t = _Table(shape_args=(kinds, rows, geo, *shapes),
                   begin_args=(kinds, rows, geo, S, nw, *shapes, keys, sids, float(cell),
                               origin, dims))
        self._table = (bounds, t)
        return t

    def _begin_compiled(self, p, x0, config, exclude) -> _FlatContacts | None:
        """:meth:`begin` in the compiled kernels (``contact_kernels.begin``, ``pair_list``):
        the same contacts, held flat."""
        x1, w, r = p.x, p.inv_mass, p.radius
        t = self.tables(config.bounds)
        dx = np.zeros(x1.shape)
        e, mu = float(config.restitution), float(config.friction)
        cp, cg, ce, cmu, ref, touched, nrm, depth, spent, stuck, skin, touch = ck.begin(
            x0, x1, w, r, dx, *t.begin_args, e, mu, float(np.finfo(x1.dtype).eps), SKIN,
            TOUCH, MARGIN, BRUTE_PAIRS, ShapeGrid.MAX_CELLS)
        pairs = None
        if config.collide_particles:
            L = self._neighbours(x1, r, exclude, compiled=True)
            if L is not None and ck.any_moving(L.i, L.j, w):
                pairs = L
        if not cp.size and pairs is None:
            return None
        return _FlatContacts(x0, r, skin, touch, dx, t.shape_args, cp, cg, ce, cmu, ref,
                             touched, nrm, depth, spent, stuck, pairs, e, mu)


    def frame(self, p, a, config, exclude, links, lam, zero_lam: bool, coefficients,
              h: float) -> bool | None:
        """A whole frame of a Verlet-family world with contacts in one compiled call
        (``contact_kernels.frame``): ``len(coefficients[0])`` substeps of ``h``, the
        integrator's per-substep ``(r, ca, c1, c2)`` (``frame_coefficients``), the
        links' ``kernel_args`` without their thread setting (``links``, or None) and
        their multipliers ``lam``. Returns whether the new positions ended up in
        ``p.x_prev``'s array (the caller swaps the two), or None when the state is not
        one the kernels take (nothing done). The Verlet list carries over both ways.

        Everything that stays from frame to frame (the tables, the materials, the
        scratch) is assembled once: a frame of a small scene costs less than the
        Python around it would otherwise."""
        x, w, r = p.x, p.inv_mass, p.radius
        if not self.compiled(p, p.x_prev):
            return None
        dtype = x.dtype
        fixed = self._frame_args
        table = self._table[1] if self._table is not None else None
        if fixed is None or not (fixed[0][0] == config and fixed[0][1] == x.shape
                                 and fixed[0][2] == dtype and fixed[0][3] is r
                                 and fixed[0][4] is exclude and fixed[0][5] is table):
            t = self.tables(config.bounds)
            scratch = (np.empty_like(x), np.zeros(x.shape))
            sweeps = int(config.iterations)
            fixed = self._frame_args = ((config, x.shape, dtype, r, exclude, t), scratch, (
                max(sweeps, 1), sweeps), (*t.begin_args, float(config.restitution),
                float(config.friction), float(np.finfo(dtype).eps), SKIN, TOUCH, MARGIN,
                BRUTE_PAIRS, ShapeGrid.MAX_CELLS, bool(config.collide_particles),
                _NO_KEYS if exclude is None else exclude),
                max(float(r.max(initial=0.0)), MARGIN),
                2.0 * math.hypot(*config.gravity))
        _, scratch, passes, shapes, new_skin, g = fixed
        rc, ca, c1s, c2s = coefficients
        if links is None:
            z = np.zeros(0, np.int64)
            links = (z, z, np.zeros(0, dtype), np.zeros(0, dtype), np.zeros(0, np.int8),
                     np.zeros((0, 6), np.int64), np.zeros(1, np.int64))
            lam = np.zeros(0, dtype)
        L = self._pair_list
        valid = (config.collide_particles and L is not None and L.key[0] == x.shape[0]
                 and L.key[1] is r and L.key[2] is exclude)
        if valid:
            state = (L.i, L.j, L.a, L.b, L.nodes, L.reach, L.x_ref, L.skin)
        else:
            z = np.zeros(0, np.int64)
            state = (z, z, z, z, z, np.zeros(0, r.dtype), np.zeros((0, 2), dtype), 0.0)
        ck.launch_threads()
        swapped, valid, *lst, x_ref, skin = ck.frame(
            x, p.x_prev, p.v, a, w, r, *scratch, rc, ca, c1s, c2s, h, g * h, *passes,
            bool(links[0].size), *links, dtype.type(1.0 / (h * h)), lam, bool(zero_lam),
            *shapes, valid, *state, new_skin)
        if valid:
            i, j, a_, b_, nodes, reach = lst
            self._pair_list = _PairList((x.shape[0], r, exclude), x_ref, float(skin), i, j,
                                        a_, b_, nodes, reach)
        return bool(swapped)


# ----------------------------------------------------------------------------- contacts

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

    def __post_init__(self):
        self.used = np.zeros(self.pi.size)
        self.spent = np.zeros(self.pi.size)
        self.nrm = np.zeros((self.pi.size, 2))


@dataclass
class _PairList:
    """A Verlet list of particle pairs: built at ``x_ref`` with ``skin``; ``a``, ``b``
    number the pairs' particles ``0..m-1`` within ``nodes``."""

    key: tuple
    x_ref: np.ndarray
    skin: float
    i: np.ndarray
    j: np.ndarray
    a: np.ndarray
    b: np.ndarray
    nodes: np.ndarray
    reach: np.ndarray

    @classmethod
    def build(cls, key, x_ref, skin, i, j, r) -> _PairList:
        nodes, local = np.unique(np.concatenate([i, j]), return_inverse=True)
        return cls(key, x_ref, skin, i, j, local[:i.size], local[i.size:], nodes,
                   r[i] + r[j])


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

    def sweep(self, p, path: np.ndarray) -> None:
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
            swept = np.zeros(hits.size, bool)
            for gi, g in enumerate(gs):
                s = gsel == gi
                if s.any():
                    n[s] = n_all[gi][ksel[s]]
                    mu[s] = g.mu[ksel[s]]
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

        - restitution: a shape contact approaching faster than ``2 |g| h`` at the start of
          the substep leaves at ``-e vn_start`` (Müller et al. 2020, eq. 34; slower ones
          stop, so resting contacts do not jitter); a particle pair leaves at ``e`` times
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
        if integrator.position_based:
            gain = 1.0 / h
            v_pos = (x - self.x0) / h
            v_pre = v_pos - self.dx / h
        else:
            gain = integrator.fold_gain / h
            v_pos = p.v.copy()
            v_pre = v_pos - (integrator.fold_gain / h) * self.dx
        v_th = 2.0 * math.hypot(*gravity) * h
        rows = [g.pi[a] for g, a, _ in act_groups]
        if pair_act is not None:
            rows += [self.pairs.i[pair_act[0]], self.pairs.j[pair_act[0]]]
        rows = np.unique(np.concatenate(rows))
        rows = rows[w[rows] > 0]
        bounced = np.zeros(x.shape[0], bool)
        v_imp = v_pre.copy()
        tol = 1e-9 * (1.0 + float(np.abs(v_pre[rows]).max(initial=0.0)))
        if self._may_bounce(act_groups, pair_act, v_start, v_pre, v_th):
            for _ in range(max(sweeps, 4)):
                if self._velocity_sweep(v_imp, w, act_groups, pair_act, v_th, v_start,
                                        None, bounced) <= tol:
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
        v = np.where(bounced[rows, None], v_imp[rows], v_pos[rows])
        if integrator.position_based:
            p.x_prev[rows] = x[rows] - h * v
        p.v[rows] = v
        p.a_valid = False

    def _may_bounce(self, act_groups, pair_act, v_start, v_pre, v_th) -> bool:
        """Whether any contact starts with a bounce: restitution above 0 and an approach
        faster than ``v_th`` (a pair's can only grow out of another's)."""
        for g, act, n in act_groups:
            vn0 = _dot(v_start[g.pi], n)
            if np.any(act & (g.e > 0) & (vn0 < -v_th)):
                return True
        if pair_act is not None and self.pairs.e > 0:
            act, n = pair_act
            P = self.pairs
            vn = _dot(v_pre[P.j[act]] - v_pre[P.i[act]], n[act])
            return bool(np.any(vn < -v_th))
        return False

    def _velocity_sweep(self, v, w, act_groups, pair_act, v_th, v_start, v_ref,
                        bounced) -> float:
        """One pass over the contacts, in place on ``v``; returns the largest change.

        With ``v_start`` contacts bounce (and mark ``bounced``) and the friction budget
        is this pass's normal change; without, they follow :func:`_stop` against
        ``v_ref``, the pre-contact velocity."""
        change = 0.0
        for g, act, n in act_groups:
            for b in g.batches:
                b = b[act[b]]
                if not b.size:
                    continue
                pi, nb = g.pi[b], n[b]
                if v_start is not None:
                    vn0 = _dot(v_start[pi], nb)
                    target = np.where(vn0 < -v_th, -g.e[b] * vn0, 0.0)
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
                 pmu: float) -> None:
        self.x0, self.r, self.skin, self.touch, self.dx = x0, r, skin, touch, dx
        self.shape_args = shape_args
        self.cp, self.cg, self.e, self.mu, self.ref, self.touched = cp, cg, e, mu, ref, touched
        self.nrm, self.depth, self.spent, self.stuck = nrm, depth, spent, stuck
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

    def __bool__(self) -> bool:
        return bool(self.cp.size) or self.pairs is not None

    def project(self, x: np.ndarray, w: np.ndarray) -> None:
        """:meth:`Contacts.project` (``contact_kernels.project``)."""
        ck.project(x, w, self.x0, self.dx, self.r, self.skin, self.cp, self.cg, self.mu,
                   self.ref, self.depth, self.touched, self.stuck, self.nrm, self.spent,
                   *self.shape_args, *self.pair_args, self.pmu, self.pdepth, self.ptouched,
                   self.pstuck)

    def finish(self, p, integrator, v_start: np.ndarray, h: float, gravity,
               sweeps: int = 2) -> None:
        """:meth:`Contacts.finish` (``contact_kernels.finish``)."""
        based = bool(integrator.position_based)
        gain = 0.0 if based else integrator.fold_gain / h
        v_th = 2.0 * math.hypot(*gravity) * h
        if ck.finish(p.x, self.x0, p.v, p.x_prev, p.inv_mass, self.r, self.dx, v_start,
                     based, gain, h, v_th, self.touch, int(sweeps), self.cp, self.cg, self.e,
                     self.mu, self.ref, self.touched, self.stuck, self.nrm, self.spent,
                     *self.shape_args, *self.pair_args, self.pe, self.pmu, self.ptouched,
                     self.pstuck):
            p.a_valid = False


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
