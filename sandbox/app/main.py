"""The sandbox window: the :class:`App` and ``run_app``, the ``play`` command.

The window is three parts (``STYLE.md``: session, input, a read-only view):

    session.Session     world, ghost, timestep policy, trace; plan, advance, divergence;
                        every command, applied to the world and the ghost alike
    input.Input         events -> commands through the keymap; the mouse gestures
    World.view()        what the renderer and the HUD draw (read-only arrays, strain)

One frame (``App.frame(dt)``)::

    dt                      real time since the last frame (time.perf_counter)
    events -> commands      Input.handle; every command guarded (errors become messages)
    session.update(dt)      plan = policy.plan(dt * speed); world.step(h), ghost.step(h)
    energy sample           -> graph; an impossible energy jump also pauses
    render                  interpolated with alpha in fixed mode; HUD; flip

Tests post events shaped exactly like real pygame-ce events (``tests/events.py``) and
call ``frame(dt)`` on an App built from a level or from a world.
"""

from __future__ import annotations

import gc
import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pygame

from .. import warmup
from ..extras import MissingExtra, require
from ..load import LoadMeter
from ..sim import backend, cores
from ..sim.integrators import INTEGRATORS
from ..sim.world import World
from . import debug, files
from .build_mode import BuildMode
from .camera import Camera
from .graph import EnergyGraph
from .hud import (
    ASSETS,
    DIM,
    GHOST_COLOUR,
    KEY,
    TEXT,
    TRAIL_COLOUR,
    WARN,
    Fonts,
    Overlay,
    columns_block,
    ensemble_colour,
    fit_line,
    strain_legend,
    strain_legend_size,
    text_block,
)
from .hud import PANEL as PANEL_RGBA
from .input import Input
from .panel import WIDTH as PANEL_WIDTH
from .panel import ControlPanel
from .plot import Plot
from .plot import header_rect as plot_header_rect
from .record import MODULES as CLIP_MODULES
from .record import ClipRecorder
from .render import BACKGROUND, WorldRenderer, drawn_radii, reach_into
from .session import (  # noqa: F401 - re-exported: the app's public scene API
    SPEEDS,
    Scene,
    Session,
    plural,
    scene_from_level,
    scene_from_world,
)
from .trails import (
    DEFAULT_SECONDS,
    SECONDS,
    History,
    default_trails,
    draw_trails,
)
from .velocity import velocity_line

DEFAULT_LEVEL = "playground"
_POINTER_EVENTS = (pygame.MOUSEMOTION, pygame.MOUSEBUTTONDOWN, pygame.MOUSEBUTTONUP)
WINDOW_SIZE = (1280, 800)
TITLE = "Verlet Sandbox"
MESSAGE_SECONDS = 4.0
#: The level's caption (what it shows, what to try) stays until the first key, click or
#: wheel turn (it vanished after 10 s, before a learner had read the HUD), then this long.
CAPTION_AFTER_INPUT_S = MESSAGE_SECONDS
FPS_WINDOW = 1.0                        # s of frames behind the HUD's fps and worst frame
#: Events that are a person's input: the first one lets the caption go.
_INPUT_EVENTS = (pygame.KEYDOWN, pygame.MOUSEBUTTONDOWN, pygame.MOUSEWHEEL)


#: Characters a column of the full HUD holds: two of them side by side need a window of
#: 1240 px or more (the graph keeps its least width beside them), else one column.
HUD_CHARS = 54
HUD_PAD = 8                             # px inside the HUD's panel
HUD_GAP = 28                            # px between its two columns
GRAPH_WIDTH = (PANEL_WIDTH, 552)        # px: the energy graph's least and most width
GRAPH_HEIGHT = (150, 180)               # px: its least and most height (1/4 of the window)
PLOT_HEIGHT = (120, 260)                # px: the graph of any quantity under the panel


def fit(v: float, width: int, decimals: int, sign: bool = False) -> str:
    """``v`` in ``width`` characters: fixed point with ``decimals`` while it fits, then
    3 significant digits in powers of ten (a blown-up error read "12463561872839521173..."
    across the HUD's column), "n/a" when it is no number; ``sign``: always signed."""
    if not math.isfinite(v):
        return f"{'n/a':>{width}}"
    plus = "+" if sign else ""
    text = f"{v:{plus}{width}.{decimals}f}"
    return text if len(text) <= width else f"{v:{plus}{width}.2e}"


def fit_j(v: float) -> str:
    """An energy in J as the HUD shows it: signed, 3 decimals, in 8 characters (a
    drag loss of 554 J reads "+554.123", a blown-up one "-1.23e+09")."""
    return f"{fit(v, 8, 3, sign=True)} J"


