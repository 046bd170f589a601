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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal, Union

import tomli_w
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from .atomic import FileTooLarge, atomic_write_text, read_bounded
from .resources import levels_dir
from .sim import builders
from .sim.collide.shapes import SHAPE_SETS, ShapeSet
from .sim.integrators import INTEGRATORS
from .sim.timestep import TIMESTEPS, TimestepPolicy, make_policy

if TYPE_CHECKING:
    from .sim.world import World

#: The shipped levels: the checkout's ``levels/``, or the installed package's copy
#: (:mod:`sandbox.resources`).
LEVELS_DIR = levels_dir()
#: The benchmark's scenes: ``levels/bench/<name>.toml``, found as ``bench:<name>``.
BENCH_DIR = LEVELS_DIR / "bench"
BENCH_PREFIX = "bench:"

#: Larger files are rejected before they are read into the TOML parser.
MAX_BYTES = 1 << 20

# What a level may ask for. Beyond these a file is a typo or an attack: building it
# would overflow (squared lengths, m v^2, 1 / area) or exhaust memory, or a step would
# never end. Every limit is checked before anything is built, and named when exceeded.
MAX_NUMBER = 1e9          # any number's magnitude (kg, N/m, m/s^2, ...)
MAX_COORDINATE = 1e6      # m: any position
MIN_SIZE = 1e-6           # the smallest length, mass, stiffness or spacing (m, kg, N/m)
MAX_PARTICLES = 200_000   # a 400 x 400 cloth is 160,000
MAX_LINKS = 1_000_000     # links and springs; that cloth with shear and bend: 955,206
MAX_BODIES = 5_000        # [[bodies]] tables (build mode writes one a click)
MAX_SHAPES = 1_000        # [[shapes]] tables
MAX_NBODY = 2_000         # particles when world.G > 0: every pair, every step
MAX_SOLVER_WORK = 100_000_000   # links x substeps x iterations: projections a step
MAX_CONTACT_PAIRS = 2_000_000   # candidate particle pairs at the start (collide_particles)


# --------------------------------------------------------------------------- errors

class LevelError(ValueError):
    """A level that cannot be used: ``path`` and every problem found, one string each.

    Each error reads ``"<field path>: <what was expected>, got <value>"``; ``str()``
    gives one line per error, each prefixed with the path, ready to print.
    """

    def __init__(self, path: str | os.PathLike, errors: list[str], limit: int = 300) -> None:
        # What a file says is quoted, never obeyed: no line breaks, no ESC, bounded
        # (``limit`` characters an error: more only for lists of our own names).
        self.path = printable(os.fspath(path), 200)
        self.limit = limit
        self.errors = [printable(str(e), limit) for e in errors]
        super().__init__("\n".join(f"{self.path}: {e}" for e in self.errors))

    def __reduce__(self):   # picklable (worker processes) despite the arguments
        return (type(self), (self.path, self.errors, self.limit))


# Characters that move the cursor, start escape sequences, break or reorder lines.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e"
                          "\u2066-\u2069\ufeff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def printable(text: str | bytes | os.PathLike, limit: int = 300) -> str:
    """``text`` as one safe terminal line: control characters (newline, ESC, DEL, C1,
    bidi overrides) as escapes such as ``\\n`` and ``\\x1b``, bytes that are not UTF-8 (a
    file name under any locale) as U+FFFD, and at most ``limit`` characters (the middle
    elided with ``...``)."""
    if isinstance(text, os.PathLike):
        text = os.fspath(text)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = _SURROGATE.sub("\ufffd", text)
    text = _UNPRINTABLE.sub(_escape, text)
    if len(text) > limit:
        half = (limit - 3) // 2
        text = f"{text[:half]}...{text[len(text) - (limit - 3 - half):]}"
    return text


def _escape(m: re.Match) -> str:
    c = m.group()
    named = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return named.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def _fail(error_type: str, message: str, **ctx: Any) -> PydanticCustomError:
    """A validation error whose message is already human; ``field=`` names a sub-field
    when a model-level check blames one field (pydantic puts model errors on the model)."""
    return PydanticCustomError(error_type, message, ctx or None)


# --------------------------------------------------------------------------- field types

_STRICT = Strict()   # TOML has real types: "3" is not an integer, true is not 1

Float = Annotated[float, _STRICT, Field(allow_inf_nan=False, ge=-MAX_NUMBER, le=MAX_NUMBER)]
Int = Annotated[int, _STRICT]
Bool = Annotated[bool, _STRICT]
Str = Annotated[str, _STRICT]
NonNeg = Annotated[Float, Field(ge=0.0)]
Positive = Annotated[Float, Field(ge=MIN_SIZE)]
Coordinate = Annotated[Float, Field(ge=-MAX_COORDINATE, le=MAX_COORDINATE)]


def _length(n: int, what: str):
    """A before-validator: a TOML array of exactly ``n`` items, said in words when not."""
    def check(value: Any) -> Any:
        if not isinstance(value, list | tuple) or len(value) != n:
            raise _fail("array_length", f"expected an array of {what}")
        return value
    return BeforeValidator(check)


Vec2 = Annotated[tuple[Coordinate, Coordinate], _length(2, "2 numbers [x, y]")]
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


MAX_LABEL = 40            # characters of a body's label: a few words drawn beside it


