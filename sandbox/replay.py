"""Replay files: a session of the window, kept so that anyone can play it back bit for bit.

A :class:`SessionLog` holds the level (as validated TOML text: the file is
self-contained), every frame's planned steps and every input that changed the world
(grab, the hand's drag path, release, pin, cut, integrator and constraint method
switches, a world setting of :mod:`sandbox.settings` set (``["set", name, value]``:
iterations, substeps, air drag; files written before it hold ``configure`` for the first
two), reset, and build mode's edits (``["level", TOML]``: the edited level, from which the
world is built again at its start and which later resets rebuild)), each stamped with the
frame it came before. The physics is deterministic (the tests
prove it bit for bit), so :func:`play` rebuilds the world from the level and applies the
same inputs before the same steps, and ends in the same state: its hash is stored in
the file and checked. The settings include gravity's strength and the wind, two faces of
one vector of the world's config: playback keeps them beside the world
(:class:`Playback`), as the window's session does. What the window's graph plots
(``["plot", quantity, axis, log]``, ``["follow", particle]``) is kept too, and so are
the debug overlay's layers (``["debug", [layer, ...]]``, those on): playback leaves the
world as it is, the window shows the same graph and the same overlay.

The file is JSON (``*.replay.json``), written atomically. Reading it trusts nothing:
one size limit, one schema (pydantic: known operations with the arguments they take,
finite numbers, steps > 0), the level text through the level loader's own checks; any
problem is one :class:`ReplayError` line, and nothing runs.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .atomic import atomic_write_text

FORMAT = "verlet-sandbox replay"
VERSION = 1
MAX_BYTES = 64 << 20                       # an hour at 60 fps with a busy hand is ~20 MB
#: What a replay may ask for, checked before anything runs (a 64 MiB file of 7.5 M
#: one-step frames would have run ~2 hours at 1.8 GB): frames (9 hours at 60 fps),
#: inputs, and steps in all.
MAX_FRAMES = 2_000_000
MAX_EVENTS = 1_000_000
MAX_TOTAL_STEPS = 4_000_000
MAX_STEPS = 64                             # steps in one frame's plan
#: The shortest step a replay may hold (s): a frame never lasts under a microsecond, and
#: a step of 5e-324 s divided by zero.
MIN_STEP = 1e-6

class ReplayError(ValueError):
    """A replay file that cannot be used; the message names the file and the problem."""


Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LevelBlock(_Model):
    name: Annotated[str, Field(max_length=200)]
    text: Annotated[str, Field(max_length=1 << 20)]


class ReplayFile(_Model):
    """The file's schema: ``events`` are ``[frame, op, args...]``."""

    format: Literal["verlet-sandbox replay"]
    version: Literal[1]
    level: LevelBlock
    frames: Annotated[list[Annotated[list[Annotated[Finite, Field(ge=MIN_STEP, le=10.0)]],
                                     Field(max_length=MAX_STEPS)]],
                      Field(max_length=MAX_FRAMES)]
    events: Annotated[list[list], Field(max_length=MAX_EVENTS)]
    final_hash: Annotated[str, Field(max_length=128)] = ""

    @field_validator("events")
    @classmethod
    def _events(cls, events: list[list]) -> list[list]:
        last = 0
        for n, ev in enumerate(events):
            where = f"events[{n}]"
            if len(ev) < 2 or not isinstance(ev[0], int) or isinstance(ev[0], bool):
                raise ValueError(f"{where}: expected [frame, op, args...]")
            frame, op, args = ev[0], ev[1], ev[2:]
            if frame < last:
                raise ValueError(f"{where}: frames must not go back ({frame} after {last})")
            last = frame
            if not isinstance(op, str) or op not in OPS:
                raise ValueError(f"{where}: unknown operation {str(op)[:40]!r}")
            if problem := OPS[op].problem(args):
                raise ValueError(f"{where}: '{op}' takes {OPS[op].form}: {problem}")
        return events


