"""Debug draw (issue 37): what the contact solver and the broad phase see, on request.

Four layers, each on or off by itself, any of them at once (as Box2D's samples and
Matter.js's render options have them): each has a key (Alt+1 to Alt+4) and a checkbox in
the panel's "▸ debug draw" section, and X turns the overlay off and back on with the
layers last chosen (the contacts, the first time). The state is the set of layers on
(``Session.debug_layers``, recorded in replays as the graph's choice is); they are drawn
in one order whatever the order they were chosen in (the boxes under the rest, the link
forces' text on top), each with one legend line at the scene's top left while it is on,
and nothing is drawn while none is.

- **contacts**: each particle touching a wall, a static shape or (``collide_particles``)
  another particle, as a dot where they touch and a short line along the normal. The
  core keeps no record of the last substep's contacts that the app may read, so they are
  found here from the world's public geometry: each shape set's ``distance(p, s)``
  (``(d, q, n)``: gap, closest point, normal), the walls of ``config.bounds`` and the
  particles' radii, within ``slack`` m of touching. Refused above ``MAX_PARTICLES``.
- **corrections**: how far the contact solver moved each particle in the last substep
  (``World.contact_corrections``: out of the floor, a shape, another ball, the sweep's
  cut at a time of impact, static friction), as an arrow from the particle along the
  correction, at most ``ARROW_MAX_PX`` long, on a scale that holds whatever the zoom and
  that the legend says (:func:`arrow_scale`). A ball resting on a floor is pushed up
  ``g hs^2`` each substep of ``hs``: 2.7 mm at 60 Hz, 0.04 mm in each of 8 substeps, so
  the scale goes with the substep: 10 px a mm (1 mm plainly seen) at one substep of
  1/60 s, 500 for the pile's 8 and 2000 for the cradle's 20, the resting contacts'
  arrows 10 to 27 px long in each.
- **boxes**: the broad phase's bounding boxes: every static shape's (``aabb()``), every
  particle's with a radius (``x +- r``); under them, faintly, the cells of the shape
  grid the broad phase looks particles up in that hold a shape
  (``Colliders.grid_cells``).
- **link forces**: each spring's force ``k (L - rest)`` in N and each rigid link's
  strain in %, written at its middle (at most ``MAX_LABELS`` of them; the strain
  colours of every link stay as they are).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import pygame

from ..replay import DEBUG_LAYERS

#: The layers, in the order of their keys, checkboxes and legend lines.
LAYERS = DEBUG_LAYERS
#: The order they are drawn in: the boxes and the grid under the rest, text on top.
DRAW_ORDER = ("boxes", "contacts", "corrections", "link forces")
#: The layer drawn when X turns the overlay on before any layer was chosen.
FIRST = frozenset({"contacts"})
#: What each checkbox of the panel says.
CHECKBOX_TEXT = {"contacts": "contacts, normals", "corrections": "corrections (arrows)",
                 "boxes": "bounding boxes, grid", "link forces": "link forces"}
MAX_PARTICLES = 3000
MAX_PAIRS = 400_000
MAX_LABELS = 40
CONTACT = (255, 90, 90)
NORMAL = (255, 200, 200)
BOX = (90, 200, 255)
GRID = (44, 72, 92)              # the shape grid's cells' edges: faint, under the world
GRID_TINT = (6, 14, 22)          # ... and their inside, added (the metre grid shows through)
MAX_CELLS = 20_000               # grid cells drawn at most (those in the window)
LABEL = (230, 230, 160)
ARROW = (255, 170, 60)
#: The corrections' arrows: the fewest px a mm of correction (1 mm always plainly seen),
#: the longest arrow drawn (longer corrections are drawn this long), the shortest, and
#: the legend's arrow.
ARROW_PX_PER_MM = 10.0
ARROW_MAX_PX = 80.0
ARROW_MIN_PX = 1.0
LEGEND_PX = 20
#: m/s^2: the scale's gravity (a world without gravity gets the same scale).
G_SCALE = 9.81


def contacts(world, slack: float) -> tuple[np.ndarray, np.ndarray]:
    """``(points (k, 2), normals (k, 2))`` of the contacts of ``world`` now (see the
    module docstring): particles within ``slack`` m of a wall, a shape or each other."""
    p = world.particles
    x, r = p.x, p.radius
    pts, nrm = [], []
    movable = np.flatnonzero(p.inv_mass > 0)
    xm, rm = x[movable], r[movable]
    for shapes in world.colliders.sets.values():
        k = len(shapes)
        if not k or not len(xm) or len(xm) * k > MAX_PAIRS:
            continue
        pi = np.repeat(np.arange(len(xm)), k)
        si = np.tile(np.arange(k), len(xm))
        d, q, n = shapes.distance(xm[pi], si)
        hit = d <= rm[pi] + slack
        pts.append(q[hit])
        nrm.append(n[hit])
    b = world.config.bounds
    if b is not None and len(xm):
        xmin, ymin, xmax, ymax = b
        for axis, wall, sign in ((0, xmin, 1), (0, xmax, -1), (1, ymin, 1), (1, ymax, -1)):
            gap = sign * (xm[:, axis] - wall) - rm
            hit = gap <= slack
            q = xm[hit].copy()
            q[:, axis] = wall
            n = np.zeros_like(q)
            n[:, axis] = sign
            pts.append(q)
            nrm.append(n)
    if world.config.collide_particles and 1 < len(x) <= MAX_PARTICLES:
        i, j = np.triu_indices(len(x), 1)
        if len(i) <= MAX_PAIRS * 4:
            dx = x[j] - x[i]
            dist = np.hypot(dx[:, 0], dx[:, 1])
            hit = (dist <= r[i] + r[j] + slack) & (dist > 0) & (r[i] + r[j] > 0)
            n = dx[hit] / dist[hit, None]
            pts.append(x[i][hit] + n * r[i][hit, None])
            nrm.append(-n)                                # on i, pushing it away from j
    if not pts:
        return np.zeros((0, 2)), np.zeros((0, 2))
    return np.concatenate(pts), np.concatenate(nrm)


#: The scales :func:`arrow_scale` picks from (px a mm): 1, 2, 5 times a power of ten.
SCALES = tuple(m * 10.0 ** k for k in range(1, 10) for m in (1, 2, 5))


def arrow_scale(world) -> float:
    """px a mm of correction for ``world``'s arrows: the least of :data:`SCALES` (at
    least ``ARROW_PX_PER_MM``) that draws ``g hs^2``, what a resting contact takes each
    substep of the world's last ``hs``, 10 px long or more (10 to 25 px): 10 px/mm at
    one substep of 1/60 s (2.7 mm: 27 px), 500 at 8 substeps (0.043 mm: 21 px), 2000 at
    20. It changes only with the substep, so it holds from frame to frame."""
    hs = float(world.particles.h_prev)
    rest_mm = G_SCALE * hs * hs * 1e3
    if not (math.isfinite(rest_mm) and rest_mm > 0):
        return ARROW_PX_PER_MM
    return next((s for s in SCALES if s * rest_mm >= 10.0), SCALES[-1])


def correction_arrows(world, cam, px_per_mm: float | None = None
                      ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(tails (k, 2), heads (k, 2))`` px of the corrections' arrows: from each particle
    the contact solver moved in the last substep, along its correction, ``px_per_mm``
    px a mm (None: :func:`arrow_scale`) and at most ``ARROW_MAX_PX`` long; none under
    ``ARROW_MIN_PX``; the ``MAX_PARTICLES`` longest. None when no substep's contacts
    have run."""
    dx = world.contact_corrections()
    if dx is None:
        return None
    scale = arrow_scale(world) if px_per_mm is None else px_per_mm
    x = world.particles.x
    n = min(len(dx), len(x))
    dx = dx[:n]
    size = np.hypot(dx[:, 0], dx[:, 1])
    px = size * 1000.0 * scale
    moved = np.flatnonzero(px >= ARROW_MIN_PX)
    if moved.size > MAX_PARTICLES:
        moved = moved[np.argsort(-px[moved], kind="stable")[:MAX_PARTICLES]]
    tails = cam.to_screen(np.asarray(x[moved], float))
    length = np.minimum(px[moved], ARROW_MAX_PX)
    along = dx[moved] / size[moved, None] * np.array([1.0, -1.0])     # y down on screen
    return tails, tails + along * length[:, None]


