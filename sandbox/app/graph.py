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
    TEXT,
    U_COLOUR,
    fmt,
    wrap_text,
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


class _Painted:
    """What both graphs paint with: a ring buffer's ``capacity``, rendered text kept
    (a frame renders the same labels again) and the panel's background."""

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        if self.capacity < 2:
            raise ValueError(f"capacity must be at least 2, got {capacity!r}")
        self._text: dict[tuple, pygame.Surface] = {}
        self._bg: pygame.Surface | None = None

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


class EnergyGraph(_Painted):
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
        super().__init__(capacity)
        self.allow_percent = True
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


def nice_ticks(lo: float, hi: float, want: float, least: int = 2
               ) -> tuple[np.ndarray, float]:
    """Ticks of ``[lo, hi]`` at a 1, 2, 5 x 10^k step giving about ``want`` of them, at
    least ``least`` (a short plot still reads its range); ``(values, step)``."""
    step = nice_step((hi - lo) / max(want, 1.0))
    values = tick_values(lo, hi, step)
    for _ in range(12):
        if len(values) >= least or not math.isfinite(step):
            break
        k = math.floor(math.log10(step) + 1e-9)
        m = round(step / 10.0 ** k)
        step = {1: 0.5, 2: 1.0, 5: 2.0}.get(m, 1.0) * 10.0 ** k
        values = tick_values(lo, hi, step)
    return values, step


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


def _at_a_word(font, text: str, width: int) -> str:
    """``text`` if it fits in ``width`` px, else its longest run of whole words that
    fits with an ellipsis (a cut word read as another: "speed of p…")."""
    if font.size(text)[0] <= width:
        return text
    words = text.split(" ")
    for n in range(len(words) - 1, 0, -1):
        cut = " ".join(words[:n]).rstrip(",") + "…"
        if font.size(cut)[0] <= width:
            return cut
    return _ellipsize(font, text, width)


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


# --------------------------------------------------------------------------- any quantity

#: px of the quantity graph's top row: the pickers (pygame_gui drop-downs) sit in it.
PICKER_H = 24
#: Samples of the newest x-y curve drawn (the phase portrait's 4 s at 60 fps).
XY_SAMPLES = 240
#: Least simulated time (s) the time axis spans: a new curve grows from the left.
MIN_SPAN_S = 1.0
#: Least plot height (px) before rows are dropped (the legend, then the y label).
MIN_PLOT = 40


