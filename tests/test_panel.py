"""The control panel, operated with the mouse alone (real-shaped events, headless).

pygame_gui answers a click over several frames (press -> its own events -> the
command), so each click is followed by a few frames, as at a real window.
"""

from __future__ import annotations

import math

import events as ev
import pygame
import pytest
from pygame_gui.elements import UILabel

from sandbox.app.main import App
from sandbox.app.panel import GHOST_OFF, integrator_option
from sandbox.sim.integrators import INTEGRATORS

H = 1 / 60
SIZE = (1280, 800)


@pytest.fixture
def app(tmp_path) -> App:
    a = ev.window_app("pendulums", tmp_path, SIZE)
    for _ in range(3):
        a.frame(H)
    return a


click = ev.click


def pick(app: App, menu, text: str) -> None:
    """Open a drop-down and click the option ``text``."""
    click(app, menu.get_abs_rect().center)
    menu = next(m for m in (app.panel.integrator, app.panel.timestep, app.panel.ghost,
                            app.panel.level) if m.current_state is m.menu_states["expanded"])
    items = menu.current_state.options_selection_list.item_list
    button = next(i["button_element"] for i in items if i["text"] == text)
    click(app, button.get_abs_rect().center)


def test_every_integrator_is_offered_with_its_order_and_symplecticity(app):
    for name, integ in INTEGRATORS.items():
        option = integrator_option(name)
        assert integ.label in option and f"· {integ.order}" in option
        assert ("sympl." in option) == integ.symplectic


def test_buttons_pause_step_and_reset(app):
    click(app, app.panel.pause.get_abs_rect().center)
    assert app.paused and app.panel.pause.text == "Run"
    steps = app.world.steps
    click(app, app.panel.step.get_abs_rect().center, frames=3)
    assert app.world.steps > steps and app.paused
    old = app.world
    click(app, app.panel.reset.get_abs_rect().center, frames=2)
    assert app.world is not old and not app.paused        # rebuilt, running


def test_the_integrator_and_timestep_pickers(app):
    pick(app, app.panel.integrator, integrator_option("rk4"))
    assert app.integrator == "rk4"
    pick(app, app.panel.timestep, "random")
    assert app.timestep == "random"
    app.do("set_integrator", "verlet")                  # a hotkey: the panel follows
    app.frame(H)
    assert app.panel.integrator.selected_option[0] == integrator_option("verlet")


def test_the_ghost_picker(app):
    pick(app, app.panel.ghost, integrator_option("euler"))
    assert app.ghost is not None and app.ghost.integrator.name == "euler"
    pick(app, app.panel.ghost, GHOST_OFF)
    assert app.ghost is None


def test_slider_arrows_change_substeps_and_steps_per_second(app):
    slider = app.panel.sliders["substeps"][0]
    before = app.world.config.substeps
    click(app, slider.right_button.get_abs_rect().center)
    assert app.world.config.substeps == before + 1
    hz = app.panel.sliders["hz"][0]
    h = app.policy.nominal_h
    click(app, hz.left_button.get_abs_rect().center)
    assert 1 / app.policy.nominal_h == pytest.approx(round(1 / h) - 1)
    speed = app.panel.sliders["speed"][0]
    click(app, speed.right_button.get_abs_rect().center)
    assert app.speed == 2.0 and math.log2(app.speed) == speed.get_current_value()


def test_the_level_picker(app):
    pick(app, app.panel.level, "cloth")
    assert app.scene.source == "cloth" and app.panel.level.selected_option[0] == "cloth"


def test_a_click_on_the_panel_never_reaches_the_scene(app):
    """A press on the panel over a particle's screen position grabs nothing."""
    r = app.panel.container.get_abs_rect()
    pos = (r.x + 4, r.bottom - 4)
    k = app.world.nearest_movable(app.camera.to_world(pos), 1e9)
    app.world.particles.x[k] = app.camera.to_world(pos)
    ev.post(ev.motion(pos), ev.button_down(pos))
    app.frame(H)
    assert app.grabbed is None and app.world.mouse is None
    ev.post(ev.button_up(pos))
    app.frame(H)


def test_tab_hides_the_panel_and_the_view_grows(app):
    w = app.safe_area()[2]
    app.do("toggle_panel")
    app.do("toggle_plot")
    assert app.safe_area()[2] == SIZE[0] > w
    app.frame(H)
    assert app._draw_error is None


def test_the_level_picker_names_a_benchmark_scene_and_a_file_elsewhere(tmp_path):
    """A level that is not in the list (``play bench:NAME``, a saved file) is shown by the
    name that opens it again, not as the list's first level."""
    import shutil

    from sandbox.levels import LEVELS_DIR
    mine = tmp_path / "mine.toml"
    shutil.copy(LEVELS_DIR / "rope.toml", mine)
    for source, shown in (("bench:cloth50", "bench:cloth50"), (str(mine), str(mine)),
                          ("levels/cloth.toml", "cloth")):
        a = ev.window_app(source, tmp_path, SIZE)
        a.frame(H)
        assert a.panel.level.selected_option[0] == shown, source
        assert [o[0] for o in a.panel.level.options_list].count(shown) == 1, source
    pick(a, a.panel.level, "rope")
    assert a.scene.source == "rope" and a.panel.level.selected_option[0] == "rope"


