"""Debug draw (issue 37): four layers, each on or off by itself (Alt+1 to Alt+4, or its
checkbox in the panel's "▸ debug draw" section), X all off and back on; what each finds
is checked on small worlds, each layer draws only while it is on, any of them together,
and nothing is drawn while none is.
"""

from __future__ import annotations

import itertools

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app import debug
from sandbox.app.camera import Camera
from sandbox.app.keymap import ALT, KEYMAP
from sandbox.app.main import App, scene_from_world
from sandbox.sim.world import World, WorldConfig

H = 1 / 60


@pytest.fixture(autouse=True)
def display():
    with ev.fresh_display((800, 600)):
        yield


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


def busy_world() -> World:
    """:func:`resting_ball` stepped until the floor's ball rests (contacts, corrections)
    with a stretched spring between two free particles (a link force to write)."""
    w = resting_ball()
    w.add_particles([[-1.5, 2.5], [-0.5, 2.5]], pinned=[True, True])
    w.add_springs([3], [4], k=10.0, rest=0.5)
    for _ in range(20):
        w.step(H)
    return w


def colours(surface: pygame.Surface) -> set:
    """Every colour on ``surface`` (its pixels, a numpy view)."""
    a = pygame.surfarray.array3d(surface).astype(np.int64)
    packed = np.unique((a[..., 0] << 16) | (a[..., 1] << 8) | a[..., 2])
    return {(c >> 16, (c >> 8) & 255, c & 255) for c in packed.tolist()}


#: A colour each layer draws in and no other does.
OWN = {"contacts": debug.CONTACT, "corrections": debug.ARROW, "boxes": debug.BOX,
       "link forces": debug.LABEL}
SUBSETS = [frozenset(c) for k in range(len(debug.LAYERS) + 1)
           for c in itertools.combinations(debug.LAYERS, k)]


@pytest.mark.parametrize("layers", SUBSETS, ids=lambda s: "+".join(sorted(s)) or "none")
def test_each_layer_draws_only_when_on_and_any_together(layers):
    """Every one of the 16 choices: the layers on draw (their own colours on the
    canvas, a count of what they drew), the others do not, a legend line each in the
    layers' order; none on: not one pixel changes."""
    w = busy_world()
    cam = Camera((800, 600), center=(0.0, 1.5), width=5.0)
    font = pygame.font.Font(None, 16)
    surface = pygame.Surface((800, 600))
    surface.fill((0, 0, 0))
    drawn = debug.draw(surface, cam, w, layers, font, (0, 0, 800, 600))
    seen = colours(surface)
    for name in debug.LAYERS:
        assert (OWN[name] in seen) == (name in layers), name
    assert set(drawn.counts) == set(layers) | ({"grid"} if "boxes" in layers else set())
    assert all(n > 0 for n in drawn.counts.values()), drawn.counts
    assert drawn.legend == [n for n in debug.LAYERS if n in layers] and not drawn.notes
    if not layers:
        assert seen == {(0, 0, 0)} and drawn.legend_rect is None


def test_the_boxes_layer_draws_the_shape_grid_it_reads():
    """The broad phase's grid (``Colliders.grid_cells``): the cells that hold the disc
    (radius 0.2 at (1, 1): a 2 x 2 block around it) are tinted and edged in the boxes'
    layer, and only there."""
    w = resting_ball()
    cell, cells = w.colliders.grid_cells()
    lo, hi = cells.min(axis=0) * cell, (cells.max(axis=0) + 1) * cell
    assert np.all(lo <= [0.8, 0.8]) and np.all(hi >= [1.2, 1.2]) and len(cells) == 4
    assert World(WorldConfig()).colliders.grid_cells()[1].shape == (0, 2)
    cam = Camera((800, 600), center=(1.0, 1.0), width=2.0)
    cell_px, rects = debug.grid_rects(w, cam, (800, 600))
    assert cell_px == cell and len(rects) == 4
    corner = rects[0].inflate(-4, -4).topleft                  # inside a cell, off the disc
    for layers, tinted in (({"contacts"}, False), ({"boxes"}, True)):
        surface = pygame.Surface((800, 600))
        surface.fill((18, 20, 27))
        debug.draw(surface, cam, w, layers, pygame.font.Font(None, 16))
        assert (tuple(surface.get_at(corner))[:3] != (18, 20, 27)) == tinted
        assert (debug.GRID in colours(surface)) == tinted


def test_an_unknown_layer_is_refused_with_the_layers_named():
    with pytest.raises(ValueError, match="no debug layer 'grid': the layers are contacts"):
        debug.draw(pygame.Surface((10, 10)), Camera((10, 10)), resting_ball(), {"grid"},
                   pygame.font.Font(None, 16))


def window(tmp_path) -> App:
    app = App(scene_from_world(busy_world(), h=H), size=(800, 600), out_dir=tmp_path)
    app.frame(H)
    return app


