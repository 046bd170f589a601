"""The benchmark's scenes are level files (``levels/bench/*.toml``), opened like any level.

The scenes must stay the scenes the benchmark timed before they became files, or the
numbers in ``bench/results`` stop being comparable. ``_old_world`` below is a frozen copy
of how ``sandbox/bench.py`` built them until then (commit 5e548fe: its ``Scenario``
table, ``build_world``, ``_nbody_disc`` and ``_ball_block``, verbatim but for names); each
level must build the very same world, array for array, bit for bit.
"""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

import numpy as np
import pytest

from sandbox import bench, levels
from sandbox.headless import run_simulate
from sandbox.levels import LevelError, build_world, find_level, load_level
from sandbox.sim import builders
from sandbox.sim.world import World, WorldConfig

ROOT = bench.ROOT
H = 1.0 / 60.0


# --------------------------------------------------------------------------- the frozen copy

def _old_cloth(n, shear, dtype="float64", substeps=20, iterations=1):
    spacing = 4.0 / n
    return (dict(substeps=substeps, iterations=iterations, dtype=dtype),
            [("cloth", dict(cols=n, rows=n, spacing=spacing,
                            origin=(-spacing * (n - 1) / 2, 2.0), pins="top_points",
                            mass=0.001, shear=shear))], None, ())


def _old_nbody_disc(n, radius=10.0, total_mass=100.0):
    def add(world, rng):
        r = radius * np.sqrt(rng.random(n))
        th = 2.0 * np.pi * rng.random(n)
        x = np.stack([r * np.cos(th), r * np.sin(th)], axis=1)
        speed = np.sqrt(world.config.G * total_mass * r) / radius
        v = speed[:, None] * np.stack([-np.sin(th), np.cos(th)], axis=1)
        v += 0.1 * speed.mean() * rng.standard_normal((n, 2))
        v -= v.mean(axis=0)
        world.add_particles(x, v, mass=total_mass / n, radius=0.05)
    return add


def _old_nbody(n, integrator):
    return (dict(G=1.0, gravity=(0.0, 0.0), softening=0.1, integrator=integrator,
                 substeps=1, iterations=1), [], _old_nbody_disc(n), ())


def _old_ball_block(world, rng):
    cols, rows, gap = 40, 2000 // 40, 2 * 0.05 + 0.01
    r, c = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    x = np.stack([(c.ravel() - (cols - 1) / 2) * gap, 4.5 + r.ravel() * gap], axis=1)
    x += 0.001 * rng.standard_normal(x.shape)
    world.add_particles(x, mass=0.05, radius=0.05)


_OLD_PILE_SHAPES = (
    {"type": "segment", "a": (-2.9, 4.0), "b": (-0.45, 2.2), "thickness": 0.05},
    {"type": "segment", "a": (2.9, 4.0), "b": (0.45, 2.2), "thickness": 0.05},
    {"type": "circle", "center": (-1.3, 0.4), "radius": 0.45},
    {"type": "circle", "center": (1.3, 0.4), "radius": 0.45},
    {"type": "box", "min": (-0.35, -0.6), "max": (0.35, -0.2)},
    {"type": "polygon", "points": ((-3.0, -1.0), (-2.0, -1.0), (-3.0, 0.0))},
)