class App:
    """The sandbox window: a :class:`Session`, its :class:`Input`, a camera and drawing.

    Build it from a :class:`Scene`, a :class:`World` (fixed 1/60 s steps, the view
    fitted to it), a level name or path, or ``None`` (the default level); ``screen``
    is the display surface (None: draw off-screen only, into ``canvas``). Drive it
    with ``frame(dt)``; ``handle(event)`` and ``do(action, arg)`` are the input and
    command entry points that ``frame`` uses.
    """

    def __init__(self, scene: Scene | World | str | Path | None = None, *,
                 screen: pygame.Surface | None = None, size: tuple[int, int] = WINDOW_SIZE,
                 out_dir: str | Path | None = None, clip_fps: int = 30,
                 clip_width: int = 960, kernels=None) -> None:
        if isinstance(scene, World):
            scene = scene_from_world(scene)
        elif not isinstance(scene, Scene):
            scene = scene_from_level(scene or DEFAULT_LEVEL)
        if not pygame.display.get_init():
            pygame.display.init()
        self.screen = screen
        self.size = screen.get_size() if screen is not None else tuple(size)
        self.canvas = pygame.Surface(self.size, 0, 32)
        self.fonts = Fonts()
        self.overlay = Overlay(self.fonts)
        self.renderer = WorldRenderer()
        self.graph = EnergyGraph(600)
        self.camera = Camera(self.size)
        self.out_dir = Path(out_dir) if out_dir is not None else files.default_out_dir()
        self.recorder = ClipRecorder(self.out_dir, clip_fps, clip_width)
        # The background compile (run_app): drawing stays on numpy until it is done.
        # ``kernels`` is shown in the HUD while it runs; ``warm`` is kept to start the
        # contact stages or another float type when a world needs them (_need_kernels).
        self.kernels = kernels
        self.warm = kernels
        if kernels is not None and not kernels.ready:
            self.renderer.backend = "numpy"

        self.running = True
        self.show_help = False
        self.help_page = 0                # the help's page (PgDn / PgUp while it shows)
        self.show_graph = True
        self.show_panel = True
        self.show_trails = True
        # Trails (L): the particles a person chose with Ctrl+click (None: nobody has
        # chosen, the level's own marks get short ones), each ``trail_seconds`` long.
        self.trailed: set[int] | None = None
        self.trail_seconds = SECONDS[1]
        # The debug overlay's commands (X, Alt+1-4, the panel's checkboxes); its layers
        # are the session's (debug_layers), drawn only while one is on.
        self.debug_draw = debug.DebugDraw(self)
        self.show_full_hud = False       # V: every number; the first screen is compact
        self._hud_height = 0             # px of the HUD's panel, as last laid out
        self.banner_rect: pygame.Rect | None = None      # where the last banner was drawn
        self.show_plot = True             # Shift+F: the graph under the panel
        self.plot = Plot(self)
        self.history: History | None = None
        self.ghost_history: History | None = None
        self.panel: ControlPanel | None = None
        self.editor = None                            # build mode (B): a build.Editor
        self.tool = "particle"
        self.builder = BuildMode(self)
        self.pointer = (-1, -1)                      # px, the last event's mouse position
        self.messages: list[list] = []             # [text, seconds left, is_error]
        self._captions: list[list] = []            # those of them that are the caption
        self.frame_count = 0
        self.last_dt = 0.0
        self.frame_times: deque[float] = deque()   # dt of the frames of the last second
        # Smoothed ms per frame: steps, energy sample, drawing, blit + display flip.
        self.timings = {"physics": 0.0, "energy": 0.0, "draw": 0.0, "present": 0.0}
        self._draw_error: str | None = None
        self._ledger_cost: float | None = None    # ms a frame when the split was dropped
        self._slow_frames = 0                     # frames in a row over LEDGER_BUDGET_S
        self._hud_widths: list[int] = []
        self._view = None
        self.input = Input(self)
        self.session = Session(scene, on_message=self.message,
                               on_segment=self._segment, on_clear=self._cleared)

        # Command table: keymap actions -> methods (dispatch by lookup, never an if-chain).
        s = self.session
        self.commands: dict[str, Callable] = {
            "cycle_integrator": s.cycle_integrator, "set_integrator": s.set_integrator,
            "cycle_timestep": s.cycle_timestep, "pause": s.toggle_pause,
            "step": s.single_step, "speed": s.scale_speed,
            "change_setting": s.change_setting, "set_setting": s.set_setting,
            "reset": self.reset, "level": self.change_level,
            "toggle_graph": self.toggle_graph, "toggle_help": self.toggle_help,
            "help_page": self.turn_help_page,
            "toggle_ghost": s.toggle_ghost, "cycle_ghost": s.cycle_ghost,
            "pan": self.pan, "zoom": self.zoom, "reset_view": self.reset_view,
            "screenshot": self.screenshot, "save_snapshot": self.save_snapshot,
            "load_snapshot": self.load_snapshot, "quit": self.quit,
            "set_timestep": s.set_timestep, "hz": s.scale_hz, "set_hz": s.set_hz,
            "cycle_constraints": s.cycle_constraints, "set_constraints": s.set_constraints,
            "set_speed": s.set_speed, "set_ghost": s.set_ghost, "set_level": self.set_level,
            "ghost_off": lambda: s.set_ghost(None),
            "toggle_panel": self.toggle_panel, "toggle_trails": self.toggle_trails,
            "toggle_hud": self.toggle_hud, "toggle_ensemble": s.toggle_ensemble,
            "toggle_plot": self.toggle_plot, "phase_axis": self.plot.phase_axis,
            "cycle_plot": self.plot.cycle, "cycle_plot_x": self.plot.cycle_x,
            "plot_y": self.plot.set_y, "plot_x": self.plot.set_x,
            "plot_log": self.plot.toggle_log,
            "caption": self.caption, "select": self.select, "record": self.record,
            "toggle_trail": self.toggle_trail, "trail_length": self.trail_length,
            "toggle_debug": self.debug_draw.toggle_all,
            "toggle_debug_layer": self.debug_draw.toggle,
            "set_debug_layer": self.debug_draw.set,
            "save_replay": lambda: s.save_replay(self.out_dir / "replays"),
            **{name: getattr(self.builder, name) for name in (
                "toggle_build", "set_tool", "cycle_tool", "set_prop", "toggle_prop", "undo",
                "redo", "build_delete", "save_level", "close_polygon", "cancel",
                "build_gesture", "build_select", "build_select_box", "build_move",
                "build_set", "new_level")},
        }
        self._scene_loaded()

    # --- the session's state, as the window shows it --------------------------------

    world = property(lambda self: self.session.world)
    ghost = property(lambda self: self.session.ghost)
    scene = property(lambda self: self.session.scene)
    policy = property(lambda self: self.session.policy)
    timestep = property(lambda self: self.session.timestep)
    trace = property(lambda self: self.session.trace)
    integrator = property(lambda self: self.session.integrator)
    last_plan = property(lambda self: self.session.last_plan)
    ghost_integrator = property(lambda self: self.session.ghost_integrator)
    grabbed = property(lambda self: self.input.grabbed)
    banner = property(lambda self: self.session.banner)
    paused = property(lambda self: self.session.paused,
                      lambda self, v: setattr(self.session, "paused", v))
    speed = property(lambda self: self.session.speed,
                     lambda self, v: setattr(self.session, "speed", v))
    #: The debug overlay's layers on (none: off), a set of ``debug.LAYERS``.
    debug_layers = property(lambda self: self.session.debug_layers)

    #: Worlds up to this many particles keep an energy ledger (World.track_energy): two
    #: energy evaluations a substep, and the substep path instead of a compiled frame.
    LEDGER_LIMIT = 5000
    #: ... and only while it does not cost the frame rate: after ``LEDGER_PATIENCE``
    #: frames in a row whose steps took longer than this with it (the compiled kernels
    #: loaded, no hand), the split is off for the rest of the level. The pile of 2,000
    #: balls took 11-12 ms a step with it, 5.3 without: ~25 fps in the window.
    LEDGER_BUDGET_S = 0.008
    LEDGER_PATIENCE = 30

    def _segment(self, label: str, merge: bool = False) -> None:
        """The integrator, the timestep or the ghost changed: a marker on the graph, and
        the ledger of where energy goes starts again with the graph's drift. ``merge``:
        a value dragged through (``EnergyGraph.new_segment``)."""
        self.graph.new_segment(label, merge)
        self.plot.new_segment(label)
        # Gravity set to or from none (a slider): % of a total with no gravity, J with.
        self.graph.allow_percent = not any(self.world.config.gravity)
        if self.world.ledger is not None:
            self.world.track_energy()

    def _cleared(self) -> None:
        """A new or reset world: the graph and the trails start again."""
        self.graph.clear()
        self.history = self.ghost_history = None
        self.plot.clear()
        self.trailed = None                   # another world: the level's marks again

    def _scene_loaded(self) -> None:
        """A level was (re)loaded: say what it is, fit its view (above that caption),
        title the window."""
        self.caption()
        self._place_panel()
        self.reset_view()
        self._ledger_cost = None            # a new level measures the split's cost again
        self._track_energy()
        # Under uniform gravity the total energy depends on where y = 0 is: a drift in
        # % of it means nothing, so the graph reads it in J (an orbit keeps %).
        self.graph.allow_percent = not any(self.world.config.gravity)
        self.show_title()

    def show_title(self) -> None:
        """The window's title bar: the program and the level's name."""
        if self.screen is not None:
            pygame.display.set_caption(f"{TITLE} - {self.scene.title}")   # ASCII for X

    def _track_energy(self) -> None:
        """The energy ledger only where the HUD can show it: it costs two energy
        evaluations a substep and keeps the world off its compiled frame (the soft blob:
        ~25 ms a frame with it, under 1 ms without), so not above ``LEDGER_LIMIT``
        particles, and not once it has cost this level the frame rate
        (:meth:`_weigh_ledger`)."""
        w = self.world
        w.track_energy(w.n <= self.LEDGER_LIMIT
                       and self._ledger_cost is None)

    def _weigh_ledger(self, seconds: float, stepped: bool) -> None:
        """After a frame whose steps took ``seconds``: drop the energy split for the
        rest of the level once it has cost the frame rate ``LEDGER_PATIENCE`` frames in
        a row (``LEDGER_BUDGET_S``), saying so. Frames on the numpy references (the
        kernels still loading, for this world's parts and float type: a float64 level
        opened after the float32 cloth waits for its own) or with a hand (the substep
        path either way) do not count."""
        w = self.world
        if (w.ledger is None or not stepped or w.mouse is not None
                or not self.session.compiled_now() or seconds <= self.LEDGER_BUDGET_S):
            self._slow_frames = 0
            return
        self._slow_frames += 1
        if self._slow_frames >= self.LEDGER_PATIENCE:
            self._slow_frames = 0
            self._ledger_cost = seconds * 1e3
            w.track_energy(False)
            self.message(f"energy split off for this level: its steps took "
                         f"{self._ledger_cost:.0f} ms a frame with it")

    def reset(self) -> None:
        self.input.grabbed = None
        self.session.reset()
        self._track_energy()

    def change_level(self, step: int) -> None:
        self.input.grabbed = None
        self.session.change_level(step)
        self._scene_loaded()

    def set_level(self, name: str) -> None:
        self.input.grabbed = None
        self.session.set_level(name)
        self._scene_loaded()

    def caption(self) -> None:
        """The level's description and what to try, until the first input (a key, a
        click, the wheel) and ``CAPTION_AFTER_INPUT_S`` after it; an earlier caption
        goes."""
        scene = self.scene
        self.messages = [m for m in self.messages
                         if not any(m is c for c in self._captions)]
        self._captions = []
        for text in (f"{scene.title}: {scene.description}" if scene.description else "",
                     f"try: {scene.hint}" if scene.hint else ""):
            if text:
                self.message(text, seconds=math.inf)
                self._captions.append(self.messages[-1])

    def _first_input(self) -> None:
        """A key, a click or the wheel: the caption waits no longer for it."""
        for m in self._captions:
            m[1] = min(m[1], CAPTION_AFTER_INPUT_S)

    def set_integrator(self, name: str) -> None:
        self.session.set_integrator(name)

    def set_timestep(self, mode: str) -> None:
        self.session.set_timestep(mode)

    # --- the frame ----------------------------------------------------------------

    def _need_kernels(self) -> None:
        """The first world with contacts (a level switch, build mode's first shape, a
        replay), or the first of a float type the warm-up left out (the 200x200 cloth's
        float32): the warm-up compiles their kernels now, behind the frames; the HUD
        says so meanwhile."""
        w = self.warm
        if w is None:
            return
        dtype = self.world.particles.x.dtype
        if self.world.has_contacts and w.need_contacts(dtype):
            self.kernels = w
        if w.need_dtype(dtype):
            self.kernels = w

    def frame(self, dt: float) -> None:
        """One frame: events, physics for ``dt`` seconds of real time, drawing."""
        self._need_kernels()
        for event in pygame.event.get():
            if event.type in _POINTER_EVENTS:
                self.pointer = tuple(event.pos)
            if event.type in _INPUT_EVENTS:
                self._first_input()
            # The help covers the panel: its keys and the wheel are the help's.
            helping = self.show_help and event.type in (pygame.KEYDOWN, pygame.MOUSEWHEEL)
            if self.show_panel and self.panel is not None and not helping:
                try:
                    if self.panel.process(event):
                        if event.type == pygame.KEYUP:
                            # A key let go while a text field had the keyboard (Ctrl
                            # after Ctrl+S, Save): still let go, or Ctrl stayed held.
                            self.input.key_up(event)
                        continue                      # a click on the panel, not the scene
                except Exception as e:              # a widget bug must not close the app
                    self.report("control panel", e)
            self.handle(event)
        if not self.running:
            return
        self.update(dt)
        t1 = time.perf_counter()
        self.draw()
        t2 = time.perf_counter()
        self.recorder.capture(self.canvas, dt if math.isfinite(dt) and dt > 0 else 0.0)
        for _, text, error in self.recorder.poll():
            self.message(text, error, seconds=8.0)
        self.present()
        self._smooth("draw", t2 - t1)
        self._smooth("present", time.perf_counter() - t2)
        self.frame_count += 1

    def update(self, dt: float) -> None:
        """Plan and take this frame's steps (none while paused, one plan per step key)."""
        try:
            dt = float(dt)
        except (TypeError, ValueError):
            dt = math.nan
        self.last_dt = dt
        if math.isfinite(dt) and dt > 0:
            self._count_frame(dt)
            self._age_messages(dt)
        self.input.follow()
        t0 = time.perf_counter()
        stepped = self.session.update(dt)
        t1 = time.perf_counter()
        if stepped:
            e, ghost_total = self.session.sample_energy()
            self.graph.add(self.world.t, e["kinetic"], e["potential"], e["total"],
                           ghost_total)
            self._record_history()
            self.plot.sample(e)
        self._smooth("physics", t1 - t0)
        self._smooth("energy", time.perf_counter() - t1)
        self._weigh_ledger(t1 - t0, bool(stepped))

    def _record_history(self) -> None:
        """Positions and velocities of the trail particles, world and ghost."""
        s = self.session
        p = s.world.particles
        marks = default_trails(p.mass, p.radius, p.inv_mass > 0)
        idx = np.array(sorted(self._trail_set(p.n) | {int(k) for k in marks}), np.int64)
        k = s.followed
        if k is not None and k < p.n and k not in idx:
            idx = np.append(idx, k)
        if self.history is None or not np.array_equal(self.history.idx, idx):
            self.history = History(idx)
            self.ghost_history = None
        self.history.add(p.x, p.v, s.world.t)
        if s.ghost is None:
            self.ghost_history = None
        else:
            g = s.ghost.particles
            if self.ghost_history is None or self._ghost_seen is not s.ghost:
                self.ghost_history = History(idx)
                self._ghost_seen = s.ghost
            self.ghost_history.add(g.x, g.v, s.ghost.t)
        if s.followed is None and len(idx):
            # The graph follows the fastest of them: the orbit's phase portrait started
            # on the sun, which hardly moves (ties, a level at rest: the first). Not a
            # choice (not recorded): a replay chooses the same.
            speed = np.hypot(p.v[idx, 0], p.v[idx, 1])
            s.followed = int(idx[int(np.argmax(speed))])

    _ghost_seen = None

    def _count_frame(self, dt: float) -> None:
        """Keep the frame times of the last second (at least the newest frame)."""
        q = self.frame_times
        q.append(dt)
        total = sum(q)
        while len(q) > 1 and total - q[0] >= FPS_WINDOW:
            total -= q.popleft()

    @property
    def fps(self) -> float:
        """Frames per second over the last second: ``1 / mean(dt)`` (an average of
        ``1/dt`` lets one fast frame outweigh slow ones)."""
        q = self.frame_times
        return len(q) / sum(q) if q else 0.0

    @property
    def worst_frame(self) -> float:
        """The longest frame of the last second, s."""
        return max(self.frame_times, default=0.0)

    def _smooth(self, key: str, seconds: float) -> None:
        ms = seconds * 1e3
        old = self.timings[key]
        self.timings[key] = ms if old == 0 else 0.9 * old + 0.1 * ms

    # --- input --------------------------------------------------------------------

    def handle(self, event: pygame.event.Event) -> None:
        """Turn one event into commands; nothing raised here ever leaves the app."""
        self.input.handle(event)

    #: Commands that change the world: a replay being played does that itself.
    WORLD_ACTIONS = frozenset({
        "cycle_integrator", "set_integrator", "change_setting", "set_setting", "reset",
        "level", "set_level", "load_snapshot", "cycle_timestep", "set_timestep", "hz",
        "set_hz", "cycle_constraints", "set_constraints"})

    def do(self, action: str, arg=None) -> None:
        """Run the command ``action`` (a keymap action name); errors become messages."""
        if self.session.player is not None and action in self.WORLD_ACTIONS:
            self.message("playing a replay: it makes its own changes (Q quits)", True)
            return
        try:
            fn = self.commands[action]
            fn() if arg is None else fn(arg)
        except Exception as e:
            from .keymap import KEYMAP
            said = next((b.help for b in KEYMAP if b.action == action), None)
            self.report(action, e, said)

    def report(self, what: str, e: Exception, said: str | None = None) -> None:
        """An error of ``what`` on screen and on stderr. The screen gets the error's own
        sentence when it is one of ours (a ValueError or OSError: "a world with 1,104
        links cannot ..."), else what the person asked for (``said``, e.g. the key's help
        line) and the error's kind; never an internal name such as "cycle_constraints"."""
        detail = str(e) or type(e).__name__
        print(f"sandbox: {what} failed: {detail}", file=sys.stderr)
        if isinstance(e, (ValueError, OSError)) and str(e):
            self.message(detail, error=True)
        else:
            self.message(f"{said or what}: that did not work ({detail})", error=True)

    def resized(self) -> None:
        """The window changed size: a new canvas, and the level's view fitted again
        inside the area the HUD leaves free."""
        surface = pygame.display.get_surface() if self.screen is not None else None
        if surface is None:                  # drawing off-screen: the size is ours
            return
        self.screen = surface
        self.size = surface.get_size()
        self.canvas = pygame.Surface(self.size, 0, 32)
        self.camera.resize(self.size)
        self._hud_widths = []
        self._place_panel()
        self.reset_view()

    # --- commands of the window ---------------------------------------------------

    def message(self, text: str, error: bool = False, seconds: float = MESSAGE_SECONDS
                ) -> None:
        self.messages.append([text, seconds, error])
        del self.messages[:-5]

    def _age_messages(self, dt: float) -> None:
        for m in self.messages:
            m[1] -= min(dt, 0.5)
        self.messages = [m for m in self.messages if m[1] > 0]

    def toggle_graph(self) -> None:
        self.show_graph = not self.show_graph

    def toggle_help(self) -> None:
        self.show_help = not self.show_help
        self.help_page = 0

    def turn_help_page(self, step: int = 1) -> None:
        """The help's next (``step`` > 0) or previous page; drawing keeps it to the pages
        the window's size gives."""
        self.help_page = max(self.help_page + (1 if step > 0 else -1), 0)

    def toggle_panel(self) -> None:
        self.show_panel = not self.show_panel
        self._place_panel()
        self.reset_view()

    def toggle_trails(self) -> None:
        self.show_trails = not self.show_trails

    def _trail_set(self, n: int) -> set[int]:
        """The particles that get a trail now: the chosen ones, or (nobody has chosen)
        the level's own marks."""
        if self.trailed is not None:
            return {k for k in self.trailed if k < n}
        p = self.world.particles
        return {int(k) for k in default_trails(p.mass, p.radius, p.inv_mass > 0)}

    def trail_shown_seconds(self) -> float:
        """How long the trails drawn now are (s): the level's marks are capped at
        ``DEFAULT_SECONDS``."""
        if self.trailed is None:
            return min(self.trail_seconds, DEFAULT_SECONDS)
        return self.trail_seconds

    def toggle_trail(self, k: int | None = None) -> None:
        """Ctrl+click: particle ``k`` gets a trail, or loses it. The first choice
        replaces the level's own marks; trails come on if L had them off."""
        if k is None or not 0 <= k < self.world.n:
            self.message("Ctrl+click on a particle gives it a trail")
            return
        k = int(k)
        if self.trailed is None:
            self.trailed = set()
        if k in self.trailed:
            self.trailed.discard(k)
            self.message(f"trail off: particle {k}")
        else:
            self.trailed.add(k)
            self.show_trails = True
            self.message(f"trail on: particle {k} (Ctrl+click again: off; "
                         f"Shift+L: length)")
        self.history = None                       # re-chosen with it next frame

    def trail_length(self, step: int = 1) -> None:
        """Shift+L: the trails' length in seconds, round ``SECONDS``."""
        i = SECONDS.index(self.trail_seconds) if self.trail_seconds in SECONDS else 0
        self.trail_seconds = SECONDS[(i + step) % len(SECONDS)]
        self.show_trails = True
        cap = ""
        if self.trailed is None and self.trail_seconds > DEFAULT_SECONDS:
            cap = f" (the level's own: at most {DEFAULT_SECONDS:g} s; Ctrl+click a particle)"
        self.message(f"trails: {self.trail_seconds:g} s{cap}")

    def toggle_plot(self) -> None:
        self.show_plot = not self.show_plot
        self._place_panel()                 # the panel may take the graph's place
        self.reset_view()

    def toggle_hud(self) -> None:
        """The full HUD (every number) or the compact one; the scene is fitted again
        only if the HUD's height moved the area it is drawn in."""
        self.show_full_hud = not self.show_full_hud
        self._hud_widths = []
        before = self.safe_area()
        self._measure_hud()
        if self.safe_area() != before:
            self.reset_view()

    def select(self, k: int | None) -> None:
        """The particle the graph follows (Ctrl+click gives it a trail)."""
        if k is not None and 0 <= k < self.world.n:
            self.session.follow(int(k))
            self.history = None                       # re-chosen with it next frame

    def pan(self, frac) -> None:
        fx, fy = frac
        self.camera.pan_pixels(-fx * self.size[0], fy * self.size[1])

    def zoom(self, factor: float) -> None:
        self.camera.zoom_at(self.camera.half, factor)

    def reset_view(self) -> None:
        self._measure_hud()
        self.camera.frame(self.scene.view_center, self.scene.view_width, self.safe_area())

    # --- layout -------------------------------------------------------------------
    #
    #   +-------------------------+---------------+    HUD: top left, never wider than
    #   | HUD (compact, or V)     | energy graph  |    hud_width(); the graph beside it,
    #   +-------------------------+---------------+    GRAPH_WIDTH wide, graph_height()
    #   |                         | control panel |    tall; the panel and the portrait
    #   |  the scene (safe_area)  | (scrolls when |    in the column under the graph,
    #   |                         |  it must)     |    the panel scrolling when the
    #   | caption, messages       | phase portrait|    column is shorter than its rows
    #   | strain legend           |               |
    #   +-------------------------+---------------+

    def graph_height(self) -> int:
        """The energy graph's height: a quarter of the window's, within ``GRAPH_HEIGHT``."""
        lo, hi = GRAPH_HEIGHT
        return int(min(max(round(0.25 * self.size[1]), lo), hi))

    def hud_width(self) -> int:
        """px the HUD's panel may take: the window less the graph's least width beside
        it (over the right column)."""
        return max(self.size[0] - 16 - 8 - GRAPH_WIDTH[0], 160)

    def _right_column(self) -> bool:
        """The control panel and the graph share a column at the right."""
        return (self.show_panel or self.show_plot) and self.size[0] >= 2 * PANEL_WIDTH + 200

    def _column_rects(self) -> tuple[pygame.Rect | None, pygame.Rect | None]:
        """``(panel, plot)`` rects in the right column under the energy graph (None: not
        shown). The panel may take what the plot's least height leaves (``panel``'s
        height; it takes its rows' height at most and scrolls when that is more); the
        graph of any quantity the rest under it."""
        if not self._right_column():
            return None, None
        x = self.size[0] - PANEL_WIDTH - 8
        y = 8 + self.graph_height() + 8
        bottom = self.size[1] - 8
        lo, hi = PLOT_HEIGHT
        panel_rect = None
        if self.show_panel:
            room = max(bottom - y - (lo + 8 if self.show_plot else 0), 3 * 28)
            rows = ControlPanel.BUILD_HEIGHT if self.editor is not None else \
                (self.panel.rows_height() if self.panel is not None else ControlPanel.HEIGHT)
            panel_rect = pygame.Rect(x, y, PANEL_WIDTH, room)
            y += min(rows, room) + 8
        plot = None
        if self.show_plot and bottom - y >= lo:
            plot = pygame.Rect(x, y, PANEL_WIDTH, min(bottom - y, hi))
        return panel_rect, plot

    def plot_header(self) -> pygame.Rect | None:
        """Where the graph's pickers go (its top row), None while it is not shown."""
        _, plot = self._column_rects()
        return None if plot is None else plot_header_rect(plot)

    def _place_panel(self) -> None:
        rect, _ = self._column_rects()
        if rect is None:
            return
        if self.panel is None:
            try:
                self.panel = ControlPanel(self, rect)
            except Exception as e:                    # the window works without it
                self.report("control panel", e)
                self.show_panel = False
        else:
            self.panel.place(rect)

    def safe_area(self) -> tuple[int, int, int, int]:
        """``(x, y, w, h)`` of the window not under the HUD and the graph, the right
        column, the bottom legend or the level's caption while it waits for the first
        input (it stays that long: the soft blob lay under it)."""
        if not self._hud_height:
            self._measure_hud()
        top = 8 + max(self.graph_height(), self._hud_height) + 10
        right = self.size[0] - (PANEL_WIDTH + 16 if self._right_column() else 0)
        legend = self._legend_height(right)
        bottom = self.size[1] - legend - 16
        waiting = [(m[0], m[2]) for m in self._captions if m[1] == math.inf]
        if waiting:
            _, said = self.overlay.messages_layout(self.size, waiting,
                                                   self.size[1] - legend - 14, right - 16)
            bottom = min(bottom, said.top - 6)
        return (0, top, right, max(bottom - top, 1))

    def _messages_args(self) -> tuple[list, int, int]:
        """The messages, their bottom and their width, for :meth:`Overlay.messages`:
        above the strain legend, left of the right column."""
        free = self.safe_area()[2]
        return ([(m[0], m[2]) for m in self.messages],
                self.size[1] - self._legend_height(free) - 14, free - 16)

    def _legend_height(self, width: int) -> int:
        """px of the strain legend at the bottom left, in ``width`` px (two rows when
        one does not fit); kept per width (asked several times a frame)."""
        h = self._legend_heights.get(width)
        if h is None:
            h = self._legend_heights[width] = strain_legend_size(self.fonts.small,
                                                                 width - 16)[1]
        return h

    _legend_heights: dict = {}       # shared: the fonts are the same for every App

    def _measure_hud(self) -> None:
        """The HUD's height as it will be drawn, for the area the scene is fitted in."""
        rows = max(len(col) for col in self.hud_shown())
        self._hud_height = rows * self.fonts.text.get_linesize() + 2 * HUD_PAD

    def screenshot(self) -> Path:
        path = files.save_png(self.canvas, self.out_dir / "screenshots")
        self.message(f"screenshot: {path}")
        return path

    def save_snapshot(self) -> Path:
        return self.session.save_snapshot(self.out_dir / "snapshots")

    def load_snapshot(self) -> None:
        self.input.grabbed = None
        self.session.load_snapshot(self.out_dir / "snapshots")
        self._track_energy()

    def record(self, fmt: str = "mp4") -> None:
        """Start a clip, or stop the one being recorded (it is finished in the
        background; the HUD shows the progress)."""
        if self.recorder.recording:
            self.recorder.stop()
            self.message(f"stopped: finishing {self.recorder.path.name}")
            return
        try:                            # an install without the clips extra: say what adds it
            require("clips", f"{fmt.upper()} clips", CLIP_MODULES[fmt])
        except MissingExtra as e:
            self.message(str(e), error=True, seconds=10.0)
            return
        path = self.recorder.start(self.size, fmt)
        w, h = self.recorder.size
        self.message(f"recording {path.name} at {self.recorder.fps} fps, {w}x{h} "
                     f"(C again stops)")

    def close(self, timeout: float = 120.0) -> None:
        """Finish what is being written (a clip) before the window goes."""
        if self.recorder.recording or self.recorder.finishing:
            self.recorder.stop()
            print(f"sandbox: finishing {self.recorder.path} ...", file=sys.stderr)
            self.recorder.wait(timeout)
            for _, text, _ in self.recorder.poll():
                print(f"sandbox: {text}", file=sys.stderr)

    def quit(self) -> None:
        self.running = False

    # --- drawing ------------------------------------------------------------------

    def _positions(self, world: World, before: np.ndarray | None) -> np.ndarray:
        """Positions to draw: interpolated by the policy's alpha in fixed mode."""
        x = world.particles.x
        alpha = self.policy.alpha
        if alpha > 0 and before is not None and before.shape == x.shape:
            return before + alpha * (x - before)
        return x

    def draw(self) -> None:
        surf = self.canvas
        try:
            r, cam, s = self.renderer, self.camera, self.session
            world = s.world
            view = self._view = world.view()
            r.background(surf, cam, world.config.bounds)
            self.debug_draw.draw_under(surf, cam, world)    # the shape grid, faintly
            r.shapes(surf, cam, view.shapes)
            x = self._positions(world, s.x_before)
            self.label_rects = self._draw_labels(surf, view, x)
            if self.show_trails and s.ensemble is None:     # the ensemble: no trails
                chosen = sorted(self._trail_set(world.n))
                seconds = self.trail_shown_seconds()
                if self.ghost_history is not None:
                    draw_trails(surf, cam.to_screen, self.ghost_history, GHOST_COLOUR,
                                BACKGROUND, particles=chosen, seconds=seconds)
                if self.history is not None:
                    draw_trails(surf, cam.to_screen, self.history, TRAIL_COLOUR, BACKGROUND,
                                particles=chosen, seconds=seconds)
            r.world(surf, cam, view, x)
            if s.ghost is not None:
                gx = self._positions(s.ghost, s.ghost_before)
                r.ghost(surf, cam, s.ghost.view(), gx)
                self._ghost_label(surf, gx)
            if s.ensemble is not None:
                self._draw_ensemble(surf)
            self.debug_draw.draw(surf, cam, world, self.safe_area())
            r.hand(surf, cam, view, x)
            if self.editor is not None:
                self._draw_build(surf)
            if self.input.cut_path is not None:
                r.cut_path(surf, cam.to_screen(np.array(self.input.cut_path)))
            self.draw_hud(surf)
            self._draw_error = None
        except Exception as e:   # a drawing bug must not close the window
            text = f"drawing failed: {type(e).__name__}: {e}"
            if text != self._draw_error:
                print(f"sandbox: {text}", file=sys.stderr)
                self._draw_error = text
        else:
            return
        # Outside the handler: its traceback (and any pixel lock in it) is released.
        surf.fill((0, 0, 0))
        surf.blit(self.fonts.text.render(self._draw_error, True, WARN), (10, 10))

    label_rects: list = []          # where the level's body labels were last drawn

    def body_labels(self) -> list[tuple]:
        """The level's body labels as the renderer takes them, ``(text, particle
        indices, label_at)``; none in build mode, where the bodies are being changed."""
        if self.editor is not None:
            return []
        bodies = self.world.bodies
        return [(text, bodies[k].particles, at) for k, text, at in self.scene.labels
                if k < len(bodies)]

    def _draw_labels(self, surf: pygame.Surface, view, x: np.ndarray) -> list:
        labels = self.body_labels()
        if not labels:
            return []
        return self.renderer.labels(surf, self.camera, self.fonts.text, labels, view, x,
                                    pygame.Rect(self.safe_area()))

    def _draw_ensemble(self, surf: pygame.Surface) -> None:
        """Every running member in its integrator's colour over the reference's grey
        rings (a stopped member is no longer drawn)."""
        ens = self.session.ensemble
        members = [(m.world.view(), m.world.particles.x, ensemble_colour(m.name))
                   for m in ens.members if m.stopped is None]
        ref = ens.reference
        reference = None
        if ref is not None and ref.stopped is None:
            reference = (ref.world.view(), ref.world.particles.x)
        self.renderer.ensemble(surf, self.camera, members, reference)

    def ensemble_lines(self) -> list:
        """The ensemble's legend: a line a member in its colour (label, order, error
        against the reference now and at ``ENSEMBLE_MARK_S``, that error's ratio to the
        one at the step before, energy drift), or "diverged at t = ..." for one that
        stopped; the reference's line and what the step keys do."""
        from ..ensemble import FINE
        from .session import ENSEMBLE_MARK_S
        s = self.session
        ens = s.ensemble
        prev = s.ensemble_prev
        mark = f"at {ENSEMBLE_MARK_S:g} s"
        ratio_head = (f"÷ h {prev[0] * 1e3:.1f}" if prev is not None else "")
        lines: list = [
            (f"all integrators · h = {s.ensemble_h * 1e3:.2f} ms · "
             f"{s.ensemble_elapsed():.1f} s since the start", KEY),
            (f"{'integrator':<18} p {'error m':>9} {mark:>8} {ratio_head:>8} "
             f"{'drift J':>9}", DIM)]
        for r in ens.rows():
            colour = ensemble_colour(r.name)
            head = f"{r.label[:18]:<18} {r.order}"
            if r.stopped is not None:
                m = next(x for x in ens.members if x.name == r.name)
                lines.append((f"{head} diverged at t = {m.t_stop:.3f} s", colour))
                continue
            at = s.ensemble_marks.get(r.name, math.nan)
            ratio = math.nan
            if prev is not None:
                before = prev[1].get(r.name, math.nan)
                if at > 0 and math.isfinite(before):
                    ratio = before / at
            mark_text = f"{at:8.1e}" if math.isfinite(at) else f"{'…':>8}"
            ratio_text = f"{ratio:8.1f}" if math.isfinite(ratio) else f"{'':>8}"
            lines.append((f"{head} {r.error:9.2e} {mark_text} {ratio_text} "
                          f"{fit(r.drift, 9, 3, sign=True)}", colour))
        lines.append((f"grey rings: {INTEGRATORS['forest_ruth'].label} at h/{FINE} "
                      "(the truth)", (170, 170, 170)))
        lines.append(("Ctrl+= halves h, Ctrl+- doubles it · A: off", DIM))
        return lines

    #: Frames between two renderings of the ensemble's legend (its text ~2 ms a frame;
    #: numbers that change 10 times a second are still read as live).
    LEGEND_EVERY = 6

    def _draw_ensemble_legend(self, surf: pygame.Surface) -> None:
        """The legend at the top right of the scene's area (left of the panel), its
        text made anew every ``LEGEND_EVERY`` frames."""
        cached = self._legend_cache
        if cached is None or self.frame_count % self.LEGEND_EVERY == 0:
            f = self.fonts.small
            lines = self.ensemble_lines()
            width = max(f.size(t)[0] for t, _ in lines) + 16
            height = f.get_linesize() * len(lines) + 16
            cached = pygame.Surface((width, height), pygame.SRCALPHA)
            cached.fill(PANEL_RGBA)                 # set, not blended: as text_block's
            for k, (text, colour) in enumerate(lines):
                cached.blit(f.render(text, True, colour), (8, 8 + k * f.get_linesize()))
            self._legend_cache = cached
        sx, sy, sw, _ = self.safe_area()
        w, h = cached.get_size()
        # Top left or top right of the scene's area: where fewer of the bodies are (at
        # the right it lay on the pendulums' double pendulum).
        pts = self.camera.to_screen(self.world.particles.x)
        spots = [(max(sx + 8, sx + sw - w - 8), sy), (sx + 8, sy)]
        covered = [int(((pts[:, 0] >= x - 20) & (pts[:, 0] < x + w + 20)
                        & (pts[:, 1] >= y - 20) & (pts[:, 1] < y + h + 20)).sum())
                   for x, y in spots]
        last = self._legend_spot
        best = int(np.argmin(covered))
        if last is not None and covered[last] <= covered[best]:
            best = last
        self._legend_spot = best
        at = spots[best]
        surf.blit(cached, at)
        self.ensemble_legend_at = cached.get_rect(topleft=at)

    ensemble_legend_at: pygame.Rect | None = None
    _legend_cache: pygame.Surface | None = None
    _legend_spot: int | None = None

    def hud_shown(self) -> list[list]:
        """The HUD as it is drawn: the compact lines, or (V) every line in two columns
        (one in a window too narrow for two), each line fitted to its column's width
        (:func:`hud.fit_line`: broken at its " · " into lines under its value)."""
        width = self.hud_width()
        if self.show_full_hud:
            cols = self.hud_columns()
            chars = self.fonts.text.size("0")[0]
            if width < 2 * HUD_CHARS * chars + HUD_GAP + 2 * HUD_PAD:
                cols = [cols[0] + cols[1]]
        else:
            cols = [self.compact_hud()]
        n = self.hud_chars(len(cols))
        if not self.show_full_hud:
            n = min(n, HUD_CHARS)              # compact in width too: the graph keeps it
        return [[piece for line in col for piece in fit_line(line, n)] for col in cols]

    def hud_chars(self, columns: int = 1) -> int:
        """Characters a line of the HUD may hold with ``columns`` columns."""
        px = (self.hud_width() - 2 * HUD_PAD - HUD_GAP * (columns - 1)) // columns
        return max(px // self.fonts.text.size("0")[0], 8)

    def compact_hud(self) -> list:
        """The first screen's HUD: the level, the integrator, the timestep policy, the
        state with the frame rate, where the energy goes, and the keys for more."""
        s = self.session
        speed = f" · speed x{s.speed:g}" if s.speed != 1 else ""
        state, colour = self._state_line(speed)
        return [
            (s.scene.title, KEY),
            self._integrator_line(),
            f"timestep    {s.policy.describe()}",
            (f"{state} · {self.fps:.0f} fps", colour),
            self._energy_line(),
            ("V: every number · H or F1: keys", DIM),
        ]

    def _integrator_line(self) -> str:
        integ = self.world.integrator
        names = list(INTEGRATORS)
        return (f"integrator  {names.index(integ.name) + 1}/{len(names)} {integ.label}"
                f" · order {integ.order}{', symplectic' if integ.symplectic else ''}")

    def hud_columns(self) -> list[list]:
        """The full HUD's text (V): two columns of ``str`` or ``(str, colour)`` lines,
        as long as they are (:meth:`hud_shown` fits them to the window)."""
        s = self.session
        w, cfg, pol = s.world, s.world.config, s.policy
        view = self._view if self._view is not None else w.view()
        plan = s.last_plan
        mean, worst = view.error()
        speed = f" · speed x{s.speed:g}" if s.speed != 1 else ""
        dropped = (f" · dropped {pol.book.dropped:.3f} s"
                   if s.timestep in ("fixed", "variable") else "")
        springs = f" · {plural(len(view.spring_i), 'spring')}" if len(view.spring_i) else ""
        ms = self.timings
        ghost = (("ghost       " + s.ghost.integrator.label + " (pink)", GHOST_COLOUR)
                 if s.ghost is not None else ("ghost       off (G)", DIM))
        hand: str | tuple = ("hand        left drag: a spring to the cursor", DIM)
        if w.mouse is not None:
            f = float(np.hypot(*w.mouse.force(w.particles.h_prev or 1.0)))
            hand = (f"hand        {f:7.3g} N of at most {w.mouse.max_force:.3g} N", KEY)
        left = [
            (s.scene.title, KEY),
            self._integrator_line(),
            f"timestep    {pol.describe()}{speed}",
            f"frame       {self.last_dt * 1e3:5.1f} ms · {self.fps:3.0f} fps · worst "
            f"{self.worst_frame * 1e3:5.1f} ms",
            f"steps       {len(plan):2d} this frame, {sum(plan) * 1e3:5.1f} ms of sim time",
            f"solver      {plural(cfg.iterations, 'iteration')} x "
            f"{plural(cfg.substeps, 'substep')}",
            self._links_line(),
            self._state_line(speed),
        ]
        right = [
            f"bodies      {plural(view.n, 'particle')} · {plural(len(view.link_i), 'link')}"
            f"{springs}",
            f"error       mean {fit(mean * 100, 6, 3)}% · max {fit(worst * 100, 7, 3)}%",
            f"time        sim {fit(w.t, 7, 2)} s{dropped}",
            hand,
            f"cost ms     physics {ms['physics']:5.1f} · draw {ms['draw']:5.1f} · flip "
            f"{ms['present']:4.1f}",
            self._energy_line(),
            velocity_line(w),           # which v the K and the graphs read (velocity.py)
            ghost,
            ("V: the short HUD · H or F1: keys", DIM),
        ]
        return [left, right]

    def _state_line(self, speed: str) -> tuple:
        """Running, paused, or playing a replay (frame k of n): the replay window looked
        like a live session."""
        s = self.session
        if s.player is not None:
            k, n = s.player["frame"], len(s.player["rep"].frames)
            return (f"state       REPLAY frame {k:,} of {n:,}"
                    + (" · paused" if s.paused else "") + speed, KEY)
        if s.paused:
            return ("state       PAUSED" + speed, WARN)
        return ("state       running" + speed, (150, 225, 150))

    def _links_line(self) -> str | tuple:
        """How rigid links are solved, and whether the combination is symplectic."""
        w = self.world
        if not len(w.constraints):
            return ("links       none", DIM)
        c = w.constraint_scheme
        text = f"links       {c.scheme}: {'symplectic' if c.symplectic else 'not symplectic'}"
        return (text, (150, 225, 150) if c.symplectic else TEXT)

    def _energy_line(self) -> str | tuple:
        """Where the energy goes since the graph's marker: the integrator's own steps or
        the constraint solver's corrections (XPBD projects positions inelastically, so a
        symplectic integrator's pendulum still loses energy, to the solver), and where
        the level has them the air drag and what compliant links store."""
        w = self.world
        ledger = w.ledger
        if ledger is None and self._ledger_cost is not None:
            return (f"energy      split off: {self._ledger_cost:.0f} ms of steps a frame "
                    "with it", DIM)
        if ledger is None:
            return ("energy      split not measured above "
                    f"{self.LEDGER_LIMIT:,} particles", DIM)
        parts = [f"integrator {fit_j(ledger['integrator'])}",
                 f"solver {fit_j(ledger['solver'])}"]
        if w.config.drag or ledger["drag"]:
            parts.append(f"drag {fit_j(ledger['drag'])}")
        if w.constraints.compliant or ledger["links"]:
            parts.append(f"in soft links {fit_j(ledger['links'])}")
        return "energy      " + " · ".join(parts)

    def draw_hud(self, surf: pygame.Surface) -> None:
        f = self.fonts
        hud = columns_block(surf, f.text, self.hud_shown(), (8, 8), pad=HUD_PAD,
                            gap=HUD_GAP, min_widths=self._hud_widths)
        self._hud_height = hud.h
        free = self.safe_area()[2]
        legend_h = self._legend_height(free)
        strain_legend(surf, f.small, (8, surf.get_height() - legend_h - 8), width=free - 16)
        beside = free                               # px left of the graph, under the HUD
        if self.show_graph:
            # Top right beside the HUD, as wide as it leaves (hud_width keeps the least).
            W = surf.get_width()
            x = max(hud.right + 8, W - 8 - GRAPH_WIDTH[1])
            if W - 8 - x >= 200:
                rect = pygame.Rect(x, 8, W - 8 - x, self.graph_height())
                beside = min(free, x - 8)
            else:                                      # a window narrower than 800 px
                rect = pygame.Rect(8, hud.bottom + 8, min(W - 16, 480), 150)
            self.graph.draw(surf, rect, f)
        if self.banner is not None:
            self.banner_rect = self.overlay.banner(surf, *self.banner, top=hud.bottom + 12,
                                                   width=free)
        k = self.kernels
        if k is not None and "extras" in k.ready_parts:
            self.renderer.backend = "auto"       # the drawing's kernels are loaded
        if k is not None and not k.done:
            rec = k.status()
        else:
            rec = self.recorder.status()
            if k is not None:                            # done: say how it ended, once
                if k.ready:
                    self.renderer.backend = "auto"       # the compiled drawing is ready
                self.message(k.status(), error=not k.ready)
                self.kernels = None
        if rec is not None:
            # Wrapped left of the graph and the right column ("first start: building
            # fast physics ..." ran under the panel at 800 px, over the graph at 1024).
            colour = WARN if self.recorder.recording else KEY
            text_block(surf, f.text, [(line, colour) for line in
                                      self.overlay.wrap(rec, beside - 24)],
                       (8, hud.bottom + 4), pad=8)
        if self.session.ensemble is not None:
            self._draw_ensemble_legend(surf)
        self.overlay.messages(surf, *self._messages_args())
        panel_rect, plot = self._column_rects()
        if plot is not None:
            pickers = self.show_panel and self.panel is not None and \
                self.panel.plot_picker is not None
            self.plot.draw(surf, plot, pickers)
        if self.show_panel and self.panel is not None and panel_rect is not None:
            self.panel.update(self.last_dt if math.isfinite(self.last_dt) else 0.0)
            self.panel.draw(surf)
        if self.show_help:
            self.help_page = self.overlay.draw_help(surf, self.scene.title,
                                                    self.scene.description, self.help_page)

    def _draw_build(self, surf: pygame.Surface) -> None:
        """The selection, a drag of it, the box being drawn and the gesture under way,
        in build mode (``build_mode.draw``)."""
        from .build_mode import draw
        draw(self, surf)

    def _ghost_label(self, surf: pygame.Surface, gx: np.ndarray) -> None:
        """``ghost: <integrator>`` beside the ghost's bodies, in its colour."""
        label = self.fonts.small.render(f"ghost: {self.session.ghost.integrator.label}",
                                        True, GHOST_COLOUR)
        spot = self.ghost_label_at = self.ghost_label_rect(gx, label.get_size())
        if spot is not None:
            surf.blit(label, spot.topleft)

    ghost_label_at: pygame.Rect | None = None      # where the label was last drawn

    #: Points a label must not cover: a pinned particle (a pendulum's pivot, a bridge's
    #: anchor) weighs this many moving ones.
    PINNED_WEIGHT = 20
    #: At most about this many particles of a world place the label (every k-th).
    LABEL_POINTS = 4000

    def ghost_label_rect(self, gx: np.ndarray, size: tuple[int, int]) -> pygame.Rect | None:
        """Where the ghost's label goes: of the places around the ghost's moving bodies
        (above right, below, right, left, ...; around their drawn discs, not their
        centres), inside the scene's free area, the one whose drawn discs of the world
        and the ghost reach into it least, a pinned one counting ``PINNED_WEIGHT``, off
        the caption and the level's body labels; the place last chosen while it is as
        good as any, so the label does not hop. Above right, the only place tried once,
        lay on the pendulums' pivot and the bridge's right anchor; placed by the balls'
        centres, the label lay on the cradle's balls."""
        s = self.session
        cam = self.camera
        ghost_view = s.ghost.view()
        movable = ~np.asarray(ghost_view.pinned, bool)
        use = np.flatnonzero(movable) if movable.any() else np.arange(len(gx))
        # A cloth's every k-th particle places the label as well as all of them
        # (cloth_200's 40,000 took 6.4 ms a frame).
        use = use[::max(use.size // self.LABEL_POINTS, 1)]
        pts = cam.to_screen(gx[use])
        rad = drawn_radii(ghost_view, cam.scale)[use]
        ok = np.isfinite(pts).all(axis=1)
        if not ok.any():
            return None
        pts, rad = pts[ok], rad[ok]
        w, h = size
        (x0, y0), (x1, y1) = (pts - rad[:, None]).min(axis=0), (pts + rad[:, None]).max(axis=0)
        cx, cy = (x0 + x1) / 2 - w / 2, (y0 + y1) / 2 - h / 2
        high = y0 - 2 * h - 12                          # a row above the level's labels
        places = [(x1 + 8, y0 - h - 4), (cx, y1 + 8), (x1 + 8, cy), (x0 - w - 8, cy),
                  (cx, y0 - h - 8), (x0 - w - 8, y0 - h - 4), (x1 + 8, y1 + 4),
                  (x0 - w - 8, y1 + 4), (cx, high), (x1 + 8, high), (x0 - w - 8, high)]
        obstacles, radii, weights = self._label_obstacles(gx, ghost_view)
        sx, sy, sw, sh = self.safe_area()
        _, said = self.overlay.messages_layout(self.size, *self._messages_args())
        named = [r for r in self.label_rects if r is not None]
        scores = []
        rects = []
        for px, py in places:
            x = float(np.clip(px, sx + 4, max(sx + 4, sx + sw - w - 4)))
            y = float(np.clip(py, sy + 4, max(sy + 4, sy + sh - h - 4)))
            r = pygame.Rect(int(x), int(y), w, h)
            inside = reach_into(r.inflate(4, 4), obstacles, radii)
            # Pushed into the free area, a place may land on the bodies: moved costs.
            score = float(weights[inside].sum()) + abs(x - px) / 50 + abs(y - py) / 50
            if said is not None and r.colliderect(said):   # drawn over it: unseen
                score += 1000.0
            score += 1000.0 * sum(r.colliderect(n) for n in named)
            scores.append(score)
            rects.append(r)
        best = int(np.argmin(scores))
        last = self._label_place
        if last is not None and last < len(scores) and scores[last] <= scores[best] + 0.5:
            best = last
        self._label_place = best
        return rects[best]

    _label_place: int | None = None

    def _label_obstacles(self, gx: np.ndarray, ghost_view) -> tuple[np.ndarray, np.ndarray,
                                                                     np.ndarray]:
        """Screen positions (px) of the world's and the ghost's particles as drawn, at
        most a few thousand (every k-th of a cloth), their drawn radii (px) and their
        weights (pinned ones heavier)."""
        w = self.world
        view = self._view if self._view is not None else w.view()
        x = np.concatenate([self._positions(w, self.session.x_before), gx])
        radii = np.concatenate([drawn_radii(view, self.camera.scale),
                                drawn_radii(ghost_view, self.camera.scale)])
        pinned = np.concatenate([view.pinned, ghost_view.pinned])
        weight = np.where(pinned, float(self.PINNED_WEIGHT), 1.0)
        step = max(len(x) // self.LABEL_POINTS, 1)
        if step > 1:
            keep = np.zeros(len(x), bool)
            keep[::step] = True
            keep |= weight > 1                          # every pin counts
            x, radii, weight = x[keep], radii[keep], weight[keep]
        pts = self.camera.to_screen(x)
        ok = np.isfinite(pts).all(axis=1)
        return pts[ok], radii[ok], weight[ok]

    def present(self) -> None:
        if self.screen is not None:
            self.screen.blit(self.canvas, (0, 0))
            pygame.display.flip()


# --------------------------------------------------------------------------- run_app

def start_kernels(dtype: str = "float64", small: bool = False, contacts: bool = True):
    """Make the compiled kernels ready behind the first frames (``sandbox/warmup.py``):
    the level's float type (another one's when a world of it appears); the contact
    stages in the level's float type if the first world has any (``contacts``; else
    when one first appears, in its float type: ``App._need_kernels``; 9 of the 15
    shipped levels need none, and they are most of the compiling); the drawing's
    kernels in the same child.
    Until they are ready every world runs its numpy reference (the same numbers) and the
    HUD says so, so the first frame never waits for the compiler. ``small``: the first
    world's numpy frames are cheap, so even a warm cache is loaded behind the first
    frames instead of on the first call (``warmup.start_background``'s
    ``numpy_first``)."""
    return warmup.start_background(dtypes=kernel_dtypes(dtype),
                                   contact_dtypes=(dtype,) if contacts else (),
                                   extra=KERNEL_EXTRAS, numpy_first=small)


#: A first world below this many (particles + links) x substeps starts on numpy even
#: with a warm kernel cache (the playground: ~8,700; a numpy step of it ~10-12 ms).
SMALL_WORLD = 50_000


def is_small(world) -> bool:
    return (world.n + len(world.constraints)) * world.config.substeps <= SMALL_WORLD


#: The warm-up's other kernels: the drawing's (the core's own, the view's strain and the
#: Lagrange solvers among them, are the warm-up's part "kernels").
KERNEL_EXTRAS = ("sandbox.app.raster:warm_up",)


def kernel_dtypes(dtype: str = "float64") -> tuple[str, ...]:
    """The float types the warm-up compiles at the start: the first level's (another
    one when a world of it appears, ``App._need_kernels``)."""
    return (dtype,)


#: Video drivers that show nothing on a screen.
HEADLESS_DRIVERS = ("offscreen", "dummy")


def no_display_problem(requested: str | None = None) -> str | None:
    """Why the window would not be seen, or None. With no usable display SDL falls back
    to an offscreen driver and the app would run forever with no window and no word;
    that is only right when the user asked for it (``SDL_VIDEODRIVER=dummy``)."""
    driver = pygame.display.get_driver()
    if requested is None:
        requested = os.environ.get("SDL_VIDEODRIVER", "")
    asked = {d.strip().lower() for d in requested.split(",") if d.strip()}
    if driver in HEADLESS_DRIVERS and driver not in asked:
        where = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        why = (f"display {where!r} cannot be opened" if where else
               "no display (DISPLAY and WAYLAND_DISPLAY are not set)")
        return (f"cannot open the sandbox window: {why}; SDL fell back to its "
                f"{driver!r} driver, which shows nothing. Run it on a desktop, or set "
                "SDL_VIDEODRIVER=dummy to run without a window on purpose.")
    return None


def no_display_env(environ=None, platform: str | None = None) -> str | None:
    """On Linux and the BSDs, a desktop session sets DISPLAY or WAYLAND_DISPLAY: without
    either (and without SDL_VIDEODRIVER chosen by the user) there is no screen to open
    a window on. Elsewhere SDL knows best; :func:`no_display_problem` checks after it."""
    env = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if not platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return None
    if env.get("SDL_VIDEODRIVER") or env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    return ("cannot open the sandbox window: no display (DISPLAY and WAYLAND_DISPLAY "
            "are not set). Run it on a desktop, or set SDL_VIDEODRIVER=dummy to run "
            "without a window on purpose.")


def _set_icon() -> None:
    try:
        pygame.display.set_icon(pygame.image.load(str(ASSETS / "icon.png")))
    except (pygame.error, FileNotFoundError, OSError):   # pragma: no cover - no assets
        pass


def run_app(level: str | None, integrator: str | None = None, timestep: str | None = None,
            frames: int = 0, clip_fps: int = 30, clip_width: int = 960,
            replay: str | None = None) -> int:
    """Open the window on ``level`` (default: playground) until closed, or for ``frames``
    frames when > 0; clips (C) are recorded at ``clip_fps`` and ``clip_width`` px wide
    at most; ``replay``: play that replay file instead. Returns 0; 2 after printing
    why a level or a replay file could not be used (bad input); 1 when the window could
    not be opened (the command line's exit statuses)."""
    rep = None
    try:
        if replay is not None:
            from ..levels import parse_level
            from ..replay import load as load_replay
            from .session import scene_from_spec

            rep = load_replay(replay)
            scene = scene_from_spec(parse_level(rep.level.text, replay), replay, None)
        else:
            scene = scene_from_level(level or DEFAULT_LEVEL, integrator=integrator,
                                     timestep=timestep)
    except Exception as e:   # LevelError, ReplayError, ValueError: a line, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 2
    cores.set_meter(LoadMeter())      # the compiled sweep spreads only while cores are free
    # X11 window class (window managers, xdotool search --classname); SDL reads it when
    # the window opens. pygame sets it to the script name ("main.py") on import.
    os.environ["SDL_VIDEO_X11_WMCLASS"] = "verlet-sandbox"
    if (problem := no_display_env()) is not None:   # before SDL probes (and complains)
        print(f"error: {problem}", file=sys.stderr)
        return 1
    try:
        pygame.display.init()
        if (problem := no_display_problem()) is not None:
            print(f"error: {problem}", file=sys.stderr)
            pygame.quit()
            return 1
        pygame.font.init()
        desktop = pygame.display.get_desktop_sizes() or [WINDOW_SIZE]
        size = (min(WINDOW_SIZE[0], desktop[0][0]), min(WINDOW_SIZE[1], desktop[0][1]))
        pygame.display.set_caption(f"{TITLE} - {scene.title}")   # the window opens titled
        _set_icon()
        screen = pygame.display.set_mode(size, pygame.RESIZABLE)
    except pygame.error as e:
        print(f"error: cannot open the sandbox window: {e}", file=sys.stderr)
        pygame.quit()
        return 1
    app = kernels = None
    try:
        pygame.key.set_repeat(300, 35)
        first = scene.first_world
        kernels = start_kernels(first.config.dtype if first is not None else "float64",
                                small=first is None or is_small(first),
                                contacts=first is None or first.has_contacts)
        app = App(scene, screen=screen, clip_fps=clip_fps, clip_width=clip_width,
                  kernels=kernels)
        if rep is not None:
            app.session.play_replay(rep)
            app.message(f"playing {replay}: {len(rep.frames)} frames (Space pauses, "
                        "Q quits)", seconds=8.0)
        clock = pygame.time.Clock()
        last = time.perf_counter()
        # Everything alive now lives as long as the process (modules, numba's kernels
        # and types: ~130,000 objects): out of the collector's sight, or a full
        # collection walks them all (54 ms after loading the playground; 72-76 ms
        # frames seen while it ran). Again once the warm-up has loaded the kernels.
        gc.freeze()
        loaded = kernels is None or kernels.done
        # A big first world runs compiled from its first step (a numpy step of the
        # 200x200 cloth takes most of a second), and the first call imports numba and
        # loads the kernels (~0.9 s). Its first frame (no step yet) is drawn on numpy
        # first, so the window shows the level and "loading kernels" during that wait
        # instead of staying black (cloth_200, headless: its first frame 1.8 -> 0.9 s).
        held = [p for p in backend.PARTS if backend.ready(p)] if kernels is not None else []
        for part in held:
            backend.set_ready(False, part)
        while app.running:
            clock.tick(60)                        # caps the rate; dt comes from perf_counter
            now = time.perf_counter()
            app.frame(now - last)
            last = now
            for part in held:
                backend.set_ready(True, part)
            held = []
            if not loaded and kernels.done:
                gc.freeze()
                loaded = True
            if frames > 0 and app.frame_count >= frames:
                break
    except KeyboardInterrupt:
        pass
    finally:
        if app is not None:
            app.close()
        if kernels is not None:
            kernels.close()
            # The warm-up held the compiled kernels back process-wide; whoever called
            # run_app (a script, a test) gets the default back: compile on first use.
            backend.set_ready(True)
        pygame.quit()
    return 0
