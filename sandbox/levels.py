"""Level files: TOML on disk <-> a validated, frozen spec; errors name the file and the field.

A level is a TOML file (``levels/*.toml``, documented in ``levels/README.md``): world
settings, a view, a list of ``[[bodies]]`` built by ``sandbox.sim.builders`` and a
list of static ``[[shapes]]``. This module turns it into a :class:`Level` or one
:class:`LevelError` that lists *every* problem of the file at once, one line each::

    levels/cloth.toml: bodies[0].cols: expected an integer >= 2, got -3
    levels/cloth.toml: world.integrator: expected one of: euler, ..., rk4, got 'rk5'

Hostile input never escapes as anything else: invalid UTF-8, TOML syntax errors,
nesting deep enough to exhaust Python 3.11's recursive ``tomllib`` (``RecursionError``),
integers beyond Python's 4300-digit conversion limit (``ValueError``), ``nan`` and
``inf`` (legal TOML, rejected here), files over 1 MiB, directories and missing files.

The module is data only: it imports neither pygame nor the reference libraries, and
the simulation modules only inside :func:`build_world` and :func:`make_policy_for`,
so ``python main.py check`` stays fast.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import reprlib
import sys
import tomllib
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Union

import tomli_w
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .sim.atomic import atomic_write_text
from .sim.integrators import INTEGRATORS
from .sim.timestep import TIMESTEPS, TimestepPolicy, make_policy

if TYPE_CHECKING:
    from .sim.world import World

ROOT = Path(__file__).resolve().parent.parent
LEVELS_DIR = ROOT / "levels"

#: Larger files are rejected before they are read into the TOML parser.
MAX_BYTES = 1 << 20


# --------------------------------------------------------------------------- errors

class LevelError(ValueError):
    """A level that cannot be used: ``path`` and every problem found, one string each.

    Each error reads ``"<field path>: <what was expected>, got <value>"``; ``str()``
    gives one line per error, each prefixed with the path, ready to print.
    """

    def __init__(self, path: str | os.PathLike, errors: list[str]) -> None:
        self.path = str(path)
        self.errors = list(errors)
        super().__init__("\n".join(f"{self.path}: {e}" for e in self.errors))

    def __reduce__(self):   # picklable (worker processes) despite the two arguments
        return (type(self), (self.path, self.errors))


def _fail(error_type: str, message: str, **ctx: Any) -> PydanticCustomError:
    """A validation error whose message is already human; ``field=`` names a sub-field
    when a model-level check blames one field (pydantic puts model errors on the model)."""
    return PydanticCustomError(error_type, message, ctx or None)


# --------------------------------------------------------------------------- field types

_STRICT = Strict()   # TOML has real types: "3" is not an integer, true is not 1

Float = Annotated[float, _STRICT, Field(allow_inf_nan=False)]
Int = Annotated[int, _STRICT]
Bool = Annotated[bool, _STRICT]
Str = Annotated[str, _STRICT]
NonNeg = Annotated[Float, Field(ge=0.0)]
Positive = Annotated[Float, Field(gt=0.0)]


def _length(n: int, what: str):
    """A before-validator: a TOML array of exactly ``n`` items, said in words when not."""
    def check(value: Any) -> Any:
        if not isinstance(value, list | tuple) or len(value) != n:
            raise _fail("array_length", f"expected an array of {what}")
        return value
    return BeforeValidator(check)


Vec2 = Annotated[tuple[Float, Float], _length(2, "2 numbers [x, y]")]
Pair = Annotated[tuple[Float, Float], _length(2, "2 numbers")]
PositivePair = Annotated[tuple[Positive, Positive], _length(2, "2 positive numbers")]


def _one_of(names) -> AfterValidator:
    """Membership in a registry, read when the check runs, listing the valid names."""
    def check(value: str) -> str:
        valid = list(names)
        if value not in valid:
            raise _fail("one_of", "expected one of: {names}", names=", ".join(valid))
        return value
    return AfterValidator(check)


def _check_bounds(b: tuple[float, float, float, float] | None):
    if b is not None and not (b[0] < b[2] and b[1] < b[3]):
        raise _fail("bounds", "expected [xmin, ymin, xmax, ymax] with xmin < xmax and "
                              "ymin < ymax")
    return b


def _check_tear_ratio(r: float) -> float:
    if r != 0.0 and r < 1.0:
        raise _fail("tear_ratio", "expected 0 (never tear) or a stretch ratio >= 1")
    return r


def _check_convex(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """A convex polygon, either winding. Every turn must have the same sign *and* the
    turns must add up to one full revolution: a pentagram turns the same way at every
    corner but winds twice."""
    n = len(points)
    edges = [(points[(i + 1) % n][0] - points[i][0], points[(i + 1) % n][1] - points[i][1])
             for i in range(n)]
    if any(ex == 0.0 and ey == 0.0 for ex, ey in edges):
        raise _fail("polygon", "expected a convex polygon, but two consecutive points coincide")
    sign, turning = 0.0, 0.0
    for i in range(n):
        (ax, ay), (bx, by) = edges[i - 1], edges[i]
        cross, dot = ax * by - ay * bx, ax * bx + ay * by
        # Relative tolerance: nearly collinear corners count as straight, not as turns.
        if abs(cross) > 1e-12 * math.hypot(ax, ay) * math.hypot(bx, by):
            if sign and (cross > 0) != (sign > 0):
                raise _fail("polygon", "expected a convex polygon (points in order around "
                                       "it, all corners turning the same way)")
            sign = cross
        turning += math.atan2(cross, dot)
    # Written so that a NaN (coordinates near the float limit overflow) fails the test.
    if sign == 0.0 or not abs(abs(turning) - 2 * math.pi) <= 1e-6:
        raise _fail("polygon", "expected a convex polygon with non-zero area, going around "
                               "once")
    return points


_MIN_SPAN = 1e-6   # m; the rope builder treats closer ends as equal (np.allclose)


def _check_ends(body: Any, kind: str) -> None:
    # Builders lay particles out along end - start; coincident ends give no direction.
    if math.dist(body.start, body.end) < _MIN_SPAN:
        raise _fail(kind, f"expected an end at least {_MIN_SPAN} m away from start",
                    field="end")


def _one_line(text: str) -> str:
    if "\n" in text or "\r" in text:
        raise _fail("one_line", "expected one line (no line breaks)")
    return text


Bounds = Annotated[tuple[Float, Float, Float, Float],
                   _length(4, "4 numbers [xmin, ymin, xmax, ymax]")]


class _Spec(BaseModel):
    """Frozen, closed to unknown keys, no non-finite floats: the base of every section."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- world and view

