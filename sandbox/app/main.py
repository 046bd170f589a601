"""The sandbox window: the :class:`App` and ``run_app``, the ``play`` command.

One frame (``App.frame(dt)``), as in STYLE.md::

    dt                      real time since the last frame (time.perf_counter)
    events -> commands      keymap lookup, mouse gestures; every command guarded
    plan = policy.plan(dt * speed)      (one nominal plan per single step when paused)
    for h in plan: world.step(h), ghost.step(h)   SimulationDiverged -> pause + banner
    energy sample           -> graph; an impossible energy jump also pauses
    render                  interpolated with alpha in fixed mode; HUD; flip

All input comes from the event stream: the mouse position from the events' ``pos``,
modifiers from their ``mod``, held keys from KEYDOWN/KEYUP. Tests post events and call
``frame(dt)`` (or ``handle(event)``) on an App built from a level or from a world.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pygame

from ..sim import warmup
from ..sim.integrators import INTEGRATORS
from ..sim.timestep import TIMESTEPS, ReplayStep, StepTrace, TimestepPolicy, make_policy
from ..sim.world import SimulationDiverged, World
from . import files
from .camera import Camera
from .hud import (
    DIM,
    GHOST_COLOUR,
    KEY,
    WARN,
    EnergyGraph,
    Fonts,
    Overlay,
    columns_block,
    strain_legend,
)
from .keymap import lookup
from .render import WorldRenderer

DEFAULT_LEVEL = "playground"
WINDOW_SIZE = (1280, 800)
TITLE = "Verlet Sandbox"
PICK_RADIUS_PX = 20.0
SPEEDS = (0.25, 4.0)                    # slow motion and fast forward limits
ITERATIONS = (1, 200)
SUBSTEPS = (1, 64)
MESSAGE_SECONDS = 4.0
TRACE_LIMIT = 100_000                   # frames kept for replay (about half an hour)
#: The level's energy scale is |E0| + 0.5 M v^2 with every movable kilogram at
#: BLOWUP_SPEED (more than a mouse gives a body). A jump of the total energy beyond
#: BLOWUP_FACTOR times that cannot come from the level or the mouse: the integrator
#: has blown up (a cloth at 100 m/s throughout), and the app pauses as on divergence.
BLOWUP_FACTOR = 100.0
BLOWUP_SPEED = 10.0                     # m/s


# --------------------------------------------------------------------------- scenes

@dataclass
class Scene:
    """What the app runs: how to (re)build the world and its timestep policies."""

    title: str
    make_world: Callable[[], World]
    make_policy: Callable[[str], TimestepPolicy]    # mode name -> fresh policy
    integrator: str
    timestep: str
    view_center: tuple[float, float]
    view_width: float
    source: str | None = None                        # level name or path, for N / P
    description: str = ""
    first_world: World | None = None                 # already built (errors surface early)


def _check_choice(kind: str, name: str | None, registry) -> None:
    if name is not None and name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; valid: {', '.join(registry)}")


def scene_from_level(name_or_path: str | Path, integrator: str | None = None,
                     timestep: str | None = None) -> Scene:
    """A scene from a level name or file; ``LevelError`` / ``ValueError`` when bad."""
    from ..levels import build_world, find_level, load_level, make_policy_for

    _check_choice("integrator", integrator, INTEGRATORS)
    _check_choice("timestep mode", timestep, TIMESTEPS)
    path = find_level(name_or_path)
    level = load_level(path)

    def policy(mode: str) -> TimestepPolicy:
        world = level.world.model_copy(update={"timestep": mode})
        return make_policy_for(level.model_copy(update={"world": world}))

    first = build_world(level)
    stem = Path(str(name_or_path)).stem if Path(str(name_or_path)).suffix else str(
        name_or_path)
    return Scene(title=level.name or stem, make_world=lambda: build_world(level),
                 make_policy=policy, integrator=integrator or level.world.integrator,
                 timestep=timestep or level.world.timestep,
                 view_center=tuple(level.view.center), view_width=level.view.width,
                 source=str(name_or_path), description=level.description, first_world=first)


def scene_from_world(world: World, h: float = 1 / 60, timestep: str = "fixed",
                     title: str = "custom world", view=None) -> Scene:
    """A scene around a world built in code (tests, scripts); reset restores a copy of
    it as it is now. ``view`` is ``(center, width)``; default: fit the particles."""
    _check_choice("timestep mode", timestep, TIMESTEPS)
    if not world.started:
        world.start(h)
    pristine = copy.deepcopy(world)
    args = {"fixed": dict(h=h), "variable": dict(nominal=h), "random": dict(h=h),
            "replay": {}}
    if view is None:
        x = world.particles.x
        lo, hi = (x.min(axis=0), x.max(axis=0)) if len(x) else (np.zeros(2), np.ones(2))
        view = (tuple((lo + hi) / 2), float(max(hi[0] - lo[0], (hi[1] - lo[1]) * 1.6, 1.0)
                                          * 1.6))
    return Scene(title=title, make_world=lambda: copy.deepcopy(pristine),
                 make_policy=lambda mode: make_policy(mode, **args.get(mode, {})),
                 integrator=world.integrator.name, timestep=timestep,
                 view_center=tuple(float(c) for c in view[0]), view_width=float(view[1]),
                 first_world=world)


def _cycle(names: list[str], current: str, step: int) -> str:
    """The name ``step`` places after ``current``; from outside the list, the first
    (forward) or the last (backward)."""
    if current not in names:
        return names[0] if step > 0 else names[-1]
    return names[(names.index(current) + step) % len(names)]


# --------------------------------------------------------------------------- the app

class App:
    """The sandbox: a world, its timestep policy, a camera, input and drawing.

    Build it from a :class:`Scene`, a :class:`World` (fixed 1/60 s steps, the view
    fitted to it), a level name or path, or ``None`` (the default level); ``screen``
    is the display surface (None: draw off-screen only, into ``canvas``). Drive it
    with ``frame(dt)``; ``handle(event)`` and ``do(action, arg)`` are the input and
    command entry points that ``frame`` uses.
    """

    def __init__(self, scene: Scene | World | str | Path | None = None, *,
                 screen: pygame.Surface | None = None, size: tuple[int, int] = WINDOW_SIZE,
                 out_dir: str | Path | None = None) -> None:
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

        self.running = True
        self.paused = False
        self.speed = 1.0
        self.show_help = False
        self.show_graph = True
        self.banner: tuple[str, str] | None = None
        self.messages: list[list] = []             # [text, seconds left, is_error]
        self.ghost: World | None = None
        self.ghost_integrator: str | None = None
        self.trace = StepTrace()
        self.mouse = (self.size[0] / 2, self.size[1] / 2)   # px, from events only
        self.grabbed: int | None = None
        self.cut_path: list[np.ndarray] | None = None
        self.cut_count = 0
        self.panning = False
        self.held: set[int] = set()
        self.frame_count = 0
        self.last_dt = 0.0
        self.last_plan: list[float] = []
        self.fps = 0.0
        # Smoothed ms per frame: steps, energy sample, drawing, blit + display flip.
        self.timings = {"physics": 0.0, "energy": 0.0, "draw": 0.0, "present": 0.0}
        self._step_pending = False
        self._x_before: np.ndarray | None = None
        self._ghost_before: np.ndarray | None = None
        self._draw_error: str | None = None
        self._strain = np.zeros(0)

        # Command table: keymap actions -> methods (dispatch by lookup, never an if-chain).
        self.commands: dict[str, Callable] = {
            "cycle_integrator": self.cycle_integrator, "set_integrator": self.set_integrator,
            "cycle_timestep": self.cycle_timestep, "pause": self.toggle_pause,
            "step": self.single_step, "speed": self.scale_speed,
            "iterations": self.change_iterations, "substeps": self.change_substeps,
            "reset": self.reset, "level": self.change_level,
            "toggle_graph": self.toggle_graph, "toggle_help": self.toggle_help,
            "toggle_ghost": self.toggle_ghost, "cycle_ghost": self.cycle_ghost,
            "pan": self.pan, "zoom": self.zoom, "reset_view": self.reset_view,
            "screenshot": self.screenshot, "save_snapshot": self.save_snapshot,
            "load_snapshot": self.load_snapshot, "quit": self.quit,
        }
        # Event types -> handlers; the keys go on to the keymap table.
        self._handlers: dict[int, Callable] = {
            pygame.QUIT: lambda e: self.quit(),
            pygame.KEYDOWN: self._key_down, pygame.KEYUP: self._key_up,
            pygame.MOUSEBUTTONDOWN: self._mouse_down, pygame.MOUSEBUTTONUP: self._mouse_up,
            pygame.MOUSEMOTION: self._mouse_motion, pygame.MOUSEWHEEL: self._mouse_wheel,
            pygame.VIDEORESIZE: lambda e: self._resized(),
            pygame.WINDOWSIZECHANGED: lambda e: self._resized(),
            pygame.WINDOWFOCUSLOST: lambda e: self.held.clear(),
        }
        self.load_scene(scene)

    # --- scene and world ----------------------------------------------------------

    def load_scene(self, scene: Scene) -> None:
        """Adopt ``scene``: its world, integrator, timestep mode and view."""
        world = scene.first_world if scene.first_world is not None else scene.make_world()
        scene.first_world = None                     # a reset builds a fresh one
        self.scene = scene
        self.timestep = scene.timestep
        self.trace = StepTrace()
        self.policy = self._make_policy(self.timestep)
        if world.integrator.name != scene.integrator:
            world.set_integrator(scene.integrator, self.policy.nominal_h)
        self.reset_view()
        self.graph.clear()
        self._set_world(world)
        self.paused = False
        self.banner = None
        if self.timestep == "replay":
            self.message("replay: no trace recorded yet, nothing moves (T: another mode)", True)
        if self.screen is not None:
            pygame.display.set_caption(f"{TITLE} - {scene.title}")   # ASCII: X in a C locale

    def _set_world(self, world: World) -> None:
        self.world = world
        self.grabbed = None
        self.cut_path = None
        self._x_before = None
        e = world.energy()
        movable = world.particles.inv_mass > 0
        mass = float(np.sum(world.particles.mass[movable]))
        self._e_ref = e["total"]
        self._e_scale = (abs(e["total"]) + max(e["kinetic"], 0.5 * mass * BLOWUP_SPEED ** 2)
                         + 1.0)
        if self.ghost is not None:
            self._seed_ghost(self.ghost.integrator.name)

    def _make_policy(self, mode: str) -> TimestepPolicy:
        if mode == "replay":
            return ReplayStep(StepTrace([list(f) for f in self.trace.frames]), loop=True)
        return self.scene.make_policy(mode)

    @property
    def integrator(self) -> str:
        return self.world.integrator.name

    # --- the frame ----------------------------------------------------------------

    def frame(self, dt: float) -> None:
        """One frame: events, physics for ``dt`` seconds of real time, drawing."""
        for event in pygame.event.get():
            self.handle(event)
        if not self.running:
            return
        self.update(dt)
        t1 = time.perf_counter()
        self.draw()
        t2 = time.perf_counter()
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
            self.fps = 1.0 / dt if self.fps == 0 else 0.9 * self.fps + 0.1 / max(dt, 1e-6)
            self._age_messages(dt)
        self._follow_mouse()
        if self.paused:
            if not self._step_pending:
                return
            self._step_pending = False
            plan = self.policy.plan(self.policy.nominal_h)
        else:
            plan = self.policy.plan(dt * self.speed)
        self.last_plan = plan
        if self.timestep != "replay" and len(self.trace.frames) < TRACE_LIMIT:
            self.trace.record(plan)
        t0 = time.perf_counter()
        self._advance(plan)
        t1 = time.perf_counter()
        self._sample_energy()
        self._smooth("physics", t1 - t0)
        self._smooth("energy", time.perf_counter() - t1)

    def _advance(self, plan: list[float]) -> None:
        for h in plan:
            before = self.world.particles.x.copy()
            try:
                self.world.step(h)
            except SimulationDiverged as e:
                self._diverged(e.integrator, e.h, e.t, e.reason)
                return
            except Exception as e:   # never a traceback from the sim
                self._diverged(self.integrator, h, self.world.t, f"{type(e).__name__}: {e}")
                return
            self._x_before = before
            if self.ghost is not None:
                gbefore = self.ghost.particles.x.copy()
                try:
                    self.ghost.step(h)
                    self._ghost_before = gbefore
                except Exception as e:
                    self.message(f"ghost ({self.ghost.integrator.label}) stopped: {e}", True)
                    self.ghost = None

    def _diverged(self, integrator: str, h: float, t: float, reason: str) -> None:
        label = INTEGRATORS[integrator].label if integrator in INTEGRATORS else integrator
        self.paused = True
        self._x_before = None
        self.banner = (f"{label} diverged",
                       f"at t = {t:.4f} s, step h = {h * 1e3:.3f} ms ({reason}).  "
                       "R resets; or switch integrator and press Space.")
        print(f"sandbox: {label} diverged at t = {t:.4f} s, h = {h * 1e3:.3f} ms: {reason}",
              file=sys.stderr)

    def _blown_up(self, total: float) -> float | None:
        """The energy jump (J) if ``total`` is beyond what the level can supply."""
        jump = abs(total - self._e_ref)
        return jump if not (jump <= BLOWUP_FACTOR * self._e_scale) else None

    def _sample_energy(self) -> None:
        e = self.world.energy()
        ghost_total = self.ghost.energy()["total"] if self.ghost is not None else math.nan
        if self.ghost is not None and (jump := self._blown_up(ghost_total)) is not None:
            self.message(f"ghost ({self.ghost.integrator.label}) blew up at t = "
                         f"{self.ghost.t:.3f} s (energy jumped by {jump:.3g} J): ghost off",
                         True)
            self.ghost, ghost_total = None, math.nan
        self.graph.add(e["kinetic"], e["potential"], e["total"], ghost_total)
        if (jump := self._blown_up(e["total"])) is not None:
            self._diverged(self.integrator, self.last_plan[-1] if self.last_plan else 0.0,
                           self.world.t, f"energy jumped by {jump:.3g} J")

    def _smooth(self, key: str, seconds: float) -> None:
        ms = seconds * 1e3
        old = self.timings[key]
        self.timings[key] = ms if old == 0 else 0.9 * old + 0.1 * ms

    def _follow_mouse(self) -> None:
        if self.grabbed is not None:
            target = self.camera.to_world(self.mouse)
            self.world.drag_to(target)
            if self.ghost is not None:
                self.ghost.drag_to(target)

    # --- input --------------------------------------------------------------------

    def handle(self, event: pygame.event.Event) -> None:
        """Turn one event into commands; nothing raised here ever leaves the app."""
        handler = self._handlers.get(event.type)
        if handler is None:
            return
        try:
            handler(event)
        except Exception as e:   # shown in the window, never a traceback
            self._report(f"event {pygame.event.event_name(event.type)}", e)

    def _key_down(self, event) -> None:
        repeat = event.key in self.held              # auto-repeat: the key is still down
        self.held.add(event.key)
        b = lookup(event.key, getattr(event, "mod", 0))
        if b is not None and (b.repeat or not repeat):
            self.do(b.action, b.arg)

    def _key_up(self, event) -> None:
        self.held.discard(event.key)

    def do(self, action: str, arg=None) -> None:
        """Run the command ``action`` (a keymap action name); errors become messages."""
        try:
            fn = self.commands[action]
            fn() if arg is None else fn(arg)
        except Exception as e:
            self._report(action, e)

    def _report(self, what: str, e: Exception) -> None:
        text = f"{what} failed: {e}" if str(e) else f"{what} failed: {type(e).__name__}"
        print(f"sandbox: {text}", file=sys.stderr)
        self.message(text, error=True)

    def _mouse_down(self, event) -> None:
        self.mouse = tuple(event.pos)
        p = self.camera.to_world(event.pos)
        mods = getattr(event, "mod", 0)
        if event.button == 1 and mods & pygame.KMOD_SHIFT:
            self.cut_path = [p]
            self.cut_count = 0
        elif event.button == 1:
            k = self.world.nearest(p, self.camera.pixels_to_metres(PICK_RADIUS_PX))
            if k is not None:
                self.grabbed = k
                for w in self._worlds():
                    w.grab(k, p)
        elif event.button == 3:
            k = self.world.nearest(p, self.camera.pixels_to_metres(PICK_RADIUS_PX))
            if k is not None:
                pinned = self.world.toggle_pin(k)
                if self.ghost is not None:
                    if (self.ghost.particles.inv_mass[k] == 0) != pinned:
                        self.ghost.toggle_pin(k)
                self.message(f"particle {k} {'pinned' if pinned else 'unpinned'}")
        elif event.button == 2:
            self.panning = True

    def _mouse_motion(self, event) -> None:
        old = self.mouse
        self.mouse = tuple(event.pos)
        if self.panning:
            self.camera.pan_pixels(self.mouse[0] - old[0], self.mouse[1] - old[1])
        if self.cut_path is not None:
            a, b = self.cut_path[-1], self.camera.to_world(self.mouse)
            self.cut_count += self.world.cut(a, b)
            if self.ghost is not None:
                self.ghost.cut(a, b)
            self.cut_path.append(b)
        self._follow_mouse()

    def _mouse_up(self, event) -> None:
        self.mouse = tuple(event.pos)
        if event.button == 1:
            if self.grabbed is not None:
                self._follow_mouse()
                for w in self._worlds():
                    w.release()
                self.grabbed = None
            if self.cut_path is not None:
                if self.cut_count:
                    self.message(f"cut {self.cut_count} link{'s' * (self.cut_count != 1)}")
                self.cut_path = None
        elif event.button == 2:
            self.panning = False

    def _mouse_wheel(self, event) -> None:
        steps = getattr(event, "precise_y", None) or event.y
        self.camera.zoom_at(self.mouse, 1.15 ** float(np.clip(steps, -10, 10)))

    def _resized(self) -> None:
        surface = pygame.display.get_surface() if self.screen is not None else None
        if surface is None:                  # drawing off-screen: the size is ours
            return
        self.screen = surface
        self.size = surface.get_size()
        self.canvas = pygame.Surface(self.size, 0, 32)
        self.camera.resize(self.size)

    def _worlds(self) -> list[World]:
        return [self.world] + ([self.ghost] if self.ghost is not None else [])

    # --- commands (the keymap's actions) -------------------------------------------

    def message(self, text: str, error: bool = False) -> None:
        self.messages.append([text, MESSAGE_SECONDS, error])
        del self.messages[:-5]

    def _age_messages(self, dt: float) -> None:
        for m in self.messages:
            m[1] -= min(dt, 0.5)
        self.messages = [m for m in self.messages if m[1] > 0]

    def set_integrator(self, name: str) -> None:
        if name == self.integrator:
            return
        self.world.set_integrator(name)
        self.graph.new_segment(INTEGRATORS[name].label)
        self.message(f"integrator: {INTEGRATORS[name].label}")

    def cycle_integrator(self, step: int) -> None:
        self.set_integrator(_cycle(list(INTEGRATORS), self.integrator, step))

    def set_timestep(self, mode: str) -> None:
        self.policy = self._make_policy(mode)
        self.timestep = mode
        self.graph.new_segment(self.policy.describe())
        note = ""
        if mode == "replay":
            note = (f": {len(self.trace.frames)} recorded frames, looping"
                    if self.trace.frames else ": nothing recorded yet (no steps)")
        self.message(f"timestep: {self.policy.describe()}{note}")

    def cycle_timestep(self, step: int) -> None:
        self.set_timestep(_cycle(list(TIMESTEPS), self.timestep, step))

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused:
            self.banner = None

    def single_step(self) -> None:
        """Pause (if running) and take exactly one plan on the next frame."""
        self.paused = True
        self._step_pending = True

    def scale_speed(self, factor: float) -> None:
        self.speed = float(np.clip(self.speed * factor, *SPEEDS))
        self.message(f"speed x{self.speed:g}")

    def _configure(self, **changes) -> None:
        for w in self._worlds():
            w.configure(dataclasses.replace(w.config, **changes))

    def change_iterations(self, step: int) -> None:
        n = int(np.clip(self.world.config.iterations + step, *ITERATIONS))
        self._configure(iterations=n)

    def change_substeps(self, step: int) -> None:
        n = int(np.clip(self.world.config.substeps + step, *SUBSTEPS))
        self._configure(substeps=n)

    def reset(self) -> None:
        """Rebuild the level; the integrator, timestep mode, iterations and substeps and
        the speed chosen in the window stay."""
        cfg = self.world.config
        world = self.scene.make_world()
        world.configure(dataclasses.replace(world.config, iterations=cfg.iterations,
                                            substeps=cfg.substeps))
        if world.integrator.name != cfg.integrator:
            world.set_integrator(cfg.integrator, self.policy.nominal_h)
        if self.timestep != "replay":
            self.trace = StepTrace()
        self.policy = self._make_policy(self.timestep)
        self.graph.clear()
        self._set_world(world)
        self.paused = False
        self.banner = None

    def change_level(self, step: int) -> None:
        from ..levels import level_names

        names = level_names()
        if not names:
            self.message("no levels found in levels/", True)
            return
        current = Path(self.scene.source).stem if self.scene.source else ""
        ghost_on = self.ghost is not None
        self.load_scene(scene_from_level(_cycle(names, current, step)))
        if not ghost_on:
            self.ghost = None
        self.message(f"level: {self.scene.title}")

    def toggle_graph(self) -> None:
        self.show_graph = not self.show_graph

    def toggle_help(self) -> None:
        self.show_help = not self.show_help

    def _seed_ghost(self, integrator: str) -> None:
        """The ghost restarts as a copy of the world now, run by ``integrator``."""
        ghost = copy.deepcopy(self.world)
        if integrator != ghost.integrator.name:
            ghost.set_integrator(integrator)
        self.ghost = ghost
        self.ghost_integrator = integrator
        self._ghost_before = None

    def toggle_ghost(self) -> None:
        if self.ghost is not None:
            self.ghost = None
            self.message("ghost off")
            return
        # By default the integrator before the world's in the registry: for the default
        # TCV (corrected) that is TCV as published, the comparison this sandbox is about.
        name = self.ghost_integrator or _cycle(list(INTEGRATORS), self.integrator, -1)
        self._seed_ghost(name)
        self.graph.new_segment(f"ghost: {INTEGRATORS[name].label}")
        self.message(f"ghost: {INTEGRATORS[name].label} (translucent cyan)")

    def cycle_ghost(self, step: int) -> None:
        current = self.ghost.integrator.name if self.ghost is not None else (
            self.ghost_integrator or self.integrator)
        name = _cycle(list(INTEGRATORS), current, step)
        self._seed_ghost(name)
        self.graph.new_segment(f"ghost: {INTEGRATORS[name].label}")
        self.message(f"ghost: {INTEGRATORS[name].label}, restarted from the world")

    def pan(self, frac) -> None:
        fx, fy = frac
        self.camera.pan_pixels(-fx * self.size[0], fy * self.size[1])

    def zoom(self, factor: float) -> None:
        self.camera.zoom_at(self.camera.half, factor)

    def reset_view(self) -> None:
        self.camera.frame(self.scene.view_center, self.scene.view_width, self.safe_area())

    def _layout(self) -> tuple[bool, int]:
        """``(two_columns, graph_height)``: the HUD in two columns on wide windows, one
        below ~1180 px (the graph keeps 300 px beside it); the graph's height in px."""
        two = self.size[0] >= 1180
        band = 16 + (6 if two else 12) * self.fonts.text.get_linesize()
        return two, (band + 40 if two else band)

    def safe_area(self) -> tuple[int, int, int, int]:
        """``(x, y, w, h)`` of the window not under the top panels or the bottom legend."""
        top = 8 + self._layout()[1] + 10
        bottom = self.size[1] - (self.fonts.small.get_linesize() + 10) - 16
        return (0, top, self.size[0], max(bottom - top, 1))

    def screenshot(self) -> Path:
        path = files.save_png(self.canvas, self.out_dir / "screenshots")
        self.message(f"screenshot: {path}")
        return path

    def save_snapshot(self) -> Path:
        path = files.unique_path(self.out_dir / "snapshots", "snapshot", ".npz")
        self.world.save(path)
        self.message(f"snapshot saved: {path}")
        return path

    def load_snapshot(self) -> None:
        path = files.latest(self.out_dir / "snapshots", "snapshot-*.npz")
        if path is None:
            self.message(f"no snapshot in {self.out_dir / 'snapshots'} (F5 saves one)", True)
            return
        self.world.load(path)                 # SnapshotError: world unchanged, message
        self._set_world(self.world)
        self.graph.new_segment("loaded")
        self.paused = False
        self.banner = None
        self.message(f"snapshot loaded: {path}")

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
            r, cam, world = self.renderer, self.camera, self.world
            r.background(surf, cam, world.config.bounds)
            r.shapes(surf, cam, getattr(world, "shapes", None))
            # The renderer's colouring kernel computes the links' strain (true positions);
            # the same array serves the HUD's error line (one evaluation a frame).
            out = r.world(surf, cam, world, self._positions(world, self._x_before))
            self._strain = out.get("strain", np.zeros(0)) if out else np.zeros(0)
            if self.ghost is not None:
                r.ghost(surf, cam, self.ghost, self._positions(self.ghost, self._ghost_before))
            if self.cut_path is not None:
                r.cut_path(surf, cam.to_screen(np.array(self.cut_path)))
            self.draw_hud(surf)
            self._draw_error = None
        except Exception as e:   # a drawing bug must not close the window
            text = f"drawing failed: {type(e).__name__}: {e}"
            if text != self._draw_error:
                print(f"sandbox: {text}", file=sys.stderr)
                self._draw_error = text
            surf.fill((0, 0, 0))
            surf.blit(self.fonts.text.render(text, True, WARN), (10, 10))

    def hud_columns(self) -> list[list]:
        """The HUD's text: two columns of ``str`` or ``(str, colour)`` lines."""
        w, p, cfg, pol = self.world, self.world.particles, self.world.config, self.policy
        names = list(INTEGRATORS)
        integ = w.integrator
        plan = self.last_plan
        err = np.abs(self._strain) if len(self._strain) == len(w.constraints) else None
        mean, worst = ((float(err.mean()), float(err.max())) if err is not None and err.size
                       else w.constraint_error())
        speed = f" · speed x{self.speed:g}" if self.speed != 1 else ""
        dropped = (f" · dropped {pol.book.dropped:.3f} s"
                   if self.timestep in ("fixed", "variable") else "")
        springs = f" · {len(w.springs.i)} springs" if len(w.springs.i) else ""
        ms = self.timings
        ghost = (("ghost       " + self.ghost.integrator.label + " (cyan)", GHOST_COLOUR)
                 if self.ghost is not None else ("ghost       off (G)", DIM))
        left = [
            (f"{TITLE} · {self.scene.title}", KEY),
            f"integrator  {names.index(integ.name) + 1}/{len(names)} {integ.label}"
            f" · order {integ.order}{', symplectic' if integ.symplectic else ''}",
            f"timestep    {pol.describe()}{speed}",
            f"frame       {self.last_dt * 1e3:.1f} ms · {len(plan)} step"
            f"{'s' * (len(plan) != 1)} ({sum(plan) * 1e3:.1f} ms) · {self.fps:.0f} fps",
            f"solver      {cfg.iterations} iterations x {cfg.substeps} substeps",
            ("state       PAUSED" + speed, WARN) if self.paused else
            ("state       running" + speed, (150, 225, 150)),
        ]
        right = [
            f"bodies      {p.n} particles · {len(w.constraints)} links{springs}",
            f"error       mean {mean * 100:.3f}% · max {worst * 100:.3f}%",
            f"time        sim {p.t:.2f} s{dropped}",
            f"cost        physics {ms['physics']:.1f} · draw {ms['draw']:.1f} · flip "
            f"{ms['present']:.1f} ms",
            ghost,
            ("H or F1: keys and mouse", DIM),
        ]
        return [left, right]

    def draw_hud(self, surf: pygame.Surface) -> None:
        f = self.fonts
        two, graph_h = self._layout()
        columns = self.hud_columns()
        hud = columns_block(surf, f.text, columns if two else [columns[0] + columns[1]],
                            (8, 8))
        legend_h = f.small.get_linesize() + 10
        strain_legend(surf, f.small, (8, surf.get_height() - legend_h - 8))
        if self.show_graph:
            # Top right beside the HUD; under it when the window is very narrow.
            W = surf.get_width()
            x = max(hud.right + 8, W - 560)
            if W - 8 - x >= 260:
                rect = pygame.Rect(x, 8, W - 8 - x, graph_h)
            else:
                rect = pygame.Rect(8, hud.bottom + 8, min(W - 16, 480), 150)
            self.graph.draw(surf, rect, f)
        if self.banner is not None:
            self.overlay.banner(surf, *self.banner, top=hud.bottom + 12)
        self.overlay.messages(surf, [(m[0], m[2]) for m in self.messages],
                              bottom=surf.get_height() - legend_h - 14)
        if self.show_help:
            self.overlay.draw_help(surf)

    def present(self) -> None:
        if self.screen is not None:
            self.screen.blit(self.canvas, (0, 0))
            pygame.display.flip()


