"""The numbers a redesign must keep: the state after 300 frames of a varying frame time
(``tests/hashes.py``) is the one recorded in ``tests/data/state_hashes.json`` before the
redesign, bit for bit, for scenes that between them take every way a step can run (links
only, compiled and numpy; contacts; springs; n-body; Lagrange multipliers; RATTLE), in
float64 and float32, on the numpy references and on the compiled kernels.
``python -m tests.hashes --compare`` checks every level and bench scene (slow)."""

import json

import hashes
import pytest

RECORDED = json.loads(hashes.DATA.read_text())

#: Every kind of step, small enough for the suite (the full list: ``hashes.scenes()``).
#: (The rope, the pile and the 50x50 cloth take minutes on numpy: the full check has them.)
SCENES = ["cradle", "soft_body", "pendulums", "springs", "orbit", "chain_rattle",
          "double_pendulum_lagrange", "bench:soft_blob", "bench:nbody100_vv"]


def test_recorded_covers_every_scene_both_types_both_paths():
    assert set(RECORDED) == {f"{s}|{d}|{p}" for s in hashes.scenes()
                             for d in ("float64", "float32") for p in ("numpy", "compiled")}


@pytest.mark.parametrize("name", SCENES)
def test_state_hash_unchanged(name):
    for dtype in ("float64", "float32"):
        for compiled in (False, True):
            key = f"{name}|{dtype}|{'compiled' if compiled else 'numpy'}"
            assert hashes.run(name, dtype, compiled) == RECORDED[key], key
