"""The sandbox window, headless (SDL_VIDEODRIVER=dummy, set in conftest.py).

Input is driven the way a user drives it: events are posted to pygame's queue and the
app's ``frame(dt)`` consumes them, so the mouse position comes from the events' ``pos``
and modifiers from their ``mod``. Assertions are on the world and the app state, never
on pixels (except the rasteriser's own unit tests).
"""

from __future__ import annotations

import math

import events as ev
import numpy as np
import pygame
import pytest

from sandbox import snapshot
from sandbox.app import raster
from sandbox.app.camera import Camera
from sandbox.app.keymap import KEYMAP, help_lines, key_label, lookup
from sandbox.app.main import App, run_app, scene_from_level, scene_from_world
from sandbox.levels import level_names
from sandbox.sim.builders import build_cloth
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.timestep import TIMESTEPS, FixedStep
from sandbox.sim.world import SimulationDiverged, World, WorldConfig

H = 1 / 60
SIZE = (800, 600)
NAMES = list(INTEGRATORS)


@pytest.fixture(autouse=True)
def display():
    with ev.fresh_display(SIZE):
        yield


def make_world(**cfg) -> World:
    """The tests' own scene (independent of the shipped level files): a 20 x 15 cloth."""
    world = World(WorldConfig(iterations=4, **cfg))
    build_cloth(world, cols=20, rows=15, spacing=0.1, origin=(-1.0, 1.0), pins="top_corners")
    world.start(H)
    return world


@pytest.fixture
def app(tmp_path) -> App:
    return App(scene_from_world(make_world(), h=H, timestep="fixed", view=((0.0, 0.3), 4.0)),
               size=SIZE, out_dir=tmp_path)


# --------------------------------------------------------------------------- posting

def press(app: App, key: int, mod: int = 0, dt: float = H) -> None:
    """The key pressed and released (modifier keys held around it), then a frame."""
    ev.press(key, mod)
    app.frame(dt)


def drag(app: App, a, b, button: int = 1, shift: bool = False,
         frames_between: int = 0) -> None:
    """Press at ``a``, move to ``b``, (frames), release: real-shaped events."""
    evs = ev.drag(a, b, button, shift)
    k = next(n for n, e in enumerate(evs) if e.type == pygame.MOUSEBUTTONUP)
    ev.post(*evs[:k])
    for _ in range(frames_between):
        app.frame(H)
    ev.post(*evs[k:])


def run(app: App, frames: int, dt: float = H) -> None:
    for _ in range(frames):
        app.frame(dt)


# --------------------------------------------------------------------------- the keymap
# One check per action: what its help line promises, on the world and the app state.

def _other_integrator(app: App, name: str) -> None:
    if app.integrator == name:
        app.set_integrator(NAMES[(NAMES.index(name) + 1) % len(NAMES)])


def check_cycle_integrator(app, b):
    before = app.integrator
    press(app, b.key, b.mods)
    assert app.integrator == NAMES[(NAMES.index(before) + b.arg) % len(NAMES)]
    assert app.world.config.integrator == app.integrator


def check_set_integrator(app, b):
    _other_integrator(app, b.arg)
    press(app, b.key, b.mods)
    assert app.integrator == b.arg
    assert INTEGRATORS[b.arg].label in b.help


def check_cycle_timestep(app, b):
    modes = list(TIMESTEPS)
    before = app.timestep
    press(app, b.key, b.mods)
    assert app.timestep == modes[(modes.index(before) + b.arg) % len(modes)]
    assert isinstance(app.policy, TIMESTEPS[app.timestep])


def check_pause(app, b):
    run(app, 3)
    press(app, b.key, b.mods)
    assert app.paused
    t, h = app.world.t, app.world.state_hash()
    run(app, 5)
    assert app.world.t == t and app.world.state_hash() == h
    press(app, b.key, b.mods)
    assert not app.paused
    run(app, 2)
    assert app.world.t > t


def check_step(app, b):
    run(app, 2)
    t, steps = app.world.t, app.world.steps
    press(app, b.key, b.mods)                   # pauses and takes one plan
    assert app.paused
    plan = app.last_plan
    assert len(plan) >= 1
    assert app.world.steps == steps + len(plan)
    assert app.world.t == pytest.approx(t + sum(plan), abs=1e-12)
    run(app, 3)
    assert app.world.steps == steps + len(plan)


def check_speed(app, b):
    press(app, b.key, b.mods)
    assert app.speed == pytest.approx(b.arg)
    for _ in range(6):
        press(app, b.key, b.mods)
    assert app.speed == (0.25 if b.arg < 1 else 4.0)
    # Fixed mode: a 1/60 s frame at the extreme speed gives 4x or 0.25x the steps.
    app.paused = False
    app.session.policy = FixedStep(H, max_steps=8)
    steps = app.world.steps
    run(app, 8)
    assert app.world.steps - steps == (2 if b.arg < 1 else 32)


def check_change_setting(app, b):
    """A key of a world setting (``settings.SETTINGS``): one step up or down (a rung of
    its ladder), on the world and said on screen; held at the setting's limits."""
    from sandbox.settings import SETTINGS

    name, sign = b.arg
    st = SETTINGS[name]
    lo, hi = st.limits
    inner = (st.ladder[1], st.ladder[-2]) if st.ladder else (lo + st.step, hi - st.step)
    app.do("set_setting", (name, min(max(app.session.setting(name), inner[0]),
                                     inner[1])))          # start off both ends
    before = app.session.setting(name)
    press(app, b.key, b.mods)
    want = (st.ladder[st.ladder.index(before) + sign] if st.ladder
            else before + sign * st.step)
    assert app.session.setting(name) == pytest.approx(want)
    assert any(st.label in m[0] for m in app.messages)
    app.do("set_setting", (name, hi if sign > 0 else lo))
    press(app, b.key, b.mods)
    assert app.session.setting(name) == (hi if sign > 0 else lo)