def test_x_turns_the_layers_last_chosen_off_and_on(tmp_path, monkeypatch):
    """X at first: the contacts; X: off (debug.draw not called, nothing drawn); Alt+3
    adds the boxes to nothing: the boxes alone; Alt+1 with them; X off and X on again:
    the boxes and the contacts, as they were."""
    app = window(tmp_path)
    calls = []
    real = debug.draw
    monkeypatch.setattr(debug, "draw", lambda *a, **k: calls.append(set(a[3])) or real(*a, **k))
    app.frame(H)
    assert calls == [] and app.debug_layers == set()     # off: nothing asked, nothing drawn
    for keys, want in (([(pygame.K_x, 0)], {"contacts"}),
                       ([(pygame.K_x, 0)], set()),
                       ([(pygame.K_3, pygame.KMOD_LALT)], {"boxes"}),
                       ([(pygame.K_1, pygame.KMOD_LALT)], {"boxes", "contacts"}),
                       ([(pygame.K_x, 0)], set()),
                       ([(pygame.K_x, 0)], {"boxes", "contacts"})):
        n = len(calls)
        for key, mod in keys:
            ev.press(key, mod)
        app.frame(H)
        assert app.debug_layers == want
        assert calls[n:] == ([want] if want else [])
        assert (app.debug_draw.drawn is None) == (not want)
    assert app.messages[-1][0] == "debug draw: contacts + boxes (X: off; Alt+1-4: each)"
    ev.press(pygame.K_x)
    app.frame(H)
    assert app.messages[-1][0] == "debug draw: off (X: contacts + boxes again)"


@pytest.mark.parametrize("name", debug.LAYERS)
def test_each_layers_key_toggles_it_alone(tmp_path, name):
    """The layer's key (the keymap's Alt+N, as a person presses it: Alt down, N, Alt
    up) turns it on beside the others on, draws it, and off again; the others stay."""
    keys = [b for b in KEYMAP if b.action == "toggle_debug_layer" and b.arg == name]
    assert len(keys) == 1 and keys[0].mods == ALT              # one key a layer
    b = keys[0]
    app = window(tmp_path)
    other = next(n for n in debug.LAYERS if n != name)
    app.do("set_debug_layer", (other, True))
    for want in ({other, name}, {other}):
        ev.press(b.key, pygame.KMOD_LALT)
        app.frame(H)
        assert app.debug_layers == want
        assert set(app.debug_draw.drawn.counts) - {"grid"} == want
        assert app.debug_draw.drawn.counts.get(name, 0) > 0 or name not in want
    assert app.debug_layers == {other}


def test_a_layer_that_cannot_draw_says_why_once(tmp_path):
    """Link forces over more than ``MAX_LABELS`` links: one message, not one a frame."""
    w = World(WorldConfig(gravity=(0.0, 0.0)))
    w.add_particles([[0.1 * k, 0.0] for k in range(debug.MAX_LABELS + 2)])
    n = debug.MAX_LABELS + 1
    w.add_springs(list(range(n)), list(range(1, n + 1)), k=1.0, rest=0.1)
    w.start(H)
    app = App(scene_from_world(w, h=H), size=(800, 600), out_dir=tmp_path)
    app.do("toggle_debug_layer", "link forces")
    for _ in range(5):
        app.frame(H)
    said = [m[0] for m in app.messages if "link forces:" in m[0]]
    assert said == [f"link forces: at most {debug.MAX_LABELS} links"]
    app.do("toggle_debug_layer", "nope")
    assert app.messages[-1][2] and "no debug layer 'nope'" in app.messages[-1][0]


def test_the_layers_are_recorded_and_a_replay_shows_them(tmp_path):
    """A view choice, as the graph's is: each change of the layers is a ``debug`` event
    (a level loaded later starts its log with them); headless playback leaves the world
    as it is, and the window playing it back draws the same layers at the same frames."""
    from sandbox.app.session import scene_from_spec
    from sandbox.levels import parse_level
    from sandbox.replay import load, play

    app = ev.window_app("pile", tmp_path, (800, 600))
    for keys in ([(pygame.K_x, 0)], [(pygame.K_3, pygame.KMOD_LALT)], [(pygame.K_x, 0)]):
        for key, mod in keys:
            ev.press(key, mod)
        for _ in range(3):
            app.frame(H)
    path = app.session.save_replay(tmp_path / "replays")
    rep = load(path)
    assert [e[2] for e in rep.events if e[1] == "debug"] == [
        ["contacts"], ["contacts", "boxes"], []]
    assert play(rep).state_hash() == app.world.state_hash()    # the world is unchanged
    again = App(scene_from_spec(parse_level(rep.level.text, "r"), path, None),
                size=(800, 600), out_dir=tmp_path)
    again.session.play_replay(rep)
    seen = []
    for _ in range(len(rep.frames) + 1):
        again.frame(H)
        seen.append(set(again.debug_layers))
    assert {"contacts", "boxes"} in seen and seen[-1] == set()
    app.do("set_debug_layer", ("boxes", True))
    app.do("set_level", "pile")                     # a new log starts with the layers on
    assert app.session.log.events[0][1:] == ["debug", ["boxes"]]
