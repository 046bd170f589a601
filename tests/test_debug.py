"""Debug draw (issue 37): X cycles contacts, the contacts' corrections, bounding boxes,
link forces, off; what each finds is checked on small worlds, and nothing is drawn while
it is off."""

from __future__ import annotations

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app import debug
from sandbox.app.main import App, scene_from_world
from sandbox.sim.world import World, WorldConfig

H = 1 / 60


@pytest.fixture(autouse=True)
def display():
    pygame.display.init()
    pygame.display.set_mode((800, 600))
    pygame.event.clear()
    yield
    if pygame.display.get_init():
        pygame.event.clear()


def resting_ball() -> World:
    """A ball of radius 0.1 on the floor of a box, another on a disc, two apart."""
    w = World(WorldConfig(bounds=(-2.0, 0.0, 2.0, 3.0)))
    w.add_particles([[0.0, 0.1], [1.0, 1.3], [-1.0, 2.0]], radius=0.1)
    w.add_shape("circle", center=(1.0, 1.0), radius=0.2)
    w.start(H)
    return w


def test_contacts_are_where_the_balls_touch():
    q, n = debug.contacts(resting_ball(), 1e-3)
    got = sorted(zip(np.round(q, 6).tolist(), np.round(n, 6).tolist(), strict=True))
    assert got == [([0.0, 0.0], [0.0, 1.0]), ([1.0, 1.2], [0.0, 1.0])]


def test_particle_pairs_touch_when_they_collide():
    w = World(WorldConfig(collide_particles=True))
    w.add_particles([[0.0, 0.0], [0.2, 0.0]], radius=0.1)
    q, n = debug.contacts(w, 1e-6)
    assert np.allclose(q, [[0.1, 0.0]]) and np.allclose(n, [[-1.0, 0.0]])


def test_boxes_are_the_shapes_then_the_particles():
    lo, hi = debug.boxes(resting_ball())
    assert np.allclose(lo[0], [0.8, 0.8]) and np.allclose(hi[0], [1.2, 1.2])
    assert len(lo) == 4 and np.allclose(hi[1] - lo[1], [0.2, 0.2])


def test_link_labels_say_a_springs_force():
    w = World(WorldConfig(gravity=(0.0, 0.0)))
    w.add_particles([[0.0, 0.0], [1.5, 0.0]])
    w.add_springs([0], [1], k=10.0, rest=1.0)
    (mid, text), = debug.link_labels(w)
    assert np.allclose(mid, [0.75, 0.0]) and text == "+5 N"


def test_x_draws_each_overlay_only_while_it_is_on(tmp_path, monkeypatch):
    app = App(scene_from_world(resting_ball(), h=H), size=(800, 600), out_dir=tmp_path)
    calls = []
    real = debug.draw
    monkeypatch.setattr(debug, "draw", lambda *a, **k: calls.append(a[3]) or real(*a, **k))
    app.frame(H)
    assert calls == []                               # off: nothing asked, nothing drawn
    for mode in ("contacts", "corrections", "boxes", "link forces"):
        ev.press(pygame.K_x)
        app.frame(H)
        assert app.debug_mode == mode and calls[-1] == mode
    ev.press(pygame.K_x)
    app.frame(H)
    n = len(calls)
    app.frame(H)
    assert app.debug_mode == "off" and len(calls) == n