def check_reset(app, b):
    fresh = app.scene.make_world().state_hash()
    run(app, 10)
    app.world.cut((-2.0, 0.5), (2.0, 0.5))
    assert app.world.state_hash() != fresh
    press(app, b.key, b.mods, dt=0.0)           # dt 0: no step after the reset
    assert app.world.state_hash() == fresh
    assert app.world.t == 0.0


def check_level(app, b):
    names = level_names()
    assert names, "no levels/*.toml"
    press(app, b.key, b.mods)
    expected = names[0] if b.arg > 0 else names[-1]  # from a world that is not a level
    assert app.scene.source == expected
    press(app, b.key, b.mods)
    assert app.scene.source == names[(names.index(expected) + b.arg) % len(names)]
    assert app.world.n > 0


def check_toggle_graph(app, b):
    before = app.show_graph
    press(app, b.key, b.mods)
    assert app.show_graph is not before


def check_toggle_help(app, b):
    press(app, b.key, b.mods)
    assert app.show_help
    press(app, b.key, b.mods)
    assert not app.show_help


def check_toggle_ghost(app, b):
    press(app, b.key, b.mods)
    assert app.ghost is not None
    assert app.ghost.integrator.name != app.integrator
    assert app.ghost.n == app.world.n
    press(app, b.key, b.mods)
    assert app.ghost is None


def check_cycle_ghost(app, b):
    press(app, b.key, b.mods)
    assert app.ghost is not None
    first = app.ghost.integrator.name
    assert first == NAMES[(NAMES.index(app.integrator) + b.arg) % len(NAMES)]
    press(app, b.key, b.mods)
    assert app.ghost.integrator.name == NAMES[(NAMES.index(first) + b.arg) % len(NAMES)]


def check_pan(app, b):
    before = app.camera.center.copy()
    press(app, b.key, b.mods)
    moved = app.camera.center - before
    assert np.sign(moved[0]) == np.sign(b.arg[0]) and np.sign(moved[1]) == np.sign(b.arg[1])


def check_zoom(app, b):
    before = app.camera.scale
    press(app, b.key, b.mods)
    assert app.camera.scale == pytest.approx(before * b.arg)


def check_reset_view(app, b):
    center, scale = app.camera.center.copy(), app.camera.scale
    app.pan((0.3, 0.2))
    app.zoom(2.0)
    press(app, b.key, b.mods)
    assert app.camera.center == pytest.approx(center) and app.camera.scale == scale


def check_screenshot(app, b):
    press(app, b.key, b.mods)
    press(app, b.key, b.mods)                   # same second: a new name, no overwrite
    shots = sorted((app.out_dir / "screenshots").glob("*.png"))
    assert len(shots) == 2
    assert pygame.image.load(shots[0]).get_size() == SIZE
    assert not list((app.out_dir / "screenshots").glob(".*"))    # no temporary left


def check_save_snapshot(app, b):
    run(app, 5)
    press(app, b.key, b.mods, dt=0.0)
    snaps = list((app.out_dir / "snapshots").glob("snapshot-*.npz"))
    assert len(snaps) == 1
    other = make_world()
    snapshot.load(other, snaps[0])
    assert other.state_hash() == app.world.state_hash()


def check_load_snapshot(app, b):
    press(app, b.key, b.mods, dt=0.0)           # nothing saved yet: a message, no change
    assert app.messages and app.messages[-1][2]
    run(app, 5)
    app.save_snapshot()
    saved = app.world.state_hash()
    run(app, 5)
    assert app.world.state_hash() != saved
    press(app, b.key, b.mods, dt=0.0)
    assert app.world.state_hash() == saved


def check_quit(app, b):  # Q (Esc is "cancel", checked below)
    press(app, b.key, b.mods)
    assert not app.running


def check_toggle_panel(app, b):
    assert app.show_panel and app.safe_area()[2] < app.size[0]     # the column is taken
    wide = app.safe_area()
    press(app, b.key, b.mods)
    assert not app.show_panel
    press(app, pygame.K_f, pygame.KMOD_SHIFT)          # the portrait too: no column left
    assert app.safe_area()[2] == app.size[0] > wide[2]
    press(app, b.key, b.mods)
    assert app.show_panel


def check_toggle_trails(app, b):
    before = app.show_trails
    press(app, b.key, b.mods)
    assert app.show_trails is not before


def check_trail_length(app, b):
    """Shift+L: the trails' length goes round 1, 3, 10 s, and says so."""
    seen = []
    for _ in range(3):
        press(app, b.key, b.mods)
        seen.append(app.trail_seconds)
    assert sorted(seen) == [1.0, 3.0, 10.0]
    assert "trails:" in app.messages[-1][0]


def check_toggle_debug(app, b):
    """X: the contacts at first, then off, then on again; said, drawn only when on."""
    for want in ({"contacts"}, set(), {"contacts"}):
        press(app, b.key, b.mods)
        assert app.debug_layers == want
        assert app.messages[-1][0].startswith(f"debug draw: {'contacts' if want else 'off'}")
        assert (app.debug_draw.drawn is not None) == bool(want)


def check_toggle_debug_layer(app, b):
    """Alt+1..4: that layer on beside the others, drawn (the cloth's links: the link
    forces refuse more than 40 labels and say so), then off."""
    app.do("set_debug_layer", ("boxes" if b.arg != "boxes" else "contacts", True))
    before = set(app.debug_layers)
    press(app, b.key, b.mods)
    assert app.debug_layers == before | {b.arg}
    assert b.arg in app.debug_draw.drawn.counts
    press(app, b.key, b.mods)
    assert app.debug_layers == before


def check_toggle_plot(app, b):
    before = app.show_plot
    press(app, b.key, b.mods)
    assert app.show_plot is not before
    assert (app.plot_header() is None) == before         # its pickers go with it


