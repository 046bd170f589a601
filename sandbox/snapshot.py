"""Snapshots: a world's whole state written to an ``.npz`` file and read back, distrusted.

``save(world, path)`` writes the particles, links, springs, pressure bodies, shapes, the
configuration and the counters (no pickles, atomically, never replacing a file unless
asked); ``load(world, path)`` replaces the world's state with a file's in place, or
raises :class:`SnapshotError` and leaves the world exactly as it was.

This sits above the core (as Box2D keeps ``world_snapshot.c`` apart from
``physics_world.c``): the world holds the physics, while reading a file that anyone may
have written takes the level files' limits and messages (``sandbox.levels``), which the
core must not import.
"""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from . import levels
from .atomic import FileTooLarge, atomic_writer, read_bounded
from .sim import lagrange
from .sim.collide.colliders import Colliders
from .sim.constraints import Constraints, colouring_is_valid
from .sim.forces import PressureBody, Springs
from .sim.particles import Particles
from .sim.world import SimulationDiverged, World, WorldConfig


class SnapshotError(ValueError):
    """A snapshot file could not be read; the running world is unchanged."""


#: The arrays a snapshot holds, as ``p_<name>`` (particles: name -> dimensions),
#: ``c_<name>`` (links) and ``s_<name>`` (springs: name -> dtype).
PARTICLE_ARRAYS = {"x": 2, "v": 2, "x_prev": 2, "a": 2, "mass": 1, "inv_mass": 1, "radius": 1}
LINK_ARRAYS = {"i": "int64", "j": "int64", "rest": "float64", "compliance": "float64",
               "kind": "int8", "colour": "int64"}
SPRING_ARRAYS = {"i": "int64", "j": "int64", "k": "float64", "c": "float64", "rest": "float64"}

#: A snapshot is read whole only below this size, and its arrays may hold at most
#: this many bytes once read (a (10**11, 2) header or a deflate bomb is refused
#: before anything is allocated).
MAX_SNAPSHOT_BYTES = 512 << 20
MAX_META_BYTES = 1 << 20


def save(world: World, path: str | os.PathLike, *, replace: bool = False) -> None:
    """Write ``world``'s full state to ``path`` (.npz, no pickles), atomically, with the
    mode a new file gets from the umask. An existing ``path`` raises ``FileExistsError``
    and is kept, even one that appears while the snapshot is written, unless
    ``replace``."""
    p, c, s = world.particles, world.constraints, world.springs
    arrays = {f"p_{k}": getattr(p, k) for k in PARTICLE_ARRAYS}   # a grab is not state
    arrays.update({f"c_{k}": getattr(c, k) for k in LINK_ARRAYS})
    arrays.update({f"s_{k}": getattr(s, k) for k in SPRING_ARRAYS})
    for n_, b in enumerate(world.pressure):
        arrays[f"g_ring{n_}"] = b.ring
        arrays[f"g_meta{n_}"] = np.array([b.nrt, b.area0])
    meta = {"format": "verlet-sandbox snapshot", "version": 1,
            "config": dataclasses.asdict(world.config), "t": p.t, "h_prev": p.h_prev,
            "a_valid": bool(p.a_valid), "steps": world.steps, "torn": world.torn,
            "pressure": len(world.pressure), "shapes": world.shapes,
            "grids": [list(g) for g in c.grids]}
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with atomic_writer(path, replace=replace) as f:
        np.savez(f, **arrays)