def open_world(app: App) -> None:
    """Click the panel's "world" button (scrolled to first where the panel scrolls)."""
    button = app.panel.world
    if app.panel.scroller is not None:
        app.panel.scroll_to(button.get_relative_rect().y)
        app.frame(H)
    click(app, app.panel.world.get_abs_rect().center, frames=3)


def test_every_world_setting_has_a_slider_within_its_limits_and_its_keys(app):
    """One row of ``settings.SETTINGS`` makes a slider (the level schema's range, the
    row's keys in its label) and key bindings: the air drag slider moves the world's
    drag by its step, and D / Shift+D move it as the slider shows."""
    from sandbox.app import keymap
    from sandbox.settings import SETTINGS

    open_world(app)
    for name, st in SETTINGS.items():
        slider = app.panel.sliders[name][0]
        # A ladder's slider stands on its rungs (the link softness: 0, 0.1, ... 100).
        want = (0, len(st.ladder) - 1) if st.ladder else st.limits
        assert tuple(slider.value_range) == want, name
        assert not st.ladder or (st.ladder[0], st.ladder[-1]) == st.limits
        actions = {(b.action, b.arg) for b in keymap.KEYMAP}
        assert {("change_setting", (name, +1)), ("change_setting", (name, -1))} <= actions
    slider = app.panel.sliders["drag"][0]
    before = app.world.config.drag
    click(app, slider.right_button.get_abs_rect().center)
    assert app.world.config.drag == pytest.approx(before + SETTINGS["drag"].step)
    ev.press(pygame.K_d)
    for _ in range(3):
        app.frame(H)
    assert app.world.config.drag == pytest.approx(before + 2 * SETTINGS["drag"].step)
    assert slider.get_current_value() == pytest.approx(app.world.config.drag)
    assert app.panel.sliders["iterations"][0].value_range == (1, 200)   # was 1..100


def test_the_world_section_opens_with_its_sliders_and_closes(app):
    """Closed at first: the panel is no taller than the solver's rows (it does not
    scroll at 1280 x 800) and shows no world slider. A click on "▸ world" shows gravity,
    wind, air drag, bounce, friction and link softness under the button, in sight, each
    label with its keys; each slider's arrow moves its setting by one step (the link
    softness: a rung); the wind's label says it needs air drag while there is none, the
    link softness that the pendulums have no soft links. A second click closes it
    again."""
    from sandbox.settings import SETTINGS

    world_rows = [n for n, st in SETTINGS.items() if st.section == "world"]
    assert world_rows == ["gravity", "wind", "drag", "restitution", "friction",
                          "link_softness"]
    assert app.panel.scroller is None and not set(world_rows) & set(app.panel.sliders)
    assert app.panel.world.text.startswith("▸ world")
    open_world(app)
    assert app.panel.world.text.startswith("▾ world")
    assert set(world_rows) <= set(app.panel.sliders)
    view = app.panel.view_rect()
    for name in world_rows:
        slider, value, _ = app.panel.sliders[name]
        assert view.contains(slider.get_abs_rect()), name            # in sight, opened
        assert value.text == {"wind": "needs air drag", "link_softness": "no soft links"
                              }.get(name, SETTINGS[name].show(app.session.setting(name)))
    labels = [lab.text for lab in app.panel.container.get_container().elements
              if isinstance(lab, UILabel)] + [
        lab.text for lab in (app.panel.content.get_container().elements
                             if app.panel.scroller is not None else ())
        if isinstance(lab, UILabel)]
    assert "gravity  Y Shift+Y" in labels and "friction  K Shift+K" in labels
    assert "link softness  Z Shift+Z" in labels
    wind = app.panel.sliders["wind"][1]
    assert app.world.config.drag == 0 and wind.text == "needs air drag"
    for name in world_rows:
        st = SETTINGS[name]
        before = app.session.setting(name)
        click(app, app.panel.sliders[name][0].right_button.get_abs_rect().center)
        assert app.session.setting(name) == pytest.approx(st.stepped(before, +1)), name
    assert app.world.config.drag > 0 and wind.text == "1.0 m/s"
    assert app.world.config.gravity == pytest.approx((0.05 * 1.0, -(9.81 + 0.5)))
    open_world(app)                                                  # closes it
    assert app.panel.scroller is None and app.panel.world.text.startswith("▸ world")
    assert not set(world_rows) & set(app.panel.sliders)