def _arrow(surface: pygame.Surface, tail, head, colour) -> None:
    """A line from ``tail`` to ``head`` (px) with a head of two strokes if it is long
    enough to carry one."""
    pygame.draw.line(surface, colour, tail, head, 2)
    d = np.subtract(head, tail, dtype=float)
    L = float(np.hypot(*d))
    if L < 6.0:
        return
    u = d / L
    side = np.array([-u[1], u[0]])
    back = np.asarray(head, float) - u * min(6.0, L / 2)
    for s in (1.0, -1.0):
        tip = back + side * 3.5 * s
        pygame.draw.line(surface, colour, head, (round(tip[0]), round(tip[1])), 2)


def legend_text(px_per_mm: float) -> str:
    """What the legend's arrow of ``LEGEND_PX`` px stands for at ``px_per_mm``."""
    return (f"= {LEGEND_PX / px_per_mm:g} mm: the contacts' corrections in the last "
            f"substep (longer than {ARROW_MAX_PX / px_per_mm:g} mm: cut short)")


def _legend_words(surface: pygame.Surface, font, text: str, colour, x: int, y: int,
                  width: int | None) -> pygame.Rect:
    """``text`` at ``(x, y)`` px, wrapped to ``width`` px (None: one line); its rect."""
    from .hud import wrap_text
    lines = [text] if width is None else wrap_text(font, text, width)
    rect = pygame.Rect(x, y, 0, 0)
    for line in lines:
        img = font.render(line, True, colour)
        rect.union_ip(surface.blit(img, (x, rect.bottom)))
    return rect


