"""Debug draw (issue 37): what the contact solver and the broad phase see, on request.

One key (X) cycles the overlays: off, contacts, bounding boxes, link forces, off; the
HUD's message says which is on, and nothing is drawn while it is off.

- **contacts**: each particle touching a wall, a static shape or (``collide_particles``)
  another particle, as a dot where they touch and a short line along the normal. The
  core keeps no record of the last substep's contacts that the app may read, so they are
  found here from the world's public geometry: each shape set's ``distance(p, s)``
  (``(d, q, n)``: gap, closest point, normal), the walls of ``config.bounds`` and the
  particles' radii, within ``slack`` m of touching. Refused above ``MAX_PARTICLES``.
- **boxes**: the broad phase's bounding boxes: every static shape's (``aabb()``), every
  particle's with a radius (``x +- r``).
- **link forces**: each spring's force ``k (L - rest)`` in N and each rigid link's
  strain in %, written at its middle (at most ``MAX_LABELS`` of them; the strain
  colours of every link stay as they are).
"""

from __future__ import annotations

import numpy as np
import pygame

MODES = ("off", "contacts", "boxes", "link forces")
MAX_PARTICLES = 3000
MAX_PAIRS = 400_000
MAX_LABELS = 40
CONTACT = (255, 90, 90)
NORMAL = (255, 200, 200)
BOX = (90, 200, 255)
LABEL = (230, 230, 160)


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


def draw(surface: pygame.Surface, cam, world, mode: str, font) -> str | None:
    """Draw the overlay ``mode`` of ``world``; returns why nothing was drawn, or None."""
    if mode == "off":
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
