"""The world settings a person changes while a level runs, one row each.

A row (:class:`Setting`) is every face of one setting: the world's field it sets, its
label, its limits (read from the level schema, so a key, a slider and a level file can
never disagree), how much one key press changes it, its keys, its section of the panel
and its replay form ``["set", name, value]``. The keymap and the help screen, the
panel's sliders, the session's commands (``set_setting``, ``change_setting``), replay
recording, replay validation and replay playback all read :data:`SETTINGS`: a new
setting is one row here (its field on ``WorldConfig`` and in the level schema given).

Most rows are a number of ``WorldConfig`` of their own name (``[world] <name>`` in a
level file). Two are scalar faces of one vector, ``WorldConfig.gravity``, the world's
uniform field (``uniform=True``); :class:`Uniform` holds them beside the config:

``gravity``  the strength ``|g|`` (m/s^2) along the level's own direction, which stays
             whatever the strength (a level without gravity gets it straight down); its
             limits are the schema's :class:`~sandbox.levels.Magnitude` of ``[world]
             gravity`` (0..50). At the level's own strength the vector is the level's,
             bit for bit.
``wind``     a horizontal wind ``w`` (m/s, ``[world] wind``) that acts through the air
             drag ``k``: drag pulls towards the air's velocity, ``a = k (w - v) = -k v +
             k w``, so the wind adds ``k w`` along +x to the field (``needs="drag"``:
             with no drag it does nothing, and the panel and the messages say so).

The config holds only their sum (:meth:`Uniform.vector`, ``levels.uniform_field``), so
the session keeps a :class:`Uniform` and every change goes through :func:`apply`, which
returns the new config and the new :class:`Uniform` together; replay playback keeps its
own the same way. Changing the drag with a wind blowing changes the field too.

One row is held by the world itself (``on_world=True``), neither by its config nor by
the uniform field: the links' own, ``World.<name>``, set by ``World.set_<name>``.

``link_softness``  a factor (``[world] link_softness``, 0..100) on every soft link's own
             compliance, the one its level gave it: 0 makes every link rigid, 1 gives
             them back as built, 10 makes each ten times as soft (it stretches ten times
             as far under the same load: a mass m hanging on a link of compliance
             alpha stretches it by m g alpha). Rigid links stay rigid whatever the
             factor. Its keys step through :data:`SOFTNESS_LADDER`, whose rungs the
             panel's slider has too: a factor, not a compliance in m/N, because the
             levels' soft links differ (a bridge's 1e-4 m/N, a jelly's 1e-5, a cloth's
             bending links 1e-3) and a factor keeps each as its level made it,
             relative to the others; a learner reads "3 times as soft". Lagrange
             multipliers and RATTLE hold rigid links only: under them a factor that
             would soften a link is refused (``World.set_link_softness``).

:func:`read` and :func:`put` read and set any row on a world (:func:`value` and
:func:`apply` the config's and the field's).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from .levels import WorldSettings, uniform_field

if TYPE_CHECKING:
    from .sim.world import WorldConfig


@dataclass(frozen=True)
class Setting:
    """One setting (see the module docstring).

    ``step``: what one press of a key of ``more`` adds, of ``less`` takes away; a key
    is a pygame key name (``"d"``, ``"="``, ``"[+]"`` the keypad's) after any of
    "shift+", "ctrl+", "alt+"; ``unit``: shown after the value; ``digits``: decimals shown (0: an
    integer setting); ``says``: the help lines of ``more`` and ``less`` (default "more
    <label>", "less <label>"); ``section``: the panel's "solver" rows, always shown, or
    its "world" rows, the physical parameters, shown when that section is open;
    ``uniform``: a face of the uniform field held by :class:`Uniform` (else the
    ``WorldConfig`` field of the same name); ``on_world``: held by the world itself
    (``World.<name>``, ``World.set_<name>``); ``needs``: another setting without which
    this one does nothing while it is 0 (the wind needs air drag); ``ladder``: the
    values its keys and its slider step through, in order (``step`` is then one rung
    of the slider); ``form``: how :meth:`show` writes the value (``"×{:g}"``)."""

    name: str
    label: str
    step: float
    more: tuple[str, ...]
    less: tuple[str, ...]
    unit: str = ""
    digits: int = 0
    says: tuple[str, str] | None = None
    section: str = "solver"
    uniform: bool = False
    needs: str | None = None
    on_world: bool = False
    ladder: tuple[float, ...] = ()
    form: str | None = None

    @cached_property
    def limits(self) -> tuple[float, float]:
        """``(lo, hi)``: the level schema's bounds of ``[world] <name>`` (of a vector's
        length for gravity)."""
        meta = WorldSettings.model_fields[self.name].metadata
        lo = max(m.ge for m in meta if getattr(m, "ge", None) is not None)
        hi = min(m.le for m in meta if getattr(m, "le", None) is not None)
        return lo, hi

    @property
    def integer(self) -> bool:
        return self.digits == 0

    def help(self, sign: int) -> str:
        """The help line of a key that moves the setting by ``sign`` steps."""
        if self.says is not None:
            return self.says[0 if sign > 0 else 1]
        fewer = "less" if not self.integer else "fewer"
        return f"{'more' if sign > 0 else fewer} {self.label}"

    def clip(self, value: float) -> int | float:
        """``value`` inside the limits, to the decimals shown (the value a slider
        dragged to is the one it shows, and steps of a key add no round-off: 0.15, not
        0.15000000000000002), an int for an integer setting (NaN: the low end)."""
        lo, hi = self.limits
        v = lo if value != value else min(max(float(value), lo), hi)
        return int(round(v)) if self.integer else round(v, self.digits)

    def problem(self, value) -> str | None:
        """Why ``value`` cannot be this setting's (a replay's check), or None."""
        lo, hi = self.limits
        ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
              and math.isfinite(value) and lo <= value <= hi
              and (not self.integer or float(value).is_integer()))
        if ok:
            return None
        kind = "an integer" if self.integer else "a number"
        return f"'{self.name}' takes {kind} in {lo:g}..{hi:g}"

    def show(self, value: float) -> str:
        """``"12"``, ``"0.30 1/s"``, ``"×3"``: the value as the panel and messages show
        it."""
        text = self.form.format(value) if self.form else f"{value:.{self.digits}f}"
        return f"{text} {self.unit}" if self.unit else text

    def stepped(self, value: float, sign: int) -> float:
        """The value one press of a key of ``more`` (``sign`` > 0) or ``less`` makes of
        ``value``: the next rung of the ladder up or down (from between two rungs, the
        nearer one that way; past the ends, the end), else ``value +- step``."""
        if not self.ladder:
            return value + sign * self.step
        if sign > 0:
            return next((r for r in self.ladder if r > value), self.ladder[-1])
        return next((r for r in reversed(self.ladder) if r < value), self.ladder[0])

    def rung(self, value: float) -> int:
        """The index of the ladder's rung nearest ``value`` (on a log scale above 0):
        where the panel's slider stands."""
        def far(r: float) -> float:
            if r == value:
                return -1.0
            return math.inf if r <= 0 or value <= 0 else abs(math.log(r / value))
        return min(range(len(self.ladder)), key=lambda k: far(self.ladder[k]))


