"""The project as an installable package: the pins of the requirements files and of
pyproject.toml agree, there is one version, the wheel carries the levels and assets and
runs outside the checkout, and a command whose optional extra is missing says which
``pip install`` adds it (exit 2)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from archives import load_finite
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import sandbox
from sandbox.cli import main

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
RUNTIME_EXTRAS = ("lab", "cluster", "clips")      # requirements.txt: base + these
SELF = canonicalize_name(PROJECT["name"])


# --- the pins ------------------------------------------------------------------------------

def _key(text: str) -> tuple[str, str]:
    """``("dask[distributed]", "==2026.8.0")``: a requirement by normalised name (with its
    extras) and specifier, whichever way it is spelt."""
    r = Requirement(text)
    extras = f"[{','.join(sorted(r.extras))}]" if r.extras else ""
    return canonicalize_name(r.name) + extras, str(r.specifier)


def _own_lines(path: Path) -> list[tuple[str, str]]:
    """A requirements file's own requirements (comments and ``-r`` lines left out)."""
    lines = [ln.split("#", 1)[0].strip() for ln in path.read_text().splitlines()]
    return sorted(_key(ln) for ln in lines if ln and not ln.startswith("-"))


def _deps(*groups: str) -> list[tuple[str, str]]:
    extras = PROJECT["optional-dependencies"]
    out = []
    for g in groups:
        items = PROJECT["dependencies"] if g == "base" else extras[g]
        out += [_key(t) for t in items if canonicalize_name(Requirement(t).name) != SELF]
    return sorted(out)


def test_requirements_files_and_pyproject_pin_the_same_packages():
    runtime = _deps("base", *RUNTIME_EXTRAS)
    assert runtime == _own_lines(ROOT / "requirements.txt")
    assert len({name for name, _ in runtime}) == len(runtime), "a package in two places"
    dev = PROJECT["optional-dependencies"]["dev"]
    assert _deps("dev") == _own_lines(ROOT / "requirements-dev.txt")
    # dev installs everything requirements-dev.txt does: the runtime extras and bench too
    assert {f"{SELF}[{','.join(sorted(['bench', *RUNTIME_EXTRAS]))}]"} == {
        _key(t)[0] for t in dev if canonicalize_name(Requirement(t).name) == SELF}
    assert set(_deps("bench")) <= set(_deps("dev"))
    assert (ROOT / "requirements-dev.txt").read_text().splitlines().count(
        "-r requirements.txt") == 1
    # every pin exact, the build backend's included
    for name, spec in [*runtime, *_deps("dev", "bench")]:
        assert spec.startswith("==") and "," not in spec, (name, spec)
    (backend,) = PYPROJECT["build-system"]["requires"]
    assert _key(backend) in _deps("dev")


def test_the_base_install_is_the_window_and_the_headless_commands(tmp_path):
    """What the base install runs never imports an extra's package: ``check``, ``demo``,
    ``simulate`` and ``play`` with matplotlib, Dask, imageio, Pillow and pymunk made
    unimportable."""
    blocked = ["matplotlib", "distributed", "dask", "imageio", "imageio_ffmpeg", "PIL",
               "pymunk", "scipy"]
    code = ("import sys\n"
            f"for m in {blocked!r}:\n    sys.modules[m] = None\n"
            "from sandbox.cli import main\n"
            "for argv in (['check', 'rope'], ['demo'], ['play', 'pendulums', '--frames', '3'],"
            " ['simulate', 'orbit', '--steps', '3', '--out', sys.argv[1]]):\n"
            "    code = main(argv)\n"
            "    assert code == 0, (argv, code)\n"
            "print('BASE OK')\n")
    env = {**os.environ, "SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy",
           "NUMBA_DISABLE_JIT": "1"}
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "o.npz")], cwd=ROOT,
                       env={**env, "VERLET_SANDBOX_OUT": str(tmp_path)}, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0 and "BASE OK" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


# --- one version ---------------------------------------------------------------------------

