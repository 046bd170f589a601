"""The one backend seam (``sandbox/sim/backend.py``): one vocabulary that every object that
chooses between the numpy references and the compiled kernels takes, one function that
decides, one rule for whether arrays fit a kernel, and numba imported there alone."""

import ast
from pathlib import Path

import numpy as np
import pytest

from sandbox.sim import backend
from sandbox.sim.collide.colliders import Colliders
from sandbox.sim.constraints import Constraints
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.lagrange import RigidLinks

ROOT = Path(__file__).resolve().parent.parent


def test_every_choosing_object_defaults_to_the_vocabulary():
    assert backend.BACKENDS == ("auto", "compiled", "numpy")
    settings = [Constraints().backend, Colliders().backend, RigidLinks.backend]
    settings += [type(m).backend for m in INTEGRATORS.values() if hasattr(type(m), "backend")]
    assert len(settings) > 3 and set(settings) == {"auto"}


def test_the_choices():
    assert backend.compiled("numpy") is False
    assert backend.compiled("auto") == backend.usable("kernels")
    assert backend.compiled("auto", "contacts") == backend.usable("contacts")
    with pytest.raises(ValueError, match="'auto', 'compiled', 'numpy'"):
        backend.compiled("numba-ish")
    with pytest.raises(ValueError, match="'auto', 'compiled', 'numpy'"):
        backend.compiled("parallel")        # a thread choice is no backend


def test_auto_follows_the_warm_up_and_compiled_does_not():
    if not backend.runnable():
        pytest.skip("numba cannot run here")
    try:
        backend.set_ready(False)
        assert not backend.compiled("auto") and not backend.compiled("auto", "contacts")
        assert backend.compiled("compiled") and backend.compiled("compiled", "contacts")
        assert backend.compiled("auto", None)       # a part the warm-up does not hold
        with backend.loading():
            assert backend.compiled("auto")
    finally:
        backend.set_ready(True)
    assert backend.compiled("auto")


def test_compiled_says_why_numba_cannot_run(monkeypatch):
    monkeypatch.setattr(backend, "_numba", None)
    monkeypatch.setattr(backend, "_failed", "ImportError: broken llvmlite")
    assert not backend.runnable()
    assert not backend.compiled("auto", None) and not backend.compiled("numpy")
    with pytest.raises(RuntimeError, match="broken llvmlite"):
        backend.compiled("compiled")
    monkeypatch.setattr(backend, "_failed", None)
    monkeypatch.setattr(backend, "INSTALLED", False)
    with pytest.raises(RuntimeError, match="not installed"):
        backend.compiled("compiled", "contacts")


def test_fits():
    a = np.zeros((4, 2))
    assert backend.fits(a) and backend.fits(a, np.ones(4)) and backend.fits(a.astype(np.float32))
    assert not backend.fits(a, np.ones(4, np.float32))             # two float types
    assert not backend.fits(a.astype(np.int64))                    # not a float
    assert not backend.fits(a.astype(np.float16))                  # no kernel for it
    assert not backend.fits(a.astype(">f8"))                       # not native
    assert not backend.fits(a, np.zeros((2, 4)).T)                 # not C-contiguous
    assert not backend.fits(np.zeros((4, 4))[:, ::2])


def test_constraints_threads_are_their_own_setting():
    x = np.array([[0.0, 0.0], [1.2, 0.0]])
    c = Constraints()
    c.add([0], [1], x, rest=1.0)
    c.backend = "compiled" if backend.runnable() else "numpy"
    c.threads = "everywhere"
    if backend.runnable():
        with pytest.raises(ValueError, match="'auto', 'serial', 'parallel'"):
            c.kernel_args(x, np.ones(2))
    c.backend, c.threads = "parallel", "auto"
    with pytest.raises(ValueError, match="backend"):
        c.kernel_args(x, np.ones(2))


def test_only_the_backend_module_imports_numba():
    """The seam's first rule: every other module asks ``backend`` (no ``import numba``
    and no ``INSTALLED`` read outside it, but the warm-up's: it asks whether numba is
    installed without importing it, which ``runnable()`` would do on the window's
    thread at start-up)."""
    users, readers = [], []
    for f in sorted((ROOT / "sandbox").rglob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8"))
        name = f.relative_to(ROOT).as_posix()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "numba"
                                                    for a in node.names):
                users.append(name)
            elif (isinstance(node, ast.ImportFrom) and node.module
                  and node.module.split(".")[0] == "numba"):
                users.append(name)
            elif ((isinstance(node, ast.Attribute) and node.attr == "INSTALLED")
                  or (isinstance(node, ast.alias) and node.name == "INSTALLED")):
                readers.append(name)
    assert set(users) == {"sandbox/sim/backend.py"}
    assert set(readers) <= {"sandbox/warmup.py"}