def check_cycle_plot(app, b):
    """U: the graph's next quantity that applies here (the cloth has no ensemble: the
    error against the truth is passed over); Shift+U: back."""
    from sandbox.quantities import QUANTITIES
    names = list(QUANTITIES)
    assert app.session.followed is None        # a cloth: no particle stands out
    before = app.session.plot.y
    press(app, b.key, b.mods)                  # the particle's quantities are passed over
    assert app.session.plot.y not in ("x", "y", "vx", "vy", "speed", "truth_error")
    app.select(int(np.flatnonzero(app.world.particles.inv_mass > 0)[0]))
    app.do("plot_y", before)
    press(app, b.key, b.mods)
    after = app.session.plot.y
    assert after != "truth_error" and not app.session.plot.auto
    assert (names.index(after) - names.index(before)) * b.arg % len(names) == 1
    press(app, b.key, b.mods ^ pygame.KMOD_SHIFT)
    assert app.session.plot.y == before
    assert app.plot.layout.ylabel[1].startswith(QUANTITIES[before].text.split(" ")[0])


def check_cycle_plot_x(app, b):
    """J: against time, then each quantity; Shift+J: back."""
    from sandbox.quantities import AXES
    app.select(int(np.flatnonzero(app.world.particles.inv_mass > 0)[0]))
    before = app.session.plot.x
    press(app, b.key, b.mods)
    after = app.session.plot.x
    assert (AXES.index(after) - AXES.index(before)) * b.arg % len(AXES) == 1
    press(app, b.key, b.mods ^ pygame.KMOD_SHIFT)
    assert app.session.plot.x == before


def check_plot_log(app, b):
    before = app.session.plot.log
    press(app, b.key, b.mods)
    assert app.session.plot.log is not before and app.plot.layout.log is not before
    press(app, b.key, b.mods)
    assert app.session.plot.log is before


def check_toggle_hud(app, b):
    """The compact HUD first; the key shows every number, again the compact one."""
    def shown():
        return " ".join(t if isinstance(t, str) else t[0] for c in app.hud_shown() for t in c)

    assert not app.show_full_hud and "iterations" not in shown()
    press(app, b.key, b.mods)
    assert app.show_full_hud and "iterations" in shown()
    press(app, b.key, b.mods)
    assert not app.show_full_hud and "iterations" not in shown()


def check_phase_axis(app, b):
    """F: the phase portrait (vx against x); again: the other coordinate."""
    app.do("plot_y", "kinetic")
    press(app, b.key, b.mods)
    assert (app.session.plot.y, app.session.plot.x) == ("vx", "x")
    press(app, b.key, b.mods)
    assert (app.session.plot.y, app.session.plot.x) == ("vy", "y")
    assert app.plot.layout.xlabel[1] == "y (m)"


def check_caption(app, b):
    app.session.scene.description = "a test scene"
    app.session.scene.hint = "press nothing"
    app.messages.clear()
    press(app, b.key, b.mods)
    text = " ".join(m[0] for m in app.messages)
    assert "a test scene" in text and "try: press nothing" in text


def check_hz(app, b):
    h = app.policy.nominal_h
    press(app, b.key, b.mods)
    assert 1 / app.policy.nominal_h == pytest.approx(round(b.arg / h))
    assert type(app.policy).__name__ == type(app.session._make_policy(app.timestep)).__name__


def check_record(app, b):
    press(app, b.key, b.mods)
    assert app.recorder.recording
    path = app.recorder.path
    assert path.suffix == "." + b.arg and path.parent == app.out_dir / "clips"
    run(app, 4)
    press(app, b.key, b.mods)                           # again: stop
    assert not app.recorder.recording
    app.recorder.wait(60)
    assert path.exists()


def check_save_replay(app, b):
    """A world built in code is not a level: the replay cannot be saved, and says so;
    the file format and playback are tested in tests/test_replay.py."""
    run(app, 3)
    press(app, b.key, b.mods)
    assert app.messages[-1][2] and "not built from a level" in app.messages[-1][0]


def check_toggle_build(app, b):
    """The test world is built in code, not from a level: build mode starts an empty
    room (with walls) and B again leaves it, running what was built."""
    press(app, b.key, b.mods)
    assert app.editor is not None and app.paused and app.world.n == 0
    press(app, b.key, b.mods)
    assert app.editor is None and not app.paused


def check_cycle_tool(app, b):
    app.do("toggle_build")
    before = app.tool
    press(app, b.key, b.mods)
    assert app.tool != before


def check_undo(app, b):
    app.do("toggle_build")
    app.do("set_tool", "box")
    ev.post(*ev.drag((100, 300), (200, 350)))
    app.frame(H)
    assert len(app.world.shapes) == 1
    press(app, b.key, b.mods)
    assert len(app.world.shapes) == 0


def check_redo(app, b):
    check_undo(app, next(x for x in KEYMAP if x.action == "undo"))
    press(app, b.key, b.mods)
    assert len(app.world.shapes) == 1


def check_new_level(app, b):
    """Ctrl+N in build mode empties the level (the world keeps its settings) and Ctrl+Z
    brings back what was there."""
    app.do("toggle_build")
    app.do("set_tool", "box")
    ev.post(*ev.drag((100, 300), (200, 350)))
    app.frame(H)
    assert len(app.world.shapes) == 1
    gravity = app.world.config.gravity
    press(app, b.key, b.mods)
    assert app.editor is not None and len(app.world.shapes) == 0 and app.world.n == 0
    assert app.world.config.gravity == gravity
    app.do("undo")
    assert len(app.world.shapes) == 1


def check_build_delete(app, b):
    app.do("toggle_build")
    app.do("set_tool", "box")
    ev.post(*ev.drag((100, 300), (200, 350)))
    app.frame(H)
    ev.post(ev.button_down((150, 325), 3), ev.button_up((150, 325), 3))
    app.frame(H)
    press(app, b.key, b.mods)
    assert len(app.world.shapes) == 0


