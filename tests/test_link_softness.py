"""The links' softness on a slider (issue 37): ``World.set_link_softness`` takes every soft
link's own compliance times a factor mid-run, on the numpy references and on the
compiled frames alike, as if the world had been built with it; Lagrange multipliers and
RATTLE refuse to soften a link; the window's keys (Z / Shift+Z), its slider and a
level's ``[world] link_softness`` set it, and replays play it back bit for bit.

XPBD's static stretch: a mass ``m`` hanging still on one link of compliance ``alpha``
from a pin stretches it by ``m g alpha`` (the multiplier ``lambda`` of a step is the
impulse ``m g h^2`` that holds the mass, ``C = -alpha~ lambda = -alpha m g``). One link
is solved exactly by each projection, so the iterations leave no error: only the
oscillation the change starts, which XPBD's implicit step damps out within seconds.
"""

from __future__ import annotations

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app.session import Session, scene_from_world
from sandbox.sim import backend, kernels
from sandbox.sim.world import LinkSoftnessError, World, WorldConfig

H = 1 / 60
G = 9.81
ALPHA = 1e-4                     # m/N: a 10 kN/m link
MASS = 2.0                       # kg


@pytest.fixture(params=["numpy", "compiled"])
def path(request):
    """The numpy references (the compiled kernels held back) or the compiled frames."""
    if request.param == "compiled" and not backend.runnable():
        pytest.skip("numba cannot run here")
    before = backend.ready()
    backend.set_ready(request.param == "compiled")
    yield request.param
    backend.set_ready(before)


@pytest.fixture
def frames(monkeypatch):
    """Counts the calls of the compiled links frame (``kernels.verlet_frame``)."""
    calls = []
    real = kernels.verlet_frame

    def counted(*args):
        calls.append(1)
        return real(*args)
    monkeypatch.setattr(kernels, "verlet_frame", counted)
    return calls


def hanging(alpha: float = ALPHA, walls: bool = True) -> World:
    """A mass hanging from a pin on one soft link 1 m long; with ``walls`` far away
    (then the step is the contact frame, whose arguments the world keeps: the lane),
    else a world of links alone (the compiled links frame)."""
    w = World(WorldConfig(bounds=(-5.0, -5.0, 5.0, 5.0) if walls else None))
    w.add_particles([[0.0, 0.0], [0.0, -1.0]], mass=[1.0, MASS], pinned=[True, False])
    w.add_constraints([0], [1], compliance=alpha)
    w.start(H)
    return w


def stretch(w: World) -> float:
    x = w.particles.x
    return float(np.hypot(*(x[1] - x[0]))) - 1.0


def _ran(world: World, path: str, walls: bool, frames: list) -> None:
    """The world stepped on the path asked for: the compiled contact frame keeps its
    lane, the links frame was called; the numpy path neither."""
    compiled = path == "compiled"
    assert (world.scratch.lane is not None) == (compiled and walls)
    assert bool(frames) == (compiled and not walls)


@pytest.mark.parametrize("walls", [True, False], ids=["contact frame", "links frame"])
def test_a_new_softness_gives_the_static_stretch_it_predicts(path, walls, frames):
    s = Session(scene_from_world(hanging(walls=walls), h=H))
    s.advance([H] * 120)
    assert stretch(s.world) == pytest.approx(MASS * G * ALPHA, rel=1e-9)
    _ran(s.world, path, walls, frames)
    tables = s.world.constraints.tables_made
    for factor in (10.0, 0.3, 0.0, 1.0):
        frames.clear()
        s.set_setting(("link_softness", factor))
        assert s.world.link_softness == factor
        assert s.world.constraints.compliance[0] == ALPHA * factor
        s.advance([H] * 600)                      # 10 s: the change's swing damped
        assert stretch(s.world) == pytest.approx(MASS * G * ALPHA * factor, rel=1e-6,
                                                 abs=1e-12)
        _ran(s.world, path, walls, frames)
        made = s.world.constraints.tables_made       # made again (compiled) or never
        assert made is None if path == "numpy" else made is not None and made is not tables
        tables = made


