"""Level files: every shipped level loads, round-trips, builds and runs; every bad file
gives one clean LevelError naming the file and the field; the check and simulate CLIs."""

import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox import levels as L
from sandbox.levels import (
    Level,
    LevelError,
    dump_level,
    find_level,
    level_names,
    load_level,
    parse_level,
    save_level,
)
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.timestep import TIMESTEPS

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ["bridge", "cloth", "cloth_200", "cradle", "orbit", "pendulums", "playground",
           "rope", "soft_body"]


def _readme_example() -> str:
    text = (ROOT / "levels" / "README.md").read_text(encoding="utf-8")
    return re.search(r"```toml\n(.+?)```", text, re.S).group(1)


# --------------------------------------------------------------------------- shipped levels

def test_the_promised_levels_ship():
    assert set(SHIPPED) <= set(level_names())


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_level_validates_and_round_trips(name, tmp_path):
    path = find_level(name)
    level = load_level(path)
    assert level.name and level.description        # shown in the window
    out = tmp_path / f"{name}.toml"
    save_level(level, out)
    assert load_level(out) == level
    assert dump_level(load_level(out)) == out.read_text(encoding="utf-8")  # a fixed point
    assert [p.name for p in tmp_path.iterdir()] == [out.name]   # no temporary file left


def test_orbit_level_is_the_two_moon_lesson():
    # Article 000's single moon (10 m, 1.1 x circular, h = 50 ms) showed too little in
    # 10 s (one orbit); it lives on in the lab (sandbox.lab.problems.moon). The level
    # now has an eccentric inner moon and a circular outer one at h = 1/30 s, so that
    # Euler spirals out and the symplectic ellipse turns within 10 s (test_lessons.py).
    lv = load_level(find_level("orbit"))
    w, (orbit,) = lv.world, lv.bodies
    assert (w.G, w.gravity, w.integrator, w.timestep, w.h) == (
        1.0, (0.0, 0.0), "velocity_verlet", "fixed", pytest.approx(1 / 30))
    assert orbit.central_mass == 1000.0 and lv.ghost == "euler"
    assert [(m.distance, m.speed_factor) for m in orbit.moons] == [(5.3, 0.71), (6.6, 1.0)]


def test_the_benchmark_cloth_is_the_benchmark_scene():
    lv = load_level(find_level("cloth_200"))
    (cloth,) = lv.bodies
    assert (cloth.cols, cloth.rows, cloth.spacing, cloth.shear, cloth.pins) == (
        200, 200, 0.02, True, "top_points")
    assert (lv.world.iterations, lv.world.substeps, lv.world.timestep) == (1, 20, "fixed")
    assert lv.world.dtype == "float32"          # allowed for large cloth; the lab is float64


def test_readme_example_is_valid_and_uses_every_section():
    level = parse_level(_readme_example(), "levels/README.md")
    assert {b.type for b in level.bodies} == {"cloth", "rope", "pendulum"}
    assert {s.type for s in level.shapes} == {"box", "polygon"}
    assert level.world.bounds == (-5.0, -2.0, 5.0, 6.0)


def test_readme_documents_every_field():
    text = (ROOT / "levels" / "README.md").read_text(encoding="utf-8")
    models = [Level, L.WorldSettings, L.View, L.Moon, *L.BODY_TYPES.values(),
              *L.SHAPE_TYPES.values()]
    missing = {f"{m.__name__}.{f}" for m in models for f in m.model_fields
               if f"`{f}`" not in text and f != "type"}
    assert not missing
    for name in [*L.BODY_TYPES, *L.SHAPE_TYPES, *INTEGRATORS, *TIMESTEPS]:
        assert f"`{name}`" in text or f'"{name}"' in text, name