def check_close_polygon(app, b):
    app.do("toggle_build")
    app.do("set_tool", "polygon")
    for p in [(100, 400), (200, 400), (150, 320)]:
        ev.post(ev.button_down(p), ev.button_up(p))
    app.frame(H)
    press(app, b.key, b.mods)
    assert app.editor.table["shapes"][-1]["type"] == "polygon"


def check_save_level(app, b):
    app.do("toggle_build")
    press(app, b.key, b.mods)                          # asks for a name
    assert app.panel.dialog is not None and app.panel.typing()
    press(app, pygame.K_q)                             # typed, not a hotkey
    assert app.running


def check_cancel(app, b):
    app.do("toggle_build")
    app.do("set_tool", "polygon")
    ev.post(ev.button_down((100, 400)), ev.button_up((100, 400)))
    app.frame(H)
    press(app, b.key, b.mods)                          # drops the corner, stays open
    assert app.running and app.input.polygon == []
    press(app, b.key, b.mods)
    assert not app.running


def check_cycle_constraints(app, b):
    """The tests' cloth has more links than Lagrange multipliers are for: the window
    says why and keeps XPBD; on a double pendulum the method changes and the HUD names
    the scheme and whether it is symplectic."""
    press(app, b.key, b.mods)
    assert app.world.config.constraint_method == "xpbd"
    assert app.messages[-1][2] and "links" in app.messages[-1][0]
    from sandbox.sim.builders import build_double_pendulum
    w = World(WorldConfig(integrator="velocity_verlet"))
    build_double_pendulum(w, pivot=(0.0, 0.0))
    app.session.load_scene(scene_from_world(w, h=H))
    press(app, b.key, b.mods)
    method = app.world.config.constraint_method
    assert method == ("lagrange" if b.arg > 0 else "rattle")
    line = next(t for t in app.hud_columns()[0] if str(t).find("links") >= 0)
    text = line if isinstance(line, str) else line[0]
    assert ("RATTLE" in text) == (method == "rattle") and "symplectic" in text
    run(app, 5)
    assert np.isfinite(app.world.particles.x).all()


def check_toggle_ensemble(app, b):
    """A: every integrator on a copy of the world, on its steps; the ghost goes; A
    again: off."""
    app.do("toggle_ghost")
    press(app, b.key, b.mods)
    ens = app.session.ensemble
    assert ens is not None and app.ghost is None
    assert [m.name for m in ens.members] == NAMES
    run(app, 2)
    assert all(m.world.t == pytest.approx(app.world.t) for m in ens.members)
    press(app, b.key, b.mods)
    assert app.session.ensemble is None


CHECKS = {name[len("check_"):]: fn for name, fn in globals().items()
          if name.startswith("check_")}


def test_every_action_in_the_keymap_has_a_check():
    assert {b.action for b in KEYMAP} <= set(CHECKS)


@pytest.mark.parametrize("binding", KEYMAP, ids=[f"{key_label(b)}:{b.action}" for b in KEYMAP])
def test_key_does_what_its_help_says(app, binding):
    assert lookup(binding.key, binding.mods) is binding
    CHECKS[binding.action](app, binding)


def test_help_lists_every_binding_from_the_one_table(app):
    text = " ".join(f"{k} {t}" for k, t in help_lines())
    for b in KEYMAP:
        assert key_label(b) in text and b.help in text
    app.do("toggle_help")
    app.frame(H)                                # drawing the overlay does not fail
    assert app._draw_error is None


def test_modifier_locks_do_not_change_a_key(app):
    press(app, pygame.K_i, pygame.KMOD_CAPS | pygame.KMOD_NUM)
    assert app.integrator == NAMES[(NAMES.index("tcv_corrected") + 1) % len(NAMES)]


# --------------------------------------------------------------------------- the mouse

def free_particle(app: App) -> int:
    """A movable particle in the middle of the cloth."""
    x = app.world.particles.x
    return int(np.argmin(np.sum((x - x.mean(axis=0)) ** 2, axis=1)))


def test_drag_pulls_the_grabbed_particle_with_a_spring_that_cannot_tear_the_cloth(app):
    run(app, 2)
    k = free_particle(app)
    start = app.camera.to_screen(app.world.particles.x[k])
    target = (round(start[0]) + 60, round(start[1]) - 45)
    ev.post(ev.button_down(start), ev.motion(target, (60, -45), (1, 0, 0)))
    d0 = np.linalg.norm(app.camera.to_screen(app.world.particles.x[k]) - target)
    run(app, 60)
    assert app.grabbed == k and k in app.world.grabbed
    got = app.camera.to_screen(app.world.particles.x[k])
    # The cloth (pinned at its corners) follows the hand most of the way...
    assert np.linalg.norm(got - target) < 0.5 * d0
    # ...pulled by a spring, not a kinematic pin: it is still movable and the hand's
    # force never exceeds its cap (what that does to the links: tests/test_mouse.py).
    m = app.world.mouse
    assert app.world.particles.inv_mass[k] > 0
    assert np.linalg.norm(m.force(app.world.particles.h_prev)) <= m.max_force * (1 + 1e-9)
    ev.post(ev.button_up(target))
    app.frame(H)
    assert not app.world.grabbed and app.grabbed is None and app.world.mouse is None
    assert app.world.particles.inv_mass[k] > 0


def test_a_pinned_particle_is_not_grabbed(app):
    pins = np.flatnonzero(app.world.particles.inv_mass == 0)
    pos = app.camera.to_screen(app.world.particles.x[pins[0]])
    ev.post(ev.button_down(pos), ev.motion((pos[0] + 40, pos[1] + 40), (40, 40), (1, 0, 0)))
    run(app, 5)
    k = app.grabbed
    # A movable neighbour within the pick radius may be taken; never the pin itself.
    assert k is None or app.world.particles.inv_mass[k] > 0
    assert app.world.particles.x[pins[0]] == pytest.approx(
        app.scene.make_world().particles.x[pins[0]])


