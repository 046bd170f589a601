"""Draw a world on a pygame surface of your own game, in the sandbox window's colours.

In the style of pymunk's ``pygame_util.DrawOptions``: make one :class:`DrawOptions` with
your screen and how many pixels a metre is, then call :meth:`DrawOptions.draw` every
frame::

    import pygame
    import sandbox

    screen = pygame.display.set_mode((800, 600))
    options = sandbox.DrawOptions(screen, scale=100)   # 100 px a metre, (0, 0) mid-screen
    world = sandbox.World()
    sandbox.build_rope(world, (-2, 2), (2, 2), segments=30)
    while True:
        ...                                            # your events
        world.step(1 / 60)
        screen.fill(options.background)
        options.draw(world)
        pygame.display.flip()

The world is in metres with y up, the screen in pixels with y down: a point ``(x, y)``
is drawn at ``offset + scale * (x, -y)``. :meth:`DrawOptions.to_world` maps a mouse
position back, which is all a grab needs (``examples/rope.py``).

What is drawn, in this order: the world's ``bounds`` (a wall), static shapes, links
coloured by their strain (blue pushed, grey at rest, yellow to magenta stretched; rope
links tan), springs (green), particles (3 px dots, or discs of their radius), pinned
particles (red squares) and the hand (the mouse spring, yellow). Every part can be
switched off (``options.links = False``) and every colour changed.

This module needs only pygame and numpy: it does not import the sandbox's window
(``sandbox.app``), whose renderer draws the same picture with compiled kernels for
worlds of 100,000 links. Drawing here is ``pygame.draw`` calls, a few ms a frame for a
few thousand links: enough for a game's cloth, rope or pile.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pygame

if TYPE_CHECKING:
    from .sim.view import WorldView
    from .sim.world import World

Colour = tuple[int, int, int]

# The window's colours (sandbox/app/render.py; a test keeps the two equal).
BACKGROUND: Colour = (18, 20, 27)
WALL: Colour = (120, 128, 150)
SHAPE_FILL: Colour = (54, 60, 78)
SHAPE_EDGE: Colour = (130, 140, 165)
PARTICLE: Colour = (225, 228, 236)
BALL: Colour = (200, 208, 226)
PIN: Colour = (255, 86, 86)
GRAB: Colour = (255, 220, 60)
SPRING: Colour = (110, 215, 140)

#: Strain bin edges (relative stretch ``(L - rest) / rest``): pushed <- | at rest | ->
#: stretched. Bin ``NEUTRAL_BIN`` is a link at its rest length (within 0.1 %).
STRAIN_EDGES = np.array([-0.02, -0.005, -0.001, 0.001, 0.005, 0.02, 0.05])
NEUTRAL_BIN = 3
#: A colour per bin: row 0 for sticks, row 1 for rope links (tan while slack or at
#: rest: a rope never pushes).
STRAIN_RGB: list[list[Colour]] = [
    [(60, 110, 255), (95, 150, 255), (150, 190, 250), (185, 190, 205), (245, 225, 110),
     (255, 160, 60), (255, 70, 50), (255, 40, 200)],
    [(190, 150, 95), (190, 150, 95), (190, 150, 95), (190, 150, 95), (245, 225, 110),
     (255, 160, 60), (255, 70, 50), (255, 40, 200)],
]

_LIMIT = 1e5            # px: pygame's coordinates are C ints; far-off points are clamped


class DrawOptions:
    """Draws worlds onto ``surface``: ``scale`` px a metre, the world's origin at the
    pixel ``offset`` (default: the middle of the surface).

    >>> import pygame, sandbox
    >>> screen = pygame.Surface((400, 300))
    >>> options = sandbox.DrawOptions(screen, scale=50)
    >>> options.to_screen((1.0, 2.0))               # 1 m right, 2 m up of the middle
    array([250.,  50.])
    >>> options.to_world((250, 50))
    array([1., 2.])
    >>> world = sandbox.World()
    >>> body = sandbox.build_pendulum(world, pivot=(0, 2), length=1.5)
    >>> options.draw(world)

    Attributes you may change at any time: ``scale``, ``offset``; what is drawn,
    ``bounds``, ``shapes``, ``links``, ``springs``, ``particles``, ``hand`` (all True);
    ``strain_colours`` (True: links coloured by their stretch; False: all in
    ``link_colour``); the colours ``background`` (for your own ``screen.fill``), ``wall``,
    ``shape_fill``, ``shape_edge``, ``particle``, ``ball``, ``pin``, ``grab``, ``spring``
    and ``link_colour``, each an ``(r, g, b)`` tuple.
    """

    def __init__(self, surface: pygame.Surface, scale: float = 100.0,
                 offset: tuple[float, float] | None = None) -> None:
        self.surface = surface
        self.scale = float(scale)
        if offset is None:
            w, h = surface.get_size()
            offset = (w / 2.0, h / 2.0)
        self.offset = (float(offset[0]), float(offset[1]))
        self.bounds = self.shapes = self.links = self.springs = True
        self.particles = self.hand = True
        self.strain_colours = True
        self.background, self.wall = BACKGROUND, WALL
        self.shape_fill, self.shape_edge = SHAPE_FILL, SHAPE_EDGE
        self.particle, self.ball, self.pin = PARTICLE, BALL, PIN
        self.grab, self.spring = GRAB, SPRING
        self.link_colour = STRAIN_RGB[0][NEUTRAL_BIN]

    # --- the mapping -----------------------------------------------------------------

    def to_screen(self, points) -> np.ndarray:
        """World points ``(..., 2)`` in metres to screen points ``(..., 2)`` in pixels
        (floats): ``offset + scale * (x, -y)``.

        >>> import pygame, sandbox
        >>> sandbox.DrawOptions(pygame.Surface((200, 100)), scale=10).to_screen([[0, 0], [1, 1]])
        array([[100.,  50.],
               [110.,  40.]])
        """
        p = np.asarray(points, float)
        out = np.empty(p.shape)
        out[..., 0] = self.offset[0] + self.scale * p[..., 0]
        out[..., 1] = self.offset[1] - self.scale * p[..., 1]
        return out

    def to_world(self, pixels) -> np.ndarray:
        """Screen points ``(..., 2)`` in pixels (a mouse position) to world points in
        metres: the inverse of :meth:`to_screen`.

        >>> import pygame, sandbox
        >>> sandbox.DrawOptions(pygame.Surface((200, 100)), scale=10).to_world((110, 40))
        array([1., 1.])
        """
        s = np.asarray(pixels, float)
        out = np.empty(s.shape)
        out[..., 0] = (s[..., 0] - self.offset[0]) / self.scale
        out[..., 1] = (self.offset[1] - s[..., 1]) / self.scale
        return out

    def fit(self, world: World, margin: float = 0.1) -> DrawOptions:
        """Set ``scale`` and ``offset`` so that the whole world shows: its ``bounds`` if
        it has them, else its particles and shapes, with ``margin`` (a fraction of the
        surface) around. Returns ``self``, so ``DrawOptions(screen).fit(world)`` works.

        >>> import pygame, sandbox
        >>> world = sandbox.World(bounds=(-1.0, 0.0, 1.0, 1.0))
        >>> options = sandbox.DrawOptions(pygame.Surface((500, 250))).fit(world)
        >>> options.scale, options.to_screen((0.0, 0.5))      # the middle of the bounds
        (200.0, array([250., 125.]))
        """
        box = _extent(world)
        w, h = self.surface.get_size()
        if box is None:
            self.offset = (w / 2.0, h / 2.0)
            return self
        (x0, y0), (x1, y1) = box
        span_x, span_y = max(x1 - x0, 1e-9), max(y1 - y0, 1e-9)
        usable = 1.0 - 2.0 * margin
        self.scale = float(min(w * usable / span_x, h * usable / span_y))
        cx, cy = (x0 + x1) / 2.0, (y0 + y1) / 2.0
        self.offset = (w / 2.0 - self.scale * cx, h / 2.0 + self.scale * cy)
        return self

    # --- drawing ---------------------------------------------------------------------

    def draw(self, world: World | WorldView) -> None:
        """Draw ``world`` (a :class:`~sandbox.sim.world.World`, or the read-only view
        ``world.view()`` returns) onto the surface. It does not clear the surface first:
        ``screen.fill(options.background)`` before, as a game draws its background.

        >>> import pygame, sandbox
        >>> world = sandbox.World()
        >>> cloth = sandbox.build_cloth(world, cols=10, rows=8, spacing=0.1)
        >>> screen = pygame.Surface((300, 300))
        >>> sandbox.DrawOptions(screen, scale=200, offset=(50, 50)).draw(world)
        >>> screen.get_at((46, 50))[:3]             # the pinned corner's red square
        (255, 86, 86)
        """
        view = world.view() if hasattr(world, "view") else world
        config = getattr(world, "config", None)
        box = getattr(config, "bounds", None)
        if self.bounds and box is not None:
            self._bounds(box)
        if self.shapes:
            for shape in view.shapes:
                try:
                    self._shape(shape)
                except (KeyError, TypeError, ValueError):
                    continue                       # a shape of another kind: skipped
        s = self.to_screen(view.x)
        finite = np.isfinite(s).all(axis=1)
        s = np.clip(np.where(finite[:, None], s, 0.0), -_LIMIT, _LIMIT)
        if self.links and len(view.link_i):
            self._links(view, s, finite)
        if self.springs and len(view.spring_i):
            self._lines(s, finite, view.spring_i, view.spring_j, self.spring, 1)
        if self.particles:
            self._particles(view, s, finite)
        if self.hand and len(view.held):
            self._hand(view, s, finite)

    # --- the parts ---------------------------------------------------------------------

    def _bounds(self, box) -> None:
        (x0, y1), (x1, y0) = np.clip(self.to_screen([[box[0], box[1]], [box[2], box[3]]]),
                                     -_LIMIT, _LIMIT)
        rect = pygame.Rect(int(x0) - 1, int(y0) - 1, int(x1 - x0) + 2, int(y1 - y0) + 2)
        pygame.draw.rect(self.surface, self.wall, rect, 1)

    def _links(self, view, s: np.ndarray, finite: np.ndarray) -> None:
        i, j = np.asarray(view.link_i), np.asarray(view.link_j)
        width = 2 if len(i) < 3000 else 1
        if not self.strain_colours:
            self._lines(s, finite, i, j, self.link_colour, width)
            return
        bins = np.digitize(view.strain(), STRAIN_EDGES)      # 0 .. nb - 1
        nb = len(STRAIN_EDGES) + 1
        group = (np.asarray(view.link_kind) == 1) * nb + bins  # rope links: row 1
        # The most strained on top: groups in order of their distance from "at rest".
        for g in sorted(np.unique(group).tolist(), key=lambda g: abs(g % nb - NEUTRAL_BIN)):
            sel = group == g
            self._lines(s, finite, i[sel], j[sel], STRAIN_RGB[g // nb][g % nb], width)

    def _lines(self, s, finite, i, j, colour: Colour, width: int) -> None:
        ok = finite[i] & finite[j]
        line = pygame.draw.line
        surface = self.surface
        for ax, ay, bx, by in np.concatenate([s[i[ok]], s[j[ok]]], axis=1).tolist():
            line(surface, colour, (ax, ay), (bx, by), width)

    def _particles(self, view, s: np.ndarray, finite: np.ndarray) -> None:
        surface = self.surface
        r_px = mass_radius_px(view, self.scale)
        balls = (r_px >= 2.0) & finite
        dots = ~balls & finite
        n = len(view.x)
        if n <= 5000 and dots.any():
            size = 3 if n <= 1500 else 2
            fill, colour = surface.fill, self.particle
            for x, y in s[dots].tolist():
                fill(colour, (int(x) - size // 2, int(y) - size // 2, size, size))
        circle = pygame.draw.circle
        for (x, y), r in zip(s[balls].tolist(), np.minimum(np.round(r_px[balls]), 60.0).tolist(),
                             strict=True):
            circle(surface, self.ball, (x, y), r)
        pinned = np.asarray(view.pinned) & finite
        for x, y in s[pinned].tolist():
            pygame.draw.rect(surface, self.pin, (int(x) - 4, int(y) - 4, 9, 9), 1)

    def _hand(self, view, s: np.ndarray, finite: np.ndarray) -> None:
        k = int(view.held[0])
        anchor = self.to_screen(view.anchors[0])
        if not (finite[k] and np.isfinite(anchor).all()):
            return
        a = tuple(s[k].tolist())
        b = tuple(np.clip(anchor, -_LIMIT, _LIMIT).tolist())
        pygame.draw.line(self.surface, self.grab, a, b, 2)
        pygame.draw.circle(self.surface, self.grab, b, 6, 2)
        pygame.draw.circle(self.surface, self.grab, a, 9, 2)
        pygame.draw.circle(self.surface, self.grab, a, 2)

    def _shape(self, shape) -> None:
        draw_shape(self.surface, shape, self.to_screen, self.scale, self.shape_fill,
                   self.shape_edge)

    def _px(self, point) -> tuple[int, int]:
        """One world point as whole pixels, clamped to what pygame takes."""
        x, y = np.clip(self.to_screen(np.asarray(point, float)), -_LIMIT, _LIMIT).tolist()
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError("not a finite point")
        return int(x), int(y)


def _get(shape, name: str, default: Any = KeyError) -> Any:
    """A field of a shape given as a dict (``world.shapes``) or an object."""
    if isinstance(shape, dict):
        if default is KeyError:
            return shape[name]
        return shape.get(name, default)
    if default is KeyError:
        return getattr(shape, name)
    return getattr(shape, name, default)


def mass_radius_px(view, scale: float) -> np.ndarray:
    """Each particle's drawn radius in px: its own radius; point masses of a small world
    whose masses differ (a planet and its moons) as discs growing with the mass,
    ``3 px * cbrt(m / m_min)``, at most 18 px. The window's renderer draws with it too."""
    r_px = np.asarray(view.radius, float) * scale
    points = r_px < 2.0
    if len(r_px) > 200 or not points.any():
        return r_px
    m = np.asarray(view.mass, float)[points]
    lo = m[m > 0].min(initial=np.inf)
    if not np.isfinite(lo) or m.max() < 2.0 * lo:
        return r_px
    out = r_px.copy()
    out[points] = np.clip(3.0 * np.cbrt(np.maximum(m, lo) / lo), 3.0, 18.0)
    return out


