"""The world's physical parameters as a person changes them mid-run (issue 37): gravity,
wind, air drag, bounce (restitution) and friction, each through the session's command
(the keys' and the sliders'), on the numpy references and on the compiled frame alike;
each recorded in replays and played back bit for bit; none of them a false drift, a
divergence or an integrator's error in the energy ledger.

The contact model bounces a hit faster than ``2 |g| h`` at ``restitution`` times its
impact speed along the normal, and limits the tangential correction to ``friction``
times the normal one (``levels/README.md``, "shapes"): a ball dropped on the floor
leaves it at ``e`` times the speed it hit it with, and one sliding along it slows at
``mu g``, each to within what gravity changes a speed by over one step, ``g h``.
"""

from __future__ import annotations

import math

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app.main import App
from sandbox.app.session import Session, scene_from_spec, scene_from_world
from sandbox.levels import parse_level
from sandbox.replay import load, play
from sandbox.settings import SETTINGS
from sandbox.sim import backend
from sandbox.sim.world import World, WorldConfig

H = 1 / 60
G = 9.81
BALL = """
name = "a ball"
[world]
timestep = "fixed"
bounds = [-2.0, 0.0, 2.0, 10.0]
restitution = 0.9
[[bodies]]
type = "particles"
points = [[0.0, 3.0]]
radius = 0.1
"""


@pytest.fixture(params=["numpy", "compiled"])
def path(request):
    """The numpy references (the compiled kernels held back, as while the window's
    warm-up loads them) or the compiled frame, whose arguments a world keeps from frame
    to frame (the lane): a kept argument that missed a new setting would show here."""
    if request.param == "compiled" and not backend.runnable():
        pytest.skip("numba cannot run here")
    before = backend.ready()
    backend.set_ready(request.param == "compiled")
    yield request.param
    backend.set_ready(before)


def _on_its_path(session: Session, path: str) -> None:
    """The world steps on the path asked for: the compiled frame keeps its lane."""
    assert (session.world.scratch.lane is not None) == (path == "compiled")


def _bounces(vy: np.ndarray) -> list[tuple[float, float]]:
    """``(impact speed, rebound speed)`` of each bounce in a ball's vertical velocities
    (one a step): the step where it turns from falling to rising."""
    k = np.flatnonzero((vy[:-1] < 0) & (vy[1:] > 0))
    return [(-float(vy[i]), float(vy[i + 1])) for i in k]


def test_a_new_restitution_changes_the_next_bounce(path):
    """The level bounces at 0.9; set to 0.4 by the session's command while the ball is
    in the air after its first bounce, the second bounce leaves at 0.4 of its impact
    speed; set to 0 (and 1) after it, the next does not bounce (bounces fully)."""
    s = Session(scene_from_spec(parse_level(BALL, "ball.toml"), "ball.toml", None))
    vy, changes = [], {}
    for _ in range(400):
        vy.append(s.world.particles.v[0, 1])
        bounced = len(_bounces(np.array(vy)))
        if bounced and bounced not in changes:
            _on_its_path(s, path)
            changes[bounced] = {1: 0.4, 2: 1.0, 3: 0.0}.get(bounced)
            if changes[bounced] is not None:
                s.set_setting(("restitution", changes[bounced]))
        s.advance([H])
    hits = _bounces(np.array(vy))
    assert len(hits) == 3, hits               # 0.9, 0.4, 1.0, then 0: no fourth bounce
    for (v_in, v_out), e in zip(hits, (0.9, 0.4, 1.0), strict=True):
        assert v_in > 2 * G * H                             # a bounce, not a rest
        assert abs(v_out - e * v_in) <= G * H, (e, v_in, v_out)
    assert s.world.config.restitution == 0.0
    assert abs(s.world.particles.v[0, 1]) <= G * H and s.world.particles.x[0, 1] < 0.11
    _on_its_path(s, path)


@pytest.mark.parametrize("mu", [0.25, 1.5])
def test_a_new_friction_slows_a_sliding_ball_at_mu_g(path, mu):
    """Frictionless, a ball slides along the floor at 4 m/s; friction set mid-run, it
    slows at mu g (to within g h a step)."""
    w = World(WorldConfig(bounds=(-50.0, 0.0, 50.0, 10.0)))
    w.add_particles([[0.0, 0.1]], v=[[4.0, 0.0]], mass=1.0, radius=0.1)
    s = Session(scene_from_world(w))
    vx = []
    for k in range(40):
        if k == 20:
            _on_its_path(s, path)
            s.set_setting(("friction", mu))
        s.advance([H])
        vx.append(float(s.world.particles.v[0, 0]))
    assert vx[19] == pytest.approx(4.0, abs=1e-9)                 # no friction yet
    slowing = -(vx[20 + 10] - vx[20]) / (10 * H)
    assert slowing == pytest.approx(mu * G, rel=0.01)
    _on_its_path(s, path)