class SessionLog:
    """What a session did, frame by frame (see the module docstring).

    The frames are kept compact, as one array of steps and one of where each frame
    ends (8 bytes a frame and 8 a step: a frame as a Python list of floats cost ~100
    bytes, and a window left open grew ~0.9 MiB a minute, paused frames included).
    Past ``MAX_FRAMES`` (9 hours at 60 fps) the session stops recording, says it can no
    longer be replayed, and lets the arrays go: the log never grows without bound."""

    def __init__(self, level_name: str, level_text: str | None) -> None:
        self.level_name = level_name
        self.level_text = level_text
        self._steps = array("d")
        self._ends = array("q")
        self.events: list[list] = []
        self.broken: str | None = None if level_text is not None else (
            "the world was not built from a level")
        self._stopped = False                 # past the limits: nothing more is kept

    @property
    def frame(self) -> int:
        return len(self._ends)

    @property
    def frames(self) -> list[list[float]]:
        """Every frame's steps, as lists (for the file)."""
        steps, out, start = self._steps, [], 0
        for end in self._ends:
            out.append(steps[start:end].tolist())
            start = end
        return out

    def record(self, op: str, *args) -> None:
        if self._stopped:
            return
        if len(self.events) >= MAX_EVENTS:
            self._too_long(f"more than {MAX_EVENTS:,} inputs")
            return
        self.events.append([self.frame, op, *[_plain(a) for a in args]])

    def step(self, plan: list[float]) -> None:
        if self._stopped:
            return
        if len(self._ends) >= MAX_FRAMES:
            self._too_long(f"longer than {MAX_FRAMES:,} frames")
            return
        self._steps.extend(float(h) for h in plan)
        self._ends.append(len(self._steps))

    def _too_long(self, why: str) -> None:
        if self.broken is None:
            self.broken = f"the session is {why}, more than a replay may hold"
        self._stopped = True
        self._steps, self._ends, self.events = array("d"), array("q"), []

    def to_json(self, final_hash: str = "") -> str:
        if self.broken:
            raise ReplayError(f"this session cannot be replayed: {self.broken}")
        return json.dumps({"format": FORMAT, "version": VERSION,
                           "level": {"name": self.level_name, "text": self.level_text},
                           "frames": self.frames, "events": self.events,
                           "final_hash": final_hash}, separators=(",", ":"))

    def save(self, path: str | os.PathLike, final_hash: str = "") -> None:
        atomic_write_text(path, self.to_json(final_hash))


def _plain(a):
    """Numbers (numpy or not) as Python floats/ints, names as str, lists of them."""
    if isinstance(a, str):
        return a
    if isinstance(a, (list, tuple)):
        return [_plain(b) for b in a]
    if isinstance(a, (bool,)):
        return int(a)
    if isinstance(a, int):
        return a
    return float(a)


def load(path: str | os.PathLike) -> ReplayFile:
    """Read and validate a replay file; :class:`ReplayError` with one line if unusable."""
    p = Path(path)
    shown = str(p)
    try:
        if not p.is_file():
            raise ReplayError(f"{shown}: not a file")
        with open(p, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except OSError as e:
        raise ReplayError(f"{shown}: cannot read it ({e.strerror or e})") from None
    if len(data) > MAX_BYTES:
        raise ReplayError(f"{shown}: larger than {MAX_BYTES >> 20} MiB; not a replay file")
    # Every frame and input is a JSON array: counting brackets bounds what parsing would
    # build before it is built (10 M empty frames reached 1.5 GB); the level's text may
    # hold up to its own size in brackets.
    if data.count(b"[") > MAX_FRAMES + MAX_EVENTS + (1 << 20):
        raise ReplayError(f"{shown}: more frames and inputs than a replay may hold (at most "
                          f"{MAX_FRAMES:,} frames and {MAX_EVENTS:,} inputs)")
    try:
        table = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ReplayError(f"{shown}: not a replay file (invalid JSON: "
                          f"{str(e)[:120]})") from None
    if not isinstance(table, dict) or table.get("format") != FORMAT:
        raise ReplayError(f"{shown}: not a replay file (no \"format\": \"{FORMAT}\")")
    try:
        rep = ReplayFile.model_validate(table)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ())) or "(file)"
        msg = str(err.get("msg", "invalid"))[:200].replace("\n", " ")
        raise ReplayError(f"{shown}: {where}: {msg}") from None
    steps = sum(len(f) for f in rep.frames)
    if steps > MAX_TOTAL_STEPS:
        raise ReplayError(f"{shown}: asks for {steps:,} steps; a replay may take at most "
                          f"{MAX_TOTAL_STEPS:,}")
    from .levels import LevelError, parse_level
    try:
        parse_level(rep.level.text, f"{shown} (its level)")
    except LevelError as e:
        raise ReplayError(str(e).splitlines()[0][:300]) from None
    return rep


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a replay may hold")