class WorldSettings(_Spec):
    """``[world]``: the physics settings and the integration."""

    gravity: Vec2 = Field((0.0, -9.81), description="uniform gravity [gx, gy], m/s^2")
    integrator: Annotated[Str, _one_of(INTEGRATORS)] = Field(
        "tcv_corrected", description="name in sandbox.sim.integrators.INTEGRATORS")
    timestep: Annotated[Str, _one_of(TIMESTEPS)] = Field(
        "variable", description="timestep mode, name in sandbox.sim.timestep.TIMESTEPS")
    h: Annotated[Float, Field(ge=1e-5, le=0.1)] = Field(
        1 / 60, description="simulation step, s (fixed and random modes; nominal otherwise)")
    max_steps: Annotated[Int, Field(ge=1, le=100)] = Field(
        8, description="fixed mode: at most this many steps a frame, the excess is dropped")
    substeps: Annotated[Int, Field(ge=1, le=64)] = Field(
        1, description="world substeps per step (each step of h is split into this many)")
    iterations: Annotated[Int, Field(ge=1, le=200)] = Field(
        10, description="constraint projection iterations per (sub)step")
    tear_ratio: Annotated[Float, AfterValidator(_check_tear_ratio)] = Field(
        0.0, description="a link tears when stretched beyond this ratio of its rest "
                         "length; 0 = never")
    drag: NonNeg = Field(0.0, description="linear air drag rate, 1/s (a = -drag * v)")
    G: NonNeg = Field(0.0, description="n-body gravitational constant, m^3/(kg s^2); 0 = off")
    softening: NonNeg = Field(0.01, description="n-body gravity softening length, m")
    bounds: Annotated[Bounds | None, AfterValidator(_check_bounds)] = Field(
        None, description="walls [xmin, ymin, xmax, ymax], m; absent = no walls")
    restitution: Annotated[Float, Field(ge=0.0, le=1.0)] = Field(
        0.0, description="default bounciness of contacts, 0..1")
    friction: NonNeg = Field(0.0, description="default Coulomb friction coefficient")
    collide_particles: Bool = Field(False, description="particles collide with each other")
    dtype: Literal["float64", "float32"] = Field("float64", description="particle arrays")
    constraint_method: Literal["xpbd", "lagrange", "rattle"] = Field(
        "xpbd", description="how rigid links are solved: xpbd (projection after the step), "
                            "lagrange (multiplier forces the integrator integrates) or rattle "
                            "(RATTLE / SHAKE); see sandbox/sim/lagrange.py")
    seed: Annotated[Int, Field(ge=0, lt=2**63)] = Field(
        0, description="random seed (random timestep mode)")