def test_right_click_toggles_a_pin(app):
    k = free_particle(app)
    pos = app.camera.to_screen(app.world.particles.x[k])
    ev.post(ev.button_down(pos, 3), ev.button_up(pos, 3))
    app.frame(H)
    assert app.world.particles.inv_mass[k] == 0
    x = app.world.particles.x[k].copy()
    run(app, 5)
    assert np.array_equal(app.world.particles.x[k], x)
    ev.post(ev.button_down(app.camera.to_screen(x), 3))
    app.frame(H)
    assert app.world.particles.inv_mass[k] > 0


def test_shift_drag_cuts_exactly_the_crossed_links(app):
    run(app, 5)
    x = app.world.particles.x
    mid_y = float(np.median(x[:, 1]))
    a_px = np.round(app.camera.to_screen([x[:, 0].min() - 0.3, mid_y + 0.031]))
    b_px = np.round(app.camera.to_screen([x[:, 0].max() + 0.3, mid_y - 0.047]))
    a, b = app.camera.to_world(a_px), app.camera.to_world(b_px)
    c = app.world.constraints
    crossed = c.crossing(x, a, b)
    keep = {(int(i), int(j)) for i, j in zip(c.i[~crossed], c.j[~crossed], strict=True)}
    assert crossed.sum() > 10
    drag(app, a_px, b_px, shift=True)
    app.frame(H)
    c = app.world.constraints
    assert {(int(i), int(j)) for i, j in zip(c.i, c.j, strict=True)} == keep
    assert len(c) == len(keep)


def test_wheel_zooms_about_the_cursor(app):
    cursor = (200, 150)
    ev.post(ev.motion(cursor))
    anchor = app.camera.to_world(cursor)
    scale = app.camera.scale
    ev.post(ev.wheel(2, cursor))
    app.frame(H)
    assert app.camera.scale == pytest.approx(scale * 1.15 ** 2)
    assert app.camera.to_world(cursor) == pytest.approx(anchor)


def test_middle_drag_pans(app):
    before = app.camera.center.copy()
    drag(app, (300, 300), (340, 280), button=2)
    app.frame(H)
    moved = (app.camera.center - before) * app.camera.scale
    assert moved == pytest.approx([-40, -20])         # the picture follows the mouse


# --------------------------------------------------------------------------- time

def test_pause_stops_time_and_a_step_advances_exactly_one_plan(app):
    app.do("cycle_timestep", +1)                       # variable: one plan per frame
    run(app, 3)
    press(app, pygame.K_SPACE)
    t, steps = app.world.t, app.world.steps
    run(app, 10, dt=0.05)
    assert (app.world.t, app.world.steps) == (t, steps)
    press(app, pygame.K_PERIOD, dt=0.05)
    assert app.world.steps - steps == len(app.last_plan) >= 1
    assert app.world.t == pytest.approx(t + sum(app.last_plan), abs=1e-12)
    t1 = app.world.t
    run(app, 5, dt=0.05)
    assert app.world.t == t1


def test_fixed_mode_draws_positions_interpolated_with_alpha(app):
    app.frame(1.5 * H)                                 # one step, half a step left over
    alpha = app.policy.alpha
    assert alpha == pytest.approx(0.5)
    before, x = app.session.x_before, app.world.particles.x
    drawn = app._positions(app.world, before)
    assert drawn == pytest.approx(before + 0.5 * (x - before))


def test_replay_plays_back_the_recorded_plans(app):
    app.set_timestep("variable")
    for dt in (0.011, 0.019, 0.016, 0.024, 0.013):
        app.frame(dt)
    recorded = [list(f) for f in app.trace.frames[-5:]]
    app.set_timestep("replay")
    plans = []
    for _ in range(len(app.trace.frames)):
        app.frame(0.5)                                 # the real dt is ignored
        plans.append(list(app.last_plan))
    assert plans[-5:] == recorded


@pytest.mark.parametrize("mode", list(TIMESTEPS))
def test_a_two_second_frame_keeps_the_state_finite_in_every_mode(app, mode):
    run(app, 10)                                       # something to replay
    app.set_timestep(mode)
    app.speed = 4.0
    t0 = app.world.t
    for _ in range(3):
        app.frame(2.0)
    assert app.banner is None and not app.paused
    x = app.world.particles.x
    assert np.isfinite(x).all()
    # At most 8 steps of 1/60 s a frame (fixed), 0.1 s (variable), one step (random,
    # replay): the cloth, hanging from its corners at y = 1 m, stays within metres.
    assert np.abs(x).max() < 10.0
    assert app.world.t - t0 <= 3 * 8 * H + 1e-9


# --------------------------------------------------------------------------- ghost

def test_ghost_agrees_while_integrators_agree_and_differs_after_a_switch(app):
    app.session._seed_ghost(app.integrator)        # G itself never picks the world's own
    assert app.ghost is not None and app.ghost.integrator.name == app.integrator
    k = free_particle(app)
    start = app.camera.to_screen(app.world.particles.x[k])
    drag(app, start, (start[0] + 50, start[1] + 20), frames_between=5)  # mirrored drag
    run(app, 10)
    assert app.world.state_hash() == app.ghost.state_hash()
    assert np.isfinite(app.graph.ordered()[-1, 3])     # the ghost's own energy line
    press(app, pygame.K_g, pygame.KMOD_SHIFT)          # the ghost switches integrator
    assert app.ghost.integrator.name != app.integrator
    run(app, 10)
    assert app.world.state_hash() != app.ghost.state_hash()
    assert not np.allclose(app.world.particles.x, app.ghost.particles.x, atol=0, rtol=0)


# --------------------------------------------------------------------------- never crash

def test_a_bad_level_returns_2_with_the_loaders_message(tmp_path, capsys):
    assert run_app("no_such_level") == 2          # bad input, as simulate says it
    err = capsys.readouterr().err
    assert "no_such_level" in err and "Traceback" not in err
    bad = tmp_path / "bad.toml"
    bad.write_text("[world]\niterations = -3\n")
    assert run_app(str(bad)) == 2
    err = capsys.readouterr().err
    assert "bad.toml" in err and "world.iterations" in err and "Traceback" not in err
    assert run_app("cloth", integrator="rk5") == 2
    assert "rk5" in capsys.readouterr().err