def play(rep: ReplayFile, on_step: Callable | None = None, on_frame: Callable | None = None):
    """Rebuild the level and run the recorded frames and inputs; returns the world.

    ``on_step(world, h)`` after every step, ``on_frame(world, k)`` after every frame.
    A step that diverges ends its frame, as it did in the window (which then paused).
    A level that cannot be built (a link to a missing particle) or an input the world
    refuses (RATTLE on 1,104 links, a grab of a pinned particle) is a
    :class:`ReplayError` naming it.
    """
    from .levels import build_world, parse_level
    from .sim.world import SimulationDiverged

    level = parse_level(rep.level.text, rep.level.name)
    try:
        world = build_world(level)
    except ValueError as e:                        # LevelError: what only building tells
        raise ReplayError(f"{rep.level.name}: its level cannot be built: "
                          f"{str(e).splitlines()[-1].strip()}") from None
    events = rep.events
    held = Playback.of(level)

    def run(world, e: int):
        try:
            held.level = level_after(held.level, events[e][1], events[e][2:])
            return apply(world, held, events[e][1], events[e][2:])
        except (ValueError, ArithmeticError) as err:
            raise ReplayError(f"events[{e}] ({events[e][1]}): the world refused it: "
                              f"{err}") from None

    e = 0
    for k, plan in enumerate(rep.frames):
        while e < len(events) and events[e][0] <= k:
            world = run(world, e)
            e += 1
        for h in plan:
            try:
                world.step(h)
            except SimulationDiverged:
                break
            if on_step is not None:
                on_step(world, h)
        if on_frame is not None:
            on_frame(world, k)
    while e < len(events):
        world = run(world, e)
        e += 1
    return world


@dataclass
class Playback:
    """What playing inputs back keeps beside the world: the ``level`` in force (a reset
    builds it again; :func:`level_after` the inputs before) and the uniform field's two
    settings (``settings.Uniform``: gravity's strength along the level's direction, the
    wind), which the world's config holds only as their sum. A reset or a new level
    goes back to the level's own field."""

    level: Any
    uniform: Any

    @classmethod
    def of(cls, level) -> Playback:
        from .settings import Uniform
        return cls(level, Uniform.of_level(level.world))


def apply(world, held: Playback, op: str, args: list):
    """One recorded input on ``world`` (the same calls the window's session made), with
    what the playback ``held`` keeps; returns the world (a reset or a level builds a new
    one)."""
    return OPS[op].apply(world, held, args)


def level_after(level, op: str, args: list):
    """The level in force after the input ``op``: the edited level of a ``level`` input
    (build mode), else ``level``."""
    if op != "level":
        return level
    from .levels import parse_level
    return parse_level(args[0], "the replay's edited level")


# ---------------------------------------------------------------- the operations

#: The largest coordinate (m) and pick radius a replay may name: beyond it numpy's
#: distances overflow (a cut at +-1e308 printed RuntimeWarnings).
MAX_COORD = 1e12


def _coordinate(a) -> str | None:
    if isinstance(a, (int, float)) and not isinstance(a, bool) and abs(a) <= MAX_COORD:
        return None
    return f"a coordinate within +-{MAX_COORD:g} m, got {str(a)[:40]}"


def _radius(a) -> str | None:
    if _coordinate(a) is None and a >= 0:
        return None
    return f"a radius in 0..{MAX_COORD:g} m, got {str(a)[:40]}"


def _one_of(registry_of, what: str):
    def check(a) -> str | None:
        names = registry_of()
        if isinstance(a, str) and a in names:
            return None
        return f"{what} one of {', '.join(names)}, got {str(a)[:40]}"
    return check


def _integrators():
    from .sim.integrators import INTEGRATORS
    return INTEGRATORS


def _methods():
    from .sim.lagrange import CONSTRAINT_METHODS
    return CONSTRAINT_METHODS


def _setting(name: str):
    def check(a) -> str | None:
        from .settings import SETTINGS
        return SETTINGS[name].problem(a)
    return check


def _step(a) -> str | None:
    if isinstance(a, (int, float)) and not isinstance(a, bool) and MIN_STEP <= a <= 10.0:
        return None
    return f"a step h in {MIN_STEP:g}..10 s, got {str(a)[:40]}"


def _set_args(args) -> str | None:
    from .settings import SETTINGS
    if not isinstance(args[0], str) or args[0] not in SETTINGS:
        return f"a setting of {', '.join(SETTINGS)}, got {str(args[0])[:40]}"
    return SETTINGS[args[0]].problem(args[1])


#: The window's debug overlay's layers (``sandbox.app.debug`` draws them), named here
#: where a replay's check reads them without pygame: ``["debug", [layer, ...]]``.
DEBUG_LAYERS = ("contacts", "corrections", "boxes", "link forces")


def _debug_layers(a) -> str | None:
    if (isinstance(a, list) and len(a) <= len(DEBUG_LAYERS) and len(set(map(str, a))) ==
            len(a) and all(isinstance(n, str) and n in DEBUG_LAYERS for n in a)):
        return None
    return (f"a list of distinct debug layers of {', '.join(DEBUG_LAYERS)}, "
            f"got {str(a)[:60]}")


