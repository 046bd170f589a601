"""Trails a person controls (issue 37): Ctrl+click gives a particle a trail or takes it
away, each a few seconds long and fading; before anyone chooses, only the few bodies a
level marks (an orbit's, a pendulum's bob) get short ones, and chain_rattle none.
Driven with real-shaped events (tests/events.py)."""

from __future__ import annotations

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app import trails
from sandbox.app.main import App, scene_from_level

H = 1 / 60


@pytest.fixture(autouse=True)
def display():
    with ev.fresh_display((1280, 800)):
        yield


def make(level: str, tmp_path) -> App:
    return App(scene_from_level(level), size=(1280, 800), out_dir=tmp_path)


def run(app: App, frames: int) -> None:
    for _ in range(frames):
        app.frame(H)


def ctrl_click(app: App, k: int) -> None:
    """Ctrl held down (a KEYDOWN, as real input gives it), a click on particle ``k``."""
    pos = app.camera.to_screen(app.world.particles.x[k])
    ev.post(ev.key_down(pygame.K_LCTRL, pygame.KMOD_LCTRL), ev.motion(pos),
            ev.button_down(pos), ev.button_up(pos), ev.key_up(pygame.K_LCTRL, 0))
    app.frame(H)


def drawn(app: App, monkeypatch) -> list:
    """The ``(particles, seconds)`` of each draw_trails call of one frame."""
    import sandbox.app.main as main
    calls = []
    real = main.draw_trails

    def spy(*a, **k):
        calls.append((list(k.get("particles") or []), k.get("seconds")))
        return real(*a, **k)

    monkeypatch.setattr(main, "draw_trails", spy)
    app.draw()
    monkeypatch.setattr(main, "draw_trails", real)
    return calls


def test_chain_rattle_shows_no_trail_until_a_person_chooses(tmp_path, monkeypatch):
    app = make("chain_rattle", tmp_path)
    run(app, 30)
    assert app.show_trails
    assert all(p == [] for p, _ in drawn(app, monkeypatch))
    k = app.world.n - 1
    ctrl_click(app, k)
    assert app.trailed == {k}
    assert app.input.grabbed is None and app.world.mouse is None   # Ctrl: no grab
    run(app, 30)
    calls = drawn(app, monkeypatch)
    assert calls and all(p == [k] and s == app.trail_seconds for p, s in calls)
    ctrl_click(app, k)                                   # again: off
    assert app.trailed == set()
    assert all(p == [] for p, _ in drawn(app, monkeypatch))


def test_the_level_marks_get_short_trails_a_choice_replaces_them(tmp_path, monkeypatch):
    app = make("double_pendulum_lagrange", tmp_path)
    run(app, 120)
    marks = [int(k) for k in trails.default_trails(
        app.world.particles.mass, app.world.particles.radius,
        app.world.particles.inv_mass > 0)]
    assert marks
    (parts, seconds), *_ = drawn(app, monkeypatch)
    assert parts == marks and seconds == trails.DEFAULT_SECONDS
    ctrl_click(app, marks[-1])
    assert app.trailed == {marks[-1]}
    (parts, seconds), *_ = drawn(app, monkeypatch)
    assert parts == [marks[-1]] and seconds == 3.0
    app.reset()                                          # a new world: the marks again
    assert app.trailed is None


def test_a_trail_is_cut_at_its_length_in_world_seconds():
    h = trails.History(np.array([0]), capacity=900)
    for i in range(600):                                 # 10 s at 60 fps, x = t
        t = i / 60
        h.add(np.array([[t, 0.0]]), np.zeros((1, 2)), t)
    surf = pygame.Surface((100, 100))
    seen = []

    def to_screen(x):
        seen.append(np.asarray(x).copy())
        return np.asarray(x) * 0 + 5

    trails.draw_trails(surf, to_screen, h, (255, 255, 255), (0, 0, 0), particles=[0],
                       seconds=3.0)
    xs = seen[-1][:, 0, 0]
    assert xs.min() >= 599 / 60 - 3.0 - 1e-9 and xs.max() == 599 / 60


def test_ctrl_click_on_nothing_says_how(tmp_path):
    app = make("springs", tmp_path)
    ev.post(ev.key_down(pygame.K_LCTRL, pygame.KMOD_LCTRL), ev.button_down((2, 790)),
            ev.button_up((2, 790)), ev.key_up(pygame.K_LCTRL, 0))
    app.frame(H)
    assert app.trailed is None and "Ctrl+click" in app.messages[-1][0]


def test_a_plain_click_still_grabs_and_selects_without_a_trail(tmp_path):
    app = make("springs", tmp_path)
    run(app, 5)
    k = int(np.flatnonzero(app.world.particles.inv_mass > 0)[0])
    pos = app.camera.to_screen(app.world.particles.x[k])
    ev.post(ev.motion(pos), ev.button_down(pos))
    app.frame(H)
    assert app.input.grabbed == k and app.session.followed == k
    ev.post(ev.button_up(pos))
    app.frame(H)
    assert app.trailed is None


def test_the_phase_portrait_draws_before_any_frame_is_kept(tmp_path):
    """A particle chosen for the portrait right after a new world (a reset, a level,
    a click while paused), before a frame has been kept: the graph draws its frame
    and the particle's axis, no 'drawing failed' (the window under Xvfb once said
    "AttributeError: 'NoneType' object has no attribute 'column'")."""
    app = make("springs", tmp_path)
    app.do("pause")
    app.do("reset")
    app.do("pause")
    app.select(3)
    assert app.history is None and app.session.followed == 3
    app.frame(H)
    assert app._draw_error is None
    lay = app.plot.layout
    assert lay is not None and lay.ylabel[1] in ("vx of particle 3 (m/s)",
                                                 "vy of particle 3 (m/s)")
