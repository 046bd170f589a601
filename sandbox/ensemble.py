"""Every integrator side by side, and the truth beside them.

An :class:`Ensemble` runs one world as many times as there are integrators, on the same
steps and the same mouse input, next to a reference: the same world stepped by a
fourth-order integrator at a step ``FINE`` (4) times smaller. Each member reports its
energy drift and its distance from the reference; one that blows up stops and says so,
the others go on::

    ens = Ensemble(world)                   # every integrator of INTEGRATORS
    for h in plan:
        ens.step(h)
    for row in ens.rows():                  # name, label, order, drift, error, stopped
        print(row.label, row.error)

Halve the step and each member's error against the reference falls by 2, 4 or 16, its
order: ``tests/test_ensemble.py`` checks that on a spring, as the lab's convergence
experiment does offline. The reference's own error is ``FINE^4`` times smaller than a
fourth-order member's at the same step (256), so it is the truth for every member down to
steps far below a window's.

The reference is only as true as the model: where links are solved by projection
(XPBD) the reference projects too, at its finer step, so what a member's error shows
there is how far it is from the motion its own solver converges to.

The members are copies of the world (``copy.deepcopy``); the ensemble steps them on the
numpy references or the compiled kernels alike. It imports no pygame: the window draws
it, a script can print it.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .sim.integrators import INTEGRATORS
from .sim.world import SimulationDiverged, World

#: The reference's step is the members' over this.
FINE = 4
#: The reference's integrator: fourth order, symplectic.
REFERENCE = "forest_ruth"
#: A member whose total energy moved by more than this times the level's energy scale
#: (:func:`energy_scale`) has blown up: it stops.
BLOWUP_FACTOR = 100.0
#: The energy scale counts every movable kilogram at this speed (m/s), more than a
#: mouse gives a body.
BLOWUP_SPEED = 10.0


def energy_scale(world: World) -> float:
    """The level's energy scale (J): ``|E0| + max(KE, M v^2 / 2) + 1`` with every movable
    kilogram ``M`` at ``BLOWUP_SPEED``. A jump of the total energy beyond
    ``BLOWUP_FACTOR`` times it cannot come from the level or the mouse."""
    e = world.energy()
    movable = world.particles.inv_mass > 0
    mass = float(np.sum(world.particles.mass[movable]))
    return abs(e["total"]) + max(e["kinetic"], 0.5 * mass * BLOWUP_SPEED ** 2) + 1.0


@dataclass
class Member:
    """One integrator's copy of the world. ``stopped``: why it stopped (None: running),
    at simulated time ``t_stop``."""

    name: str
    world: World
    e0: float
    stopped: str | None = None
    t_stop: float = math.nan


@dataclass(frozen=True)
class Row:
    """What a member shows: its integrator's ``name``, ``label`` and ``order`` (its order
    on changing steps where ``varying``), its energy ``drift`` (J, since the start), its
    ``error`` against the reference (m, the root mean square distance of the movable
    particles; NaN without a reference) and why it ``stopped`` (None: running)."""

    name: str
    label: str
    order: int
    drift: float
    error: float
    stopped: str | None


class Ensemble:
    """``world`` run by each integrator of ``names`` (default: all of them) on the same
    steps and input, with a reference unless ``reference`` is False. ``varying``: the
    steps change from frame to frame (the rows then give each integrator's order on
    changing steps). The world itself is not touched: the members are copies."""

    def __init__(self, world: World, names=None, reference: bool = True,
                 varying: bool = False) -> None:
        self.names = list(names or INTEGRATORS)
        unknown = [n for n in self.names if n not in INTEGRATORS]
        if unknown:
            raise ValueError(f"unknown integrator(s) {', '.join(unknown)}; valid: "
                             f"{', '.join(INTEGRATORS)}")
        self.varying = varying
        self.scale = energy_scale(world)
        self.members = [self._copy(world, n) for n in self.names]
        self.reference: Member | None = None
        if reference:
            ref = copy.deepcopy(world)
            ref.configure(dataclasses.replace(
                ref.config, integrator=REFERENCE, substeps=ref.config.substeps * FINE))
            self.reference = Member(REFERENCE, ref, ref.energy()["total"])

    @staticmethod
    def _copy(world: World, name: str) -> Member:
        w = copy.deepcopy(world)
        if w.integrator.name != name:
            w.set_integrator(name)
        return Member(name, w, w.energy()["total"])

    def live(self) -> list[Member]:
        """The members still running, and the reference while it runs."""
        out = [m for m in self.members if m.stopped is None]
        if self.reference is not None and self.reference.stopped is None:
            out.append(self.reference)
        return out

    # --- stepping ------------------------------------------------------------------------

    def step(self, h: float) -> None:
        """One step of ``h`` s for every running member and the reference."""
        for m in self.live():
            try:
                with np.errstate(all="ignore"):
                    m.world.step(h)
            except SimulationDiverged as e:
                self._stop(m, e.reason)
                continue
            except (ValueError, ArithmeticError) as e:     # never a traceback from a cell
                self._stop(m, f"{type(e).__name__}: {e}")
                continue
            jump = m.world.energy()["total"] - m.e0
            if not jump <= BLOWUP_FACTOR * self.scale:      # NaN too
                self._stop(m, f"energy jumped by {jump:.3g} J")

    @staticmethod
    def _stop(m: Member, reason: str) -> None:
        m.stopped, m.t_stop = reason, m.world.t

    # --- the same input for all ------------------------------------------------------------

    def grab(self, k: int, target=None, radius: float = 0.0) -> None:
        for m in self.live():
            m.world.grab(k, target, radius)

    def drag_to(self, target) -> None:
        for m in self.live():
            if m.world.mouse is not None:
                m.world.drag_to(target)

    def release(self) -> None:
        for m in self.live():
            m.world.release()

    def toggle_pin(self, k: int) -> None:
        for m in self.live():
            m.world.toggle_pin(k)

    def cut(self, a, b) -> None:
        for m in self.live():
            m.world.cut(a, b)

    # --- what it shows ---------------------------------------------------------------------

    def error(self, m: Member) -> float:
        """``m``'s distance from the reference (m): the root mean square over the movable
        particles of their distance; NaN without a reference or after either stopped."""
        ref = self.reference
        if ref is None or ref.stopped is not None or m.stopped is not None:
            return math.nan
        movable = m.world.particles.inv_mass > 0
        if not movable.any():
            return 0.0
        d = m.world.particles.x[movable] - ref.world.particles.x[movable]
        return float(np.sqrt(np.mean(np.einsum("ij,ij->i", d, d))))

    def rows(self) -> list[Row]:
        """One :class:`Row` a member, in ``names``' order."""
        out = []
        for m in self.members:
            integ = INTEGRATORS[m.name]
            order = integ.order_variable if self.varying else integ.order
            drift = (m.world.energy()["total"] - m.e0) if m.stopped is None else math.nan
            out.append(Row(m.name, integ.label, order, drift, self.error(m), m.stopped))
        return out
