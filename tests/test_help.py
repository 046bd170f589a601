"""The help (H or F1) is read at the HUD's size in every window (issue 34): laid out in
as many columns as fit and on pages that PgDn / PgUp, Down / Up and the wheel turn, Esc
closing it. Before, the two columns were shrunk to fit: to 45 % at 800 x 600 (a 6 px
font), 58 % at 1024 x 640, 73 % at 1280 x 800.
"""

from __future__ import annotations

import events as ev
import pygame
import pytest

from sandbox.app.hud import HELP_COLUMN, help_footer
from sandbox.app.keymap import HELP_PAGING, KEYMAP, MOUSE_HELP, help_lines, key_label

SIZES = [(800, 600), (900, 600), (1024, 640), (1280, 800)]
H = 1 / 60


def open_help(tmp_path, size):
    app = ev.window_app("pendulums", tmp_path, size)
    app.frame(H)
    ev.press(pygame.K_h)
    app.frame(H)
    assert app.show_help
    return app


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_every_key_is_on_a_page_at_the_huds_size(tmp_path, size):
    app = open_help(tmp_path, size)
    pages = app.overlay.help_pages(app.size, app.scene.title, app.scene.description)
    window = pygame.Rect((0, 0), size)
    text_h = app.fonts.text.size("Ag")[1]
    said = []
    for page in pages:
        assert window.contains(page.rect)
        rects = [r for r, _, _, _ in page.items]
        for r, text, _, big in page.items:
            assert page.rect.contains(r), (text, r, page.rect)
            # The HUD's font, unscaled: a line's box is the font's own.
            font = app.fonts.big if big else app.fonts.text
            assert r.size == font.size(text) and (big or r.h == text_h), text
        for a in range(len(rects)):                        # nothing drawn over another
            assert rects[a].collidelist(rects[a + 1:]) == -1, page.items[a]
        said.append(" ".join(text for _, text, _, _ in page.items))
    everything = " ".join(said)
    for keys, text in [*help_lines(), *MOUSE_HELP]:         # each line, whole and in order
        assert f"{keys} {text}" in everything, (keys, text)
    for b in KEYMAP:
        assert key_label(b) in everything and b.help in everything
    assert app.scene.description in said[0]                # the level's words come first
    columns = pages[0].columns
    assert columns == max(1, min(3, (size[0] - 48 + 28) // (HELP_COLUMN + 28)))
    if len(pages) > 1:
        assert all(help_footer(len(pages)) in s for s in said)
    print(size, len(pages), "pages of", columns)


def test_pages_turn_with_the_keys_and_the_wheel_and_esc_closes(tmp_path):
    app = open_help(tmp_path, (800, 600))
    n = len(app.overlay.help_pages(app.size, app.scene.title, app.scene.description))
    assert n >= 3                                           # one column at 800 px
    scale, centre = app.camera.scale, tuple(app.camera.center)
    seen = [app.help_page]
    for key in [pygame.K_PAGEDOWN] * (n + 2):               # past the last: stays there
        ev.press(key)
        app.frame(H)
        seen.append(app.help_page)
    assert seen == list(range(n)) + [n - 1] * 3
    ev.press(pygame.K_UP)
    app.frame(H)
    assert app.help_page == n - 2
    ev.post(ev.wheel(+1, (400, 300)))                       # wheel up: back
    app.frame(H)
    assert app.help_page == n - 3
    ev.post(ev.wheel(-1, (700, 300)))                       # wheel down, over the panel
    app.frame(H)
    assert app.help_page == n - 2
    ev.press(pygame.K_DOWN)
    ev.press(pygame.K_PAGEUP)
    app.frame(H)
    assert app.help_page == n - 2
    # The help's keys and the wheel did not zoom or pan the scene under it.
    assert app.camera.scale == scale and tuple(app.camera.center) == centre
    ev.press(pygame.K_ESCAPE)                               # closes the help, not the app
    app.frame(H)
    assert not app.show_help and app.running
    ev.press(pygame.K_h)                                    # opens again on its first page
    app.frame(H)
    assert app.show_help and app.help_page == 0
    ev.press(pygame.K_h)
    app.frame(H)
    assert not app.show_help
    ev.press(pygame.K_PAGEDOWN)                             # the scene's zoom again
    app.frame(H)
    assert app.camera.scale < scale
    assert app._draw_error is None


def test_the_page_keys_are_named_by_the_keymap():
    names = help_footer(3)
    assert "PgDn" in names and "PgUp" in names and "wheel" in names and "Esc" in names
    assert set(HELP_PAGING.values()) == {+1, -1}
    assert help_footer(1) == "H, F1 or Esc: close"
