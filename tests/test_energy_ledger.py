"""Where energy goes (World.track_energy): the integrator's own steps or the constraint
solver's corrections. Each test states the split theory predicts."""

from __future__ import annotations

import math

import pytest

from sandbox.sim.builders import build_cloth, build_pendulum, build_rope
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


VERLET_FAMILY = ("verlet", "tcv", "tcv_corrected")


def _ledger_run(integrator: str, build, frames: int = 600, steps=None, substeps=4,
                **config):
    w = World(WorldConfig(integrator=integrator, substeps=substeps, **config))
    build(w)
    steps = steps or [H] * frames
    w.start(steps[0])
    w.track_energy()
    e0 = w.energy()
    for h in steps:
        w.step(h)
    e1 = w.energy()
    return w, {k: e1[k] - e0[k] for k in e0}


@pytest.mark.parametrize("integrator", VERLET_FAMILY)
def test_a_bob_held_still_books_nothing_to_either_side(integrator):
    """A 0.9 kg bob hanging at rest on a rod: nothing moves, so the integrator and the
    solver each did nothing (round-off). Each step replays ``x - x_prev`` that the rod's
    last correction shaped: the free step moves the bob as if it had ``g h / 2``, which
    was booked +m g^2 h^2/8 a substep to the integrator (0.451 J in 10 s) and the
    opposite to the solver."""
    w, change = _ledger_run(integrator, lambda w: build_pendulum(
        w, pivot=(0.0, 0.0), length=1.0, angle=0.0, mass=0.9))
    assert change["total"] == pytest.approx(0.0, abs=1e-12)
    assert abs(w.ledger["integrator"]) < 1e-9
    assert abs(w.ledger["solver"]) < 1e-9


@pytest.mark.parametrize("integrator", VERLET_FAMILY)
def test_a_ball_resting_on_the_floor_books_nothing_to_either_side(integrator):
    def ball(w):
        w.add_particles([[0.0, 0.1]], mass=[0.9], radius=[0.1])
        w.add_shape("box", min=(-5.0, -1.0), max=(5.0, 0.0))

    w, change = _ledger_run(integrator, ball)
    assert change["total"] == pytest.approx(0.0, abs=1e-12)
    assert abs(w.ledger["integrator"]) < 1e-9
    assert abs(w.ledger["solver"]) < 1e-9


@pytest.mark.parametrize("integrator", VERLET_FAMILY)
def test_a_rigid_pendulum_loses_its_energy_to_the_solver_not_to_the_verlet_family(integrator):
    """As for velocity Verlet above: at a fixed step every member of the family steps
    constant gravity exactly (the parabola through its history), so a pendulum from
    50 degrees books its whole loss to the rod's projections. Before: +0.618 J to the
    integrator, -1.941 J to the solver, for a loss of 1.323 J."""
    w, change = _ledger_run(integrator, lambda w: build_pendulum(
        w, pivot=(0.0, 0.0), length=1.0, angle=math.radians(50), mass=0.9))
    assert change["total"] < -0.01
    assert w.ledger["solver"] == pytest.approx(change["total"], rel=1e-9)
    assert abs(w.ledger["integrator"]) < 1e-9 * abs(change["total"])


def test_the_integrators_own_error_is_still_the_integrators():
    """Free flight under steps that vary: TCV as published is only first order there
    (article 001's eq. 7), the corrected one exact for constant gravity. The ledger
    books the published one's drift to it, all of it, and nothing to the solver."""
    steps = [H * (1 + 0.4 * math.sin(0.7 * k)) for k in range(300)]

    def flight(w):
        w.add_particles([[0.0, 0.0]], v=[[3.0, 4.0]], mass=[1.0])

    for integrator, drifts in (("tcv", True), ("tcv_corrected", False)):
        w, change = _ledger_run(integrator, flight, steps=steps, substeps=1)
        assert w.ledger["solver"] == 0.0
        assert w.ledger["integrator"] == pytest.approx(change["total"], abs=1e-12)
        assert (abs(change["total"]) > 0.1) == drifts


@pytest.mark.parametrize("integrator", ("tcv_corrected", "velocity_verlet"))
def test_air_drag_has_its_own_line(integrator):
    """A ball falling for 10 s with drag 0.02/s: near its terminal speed (490 m/s) drag
    takes what gravity gives. The drag line is the force's work (``-c m v . dx``, the
    mean of a substep's two velocities: exact while v is constant, off by ~(c h)^2 of
    it otherwise), so the integrator, exact for this force to O(h^2) a step, is left
    with under a millionth of the change. Before, all of it was the integrator's."""
    def fall(w):
        w.add_particles([[0.0, 0.0]], mass=[1.0])

    w, change = _ledger_run(integrator, fall, drag=0.02)
    assert change["total"] < -100.0
    assert w.ledger["drag"] == pytest.approx(change["total"], rel=1e-6)
    assert abs(w.ledger["integrator"]) < 1e-6 * abs(change["total"])
    assert w.ledger["solver"] == 0.0


@pytest.mark.parametrize("integrator", ("tcv_corrected", "velocity_verlet"))
def test_what_compliant_links_store_has_its_own_line(integrator):
    """A soft rope (compliance 1e-3 m/N) swinging down: its links store C^2 / (2 alpha),
    which only their solve changes. That is the "links" line, exactly; the integrator
    (exact free fall between projections) keeps round-off. Before: +8.94 J to the
    integrator, -13.29 to the solver."""
    w, change = _ledger_run(integrator, lambda w: build_rope(
        w, (0.0, 0.0), (1.0, 0.0), segments=10, mass=0.1, compliance=1e-3))
    stored = w.constraints.potential(w.particles.x)
    assert stored > 0.1
    assert w.ledger["links"] == pytest.approx(stored, rel=1e-12)
    assert abs(w.ledger["integrator"]) < 1e-9 * abs(change["total"])
    assert sum(w.ledger.values()) == pytest.approx(change["total"], rel=1e-12)