class View(_Spec):
    """``[view]``: what the window shows when the level opens."""

    center: Vec2 = Field((0.0, 0.0), description="world point at the window centre, m")
    width: Positive = Field(10.0, description="world width visible across the window, m")


# --------------------------------------------------------------------------- bodies

Mass = Annotated[Positive, Field(description="mass of each particle, kg")]
Radius = Annotated[NonNeg, Field(description="collision/draw radius of each particle, m")]
Compliance = Annotated[NonNeg, Field(description="XPBD compliance, m/N; 0 = rigid")]


class Cloth(_Spec):
    """A rectangular grid of particles joined by structural (and optional shear and bend)
    links, hanging from its top edge."""

    type: Literal["cloth"] = "cloth"
    cols: Annotated[Int, Field(ge=2, le=400)] = Field(20, description="particles across")
    rows: Annotated[Int, Field(ge=2, le=400)] = Field(15, description="particles down")
    spacing: Positive = Field(0.1, description="rest distance between neighbours, m")
    origin: Vec2 = Field((0.0, 0.0), description="top-left particle, m")
    pins: Literal["top_row", "top_corners", "top_points", "top_middle", "none"] = Field(
        "top_corners", description="which particles are pinned")
    mass: Mass = 0.01
    radius: Radius = 0.0
    compliance: Compliance = 0.0
    shear: Bool = Field(False, description="add diagonal (shear) links")
    bend: Bool = Field(False, description="add skip-one (bending) links")
    shear_compliance: NonNeg = Field(0.0, description="compliance of shear links, m/N")
    bend_compliance: NonNeg = Field(1e-4, description="compliance of bending links, m/N")


class Rope(_Spec):
    """A chain of particles from ``start`` to ``end``."""

    type: Literal["rope"] = "rope"
    start: Vec2 = Field(description="first particle, m")
    end: Vec2 = Field(description="last particle, m")
    segments: Annotated[Int, Field(ge=1, le=5000)] = Field(20, description="links")
    mass: Mass = 0.05
    radius: Radius = 0.0
    compliance: Compliance = 0.0
    pin: Literal["start", "both", "none"] = Field("start", description="pinned ends")
    kind: Literal["rope", "stick"] = Field(
        "rope", description="rope: links only resist stretching; stick: they also push")

    @model_validator(mode="after")
    def _distinct_ends(self):
        _check_ends(self, "rope")
        return self


class Bridge(_Spec):
    """A sagging chain of links pinned at both ends."""

    type: Literal["bridge"] = "bridge"
    start: Vec2 = Field(description="left anchor, m")
    end: Vec2 = Field(description="right anchor, m")
    links: Annotated[Int, Field(ge=2, le=2000)] = Field(20, description="number of links")
    slack: NonNeg = Field(0.05, description="extra length as a fraction of the span")
    mass: Mass = 0.1
    radius: Radius = 0.0
    compliance: Compliance = 0.0

    @model_validator(mode="after")
    def _distinct_ends(self):
        _check_ends(self, "bridge")
        return self


class SoftRing(_Spec):
    """A closed ring of particles inflated by an area-preserving pressure."""

    type: Literal["soft_ring"] = "soft_ring"
    center: Vec2 = Field(description="centre of the ring, m")
    radius_ring: Positive = Field(1.0, description="ring radius, m")
    segments: Annotated[Int, Field(ge=3, le=1000)] = Field(24, description="particles")
    pressure: NonNeg = Field(1.0, description="gas pressure at the rest area, N/m (2-D); "
                                              "about weight / diameter holds the shape")
    mass: Mass = 0.05
    radius: Radius = 0.0
    compliance: Compliance = 0.0


class SoftBlob(_Spec):
    """A compliant lattice (structural, shear and bending links): jelly."""

    type: Literal["soft_blob"] = "soft_blob"
    center: Vec2 = Field(description="centre of the blob, m")
    cols: Annotated[Int, Field(ge=2, le=100)] = Field(6, description="particles across")
    rows: Annotated[Int, Field(ge=2, le=100)] = Field(6, description="particles down")
    spacing: Positive = Field(0.2, description="rest distance between neighbours, m")
    mass: Mass = 0.05
    radius: Radius = 0.0
    compliance: Compliance = 1e-5


class Pendulum(_Spec):
    """A bob on a rigid rod from a fixed pivot."""

    type: Literal["pendulum"] = "pendulum"
    pivot: Vec2 = Field(description="fixed pivot, m")
    length: Positive = Field(1.0, description="rod length, m")
    angle: Float = Field(0.5, description="initial angle from straight down, rad")
    mass: Mass = 1.0
    radius: Radius = 0.05
    stiffness: NonNeg = Field(0.0, description="0: a rigid rod (a constraint); > 0: the "
                                               "rod is a spring of this stiffness, N/m")


