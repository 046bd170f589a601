"""The documentation a user reads: the API reference pdoc builds from the docstrings, a
README a newcomer reads in two minutes (what it names is real: its levels, its keys, its
links), the guide (its code runs, its examples table is the examples folder) and the
performance page that took the README's log."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sandbox

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDE = (ROOT / "docs" / "guide.md").read_text(encoding="utf-8")
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")


# --- the API reference ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def api(tmp_path_factory) -> Path:
    pytest.importorskip("pdoc", reason="pdoc is not installed (pip install -r "
                                       "requirements-dev.txt)")
    out = tmp_path_factory.mktemp("api")
    env = {**os.environ, "SDL_VIDEODRIVER": "dummy", "PYGAME_HIDE_SUPPORT_PROMPT": "1"}
    r = subprocess.run([sys.executable, "-m", "pdoc", "sandbox", "-o", str(out)], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # pdoc warns about docstrings it cannot read (a broken reference, an annotation it
    # cannot evaluate); the public API has none.
    assert "Warn" not in r.stderr, r.stderr
    return out


def test_the_api_reference_has_a_page_for_every_public_name(api):
    page = (api / "sandbox.html").read_text(encoding="utf-8")
    assert (api / "index.html").exists() and (api / "search.js").exists()
    anchors = set(re.findall(r'id="([A-Za-z_][\w.]*)"', page))
    missing = [n for n in sandbox.__all__ if n not in anchors]
    assert not missing, f"no entry in the API reference for {missing}"
    # Classes with their methods, and the teaching text of the front page.
    assert {"World.step", "World.grab", "WorldConfig.integrator", "DrawOptions.draw",
            "DrawOptions.to_world", "DrawOptions.fit"} <= anchors
    text = re.sub(r"<[^>]+>", "", page)
    for words in ("The world.", "Builders", "Compiled kernels.", "Drawing.",
                  "Every integrator by name", "The timestep policies by name"):
        assert words in text, words


# --- the README ----------------------------------------------------------------------------

def test_the_readme_is_short_and_opens_with_its_two_commands():
    assert len(README.encode()) < 8000, "the README is for two minutes' reading"
    assert README.index("```sh\npython3 -m venv .venv && .venv/bin/pip install -q -r "
                        "requirements.txt && .venv/bin/python main.py\n```") < 200
    assert README.count("![") == 1 and "(docs/screenshot.png)" in README
    for link in ("(docs/guide.md)", "(docs/performance.md)", "(docs/articles.md)",
                 "(LICENSE)", "## Install as a package", "pdoc sandbox -o out/api"):
        assert link in README, link


def test_what_to_try_first_names_real_levels_and_real_keys():
    from sandbox.app.keymap import KEYMAP
    first = README[README.index("## What to try first"):README.index("## The articles")]
    named = re.findall(r"^- \*\*(\w+)\*\*", first, re.M)
    assert len(named) == 3 and set(named) <= set(sandbox.level_names()), named
    actions = {(b.key, b.mods): b.action for b in KEYMAP}
    import pygame
    assert actions[(pygame.K_g, 0)] == "toggle_ghost" and "**G**" in first
    assert actions[(pygame.K_t, 0)] == "cycle_timestep" and "**T**" in first
    assert all(actions[(getattr(pygame, f"K_{d}"), 0)] == "set_integrator"
               for d in range(1, 10)) and "**1-9**" in first
    assert actions[(pygame.K_i, 0)] == "cycle_integrator"
    assert actions[(pygame.K_h, 0)] == "toggle_help"


def test_the_readme_cites_the_four_articles_with_the_verdicts_of_the_articles_page():
    articles = (ROOT / "docs" / "articles.md").read_text(encoding="utf-8")
    part = README[README.index("## The articles, checked"):README.index("## More")]
    for number in ("000", "001", "002", "004"):
        assert f"**{number}, *" in part and f"| {number} |" in articles
    summary = articles[articles.index("## Summary"):]
    for verdict in ("holds", "loose", "wrong", "partly", "only at 10-11"):
        assert verdict in summary and verdict in part, verdict


def test_the_performance_log_moved_out_of_the_readme():
    for heading in ("**Every level in the window**", "**On a busy machine.**",
                    "**Contacts, the last round.**", "**No compile wait.**",
                    "**The soft blob.**", "**Rigid links between equal masses.**"):
        assert heading in PERFORMANCE and heading not in README, heading
    assert "| cloth_200 | 33.5 | 64.8 |" in PERFORMANCE
    assert "(docs/performance.md)" in README


# --- the guide -----------------------------------------------------------------------------

def test_the_guide_covers_the_window_the_levels_the_lab_and_the_engine():
    for heading in ("## Running it", "## The window and its keys", "## The levels",
                    "## Integrators and timestep modes", "### Timestep modes", "## The lab",
                    "## The engine as a library", "### The first run: compiling the kernels",
                    "### The API reference", "## Where the code is"):
        assert f"\n{heading}\n" in GUIDE, heading
    table = set(re.findall(r"^\| \*\*(\w+)\*\* \|", GUIDE, re.M))
    assert table == set(sandbox.level_names()), "the guide's table of levels"
    listed = set(re.findall(r"\[`(\w+)\.py`\]\(\.\./examples/\1\.py\)", GUIDE))
    assert listed == {p.stem for p in (ROOT / "examples").glob("*.py")} - {"__init__"}


def test_the_guides_first_program_runs(tmp_path):
    """The guide's pygame loop, headless for a few frames (its window closed by a QUIT
    after five), on the numpy kernels."""
    start = GUIDE.index("```python\nimport pygame")
    code = GUIDE[start + len("```python\n"):GUIDE.index("```", start + 10)]
    driver = ("import pygame\nfrom sandbox.sim import backend\nbackend.INSTALLED = False\n"
              "n = [0]\n"
              "def peek(*a):\n    n[0] += 1\n    return n[0] > 5\n"
              "pygame.event.peek = peek\n" + code + "\nprint('frames', n[0] - 1)\n")
    env = {**os.environ, "SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy",
           "PYGAME_HIDE_SUPPORT_PROMPT": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", driver], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["frames", "5"], r.stdout + r.stderr
