"""Hostile snapshots against ``sandbox.snapshot.load`` (what F9 calls), in a subprocess with a time
limit: every failure is one SnapshotError line naming the file, the world is unchanged
(its state hash), nothing is allocated beyond the limits, and whatever loads can step.
The property-based part is in tests/test_hostile_fuzz.py."""

import io
import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import pytest

from sandbox import snapshot
from sandbox.levels import build_world, find_level, load_level
from sandbox.sim.world import World
from sandbox.snapshot import SnapshotError

ROOT = Path(__file__).resolve().parent.parent


def _good(folder: Path) -> tuple[dict, dict]:
    w = build_world(load_level(find_level("soft_body")))
    for _ in range(3):
        w.step(1 / 60)
    snapshot.save(w, folder / "good.npz")
    with np.load(folder / "good.npz") as z:
        data = {k: z[k] for k in z.files}
    return data, json.loads(bytes(data["meta"]).decode())


def _npy(a: np.ndarray) -> bytes:
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def _header(shape, descr="<f8") -> bytes:
    b = io.BytesIO()
    np.lib.format.write_array_header_1_0(b, {"descr": descr, "fortran_order": False,
                                             "shape": shape})
    return b.getvalue()


def _declare(raw: bytes, name: bytes, size: int) -> bytes:
    """The zip ``raw`` with member ``name``'s uncompressed size declared as ``size``, in
    its local header and in the central directory."""
    out = bytearray(raw)
    for sig, at, name_len_at, name_at in ((b"PK\x03\x04", 22, 26, 30),
                                          (b"PK\x01\x02", 24, 28, 46)):
        start = 0
        while (start := out.find(sig, start)) >= 0:
            n = int.from_bytes(out[start + name_len_at:start + name_len_at + 2], "little")
            if out[start + name_at:start + name_at + n] == name:
                out[start + at:start + at + 4] = size.to_bytes(4, "little")
            start += 4
    return bytes(out)


