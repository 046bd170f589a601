"""What the window's graph can plot (issue 37): one row per quantity, read by the graph,
its pickers, its keys and replays.

A :class:`Quantity` is every face of one thing to plot: its ``name`` (replay files and
the key's cycle), a short ``label`` (the picker's option), the ``text`` of its axis, a
``unit``, the curves it has (its ``scope``), whether a log scale suits it, its value in
one curve's world this frame and why it does not apply here (None: it does).

Curves (:class:`Source`): ``world``; ``ghost`` while the ghost runs; while every
integrator runs side by side (A), each integrator by its name and ``truth``, the
ensemble's reference. A quantity's scope says which of them it has:

    worlds     every curve above (energies, a particle's motion, strain)
    world      the world alone (the energy ledger: only the world keeps one)
    members    the integrators of the ensemble (their error against the truth)
    frame      one curve, ``frame``, the same whatever world (the frame's dt)

A graph of ``y`` against ``x`` has the curves both have (a frame quantity goes with any).

A link's stretch is ``(L - rest) / rest`` (a rope's is 0 while it is slack).

Sampling reads only what the chosen quantities need, once a frame, vectorised: a world's
energies (the window's own sample of the world is handed in), the particle's row, the
links' strain (the view's compiled kernel: 0.2 ms for the 158,802 links of cloth_200).

No pygame here: the window draws, tests compute.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

#: The horizontal axis' first option: simulated time (s).
TIME = "time"

#: The phase portrait, by coordinate: ``(y, x)`` = (velocity, position) of the particle.
PHASE = {0: ("vx", "x"), 1: ("vy", "y")}


@dataclass(frozen=True)
class Source:
    """One curve: its ``key`` (``world``, ``ghost``, an integrator's name, ``truth`` or
    ``frame``), the world it is read from (None for ``frame``) and the ensemble's member
    (None unless it is one)."""

    key: str
    world: Any
    member: Any = None


class Frame:
    """What one frame's sample reads: the session's ``world``, its ``ghost`` and
    ``ensemble`` (None when off), the followed ``particle`` (None: nobody chosen), the
    frame's real ``dt`` (s). ``energy``: the world's ``energy()`` of this frame if the
    caller has it (the window samples it anyway); every other world's is made once."""

    def __init__(self, world, ghost=None, ensemble=None, particle: int | None = None,
                 dt: float = math.nan, energy: dict | None = None) -> None:
        self.world, self.ghost, self.ensemble = world, ghost, ensemble
        self.particle = particle
        self.dt = dt
        self._energy: dict[int, dict] = {}
        if energy is not None:
            self._energy[id(world)] = energy
        self._strain: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def energy(self, w) -> dict:
        e = self._energy.get(id(w))
        if e is None:
            e = self._energy[id(w)] = w.energy()
        return e

    def strain(self, w) -> tuple[np.ndarray, np.ndarray]:
        """``(L - rest) / rest`` of every link (ropes: 0 when slack; the view's compiled
        kernel) and of every spring of rest length > 0, float64."""
        s = self._strain.get(id(w))
        if s is None:
            s = self._strain[id(w)] = (w.view().strain(), spring_strain(w))
        return s

    def sources(self, scope: str) -> list[Source]:
        if scope == "frame":
            return [Source("frame", None)]
        if scope == "world":
            return [Source("world", self.world)]
        ens = self.ensemble
        members = [Source(m.name, m.world, m) for m in ens.members
                   if m.stopped is None] if ens is not None else []
        if scope == "members":
            return members
        out = [Source("world", self.world)]
        if self.ghost is not None:
            out.append(Source("ghost", self.ghost))
        out += members
        ref = ens.reference if ens is not None else None
        if ref is not None and ref.stopped is None:
            out.append(Source("truth", ref.world, ref))
        return out


def spring_strain(w) -> np.ndarray:
    """``(L - rest) / rest`` of the world's springs of rest length > 0."""
    s = w.springs
    if not len(s):
        return np.zeros(0)
    keep = s.rest > 0
    x = w.particles.x
    d = np.asarray(x[s.j[keep]], np.float64) - np.asarray(x[s.i[keep]], np.float64)
    with np.errstate(all="ignore"):
        return (np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1]) - s.rest[keep]) / s.rest[keep]


@dataclass(frozen=True)
class Quantity:
    """One row of :data:`QUANTITIES` (see the module docstring). ``text``: the axis'
    words, ``{particle}`` standing for the followed particle; ``relative``: plotted as
    the change since its curve's first sample of the segment (the energy graph's drift);
    ``log``: a log scale of ``|value|`` suits it (errors and drifts span decades)."""

    name: str
    label: str
    text: str
    unit: str
    value: Callable[[Source, Frame], float]
    scope: str = "worlds"
    log: bool = False
    relative: bool = False
    needs: Callable[[Frame], str | None] = field(default=lambda fr: None)

    def problem(self, fr: Frame) -> str | None:
        """Why this quantity cannot be plotted now, or None."""
        return self.needs(fr)

    def words(self, particle: int | None) -> str:
        """The axis' words without the unit: ``"vx of particle 3"``; ``"vx of a
        particle"`` while none is followed (the plot says to click one)."""
        if particle is None:
            return self.text.replace("particle {particle}", "a particle")
        return self.text.format(particle=particle)

    def axis(self, particle: int | None) -> str:
        """The axis' words and unit: ``"vx of particle 3 (m/s)"``."""
        text = self.words(particle)
        return f"{text} ({self.unit})" if self.unit else text