def _label_text(text: str) -> str:
    """A body's label: a few words on one line that the window draws as they are."""
    if not text.strip():
        raise _fail("label", "expected a few words (an empty label draws nothing)")
    if len(text) > MAX_LABEL:
        raise _fail("label", f"expected at most {MAX_LABEL} characters (a few words drawn "
                             "beside the body)")
    if _UNPRINTABLE.search(text):
        raise _fail("label", "expected one line of text (no line breaks, tabs or control "
                             "characters)")
    return text


Bounds = Annotated[tuple[Coordinate, Coordinate, Coordinate, Coordinate],
                   _length(4, "4 numbers [xmin, ymin, xmax, ymax]")]


class _Spec(BaseModel):
    """Frozen, closed to unknown keys, no non-finite floats: the base of every section."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- world and view

@dataclass(frozen=True)
class Magnitude:
    """A vector field's bounds on its length ``|v|``, ``ge <= |v| <= le``: what a
    setting that drives the vector's strength takes as its range (``settings.Setting``
    reads ``ge`` and ``le`` here as it does on a number's ``Field``). Marks the field
    only: :meth:`Level._gravity_within_bounds` checks it, on level files, not on a
    snapshot's config (the world's field there adds the wind's share, ``drag * wind``,
    which the level's own gravity bound does not cover)."""

    ge: float
    le: float


#: The longest uniform gravity a level may have (m/s^2): five Earths, twice Jupiter's.
GRAVITY_MAX = 50.0
#: The strongest wind (m/s), either way: a gale.
WIND_MAX = 20.0
#: The most a level (or the window's slider) may soften its soft links: 100 times.
SOFTNESS_MAX = 100.0


class WorldSettings(_Spec):
    """``[world]``: the physics settings and the integration."""

    gravity: Annotated[Vec2, Magnitude(0.0, GRAVITY_MAX)] = Field(
        (0.0, -9.81), description=f"uniform gravity [gx, gy], m/s^2, |g| <= {GRAVITY_MAX:g}")
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
    drag: Annotated[NonNeg, Field(le=10.0)] = Field(
        0.0, description="linear air drag rate, 1/s (a = -drag * v)")
    G: NonNeg = Field(0.0, description="n-body gravitational constant, m^3/(kg s^2); 0 = off")
    softening: NonNeg = Field(0.01, description="n-body gravity softening length, m")
    bounds: Annotated[Bounds | None, AfterValidator(_check_bounds)] = Field(
        None, description="walls [xmin, ymin, xmax, ymax], m; absent = no walls")
    restitution: Annotated[Float, Field(ge=0.0, le=1.0)] = Field(
        0.0, description="default bounciness of contacts, 0..1")
    friction: Annotated[NonNeg, Field(le=2.0)] = Field(
        0.0, description="default Coulomb friction coefficient, 0..2")
    wind: Annotated[Float, Field(ge=-WIND_MAX, le=WIND_MAX)] = Field(
        0.0, description="horizontal wind, m/s (> 0 blows towards +x); it acts through "
                         "the air drag, a = drag * (wind - v), so it needs drag > 0")
    link_softness: Annotated[NonNeg, Field(le=SOFTNESS_MAX)] = Field(
        1.0, description="every soft link's compliance times this factor (0: every link "
                         "rigid, 10: ten times as soft); rigid links stay rigid")
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
Seed = Annotated[Int, Field(ge=0, lt=2**63, description="random seed: the same seed "
                                                          "builds the same body")]
Radius = Annotated[NonNeg, Field(description="collision/draw radius of each particle, m")]
Compliance = Annotated[NonNeg, Field(description="XPBD compliance, m/N; 0 = rigid")]


class Totals(typing.NamedTuple):
    """What building asks for: particles, links (constraints) and springs."""

    particles: int
    links: int
    springs: int


def _grid_links(cols: int, rows: int, shear: bool, bend: bool) -> int:
    n = (cols - 1) * rows + cols * (rows - 1)
    n += 2 * (cols - 1) * (rows - 1) if shear else 0
    return n + ((cols - 2) * rows + cols * (rows - 2) if bend else 0)


def _rods(n: int, stiffness: float) -> Totals:
    return Totals(n + 1, 0, n) if stiffness > 0 else Totals(n + 1, n, 0)


class _Body(_Spec):
    """A ``[[bodies]]`` table, every face of one body type: its schema (the fields), what
    builds it (``builder``, a function of :mod:`sandbox.sim.builders` called with the world
    and the fields), how much it builds before building (:meth:`totals`, which the level
    limits read), and whether it needs n-body gravity (``needs_gravity``). One class a
    body type, listed in :data:`BODY_TYPES`; a test checks every face of every entry and
    the totals against the built worlds."""

    builder: ClassVar[Callable[..., Any]]
    needs_gravity: ClassVar[bool] = False
    #: Fields only the window reads (what it draws beside the body): never passed to the
    #: builder, so they change nothing that is simulated.
    DRAWN: ClassVar[frozenset[str]] = frozenset({"label", "label_at"})

    label: Annotated[Str, AfterValidator(_label_text)] | None = Field(
        None, description="a few words drawn beside the body (levels that compare "
                          "bodies name each one)")
    label_at: Vec2 | None = Field(
        None, description="the label's centre, m; absent: just above the body's pinned "
                          "particles (or, with none, above the body where it is)")

    @model_validator(mode="after")
    def _label_at_needs_a_label(self):
        if self.label_at is not None and self.label is None:
            raise _fail("label", "expected a label to place (label_at says only where)",
                        field="label_at")
        return self

    def totals(self) -> Totals:
        raise NotImplementedError