def test_every_body_and_shape_round_trips(tmp_path):
    text = """
    name = "all"
    hint = "press G"
    ghost = "verlet"
    [world]
    G = 1.0
    bounds = [-1, -2, 3, 4]
    seed = 7
    [[bodies]]
    type = "cloth"
    cols = 3
    rows = 2
    [[bodies]]
    type = "rope"
    start = [0, 0]
    end = [1, 0]
    [[bodies]]
    type = "bridge"
    start = [0, 0]
    end = [1, 0]
    [[bodies]]
    type = "soft_ring"
    center = [0, 0]
    [[bodies]]
    type = "soft_blob"
    center = [0, 0]
    [[bodies]]
    type = "pendulum"
    pivot = [0, 0]
    [[bodies]]
    type = "double_pendulum"
    pivot = [0, 0]
    lengths = [1, 2]
    [[bodies]]
    type = "cradle"
    pivot = [0, 0]
    pull = 5
    [[bodies]]
    type = "orbit"
    moons = [{distance = 3, angle = 1.5}, {distance = 5}]
    [[bodies]]
    type = "balls"
    cols = 3
    [[bodies]]
    type = "spring_chain"
    start = [0, 0]
    end = [1, 0]
    damping = 0.5
    [[bodies]]
    type = "spring_pendulum"
    pivot = [0, 0]
    stretch = 0.2
    [[bodies]]
    type = "particles"
    points = [[0.1, 0.2], [0.30000000000000004, 1e-300]]
    pinned = true
    [[bodies]]
    type = "links"
    pairs = [[0, 1], [2, 3]]
    kind = "rope"
    [[bodies]]
    type = "chain"
    points = [[0, 0], [1, 0], [1, 1]]
    pin = "both"
    [[bodies]]
    type = "ball_block"
    cols = 3
    rows = 2
    bottom_center = [5, 5]
    seed = 12345678901234567
    [[bodies]]
    type = "nbody_disc"
    n = 7
    disc_radius = 2.5
    spread = 0.0
    seed = 3
    [[shapes]]
    type = "circle"
    center = [0, 0]
    radius = 1
    restitution = 0.5
    [[shapes]]
    type = "segment"
    a = [0, 0]
    b = [1, 1]
    [[shapes]]
    type = "polygon"
    points = [[0, 0], [0, 1], [1, 1], [1, 0]]
    [[shapes]]
    type = "box"
    min = [0, 0]
    max = [1, 2]
    friction = 0.0
    """
    level = parse_level(text)
    assert [b.type for b in level.bodies] == list(L.BODY_TYPES)
    assert [s.type for s in level.shapes] == list(L.SHAPE_TYPES)
    assert level.bodies[6].lengths == (1.0, 2.0) and isinstance(level.bodies[6].lengths[0], float)
    save_level(level, tmp_path / "all.toml")
    assert load_level(tmp_path / "all.toml") == level
    assert Level() == parse_level("")                     # every field has a default


def test_models_are_frozen():
    level = parse_level("")
    with pytest.raises(ValueError):
        level.world.h = 0.5


# --------------------------------------------------------------------------- bad files

INTEGRATOR_LIST = ", ".join(INTEGRATORS)

