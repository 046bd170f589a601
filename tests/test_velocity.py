"""The window says which velocity it shows (issue 34): the HUD's K, the graphs and the
phase portrait read the world's ``v``, and under XPBD links an integrator that carries
its own ``v`` reports a bob hanging still on a rod as moving at ``k g h`` (velocity
Verlet, leapfrog, RK4, Forest-Ruth: ``g h/2``; explicit Euler: ``g h``; symplectic
Euler: 0), while the position Verlet family reads 0 from positions. The full HUD (V)
now says so, with the number a bob held still shows; before, nothing did.

Measured here (a 1 kg bob on a 1 m rod, hanging still, 2 s, 1/60 s steps): 0.0818 m/s
for velocity Verlet at one substep, 8.18 mm/s at ten; explicit Euler twice that; 0 for
symplectic Euler and the position Verlet family; 0 for all under RATTLE and Lagrange
multipliers, and 0 for a ball resting on a floor (the contacts' velocity pass).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pygame
import pytest

from sandbox import levels as L
from sandbox.app.hud import fit_line
from sandbox.app.velocity import held_still_factor, velocity_line
from sandbox.sim.integrators import INTEGRATORS

G = 9.81
STILL = """
name = "A bob held still"
description = "A bob hangs still on a rigid rod."
[world]
integrator = "{integrator}"
timestep = "fixed"
h = 0.016666666666666666
substeps = {substeps}
iterations = 4
constraint_method = "{method}"
[view]
center = [0.0, 0.5]
width = 3.0
[[bodies]]
type = "pendulum"
pivot = [0.0, 1.0]
length = 1.0
angle = 0.0
mass = 1.0
radius = 0.05
"""


def still_world(integrator: str, method: str = "xpbd", substeps: int = 1):
    level = L.parse_level(STILL.format(integrator=integrator, method=method,
                                       substeps=substeps))
    world = L.build_world(level)
    policy = L.make_policy_for(level)
    for _ in range(120):                                  # 2 s
        for h in policy.plan(1 / 60):
            world.step(h)
    return world


def bob_speed(world) -> float:
    p = world.particles
    k = int(np.argmax(p.inv_mass))
    return float(np.hypot(*p.v[k]))


@pytest.mark.parametrize("name", list(INTEGRATORS))
@pytest.mark.parametrize("substeps", [1, 10])
def test_a_bob_held_still_reads_what_the_factor_says(name, substeps):
    world = still_world(name, substeps=substeps)
    h = 1 / 60 / substeps
    assert abs(world.particles.x[1, 1]) < 1e-9             # it did hang still
    assert bob_speed(world) == pytest.approx(held_still_factor(name) * G * h, abs=1e-9)


def test_the_factors_are_the_integrators_own():
    factors = {n: held_still_factor(n) for n in INTEGRATORS}
    assert factors == {"euler": 1.0, "symplectic_euler": 0.0, "velocity_verlet": 0.5,
                       "leapfrog": 0.5, "verlet": 0.0, "tcv": 0.0, "tcv_corrected": 0.0,
                       "rk4": 0.5, "forest_ruth": 0.5}


@pytest.mark.parametrize("method", ["rattle", "lagrange"])
def test_links_inside_the_step_leave_a_bob_held_still_at_rest(method):
    for name in INTEGRATORS:
        world = still_world(name, method)
        assert bob_speed(world) < 1e-9, name
        said = velocity_line(world)
        assert "mm/s" not in said and ("at the step's end" in said or "held still: 0" in said)


def test_the_line_is_short_and_its_number_is_the_bobs():
    for name in INTEGRATORS:
        world = still_world(name, substeps=10)
        said = velocity_line(world)
        lines = fit_line(said, 54)                          # a column of the full HUD
        assert len(lines) <= 2, lines
        m = re.search(r"held still on a link: ([\d.]+) mm/s", said)
        if held_still_factor(name) > 0:
            assert m, said
            assert float(m.group(1)) == pytest.approx(bob_speed(world) * 1e3, rel=5e-3)
        else:
            assert m is None and said.endswith(": 0"), said


# --------------------------------------------------------------------------- the window

def hud_text(app) -> str:
    return " ".join(t if isinstance(t, str) else t[0] for col in app.hud_shown() for t in col)


def test_the_full_hud_says_which_velocity_it_shows(tmp_path):
    """V: the full HUD reads "velocity    the integrator's own, links' fix folded in ·
    held still on a link: 8.18 mm/s (g h/2)" on a bob that a rod holds still under
    velocity Verlet, and the bob's K and v are exactly that; key 5 (position Verlet):
    "from the last 3 positions · held still: 0"; M (Lagrange multipliers): "at the
    step's end"."""
    import events as ev

    path = tmp_path / "still.toml"
    path.write_text(STILL.format(integrator="velocity_verlet", method="xpbd", substeps=10))
    app = ev.window_app(str(path), tmp_path, (1280, 800))
    for _ in range(30):
        app.frame(1 / 60)
    assert "velocity" not in hud_text(app)                 # the first screen stays short
    ev.press(pygame.K_v)
    for _ in range(30):
        app.frame(1 / 60)
    text = hud_text(app)
    m = re.search(r"held still on a link: ([\d.]+) mm/s \(g h/2\)", text)
    assert m, text
    speed = bob_speed(app.world)
    assert float(m.group(1)) == pytest.approx(speed * 1e3, rel=5e-3)
    assert speed == pytest.approx(0.5 * G / 600, rel=1e-6)
    assert app.world.energy()["kinetic"] == pytest.approx(0.5 * speed ** 2, rel=1e-6)
    ev.press(pygame.K_5)                                   # position Verlet
    for _ in range(30):
        app.frame(1 / 60)
    assert app.world.integrator.name == "verlet"
    assert "velocity    from the last 3 positions · held still: 0" in hud_text(app)
    assert bob_speed(app.world) < 1e-9
    ev.press(pygame.K_3)                                   # velocity Verlet again
    ev.press(pygame.K_m)                                   # Lagrange multipliers
    for _ in range(30):
        app.frame(1 / 60)
    assert app.world.config.constraint_method == "lagrange"
    assert "velocity    the integrator's own, at the step's end" in hud_text(app)
    assert bob_speed(app.world) < 1e-9
    assert math.isfinite(app.world.energy()["total"]) and app._draw_error is None
