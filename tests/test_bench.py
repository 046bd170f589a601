"""The benchmark's correctness, never its speed: scenes build and run, the pymunk twin is
the same scene, the files have the promised columns. No test here asserts a timing."""

import csv
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from sandbox import bench, levels, warmup
from sandbox.reference import PymunkTwin
from sandbox.sim.builders import build_cloth, build_rope
from sandbox.sim.world import World, WorldConfig

ROOT = bench.ROOT


@pytest.mark.parametrize("name", list(bench.SCENARIOS))
def test_every_scenario_builds_and_runs_two_frames_with_finite_state(name):
    sc = bench.SCENARIOS[name]
    reason = bench.skip_reason(sc)
    if reason:
        pytest.skip(f"{name}: {reason}")
    world = levels.build_world(sc.level)
    assert world.n > 0
    assert world.config.substeps * max(world.config.iterations, 1) == sc.passes
    for _ in range(2):
        world.step(bench.H)
    assert world.particles.is_finite()
    assert world.steps == 2


def test_the_bench_builds_its_scenes_from_the_level_files(monkeypatch, tmp_path):
    """A timed run and a profile build the scene with ``levels.build_world`` from the
    scene's file (a spy sees the level read from levels/bench/); bench.py builds nothing
    itself (no builder, no particles, no config of its own)."""
    built = []
    real = levels.build_world

    def spy(level):
        built.append(level)
        return real(level)

    monkeypatch.setattr(levels, "build_world", spy)
    sc = bench.SCENARIOS["rope1000"]
    row = bench.run_scenario(sc, rounds=1, frames=1, drawer=None, pymunk=False)
    assert row["status"] == "ok" and row["particles"] == 1001
    assert bench.profile("soft_blob", frames=1, out=io.StringIO(), draw=False) == 0
    # (The profile warms the kernels up first, on the warm-up's own level files.)
    warm = [levels.load_level(levels.LEVELS_DIR / "test" / f"{s}.toml")
            for s in warmup.WARM_SCENES]
    assert [b for b in built if not any(b.name == w.name for w in warm)] == [
        levels.load_level(ROOT / "levels" / "bench" / "rope1000.toml"),
        levels.load_level(ROOT / "levels" / "bench" / "soft_blob.toml")]
    own = [n for n in vars(bench) if n.startswith("build")]
    assert own == []
    source = (ROOT / "sandbox" / "bench.py").read_text(encoding="utf-8")
    for word in ("add_particles", "WorldConfig", "builders", "default_rng", "add_shape("):
        assert word not in source, word


def test_cloth_scenarios_are_the_levels_recipe():
    """Pinned at the five top points (not the whole row), 20 passes as 20 substeps."""
    sc = bench.SCENARIOS["cloth200_shear"]
    world = levels.build_world(sc.level)
    assert world.n == 200 * 200
    assert int((world.particles.inv_mass == 0).sum()) == 5
    assert (world.config.substeps, world.config.iterations) == (20, 1)
    # 199*200 horizontal + 200*199 vertical + 2 * 199*199 diagonals
    assert len(world.constraints) == 2 * 199 * 200 + 2 * 199 * 199
    f32 = levels.build_world(bench.SCENARIOS["cloth200_shear_f32"].level)
    assert f32.particles.x.dtype == np.float32


def _small_cloth():
    world = World(WorldConfig(substeps=4, iterations=1))
    build_cloth(world, 8, 6, spacing=0.1, origin=(0.0, 1.0), pins="top_points", shear=True)
    world.start(bench.H)
    return world


def test_pymunk_twin_of_a_small_cloth_builds_and_steps():
    pymunk = pytest.importorskip("pymunk")
    world = _small_cloth()
    twin = PymunkTwin(world)
    pinned = int((world.particles.inv_mass == 0).sum())
    assert twin.space.iterations == 4
    assert len(twin.bodies) == world.n
    assert twin.counts["static"] == pinned
    c, w = world.constraints, world.particles.inv_mass
    moving = (w[c.i] > 0) | (w[c.j] > 0)           # a link between two pins moves nothing
    assert 0 < twin.counts["pin"] == int(moving.sum()) < len(c)
    joints = [j for j in twin.space.constraints if isinstance(j, pymunk.PinJoint)]
    np.testing.assert_allclose(sorted(j.distance for j in joints), sorted(c.rest[moving]))
    np.testing.assert_allclose(twin.positions(), world.particles.x)
    free = int(np.flatnonzero(world.particles.inv_mass > 0)[-1])
    y0 = twin.positions()[free, 1]
    for _ in range(5):
        twin.step()
    assert twin.is_finite()
    assert twin.positions()[free, 1] < y0                # it falls
    assert all(np.isfinite(twin.constraint_error()))
    assert "space.iterations=4" in twin.settings