def load(world: World, path: str | os.PathLike) -> None:
    """Replace ``world``'s state with a snapshot, in place (``World.take_state``: the hand
    lets go, the energy ledger and the Lagrange options stay); on any problem raise
    SnapshotError and keep the running world exactly as it was. Never unpickles.

    Nothing in the file is trusted: sizes are bounded before anything is read, the
    config meets the level files' limits (with their messages), every array has the
    kind, shape, range and finiteness the world needs after the cast to its dtype,
    and a copy of the new state takes one step before it is adopted: a file that
    loads also steps (it may diverge: that is reported as always).
    """
    path = Path(path)
    try:
        new = _read(path)
        trial = _read(path, data=new.pop("_data"))
        try:
            trial.step(trial.particles.h_prev * trial.config.substeps or 1 / 60)
        except SimulationDiverged:
            pass
        except Exception as e:          # whatever it is, the window must not meet it
            raise SnapshotError(f"{path}: the state it holds cannot be stepped "
                                f"({type(e).__name__}: {str(e)[:120]})") from None
    except SnapshotError:
        raise
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError,
            RecursionError, MemoryError, OverflowError, EOFError, zipfile.BadZipFile,
            zlib.error) as e:
        raise SnapshotError(f"{path}: not a readable snapshot ({type(e).__name__}: "
                            f"{str(e)[:120]})") from None
    world.take_state(new.pop("_world"))