@pytest.mark.parametrize("walls", [True, False], ids=["contact frame", "links frame"])
def test_a_softened_world_steps_as_one_built_so(path, walls, frames):
    """Softened mid-run after its tables, its multipliers and (with walls) its lane were
    made, a world steps bit for bit as one built with those compliances and put in the
    same state: nothing made from the old compliances stays. (Writing
    ``constraints.compliance`` instead leaves them, and the two part in both paths.)"""
    a = hanging(ALPHA, walls)
    b = hanging(ALPHA * 10.0, walls)
    for _ in range(30):
        a.step(H)
    _ran(a, path, walls, frames)
    a.set_link_softness(10.0)
    b.particles.restore(a.particles.copy())
    assert a.state_hash() == b.state_hash()
    for _ in range(60):
        a.step(H)
        b.step(H)
    assert a.state_hash() == b.state_hash()
    a.set_link_softness(1.0)                                        # and back
    c = hanging(ALPHA, walls)
    c.particles.restore(a.particles.copy())
    for _ in range(60):
        a.step(H)
        c.step(H)
    assert a.state_hash() == c.state_hash()
    _ran(a, path, walls, frames)


def test_rigid_links_stay_rigid_and_new_links_are_softened_too():
    w = World(WorldConfig())
    w.add_particles([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0]])
    w.add_constraints([0, 1], [1, 2], compliance=[0.0, 1e-3])
    w.set_link_softness(3.0)
    assert w.constraints.compliance.tolist() == [0.0, 3e-3]
    w.add_constraints([2], [3], compliance=2e-3)
    assert w.constraints.compliance.tolist() == [0.0, 3e-3, 2e-3 * 3.0]
    w.cut([1.5, -1.0], [1.5, 1.0])                          # the middle link goes
    w.set_link_softness(0.0)
    assert w.constraints.compliance.tolist() == [0.0, 0.0] and not w.constraints.compliant
    w.set_link_softness(1.0)
    assert w.constraints.compliance.tolist() == [0.0, 2e-3]
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite factor >= 0"):
            w.set_link_softness(bad)
    assert w.link_softness == 1.0


def chain() -> World:
    """A double pendulum: a rigid rod, then a soft one."""
    w = World(WorldConfig())
    w.add_particles([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]], pinned=[True, False, False])
    w.add_constraints([0, 1], [1, 2], compliance=[0.0, 1e-4])
    w.start(H)
    return w


@pytest.mark.parametrize("method, label", [("lagrange", "Lagrange multipliers"),
                                           ("rattle", "RATTLE / SHAKE")])
def test_lagrange_and_rattle_refuse_to_soften_a_link(tmp_path, method, label):
    """Made rigid (softness 0), the chain may take Lagrange multipliers or RATTLE; then
    a softness that would make its soft link soft again is refused in one sentence,
    through the session's command, a key and the slider's command, and the world is
    as it was. Back under XPBD it softens."""
    app = ev.window_app(scene_from_world(chain(), h=H), tmp_path)
    s = app.session
    s.set_setting(("link_softness", 0.0))
    s.set_constraints(method)
    assert s.world.config.constraint_method == method
    s.advance([H] * 10)
    digest = s.world.state_hash()
    with pytest.raises(LinkSoftnessError) as e:
        s.set_setting(("link_softness", 0.1))
    assert isinstance(e.value, ValueError)
    said = (f"{label} holds rigid links only, so the links stay rigid (link softness "
            f"0); soft links need XPBD (M switches back)")
    assert str(e.value) == said
    ev.press(pygame.K_z)
    app.frame(0.0)
    app.do("set_setting", ("link_softness", 3.0))
    assert [m[:3:2] for m in app.messages[-2:]] == [[said, True]] * 2
    assert s.world.state_hash() == digest and s.world.link_softness == 0.0
    assert not s.world.constraints.compliant
    assert [e[1:] for e in s.log.events if e[1] == "set"] == [["set", "link_softness", 0.0]]
    s.set_constraints("xpbd")
    ev.press(pygame.K_z)
    app.frame(0.0)
    assert s.world.link_softness == 0.1
    assert s.world.constraints.compliance.tolist() == [0.0, 1e-4 * 0.1]


def test_a_world_of_rigid_links_says_so(tmp_path):
    app = ev.window_app("pendulums", tmp_path)
    ev.press(pygame.K_z)
    app.frame(H)
    assert app.session.setting("link_softness") == 3.0
    assert app.messages[-1][0] == ("link softness: ×3 (no soft links here: rigid links "
                                   "stay rigid)")
    assert not app.world.constraints.compliant