def correction_legend(surface: pygame.Surface, font, at, px_per_mm: float,
                      width: int | None = None) -> pygame.Rect:
    """The scale of the corrections' arrows at ``at`` (px, top left): an arrow of
    ``LEGEND_PX`` and the length it stands for, in ``width`` px (None: one line).
    Returns the rect it took."""
    return _legend_line(surface, font, "corrections", at, legend_text(px_per_mm), width)


def boxes(world) -> tuple[np.ndarray, np.ndarray]:
    """``(lo (k, 2), hi (k, 2))``: the static shapes' AABBs, then the particles' with a
    radius."""
    lo, hi = [], []
    for shapes in world.colliders.sets.values():
        if len(shapes):
            a, b = shapes.aabb()
            lo.append(a)
            hi.append(b)
    p = world.particles
    has_r = np.flatnonzero(p.radius > 0)[:MAX_PARTICLES]
    lo.append(p.x[has_r] - p.radius[has_r, None])
    hi.append(p.x[has_r] + p.radius[has_r, None])
    return np.concatenate(lo), np.concatenate(hi)


def grid_rects(world, cam, size) -> tuple[float, list[pygame.Rect]]:
    """``(cell m, rects px)``: the shape grid's cells that hold a shape and lie in a
    window of ``size`` px (at most ``MAX_CELLS``); ``(0.0, [])`` without shapes."""
    cell, cells = world.colliders.grid_cells()
    if not len(cells):
        return cell, []
    lo = cam.to_screen(cells * cell)                 # bottom left corners, y down
    hi = cam.to_screen((cells + 1) * cell)
    x0, x1 = np.minimum(lo[:, 0], hi[:, 0]), np.maximum(lo[:, 0], hi[:, 0])
    y0, y1 = np.minimum(lo[:, 1], hi[:, 1]), np.maximum(lo[:, 1], hi[:, 1])
    seen = (x1 >= 0) & (x0 <= size[0]) & (y1 >= 0) & (y0 <= size[1])
    seen = np.flatnonzero(seen)[:MAX_CELLS]
    box = np.clip(np.column_stack([x0, y0, x1, y1])[seen], -1e5, 1e5).round().astype(int)
    # Each cell one px wider and taller: side by side, they share their edges.
    return cell, [pygame.Rect(a, b, max(c - a, 1) + 1, max(d - b, 1) + 1)
                  for a, b, c, d in box.tolist()]