class Cloth(_Body):
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

    builder = staticmethod(builders.build_cloth)

    def totals(self) -> Totals:
        return Totals(self.cols * self.rows,
                      _grid_links(self.cols, self.rows, self.shear, self.bend), 0)


class Rope(_Body):
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

    builder = staticmethod(builders.build_rope)

    def totals(self) -> Totals:
        return Totals(self.segments + 1, self.segments, 0)


class Bridge(_Body):
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

    builder = staticmethod(builders.build_bridge)

    def totals(self) -> Totals:
        return Totals(self.links + 1, self.links, 0)


class SoftRing(_Body):
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

    builder = staticmethod(builders.build_soft_ring)

    def totals(self) -> Totals:
        return Totals(self.segments, self.segments, 0)


class SoftBlob(_Body):
    """A compliant lattice (structural, shear and bending links): jelly."""

    type: Literal["soft_blob"] = "soft_blob"
    center: Vec2 = Field(description="centre of the blob, m")
    cols: Annotated[Int, Field(ge=2, le=100)] = Field(6, description="particles across")
    rows: Annotated[Int, Field(ge=2, le=100)] = Field(6, description="particles down")
    spacing: Positive = Field(0.2, description="rest distance between neighbours, m")
    mass: Mass = 0.05
    radius: Radius = 0.0
    compliance: Compliance = 1e-5

    builder = staticmethod(builders.build_soft_blob)

    def totals(self) -> Totals:
        return Totals(self.cols * self.rows, _grid_links(self.cols, self.rows, True, True), 0)


class Pendulum(_Body):
    """A bob on a rigid rod from a fixed pivot."""

    type: Literal["pendulum"] = "pendulum"
    pivot: Vec2 = Field(description="fixed pivot, m")
    length: Positive = Field(1.0, description="rod length, m")
    angle: Float = Field(0.5, description="initial angle from straight down, rad")
    mass: Mass = 1.0
    radius: Radius = 0.05
    stiffness: NonNeg = Field(0.0, description="0: a rigid rod (a constraint); > 0: the "
                                               "rod is a spring of this stiffness, N/m")

    builder = staticmethod(builders.build_pendulum)

    def totals(self) -> Totals:
        return _rods(1, self.stiffness)


class DoublePendulum(_Body):
    """Two bobs on rigid rods in series: the classic chaotic system."""

    type: Literal["double_pendulum"] = "double_pendulum"
    pivot: Vec2 = Field(description="fixed pivot, m")
    lengths: PositivePair = Field((1.0, 1.0), description="rod lengths, m")
    angles: Pair = Field((1.5, 1.5), description="initial angles from straight down, rad")
    masses: PositivePair = Field((1.0, 1.0), description="bob masses, kg")
    radius: Radius = 0.05
    stiffness: NonNeg = Field(0.0, description="0: rigid rods (constraints); > 0: the "
                                               "rods are springs of this stiffness, N/m")

    builder = staticmethod(builders.build_double_pendulum)

    def totals(self) -> Totals:
        return _rods(2, self.stiffness)


class Cradle(_Body):
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

    builder = staticmethod(builders.build_cradle)

    def totals(self) -> Totals:
        return Totals(2 * self.balls, self.balls, 0)


class Moon(_Spec):
    """A body on a circular orbit around the centre, ``speed_factor`` times circular."""

    distance: Positive = Field(description="orbit radius, m")
    speed_factor: Positive = Field(1.0, description="initial speed / circular speed")
    mass: Positive = Field(1.0, description="kg")
    angle: Float = Field(0.0, description="initial polar angle, rad")


def _default_moons() -> list[Moon]:
    return [Moon(distance=10.0, speed_factor=1.1, mass=1.0)]


class Orbit(_Body):
    """A central mass and its moons under n-body gravity (needs ``world.G > 0``)."""

    type: Literal["orbit"] = "orbit"
    center: Vec2 = Field((0.0, 0.0), description="central body position, m")
    central_mass: Positive = Field(1000.0, description="kg")
    moons: Annotated[list[Moon], Field(min_length=1)] = Field(
        default_factory=_default_moons, description="[[bodies.moons]] tables, at least one")
    radius: Radius = 0.1
    fixed_center: Bool = Field(False, description="pin the central body")

    builder = staticmethod(builders.build_orbit)
    needs_gravity = True

    def totals(self) -> Totals:
        return Totals(1 + len(self.moons), 0, 0)


class Balls(_Body):
    """A block of free balls without links, for piles (set ``world.collide_particles``)."""

    type: Literal["balls"] = "balls"
    cols: Annotated[Int, Field(ge=1, le=200)] = Field(10, description="balls across")
    rows: Annotated[Int, Field(ge=1, le=200)] = Field(10, description="balls up")
    spacing: Positive = Field(0.2, description="distance between neighbours, m")
    origin: Vec2 = Field((0.0, 0.0), description="lower-left ball, m")
    radius: Radius = 0.08
    mass: Mass = 0.1

    builder = staticmethod(builders.build_balls)

    def totals(self) -> Totals:
        return Totals(self.cols * self.rows, 0, 0)


