"""Replay files: a session of the window, kept so that anyone can play it back bit for bit.

A :class:`SessionLog` holds the level (as validated TOML text: the file is
self-contained), every frame's planned steps and every input that changed the world
(grab, the hand's drag path, release, pin, cut, integrator and constraint method
switches, a world setting of :mod:`sandbox.settings` set (``["set", name, value]``:
iterations, substeps, air drag; files written before it hold ``configure`` for the first
two), reset), each stamped with the frame it came before. The physics is deterministic (the tests
prove it bit for bit), so :func:`play` rebuilds the world from the level and applies the
same inputs before the same steps, and ends in the same state: its hash is stored in
the file and checked.

The file is JSON (``*.replay.json``), written atomically. Reading it trusts nothing:
one size limit, one schema (pydantic: known operations with the arguments they take,
finite numbers, steps > 0), the level text through the level loader's own checks; any
problem is one :class:`ReplayError` line, and nothing runs.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .atomic import atomic_write_text

FORMAT = "verlet-sandbox replay"
VERSION = 1
MAX_BYTES = 64 << 20                       # an hour at 60 fps with a busy hand is ~20 MB
MAX_FRAMES = 10_000_000
MAX_STEPS = 64                             # steps in one frame's plan

#: Operation -> number of (finite) numbers it takes; strings where noted.
OPS: dict[str, int] = {"grab": 3, "drag": 2, "release": 0, "cut": 4, "pin": 3,
                       "configure": 2, "reset": 3}


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
    frames: Annotated[list[Annotated[list[Annotated[Finite, Field(gt=0, le=10.0)]],
                                     Field(max_length=MAX_STEPS)]],
                      Field(max_length=MAX_FRAMES)]
    events: Annotated[list[list], Field(max_length=MAX_FRAMES)]
    final_hash: Annotated[str, Field(max_length=128)] = ""

    @field_validator("events")
    @classmethod
    def _events(cls, events: list[list]) -> list[list]:
        from .sim.integrators import INTEGRATORS

        last = 0
        for n, ev in enumerate(events):
            where = f"events[{n}]"
            if len(ev) < 2 or not isinstance(ev[0], int) or isinstance(ev[0], bool):
                raise ValueError(f"{where}: expected [frame, op, args...]")
            frame, op, args = ev[0], ev[1], ev[2:]
            if frame < last:
                raise ValueError(f"{where}: frames must not go back ({frame} after {last})")
            last = frame
            if op == "integrator":
                if len(args) != 1 or args[0] not in INTEGRATORS:
                    raise ValueError(f"{where}: 'integrator' takes one of: "
                                     f"{', '.join(INTEGRATORS)}")
                continue
            if op == "set":
                from .settings import SETTINGS
                if len(args) != 2 or not isinstance(args[0], str) or args[0] not in SETTINGS:
                    raise ValueError(f"{where}: 'set' takes [setting, value] with a setting "
                                     f"of: {', '.join(SETTINGS)}")
                problem = SETTINGS[args[0]].problem(args[1])
                if problem:
                    raise ValueError(f"{where}: {problem}")
                continue
            if op == "constraints":
                from .sim.lagrange import CONSTRAINT_METHODS
                if len(args) != 1 or args[0] not in CONSTRAINT_METHODS:
                    raise ValueError(f"{where}: 'constraints' takes one of: "
                                     f"{', '.join(CONSTRAINT_METHODS)}")
                continue
            if op not in OPS:
                raise ValueError(f"{where}: unknown operation {str(op)[:40]!r}")
            nums = args
            if op == "reset":
                if not args or args[0] not in INTEGRATORS:
                    raise ValueError(f"{where}: 'reset' takes [integrator, iterations, "
                                     "substeps, h]")
                nums = args[1:]
            if len(nums) != OPS[op] or not all(
                    isinstance(a, (int, float)) and not isinstance(a, bool)
                    and math.isfinite(a) for a in nums):
                raise ValueError(f"{where}: '{op}' takes {OPS[op]} finite numbers")
            if op in ("configure", "reset"):
                if not (1 <= nums[0] <= 200 and 1 <= nums[1] <= 64):
                    raise ValueError(f"{where}: iterations 1..200 and substeps 1..64")
                if op == "reset" and not nums[2] > 0:
                    raise ValueError(f"{where}: the step h must be > 0")
            if op in ("grab", "pin") and not nums[2] >= 0:
                raise ValueError(f"{where}: the pick radius must be >= 0")
        return events


class SessionLog:
    """What a session did, frame by frame (see the module docstring)."""

    def __init__(self, level_name: str, level_text: str | None) -> None:
        self.level_name = level_name
        self.level_text = level_text
        self.frames: list[list[float]] = []
        self.events: list[list] = []
        self.broken: str | None = None if level_text is not None else (
            "the world was not built from a level")

    @property
    def frame(self) -> int:
        return len(self.frames)

    def record(self, op: str, *args) -> None:
        self.events.append([self.frame, op, *[_plain(a) for a in args]])

    def step(self, plan: list[float]) -> None:
        self.frames.append([float(h) for h in plan])

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
    """Numbers (numpy or not) as Python floats/ints, names as str."""
    if isinstance(a, str):
        return a
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
    """
    from .levels import build_world, parse_level
    from .sim.world import SimulationDiverged

    level = parse_level(rep.level.text, rep.level.name)
    world = build_world(level)
    events = rep.events
    e = 0
    for k, plan in enumerate(rep.frames):
        while e < len(events) and events[e][0] <= k:
            world = apply(world, level, events[e][1], events[e][2:])
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
        world = apply(world, level, events[e][1], events[e][2:])
        e += 1
    return world


def apply(world, level, op: str, args: list):
    """One recorded input on ``world`` (the same calls the window's session made);
    returns the world (a reset builds a new one)."""
    import dataclasses

    from .levels import build_world
    from .settings import SETTINGS

    if op == "grab":
        k = world.nearest_movable(args[:2], args[2])
        if k is not None:
            world.grab(k, args[:2], radius=args[2])
    elif op == "drag":
        world.drag_to(args)
    elif op == "release":
        world.release()
    elif op == "cut":
        world.cut(args[:2], args[2:])
    elif op == "pin":
        k = world.nearest(args[:2], args[2])
        if k is not None:
            if world.mouse is not None and k in world.mouse.idx:
                world.release()
            world.toggle_pin(k)
    elif op == "integrator":
        world.set_integrator(args[0])
    elif op == "constraints":
        world.set_constraint_method(args[0])
    elif op == "set":                   # a world setting (settings.SETTINGS)
        value = int(args[1]) if SETTINGS[args[0]].integer else float(args[1])
        world.configure(dataclasses.replace(world.config, **{args[0]: value}))
    elif op == "configure":             # iterations and substeps, as files before "set"
        world.configure(dataclasses.replace(world.config, iterations=int(args[0]),
                                            substeps=int(args[1])))
    elif op == "reset":
        name, iterations, substeps, h = args
        world = build_world(level)
        world.configure(dataclasses.replace(world.config, iterations=int(iterations),
                                            substeps=int(substeps)))
        if world.integrator.name != name:
            world.set_integrator(name, h)
    return world
