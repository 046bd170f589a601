"""The graph of any quantity under the panel (issue 37), in the window, headless: driven
by real-shaped key and mouse events (tests/events.py), checked by what the graph's
layout says it drew (its axis labels, its curves, its ticks), and kept in a replay.
"""

from __future__ import annotations

import math

import events as ev
import numpy as np
import pygame
import pytest

from sandbox import quantities as Q
from sandbox.app.main import App
from sandbox.replay import load, play
from sandbox.sim.integrators import INTEGRATORS

H = 1 / 60
SIZE = (1280, 800)


def open_app(level: str, tmp_path, frames: int = 5) -> App:
    app = ev.window_app(level, tmp_path, SIZE)
    for _ in range(frames):
        app.frame(H)
    return app


def press(app: App, key: int, mod: int = 0, frames: int = 3) -> None:
    ev.press(key, mod)
    for _ in range(frames):
        app.frame(H)


def drawn(app: App) -> dict:
    """What the graph drew last frame: its axis words and its curves' sample counts."""
    lay = app.plot.layout
    assert lay is not None and app._draw_error is None
    return {"y": lay.ylabel[1] if lay.ylabel else None, "x": lay.xlabel[1],
            "curves": {k: int(np.isfinite(s[2]).sum()) for k, s in lay.series.items()},
            "note": " ".join(t for _, t, _ in lay.note)}


def test_the_first_screen_is_the_phase_portrait_under_the_panel_and_the_energy_graph(
        tmp_path):
    app = open_app("pendulums", tmp_path, frames=30)
    c = app.session.plot
    assert c.auto and c.phase_axis() is not None          # nobody chose: the portrait
    k = app.session.followed
    coord = "xy"[c.phase_axis()]
    seen = drawn(app)
    assert seen["y"] == f"v{coord} of particle {k} (m/s)" and seen["x"] == f"{coord} (m)"
    assert seen["curves"]["world"] >= 25                   # sampled every frame
    assert app.graph.count >= 25                           # the energy graph too
    assert app.plot.layout.rect.top > app.panel.container.get_abs_rect().bottom


def test_keys_switch_the_quantity_and_the_axis_and_the_graph_draws_them(tmp_path):
    app = open_app("pendulums", tmp_path)
    before = app.session.plot.y
    press(app, pygame.K_u)                                 # U: the next quantity
    y = app.session.plot.y
    assert y == Q.cycle(Q.QUANTITIES, before, +1, app.plot._usable) and y != before
    assert drawn(app)["y"] == Q.QUANTITIES[y].axis(app.session.followed)
    while app.session.plot.y != "total":                   # U round to the total energy
        press(app, pygame.K_u, frames=1)
    seen = []
    while app.session.plot.x != "time":                    # J round to time, the first
        press(app, pygame.K_j, frames=1)
        seen.append(app.session.plot.x)
    assert len(seen) <= len(Q.AXES) and "truth_error" not in seen   # only what applies
    for _ in range(20):
        app.frame(H)
    seen = drawn(app)
    assert (seen["y"], seen["x"]) == ("total energy (J)", "time (s)")
    assert seen["curves"]["world"] >= 15
    e = app.world.energy()["total"]
    assert app.plot.layout.series["world"][2][-1] == pytest.approx(e, rel=1e-9, abs=1e-9)
    lo, hi = app.plot.layout.yrange
    assert lo < e < hi                                     # autoscaled around it
    assert len([r for *_, r, _ in app.plot.layout.yticks if r is not None]) >= 2
    press(app, pygame.K_u, pygame.KMOD_ALT)                # Alt+U: log |y|
    assert app.session.plot.log and "log |y|" in drawn(app)["y"]
    press(app, pygame.K_u, pygame.KMOD_SHIFT)              # Shift+U: back one, log kept
    assert app.session.plot.y == "potential"
    press(app, pygame.K_f)                                 # F: the phase portrait again
    c = app.session.plot
    assert (c.y, c.x) == ("vx", "x") and not c.auto
    assert drawn(app)["x"] == "x (m)"
    assert "graph: vx against x" in app.messages[-1][0]


def test_the_pickers_choose_with_the_mouse_alone(tmp_path):
    app = open_app("springs", tmp_path)
    panel = app.panel
    assert panel.plot_picker is not None
    assert panel.plot_picker.colliderect(app.plot.layout.header)

    def pick(attr: str, text: str) -> None:
        menu = getattr(panel, attr)
        ev.click(app, menu.get_abs_rect().center)
        menu = getattr(panel, attr)
        assert menu.current_state is menu.menu_states["expanded"], attr
        listing = menu.current_state.options_selection_list
        assert pygame.Rect((0, 0), SIZE).contains(listing.get_abs_rect())
        item = next(i for i in listing.item_list if i["text"] == text)
        ev.click(app, item["button_element"].get_abs_rect().center)

    pick("plot_y", "E drift")
    pick("plot_x", "time")
    c = app.session.plot
    assert (c.y, c.x, c.log) == ("drift", "time", True)    # the drift: log by default
    assert panel.plot_log.text == "log"
    ev.click(app, panel.plot_log.get_abs_rect().center)
    assert not app.session.plot.log and panel.plot_log.text == "lin"
    for _ in range(20):
        app.frame(H)
    seen = drawn(app)
    assert seen["y"] == "E - E0, since the marker (J)" and seen["x"] == "time (s)"
    assert app.plot.layout.series["world"][2][0] == 0.0     # from zero at its start
    assert app.input.grabbed is None                        # no click reached the scene
    press(app, pygame.K_u)                                  # a key: the picker follows
    assert panel.plot_y.selected_option[0] == Q.QUANTITIES[app.session.plot.y].label