class BallBlock(_Body):
    """A block of free balls in straight columns, each nudged by a seeded random offset
    (the benchmark's pile; set ``world.collide_particles``)."""

    type: Literal["ball_block"] = "ball_block"
    cols: Annotated[Int, Field(ge=1, le=200)] = Field(40, description="balls across")
    rows: Annotated[Int, Field(ge=1, le=200)] = Field(50, description="balls up")
    spacing: Positive = Field(0.11, description="distance between neighbours, m")
    bottom_center: Vec2 = Field((0.0, 0.0), description="middle of the bottom row, m")
    radius: Radius = 0.05
    mass: Mass = 0.05
    jitter: NonNeg = Field(0.001, description="random offset of each ball (standard "
                                              "deviation per axis), m; at most spacing")
    seed: Seed = 0

    @model_validator(mode="after")
    def _jitter_within_spacing(self):
        if self.jitter > self.spacing:
            raise _fail("ball_block", "expected a number <= spacing ({spacing})",
                        field="jitter", spacing=self.spacing)
        return self

    builder = staticmethod(builders.build_ball_block)

    def totals(self) -> Totals:
        return Totals(self.cols * self.rows, 0, 0)


class NbodyDisc(_Body):
    """Equal bodies scattered over a disc (seeded) on near-circular orbits about its
    centre under their own gravity (needs ``world.G > 0``): the benchmark's n-body scene."""

    type: Literal["nbody_disc"] = "nbody_disc"
    n: Annotated[Int, Field(ge=2, le=MAX_NBODY)] = Field(100, description="bodies")
    center: Vec2 = Field((0.0, 0.0), description="centre of the disc, m")
    disc_radius: Positive = Field(10.0, description="radius of the disc, m")
    total_mass: Positive = Field(100.0, description="mass of all bodies together, kg")
    spread: NonNeg = Field(0.1, description="random velocity (standard deviation per axis) "
                                            "as a fraction of the mean circular speed")
    radius: Radius = 0.05
    seed: Seed = 0

    builder = staticmethod(builders.build_nbody_disc)
    needs_gravity = True

    def totals(self) -> Totals:
        return Totals(self.n, 0, 0)


class FreeParticles(_Body):
    """Free particles at the given points (what build mode's particle and ball tools
    place)."""

    type: Literal["particles"] = "particles"
    points: Annotated[list[Vec2], Field(min_length=1, max_length=10_000)] = Field(
        description="positions, m")
    mass: Mass = 0.1
    radius: Radius = 0.0
    pinned: Bool = Field(False, description="held in place")

    builder = staticmethod(builders.build_particles)

    def totals(self) -> Totals:
        return Totals(len(self.points), 0, 0)


class Links(_Body):
    """Links between particles made by the bodies before it, by their index in build
    order (the first body's particles are 0, 1, ...): build mode's link tool."""

    type: Literal["links"] = "links"
    pairs: Annotated[list[Annotated[tuple[Annotated[Int, Field(ge=0, lt=MAX_PARTICLES)],
                                          Annotated[Int, Field(ge=0, lt=MAX_PARTICLES)]],
                                    _length(2, "2 particle indices [i, j]")]],
                     Field(min_length=1, max_length=15_000)] = Field(
        description="[i, j] particle index pairs")
    compliance: Compliance = 0.0
    kind: Literal["stick", "rope"] = Field("stick", description="rope: slack allowed")

    builder = staticmethod(builders.build_links)

    def totals(self) -> Totals:
        return Totals(0, len(self.pairs), 0)


class Chain(_Body):
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

    builder = staticmethod(builders.build_chain)

    def totals(self) -> Totals:
        return Totals(len(self.points), len(self.points) - 1, 0)


class SpringChain(_Body):
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

    builder = staticmethod(builders.build_spring_chain)

    def totals(self) -> Totals:
        return Totals(self.segments + 1, 0, self.segments)


class SpringPendulum(_Body):
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

    builder = staticmethod(builders.build_spring_pendulum)

    def totals(self) -> Totals:
        return Totals(2, 0, 1)


AnyBody = Annotated[Union[Cloth, Rope, Bridge, SoftRing, SoftBlob, Pendulum,  # noqa: UP007
                       DoublePendulum, Cradle, Orbit, Balls, SpringChain, SpringPendulum,
                       FreeParticles, Links, Chain, BallBlock, NbodyDisc],
                 Field(discriminator="type")]


# --------------------------------------------------------------------------- shapes

ShapeRestitution = Annotated[Float | None, Field(ge=0.0, le=1.0)]
ShapeFriction = Annotated[Float | None, Field(ge=0.0)]


class _Shape(_Spec):
    """A ``[[shapes]]`` table: its schema here (the fields and their types), its
    geometry's rules (a box's order, a polygon's convexity, a rounded box's radius) and
    everything else about it in its shape set of the colliders (``shapes``, a class of
    :data:`sandbox.sim.collide.shapes.SHAPE_SETS` of the same name), whose parser the
    level check runs: one set of rules for level files and for worlds built in code."""

    shapes: ClassVar[type[ShapeSet]]
    restitution: ShapeRestitution = Field(
        None, description="bounciness 0..1; absent = world default")
    friction: ShapeFriction = Field(None, description="friction >= 0; absent = world default")

    @model_validator(mode="after")
    def _geometry(self):
        try:
            self.shapes()._parse(**self.model_dump(exclude={"type", "restitution",
                                                            "friction"}))
        except ValueError as e:
            field, _, message = str(e).partition(": ")
            # The level's message names the value itself ("..., got 0.6").
            raise _fail("shape", message.split(", got ")[0], field=field) from None
        return self


class Circle(_Shape):
    """A static disc."""

    shapes = SHAPE_SETS["circle"]
    type: Literal["circle"] = "circle"
    center: Vec2 = Field(description="m")
    radius: Positive = Field(description="m")


