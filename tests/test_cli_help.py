"""The command line's help lists what a user can pick, stays light, and rejects typos;
the docs a user reads link only to files of the repository."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.levels import level_names
from sandbox.sim.integrators import INTEGRATORS
from sandbox.sim.timestep import TIMESTEPS

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("pygame", "matplotlib")


def _main(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "main.py", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def _modules_after(*args: str) -> set[str]:
    """Top-level packages imported by ``main.py ARGS`` (run in a fresh interpreter)."""
    code = ("import runpy, sys\n"
            f"sys.argv = ['main.py', *{list(args)!r}]\n"
            "try:\n"
            "    runpy.run_path('main.py', run_name='__main__')\n"
            "except SystemExit:\n"
            "    pass\n"
            "print('MODULES', *sorted({m.split('.')[0] for m in sys.modules}))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    last = r.stdout.splitlines()[-1].split()
    assert last[0] == "MODULES"
    return set(last[1:])


def _rows(text: str, heading: str) -> dict[str, str]:
    """``{first word: rest}`` of the indented lines of the epilog section ``heading``."""
    section = text.split(heading, 1)[1].split("\n\n", 1)[0]
    return {ln.split()[0]: ln.strip()[len(ln.split()[0]):].strip()
            for ln in section.splitlines()[1:] if ln.startswith("  ")}


def test_play_help_lists_levels_integrators_and_timestep_modes():
    r = _main("play", "--help")
    assert r.returncode == 0, r.stderr
    levels = _rows(r.stdout, "levels (")
    assert list(levels) == level_names() and len(levels) >= 10
    assert all(levels.values()), "every level has its one-line description"
    table = _rows(r.stdout, "integrators (")
    assert list(table)[1:] == list(INTEGRATORS)           # after the column titles
    for name, integ in INTEGRATORS.items():
        row = table[name]
        assert row.startswith(integ.label)
        cells = row[len(integ.label):].split()
        assert cells[0] == str(integ.order)
        assert cells[-1] == ("yes" if integ.symplectic else "no")
    modes = _rows(r.stdout, "timestep modes (")
    assert list(modes) == list(TIMESTEPS)
    for name, cls in TIMESTEPS.items():
        assert modes[name].startswith(cls.label)


def test_simulate_help_lists_the_same_choices():
    r = _main("simulate", "--help")
    assert r.returncode == 0, r.stderr
    assert list(_rows(r.stdout, "integrators ("))[1:] == list(INTEGRATORS)
    assert list(_rows(r.stdout, "timestep modes (")) == list(TIMESTEPS)
    assert list(_rows(r.stdout, "levels (")) == level_names()


def test_experiment_help_lists_every_experiment_with_one_line():
    from sandbox.lab.experiments import EXPERIMENTS
    r = _main("experiment", "--help")
    assert r.returncode == 0, r.stderr
    rows = _rows(r.stdout, "experiments (")
    assert list(rows) == [*EXPERIMENTS, "all"]
    for name, e in EXPERIMENTS.items():
        summary = e.run.__doc__.strip().splitlines()[0].replace("``", "")
        assert rows[name] == summary


@pytest.mark.parametrize("args", [["--help"], ["play", "--help"], ["experiment", "--help"],
                                  ["simulate", "--help"], ["check", "levels/rope.toml"]])
def test_help_and_headless_commands_import_no_window_nor_plotting(args):
    loaded = _modules_after(*args)
    assert "numpy" in loaded or args == ["--help"]
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_top_level_help_and_version_import_only_the_command_line():
    for args in (["--help"], ["--version"]):
        loaded = _modules_after(*args)
        assert not loaded & {"numpy", "numba", "pydantic", *HEAVY}, loaded
    code = ("import sys, runpy\nsys.argv = ['main.py', '--help']\ntry:\n"
            "    runpy.run_path('main.py', run_name='__main__')\nexcept SystemExit:\n"
            "    pass\nprint('SANDBOX', *sorted(m for m in sys.modules if "
            "m.startswith('sandbox')))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.splitlines()[-1].split() == ["SANDBOX", "sandbox", "sandbox.cli",
                                                "sandbox.program"], r.stdout


@pytest.mark.parametrize("args, flag, good", [
    (["play", "--integrator", "rk5"], "--integrator", "rk4"),
    (["play", "--timestep", "fixd"], "--timestep", "fixed"),
    (["simulate", "rope", "--steps", "1", "--out", "x.npz", "--integrator", "verlett"],
     "--integrator", "tcv_corrected"),
    (["simulate", "rope", "--steps", "1", "--out", "x.npz", "--timestep", "rand"],
     "--timestep", "replay"),
])
def test_a_typo_in_a_choice_gets_argparse_error_listing_valid_values(args, flag, good):
    r = _main(*args)
    assert r.returncode == 2
    assert f"argument {flag}: invalid choice: '{args[-1]}'" in r.stderr
    assert f"'{good}'" in r.stderr and "Traceback" not in r.stderr


def test_valid_choices_parse():
    from sandbox.cli import build_parser
    a = build_parser().parse_args(["play", "rope", "--integrator", "rk4", "--timestep", "random"])
    assert (a.level, a.integrator, a.timestep) == ("rope", "rk4", "random")


# --- the docs a user reads --------------------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")
USER_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_docs_do_not_point_outside_the_repository():
    assert ROOT / "docs" / "articles.md" in USER_DOCS
    for doc in USER_DOCS:
        text = doc.read_text(encoding="utf-8")
        assert "../shared" not in text and "shared/seeds" not in text, doc.name


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves_to_a_file_of_the_repository(doc):
    links = [u for u in LINK.findall(doc.read_text(encoding="utf-8"))
             if not re.match(r"[a-z]+:", u) and not u.startswith("#")]
    if doc.name in ("README.md", "articles.md"):
        assert links, f"{doc.name} has relative links to check"
    for url in links:
        target = (doc.parent / url.split("#", 1)[0]).resolve()
        assert target.is_relative_to(ROOT), f"{doc.name}: {url} leaves the repository"
        assert target.exists(), f"{doc.name}: {url} does not exist"


def test_readme_links_the_articles_page():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/articles.md)" in text
