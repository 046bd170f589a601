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
corner closes it), select (click or Shift+click, drag a box on empty space, drag the
selection to move it; Delete removes it, the panel edits its properties).

Every edit is a new table (``Editor.edit``): moving (:meth:`Editor.move`), deleting
(:meth:`Editor.delete`) and setting a property (:meth:`Editor.set_field`) are checked by
the schema like any other, so a mass of -1 or a restitution of 1.5 is refused with the
schema's own sentence and the level stays as it was.
"""

from __future__ import annotations

import copy
import math
import re
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


Item = tuple[str, int]                    # ("bodies" | "shapes", index in the table)

#: Fields of bodies and shapes that are positions (m): a move adds the drag to each.
#: ``test_every_position_field_moves`` checks that no ``Vec2`` field of the schema is
#: missing here.
POINT_FIELDS = ("origin", "start", "end", "center", "pivot", "bottom_center", "a", "b",
                "min", "max", "label_at")
POINT_LIST_FIELDS = ("points",)

#: What the panel edits of a selected body or shape: ``(field, label, unit)``, each
#: shown when the selection's type has the field (its schema gives the limits).
PROPERTIES = (
    ("mass", "mass", "kg"), ("masses", "masses", "kg"), ("total_mass", "total mass", "kg"),
    ("central_mass", "central mass", "kg"), ("stiffness", "stiffness", "N/m"),
    ("compliance", "compliance", "m/N"), ("damping", "damping", "N s/m"),
    ("pressure", "pressure", "N/m"), ("radius", "radius", "m"),
    ("ball_radius", "ball radius", "m"), ("restitution", "restitution", ""),
    ("friction", "friction", ""),
)
#: Properties that may be left to the world's default (an empty field).
_DEFAULTABLE = ("restitution", "friction")


def item_model(spec: dict):
    """The schema class of a body's or shape's table (None if its type is unknown)."""
    from ..levels import BODY_TYPES, SHAPE_TYPES
    return BODY_TYPES.get(spec.get("type")) or SHAPE_TYPES.get(spec.get("type"))


def properties_of(spec: dict) -> list[tuple[str, str, str]]:
    """The :data:`PROPERTIES` a body's or shape's type has."""
    fields = model_fields(spec)
    return [p for p in PROPERTIES if p[0] in fields]


def property_value(spec: dict, key: str):
    """The value of ``key`` in ``spec``, or its schema default when not written down."""
    if key in spec:
        return spec[key]
    model = item_model(spec)
    f = model.model_fields.get(key) if model is not None else None
    return None if f is None else f.get_default(call_default_factory=True)


def show_value(value) -> str:
    """A property's value as its text field shows it (``""``: the world's default)."""
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        return ", ".join(f"{float(v):g}" for v in value)
    return f"{float(value):g}"


def parse_value(key: str, text: str):
    """A property typed in the panel as the value the level table holds; ``ValueError``
    saying what was expected (the limits are the schema's, checked by the edit)."""
    text = str(text).strip()
    if key in _DEFAULTABLE and text == "":
        return None
    parts = [t for t in text.replace(";", ",").split(",")] if key == "masses" else [text]
    try:
        values = [float(t) for t in parts]
    except ValueError:
        want = "two numbers, e.g. 1, 2" if key == "masses" else "a number"
        raise ValueError(f"{key}: expected {want}, got {text[:30]!r}") from None
    if key == "masses":
        if len(values) != 2:
            raise ValueError(f"masses: expected two numbers, e.g. 1, 2, got {text[:30]!r}")
        return values
    return values[0]


def translated(spec: dict, d) -> dict:
    """A copy of a body's or shape's table moved by ``d`` (m)."""
    dx, dy = float(d[0]), float(d[1])
    out = copy.deepcopy(spec)
    for key in POINT_FIELDS:
        if key in out:
            x, y = out[key]
            out[key] = [x + dx, y + dy]
    for key in POINT_LIST_FIELDS:
        if key in out:
            out[key] = [[x + dx, y + dy] for x, y in out[key]]
    return out


def body_counts(table: dict) -> list[int]:
    """Particles each body of the level makes, in order (from the schema's totals, which
    a test checks against the built worlds; nothing is built)."""
    from ..levels import _validate

    level = _validate(table, "the built level")
    return [b.totals().particles for b in level.bodies]


@dataclass
class Editor:
    """The level being built (a table), its history and its selection.

    ``selection`` is a list of items (``("bodies", k)`` or ``("shapes", k)``), the last
    one the primary (the panel shows its properties); ``selected`` is that one or None.
    ``saved`` is what the save dialog was last given (title, description, hint)."""

    table: dict
    undo_stack: list[dict] = field(default_factory=list)
    redo_stack: list[dict] = field(default_factory=list)
    selection: list[Item] = field(default_factory=list)
    props: Props = field(default_factory=Props)
    saved: dict | None = None

    @property
    def selected(self) -> Item | None:
        return self.selection[-1] if self.selection else None

    @selected.setter
    def selected(self, item: Item | None) -> None:
        self.selection = [] if item is None else [item]

    def level(self):
        """The validated level (``LevelError`` if the table is not one)."""
        from ..levels import _validate
        return _validate(self.table, "the built level")

    def edit(self, new: dict, select=None) -> None:
        """Adopt ``new`` if it is a valid level (else ``LevelError``, nothing changed);
        ``select``: an item or a list of them, selected afterwards."""
        from ..levels import _validate
        _validate(new, "the built level")            # raises before anything changes
        self.undo_stack.append(self.table)
        del self.undo_stack[:-HISTORY]
        self.redo_stack.clear()
        self.table = new
        if select is None or isinstance(select, list):
            self.selection = list(select or [])
        else:
            self.selection = [select]

    def _copy(self) -> dict:
        return copy.deepcopy(self.table)

    def spec(self, item: Item) -> dict:
        kind, k = item
        return self.table[kind][k]

    def describe(self, items: list[Item] | None = None) -> str:
        """``"the rope"``, ``"3 items"``: the selection in words."""
        items = self.selection if items is None else items
        if len(items) == 1:
            return f"the {self.spec(items[0]).get('type', items[0][0])}"
        return f"{len(items)} items"

    def add(self, kind: str, spec: dict) -> None:
        """Append a body or a shape (``kind``: "bodies" or "shapes") and select it."""
        new = self._copy()
        new.setdefault(kind, []).append(spec)
        self.edit(new, (kind, len(new[kind]) - 1))

    # --- selecting ------------------------------------------------------------------

    def select_at(self, world, point, radius: float, add: bool = False) -> Item | None:
        """Select what is nearest ``point`` (within ``radius`` m); ``add``: Shift, which
        adds it to the selection or takes it out. Returns the item (None: nothing)."""
        item = nearest_item(self.table, world, point, radius)
        if not add:
            self.selection = [] if item is None else [item]
        elif item is not None:
            if item in self.selection:
                self.selection.remove(item)
            else:
                self.selection.append(item)
        return item

    def select_box(self, world, a, b, add: bool = False) -> list[Item]:
        """Select every body and shape wholly inside the rectangle with corners ``a`` and
        ``b`` (m); ``add`` keeps what was selected. Returns the items inside."""
        inside = items_in_box(self.table, world, a, b)
        if add:
            self.selection = self.selection + [i for i in inside if i not in self.selection]
        else:
            self.selection = list(inside)
        return inside

    def clear_selection(self) -> bool:
        had = bool(self.selection)
        self.selection = []
        return had

    def _need_selection(self) -> list[Item]:
        if not self.selection:
            raise ValueError("nothing selected: click a body or a shape (the select tool "
                             "or a right click), or drag a box around some")
        return self.selection

    # --- moving, deleting, properties -----------------------------------------------

    def move(self, d) -> None:
        """Move the selection by ``d`` (m): each body as a whole (its particles, pinned
        ones too, and so its links), each shape. A selected links body moves the bodies
        whose particles it joins."""
        items = self._need_selection()
        if not (math.isfinite(d[0]) and math.isfinite(d[1])):
            raise ValueError("a move needs a finite distance")
        bodies = {k for kind, k in items if kind == "bodies"}
        links = [k for k in bodies if self.table["bodies"][k].get("type") == "links"]
        if links:
            starts = np.cumsum([0, *body_counts(self.table)])
            for k in links:
                for i, j in self.table["bodies"][k]["pairs"]:
                    for p in (i, j):
                        bodies.add(int(np.searchsorted(starts, p, side="right")) - 1)
        new = self._copy()
        for k in bodies:
            if 0 <= k < len(new["bodies"]):
                new["bodies"][k] = translated(new["bodies"][k], d)
        for kind, k in items:
            if kind == "shapes":
                new["shapes"][k] = translated(new["shapes"][k], d)
        self.edit(new, list(items))

    def delete(self) -> str:
        """Remove the selection; links that used its particles go too, the others are
        renumbered. Returns what was removed, in words."""
        items = self._need_selection()
        said = self.describe(items)
        gone_bodies = sorted({k for kind, k in items if kind == "bodies"})
        gone_shapes = {k for kind, k in items if kind == "shapes"}
        new = self._copy()
        new["shapes"] = [s for k, s in enumerate(new.get("shapes", [])) if k not in gone_shapes]
        if gone_bodies:
            counts = body_counts(self.table)
            starts = np.cumsum([0, *counts])
            # Each old particle's new index (-1: deleted with its body).
            index = np.arange(starts[-1])
            removed = np.zeros(starts[-1], bool)
            for k in gone_bodies:
                removed[starts[k]:starts[k + 1]] = True
            index = np.where(removed, -1, index - np.cumsum(removed) + removed)
            kept = []
            for k, body in enumerate(new["bodies"]):
                if k in gone_bodies:
                    continue
                if body.get("type") == "links":
                    pairs = [[int(index[i]), int(index[j])] for i, j in body["pairs"]
                             if i < len(index) and j < len(index)
                             and index[i] >= 0 and index[j] >= 0]
                    if not pairs:
                        continue                      # every link it held is gone
                    body = {**body, "pairs": pairs}
                kept.append(body)
            new["bodies"] = kept
        self.edit(new, None)
        return said

    def set_field(self, key: str, value) -> list[Item]:
        """Set ``key`` to ``value`` on every selected body or shape whose type has it
        (None: the world's default). ``ValueError`` if none has it, ``LevelError`` (the
        schema's limits) if the value is refused; nothing changes then. Returns the
        items changed."""
        items = self._need_selection()
        new = self._copy()
        changed = []
        for kind, k in items:
            spec = new[kind][k]
            model = item_model(spec)
            if model is None or key not in model.model_fields:
                continue
            if value is None:
                spec.pop(key, None)
            else:
                spec[key] = value
            changed.append((kind, k))
        if not changed:
            raise ValueError(f"{self.describe(items)} has no {key.replace('_', ' ')}")
        if new != self.table:
            self.edit(new, list(items))
        return changed

    def set_props(self, **changes) -> None:
        """Change fields of the selected bodies and shapes (those they may have)."""
        if not self.selection:
            return
        new = self._copy()
        for kind, k in self.selection:
            item = new[kind][k]
            for key, value in changes.items():
                if key in item or key in _OPTIONAL.get(item.get("type"), ()):
                    item[key] = value
        if new != self.table:
            self.edit(new, list(self.selection))

    def new_level(self, world: dict | None = None) -> None:
        """An empty level (undoable) with ``world``'s settings, or the defaults."""
        self.edit(new_level_table(world=world), None)

    def undo(self) -> bool:
        if not self.undo_stack:
            return False
        self.redo_stack.append(self.table)
        self.table = self.undo_stack.pop()
        self.selection = []
        return True

    def redo(self) -> bool:
        if not self.redo_stack:
            return False
        self.undo_stack.append(self.table)
        self.table = self.redo_stack.pop()
        self.selection = []
        return True


#: Fields a body may not write down (defaults) but the panel may set.
_OPTIONAL = {"particles": ("mass", "radius", "pinned"), "chain": ("mass", "radius",
                                                                   "compliance", "pin"),
             "links": ("compliance",), "cloth": ("mass", "compliance", "shear", "spacing")}


#: The world of a new, empty level when there is no level to take it from.
DEFAULT_WORLD = {"integrator": "tcv_corrected", "timestep": "fixed", "h": 1.0 / 60.0,
                 "substeps": 8, "iterations": 2, "bounds": [-6.0, -3.0, 6.0, 6.0],
                 "restitution": 0.3, "friction": 0.4, "collide_particles": True}


def new_level_table(source: dict | None = None, world: dict | None = None) -> dict:
    """The table to build on: a level's (its bodies and shapes kept), or an empty one
    with ``world``'s settings (a level's ``[world]`` table), or a room with walls,
    gravity and a fixed step. An empty level has no title, description or hint: the
    save dialog asks for them."""
    if source is not None:
        return copy.deepcopy(source)
    view = {"center": [0.0, 1.0], "width": 12.0}
    w = copy.deepcopy(world) if world is not None else dict(DEFAULT_WORLD)
    bounds = w.get("bounds")
    if bounds:
        x0, y0, x1, y1 = bounds
        # The whole room in a window about 1.6 times as wide as it is high.
        view = {"center": [(x0 + x1) / 2, (y0 + y1) / 2],
                "width": float(max(x1 - x0, (y1 - y0) * 1.6)) * 1.05}
    return {"name": "", "description": "", "world": w, "view": view,
            "bodies": [], "shapes": []}


def shape_box(s: dict):
    """Corners (m) of a shape's bounding box (its shape set's own ``aabb``, as the
    colliders' broad phase has it); None if it is no shape."""
    from ..sim.collide.shapes import SHAPE_SETS

    shapes = SHAPE_SETS.get(s.get("type"))
    if shapes is None:
        return None
    one = shapes()
    try:
        one.add(**{k: v for k, v in s.items() if k != "type"})
    except (TypeError, ValueError):
        return None
    lo, hi = one.aabb()
    return np.asarray(lo[0], float), np.asarray(hi[0], float)


def item_points(table: dict, world, item: Item) -> np.ndarray:
    """The points (m) an item covers: a body's particles, a links body's ends, a
    shape's bounding box corners; ``(n, 2)``."""
    kind, k = item
    if kind == "shapes":
        box = shape_box(table["shapes"][k])
        return np.empty((0, 2)) if box is None else np.asarray(box)
    x = world.particles.x
    body = table["bodies"][k]
    if body.get("type") == "links":
        idx = sorted({int(p) for pair in body["pairs"] for p in pair if 0 <= p < len(x)})
    else:
        idx = world.bodies[k].particles if k < len(world.bodies) else []
    return np.asarray(x[np.asarray(idx, np.int64)], float).reshape(-1, 2)


def items_in_box(table: dict, world, a, b) -> list[Item]:
    """Every body and shape wholly inside the rectangle with corners ``a``, ``b`` (m):
    all of a body's particles (a links body: both ends of every link), a shape's
    bounding box."""
    lo = np.minimum(np.asarray(a, float), np.asarray(b, float))
    hi = np.maximum(np.asarray(a, float), np.asarray(b, float))
    out: list[Item] = []
    for kind in ("bodies", "shapes"):
        for k in range(len(table.get(kind, []))):
            pts = item_points(table, world, (kind, k))
            if len(pts) and bool(((pts >= lo) & (pts <= hi)).all()):
                out.append((kind, k))
    return out


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


#: Longest title, description and hint the save dialog writes.
TITLE_MAX, TEXT_MAX = 80, 400


def file_stem(title: str) -> str:
    """The file name a title saves under: ``"My ramp!"`` -> ``my_ramp`` (letters,
    digits, - and _ only, at most 60)."""
    return re.sub(r"[^A-Za-z0-9_-]+", "_", title.strip()).strip("_")[:60].lower()


def model_fields(spec: dict):
    """The level schema's fields of the item ``spec`` (a body's or a shape's), the
    properties the panel lets a person edit; none for an item without a model."""
    model = item_model(spec)
    return model.model_fields if model is not None else {}
