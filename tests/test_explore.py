"""Explore, not only watch (issue 37), in the window: every integrator side by side
with the truth beside them (A), driven by real-shaped events (tests/events.py)."""

from __future__ import annotations

import math

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app.main import App, scene_from_world
from sandbox.app.session import ENSEMBLE_MAX_PARTICLES
from sandbox.sim.builders import build_cloth, build_double_pendulum
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.world import World, WorldConfig

H = 1 / 60
SIZE = (1280, 800)


@pytest.fixture(autouse=True)
def display():
    with ev.fresh_display(SIZE):
        yield


def spring_world() -> World:
    """A 1 kg ball on a 10 N/m spring to a pinned anchor, pulled 0.5 m, no gravity."""
    w = World(WorldConfig(gravity=(0.0, 0.0), substeps=1, iterations=0))
    idx = w.add_particles([[0.0, 0.0], [1.5, 0.0]], mass=[1.0, 1.0], pinned=[True, False],
                          radius=[0.05, 0.1])
    w.add_springs([int(idx[0])], [int(idx[1])], k=10.0, rest=[1.0])
    return w


def make_app(world: World, tmp_path, view=((0.75, 0.0), 4.0)) -> App:
    return App(scene_from_world(world, h=H, timestep="fixed", view=view), size=SIZE,
               out_dir=tmp_path)


def press(app, key, mod=0):
    ev.press(key, mod)
    app.frame(H)


def run(app, n):
    for _ in range(n):
        app.frame(H)


def test_A_runs_every_integrator_beside_the_world_on_its_steps(tmp_path):
    app = make_app(spring_world(), tmp_path)
    run(app, 3)
    press(app, pygame.K_a)
    ens = app.session.ensemble
    assert ens is not None and ens.reference is not None
    run(app, 30)
    assert all(m.world.t == pytest.approx(app.world.t) for m in ens.members)
    assert ens.reference.world.t == pytest.approx(app.world.t)
    # The member running the world's integrator moves as the world (started afresh
    # from the world's x and v for its step: the same motion, to 0.1 mm).
    mine = next(m for m in ens.members if m.name == app.integrator)
    np.testing.assert_allclose(mine.world.particles.x, app.world.particles.x, atol=1e-4)
    lines = [t for t, _ in app.ensemble_lines()]
    for integ in INTEGRATORS.values():
        assert any(t.startswith(integ.label[:18]) for t in lines), integ.label
    assert app._draw_error is None and app.ensemble_legend_at is not None
    # the legend is inside the scene's area, clear of the right column
    sx, sy, sw, sh = app.safe_area()
    assert app.ensemble_legend_at.right <= sx + sw and app.ensemble_legend_at.top >= sy


def test_the_hand_cut_and_pin_reach_every_member(tmp_path):
    app = make_app(spring_world(), tmp_path)
    press(app, pygame.K_a)
    ens = app.session.ensemble
    ball = app.camera.to_screen(app.world.particles.x[1])
    target = ball + np.array([60.0, -80.0])
    evs = ev.drag(ball, target)
    k = next(n for n, e in enumerate(evs) if e.type == pygame.MOUSEBUTTONUP)
    ev.post(*evs[:k])
    run(app, 40)
    for m in ens.live():
        assert m.world.mouse is not None and int(m.world.mouse.idx[0]) == 1, m.name
    ev.post(*evs[k:])
    app.frame(H)
    assert all(m.world.mouse is None for m in ens.live())
    # right click pins the ball in every member
    at = app.camera.to_screen(app.world.particles.x[1])
    ev.post(ev.button_down(at, 3), ev.button_up(at, 3))
    app.frame(H)
    assert app.world.particles.inv_mass[1] == 0
    assert all(m.world.particles.inv_mass[1] == 0 for m in ens.live())


def test_a_shift_drag_cut_reaches_every_member(tmp_path):
    w = World(WorldConfig(iterations=4))
    build_double_pendulum(w, pivot=(0.0, 0.0))
    app = make_app(w, tmp_path, view=((0.0, -0.5), 4.0))
    press(app, pygame.K_a)
    ens = app.session.ensemble
    n = len(app.world.constraints)
    p = app.world.particles.x
    mid = (p[0] + p[1]) / 2
    d = p[1] - p[0]
    normal = np.array([-d[1], d[0]]) / np.hypot(*d) * 0.3
    a, b = app.camera.to_screen(mid - normal), app.camera.to_screen(mid + normal)
    ev.post(*ev.drag(a, b, shift=True))
    app.frame(H)
    assert len(app.world.constraints) < n
    assert all(len(m.world.constraints) == len(app.world.constraints) for m in ens.live())


