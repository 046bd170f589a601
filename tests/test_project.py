"""The project's promises about itself: README commands, CI script, CLI behaviour."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_readme_opens_with_two_commands_and_ci_runs_the_second():
    cmds = _readme_commands()
    assert len(cmds) >= 2
    first, second = cmds[0], cmds[1]
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert text.index(first) < 200          # the README opens with them
    assert "main.py" in first and "requirements.txt" in first
    assert "pytest" in second and "requirements-dev.txt" in second
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert second in ci, ".ci/run must run exactly the README's test command"


def test_cli_rejects_an_unknown_experiment_cleanly():
    r = subprocess.run([sys.executable, "main.py", "experiment", "nope", "--out", "/tmp/x"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2
    assert "unknown experiment 'nope'" in r.stderr and "Traceback" not in r.stderr


def test_demo_runs_headless():
    r = subprocess.run([sys.executable, "main.py", "demo"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert all(name in r.stdout for name in ("euler", "tcv_corrected", "rk4"))


def test_demo_says_what_to_conclude_from_its_table():
    """The table's puzzle (velocity Verlet's position error above symplectic Euler's at
    40 steps an orbit) is explained from its own numbers: both lost the moon's place on
    the orbit (phase errors of 149 and 107 degrees), so the position error only says
    where on the circle each one is; and the Verlet family shares velocity Verlet's
    positions at a fixed step (the same map), differing only in its velocity."""
    r = subprocess.run([sys.executable, "main.py", "demo"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "Energy is the fair score" in out
    assert "That is why velocity Verlet's position error" in out
    assert "verlet, tcv, tcv_corrected follow velocity Verlet's positions exactly" in out
    assert "rk4" not in out.split("follow velocity Verlet")[0].splitlines()[-1]