def test_run_app_opens_a_level_and_returns_0():
    import gc

    from sandbox.sim import backend
    gc.unfreeze()
    assert run_app("cloth", frames=3) == 0
    # The background warm-up switches the compiled kernels off until they are ready;
    # afterwards the process has them back (tests after this one compare them).
    assert backend.ready()
    # What the program loaded lives as long as it: out of the collector's sight, so a
    # full collection does not walk ~130,000 objects in the middle of a frame.
    assert gc.get_freeze_count() > 10_000
    gc.unfreeze()


def test_divergence_pauses_with_a_banner_and_R_resets(app, monkeypatch, capsys):
    run(app, 2)

    def explode(h):
        raise SimulationDiverged(1.25, "euler", h)

    monkeypatch.setattr(app.world, "step", explode)
    app.frame(H)
    assert app.paused
    title, detail = app.banner
    assert "Explicit Euler" in title and "16.667 ms" in detail and "1.2500" in detail
    assert "diverged" in capsys.readouterr().err
    press(app, pygame.K_r)
    assert app.banner is None and not app.paused and app.world.t > 0


def test_a_real_blow_up_is_caught_and_the_world_kept_finite(app):
    app.world.particles.x[5] = 1e300                   # squares overflow: non-finite step
    app.frame(H)
    assert app.paused and "diverged" in app.banner[0]
    assert np.isfinite(app.world.particles.x[np.arange(app.world.n) != 5]).all()


def test_an_impossible_energy_jump_pauses(app):
    run(app, 2)
    app.world.particles.v[:] = 3e3                     # 0.5 * 3 kg * (4.2 km/s)^2
    app.world.start(H)
    app.frame(H)
    assert app.paused and "energy jumped" in app.banner[1]


def test_a_ghost_that_blows_up_is_switched_off_not_the_world(app):
    app.do("toggle_ghost")
    app.ghost.particles.v[:] = 3e3
    app.ghost.start(H)
    app.frame(H)
    assert app.ghost is None and not app.paused and app.banner is None
    assert "ghost" in app.messages[-1][0] and app.messages[-1][2]


def test_failing_commands_become_messages_never_exceptions(app, monkeypatch, tmp_path):
    def broken(world, path):
        raise OSError("disk full")

    monkeypatch.setattr(snapshot, "save", broken)
    press(app, pygame.K_F5)
    assert "disk full" in app.messages[-1][0] and app.messages[-1][2]
    snaps = app.out_dir / "snapshots"
    snaps.mkdir(parents=True, exist_ok=True)
    (snaps / "snapshot-20990101-000000.npz").write_bytes(b"not a snapshot")
    h = app.world.state_hash()
    press(app, pygame.K_F9, dt=0.0)
    assert app.world.state_hash() == h and "not a readable snapshot" in app.messages[-1][0]
    app.do("no_such_action")
    assert app.running and app.messages[-1][2]


def test_random_input_never_raises(app):
    rng = np.random.default_rng(1)
    keys = [b.key for b in KEYMAP if b.action not in ("quit", "level", "screenshot")]
    mods = [0, pygame.KMOD_SHIFT, pygame.KMOD_CTRL]
    for _ in range(150):
        pos = (int(rng.integers(-50, SIZE[0] + 50)), int(rng.integers(-50, SIZE[1] + 50)))
        kind = rng.integers(5)
        if kind == 0:
            press(app, int(rng.choice(keys)), int(rng.choice(mods)), dt=float(rng.uniform(0, .1)))
            continue
        if kind == 1:
            if rng.integers(2):
                ev.post(ev.key_down(pygame.K_LSHIFT, pygame.KMOD_LSHIFT))
            ev.post(ev.button_down(pos, int(rng.integers(1, 4))))
        elif kind == 2:
            ev.post(ev.motion(pos), ev.key_up(pygame.K_LSHIFT))
        elif kind == 3:
            ev.post(ev.button_up(pos, int(rng.integers(1, 4))))
        else:
            ev.post(ev.wheel(int(rng.integers(-3, 4)), pos))
        app.frame(float(rng.choice([H, 0.0, 0.3, -1.0, math.nan])))
    assert app.running
    assert np.isfinite(app.world.particles.x).all() or app.banner is not None


# --------------------------------------------------------------------------- pieces

def test_camera_round_trip_and_y_flip():
    cam = Camera((800, 600), center=(1.0, 2.0), width=8.0)
    assert cam.to_screen([1.0, 2.0]) == pytest.approx([400, 300])
    assert cam.to_screen([1.0, 3.0])[1] < 300          # up in the world is up on screen
    pts = np.random.default_rng(0).normal(size=(50, 2))
    assert cam.to_world(cam.to_screen(pts)) == pytest.approx(pts)


def test_raster_draws_clipped_gapless_lines_and_ignores_non_finite():
    pix = np.zeros((20, 30), np.uint32)
    raster.segments(pix, np.array([[2.0, 3.0]]), np.array([[12.0, 3.0]]), 7)
    assert np.flatnonzero(pix[3]).tolist() == list(range(2, 13))
    pix[:] = 0
    raster.segments(pix, np.array([[-1e9, 5.0]]), np.array([[1e9, 5.0]]), 1)
    assert (pix[5] == 1).all() and pix.sum() == 30
    pix[:] = 0
    raster.segments(pix, np.array([[0.0, 0.0]]), np.array([[29.0, 19.0]]), 1)
    ys, xs = np.nonzero(pix)
    assert len(set(xs.tolist())) == 30                # one pixel per column: no gap
    pix[:] = 0
    raster.segments(pix, np.array([[np.nan, 0.0], [1e308, -1e308]]),
                    np.array([[3.0, 3.0], [-1e308, 1e308]]), 1)
    assert pix.sum() == 0


