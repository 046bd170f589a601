"""Verlet Sandbox: a 2D particle engine to build games on, and a sandbox that shows why
integrators differ.

This page is the engine's public API: every name below imports from ``sandbox`` and
keeps its meaning between versions (the package's other modules may change). A rope in
a few lines::

    import sandbox

    world = sandbox.World(sandbox.WorldConfig(iterations=20))   # SI units, y up
    rope = sandbox.build_rope(world, start=(0, 2), end=(3, 2), segments=30)
    for frame in range(120):
        world.step(1 / 60)                         # one frame of 1/60 s
    print(world.particles.x[rope.particles[-1]])   # the free end, in metres

**The world.** `World` holds particles, their links, springs and static shapes;
`WorldConfig` (frozen) holds gravity, the integrator, the solver's iterations and
substeps, air drag, bounds, friction and tearing. `World.step` raises
`SimulationDiverged` (leaving the state as it was) if the numbers blow up::

    config = sandbox.WorldConfig(gravity=(0, -9.81), integrator="velocity_verlet",
                                 substeps=4, bounds=(-5, 0, 5, 6), restitution=0.5)
    world = sandbox.World(config)
    ball = world.add_particles([[0.0, 3.0]], v=[[2.0, 0.0]], mass=0.5, radius=0.1)
    world.add_shape("circle", center=(1, 1), radius=0.5)
    world.grab(ball[0]); world.drag_to((2, 4)); world.release()   # the mouse spring

**Builders** append a body to a world and return a `Body` (its particle and link
indices): `build_rope`, `build_chain`, `build_bridge`, `build_cloth`, `build_soft_ring`,
`build_soft_blob`, `build_pendulum`, `build_double_pendulum`, `build_spring_pendulum`,
`build_spring_chain`, `build_cradle`, `build_balls`, `build_ball_block`,
`build_particles`, `build_links`, `build_orbit`, `build_nbody_disc`::

    cloth = sandbox.build_cloth(world, cols=30, rows=20, spacing=0.1, origin=(-1.5, 5),
                                pins="top_row")
    world.configure(dataclasses.replace(world.config, tear_ratio=1.2))  # links tear at +20 %

**Integrators and timesteps.** `INTEGRATORS` and `TIMESTEPS` are the registries by name
(`WorldConfig.integrator` takes a key of the first; each value is an `Integrator`);
`integrate` runs one integrator on any ``x'' = a(x, v)`` without a world and returns a
`Trajectory`::

    for name, integ in sandbox.INTEGRATORS.items():
        print(name, integ.order, integ.symplectic)
    policy = sandbox.TIMESTEPS["fixed"](h=1 / 120)    # an accumulator of real time
    for h in policy.plan(frame_seconds):
        world.step(h)
    tr = sandbox.integrate(lambda x, v: -x, [1.0], [0.0], [0.01] * 1000, "tcv_corrected")

**Levels** are the TOML files of the sandbox window (``levels/README.md`` has the
format): `level_names`, `find_level`, `load_level`, `build_world`::

    level = sandbox.load_level(sandbox.find_level("cloth"))   # or a path of your own
    world = sandbox.build_world(level)

**Compiled kernels.** The heavy loops are numba kernels, compiled once per machine (up
to a few minutes on two cores; numba's disk cache has them in under a second after
that). A game calls `start_background` before its loop: the worlds run the numpy
versions (the same numbers, slower) while a child process compiles, then switch between
two frames; ``status()`` is one line to show meanwhile, ``close()`` stops the compiler
when the game quits. `warm_up` compiles everything in the foreground instead::

    warm = sandbox.start_background()
    ...every frame: caption = warm.status()   # "fast physics ready" once compiled
    warm.close()

A world stepped without either compiles what it uses on its first step and says so
once on stderr.

**Drawing.** `DrawOptions` draws a world on a pygame surface of your own, in the
window's colours (``sandbox.draw``; needs pygame, and only it)::

    options = sandbox.DrawOptions(screen, scale=100)  # px a metre; origin mid-screen
    options.draw(world)
    k = world.nearest_movable(options.to_world(mouse_pos), radius=0.3)

Importing ``sandbox`` loads nothing else (``python -m sandbox --help`` and ``--version``
stay instant; a test checks that neither numpy nor pygame is loaded): each name loads
its module on first use. Runnable programs using all of this are in ``examples/``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: The one version number: pyproject.toml reads it from here (hatch's dynamic version).
__version__ = "0.2.0"

#: The scene builders of ``sandbox/sim/builders.py``, all public.
_BUILDERS = ("build_ball_block", "build_balls", "build_bridge", "build_chain",
             "build_cloth", "build_cradle", "build_double_pendulum", "build_links",
             "build_nbody_disc", "build_orbit", "build_particles", "build_pendulum",
             "build_rope", "build_soft_blob", "build_soft_ring", "build_spring_chain",
             "build_spring_pendulum")

#: Each public name and the module it loads from on first use.
_LAZY = {
    "World": ".sim.world", "WorldConfig": ".sim.world", "Body": ".sim.world",
    "SimulationDiverged": ".sim.world",
    **dict.fromkeys(_BUILDERS, ".sim.builders"),
    "INTEGRATORS": ".sim.integrators", "Integrator": ".sim.integrators",
    "Trajectory": ".sim.integrators", "integrate": ".sim.integrators",
    "TIMESTEPS": ".sim.timestep",
    "level_names": ".levels", "find_level": ".levels", "load_level": ".levels",
    "build_world": ".levels",
    "start_background": ".warmup", "warm_up": ".warmup",
    "DrawOptions": ".draw",
}

#: Exactly the public names (the keys of ``_LAZY``; a test keeps the two equal).
__all__ = [
    "Body", "DrawOptions", "INTEGRATORS", "Integrator", "SimulationDiverged",
    "TIMESTEPS", "Trajectory", "World", "WorldConfig", "build_ball_block",
    "build_balls", "build_bridge", "build_chain", "build_cloth", "build_cradle",
    "build_double_pendulum", "build_links", "build_nbody_disc", "build_orbit",
    "build_particles", "build_pendulum", "build_rope", "build_soft_blob",
    "build_soft_ring", "build_spring_chain", "build_spring_pendulum", "build_world",
    "find_level", "integrate", "level_names", "load_level", "start_background",
    "warm_up",
]

if TYPE_CHECKING:
    from .draw import DrawOptions
    from .levels import build_world, find_level, level_names, load_level
    from .sim.builders import (
        build_ball_block,
        build_balls,
        build_bridge,
        build_chain,
        build_cloth,
        build_cradle,
        build_double_pendulum,
        build_links,
        build_nbody_disc,
        build_orbit,
        build_particles,
        build_pendulum,
        build_rope,
        build_soft_blob,
        build_soft_ring,
        build_spring_chain,
        build_spring_pendulum,
    )
    from .sim.integrators import Integrator, Trajectory, integrate
    from .sim.timestep import TimestepPolicy
    from .sim.world import Body, SimulationDiverged, World, WorldConfig
    from .warmup import start_background, warm_up

# The two registries are plain dicts, so their documentation is written here (bare
# annotations bind nothing: the names still load on first use, through __getattr__).

INTEGRATORS: dict[str, Integrator]
"""Every integrator by name, in the window's hotkey order: ``euler``,
``symplectic_euler``, ``velocity_verlet``, ``leapfrog``, ``verlet``, ``tcv``,
``tcv_corrected``, ``rk4``, ``forest_ruth``. Each is an `Integrator` whose class
attributes say what it is: ``label``, ``order`` (global, at a fixed step),
``order_variable`` (when the step changes; 0: it does not converge), ``symplectic``.
`WorldConfig.integrator` and `integrate` take these names::

    >>> import sandbox
    >>> rk4 = sandbox.INTEGRATORS["rk4"]
    >>> rk4.order, rk4.symplectic
    (4, False)
    >>> [n for n, i in sandbox.INTEGRATORS.items() if i.order_variable == 0]
    ['verlet']
"""

TIMESTEPS: dict[str, type[TimestepPolicy]]
"""The timestep policies by name: how a frame's real time becomes steps. ``fixed``
(an accumulator of real time, steps of one ``h``, at most ``max_steps`` a frame),
``variable`` (the real frame time, clamped against stalls), ``random`` (seeded random
steps around ``h``) and ``replay`` (a recorded trace). A policy's ``plan(dt)`` returns
the steps for a frame that lasted ``dt`` seconds::

    >>> import sandbox
    >>> policy = sandbox.TIMESTEPS["fixed"](h=1 / 60)
    >>> steps = policy.plan(0.06)                 # a frame of 60 ms: 3.6 steps' worth
    >>> len(steps), round(policy.alpha, 3)        # 3 steps, 0.6 of one kept for the next
    (3, 0.6)
"""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
