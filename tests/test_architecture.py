"""The core stays pure: sandbox/sim (and sandbox/levels.py) never import a UI or a reference."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"pygame", "pymunk", "matplotlib"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


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