@pytest.mark.parametrize("name", level_names())
def test_every_shipped_level_draws_without_a_drawing_error(name, tmp_path):
    """Levels without links (the pile, the orbit) once drew "drawing failed": the
    renderer gave the HUD no strain array. Every level must draw its frames cleanly."""
    app = App(scene_from_level(name), size=SIZE, out_dir=tmp_path)
    for _ in range(3):
        app.frame(H)
    assert app._draw_error is None
    assert len(app._view.strain()) == len(app.world.constraints)


@pytest.mark.parametrize("width", [40, 120, 300, 900])
def test_wrap_text_fits_the_width_and_keeps_every_word(width):
    from sandbox.app.hud import Fonts, wrap_text
    pygame.font.init()
    font = Fonts().text
    text = ("cloth 200x200 structural + shear, 20x1: 40,000 particles and 158,802 "
            "structural and shear links, pinned at five points along the top; "
            "a_single_word_longer_than_any_narrow_line_can_hold")
    lines = wrap_text(font, text, width)
    assert all(font.size(ln)[0] <= width for ln in lines), lines
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    if width >= 900:
        assert len(lines) == 2                    # breaks only where it must


def test_a_long_caption_stays_left_of_the_control_panel(tmp_path):
    """Opened at 1280x800 the level's description and hint wrap inside the scene's area
    instead of running under the panel column (seen on bench:cloth200_shear)."""
    a = ev.window_app("bench:cloth200_shear", tmp_path, (1280, 800))
    a.frame(1 / 60)
    assert a.messages and a.show_panel
    right = a.safe_area()[2]
    surf = pygame.Surface((1280, 800))
    rect = a.overlay.messages(surf, [(m[0], m[2]) for m in a.messages], width=right - 16)
    assert rect is not None and rect.right <= right, (rect, right)


@pytest.mark.parametrize("level, split", [("pendulums", True), ("bench:soft_blob", True),
                                          ("rope", True), ("bench:cloth200", False)])
def test_the_energy_ledger_runs_only_where_the_hud_can_show_it(tmp_path, level, split):
    """The ledger costs the compiled frame (two energy evaluations a substep): on up to
    the particle limit, where the HUD splits the energy (springs, soft links and gas
    too: what soft links store has its own line, springs and gas are forces the
    integrator steps), off above it, saying so."""
    a = ev.window_app(level, tmp_path, (1280, 800))
    a.frame(1 / 60)
    line = a._energy_line()
    text = line[0] if isinstance(line, tuple) else line
    assert (a.world.ledger is not None) == split, (level, text)
    if split:
        assert "integrator" in text and "solver" in text
        assert ("in soft links" in text) == bool(a.world.constraints.compliant), text
        assert ("drag" in text) == bool(a.world.config.drag), text
    else:
        assert a.world.n > a.LEDGER_LIMIT and "above" in text


def test_the_energy_split_is_dropped_when_it_costs_the_frame_rate(tmp_path, monkeypatch):
    """The ledger keeps a world on the substep path: after ``LEDGER_PATIENCE`` frames in
    a row over ``LEDGER_BUDGET_S`` (here every frame: a budget of 0) with the kernels
    loaded and no hand, the split is off for the level, and the HUD and a message say
    so; a reset keeps it off, another level measures again. Frames on the numpy
    references (the parts not ready, or the world's float type held: a float64 level
    after the float32 cloth, on the cradle the split went off for good on its numpy
    frames) or with a hand never count."""
    from sandbox.app import main as app_main
    from sandbox.sim import backend

    if not backend.INSTALLED:
        pytest.skip("numba is not installed: every frame runs numpy")
    monkeypatch.setattr(app_main.App, "LEDGER_BUDGET_S", 0.0)
    a = ev.window_app("rope", tmp_path, (1280, 800))
    patience = a.LEDGER_PATIENCE
    try:
        backend.set_ready(False)
        for _ in range(2 * patience):           # kernels still loading: never counted
            a.frame(1 / 60)
        assert a.world.ledger is not None
        backend.set_ready(True)
        backend.hold("float64", part="kernels")     # its own float type: not yet
        for _ in range(2 * patience):
            a.frame(1 / 60)
        assert a.world.ledger is not None
        backend.hold("float64", False)
        k = int(np.argmax(a.world.particles.inv_mass))
        a.world.grab(k)
        for _ in range(2 * patience):           # a hand: the substep path anyway
            a.frame(1 / 60)
        assert a.world.ledger is not None
        a.world.release()
        for _ in range(patience - 1):
            a.frame(1 / 60)
        assert a.world.ledger is not None
        a.frame(1 / 60)
        assert a.world.ledger is None
    finally:
        backend.set_ready(True)
    line = a._energy_line()
    assert "split off" in line[0] and "ms of steps a frame" in line[0]
    assert any("energy split off" in m[0] for m in a.messages)
    a.reset()
    a.frame(1 / 60)
    assert a.world.ledger is None
    a.set_level("rope")
    assert a.world.ledger is not None and "integrator" in a._energy_line()


def test_all_integrators_slow_down_only_for_frames_on_the_compiled_kernels(tmp_path,
                                                                            monkeypatch):
    """A (every integrator side by side) goes to slow motion after
    ``ENSEMBLE_PATIENCE`` frames in a row over its budget (here every frame: a budget
    of 0), but only frames on the compiled kernels count, for the world's own parts and
    float type (``Session.compiled_now``, the energy split's test too): its numpy
    frames while a float64 level's kernels still compiled after the float32 cloth
    slowed it for nothing."""
    from sandbox.app import session as S
    from sandbox.sim import backend

    if not backend.INSTALLED:
        pytest.skip("numba is not installed: every frame runs numpy")
    monkeypatch.setattr(S, "ENSEMBLE_BUDGET_S", 0.0)
    a = ev.window_app("pendulums", tmp_path, (1280, 800))
    a.do("toggle_ensemble")
    assert a.session.ensemble is not None
    speed = a.session.speed
    try:
        backend.set_ready(True)
        backend.hold("float64", part="kernels")     # its own float type: not yet
        for _ in range(2 * S.ENSEMBLE_PATIENCE):
            a.frame(1 / 60)
        assert a.session.speed == speed and a.session.ensemble is not None
        backend.hold("float64", False)
        for _ in range(S.ENSEMBLE_PATIENCE):
            a.frame(1 / 60)
    finally:
        backend.set_ready(True)
    assert a.session.speed == speed / 2
    assert any("slow motion" in m[0] for m in a.messages)


