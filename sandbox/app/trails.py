"""Trails and the live phase portrait: what makes an integrator's character visible.

A :class:`History` keeps the last ``capacity`` frames of position and velocity of a few
chosen particles of one world (a ring buffer, one row a frame). The app keeps one for the
world and one for the ghost, fed after each frame's physics; trails are drawn from it
fading with age, and the phase portrait plots position against velocity of one chosen
coordinate, world and ghost together, as myPhysicsLab draws it: an energy-conserving
method traces a closed curve, explicit Euler an outward spiral.

Which particles get a trail: those a person chose (Ctrl+click toggles one), each kept
for ``seconds`` of world time and fading with age. Before anyone chooses, the level's own
marks (:func:`default_trails`): the few bodies that stand out (an orbit's three bodies, a
pendulum's bobs), their trails capped at ``DEFAULT_SECONDS``; a level whose candidates
are many (a chain, a cradle) shows none. The history also keeps the phase portrait's
particle, which gets no trail unless it is chosen.
"""

from __future__ import annotations

import numpy as np
import pygame

MAX_TRAILS = 16
#: A level's own marks get a trail only when there are at most this many of them.
MAX_DEFAULT = 4
#: ... and at most this long (s): calm on the springs and the double pendulum.
DEFAULT_SECONDS = 1.0
#: The lengths Shift+L cycles through (s); the first window shows ``SECONDS[1]``.
SECONDS = (1.0, 3.0, 10.0)


def trail_candidates(mass: np.ndarray, radius: np.ndarray, movable: np.ndarray
                     ) -> np.ndarray:
    """Indices of the particles worth a trail (see the module docstring): groups of
    particles alike in mass and radius that stand out (mass >= 5x the median, or a
    radius where most have none or >= 2x the median), heaviest first, while they add up
    to at most MAX_TRAILS (a pendulum's bob beside a rope of 25 beads: the bob only)."""
    idx = np.flatnonzero(movable)
    if len(idx) <= MAX_TRAILS:
        return idx
    m, r = mass[idx], radius[idx]
    med_m, med_r = np.median(m), np.median(r)
    stands = (m >= 5 * med_m) | ((r > 0) & (r >= 2 * med_r))
    keys = np.stack([m, r], axis=1)[stands]
    if not len(keys):
        return np.zeros(0, np.int64)
    groups, counts = np.unique(keys, axis=0, return_counts=True)
    order = np.lexsort((-groups[:, 1], -groups[:, 0]))       # heaviest, then widest
    out: list[np.ndarray] = []
    total = 0
    for g in order:
        if total + counts[g] > MAX_TRAILS:
            break
        sel = stands & (m == groups[g, 0]) & (r == groups[g, 1])
        out.append(idx[sel])
        total += counts[g]
    return np.sort(np.concatenate(out)) if out else np.zeros(0, np.int64)


def default_trails(mass: np.ndarray, radius: np.ndarray, movable: np.ndarray
                   ) -> np.ndarray:
    """The particles a level marks as worth following before anyone chooses: its
    :func:`trail_candidates` when there are at most ``MAX_DEFAULT`` of them, else none
    (the 8 beads of chain_rattle, the 5 balls of the cradle: a scribble)."""
    idx = trail_candidates(mass, radius, movable)
    return idx if len(idx) <= MAX_DEFAULT else np.zeros(0, np.int64)