@dataclass(frozen=True)
class Uniform:
    """The world's uniform field as the settings drive it: the level's ``own`` gravity
    (m/s^2, whose direction is kept), its ``gravity`` strength (m/s^2) and the ``wind``
    (m/s). ``WorldConfig.gravity`` is :meth:`vector` of the config's drag."""

    own: tuple[float, float] = (0.0, -9.81)
    gravity: float = 9.81
    wind: float = 0.0

    @classmethod
    def of(cls, own, wind: float = 0.0) -> Uniform:
        """The field of a level whose gravity is ``own`` and wind ``wind``, as it starts."""
        gx, gy = float(own[0]), float(own[1])
        return cls((gx, gy), math.hypot(gx, gy), float(wind))

    @classmethod
    def of_level(cls, world: WorldSettings) -> Uniform:
        """The field of a level's ``[world]`` table."""
        return cls.of(world.gravity, world.wind)

    def vector(self, drag: float) -> tuple[float, float]:
        """``WorldConfig.gravity`` with the air ``drag`` (1/s): the gravity along the
        level's direction plus the wind's ``drag * wind`` along +x."""
        return uniform_field(self.own, self.gravity, self.wind, drag)


def value(config: WorldConfig, uniform: Uniform, name: str) -> float:
    """The setting ``name``'s value in a world of ``config`` and ``uniform`` (a row held
    by the world itself: ``ValueError``, :func:`read` it)."""
    if SETTINGS[name].on_world:
        raise ValueError(f"{name} is held by the world, not its config: settings.read")
    return getattr(uniform if SETTINGS[name].uniform else config, name)


