"""Events for tests, shaped exactly like the ones real pygame-ce delivers.

A posted event can carry attributes a real one never has: the Shift+drag cut passed
every posted-event test while the tests gave ``MOUSEBUTTONDOWN`` a ``mod`` that real
pygame-ce events do not have, and never worked at a real mouse. Every test builds its
events here; ``tests/data/real_events.json`` is a dump of real events (pygame-ce 2.5.8,
SDL 2.32, X11 under Xvfb, driven by xdotool) and ``test_events_match_real_ones`` checks
that each builder gives exactly the attributes of its real counterpart.

Modifier keys are pressed as a person presses them: a ``KEYDOWN`` of Shift before the
click (``hold_shift``), which is what real input produces; the mouse events themselves
carry no modifiers.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pygame

REAL = json.loads((Path(__file__).parent / "data" / "real_events.json").read_text())


@contextmanager
def fresh_display(size=(1280, 800)):
    """A (dummy) display of ``size`` with fonts and an empty event queue, for the body
    of a window test; the queue emptied again after it (if the test left pygame up:
    ``run_app`` ends with ``pygame.quit()``)."""
    pygame.display.init()
    pygame.display.set_mode(size)
    pygame.font.init()
    pygame.event.clear()
    yield
    if pygame.display.get_init():
        pygame.event.clear()


def window_app(scene, tmp_path, size=(1280, 800)):
    """An App on a fresh (dummy) display of ``size`` with an empty event queue: the
    window tests' common start."""
    from sandbox.app.main import App

    pygame.display.init()
    pygame.display.set_mode(size)
    pygame.event.clear()
    return App(scene, size=size, out_dir=tmp_path)


def irregular_frames(app, seed: int, count: int):
    """``run(n)``: ``n`` frames of ``app`` at irregular real frame times (uniform in
    8-35 ms, from ``seed``; ``count`` of them in all), as a person's machine gives."""
    import numpy as np
    dts = iter(np.random.default_rng(seed).uniform(0.008, 0.035, count))

    def run(n: int) -> None:
        for _ in range(n):
            app.frame(next(dts))
    return run


def replays_alike(app, path, tmp_path):
    """The replay ``path`` that ``app``'s session saved ends where the window did: its
    recorded hash, played headless, and played by a window session of its own. Returns
    the replay and the world and session that played it."""
    from sandbox.app.main import App
    from sandbox.app.session import scene_from_spec
    from sandbox.levels import parse_level
    from sandbox.replay import load, play

    rep = load(path)
    digest = app.session.world.state_hash()
    assert rep.final_hash == digest
    world = play(rep)                                                 # headless
    assert world.state_hash() == digest
    other = App(scene_from_spec(parse_level(rep.level.text, "r"), path, None),
                size=(1280, 800), out_dir=tmp_path)
    other.session.play_replay(rep)
    for _ in range(len(rep.frames) + 2):
        other.frame(0.5)
    assert other.world.state_hash() == digest                         # in a window
    return rep, world, other.session


def _pos(pos) -> tuple[int, int]:
    return (int(round(pos[0])), int(round(pos[1])))


def key_down(key: int, mod: int = 0, unicode: str = "") -> pygame.event.Event:
    return pygame.event.Event(pygame.KEYDOWN, unicode=unicode, key=key, mod=mod,
                              scancode=0, window=None)


def key_up(key: int, mod: int = 0, unicode: str = "") -> pygame.event.Event:
    return pygame.event.Event(pygame.KEYUP, unicode=unicode, key=key, mod=mod, scancode=0,
                              window=None)


def button_down(pos, button: int = 1) -> pygame.event.Event:
    return pygame.event.Event(pygame.MOUSEBUTTONDOWN, pos=_pos(pos), button=button,
                              clicks=1, touch=False, window=None)