def test_one_version_everywhere():
    assert PROJECT["dynamic"] == ["version"] and "version" not in PROJECT
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "sandbox/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", sandbox.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## [{sandbox.__version__}]" in changelog
    for cmd in (["main.py", "--version"], ["-m", "sandbox", "--version"]):
        r = subprocess.run([sys.executable, *cmd], cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
        assert (r.returncode, r.stdout, r.stderr) == (
            0, f"verlet-sandbox {sandbox.__version__}\n", ""), cmd


def test_the_console_script_is_a_function_returning_the_exit_status(capsys):
    target = PROJECT["scripts"]["verlet-sandbox"]
    assert target == "sandbox.cli:main"
    module, name = target.split(":")
    fn = getattr(importlib.import_module(module), name)
    assert fn is main
    assert fn(["--version"]) == 0
    assert capsys.readouterr().out == f"verlet-sandbox {sandbox.__version__}\n"
    code = fn(["check", "rope"])
    assert code == 0 and isinstance(code, int)
    code = fn(["simulate", "no_such_level", "--steps", "1", "--out", "x.npz"])
    assert code == 2 and isinstance(code, int)          # bad input
    assert fn(["play", "--frames"]) == 2                 # a usage error returns, too
    assert "unknown level" in capsys.readouterr().err


def test_help_states_the_exit_statuses_and_where_output_goes(capsys):
    assert main(["--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert ("exit status: 0 success; 1 the run failed (a simulation blew up, a file could "
            "not be written, a claim did not hold); 2 bad usage or bad input") in text
    assert "goes to out/ in the current folder" in text


# --- the wheel -----------------------------------------------------------------------------

def _hatchling_missing() -> str | None:
    try:
        import hatchling  # noqa: F401
    except ImportError:
        return "hatchling is not installed (pip install -r requirements-dev.txt)"
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if reason := _hatchling_missing():
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                        "--no-build-isolation", "--no-index", "-q", "-w", str(out),
                        str(ROOT)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    (whl,) = out.glob("verlet_sandbox-*.whl")
    return whl


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """The wheel installed on its own (``--target``): its dependencies come from this
    venv's site-packages, the checkout is nowhere on the path."""
    site = tmp_path_factory.mktemp("site")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                        "-q", "--target", str(site), str(wheel)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return site


def test_the_wheel_carries_the_package_levels_and_assets_and_no_tests(wheel):
    assert wheel.name == f"verlet_sandbox-{sandbox.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"verlet_sandbox-{sandbox.__version__}.dist-info"
        meta = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    levels = {f"sandbox/levels_data/{p.relative_to(ROOT / 'levels').as_posix()}"
              for p in (ROOT / "levels").rglob("*.toml")}
    assert len(levels) > 30 and levels <= names
    assert {"sandbox/levels_data/playground.toml", "sandbox/levels_data/bench/cloth50.toml",
            "sandbox/levels_data/README.md"} <= names
    assert {"sandbox/assets_data/fonts/DejaVuSansMono.ttf",
            "sandbox/assets_data/fonts/DejaVuSansMono-Bold.ttf",
            "sandbox/assets_data/fonts/LICENSE-DejaVu.txt", "sandbox/assets_data/icon.png",
            "sandbox/assets_data/theme.json", "sandbox/assets_data/README.md"} <= names
    assert {"sandbox/__init__.py", "sandbox/__main__.py", "sandbox/cli.py",
            "sandbox/resources.py", "sandbox/sim/backend.py", f"{info}/licenses/LICENSE"} <= names
    # Only the package and its metadata: no tests, no checkout files, no bytecode.
    assert {n.split("/")[0] for n in names} == {"sandbox", info}
    assert not [n for n in names if "/tests/" in f"/{n}" or Path(n).name.startswith("test_")
                or "__pycache__" in n or n.endswith(".pyc")]
    assert "verlet-sandbox = sandbox.cli:main" in entry_points
    assert "License-Expression: MIT" in meta and f"Version: {sandbox.__version__}" in meta
    for text in PROJECT["dependencies"]:
        assert f"Requires-Dist: {text}" in meta


def _run(site: Path, cwd: Path, *args: str, timeout: float = 180, **env: str):
    """``python ARGS`` as a user of the installed package: in ``cwd`` (outside the
    checkout), with only ``site`` added to this venv's path. The compiled kernels would
    compile for minutes in a new place: NUMBA_DISABLE_JIT runs them as Python (sim/backend.py
    has no switch of its own that a command line can set)."""
    full = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    full.update(PYTHONPATH=str(site), NUMBA_DISABLE_JIT="1", SDL_VIDEODRIVER="dummy",
                SDL_AUDIODRIVER="dummy", PYTHONDONTWRITEBYTECODE="1", **env)
    full.pop("VERLET_SANDBOX_OUT", None)
    return subprocess.run([sys.executable, *args], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)


def test_the_installed_wheel_runs_outside_the_checkout(installed, tmp_path):
    site, work = installed, tmp_path / "work"
    work.mkdir()
    assert not work.resolve().is_relative_to(ROOT)
    r = _run(site, work, "-c", "import sandbox, sandbox.resources as r\n"
             "from sandbox.app import hud\n"
             "print(sandbox.__file__, r.levels_dir(), r.assets_dir(), *hud.FONT_FILES.values(),"
             " sep='\\n')")
    assert r.returncode == 0, r.stderr
    paths = [Path(p) for p in r.stdout.splitlines()]
    assert paths[0] == site / "sandbox" / "__init__.py"          # not the checkout's
    assert paths[1:3] == [site / "sandbox" / "levels_data", site / "sandbox" / "assets_data"]
    assert all(p.is_file() for p in paths[3:]) and len(paths) == 5

    r = _run(site, work, "-m", "sandbox", "check")
    shipped = sorted(p.stem for p in (ROOT / "levels").glob("*.toml"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [f"ok  {site}/sandbox/levels_data/{n}.toml"
                                     for n in shipped]
    r = _run(site, work, "-m", "sandbox", "check", "bench:cloth50")
    assert (r.returncode, r.stdout) == (0, f"ok  {site}/sandbox/levels_data/bench/cloth50.toml\n")

    r = _run(site, work, "-m", "sandbox", "simulate", "orbit", "--steps", "20",
             "--integrator", "velocity_verlet", "--out", "orbit.npz")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("wrote orbit.npz: 20 steps") and r.stderr == ""
    data = load_finite(work / "orbit.npz")
    assert data["t"].shape == (21,) and data["x"].shape == (21, 3, 2)

    r = _run(site, work, "-m", "sandbox", "play", "cloth", "--frames", "5")
    assert r.returncode == 0, r.stderr
    r = _run(site, work, "-m", "sandbox", "play", "no_such_level", "--frames", "5")
    assert r.returncode == 2 and "unknown level" in r.stderr
    # Output stays in the working folder; the installed package is not written to.
    assert sorted(p.name for p in work.iterdir()) == ["orbit.npz"]
    assert not (site / "out").exists() and not (site / "sandbox" / "out").exists()


def test_the_installed_console_script_runs(installed, tmp_path):
    """pip wrote ``bin/verlet-sandbox`` for the target (its ``#!`` is this interpreter)."""
    script = installed / "bin" / "verlet-sandbox"
    if not script.exists():                                  # pragma: no cover - Windows
        pytest.skip(f"pip made no {script.name} script here ({sys.platform})")
    r = _run(installed, tmp_path, str(script), "--version")
    assert (r.returncode, r.stdout) == (0, f"verlet-sandbox {sandbox.__version__}\n"), r.stderr
    r = _run(installed, tmp_path, "-m", "sandbox", "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: python -m sandbox ")
    r = _run(installed, tmp_path, str(script), "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: verlet-sandbox ")
    assert "'verlet-sandbox play --help' lists" in r.stdout


# --- a missing extra -----------------------------------------------------------------------

def _one_error_line(err: str, extra: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert f"pip install 'verlet-sandbox[{extra}]'" in lines[0]
    return lines[0]


def test_bench_without_pymunk_says_how_to_add_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "pymunk", None)
    code = main(["bench", "--quick", "--only", "cloth50", "--no-save",
                 "--json", str(tmp_path / "b.json")])
    assert code == 2
    captured = capsys.readouterr()
    line = _one_error_line(captured.err, "bench")
    assert "pymunk is not installed" in line and "--no-pymunk" in line
    assert captured.out == "" and not list(tmp_path.iterdir())      # nothing ran
    assert main(["bench", "--list"]) == 0                   # what needs no pymunk still runs


def test_experiment_without_matplotlib_says_how_to_add_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    out = tmp_path / "out"
    assert main(["experiment", "convergence", "--quick", "--jobs", "1", "--out", str(out)]) == 2
    assert "matplotlib is not installed" in _one_error_line(capsys.readouterr().err, "lab")
    assert not out.exists()
    assert main(["experiment", "nope", "--out", str(out)]) == 2       # the name comes first
    assert "unknown experiment 'nope'" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--scheduler", "tcp://127.0.0.1:9"], ["--jobs", "2"]])
def test_sweeps_on_dask_without_dask_say_how_to_add_it(monkeypatch, capsys, tmp_path, flags):
    monkeypatch.setitem(sys.modules, "distributed", None)
    out = tmp_path / "out"
    assert main(["experiment", "convergence", "--quick", *flags, "--out", str(out)]) == 2
    line = _one_error_line(capsys.readouterr().err, "cluster")
    assert line.startswith(f"error: {flags[0]}") and "dask[distributed] is not installed" in line
    assert not out.exists()


def test_the_default_sweeps_without_dask_run_serially_and_say_so(monkeypatch, capsys,
                                                                  tmp_path):
    from sandbox.lab import experiments
    monkeypatch.setitem(sys.modules, "distributed", None)
    seen = []
    monkeypatch.setattr(experiments, "run", lambda name, ctx: seen.append(ctx) or [])
    assert main(["experiment", "convergence", "--out", str(tmp_path)]) == 0
    assert [ctx.jobs for ctx in seen] == [1]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'verlet-sandbox[cluster]'" in err


@pytest.mark.parametrize("fmt, module", [("mp4", "imageio"), ("mp4", "imageio_ffmpeg"),
                                         ("gif", "PIL")])
def test_a_clip_without_its_encoder_says_how_to_add_it(monkeypatch, tmp_path, fmt, module):
    import pygame

    from sandbox.app.main import App
    monkeypatch.setitem(sys.modules, module, None)
    pygame.display.init()
    pygame.display.set_mode((320, 200))
    app = App("pendulums", size=(320, 200), out_dir=tmp_path)
    try:
        app.do("record", fmt)
        assert not app.recorder.recording
        text, _, error = app.messages[-1]
        assert error and "pip install 'verlet-sandbox[clips]'" in text and "\n" not in text
        assert f"{fmt.upper()} clips:" in text
        assert not list(tmp_path.rglob("*.mp4")) and not list(tmp_path.rglob("*.gif"))
    finally:
        app.close()
