"""The session: the world, its ghost, the timestep policy and the step trace, and every
command that changes them (applied to the world and the ghost alike).

No pygame here: a session is driven by ``update(dt)`` and by its command methods, and
tells the window what happened through two callbacks, ``on_message(text, error)`` and
``on_segment(label)`` (a new segment of the energy graph). The window (``main.App``)
owns a session, the input turns events into its commands, and drawing reads
``session.world.view()``.

A scene is built exactly as ``simulate`` builds it:
``find_level -> load_level -> with_world(overrides) -> build_world``.
"""

from __future__ import annotations

import copy
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..ensemble import BLOWUP_FACTOR, energy_scale
from ..quantities import DEFAULT as PLOT_DEFAULT
from ..quantities import Choice
from ..replay import DEBUG_LAYERS, Playback, SessionLog, level_after
from ..replay import apply as apply_input
from ..settings import SETTINGS, Uniform
from ..settings import apply as apply_setting
from ..settings import put as put_setting
from ..settings import read as read_setting
from ..settings import value as setting_value
from ..sim import backend
from ..sim.integrators import INTEGRATORS, contrast
from ..sim.timestep import TIMESTEPS, ReplayStep, StepTrace, TimestepPolicy, make_policy
from ..sim.world import SimulationDiverged, World

SPEEDS = (0.25, 4.0)                    # slow motion and fast forward limits
HZ = (10.0, 240.0)                      # steps per second the window offers
TRACE_LIMIT = 100_000                   # frames kept for replay (about half an hour)
#: While a frame's steps take longer to compute than the time they simulate (numpy
#: frames while the kernels load, a world too big for the machine), the next frame
#: simulates at most this much real time and drops the rest (counted): a step or so a
#: frame, in slow motion, instead of a spiral of ever more steps in ever longer frames.
#: Measured on the playground while its kernels loaded: frames of 200-430 ms (three
#: numpy steps each, against a loading thread) without it.
CATCH_UP_S = 1 / 60
#: The ensemble (every integrator side by side, A) runs on levels up to this many
#: particles, and stays on while its steps take at most ENSEMBLE_BUDGET_S a frame
#: (ENSEMBLE_PATIENCE frames in a row over it, the compiled kernels loaded, turn it off).
ENSEMBLE_MAX_PARTICLES = 300
ENSEMBLE_BUDGET_S = 0.012
ENSEMBLE_PATIENCE = 20
#: The legend's "error at" mark: each member's error this long (simulated s) after the
#: ensemble (re)started, kept to compare with the same mark at the step before.
ENSEMBLE_MARK_S = 1.0


def plural(n: int, word: str, many: str | None = None) -> str:
    """``"1 iteration"``, ``"4 iterations"``."""
    return f"{n} {word if n == 1 else (many or word + 's')}"


# --------------------------------------------------------------------------- scenes

@dataclass
class Scene:
    """What a session runs: how to (re)build the world and its timestep policies."""

    title: str
    make_world: Callable[[], World]
    make_policy: Callable[..., TimestepPolicy]      # (mode, h=None) -> fresh policy
    integrator: str
    timestep: str
    view_center: tuple[float, float]
    view_width: float
    #: The level's own gravity and wind (what the gravity and wind settings start from).
    uniform: Uniform = Uniform()
    source: str | None = None                        # level name or path, for N / P
    description: str = ""
    hint: str = ""                                   # one line on what to try
    ghost: str | None = None                         # the level's recommended ghost
    level_text: str | None = None                    # the level as TOML (replay files)
    first_world: World | None = None                 # already built (errors surface early)
    #: The level's body labels: ``(body index, text, label_at or None)`` each.
    labels: tuple = ()


def _check_choice(kind: str, name: str | None, registry) -> None:
    if name is not None and name not in registry:
        raise ValueError(f"unknown {kind} {name!r}; valid: {', '.join(registry)}")


def scene_from_level(name_or_path: str | Path, integrator: str | None = None,
                     timestep: str | None = None) -> Scene:
    """A scene from a level name or file, built as ``simulate`` builds it; ``LevelError``
    / ``ValueError`` when bad."""
    from ..levels import find_level, load_level

    _check_choice("integrator", integrator, INTEGRATORS)
    _check_choice("timestep mode", timestep, TIMESTEPS)
    path = find_level(name_or_path)
    return scene_from_spec(load_level(path), path, str(name_or_path), integrator, timestep)


def scene_from_spec(level, path, source: str | None, integrator: str | None = None,
                    timestep: str | None = None) -> Scene:
    """A scene from a validated level spec (a file's, or a replay file's)."""
    from ..levels import build_world, dump_level, make_policy_for, with_world

    overrides = {k: v for k, v in (("integrator", integrator), ("timestep", timestep))
                 if v is not None}
    if overrides:
        level = with_world(level, "command line", **overrides)

    def policy(mode: str, h: float | None = None) -> TimestepPolicy:
        return make_policy_for(with_world(level, path, timestep=mode,
                                          h=level.world.h if h is None else h))

    first = build_world(level)
    name = str(source if source is not None else path)
    stem = Path(name).stem if Path(name).suffix else name
    return Scene(title=level.name or stem, make_world=lambda: build_world(level),
                 make_policy=policy, integrator=level.world.integrator,
                 timestep=level.world.timestep,
                 view_center=tuple(level.view.center), view_width=level.view.width,
                 uniform=Uniform.of_level(level.world),
                 source=source, description=level.description, level_text=dump_level(level),
                 hint=level.hint, ghost=level.ghost,
                 first_world=first,
                 labels=tuple((k, b.label, b.label_at) for k, b in enumerate(level.bodies)
                              if b.label is not None))