def _old_recipes():
    """name -> (WorldConfig kwargs, [(builder, params)], extra(world, rng) or None, shapes)."""
    out = {}
    for n in (50, 100, 200):
        for shear in (False, True):
            out[f"cloth{n}{'_shear' if shear else ''}"] = _old_cloth(n, shear)
    for n in (100, 200):
        for shear in (False, True):
            out[f"cloth{n}{'_shear' if shear else ''}_f32"] = _old_cloth(n, shear, "float32")
    for s, i in ((1, 20), (5, 4)):
        out[f"cloth100_shear_{s}x{i}"] = _old_cloth(100, True, substeps=s, iterations=i)
    for dtype, tail in (("float64", ""), ("float32", "_f32")):     # added in issue 13
        out[f"cloth200_shear_1x20{tail}"] = _old_cloth(200, True, dtype, substeps=1,
                                                       iterations=20)
    out["rope1000"] = (dict(substeps=20, iterations=1),
                       [("rope", dict(start=(-5.0, 3.0), end=(5.0, 3.0), segments=1000,
                                      mass=0.01, pin="start", kind="rope"))], None, ())
    out["soft_blob"] = (dict(substeps=20, iterations=1, bounds=(-4.0, -2.0, 4.0, 6.0),
                             restitution=0.3, friction=0.5),
                        [("soft_blob", dict(center=(0.0, -1.0), cols=16, rows=16,
                                            spacing=0.1, mass=0.05, radius=0.04,
                                            compliance=1e-5))], None, ())
    for n, integrator, short in ((100, "velocity_verlet", "vv"), (100, "rk4", "rk4"),
                                 (1000, "velocity_verlet", "vv"), (1000, "rk4", "rk4")):
        out[f"nbody{n}_{short}"] = _old_nbody(n, integrator)
    out["pile2000"] = (dict(substeps=10, iterations=1, bounds=(-3.0, -1.0, 3.0, 12.0),
                            collide_particles=True, friction=0.3), [], _old_ball_block,
                       _OLD_PILE_SHAPES)
    return out


OLD = _old_recipes()


def _old_world(name: str) -> World:
    """The scene as the benchmark built it before the level files (seed 0 throughout)."""
    config, bodies, extra, shapes = OLD[name]
    world = World(WorldConfig(**config))
    for kind, params in bodies:
        levels.BODY_TYPES[kind].builder(world, **params)
    if extra is not None:
        extra(world, np.random.default_rng(0))
    for shape in shapes:
        world.add_shape(shape["type"], **{k: v for k, v in shape.items() if k != "type"})
    world.start(H)
    return world


def assert_same_world(new: World, old: World) -> None:
    """Same config, particles, links, springs and shapes: equal arrays, equal dtypes."""
    assert dataclasses.asdict(new.config) == dataclasses.asdict(old.config)
    p, q = new.particles, old.particles
    for key in ("x", "v", "mass", "inv_mass", "radius"):
        a, b = getattr(p, key), getattr(q, key)
        assert a.dtype == b.dtype, key
        np.testing.assert_array_equal(a, b, err_msg=key, strict=True)
    c, d = new.constraints, old.constraints
    for key in ("i", "j", "rest", "compliance", "kind", "colour"):
        np.testing.assert_array_equal(getattr(c, key), getattr(d, key), err_msg=key,
                                      strict=True)
    for key in ("i", "j", "k", "c"):
        np.testing.assert_array_equal(getattr(new.springs, key), getattr(old.springs, key),
                                      err_msg=f"springs.{key}", strict=True)
    assert new.colliders.specs == old.colliders.specs


# --------------------------------------------------------------------------- the scenes

def _bench_level(name: str):
    return load_level(find_level(f"{levels.BENCH_PREFIX}{name}"))


def test_every_scenario_is_a_level_file_and_every_file_a_scenario():
    assert list(bench.SCENARIOS) == list(OLD)              # the table, in its order
    assert levels.bench_level_names() == sorted(OLD)
    for name, sc in bench.SCENARIOS.items():
        assert sc.path == ROOT / "levels" / "bench" / f"{name}.toml"
        assert find_level(f"bench:{name}").resolve() == sc.path


@pytest.mark.parametrize("name", list(OLD))
def test_the_level_builds_the_scene_the_benchmark_timed(name):
    """Bit for bit the world the benchmark built before its scenes became files, and the
    level the benchmark reads is that file."""
    old = _old_world(name)
    level = _bench_level(name)
    assert bench.SCENARIOS[name].level == level
    assert_same_world(build_world(level), old)
    assert level.name and level.description                 # shown in the window


