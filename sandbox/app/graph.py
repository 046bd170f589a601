"""The live energy graph: kinetic, potential and total energy, the total's drift, a time axis.

Samples go into a ring buffer (simulation time, kinetic, potential, total and the
ghost's total). When the integrator, the timestep mode or the ghost changes, the app
calls :meth:`EnergyGraph.new_segment`: a vertical marker is drawn where it happened, the
drift is measured from the total at that moment, and the vertical scale follows the new
segment only (older samples scroll off to the left).

The panel is laid out in rows, top to bottom, so that no text ever lies on a curve::

    legend   K 1.2 J  U -3.4 J  E -2.2 J  ghost E ...     (one or two rows)
    markers  labels of the newest markers that fit, ticks for the others, "+N more"
    energy   K, U, E and the ghost's E               (plot)
    caption  the drift since the marker, and the drift plot's range
    drift    E - E0 of the current segment           (plot)
    time     ticks every 1, 2 or 5 x 10^k s of simulation time, labelled

:meth:`EnergyGraph.layout` computes every rectangle (the tests check them) and
:meth:`EnergyGraph.draw` only paints what it returns, clipped to the panel. Everything
per sample is numpy; rendered text is cached.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pygame

from .hud import (
    DIM,
    DRIFT_COLOUR,
    E_COLOUR,
    GHOST_COLOUR,
    K_COLOUR,
    MARKER,
    PANEL,
    U_COLOUR,
    fmt,
)

#: Relative drift is shown only when ``|E0| >= RELATIVE_MIN * (|K0| + |U0|)``.
RELATIVE_MIN = 0.05

PAD = 6                      # inner margin of the panel, px
GAP = 6                      # least horizontal gap between two labels, px
TICK = 4                     # length of an axis tick, px
MIN_PLOTS = 36               # least height left for both plots before rows are dropped
FRAME = (45, 50, 62)
ZERO = (55, 60, 74)
AXIS = (95, 100, 116)

Colour = tuple[int, int, int]


@dataclass
class GraphLayout:
    """Where everything of one frame of the graph goes (all rects inside ``rect``).

    ``legend``, ``labels``, ``caption`` and the labelled ``ticks`` are text; ``plot`` and
    ``dplot`` are the two plots (curves only, clipped to them). ``marker_xs`` are the x
    of every visible marker, newest last; ``labels`` are ``(rect, text, marker x)`` of
    the newest markers that fit; ``more`` is the ``"+N more"`` note, if any. ``ticks``
    are ``(t in s, x, label rect or None, label)``.
    """

    rect: pygame.Rect
    legend: list[tuple[pygame.Rect, str, Colour]]
    strip: pygame.Rect | None
    plot: pygame.Rect
    caption: list[tuple[pygame.Rect, str, Colour]]
    dplot: pygame.Rect
    axis: pygame.Rect | None
    xs: np.ndarray
    marker_xs: list[int] = field(default_factory=list)
    labels: list[tuple[pygame.Rect, str, int]] = field(default_factory=list)
    more: tuple[pygame.Rect, str] | None = None
    ticks: list[tuple[float, int, pygame.Rect | None, str]] = field(default_factory=list)
    step: float = math.nan

    def text_rects(self) -> list[pygame.Rect]:
        """Every rectangle that text is drawn into."""
        rects = [r for r, _, _ in self.legend] + [r for r, _, _ in self.caption]
        rects += [r for r, _, _ in self.labels] + [r for _, _, r, _ in self.ticks if r]
        if self.more:
            rects.append(self.more[0])
        return rects


class EnergyGraph:
    """A scrolling plot of kinetic, potential and total energy and the total's drift.

    **Drift.** Each segment takes its reference ``E0, K0, U0`` from its first finite
    sample. The drift is shown relative, ``(E - E0) / |E0|`` in %, when
    ``|E0| >= 0.05 (|K0| + |U0|)``, and absolute, ``E - E0`` in J, otherwise. Why: a
    percentage is only a fair measure when ``E0`` is a scale of the energies that are
    being exchanged. Potentials here are relative to an arbitrary ``y = 0``, so ``E0``
    can be a near cancellation of a large ``K`` and a large negative ``U`` (a bridge or a
    soft body that has fallen through ``y = 0``, a drape, any segment started while the
    total crosses zero). Then an error that is a small fraction ``e`` of the energies in
    play, ``e (|K0| + |U0|)``, would read as ``e (|K0| + |U0|) / |E0|``: amplified more
    than 20 times below the threshold, and without bound as ``E0 -> 0`` (the "-143 %" of
    such levels). The joules are honest at any datum. Since ``|E0| <= |K0| + |U0|``, the
    rule only ever switches to joules when the two are of a different size. Set
    :attr:`allow_percent` to False to show joules always (e.g. for a level whose
    potential has no natural zero, such as uniform gravity, where any percentage depends
    on where ``y = 0`` was put); it takes effect at the next reference.

    ``drift()`` returns the number shown: a fraction (0.01 for "+1%") when
    :attr:`relative` is True, joules otherwise; NaN before a reference exists.
    """

    COLUMNS = ("kinetic", "potential", "total", "ghost")

    def __init__(self, capacity: int = 600) -> None:
        self.capacity = int(capacity)
        if self.capacity < 2:
            raise ValueError(f"capacity must be at least 2, got {capacity!r}")
        self.allow_percent = True
        self._text: dict[tuple, pygame.Surface] = {}
        self._bg: pygame.Surface | None = None
        self.clear()

    # --- data -----------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every sample and marker (a new level, a reset)."""
        self.data = np.full((self.capacity, 4), np.nan)
        self.t = np.full(self.capacity, np.nan)
        self.head = 0                     # next row to write
        self.count = 0                    # valid rows
        self.total_samples = 0            # samples ever added (absolute index)
        self.markers: list[tuple[int, str]] = []
        self._merged = False                  # the last marker may be replaced (merge)
        self.segment_start = 0
        self.segment_label: str | None = None
        self.e0: float | None = None
        self.k0 = self.u0 = math.nan
        self.relative = False

    #: Samples (frames) within which a new marker replaces the last one.
    MERGE = 20

    def new_segment(self, label: str, merge: bool = False) -> None:
        """The integrator, timestep or ghost changed: mark it, re-reference the drift.
        ``merge``: a change of a setting dragged through many values (the steps/s
        slider set a new rate every frame and left "+40 more" markers): within
        ``MERGE`` samples of the last marker, also a merged one, it replaces it, so the
        graph shows the value the person settled on."""
        if (merge and self._merged and self.markers
                and self.total_samples - self.markers[-1][0] < self.MERGE):
            self.markers.pop()
        self._merged = merge
        self.markers.append((self.total_samples, str(label)))
        if len(self.markers) > self.capacity:
            del self.markers[0]
        self.segment_start = self.total_samples
        self.segment_label = str(label)
        self.e0 = None

    def add(self, t: float, kinetic: float, potential: float, total: float,
            ghost: float = math.nan) -> None:
        """One sample at simulation time ``t`` (s); energies in J."""
        if self.e0 is None and math.isfinite(total):
            self.e0, self.k0, self.u0 = float(total), float(kinetic), float(potential)
            scale = abs(self.k0) + abs(self.u0)
            self.relative = bool(self.allow_percent and scale > 0
                                 and abs(self.e0) >= RELATIVE_MIN * scale)
        self.data[self.head] = (kinetic, potential, total, ghost)
        self.t[self.head] = t
        self.head = (self.head + 1) % self.capacity
        self.count = min(self.count + 1, self.capacity)
        self.total_samples += 1
        first = self.total_samples - self.count
        if self.markers and self.markers[0][0] < first:
            self.markers = [(i, s) for i, s in self.markers if i >= first]

    def _order(self) -> np.ndarray:
        return (self.head - self.count + np.arange(self.count)) % self.capacity

    def ordered(self) -> np.ndarray:
        """The samples, oldest first, ``(count, 4)``: kinetic, potential, total, ghost."""
        return self.data[self._order()]

    def times(self) -> np.ndarray:
        """The samples' simulation times (s), oldest first, ``(count,)``."""
        return self.t[self._order()]

    def drift(self) -> float:
        """The current segment's drift of the latest sample: a fraction of ``|E0|`` when
        :attr:`relative`, else ``E - E0`` in J; NaN before the segment has a reference."""
        if not self.count or self.e0 is None or self.total_samples <= self.segment_start:
            return math.nan
        d = float(self.data[(self.head - 1) % self.capacity, 2]) - self.e0
        return d / abs(self.e0) if self.relative else d

    def drift_text(self) -> str:
        """The drift as shown: ``"+1.23%"`` or ``"-0.0123 J"`` (SI prefixes via ``fmt``)."""
        return self._format(self.drift())

    def _format(self, d: float, sign: bool = True) -> str:
        if not math.isfinite(d):
            return "—"
        if self.relative:
            return f"{d * 100:+.3g}%" if sign else f"{d * 100:.2g}%"
        s = fmt(d, "J")
        return ("+" + s) if sign and d >= 0 else s

    def _segment_drift(self, data: np.ndarray) -> np.ndarray:
        """Drift of the current segment's samples, in the shown unit."""
        first = self.total_samples - self.count
        seg = data[max(self.segment_start - first, 0):, 2]
        if self.e0 is None:
            return np.full(len(seg), np.nan)
        d = seg - self.e0
        return d / abs(self.e0) if self.relative else d

    # --- layout ---------------------------------------------------------------------

    def layout(self, rect: pygame.Rect, fonts) -> GraphLayout:
        """Every rectangle of the graph in ``rect`` for the current samples."""
        rect = pygame.Rect(rect)
        font = fonts.small
        line = font.get_linesize()
        inner = rect.inflate(-2 * PAD, -2 * PAD)
        data = self.ordered() if self.count else np.empty((0, 4))
        last = data[-1] if self.count else np.full(4, np.nan)

        legend_items = self._legend_items(last)
        rows = self._legend_rows(font, inner.w)
        rows_needed = {"strip": line, "caption": line, "axis": TICK + line}
        header = rows * line
        while True:
            gaps = 2 + ("strip" in rows_needed) + ("caption" in rows_needed)
            fixed = header + sum(rows_needed.values()) + 4 * gaps
            if inner.h - fixed >= MIN_PLOTS or not rows_needed:
                break
            del rows_needed[next(iter(rows_needed))]       # strip, then caption, then axis
        avail = max(inner.h - fixed, 2)

        y = inner.y
        legend = _flow(font, legend_items, pygame.Rect(inner.x, y, inner.w, header), line)
        y += header + 4
        strip = None
        if "strip" in rows_needed:
            strip = pygame.Rect(inner.x, y, inner.w, line)
            y += line + 4
        plot = pygame.Rect(inner.x, y, inner.w, int(avail * 0.62))
        y = plot.bottom + 4
        caption_row = None
        if "caption" in rows_needed:
            caption_row = pygame.Rect(inner.x, y, inner.w, line)
            y += line + 4
        dplot = pygame.Rect(inner.x, y, inner.w, max(avail - plot.h, 1))
        y = dplot.bottom + 4
        axis = pygame.Rect(inner.x, dplot.bottom, inner.w, TICK + line) \
            if "axis" in rows_needed else None

        n = self.count
        xs = plot.right - (n - 1 - np.arange(n)) * (plot.w / self.capacity)
        out = GraphLayout(rect, legend, strip, plot, [], dplot, axis, xs)
        if caption_row is not None:
            out.caption = self._caption(font, caption_row, data)
        if n:
            first = self.total_samples - n
            out.marker_xs = [int(round(xs[min(i - first, n - 1)])) for i, _ in self.markers]
            if strip is not None:
                self._place_labels(font, strip, out)
            if axis is not None:
                self._place_ticks(font, axis, inner, out)
        return out

    def _legend_items(self, last: np.ndarray) -> list[tuple[str, Colour]]:
        if not self.count:
            return [("energy: no samples yet", DIM)]
        items = [("K " + fmt(last[0], "J"), K_COLOUR), ("U " + fmt(last[1], "J"), U_COLOUR),
                 ("E " + fmt(last[2], "J"), E_COLOUR)]
        if math.isfinite(last[3]):
            items.append(("ghost E " + fmt(last[3], "J"), GHOST_COLOUR))
        return items

    @staticmethod
    def _legend_rows(font, width: int) -> int:
        """One legend row if the widest legend (with the ghost) fits, else two: decided
        from a template, so the plots do not jump as the numbers change width."""
        template = "K -0.00e-05 J   U -0.00e-05 J   E -0.00e-05 J   ghost E -0.00e-05 J"
        return 1 if font.size(template)[0] <= width else 2

    def _caption(self, font, row: pygame.Rect, data: np.ndarray):
        since = "marker" if self.segment_label is not None else "start"
        d = self._format(self.drift())
        drift = self._segment_drift(data) if self.count else np.empty(0)
        span = float(np.nanmax(np.abs(drift))) if np.isfinite(drift).any() else math.nan
        rng = "plot ±" + self._format(span * 1.15, sign=False) if math.isfinite(span) else ""
        for left in (f"drift of E since the {since}: {d}", f"drift since {since} {d}",
                     f"drift {d}"):
            w = font.size(left)[0]
            if w <= row.w:
                break
        items = [(pygame.Rect(row.x, row.y, min(w, row.w), row.h), left, DRIFT_COLOUR)]
        if rng:
            rw = font.size(rng)[0]
            if w + 3 * GAP + rw <= row.w:
                items.append((pygame.Rect(row.right - rw, row.y, rw, row.h), rng, DIM))
        return items

    def _place_labels(self, font, strip: pygame.Rect, out: GraphLayout) -> None:
        """The newest markers' labels, newest first, until one would overlap."""
        placed: list[tuple[pygame.Rect, str, int]] = []
        for (_, text), x in zip(reversed(self.markers), reversed(out.marker_xs), strict=True):
            text = _ellipsize(font, text, strip.w)
            w = font.size(text)[0]
            left = x + 3 if x + 3 + w <= strip.right else x - 3 - w
            left = min(max(left, strip.x), strip.right - w)
            r = pygame.Rect(left, strip.y, w, strip.h)
            if any(r.inflate(2 * GAP, 0).colliderect(p) for p, _, _ in placed):
                break
            placed.append((r, text, x))
        hidden = len(self.markers) - len(placed)
        more = None
        for text in ((f"+{hidden} more", f"+{hidden}") if hidden else ()):
            w = font.size(text)[0]           # the note only where no label is
            r = pygame.Rect(strip.x, strip.y, w, strip.h)
            if w <= strip.w and not any(r.inflate(2 * GAP, 0).colliderect(p)
                                        for p, _, _ in placed):
                more = (r, text)
                break
        out.labels, out.more = placed, more

    def _place_ticks(self, font, axis: pygame.Rect, inner: pygame.Rect,
                     out: GraphLayout) -> None:
        """Ticks of simulation time under the plots, over the newest run of increasing
        times (a loaded snapshot can send time back)."""
        t, xs = self.times(), out.xs
        back = np.flatnonzero(np.diff(t) < 0)
        start = int(back[-1]) + 1 if back.size else 0
        t, xs = t[start:], xs[start:]
        ok = np.isfinite(t)
        t, xs = t[ok], xs[ok]
        if len(t) < 2 or not t[-1] > t[0]:
            return
        t0, t1 = float(t[0]), float(t[-1])
        px = float(xs[-1] - xs[0])
        label_w = max(font.size(_tick_label(v, 0.001))[0] for v in (t0, t1))
        want = max(px / (label_w + 3 * GAP), 1.0)
        step = nice_step((t1 - t0) / want)
        values = tick_values(t0, t1, step)
        if not len(values):
            return
        x = np.rint(np.interp(values, t, xs)).astype(int)
        lo, hi = inner.x, inner.right
        taken: list[pygame.Rect] = []
        ticks = []
        for v, xv in zip(values[::-1].tolist(), x[::-1].tolist(), strict=True):
            text = _tick_label(v, step)
            w = font.size(text)[0]
            left = min(max(xv - w // 2, lo), hi - w)
            r = pygame.Rect(left, axis.y + TICK, w, axis.h - TICK)
            if left < lo or any(r.inflate(2 * GAP, 0).colliderect(p) for p in taken):
                ticks.append((v, xv, None, text))
                continue
            taken.append(r)
            ticks.append((v, xv, r, text))
        out.ticks, out.step = ticks[::-1], step

    # --- drawing --------------------------------------------------------------------

    def _render(self, font, text: str, colour: Colour) -> pygame.Surface:
        key = (id(font), text, colour)
        s = self._text.get(key)
        if s is None:
            if len(self._text) > 512:
                self._text.clear()
            s = self._text[key] = font.render(text, True, colour)
        return s

    def _text_at(self, surface, font, text: str, colour: Colour, r: pygame.Rect) -> None:
        """Text at ``r``'s top left, cut to ``r``."""
        surface.blit(self._render(font, text, colour), r.topleft, (0, 0, r.w, r.h))

    def _panel(self, surface: pygame.Surface, rect: pygame.Rect) -> None:
        if self._bg is None or self._bg.get_size() != rect.size:
            self._bg = pygame.Surface(rect.size, pygame.SRCALPHA)
            self._bg.fill(PANEL)
        surface.blit(self._bg, rect.topleft)

    def draw(self, surface: pygame.Surface, rect: pygame.Rect, fonts) -> GraphLayout:
        """Paint the graph into ``rect`` (nothing outside it); returns the layout used."""
        rect = pygame.Rect(rect)
        old_clip = surface.get_clip()
        panel_clip = rect.clip(old_clip)
        surface.set_clip(panel_clip)
        try:
            lay = self.layout(rect, fonts)
            self._panel(surface, rect)
            self._draw(surface, lay, fonts.small, panel_clip)
        finally:
            surface.set_clip(old_clip)
        return lay

    def _draw(self, surface, lay: GraphLayout, font, panel_clip: pygame.Rect) -> None:
        for r, text, colour in lay.legend + lay.caption:
            self._text_at(surface, font, text, colour, r)
        pygame.draw.rect(surface, FRAME, lay.plot, 1)
        pygame.draw.rect(surface, FRAME, lay.dplot, 1)
        if not self.count:
            return
        data = self.ordered()
        xs = lay.xs
        # Energy plot: the scale follows the current segment.
        first = self.total_samples - self.count
        seg = data[max(self.segment_start - first, 0):]
        finite = seg[np.isfinite(seg)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
        if hi - lo < 1e-9 * max(abs(hi), abs(lo), 1e-12):
            lo, hi = lo - 0.5 * max(abs(lo), 1e-9), hi + 0.5 * max(abs(hi), 1e-9)
        pad = 0.08 * (hi - lo)
        lo, hi = lo - pad, hi + pad
        plot, dplot = lay.plot, lay.dplot
        surface.set_clip(plot.clip(panel_clip))
        if lo < 0 < hi:
            y0 = int(round(_ys(np.array([0.0]), lo, hi, plot)[0]))
            pygame.draw.line(surface, ZERO, (plot.x, y0), (plot.right, y0))
        for col, colour in ((0, K_COLOUR), (1, U_COLOUR), (2, E_COLOUR), (3, GHOST_COLOUR)):
            _polyline(surface, colour, xs, _ys(data[:, col], lo, hi, plot))
        self._marker_lines(surface, lay, plot)
        # Drift plot: the current segment, symmetric about zero.
        surface.set_clip(dplot.clip(panel_clip))
        drift = self._segment_drift(data)
        span = float(np.nanmax(np.abs(drift))) if np.isfinite(drift).any() else 0.0
        span = max(span * 1.15, 1e-12)
        pygame.draw.line(surface, ZERO, (dplot.x, dplot.centery), (dplot.right, dplot.centery))
        _polyline(surface, DRIFT_COLOUR, xs[len(xs) - len(drift):],
                  _ys(drift, -span, span, dplot))
        self._marker_lines(surface, lay, dplot)
        surface.set_clip(panel_clip)
        # Marker strip: labels, short ticks for the unlabelled, "+N more".
        if lay.strip is not None:
            s = lay.strip
            texts = [r for r, _, _ in lay.labels] + ([lay.more[0]] if lay.more else [])
            for x in lay.marker_xs:          # a short tick per marker, not through text
                if not any(r.x - 1 <= x <= r.right for r in texts):
                    pygame.draw.line(surface, MARKER, (x, s.bottom - TICK), (x, s.bottom + 3))
            for r, text, _ in lay.labels:
                self._text_at(surface, font, text, MARKER, r)
            if lay.more:
                self._text_at(surface, font, lay.more[1], MARKER, lay.more[0])
        # Time axis.
        if lay.axis is not None:
            a = lay.axis
            for _, x, r, text in lay.ticks:
                pygame.draw.line(surface, AXIS, (x, a.y), (x, a.y + TICK - 1))
                if r is not None:
                    self._text_at(surface, font, text, DIM, r)

    @staticmethod
    def _marker_lines(surface, lay: GraphLayout, plot: pygame.Rect) -> None:
        for x in lay.marker_xs:
            pygame.draw.line(surface, MARKER, (x, plot.y), (x, plot.bottom - 1))


def nice_step(raw: float) -> float:
    """The smallest of 1, 2, 5 x 10^k that is at least ``raw`` (> 0)."""
    if not (math.isfinite(raw) and raw > 0):
        return math.nan
    k = math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        step = m * 10.0 ** k
        if step >= raw * (1 - 1e-12):
            return step
    return 10.0 ** (k + 1)              # pragma: no cover - round-off guard


def tick_values(t0: float, t1: float, step: float) -> np.ndarray:
    """The multiples of ``step`` within ``[t0, t1]``, as exact as floats allow."""
    if not (math.isfinite(step) and step > 0 and t1 >= t0):
        return np.empty(0)
    k = np.arange(math.ceil(t0 / step - 1e-9), math.floor(t1 / step + 1e-9) + 1)
    v = k * step
    return v[(v >= t0 - 1e-9 * step) & (v <= t1 + 1e-9 * step)]


def _tick_label(v: float, step: float) -> str:
    decimals = max(0, -math.floor(math.log10(step) + 1e-9)) if step > 0 else 0
    return f"{v:.{decimals}f} s"


def _ellipsize(font, text: str, width: int) -> str:
    if font.size(text)[0] <= width:
        return text
    lo, hi = 0, len(text)
    while lo < hi:                       # longest prefix that fits with the ellipsis
        mid = (lo + hi + 1) // 2
        if font.size(text[:mid] + "…")[0] <= width:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo] + "…" if lo else ""


def _flow(font, items, box: pygame.Rect, line: int) -> list[tuple[pygame.Rect, str, Colour]]:
    """Legend items left to right in the rows of ``box``; those that do not fit are left
    out (the widest single item is cut at the box's edge)."""
    out = []
    x, y = box.x, box.y
    for text, colour in items:
        w = font.size(text)[0]
        if x > box.x and x + w > box.right:
            x, y = box.x, y + line
        if y + line > box.bottom:
            break
        out.append((pygame.Rect(x, y, min(w, box.right - x), line), text, colour))
        x += w + 2 * GAP
    return out


def _ys(values: np.ndarray, lo: float, hi: float, rect: pygame.Rect) -> np.ndarray:
    with np.errstate(all="ignore"):
        return rect.bottom - 1 - (values - lo) / (hi - lo) * (rect.h - 2)


def _polyline(surface, colour, xs, ys) -> None:
    ok = np.isfinite(ys)
    if ok.sum() < 2:
        return
    ys = np.clip(ys[ok], -1e6, 1e6)
    pts = np.stack([xs[ok], ys], axis=1).round().astype(int).tolist()
    pygame.draw.lines(surface, colour, False, pts, 1)