def link_labels(world) -> list[tuple[np.ndarray, str]]:
    """``[(middle (2,), text)]``: springs' force in N, rigid links' strain in %."""
    x = world.particles.x
    out: list[tuple[np.ndarray, str]] = []
    s = world.springs
    view = world.view()
    if len(s) + len(view.link_i) > MAX_LABELS:       # too many to read: none, not a few
        return out
    if len(s):
        d = x[s.j] - x[s.i]
        L = np.hypot(d[:, 0], d[:, 1])
        f = s.k * (L - s.rest)
        for a, b, fk in zip(s.i, s.j, f, strict=True):
            out.append(((x[a] + x[b]) / 2, f"{fk:+.3g} N"))
    strain = view.strain()
    for a, b, e in zip(view.link_i, view.link_j, strain, strict=True):
        out.append(((x[a] + x[b]) / 2, f"{100 * e:+.2g}%"))
    return out


class Drawn(NamedTuple):
    """What :func:`draw` drew: ``counts`` the things each layer on drew (dots, arrows,
    boxes and grid cells, labels), ``notes`` why a layer drew nothing it should, the
    ``legend`` lines' layers in order and the rect they took (None: no line)."""

    counts: dict[str, int]
    notes: list[str]
    legend: list[str]
    legend_rect: pygame.Rect | None


def _pairs(a: np.ndarray, b: np.ndarray) -> list:
    return list(zip(np.clip(a, -1e5, 1e5).round().astype(int).tolist(),
                    np.clip(b, -1e5, 1e5).round().astype(int).tolist(), strict=True))


def _draw_contacts(surface, cam, world, font, seen: dict) -> tuple[int, str | None]:
    if world.n > MAX_PARTICLES:
        return 0, f"contacts: not above {MAX_PARTICLES} particles"
    q, n = contacts(world, cam.pixels_to_metres(2.0))
    if not len(q):
        return 0, None
    for p0, p1 in _pairs(cam.to_screen(q), cam.to_screen(q + n * cam.pixels_to_metres(14.0))):
        pygame.draw.line(surface, NORMAL, p0, p1, 1)
        pygame.draw.circle(surface, CONTACT, p0, 3)
    return len(q), None


def _draw_corrections(surface, cam, world, font, seen: dict) -> tuple[int, str | None]:
    scale = seen["scale"] = arrow_scale(world)
    arrows = correction_arrows(world, cam, scale)
    if arrows is None:
        return 0, ("corrections: none (no walls, shapes or colliding particles here)"
                   if not world.has_contacts else None)
    for p0, p1 in _pairs(*arrows):
        _arrow(surface, p0, p1, ARROW)
    return len(arrows[0]), None


def draw_grid(surface: pygame.Surface, cam, world) -> int:
    """The shape grid's cells that hold a shape, faintly (the boxes' layer draws it
    first; the window draws it under the shapes and particles); returns how many."""
    _, cells = grid_rects(world, cam, surface.get_size())
    for rect in cells:
        surface.fill(GRID_TINT, rect.inflate(-1, -1), special_flags=pygame.BLEND_RGB_ADD)
    for rect in cells:
        pygame.draw.rect(surface, GRID, rect, 1)
    return len(cells)


def _draw_grid(surface, cam, world, font, seen: dict) -> tuple[int, str | None]:
    return draw_grid(surface, cam, world), None