def scene_from_world(world: World, h: float = 1 / 60, timestep: str = "fixed",
                     title: str = "custom world", view=None) -> Scene:
    """A scene around a world built in code (tests, scripts); reset restores a copy of
    it as it is now. ``view`` is ``(center, width)``; default: fit the particles."""
    _check_choice("timestep mode", timestep, TIMESTEPS)
    if not world.started:
        world.start(h)
    pristine = copy.deepcopy(world)
    def args(mode: str, step: float | None) -> dict:
        step = h if step is None else step
        return {"fixed": dict(h=step), "variable": dict(nominal=step),
                "random": dict(h=step), "replay": {}}.get(mode, {})
    if view is None:
        x = world.particles.x
        lo, hi = (x.min(axis=0), x.max(axis=0)) if len(x) else (np.zeros(2), np.ones(2))
        view = (tuple((lo + hi) / 2), float(max(hi[0] - lo[0], (hi[1] - lo[1]) * 1.6, 1.0)
                                          * 1.6))
    return Scene(title=title, make_world=lambda: copy.deepcopy(pristine),
                 make_policy=lambda mode, step=None: make_policy(mode, **args(mode, step)),
                 integrator=world.integrator.name, timestep=timestep,
                 view_center=tuple(float(c) for c in view[0]), view_width=float(view[1]),
                 uniform=Uniform.of(world.config.gravity), first_world=world)


def cycle(names: list[str], current: str, step: int) -> str:
    """The name ``step`` places after ``current``; from outside the list, the first
    (forward) or the last (backward)."""
    if current not in names:
        return names[0] if step > 0 else names[-1]
    return names[(names.index(current) + step) % len(names)]


# --------------------------------------------------------------------------- the session