# (file text, the field path named, a fragment of the message)
BAD = [
    ("bogus = 1", "bogus", "unknown field"),
    ("[world]\ngravty = [0, -9.81]", "world.gravty", "unknown field (did you mean 'gravity'?)"),
    ("[[bodies]]\ntype = 'cloth'\ncolz = 3", "bodies[0].colz", "unknown field"),
    ("[view]\nwidth = 'wide'", "view.width", "expected a number, got 'wide'"),
    ("[[bodies]]\ntype = 'cloth'\ncols = 3.0", "bodies[0].cols", "expected an integer"),
    ("[world]\ncollide_particles = 1", "world.collide_particles", "expected true or false"),
    ("[world]\ndrag = nan", "world.drag", "expected a finite number, got nan"),
    ("[world]\nh = inf", "world.h", "expected a finite number, got inf"),
    ("[world]\ngravity = [0, -inf]", "world.gravity[1]", "expected a finite number, got -inf"),
    ("[[bodies]]\ntype = 'cloth'\ncols = -3", "bodies[0].cols",
     "expected an integer >= 2, got -3"),
    ("[world]\nh = 0.5", "world.h", "expected a number <= 0.1, got 0.5"),
    ("[world]\nrestitution = 1.5", "world.restitution", "<= 1"),
    ("[world]\ntear_ratio = 0.5", "world.tear_ratio", "expected 0 (never tear)"),
    ("[world]\nintegrator = 'rk5'", "world.integrator",
     f"expected one of: {INTEGRATOR_LIST}, got 'rk5'"),
    ("[world]\ntimestep = 'fixd'", "world.timestep", "expected one of: fixed, variable"),
    ("[world]\ndtype = 'float16'", "world.dtype", "expected one of: float64, float32"),
    ("[[bodies]]\ntype = 'blob'", "bodies[0].type", "expected one of: cloth, rope, bridge"),
    ("[[bodies]]\ncols = 3", "bodies[0].type", "required field is missing"),
    ("[[bodies]]\ntype = 'rope'\nend = [1, 2]", "bodies[0].start", "required field is missing"),
    ("[world]\ngravity = [0, -9.81, 0]", "world.gravity",
     "expected an array of 2 numbers [x, y], got [0, -9.81, 0]"),
    ("[view]\ncenter = 3", "view.center", "expected an array of 2 numbers"),
    ("[[bodies]]\ntype = 'cloth'\npins = 'top'", "bodies[0].pins",
     "expected one of: top_row, top_corners, top_points, top_middle, none"),
    ("[[bodies]]\ntype = 'rope'\nstart = [1, 1]\nend = [1, 1]", "bodies[0].end",
     "expected an end at least"),
    ("[[bodies]]\ntype = 'cradle'\npivot = [0, 0]\nballs = 3\npull = 4", "bodies[0].pull",
     "expected an integer <= balls (3), got 4"),
    ("[world]\nG = 1\n[[bodies]]\ntype = 'orbit'\nmoons = []", "bodies[0].moons",
     "expected at least 1 item"),
    ("[[bodies]]\ntype = 'orbit'", "world.G", "bodies[0] is an orbit"),
    ("[[bodies]]\ntype = 'rope'\nstart = [0, 0]\nend = [1, 0]\n[[bodies]]\ntype = 'nbody_disc'",
     "world.G", "expected a number > 0: bodies[1] is an nbody_disc, which needs n-body gravity"),
    ("[world]\nG = 1\n[[bodies]]\ntype = 'nbody_disc'\nn = 1", "bodies[0].n",
     "expected an integer >= 2, got 1"),
    ("[world]\nG = 1\n[[bodies]]\ntype = 'nbody_disc'\nn = 2001", "bodies[0].n",
     "expected an integer <= 2000, got 2001"),
    ("[world]\nG = 1\n[[bodies]]\ntype = 'nbody_disc'\nseed = -1", "bodies[0].seed",
     "expected an integer >= 0, got -1"),
    ("[world]\nG = 1\n[[bodies]]\ntype = 'nbody_disc'\ntotal_mas = 3", "bodies[0].total_mas",
     "unknown field (did you mean 'total_mass'?)"),
    ("[[bodies]]\ntype = 'ball_block'\njitter = 0.2\nspacing = 0.1", "bodies[0].jitter",
     "expected a number <= spacing (0.1), got 0.2"),
    ("[[bodies]]\ntype = 'ball_block'\ncols = 0", "bodies[0].cols",
     "expected an integer >= 1, got 0"),
    ("[[bodies]]\ntype = 'ball_block'\nseed = 1.5", "bodies[0].seed",
     "expected an integer, got 1.5"),
    ("[world]\nG = 1\n[[bodies]]\ntype = 'orbit'\n[[bodies.moons]]\ndistance = 2\nspeed = 1",
     "bodies[0].moons[0].speed", "unknown field (did you mean 'speed_factor'?)"),
    ("[[shapes]]\ntype = 'polygon'\npoints = [[0, 0], [1, 1], [1, 0], [0, 1]]",
     "shapes[0].points", "expected a convex polygon"),
    ("[[shapes]]\ntype = 'polygon'\npoints = "
     "[[0, 1], [0.59, -0.81], [-0.95, 0.31], [0.95, 0.31], [-0.59, -0.81]]",   # pentagram
     "shapes[0].points", "expected a convex polygon"),
    ("[[shapes]]\ntype = 'polygon'\npoints = [[0, 0], [1, 0], [2, 0]]",
     "shapes[0].points", "non-zero area"),
    ("[[shapes]]\ntype = 'box'\nmin = [0, 0]\nmax = [1, 0]", "shapes[0].max",
     "expected max > min"),
    ("[[shapes]]\ntype = 'circle'\ncenter = [0, 0]\nradius = 1\nfriction = -1",
     "shapes[0].friction", "expected a number >= 0, got -1"),
    ("[world]\nbounds = [1, 0, 0, 1]", "world.bounds", "xmin < xmax"),
    ("[world]\nbounds = [0, 1, 1, 1]", "world.bounds", "ymin < ymax"),
    ("[bodies]\ntype = 'cloth'", "bodies", "expected an array of tables ([[bodies]]"),
    ("world = 5", "world", "expected a table, got 5"),
    ("name = 1979-05-27", "name", "expected a string"),
]