class Segment(_Shape):
    """A static line segment, optionally thick (a capsule)."""

    shapes = SHAPE_SETS["segment"]
    type: Literal["segment"] = "segment"
    a: Vec2 = Field(description="one end, m")
    b: Vec2 = Field(description="other end, m")
    thickness: NonNeg = Field(0.0, description="half-width around the segment, m")


class Polygon(_Shape):
    """A static convex polygon, points in order (either winding)."""

    shapes = SHAPE_SETS["polygon"]
    type: Literal["polygon"] = "polygon"
    points: Annotated[list[Vec2], Field(min_length=3, max_length=64)] = Field(
        description="vertices, m")


class Box(_Shape):
    """A static axis-aligned box, its corners rounded by ``radius`` (particles roll
    around them)."""

    shapes = SHAPE_SETS["box"]
    type: Literal["box"] = "box"
    min: Vec2 = Field(description="lower-left corner, m")
    max: Vec2 = Field(description="upper-right corner, m")
    radius: NonNeg = Field(0.0, description="corner radius, m: at most half the smaller "
                                            "side; 0 = sharp corners")


AnyShape = Annotated[Union[Circle, Segment, Polygon, Box],  # noqa: UP007
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
    bodies: Annotated[list[AnyBody], Field(max_length=MAX_BODIES)] = Field(
        default_factory=list, description="[[bodies]] tables")
    shapes: Annotated[list[AnyShape], Field(max_length=MAX_SHAPES)] = Field(
        default_factory=list, description="[[shapes]] tables")

    @model_validator(mode="after")
    def _orbits_need_gravity(self):
        # Checked here, at the boundary, rather than as a ValueError inside the builder.
        orbits = [i for i, b in enumerate(self.bodies) if b.needs_gravity]
        if orbits and self.world.G <= 0:
            raise _fail("orbit", "expected a number > 0: bodies[{i}] is an {kind}, which "
                                 "needs n-body gravity", field="world.G", got=self.world.G,
                        i=orbits[0], kind=self.bodies[orbits[0]].type)
        return self

    @model_validator(mode="after")
    def _gravity_within_bounds(self):
        bound = next(m for m in WorldSettings.model_fields["gravity"].metadata
                     if isinstance(m, Magnitude))
        length = math.hypot(*self.world.gravity)
        if not bound.ge <= length <= bound.le:
            raise _fail("gravity", f"expected [gx, gy] at most {bound.le:g} m/s^2 long "
                                   f"(this one: {length:.4g})", field="world.gravity")
        return self

    @model_validator(mode="after")
    def _within_limits(self):
        # Before anything is built: 30,000 cloths of 400 x 400 fit in 990 kB.
        t, w = level_totals(self), self.world
        for field, message, got in world_limits(t.particles, t.links, t.springs, w.G,
                                                w.substeps, w.iterations):
            if field in ("particles", "links"):
                size = [b.totals() for b in self.bodies]
                k = max(range(len(size)), key=lambda k: size[k].particles
                        if field == "particles" else size[k].links + size[k].springs)
                message += f"; bodies[{k}], a {self.bodies[k].type}, is the largest"
                field = "bodies"
            raise _fail("limit", message.replace("{", "(").replace("}", ")"), field=field,
                        got=got)
        return self


def world_limits(particles: int, links: int, springs: int, G: float, substeps: int,
                 iterations: int) -> list[tuple[str, str, Any]]:
    """``(field, what was expected, what it is)`` for each limit a world of these totals
    exceeds (``MAX_PARTICLES``, ``MAX_LINKS``, ``MAX_NBODY``, ``MAX_SOLVER_WORK``): the
    same for level files and snapshots."""
    out: list[tuple[str, str, Any]] = []
    if particles > MAX_PARTICLES:
        out.append(("particles", f"expected at most {MAX_PARTICLES:,} particles in all (the "
                    "level limit)", _Count(particles)))
    if links + springs > MAX_LINKS:
        out.append(("links", f"expected at most {MAX_LINKS:,} links and springs in all (the "
                    "level limit)", _Count(links + springs)))
    if G > 0 and particles > MAX_NBODY:
        out.append(("world.G", f"expected 0 with more than {MAX_NBODY:,} particles (n-body "
                    f"gravity pairs every particle every step; there are {particles:,})", G))
    work = links * substeps * iterations
    if work > MAX_SOLVER_WORK:
        out.append(("world.substeps", f"expected links x substeps x iterations <= "
                    f"{MAX_SOLVER_WORK:,} (solver projections a step; here {links:,} x "
                    f"{substeps} x {iterations} = {work:,})", substeps))
    return out


class _Count(int):
    """An integer shown with thousands separators in messages."""

    def __repr__(self) -> str:
        return f"{int(self):,}"


def level_totals(level: Level) -> Totals:
    """The particles, links and springs a level builds, before building it."""
    counts = [b.totals() for b in level.bodies]
    return Totals(*(sum(c[k] for c in counts) for k in range(3)))


BODY_TYPES: dict[str, type[_Spec]] = {
    m.model_fields["type"].default: m
    for m in (Cloth, Rope, Bridge, SoftRing, SoftBlob, Pendulum, DoublePendulum, Cradle, Orbit,
              Balls, SpringChain, SpringPendulum, FreeParticles, Links, Chain, BallBlock,
              NbodyDisc)}
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

# Python 3.11's tomllib is quadratic in the parts of a dotted key or table header (a
# 1 MiB ``[a.a.a...]`` took 567 s and 650 MB), recursive in nesting, and ~4 us a token
# even when linear (1 MiB of ``0,`` takes 1.5 s). So the text is scanned first, in
# linear time: strings and comments are blanked out, then structure is measured.
MAX_KEY_PARTS = 8         # dotted parts of a key or header; the schema needs 2
MAX_KEY_LENGTH = 128      # characters of one key; the schema's longest is 16
MAX_NESTING = 16          # arrays and inline tables inside each other; the schema needs 3
MAX_TOKENS = 80_000       # , . # count 1, = [ { count 3 (tomllib's cost): < 0.5 s
_STRINGS = re.compile(r'''"""(?:[^"\\]|\\[\s\S]?|"{1,2}(?!"))*+(?:"{3,5}|\Z)'''
                      r"""|'''(?:[^']|'{1,2}(?!'))*+(?:'{3,5}|\Z)"""
                      r'''|"(?:[^"\\\n]|\\.?)*+(?:"|$)'''
                      r"""|'[^'\n]*+(?:'|$)"""
                      r"""|\#[^\n]*+""", re.M)    # unterminated ones end at the line's end
_BARE = r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]"                  # a bare key starts here
_PART = rf"(?:{_BARE}++|[\x00\x01])"                      # \x00, \x01: a quoted key
_DOTTED = re.compile(rf"{_PART}(?:[ \t]*+\.[ \t]*+{_PART}){{{MAX_KEY_PARTS},}}")
_LONG_KEY = re.compile(rf"(?:{_BARE}{{{MAX_KEY_LENGTH + 1},}}+|\x01)[ \t]*+[.=\]]")