def test_halving_the_step_restarts_the_errors_and_shows_their_ratio(tmp_path):
    """Ctrl+= halves h: the ensemble starts again from the world, and after 1 s each
    member's error is shown beside the one at the step before; on a spring they fall
    by about 2 to the order (1, 2, 4)."""
    w = spring_world()
    w.springs.k[:] = 2.37 ** 2        # w t = 2.37 at the 1 s mark: phase and amplitude
    app = make_app(w, tmp_path)       # errors both show (see tests/test_ensemble.py)
    press(app, pygame.K_a)
    run(app, 65)                                # past the 1 s mark at 60 Hz
    first = dict(app.session.ensemble_marks)
    assert set(first) == set(INTEGRATORS)
    press(app, pygame.K_EQUALS, pygame.KMOD_CTRL)
    assert 1 / app.policy.nominal_h == pytest.approx(120)
    s = app.session
    assert s.ensemble_prev is not None and s.ensemble_prev[1] == first
    assert s.ensemble_h == pytest.approx(1 / 120)
    assert s.ensemble_elapsed() == pytest.approx(H)      # went back: one frame since
    run(app, 70)
    second = s.ensemble_marks
    assert set(second) == set(INTEGRATORS)
    for name, integ in INTEGRATORS.items():
        ratio = first[name] / second[name]
        # the same motion again at h/2 (from where the first run started)
        assert ratio == pytest.approx(2.0 ** integ.order, rel=0.2), (name, ratio)
    text = " ".join(t for t, _ in app.ensemble_lines())
    assert "÷ h 16.7" in text
    press(app, pygame.K_MINUS, pygame.KMOD_CTRL)        # doubles it back
    assert 1 / app.policy.nominal_h == pytest.approx(60)


def test_a_member_that_blows_up_says_so_and_is_no_longer_drawn(tmp_path):
    w = spring_world()
    w.springs.k[:] = 10_000.0                    # w h = 1.7 at 1/60 s: Euler blows up
    app = make_app(w, tmp_path)
    press(app, pygame.K_a)
    run(app, 120)
    ens = app.session.ensemble
    euler = next(m for m in ens.members if m.name == "euler")
    assert euler.stopped is not None
    line = next(t for t, _ in app.ensemble_lines() if t.startswith("Explicit Euler"))
    assert f"diverged at t = {euler.t_stop:.3f} s" in line
    drawn = []
    real = app.renderer.ensemble
    app.renderer.ensemble = lambda surf, cam, members, ref=None: (
        drawn.append(len(members)), real(surf, cam, members, ref))
    app.frame(H)
    assert drawn == [sum(m.stopped is None for m in ens.members)]
    assert app._draw_error is None


def test_large_levels_refuse_in_one_line(tmp_path):
    w = World(WorldConfig(iterations=4))
    build_cloth(w, cols=25, rows=15, spacing=0.1, origin=(-1.0, 1.0), pins="top_corners")
    assert w.n > ENSEMBLE_MAX_PARTICLES
    app = make_app(w, tmp_path, view=((0.0, 0.3), 4.0))
    press(app, pygame.K_a)
    assert app.session.ensemble is None
    text, _, error = app.messages[-1]
    assert error and "375 particles" in text and "\n" not in text


def test_the_ghost_and_trails_are_off_while_the_ensemble_runs(tmp_path):
    app = make_app(spring_world(), tmp_path)
    press(app, pygame.K_g)
    assert app.ghost is not None
    press(app, pygame.K_a)
    assert app.ghost is None and app.session.ensemble is not None
    drawn = []
    import sandbox.app.main as main
    real = main.draw_trails
    main.draw_trails = lambda *a, **k: drawn.append(1)
    try:
        run(app, 3)
        assert drawn == []
        press(app, pygame.K_g)                       # the ghost instead
        assert app.ghost is not None and app.session.ensemble is None
    finally:
        main.draw_trails = real


def test_reset_and_a_setting_restart_the_ensemble_from_the_world(tmp_path):
    app = make_app(spring_world(), tmp_path)
    press(app, pygame.K_a)
    run(app, 20)
    press(app, pygame.K_r)
    ens = app.session.ensemble
    assert ens is not None and all(m.world.t == app.world.t for m in ens.members)
    app.do("set_setting", ("drag", 0.2))
    assert all(m.world.config.drag == 0.2 for m in app.session.ensemble.members)
    assert math.isfinite(app.session.ensemble_elapsed())
