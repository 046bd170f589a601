"""The state hashes that a redesign must keep: every shipped level and bench scene after
``FRAMES`` frames of the app's own timestep policy on a fixed, varying frame-time
sequence, in float64 and float32, on the numpy references and on the compiled kernels.

``python -m tests.hashes --write`` records them in ``tests/data/state_hashes.json``;
``tests/test_state_hashes.py`` compares. A change to these numbers must be named in its
commit with why and by how much.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from sandbox import levels
from sandbox.sim import backend
from sandbox.sim.world import SimulationDiverged

DATA = Path(__file__).parent / "data" / "state_hashes.json"
FRAMES = 300


def frame_times(n: int) -> list[float]:
    """A frame-time sequence that varies as a real window's does (10-23 ms), the same on
    every machine: the variable-step policies see changing steps, TCV its ratios."""
    return [(1 / 60) * (1 + 0.35 * math.sin(0.7 * k) * math.cos(0.13 * k)) for k in range(n)]


def scenes() -> list[str]:
    return levels.level_names() + [f"bench:{n}" for n in levels.bench_level_names()]


def run(name: str, dtype: str, compiled: bool, frames: int = FRAMES) -> str:
    """The world's state hash after ``frames`` frames (``diverged@STEP:`` before it when
    the run diverged: that too must not change)."""
    level = levels.load_level(levels.find_level(name))
    level = levels.with_world(level, dtype=dtype)
    backend.set_ready(compiled)
    try:
        try:
            world = levels.build_world(level)
        except levels.LevelError as e:          # e.g. RATTLE refuses float32
            return "refused: " + e.errors[0]
        policy = levels.make_policy_for(level)
        for k, dt in enumerate(frame_times(frames)):
            try:
                with np.errstate(all="ignore"):
                    for h in policy.plan(dt):
                        world.step(h)
            except SimulationDiverged:
                return f"diverged@{k}:{world.state_hash()}"
        return world.state_hash()
    finally:
        backend.set_ready(True)


def compute(names=None, frames: int = FRAMES) -> dict[str, str]:
    out = {}
    for name in names or scenes():
        for dtype in ("float64", "float32"):
            for compiled in (False, True):
                key = f"{name}|{dtype}|{'compiled' if compiled else 'numpy'}"
                out[key] = run(name, dtype, compiled, frames)
                print(key, out[key], flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help=f"record into {DATA}")
    ap.add_argument("--only", nargs="*", help="scene names")
    ap.add_argument("--compare", action="store_true", help=f"compare with {DATA}")
    args = ap.parse_args(argv)
    got = compute(args.only)
    if args.write:
        DATA.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    if args.compare:
        want = json.loads(DATA.read_text())
        bad = [k for k in got if want.get(k) != got[k]]
        print(f"{len(got) - len(bad)}/{len(got)} equal; differ: {bad}")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