class Session:
    """World, ghost, timestep policy and trace; the commands that change them."""

    clock = staticmethod(time.perf_counter)      # what times a frame's steps

    def __init__(self, scene: Scene, on_message: Callable[[str, bool], None] | None = None,
                 on_segment: Callable[[str], None] | None = None,
                 on_clear: Callable[[], None] | None = None) -> None:
        self.on_message = on_message or (lambda text, error=False: None)
        self.on_segment = on_segment or (lambda label, merge=False: None)
        self.on_clear = on_clear or (lambda: None)
        self.paused = False
        self.speed = 1.0
        self.banner: tuple[str, str] | None = None
        self.ghost: World | None = None
        self.ghost_integrator: str | None = None
        self.trace = StepTrace()
        self.last_plan: list[float] = []
        self.h: float | None = None                  # the step chosen in the window
        self.x_before: np.ndarray | None = None
        self.ghost_before: np.ndarray | None = None
        self._step_pending = False
        self.behind = False         # the last frame's steps took longer than they simulated
        self.player = None                           # a replay being played (play_replay)
        self._last_drag = None
        #: Every integrator side by side (A): an ``ensemble.Ensemble`` of the world, or None.
        self.ensemble = None
        self.ensemble_t0 = 0.0          # the world's time when the ensemble (re)started
        self.ensemble_h = 0.0           # its step then (s)
        #: Each member's error ENSEMBLE_MARK_S after the start: {name: m}, and the
        #: marks of the run before at its step: (h, {name: m}) or None.
        self.ensemble_marks: dict[str, float] = {}
        self.ensemble_prev: tuple[float, dict[str, float]] | None = None
        self.ensemble_ms = 0.0          # its steps' time in the last frame
        self._ensemble_slow = 0
        #: What the graph plots (quantities.Choice) and the particle it follows (None:
        #: not chosen yet): a replay shows the same (``plot`` and ``follow`` events).
        self.plot: Choice = PLOT_DEFAULT
        self.followed: int | None = None
        #: The debug overlay's layers that are on (``debug.LAYERS``; none: off): a view
        #: choice, recorded as the graph's is (``debug`` events).
        self.debug_layers: frozenset[str] = frozenset()
        self.load_scene(scene)

    def message(self, text: str, error: bool = False) -> None:
        self.on_message(text, error)

    # --- scene and world ----------------------------------------------------------

    def load_scene(self, scene: Scene) -> None:
        """Adopt ``scene``: its world, integrator and timestep mode."""
        world = scene.first_world if scene.first_world is not None else scene.make_world()
        scene.first_world = None                     # a reset builds a fresh one
        self.scene = scene
        #: Gravity's strength and the wind (settings.Uniform): the world's config holds
        #: only their sum with the level's own direction.
        self.uniform = scene.uniform
        self.log = SessionLog(scene.title, scene.level_text)
        if not self.plot.auto:                   # chosen before: the replay shows it too
            self.log.record("plot", *self.plot.args())
        if self.debug_layers:
            self.log.record("debug", self._debug_args())
        self.followed = None
        self.h = None
        self.timestep = scene.timestep
        self.trace = StepTrace()
        self.policy = self._make_policy(self.timestep)
        if world.integrator.name != scene.integrator:
            world.set_integrator(scene.integrator, self.policy.nominal_h)
        self.on_clear()
        self._set_world(world)
        self.paused = False
        self.banner = None
        if self.timestep == "replay":
            self.message("replay: no trace recorded yet, nothing moves (T: another mode)", True)

    def _set_world(self, world: World) -> None:
        self.world = world
        self.x_before = None
        #: Checkpoints to go back to after a divergence: ``[(gain J, State)]``, one
        #: every ``CHECKPOINT_S`` of simulated time, the last ``CHECKPOINTS``.
        self._checkpoints: list[tuple[float, object]] = []
        self.diverged: tuple[str, float] | None = None   # (integrator, t) of a blow-up
        self._said_alike = False                 # alike_note() shown for this world
        self._e_ref = world.energy()["total"]
        self._e_scale = energy_scale(world)
        if self.ghost is not None:
            self._seed_ghost(self.ghost.integrator.name)
        if self.ensemble is not None:
            self._seed_ensemble(keep_marks=False)

    def _make_policy(self, mode: str) -> TimestepPolicy:
        if mode == "replay":
            return ReplayStep(StepTrace([list(f) for f in self.trace.frames]), loop=True)
        return self.scene.make_policy(mode, self.h)

    @property
    def integrator(self) -> str:
        return self.world.integrator.name

    def worlds(self) -> list[World]:
        return [self.world] + ([self.ghost] if self.ghost is not None else [])

    # --- time -----------------------------------------------------------------------

    def update(self, dt: float) -> bool:
        """Plan and take this frame's steps (none while paused, one plan per step key).
        Returns True if any step was taken."""
        if self.player is not None:
            return self._play_frame()
        if self.paused:
            if not self._step_pending:
                self.log.step([])
                return False
            self._step_pending = False
            plan = self.policy.plan(self.policy.nominal_h)
        else:
            plan = self.policy.plan(dt * self.speed,
                                    CATCH_UP_S * self.speed if self.behind else None)
        self.log.step(plan)
        self.last_plan = plan
        if self.timestep != "replay" and len(self.trace.frames) < TRACE_LIMIT:
            self.trace.record(plan)
        t0 = self.clock()
        self.advance(plan)
        if plan and self.speed > 0:
            self.behind = (self.clock() - t0) * self.speed > math.fsum(plan)
        return bool(plan)

    def advance(self, plan: list[float]) -> None:
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
            self.x_before = before
            if self.ghost is not None:
                gbefore = self.ghost.particles.x.copy()
                try:
                    self.ghost.step(h)
                    self.ghost_before = gbefore
                except Exception as e:
                    self.message(f"ghost ({self.ghost.integrator.label}) stopped: {e}", True)
                    self.ghost = None
        if self.ensemble is not None and plan:
            self._advance_ensemble(plan)

    def _diverged(self, integrator: str, h: float, t: float, reason: str) -> None:
        """Pause with a banner that names ``integrator``; the world goes back to the last
        state whose energy was sane (a step that ends non-finite leaves the world as it
        was before it, but that state may already be blown up: 40 kJ on the pendulums),
        so that another integrator resumes from motion worth resuming."""
        label = INTEGRATORS[integrator].label if integrator in INTEGRATORS else integrator
        self.paused = True
        self.x_before = None
        back = ""
        p = self.world.particles
        if not p.is_finite() or self._blown_up(self.world.energy()["total"]) is not None:
            safe = self._checkpoint_before(t)
            if safe is not None:
                p.restore(safe)
                self.log.broken = ("the world was put back to a sane state after a "
                                   "divergence")
                back = f" Back at t = {p.t:.3f} s, before it ran away."
        self.diverged = (integrator, t)
        self.banner = (f"{label} diverged",
                       f"at t = {t:.4f} s, step h = {h * 1e3:.3f} ms ({reason}).{back}  "
                       "Pick another integrator (I, 1-9) and press Space, or R to reset.")
        print(f"sandbox: {label} diverged at t = {t:.4f} s, h = {h * 1e3:.3f} ms: {reason}",
              file=sys.stderr)

    def _blown_up(self, total: float) -> float | None:
        """The energy gained (J) if ``total`` is beyond what the level can supply; energy
        lost (air drag, a falling body at terminal speed, the solver's damping) is never
        a blow-up."""
        jump = total - self._e_ref
        return abs(jump) if not (jump <= BLOWUP_FACTOR * self._e_scale) else None

    def sample_energy(self) -> tuple[dict, float]:
        """The world's energies and the ghost's total (nan without one); a blown-up
        ghost is dropped and a blown-up world pauses with a banner."""
        e = self.world.energy()
        ghost_total = self.ghost.energy()["total"] if self.ghost is not None else math.nan
        if self.ghost is not None and (jump := self._blown_up(ghost_total)) is not None:
            self.message(f"ghost ({self.ghost.integrator.label}) blew up at t = "
                         f"{self.ghost.t:.3f} s (energy jumped by {jump:.3g} J): ghost off",
                         True)
            self.ghost, ghost_total = None, math.nan
        if (jump := self._blown_up(e["total"])) is not None:
            self._diverged(self.integrator, self.last_plan[-1] if self.last_plan else 0.0,
                           self.world.t, f"energy jumped by {jump:.3g} J")
            e = self.world.energy()                      # of the state it went back to
        else:
            self._keep_checkpoint(e["total"])
        return e, ghost_total

    #: Simulated seconds between checkpoints, and how many are kept (2 s back).
    CHECKPOINT_S = 0.25
    CHECKPOINTS = 8

    def _keep_checkpoint(self, total: float) -> None:
        """A copy of the particles' state every ``CHECKPOINT_S`` (the oldest's buffers
        reused: ~0.05 ms for 40,000 particles), with its energy gain over the start."""
        p, cps = self.world.particles, self._checkpoints
        if cps and cps[-1][1].x.shape != p.x.shape:
            cps.clear()                                  # particles were added: anew
        elif cps and p.t - cps[-1][1].t < self.CHECKPOINT_S:
            return
        old = cps.pop(0)[1] if len(cps) >= self.CHECKPOINTS else None
        cps.append((total - self._e_ref, p.copy(into=old)))

    def _checkpoint_before(self, t: float):
        """The latest checkpoint before ``t`` whose energy had gained no more than the
        level's own energy scale (an exponential blow-up is far gone by the time it is
        caught: explicit Euler on stiff springs gains 40 % a frame), else the oldest."""
        shape = self.world.particles.x.shape
        kept = [(g, st) for g, st in self._checkpoints if st.t < t and st.x.shape == shape]
        sane = [st for g, st in kept if g <= self._e_scale]
        return sane[-1] if sane else (kept[0][1] if kept else None)

    # --- the hand -------------------------------------------------------------------

    def grab(self, point, radius: float) -> int | None:
        """Take the movable particle nearest ``point`` (m) within ``radius`` m with the
        mouse spring, in the world and the ghost; returns it (None: nothing there)."""
        self.log.record("grab", point[0], point[1], radius)
        self._last_drag = None
        k = self.world.nearest_movable(point, radius)
        if k is None:
            if self.world.nearest(point, radius) is not None:
                self.message("that particle is pinned (right click unpins it)")
            return None
        for w in self.worlds():
            if w.particles.inv_mass[k] > 0:
                w.grab(k, point, radius=radius)
        if self.ensemble is not None:
            self._ensemble_touched()
            self.ensemble.grab(k, point, radius)
        return k

    def drag_to(self, point) -> None:
        key = (float(point[0]), float(point[1]))
        if key != self._last_drag and self.world.mouse is not None:
            self.log.record("drag", *key)
            self._last_drag = key
        for w in self.worlds():
            w.drag_to(point)
        if self.ensemble is not None:
            self.ensemble.drag_to(point)

    def release(self) -> None:
        if self.world.mouse is not None:
            self.log.record("release")
        for w in self.worlds():
            w.release()
        if self.ensemble is not None:
            self.ensemble.release()

    def cut(self, a, b) -> int:
        self.log.record("cut", a[0], a[1], b[0], b[1])
        n = self.world.cut(a, b)
        if self.ghost is not None:
            self.ghost.cut(a, b)
        if self.ensemble is not None:
            self._ensemble_touched()
            self.ensemble.cut(a, b)
        return n

    def toggle_pin(self, point, radius: float) -> int | None:
        self.log.record("pin", point[0], point[1], radius)
        k = self.world.nearest(point, radius)
        if k is None:
            return None
        if self.world.mouse is not None and k in self.world.mouse.idx:
            self.release()
        pinned = self.world.toggle_pin(k)
        if self.ghost is not None and (self.ghost.particles.inv_mass[k] == 0) != pinned:
            self.ghost.toggle_pin(k)
        if self.ensemble is not None:
            self._ensemble_touched()
            for m in self.ensemble.live():       # each to the world's state, as the ghost
                if (m.world.particles.inv_mass[k] == 0) != pinned:
                    m.world.toggle_pin(k)
        self.message(f"particle {k} {'pinned' if pinned else 'unpinned'}")
        return k

    # --- commands -------------------------------------------------------------------

    def set_integrator(self, name: str) -> None:
        if name == self.integrator:
            return
        self.log.record("integrator", name)
        self.world.set_integrator(name)
        self.on_segment(INTEGRATORS[name].label)
        self.message(f"integrator: {INTEGRATORS[name].label}")
        if (note := self.alike_note()) and not self._said_alike:
            self._said_alike = True                  # once a level: it stays true
            self.message(note)
        if self.banner is not None and self.diverged is not None and self.paused:
            old, t = self.diverged
            self.banner = (f"{INTEGRATORS[old].label} diverged at t = {t:.4f} s",
                           f"Now {INTEGRATORS[name].label} from t = {self.world.t:.3f} s: "
                           "Space runs it, R resets.")
        if self.ghost is not None and self.ghost.integrator.name == name:
            other = contrast(name, self.policy.varies)
            self._seed_ghost(other)
            self.on_segment(f"ghost: {INTEGRATORS[other].label}")
            self.message(f"the world now runs the ghost's integrator: the ghost moves to "
                         f"{INTEGRATORS[other].label}, restarted from the world")

    def alike_note(self) -> str | None:
        """Why switching the integrator changes nothing visible here, and what to press
        to see a difference, or None. XPBD projects every rigid link and contact back
        after the step, whatever the integrator did (the solver decides the motion);
        with only gravity (and air drag) beside it, every integrator gives the same
        picture."""
        w = self.world
        if (len(w.springs) or w.pressure or w.config.G
                or w.config.constraint_method != "xpbd"):
            return None                     # forces the integrator takes: it shows
        if not (len(w.constraints) or w.has_contacts):
            return None
        fix = ("M tries Lagrange multipliers, where the integrator decides; "
               if len(w.constraints) and w.n <= 300 else "")
        return ("here XPBD's projection of the links and contacts decides the motion, so "
                f"every integrator looks alike: {fix}the springs, pendulums, jitter and "
                "orbit levels show them apart")

    def set_constraints(self, name: str) -> None:
        """Solve the rigid links by ``name`` (sim/lagrange.py: xpbd, lagrange, rattle) in
        the world and the ghost; a world that cannot says why (ConstraintMethodError)
        and keeps its method."""
        from ..sim.lagrange import CONSTRAINT_METHODS
        if name == self.world.config.constraint_method:
            return
        self.world.set_constraint_method(name)           # raises with the reason
        self.log.record("constraints", name)
        if self.ghost is not None:
            try:
                self.ghost.set_constraint_method(name)
            except ValueError:
                self.ghost = None
        if self.ensemble is not None:
            self._seed_ensemble(keep_marks=False)
        scheme = self.world.constraint_scheme
        self.on_segment(CONSTRAINT_METHODS[name].label)
        self.message(f"constraints: {CONSTRAINT_METHODS[name].label} ({scheme.scheme}, "
                     f"{'symplectic' if scheme.symplectic else 'not symplectic'})")

    def cycle_constraints(self, step: int) -> None:
        from ..sim.lagrange import CONSTRAINT_METHODS
        self.set_constraints(cycle(list(CONSTRAINT_METHODS),
                                   self.world.config.constraint_method, step))

    def cycle_integrator(self, step: int) -> None:
        self.set_integrator(cycle(list(INTEGRATORS), self.integrator, step))

    def set_timestep(self, mode: str) -> None:
        self.policy = self._make_policy(mode)
        self.timestep = mode
        self.on_segment(self.policy.describe())
        if self.ensemble is not None:
            self._seed_ensemble(keep_marks=False)      # orders on changing steps, or not
        note = ""
        if mode == "replay":
            note = (f": {len(self.trace.frames)} recorded frames, looping"
                    if self.trace.frames else ": nothing recorded yet (no steps)")
        self.message(f"timestep: {self.policy.describe()}{note}")

    def cycle_timestep(self, step: int) -> None:
        self.set_timestep(cycle(list(TIMESTEPS), self.timestep, step))

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

    def set_speed(self, value: float) -> None:
        self.speed = float(np.clip(value, *SPEEDS))

    def set_hz(self, hz: float) -> None:
        """Steps per second of the timestep policy (h = 1/hz): a new policy of the same
        mode; the integrator's variable-step form carries the change."""
        hz = float(np.clip(hz, *HZ))
        self.h = 1.0 / hz
        if self.timestep != "replay":
            self.policy = self._make_policy(self.timestep)
            self.on_segment(f"{hz:.0f} Hz", merge=True)
            if self.ensemble is not None:
                self._seed_ensemble()             # the errors start again at the new h

    def scale_hz(self, factor: float) -> None:
        self.set_hz(round(factor / self.policy.nominal_h))
        self.message(f"step: {1.0 / self.policy.nominal_h:.0f} Hz "
                     f"(h = {self.policy.nominal_h * 1e3:.2f} ms)")

    def setting(self, name: str) -> float:
        """The world setting ``name``'s value now (gravity's strength, the wind: the
        session's :class:`~sandbox.settings.Uniform`; the link softness: the world's
        links; the others: the world's config)."""
        return read_setting(self.world, self.uniform, name)

    def set_setting(self, change: tuple[str, float]) -> None:
        """``(name, value)``: the world setting ``name`` of ``settings.SETTINGS`` (the
        panel's sliders), clipped to its limits, on the world and the ghost; recorded
        for replays as ``["set", name, value]``. A change of the uniform field (gravity,
        the wind, the drag while a wind blows) moves every potential energy, a new link
        softness the energy the soft links store: the graph starts a new segment and
        the blow-up check's reference moves with the world's energy, so the jump is
        neither drift nor a divergence. A world that refuses the value (link softness
        under Lagrange multipliers: a ValueError saying why) keeps its own."""
        name, value = change
        st = SETTINGS[name]
        value = st.clip(value)
        if self.setting(name) == value:
            return
        config, _ = apply_setting(self.world.config, self.uniform, name, value)
        moved = st.on_world or config.gravity != self.world.config.gravity
        before = self.world.energy()["total"] if moved else 0.0
        uniform = put_setting(self.world, self.uniform, name, value)
        if self.ghost is not None:
            try:
                put_setting(self.ghost, self.uniform, name, value)
            except ValueError:                  # its method refuses it: no ghost
                self.ghost = None
        self.uniform = uniform
        self.log.record("set", name, value)
        if self.ensemble is not None:
            self._seed_ensemble(keep_marks=False)     # another world: started again
        if moved:
            self._e_ref += self.world.energy()["total"] - before
            self._e_scale = max(self._e_scale, energy_scale(self.world))
            self.on_segment(f"{st.label} {st.show(value)}", merge=True)

    def change_setting(self, change: tuple[str, int]) -> None:
        """``(name, +1 | -1)``: one step of the setting up or down (its keys), said."""
        name, sign = change
        st = SETTINGS[name]
        self.set_setting((name, st.stepped(self.setting(name), sign)))
        value = self.setting(name)
        lo, hi = st.limits
        end = " (the limit)" if value in (lo, hi) and value != 0 else ""
        note = ""
        if st.needs is not None and value != 0 and self.setting(st.needs) == 0:
            need = SETTINGS[st.needs]
            note = f" (no effect without {need.label}: {need.more[0].upper()} adds some)"
        if name == "link_softness":
            note = self._softness_note(value)
        self.message(f"{st.label}: {st.show(value)}{end}{note}")

    def _softness_note(self, factor: float) -> str:
        """What a link softness means in this world, for its message."""
        c = self.world.constraints
        soft = int(np.count_nonzero(c.own_compliance))
        if not soft:
            return " (no soft links here: rigid links stay rigid)"
        rigid = len(c) - soft
        what = ("every link rigid" if factor == 0 else "as built" if factor == 1
                else f"each soft link's compliance ×{factor:g}")
        rest = f"; {plural(rigid, 'rigid link')} stay rigid" if rigid else ""
        return f" ({what}: {plural(soft, 'soft link')}{rest})"

    def reset(self) -> None:
        """Rebuild the level; the integrator, timestep mode, the settings (iterations,
        substeps, gravity, wind, air drag, ...) and the speed chosen in the window stay."""
        cfg = self.world.config
        self.log.record("reset", cfg.integrator, cfg.iterations, cfg.substeps,
                        self.policy.nominal_h)
        world = self.scene.make_world()
        chosen = {name: self.setting(name) for name in SETTINGS}
        config, uniform = world.config, self.scene.uniform
        for name, value in chosen.items():
            if SETTINGS[name].on_world or setting_value(config, uniform, name) == value:
                continue
            config, uniform = apply_setting(config, uniform, name, value)
            if name not in ("iterations", "substeps"):   # the reset's own record has them
                self.log.record("set", name, value)
        world.configure(config)
        for name, value in chosen.items():               # the links' own: on the world
            if SETTINGS[name].on_world and read_setting(world, uniform, name) != value:
                try:
                    put_setting(world, uniform, name, value)
                    self.log.record("set", name, value)
                except ValueError:                       # the level's own method refuses
                    pass
        self.uniform = uniform
        if world.integrator.name != cfg.integrator:
            world.set_integrator(cfg.integrator, self.policy.nominal_h)
        if world.config.constraint_method != cfg.constraint_method:
            try:                                     # the method chosen in the window stays
                world.set_constraint_method(cfg.constraint_method, self.policy.nominal_h)
                self.log.record("constraints", cfg.constraint_method)
            except ValueError:
                pass
        if self.timestep != "replay":
            self.trace = StepTrace()
        self.policy = self._make_policy(self.timestep)
        self.followed = None
        self.on_clear()
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
        self.set_level(cycle(names, current, step))

    def set_level(self, name: str) -> None:
        """Open the shipped level ``name``; the ghost stays on (with the new level's
        own recommendation) if it was on."""
        ghost_on = self.ghost is not None
        self.ghost = None
        self.ghost_integrator = None
        self.load_scene(scene_from_level(name))
        if ghost_on:
            self.toggle_ghost()
        self.message(f"level: {self.scene.title}")

    # --- the ghost ------------------------------------------------------------------

    def _seed_ghost(self, integrator: str) -> None:
        """The ghost restarts as a copy of the world now, run by ``integrator``; the
        ensemble goes (one overlay at a time)."""
        if self.ensemble is not None:
            self.ensemble = None
            self.message("all integrators: off (the ghost instead)")
        ghost = copy.deepcopy(self.world)
        if integrator != ghost.integrator.name:
            ghost.set_integrator(integrator)
        self.ghost = ghost
        self.ghost_integrator = integrator
        self.ghost_before = None

    def toggle_ghost(self) -> None:
        if self.ghost is not None:
            self.ghost = None
            self.message("ghost off")
            return
        self.set_ghost(self.ghost_choice())

    def ghost_choice(self) -> str:
        """The ghost G starts: the last one chosen, else the level's recommendation,
        else the integrator whose motion differs most from the world's by the
        registry's data (``integrators.contrast``: no trial run, so G never stalls a
        frame; a trial of every integrator froze big levels for 2-17 s)."""
        for name in (self.ghost_integrator, self.scene.ghost):
            if name in INTEGRATORS and name != self.integrator:
                return name
        return contrast(self.integrator, self.policy.varies)

    def set_ghost(self, name: str | None) -> None:
        """Run the ghost with ``name`` (restarted from the world now); None: off."""
        if name is None:
            if self.ghost is not None:
                self.ghost = None
                self.message("ghost off")
            return
        if name == self.integrator:
            self.message("the ghost runs another integrator than the world's", True)
            return
        self._seed_ghost(name)
        self.on_segment(f"ghost: {INTEGRATORS[name].label}")
        self.message(f"ghost: {INTEGRATORS[name].label} (pink), restarted from the world")

    def cycle_ghost(self, step: int) -> None:
        """The ghost's next integrator in the registry, never the world's own."""
        current = self.ghost.integrator.name if self.ghost is not None else (
            self.ghost_integrator or self.integrator)
        order, name = list(INTEGRATORS), current
        for _ in order:
            name = cycle(order, name, step)
            if name != self.integrator:
                break
        self._seed_ghost(name)
        self.on_segment(f"ghost: {INTEGRATORS[name].label}")
        self.message(f"ghost: {INTEGRATORS[name].label}, restarted from the world")

    def compiled_now(self) -> bool:
        """Whether the world steps on the compiled kernels now: every part it uses
        usable for its float type (``backend.usable``: ready and not held back; a
        float64 level opened after the float32 cloth waits for its own). A cost
        measured on the numpy references meanwhile says nothing about the level."""
        w = self.world
        dtype = w.particles.x.dtype
        parts = backend.PARTS if w.has_contacts else ("kernels",)
        return all(backend.usable(part, dtype) for part in parts)

    # --- every integrator side by side (sandbox/ensemble.py) ---------------------------

    def ensemble_problem(self) -> str | None:
        """Why the ensemble cannot run on this world, or None."""
        n = self.world.n
        if n > ENSEMBLE_MAX_PARTICLES:
            return (f"all integrators side by side: not on this level ({n:,} particles; "
                    f"each of {len(INTEGRATORS) + 1} copies would step them every frame, "
                    f"past the frame's budget above {ENSEMBLE_MAX_PARTICLES})")
        if self.player is not None:
            return "all integrators side by side: not while a replay plays"
        return None

    def toggle_ensemble(self) -> None:
        """Every integrator on a copy of the world, the same steps and the same hand,
        next to a reference at a finer step (A); again: off. The ghost goes (the window
        stays calm: one overlay at a time)."""
        if self.ensemble is not None:
            self.ensemble = None
            self.message("all integrators: off")
            return
        if (why := self.ensemble_problem()) is not None:
            self.message(why, True)
            return
        if self.ghost is not None:
            self.ghost = None
        self.ensemble_prev = None
        self._seed_ensemble(keep_marks=False)
        from ..ensemble import FINE
        self.message(f"all {len(INTEGRATORS)} integrators from here, each in its colour; "
                     f"grey rings: the truth (Forest-Ruth at h/{FINE}). Ctrl+= halves the "
                     "step: each error falls by 2, 4 or 16")

    def _seed_ensemble(self, keep_marks: bool = True) -> None:
        """The ensemble (re)started as copies of the world now. ``keep_marks`` (a new
        step): the marks of the run so far become the ones to compare with, and, when
        the hand did nothing since, the run starts again from where the last one
        started, so that both runs cover the same motion and each error's ratio is
        2 to its order (from the world now, the phase differs: symplectic Euler's
        error fell by 6.8 instead of 2 on a spring)."""
        from ..ensemble import Ensemble
        if (why := self.ensemble_problem()) is not None:
            self.ensemble = None
            self.message(why, True)
            return
        start = self.world
        if keep_marks and self.ensemble_marks and self._ensemble_start is not None:
            self.ensemble_prev = (self.ensemble_h, dict(self.ensemble_marks))
            start = self._ensemble_start
        else:
            self.ensemble_prev = None
        self._ensemble_start = copy.deepcopy(start)
        self._ensemble_start.release()
        # Copies of the world: a particle held by the hand is held in each of them.
        self.ensemble = Ensemble(start, varying=self.policy.varies)
        # The copies keep no energy ledger (the window's split is the world's): with it
        # each steps on the substep path, off its compiled frame (the pendulums: 22 ms
        # a frame for the ten copies with it, 13 without; the chain 11 -> 5).
        # Each started afresh for the step it takes (a two-step method's previous
        # position belongs to the old step: Position Verlet's error grew 200-fold when
        # h halved without it), so that a run at h and one at h/2 start alike.
        for m in self.ensemble.live():
            m.world.track_energy(False)
            m.world.start(self.policy.nominal_h)
        self.ensemble_t0 = start.t
        self.ensemble_h = self.policy.nominal_h
        self.ensemble_marks = {}
        self._ensemble_slow = 0
        if start is not self.world:
            self.message(f"all integrators again from t = {start.t:.2f} s at h = "
                         f"{self.ensemble_h * 1e3:.2f} ms: their errors at "
                         f"{ENSEMBLE_MARK_S:g} s beside the ones at the step before")

    _ensemble_start = None          # a copy of what the ensemble's run started from

    def _ensemble_touched(self) -> None:
        """The hand changed the ensemble's motion: a new step starts from the world."""
        self._ensemble_start = None

    def _advance_ensemble(self, plan: list[float]) -> None:
        """The frame's plan for every member; the marks at ENSEMBLE_MARK_S; off (said)
        once it has cost the frame budget ENSEMBLE_PATIENCE frames in a row."""
        t0 = self.clock()
        for h in plan:
            self.ensemble.step(h)
        took = self.clock() - t0
        self.ensemble_ms = took * 1e3
        if not self.ensemble_marks and self.ensemble_elapsed() >= ENSEMBLE_MARK_S:
            self.ensemble_marks = {r.name: r.error for r in self.ensemble.rows()}
        if took > ENSEMBLE_BUDGET_S and self.compiled_now():
            self._ensemble_slow += 1
            if self._ensemble_slow >= ENSEMBLE_PATIENCE and self.speed > SPEEDS[0]:
                # Slow motion first (a halved step doubles the steps a frame): the
                # frame holds and the errors are still read at the same simulated time.
                self._ensemble_slow = 0
                self.speed = max(self.speed / 2, SPEEDS[0])
                self.message(f"slow motion x{self.speed:g}: all integrators took "
                             f"{took * 1e3:.0f} ms a frame at h = "
                             f"{self.policy.nominal_h * 1e3:.2f} ms (] speeds up again)")
            elif self._ensemble_slow >= ENSEMBLE_PATIENCE:
                self.ensemble = None
                self.message(f"all integrators off: here their steps took "
                             f"{took * 1e3:.0f} ms a frame (the budget: "
                             f"{ENSEMBLE_BUDGET_S * 1e3:.0f} ms, for 60 fps)", True)
        else:
            self._ensemble_slow = 0

    def ensemble_elapsed(self) -> float:
        """Simulated seconds since the ensemble (re)started."""
        ens = self.ensemble
        if ens is None:
            return 0.0
        ref = ens.reference
        t = ref.world.t if ref is not None and ref.stopped is None else self.world.t
        return t - self.ensemble_t0

    # --- replays ---------------------------------------------------------------------

    def save_replay(self, folder: Path) -> Path:
        """This session since its level was opened, as a replay file (see replay.py)."""
        from . import files
        text = self.log.to_json(self.world.state_hash())     # ReplayError: why not
        path = files.unique_path(folder, "replay", ".replay.json")
        from ..atomic import atomic_write_text
        atomic_write_text(path, text)
        n = self.log.frame
        from ..program import command_line  # python main.py, or the installed command
        self.message(f"replay saved: {path} ({n} frames; {command_line()} replay {path})")
        return path

    def play_replay(self, rep) -> None:
        """Play a replay file's frames and inputs instead of the clock and the mouse."""
        from ..levels import parse_level

        self.ensemble = None                  # the replay's own input only
        self.player = {"rep": rep, "frame": 0, "event": 0,
                       "held": Playback.of(parse_level(rep.level.text, rep.level.name))}
        self.paused = False

    def _play_frame(self) -> bool:
        p = self.player
        rep, k = p["rep"], p["frame"]
        events = rep.events
        if self.paused and not self._step_pending:
            return False
        self._step_pending = False
        if k >= len(rep.frames):
            while p["event"] < len(events):            # inputs after the last step
                self._replay_input(events[p["event"]])
                p["event"] += 1
            same = self.world.state_hash() == rep.final_hash
            self.player = None
            self.paused = True
            self.message("replay finished: the final state is bit for bit the recorded one"
                         if same else "replay finished: the final state DIFFERS from the "
                         "recording", not same)
            return False
        while p["event"] < len(events) and events[p["event"]][0] <= k:
            self._replay_input(events[p["event"]])
            p["event"] += 1
        plan = list(rep.frames[k])
        p["frame"] = k + 1
        self.last_plan = plan
        self.advance(plan)
        return bool(plan)

    def _replay_input(self, ev: list) -> None:
        op, args = ev[1], ev[2:]
        if op == "plot":                          # what the graph shows, not the world
            self.plot = Choice(args[0], args[1], bool(args[2]), auto=False)
            return
        if op == "follow":
            self.followed = int(args[0]) if args[0] < self.world.n else self.followed
            return
        if op == "debug":                         # the overlay, not the world
            self.debug_layers = frozenset(args[0])
            return
        # A build-mode edit ("level") is the level later resets rebuild, too.
        held = self.player["held"]
        held.level = level_after(held.level, op, args)
        self.world = apply_input(self.world, held, op, args)
        self.uniform = held.uniform
        if self.ghost is not None:
            if op in ("reset", "level"):
                self._seed_ghost(self.ghost.integrator.name)
            elif op != "integrator":
                self.ghost = apply_input(self.ghost, held, op, args)

    # --- the graph ----------------------------------------------------------------------

    def set_plot(self, choice: Choice) -> None:
        """The graph plots ``choice``; recorded as ``["plot", y, x, log]``."""
        if choice == self.plot:
            return
        self.plot = choice
        self.log.record("plot", *choice.args())

    def set_debug(self, layers) -> None:
        """The debug overlay draws ``layers`` (none: off); recorded as ``["debug",
        [layer, ...]]``."""
        layers = frozenset(layers)
        if layers == self.debug_layers:
            return
        self.debug_layers = layers
        self.log.record("debug", self._debug_args())

    def _debug_args(self) -> list[str]:
        """The layers on, in ``replay.DEBUG_LAYERS``' order (a file reads the same)."""
        return [n for n in DEBUG_LAYERS if n in self.debug_layers]

    def follow(self, k: int | None) -> None:
        """The graph follows particle ``k`` (a click); recorded as ``["follow", k]``."""
        if k is None or not 0 <= k < self.world.n or k == self.followed:
            return
        self.followed = int(k)
        self.log.record("follow", self.followed)

    # --- files ----------------------------------------------------------------------

    def save_snapshot(self, folder: Path) -> Path:
        from .. import snapshot  # and through it the level files' checks: only when used
        from . import files
        path = files.unique_path(folder, "snapshot", ".npz")
        snapshot.save(self.world, path)
        self.message(f"snapshot saved: {path}")
        return path

    def load_snapshot(self, folder: Path) -> None:
        from .. import snapshot
        from . import files
        path = files.latest(folder, "snapshot-*.npz")
        if path is None:
            self.message(f"no snapshot in {folder} (F5 saves one)", True)
            return
        snapshot.load(self.world, path)       # SnapshotError: world unchanged, message
        self.log.broken = f"a snapshot was loaded ({path.name})"
        self.uniform = Uniform.of(self.world.config.gravity)   # its field, wind and all
        self._set_world(self.world)
        self.on_segment("loaded")
        self.paused = False
        self.banner = None
        self.message(f"snapshot loaded: {path}")
