"""Debug draw (issue 37): what the contact solver and the broad phase see, on request.

One key (X) cycles the overlays: off, contacts, corrections, bounding boxes, link
forces, off; the HUD's message says which is on, and nothing is drawn while it is off.

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
  that the legend at the scene's top left says (:func:`arrow_scale`). A ball resting on
  a floor is pushed up ``g hs^2`` each substep of ``hs``: 2.7 mm at 60 Hz, 0.04 mm in
  each of 8 substeps, so the scale goes with the substep: 10 px a mm (1 mm plainly
  seen) at one substep of 1/60 s, 500 for the pile's 8 and 2000 for the cradle's 20,
  the resting contacts' arrows 10 to 27 px long in each.
- **boxes**: the broad phase's bounding boxes: every static shape's (``aabb()``), every
  particle's with a radius (``x +- r``).
- **link forces**: each spring's force ``k (L - rest)`` in N and each rigid link's
  strain in %, written at its middle (at most ``MAX_LABELS`` of them; the strain
  colours of every link stay as they are).
"""

from __future__ import annotations

import math

import numpy as np
import pygame

MODES = ("off", "contacts", "corrections", "boxes", "link forces")
MAX_PARTICLES = 3000
MAX_PAIRS = 400_000
MAX_LABELS = 40
CONTACT = (255, 90, 90)
NORMAL = (255, 200, 200)
BOX = (90, 200, 255)
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


def correction_legend(surface: pygame.Surface, font, at, px_per_mm: float) -> pygame.Rect:
    """The scale of the corrections' arrows at ``at`` (px, top left): an arrow of
    ``LEGEND_PX`` and the length it stands for. Returns the rect it took."""
    text = font.render(legend_text(px_per_mm), True, ARROW)
    x, y = int(at[0]), int(at[1])
    mid = y + text.get_height() // 2
    _arrow(surface, (x, mid), (x + LEGEND_PX, mid), ARROW)
    surface.blit(text, (x + LEGEND_PX + 6, y))
    return pygame.Rect(x, y, LEGEND_PX + 6 + text.get_width(), text.get_height())


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


def link_labels(world) -> list[tuple[np.ndarray, str]]:
    """``[(middle (2,), text)]``: springs' force in N, rigid links' strain in %."""
    x = world.particles.x
    out = []
    s = world.springs
    if len(s):
        d = x[s.j] - x[s.i]
        L = np.hypot(d[:, 0], d[:, 1])
        f = s.k * (L - s.rest)
        for a, b, fk in zip(s.i, s.j, f, strict=True):
            out.append(((x[a] + x[b]) / 2, f"{fk:+.3g} N"))
    view = world.view()
    strain = view.strain()
    for a, b, e in zip(view.link_i, view.link_j, strain, strict=True):
        out.append(((x[a] + x[b]) / 2, f"{100 * e:+.2g}%"))
    return out[:MAX_LABELS] if len(out) <= MAX_LABELS else []


def draw(surface: pygame.Surface, cam, world, mode: str, font,
         area: tuple[int, int, int, int] | None = None) -> str | None:
    """Draw the overlay ``mode`` of ``world``; returns why nothing was drawn, or None.
    ``area``: the scene's part of the window ``(x, y, w, h)`` px, where a legend goes
    (its top left; None: the window's)."""
    if mode == "off":
        return None
    if mode == "corrections":
        scale = arrow_scale(world)
        arrows = correction_arrows(world, cam, scale)
        if arrows is None:
            return ("corrections: none (no walls, shapes or colliding particles here)"
                    if not world.has_contacts else None)
        x0, y0 = (area[0], area[1]) if area is not None else (0, 0)
        correction_legend(surface, font, (x0 + 8, y0 + 4), scale)
        for p0, p1 in zip(np.clip(arrows[0], -1e5, 1e5).round().astype(int).tolist(),
                          np.clip(arrows[1], -1e5, 1e5).round().astype(int).tolist(),
                          strict=True):
            _arrow(surface, p0, p1, ARROW)
        return None
    if mode == "contacts":
        if world.n > MAX_PARTICLES:
            return f"contacts: not above {MAX_PARTICLES} particles"
        q, n = contacts(world, cam.pixels_to_metres(2.0))
        if not len(q):
            return None
        a = cam.to_screen(q)
        b = cam.to_screen(q + n * cam.pixels_to_metres(14.0))
        for p0, p1 in zip(np.clip(a, -1e5, 1e5).round().astype(int).tolist(),
                          np.clip(b, -1e5, 1e5).round().astype(int).tolist(), strict=True):
            pygame.draw.line(surface, NORMAL, p0, p1, 1)
            pygame.draw.circle(surface, CONTACT, p0, 3)
        return None
    if mode == "boxes":
        lo, hi = boxes(world)
        a = np.clip(cam.to_screen(lo), -1e5, 1e5)
        b = np.clip(cam.to_screen(hi), -1e5, 1e5)
        for (x0, y0), (x1, y1) in zip(a.tolist(), b.tolist(), strict=True):
            rect = pygame.Rect(round(min(x0, x1)), round(min(y0, y1)),
                               max(round(abs(x1 - x0)), 1), max(round(abs(y1 - y0)), 1))
            pygame.draw.rect(surface, BOX, rect, 1)
        return None
    labels = link_labels(world)
    if not labels and (len(world.springs) or len(world.constraints)):
        return f"link forces: at most {MAX_LABELS} links"
    for mid, text in labels:
        s = font.render(text, True, LABEL)
        c = np.clip(cam.to_screen(mid[None])[0], -1e5, 1e5)
        surface.blit(s, (round(c[0] - s.get_width() / 2), round(c[1] - s.get_height() / 2)))
    return None