def _blank(m: re.Match) -> str:
    """A string as one placeholder character (\\x01 when too long for a key), a comment
    as ``#``; line breaks kept, so positions keep their line numbers."""
    s = m.group()
    if s[0] == "#":
        return "#"
    mark = "\x01" if len(s) > MAX_KEY_LENGTH + 2 else "\x00"
    return mark + "\n" * s.count("\n")


def _prescan(text: str) -> str | None:
    """Why ``text`` must not reach tomllib (one line), or None. Linear time: under 0.3 s
    for any 1 MiB text."""
    import numpy as np

    bare = _STRINGS.sub(_blank, text)
    tokens = (bare.count(",") + bare.count(".") + bare.count("#")
              + 3 * (bare.count("=") + bare.count("[") + bare.count("{")))
    if tokens > MAX_TOKENS:
        return (f"too many keys, values and tables for a level file ({tokens:,} tokens; "
                f"at most {MAX_TOKENS:,}); refusing to parse it")

    def line(pos: int) -> str:
        return f"line {bare.count(chr(10), 0, pos) + 1}: "

    if m := _DOTTED.search(bare):
        return (f"{line(m.start())}a key or table name has more than {MAX_KEY_PARTS} dotted "
                "parts; refusing to parse it")
    if m := _LONG_KEY.search(bare):
        return (f"{line(m.start())}a key is longer than {MAX_KEY_LENGTH} characters; "
                "refusing to parse it")
    code = np.frombuffer(bare.encode("utf-8", "surrogatepass"), np.uint8)
    step = np.zeros(code.shape, np.int8)
    step[(code == ord("[")) | (code == ord("{"))] = 1
    step[(code == ord("]")) | (code == ord("}"))] = -1
    if code.size and int(np.cumsum(step, dtype=np.int32).max()) > MAX_NESTING:
        return "invalid TOML: arrays or tables nested too deeply"
    return None


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
    if problem := _prescan(text):
        raise LevelError(path, [problem])
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


MAX_ERRORS = 20   # lines listed for one file; a hostile file can have 100,000 problems


def _describe_all(e: ValidationError) -> list[str]:
    errors = e.errors(include_url=False)
    lines = [_describe(err) for err in errors[:MAX_ERRORS]]
    if len(errors) > MAX_ERRORS:
        lines.append(f"... and {len(errors) - MAX_ERRORS:,} more problems")
    return lines


def _validate(table: dict, path: str) -> Level:
    try:
        return Level.model_validate(table)
    except ValidationError as e:
        raise LevelError(path, _describe_all(e)) from None


def parse_level(data: bytes | str, path: str | os.PathLike = "<string>") -> Level:
    """A validated :class:`Level` from TOML text or bytes; ``LevelError`` naming ``path``."""
    path = str(path)
    return _validate(_decode(data, path), path)


def load_level(path: str | os.PathLike) -> Level:
    """Read and validate a level file; any failure is one :class:`LevelError`.

    Only a regular file is read (a FIFO would block, a device never end), at most
    ``MAX_BYTES``; a file that asks for nothing (no body, no shape) is refused too.
    """
    shown = os.fspath(path)
    try:
        data = read_bounded(path, MAX_BYTES)
    except FileTooLarge:
        raise LevelError(shown, [_TOO_BIG]) from None
    except OSError as e:
        reason = e.strerror or type(e).__name__
        raise LevelError(shown, [f"cannot read the file: {reason}"]) from None
    level = parse_level(data, shown)
    if not level.bodies and not level.shapes:
        raise LevelError(shown, ["the level is empty: a level needs at least one "
                                 "[[bodies]] or [[shapes]] table"])
    return level


