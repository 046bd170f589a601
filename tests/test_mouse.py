"""The mouse spring (sim/mouse.py): a hand that pulls like Box2D's mouse joint.

Each test states the analytic answer: the spring is a damped oscillator of frequency
``HERTZ`` and damping ratio ``DAMPING_RATIO`` for the body's mass, its force is capped at
``MAX_WEIGHT`` times the body's weight, and a body keeps the velocity the hand gave it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sandbox.sim.builders import build_cloth, build_rope
from sandbox.sim.mouse import DAMPING_RATIO, HERTZ, MAX_WEIGHT, component
from sandbox.sim.world import World, WorldConfig

H = 1 / 60


def ball(gravity=(0.0, 0.0), substeps: int = 1, mass: float = 0.5,
         integrator: str = "tcv_corrected") -> World:
    w = World(WorldConfig(gravity=gravity, substeps=substeps, integrator=integrator))
    w.add_particles([[0.0, 0.0]], mass=mass, radius=0.1)
    w.start(H)
    return w


@pytest.mark.parametrize("integrator", ["tcv_corrected", "velocity_verlet", "rk4"])
def test_step_response_is_the_damped_oscillator_of_the_hand(integrator):
    """Target moved by d = 1 cm at t = 0 (force k d = M w^2 d below the cap): the ball's
    overshoot is exp(-zeta pi / sqrt(1 - zeta^2)) = 4.6 % at t_p = pi / (w sqrt(1 -
    zeta^2)) = 0.14 s. XPBD solves the spring implicitly (backward Euler), which adds a
    damping of order w h / 2 = 0.003 at h = 0.17 ms: the overshoot holds to 0.3 % of d."""
    w = ball(substeps=10, integrator=integrator)
    d = 0.01
    w.grab(0, [d, 0.0])
    xs, ts = [], []
    for _ in range(300):                               # 0.5 s in steps of h = 0.17 ms
        w.step(H / 10)
        xs.append(w.particles.x[0, 0])
        ts.append(w.t)
    xs = np.array(xs)
    zeta = DAMPING_RATIO
    omega = 2 * math.pi * HERTZ
    overshoot = math.exp(-zeta * math.pi / math.sqrt(1 - zeta * zeta))
    assert xs.max() / d - 1 == pytest.approx(overshoot, abs=0.003)
    t_peak = math.pi / (omega * math.sqrt(1 - zeta * zeta))
    assert ts[int(np.argmax(xs))] == pytest.approx(t_peak, abs=H / 10)
    assert xs[-1] == pytest.approx(d, abs=0.002 * d)   # settled: e^(-zeta w t) < 2e-3


def test_the_force_is_capped_at_max_weight_times_the_bodys_weight():
    """Target 10 m straight up: the spring saturates at F = MAX_WEIGHT m g, so the ball
    rises at a = (MAX_WEIGHT - 1) g and v(t) = a t exactly while saturated."""
    w = ball(gravity=(0.0, -9.81), substeps=10)
    w.grab(0, [0.0, 10.0])
    for _ in range(6):                                 # 0.1 s
        w.step(H)
        m = w.mouse
        assert np.linalg.norm(m.force(w.particles.h_prev)) == pytest.approx(
            m.max_force, rel=1e-9)
    assert m.max_force == pytest.approx(MAX_WEIGHT * 0.5 * 9.81)
    # v(t) = a t, plus the hand's a_hand h/2 that the Verlet start (eq. 2, which knows
    # gravity but not the hand, grabbed after the start) left out of the first substep.
    a = (MAX_WEIGHT - 1) * 9.81
    hs = H / 10
    assert w.particles.v[0, 1] == pytest.approx(a * 0.1 + MAX_WEIGHT * 9.81 * hs / 2,
                                                rel=1e-9)
    assert abs(w.particles.v[0, 0]) < 1e-12


def test_a_thrown_ball_keeps_the_velocity_of_the_hand():
    """The hand moves at 6 m/s for 1.5 s: the ball, capped at a = MAX_WEIGHT g, trails
    it for about 0.5 s (0.6 m behind when it first reaches 6 m/s, so it overshoots to
    close the gap); after that the spring, damped relative to the hand, decays like
    e^(-zeta w t) (1 % in 0.2 s). Released, the ball flies on at the hand's 6 m/s."""
    w = ball(gravity=(0.0, 0.0), substeps=4)
    w.grab(0)
    for f in range(90):
        w.drag_to([6.0 * H * (f + 1), 0.0])
        w.step(H)
    w.release()
    v = w.particles.v[0].copy()
    assert v[0] == pytest.approx(6.0, rel=0.02)
    for _ in range(30):
        w.step(H)
    assert w.particles.v[0] == pytest.approx(v, abs=1e-9)   # free flight, no gravity


