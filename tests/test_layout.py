"""The window's layout from 800 x 600 to 1280 x 800, used as a person uses it (headless,
real-shaped events): every control of the panel reachable (inside the window, or
scrolled to with the wheel), no HUD line wider than its column, the compact HUD first
and every number after V, the caption kept until the first input, the ghost's label on
nothing pinned and under no message.

Before: at 1024 x 640 and 900 x 600 the panel ran off the bottom of the window (the
ghost and level pickers and the phase portrait unreachable), the 16-row HUD covered the
scene, the energy row was cut ("solver +0…") and the caption went after 10 s.
"""

from __future__ import annotations

import warnings

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app import keymap
from sandbox.app.hud import FONT_FILES, fit_line, strain_legend_size
from sandbox.app.main import App
from sandbox.app.panel import GHOST_OFF, ControlPanel, integrator_option

H = 1 / 60
SIZES = [(800, 600), (900, 600), (1024, 640), (1280, 800)]


def text_of(line) -> str:
    return line if isinstance(line, str) else line[0]


def open_app(level, tmp_path, size, frames: int = 3) -> App:
    app = ev.window_app(level, tmp_path, size)
    for _ in range(frames):
        app.frame(H)
    return app


def controls(app: App) -> dict:
    """Every control of the panel (controls mode) by name."""
    p = app.panel
    out = {"integrator": p.integrator, "constraints": p.constraints, "timestep": p.timestep,
           "pause": p.pause, "step": p.step, "reset": p.reset, "ghost": p.ghost,
           "level": p.level, "world": p.world, "debug": p.debug,
           **{f"debug: {name}": box for name, box in p.checks.items()}}
    for key, (slider, _, _) in p.sliders.items():
        out[f"{key} <"] = slider.left_button
        out[f"{key} >"] = slider.right_button
    return out


def scroll_into_view(app: App, element, turns: int = 40) -> pygame.Rect:
    """Turn the wheel over the panel, as a person would, until ``element`` is wholly in
    the part of the panel that is shown; returns its rect then."""
    view = app.panel.view_rect()
    pos = view.center
    ev.post(ev.motion(pos))
    app.frame(H)
    for _ in range(turns):
        r = element.get_abs_rect()
        if view.contains(r):
            return r
        ev.post(ev.wheel(-1 if r.bottom > view.bottom else +1, pos))
        for _ in range(4):                          # pygame_gui scrolls over frames
            app.frame(H)
    raise AssertionError(f"not reachable by scrolling: {element.get_abs_rect()} in {view}")


# --------------------------------------------------------------------------- the panel

