"""Shapes: the static shapes of a world as structures of arrays, one set per type.

:class:`Circles`, :class:`Segments` (capsules), :class:`Polygons` (convex), :class:`Boxes`
(axis aligned), and the bounds seen from inside (:class:`Walls`). Each set parses and
validates the level file's fields, reports them back (``spec``) and answers ``distance``,
``contact`` and ``sweep`` through :mod:`.geometry`; the compiled kernels read all of them
from one table (``Colliders.tables``: :data:`_KIND`, :data:`_GEOMETRY`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from .geometry import (
    BOX,
    CIRCLE,
    POLYGON,
    SEGMENT,
    _capsule,
    _cross,
    _dot,
    _toi_normal,
    box_contact,
    box_distance,
    box_polygon,
    capsule_distance,
    circle_distance,
    polygon_contact,
    polygon_distance,
    sweep_capsule,
    sweep_circle,
    sweep_polygon,
)

# ------------------------------------------------------------------- validation

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

def convexity_problem(points) -> str | None:
    """Why ``points`` (in order) are no convex polygon, or None. Either winding; every
    turn must have the same sign *and* the turns must add up to one full revolution (a
    pentagram turns the same way at every corner but winds twice); nearly collinear
    corners (relative 1e-12) count as straight. The level files' check and the
    colliders' are this one."""
    pts = [(float(x), float(y)) for x, y in points]
    n = len(pts)
    edges = [(pts[(i + 1) % n][0] - pts[i][0], pts[(i + 1) % n][1] - pts[i][1])
             for i in range(n)]
    if any(ex == 0.0 and ey == 0.0 for ex, ey in edges):
        return "expected a convex polygon, but two consecutive points coincide"
    sign, turning = 0.0, 0.0
    for i in range(n):
        (ax, ay), (bx, by) = edges[i - 1], edges[i]
        cross, dot = ax * by - ay * bx, ax * bx + ay * by
        if abs(cross) > 1e-12 * math.hypot(ax, ay) * math.hypot(bx, by):
            if sign and (cross > 0) != (sign > 0):
                return ("expected a convex polygon (points in order around it, all "
                        "corners turning the same way)")
            sign = cross
        turning += math.atan2(cross, dot)
    # Written so that a NaN (coordinates near the float limit overflow) fails the test.
    if sign == 0.0 or not abs(abs(turning) - 2 * math.pi) <= 1e-6:
        return "expected a convex polygon with non-zero area, going around once"
    return None


# ------------------------------------------------------------------- shape sets

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
        problem = convexity_problem(v)
        if problem:
            raise ValueError(f"points: {problem}")
        area = 0.5 * np.sum(_cross(v, np.roll(v, -1, axis=0)))
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
    """Static axis-aligned boxes ``[min, max]``: ``lo``, ``hi (k, 2)`` m, their corners
    rounded by ``radius (k,)`` m (0: sharp).

    A rounded box is the box ``[lo + radius, hi - radius]`` (:meth:`inner`) grown by
    ``radius`` all round, as pymunk's ``Poly`` with a radius is: its distance is the
    inner box's less the radius, its sweep the inner box's for a disc ``radius`` larger,
    its contact pushes out through the inner box's face the path crossed. A particle
    rolls around its corners. With ``radius`` 0 every number is the sharp box's, bit for
    bit (the state hashes of the levels with boxes are unchanged)."""

    kind: ClassVar[str] = "box"
    _ARRAYS: ClassVar = {"lo": (2,), "hi": (2,), "radius": ()}
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    radius: np.ndarray | None = None

    def _parse(self, min, max, radius=0.0):     # noqa: A002 - the level file's field names
        lo, hi = _point(min, "min"), _point(max, "max")
        if not (lo < hi).all():
            raise ValueError(f"max: expected max > min in both x and y, got {max!r}")
        r = _number(radius, "radius", 0.0)
        if not 2.0 * r <= float((hi - lo).min()):
            raise ValueError(f"radius: expected at most half the box's smaller side "
                             f"({float((hi - lo).min()) / 2:g} m), got {radius!r}")
        return {"lo": lo, "hi": hi, "radius": np.array(r)}

    def _spec(self, k):
        out = {"min": self.lo[k].tolist(), "max": self.hi[k].tolist()}
        if self.radius[k] > 0:
            out["radius"] = float(self.radius[k])
        return out

    def inner(self, s=slice(None)):
        """``(lo, hi, radius)`` of the boxes ``s`` whose rounding makes them: the box
        itself where ``radius`` is 0 (not ``lo + 0.0``: a -0.0 stays -0.0)."""
        r = self.radius[s]
        round_ = (r > 0)[:, None]
        return (np.where(round_, self.lo[s] + r[:, None], self.lo[s]),
                np.where(round_, self.hi[s] - r[:, None], self.hi[s]), r)

    def aabb(self):
        lo, hi, r = self.inner()
        return lo - r[:, None], hi + r[:, None]

    def distance(self, p, s):
        lo, hi, r = self.inner(s)
        return _rounded(box_distance(p, lo, hi), r)

    def sweep(self, p0, p1, s, r):
        lo, hi, R = self.inner(s)
        verts, normals = box_polygon(lo, hi)
        return sweep_polygon(p0, p1, verts, normals, r + R)

    def contact(self, x, s, ref, x0):
        lo, hi, r = self.inner(s)
        return _rounded(box_contact(x, x0, lo, hi), r)


def _rounded(dqn, r):
    """A distance ``(d, q, n)`` to a shape, as to the shape grown by ``r``: ``d - r``,
    the closest point ``r`` further out along ``n`` (kept where ``r`` is 0)."""
    d, q, n = dqn
    q = np.where((r > 0)[:, None], q + r[:, None] * n, q)
    return d - r, q, n


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
SHAPE_SETS: dict[str, type[ShapeSet]] = {
    cls.kind: cls for cls in (Circles, Segments, Polygons, Boxes)}

#: Shape types as the compiled kernels number them.
_KIND = {"circle": CIRCLE, "segment": SEGMENT, "polygon": POLYGON, "box": BOX}
#: Each type's geometry columns in the compiled shape table (``Colliders.tables``);
#: polygons keep their own (k, K, 2) arrays.
_GEOMETRY = {
    "circle": lambda s: np.column_stack([s.center, s.radius]),
    "segment": lambda s: np.column_stack([s.a, s.b, s.thickness]),
    "polygon": lambda s: np.zeros((len(s), 0)),
    "box": lambda s: np.column_stack([*s.inner()[:2], s.radius]),
}