def world_settings(table: Any) -> WorldSettings:
    """A ``[world]`` table (a snapshot's config) validated as in a level file; the
    :class:`LevelError`'s lines name the field without the ``world.`` prefix."""
    try:
        return WorldSettings.model_validate(table)
    except ValidationError as e:
        errors = [dict(err, loc=("world", *err.get("loc", ()))) for err in
                  e.errors(include_url=False)]
        raise LevelError("[world]", [_describe(err).removeprefix("world.")
                                     for err in errors[:MAX_ERRORS]]) from None


_SHAPES = TypeAdapter(Annotated[list[AnyShape], Field(max_length=MAX_SHAPES)])


def shape_specs(specs: Any) -> list[dict]:
    """Static shapes as ``[[shapes]]`` tables (a snapshot's), validated as in a level
    file; returns them as plain dicts for ``Colliders.from_specs``."""
    try:
        shapes = _SHAPES.validate_python(specs)
    except ValidationError as e:
        errors = [dict(err, loc=("shapes", *err.get("loc", ()))) for err in
                  e.errors(include_url=False)]
        raise LevelError("shapes", [_describe(err) for err in errors[:MAX_ERRORS]]) from None
    return [s.model_dump() for s in shapes]


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


def bench_level_names() -> list[str]:
    """The benchmark's scenes, by name (``levels/bench/<name>.toml``, opened as
    ``bench:<name>``), sorted. Not among :func:`level_names`: the window's level list
    stays the lessons."""
    return sorted(p.stem for p in BENCH_DIR.glob("*.toml"))


def find_level(name_or_path: str | os.PathLike) -> Path:
    """``cloth`` -> ``levels/cloth.toml``, ``bench:cloth200_shear`` ->
    ``levels/bench/cloth200_shear.toml``; anything with a suffix or a folder is a path.

    Shipped levels are shown relative to the working directory when they are below
    it, so messages read ``levels/cloth.toml``.
    """
    text = os.fspath(name_or_path)
    if isinstance(text, str) and text.startswith(BENCH_PREFIX):
        name = text[len(BENCH_PREFIX):]
        candidate = BENCH_DIR / f"{name}.toml"
        # A bare name only: bench:../cloth is not a way into other folders.
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name) or not candidate.is_file():
            raise LevelError(text, [
                f"unknown benchmark scene; expected {BENCH_PREFIX}NAME, NAME one of: "
                f"{', '.join(bench_level_names())}"], limit=1000)
    else:
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


def level_label(path: str | os.PathLike | None) -> str:
    """The name :func:`find_level` finds a level file by: ``cloth`` for
    ``levels/cloth.toml``, ``bench:cloth200_shear`` for a benchmark scene, the path
    itself for any other file ("" for none)."""
    if not path:
        return ""
    p = Path(path)
    try:
        folder = p.resolve().parent
    except OSError:
        return str(p)
    if p.suffix == ".toml" and folder == LEVELS_DIR.resolve():
        return p.stem
    if p.suffix == ".toml" and folder == BENCH_DIR.resolve():
        return BENCH_PREFIX + p.stem
    return str(p)


# --------------------------------------------------------------------------- building

def uniform_field(gravity, strength: float, wind: float, drag: float) -> tuple[float, float]:
    """``WorldConfig.gravity`` (m/s^2) of a level's own ``gravity`` made ``strength`` long
    (its direction kept; none: straight down) with a horizontal ``wind`` (m/s) through the
    air ``drag`` (1/s). Drag towards the air's velocity is ``a = drag (wind - v) = -drag v
    + drag wind``: the config's ``drag`` and a uniform ``drag * wind`` along +x (see
    ``examples/custom_force.py``). ``gravity`` itself, bit for bit, when ``strength`` is its
    length and there is no wind (or no drag)."""
    gx, gy = float(gravity[0]), float(gravity[1])
    length = math.hypot(gx, gy)
    if strength != length:
        if length > 0:
            scale = strength / length
            gx, gy = gx * scale, gy * scale
        else:
            gx, gy = 0.0, -strength if strength else 0.0
    push = drag * wind
    return (gx + push, gy) if push else (gx, gy)


def world_config_kwargs(level: Level) -> dict[str, Any]:
    """The ``WorldConfig`` keyword arguments of a level's ``[world]``; its ``wind`` is a
    share of the config's gravity (:func:`uniform_field`)."""
    w = level.world
    gravity = uniform_field(w.gravity, math.hypot(*w.gravity), w.wind, w.drag)
    return dict(gravity=gravity, integrator=w.integrator, iterations=w.iterations,
                substeps=w.substeps, tear_ratio=w.tear_ratio, drag=w.drag, G=w.G,
                softening=w.softening, bounds=w.bounds, restitution=w.restitution,
                friction=w.friction, collide_particles=w.collide_particles, dtype=w.dtype,
                constraint_method=w.constraint_method)


def build_world(level: Level) -> World:
    """A started :class:`~sandbox.sim.world.World` holding the level's bodies and shapes."""
    from .sim.world import World, WorldConfig

    world = World(WorldConfig(**world_config_kwargs(level)))
    for k, body in enumerate(level.bodies):
        try:
            body.builder(world, **body.model_dump(exclude={"type", *body.DRAWN}))
        except (ValueError, ArithmeticError) as e:  # what only building can tell (links)
            raise LevelError(level.name or "level", [f"bodies[{k}] ({body.type}): {e}"]) \
                from None
    for shape in level.shapes:
        world.add_shape(shape.type, **shape.model_dump(exclude={"type"}))
    if level.world.link_softness != 1.0:
        try:
            world.set_link_softness(level.world.link_softness)
        except ValueError:      # soft links under Lagrange / RATTLE: start() says why
            pass
    from .sim.lagrange import ConstraintMethodError
    try:
        world.start(level.world.h)
    except ConstraintMethodError as e:          # too many links for it, rope links, ...
        raise LevelError(level.name or "level", [f"world.constraint_method: {e.reason}; "
                                                 "use \"xpbd\" for this level"]) from None
    _check_built(world, level)
    return world