@pytest.mark.parametrize("name, change", [("pile2000", {"seed": 1}),
                                          ("nbody100_vv", {"seed": 1}),
                                          ("pile2000", {"jitter": 0.002}),
                                          ("nbody100_rk4", {"spread": 0.2})])
def test_the_comparison_sees_a_changed_scene(name, change):
    """The check above can fail: one changed number of a random body is a different
    world."""
    level = _bench_level(name)
    body = level.bodies[0].model_copy(update=change)
    changed = level.model_copy(update={"bodies": [body]})
    with pytest.raises(AssertionError):
        assert_same_world(build_world(changed), _old_world(name))


def test_the_bench_table_keeps_its_settings():
    """What only the benchmark knows, as it was: frames, quick, twin, settling."""
    t = bench.SCENARIOS
    assert [t[n].frames for n in ("cloth50", "cloth100", "cloth200", "rope1000",
                                  "nbody100_vv", "nbody1000_rk4", "pile2000")] == [
        30, 15, 8, 30, 60, 5, 8]
    assert [n for n, s in t.items() if not s.quick] == [
        "cloth100_f32", "cloth100_shear_f32", "cloth200_f32", "cloth200_shear_1x20"]
    assert [n for n, s in t.items() if s.twin] == [
        "cloth50", "cloth50_shear", "cloth100", "cloth100_shear", "cloth200",
        "cloth200_shear", "rope1000", "soft_blob", "pile2000"]
    assert all(s.no_twin for s in t.values() if not s.twin)
    assert (t["pile2000"].settle, t["pile2000"].needs) == (60, ("add_shape",))
    assert t["cloth200_shear"].title == "cloth 200x200 structural + shear, 20x1"
    assert t["pile2000"].view == ((0.0, 3.5), 16.0)
    assert [len(t["pile2000"].shapes), t["soft_blob"].passes, t["cloth100_shear_5x4"].passes
            ] == [6, 20, 20]


# --------------------------------------------------------------------------- bench:NAME

def test_bench_names_resolve_to_the_bench_folder():
    path = find_level("bench:cloth200_shear")
    assert path.resolve() == (ROOT / "levels" / "bench" / "cloth200_shear.toml").resolve()
    assert load_level(path).bodies[0].cols == 200


@pytest.mark.parametrize("name", ["bench:nope", "bench:", "bench:../cloth",
                                  "bench:cloth50.toml", "bench:cloth50/x"])
def test_an_unknown_bench_name_is_one_line_listing_the_scenes(name):
    with pytest.raises(LevelError) as info:
        find_level(name)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{name}: unknown benchmark scene")
    listed = text.split("one of: ", 1)[1].split(", ")
    assert listed == levels.bench_level_names()             # every name, none elided


def test_the_window_level_list_is_not_flooded():
    assert levels.level_names() == sorted(p.stem for p in (ROOT / "levels").glob("*.toml"))
    assert not set(levels.level_names()) & set(levels.bench_level_names())


def _main(*args, timeout=120):
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_check_and_simulate_take_bench_names(tmp_path):
    r = _main("check", "bench:cloth50", "bench:pile2000", "bench:nope")
    assert r.returncode == 2
    lines = r.stdout.splitlines()
    assert lines[:2] == ["ok  levels/bench/cloth50.toml", "ok  levels/bench/pile2000.toml"]
    assert len(lines) == 3 and lines[2].startswith("bench:nope: unknown benchmark scene")
    assert "Traceback" not in r.stdout + r.stderr
    out = tmp_path / "n.npz"                  # simulate, in this process (no start-up)
    args = argparse.Namespace(level="bench:nbody100_vv", steps=3, out=str(out),
                              integrator=None, timestep=None, dt=None, seed=None, every=1,
                              dtype="float64", trace=None, force=False)
    assert run_simulate(args) == 0
    assert np.load(out)["x"].shape == (4, 100, 2)


# --------------------------------------------------------------------------- the new bodies

def _world(G=0.0):
    return World(WorldConfig(G=G, gravity=(0.0, 0.0)))