def _one_clean_error(path: Path) -> LevelError:
    """The file gives exactly a LevelError (anything else propagates and fails the test)
    whose every line names the file."""
    with pytest.raises(LevelError) as info:
        load_level(path)
    err = info.value
    assert type(err) is LevelError and err.errors
    assert err.path == str(path)
    lines = str(err).splitlines()
    assert len(lines) == len(err.errors)
    assert all(line.startswith(f"{path}: ") for line in lines)
    return err


@pytest.mark.parametrize("text, field, fragment", BAD, ids=[b[1] for b in BAD])
def test_bad_field_gives_one_clean_error_naming_file_and_field(tmp_path, text, field, fragment):
    path = tmp_path / "bad.toml"
    path.write_text(text + "\n", encoding="utf-8")
    err = _one_clean_error(path)
    assert len(err.errors) == 1, err.errors
    assert err.errors[0].startswith(f"{field}: "), err.errors[0]
    assert fragment in err.errors[0], err.errors[0]


def test_every_error_of_a_file_is_listed_in_file_order(tmp_path):
    path = tmp_path / "many.toml"
    path.write_text("\n".join([
        "name = 3",
        "[world]", "h = nan", "integrator = 'x'", "iterations = 0",
        "[[bodies]]", "type = 'cloth'", "cols = -3", "rows = 1.5",
        "[[bodies]]", "type = 'nope'",
    ]), encoding="utf-8")
    err = _one_clean_error(path)
    assert [e.split(":")[0] for e in err.errors] == [
        "name", "world.integrator", "world.h", "world.iterations", "bodies[0].cols",
        "bodies[0].rows", "bodies[1].type"]


def test_values_in_messages_are_truncated(tmp_path):
    path = tmp_path / "long.toml"
    path.write_text(f"name = {list(range(1000))}\n[view]\nwidth = '{'w' * 500}'\n")
    for line in _one_clean_error(path).errors:
        assert len(line.split(", got ", 1)[1]) <= 60