def _check_built(world: World, level: Level) -> None:
    """What was built must be steppable: finite numbers everywhere (1e200 rope ends give
    an infinite rest length, an orbit's speed can overflow) and a contact search that
    fits in memory. One :class:`LevelError` naming the first body at fault."""
    import numpy as np

    name = level.name or "level"
    p = world.particles
    with np.errstate(all="ignore"):
        for what, a in (("position", p.x), ("velocity", p.v), ("previous position",
                        p.x_prev), ("acceleration", p.a), ("mass", p.mass),
                        ("inverse mass", p.inv_mass), ("radius", p.radius)):
            finite = np.isfinite(a)
            bad = np.flatnonzero(~(finite.all(axis=1) if a.ndim > 1 else finite))
            if bad.size:
                k = next((k for k, b in enumerate(world.bodies) if bad[0] in b.particles), 0)
                raise LevelError(name, [
                    f"bodies[{k}] ({level.bodies[k].type}): building it gives a non-finite "
                    f"{what} ({_show(a[bad[0]].tolist())}); its numbers are too extreme "
                    "together"])
        arrays = [("links", "rest length", world.constraints.rest),
                  ("links", "compliance", world.constraints.compliance),
                  ("springs", "rest length", world.springs.rest),
                  ("springs", "stiffness", world.springs.k),
                  ("springs", "damping", world.springs.c)]
        arrays += [("soft_ring", "gas", np.array([b.nrt, b.area0])) for b in world.pressure]
        for kind, what, a in arrays:
            if not np.isfinite(a).all():
                raise LevelError(name, [f"bodies: building gives a {kind} {what} that is not "
                                        "finite; the numbers are too extreme together"])
        energy = world.energy()
    bad = [k for k, e in energy.items() if not math.isfinite(e)]
    if bad:
        raise LevelError(name, [f"bodies: the level starts with a non-finite {bad[0]} energy "
                                f"({energy[bad[0]]}); its masses, speeds, heights or "
                                "stiffnesses are too large together"])
    pairs = _contact_pairs(world, level)
    if pairs > MAX_CONTACT_PAIRS:
        raise LevelError(name, [f"bodies: expected at most {MAX_CONTACT_PAIRS:,} candidate "
                                f"contact pairs at the start, got about {pairs:,} (radii far "
                                "larger than the spacing, or huge shapes over many "
                                "particles): every step would search them all"])


def _contact_pairs(world: World, level: Level) -> int:
    """An upper bound of the (particle, particle) and (particle, shape) pairs the first
    step's broad phase looks at, counted without making them."""
    import numpy as np

    x, r = world.particles.x.astype(float), world.particles.radius.astype(float)
    total = 0
    if level.world.collide_particles and int((r > 0).sum()) > 1:
        xr, rr = x[r > 0], r[r > 0]
        cell = 2.0 * float(rr.max()) + 1e-9      # as colliders.particle_pairs
        span = float(np.max(xr.max(axis=0) - xr.min(axis=0)))
        cell = max(cell, span / 2.0 ** 30)
        c = np.floor((xr - xr.min(axis=0)) / cell).astype(np.int64) + 1
        ny = int(c[:, 1].max()) + 2
        keys, counts = np.unique(c[:, 0] * ny + c[:, 1], return_counts=True)
        near = np.zeros(keys.size, np.int64)
        for d in (-ny - 1, -ny, -ny + 1, -1, 0, 1, ny - 1, ny, ny + 1):
            at = np.minimum(np.searchsorted(keys, keys + d), keys.size - 1)
            near += np.where(keys[at] == keys + d, counts[at], 0)
        total += int((counts * near).sum()) // 2
    if level.shapes and len(x):
        lo, hi = x - r[:, None], x + r[:, None]
        his, los = np.sort(hi, axis=0), np.sort(lo, axis=0)
        for shape in level.shapes:
            box = _shape_box(shape)
            # Boxes overlapping the shape's along an axis: starting before its end, less
            # those ending before its start; the smaller of the two axes bounds both.
            overlap = [int(np.searchsorted(los[:, a], box[1][a], "right")
                           - np.searchsorted(his[:, a], box[0][a])) for a in (0, 1)]
            total += max(0, min(overlap))
    return total


def _shape_box(shape: Any) -> tuple[tuple[float, float], tuple[float, float]]:
    if shape.type == "circle":
        (cx, cy), rad = shape.center, shape.radius
        return (cx - rad, cy - rad), (cx + rad, cy + rad)
    if shape.type == "segment":
        t = shape.thickness
        return ((min(shape.a[0], shape.b[0]) - t, min(shape.a[1], shape.b[1]) - t),
                (max(shape.a[0], shape.b[0]) + t, max(shape.a[1], shape.b[1]) + t))
    if shape.type == "polygon":
        xs, ys = zip(*shape.points, strict=True)
        return (min(xs), min(ys)), (max(xs), max(ys))
    return tuple(shape.min), tuple(shape.max)


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