def _read(path: Path, data: dict | None = None):
    """A new World (in ``{"_world": world, "_data": arrays}``) holding the snapshot at
    ``path``; or, given ``data`` (the arrays already read), just that World."""

    def bad(msg):
        return SnapshotError(f"{path}: {msg}")

    fresh = data is None
    if fresh:
        data = _read_npz(path, MAX_SNAPSHOT_BYTES, MAX_META_BYTES, bad)
    try:
        meta = json.loads(bytes(data["meta"]).decode("utf-8"))
    except RecursionError:
        raise bad("meta: nested too deeply") from None
    except (UnicodeDecodeError, ValueError):
        raise bad("meta: not JSON") from None
    if not isinstance(meta, dict):
        raise bad(f"meta: expected a JSON object, got {type(meta).__name__}")
    if meta.get("format") != "verlet-sandbox snapshot" or meta.get("version") != 1:
        raise bad("unknown snapshot format or version")
    config = _config(meta.get("config"), bad)
    dtype = np.dtype(config.dtype)

    def number(key, low, high, kind=float, default=None):
        v = meta.get(key, default)
        if kind is int:
            ok = isinstance(v, int) and not isinstance(v, bool) and low <= v <= high
        elif kind is bool:
            ok = isinstance(v, bool)
        else:
            ok = (isinstance(v, int | float) and not isinstance(v, bool)
                  and math.isfinite(v) and low <= v <= high)
        if not ok:
            what = {bool: "true or false", int: f"an integer in {low}..{high:,}",
                    float: f"a finite number in {low:g}..{high:g}"}[kind]
            raise bad(f"meta.{key}: expected {what}, got {levels._show(v)}")
        return v

    t = float(number("t", -1e15, 1e15))
    h_prev = float(number("h_prev", 0.0, 10.0))      # 0: never started
    a_valid = number("a_valid", 0, 1, bool)
    steps = number("steps", 0, 10**15, int, 0)
    torn = number("torn", 0, 10**15, int, 0)
    n_pressure = number("pressure", 0, levels.MAX_BODIES, int, 0)

    arr = {}
    for k, nd in PARTICLE_ARRAYS.items():
        a = data.get(f"p_{k}")
        if a is None:
            raise bad(f"missing array p_{k}")
        if a.dtype.kind != "f" or a.ndim != nd:
            raise bad(f"p_{k}: expected a float array with {nd} dimensions")
        with np.errstate(all="ignore"):
            a = a.astype(dtype)
        if not np.isfinite(a).all():
            raise bad(f"p_{k}: contains non-finite values (as {dtype})")
        arr[k] = a
    n = arr["x"].shape[0]
    if n > levels.MAX_PARTICLES:
        raise bad(f"expected at most {levels.MAX_PARTICLES:,} particles (the level "
                  f"limit), got {n:,}")
    for k in PARTICLE_ARRAYS:
        expected = (n, 2) if PARTICLE_ARRAYS[k] == 2 else (n,)
        if arr[k].shape != expected:
            raise bad(f"p_{k}: expected shape {expected}, got {arr[k].shape}")
    if (arr["mass"] <= 0).any() or (arr["inv_mass"] < 0).any() or (arr["radius"] < 0).any():
        raise bad("masses must be positive, inverse masses and radii >= 0")
    p = Particles(x=arr["x"], v=arr["v"], x_prev=arr["x_prev"], a=arr["a"],
                  h_prev=h_prev, t=t, a_valid=a_valid, mass=arr["mass"],
                  inv_mass=arr["inv_mass"], radius=arr["radius"])

    def read_group(prefix, spec):
        out = {}
        m = None
        for k, dt in spec.items():
            a = data.get(f"{prefix}_{k}")
            if a is None or a.ndim != 1:
                raise bad(f"missing or malformed array {prefix}_{k}")
            if m is None:
                m = a.size
            if a.size != m:
                raise bad(f"{prefix}_{k}: expected {m} entries, got {a.size}")
            if np.dtype(dt).kind == "i" and a.dtype.kind not in "iu":
                raise bad(f"{prefix}_{k}: expected integers, got {a.dtype}")
            if np.dtype(dt).kind == "f" and a.dtype.kind not in "fiu":
                raise bad(f"{prefix}_{k}: expected numbers, got {a.dtype}")
            with np.errstate(all="ignore"):
                b = a.astype(dt)
            if b.size and (not np.isfinite(b).all() or b.min() < 0
                           or (a.dtype.kind in "iu" and (a != b).any())):
                raise bad(f"{prefix}_{k}: expected finite values >= 0 of type {dt}")
            out[k] = b
        for k in ("i", "j"):
            if out[k].size and out[k].max() >= n:
                raise bad(f"{prefix}_{k}: particle index out of range 0..{n - 1}")
        return out

    cg = read_group("c", LINK_ARRAYS)
    if cg["kind"].size and cg["kind"].max() > 1:
        raise bad("c_kind: expected 0 (stick) or 1 (rope)")
    if cg["colour"].size and cg["colour"].max() > 1 << 20:
        raise bad("c_colour: expected colours below 2**20")
    c = Constraints(**cg)
    if not colouring_is_valid(c.i, c.j, c.colour):
        raise bad("constraint colouring shares a particle within a batch")
    grids = meta.get("grids", [])       # a layout hint (absent before: row order)
    if not (isinstance(grids, list) and len(grids) <= 10_000 and all(
            isinstance(g, list) and len(g) == 3
            and all(type(v) is int and 0 <= v <= n for v in g) for g in grids)):
        raise bad(f"meta.grids: expected up to 10,000 [first, rows, cols] of "
                  f"integers in 0..{n}")
    for g in grids:
        c.add_grid(*g)
    s = Springs(**read_group("s", SPRING_ARRAYS))
    links, springs = len(c.i), len(s.i)
    for problem in levels.world_limits(n, links, springs, config.G, config.substeps,
                                       config.iterations):
        raise bad(problem)
    pressure = []
    for g in range(n_pressure):
        ring = data.get(f"g_ring{g}")
        gm = data.get(f"g_meta{g}")
        if ring is None or gm is None or gm.shape != (2,) or ring.ndim != 1 \
                or ring.dtype.kind not in "iu" or gm.dtype.kind != "f":
            raise bad(f"pressure body {g} is malformed")
        if ring.size < 3 or ring.min() < 0 or ring.max() >= n:
            raise bad(f"pressure body {g}: expected 3 or more particle indices in 0..{n - 1}")
        if not (np.isfinite(gm).all() and gm[0] >= 0 and gm[1] > 0):
            raise bad(f"pressure body {g}: expected finite nRT >= 0 and a positive area")
        pressure.append(PressureBody(ring.astype(np.int64), float(gm[0]), float(gm[1])))
    try:
        shapes = levels.shape_specs(meta.get("shapes", []))
    except levels.LevelError as e:
        raise bad(e.errors[0]) from None
    world = World(config)
    world.particles, world.constraints, world.springs = p, c, s
    world.pressure, world.steps, world.torn = pressure, steps, torn
    world.colliders = Colliders.from_specs(shapes)
    world.started = h_prev > 0
    if config.constraint_method != "xpbd":
        try:
            lagrange.check(world, config.constraint_method)
        except ValueError as e:
            raise bad(f"config.constraint_method: {e}") from None
    return {"_world": world, "_data": data} if fresh else world


