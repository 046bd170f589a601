"""Property-based fuzzing of the level schema and of the snapshot loader: whatever is
accepted builds and takes 10 steps without any exception but a reported divergence.

Values come from the schema itself (every field of every body, shape and world table)
mixed with the numbers that broke things before: 1e-300, 1e300, 1e308, nan, inf, 0,
negative, and counts at and past their limits. Small example budgets: this is a guard,
the hostile files are in the other tests/test_hostile_*.py."""

import io
import json
import types
import typing
from typing import Annotated, Literal, Union

import numpy as np
import pytest
import tomli_w
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from sandbox import levels as L
from sandbox import snapshot
from sandbox.levels import LevelError, build_world, parse_level
from sandbox.sim.world import SimulationDiverged, World
from sandbox.snapshot import SnapshotError

EXTREME = [0.0, -0.0, -1.0, 1e-300, 1e-7, 1e-6, 0.5, 2.0, 1e6, -1e6, 1e9, -1e9, 1e300,
           -1e300, 1e308, float("nan"), float("inf"), float("-inf")]
COUNTS = [-1, 0, 1, 2, 3, 7, 64, 65, 200, 400, 401, 5000, 10**6, 2**63]


def _plain(tp):
    while typing.get_origin(tp) is Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def values(tp) -> st.SearchStrategy:
    """Values for a schema type: mostly sensible, often extreme."""
    tp = _plain(tp)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return st.one_of(*[values(a) for a in args if a is not type(None)])
    if origin is Literal:
        return st.sampled_from(args)
    if tp is bool:
        return st.booleans()
    if tp is int:                       # about one value in eight is extreme
        return st.one_of(*[st.integers(0, 12)] * 7, st.sampled_from(COUNTS))
    if tp is float:
        return st.one_of(*[st.floats(-10, 10)] * 7, st.sampled_from(EXTREME))
    if tp is str:
        return st.text(max_size=6)
    if origin is tuple:
        return st.tuples(*[values(a) for a in args]).map(list)
    if origin is list:
        return st.lists(values(args[0]), min_size=1, max_size=4)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return table(tp)
    raise AssertionError(f"no strategy for {tp!r}")


def table(model: type[BaseModel]) -> st.SearchStrategy:
    """A table of ``model``: its required fields and a random half of the others."""
    required, optional = {}, {}
    for name, field in model.model_fields.items():
        if name == "type":
            required[name] = st.just(field.default)
        elif field.is_required():
            required[name] = values(field.annotation)
        else:
            optional[name] = values(field.annotation)
    return st.fixed_dictionaries(required, optional=optional)


LEVELS = st.fixed_dictionaries({}, optional={
    "world": table(L.WorldSettings),
    "bodies": st.lists(st.one_of(*[table(m) for m in L.BODY_TYPES.values()]), min_size=1,
                       max_size=3),
    "shapes": st.lists(st.one_of(*[table(m) for m in L.SHAPE_TYPES.values()]), max_size=2),
})


def _steps_or_diverges(world: World, h: float, n: int = 10) -> str:
    for _ in range(n):
        try:
            world.step(h)
        except SimulationDiverged:
            return "diverged"
    p = world.particles
    assert np.isfinite(p.x).all() and np.isfinite(p.v).all()
    return "finite"


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(LEVELS)
def test_an_accepted_level_builds_and_steps(table_):
    text = tomli_w.dumps(table_)
    try:
        level = parse_level(text, "fuzz.toml")
    except LevelError as e:
        assert all(line.startswith("fuzz.toml: ") and len(line) <= 520
                   for line in str(e).split("\n"))
        event("refused by the schema")
        return
    try:
        world = build_world(level)
    except LevelError:
        event("refused when built")             # what only building can tell
        return
    event("built and stepped: " + _steps_or_diverges(world, level.world.h))


# --------------------------------------------------------------------------- snapshots