def _build(folder: Path) -> dict[str, str]:
    """The hostile files; name -> a fragment of the SnapshotError (None: loads)."""
    good, meta = _good(folder)

    def meta_file(m) -> dict:
        return dict(good, meta=np.frombuffer(m if isinstance(m, bytes) else
                                             json.dumps(m).encode(), np.uint8))

    def config(**changes) -> dict:
        return meta_file(dict(meta, config=dict(meta["config"], **changes)))

    cases = {
        "meta_list": (meta_file(b"[1, 2]"), "expected a JSON object, got list"),
        "meta_string": (meta_file(b'"abc"'), "expected a JSON object, got str"),
        "meta_deep": (meta_file(b"[" * 100_000 + b"]" * 100_000), "nested too deeply"),
        "meta_not_json": (meta_file(b"\xff\xfe"), "meta: not JSON"),
        "substeps_1e12": (config(substeps=10**12),
                          "config.substeps: expected an integer <= 64, got 1000000000000"),
        "gravity_ab": (config(gravity="ab"), "config.gravity: expected an array of 2"),
        "iterations_2.5": (config(iterations=2.5), "config.iterations: expected an integer"),
        "drag_nan": (meta_file(json.dumps(dict(meta, config=dict(
            meta["config"], drag=float("nan")))).encode()), "config.drag: expected a finite"),
        "unknown_config": (config(warp=9), "config.warp: unknown field"),
        "float32_1e308": (dict(config(dtype="float32"), p_x=good["p_x"] * 0 + 1e308),
                          "p_x: contains non-finite values (as float32)"),
        "nan_velocity": (dict(good, p_v=good["p_v"] * np.nan), "p_v: contains non-finite"),
        "index_as_float": (dict(good, c_i=good["c_i"] + 0.5), "c_i: expected integers"),
        "colour_2e40": (dict(good, c_colour=good["c_colour"] + 2**40), "c_colour"),
        "kind_7": (dict(good, c_kind=good["c_kind"] * 0 + 7), "c_kind"),
        "negative_rest": (dict(good, c_rest=-good["c_rest"]), "c_rest: expected finite"),
        "index_out": (dict(good, c_j=good["c_j"] + 10**6), "particle index out of range"),
        "shapes_bad": (meta_file(dict(meta, shapes=[{"type": "circle", "center": [0, 0],
                                                     "radius": "x"}])),
                       "shapes[0].radius: expected a number"),
        "shapes_dict": (meta_file(dict(meta, shapes={"a": 1})), "shapes: expected an array"),
        "steps_str": (meta_file(dict(meta, steps="x")), "meta.steps: expected an integer"),
        "pressure_1e9": (meta_file(dict(meta, pressure=10**9)), "meta.pressure"),
        "h_prev_-1": (meta_file(dict(meta, h_prev=-1.0)), "meta.h_prev"),
        "particles_1e6": (dict(good, **{f"p_{k}": np.zeros((300_000, 2) if good[f"p_{k}"].ndim
                                                            == 2 else 300_000) + 1.0
                                         for k in snapshot.PARTICLE_ARRAYS}),
                          "expected at most 200,000 particles"),
        "good_copy": (good, None),
    }
    expect = {}
    for name, (data, fragment) in cases.items():
        np.savez(folder / f"{name}.npz", **data)
        expect[f"{name}.npz"] = fragment or ("LOADED" if name == "good_copy" else "")
    # Pickles are never loaded.
    with zipfile.ZipFile(folder / "pickle.npz", "w") as z:
        z.writestr("meta.npy", _npy(np.array([object()], dtype=object)))
    expect["pickle.npz"] = "expected an array of plain numbers"
    # A header claiming a (10**11, 2) array: refused before anything is allocated.
    with zipfile.ZipFile(folder / "huge_header.npz", "w") as z:
        for k, a in good.items():
            z.writestr(f"{k}.npy", _header((10**11, 2)) if k == "p_x" else _npy(a))
    expect["huge_header.npz"] = "claims 1,600,000,000,000 bytes"
    # A deflate bomb: 576 MiB of zeros in 0.6 MB (one above the 512 MiB budget)...
    with zipfile.ZipFile(folder / "deflate_bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("meta.npy", _npy(good["meta"]))
        with z.open("p_x.npy", "w", force_zip64=True) as f:
            f.write(_header((36 << 20, 2)))
            zeros = b"\0" * (16 << 20)
            for _ in range(36):
                f.write(zeros)
    expect["deflate_bomb.npz"] = "more than 512 MiB of arrays in all"
    # ... and one that says it holds 4 GB.
    with zipfile.ZipFile(folder / "claims_4g.npz", "w", zipfile.ZIP_DEFLATED) as z:
        for k, a in good.items():
            z.writestr(f"{k}.npy", _npy(a))
    (folder / "claims_4g.npz").write_bytes(_declare(
        (folder / "claims_4g.npz").read_bytes(), b"p_x.npy", 4_000_000_000))
    expect["claims_4g.npz"] = "more than 512 MiB of arrays in all"
    # A bomb that lies about its size (16 MB of zeros declared as 1 kB): no more than
    # the declared size is ever inflated.
    with zipfile.ZipFile(folder / "lying_bomb.npz", "w", zipfile.ZIP_DEFLATED) as z:
        for k, a in good.items():
            z.writestr(f"{k}.npy", _header((10**6, 2)) + b"\0" * (16 << 20) if k == "p_x"
                       else _npy(a))
    (folder / "lying_bomb.npz").write_bytes(_declare(
        (folder / "lying_bomb.npz").read_bytes(), b"p_x.npy", 1000))
    expect["lying_bomb.npz"] = "p_x.npy"     # truncated, or its CRC is wrong
    (folder / "garbage.npz").write_bytes(b"not a snapshot at all")
    expect["garbage.npz"] = "not a readable snapshot"
    (folder / "truncated.npz").write_bytes((folder / "good.npz").read_bytes()[:300])
    expect["truncated.npz"] = ""
    os.mkfifo(folder / "fifo.npz")
    expect["fifo.npz"] = "not a regular file (a FIFO)"
    (folder / "folder.npz").mkdir()
    expect["folder.npz"] = "not a regular file (a folder)"
    with open(folder / "sparse_2g.npz", "wb") as f:
        f.truncate(2 << 30)
    expect["sparse_2g.npz"] = "larger than 512 MiB"
    (folder / "link_to_fifo.npz").symlink_to(folder / "fifo.npz")
    expect["link_to_fifo.npz"] = "not a regular file (a FIFO)"
    expect["missing.npz"] = "cannot read it"
    return expect


LOADER = textwrap.dedent("""
    import sys
    from sandbox import snapshot
    from sandbox.levels import build_world, find_level, load_level
    from sandbox.snapshot import SnapshotError
    for path in sys.argv[1:]:
        w = build_world(load_level(find_level("pendulums")))
        w.step(1 / 60)
        before = w.state_hash()
        try:
            snapshot.load(w, path)
        except SnapshotError as e:
            print("ERROR", w.state_hash() == before, str(e).replace(chr(10), "|"))
        except BaseException as e:
            print("ESCAPED", type(e).__name__, str(e)[:100].replace(chr(10), "|"))
        else:
            w.step(1 / 60)
            print("LOADED", w.state_hash() != before, path)
        sys.stdout.flush()
""")


def test_hostile_snapshots_are_refused_cleanly_and_leave_the_world_unchanged(tmp_path):
    expect = _build(tmp_path)
    before = {p.name: (p.lstat().st_size, p.lstat().st_mtime_ns) for p in tmp_path.iterdir()}
    files = [str(tmp_path / name) for name in expect]
    r = subprocess.run([sys.executable, "-c", LOADER, *files], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert len(lines) == len(expect), r.stdout
    for line, (name, fragment) in zip(lines, expect.items(), strict=True):
        if fragment == "LOADED":
            assert line.startswith("LOADED True"), (name, line)
            continue
        assert line.startswith("ERROR True "), (name, line)     # unchanged world
        assert f"{tmp_path / name}: " in line and fragment in line, (name, line)
        assert len(line) < 400
    after = {p.name: (p.lstat().st_size, p.lstat().st_mtime_ns) for p in tmp_path.iterdir()}
    assert after == before


def test_a_snapshot_is_created_with_the_umask_mode_and_never_replaces(tmp_path):
    w = World()
    w.add_particles([[0.0, 0.0]])
    old = os.umask(0o027)
    try:
        snapshot.save(w, tmp_path / "s.npz")
    finally:
        os.umask(old)
    assert (tmp_path / "s.npz").stat().st_mode & 0o777 == 0o640
    (tmp_path / "taken.npz").write_bytes(b"mine")
    with pytest.raises(FileExistsError):
        snapshot.save(w, tmp_path / "taken.npz")
    assert (tmp_path / "taken.npz").read_bytes() == b"mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.npz", "taken.npz"]
    snapshot.save(w, tmp_path / "taken.npz", replace=True)
    other = World()
    snapshot.load(other, tmp_path / "taken.npz")
    assert other.state_hash() == w.state_hash()


def test_a_failed_load_keeps_everything_of_the_world(tmp_path):
    w = build_world(load_level(find_level("pendulums")))
    w.step(1 / 60)
    before = (w.state_hash(), w.config, len(w.bodies), w.started)
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 nonsense")
    with pytest.raises(SnapshotError):
        snapshot.load(w, tmp_path / "bad.npz")
    assert (w.state_hash(), w.config, len(w.bodies), w.started) == before