# --------------------------------------------------------------------------- run_app

def _warm_up(screen: pygame.Surface, dtype: str = "float64") -> None:
    """Compile the physics and drawing kernels before the first frame, saying so.

    numba keeps them in its disk cache: later starts load them in well under a second;
    the very first start compiles them (35-50 s on a 2-core machine: the contact stages
    ~25 s, the constraint and Verlet kernels ~10 s a float type), which would otherwise
    freeze the first frame without a word.
    """
    screen.fill((18, 20, 26))
    font = pygame.font.Font(None, 26)
    lines = ("Preparing the compiled physics and drawing kernels...",
             "The very first start compiles them (up to a minute); later starts load "
             "them in about a second.")
    for k, text in enumerate(lines):
        screen.blit(font.render(text, True, (220, 220, 220)), (24, 24 + 30 * k))
    pygame.display.flip()
    pygame.event.pump()
    # The level's float type and float64 (the other levels); contacts in float64 only:
    # every shipped level with contacts is float64, and compiling the contact stages
    # for both types doubles a first start. Anything else compiles when first used.
    warmup.warm_up(dtypes=sorted({"float64", dtype}), contact_dtypes=("float64",))
    WorldRenderer.warm_up()


def run_app(level: str | None, integrator: str | None = None, timestep: str | None = None,
            frames: int = 0) -> int:
    """Open the window on ``level`` (default: playground) until closed, or for ``frames``
    frames when > 0. Returns 0, or 1 after printing why a level could not be used."""
    try:
        scene = scene_from_level(level or DEFAULT_LEVEL, integrator=integrator,
                                 timestep=timestep)
    except Exception as e:   # LevelError, ValueError: a message, no traceback
        print(f"error: {e}", file=sys.stderr)
        return 1
    # X11 window class (window managers, xdotool search --classname); SDL reads it when
    # the window opens. pygame sets it to the script name ("main.py") on import.
    os.environ["SDL_VIDEO_X11_WMCLASS"] = "verlet-sandbox"
    try:
        pygame.display.init()
        pygame.font.init()
        desktop = pygame.display.get_desktop_sizes() or [WINDOW_SIZE]
        size = (min(WINDOW_SIZE[0], desktop[0][0]), min(WINDOW_SIZE[1], desktop[0][1]))
        pygame.display.set_caption(f"{TITLE} - {scene.title}")   # the window opens titled
        screen = pygame.display.set_mode(size, pygame.RESIZABLE)
    except pygame.error as e:
        print(f"error: cannot open the sandbox window: {e}", file=sys.stderr)
        pygame.quit()
        return 1
    try:
        pygame.key.set_repeat(300, 35)
        first = scene.first_world
        _warm_up(screen, first.config.dtype if first is not None else "float64")
        app = App(scene, screen=screen)
        clock = pygame.time.Clock()
        last = time.perf_counter()
        while app.running:
            clock.tick(60)                        # caps the rate; dt comes from perf_counter
            now = time.perf_counter()
            app.frame(now - last)
            last = now
            if frames > 0 and app.frame_count >= frames:
                break
    except KeyboardInterrupt:
        pass
    finally:
        pygame.quit()
    return 0
