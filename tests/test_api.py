"""The engine's public API (``sandbox/__init__.py``): exactly the names of ``__all__``,
each importing and documented, loaded lazily; the drawing helper (``sandbox/draw.py``)
drawing every part of a world without the app; and the load meter the commands hand the
thread policy (``sandbox/load.py``, psutil on every system)."""

from __future__ import annotations

import ast
import doctest
import inspect
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import numpy as np
import pygame
import pytest

import sandbox
from sandbox import draw, load
from sandbox.sim import backend

ROOT = Path(__file__).resolve().parent.parent
INIT = ROOT / "sandbox" / "__init__.py"


def _variable_docstrings() -> dict[str, str]:
    """The docstrings written under module-level names of ``sandbox/__init__.py`` (the
    registries are dicts: their documentation is there, as pdoc reads it)."""
    body = ast.parse(INIT.read_text(encoding="utf-8")).body
    out = {}
    for node, after in zip(body, body[1:], strict=False):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            out[node.target.id] = after.value.value
    return out


# --- the names -------------------------------------------------------------------------

def test_all_lists_exactly_the_lazy_names_and_each_is_the_core_object():
    assert sandbox.__all__ == sorted(sandbox._LAZY)
    assert len(set(sandbox.__all__)) == len(sandbox.__all__)
    from sandbox.sim import builders, world
    assert sandbox.World is world.World and sandbox.WorldConfig is world.WorldConfig
    public_builders = sorted(n for n in vars(builders) if n.startswith("build_"))
    assert public_builders == sorted(sandbox._BUILDERS), "a builder missing from the API"
    for name in sandbox._BUILDERS:
        assert getattr(sandbox, name) is getattr(builders, name)
    from sandbox.sim.integrators import INTEGRATORS
    from sandbox.sim.timestep import TIMESTEPS
    assert sandbox.INTEGRATORS is INTEGRATORS and sandbox.TIMESTEPS is TIMESTEPS
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sandbox.nope  # noqa: B018


@pytest.mark.parametrize("name", sandbox.__all__)
def test_every_public_name_imports_and_has_a_docstring_of_its_own(name):
    obj = getattr(sandbox, name)
    exec(f"from sandbox import {name}", {})
    if inspect.isclass(obj) or inspect.isroutine(obj):
        doc = obj.__doc__
    else:                                   # data: documented where it is exported
        doc = _variable_docstrings().get(name)
        assert doc and doc != type(obj).__doc__
    assert doc and len(doc.strip()) > 20, f"{name} has no docstring worth the name"


def test_the_module_docstring_names_every_public_name_and_each_group_has_an_example():
    text = sandbox.__doc__
    missing = [n for n in sandbox.__all__ if f"`{n}`" not in text]
    assert not missing, f"the API page does not mention {missing}"
    for group in ("The world.", "Builders", "Integrators and timesteps.", "Levels",
                  "Compiled kernels.", "Drawing."):
        start = text.index(group)
        assert "::" in text[start:text.index("\n\n", text.index("::", start))], group


def test_the_docstring_examples_run():
    """The examples in the registries' docstrings, the drawing helper's and the load
    meter's (the numpy kernels: nothing here compiles)."""
    parser, runner = doctest.DocTestParser(), doctest.DocTestRunner(verbose=False)
    for name, doc in _variable_docstrings().items():
        runner.run(parser.get_doctest(doc, {}, name, str(INIT), 0))
    for module in (draw, load):
        for test in doctest.DocTestFinder().find(module):
            runner.run(test)
    assert runner.failures == 0 and runner.tries >= 12, runner.summarize()