# --------------------------------------------------------------------------- the window

def test_its_keys_step_the_ladder_and_say_what_it_does(tmp_path):
    """The bridge has a rigid bridge (15 links) and a springy one (15): Z softens the
    springy one by the ladder's rungs, Shift+Z stiffens it, down to 0 (every link
    rigid); the message says how many links each kind is."""
    app = ev.window_app("bridge", tmp_path)
    c = app.world.constraints
    own = c.compliance.copy()
    soft = int(np.count_nonzero(own))
    assert 0 < soft < len(c)
    seen = []
    for key, mod in ((pygame.K_z, 0), (pygame.K_z, 0), (pygame.K_z, pygame.KMOD_SHIFT),
                     (pygame.K_z, pygame.KMOD_SHIFT), (pygame.K_z, pygame.KMOD_SHIFT),
                     (pygame.K_z, pygame.KMOD_SHIFT), (pygame.K_z, pygame.KMOD_SHIFT)):
        ev.press(key, mod)
        app.frame(H)
        seen.append(app.session.setting("link_softness"))
        assert np.array_equal(app.world.constraints.compliance, own * seen[-1])
    assert seen == [3.0, 10.0, 3.0, 1.0, 0.3, 0.1, 0.0]
    rigid = len(c) - soft
    assert app.messages[-1][0] == (f"link softness: ×0 (every link rigid: {soft} soft "
                                   f"links; {rigid} rigid links stay rigid)")


def test_a_new_softness_starts_a_new_energy_segment(tmp_path):
    """The energy the soft links store jumps with their compliance (C^2 / 2 alpha): the
    graph marks it and the ledger starts again, so the jump is no drift."""
    app = ev.window_app("bridge", tmp_path)
    for _ in range(60):
        app.frame(H)
    w = app.world
    ledger = w.ledger
    assert ledger is not None
    before = w.energy()["elastic"]
    ev.press(pygame.K_z)
    app.frame(H)
    assert w.ledger is not ledger
    assert app.graph.markers[-1][1] == "link softness ×3"
    assert w.energy()["elastic"] != before
    for _ in range(30):
        app.frame(H)
    assert app.session.diverged is None and not app.paused


def test_the_slider_stands_on_the_rungs(tmp_path):
    """The world section's slider: its rungs are the ladder's (0..7), a move is the
    command with the rung's factor, and it follows a key's change."""
    app = ev.window_app("bridge", tmp_path)
    panel = app.panel
    panel.toggle_world()
    slider, value, _ = panel.sliders["link_softness"]
    assert slider.value_range == (0, 7) and slider.get_current_value() == 3
    panel.actions[slider](5)                         # what a drag to the 6th rung does
    app.frame(H)
    assert app.session.setting("link_softness") == 10.0
    assert value.text == "×10"
    ev.press(pygame.K_z, pygame.KMOD_SHIFT)
    app.frame(H)
    assert slider.get_current_value() == 4 and value.text == "×3"
    rigid = ev.window_app("pendulums", tmp_path)
    rigid.panel.toggle_world()
    rigid.frame(H)
    assert rigid.panel.sliders["link_softness"][1].text == "no soft links"


# --------------------------------------------------------------------------- replays

def test_a_new_softness_replays_bit_for_bit(tmp_path):
    """Set by its keys and by the slider's command mid-run on the bridge, kept over a
    reset (recorded again after it): the replay ends where the window did, headless and
    in a window."""
    app = ev.window_app("bridge", tmp_path)
    run = ev.irregular_frames(app, 3, 300)
    run(10)
    ev.press(pygame.K_z)
    run(20)
    app.do("set_setting", ("link_softness", 30.0))
    run(20)
    ev.press(pygame.K_z, pygame.KMOD_SHIFT)
    run(10)
    app.do("reset")
    run(30)
    s = app.session
    assert s.setting("link_softness") == 10.0 and s.world.t > 0
    rep, world, other = ev.replays_alike(app, s.save_replay(tmp_path / "replays"), tmp_path)
    sets = [e[2:] for e in rep.events if e[1] == "set"]
    assert sets == [["link_softness", 3.0], ["link_softness", 30.0],
                    ["link_softness", 10.0], ["link_softness", 10.0]]
    assert world.link_softness == 10.0 and other.setting("link_softness") == 10.0
