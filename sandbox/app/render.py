"""Drawing a world: metre grid, walls, static shapes, a level's names of its bodies,
links coloured by strain, ropes, springs, particles, pins, the grabbed particle, and a
translucent ghost world.

Everything numerous is drawn batched through :mod:`sandbox.app.raster`: with numba, one
compiled call bins every link's strain (the view's) into a colour, orders the links
(most strained on top) and writes their pixels from the points mapped to the screen
once; without numba the same pixels come from a few numpy broadcasts. Only things that are few
by nature (grid lines, walls, shapes, the cut path) use ``pygame.draw``.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pygame

from ..draw import draw_shape, mass_radius_px
from ..sim.view import WorldView
from . import raster
from .camera import Camera

BACKGROUND = (18, 20, 27)
OUTSIDE = (11, 12, 16)              # beyond the world's bounds
GRID = (30, 33, 43)
AXIS = (44, 48, 62)
WALL = (120, 128, 150)
SHAPE_FILL = (54, 60, 78)
SHAPE_EDGE = (130, 140, 165)
PARTICLE = (225, 228, 236)
BALL = (200, 208, 226)
PIN = (255, 86, 86)
GRAB = (255, 220, 60)
SPRING = (110, 215, 140)
GHOST = (255, 80, 220)              # = hud.GHOST_COLOUR: strong against the dark
GHOST_KEY = (255, 0, 255)           # colour key of the ghost layer: transparent
CUT = (255, 70, 70)
REFERENCE = (120, 124, 134)          # the ensemble's reference: faint grey rings
LABEL = (196, 204, 224)              # a level's names of its bodies
LABEL_GAP = 6                        # px between a label and the body it names

#: Strain bin edges (relative stretch): compressed <- | neutral | -> stretched.
STRAIN_EDGES = np.array([-0.02, -0.005, -0.001, 0.001, 0.005, 0.02, 0.05])
NEUTRAL_BIN = 3
#: One colour per bin; row 0 sticks, row 1 rope links (tan when neutral, ropes never
#: push so they have no compressed colours).
STRAIN_RGB = [
    [(60, 110, 255), (95, 150, 255), (150, 190, 250), (185, 190, 205), (245, 225, 110),
     (255, 160, 60), (255, 70, 50), (255, 40, 200)],
    [(190, 150, 95), (190, 150, 95), (190, 150, 95), (190, 150, 95), (245, 225, 110),
     (255, 160, 60), (255, 70, 50), (255, 40, 200)],
]
STRAIN_LABELS = ["< -2%", "-0.5%", "-0.1%", "±0.1%", "+0.5%", "+2%", "+5%", "> 5%"]


def strain_bins(strain: np.ndarray) -> np.ndarray:
    """Bin index ``0..7`` of each link's relative stretch."""
    return np.digitize(strain, STRAIN_EDGES)


def nice_step(span: float, target: int = 12) -> float:
    """A 1-2-5 grid spacing giving about ``target`` lines across ``span``."""
    if not (span > 0 and math.isfinite(span)):
        return 1.0
    raw = span / target
    mag = 10.0 ** math.floor(math.log10(raw))
    for m in (1.0, 2.0, 5.0, 10.0):
        if raw <= m * mag:
            return m * mag
    return 10.0 * mag