class DoublePendulum(_Spec):
    """Two bobs on rigid rods in series: the classic chaotic system."""

    type: Literal["double_pendulum"] = "double_pendulum"
    pivot: Vec2 = Field(description="fixed pivot, m")
    lengths: PositivePair = Field((1.0, 1.0), description="rod lengths, m")
    angles: Pair = Field((1.5, 1.5), description="initial angles from straight down, rad")
    masses: PositivePair = Field((1.0, 1.0), description="bob masses, kg")
    radius: Radius = 0.05
    stiffness: NonNeg = Field(0.0, description="0: rigid rods (constraints); > 0: the "
                                               "rods are springs of this stiffness, N/m")


class Cradle(_Spec):
    """Newton's cradle: touching balls on equal strings, ``pull`` of them swung aside."""

    type: Literal["cradle"] = "cradle"
    pivot: Vec2 = Field(description="top of the middle string, m")
    balls: Annotated[Int, Field(ge=2, le=20)] = Field(5, description="number of balls")
    length: Positive = Field(1.0, description="string length, m")
    ball_radius: Positive = Field(0.1, description="ball radius, m (strings 2r apart)")
    pull: Annotated[Int, Field(ge=0)] = Field(1, description="balls pulled aside, 0..balls")
    angle: Float = Field(0.6, description="angle of the pulled balls, rad")
    mass: Mass = 1.0

    @model_validator(mode="after")
    def _pull_at_most_balls(self):
        if self.pull > self.balls:
            raise _fail("cradle", "expected an integer <= balls ({balls})", field="pull",
                        balls=self.balls)
        return self


class Moon(_Spec):
    """A body on a circular orbit around the centre, ``speed_factor`` times circular."""

    distance: Positive = Field(description="orbit radius, m")
    speed_factor: Positive = Field(1.0, description="initial speed / circular speed")
    mass: Positive = Field(1.0, description="kg")
    angle: Float = Field(0.0, description="initial polar angle, rad")


def _default_moons() -> list[Moon]:
    return [Moon(distance=10.0, speed_factor=1.1, mass=1.0)]


class Orbit(_Spec):
    """A central mass and its moons under n-body gravity (needs ``world.G > 0``)."""

    type: Literal["orbit"] = "orbit"
    center: Vec2 = Field((0.0, 0.0), description="central body position, m")
    central_mass: Positive = Field(1000.0, description="kg")
    moons: Annotated[list[Moon], Field(min_length=1)] = Field(
        default_factory=_default_moons, description="[[bodies.moons]] tables, at least one")
    radius: Radius = 0.1
    fixed_center: Bool = Field(False, description="pin the central body")


class Balls(_Spec):
    """A block of free balls without links, for piles (set ``world.collide_particles``)."""

    type: Literal["balls"] = "balls"
    cols: Annotated[Int, Field(ge=1, le=200)] = Field(10, description="balls across")
    rows: Annotated[Int, Field(ge=1, le=200)] = Field(10, description="balls up")
    spacing: Positive = Field(0.2, description="distance between neighbours, m")
    origin: Vec2 = Field((0.0, 0.0), description="lower-left ball, m")
    radius: Radius = 0.08
    mass: Mass = 0.1


class Particles(_Spec):
    """Free particles at the given points (what build mode's particle and ball tools
    place)."""

    type: Literal["particles"] = "particles"
    points: Annotated[list[Vec2], Field(min_length=1, max_length=10_000)] = Field(
        description="positions, m")
    mass: Mass = 0.1
    radius: Radius = 0.0
    pinned: Bool = Field(False, description="held in place")


class Links(_Spec):
    """Links between particles made by the bodies before it, by their index in build
    order (the first body's particles are 0, 1, ...): build mode's link tool."""

    type: Literal["links"] = "links"
    pairs: Annotated[list[Annotated[tuple[Annotated[Int, Field(ge=0)],
                                          Annotated[Int, Field(ge=0)]],
                                    _length(2, "2 particle indices [i, j]")]],
                     Field(min_length=1, max_length=100_000)] = Field(
        description="[i, j] particle index pairs")
    compliance: Compliance = 0.0
    kind: Literal["stick", "rope"] = Field("stick", description="rope: slack allowed")


class Chain(_Spec):
    """A chain of particles through the given points, one link between neighbours
    (build mode's rope tool: a path)."""

    type: Literal["chain"] = "chain"
    points: Annotated[list[Vec2], Field(min_length=2, max_length=10_000)] = Field(
        description="the particles' positions, m, in order")
    mass: Mass = 0.05
    radius: Radius = 0.0
    compliance: Compliance = 0.0
    kind: Literal["stick", "rope"] = "stick"
    pin: Literal["none", "start", "end", "both"] = Field("none",
                                                        description="which ends are pinned")