def _drag_cloth(kinematic: bool) -> float:
    """Max link strain of a pinned cloth whose corner is dragged 4 m away in 1 s."""
    w = World(WorldConfig(iterations=4, substeps=4))
    build_cloth(w, cols=20, rows=15, spacing=0.1, origin=(-1.0, 1.0), pins="top_corners")
    w.start(H)
    for _ in range(60):
        w.step(H)
    k = int(np.argmin(w.particles.x[:, 1] + w.particles.x[:, 0]))    # a bottom corner
    x0 = w.particles.x[k].copy()
    if kinematic:
        w.toggle_pin(k)                                # the old hand: infinite mass
    else:
        w.grab(k, x0, radius=0.15)
    worst = 0.0
    for f in range(60):
        target = x0 + np.array([-3.2, -2.4]) * (f + 1) / 60
        if kinematic:
            w.particles.x[k] = target
            w.particles.x_prev[k] = target
        else:
            w.drag_to(target)
        w.step(H)
        worst = max(worst, float(np.abs(w.constraints.strain(w.particles.x)).max()))
    return worst


def test_dragging_a_cloth_away_does_not_tear_its_links_apart():
    """The same gesture with the old kinematic hand stretches the links several-fold;
    with the spring the stretch stays a fraction of that and of one rest length."""
    spring, pin = _drag_cloth(False), _drag_cloth(True)
    assert pin > 5.0                                   # measured: 8.9 (spring: 0.32)
    assert spring < 1.0 and spring < pin / 10


def test_the_hand_holds_a_patch_of_its_own_body_only():
    w = World(WorldConfig())
    cloth = build_cloth(w, cols=10, rows=10, spacing=0.1, origin=(0.0, 0.0),
                        pins="top_corners")
    rope = build_rope(w, (0.05, -0.02), (1.0, -0.5), segments=10)
    w.start(H)
    k = int(cloth.particles[55])
    w.grab(k, radius=0.15)
    held = set(w.mouse.idx.tolist())
    d = np.linalg.norm(w.particles.x - w.particles.x[k], axis=1)
    expect = {int(i) for i in cloth.particles if d[i] <= 0.15 and w.particles.inv_mass[i] > 0}
    assert held == expect and w.mouse.k == k and len(held) == 9     # a 3 x 3 patch
    assert not held & set(rope.particles.tolist())
    assert w.mouse.body_mass == pytest.approx(float(np.sum(
        w.particles.mass[cloth.particles][w.particles.inv_mass[cloth.particles] > 0])))


def test_a_pinned_particle_cannot_be_grabbed():
    w = World(WorldConfig())
    w.add_particles([[0.0, 0.0], [1.0, 0.0]], pinned=[True, False])
    with pytest.raises(ValueError, match="pinned"):
        w.grab(0)
    assert w.nearest_movable([0.1, 0.0], 2.0) == 1
    assert w.nearest_movable([0.1, 0.0], 0.5) is None


def test_component_follows_links_and_nothing_else():
    i = np.array([0, 1, 3, 5])
    j = np.array([1, 2, 4, 3])
    assert component(7, i, j, 0).tolist() == [0, 1, 2]
    assert component(7, i, j, 4).tolist() == [3, 4, 5]
    assert component(7, i, j, 6).tolist() == [6]
    assert component(3, np.zeros(0, int), np.zeros(0, int), 2).tolist() == [2]