# --- what each quantity needs ----------------------------------------------------------

def _particle(fr: Frame) -> str | None:
    k = fr.particle
    if k is None or not 0 <= k < fr.world.n:
        return "click a particle to follow it"
    return None


def _links(fr: Frame) -> str | None:
    w = fr.world
    return None if len(w.constraints) or len(w.springs) else "no links or springs here"


def _rigid(fr: Frame) -> str | None:
    c = fr.world.constraints
    return None if len(c) and bool(np.any(c.compliance == 0)) else "no rigid links here"


def _ledger(fr: Frame) -> str | None:
    if fr.world.ledger is None:
        return "the energy split is not measured here (the HUD says why)"
    return None


def _truth(fr: Frame) -> str | None:
    ens = fr.ensemble
    if ens is None:
        return "needs every integrator side by side (A)"
    if ens.reference is None or ens.reference.stopped is not None:
        return "the truth has stopped"
    return None


# --- values ------------------------------------------------------------------------------

def _energy(part: str) -> Callable[[Source, Frame], float]:
    return lambda src, fr: float(fr.energy(src.world)[part])


def _ledger_part(part: str) -> Callable[[Source, Frame], float]:
    def value(src: Source, fr: Frame) -> float:
        ledger = src.world.ledger
        return math.nan if ledger is None else float(ledger[part])
    return value


def _row(array: str, col: int | None) -> Callable[[Source, Frame], float]:
    """Particle ``fr.particle``'s x/v component ``col`` (None: the vector's length)."""
    def value(src: Source, fr: Frame) -> float:
        p, k = src.world.particles, fr.particle
        if k is None or not 0 <= k < p.n:
            return math.nan
        row = getattr(p, array)[k]
        return float(math.hypot(row[0], row[1]) if col is None else row[col])
    return value


def _max_strain(src: Source, fr: Frame) -> float:
    """max |strain| as the larger of max and -min: no |s| array (158,802 links)."""
    out = [max(float(s.max()), -float(s.min())) for s in fr.strain(src.world) if len(s)]
    return max(out) * 100.0 if out else math.nan


def _link_error(src: Source, fr: Frame) -> float:
    s, _ = fr.strain(src.world)
    compliance = src.world.constraints.compliance
    if compliance.any():                        # soft links stretch by design: not them
        s = s[compliance == 0]
    # einsum, not dot: BLAS threads beside the sweep's took 14 ms a frame on cloth_200
    return float(np.sqrt(np.einsum("i,i->", s, s) / len(s))) * 100.0 if len(s) else math.nan


def _truth_error(src: Source, fr: Frame) -> float:
    if fr.ensemble is None or src.member is None:
        return math.nan
    return fr.ensemble.error(src.member)


def _frame_dt(src: Source, fr: Frame) -> float:
    return fr.dt * 1e3


#: Every quantity, in the pickers' and the key's order.
QUANTITIES: dict[str, Quantity] = {q.name: q for q in (
    Quantity("kinetic", "kinetic E", "kinetic energy", "J", _energy("kinetic")),
    Quantity("potential", "potential E", "potential energy", "J", _energy("potential")),
    Quantity("total", "total E", "total energy", "J", _energy("total")),
    Quantity("drift", "E drift", "E - E0, since the marker", "J", _energy("total"),
             log=True, relative=True),
    Quantity("ledger_integrator", "E→integrator", "energy the integrator's steps gave",
             "J", _ledger_part("integrator"), scope="world", needs=_ledger),
    Quantity("ledger_solver", "E→solver", "energy the solver's corrections gave", "J",
             _ledger_part("solver"), scope="world", needs=_ledger),
    Quantity("ledger_drag", "E→drag", "energy the air drag gave", "J",
             _ledger_part("drag"), scope="world", needs=_ledger),
    Quantity("ledger_links", "E→soft links", "energy stored in soft links", "J",
             _ledger_part("links"), scope="world", needs=_ledger),
    Quantity("x", "x", "x of particle {particle}", "m", _row("x", 0), needs=_particle),
    Quantity("y", "y", "y of particle {particle}", "m", _row("x", 1), needs=_particle),
    Quantity("vx", "vx", "vx of particle {particle}", "m/s", _row("v", 0),
             needs=_particle),
    Quantity("vy", "vy", "vy of particle {particle}", "m/s", _row("v", 1),
             needs=_particle),
    Quantity("speed", "speed", "speed of particle {particle}", "m/s", _row("v", None),
             needs=_particle),
    Quantity("strain", "max strain", "largest |stretch| of a link or spring", "%",
             _max_strain, log=True, needs=_links),
    Quantity("link_error", "link error", "rigid links' RMS stretch", "%",
             _link_error, log=True, needs=_rigid),
    Quantity("truth_error", "truth error", "RMS distance from the truth", "m",
             _truth_error, scope="members", log=True, needs=_truth),
    Quantity("frame_dt", "frame dt", "the frame's real time", "ms", _frame_dt,
             scope="frame"),
)}