class SpringChain(_Spec):
    """A chain of particles joined by springs (forces, not constraints)."""

    type: Literal["spring_chain"] = "spring_chain"
    start: Vec2 = Field(description="first particle, m")
    end: Vec2 = Field(description="last particle, m")
    segments: Annotated[Int, Field(ge=1, le=1000)] = Field(10, description="springs")
    mass: Mass = 0.1
    radius: Radius = 0.0
    stiffness: Positive = Field(100.0, description="each spring's stiffness, N/m")
    damping: NonNeg = Field(0.0, description="each spring's damping, N s/m")
    pin: Literal["start", "both", "none"] = Field("start", description="pinned ends")

    @model_validator(mode="after")
    def _distinct_ends(self):
        _check_ends(self, "spring_chain")
        return self


class SpringPendulum(_Spec):
    """A bob on a spring from a fixed pivot: it swings and bounces."""

    type: Literal["spring_pendulum"] = "spring_pendulum"
    pivot: Vec2 = Field(description="fixed pivot, m")
    length: Positive = Field(1.0, description="rest length of the spring, m")
    angle: Float = Field(0.0, description="initial angle from straight down, rad")
    stretch: Float = Field(0.0, description="initial extension beyond the hanging "
                                            "equilibrium, m")
    stiffness: Positive = Field(50.0, description="N/m")
    damping: NonNeg = Field(0.0, description="N s/m")
    mass: Mass = 1.0
    radius: Radius = 0.05

    @model_validator(mode="after")
    def _bob_below_pivot(self):
        # The builder adds the static stretch m|g|/k, which needs the world's gravity;
        # without it the bob must at least start beyond the pivot.
        if self.length + self.stretch <= 0:
            raise _fail("spring_pendulum", "expected a number > -length ({length})",
                        field="stretch", length=self.length)
        return self


Body = Annotated[Union[Cloth, Rope, Bridge, SoftRing, SoftBlob, Pendulum,  # noqa: UP007
                       DoublePendulum, Cradle, Orbit, Balls, SpringChain, SpringPendulum,
                       Particles, Links, Chain],
                 Field(discriminator="type")]


# --------------------------------------------------------------------------- shapes

ShapeRestitution = Annotated[Float | None, Field(ge=0.0, le=1.0)]
ShapeFriction = Annotated[Float | None, Field(ge=0.0)]


class _Shape(_Spec):
    restitution: ShapeRestitution = Field(
        None, description="bounciness 0..1; absent = world default")
    friction: ShapeFriction = Field(None, description="friction >= 0; absent = world default")


class Circle(_Shape):
    """A static disc."""

    type: Literal["circle"] = "circle"
    center: Vec2 = Field(description="m")
    radius: Positive = Field(description="m")


class Segment(_Shape):
    """A static line segment, optionally thick (a capsule)."""

    type: Literal["segment"] = "segment"
    a: Vec2 = Field(description="one end, m")
    b: Vec2 = Field(description="other end, m")
    thickness: NonNeg = Field(0.0, description="half-width around the segment, m")


class Polygon(_Shape):
    """A static convex polygon, points in order (either winding)."""

    type: Literal["polygon"] = "polygon"
    points: Annotated[list[Vec2], Field(min_length=3, max_length=64),
                      AfterValidator(_check_convex)] = Field(description="vertices, m")


class Box(_Shape):
    """A static axis-aligned box."""

    type: Literal["box"] = "box"
    min: Vec2 = Field(description="lower-left corner, m")
    max: Vec2 = Field(description="upper-right corner, m")

    @model_validator(mode="after")
    def _ordered(self):
        if not (self.min[0] < self.max[0] and self.min[1] < self.max[1]):
            raise _fail("box", "expected max > min in both x and y", field="max")
        return self


Shape = Annotated[Union[Circle, Segment, Polygon, Box],  # noqa: UP007
                  Field(discriminator="type")]


# --------------------------------------------------------------------------- level

class Level(_Spec):
    """A whole level file."""

    name: Str = Field("", description="title shown in the window")
    description: Str = Field("", description="one or two sentences on what to look at")
    hint: Annotated[Str, AfterValidator(_one_line)] = Field(
        "", description="one line on what to try, shown with the description")
    ghost: Annotated[Str, _one_of(INTEGRATORS)] | None = Field(
        None, description="the integrator the level recommends for the ghost: the one "
                          "that differs most visibly from the world's own here")
    world: WorldSettings = Field(WorldSettings(), description="[world] table")
    view: View = Field(View(), description="[view] table")
    bodies: list[Body] = Field(default_factory=list, description="[[bodies]] tables")
    shapes: list[Shape] = Field(default_factory=list, description="[[shapes]] tables")

    @model_validator(mode="after")
    def _orbits_need_gravity(self):
        # Checked here, at the boundary, rather than as a ValueError inside the builder.
        orbits = [i for i, b in enumerate(self.bodies) if b.type == "orbit"]
        if orbits and self.world.G <= 0:
            raise _fail("orbit", "expected a number > 0: bodies[{i}] is an orbit, which "
                                 "needs n-body gravity", field="world.G", got=self.world.G,
                        i=orbits[0])
        return self