def test_gravity_and_wind_change_the_motion(path):
    """A free particle (air drag 1/s): gravity set to 20 m/s^2 mid-fall accelerates it
    at 20 plus the drag's -v, in the level's direction; a wind of 5 m/s then carries it
    along +x towards 5 m/s, vx = 5 (1 - e^-kt)."""
    w = World(WorldConfig(gravity=(0.0, -9.81), drag=1.0))
    w.add_particles([[0.0, 0.0]], mass=1.0)
    s = Session(scene_from_world(w))
    s.advance([H] * 10)
    s.set_setting(("gravity", 20.0))
    assert s.world.config.gravity == (0.0, -20.0)
    v0 = float(s.world.particles.v[0, 1])
    s.advance([H] * 30)                      # dv/dt = -20 - v: v = -20 + (v0 + 20) e^-t
    assert s.world.particles.v[0, 1] == pytest.approx(-20 + (v0 + 20) * math.exp(-0.5),
                                                      rel=0.01)
    s.set_setting(("wind", 5.0))
    assert s.world.config.gravity == (5.0, -20.0)
    s.advance([H] * 180)                                          # 3 s
    assert s.world.particles.v[0, 0] == pytest.approx(5.0 * (1 - math.exp(-3.0)), rel=0.01)
    s.set_setting(("drag", 0.0))                 # no air: no wind, gravity as it was set
    assert s.world.config.gravity == (0.0, -20.0) and s.setting("wind") == 5.0


def test_the_wind_without_air_drag_says_it_does_nothing(tmp_path):
    app = ev.window_app("pendulums", tmp_path)
    assert app.world.config.drag == 0
    ev.press(pygame.K_w)
    app.frame(H)
    assert app.session.setting("wind") == 1.0 and app.world.config.gravity == (0.0, -9.81)
    assert app.messages[-1][0] == "wind: 1.0 m/s (no effect without air drag: D adds some)"


# --------------------------------------------------------------------------- replays

def _play_a_session(tmp_path) -> tuple[App, object]:
    """The playground at irregular real frame times: every new setting set mid-run by its
    key or its slider's command (gravity, wind, drag with a wind blowing, bounce,
    friction), a reset (the settings stay), more frames. Returns the app and the replay
    file saved at the end."""
    app = ev.window_app("playground", tmp_path)
    run = ev.irregular_frames(app, 7, 400)
    run(10)
    for key, mod in ((pygame.K_y, 0), (pygame.K_y, 0), (pygame.K_w, 0), (pygame.K_w, 0),
                     (pygame.K_o, 0), (pygame.K_k, pygame.KMOD_SHIFT)):
        ev.press(key, mod)
        run(3)
    app.do("set_setting", ("gravity", 3.7))              # the slider's command
    run(5)
    app.do("set_setting", ("wind", -6.5))
    run(5)
    app.do("set_setting", ("drag", 0.4))                # the wind's share grows with it
    run(5)
    app.do("set_setting", ("restitution", 0.65))
    app.do("set_setting", ("friction", 1.2))
    run(20)
    app.do("reset")
    run(20)
    return app, app.session.save_replay(tmp_path / "replays")


def test_every_new_setting_replays_bit_for_bit(tmp_path):
    app, path = _play_a_session(tmp_path)
    s = app.session
    assert s.world.config.gravity == pytest.approx((0.4 * -6.5, -3.7))
    assert (s.setting("restitution"), s.setting("friction")) == (0.65, 1.2)
    rep = load(path)
    sets = [e[2] for e in rep.events if e[1] == "set"]
    assert {"gravity", "wind", "drag", "restitution", "friction"} <= set(sets)
    after_reset = [e[2:] for e in rep.events[[e[1] for e in rep.events].index("reset"):]
                   if e[1] == "set"]
    assert ["gravity", 3.7] in after_reset and ["wind", -6.5] in after_reset
    _, world, other = ev.replays_alike(app, path, tmp_path)
    assert world.config == s.world.config
    assert other.setting("wind") == -6.5 and other.setting("gravity") == 3.7