def test_small_first_worlds_start_on_numpy_and_big_ones_compiled():
    """With a warm kernel cache the playground's first frame runs numpy (a few ms)
    instead of starting numba on its first call; the 200x200 cloth, whose numpy frame
    takes most of a second, loads the kernels at once."""
    from sandbox.app.main import is_small
    from sandbox.levels import build_world, find_level, load_level
    small = {name: is_small(build_world(load_level(find_level(name))))
             for name in ("playground", "pendulums", "cloth_200", "bench:cloth200_shear")}
    assert small == {"playground": True, "pendulums": True, "cloth_200": False,
                     "bench:cloth200_shear": False}


def test_a_session_that_cannot_keep_up_takes_one_frame_of_steps_not_a_spiral(app):
    """While a frame's steps take longer than they simulate (numpy frames while the
    kernels load), the next frame simulates at most ``CATCH_UP_S`` and drops the rest,
    instead of ever more steps in ever longer frames; once the steps are fast again the
    frame time is simulated in full. The clock is the session's, advanced by the steps."""
    from sandbox.app import session as S
    s = app.session
    s.policy = FixedStep(H, max_steps=8)
    now = [0.0]
    cost = [0.0]                          # seconds of computing a step
    step = s.world.step

    def slow(h):
        now[0] += cost[0]
        step(h)
    s.world.step = slow
    s.clock = lambda: now[0]
    cost[0] = 0.001
    s.update(4 * H)                       # fast steps: the whole frame, four steps
    assert s.last_plan == [H] * 4 and not s.behind
    cost[0] = 3 * H                       # a step now takes three times what it simulates
    s.update(4 * H)
    assert s.last_plan == [H] * 4 and s.behind          # 4 steps took 12 H of real time
    dropped = s.policy.book.dropped
    s.update(12 * H)                      # the frame those steps made
    assert s.last_plan == [H] and s.behind               # one step, not eight
    assert s.policy.book.dropped == pytest.approx(dropped + 12 * H - S.CATCH_UP_S)
    cost[0] = 0.001
    s.update(3 * H)
    assert s.last_plan == [H] and not s.behind           # still the limited frame
    s.update(3 * H)
    assert s.last_plan == [H] * 3                        # then real time again
    b = s.policy.book
    assert b.real == pytest.approx(b.simulated + s.policy.pending + b.dropped)


def test_a_first_world_run_compiled_is_drawn_before_the_kernels_load(monkeypatch):
    """With a warm cache a big first world runs compiled from its first step, and the
    first call imports numba and loads the kernels (~0.9 s). The first frame (no step
    yet) is drawn on numpy before that, so the window is not black meanwhile; the
    second frame has the compiled kernels."""
    import gc

    from sandbox.app import main as M
    from sandbox.sim import backend

    class WarmCache:                 # a warm-up whose kernels are used from the start
        ready, done, warm, numpy_first, phase = False, False, True, False, "loading"
        ready_parts: set = set()
        contact_dtypes = ("float64",)

        def status(self):
            return "loading kernels"

        def need_dtype(self, dtype):
            return False

        def need_contacts(self, dtype):
            return False

        def close(self):
            pass

    def start(dtype="float64", small=False, contacts=True):
        assert contacts                                   # the rope has walls
        backend.set_ready(True)
        return WarmCache()

    seen = []
    frame = M.App.frame

    def spy(self, dt):
        seen.append((backend.usable("kernels"), backend.usable("contacts")))
        frame(self, dt)
    monkeypatch.setattr(M, "start_kernels", start)
    monkeypatch.setattr(M.App, "frame", spy)
    try:
        assert run_app("rope", frames=2) == 0
    finally:
        gc.unfreeze()
    assert seen == [(False, False), (True, True)]


def test_the_first_level_with_contacts_starts_their_compiling(tmp_path):
    """Opened on a level without contacts, the window's warm-up leaves the contact
    stages out (most of the compiling); switching to a level with contacts starts them
    behind the frames, once, and the HUD shows the warm-up's status again."""
    from sandbox.app.main import App, scene_from_level

    class Handle:
        contact_dtypes: tuple = ()
        done, ready, ready_parts = True, True, {"kernels"}
        asked = 0

        def need_contacts(self, dtype):       # as Warmup's: True once per float type
            self.asked += 1
            if str(dtype) in self.contact_dtypes:
                return False
            self.contact_dtypes, self.done = self.contact_dtypes + (str(dtype),), False
            return True

        def need_dtype(self, dtype):
            self.types.add(str(dtype))
            return False                                   # every level here is float64

        def status(self):
            return "first start: building fast collisions (1 s)"

    pygame.display.init()
    pygame.display.set_mode((1280, 800))
    h = Handle()
    h.types = set()
    app = App(scene_from_level("pendulums"), size=(1280, 800), out_dir=tmp_path, kernels=h)
    assert not app.world.has_contacts
    for _ in range(3):
        app.frame(H)
    assert h.asked == 0
    app.do("set_level", "pile")
    app.frame(H)
    assert h.asked == 1 and app.kernels is h
    assert h.contact_dtypes == ("float64",)                # the world's float type
    for _ in range(3):
        app.frame(H)
    assert h.contact_dtypes == ("float64",)                # started once
    assert h.types == {"float64"}       # the world's float type is asked for too