def _write(tmp_path, data: bytes) -> Path:
    path = tmp_path / "hostile.toml"
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("data, fragment", [
    (b"name = \"caf\xe9\"\n", "not UTF-8 text: invalid byte at offset 11"),
    (b"name = 'ok'\n[world\nh = 1\n", "line 2, column 7: invalid TOML"),
    (b"a = " + b"[" * 10_000 + b"]" * 10_000 + b"\n", "nested too deeply"),
    (b"a = " + b"7" * 5000 + b"\n", "an integer has too many digits"),
    (b"# padding\n" * (2 * 1024 * 1024 // 10), "larger than 1 MiB"),
], ids=["utf8", "syntax", "deep", "digits", "2MiB"])
def test_hostile_bytes_give_one_clean_error(tmp_path, data, fragment):
    err = _one_clean_error(_write(tmp_path, data))
    assert len(err.errors) == 1 and fragment in err.errors[0], err.errors


def test_directory_and_missing_file_give_one_clean_error(tmp_path):
    assert "Is a directory" in _one_clean_error(tmp_path).errors[0] or \
        "cannot read" in _one_clean_error(tmp_path).errors[0]
    assert "No such file" in _one_clean_error(tmp_path / "gone.toml").errors[0]


def test_parse_level_takes_text_and_bytes_and_names_the_source():
    assert parse_level(b"name = 'x'").name == parse_level("name = 'x'").name == "x"
    assert parse_level("\ufeffname = 'bom'").name == "bom"
    with pytest.raises(LevelError, match=r"^mine\.toml: world: expected a table"):
        parse_level("world = 1", "mine.toml")
    with pytest.raises(LevelError, match="not valid Unicode"):
        parse_level("name = '\udc80'")
    with pytest.raises(LevelError, match="larger than 1 MiB"):
        parse_level("#" * (2 << 20))


def test_level_error_pickles():
    err = LevelError("a.toml", ["x: expected y, got 1", "z: unknown field, got 2"])
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, back.errors, str(back)) == (err.path, err.errors, str(err))
    long = LevelError("b", ["n" * 500], limit=1000)             # a list of our own names
    assert pickle.loads(pickle.dumps(long)).errors == ["n" * 500]
    assert "..." in LevelError("b", ["n" * 500]).errors[0]     # 300 characters otherwise


# Text made of the pieces level files are made of, so that most examples get past the
# TOML parser and exercise the validation and the message formatting.
_keys = st.sampled_from(["name", "type", "cols", "rows", "h", "gravity", "integrator",
                         "points", "moons", "bounds", "pull", "start", "end", "x", "a.b",
                         '"q"', "min", "max", "center", "radius", "seed"])
_values = st.recursive(
    st.one_of(st.integers(-10**6, 10**6).map(str),
              st.floats(allow_nan=True, allow_infinity=True).map(repr),   # nan, inf: TOML
              st.sampled_from(["'cloth'", "'rope'", "'orbit'", "'polygon'", "'rk4'", "true",
                               "1979-05-27", '"\\u00e9"', "'''x'''", "0x1F", "1_000"]),
              st.text(max_size=5).map(repr)),
    lambda inner: st.one_of(st.lists(inner, max_size=5).map(lambda v: f"[{', '.join(v)}]"),
                            st.lists(st.tuples(_keys, inner), max_size=3).map(
                                lambda kv: "{" + ", ".join(f"{k} = {v}" for k, v in kv) + "}")),
    max_leaves=12)
_lines = st.one_of(
    st.tuples(_keys, _values).map(lambda kv: f"{kv[0]} = {kv[1]}"),
    st.sampled_from(["[world]", "[view]", "[[bodies]]", "[[shapes]]", "[[bodies.moons]]",
                     "[bodies]", "type = 'cloth'", "type = 'polygon'", "G = 1"]),
    st.text(max_size=20))
_toml_ish = st.lists(_lines, max_size=25).map("\n".join)


def _loads_or_level_error(data):
    try:
        assert isinstance(parse_level(data, "fuzz.toml"), Level)
    except LevelError as e:
        assert e.errors and all(line.startswith("fuzz.toml: ") for line in str(e).splitlines())
        assert "Input should" not in str(e), "a pydantic message was not translated"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_random_bytes_never_raise_anything_but_level_error(data):
    _loads_or_level_error(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_toml_ish)
def test_random_toml_ish_text_never_raises_anything_but_level_error(text):
    _loads_or_level_error(text)


# --------------------------------------------------------------------------- finding

def test_find_level_resolves_names_and_passes_paths_through(tmp_path):
    assert find_level("cloth").resolve() == (ROOT / "levels" / "cloth.toml").resolve()
    assert find_level("some/where.toml") == Path("some/where.toml")
    assert find_level(tmp_path / "x.toml") == tmp_path / "x.toml"
    with pytest.raises(LevelError) as info:
        find_level("no_such_level")
    assert "no_such_level: unknown level" in str(info.value)
    assert "cloth, cloth_200" in str(info.value)               # lists what there is
    assert not any(n.startswith("cloth50") for n in level_names())   # bench scenes: apart


# --------------------------------------------------------------------------- CLI: check

def _main(*args, timeout=60):
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_check_cli_accepts_every_shipped_level():
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "levels").glob("*.toml"))
    r = _main("check", *files)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [f"ok  {f}" for f in files]


def test_check_cli_reports_bad_files_and_exits_2(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[bodies]]\ntype = 'cloth'\ncols = -3\n[world]\nh = nan\n")
    broken = tmp_path / "broken.toml"
    broken.write_bytes(b"a = " + b"[" * 10_000)
    r = _main("check", "levels/cloth.toml", str(bad), str(broken), str(tmp_path / "gone.toml"))
    assert r.returncode == 2                    # bad input, as everywhere on the command line
    out = r.stdout + r.stderr
    assert "Traceback" not in out
    assert r.stdout.splitlines() == [
        "ok  levels/cloth.toml",
        f"{bad}: world.h: expected a finite number, got nan",
        f"{bad}: bodies[0].cols: expected an integer >= 2, got -3",
        f"{broken}: invalid TOML: arrays or tables nested too deeply",
        f"{tmp_path / 'gone.toml'}: cannot read the file: No such file or directory",
    ]


# --------------------------------------------------------------------------- building