def button_up(pos, button: int = 1) -> pygame.event.Event:
    return pygame.event.Event(pygame.MOUSEBUTTONUP, pos=_pos(pos), button=button, clicks=1,
                              touch=False, window=None)


def motion(pos, rel=(0, 0), buttons=(0, 0, 0)) -> pygame.event.Event:
    return pygame.event.Event(pygame.MOUSEMOTION, pos=_pos(pos), rel=_pos(rel),
                              buttons=tuple(buttons), touch=False, window=None)


def wheel(y: int, pos=(0, 0)) -> pygame.event.Event:
    return pygame.event.Event(pygame.MOUSEWHEEL, flipped=False, x=0, y=int(y),
                              precise_x=0.0, precise_y=float(y), touch=False,
                              pos=_pos(pos), window=None)


def text_input(text: str) -> pygame.event.Event:
    return pygame.event.Event(pygame.TEXTINPUT, text=text, window=None)


def window_size_changed(w: int, h: int) -> pygame.event.Event:
    return pygame.event.Event(pygame.WINDOWSIZECHANGED, x=w, y=h, window=None)


#: Builder -> the real event's name in the dump, with sample arguments.
BUILDERS = {
    "KeyDown": lambda: key_down(pygame.K_a),
    "KeyUp": lambda: key_up(pygame.K_a),
    "MouseButtonDown": lambda: button_down((1, 2)),
    "MouseButtonUp": lambda: button_up((1, 2)),
    "MouseMotion": lambda: motion((1, 2)),
    "MouseWheel": lambda: wheel(1),
    "WindowSizeChanged": lambda: window_size_changed(10, 20),
    "TextInput": lambda: text_input("a"),
}


def post(*events) -> None:
    for e in events:
        pygame.event.post(e)


def press(key: int, mod: int = 0) -> None:
    """A key pressed and released, with the modifier keys of ``mod`` held around it."""
    mods = _modifier_keys(mod)
    for k, m in mods:
        post(key_down(k, m))
    post(key_down(key, mod), key_up(key, mod))
    for k, _ in reversed(mods):
        post(key_up(k, 0))


def _modifier_keys(mod: int) -> list[tuple[int, int]]:
    out = []
    for flag, key in ((pygame.KMOD_SHIFT, pygame.K_LSHIFT), (pygame.KMOD_CTRL, pygame.K_LCTRL),
                      (pygame.KMOD_ALT, pygame.K_LALT)):
        if mod & flag:
            out.append((key, mod & flag))
    return out


def click(app, pos, frames: int = 6, hold: int = 2, dt: float = 1 / 60) -> None:
    """A left click at ``pos`` (px) as a person makes it on ``app``'s window: the pointer
    moves there, the button is held ``hold`` frames, then ``frames`` more (pygame_gui
    answers a click over several frames)."""
    pos = (int(pos[0]), int(pos[1]))
    post(motion(pos))
    app.frame(dt)
    app.frame(dt)
    post(button_down(pos))
    for _ in range(hold):
        app.frame(dt)
    post(button_up(pos))
    for _ in range(frames):
        app.frame(dt)


def drag(a, b, button: int = 1, shift: bool = False, steps: int = 1) -> list:
    """The events of a drag from ``a`` to ``b`` px in ``steps`` moves (Shift held
    around it when ``shift``), as a person makes them; post them or interleave frames."""
    evs = []
    if shift:
        evs.append(key_down(pygame.K_LSHIFT, pygame.KMOD_LSHIFT))
    evs.append(button_down(a, button))
    held = tuple(int(k == button) for k in (1, 2, 3))
    last = a
    for k in range(1, steps + 1):
        p = (a[0] + (b[0] - a[0]) * k / steps, a[1] + (b[1] - a[1]) * k / steps)
        evs.append(motion(p, (round(p[0] - last[0]), round(p[1] - last[1])), held))
        last = p
    evs.append(button_up(b, button))
    if shift:
        evs.append(key_up(pygame.K_LSHIFT, 0))
    return evs
