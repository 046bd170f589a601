"""A script that steps a world while numba's cache is empty is told once what the wait
is, and told nothing when the kernels load from the cache."""

import os
import subprocess
import sys
from pathlib import Path

from sandbox.sim import backend

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
from sandbox.sim.world import World
w = World()
w.add_particles([[0.0, 1.0], [0.5, 1.0]])
for _ in range(3):
    w.step(1 / 60)
print(w.steps)
"""


def _run(cache: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    return subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_told_once_while_compiling_and_not_when_cached(tmp_path):
    if not backend.INSTALLED:                                # pragma: no cover
        return
    cold = _run(tmp_path)
    assert cold.returncode == 0, cold.stderr
    assert cold.stdout.split() == ["3"]
    assert cold.stderr.count(backend.COMPILING) == 1, cold.stderr
    warm = _run(tmp_path)
    assert warm.returncode == 0, warm.stderr
    assert backend.COMPILING not in warm.stderr, warm.stderr