@dataclass(frozen=True)
class Op:
    """A replay operation, every face of it: its arguments (``form``, one check per
    argument: None or what is wrong), an optional check of them together, and what it
    does to a world (``apply(world, held, args) -> world``, ``held`` the
    :class:`Playback`)."""

    form: str
    checks: tuple[Callable[[Any], str | None], ...]
    apply: Callable[[Any, Any, list], Any]
    together: Callable[[list], str | None] | None = None

    def problem(self, args: list) -> str | None:
        if len(args) != len(self.checks):
            return f"{len(self.checks)} arguments, got {len(args)}"
        for check, a in zip(self.checks, args, strict=True):
            if (problem := check(a)) is not None:
                return problem
        return self.together(args) if self.together is not None else None


def _grab(world, held, args):
    k = world.nearest_movable(args[:2], args[2])
    if k is not None:
        world.grab(k, args[:2], radius=args[2])
    return world


def _pin(world, held, args):
    k = world.nearest(args[:2], args[2])
    if k is not None:
        if world.mouse is not None and k in world.mouse.idx:
            world.release()
        world.toggle_pin(k)
    return world


def _configured(world, **changes):
    import dataclasses
    world.configure(dataclasses.replace(world.config, **changes))
    return world


def _set(world, held, args):
    from .settings import SETTINGS, put
    value = int(args[1]) if SETTINGS[args[0]].integer else float(args[1])
    held.uniform = put(world, held.uniform, args[0], value)
    return world


def _reset(world, held, args):
    from .levels import build_world
    name, iterations, substeps, h = args
    held.uniform = Playback.of(held.level).uniform
    world = _configured(build_world(held.level), iterations=int(iterations),
                        substeps=int(substeps))
    if world.integrator.name != name:
        world.set_integrator(name, h)
    return world


def _drag(world, held, args):
    world.drag_to(args)
    return world


def _release(world, held, args):
    world.release()
    return world


def _cut(world, held, args):
    world.cut(args[:2], args[2:])
    return world


def _integrator(world, held, args):
    world.set_integrator(args[0])
    return world


def _constraints(world, held, args):
    world.set_constraint_method(args[0])
    return world


def _configure(world, held, args):
    return _configured(world, iterations=int(args[0]), substeps=int(args[1]))


def _level_text(a) -> str | None:
    from .levels import LevelError, parse_level
    if not isinstance(a, str) or len(a) > 1 << 20:
        return "a level as TOML text (at most 1 MiB)"
    try:
        parse_level(a, "level")
    except LevelError as e:
        return " ".join(str(e).splitlines())[:200]
    return None


def _level(world, held, args):
    """Build mode's edit: the world built anew from the edited level (``held.level``,
    which :func:`level_after` read from ``args``), at its start, as the window rebuilt
    it, with that level's own gravity and wind."""
    from .levels import build_world
    held.uniform = Playback.of(held.level).uniform
    return build_world(held.level)


def _plot_args(args) -> str | None:
    from .quantities import replay_problem
    return replay_problem(args)


def _particle(a) -> str | None:
    if isinstance(a, int) and not isinstance(a, bool) and 0 <= a < 10 ** 9:
        return None
    return f"a particle's index, got {str(a)[:40]}"


def _unchanged(world, *_):
    """What the window shows (its graph, its debug overlay): nothing of the world."""
    return world


#: Every operation a replay file may hold, by the name it is written under. The window's
#: session records them (``SessionLog.record``), the file's check and playback read them.
OPS: dict[str, Op] = {
    "grab": Op("[x, y, pick radius]", (_coordinate, _coordinate, _radius), _grab),
    "drag": Op("[x, y]", (_coordinate, _coordinate), _drag),
    "release": Op("[]", (), _release),
    "cut": Op("[x0, y0, x1, y1]", (_coordinate,) * 4, _cut),
    "pin": Op("[x, y, pick radius]", (_coordinate, _coordinate, _radius), _pin),
    "integrator": Op("[integrator]", (_one_of(_integrators, "an integrator"),), _integrator),
    "constraints": Op("[method]", (_one_of(_methods, "a constraint method"),), _constraints),
    "set": Op("[setting, value]", (lambda a: None, lambda a: None), _set,
              together=_set_args),
    # Iterations and substeps, as files before "set" wrote them.
    "configure": Op("[iterations, substeps]", (_setting("iterations"), _setting("substeps")),
                    _configure),
    "reset": Op("[integrator, iterations, substeps, h]",
                (_one_of(_integrators, "an integrator"), _setting("iterations"),
                 _setting("substeps"), _step), _reset),
    # What the window's graph plots (sandbox/quantities.py); the world is unchanged.
    "plot": Op("[quantity, axis, log]", (lambda a: None,) * 3, _unchanged,
               together=_plot_args),
    "follow": Op("[particle]", (_particle,), _unchanged),
    # The debug overlay's layers that are on (none: off); the world is unchanged.
    "debug": Op("[[layer, ...]]", (_debug_layers,), _unchanged),
    "level": Op("[level as TOML]", (_level_text,), _level),
}
