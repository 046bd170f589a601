"""pymunk (Chipmunk 7), the reference: the benchmark's twin of a world and the one converter
from level-file shapes to pymunk shapes.

The only module of ``sandbox`` that imports pymunk (tests/test_architecture.py), and only
inside its functions: importing this module works without pymunk installed, and
``sandbox/sim`` never sees it. Used by the benchmark (``sandbox/bench.py``) and by the
cross-check tests (``tests/test_pymunk_crosscheck.py``, ``tests/contact_scenes.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .sim.constraints import ROPE

if TYPE_CHECKING:
    from .sim.world import World

H = 1.0 / 60.0                      # s: one frame, one pymunk step


def versions() -> dict[str, str]:
    """``pymunk`` and ``chipmunk`` versions, or ``"not installed"``."""
    try:
        import pymunk
    except ImportError:
        return {"pymunk": "not installed"}
    return {"pymunk": pymunk.version, "chipmunk": pymunk.chipmunk_version}


def pymunk_shape(shape: Mapping[str, Any], body: Any = None) -> Any:
    """A pymunk shape from a level file's ``[[shapes]]`` table (``type`` and its
    geometry, as ``Colliders.specs`` gives them too) on ``body``, a new STATIC body by
    default, with its bounding box cached (queries work without a space).

    ``circle`` is a ``Circle``, ``segment`` a ``Segment`` whose radius is the thickness
    (a capsule), ``polygon`` a ``Poly`` with radius 0, ``box`` a ``Poly`` of the inner
    box ``[min + radius, max - radius]`` with its ``radius`` (0: the box itself). Friction and
    restitution are the caller's (they default to the world's).
    """
    import pymunk

    if body is None:
        body = pymunk.Body(body_type=pymunk.Body.STATIC)
    kind = shape["type"]
    if kind == "circle":
        s = pymunk.Circle(body, float(shape["radius"]), tuple(shape["center"]))
    elif kind == "segment":
        s = pymunk.Segment(body, tuple(shape["a"]), tuple(shape["b"]),
                           float(shape.get("thickness") or 0.0))
    elif kind == "polygon":
        s = pymunk.Poly(body, [tuple(q) for q in shape["points"]], radius=0.0)
    elif kind == "box":
        (x0, y0), (x1, y1) = shape["min"], shape["max"]
        r = float(shape.get("radius") or 0.0)        # rounded: the inner box, grown by r
        s = pymunk.Poly.create_box_bb(body, pymunk.BB(x0 + r, y0 + r, x1 - r, y1 - r)
                                      if r > 0 else pymunk.BB(x0, y0, x1, y1), radius=r)
    else:
        raise ValueError(f"unknown shape type {kind!r}; valid: circle, segment, polygon, box")
    s.cache_bb()
    return s


#: How the pymunk twin is described, one entry per kind of object it made.
_TWIN_PARTS = (
    ("point", "{n} shapeless bodies (moment inf)"),
    ("ball", "{n} bodies with Circle shapes"),
    ("static", "{n} STATIC bodies for pins"),
    ("pin", "{n} PinJoint"),
    ("soft", "({n} of them for compliant links: rigid in pymunk)"),
    ("slide", "{n} SlideJoint(min 0, max rest)"),
    ("walls", "{n} static Segment walls (0.5 m thick, outside)"),
    ("shapes", "{n} static shapes"),
)


class PymunkTwin:
    """pymunk's version of a built world: the same particles, masses, pins, links, walls
    and static shapes, stepped once per frame with ``iterations`` = our pass count.

    Particles are dynamic bodies at the same positions and velocities; a pinned particle
    (``inv_mass == 0``) is a STATIC body. A particle that touches things (the scene has
    walls, shapes or particle contacts and its radius is > 0) gets a ``Circle`` shape and
    a disc's moment; the others are shapeless with an infinite moment (a point mass).
    Rigid sticks are ``PinJoint``s at our rest length, rope links ``SlideJoint(0, rest)``.
    Compliant links become ``PinJoint``s too: pymunk's ``DampedSpring`` is explicit, and
    ``k = 1/compliance`` = 1e5 N/m on 50 g particles (the soft blob) blows up at 1/60 s.
    ``shapes`` are ``[[shapes]]`` tables (a level's, or ``world.colliders.specs``).
    """

    def __init__(self, world: World, shapes: Iterable[Mapping] = (), h: float = H) -> None:
        import pymunk

        self.h = h
        cfg, p, c = world.config, world.particles, world.constraints
        self.constraints = world.constraints       # strain of pymunk's positions (no tearing)
        passes = cfg.substeps * max(cfg.iterations, 1)
        space = pymunk.Space(threaded=False)
        space.iterations = passes
        space.gravity = (float(cfg.gravity[0]), float(cfg.gravity[1]))
        space.damping = math.exp(-cfg.drag * h)
        # pymunk's default slop lets shapes overlap 10 cm: ours allows none. 1 mm here.
        space.collision_slop = 1e-3
        shapes = list(shapes)
        contacts = cfg.bounds is not None or bool(shapes) or cfg.collide_particles
        # Particles of one world never touch each other unless the world collides them.
        own = pymunk.ShapeFilter(group=1)
        self.bodies: list = []
        add: list = []
        counts = dict(point=0, ball=0, static=0, pin=0, slide=0, walls=0, shapes=0, soft=0)
        for xk, vk, mk, wk, rk in zip(p.x.tolist(), p.v.tolist(), p.mass.tolist(),
                                      p.inv_mass.tolist(), p.radius.tolist(), strict=True):
            ball = contacts and rk > 0
            if wk == 0:
                b = pymunk.Body(body_type=pymunk.Body.STATIC)
                counts["static"] += 1
            elif ball:
                b = pymunk.Body(mk, pymunk.moment_for_circle(mk, 0.0, rk))
                counts["ball"] += 1
            else:
                b = pymunk.Body(mk, math.inf)
                counts["point"] += 1
            b.position = xk
            if wk != 0:
                b.velocity = vk
            add.append(b)
            self.bodies.append(b)
            if ball:
                s = pymunk.Circle(b, rk)
                s.friction, s.elasticity = cfg.friction, cfg.restitution
                if not cfg.collide_particles:
                    s.filter = own
                add.append(s)
        origin = (0.0, 0.0)
        for i, j, rest, comp, kind in zip(c.i.tolist(), c.j.tolist(), c.rest.tolist(),
                                          c.compliance.tolist(), c.kind.tolist(), strict=True):
            bi, bj = self.bodies[i], self.bodies[j]
            if p.inv_mass[i] == 0 and p.inv_mass[j] == 0:
                continue                                # moves nothing
            if kind == ROPE:
                jt = pymunk.SlideJoint(bi, bj, origin, origin, 0.0, rest)
                counts["slide"] += 1
            else:
                jt = pymunk.PinJoint(bi, bj, origin, origin)
                jt.distance = rest
                counts["pin"] += 1
                counts["soft"] += comp > 0
            add.append(jt)
        static = space.static_body
        if cfg.bounds is not None:
            # Walls as thick segments just outside the box (surface on the bound): a
            # zero-width segment lets pymunk's falling balls tunnel through the floor.
            x0, y0, x1, y1 = cfg.bounds
            t = 0.5
            x0, y0, x1, y1 = x0 - t, y0 - t, x1 + t, y1 + t
            for a, b in (((x0, y0), (x1, y0)), ((x1, y0), (x1, y1)), ((x1, y1), (x0, y1)),
                         ((x0, y1), (x0, y0))):
                s = pymunk.Segment(static, a, b, t)
                s.friction, s.elasticity = cfg.friction, cfg.restitution
                add.append(s)
                counts["walls"] += 1
        for shape in shapes:
            s = pymunk_shape(shape, static)
            f, e = shape.get("friction"), shape.get("restitution")
            s.friction = cfg.friction if f is None else f
            s.elasticity = cfg.restitution if e is None else e
            add.append(s)
            counts["shapes"] += 1
        space.add(*add)
        self.space = space
        self.counts = counts
        parts = [f"space.iterations={passes}", "one step of 1/60 s per frame",
                 f"gravity={space.gravity}", f"damping={space.damping:g}",
                 "collision_slop=1 mm", "threaded=False", "sleeping off"]
        parts += [text.format(n=counts[key]) for key, text in _TWIN_PARTS if counts[key]]
        self.settings = ", ".join(parts)

    def step(self) -> None:
        self.space.step(self.h)

    def positions(self) -> np.ndarray:
        return np.array([tuple(b.position) for b in self.bodies], float).reshape(-1, 2)

    def constraint_error(self) -> tuple[float, float]:
        """Mean and max relative stretch of pymunk's links, measured as ours are."""
        return self.constraints.error(self.positions())

    def is_finite(self) -> bool:
        return bool(np.isfinite(self.positions()).all())