def test_pymunk_twin_of_walls_balls_and_rope_links():
    pymunk = pytest.importorskip("pymunk")
    world = World(WorldConfig(substeps=2, iterations=1, bounds=(-1.0, -1.0, 1.0, 1.0),
                              friction=0.4))
    build_rope(world, (-0.5, 0.5), (0.5, 0.5), segments=5, radius=0.02, kind="rope")
    world.start(bench.H)
    shapes = ({"type": "circle", "center": (0.0, -0.5), "radius": 0.2},
              {"type": "box", "min": (0.5, -1.0), "max": (0.9, -0.8)})
    twin = PymunkTwin(world, shapes)
    assert twin.counts["slide"] == 5 and twin.counts["walls"] == 4
    assert twin.counts["shapes"] == 2 and twin.counts["ball"] == 5
    circles = [s for s in twin.space.shapes if isinstance(s, pymunk.Circle)
               and s.body.body_type == pymunk.Body.DYNAMIC]
    assert len(circles) == 5 and all(c.friction == 0.4 for c in circles)
    for _ in range(10):
        twin.step()
    assert twin.is_finite()


def test_pymunk_twin_of_the_pile_has_its_shapes_and_walls():
    pytest.importorskip("pymunk")
    sc = bench.SCENARIOS["pile2000"]
    world = levels.build_world(sc.level)
    twin = PymunkTwin(world, sc.shapes)
    assert (twin.counts["ball"], twin.counts["walls"], twin.counts["shapes"]) == (2000, 4, 6)
    assert twin.space.iterations == 10
    assert all(s.friction == 0.3 for s in twin.space.shapes)   # the world's, none own


def test_a_scenario_that_needs_missing_code_is_reported_not_run():
    sc = bench.Scenario(name="cloth50", group="t", needs=("no_such_api",))
    row = bench.run_scenario(sc, rounds=1, frames=1, drawer=None)
    assert row["status"].startswith("skipped")
    assert row["physics_ms"] is None


def test_targets_read_the_rows_without_asserting_them():
    rows = {"cloth200_shear": {"status": "ok", "physics_ms": 5.0, "frame_ms": 20.0},
            "cloth200": {"status": "skipped: x", "ratio": None}}
    got = {(t["scenario"], t["metric"]): t["result"]
           for t in (t.check(rows) for t in bench.TARGETS)}
    assert got[("cloth200_shear", "physics_ms")] == "PASS"
    assert got[("cloth200_shear", "frame_ms")] == "FAIL"
    assert got[("cloth200", "ratio")] == "skipped: x"
    assert got[("nbody1000_vv", "physics_ms")] == "not run"


def test_minimal_renderer_draws_links_into_the_pixels():
    pygame = pytest.importorskip("pygame")
    drawer = bench.Drawer(prefer_app=False)
    assert drawer.kind == "minimal"
    drawer.view((0.35, 0.75), 1.0)
    world = _small_cloth()
    drawer.draw(world)
    pix = pygame.surfarray.array2d(drawer.surface)
    link = drawer.surface.map_rgb((185, 190, 205))
    assert (pix == link).sum() > 100


