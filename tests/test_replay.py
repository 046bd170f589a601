"""Replay files (F6, ``main.py replay``): a session played back bit for bit, and hostile
files refused with one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import events as ev
import numpy as np
import pygame
import pytest

from sandbox.app.main import App
from sandbox.replay import ReplayError, load, play

ROOT = Path(__file__).resolve().parent.parent
H = 1 / 60


def record_session(tmp_path) -> tuple[Path, str]:
    """A session with every kind of input, at irregular real frame times: a spring drag
    of the pendulum's bob, an integrator and a solver switch, a Shift-drag cut, a pin,
    a reset. Returns the replay file and the final state hash."""
    pygame.display.init()
    pygame.display.set_mode((1280, 800))
    pygame.event.clear()
    app = App("playground", size=(1280, 800), out_dir=tmp_path)
    dts = np.random.default_rng(3).uniform(0.008, 0.035, 200)
    it = iter(dts)
    for _ in range(10):
        app.frame(next(it))
    bob = app.world.nearest_movable([3.0, 1.0], 5.0)
    p = app.camera.to_screen(app.world.particles.x[bob])
    ev.post(ev.motion(p), ev.button_down(p))
    for k in range(15):
        ev.post(ev.motion((p[0] - 6 * k, p[1] - 4 * k), (-6, -4), (1, 0, 0)))
        app.frame(next(it))
    ev.post(ev.button_up((p[0] - 84, p[1] - 56)))
    app.frame(next(it))
    app.do("set_integrator", "verlet")
    app.do("change_setting", ("substeps", 1))
    app.do("change_setting", ("drag", 1))             # D: air drag, one row of SETTINGS
    app.frame(next(it))
    app.do("set_setting", ("drag", 0.35))             # and its slider
    x = app.world.particles.x
    y = float(np.median(x[:300, 1]))
    a = app.camera.to_screen([x[:300, 0].min() - 0.2, y])
    b = app.camera.to_screen([x[:300, 0].max() + 0.2, y])
    ev.post(*ev.drag(a, b, shift=True, steps=4))
    app.frame(next(it))
    q = app.camera.to_screen(app.world.particles.x[290])
    ev.post(ev.button_down(q, 3), ev.button_up(q, 3))
    for _ in range(20):
        app.frame(next(it))
    app.do("reset")
    for _ in range(10):
        app.frame(next(it))
    assert len(app.world.constraints) == len(app.scene.make_world().constraints)
    path = app.session.save_replay(tmp_path / "replays")
    kinds = {e[1] for e in json.loads(path.read_text())["events"]}
    assert {"grab", "drag", "release", "integrator", "set", "cut", "pin",
            "reset"} <= kinds
    sets = [e[2:] for e in json.loads(path.read_text())["events"] if e[1] == "set"]
    # One more substep, one step more drag (0.05 1/s), then the slider's 0.35; after
    # the reset the drag chosen again (the level's own is another).
    own = app.scene.make_world().config
    assert own.drag != 0.35
    assert sets[:3] == [["substeps", own.substeps + 1], ["drag", own.drag + 0.05],
                        ["drag", 0.35]]
    assert sets[-1] == ["drag", 0.35] and app.world.config.drag == 0.35
    return path, app.world.state_hash()


def test_a_session_replays_bit_for_bit_headless_and_in_the_window(tmp_path):
    path, digest = record_session(tmp_path)
    rep = load(path)
    assert rep.final_hash == digest
    assert play(rep).state_hash() == digest
    out = tmp_path / "run.npz"
    r = subprocess.run([sys.executable, "main.py", "replay", str(path), "--headless",
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert digest in r.stdout and "bit for bit" in r.stdout
    with np.load(out) as z:
        assert len(z["h"]) == sum(len(f) for f in rep.frames)
        assert str(z["state_hash"]) == digest
    # In the window: the replay drives the session instead of the clock and the mouse.
    from sandbox.app.session import scene_from_spec
    from sandbox.levels import parse_level
    app = App(scene_from_spec(parse_level(rep.level.text, "r"), path, None),
              size=(1280, 800), out_dir=tmp_path)
    app.session.play_replay(rep)
    app.frame(0.5)
    state = app.hud_columns()[0][-1]
    state = state[0] if isinstance(state, tuple) else state
    assert f"REPLAY frame 1 of {len(rep.frames):,}" in state     # not a live session
    for _ in range(len(rep.frames) + 1):
        app.frame(0.5)                                # the real frame time is ignored
    assert app.world.state_hash() == digest
    assert "bit for bit" in app.messages[-1][0]


def test_a_loaded_snapshot_makes_the_session_unreplayable_and_says_why(tmp_path):
    pygame.display.init()
    app = App("pendulums", size=(800, 600), out_dir=tmp_path)
    app.frame(H)
    app.save_snapshot()
    app.load_snapshot()
    app.do("save_replay")
    assert app.messages[-1][2] and "snapshot was loaded" in app.messages[-1][0]
    assert not (tmp_path / "replays").exists() or not list((tmp_path / "replays").iterdir())


GOOD = {"format": "verlet-sandbox replay", "version": 1,
        "level": {"name": "t", "text": (ROOT / "levels" / "pendulums.toml").read_text()},
        "frames": [[0.01], [0.01]], "events": [[0, "integrator", "rk4"]], "final_hash": ""}


def _variant(**changes) -> str:
    d = json.loads(json.dumps(GOOD))
    d.update(changes)
    return json.dumps(d)


@pytest.mark.parametrize("text, fragment", [
    ("not json at all", "invalid JSON"),
    ("[1, 2, 3]", "not a replay file"),
    (_variant(format="something else"), "not a replay file"),
    (_variant(version=2), "version"),
    (_variant(frames=[[0.01], [-1.0]]), "frames.1.0"),
    (_variant(frames=[[0.01], [1e400]]), "Infinity is not a number"),
    (_variant(events=[[0, "explode"]]), "unknown operation 'explode'"),
    (_variant(events=[[0, "grab", 1.0, 2.0]]), "'grab' takes [x, y, pick radius]: 3 arg"),
    (_variant(events=[[3, "release"], [1, "release"]]), "must not go back"),
    (_variant(events=[[0, "integrator", "rk5"]]), "'integrator' takes [integrator]: an int"),
    (_variant(events=[[0, "configure", 0, 1]]), "'iterations' takes an integer in 1..200"),
    # Types and magnitudes from someone else's file: one line each, never a traceback.
    (_variant(events=[[0, ["grab"], 1.0, 2.0, 0.1]]), "unknown operation"),
    (_variant(events=[[0, {"op": "grab"}]]), "unknown operation"),
    (_variant(events=[[0, "integrator", ["rk4"]]]), "an integrator one of"),
    (_variant(events=[[0, "constraints", {"m": 1}]]), "a constraint method one of"),
    (_variant(events=[[0, "reset", ["euler"], 10, 1, 0.01]]), "an integrator one of"),
    (_variant(events=[[0, "reset", "euler", 10, 1, 5e-324]]), "a step h in"),
    (_variant(events=[[0, "cut", -1e308, 0.0, 1e308, 0.0]]), "a coordinate within"),
    (_variant(events=[[0, "pin", 0.0, 0.0, 1e308]]), "a radius in"),
    (_variant(frames=[[0.01], [5e-324]]), "frames.1.0"),
    (_variant(events=[[0, "set", "tear_ratio", 1.0]]), "'set' takes [setting, value]"),
    (_variant(events=[[0, "set", "gravity", 51.0]]), "'gravity' takes a number in 0..50"),
    (_variant(events=[[0, "set", "wind", -21]]), "'wind' takes a number in -20..20"),
    (_variant(events=[[0, "set", "friction", 2.01]]), "'friction' takes a number in 0..2"),
    (_variant(events=[[0, "set", ["drag"], 1.0]]), "'set' takes [setting, value]"),
    (_variant(events=[[0, "set", "drag"]]), "'set' takes [setting, value]"),
    (_variant(events=[[0, "set", "drag", 11.0]]), "'drag' takes a number in 0..10"),
    (_variant(events=[[0, "set", "drag", "x"]]), "'drag' takes a number in 0..10"),
    (_variant(events=[[0, "set", "substeps", 2.5]]), "'substeps' takes an integer in 1..64"),
    (_variant(events=[[0, "set", "iterations", 201]]), "'iterations' takes an integer"),
    (_variant(events=[[0, "debug", ["grid"]]]), "'debug' takes [[layer, ...]]: a list"),
    (_variant(events=[[0, "debug", "contacts"]]), "a list of distinct debug layers"),
    (_variant(events=[[0, "debug", ["boxes", "boxes"]]]), "a list of distinct debug"),
    (_variant(events=[[0, "debug", [["boxes"]]]]), "a list of distinct debug layers"),
    (_variant(events=[[0, "debug"]]), "'debug' takes [[layer, ...]]: 1 argument"),
    (_variant(level={"name": "t", "text": "[world]\niterations = -3\n"}), "iterations"),
    ('{"format": "verlet-sandbox replay", "version": 1, "frames": [[NaN]]}', "NaN"),
    ("[" * 100_000 + "]" * 100_000, "invalid JSON"),
])
def test_a_hostile_replay_file_is_one_line_and_nothing_runs(tmp_path, text, fragment):
    bad = tmp_path / "bad.replay.json"
    bad.write_text(text)
    with pytest.raises(ReplayError, match="bad.replay.json") as e:
        load(bad)
    assert fragment in str(e.value) and "\n" not in str(e.value)
    out = tmp_path / "o.npz"
    r = subprocess.run([sys.executable, "main.py", "replay", str(bad), "--headless",
                        "--out", str(out)], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and not out.exists()
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_directory_or_missing_file_is_refused(tmp_path):
    for p in (tmp_path, tmp_path / "nope.json"):
        with pytest.raises(ReplayError, match="not a file"):
            load(p)


@pytest.mark.parametrize("events, text, fragment", [
    ([[1, "constraints", "rattle"]], None, "the world refused it: RATTLE / SHAKE"),
    ([], '[[bodies]]\ntype = "links"\npairs = [[0, 5]]\n', "its level cannot be built"),
])
def test_a_replay_the_world_refuses_is_one_line(tmp_path, events, text, fragment):
    """What only building or the world can tell (a link to a missing particle, RATTLE
    on 2,249 links) escaped as a LevelError or ConstraintMethodError traceback."""
    level = text if text is not None else (ROOT / "levels" / "cloth.toml").read_text()
    bad = tmp_path / "bad.replay.json"
    bad.write_text(json.dumps({**GOOD, "level": {"name": "t", "text": level},
                               "frames": [[0.01]] * 3, "events": events}))
    r = subprocess.run([sys.executable, "main.py", "replay", str(bad), "--headless"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and fragment in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_replay_asking_for_unbounded_work_is_refused_before_anything_runs(tmp_path):
    """7.5 M one-step frames in a 64 MiB file would have run two hours at 1.8 GB; 10 M
    empty frames reached 1.5 GB while parsing. Both are refused up front, in a bounded
    time and memory, naming the limit."""
    import resource

    from sandbox import replay as R

    many = tmp_path / "many.replay.json"
    many.write_text(json.dumps({**GOOD, "frames": [[0.01] * 3] * (R.MAX_TOTAL_STEPS // 3
                                                                   + 1)}))
    empty = tmp_path / "empty.replay.json"
    empty.write_bytes(b'{"format": "verlet-sandbox replay", "version": 1, "frames": ['
                      + b"[]," * (R.MAX_FRAMES + R.MAX_EVENTS + (1 << 20)) + b"[]]}")
    for path, fragment in ((many, "a replay may take at most"),
                           (empty, "more frames and inputs than a replay may hold")):
        r = subprocess.run([sys.executable, "main.py", "replay", str(path), "--headless"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120,
                           preexec_fn=lambda: resource.setrlimit(
                               resource.RLIMIT_AS, (3 << 30, 3 << 30)))
        assert r.returncode == 2 and fragment in r.stderr, r.stderr
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_replay_out_never_replaces_a_file_without_force(tmp_path):
    path, _ = record_session(tmp_path)
    taken = tmp_path / "level.toml"
    taken.write_text("keep me")
    cmd = [sys.executable, "main.py", "replay", str(path), "--headless", "--out", str(taken)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "exists; --force replaces it" in r.stderr
    assert taken.read_text() == "keep me"
    r = subprocess.run(cmd + ["--force"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and taken.read_bytes()[:2] == b"PK"       # the archive


def test_a_session_log_stays_small_and_stops_at_the_replay_limits(monkeypatch):
    """A window left open grew ~0.9 MiB a minute, the replay log's frames among it (a
    Python list of floats a frame, paused frames too). Frames are kept as arrays (16
    bytes a one-step frame), and past the limits the log stops and says why."""
    from sandbox import replay as R

    log = R.SessionLog("t", "")
    for k in range(36_000):                       # ten minutes at 60 fps
        log.step([1 / 60] if k % 2 else [])
    assert log.frame == 36_000 and log.frames[1] == [1 / 60] and log.frames[0] == []
    assert log._steps.itemsize * len(log._steps) + log._ends.itemsize * len(log._ends) \
        < 16 * 36_000
    monkeypatch.setattr(R, "MAX_FRAMES", 100)
    short = R.SessionLog("t", "")
    for _ in range(150):
        short.step([0.01])
        short.record("release")
    assert "longer than 100 frames" in short.broken and short.frame == 0
    with pytest.raises(R.ReplayError, match="more than a replay may hold"):
        short.to_json()