def _draw_boxes(surface, cam, world, font, seen: dict) -> tuple[int, str | None]:
    lo, hi = boxes(world)
    for (x0, y0), (x1, y1) in _pairs(cam.to_screen(lo), cam.to_screen(hi)):
        rect = pygame.Rect(min(x0, x1), min(y0, y1), max(abs(x1 - x0), 1),
                           max(abs(y1 - y0), 1))
        pygame.draw.rect(surface, BOX, rect, 1)
    return len(lo), None


def _draw_link_forces(surface, cam, world, font, seen: dict) -> tuple[int, str | None]:
    labels = link_labels(world)
    if not labels and (len(world.springs) or len(world.constraints)):
        seen["too many"] = True
        return 0, f"link forces: at most {MAX_LABELS} links"
    for mid, text in labels:
        s = font.render(text, True, LABEL)
        c = np.clip(cam.to_screen(mid[None])[0], -1e5, 1e5)
        surface.blit(s, (round(c[0] - s.get_width() / 2), round(c[1] - s.get_height() / 2)))
    return len(labels), None


_DRAW = {"grid": _draw_grid, "contacts": _draw_contacts, "corrections": _draw_corrections,
         "boxes": _draw_boxes, "link forces": _draw_link_forces}


def _legend_says(name: str, world, seen: dict) -> str:
    """The words of layer ``name``'s legend line."""
    if name == "corrections":
        return legend_text(seen["scale"])
    if name == "contacts":
        return "contacts: where a particle touches, and the normal"
    if name == "boxes":
        cell = world.colliders.grid_cells()[0]
        return "bounding boxes (broad phase)" + (
            f"; tinted: the shape grid's {cell:.2g} m cells that hold a shape" if cell else "")
    if not (len(world.springs) or len(world.constraints)):
        return "link forces: none here (no springs or links)"
    if seen.get("too many"):
        return f"link forces: none written, more than {MAX_LABELS} links here"
    return "link forces: a spring's force (N), a rigid link's strain (%)"


_LEGEND_COLOUR = {"contacts": NORMAL, "corrections": ARROW, "boxes": BOX,
                  "link forces": LABEL}


def _legend_line(surface, font, name: str, at, text: str, width: int | None) -> pygame.Rect:
    """Layer ``name``'s legend line at ``at`` (px, top left): a swatch of what it draws
    and ``text`` beside it, wrapped to ``width`` px in all (None: one line); returns
    the rect it took."""
    x, y = int(at[0]), int(at[1])
    mid = y + font.get_linesize() // 2
    if name == "corrections":
        _arrow(surface, (x, mid), (x + LEGEND_PX, mid), ARROW)
    elif name == "contacts":
        pygame.draw.line(surface, NORMAL, (x + 4, mid), (x + 4, mid - 8), 1)
        pygame.draw.circle(surface, CONTACT, (x + 4, mid), 3)
    elif name == "boxes":
        surface.fill(GRID_TINT, pygame.Rect(x + 6, mid - 7, 13, 13),
                     special_flags=pygame.BLEND_RGB_ADD)
        pygame.draw.rect(surface, GRID, pygame.Rect(x + 6, mid - 7, 13, 13), 1)
        pygame.draw.rect(surface, BOX, pygame.Rect(x, mid - 5, 12, 10), 1)
    else:
        pygame.draw.line(surface, LABEL, (x, mid), (x + LEGEND_PX, mid), 1)
    inner = None if width is None else max(width - LEGEND_PX - 6, 40)
    words = _legend_words(surface, font, text, _LEGEND_COLOUR[name], x + LEGEND_PX + 6, y,
                          inner)
    return pygame.Rect(x, y, words.right - x, max(words.h, 1))