def test_a_hotkey_changes_the_shown_choice_without_rebuilding_the_panel(app):
    """G or a number key changes what a drop-down shows: that one widget is replaced
    (the whole panel's rebuild took 45 ms, the frame G was pressed in)."""
    container = app.panel.container
    ev.press(pygame.K_3)
    app.frame(H)
    ev.press(pygame.K_g)
    app.frame(H)
    assert app.panel.container is container
    shown = app.panel.integrator.selected_option
    shown = shown[0] if isinstance(shown, tuple) else shown
    assert shown == integrator_option("velocity_verlet")
    ghost = app.panel.ghost.selected_option
    ghost = ghost[0] if isinstance(ghost, tuple) else ghost
    assert ghost == integrator_option(app.ghost.integrator.name)


def test_the_level_picker_never_names_a_level_that_is_not_open(tmp_path):
    """A world built in code (or a replay) showed "bridge", the list's first level."""
    from sandbox.app.main import scene_from_world
    from sandbox.sim.builders import build_rope
    from sandbox.sim.world import World, WorldConfig

    w = World(WorldConfig())
    build_rope(w, (0.0, 0.0), (1.0, 0.0), 5)
    a = ev.window_app(scene_from_world(w), tmp_path, SIZE)
    a.frame(H)
    shown = a.panel.level.selected_option
    shown = shown[0] if isinstance(shown, tuple) else shown
    assert shown == "(not a level file)"


def test_the_all_integrators_button(app):
    """The button runs every integrator beside the world (A), says so, and again: off."""
    button = app.panel.ensemble
    if app.panel.scroller is not None:
        app.panel.scroll_to(button.get_relative_rect().y)
        app.frame(H)
    click(app, button.get_abs_rect().center, frames=3)
    assert app.session.ensemble is not None and app.ghost is None
    assert "on" in app.panel.ensemble.text
    click(app, app.panel.ensemble.get_abs_rect().center, frames=3)
    assert app.session.ensemble is None and app.panel.ensemble.text == "all (A)"


def test_the_debug_draw_section_ticks_layers_and_shows_them_whichever_way_they_came(app):
    """Closed at first and on the world button's row: the panel is no taller (it does
    not scroll at 1280 x 800). A click on "▸ debug draw  X" shows a checkbox a layer,
    unticked, each with its key; a click on a box (or on its words) turns that layer
    on, a second click off, any of them together; a layer's key or X ticks and unticks
    the boxes as the layers go; a second click on the button closes the section."""
    from sandbox.app import debug
    from sandbox.app.panel import ControlPanel

    p = app.panel
    assert p.scroller is None and p.rows_height() == ControlPanel.HEIGHT and not p.checks
    assert p.debug.text == "▸ debug draw  X"
    assert p.debug.get_abs_rect().y == p.world.get_abs_rect().y          # one row
    click(app, p.debug.get_abs_rect().center, frames=3)
    p = app.panel
    assert p.debug.text == "▾ debug draw  X" and list(p.checks) == list(debug.LAYERS)
    view = p.view_rect()
    assert all(view.contains(b.get_abs_rect()) for b in p.checks.values())
    assert not any(b.is_checked for b in p.checks.values()) and not app.debug_layers
    labels = {lab.text for lab in p.content.get_container().elements
              if isinstance(lab, UILabel)}
    assert {"Alt+1", "Alt+2", "Alt+3", "Alt+4"} <= labels
    steps = app.world.steps
    click(app, p.checks["boxes"].get_abs_rect().center)
    assert app.debug_layers == {"boxes"} and p.checks["boxes"].is_checked
    click(app, p.checks["corrections"].text_label.get_abs_rect().center)   # its words
    assert app.debug_layers == {"boxes", "corrections"}
    assert p.checks["corrections"].is_checked
    assert app.debug_draw.drawn.legend == ["corrections", "boxes"]
    click(app, p.checks["boxes"].get_abs_rect().center)
    assert app.debug_layers == {"corrections"} and not p.checks["boxes"].is_checked
    assert app.session.log.events[-1][1:] == ["debug", ["corrections"]]  # a command each
    assert app.world.steps > steps                                 # the world ran on
    ev.press(pygame.K_4, pygame.KMOD_LALT)                         # a key: the box follows
    app.frame(H)
    assert [n for n, b in p.checks.items() if b.is_checked] == ["corrections", "link forces"]
    ev.press(pygame.K_x)                                           # all off ...
    app.frame(H)
    assert not any(b.is_checked for b in p.checks.values()) and not app.debug_layers
    ev.press(pygame.K_x)                                           # ... and back
    for _ in range(3):
        app.frame(H)
    assert [n for n, b in p.checks.items() if b.is_checked] == ["corrections", "link forces"]
    assert app.debug_layers == {"corrections", "link forces"}      # no event came back
    click(app, p.debug.get_abs_rect().center, frames=3)
    assert not app.panel.checks and app.panel.scroller is None
    assert app.debug_layers == {"corrections", "link forces"}      # closed, still drawn