BODY_TYPES: dict[str, type[_Spec]] = {
    m.model_fields["type"].default: m
    for m in (Cloth, Rope, Bridge, SoftRing, SoftBlob, Pendulum, DoublePendulum, Cradle, Orbit,
              Balls, SpringChain, SpringPendulum, Particles, Links, Chain)}
SHAPE_TYPES: dict[str, type[_Spec]] = {
    m.model_fields["type"].default: m for m in (Circle, Segment, Polygon, Box)}


# --------------------------------------------------------------------------- error text

_repr = reprlib.Repr()
_repr.maxlevel, _repr.maxlist, _repr.maxtuple, _repr.maxdict = 3, 6, 6, 4
_repr.maxstring, _repr.maxother, _repr.maxlong = 50, 50, 40


def _show(value: Any) -> str:
    """A bounded repr: nested and huge values are elided, then cut to 60 characters."""
    text = _repr.repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _walk(loc: tuple) -> tuple[str, Any]:
    """Pydantic's ``loc`` as ``a.b[0].c`` and the type found there.

    Discriminated unions add the tag to ``loc`` (``('bodies', 0, 'cloth', 'cols')``);
    the tag is not in the file, so it is dropped here (-> ``bodies[0].cols``).
    """
    text, tp = "", Level
    for part in loc:
        tp = _unwrap(tp)
        origin = typing.get_origin(tp)
        if origin in (Union, types.UnionType) and isinstance(part, str):
            members = {_unwrap(m).model_fields["type"].default: m
                       for m in typing.get_args(tp)
                       if isinstance(_unwrap(m), type) and issubclass(_unwrap(m), BaseModel)
                       and "type" in _unwrap(m).model_fields}
            if part in members:          # the discriminator's tag: not part of the path
                tp = members[part]
                continue
        if isinstance(part, int):
            text += f"[{part}]"
            args = typing.get_args(tp)
            if origin is list and args:
                tp = args[0]
            elif origin is tuple and args:
                tp = args[min(part, len(args) - 1)]
            else:
                tp = None
        else:
            text += f".{part}" if text else str(part)
            if isinstance(tp, type) and issubclass(tp, BaseModel) and part in tp.model_fields:
                tp = tp.model_fields[part].annotation
            else:
                tp = None
    return text, tp


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _choices(expected: str) -> str:
    # pydantic writes "'a', 'b' or 'c'"; we list them as "a, b, c".
    return ", ".join(s.strip().strip("'") for s in re.split(r", | or ", expected))


def _bound(op: str, limit: Any) -> str:
    """``"an integer >= 2"`` for an int limit, ``"a number > 0"`` for a float one."""
    if isinstance(limit, int) and not isinstance(limit, bool):
        return f"an integer {op} {limit}"
    text = str(int(limit)) if isinstance(limit, float) and limit.is_integer() else repr(limit)
    return f"a number {op} {text}"


_SECTION_OF = {f: "world" for f in WorldSettings.model_fields} | {
    f: "view" for f in View.model_fields}


def _items(n: int) -> str:
    return f"{n} item" if n == 1 else f"{n} items"


# pydantic error type -> what was expected, from the error's context (a table, not an
# if-chain: a new constraint kind is one line here).
_MESSAGES: dict[str, Callable[[dict], str]] = {
    "greater_than_equal": lambda c: f"expected {_bound('>=', c['ge'])}",
    "greater_than": lambda c: f"expected {_bound('>', c['gt'])}",
    "less_than_equal": lambda c: f"expected {_bound('<=', c['le'])}",
    "less_than": lambda c: f"expected {_bound('<', c['lt'])}",
    "literal_error": lambda c: f"expected one of: {_choices(c['expected'])}",
    "too_short": lambda c: f"expected at least {_items(c['min_length'])}",
    "too_long": lambda c: f"expected at most {_items(c['max_length'])}",
    "finite_number": lambda c: "expected a finite number",
    **{k: (lambda c, m=m: m) for m, kinds in {
        "expected an integer": ("int_type", "int_parsing", "int_from_float"),
        "expected a number": ("float_type", "float_parsing"),
        "expected true or false": ("bool_type", "bool_parsing"),
        "expected a string": ("string_type",),
        "expected an array": ("list_type", "tuple_type"),
        "expected a table": ("model_type", "model_attributes_type", "dict_type"),
    }.items() for k in kinds},
}


