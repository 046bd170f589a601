"""Build mode (B): the mouse places things, the result is a level that saves and
reopens bit for bit. Driven with real-shaped events; headless."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app.main import App
from sandbox.levels import build_world, load_level

ROOT = Path(__file__).resolve().parent.parent
H = 1 / 60
SIZE = (1280, 800)


@pytest.fixture
def app(tmp_path) -> App:
    a = ev.window_app("pendulums", tmp_path, SIZE)
    a.frame(H)
    a.do("toggle_build")
    a.frame(H)
    assert a.editor is not None and a.paused
    return a


def drag(app: App, a_world, b_world, steps: int = 5) -> None:
    a, b = app.camera.to_screen(a_world), app.camera.to_screen(b_world)
    ev.post(*ev.drag(a, b, steps=steps))
    app.frame(H)


def px_tol(app: App) -> float:
    return 1.0 / app.camera.scale            # a pixel, in metres


@pytest.mark.parametrize("tool, a, b", [("box", (-1.0, -1.0), (0.5, -0.4)),
                                         ("circle", (0.0, 0.0), (0.6, 0.0)),
                                         ("capsule", (-1.0, 0.0), (1.0, 0.5)),
                                         ("segment", (-1.0, -0.5), (1.0, -0.5))])
def test_shapes_are_drawn_by_dragging(app, tool, a, b):
    shapes = len(app.world.shapes)
    app.do("set_tool", tool)
    drag(app, a, b)
    assert len(app.world.shapes) == shapes + 1
    s = app.editor.table["shapes"][-1]
    tol = 2 * px_tol(app)
    if tool == "box":
        assert s["min"] == pytest.approx([-1.0, -1.0], abs=tol)
        assert s["max"] == pytest.approx([0.5, -0.4], abs=tol)
    elif tool == "circle":
        assert s["center"] == pytest.approx([0, 0], abs=tol)
        assert s["radius"] == pytest.approx(0.6, abs=tol)
    else:
        assert s["a"] == pytest.approx(a, abs=tol) and s["b"] == pytest.approx(b, abs=tol)
        assert (s["thickness"] > 0) == (tool == "capsule")


def test_a_cloth_by_a_rectangle_and_undo_redo(app):
    before = app.world.state_hash()
    n = app.world.n
    app.do("set_tool", "cloth")
    drag(app, (-1.0, 1.0), (0.0, 0.5))
    s = app.editor.table["bodies"][-1]
    spacing = app.editor.props.spacing
    assert s["type"] == "cloth" and s["shear"] is True
    # 1.0 m x 0.5 m dragged to within a pixel: 10 or 11 particles across, 5 or 6 down.
    assert s["cols"] in (int(1.0 / spacing), int(1.0 / spacing) + 1)
    assert s["rows"] in (int(0.5 / spacing), int(0.5 / spacing) + 1)
    assert app.world.n == n + s["cols"] * s["rows"]
    after = app.world.state_hash()
    app.do("undo")
    assert app.world.state_hash() == before and app.world.n == n
    app.do("redo")
    assert app.world.state_hash() == after


def test_a_polygon_by_clicks_and_a_concave_one_is_explained(app):
    app.do("set_tool", "polygon")
    for p in [(-1.0, -1.0), (1.0, -1.0), (0.0, 0.5)]:
        q = app.camera.to_screen(p)
        ev.post(ev.button_down(q), ev.button_up(q))
    app.frame(H)
    ev.post(ev.key_down(pygame.K_RETURN), ev.key_up(pygame.K_RETURN))
    app.frame(H)
    assert app.editor.table["shapes"][-1]["type"] == "polygon"
    table = app.editor.table
    for p in [(-1.0, 1.0), (1.0, 1.0), (0.0, 1.3), (0.0, 2.0)]:      # concave
        q = app.camera.to_screen(p)
        ev.post(ev.button_down(q), ev.button_up(q))
    app.frame(H)
    ev.post(ev.key_down(pygame.K_RETURN), ev.key_up(pygame.K_RETURN))
    app.frame(H)
    assert app.editor.table == table                       # nothing changed...
    assert app.messages[-1][2] and "convex" in app.messages[-1][0]   # ...and why


def test_select_and_delete(app):
    app.do("set_tool", "box")
    drag(app, (2.0, -1.0), (2.5, -0.5))
    shapes = len(app.editor.table["shapes"])
    q = app.camera.to_screen((2.25, -0.75))
    ev.post(ev.button_down(q, 3), ev.button_up(q, 3))
    app.frame(H)
    assert app.editor.selected == ("shapes", shapes - 1)
    ev.post(ev.key_down(pygame.K_DELETE), ev.key_up(pygame.K_DELETE))
    app.frame(H)
    assert len(app.editor.table["shapes"]) == shapes - 1


def test_save_as_level_reopens_bit_for_bit_and_never_replaces_without_asking(app, tmp_path):
    app.do("set_tool", "box")
    drag(app, (0.1 + 0.2, -1.0), (1.3, -0.7))       # floats that do not print short
    app.do("set_tool", "cloth")
    drag(app, (-2.0, 1.5), (-1.3, 1.0))
    path = app.builder.save_level("my level!")
    assert path == tmp_path / "levels" / "my_level.toml"
    r = subprocess.run([sys.executable, "main.py", "check", str(path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    built = build_world(app.editor.level())
    again = build_world(load_level(path))
    assert again.state_hash() == built.state_hash()
    assert np.array_equal(again.particles.x, built.particles.x)
    assert again.shapes == built.shapes
    text = path.read_text()
    app.do("set_tool", "circle")
    drag(app, (3.0, 2.0), (3.3, 2.0))
    assert app.builder.save_level("my_level") is None          # exists: a question, no write
    assert path.read_text() == text and app.panel.dialog is not None
    app.builder.save_level("my_level", replace=True)
    assert path.read_text() != text


def test_ctrl_s_asks_for_a_name_and_the_keyboard_types_it(app, tmp_path):
    app.do("set_tool", "box")
    drag(app, (0.0, -1.0), (1.0, -0.5))
    ev.press(pygame.K_s, pygame.KMOD_CTRL)
    app.frame(H)
    assert app.panel.typing()
    entry = app.panel.entry
    entry.set_text("")
    for ch in "bench2":
        pygame.event.post(pygame.event.Event(pygame.TEXTINPUT, text=ch, window=None))
    app.frame(H)
    app.frame(H)
    assert entry.get_text() == "bench2" and app.running      # 'b' did not toggle build
    ev.post(ev.key_down(pygame.K_RETURN), ev.key_up(pygame.K_RETURN))
    app.frame(H)
    assert (tmp_path / "levels" / "bench2.toml").exists() and app.editor is not None


def test_particles_balls_links_and_ropes(app):
    """A click places a particle, a drag sizes a ball, a drag from one particle to
    another links them (at their distance), a path makes a rope through it."""
    n = app.world.n
    app.do("set_tool", "particle")
    q = app.camera.to_screen((-2.0, 1.0))
    ev.post(ev.button_down(q), ev.button_up(q))
    app.frame(H)
    assert app.world.n == n + 1
    app.do("set_tool", "ball")
    drag(app, (-1.0, 1.0), (-0.7, 1.0))
    assert app.world.n == n + 2
    assert app.world.particles.radius[-1] == pytest.approx(0.3, abs=2 * px_tol(app))
    links = len(app.world.constraints)
    app.do("set_tool", "link")
    drag(app, (-2.0, 1.0), (-1.0, 1.0))
    assert len(app.world.constraints) == links + 1
    c = app.world.constraints
    assert {int(c.i[-1]), int(c.j[-1])} == {n, n + 1}
    assert c.rest[-1] == pytest.approx(1.0, abs=2 * px_tol(app))
    app.do("set_tool", "rope")
    path = [(0.0, 2.0), (1.0, 2.0), (1.0, 1.0)]
    pts = [app.camera.to_screen(p) for p in path]
    evs = [ev.button_down(pts[0])]
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        for t in np.linspace(0, 1, 12)[1:]:
            evs.append(ev.motion(a + (b - a) * t, (0, 0), (1, 0, 0)))
    evs.append(ev.button_up(pts[-1]))
    ev.post(*evs)
    app.frame(H)
    rope = app.editor.table["bodies"][-1]
    assert rope["type"] == "chain"
    spacing = app.editor.props.spacing
    assert len(rope["points"]) == pytest.approx(2.0 / spacing + 1, abs=1)
    # Deleting the first particle drops the link that used it and renumbers the rest.
    q = app.camera.to_screen((-2.0, 1.0))
    ev.post(ev.button_down(q, 3), ev.button_up(q, 3))
    app.frame(H)
    assert app.editor.selected is not None
    app.do("build_delete")
    assert all(b["type"] != "links" for b in app.editor.table["bodies"])
    assert app.world.n == n + 1 + len(rope["points"])


def test_a_link_to_nothing_is_explained(app):
    app.do("set_tool", "link")
    drag(app, (5.0, 5.0), (6.0, 5.0))              # no particles there
    assert app.messages[-1][2] and "from one particle to another" in app.messages[-1][0]


def test_a_level_the_loader_would_refuse_is_explained_not_written(tmp_path):
    """An empty room is not a level (the loader refuses it): saving says so and writes
    nothing."""
    import sandbox.sim.builders  # noqa: F401 - the world below is built in code
    from sandbox.app.session import scene_from_world
    from sandbox.sim.world import World

    a = ev.window_app(scene_from_world(World(), h=H), tmp_path, SIZE)
    a.do("toggle_build")
    a.do("save_level", "empty")
    assert a.messages[-1][2] and "empty" in a.messages[-1][0]
    assert not (tmp_path / "levels" / "empty.toml").exists()


def test_ctrl_let_go_in_the_save_dialog_is_let_go(app):
    """Ctrl+S opens the save dialog; Ctrl is let go while its text field has the
    keyboard; after Return saves, B leaves build mode (it cycled tools: Ctrl stayed
    held) and Q would quit."""
    ctrl = pygame.KMOD_LCTRL
    app.do("set_tool", "box")
    drag(app, (0.3, -1.0), (1.3, -0.7))
    ev.post(ev.key_down(pygame.K_LCTRL, ctrl), ev.key_down(pygame.K_s, ctrl),
            ev.key_up(pygame.K_s, ctrl))
    app.frame(H)
    assert app.panel.dialog is not None and app.panel.typing()
    ev.post(ev.key_up(pygame.K_LCTRL, 0))
    app.frame(H)
    ev.post(ev.key_down(pygame.K_RETURN), ev.key_up(pygame.K_RETURN))
    app.frame(H)
    assert app.panel.dialog is None and not app.panel.typing()
    ev.press(pygame.K_b)
    app.frame(H)
    assert app.editor is None


def test_the_tool_drop_down_applies_the_tool_clicked(app):
    """The build panel's tool list opened and highlighted but never applied a choice:
    the panel compared the widget with the tool and rebuilt itself in the frame between
    the click and its event."""
    menu = app.panel.tool
    ev.click(app, menu.get_abs_rect().center)
    menu = app.panel.tool
    assert menu.current_state is menu.menu_states["expanded"]
    items = menu.current_state.options_selection_list.item_list
    button = next(i["button_element"] for i in items if i["text"] == "circle")
    ev.click(app, button.get_abs_rect().center)
    assert app.tool == "circle"
    app.do("cycle_tool")                                   # Ctrl+B: the list follows
    app.frame(H)
    assert app.panel.tool.selected_option[0] == app.tool != "circle"


def test_a_saved_level_is_named_as_saved_not_as_its_source(app):
    """Saved from the pendulums level, the file kept "Chaos: double pendulum" and its
    description and hint, which described another level: what is saved is what the
    dialog was given."""
    app.do("set_tool", "box")
    drag(app, (0.3, -1.0), (1.3, -0.7))
    path = app.builder.save_level("my ramp")
    level = load_level(path)
    assert level.name == "my ramp" and level.hint == "" and level.description == ""
    path = app.builder.save_level({"title": "Ramp two", "description": "A box. Drop "
                                   "things on it.", "hint": "B runs it"})
    assert path.name == "ramp_two.toml"
    level = load_level(path)
    assert (level.name, level.description, level.hint) == (
        "Ramp two", "A box. Drop things on it.", "B runs it")


def test_typing_in_the_save_dialog_replaces_the_suggested_name(app):
    """Under Xvfb, "xvfb ramp" typed after Ctrl+S saved my_levelxvfb_ramp.toml: the
    suggestion was not selected, so typing appended to it."""
    app.do("set_tool", "box")
    drag(app, (0.3, -1.0), (1.3, -0.7))
    app.do("save_level")
    app.frame(H)
    for ch in "ramp":
        key = getattr(pygame, f"K_{ch}")
        ev.post(ev.key_down(key, 0, ch), ev.text_input(ch), ev.key_up(key, 0, ch))
        app.frame(H)
    ev.post(ev.key_down(pygame.K_RETURN), ev.key_up(pygame.K_RETURN))
    app.frame(H)
    assert (app.out_dir / "levels" / "ramp.toml").exists()


# ------------------------------------------------------------- an editor that edits

def right_click(app: App, world_point, shift: bool = False) -> None:
    """The pointer moves there (a frame: the panel sees it leave), then a right click."""
    q = app.camera.to_screen(world_point)
    ev.post(ev.motion(q))
    app.frame(H)
    evs = [ev.button_down(q, 3), ev.button_up(q, 3)]
    if shift:
        evs = [ev.key_down(pygame.K_LSHIFT, pygame.KMOD_LSHIFT), *evs,
               ev.key_up(pygame.K_LSHIFT, 0)]
    ev.post(*evs)
    app.frame(H)


def right_drag(app: App, a_world, b_world, steps: int = 6) -> None:
    a, b = app.camera.to_screen(a_world), app.camera.to_screen(b_world)
    ev.post(ev.motion(a))
    app.frame(H)
    ev.post(*ev.drag(a, b, button=3, steps=steps))
    app.frame(H)


@pytest.fixture
def built(tmp_path) -> App:
    """An empty level (Ctrl+N) with two particles, a link, a ball and a box."""
    a = ev.window_app("pendulums", tmp_path, SIZE)
    a.frame(H)
    ev.press(pygame.K_n, pygame.KMOD_CTRL)
    a.frame(H)
    assert a.editor is not None and a.world.n == 0
    a.do("set_tool", "particle")
    for p in [(-2.0, 1.0), (-1.0, 1.0)]:
        q = a.camera.to_screen(p)
        ev.post(ev.button_down(q), ev.button_up(q))
        a.frame(H)
    a.do("set_tool", "link")
    drag(a, (-2.0, 1.0), (-1.0, 1.0))
    a.do("set_tool", "box")
    drag(a, (1.0, -1.0), (2.0, -0.5))
    a.do("set_tool", "ball")
    drag(a, (1.5, 1.5), (1.8, 1.5))
    assert [b["type"] for b in a.editor.table["bodies"]] == [
        "particles", "particles", "links", "particles"]
    assert len(a.editor.table["shapes"]) == 1
    a.do("set_tool", "particle")
    return a


def test_ctrl_n_gives_an_empty_level_with_the_levels_world_settings(tmp_path):
    a = ev.window_app("playground", tmp_path, SIZE)
    a.frame(H)
    world = load_level(ROOT / "levels" / "playground.toml").world
    ev.press(pygame.K_n, pygame.KMOD_CTRL)
    a.frame(H)
    assert a.editor is not None and a.world.n == 0 and not a.world.shapes
    assert a.editor.level().world == world
    assert a.world.config.bounds == tuple(world.bounds)
    a.do("set_tool", "ball")
    drag(a, (0.0, 2.0), (0.3, 2.0))
    a.panel.sync()
    ev.click(a, a.panel.new.get_abs_rect().center)       # the panel's button: again
    assert a.world.n == 0 and a.editor.table["bodies"] == []
    ev.press(pygame.K_z, pygame.KMOD_CTRL)                # and undo brings the ball back
    a.frame(H)
    assert a.world.n == 1


def test_click_shift_click_box_and_escape_select(built):
    app = built
    ed = app.editor
    right_click(app, (-2.0, 1.0))
    assert ed.selection == [("bodies", 0)]
    right_click(app, (1.5, -0.75), shift=True)              # Shift: the box too
    assert ed.selection == [("bodies", 0), ("shapes", 0)]
    right_click(app, (-2.0, 1.0), shift=True)               # and out again
    assert ed.selection == [("shapes", 0)]
    # A box dragged on empty space: both particles and their link, not the ball.
    right_drag(app, (-2.5, 1.4), (-0.5, 0.6))
    assert ed.selection == [("bodies", 0), ("bodies", 1), ("bodies", 2)]
    assert "3 items" in app.messages[-1][0]
    # The select tool does the same with the left button.
    app.do("set_tool", "select")
    drag(app, (1.3, 1.0), (2.2, 2.2))
    assert ed.selection == [("bodies", 3)]
    ev.press(pygame.K_ESCAPE)
    app.frame(H)
    assert ed.selection == [] and app.running               # Esc cleared, did not quit


def test_dragging_the_selection_moves_it_and_undo_puts_it_back(built):
    app = built
    ed = app.editor
    before = app.world.particles.x.copy()
    table = ed.table
    right_drag(app, (-2.5, 1.4), (-0.5, 0.6))               # both particles and the link
    right_drag(app, (-1.0, 1.0), (0.0, 2.5))                # dragged by the second one
    tol = 2 * px_tol(app)
    moved = app.world.particles.x
    assert moved[:2] - before[:2] == pytest.approx(np.array([[1.0, 1.5]] * 2), abs=tol)
    assert np.array_equal(moved[2:], before[2:])            # the ball stayed
    assert app.world.constraints.rest[0] == pytest.approx(1.0, abs=tol)   # still linked
    assert ed.selection == [("bodies", 0), ("bodies", 1), ("bodies", 2)]
    # A shape: pressed on it unselected, it is selected and moved in one drag.
    right_drag(app, (1.5, -0.75), (1.5, -1.75))
    assert ed.selection == [("shapes", 0)]
    s = ed.table["shapes"][0]
    assert s["min"] == pytest.approx([1.0, -2.0], abs=tol)
    assert s["max"] == pytest.approx([2.0, -1.5], abs=tol)
    ev.press(pygame.K_z, pygame.KMOD_CTRL)
    ev.press(pygame.K_z, pygame.KMOD_CTRL)
    app.frame(H)
    assert ed.table == table and np.array_equal(app.world.particles.x, before)


def test_delete_and_backspace_remove_the_selection_and_undo_restores_it(built):
    app = built
    ed = app.editor
    table = ed.table
    right_click(app, (-2.0, 1.0))
    ev.press(pygame.K_BACKSPACE)
    app.frame(H)
    # The particle and the link that used it.
    assert [b["type"] for b in ed.table["bodies"]] == ["particles", "particles"]
    assert app.world.n == 2 and len(app.world.constraints) == 0
    right_drag(app, (-3.0, -3.0), (3.0, 3.0))                # everything left
    app.panel.sync()
    button = next(b for b in app.panel.actions if getattr(b, "text", "") == "Delete")
    ev.click(app, button.get_abs_rect().center)
    assert app.world.n == 0 and ed.table["shapes"] == []
    ev.press(pygame.K_z, pygame.KMOD_CTRL)
    ev.press(pygame.K_z, pygame.KMOD_CTRL)
    app.frame(H)
    assert ed.table == table


def type_into(app: App, entry, text: str) -> None:
    """Click a text field and type ``text`` over what it holds, then Enter."""
    ev.click(app, entry.get_abs_rect().center)
    entry.set_text("")
    for ch in text:
        key = getattr(pygame, f"K_{ch}", pygame.K_MINUS if ch == "-" else pygame.K_PERIOD)
        ev.post(ev.key_down(key, 0, ch), ev.text_input(ch), ev.key_up(key, 0, ch))
        app.frame(H)
    ev.post(ev.key_down(pygame.K_RETURN), ev.key_up(pygame.K_RETURN))
    app.frame(H)


def test_the_panel_edits_the_selections_properties_within_the_schemas_limits(built):
    app = built
    ed = app.editor
    right_click(app, (-1.0, 1.0))
    app.frame(H)
    fields = app.panel.fields
    assert list(fields) == ["mass", "radius"]
    # Each row on its own line: the labels were all drawn on the first row's.
    from pygame_gui.elements import UILabel, UITextEntryLine
    rows = [e.get_abs_rect() for e in app.panel.manager.get_sprite_group().sprites()
            if isinstance(e, (UILabel, UITextEntryLine)) and e.get_abs_rect().y >
            app.panel.tool.get_abs_rect().bottom and e.visible]
    assert len(rows) >= 5
    assert not any(a.colliderect(b) for k, a in enumerate(rows) for b in rows[k + 1:])
    assert fields["mass"].get_text() == "0.1"
    type_into(app, fields["mass"], "2.5")
    assert ed.table["bodies"][1]["mass"] == 2.5 and app.world.particles.mass[1] == 2.5
    assert app.panel.fields["mass"].get_text() == "2.5"
    table = ed.table
    type_into(app, app.panel.fields["mass"], "-1")
    text, _, error = app.messages[-1]
    assert error and text.startswith("mass not changed") and ">= 1e-06" in text
    assert ed.table is table and app.running
    assert "bodies[" not in text and app.panel.fields["mass"].get_text() == "2.5"
    # A shape: its restitution and friction; a link: its compliance.
    right_click(app, (1.5, -0.75))
    app.frame(H)
    assert list(app.panel.fields) == ["radius", "restitution", "friction"]
    type_into(app, app.panel.fields["restitution"], "1.5")
    assert app.messages[-1][2] and "<= 1" in app.messages[-1][0]
    type_into(app, app.panel.fields["restitution"], "0.9")
    assert app.world.shapes[0]["restitution"] == 0.9
    right_click(app, (-1.5, 1.0))
    app.frame(H)
    assert ed.selection == [("bodies", 2)] and list(app.panel.fields) == ["compliance"]
    type_into(app, app.panel.fields["compliance"], "0.001")
    assert app.world.constraints.compliance[0] == 0.001
    ev.press(pygame.K_z, pygame.KMOD_CTRL)
    app.frame(H)
    assert app.world.constraints.compliance[0] == 0.0


def test_the_save_dialog_asks_for_title_description_and_hint(built, tmp_path):
    """A new level's dialog is empty (it kept the source level's title before); the
    three fields are written into the file, which opens again with its own title."""
    app = built
    ev.press(pygame.K_s, pygame.KMOD_CTRL)
    app.frame(H)
    panel = app.panel
    assert [e.get_text() for e in panel.dialog_entries] == ["", "", ""]
    for k, text in enumerate(["Two bobs", "Two particles on a rod", "Drag one"]):
        for ch in text:
            ev.post(ev.text_input(ch))
        app.frame(H)
        if k < 2:
            ev.press(pygame.K_TAB)                          # the next field
            app.frame(H)
    assert [e.get_text() for e in panel.dialog_entries] == [
        "Two bobs", "Two particles on a rod", "Drag one"]
    assert panel.save_to.text.endswith("two_bobs.toml")
    ev.post(ev.key_down(pygame.K_RETURN), ev.key_up(pygame.K_RETURN))
    app.frame(H)
    path = tmp_path / "levels" / "two_bobs.toml"
    level = load_level(path)
    assert (level.name, level.description, level.hint) == (
        "Two bobs", "Two particles on a rod", "Drag one")
    from sandbox.app.session import scene_from_level
    assert scene_from_level(str(path)).title == "Two bobs"
    # The window names the level as saved (it said "new level" before).
    assert (app.session.scene.title, app.session.scene.description) == (
        "Two bobs", "Two particles on a rod")
    # Asked again: what was saved.
    app.do("save_level")
    app.frame(H)
    assert [e.get_text() for e in app.panel.dialog_entries][0] == "Two bobs"
    ev.press(pygame.K_ESCAPE)                                 # closes it, does not quit
    app.frame(H)
    assert app.panel.dialog is None and app.running


def test_the_dialog_offers_the_source_levels_title_when_editing_it(app):
    app.do("save_level")
    app.frame(H)
    texts = [e.get_text() for e in app.panel.dialog_entries]
    level = load_level(ROOT / "levels" / "pendulums.toml")
    assert texts == [level.name, level.description, level.hint]


def test_build_edits_are_in_the_replay_and_replay_bit_for_bit(tmp_path):
    """Edits made with the mouse and keys in build mode, then a run: the replay file
    rebuilds the same levels at the same frames, headless, and ends in the same
    state; its last level is the edited one."""
    import json

    from sandbox.levels import parse_level
    from sandbox.replay import load, play

    app = ev.window_app("playground", tmp_path, SIZE)
    for _ in range(20):
        app.frame(H)
    ev.press(pygame.K_b)
    app.frame(H)
    right_click(app, (3.0, 2.5))                              # the pendulum
    right_drag(app, (3.0, 2.5), (2.0, 3.0))
    app.do("set_tool", "box")
    drag(app, (-1.0, 0.0), (1.0, 0.4))
    right_click(app, (-2.5, -0.8))                            # the static ball
    ev.press(pygame.K_DELETE)
    app.frame(H)
    right_click(app, (0.5, 2.5))                              # the rope
    app.frame(H)
    type_into(app, app.panel.fields["mass"], "0.5")
    ev.press(pygame.K_z, pygame.KMOD_CTRL)
    ev.press(pygame.K_y, pygame.KMOD_CTRL)
    ev.press(pygame.K_b)                                      # run what was built
    for _ in range(40):
        app.frame(H)
    path = app.session.save_replay(tmp_path / "replays")
    events = json.loads(path.read_text())["events"]
    levels = [e for e in events if e[1] == "level"]
    assert len(levels) == 7            # B, move, box, delete, mass, undo, redo
    assert parse_level(levels[-1][2]) == parse_level(app.scene.level_text)
    rep = load(path)
    assert play(rep).state_hash() == app.world.state_hash() == rep.final_hash
    assert app.world.t > 0 and not app.world.shapes[0]["type"] == "circle"