def apply(config: WorldConfig, uniform: Uniform, name: str,
          new: float) -> tuple[WorldConfig, Uniform]:
    """``(config, uniform)`` with the setting ``name`` at ``new`` (already inside its
    limits): the config's field, or the uniform field's face, and the config's gravity
    made again from them (a new drag moves the wind's share). A row held by the world
    leaves both as they are (:func:`put` sets it)."""
    if SETTINGS[name].on_world:
        return config, uniform
    if SETTINGS[name].uniform:
        uniform = dataclasses.replace(uniform, **{name: new})
    else:
        config = dataclasses.replace(config, **{name: new})
    gravity = uniform.vector(config.drag)
    if tuple(config.gravity) != gravity:
        config = dataclasses.replace(config, gravity=gravity)
    return config, uniform


def read(world, uniform: Uniform, name: str) -> float:
    """The setting ``name``'s value in ``world`` (whose uniform field is ``uniform``)."""
    if SETTINGS[name].on_world:
        return getattr(world, name)
    return value(world.config, uniform, name)


def put(world, uniform: Uniform, name: str, new: float) -> Uniform:
    """Set ``name`` to ``new`` (already inside its limits) on ``world``; returns the
    uniform field's settings after it. A world that refuses (``ValueError``: link
    softness under Lagrange multipliers) is left as it was."""
    if SETTINGS[name].on_world:
        getattr(world, f"set_{name}")(new)
        return uniform
    config, uniform = apply(world.config, uniform, name, new)
    world.configure(config)
    return uniform


#: The link softness's keys and slider: log steps, 0 (rigid) and 1 (as built) among them.
SOFTNESS_LADDER = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)

#: Every setting, in the panel's order (each section's rows in this order).
SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("substeps", "substeps", 1, ("shift+=",), ("shift+-",)),
    Setting("iterations", "constraint iterations", 1, ("=", "[+]"), ("-", "[-]")),
    Setting("gravity", "gravity", 0.5, ("y",), ("shift+y",), unit="m/s²", digits=2,
            says=("more gravity (|g|, along the level's own direction)", "less gravity"),
            section="world", uniform=True),
    Setting("wind", "wind", 1.0, ("w",), ("shift+w",), unit="m/s", digits=1,
            says=("wind towards +x (right), 1 m/s a press; it acts through air drag",
                  "wind towards -x (left)"), section="world", uniform=True, needs="drag"),
    Setting("drag", "air drag", 0.05, ("d",), ("shift+d",), unit="1/s", digits=2,
            section="world"),
    Setting("restitution", "bounce", 0.05, ("o",), ("shift+o",), digits=2,
            says=("more bounce: the restitution of walls and shapes without their own",
                  "less bounce"), section="world"),
    Setting("friction", "friction", 0.05, ("k",), ("shift+k",), digits=2,
            says=("more friction: walls and shapes without their own", "less friction"),
            section="world"),
    Setting("link_softness", "link softness", 1.0, ("z",), ("shift+z",), digits=2,
            says=("softer soft links: their own compliance ×0, 0.1, 0.3, 1, 3, 10, 30, "
                  "100 (rigid links stay rigid)", "stiffer links (×0: every link rigid)"),
            section="world", on_world=True, ladder=SOFTNESS_LADDER, form="×{:g}"),
)}