def _extent(world) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """The box ``((xmin, ymin), (xmax, ymax))`` m to show of a world: its bounds, else its
    particles and static shapes' points (None: nothing to show)."""
    bounds = getattr(getattr(world, "config", None), "bounds", None)
    if bounds is not None:
        return (bounds[0], bounds[1]), (bounds[2], bounds[3])
    view = world.view() if hasattr(world, "view") else world
    pts = [np.asarray(view.x, float).reshape(-1, 2)]
    for shape in view.shapes:
        for name in ("center", "a", "b", "min", "max", "points"):
            value = _get(shape, name, None)
            if value is not None:
                pts.append(np.asarray(value, float).reshape(-1, 2))
        if _get(shape, "type", None) == "circle":
            c, r = np.asarray(_get(shape, "center"), float), float(_get(shape, "radius"))
            pts.append(np.array([c - r, c + r]))
    p = np.concatenate(pts)
    p = p[np.isfinite(p).all(axis=1)]
    if not len(p):
        return None
    lo, hi = p.min(axis=0), p.max(axis=0)
    return (float(lo[0]), float(lo[1])), (float(hi[0]), float(hi[1]))


def draw_shape(surface: pygame.Surface, shape, to_screen, scale: float, fill, edge) -> None:
    """One static shape (a dict of ``world.shapes`` or an object with the level file's
    field names: ``type`` circle / segment / polygon / box) in ``fill`` with an ``edge``,
    ``to_screen`` mapping world points (m) to pixels, ``scale`` px a metre. The window's
    renderer draws its shapes with this too. ``KeyError`` / ``AttributeError`` /
    ``ValueError`` for a shape it cannot draw."""
    kind = _get(shape, "type", None) or _get(shape, "kind", None)

    def px(point) -> tuple[int, int]:
        x, y = np.clip(to_screen(np.asarray(point, float)), -_LIMIT, _LIMIT).tolist()
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ValueError("not a finite point")
        return int(x), int(y)

    if kind == "circle":
        r = max(int(round(float(_get(shape, "radius")) * scale)), 1)
        if r > 20000:
            return
        c = px(_get(shape, "center"))
        pygame.draw.circle(surface, fill, c, r)
        pygame.draw.circle(surface, edge, c, r, 2)
    elif kind == "segment":
        thickness = float(_get(shape, "thickness", 0.0) or 0.0)
        w = min(max(int(round(2 * thickness * scale)), 2), 2000)
        pygame.draw.line(surface, edge, px(_get(shape, "a")), px(_get(shape, "b")), w)
    elif kind in ("polygon", "box"):
        if kind == "box":
            (x0, y0), (x1, y1) = _get(shape, "min"), _get(shape, "max")
            pts = [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
        else:
            pts = _get(shape, "points")
        radius = float(_get(shape, "radius", 0.0) or 0.0) if kind == "box" else 0.0
        if radius > 0:
            (ax, ay), (bx, by) = px((x0, y1)), px((x1, y0))
            rect = pygame.Rect(ax, ay, max(bx - ax, 1), max(by - ay, 1))
            rad = min(int(round(radius * scale)), rect.w // 2, rect.h // 2)
            pygame.draw.rect(surface, fill, rect, border_radius=rad)
            pygame.draw.rect(surface, edge, rect, 2, border_radius=rad)
            return
        scr = [px(p) for p in pts]
        pygame.draw.polygon(surface, fill, scr)
        pygame.draw.polygon(surface, edge, scr, 2)