def _describe(err: dict) -> str:
    """One pydantic error as ``"<field path>: <expected>, got <value>"``."""
    loc = tuple(err.get("loc", ()))
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    path, tp = _walk(loc)
    got = f", got {_show(value)}"
    if "field" in ctx:                      # a model-level check that blames one field
        path = _join(path, ctx["field"])
        if "got" in ctx:
            value = ctx["got"]
        else:
            for part in ctx["field"].split("."):
                value = value.get(part) if isinstance(value, dict) else getattr(value, part,
                                                                                None)
        got = f", got {_show(value)}"
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "extra_forbidden":
        parent = _unwrap(_walk(loc[:-1])[1])
        hint = ""
        if parent is Level and (section := _SECTION_OF.get(str(loc[-1]))):
            hint = f" (it belongs in the [{section}] table)"   # written above [world]?
        elif isinstance(parent, type) and issubclass(parent, BaseModel):
            close = difflib.get_close_matches(str(loc[-1]), list(parent.model_fields), n=1,
                                              cutoff=0.5)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{path}: unknown field{hint}{got}"
    if kind == "union_tag_invalid":
        return (f"{_join(path, 'type')}: expected one of: {_choices(ctx['expected_tags'])}"
                f", got {_show(ctx.get('tag'))}")
    if kind == "union_tag_not_found":
        names = ", ".join(BODY_TYPES if loc[:1] == ("bodies",) else SHAPE_TYPES)
        return f"{_join(path, 'type')}: required field is missing (one of: {names})"
    if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
        return f"{path}: expected a finite number{got}"   # an int too big for a float
    if kind == "list_type" and typing.get_origin(_unwrap(tp)) is list:
        item = _unwrap(typing.get_args(_unwrap(tp))[0])
        if typing.get_origin(item) in (Union, types.UnionType) or (
                isinstance(item, type) and issubclass(item, BaseModel)):
            return f"{path}: expected an array of tables ([[{loc[-1]}]] sections){got}"
    if kind in _MESSAGES:
        return f"{path}: {_MESSAGES[kind](ctx)}{got}"
    msg = err.get("msg") or kind                        # our own errors are already human
    return f"{path or '(file)'}: {msg}{got}"


# --------------------------------------------------------------------------- reading

_TOO_BIG = "file is larger than 1 MiB (level files are a few KiB); refusing to parse it"
_TOML_POS = re.compile(r"\s*\(at (line \d+, column \d+|end of document)\)\s*$")


def _decode(data: bytes | str, path: str) -> dict:
    """Bytes or text -> the TOML table; every way hostile input fails becomes LevelError."""
    if isinstance(data, str):
        if len(data) > MAX_BYTES:
            raise LevelError(path, [_TOO_BIG])
        try:
            data = data.encode("utf-8")
        except UnicodeEncodeError as e:     # lone surrogates in a str
            raise LevelError(path, [f"text is not valid Unicode at character {e.start}"]) \
                from None
    if len(data) > MAX_BYTES:
        raise LevelError(path, [_TOO_BIG])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LevelError(path, [f"not UTF-8 text: invalid byte at offset {e.start}"]) from None
    text = text.removeprefix("\ufeff")      # a BOM some editors write
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        # Python 3.11's TOMLDecodeError has no lineno/colno: they are only in the text.
        msg = str(e)
        m = _TOML_POS.search(msg)
        what = msg[:m.start()] if m else msg
        where = m.group(1).replace("end of document", "end of file") + ": " if m else ""
        raise LevelError(path, [f"{where}invalid TOML: {what[:1].lower()}{what[1:]}"]) \
            from None
    except RecursionError:
        # Python 3.11's tomllib recurses once per nested array or inline table.
        raise LevelError(path, ["invalid TOML: arrays or tables nested too deeply"]) from None
    except ValueError as e:
        # tomllib lets int()'s digit limit through (CVE-2020-10735 guard, 4300 digits).
        if "integer string conversion" in str(e):
            raise LevelError(path, ["invalid TOML: an integer has too many digits "
                                    f"(at most {sys.get_int_max_str_digits() or 4300})"]) from None
        raise LevelError(path, [f"invalid TOML: {e}"]) from None


def _validate(table: dict, path: str) -> Level:
    try:
        return Level.model_validate(table)
    except ValidationError as e:
        raise LevelError(path, [_describe(err) for err in e.errors(include_url=False)]) \
            from None