def body_label_rects(cam: Camera, labels, sizes, view: WorldView,
                     x: np.ndarray | None = None, last: dict | None = None,
                     area: pygame.Rect | None = None) -> list[pygame.Rect | None]:
    """Where each of a level's body labels goes on the screen (px), for ``labels`` of
    ``(particle indices, label_at or None)`` and their text's ``sizes``: centred on
    ``label_at``; else centred above the body's pinned particles (a pivot, a bridge's
    anchors: they stay put, so the label does too); else, for a body free to go
    anywhere, beside it where it is: above it (centred, then flush with its left or
    right side), below it, at its left or right, or a row higher above it, the first
    place that no particle reaches into and no label placed before lies on (the one
    fewest reach into when none is clear). ``last`` (label -> place, kept by
    the caller) keeps the place chosen before while it stays clear, so a label does not
    hop. Every place keeps ``LABEL_GAP`` px clear of the drawn discs and is moved
    sideways into ``area`` (the scene's free part of the window; a place above or below
    it is passed over). None: nothing to place it by (no particles, or not finite)."""

    def inside(r: pygame.Rect) -> pygame.Rect:
        if area is not None and r.w <= area.w:
            r.x = min(max(r.x, area.left), area.right - r.w)
        return r

    x = view.x if x is None else x
    pinned = np.asarray(view.pinned, bool)
    r_px = drawn_radii(view, cam.scale)
    every = cam.to_screen(x)
    ok = np.isfinite(every).all(axis=1)
    every, every_r = every[ok], r_px[ok]
    out: list[pygame.Rect | None] = []
    for k, ((idx, at), (w, h)) in enumerate(zip(labels, sizes, strict=True)):
        rect = pygame.Rect(0, 0, w, h)
        if at is not None:
            c = cam.to_screen(np.asarray(at, float))
            if not np.isfinite(c).all():
                out.append(None)
                continue
            rect.center = (int(round(c[0])), int(round(c[1])))
            out.append(inside(rect))
            continue
        idx = np.asarray(idx, np.int64)
        idx = idx[idx < len(x)]
        held = idx[pinned[idx]]
        use = held if len(held) else idx
        pts = cam.to_screen(x[use]) if len(use) else np.zeros((0, 2))
        fine = np.isfinite(pts).all(axis=1)
        if not fine.any():
            out.append(None)
            continue
        pts, r = pts[fine], r_px[use][fine]
        left = int(math.floor(float(np.min(pts[:, 0] - r))))
        right = int(math.ceil(float(np.max(pts[:, 0] + r))))
        top = int(math.floor(float(np.min(pts[:, 1] - r))))
        bottom = int(math.ceil(float(np.max(pts[:, 1] + r))))
        centre = int(round(float(pts[:, 0].min() + pts[:, 0].max()) / 2))
        g = LABEL_GAP
        if len(held):                                   # pinned: above, where it stays
            rect.midbottom = (centre, top - g)
            out.append(inside(rect))
            continue
        middle = (top + bottom) // 2
        high = top - g - h - g                          # a row higher still
        places = [dict(midbottom=(centre, top - g)), dict(bottomleft=(left, top - g)),
                  dict(bottomright=(right, top - g)), dict(midtop=(centre, bottom + g)),
                  dict(midright=(left - g, middle)), dict(midleft=(right + g, middle)),
                  dict(midbottom=(centre, high)), dict(bottomleft=(left, high)),
                  dict(bottomright=(right, high))]
        rects = [pygame.Rect(0, 0, w, h) for _ in places]
        for r_, place in zip(rects, places, strict=True):
            for name, value in place.items():
                setattr(r_, name, value)
            inside(r_)
        placed = [o for o in out if o is not None]
        costs = [_label_cost(r_, every, every_r, placed)
                 + (1000 if area is not None and not area.contains(r_) else 0)
                 for r_ in rects]
        best = next((i for i, c in enumerate(costs) if c == 0), int(np.argmin(costs)))
        if last is not None:
            before = last.get(k)
            if before is not None and before < len(costs) and costs[before] == 0:
                best = before
            last[k] = best
        out.append(rects[best])
    return out


def reach_into(rect: pygame.Rect, centres: np.ndarray, radii) -> np.ndarray:
    """Which discs (``centres (n, 2)`` px, ``radii`` px) reach into ``rect``: those
    whose nearest point of the rectangle lies inside the disc. A label is tested with
    its rect grown 2 px each way, so text never touches a ball (the ghost's label was
    placed by the balls' centres alone, and lay over the cradle's balls)."""
    nx = np.clip(centres[:, 0], rect.left, rect.right)
    ny = np.clip(centres[:, 1], rect.top, rect.bottom)
    return np.hypot(centres[:, 0] - nx, centres[:, 1] - ny) < radii


def drawn_radii(view: WorldView, scale: float) -> np.ndarray:
    """Each particle's drawn size as a disc (px): its own disc, a pin's square, at least
    a dot."""
    pinned = np.asarray(view.pinned, bool)
    return np.maximum(mass_radius_px(view, scale), np.where(pinned, 4.0, 1.5))


def _label_cost(rect: pygame.Rect, centres: np.ndarray, radii: np.ndarray,
                placed: list[pygame.Rect]) -> int:
    """What a label at ``rect`` would lie on: the particles whose drawn disc reaches
    into it (2 px around it), and 100 for each label already there."""
    hits = int(np.count_nonzero(reach_into(rect.inflate(4, 4), centres, radii)))
    return hits + 100 * sum(rect.colliderect(o) for o in placed)


