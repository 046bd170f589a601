"""Where energy goes (World.track_energy): the integrator's own steps or the constraint
solver's corrections. Each test states the split theory predicts."""

from __future__ import annotations

import pytest

from sandbox.sim.builders import build_cloth, build_pendulum
from sandbox.sim.world import World, WorldConfig

H = 1 / 60


def test_free_fall_is_all_integrator_and_exact_for_tcv_corrected():
    """No constraints and no contacts: the solver never moves anything (0 J exactly);
    TCV (corrected) integrates constant gravity exactly, so its share is round-off."""
    w = World(WorldConfig(integrator="tcv_corrected"))
    w.add_particles([[0.0, 0.0], [1.0, 2.0]], v=[[3.0, 4.0], [0.0, 0.0]], mass=[1.0, 2.0])
    w.start(H)
    w.track_energy()
    e0 = w.energy()["total"]
    for _ in range(120):
        w.step(H)
    assert w.ledger["solver"] == 0.0
    assert w.ledger["integrator"] == pytest.approx(w.energy()["total"] - e0, abs=1e-12)
    assert abs(w.ledger["integrator"]) < 1e-9 * abs(e0)


def test_a_rigid_pendulum_loses_its_energy_to_the_solver_not_to_velocity_verlet():
    """Gravity plus one rigid link: between projections the motion is free fall, which
    velocity Verlet integrates exactly. So the integrator's share is round-off and all
    the loss (XPBD's inelastic projection: energy decays like (w h)^2 per period) is
    the solver's."""
    w = World(WorldConfig(integrator="velocity_verlet", iterations=1, substeps=1))
    build_pendulum(w, pivot=(0.0, 0.0), length=1.0, angle=1.0, mass=1.0)
    w.start(H)
    w.track_energy()
    e0 = w.energy()["total"]
    for _ in range(600):
        w.step(H)
    change = w.energy()["total"] - e0
    assert change < -0.01 * abs(e0)                       # it does lose energy
    assert w.ledger["solver"] == pytest.approx(change, rel=1e-9)
    assert abs(w.ledger["integrator"]) < 1e-9 * abs(change)


def test_explicit_euler_on_a_spring_is_all_integrator():
    """A mass on a spring, no constraints: explicit Euler multiplies the oscillator's
    energy by 1 + (w h)^2 each step; the ledger books all of that growth on the
    integrator and none on the solver."""
    w = World(WorldConfig(integrator="euler", gravity=(0.0, 0.0)))
    idx = w.add_particles([[0.0, 0.0], [1.0, 0.0]], pinned=[True, False])
    w.add_springs([int(idx[0])], [int(idx[1])], k=100.0, rest=[0.5])
    w.start(H)
    w.track_energy()
    e0 = w.energy()["total"]
    for _ in range(60):
        w.step(H)
    growth = w.energy()["total"] - e0
    assert growth > 0.5 * e0                               # (1 + (10/60)^2)^60 = 4.8
    assert w.ledger["solver"] == 0.0
    assert w.ledger["integrator"] == pytest.approx(growth, rel=1e-12)


def test_keeping_the_ledger_does_not_change_the_motion():
    def run(track: bool) -> str:
        w = World(WorldConfig(iterations=3, substeps=4))
        build_cloth(w, cols=8, rows=6, spacing=0.1, origin=(0.0, 0.0), pins="top_corners")
        w.start(H)
        w.track_energy(track)
        for _ in range(30):
            w.step(H)
        return w.state_hash()

    assert run(True) == run(False)