@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_panel_control_is_reachable_and_the_portrait_shown(tmp_path, size):
    window = pygame.Rect((0, 0), size)
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # "Label Rect is too small for text"
        app = open_app("pendulums", tmp_path, size)
    view = app.panel.view_rect()
    assert window.contains(app.panel.container.get_abs_rect())
    assert (app.panel.scroller is not None) == (size[1] < 800)   # scrolls only if it must
    _, portrait = app._column_rects()
    assert portrait is not None and window.contains(portrait) and portrait.h >= 120
    assert not portrait.colliderect(app.panel.container.get_abs_rect())
    for name, element in controls(app).items():
        r = scroll_into_view(app, element)
        assert view.contains(r) and window.contains(r), name
    # Used there: the ghost and the level pickers at the bottom, by the mouse alone.
    pick(app, "ghost", integrator_option("euler"))
    assert app.ghost is not None and app.ghost.integrator.name == "euler"
    pick(app, "ghost", GHOST_OFF)
    assert app.ghost is None
    pick(app, "level", "double_pendulum_lagrange")
    assert app.scene.source == "double_pendulum_lagrange"
    # ... and the panel stays scrolled where it was: the picker is still in sight.
    assert view.contains(app.panel.level.get_abs_rect())
    assert app._draw_error is None


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_open_world_section_is_reachable_and_the_portrait_kept(tmp_path, size):
    """Opened (its button, clicked), the world section's sliders are reachable with the
    wheel at every size, the panel scrolls within its rect (at 1280 x 800 too: it keeps
    its height, the portrait keeps its place under it), and closed again it is as it
    was."""
    def click_world():
        scroll_into_view(app, app.panel.world)
        for _ in range(6):                          # the wheel's scroll comes to rest
            app.frame(H)
        ev.click(app, app.panel.world.get_abs_rect().center, frames=3)

    app = open_app("pendulums", tmp_path, size)
    window = pygame.Rect((0, 0), size)
    click_world()
    assert app.panel.world_open and app.panel.scroller is not None
    assert app.panel.rect.contains(app.panel.container.get_abs_rect())   # in its rect
    _, portrait = app._column_rects()
    assert portrait is not None and portrait.h >= 120
    assert not portrait.colliderect(app.panel.container.get_abs_rect())
    view = app.panel.view_rect()
    for name, element in controls(app).items():
        r = scroll_into_view(app, element)
        assert view.contains(r) and window.contains(r), name
    assert {"gravity >", "wind >", "drag >", "restitution >", "friction >"} <= set(
        controls(app))
    click_world()
    assert not app.panel.world_open
    assert (app.panel.scroller is not None) == (size[1] < 800)
    assert app._draw_error is None


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_open_debug_draw_section_is_reachable_and_ticks(tmp_path, size):
    """Closed, the debug draw's button shares the world's row: the panel is no taller
    than before (it does not scroll at 1280 x 800). Opened (clicked), its checkboxes
    are reachable with the wheel at every size and each ticks its layer; the
    portrait keeps its place; closed again, the panel is as it was."""
    def click_debug():
        scroll_into_view(app, app.panel.debug)
        for _ in range(6):
            app.frame(H)
        ev.click(app, app.panel.debug.get_abs_rect().center, frames=3)

    app = open_app("pile", tmp_path, size)
    assert app.panel.rows_height() == ControlPanel.HEIGHT
    assert (app.panel.scroller is not None) == (size[1] < 800)
    click_debug()
    assert app.panel.debug_open and app.panel.rect.contains(
        app.panel.container.get_abs_rect())
    _, portrait = app._column_rects()
    assert portrait is not None and portrait.h >= 120
    assert not portrait.colliderect(app.panel.container.get_abs_rect())
    view = app.panel.view_rect()
    window = pygame.Rect((0, 0), size)
    for name, box in app.panel.checks.items():
        r = scroll_into_view(app, box)
        assert view.contains(r) and window.contains(r), name
        ev.click(app, r.center)
        assert name in app.debug_layers
    assert len(app.debug_layers) == 4 and app._draw_error is None
    click_debug()
    assert not app.panel.debug_open and app.panel.rows_height() == ControlPanel.HEIGHT
    assert (app.panel.scroller is not None) == (size[1] < 800)


def pick(app: App, attr: str, text: str) -> None:
    """Scroll to a drop-down, open it with a click and click the option ``text`` (the
    option scrolled into the list's view if the list scrolls)."""
    menu = getattr(app.panel, attr)
    ev.click(app, scroll_into_view(app, menu).center)
    menu = getattr(app.panel, attr)
    assert menu.current_state is menu.menu_states["expanded"], attr
    listing = menu.current_state.options_selection_list
    window = pygame.Rect((0, 0), app.size)
    # The open list lies inside the panel's shown part and the window.
    assert window.contains(listing.get_abs_rect())
    assert app.panel.view_rect().inflate(2, 2).contains(listing.get_abs_rect())
    item = next(i for i in listing.item_list if i["text"] == text)
    for _ in range(40):
        button = item["button_element"]
        if button is not None and listing.get_abs_rect().contains(button.get_abs_rect()):
            break
        pos = listing.get_abs_rect().center
        ev.post(ev.motion(pos), ev.wheel(-1, pos))
        for _ in range(4):
            app.frame(H)
    ev.click(app, item["button_element"].get_abs_rect().center)


def test_the_panel_scrolls_after_a_resize_and_stops_when_it_fits(tmp_path):
    """The window is resizable: from 1280 x 800 down to 800 x 600 (real-shaped size
    events) the panel becomes a scrolled one, and back up it shows every row again."""
    app = open_app("pendulums", tmp_path, (1280, 800))
    app.screen = pygame.display.get_surface()           # the window, as run_app gives it
    assert app.panel.scroller is None
    for size in [(800, 600), (1024, 640), (1280, 800)]:
        pygame.display.set_mode(size, pygame.RESIZABLE)
        ev.post(ev.window_size_changed(*size))
        app.frame(H)
        assert app.size == size
        assert (app.panel.scroller is not None) == (size[1] < 800)
        r = scroll_into_view(app, app.panel.level)
        assert pygame.Rect((0, 0), size).contains(r)


@pytest.mark.parametrize("size", [(800, 600), (1280, 800)])
def test_build_mode_tools_are_reachable(tmp_path, size):
    app = open_app("playground", tmp_path, size)
    ev.press(pygame.K_b)
    app.frame(H)
    assert app.panel.mode == "build"
    r = scroll_into_view(app, app.panel.save)
    assert pygame.Rect((0, 0), size).contains(r)


