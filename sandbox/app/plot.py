"""The graph under the panel (issue 37): any quantity of :mod:`sandbox.quantities` against
time or against another, one curve for the world, the ghost and each integrator of the
ensemble (A) with the truth, in the colours the scene draws them in.

The phase portrait (a particle's vx against its x) is one choice of it, the first one: F
chooses it, again flips it to y; until a person chooses, its coordinate follows the
particle's motion (the one that moves more: a weight on a vertical spring gets y).

What it plots is the session's (``Session.plot``, ``Session.followed``): every choice is a
command of the app's table, recorded in replays, so a replay shows the same graph. Only
the chosen quantities are sampled, once a frame after the steps, while the graph is shown.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pygame

from .. import quantities as Q
from ..sim.integrators import INTEGRATORS
from .graph import PICKER_H, PlotLayout, PlotSpec, QuantityGraph
from .hud import GHOST_COLOUR, TEXT, TRAIL_COLOUR

#: The truth's colour: the grey of its rings in the scene and its line in the legend.
TRUTH_COLOUR = (170, 170, 170)
#: Frames of the particle's motion that choose the phase portrait's coordinate, and how
#: much more the other coordinate must move before it switches (it does not flicker).
FOLLOW_FRAMES = 240
FOLLOW_RATIO = 1.5


def header_rect(rect: pygame.Rect) -> pygame.Rect:
    """The graph's top row in ``rect``, where the pickers go (``QuantityGraph.layout``'s
    ``header`` with a picker)."""
    inner = pygame.Rect(rect).inflate(-12, -8)
    return pygame.Rect(inner.x, inner.y, inner.w, PICKER_H)


class Plot:
    """The app's graph of any quantity: its buffers (:class:`QuantityGraph`) and the
    commands that choose what it plots."""

    def __init__(self, app) -> None:
        self.app = app
        self.graph = QuantityGraph(600)
        self.layout: PlotLayout | None = None         # as last drawn (tests read it)
        self._held: tuple | None = None               # (choice, particle) of the buffers

    @property
    def choice(self) -> Q.Choice:
        return self.app.session.plot

    # --- commands -----------------------------------------------------------------

    def _choose(self, **change) -> None:
        self.app.session.set_plot(Q.choose(self.choice, **change))
        c = self.choice
        why = Q.problem(c, self._frame())
        text = (f"graph: {Q.QUANTITIES[c.y].label} against "
                f"{Q.QUANTITIES[c.x].label if c.x in Q.QUANTITIES else 'time'}"
                f"{', log |y|' if c.log else ''}")
        self.app.message(text + (f" ({why})" if why else ""))
        if not self.app.show_plot:                    # chosen by key while hidden: shown
            self.app.do("toggle_plot")

    def set_y(self, name: str) -> None:
        self._choose(y=name)

    def set_x(self, name: str) -> None:
        self._choose(x=name)

    def _usable(self, name: str) -> bool:
        return name == Q.TIME or Q.QUANTITIES[name].problem(self._frame()) is None

    def cycle(self, step: int = 1) -> None:
        """The next quantity that can be plotted here (U, Shift+U)."""
        self._choose(y=Q.cycle(Q.QUANTITIES, self.choice.y, step, self._usable))

    def cycle_x(self, step: int = 1) -> None:
        """Against time, then each quantity that can be plotted here (J, Shift+J)."""
        self._choose(x=Q.cycle(Q.AXES, self.choice.x, step, self._usable))

    def toggle_log(self) -> None:
        """A log scale of |y| or a linear one (Alt+U)."""
        self._choose(log=not self.choice.log)

    def phase_axis(self) -> None:
        """F: the phase portrait (vx against x); on it already, the other coordinate."""
        axis = self.choice.phase_axis()
        pair = Q.PHASE[0 if axis is None else 1 - axis]
        self._choose(y=pair[0], x=pair[1])

    # --- each frame ---------------------------------------------------------------

    def _frame(self, energy: dict | None = None) -> Q.Frame:
        s = self.app.session
        return Q.Frame(s.world, s.ghost, s.ensemble, s.followed, self.app.last_dt, energy)

    def _hold(self) -> None:
        """Buffers of another choice or particle go; the state now is their first
        sample (a choice made while paused shows where things are)."""
        s = self.app.session
        held = (s.plot, s.followed)
        if held != self._held:
            self._held = held
            self.graph.clear()
            self._add(self._frame())

    def _add(self, fr: Q.Frame) -> None:
        c = self.choice
        xq = Q.QUANTITIES.get(c.x)
        rel = (xq is not None and xq.relative, Q.QUANTITIES[c.y].relative)
        for key, t, x, y, source in Q.sample(c, fr):
            self.graph.add_sample(key, t, x, y, source, rel)

    def sample(self, energy: dict | None = None) -> None:
        """After a frame's steps: one sample of the chosen quantities (``energy``: the
        world's, already computed this frame); nothing while the graph is hidden."""
        if not self.app.show_plot:
            return
        self._follow_motion()
        if (self.app.session.plot, self.app.session.followed) != self._held:
            self._hold()
            return
        self._add(self._frame(energy))

    def new_segment(self, label: str = "") -> None:
        self.graph.new_segment(label)

    def clear(self) -> None:
        self.graph.clear()
        self._held = None

    def _follow_motion(self) -> None:
        """While nobody has chosen, the phase portrait shows the coordinate the followed
        particle moves along most (over the last ``FOLLOW_FRAMES`` frames)."""
        s, h = self.app.session, self.app.history
        axis = s.plot.phase_axis()
        if not s.plot.auto or axis is None or h is None or s.followed is None:
            return
        col = h.column(s.followed)
        if col is None or h.count < 2:
            return
        x, _ = h.ordered(FOLLOW_FRAMES)
        span = np.nanmax(x[:, col], axis=0) - np.nanmin(x[:, col], axis=0)
        if np.isfinite(span).all() and span[1 - axis] > FOLLOW_RATIO * span[axis]:
            y, xname = Q.PHASE[1 - axis]
            s.plot = replace(s.plot, y=y, x=xname)        # still automatic: not recorded

    # --- drawing ------------------------------------------------------------------

    def colour(self, key: str) -> tuple[int, int, int]:
        """A curve's colour, as the scene draws its world."""
        if key in INTEGRATORS:
            from .hud import ensemble_colour
            return ensemble_colour(key)
        return {"world": TRAIL_COLOUR, "ghost": GHOST_COLOUR,
                "truth": TRUTH_COLOUR}.get(key, TEXT)

    def spec(self) -> PlotSpec:
        """What to draw now: the axes' words, why nothing is plotted, the curves."""
        s = self.app.session
        c = s.plot
        yq, xq = Q.QUANTITIES[c.y], Q.QUANTITIES.get(c.x)
        fr = self._frame()
        note = Q.problem(c, fr)
        keys = [src.key for src in Q.curves(c, fr)] if note is None else []
        # The ghost's integrator is named by its label in the scene; here its colour.
        names = {k: INTEGRATORS[k].label if k in INTEGRATORS else k for k in keys}
        title = f"{yq.label} against {xq.label if xq else 'time'} (U, J)"
        if c.phase_axis() is not None:
            title = f"phase: {title}"
        xlabel = f"{xq.label} ({xq.unit})" if xq is not None else "time (s)"
        return PlotSpec(title, yq.words(s.followed), xlabel, log=c.log, time=xq is None,
                        note=note, colours={k: self.colour(k) for k in keys}, names=names,
                        unit=yq.unit, keys="U J Alt+U")

    def draw(self, surface: pygame.Surface, rect: pygame.Rect, picker: bool) -> PlotLayout:
        """The graph in ``rect``; ``picker``: the panel's pickers are in its top row."""
        self._hold()
        self.layout = self.graph.draw(surface, rect, self.app.fonts, self.spec(), picker)
        return self.layout