class Curve:
    """One curve's samples, a ring buffer of ``capacity``: simulated time ``t``, ``x``
    and ``y``, and ``brk`` (True where a sample starts a new run: a new segment or a
    new world, the line is not drawn across). ``seg``: how many of the newest samples
    are of the current segment; ``ref``: its first ``(x, y)``, for relative
    quantities."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.t = np.full(capacity, np.nan)
        self.x = np.full(capacity, np.nan)
        self.y = np.full(capacity, np.nan)
        self.brk = np.zeros(capacity, bool)
        self.head = self.count = self.seg = 0
        self.source: int | None = None
        self.ref = (math.nan, math.nan)
        self._break = False

    def new_segment(self) -> None:
        self.seg = 0
        self.ref = (math.nan, math.nan)
        self._break = True

    def add(self, t: float, x: float, y: float, source: int,
            relative: tuple[bool, bool] = (False, False)) -> None:
        """One sample; ``relative``: x, y as the change since the segment's first.
        A sample from another world starts a new segment; one back in time (a loaded
        snapshot, the ensemble run again from where it started) a new curve."""
        if self.count:
            last = self.t[(self.head - 1) % self.capacity]
            if t < last:
                self.head = self.count = 0
                self.new_segment()
            elif source != self.source:
                self.new_segment()
        self.source = source
        rx, ry = self.ref
        if relative[0] and not math.isfinite(rx):
            rx = x
        if relative[1] and not math.isfinite(ry):
            ry = y
        self.ref = (rx, ry)
        i = self.head
        self.t[i] = t
        self.x[i] = x - rx if relative[0] else x
        self.y[i] = y - ry if relative[1] else y
        self.brk[i] = self._break or not self.count
        self._break = False
        self.head = (i + 1) % self.capacity
        self.count = min(self.count + 1, self.capacity)
        self.seg = min(self.seg + 1, self.count)

    def ordered(self, last: int | None = None):
        """``(t, x, y, brk)`` oldest first; ``last``: the newest samples only."""
        n = self.count if last is None else min(self.count, last)
        rows = (self.head - n + np.arange(n)) % self.capacity
        return self.t[rows], self.x[rows], self.y[rows], self.brk[rows]


@dataclass
class PlotSpec:
    """What the window asks the quantity graph to show this frame (the graph keeps the
    numbers): ``title`` (the top row when no picker is there), ``ylabel`` (the y axis'
    words, over the plot), ``xlabel`` (at the end of the x axis' row), ``log`` (|y| on a
    log scale), ``time`` (x is simulated time), ``note`` (why nothing is plotted), each
    curve's ``colours`` and legend ``names``, ``unit`` of y for the legend, ``keys``
    that choose it (at the end of the legend row, under the pickers)."""

    title: str
    ylabel: str
    xlabel: str
    log: bool = False
    time: bool = True
    note: str | None = None
    colours: dict[str, Colour] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    unit: str = ""
    keys: str = ""


@dataclass
class PlotLayout:
    """Where everything of one frame of the quantity graph goes. ``header``: the top
    row (pickers, or ``title`` as text); ``legend``, ``ylabel``, ``xlabel``, ``note``:
    text ``(rect, text, colour)``; ``plot``: the curves; ``yticks``/``xticks``:
    ``(value, px, label rect or None, label)``, log ticks valued in log10;
    ``xrange``/``yrange``: the plot's extent in its coordinates (log10 of |y| when
    ``log``); ``skipped``: samples a log scale cannot show (zero)."""

    rect: pygame.Rect
    header: pygame.Rect
    title: tuple[pygame.Rect, str, Colour] | None
    legend: list[tuple[pygame.Rect, str, Colour]]
    ylabel: tuple[pygame.Rect, str, Colour] | None
    plot: pygame.Rect
    xlabel: tuple[pygame.Rect, str, Colour] | None
    note: list[tuple[pygame.Rect, str, Colour]] = field(default_factory=list)
    yticks: list[tuple[float, int, pygame.Rect | None, str]] = field(default_factory=list)
    xticks: list[tuple[float, int, pygame.Rect | None, str]] = field(default_factory=list)
    xrange: tuple[float, float] = (0.0, 1.0)
    yrange: tuple[float, float] = (0.0, 1.0)
    skipped: int = 0
    log: bool = False
    series: dict = field(default_factory=dict, repr=False)

    def text_rects(self) -> list[pygame.Rect]:
        rects = [r for r, _, _ in self.legend + self.note]
        rects += [t[0] for t in (self.title, self.ylabel, self.xlabel) if t is not None]
        rects += [r for _, _, r, _ in self.yticks + self.xticks if r is not None]
        return rects


def log_scale(values: np.ndarray) -> tuple[np.ndarray, int]:
    """``log10 |v|`` where ``|v|`` is finite and > 0, NaN elsewhere (a zero has no place
    on a log scale: it is left out, not drawn at an invented floor); and how many finite
    values were left out so."""
    v = np.abs(np.asarray(values, float))
    ok = np.isfinite(v) & (v > 0)
    out = np.full(v.shape, np.nan)
    out[ok] = np.log10(v[ok])
    return out, int(np.count_nonzero(np.isfinite(v) & ~ok))


def log_tick_label(k: float) -> str:
    """The label of the decade ``10**k``: ``0.01`` .. ``1000``, else ``1e-5``."""
    k = int(round(k))
    if -2 <= k <= 3:
        return f"{10.0 ** k:.{max(-k, 0)}f}"
    return f"1e{k}"


def value_tick_label(v: float, step: float) -> str:
    """A linear tick's label: as many decimals as the step needs, else 3 digits."""
    if abs(v) < 1e-12 * max(step, 1e-300):
        v = 0.0
    if 1e-3 <= step and max(abs(v), step) < 1e5:
        decimals = max(0, -math.floor(math.log10(step) + 1e-9))
        return f"{v:.{decimals}f}"
    return f"{v:.3g}"