def test_the_rows_are_as_tall_as_the_panel_says(tmp_path):
    """``HEIGHT`` and ``BUILD_HEIGHT`` (the layout reserves them) are the rows built."""
    app = open_app("pendulums", tmp_path, (1280, 800), frames=1)
    assert app.panel.content_height == ControlPanel.HEIGHT
    app.do("toggle_build")
    app.frame(H)
    assert app.panel.content_height == ControlPanel.BUILD_HEIGHT


def test_a_long_level_name_fits_its_picker(tmp_path):
    """The picker beside its label cut double_pendulum_lagrange to
    "double_pendulum_lagr"; on its own row the name fits, scrolled or not."""
    font = pygame.font.Font(str(FONT_FILES[False]), 13)
    for size in [(800, 600), (1280, 800)]:
        app = open_app("double_pendulum_lagrange", tmp_path, size, frames=1)
        menu = app.panel.level
        shown = menu.selected_option
        shown = shown[0] if isinstance(shown, tuple) else shown
        assert shown == "double_pendulum_lagrange"
        room = menu.get_abs_rect().w - menu.open_button_width - 8
        assert font.size(shown)[0] <= room, size
        for name in (integrator_option(n) for n in ("symplectic_euler", "tcv_corrected")):
            assert font.size(name)[0] <= app.panel.integrator.get_abs_rect().w - 28, name


# --------------------------------------------------------------------------- the HUD

def hud_lines_fit(app: App) -> None:
    """Each line of the HUD as drawn is no wider than its column, the HUD's panel no
    wider than ``hud_width`` and clear of the graph and the right column."""
    font = app.fonts.text
    columns = app.hud_shown()
    chars = app.hud_chars(len(columns))
    px = (app.hud_width() - 16 - 28 * (len(columns) - 1)) // len(columns)
    for col in columns:
        for line in col:
            t = text_of(line)
            assert len(t) <= chars and font.size(t)[0] <= px, (app.size, t)
    hud = pygame.Rect(8, 8, sum(app._hud_widths) + 28 * (len(columns) - 1) + 16,
                      app._hud_height)
    assert hud.right <= 8 + app.hud_width()
    panel, _ = app._column_rects()
    if panel is not None:
        assert hud.right < panel.x
    assert app.safe_area()[1] >= hud.bottom             # the scene starts below it


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("level", ["bridge", "bench:soft_blob", "double_pendulum_lagrange"])
def test_no_hud_line_is_wider_than_its_column(tmp_path, size, level):
    """Compact and full (V), on levels with the longest energy row (drag and soft
    links: the bridge) and the longest title ("soft blob 16x16 on a floor (bounds),
    20x1", cut before): each line fits; nothing is cut but a part of a line longer
    than a whole line."""
    app = open_app(level, tmp_path, size)
    hud_lines_fit(app)
    title = app.scene.title
    shown = " ".join(text_of(t) for c in app.hud_shown() for t in c)
    assert all(word in shown for word in title.split())     # the whole title
    ev.press(pygame.K_v)
    for _ in range(3):
        app.frame(H)
    assert app.show_full_hud
    hud_lines_fit(app)
    shown = " ".join(text_of(t) for c in app.hud_shown() for t in c)
    assert "…" not in shown
    energy = app._energy_line()
    for part in text_of(energy)[12:].split(" · "):        # every part of the energy row
        assert " ".join(part.split()) in " ".join(shown.split()), part


def test_the_compact_hud_first_and_every_number_after_v(tmp_path):
    app = open_app("pendulums", tmp_path, (800, 600))
    short = [text_of(t) for t in app.hud_shown()[0]]
    assert len(app.hud_shown()) == 1 and len(short) <= 7
    assert short[0] == app.scene.title
    for label in ("integrator", "timestep", "state", "energy"):
        assert any(t.startswith(label) for t in short), label
    assert any("fps" in t for t in short) and any("V: every number" in t for t in short)
    assert not any(t.startswith(("cost ms", "bodies", "error")) for t in short)
    top = app.safe_area()[1]
    ev.press(pygame.K_v)
    app.frame(H)
    full = [text_of(t) for c in app.hud_shown() for t in c]
    for label in ("frame", "steps", "solver", "bodies", "error", "time", "cost ms", "ghost"):
        assert any(t.startswith(label) for t in full), label
    assert app.safe_area()[1] > top                      # the taller HUD moves the scene
    ev.press(pygame.K_v)
    app.frame(H)
    assert [text_of(t) for t in app.hud_shown()[0]][:2] == short[:2]
    assert app.safe_area()[1] == top


def test_the_help_names_the_hud_key():
    text = " ".join(f"{k} {t}" for k, t in keymap.help_lines())
    assert "V HUD: every number / the short one" in text


