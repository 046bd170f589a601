"""Which velocity the window shows: the HUD's kinetic energy, the graphs' speeds and the
phase portrait all read the world's ``v``, and what that ``v`` is depends on the
integrator and on how the links are solved.

- The position Verlet family (``verlet``, ``tcv``, ``tcv_corrected``) keeps no velocity:
  ``v`` is estimated from the last three positions, and a body held still reads 0.
- Every other integrator carries its own ``v``. Under XPBD the links move the positions
  after the integrator's step and the correction is folded into ``v`` (``dv = dx/h``,
  ``h`` the substep), so a body a link holds still (a bob hanging on a rod) reads
  ``k g h``, not 0: ``k = 1`` for explicit Euler, 1/2 for velocity Verlet, leapfrog,
  RK4 and Forest-Ruth, 0 for symplectic Euler (measured: ``tests/test_velocity.py``).
  Leapfrog here is kick-drift-kick: its ``v`` is at the end of the step, not half a
  step behind.
- Under Lagrange multipliers or RATTLE / SHAKE the links' forces are inside the step
  and ``v`` is the constrained velocity itself (a bob held still reads 0), as it is
  for a ball resting on a floor or a shape (the contacts' velocity pass sets it).

No pygame here: the text is tested headless.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..sim.integrators import Integrator, get_integrator
from ..sim.particles import State


@functools.cache
def held_still_factor(integrator: str | Integrator) -> float:
    """``k``: a body a link holds still under a pull ``a`` reads ``|v| = k a h`` after a
    step of ``h`` with the projection folded in (``dv = dx/h``): ``k = c_v - c_x`` for a
    step from rest that gives ``v = c_v a h`` and ``x = c_x a h^2``, whatever the
    velocity it starts with. 0 for the position-based family, whose ``v`` comes from the
    positions. Found by one step of the integrator itself on a bare state (numpy only,
    nothing compiled)."""
    integ = get_integrator(integrator)
    if integ.position_based:
        return 0.0
    s = State.from_xv(np.zeros((1, 2)), np.zeros((1, 2)))
    pull = np.array([[0.0, -1.0]])
    integ.start(s, 1.0, lambda x, v: pull)
    integ.step(s, 1.0, lambda x, v: pull)
    k = float(-s.v[0, 1]) - float(-s.x[0, 1])
    return round(k, 12) + 0.0


def _factor_text(k: float) -> str:
    return {1.0: "g h", 0.5: "g h/2"}.get(k, f"{k:g} g h")


def _speed(v: float) -> str:
    return f"{v * 1e3:.3g} mm/s" if v < 1.0 else f"{v:.3g} m/s"


def velocity_line(world) -> str:
    """The full HUD's line on which velocity is shown (``"velocity    ..."``, two lines
    at most in its column): from the positions, or the integrator's own; and, where it
    matters (links under XPBD and an integrator with its own ``v``), what a body a link
    holds still reads instead of 0, for this world's gravity and last substep."""
    integ = world.integrator
    if integ.position_based:
        return "velocity    from the last 3 positions · held still: 0"
    folded = world.config.constraint_method == "xpbd" and len(world.constraints) > 0
    if not folded:
        return "velocity    the integrator's own, at the step's end"
    k = held_still_factor(integ)
    head = "velocity    the integrator's own, links' fix folded in · held still on a link: "
    if k == 0:
        return head + "0"
    g = math.hypot(*world.config.gravity)
    h = float(world.particles.h_prev or 0.0)
    if g > 0 and h > 0:
        return head + f"{_speed(k * g * h)} ({_factor_text(k)})"
    return head + _factor_text(k).replace("g", "a") + " (a: its pull)"