def test_nbody_disc_is_seeded_centred_and_needs_gravity():
    a, b, c = _world(1.0), _world(1.0), _world(1.0)
    builders.build_nbody_disc(a, n=50, seed=4)
    builders.build_nbody_disc(b, n=50, seed=4)
    builders.build_nbody_disc(c, n=50, seed=5, center=(3.0, -2.0))
    np.testing.assert_array_equal(a.particles.x, b.particles.x)
    assert not np.allclose(a.particles.x, c.particles.x - (3.0, -2.0))
    for w, centre in ((a, (0.0, 0.0)), (c, (3.0, -2.0))):
        assert np.abs(w.particles.v.sum(axis=0)).max() < 1e-9      # momentum zero
        assert (np.hypot(*(w.particles.x - centre).T) <= 10.0).all()
    assert a.particles.mass.sum() == pytest.approx(100.0)
    assert [body.kind for body in a.bodies] == ["nbody_disc"]
    with pytest.raises(ValueError, match="G > 0"):
        builders.build_nbody_disc(_world(0.0))


def test_ball_block_is_seeded_and_jitter_zero_is_a_grid():
    a, b = _world(), _world()
    builders.build_ball_block(a, cols=4, rows=3, spacing=0.5, bottom_center=(1.0, 2.0),
                              jitter=0.0)
    builders.build_ball_block(b, cols=4, rows=3, spacing=0.5, bottom_center=(1.0, 2.0),
                              jitter=0.01, seed=9)
    xs = a.particles.x
    assert sorted(set(xs[:, 0])) == [0.25, 0.75, 1.25, 1.75]
    assert sorted(set(xs[:, 1])) == [2.0, 2.5, 3.0]
    d = np.abs(b.particles.x - xs)
    assert 0 < d.max() < 0.1
    assert a.particles.radius.tolist() == [0.05] * 12


def test_the_new_bodies_count_what_they_build():
    """``level_totals`` (the limits checked before building) for the new body types."""
    level = levels.parse_level("[world]\nG = 1.0\n[[bodies]]\ntype = 'nbody_disc'\nn = 37\n"
                               "[[bodies]]\ntype = 'ball_block'\ncols = 5\nrows = 4\n")
    world = build_world(level)
    t = levels.level_totals(level)
    assert (t.particles, t.links, t.springs) == (world.n, 0, 0) == (57, 0, 0)


# --------------------------------------------------------------------------- in the window

@pytest.mark.parametrize("name", levels.bench_level_names())
def test_the_window_shows_the_whole_scene(name):
    """Opened with ``play bench:NAME`` in the default 1280x800 window, the view (``width``
    by ``width * 800 / 1280`` m around ``center``, fitted whole below the HUD) holds the
    scene: its particles across, a floor (``bounds``) if it has one, and every hanging
    body let down straight below its nearest pin (a cloth's or a rope's lowest reach)."""
    level = load_level(find_level(f"bench:{name}"))
    world = build_world(level)
    (cx, cy), width = level.view.center, level.view.width
    half_w, half_h = width / 2, width * 800 / 1280 / 2
    x = world.particles.x
    assert cx - half_w <= x[:, 0].min() and x[:, 0].max() <= cx + half_w, name
    lowest = x[:, 1].min()
    if world.config.bounds is not None:
        x0, y0, x1, _ = world.config.bounds
        assert cx - half_w <= x0 and x1 <= cx + half_w, name
        lowest = y0
    pinned = world.particles.inv_mass == 0
    if pinned.any() and world.config.bounds is None:
        pins = x[pinned]
        d = np.linalg.norm(x[:, None, :] - pins[None, :, :], axis=2)
        nearest = d.argmin(axis=1)
        lowest = min(lowest, float((pins[nearest, 1] - d.min(axis=1)).min()))
    assert cy - half_h <= lowest, (name, lowest, cy - half_h)
    assert x[pinned, 1].max(initial=-np.inf) <= cy + half_h, name