def test_hud_lines_are_broken_at_their_separators():
    line = "energy      integrator   +0.131 J · solver   -1.323 J · drag -554.123 J"
    out = fit_line(line, 54)
    assert out == ["energy      integrator   +0.131 J · solver   -1.323 J",
                   "            drag -554.123 J"]
    coloured = fit_line(("soft blob 16x16 on a floor (bounds), 20x1", (1, 2, 3)), 20)
    assert [t for t, _ in coloured] == ["soft blob 16x16 on a", "floor (bounds), 20x1"]
    assert fit_line("short", 54) == ["short"]
    assert fit_line("x" * 30, 10) == ["x" * 9 + "…"]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_the_strain_legend_stays_left_of_the_column(tmp_path, size):
    app = open_app("pendulums", tmp_path, size, frames=1)
    free = app.safe_area()[2]
    w, h = strain_legend_size(app.fonts.small, free - 16)
    assert 8 + w <= free and app.safe_area()[1] + app.safe_area()[3] + h <= size[1]


# --------------------------------------------------------------------------- the caption

def test_the_caption_stays_until_the_first_input(tmp_path):
    """What to do stays on screen while nobody touches anything (it went after 10 s),
    a pointer passing over the window is no input; a key lets it go after 4 s."""
    app = open_app("pendulums", tmp_path, (1024, 640))
    caption = [m[0] for m in app.messages if m[0].startswith("try:")]
    assert caption
    # The scene is fitted above it: nothing of the level's view lies under it.
    _, said = app.overlay.messages_layout(app.size, *app._messages_args())
    sx, sy, sw, sh = app.safe_area()
    assert sy + sh <= said.top
    c, w = app.scene.view_center, app.scene.view_width
    scale = app.camera.scale
    h = w * app.size[1] / app.size[0]                     # the view's height (Camera.frame)
    assert app.camera.to_screen([c[0], c[1] - h / 2])[1] <= said.top + 1
    for _ in range(40):                                   # 20 s untouched
        app.frame(0.5)
    ev.post(ev.motion((300, 300)), ev.motion((310, 305)))
    app.frame(H)
    assert [m[0] for m in app.messages if m[0].startswith("try:")] == caption
    ev.press(pygame.K_l)                                  # trails off: a person's key
    app.frame(H)
    for _ in range(6):                                    # 3 s later, still there
        app.frame(0.5)
    assert [m[0] for m in app.messages if m[0].startswith("try:")] == caption
    for _ in range(3):                                    # 4.5 s: gone
        app.frame(0.5)
    assert not any(m[0].startswith("try:") for m in app.messages)
    assert app.camera.scale == scale                      # and the view does not jump
    ev.press(pygame.K_h, pygame.KMOD_SHIFT)               # Shift+H: again, once
    app.frame(H)
    for _ in range(30):
        app.frame(0.5)
    assert [m[0] for m in app.messages if m[0].startswith("try:")] == caption


def test_a_click_or_the_wheel_is_input_too(tmp_path):
    app = open_app("pendulums", tmp_path, (1024, 640))
    ev.post(ev.wheel(1, (200, 300)))
    app.frame(H)
    for _ in range(10):
        app.frame(0.5)
    assert not any(m[0].startswith("try:") for m in app.messages)
    app.do("caption")
    ev.click(app, (200, 300))
    for _ in range(10):
        app.frame(0.5)
    assert not any(m[0].startswith("try:") for m in app.messages)


# --------------------------------------------------------------------------- ghost label

@pytest.mark.parametrize("size", [(800, 600), (1280, 800)])
@pytest.mark.parametrize("level", ["pendulums", "bridge"])
def test_the_ghost_label_covers_no_pivot_no_anchor_and_no_message(tmp_path, level, size):
    """Above right of the ghost's bodies it lay on the pendulums' pivot and on the
    bridge's right anchor; now it covers no pinned particle, stays in the scene's free
    area and out from under the caption, frame after frame."""
    app = open_app(level, tmp_path, size)
    ev.press(pygame.K_g)
    app.frame(H)
    assert app.ghost is not None
    p = app.world.particles
    for k in range(90):
        app.frame(H)
        r = app.ghost_label_at
        assert r is not None
        pins = app.camera.to_screen(p.x[p.inv_mass == 0])
        near = r.inflate(8, 4)
        assert not any(near.collidepoint(float(x), float(y)) for x, y in pins), (k, r)
        sx, sy, sw, sh = app.safe_area()
        assert pygame.Rect(sx, sy, sw, sh).contains(r)
        _, said = app.overlay.messages_layout(app.size, *app._messages_args())
        assert said is None or not r.colliderect(said)
    assert np.isfinite(p.x).all() and app._draw_error is None