#: The horizontal axis' options: time first, then every quantity.
AXES: tuple[str, ...] = (TIME, *QUANTITIES)


@dataclass(frozen=True)
class Choice:
    """What the graph plots: ``y`` against ``x`` (:data:`TIME` or a quantity), on a log
    scale of ``|y|`` when ``log``. ``auto``: the phase portrait's coordinate follows the
    particle's motion (x or y, whichever moves more) until a person chooses."""

    y: str = PHASE[0][0]
    x: str = PHASE[0][1]
    log: bool = False
    auto: bool = True

    def phase_axis(self) -> int | None:
        """0 or 1 if this is the phase portrait of x or y, else None."""
        for axis, pair in PHASE.items():
            if (self.y, self.x) == pair:
                return axis
        return None

    def args(self) -> list:
        """The replay form: ``["plot", y, x, log]``."""
        return [self.y, self.x, int(self.log)]


#: The window's first graph: the phase portrait of x, its coordinate chosen by the motion.
DEFAULT = Choice()


def choose(choice: Choice, y: str | None = None, x: str | None = None,
           log: bool | None = None) -> Choice:
    """``choice`` with a new ``y`` (its log default with it), ``x`` or ``log``; a
    person's choice, so the coordinate no longer follows the motion. ValueError (one
    line, the valid names) for an unknown name."""
    if y is not None and y not in QUANTITIES:
        raise ValueError(f"unknown quantity {str(y)[:40]!r}; valid: {', '.join(QUANTITIES)}")
    if x is not None and x not in AXES:
        raise ValueError(f"unknown axis {str(x)[:40]!r}; valid: {', '.join(AXES)}")
    out = replace(choice, auto=False)
    if y is not None and y != choice.y:
        out = replace(out, y=y, log=QUANTITIES[y].log)
    if x is not None:
        out = replace(out, x=x)
    if log is not None:
        out = replace(out, log=bool(log))
    return out


def cycle(names, current: str, step: int, usable: Callable[[str], bool]) -> str:
    """The next name of ``names`` after ``current`` (``step`` +1 or -1) that is
    ``usable``; ``current`` itself if none is."""
    names = list(names)
    k = names.index(current) if current in names else (-1 if step > 0 else 0)
    for _ in names:
        k = (k + step) % len(names)
        if usable(names[k]):
            return names[k]
    return current


def problem(choice: Choice, fr: Frame) -> str | None:
    """Why the graph cannot plot ``choice`` now (the first reason), or None."""
    for name in (choice.y, choice.x):
        if name in QUANTITIES and (why := QUANTITIES[name].problem(fr)) is not None:
            return f"{QUANTITIES[name].label}: {why}"
    if not curves(choice, fr):
        return "these two have no curve in common"
    return None


def curves(choice: Choice, fr: Frame) -> list[Source]:
    """The curves both axes have (see the module docstring)."""
    scopes = [QUANTITIES[n].scope for n in (choice.y, choice.x) if n in QUANTITIES]
    scopes = [s for s in scopes if s != "frame"] or ["frame"]
    out = fr.sources(scopes[0])
    for s in scopes[1:]:
        keys = {src.key for src in fr.sources(s)}
        out = [src for src in out if src.key in keys]
    return out


def sample(choice: Choice, fr: Frame) -> list[tuple[str, float, float, float, int]]:
    """One frame of the graph: ``(curve, t, x, y, source)`` per curve, ``t`` the curve's
    world's time (s), ``x`` that time or the x quantity, ``source`` the identity of the
    world read (a new one, a ghost or an ensemble started again, breaks the curve).
    Nothing when the choice does not apply here."""
    if problem(choice, fr) is not None:
        return []
    yq = QUANTITIES[choice.y]
    xq = QUANTITIES.get(choice.x)
    out = []
    for src in curves(choice, fr):
        w = src.world if src.world is not None else fr.world
        t = float(w.t)
        out.append((src.key, t, t if xq is None else xq.value(src, fr),
                    yq.value(src, fr), id(w)))
    return out


def replay_problem(args: list) -> str | None:
    """Why ``args`` are no ``["plot", y, x, log]`` of a replay file, or None."""
    y, x, log = args
    if not isinstance(y, str) or y not in QUANTITIES:
        return f"a quantity of {', '.join(QUANTITIES)}, got {str(y)[:40]}"
    if not isinstance(x, str) or x not in AXES:
        return f"an axis of {', '.join(AXES)}, got {str(x)[:40]}"
    if log not in (0, 1) or isinstance(log, float):
        return f"log 0 or 1, got {str(log)[:40]}"
    return None