def _loaded_after(code: str) -> set[str]:
    r = subprocess.run([sys.executable, "-c", code + "\nimport sys\nprint(' '.join(sorted("
                        "{m.split('.')[0] for m in sys.modules})))"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_importing_sandbox_loads_neither_numpy_nor_pygame():
    assert not {"numpy", "pygame", "numba", "pydantic"} & _loaded_after("import sandbox")
    # A name loads its module on first use: the core's, without pygame; the drawing's.
    used = _loaded_after("import sandbox\nsandbox.World")
    assert "numpy" in used and "pygame" not in used
    assert "pygame" in _loaded_after("import sandbox\nsandbox.DrawOptions")


def test_draw_needs_only_pygame_and_numpy():
    """A game imports the drawing helper alone: not the window (``sandbox.app``), whose
    import sets up fonts, themes and the compiled rasteriser."""
    loaded = _loaded_after("from sandbox.draw import DrawOptions")
    assert "pygame_gui" not in loaded
    code = ("import sys\nfrom sandbox.draw import DrawOptions\n"
            "print([m for m in sys.modules if m.startswith('sandbox.app')])")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.stdout.split("\n")[-2] == "[]", r.stdout + r.stderr


# --- drawing -----------------------------------------------------------------------------

def test_the_colours_are_the_windows():
    from sandbox.app import render
    for name in ("BACKGROUND", "WALL", "SHAPE_FILL", "SHAPE_EDGE", "PARTICLE", "BALL", "PIN",
                 "GRAB", "SPRING", "NEUTRAL_BIN", "STRAIN_RGB"):
        assert getattr(draw, name) == getattr(render, name), name
    assert np.array_equal(draw.STRAIN_EDGES, render.STRAIN_EDGES)


@pytest.fixture
def numpy_kernels():
    """Drawing reads the links' strain; below 256 links, and here, on numpy."""
    was = backend.ready()
    backend.set_ready(False)
    yield
    backend.set_ready(was)


def _colour(surface, x, y):
    return tuple(surface.get_at((int(round(x)), int(round(y))))[:3])


def test_to_screen_and_to_world_are_inverse_and_fit_shows_the_world():
    options = sandbox.DrawOptions(pygame.Surface((640, 480)), scale=37.5, offset=(100, 400))
    p = np.array([[0.0, 0.0], [1.0, 2.0], [-3.25, 0.5]])
    s = options.to_screen(p)
    assert s[0].tolist() == [100.0, 400.0] and s[1].tolist() == [137.5, 325.0]
    assert np.allclose(options.to_world(s), p)
    world = sandbox.World()
    sandbox.build_rope(world, (-4.0, 1.0), (6.0, 3.0), segments=10)
    options.fit(world, margin=0.05)
    corners = options.to_screen([[-4.0, 1.0], [6.0, 3.0]])
    assert ((corners >= 0) & (corners <= [640, 480])).all()
    assert corners[0, 0] == pytest.approx(32.0) and corners[1, 0] == pytest.approx(608.0)
    empty = sandbox.DrawOptions(pygame.Surface((64, 48))).fit(sandbox.World())
    assert empty.offset == (32.0, 24.0)


def test_draw_shows_every_part_of_a_world(numpy_kernels):
    world = sandbox.World(sandbox.WorldConfig(bounds=(-3.9, -2.9, 3.9, 2.9)))
    rope = sandbox.build_rope(world, (-3.0, 2.0), (-1.0, 2.0), segments=4)
    ball = world.add_particles([[2.0, 2.0]], mass=1.0, radius=0.2)
    sandbox.build_spring_chain(world, (1.0, -1.0), (3.0, -1.0), segments=2)
    world.add_shape("circle", center=(-2.0, -1.5), radius=0.5)
    world.add_shape("box", min=(0.0, -2.5), max=(1.0, -2.0))
    world.add_shape("segment", a=(-3.5, 0.0), b=(-2.5, 0.0), thickness=0.05)
    world.add_shape("polygon", points=[(2.5, 0.5), (3.5, 0.5), (3.0, 1.2)])
    world.particles.x[rope.particles[2], 1] += 0.3          # stretch two links
    world.grab(int(ball[0]), target=(2.0, 1.0))
    screen = pygame.Surface((800, 600))
    options = sandbox.DrawOptions(screen, scale=100)
    screen.fill(options.background)
    options.draw(world)
    to = options.to_screen
    assert _colour(screen, *to((2.0, 2.0))) in (draw.BALL, draw.GRAB)   # the held ball
    x, y = to((2.0, 2.15))
    assert _colour(screen, x, y) == draw.BALL
    px, py = to((-3.0, 2.0))
    assert _colour(screen, px - 4, py) == draw.PIN                     # the rope's pin
    assert _colour(screen, *to((-2.0, -1.5))) == draw.SHAPE_FILL       # circle
    assert _colour(screen, *to((0.5, -2.25))) == draw.SHAPE_FILL       # box
    assert _colour(screen, *to((3.0, 0.7))) == draw.SHAPE_FILL         # polygon
    assert _colour(screen, *to((-3.0, 0.0))) == draw.SHAPE_EDGE        # segment
    assert _colour(screen, *to((1.5, -1.0))) == draw.SPRING            # spring chain
    assert _colour(screen, *(to((2.0, 1.0)) + [5, 0])) == draw.GRAB    # the hand's ring
    assert _colour(screen, *(to((2.0, 1.5)) + [3, 0])) == draw.BACKGROUND
    assert _colour(screen, *to((-3.9, 0.0)) - [1, 0]) == draw.WALL     # the bounds
    strained = {_colour(screen, *to(p)) for p in ((-2.25, 2.15), (-1.75, 2.15))}
    assert strained <= {c for c in draw.STRAIN_RGB[1][4:]}, strained   # rope, stretched

    # Every part can be left out, and a read-only view draws the same picture.
    again = pygame.Surface((800, 600))
    again.fill(options.background)
    sandbox.DrawOptions(again, scale=100).draw(world.view())
    bare = pygame.Surface((800, 600))
    bare.fill(options.background)
    off = sandbox.DrawOptions(bare, scale=100)
    off.bounds = off.shapes = off.links = off.springs = off.particles = off.hand = False
    off.draw(world)
    assert pygame.image.tobytes(bare, "RGB") == b"".join(
        [bytes(draw.BACKGROUND)] * (800 * 600))
    view_pixels = pygame.image.tobytes(again, "RGB")
    assert view_pixels != pygame.image.tobytes(bare, "RGB")


def test_links_in_one_colour_and_worlds_that_blew_up(numpy_kernels):
    world = sandbox.World()
    sandbox.build_cloth(world, cols=6, rows=5, spacing=0.2, origin=(-0.5, 0.5))
    screen = pygame.Surface((200, 200))
    options = sandbox.DrawOptions(screen, scale=100)
    options.strain_colours = False
    options.link_colour = (1, 2, 3)
    options.particles = False
    options.draw(world)
    assert _colour(screen, *options.to_screen((-0.4, 0.5))) == (1, 2, 3)
    world.particles.x[3] = np.nan                           # a diverged world still draws
    world.particles.x[4] = 1e30
    options.particles = True
    options.draw(world)
    world.add_shape("circle", center=(1e12, 0.0), radius=1e9)
    options.draw(world)


# --- the load meter ------------------------------------------------------------------------

def test_the_load_meter_asks_psutil_on_any_system(monkeypatch):
    """Other processes' cores: the machine's busy time over the wall time, less our own;
    the busy fields of whichever system psutil reports (here Windows')."""
    psutil = pytest.importorskip("psutil")
    Times = namedtuple("Times", "user system idle interrupt dpc")
    busy = iter([Times(50.0, 20.0, 900.0, 3.0, 1.0), Times(51.2, 20.8, 900.3, 3.1, 1.0)])
    monkeypatch.setattr(psutil, "cpu_times", lambda: next(busy))
    m = load.LoadMeter()
    assert m.others() is None                       # one reading: no interval yet
    wall, before, ours = m._last
    m._last = (wall - 1.0, before, ours)            # as if read a second ago
    # 2.0 s of busy time (user and system) in 1 s: two cores, ours next to nothing.
    assert m.others() == pytest.approx(2.0, abs=0.05)


def test_the_load_meter_counts_linux_busy_fields_as_proc_stat_did(tmp_path, monkeypatch):
    psutil = pytest.importorskip("psutil")
    Linux = namedtuple("Linux", "user nice system idle iowait irq softirq steal guest "
                                "guest_nice")
    t = Linux(1.0, 2.0, 3.0, 100.0, 7.0, 0.5, 0.25, 0.75, 9.0, 9.0)
    monkeypatch.setattr(psutil, "cpu_times", lambda: t)
    from_psutil = load.LoadMeter()._busy()
    tick = load.LoadMeter()._tick
    stat = tmp_path / "stat"
    stat.write_text("cpu  " + " ".join(str(int(v * tick)) for v in t) + "\n")
    assert from_psutil == pytest.approx(7.5)        # user to steal, less idle and iowait
    assert load.LoadMeter(str(stat))._busy() == pytest.approx(from_psutil)


def test_the_load_meter_without_psutil_or_readings_is_unknown_not_an_error(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)
    m = load.LoadMeter()
    expected = None if not Path("/proc/stat").exists() else float
    busy = m._busy()
    assert (busy is None) if expected is None else isinstance(busy, float)
    for text in ("", "intr 1 2 3\n", "cpu  x y z\n"):
        bad = tmp_path / "stat"
        bad.write_text(text)
        assert load.LoadMeter(str(bad)).others() is None
    monkeypatch.delitem(sys.modules, "psutil")
    psutil = pytest.importorskip("psutil")

    def broken():
        raise OSError("no access")

    monkeypatch.setattr(psutil, "cpu_times", broken)
    assert load.LoadMeter().others() is None


def test_the_real_meter_reads_this_machine():
    m = load.LoadMeter()
    assert m.others() is None
    m._last = (m._last[0] - 1.0, *m._last[1:])       # as if read a second ago
    got = m.others()
    assert got is not None and 0.0 <= got < 4 * (load.os.cpu_count() or 1)