def test_a_level_with_wind_replays_and_resets_to_its_own_wind(tmp_path):
    """``[world] wind`` starts the level with it; the session's change of it stays over
    a reset (recorded again after it) and replays bit for bit."""
    text = BALL.replace("restitution = 0.9", "restitution = 0.9\ndrag = 0.5\nwind = 4.0")
    s = Session(scene_from_spec(parse_level(text, "windy.toml"), "windy.toml", None))
    assert s.world.config.gravity == (2.0, -9.81) and s.setting("wind") == 4.0
    for k in range(60):
        if k == 20:
            s.set_setting(("wind", -2.0))
        if k == 40:
            s.reset()
            assert s.world.config.gravity == (-1.0, -9.81) and s.world.t == 0.0
        s.update(H)
    assert s.log.events[-1][1:] == ["set", "wind", -2.0]          # after the reset
    rep = load(s.save_replay(tmp_path))
    world = play(rep)
    assert world.state_hash() == s.world.state_hash()
    assert world.config.gravity == (-1.0, -9.81)


# --------------------------------------------------------------------------- energy

def test_a_gravity_change_starts_a_new_energy_segment_not_a_drift(tmp_path):
    """Gravity 9.81 -> 14.81 moves every potential energy at once. The graph marks it
    and measures drift from there (it showed the jump as drift before), the ledger's
    split adds up from the change and books nothing of the jump to the integrator."""
    app = ev.window_app("pendulums", tmp_path)
    for _ in range(30):
        app.frame(H)
    w = app.world
    ledger = w.ledger
    assert ledger is not None
    before = w.energy()["total"]
    for _ in range(10):
        ev.press(pygame.K_y)
    app.frame(H)
    assert w.ledger is not ledger                         # the split starts again
    label = app.graph.markers[-1][1]
    assert label == "gravity 14.81 m/s²" and len(
        [m for m in app.graph.markers if m[1].startswith("gravity")]) == 1    # merged
    jump = abs(w.energy()["total"] - before)
    assert jump > 1.0                                   # J: the pendulums hang low
    start = w.energy()["total"]
    ledger0 = dict(w.ledger)
    for _ in range(60):
        app.frame(H)
    drift = abs(app.graph.drift())
    assert drift < 0.05 * jump
    assert not app.paused and app.session.diverged is None
    booked = sum(w.ledger.values()) - sum(ledger0.values())
    assert booked == pytest.approx(w.energy()["total"] - start, abs=1e-6 * jump + 1e-9)
    assert abs(w.ledger["integrator"]) < 0.05 * jump


def test_gravity_under_a_high_body_is_no_divergence():
    """A body 20 km up in a world without gravity: gravity of 50 m/s^2 raises its energy
    by 1 MJ at once, past the blow-up check's 100 times the level's scale when measured
    from the level's start; the check's reference moves with the change instead."""
    w = World(WorldConfig(gravity=(0.0, 0.0)))
    w.add_particles([[0.0, 2e4]], mass=1.0)
    s = Session(scene_from_world(w))
    s.advance([H] * 5)
    s.sample_energy()
    s.set_setting(("gravity", 50.0))
    assert s.world.config.gravity == (0.0, -50.0)        # no direction: straight down
    s.advance([H] * 5)
    s.sample_energy()
    assert s.diverged is None and not s.paused
    assert s.world.particles.v[0, 1] < -4.0                       # and it falls


def test_each_setting_is_in_the_help_with_its_keys():
    from sandbox.app.keymap import help_lines, spec_label
    text = "\n".join(f"{k}: {t}" for k, t in help_lines())
    for st in SETTINGS.values():
        for specs, sign in ((st.more, +1), (st.less, -1)):
            assert f"{' / '.join(spec_label(k) for k in specs)}: {st.help(sign)}" in text


def test_the_ghost_takes_every_new_setting_with_the_world():
    s = Session(scene_from_spec(parse_level(BALL, "ball.toml"), "ball.toml", None))
    s.set_ghost("rk4")
    s.advance([H] * 5)
    for name, value in (("gravity", 4.0), ("drag", 0.5), ("wind", -3.0),
                        ("restitution", 0.3), ("friction", 0.7)):
        s.set_setting((name, value))
    g, w = s.ghost.config, s.world.config
    assert g.integrator == "rk4" != w.integrator
    assert (g.gravity, g.drag, g.restitution, g.friction) == (w.gravity, w.drag, w.restitution,
                                                              w.friction) == (
        (-1.5, -4.0), 0.5, 0.3, 0.7)