class QuantityGraph(_Painted):
    """Any quantity against time or against another (issue 37): one curve per world
    (the world, the ghost, each integrator of the ensemble and the truth), each a ring
    buffer of ``capacity`` samples (:class:`Curve`), broken where the energy graph
    starts a segment. The window says what to show with a :class:`PlotSpec`;
    :meth:`layout` computes every rectangle and the axes (the tests read them),
    :meth:`draw` paints only what it returns. Its ticks are the energy graph's
    (:func:`nice_step`, :func:`tick_values`)."""

    def __init__(self, capacity: int = 600) -> None:
        super().__init__(capacity)
        self.clear()

    def clear(self) -> None:
        """No curve and no marker (a new level, a reset, another choice)."""
        self.curves: dict[str, Curve] = {}
        self.marks: list[float] = []                 # simulated times of the segments

    def new_segment(self, label: str = "", merge: bool = False) -> None:
        """A setting changed (the energy graph's segments): every curve breaks there and
        relative quantities start again from zero; a marker on the time axis."""
        for c in self.curves.values():
            c.new_segment()
        t = [c.t[(c.head - 1) % c.capacity] for c in self.curves.values() if c.count]
        if t:
            self.marks = [m for m in self.marks if m < max(t)] + [float(max(t))]

    def add_sample(self, key: str, t: float, x: float, y: float, source: int,
                   relative: tuple[bool, bool] = (False, False)) -> None:
        c = self.curves.get(key)
        if c is None:
            c = self.curves[key] = Curve(self.capacity)
        c.add(t, x, y, source, relative)

    def _series(self, spec: PlotSpec):
        """``{curve: (t, x, y, brk, in the segment, y's newest value)}`` to draw: the
        whole buffer against time, the newest ``XY_SAMPLES`` against a quantity; y as
        log10 |y| when log (the newest value as it is, for the legend)."""
        out = {}
        skipped = 0
        for key, c in self.curves.items():
            if key not in spec.colours or not c.count:
                continue
            t, x, y, brk = c.ordered(None if spec.time else XY_SAMPLES)
            seg = np.zeros(len(t), bool)
            seg[max(len(t) - c.seg, 0):] = True
            newest = float(y[-1])
            if spec.log:
                y, n = log_scale(y)
                skipped += n
            out[key] = (t, x, y, brk, seg, newest)
        return out, skipped

    def layout(self, rect: pygame.Rect, fonts, spec: PlotSpec,
               picker: bool = False) -> PlotLayout:
        """Every rectangle for ``spec`` in ``rect``; ``picker``: the top row is left to
        the pickers (else it holds ``spec.title``)."""
        rect = pygame.Rect(rect)
        font = fonts.small
        line = font.get_linesize()
        inner = rect.inflate(-2 * 6, -2 * 4)
        header = pygame.Rect(inner.x, inner.y, inner.w, PICKER_H if picker else line)
        series, skipped = self._series(spec)
        rows = {"legend": line, "ylabel": line}
        axis_h = TICK + line
        while True:
            fixed = header.h + 2 + sum(r + 2 for r in rows.values()) + axis_h
            if inner.h - fixed >= MIN_PLOT or not rows:
                break
            del rows[next(iter(rows))]                 # the legend, then the y label
        y = header.bottom + 2
        title = None
        if not picker:
            title = (pygame.Rect(header.x, header.y, min(font.size(spec.title)[0],
                                                         header.w), line),
                     _ellipsize(font, spec.title, header.w), TEXT)
        legend: list = []
        if "legend" in rows:
            items = [(f"{spec.names.get(k, k)} {self._latest(series[k], spec)}",
                      spec.colours[k]) for k in series]
            legend = _flow(font, items, pygame.Rect(inner.x, y, inner.w, line), line)
            while legend and len(legend) < len(items):       # "+N": the curves left out
                more = f"+{len(items) - len(legend)}"
                right = legend[-1][0].right + 2 * GAP
                if right + font.size(more)[0] <= inner.right:
                    legend.append((pygame.Rect(right, y, font.size(more)[0], line), more, DIM))
                    break
                legend.pop()
            kw = font.size(spec.keys)[0]
            used = max((r.right for r, _, _ in legend), default=inner.x)
            # The pickers' keys under them, where every curve's item leaves room.
            if picker and spec.keys and len(legend) == len(items) and items and \
                    used + 2 * GAP + kw <= inner.right:
                legend.append((pygame.Rect(inner.right - kw, y, kw, line), spec.keys, DIM))
            y += line + 2
        ylabel = None
        if "ylabel" in rows:
            # The unit and what the scale leaves out are said whole; the axis' words
            # give way, at a word.
            note = f" ({spec.unit})" if spec.unit else ""
            if spec.log:
                note += " · log |y|" + (f", {skipped} zero{'s' if skipped != 1 else ''} "
                                        "out" if skipped else "")
            room = inner.w - font.size(note)[0]
            text = _at_a_word(font, spec.ylabel, room) + note if room > 40 else \
                _ellipsize(font, spec.ylabel + note, inner.w)
            ylabel = (pygame.Rect(inner.x, y, font.size(text)[0], line), text, DIM)
            y += line + 2
        plot_h = max(inner.bottom - axis_h - y, 2)
        # The y ticks' labels in a column at the left of the plot, as wide as they are.
        probe = pygame.Rect(inner.x, y, inner.w, plot_h)
        ylo, yhi, yvals, ystep = self._yaxis(series, spec, probe.h, line)
        if spec.note is not None:               # nothing plotted: no scale to read
            yvals = yvals[:0]
        ylabels = [log_tick_label(v) if spec.log else value_tick_label(v, ystep)
                   for v in yvals]
        col = max((font.size(s)[0] for s in ylabels), default=0) + GAP
        plot = pygame.Rect(inner.x + col, y, max(inner.w - col, 2), plot_h)
        out = PlotLayout(rect, header, title, legend, ylabel, plot, None,
                         yrange=(ylo, yhi), skipped=skipped, log=spec.log, series=series)
        for v, s in zip(yvals, ylabels, strict=True):
            py = int(round(float(_ys(np.array([v]), ylo, yhi, plot)[0])))
            w = font.size(s)[0]
            r = pygame.Rect(plot.x - GAP - w, py - line // 2, w, line)
            r.clamp_ip(pygame.Rect(inner.x, plot.y, col, plot.h))
            free = not any(r.inflate(0, 2).colliderect(o) for _, _, o, _ in out.yticks if o)
            out.yticks.append((v, py, r if free else None, s))
        axis = pygame.Rect(inner.x, plot.bottom, inner.w, axis_h)
        xtext = _ellipsize(font, spec.xlabel, inner.w // 2)
        xw = font.size(xtext)[0]
        out.xlabel = (pygame.Rect(axis.right - xw, axis.y + TICK, xw, line), xtext, DIM)
        out.xrange = self._xaxis(series, spec)
        if spec.note is None:
            self._place_xticks(font, axis, plot, out, spec)
        if spec.note is not None:
            lines = wrap_text(font, spec.note, plot.w - 8)
            top = plot.centery - len(lines) * line // 2
            out.note = [(pygame.Rect(plot.x + 4, top + k * line, font.size(s)[0], line), s,
                         DIM) for k, s in enumerate(lines)]
        return out

    @staticmethod
    def _latest(s, spec: PlotSpec) -> str:
        return fmt(s[5], spec.unit)

    def _yaxis(self, series, spec: PlotSpec, height: int, line: int):
        """``(lo, hi, tick values, step)`` of the y axis: the current segment's samples
        (all of them before it has any), padded; decades on a log scale."""
        ys = [s[2][s[4]] for s in series.values()]
        y = np.concatenate(ys) if ys else np.zeros(0)
        y = y[np.isfinite(y)]
        if not y.size:
            y = np.concatenate([s[2] for s in series.values()]) if series else np.zeros(0)
            y = y[np.isfinite(y)]
        want = max(height / (1.8 * line), 1.0)
        if spec.log:
            a, b = (math.floor(float(y.min())), math.ceil(float(y.max()))) if y.size \
                else (-3, 0)
            b = max(b, a + 1)
            values, step = nice_ticks(a, b, want)
            if step < 1:                                       # whole decades
                values, step = tick_values(a, b, 1.0), 1.0
            return float(a), float(b), values, step
        lo, hi = (float(y.min()), float(y.max())) if y.size else (0.0, 1.0)
        if hi - lo < 1e-9 * max(abs(hi), abs(lo), 1e-12):
            lo, hi = lo - 0.5 * max(abs(lo), 1e-9), hi + 0.5 * max(abs(hi), 1e-9)
        pad = 0.08 * (hi - lo)
        lo, hi = lo - pad, hi + pad
        values, step = nice_ticks(lo, hi, want)
        return lo, hi, values, step

    @staticmethod
    def _xaxis(series, spec: PlotSpec) -> tuple[float, float]:
        xs = [s[0] if spec.time else s[1] for s in series.values()]
        x = np.concatenate(xs) if xs else np.zeros(0)
        x = x[np.isfinite(x)]
        if not x.size:
            return (0.0, MIN_SPAN_S) if spec.time else (0.0, 1.0)
        lo, hi = float(x.min()), float(x.max())
        if spec.time:
            return lo, max(hi, lo + MIN_SPAN_S)
        if hi - lo < 1e-9 * max(abs(hi), abs(lo), 1e-12):
            lo, hi = lo - 0.5 * max(abs(lo), 1e-9), hi + 0.5 * max(abs(hi), 1e-9)
        pad = 0.05 * (hi - lo)
        return lo - pad, hi + pad

    def _place_xticks(self, font, axis: pygame.Rect, plot: pygame.Rect, out: PlotLayout,
                      spec: PlotSpec) -> None:
        lo, hi = out.xrange
        label_w = max(font.size(value_tick_label(v, (hi - lo) / 4))[0] for v in (lo, hi))
        if spec.time:
            label_w = max(font.size(_tick_label(v, 0.001))[0] for v in (lo, hi))
        values, step = nice_ticks(lo, hi, plot.w / (label_w + 3 * GAP))
        taken = [out.xlabel[0]] if out.xlabel is not None else []
        for v in values.tolist():
            x = int(round(_xs(np.array([v]), lo, hi, plot)[0]))
            text = _tick_label(v, step) if spec.time else value_tick_label(v, step)
            w = font.size(text)[0]
            left = min(max(x - w // 2, axis.x), axis.right - w)
            r = pygame.Rect(left, axis.y + TICK, w, axis.h - TICK)
            free = not any(r.inflate(2 * GAP, 0).colliderect(p) for p in taken)
            if free:
                taken.append(r)
            out.xticks.append((v, x, r if free else None, text))

    # --- drawing --------------------------------------------------------------------

    def draw(self, surface: pygame.Surface, rect: pygame.Rect, fonts, spec: PlotSpec,
             picker: bool = False) -> PlotLayout:
        """Paint the graph for ``spec`` into ``rect`` (nothing outside it); returns the
        layout used."""
        rect = pygame.Rect(rect)
        old_clip = surface.get_clip()
        panel_clip = rect.clip(old_clip)
        surface.set_clip(panel_clip)
        try:
            lay = self.layout(rect, fonts, spec, picker)
            self._panel(surface, rect)
            self._paint(surface, lay, spec, fonts.small, panel_clip)
        finally:
            surface.set_clip(old_clip)
        return lay

    def _paint(self, surface, lay: PlotLayout, spec: PlotSpec, font,
               panel_clip: pygame.Rect) -> None:
        texts = list(lay.legend) + lay.note
        texts += [t for t in (lay.title, lay.ylabel, lay.xlabel) if t is not None]
        for r, text, colour in texts:
            self._text_at(surface, font, text, colour, r)
        plot = lay.plot
        pygame.draw.rect(surface, FRAME, plot, 1)
        for _, py, at, text in lay.yticks:
            pygame.draw.line(surface, AXIS, (plot.x - TICK, py), (plot.x - 1, py))
            if at is not None:
                self._text_at(surface, font, text, DIM, at)
        for _, px, at, text in lay.xticks:
            pygame.draw.line(surface, AXIS, (px, plot.bottom), (px, plot.bottom + TICK - 1))
            if at is not None:
                self._text_at(surface, font, text, DIM, at)
        if spec.note is not None:
            return
        series = lay.series
        (xlo, xhi), (ylo, yhi) = lay.xrange, lay.yrange
        surface.set_clip(plot.clip(panel_clip))
        try:
            if not spec.log and ylo < 0 < yhi:
                y0 = int(round(float(_ys(np.array([0.0]), ylo, yhi, plot)[0])))
                pygame.draw.line(surface, ZERO, (plot.x, y0), (plot.right, y0))
            if not spec.time and xlo < 0 < xhi:
                x0 = int(round(float(_xs(np.array([0.0]), xlo, xhi, plot)[0])))
                pygame.draw.line(surface, ZERO, (x0, plot.y), (x0, plot.bottom))
            if spec.time:
                for m in self.marks:
                    if xlo <= m <= xhi:
                        mx = int(round(float(_xs(np.array([m]), xlo, xhi, plot)[0])))
                        pygame.draw.line(surface, MARKER, (mx, plot.y), (mx, plot.bottom))
            for key, (t, x, y, brk, *_) in series.items():
                sx = _xs(t if spec.time else x, xlo, xhi, plot)
                sy = _ys(y, ylo, yhi, plot)
                _runs(surface, spec.colours[key], sx, sy, brk)
                if not spec.time:             # where it is now, as the portrait showed
                    if np.isfinite(sx[-1]) and np.isfinite(sy[-1]):
                        pygame.draw.circle(surface, spec.colours[key],
                                           (int(sx[-1]), int(np.clip(sy[-1], -1e5, 1e5))), 3)
        finally:
            surface.set_clip(panel_clip)


def _xs(values: np.ndarray, lo: float, hi: float, rect: pygame.Rect) -> np.ndarray:
    with np.errstate(all="ignore"):
        return rect.x + (np.asarray(values, float) - lo) / (hi - lo) * (rect.w - 1)


def _runs(surface, colour, xs: np.ndarray, ys: np.ndarray, brk: np.ndarray) -> None:
    """The polyline through the finite points, broken at a non-finite one (a zero on a
    log scale) and where ``brk`` starts a new run."""
    ok = np.isfinite(xs) & np.isfinite(ys)
    start = brk | ~np.concatenate([[False], ok[:-1]])     # a run starts after a gap
    run_id = np.cumsum(start)
    for r in np.unique(run_id[ok]):
        sel = ok & (run_id == r)
        if np.count_nonzero(sel) < 2:
            continue
        pts = np.stack([np.clip(xs[sel], -1e5, 1e5), np.clip(ys[sel], -1e5, 1e5)], axis=1)
        pygame.draw.lines(surface, colour, False, pts.round().astype(int).tolist(), 1)