def test_policy_follows_the_level():
    for mode in TIMESTEPS:
        lv = L.with_world(parse_level(""), timestep=mode, h=0.02, seed=3)
        policy = L.make_policy_for(lv)
        assert policy.name == mode
    lv = L.with_world(parse_level(""), timestep="fixed", h=0.02, max_steps=3)
    p = L.make_policy_for(lv)
    assert (p.h, p.max_steps) == (0.02, 3)
    assert L.make_policy_for(L.with_world(lv, timestep="variable")).nominal_h == 0.02


def test_with_world_validates_overrides():
    with pytest.raises(LevelError, match=r"^command line: world.integrator: expected one of"):
        L.with_world(parse_level(""), "command line", integrator="rk5")


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_level_builds_and_runs_100_steps_finite(name):
    level = load_level(find_level(name))
    world = L.build_world(level)
    assert world.n > 0
    e0 = world.energy()
    for _ in range(100):
        world.step(level.world.h)
    x, v = world.particles.x, world.particles.v
    assert np.isfinite(x).all() and np.isfinite(v).all()
    assert world.t == pytest.approx(100 * level.world.h)
    assert all(np.isfinite(list(world.energy().values())))
    assert {"kinetic", "potential", "total"} <= set(e0)


def test_build_world_passes_the_world_settings():
    level = load_level(find_level("orbit"))
    world = L.build_world(level)
    cfg = world.config
    assert (cfg.G, tuple(cfg.gravity), cfg.integrator) == (1.0, (0.0, 0.0), "velocity_verlet")
    assert world.n == 3 and world.integrator.name == "velocity_verlet"   # planet, 2 moons


# --------------------------------------------------------------------------- CLI: simulate

def test_simulate_cli_writes_trajectory_and_energy(tmp_path):
    out = tmp_path / "orbit.npz"
    r = _main("simulate", "orbit", "--steps", "40", "--integrator", "rk4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    d = np.load(out)
    # Fixed mode, frame dt = h: exactly one step a frame; row 0 is the initial state.
    assert d["h"].shape == (40,) and np.all(d["h"] == 1 / 30)
    assert d["t"].shape == (41,) and d["t"][-1] == pytest.approx(40 / 30)
    assert d["x"].shape == d["v"].shape == (41, 3, 2)
    for key in ("kinetic", "potential", "total"):
        assert d[f"energy_{key}"].shape == (41,)
    assert str(d["integrator"]) == "rk4"
    # RK4 at 40 steps per orbit of the inner moon, whose close pass is coarse on purpose
    # (the orbit level's lesson): over that one orbit the energy drifts by 0.17%.
    e = d["energy_total"]
    assert abs(e[-1] - e[0]) < 5e-3 * abs(e[0])
    assert [p.name for p in tmp_path.iterdir()] == ["orbit.npz"]


def test_simulate_cli_variable_mode_plans_several_steps_per_frame(tmp_path):
    out = tmp_path / "rope.npz"
    r = _main("simulate", "rope", "--steps", "5", "--timestep", "variable", "--dt", "0.1",
              "--out", str(out))
    assert r.returncode == 0, r.stderr
    d = np.load(out)
    # VariableStep splits a 0.1 s frame into 3 steps (no step above 1/30 s).
    assert len(d["h"]) == 15 and d["t"][-1] == pytest.approx(0.5)


@pytest.mark.parametrize("args, fragment", [
    (["--integrator", "rk5"], "--integrator: invalid choice: 'rk5' (choose from 'euler'"),
    (["--timestep", "sometimes"], "--timestep: invalid choice: 'sometimes' (choose from"),
    (["--dt", "nan"], "--dt must be a positive finite number"),
])
def test_simulate_cli_rejects_bad_options_cleanly(tmp_path, args, fragment):
    r = _main("simulate", "orbit", "--steps", "2", *args, "--out", str(tmp_path / "x.npz"))
    assert r.returncode == 2 and fragment in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "x.npz").exists()


