"""The core stays pure: sandbox/sim (and sandbox/levels.py) never import a UI or a reference;
pymunk, the reference, enters the package through sandbox/reference.py alone, lazily."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"pygame", "pymunk", "matplotlib"}


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


def test_core_modules_import_no_ui_or_reference_library():
    files = sorted((ROOT / "sandbox" / "sim").glob("*.py"))
    if (ROOT / "sandbox" / "levels.py").exists():
        files.append(ROOT / "sandbox" / "levels.py")
    assert files
    for f in files:
        bad = _imports(f) & FORBIDDEN
        assert not bad, f"{f.relative_to(ROOT)} imports {sorted(bad)}"


def test_importing_the_core_loads_none_of_them():
    code = ("import sys, importlib, pkgutil, sandbox.sim as s\n"
            "[importlib.import_module('sandbox.sim.' + m.name) for m in "
            "pkgutil.iter_modules(s.__path__)]\n"
            "import sandbox, sandbox.lab.convergence\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            f"{sorted(FORBIDDEN)!r}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == "[]"