def _read_npz(path: Path, limit: int, meta_limit: int, bad) -> dict[str, np.ndarray]:
    """The arrays of an ``.npz`` that holds at most ``limit`` bytes of plain numbers,
    checked member by member (names, dtypes, shapes and sizes from the headers) before
    any array is allocated; ``bad(msg)`` makes the error."""
    import re

    try:
        raw = read_bounded(path, limit)
    except FileTooLarge:
        raise bad(f"larger than {limit >> 20} MiB; not a snapshot this sandbox writes") \
            from None
    except OSError as e:
        raise bad(f"cannot read it: {e.strerror or type(e).__name__}") from None
    names = re.compile(r"(p|c|s)_[a-z_]{1,16}\.npy|g_(ring|meta)\d{1,6}\.npy|meta\.npy")
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        infos = z.infolist()
        if len(infos) > 64 + 4 * 5000:
            raise bad(f"{len(infos):,} members; not a snapshot")
        budget, data = limit, {}
        for info in infos:
            name = info.filename
            if not names.fullmatch(name) or name[:-4] in data:
                raise bad(f"unexpected member {name[:60]!r}; not a snapshot")
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise bad(f"{name}: unsupported compression")
            if info.file_size > budget:
                raise bad(f"{name}: more than {limit >> 20} MiB of arrays in all")
            with z.open(info) as f:
                version = np.lib.format.read_magic(f)
                read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                               (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                if read_header is None:
                    raise bad(f"{name}: unknown .npy version {version}")
                shape, fortran, dtype = read_header(f, max_header_size=10_000)
                if dtype.kind not in "biuf" or dtype.itemsize > 8 or dtype.fields \
                        or dtype.subdtype is not None or len(shape) > 2:
                    raise bad(f"{name}: expected an array of plain numbers, got {dtype} "
                              f"{shape}")
                count = math.prod(shape)
                size = count * dtype.itemsize
                if size > budget or (name == "meta.npy" and size > meta_limit):
                    raise bad(f"{name}: claims {size:,} bytes; more than a snapshot holds")
                buf = f.read(size)
                if len(buf) != size:
                    raise bad(f"{name}: truncated ({len(buf):,} of {size:,} bytes)")
            budget -= size
            a = np.frombuffer(buf, dtype=dtype).reshape(shape, order="F" if fortran else "C")
            data[name[:-4]] = a.copy()
    if "meta" not in data:
        raise bad("missing 'meta': not a sandbox snapshot")
    if data["meta"].dtype != np.uint8 or data["meta"].ndim != 1:
        raise bad("meta: expected bytes")
    return data


def _config(cfg, bad) -> WorldConfig:
    """A snapshot's config, validated as a level's ``[world]`` (the same limits and the
    same messages: ``config.substeps: expected an integer <= 64, got 1000000000000``)."""
    if not isinstance(cfg, dict):
        raise bad(f"config: expected a table, got {levels._show(cfg)}")
    names = {f.name for f in dataclasses.fields(WorldConfig)}
    extra = sorted(str(k) for k in cfg if k not in names)
    if extra:
        raise bad(f"config.{extra[0][:40]}: unknown field")
    try:
        settings = levels.world_settings(cfg)
    except levels.LevelError as e:
        raise bad(f"config.{e.errors[0]}") from None
    try:
        return WorldConfig(**{k: getattr(settings, k) for k in names})
    except ValueError as e:
        raise bad(f"config: {e}") from None
