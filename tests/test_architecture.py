"""The core stays pure: sandbox/sim (every file, sim/collide/ too; and sandbox/levels.py)
never imports a UI or a reference, and nothing in sandbox/sim imports the rest of sandbox
(levels, snapshots, files and the app are built on the core, never the other way);
pymunk, the reference, enters the package through sandbox/reference.py alone, lazily."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"pygame", "pymunk", "matplotlib", "scipy"}
SIM = ROOT / "sandbox" / "sim"
CORE = "sandbox.sim"


def _imports(path: Path, top_level_only: bool = False) -> set[str]:
    """Top-level package names ``path`` imports, anywhere in it (inside functions too),
    or only in statements run when the module is imported (``top_level_only``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    nodes = _module_level(tree.body) if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _module_level(body):
    """Statements run at import: the module's own and those nested in ``if``, ``try``,
    ``with`` and class blocks; not those in function bodies (run when called)."""
    for node in body:
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _module_level([child])
            elif isinstance(child, ast.excepthandler):
                yield from _module_level(child.body)


REFERENCE = ROOT / "sandbox" / "reference.py"


def test_only_the_reference_module_imports_pymunk():
    """The benchmark's twin and the tests' shape converter live in one module; nothing
    else in the package (the benchmark included) imports pymunk."""
    files = sorted((ROOT / "sandbox").rglob("*.py"))
    users = [f.relative_to(ROOT).as_posix() for f in files if "pymunk" in _imports(f)]
    assert users == ["sandbox/reference.py"]


def test_the_reference_module_imports_pymunk_only_when_used():
    assert "pymunk" in _imports(REFERENCE)
    assert "pymunk" not in _imports(REFERENCE, top_level_only=True)
    code = ("import sys, sandbox.reference, sandbox.bench\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pymunk'))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "[]"
    # and without pymunk installed at all: importing still works
    code = ("import sys; sys.modules['pymunk'] = None\n"
            "import sandbox.reference as r, sandbox.bench\n"
            "print(r.versions())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "{'pymunk': 'not installed'}"


def _core_files() -> list[Path]:
    """Every Python file of the core, in subpackages too (``sim/collide/``)."""
    files = sorted(SIM.rglob("*.py"))
    assert SIM / "collide" / "frame.py" in files
    return files


def _imported_names(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    """``(line, absolute dotted name)`` of everything ``path`` (or ``text`` as if it were
    that file) imports, inside functions too: ``import a.b`` gives ``a.b``, ``from m
    import n`` gives ``m.n`` (``n`` may be a submodule), relative imports resolved
    against the file's package. In ``sandbox/sim/collide/frame.py``, ``from ..kernels
    import f`` is ``sandbox.sim.kernels.f``; in ``sandbox/sim/world.py``, ``from .. import
    levels`` is ``sandbox.levels``. A relative import above the top package keeps its
    dots."""
    package = list(path.relative_to(ROOT).parent.parts)
    out = []
    if text is None:
        text = path.read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = [node.module] if node.module else []
            if node.level > len(package):
                base = "." * node.level + ".".join(module)
            else:
                base = ".".join(package[:len(package) - node.level + 1] + module
                                if node.level else module)
            out += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def _leaves_core(name: str) -> bool:
    """Whether importing ``name`` from the core reaches another part of the package (or
    goes above it), not a library."""
    if name == CORE or name.startswith(CORE + "."):
        return False
    return name.startswith(".") or name.split(".")[0] == "sandbox"


def test_core_modules_import_no_ui_or_reference_library():
    files = _core_files()
    if (ROOT / "sandbox" / "levels.py").exists():
        files.append(ROOT / "sandbox" / "levels.py")
    for f in files:
        bad = _imports(f) & FORBIDDEN
        assert not bad, f"{f.relative_to(ROOT)} imports {sorted(bad)}"


def test_the_core_imports_nothing_above_it():
    """sandbox/sim is the bottom layer: an import that leaves it for another part of
    sandbox (``from .. import levels``, ``import sandbox.app``, ``from sandbox import
    snapshot``) makes the physics depend on what is built on it, and import circles."""
    bad = [f"{f.relative_to(ROOT)}:{line}: {name}" for f in _core_files()
           for line, name in _imported_names(f) if _leaves_core(name)]
    assert not bad, "the core imports above itself:\n" + "\n".join(bad)


def test_the_import_walk_sees_what_it_must():
    """The walk above resolves relative imports and finds those inside functions, so an
    upward import hidden in a method (as snapshots once imported the level checks) fails."""
    code = ("from . import kernels\nfrom .. import levels\nimport sandbox.app.main\n"
            "def f():\n    from ..snapshot import save\n    from ...x import y\n"
            "    from .collide import solver\n    import numpy.linalg\n")
    names = dict(_imported_names(SIM / "world.py", code))
    assert names == {1: "sandbox.sim.kernels", 2: "sandbox.levels", 3: "sandbox.app.main",
                     5: "sandbox.snapshot.save", 6: "...x.y", 7: "sandbox.sim.collide.solver",
                     8: "numpy.linalg"}
    assert [line for line, name in names.items() if _leaves_core(name)] == [2, 3, 5, 6]
    deep = dict(_imported_names(SIM / "collide" / "frame.py",
                                "from ..kernels import f\nfrom ... import levels\n"))
    assert deep == {1: "sandbox.sim.kernels.f", 2: "sandbox.levels"}


def test_importing_the_core_loads_none_of_them():
    code = ("import sys, importlib, pkgutil, sandbox.sim as s\n"
            "[importlib.import_module(m.name) for m in "
            "pkgutil.walk_packages(s.__path__, 'sandbox.sim.')]\n"
            "import sandbox, sandbox.lab.convergence\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{sorted(FORBIDDEN)!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "[]"
