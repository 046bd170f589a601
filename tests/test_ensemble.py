"""Every integrator side by side and the truth beside them (sandbox/ensemble.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sandbox.ensemble import FINE, Ensemble
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.world import World, WorldConfig

K, M = 10.0, 1.0                          # N/m, kg: omega = sqrt(10) rad/s, period ~2 s
W = math.sqrt(K / M)


def spring_world() -> World:
    """A 1 kg particle on a 10 N/m spring to a pinned anchor, pulled 0.5 m and let go,
    no gravity: x(t) = 0.5 cos(w t) about the spring's rest length."""
    w = World(WorldConfig(gravity=(0.0, 0.0), substeps=1, iterations=0))
    idx = w.add_particles([[0.0, 0.0], [1.5, 0.0]], mass=[1.0, M], pinned=[True, False])
    w.add_springs([int(idx[0])], [int(idx[1])], k=K, rest=[1.0])
    return w


def errors_at(h: float, T: float = 0.75) -> tuple[dict, float]:
    ens = Ensemble(spring_world())
    ens.members[0].world.start(h)
    for m in ens.live():
        m.world.start(h)
    for _ in range(round(T / h)):
        ens.step(h)
    exact = 1.0 + 0.5 * math.cos(W * T)
    ref_error = abs(ens.reference.world.particles.x[1, 0] - exact)
    return {r.name: r.error for r in ens.rows()}, ref_error


def test_halving_the_step_divides_each_error_by_two_to_its_order():
    """What the window's "halve the step" key shows: against the reference, each
    integrator's error at t = 0.75 s falls by 2^p when h halves (1/40 -> 1/80 s), p its
    order (1, 2 or 4). At w h <= 0.08 the next term of the error changes the ratio by
    a relative O(w h) (first order) to O((w h)^2): within 15 % of 2^p. (At w t = 2.37
    both a phase error and an amplitude error show in the position; at w t near pi
    the particle turns and RK4's phase error hides, near pi/2 it passes the middle
    and explicit Euler's growth hides.)
    The reference (Forest-Ruth at h / 4) is itself 256 times closer to the exact
    cosine than the Forest-Ruth member, the one it resembles most."""
    coarse, ref_c = errors_at(1 / 40)
    fine, ref_f = errors_at(1 / 80)
    # The reference is Forest-Ruth at a 4x finer step: 4^4 = 256 times closer to
    # the exact cosine than the Forest-Ruth member (100: room for round-off).
    assert ref_c < coarse["forest_ruth"] / 100 and ref_f < fine["forest_ruth"] / 100
    for name, integ in INTEGRATORS.items():
        ratio = coarse[name] / fine[name]
        assert ratio == pytest.approx(2.0 ** integ.order, rel=0.15), (name, ratio)


def test_a_member_that_blows_up_stops_and_says_so_the_others_go_on():
    """A stiff spring (w h = 2.5 at 1/40 s): beyond every method's stability edge but
    RK4's (2.83; the Verlet family's is 2, Forest-Ruth's 1.57, explicit Euler has
    none): the ones that blow up stop with a reason, at a time, and show no error;
    RK4 goes on."""
    w = spring_world()
    w.springs.k[:] = 10_000.0                 # w = 100 rad/s: w h = 2.5
    ens = Ensemble(w, reference=False)
    for _ in range(200):
        ens.step(1 / 40)
    rows = {r.name: r for r in ens.rows()}
    assert rows["euler"].stopped and math.isnan(rows["euler"].drift)
    assert rows["rk4"].stopped is None and np.isfinite(rows["rk4"].drift)
    stopped = [m for m in ens.members if m.stopped]
    assert all(0 < m.t_stop <= 5.0 for m in stopped)


def test_every_member_takes_the_same_mouse_input():
    """A grab and a drag reach every running member and the reference: the held
    particle sits at the hand in all of them."""
    w = spring_world()
    ens = Ensemble(w)
    ens.grab(1)
    for _ in range(30):
        ens.drag_to([2.0, 0.5])
        ens.step(1 / 60)
    for m in ens.live():             # the hand is a stiff spring: within 2 cm of it
        assert np.linalg.norm(m.world.particles.x[1] - [2.0, 0.5]) < 0.02, m.name
        assert m.world.grabbed.keys() == {1}
    ens.release()
    assert all(m.world.mouse is None for m in ens.live())


def test_the_world_itself_is_untouched_and_the_reference_is_finer():
    w = spring_world()
    before = w.state_hash()
    ens = Ensemble(w)
    for _ in range(10):
        ens.step(1 / 60)
    assert w.state_hash() == before
    assert ens.reference.world.config.substeps == FINE * w.config.substeps
    assert [m.name for m in ens.members] == list(INTEGRATORS)


def test_unknown_integrators_are_refused_in_one_sentence():
    with pytest.raises(ValueError, match="unknown integrator"):
        Ensemble(spring_world(), names=["euler", "rk5"])