def _base() -> tuple[dict, dict]:
    text = """
[world]
collide_particles = true
bounds = [-5, -5, 5, 5]
[[bodies]]
type = 'cloth'
cols = 4
rows = 3
radius = 0.02
[[bodies]]
type = 'soft_ring'
center = [2, 2]
segments = 8
[[bodies]]
type = 'spring_chain'
start = [-3, 0]
end = [-2, 0]
segments = 3
[[shapes]]
type = 'circle'
center = [0, -2]
radius = 0.5
"""
    world = build_world(parse_level(text))
    world.step(1 / 60)
    buf = io.BytesIO()
    np.savez(buf, **_arrays(world))
    with np.load(io.BytesIO(buf.getvalue())) as z:
        data = {k: z[k] for k in z.files}
    return data, json.loads(bytes(data["meta"]).decode())


def _arrays(world: World) -> dict:
    import tempfile
    from pathlib import Path
    with tempfile.TemporaryDirectory() as d:
        snapshot.save(world, Path(d) / "s.npz")
        with np.load(Path(d) / "s.npz") as z:
            return {k: z[k] for k in z.files}


BASE, META = _base()
ARRAYS = sorted(k for k in BASE if k != "meta")
DTYPES = ["float64", "float32", "float16", "int64", "int8", "uint64", "bool"]
JSON = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=4),
                 st.sampled_from([x for x in EXTREME if x == x and abs(x) != float("inf")]),
                 st.lists(st.integers(-3, 3), max_size=3))


@st.composite
def snapshots(draw) -> dict:
    data = dict(BASE)
    meta = json.loads(json.dumps(META))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "dtype", "shape", "drop", "config", "meta"]))
        if kind in ("value", "dtype", "shape", "drop"):
            key = draw(st.sampled_from(ARRAYS))
            if key not in data:
                continue
            a = data[key]
            if kind == "value" and a.size:
                a = a.astype(np.float64).copy()
                a.flat[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from(EXTREME))
                with np.errstate(all="ignore"):
                    a = a.astype(data[key].dtype) if data[key].dtype.kind == "f" else a
            elif kind == "dtype":
                with np.errstate(all="ignore"):
                    a = a.astype(draw(st.sampled_from(DTYPES)))
            elif kind == "shape":
                a = a.reshape(-1)[: draw(st.integers(0, max(a.size - 1, 0)))]
            else:
                data.pop(key)
                continue
            data[key] = a
        elif kind == "config":
            if not isinstance(meta.get("config"), dict):
                continue
            name = draw(st.sampled_from(sorted(META["config"])))
            field = L.WorldSettings.model_fields[name]
            meta["config"][name] = draw(st.one_of(values(field.annotation), JSON))
        else:
            meta[draw(st.sampled_from(sorted(META)))] = draw(JSON)
    text = json.dumps(meta, allow_nan=True).encode()
    data["meta"] = np.frombuffer(text, np.uint8)
    return data


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(snapshots())
def test_a_snapshot_either_loads_and_steps_or_is_refused_cleanly(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("snap") / "fuzz.npz"
    with np.errstate(all="ignore"):
        np.savez(path, **data)
    world = build_world(parse_level("[[bodies]]\ntype = 'pendulum'\npivot = [0, 0]\n"))
    before = world.state_hash()
    try:
        snapshot.load(world, path)
    except SnapshotError as e:
        assert world.state_hash() == before
        assert str(e).startswith(f"{path}: ") and "\n" not in str(e)
        event("refused")
        return
    h = world.particles.h_prev * world.config.substeps or 1 / 60
    event("loaded and stepped: " + _steps_or_diverges(world, h))


@pytest.mark.parametrize("name", L.level_names())
def test_every_shipped_level_round_trips_through_a_snapshot(tmp_path, name):
    world = build_world(L.load_level(L.find_level(name)))
    world.step(1 / 60)
    snapshot.save(world, tmp_path / "s.npz")
    other = World()
    snapshot.load(other, tmp_path / "s.npz")
    assert other.state_hash() == world.state_hash()