def camera_view(cam: Camera) -> tuple[float, ...]:
    """The camera as :mod:`raster`'s ``view`` floats ``(hx, hy, cx, cy, kx, ky)``: the
    same arithmetic as ``Camera.to_screen``, one coordinate at a time."""
    half = cam.half
    return (float(half[0]), float(half[1]), float(cam.center[0]), float(cam.center[1]),
            cam.scale * 1.0, cam.scale * -1.0)


class WorldRenderer:
    """Draws worlds onto a 32-bit surface; keeps the ghost layer between frames.

    ``backend`` is raster's, one of ``sim.backend.BACKENDS``: "auto" (the compiled
    kernels when numba can run), "compiled" or "numpy" (the reference; both light the
    same pixels in the same colours).
    """

    @staticmethod
    def warm_up() -> None:
        """Compile or load the drawing kernels now rather than on the first frame."""
        raster.warm_up()

    def __init__(self, backend: str = "auto") -> None:
        self.backend = backend
        self._ghost_layer: pygame.Surface | None = None
        self._mapped: dict[tuple, int] = {}
        self._format_of: object = None
        self._label_cache: dict[tuple[int, str], pygame.Surface] = {}
        self._label_places: dict[int, int] = {}     # label -> the place it was drawn at
        self.dot = raster.square_offsets(1)            # 3 x 3 particle
        self.small_dot = np.array([[0, 0], [1, 0], [0, 1], [1, 1]])
        self.pin = raster.square_offsets(4, hollow=True)
        self.grab = np.concatenate([raster.ring_offsets(9.0, 2.0), raster.disc_offsets(2.5)])

    # --- colours --------------------------------------------------------------------

    def _map(self, surface: pygame.Surface, rgb) -> int:
        key = (surface.get_bitsize(), surface.get_masks(), tuple(rgb))
        c = self._mapped.get(key)
        if c is None:
            c = self._mapped[key] = surface.map_rgb(rgb)
        return c

    def _strain_table(self, surface) -> np.ndarray:
        return np.array([[self._map(surface, c) for c in row] for row in STRAIN_RGB],
                        dtype=np.uint32)

    # --- the scene ------------------------------------------------------------------

    def background(self, surface: pygame.Surface, cam: Camera, bounds=None) -> None:
        """Fill, shade outside the bounds, draw the metre grid and the walls."""
        w, h = surface.get_size()
        surface.fill(BACKGROUND)
        box = None
        if bounds is not None:
            (x0, y1), (x1, y0) = cam.to_screen([[bounds[0], bounds[1]], [bounds[2], bounds[3]]])
            box = _rect(x0, y0, x1, y1, w, h)
            if box is None:
                surface.fill(OUTSIDE)
            else:                               # the four strips around the box
                for strip in ((0, 0, w, box.top), (0, box.bottom, w, h - box.bottom),
                              (0, box.top, box.left, box.h),
                              (box.right, box.top, w - box.right, box.h)):
                    if strip[2] > 0 and strip[3] > 0:
                        surface.fill(OUTSIDE, strip)
        step = nice_step(cam.view_width)
        (wx0, wy1), (wx1, wy0) = cam.to_world([[0, 0], [w, h]])
        # Every grid line's screen coordinate in one to_screen call (the same float64
        # operations as one call per line; rint rounds half to even as round() does).
        kx = np.arange(math.floor(wx0 / step), math.ceil(wx1 / step) + 1)
        ky = np.arange(math.floor(wy0 / step), math.ceil(wy1 / step) + 1)
        pts = np.zeros((len(kx) + len(ky), 2))
        pts[:len(kx), 0] = kx * step
        pts[len(kx):, 1] = ky * step
        scr = np.rint(cam.to_screen(pts))
        for k, sx in zip(kx.tolist(), scr[:len(kx), 0].tolist(), strict=True):
            pygame.draw.line(surface, AXIS if k == 0 else GRID, (int(sx), 0), (int(sx), h))
        for k, sy in zip(ky.tolist(), scr[len(kx):, 1].tolist(), strict=True):
            pygame.draw.line(surface, AXIS if k == 0 else GRID, (0, int(sy)), (w, int(sy)))
        if bounds is not None and box is not None:
            pygame.draw.rect(surface, WALL, box.inflate(2, 2), 1)

    def shapes(self, surface: pygame.Surface, cam: Camera, shapes) -> None:
        """Static shapes, duck-typed: objects or dicts with a ``type`` (or ``kind``) of
        circle / segment / polygon / box and the level file's field names."""
        for s in shapes or ():
            try:
                draw_shape(surface, s, cam.to_screen, cam.scale, SHAPE_FILL,
                           SHAPE_EDGE)
            except (AttributeError, KeyError, TypeError, ValueError):
                continue                                # an unknown shape: skip it

    def world(self, surface: pygame.Surface, cam: Camera, view: WorldView,
              x: np.ndarray | None = None) -> dict:
        """Links, springs, particles, pins and the hand of a world's read-only ``view``
        drawn at positions ``x (n, 2)`` m (interpolated by the caller; default the
        view's own). The links are coloured by the strain the core computed for the view
        (true positions). Returns the samples taken and the links' strain."""
        x = view.x if x is None else x
        cview = camera_view(cam)
        backend = self.backend
        # (H, W) view of the pixels, C-contiguous for 32 bpp; it locks the surface until
        # this function returns.
        pix = pygame.surfarray.pixels2d(surface).T
        if not pix.flags.c_contiguous:                  # pragma: no cover - odd pitch
            raise ValueError("surface rows are padded")
        samples = 0
        strain = None
        m = len(view.link_i)
        if m:
            # Strain of the true positions; the most strained links are drawn last (on top).
            strain = view.strain()
            width = 2 if m < 3000 else 1
            samples += raster.strain_links(
                pix, x, view.link_i, view.link_j, view.link_kind, strain, STRAIN_EDGES,
                self._strain_table(surface), NEUTRAL_BIN, cview, width, backend)
        if len(view.spring_i):
            samples += raster.links(pix, x, view.spring_i, view.spring_j,
                                    self._map(surface, SPRING), cview, backend=backend)
        n = view.n
        r_px = mass_radius_px(view, cam.scale)
        balls = r_px >= 2.0
        if n <= 5000 and not balls.all():
            raster.stamp(pix, cam.to_screen(x[~balls]),
                         self.dot if n <= 1500 else self.small_dot,
                         self._map(surface, PARTICLE), backend)
        if balls.any():
            self._balls(pix, cam.to_screen(x[balls]), r_px[balls], self._map(surface, BALL))
        raster.stamp(pix, cam.to_screen(x[view.pinned]), self.pin, self._map(surface, PIN),
                     backend)
        raster.stamp(pix, cam.to_screen(x[view.held[:1]]), self.grab,
                     self._map(surface, GRAB), backend)
        # No links: an empty strain (not None), which the HUD's error line reads as such.
        return {"samples": samples, "strain": strain if strain is not None else np.zeros(0)}

    def _balls(self, pix, s, r_px, colour, filled: bool = True) -> None:
        """Particles with a visible radius, grouped by radius in whole pixels."""
        if not len(s):
            return
        r = np.minimum(np.round(r_px), 60.0)
        for radius in np.unique(r):
            offs = _offsets(float(radius), filled)
            raster.stamp(pix, s[r == radius], offs, colour, self.backend)

    def hand(self, surface: pygame.Surface, cam: Camera, view: WorldView,
             x: np.ndarray | None = None) -> None:
        """The mouse spring while dragging: a line from the held particle to the cursor
        (where the spring pulls it), and a ring at the cursor."""
        if not len(view.held):
            return
        x = view.x if x is None else x
        a = cam.to_screen(x[view.held[0]])
        b = cam.to_screen(view.anchors[0])
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            return
        a, b = _clamp_px(a), _clamp_px(b)
        pygame.draw.line(surface, GRAB, a, b, 2)
        pygame.draw.circle(surface, GRAB, b, 6, 2)

    def ghost(self, surface: pygame.Surface, cam: Camera, view: WorldView,
              x: np.ndarray | None = None, alpha: int = 110) -> None:
        """The ghost world's links and balls, one colour, blended over ``surface``."""
        x = view.x if x is None else x
        size = surface.get_size()
        if self._ghost_layer is None or self._ghost_layer.get_size() != size:
            self._ghost_layer = pygame.Surface(size, 0, 32)
            self._ghost_layer.set_colorkey(GHOST_KEY)
        layer = self._ghost_layer
        layer.fill(GHOST_KEY)
        layer.set_alpha(alpha)
        self._ghost_pixels(layer, cam, view, x)      # the pixel lock ends with the call
        surface.blit(layer, (0, 0))

    def ensemble(self, surface: pygame.Surface, cam: Camera, members, reference=None
                 ) -> None:
        """Every integrator's copy of the world, each ``(view, x, rgb)`` in its own
        colour, over the reference ``(view, x)`` drawn as grey rings and lines, straight
        onto ``surface`` (no blended layer: its fill and blit of the whole window cost
        ~2 ms a frame, and the ensemble runs on small levels only)."""
        if reference is not None:
            self._ghost_pixels(surface, cam, reference[0], reference[1], REFERENCE,
                               filled=False)
        for view, x, rgb in members:
            self._ghost_pixels(surface, cam, view, x, rgb)

    def _ghost_pixels(self, layer: pygame.Surface, cam: Camera, view: WorldView,
                      x, rgb=GHOST, filled: bool = True) -> None:
        cview = camera_view(cam)
        colour = self._map(layer, rgb)
        pix = pygame.surfarray.pixels2d(layer).T
        if len(view.link_i):
            raster.links(pix, x, view.link_i, view.link_j, colour, cview,
                         backend=self.backend)
        if len(view.spring_i):
            raster.links(pix, x, view.spring_i, view.spring_j, colour, cview,
                         backend=self.backend)
        r_px = mass_radius_px(view, cam.scale)
        balls = r_px >= 2.0
        if not filled:                     # rings just outside the discs drawn over them
            r_px = np.where(balls, r_px + 3.0, r_px)
        if balls.any():
            self._balls(pix, cam.to_screen(x[balls]), r_px[balls], colour, filled)
        if not len(view.link_i) and view.n <= 5000 and not balls.all():
            raster.stamp(pix, cam.to_screen(x[~balls]), self.dot, colour, self.backend)

    def labels(self, surface: pygame.Surface, cam: Camera, font: pygame.font.Font,
               labels, view: WorldView, x: np.ndarray | None = None,
               area: pygame.Rect | None = None) -> list[pygame.Rect | None]:
        """A level's body labels, ``(text, particle indices, label_at or None)`` each,
        where :func:`body_label_rects` puts them (inside ``area``); drawn before the
        bodies, so a body passing covers the words and never the other way round.
        Returns the rects."""
        texts = [self._label_text(font, text) for text, _, _ in labels]
        rects = body_label_rects(cam, [(idx, at) for _, idx, at in labels],
                                 [t.get_size() for t in texts], view, x, self._label_places,
                                 area)
        for t, r in zip(texts, rects, strict=True):
            if r is not None:
                surface.blit(t, r.topleft)
        return rects

    def _label_text(self, font: pygame.font.Font, text: str) -> pygame.Surface:
        key = (id(font), text)
        made = self._label_cache.get(key)
        if made is None:
            if len(self._label_cache) > 64:
                self._label_cache.clear()
            made = self._label_cache[key] = font.render(text, True, LABEL)
        return made

    def cut_path(self, surface: pygame.Surface, points_px) -> None:
        if len(points_px) >= 2:
            pygame.draw.lines(surface, CUT, False, [tuple(map(int, q)) for q in points_px], 2)


@functools.lru_cache(maxsize=256)
def _offsets(radius: float, filled: bool) -> np.ndarray:
    """A disc's (or a ring's) pixel offsets, made once per radius in whole pixels: the
    ensemble draws ten copies of the same balls a frame (1.2 ms a frame made anew)."""
    return raster.disc_offsets(radius) if filled else raster.ring_offsets(radius, 1.5)


def _rect(x0, y0, x1, y1, w, h) -> pygame.Rect | None:
    """The screen rectangle between two corners, clamped to the window (None if empty)."""
    lo_x, hi_x = max(min(x0, x1), -1), min(max(x0, x1), w + 1)
    lo_y, hi_y = max(min(y0, y1), -1), min(max(y0, y1), h + 1)
    if not (hi_x > lo_x and hi_y > lo_y):
        return None
    return pygame.Rect(int(lo_x), int(lo_y), int(math.ceil(hi_x - lo_x)),
                       int(math.ceil(hi_y - lo_y)))


def _clamp_px(pt) -> tuple[int, int]:
    return (int(np.clip(pt[0], -1e5, 1e5)), int(np.clip(pt[1], -1e5, 1e5)))