def test_quick_only_writes_json_and_csv_with_the_expected_columns(tmp_path):
    out_json, out_csv = tmp_path / "out.json", tmp_path / "out.csv"
    res = tmp_path / "results"
    r = subprocess.run([sys.executable, "main.py", "bench", "--quick", "--only", "cloth50",
                        "--json", str(out_json), "--csv", str(out_csv),
                        "--results-dir", str(res)],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "cloth50" in r.stdout and "targets" in r.stdout
    report = json.loads(out_json.read_text())
    assert {"machine", "run", "rows", "targets"} <= set(report)
    for key in ("cpu", "cores_usable", "python", "numpy", "numba", "pymunk", "id"):
        assert key in report["machine"]
    assert report["run"]["quick"] is True and report["run"]["warm_up_s"] >= 0
    (row,) = report["rows"]
    assert set(bench.CSV_COLUMNS) <= set(row)
    assert row["name"] == "cloth50" and row["status"] == "ok"
    assert row["rounds"] == bench.QUICK_ROUNDS and len(row["rounds_physics_ms"]) == row["rounds"]
    assert len(row["rounds_error"]) == row["rounds"] and row["error_max"] >= row["error_mean"]
    assert row["pymunk_ms"] is not None and "space.iterations=20" in row["pymunk_settings"]
    assert len(report["targets"]) == len(bench.TARGETS)
    rows = list(csv.DictReader(io.StringIO(out_csv.read_text())))
    assert rows and list(rows[0]) == bench.CSV_COLUMNS
    assert [x["name"] for x in rows] == ["cloth50"]
    assert float(rows[0]["physics_ms"]) > 0 and float(rows[0]["ratio"]) > 0
    # the per-machine copy: a partial run never overwrites the full table's file
    stem = report["machine"]["id"] + "-partial"
    assert json.loads((res / f"{stem}.json").read_text())["rows"][0]["name"] == "cloth50"
    assert (res / f"{stem}.csv").exists()


def test_unknown_scenario_is_a_clean_error():
    r = subprocess.run([sys.executable, "main.py", "bench", "--only", "nope", "--no-save"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert "unknown scenario nope" in r.stderr and "cloth200_shear" in r.stderr
    assert "Traceback" not in r.stderr


def test_profile_prints_the_top_functions():
    buf = io.StringIO()
    assert bench.profile("cloth50", frames=2, out=buf, draw=False) == 0
    text = buf.getvalue()
    assert "by tottime" in text and "by cumulative" in text
    assert "world.py" in text


def test_busy_load_starts_and_always_stops_its_processes():
    with bench.BusyLoad(2) as load:
        procs = list(load.procs)
        assert load.running() == 2
    assert all(p.poll() is not None for p in procs)
    with pytest.raises(RuntimeError), bench.BusyLoad(1) as load:     # an error inside
        procs = list(load.procs)
        raise RuntimeError("boom")
    assert all(p.poll() is not None for p in procs)
    with bench.BusyLoad(0) as load:
        assert load.running() == 0


def test_c_reference_covers_the_cloth_links_once():
    """The C frame's batches hold every link of a structural (+ shear) n x n grid once,
    as contiguous slices of the even-then-odd layout, less the pinned top row's own
    links (they move nothing)."""
    for n in (6, 7):
        for shear in (False, True):
            links = 0
            for ra, ca, rb, cb, _rest, _exact in bench.cref_ops(n, shear):
                h, w = ra.stop - ra.start, ca.stop - ca.start
                assert (rb.stop - rb.start, cb.stop - cb.start) == (h, w)
                links += h * w
            want = 2 * n * (n - 1) + (2 * (n - 1) ** 2 if shear else 0) - (n - 1)
            assert links == want


def test_targets_follow_the_load_and_the_c_ratio():
    rows = {"cloth200_shear": {"status": "ok", "physics_ms": 8.0, "frame_ms": 20.0,
                               "cref_ratio": 3.0}}
    for load, frame, ratio in ((0, "FAIL", "FAIL"), (1, "PASS", "FAIL"), (2, None, "PASS")):
        got = {(t["scenario"], t["metric"]): t["result"]
               for t in (t.check(rows) for t in bench.targets_for(load))}
        assert got[("cloth200_shear", "cref_ratio")] == ratio
        assert got.get(("cloth200_shear", "frame_ms")) == frame
    ratios = bench.cref_ratios({"cloth200_shear": {"physics_ms": 6.0}}, {"f64_shear": 2.0})
    assert ratios == {"cloth200_shear": 3.0}


def test_load_option_runs_beside_busy_processes_and_notes_it(tmp_path):
    out_json = tmp_path / "out.json"
    r = subprocess.run([sys.executable, "main.py", "bench", "--quick", "--only", "cloth50",
                        "--load", "1", "--threads", "1", "--no-pymunk", "--no-save",
                        "--json", str(out_json)],
                       cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "load: 1 busy process" in r.stdout
    report = json.loads(out_json.read_text())
    assert report["run"]["load"] == 1 and report["run"]["load_running_at_end"] == 1
    assert report["run"]["threads"] == "1" and report["rows"][0]["threads"] == "serial"


def test_startup_is_timed_in_new_processes_cold_and_warm():
    """The start-up target's numbers come from real launches of the window command (a
    level that does not open is an error, not a time)."""
    r = bench.time_startup(runs=1, compile_all=False)     # the bench's cold compile: minutes
    assert "error" not in r, r
    assert "compile_cpu_s" not in r
    assert r["level"] == bench.STARTUP_LEVEL
    assert len(r["cold_runs"]) == len(r["warm_runs"]) == 1
    assert 0.1 < r["cold_s"] < 300 and 0.1 < r["warm_s"] < 300
    bad = bench.time_startup(level="no_such_level", runs=1, compile_all=False)
    assert "error" in bad and "exited 2" in bad["error"] and "no_such_level" in bad["error"]
    checked = {t["metric"]: t for t in (t.check({"startup": {**r, "status": "ok"}})
                                        for t in bench.TARGETS if t.scenario == "startup")}
    assert set(checked) == {"cold_s", "warm_s", "compile_cpu_s"}
    assert checked["compile_cpu_s"]["result"] == "n/a"        # not measured: not a pass
    assert all(checked[k]["result"] in ("PASS", "FAIL") for k in ("cold_s", "warm_s"))
