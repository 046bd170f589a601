"""Build mode: the mouse places things, and what is built is a level.

The editor never edits a running world. It edits the *level* (the table a level file
holds: ``world``, ``view``, ``bodies``, ``shapes``), validates every edit with the level
loader's own schema, and rebuilds the world from it with ``levels.build_world``. So:

- an edit the level format cannot hold is refused with the loader's explanation before
  anything changes (a concave polygon, a link to nothing);
- undo and redo are a history of tables (small: a level is a few KiB);
- "save as level" writes exactly the table the world was built from, so the saved file
  reopens to the same particles, links and shapes, bit for bit (floats are written in
  Python's shortest round-trip form).

Tools (:data:`TOOLS`): particle (click), ball (drag out its radius), link (drag from
one particle to another), rope (drag a path), cloth (drag a rectangle), box, circle,
capsule and segment (drag), polygon (click the corners, Enter or a click on the first
corner closes it), select (click; Delete removes, the panel edits its properties).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np

TOOLS = ("select", "particle", "ball", "link", "rope", "cloth", "box", "circle",
         "capsule", "segment", "polygon")
#: Paths and rectangles shorter than this (px on screen) are clicks, not drags.
MIN_DRAG_PX = 6.0
HISTORY = 200


@dataclass
class Props:
    """Properties of what the next tool use makes (and of the selection, when edited)."""

    mass: float = 0.1                  # kg (a particle; a rope's or cloth's per particle)
    radius: float = 0.1                # m (balls and particles: 0 is a point)
    compliance: float = 0.0            # m/N (links, ropes, cloths; 0 is rigid)
    pinned: bool = False               # particles; ropes pin their start
    shear: bool = True                 # cloths
    spacing: float = 0.1               # m between the particles of ropes and cloths
    thickness: float = 0.05            # m, half-width of capsules


@dataclass
class Editor:
    """The level being built (a table), its history and its selection."""

    table: dict
    undo_stack: list[dict] = field(default_factory=list)
    redo_stack: list[dict] = field(default_factory=list)
    selected: tuple[str, int] | None = None       # ("bodies" | "shapes", index)
    props: Props = field(default_factory=Props)

    def level(self):
        """The validated level (``LevelError`` if the table is not one)."""
        from ..levels import _validate
        return _validate(self.table, "the built level")

    def edit(self, new: dict, select: tuple[str, int] | None = None) -> None:
        """Adopt ``new`` if it is a valid level (else ``LevelError``, nothing changed)."""
        from ..levels import _validate
        _validate(new, "the built level")            # raises before anything changes
        self.undo_stack.append(self.table)
        del self.undo_stack[:-HISTORY]
        self.redo_stack.clear()
        self.table = new
        self.selected = select

    def _copy(self) -> dict:
        return copy.deepcopy(self.table)

    def add(self, kind: str, spec: dict) -> None:
        """Append a body or a shape (``kind``: "bodies" or "shapes") and select it."""
        new = self._copy()
        new.setdefault(kind, []).append(spec)
        self.edit(new, (kind, len(new[kind]) - 1))

    def delete(self) -> str:
        """Remove the selection; links that used its particles go too, the others are
        renumbered. Returns what was removed."""
        if self.selected is None:
            raise ValueError("nothing selected (the select tool: click a body or shape)")
        kind, k = self.selected
        new = self._copy()
        removed = new[kind].pop(k)
        if kind == "bodies":
            counts = body_counts(self.table)
            start = sum(counts[:k])
            n = counts[k]
            kept = []
            for body in new["bodies"]:
                if body.get("type") != "links":
                    kept.append(body)
                    continue
                pairs = []
                for i, j in body["pairs"]:
                    if start <= i < start + n or start <= j < start + n:
                        continue
                    pairs.append([i - n if i >= start + n else i,
                                  j - n if j >= start + n else j])
                if pairs:
                    kept.append({**body, "pairs": pairs})
            new["bodies"] = kept
        self.edit(new, None)
        return removed.get("type", kind)

    def set_props(self, **changes) -> None:
        """Change fields of the selected body or shape (those it has)."""
        if self.selected is None:
            return
        kind, k = self.selected
        new = self._copy()
        item = new[kind][k]
        for key, value in changes.items():
            if key in item or key in _OPTIONAL.get(item.get("type"), ()):
                item[key] = value
        if new != self.table:
            self.edit(new, self.selected)

    def undo(self) -> bool:
        if not self.undo_stack:
            return False
        self.redo_stack.append(self.table)
        self.table = self.undo_stack.pop()
        self.selected = None
        return True

    def redo(self) -> bool:
        if not self.redo_stack:
            return False
        self.undo_stack.append(self.table)
        self.table = self.redo_stack.pop()
        self.selected = None
        return True


#: Fields a body may not write down (defaults) but the panel may set.
_OPTIONAL = {"particles": ("mass", "radius", "pinned"), "chain": ("mass", "radius",
                                                                   "compliance", "pin"),
             "links": ("compliance",), "cloth": ("mass", "compliance", "shear", "spacing")}


def body_counts(table: dict) -> list[int]:
    """Particles each body of the level makes, in order (by building them)."""
    from ..levels import _validate, build_world

    level = _validate(table, "the built level")
    world = build_world(level)
    return [len(b.particles) for b in world.bodies]


def new_level_table(source: dict | None = None) -> dict:
    """The table to build on: a level's (its bodies and shapes kept), or an empty room
    with walls, gravity and a fixed step."""
    if source is not None:
        return copy.deepcopy(source)
    return {"name": "Built level", "description": "Made in the sandbox's build mode.",
            "world": {"integrator": "tcv_corrected", "timestep": "fixed",
                      "h": 1.0 / 60.0, "substeps": 8, "iterations": 2,
                      "bounds": [-6.0, -3.0, 6.0, 6.0], "restitution": 0.3,
                      "friction": 0.4, "collide_particles": True},
            "view": {"center": [0.0, 1.0], "width": 12.0},
            "bodies": [], "shapes": []}


# --------------------------------------------------------------------------- gestures

def _pt(p) -> list[float]:
    return [float(p[0]), float(p[1])]


def spec_for(tool: str, props: Props, points: list[np.ndarray],
             pick=None) -> tuple[str, dict] | None:
    """What a finished gesture of ``tool`` makes: ``(kind, spec)`` or None (nothing to
    make). ``points`` are the gesture's world points (press, moves, release);
    ``pick(point) -> particle index | None`` finds particles for links."""
    a, b = np.asarray(points[0], float), np.asarray(points[-1], float)
    d = float(np.hypot(*(b - a)))
    if tool == "particle":
        return "bodies", {"type": "particles", "points": [_pt(a)], "mass": props.mass,
                          "radius": 0.0 if props.radius < 1e-9 else props.radius,
                          "pinned": props.pinned}
    if tool == "ball":
        r = max(d, 0.02) if d > 1e-9 else max(props.radius, 0.02)
        return "bodies", {"type": "particles", "points": [_pt(a)], "mass": props.mass,
                          "radius": r, "pinned": props.pinned}
    if tool == "link":
        i, j = (pick(a), pick(b)) if pick is not None else (None, None)
        if i is None or j is None or i == j:
            raise ValueError("a link goes from one particle to another: press on one, "
                             "release on the other")
        return "bodies", {"type": "links", "pairs": [[int(i), int(j)]],
                          "compliance": props.compliance, "kind": "stick"}
    if tool == "rope":
        path = resample(points, props.spacing)
        if len(path) < 2:
            raise ValueError(f"drag a longer path: a rope needs two particles "
                             f"{props.spacing:g} m apart at least")
        return "bodies", {"type": "chain", "points": [_pt(p) for p in path],
                          "mass": props.mass, "radius": 0.0, "compliance": props.compliance,
                          "kind": "stick", "pin": "start" if props.pinned else "none"}
    if tool == "cloth":
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        s = props.spacing
        cols, rows = int((hi[0] - lo[0]) / s) + 1, int((hi[1] - lo[1]) / s) + 1
        if cols < 2 or rows < 2:
            raise ValueError(f"drag a larger rectangle: a cloth needs 2 x 2 particles "
                             f"{s:g} m apart")
        return "bodies", {"type": "cloth", "cols": min(cols, 400), "rows": min(rows, 400),
                          "spacing": s, "origin": [float(lo[0]), float(hi[1])],
                          "pins": "top_corners" if props.pinned else "none",
                          "mass": props.mass, "compliance": props.compliance,
                          "shear": bool(props.shear)}
    if tool == "box":
        lo, hi = np.minimum(a, b), np.maximum(a, b)
        return "shapes", {"type": "box", "min": _pt(lo), "max": _pt(hi)}
    if tool == "circle":
        return "shapes", {"type": "circle", "center": _pt(a), "radius": max(d, 0.02)}
    if tool in ("capsule", "segment"):
        if d < 1e-6:
            raise ValueError(f"drag to draw a {tool}")
        return "shapes", {"type": "segment", "a": _pt(a), "b": _pt(b),
                          "thickness": props.thickness if tool == "capsule" else 0.0}
    if tool == "polygon":
        return "shapes", {"type": "polygon", "points": [_pt(p) for p in points]}
    return None


def resample(points: list, spacing: float) -> list[np.ndarray]:
    """Points along the polyline ``points`` every ``spacing`` m (its first point kept)."""
    pts = [np.asarray(p, float) for p in points]
    out = [pts[0]]
    carry = 0.0
    for p, q in zip(pts[:-1], pts[1:], strict=True):
        seg = float(np.hypot(*(q - p)))
        if seg <= 0:
            continue
        t = spacing - carry
        while t <= seg + 1e-12:
            out.append(p + (q - p) * (t / seg))
            t += spacing
        carry = seg - (t - spacing)
    return out


def nearest_item(table: dict, world, point, radius: float) -> tuple[str, int] | None:
    """The body (by its particles) or shape nearest ``point`` within ``radius`` m."""
    best, best_d = None, radius
    x = world.particles.x
    start = 0
    for k, body in enumerate(world.bodies):
        idx = body.particles
        if len(idx):
            d = float(np.sqrt(np.min(np.sum((x[idx] - point) ** 2, axis=1))))
            if d <= best_d:
                best, best_d = ("bodies", k), d
        start += len(idx)
    links = [k for k, b in enumerate(table.get("bodies", [])) if b.get("type") == "links"]
    for k in links:                                  # a links body: near its segments
        for i, j in table["bodies"][k]["pairs"]:
            if max(i, j) < len(x):
                d = _seg_dist(point, x[i], x[j])
                if d < best_d or (best is None and d <= best_d):   # a particle wins a tie
                    best, best_d = ("bodies", k), d
    for k, s in enumerate(table.get("shapes", [])):
        d = shape_distance(s, np.asarray(point, float))
        if d <= best_d:
            best, best_d = ("shapes", k), d
    return best


def _seg_dist(p, a, b) -> float:
    p, a, b = (np.asarray(v, float) for v in (p, a, b))
    ab = b - a
    t = float(np.clip(np.dot(p - a, ab) / max(np.dot(ab, ab), 1e-18), 0.0, 1.0))
    return float(np.hypot(*(p - (a + t * ab))))


def shape_distance(s: dict, p: np.ndarray) -> float:
    """Distance (m) from ``p`` to a shape's outline or inside (0 inside)."""
    kind = s.get("type")
    if kind == "circle":
        return max(float(np.hypot(*(p - np.asarray(s["center"])))) - s["radius"], 0.0)
    if kind == "segment":
        return max(_seg_dist(p, s["a"], s["b"]) - s.get("thickness", 0.0), 0.0)
    if kind == "box":
        lo, hi = np.asarray(s["min"]), np.asarray(s["max"])
        return float(np.hypot(*np.maximum(np.maximum(lo - p, p - hi), 0.0)))
    if kind == "polygon":
        pts = np.asarray(s["points"], float)
        edges = [_seg_dist(p, pts[k], pts[(k + 1) % len(pts)]) for k in range(len(pts))]
        inside = _inside_convex(pts, p)
        return 0.0 if inside else min(edges)
    return math.inf


def _inside_convex(pts: np.ndarray, p: np.ndarray) -> bool:
    e = np.roll(pts, -1, axis=0) - pts
    c = e[:, 0] * (p[1] - pts[:, 1]) - e[:, 1] * (p[0] - pts[:, 0])
    return bool((c >= 0).all() or (c <= 0).all())