def draw(surface: pygame.Surface, cam, world, layers, font,
         area: tuple[int, int, int, int] | None = None, grid: bool = True) -> Drawn:
    """Draw the ``layers`` of ``world`` (any of :data:`LAYERS`) in :data:`DRAW_ORDER`,
    and a legend line for each at the top left of ``area``, the scene's part of the
    window ``(x, y, w, h)`` px (None: the window). Nothing without layers. ``grid``:
    the boxes' layer draws the shape grid first (False: it was drawn under the world,
    :meth:`DebugDraw.draw_under`); its count is ``counts["grid"]``."""
    layers = frozenset(layers)
    if unknown := layers - set(LAYERS):
        raise ValueError(f"no debug layer {sorted(unknown)[0]!r}: the layers are "
                         f"{', '.join(LAYERS)}")
    counts: dict[str, int] = {}
    notes: list[str] = []
    seen: dict = {}
    for name in ("grid", *DRAW_ORDER) if grid else DRAW_ORDER:
        if (name == "grid" and "boxes" in layers) or name in layers:
            counts[name], note = _DRAW[name](surface, cam, world, font, seen)
            if note:
                notes.append(note)
    x0, y0, width = (area[0], area[1], area[2] - 16) if area is not None else (
        0, 0, None)
    legend = [name for name in LAYERS if name in layers]
    rect = None
    y = y0 + 4
    for name in legend:
        r = _legend_line(surface, font, name, (x0 + 8, y), _legend_says(name, world, seen),
                         width)
        rect = r if rect is None else rect.union(r)
        y = r.bottom + 2
    return Drawn(counts, notes, legend, rect)


def layer_keys() -> dict[str, str]:
    """Each layer's key as the help writes it (``"Alt+1"``), from the keymap."""
    from .keymap import KEYMAP, key_label
    return {b.arg: key_label(b) for b in KEYMAP if b.action == "toggle_debug_layer"}


def said(layers) -> str:
    """``"contacts + boxes"``: the layers in their order."""
    return " + ".join(n for n in LAYERS if n in layers)


class DebugDraw:
    """The overlay's commands (the app's table runs them: keys and checkboxes alike)
    and its drawing; the layers on are the session's (``Session.debug_layers``)."""

    def __init__(self, app) -> None:
        self.app = app
        self.last: frozenset[str] = FIRST       # what X turns back on
        self._note: str | None = None
        self.drawn: Drawn | None = None          # what the last frame drew (None: off)

    @property
    def layers(self) -> frozenset[str]:
        return self.app.session.debug_layers

    def _set(self, layers) -> None:
        layers = frozenset(layers)
        if layers:
            self.last = layers
        self.app.session.set_debug(layers)
        self._note = None
        if layers:
            keys = list(layer_keys().values())       # "Alt+1-4"
            each = f"{keys[0]}-{keys[-1].rsplit('+', 1)[-1]}" if keys else ""
            self.app.message(f"debug draw: {said(layers)} (X: off; {each}: each)")
        else:
            self.app.message(f"debug draw: off (X: {said(self.last)} again)")

    def toggle_all(self) -> None:
        """X: off, or back on with the layers last chosen."""
        self._set(() if self.layers else self.last)

    def toggle(self, name: str) -> None:
        """A layer's key: that layer on or off, the others as they are."""
        self.set((name, name not in self.layers))

    def set(self, arg: tuple[str, bool]) -> None:
        """A layer's checkbox: ``(name, on)``."""
        name, on = arg
        if name not in LAYERS:
            raise ValueError(f"no debug layer {name!r}: the layers are {', '.join(LAYERS)}")
        self._set(self.layers | {name} if on else self.layers - {name})

    def draw_under(self, surface: pygame.Surface, cam, world) -> int:
        """Under the shapes and particles: the shape grid while the boxes are on."""
        return draw_grid(surface, cam, world) if "boxes" in self.layers else 0

    def draw(self, surface: pygame.Surface, cam, world,
             area: tuple[int, int, int, int] | None) -> Drawn | None:
        """Over the world: the layers on (None: none; the grid was drawn under it); a
        layer that cannot draw says why, once."""
        self.drawn = None
        if not self.layers:
            return None
        drawn = self.drawn = draw(surface, cam, world, self.layers, self.app.fonts.small,
                                  area, grid=False)
        note = "; ".join(drawn.notes) or None
        if note and note != self._note:
            self.app.message(note)
        self._note = note
        return drawn