def test_every_integrator_and_the_truth_on_one_graph(tmp_path):
    app = open_app("springs", tmp_path)
    press(app, pygame.K_a)                                  # all integrators side by side
    assert app.session.ensemble is not None
    app.do("plot_y", "truth_error")
    app.do("plot_x", "time")
    for _ in range(40):
        app.frame(H)
    seen = drawn(app)
    assert set(seen["curves"]) == set(INTEGRATORS)          # one curve each, no world
    lay = app.plot.layout
    assert lay.log and all(lay.series[k][2].size for k in INTEGRATORS)
    from sandbox.app.hud import ensemble_colour
    spec = app.plot.spec()
    assert all(spec.colours[k] == ensemble_colour(k) for k in INTEGRATORS)
    assert all(float(v).is_integer() for v, *_ in lay.yticks)   # whole decades
    app.do("plot_y", "speed")
    app.frame(H)
    assert set(drawn(app)["curves"]) == {"world", "truth", *INTEGRATORS}
    press(app, pygame.K_a)                                  # off: the graph says why
    app.do("plot_y", "truth_error")
    app.frame(H)
    assert "needs every integrator side by side (A)" in drawn(app)["note"]
    assert drawn(app)["curves"] == {}


def test_a_setting_changed_breaks_the_curves_as_the_energy_graph_segments(tmp_path):
    app = open_app("springs", tmp_path)
    app.do("plot_y", "drift")
    app.do("plot_x", "time")
    for _ in range(10):
        app.frame(H)
    app.do("set_integrator", "euler")                       # a marker on the energy graph
    for _ in range(10):
        app.frame(H)
    t, _, y, brk = app.plot.graph.curves["world"].ordered()
    starts = np.flatnonzero(brk)
    assert starts.tolist() == [0, 10]                       # the new run starts there
    assert y[0] == y[10] == 0.0 and y[9] != 0.0             # E - E0 from the marker
    assert len(app.plot.graph.marks) == 1 and t[9] <= app.plot.graph.marks[0] <= t[10]
    app.do("reset")
    app.frame(H)
    assert app.plot.graph.curves["world"].count == 1         # a new world: a new graph


def test_the_graph_choice_and_the_followed_particle_are_replayed(tmp_path):
    app = open_app("springs", tmp_path)
    k = int(np.flatnonzero(app.world.particles.inv_mass > 0)[-1])
    pos = app.camera.to_screen(app.world.particles.x[k])
    ev.post(ev.motion(pos), ev.button_down(pos), ev.button_up(pos))   # a click follows
    app.frame(H)
    assert app.session.followed == k
    press(app, pygame.K_u)
    press(app, pygame.K_j)
    press(app, pygame.K_u, pygame.KMOD_ALT)
    chosen = app.session.plot
    for _ in range(10):
        app.frame(H)
    path = app.session.save_replay(tmp_path / "replays")
    rep = load(path)
    ops = [e[1:] for e in rep.events if e[1] in ("plot", "follow")]
    assert ops[0] == ["follow", k] and ops[-1] == ["plot", *chosen.args()]
    assert play(rep).state_hash() == app.world.state_hash()    # the world is unchanged
    # In the window: the same graph.
    from sandbox.app.session import scene_from_spec
    from sandbox.levels import parse_level
    again = App(scene_from_spec(parse_level(rep.level.text, "r"), path, None), size=SIZE,
                out_dir=tmp_path)
    again.session.play_replay(rep)
    assert again.session.plot != chosen
    for _ in range(len(rep.frames) + 1):
        again.frame(H)
    assert again.session.plot == chosen and again.session.followed == k
    assert drawn(again)["y"] == drawn(app)["y"]


def test_hidden_the_graph_samples_nothing_and_chosen_by_key_it_shows(tmp_path):
    app = open_app("springs", tmp_path)
    press(app, pygame.K_f, pygame.KMOD_SHIFT)
    assert not app.show_plot and app.plot_header() is None and app.panel.plot_picker is None
    calls = []
    app.plot._add = lambda fr: calls.append(fr)
    for _ in range(5):
        app.frame(H)
    assert calls == []
    press(app, pygame.K_u)                                  # choosing shows it again
    assert app.show_plot and app.panel.plot_picker is not None
    assert math.isfinite(app.plot.layout.yrange[0])


def test_the_pickers_show_the_choice_from_the_start_so_picking_time_takes(tmp_path):
    """On a level where nothing moves the choice (a cloth: no particle stands out, the
    portrait's coordinate never switches), the pickers were built showing their first
    options, "kinetic E" and "time": picking "time" was no change to the drop-down, so
    no command ran, and the drop-down said "time" over a graph against x (seen on
    cloth_200 under Xvfb)."""
    from sandbox.app.main import scene_from_world
    from sandbox.sim.builders import build_cloth
    from sandbox.sim.world import World, WorldConfig
    world = World(WorldConfig(iterations=4))
    build_cloth(world, cols=12, rows=8, spacing=0.1, origin=(-0.6, 1.0), pins="top_corners")
    app = ev.window_app(scene_from_world(world, h=H, view=((0.0, 0.6), 3.0)), tmp_path,
                        SIZE)
    for _ in range(3):
        app.frame(H)
    assert app.session.followed is None and app.session.plot == Q.DEFAULT
    panel = app.panel
    assert panel.plot_y.selected_option[0] == "vx"
    assert panel.plot_x.selected_option[0] == "x"
    menu = panel.plot_x
    ev.click(app, menu.get_abs_rect().center)
    listing = panel.plot_x.current_state.options_selection_list
    item = next(i for i in listing.item_list if i["text"] == "time")
    ev.click(app, item["button_element"].get_abs_rect().center)
    assert app.session.plot.x == "time" and drawn(app)["x"] == "time (s)"