class History:
    """Positions and velocities ``(capacity, k, 2)`` of particles ``idx`` over frames,
    and the world time ``t`` of each frame (trails are cut by age in seconds)."""

    #: Frames the phase portrait plots (the last 4 s at 60 fps).
    PORTRAIT_FRAMES = 240

    def __init__(self, idx: np.ndarray, capacity: int = 900) -> None:
        self.idx = np.asarray(idx, np.int64)
        self.capacity = int(capacity)
        self.x = np.full((self.capacity, len(self.idx), 2), np.nan)
        self.v = np.full_like(self.x, np.nan)
        self.t = np.full(self.capacity, np.nan)
        self.head = 0
        self.count = 0

    def add(self, x: np.ndarray, v: np.ndarray, t: float = np.nan) -> None:
        if not len(self.idx) or self.idx.max(initial=-1) >= len(x):
            return
        self.x[self.head] = x[self.idx]
        self.v[self.head] = v[self.idx]
        self.t[self.head] = t
        self.head = (self.head + 1) % self.capacity
        self.count = min(self.count + 1, self.capacity)

    def _rows(self, last: int | None = None) -> np.ndarray:
        n = self.count if last is None else min(self.count, int(last))
        return (self.head - n + np.arange(n)) % self.capacity

    def ordered(self, last: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(x, v)`` oldest first, ``(count, k, 2)``; ``last``: the newest rows only."""
        rows = self._rows(last)
        return self.x[rows], self.v[rows]

    def times(self, last: int | None = None) -> np.ndarray:
        """The world time of each row of :meth:`ordered`."""
        return self.t[self._rows(last)]

    def column(self, k: int) -> int | None:
        """The column of particle ``k``, or None if it has no history here."""
        hit = np.flatnonzero(self.idx == k)
        return int(hit[0]) if len(hit) else None


def _fade(colour, background, t: float) -> tuple[int, int, int]:
    return tuple(int(round(b + (c - b) * t)) for c, b in zip(colour, background, strict=True))


def draw_trails(surface: pygame.Surface, to_screen, history: History, colour,
                background, chunks: int = 8, width: int = 2, *,
                particles=None, seconds: float | None = None) -> int:
    """The path of each of ``particles`` (default: every one kept) over its last
    ``seconds`` of world time (None: every kept frame), oldest faintest (``chunks``
    shades from the background to ``colour``, by age). Returns the number of polylines
    drawn."""
    if particles is None:
        cols = list(range(len(history.idx)))
    else:
        cols = [c for c in (history.column(int(k)) for k in particles) if c is not None]
    x, _ = history.ordered()
    if seconds is not None and len(x):
        t = history.times()
        keep = np.isfinite(t) & (t >= t[-1] - seconds)
        x = x[np.argmax(keep):] if keep.any() else x[:0]
    n = len(x)
    if n < 2 or not cols:
        return 0
    s = to_screen(x[:, cols])                          # (count, k, 2) px
    drawn = 0
    bounds = np.linspace(0, n - 1, chunks + 1).round().astype(int)
    for c in range(chunks):
        a, b = bounds[c], bounds[c + 1]
        if b <= a:
            continue
        shade = _fade(colour, background, (c + 1) / chunks)
        seg = s[a:b + 1]
        for k in range(seg.shape[1]):
            pts = seg[:, k]
            pts = pts[np.isfinite(pts).all(axis=1)]
            if len(pts) >= 2:
                pts = np.clip(pts, -1e5, 1e5)
                pygame.draw.lines(surface, shade, False, pts.round().astype(int).tolist(),
                                  width)
                drawn += 1
    return drawn


class PhasePortrait:
    """Position against velocity of one coordinate of one particle, world and ghost."""

    def __init__(self) -> None:
        self.particle: int | None = None
        self.axis = 0                                  # 0: x, 1: y
        self.auto = True                               # the axis that moves, until F

    def layout(self, rect: pygame.Rect, line: int) -> tuple[pygame.Rect, pygame.Rect]:
        """``(title row, plot)`` inside ``rect``; two label rows under the plot."""
        title = pygame.Rect(rect.x + 6, rect.y + 4, rect.w - 12, line)
        plot = pygame.Rect(rect.x + 6, title.bottom + 4, rect.w - 12,
                           rect.h - 3 * line - 14)
        return title, plot

    def _choose_axis(self, world: History | None) -> None:
        """The coordinate that moves more (a weight on a vertical spring: y)."""
        if world is None:                  # a new world, no frame kept yet
            return
        col = world.column(self.particle) if self.particle is not None else None
        if col is None or world.count < 2:
            return
        x, _ = world.ordered(History.PORTRAIT_FRAMES)
        span = np.nanmax(x[:, col], axis=0) - np.nanmin(x[:, col], axis=0)
        if np.isfinite(span).all():
            self.axis = int(span[1] > span[0])

    def series(self, world: History | None, ghost: History | None):
        """``[(q, p, which)]`` for the world (and the ghost) of the chosen particle."""
        out = []
        for h, which in ((world, "world"), (ghost, "ghost")):
            if h is None or self.particle is None:
                continue
            col = h.column(self.particle)
            if col is None:
                continue
            x, v = h.ordered(History.PORTRAIT_FRAMES)
            out.append((x[:, col, self.axis], v[:, col, self.axis], which))
        return out

    def draw(self, surface: pygame.Surface, rect: pygame.Rect, font, world: History | None,
             ghost: History | None, colours: dict, panel) -> None:
        panel(surface, rect)
        line = font.get_linesize()
        title, plot = self.layout(rect, line)
        q_name = "xy"[self.axis]
        clip = surface.get_clip()
        surface.set_clip(rect)
        try:
            if self.particle is None:
                surface.blit(font.render("phase portrait: click a particle", True,
                                         colours["dim"]), title)
                return
            surface.blit(font.render(f"phase: particle {self.particle}, {q_name} against "
                                     f"v{q_name} (F)", True, colours["text"]), title)
            if self.auto:
                self._choose_axis(world)
                q_name = "xy"[self.axis]
            data = self.series(world, ghost)
            pts = [np.stack([q, p], axis=1) for q, p, _ in data]
            allp = np.concatenate(pts) if pts else np.zeros((0, 2))
            allp = allp[np.isfinite(allp).all(axis=1)]
            pygame.draw.rect(surface, colours["frame"], plot, 1)
            if len(allp) < 2:
                return
            lo, hi = allp.min(axis=0), allp.max(axis=0)
            mid, half = (lo + hi) / 2, np.maximum((hi - lo) / 2 * 1.1, 1e-9)
            # Axes through zero when zero is in view.
            for axis in (0, 1):
                if lo[axis] < 0 < hi[axis]:
                    f = (0 - mid[axis]) / half[axis]
                    if axis == 0:
                        x0 = plot.centerx + f * plot.w / 2
                        pygame.draw.line(surface, colours["frame"], (x0, plot.y),
                                         (x0, plot.bottom))
                    else:
                        y0 = plot.centery - f * plot.h / 2
                        pygame.draw.line(surface, colours["frame"], (plot.x, y0),
                                         (plot.right, y0))
            for (q, p, which), _ in zip(data, pts, strict=True):
                ok = np.isfinite(q) & np.isfinite(p)
                if ok.sum() < 2:
                    continue
                sx = plot.centerx + (q[ok] - mid[0]) / half[0] * plot.w / 2
                sy = plot.centery - (p[ok] - mid[1]) / half[1] * plot.h / 2
                xy = np.stack([sx, sy], axis=1).round().astype(int).tolist()
                pygame.draw.lines(surface, colours[which], False, xy, 1)
                pygame.draw.circle(surface, colours[which], xy[-1], 3)
            line = font.get_linesize()
            # The plot's axes, not directions in the world ("x (across)", "vx (up)" read
            # like a direction the particle moves in).
            surface.blit(font.render(f"horiz: {q_name} {lo[0]:+.3g} .. {hi[0]:+.3g} m",
                                     True, colours["dim"]), (plot.x + 2, plot.bottom + 2))
            surface.blit(font.render(f"vert: v{q_name} {lo[1]:+.3g} .. {hi[1]:+.3g} m/s",
                                     True, colours["dim"]), (plot.x + 2, plot.bottom + 2 + line))
        finally:
            surface.set_clip(clip)