def test_simulate_cli_rejects_a_bad_level_cleanly(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[world]\nh = -1\n")
    r = _main("simulate", str(bad), "--steps", "2", "--out", str(tmp_path / "x.npz"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"{bad}: world.h: expected a number >= 1e-05, got -1" in r.stderr


def test_simulate_reports_divergence_and_keeps_the_partial_run(tmp_path, monkeypatch, capsys):
    import argparse

    from sandbox import headless
    from sandbox.sim import world as world_mod

    real_step, calls = world_mod.World.step, []

    def step(self, h):
        calls.append(h)
        if len(calls) == 4:
            raise world_mod.SimulationDiverged(self.t, self.integrator.name, h)
        real_step(self, h)

    monkeypatch.setattr(world_mod.World, "step", step)
    out = tmp_path / "partial.npz"
    args = argparse.Namespace(level="orbit", steps=10, integrator=None, timestep=None,
                              dt=None, seed=None, out=str(out))
    assert headless.run_simulate(args) == 1              # the run failed
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "simulation diverged" in err and "kept the 3 steps" in err
    d = np.load(out)
    assert d["t"].shape == (4,) and d["x"].shape == (4, 3, 2)


def _inside(poly: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Crossing-number point-in-polygon test, vectorised over points and edges."""
    a, b = poly, np.roll(poly, -1, axis=0)
    px, py = pts[:, None, 0], pts[:, None, 1]
    crosses = (a[:, 1] > py) != (b[:, 1] > py)
    with np.errstate(divide="ignore", invalid="ignore"):
        xi = a[:, 0] + (py - a[:, 1]) * (b[:, 0] - a[:, 0]) / (b[:, 1] - a[:, 1])
    return ((crosses & (px < xi)).sum(axis=1) % 2) == 1


def test_the_soft_bodies_never_pass_through_each_other():
    """The ring rolls off its slope into the blob on its step: in 10 s no blob particle
    is ever inside the ring, and no two particles of different bodies come closer than
    the sum of their radii less the solver's residual (5 %)."""
    world = L.build_world(L.load_level(L.find_level("soft_body")))
    ring, blob = world.bodies[0].particles, world.bodies[1].particles
    r = world.particles.radius
    gap = float(r[ring[0]] + r[blob[0]])
    closest = np.inf
    for _ in range(600):
        world.step(1 / 60)
        x = world.particles.x
        assert not _inside(x[ring], x[blob]).any()
        d = np.linalg.norm(x[ring][:, None] - x[blob][None], axis=2).min()
        closest = min(closest, float(d))
    assert closest > 0.95 * gap
    assert closest < 1.5 * gap                           # they did meet


@pytest.mark.parametrize("kind", sorted(L.BODY_TYPES))
def test_every_body_type_carries_every_face(kind):
    """One entry a body type (``BODY_TYPES``): its schema, its builder, its totals and
    whether it needs gravity. The builder takes every field the schema has (a field the
    builder does not know would fail only when a level uses it), and every parameter it
    takes that no field sets has a default."""
    import inspect

    model = L.BODY_TYPES[kind]
    assert model.model_fields["type"].default == kind
    assert callable(model.builder) and isinstance(model.needs_gravity, bool)
    assert model.totals is not L._Body.totals, "no totals()"
    params = inspect.signature(model.builder).parameters
    assert list(params)[0] == "world"
    fields = set(model.model_fields) - {"type"} - model.DRAWN    # label: the window's
    assert fields <= set(params), fields - set(params)
    assert all(p.default is not inspect.Parameter.empty for n, p in params.items()
               if n != "world" and n not in fields), "a builder parameter no field sets"


def test_every_shape_type_is_one_entry_across_the_level_files_and_the_colliders():
    """A level file's shape type and the colliders' shape set are the same entry: the
    same names, each level model pointing at its set, whose parser is the level check's
    (a pentagram passes neither: its turns all agree but it winds twice)."""
    from sandbox.sim.collide.shapes import SHAPE_SETS

    assert list(L.SHAPE_TYPES) == list(SHAPE_SETS)
    for name, model in L.SHAPE_TYPES.items():
        assert model.shapes is SHAPE_SETS[name] and SHAPE_SETS[name].kind == name
    star = [[np.cos(a), np.sin(a)] for a in np.arange(5) * 4 * np.pi / 5]
    with pytest.raises(ValueError, match="going around once"):
        SHAPE_SETS["polygon"]().add(points=star)
    with pytest.raises(L.LevelError, match="going around once"):
        L.parse_level("[[shapes]]\ntype = 'polygon'\npoints = "
                      + str([[float(x), float(y)] for x, y in star]) + "\n", "star")