def parse_level(data: bytes | str, path: str | os.PathLike = "<string>") -> Level:
    """A validated :class:`Level` from TOML text or bytes; ``LevelError`` naming ``path``."""
    path = str(path)
    return _validate(_decode(data, path), path)


def load_level(path: str | os.PathLike) -> Level:
    """Read and validate a level file; any failure is one :class:`LevelError`."""
    shown = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)    # never slurp a huge (or endless) file
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise LevelError(shown, [f"cannot read the file: {reason}"]) from None
    if len(data) > MAX_BYTES:
        raise LevelError(shown, [_TOO_BIG])
    return parse_level(data, shown)


def with_world(level: Level, path: str | os.PathLike = "<overrides>", **changes: Any) -> Level:
    """A copy of ``level`` with ``[world]`` settings changed, validated like a file."""
    table = level.model_dump(mode="json", exclude_none=True)
    table["world"].update(changes)
    return _validate(table, str(path))


# --------------------------------------------------------------------------- writing

def dump_level(level: Level) -> str:
    """The level as TOML text (absent optional fields are omitted: TOML has no null)."""
    return tomli_w.dumps(level.model_dump(mode="json", exclude_none=True))


def save_level(level: Level, path: str | os.PathLike) -> None:
    """Write ``level`` to ``path`` atomically; ``load_level(path) == level``."""
    atomic_write_text(path, dump_level(level))


# --------------------------------------------------------------------------- finding

def level_names() -> list[str]:
    """The shipped levels, by name (``levels/<name>.toml``), sorted."""
    return sorted(p.stem for p in LEVELS_DIR.glob("*.toml"))


def find_level(name_or_path: str | os.PathLike) -> Path:
    """``cloth`` -> ``levels/cloth.toml``; anything with a suffix or a folder is a path.

    Shipped levels are shown relative to the working directory when they are below
    it, so messages read ``levels/cloth.toml``.
    """
    p = Path(name_or_path)
    if p.suffix or len(p.parts) != 1:
        return p
    candidate = LEVELS_DIR / f"{p.name}.toml"
    if not candidate.is_file():
        raise LevelError(str(name_or_path), [
            f"unknown level; expected a file or one of: {', '.join(level_names())}"])
    try:
        return candidate.relative_to(Path.cwd())
    except ValueError:
        return candidate


# --------------------------------------------------------------------------- building

def world_config_kwargs(level: Level) -> dict[str, Any]:
    """The ``WorldConfig`` keyword arguments of a level's ``[world]``."""
    w = level.world
    return dict(gravity=w.gravity, integrator=w.integrator, iterations=w.iterations,
                substeps=w.substeps, tear_ratio=w.tear_ratio, drag=w.drag, G=w.G,
                softening=w.softening, bounds=w.bounds, restitution=w.restitution,
                friction=w.friction, collide_particles=w.collide_particles, dtype=w.dtype,
                constraint_method=w.constraint_method)


def build_world(level: Level) -> World:
    """A started :class:`~sandbox.sim.world.World` holding the level's bodies and shapes."""
    from .sim.builders import BUILDERS
    from .sim.world import World, WorldConfig

    world = World(WorldConfig(**world_config_kwargs(level)))
    for k, body in enumerate(level.bodies):
        try:
            BUILDERS[body.type](world, **body.model_dump(exclude={"type"}))
        except ValueError as e:                 # what only building can tell (links)
            raise LevelError(level.name or "level", [f"bodies[{k}] ({body.type}): {e}"]) \
                from None
    for shape in level.shapes:
        world.add_shape(shape.type, **shape.model_dump(exclude={"type"}))
    from .sim.lagrange import ConstraintMethodError
    try:
        world.start(level.world.h)
    except ConstraintMethodError as e:          # too many links for it, rope links, ...
        raise LevelError(level.name or "level", [f"world.constraint_method: {e.reason}; "
                                                 "use \"xpbd\" for this level"]) from None
    return world


# Keyword arguments of each timestep policy, from the level (a table, not an if-chain).
_POLICY_ARGS: dict[str, Any] = {
    "fixed": lambda w: dict(h=w.h, max_steps=w.max_steps),
    "variable": lambda w: dict(substeps=1, nominal=w.h),   # the world does its own substeps
    "random": lambda w: dict(h=w.h, seed=w.seed),
    "replay": lambda w: {},                                 # an empty trace until one is loaded
}


def make_policy_for(level: Level) -> TimestepPolicy:
    """The level's timestep policy from ``sandbox.sim.timestep.TIMESTEPS``."""
    w = level.world
    args = _POLICY_ARGS.get(w.timestep, lambda w: {})(w)
    return make_policy(w.timestep, **args)
