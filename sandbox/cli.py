"""Verlet Sandbox command line: play (default), demo, experiment, check, simulate, replay,
bench. ``python main.py``, ``python -m sandbox`` and the installed ``verlet-sandbox``
command all run :func:`main`.

Only the subcommand that needs pygame imports it, and only the ones that draw figures
import matplotlib, so ``--help`` and the headless commands start fast.
The lists in ``play --help``, ``simulate --help`` and ``experiment --help`` (levels,
integrators, timestep modes, experiments) come from the registries, which are imported
only when such a help is printed or an ``--integrator`` / ``--timestep`` is checked.

Exit status, the same for every command (:data:`EXIT_STATUS`, shown by ``--help``): 0
success; 1 the run failed (a simulation blew up, a file could not be written, a claim
did not hold); 2 bad usage or bad input (an unknown level, an invalid file, a bad
argument, a missing optional package); 130 interrupted (Ctrl-C).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path

from . import __version__
from .program import command_line, prog

DEFAULT_LEVEL = "playground"          # as sandbox.app.main, which imports pygame

#: The exit statuses of every command, as ``--help`` states them.
EXIT_STATUS = ("exit status: 0 success; 1 the run failed (a simulation blew up, a file "
               "could not be written, a claim did not hold); 2 bad usage or bad input (an "
               "unknown level, an invalid file, a bad argument, a missing optional "
               "package); 130 interrupted (Ctrl-C).")
#: Where output goes, and why there.
OUTPUT = ("Output (figures, CSV, clips, screenshots, saved levels) goes to out/ in the "
          "current folder, not into the installed program: you find it where you ran "
          "the command.")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose ``epilog`` may be a function, called when help is shown."""

    def format_help(self) -> str:
        if callable(self.epilog):
            self.epilog = self.epilog()
        return super().format_help()


class _Names:
    """Valid values for ``choices=``, loaded from a registry on first use (argparse only
    iterates them for an error message, and only tests membership for a given value)."""

    def __init__(self, load: Callable[[], Iterable[str]]) -> None:
        self._load = load
        self._names: list[str] | None = None

    def _get(self) -> list[str]:
        if self._names is None:
            self._names = list(self._load())
        return self._names

    def __contains__(self, value: object) -> bool:
        return value in self._get()

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())


def _integrator_names() -> list[str]:
    from .sim.integrators import INTEGRATORS
    return list(INTEGRATORS)


def _timestep_names() -> list[str]:
    from .sim.timestep import TIMESTEPS
    return list(TIMESTEPS)


def _first_line(doc: str | None) -> str:
    """A docstring's summary line as plain text (no ``code`` or :role:`x` markup)."""
    lines = (doc or "").strip().splitlines()
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", lines[0] if lines else "")
    return text.replace("``", "").strip()


def _table(rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
            for r in rows]


def _levels_help() -> list[str]:
    import tomllib

    from .levels import LEVELS_DIR, level_names
    rows = []
    for name in level_names():
        try:
            with open(LEVELS_DIR / f"{name}.toml", "rb") as f:
                about = str(tomllib.load(f).get("description", ""))
        except (OSError, tomllib.TOMLDecodeError):
            about = f"(cannot be read: {command_line()} check {name})"
        rows.append([name, about])
    return [f"levels (LEVEL: a name below or a .toml file; default {DEFAULT_LEVEL}):",
            *_table(rows)]


def _integrators_help() -> list[str]:
    from .sim.integrators import INTEGRATORS
    rows = [["name", "label", "order", "order, varying h", "symplectic"]]
    for name, i in INTEGRATORS.items():
        rows.append([name, i.label, str(i.order),
                     str(i.order_variable) if i.order_variable else "none (no convergence)",
                     "yes" if i.symplectic else "no"])
    return ["integrators (--integrator NAME; default: the level's):", *_table(rows)]


def _timesteps_help() -> list[str]:
    from .sim.timestep import TIMESTEPS
    rows = [[name, cls.label, _first_line(cls.__doc__)] for name, cls in TIMESTEPS.items()]
    return ["timestep modes (--timestep MODE; default: the level's):", *_table(rows)]


def _play_epilog() -> str:
    return "\n".join([*_levels_help(), "", *_integrators_help(), "", *_timesteps_help(),
                      "", "In the window, H or F1 lists every key."])


def _simulate_epilog() -> str:
    return "\n".join([*_levels_help(), "", *_integrators_help(), "", *_timesteps_help()])


def _experiment_epilog() -> str:
    from .lab.experiments import EXPERIMENTS
    rows = [[name, _first_line(e.run.__doc__)] for name, e in EXPERIMENTS.items()]
    rows.append(["all", "every experiment, then report.md and report.html judging each "
                        "claim of the articles"])
    return "\n".join(["experiments (NAME):", *_table(rows), "",
                      "What each experiment checks in the source articles: docs/articles.md."])


def cmd_play(args) -> int:
    try:
        from .app.main import run_app
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("sandbox.app"):   # no window yet: headless demo
            return cmd_demo(args)
        print(f"error: cannot start the sandbox window: {e}", file=sys.stderr)
        return 1
    return run_app(args.level, integrator=args.integrator, timestep=args.timestep,
                   frames=args.frames, clip_fps=args.clip_fps, clip_width=args.clip_width)


def cmd_demo(args) -> int:
    from .lab.demo import run_demo
    return run_demo()


def cmd_experiment(args) -> int:
    from .lab.experiments import command
    return command(args, out=Path(args.out))


def cmd_replay(args) -> int:
    if args.headless:
        from .headless import run_replay
        return run_replay(args)
    try:
        from .app.main import run_app
    except ModuleNotFoundError as e:
        print(f"error: cannot start the sandbox window: {e}", file=sys.stderr)
        return 1
    return run_app(None, replay=args.file)


def cmd_check(args) -> int:
    from .headless import run_check
    return run_check(args.files)


def cmd_simulate(args) -> int:
    from .headless import run_simulate
    return run_simulate(args)


def cmd_bench(args) -> int:
    if args.levels:
        from .levelbench import command
        return command(args)
    from .bench import run_bench
    return run_bench(args)


def _int_between(lo: int, hi: int):
    """An argparse type: an integer in [lo, hi], with a clear message otherwise."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"expected {lo}..{hi}, got {value}")
        return value
    return parse


def _top_epilog() -> str:
    run = command_line()
    paragraphs = [f"'{run} play --help' lists the levels, integrators and timestep modes; "
                  f"'{run} experiment --help' the experiments.", OUTPUT, EXIT_STATUS]
    return "\n\n".join(textwrap.fill(text, 88) for text in paragraphs)


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    p = _Parser(prog=prog(), formatter_class=raw, description=textwrap.fill(
        "Verlet Sandbox: an interactive 2D particle sandbox that shows why integrators "
        "differ. Without a command, opens the sandbox window.", 88), epilog=_top_epilog)
    p.add_argument("--version", action="version", version=f"verlet-sandbox {__version__}")
    sub = p.add_subparsers(dest="command")
    integrators, timesteps = _Names(_integrator_names), _Names(_timestep_names)

    play = sub.add_parser("play", help="open the sandbox window on a level (default command)",
                          formatter_class=raw, epilog=_play_epilog)
    play.add_argument("level", nargs="?", default=None,
                      help=f"level file or name (default: {DEFAULT_LEVEL}; names below), or "
                           "bench:NAME, a benchmark scene (names: bench --list)")
    play.add_argument("--integrator", default=None, choices=integrators, metavar="NAME",
                      help="start with this integrator (names below)")
    play.add_argument("--timestep", default=None, choices=timesteps, metavar="MODE",
                      help="start with this timestep mode (modes below)")
    play.add_argument("--frames", type=int, default=0,
                      help="quit after this many frames (0: run until closed)")
    play.add_argument("--clip-fps", type=_int_between(1, 120), default=30, metavar="FPS",
                      help="frame rate of clips recorded with C (default 30)")
    play.add_argument("--clip-width", type=_int_between(64, 3840), default=960, metavar="PX",
                      help="largest width of clips, px (default 960; never upscaled)")
    play.set_defaults(func=cmd_play)

    demo = sub.add_parser("demo", help="headless demo: every integrator on article 000's orbit")
    demo.set_defaults(func=cmd_demo)

    ex = sub.add_parser("experiment", help="reproduce an experiment: numbers, CSV and figure",
                        formatter_class=raw, epilog=_experiment_epilog)
    ex.add_argument("name", help="experiment name (below), or 'all'")
    ex.add_argument("--out", default="out", help="output folder (default: out)")
    ex.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    ex.add_argument("--jobs", type=int, default=0,
                    help="worker processes of the local Dask cluster (default: all cores; "
                         "1: serial in this process, no Dask)")
    ex.add_argument("--scheduler", default=None, metavar="ADDRESS",
                    help="run the sweeps on an existing Dask cluster: its scheduler's "
                         "address (tcp://host:8786) or scheduler file")
    ex.add_argument("--seeds", type=_int_between(1, 10_000_000), default=None, metavar="N",
                    help="random-dt: random frame-time sequences of the end-error "
                         "distribution (default 1000; --quick 300)")
    ex.add_argument("--quick", action="store_true", help="reduced sizes, for a smoke run")
    ex.set_defaults(func=cmd_experiment)

    rp = sub.add_parser("replay", help="play a replay file (F6 in the window saves one)",
                        description="Play back a session saved with F6: the same level, "
                        "steps and inputs, bit for bit. In the window by default; with "
                        "--headless, print the final state hash (checked against the "
                        "recording) and optionally save the trajectory.")
    rp.add_argument("file", metavar="FILE", help="a .replay.json file")
    rp.add_argument("--headless", action="store_true", help="no window: run and check")
    rp.add_argument("--out", metavar="OUT.npz", default=None,
                    help="with --headless: save t, h, x, v and energies like simulate "
                         "(never over the replay file; an existing file only with --force)")
    rp.add_argument("--force", action="store_true", help="replace an existing --out file")
    rp.set_defaults(func=cmd_replay)

    check = sub.add_parser("check", help="validate level files; one line per file or error")
    check.add_argument("files", nargs="*", metavar="FILE",
                       help="level files or names (default: every shipped level)")
    check.set_defaults(func=cmd_check)

    sim = sub.add_parser("simulate", help="run a level headless and save t, x, v, energy (.npz)",
                         formatter_class=raw, epilog=_simulate_epilog)
    sim.add_argument("level", help="level file or name (names below)")
    sim.add_argument("--steps", type=int, required=True, metavar="N",
                     help="number of frames to simulate (each may plan several steps)")
    sim.add_argument("--integrator", default=None, choices=integrators, metavar="NAME",
                     help="override the level's integrator (names below)")
    sim.add_argument("--timestep", default=None, choices=timesteps, metavar="MODE",
                     help="override the level's timestep mode (modes below)")
    sim.add_argument("--dt", type=float, default=None, metavar="H",
                     help="frame time fed to the timestep policy, s (default: the level's h)")
    sim.add_argument("--seed", type=int, default=None, help="override the level's seed")
    sim.add_argument("--out", required=True, metavar="FILE.npz",
                     help="output file (never an input; an existing one only with --force)")
    sim.add_argument("--force", action="store_true", help="replace an existing --out file")
    sim.add_argument("--trace", default=None, metavar="FILE",
                     help="the step trace that --timestep replay plays (a level whose mode "
                          "is replay needs one)")
    sim.add_argument("--every", type=int, default=1, metavar="K",
                     help="keep every K-th step's state (and the first and last; "
                          "default 1: all)")
    sim.add_argument("--dtype", default="float64", choices=("float64", "float32"),
                     help="float type of the stored positions and velocities "
                          "(float32: half the archive)")
    sim.set_defaults(func=cmd_simulate)

    bench = sub.add_parser("bench", help="time the scenario table against pymunk; "
                                         "results per machine in bench/results/")
    bench.add_argument("--quick", action="store_true",
                       help="about a minute: fewer rounds and frames, largest extras skipped")
    bench.add_argument("--only", metavar="NAME[,NAME]", default=None,
                       help="run only these scenarios (see --list)")
    bench.add_argument("--list", action="store_true", help="list the scenarios and exit")
    bench.add_argument("--levels", action="store_true",
                       help="instead: every shipped level in the window's own frame "
                            "(dummy video), its median and worst frame and the worst "
                            "after G (--only LEVEL[,LEVEL], --frames N)")
    bench.add_argument("--json", metavar="FILE", default=None, help="also write JSON here")
    bench.add_argument("--csv", metavar="FILE", default=None, help="also write CSV here")
    bench.add_argument("--profile", metavar="NAME", default=None,
                       help="profile one scenario's frames under cProfile instead")
    bench.add_argument("--rounds", type=int, default=None, metavar="N",
                       help="timed rounds per scenario (default 7, quick 3)")
    bench.add_argument("--frames", type=int, default=None, metavar="N",
                       help="frames per round (default: per scenario)")
    bench.add_argument("--no-pymunk", action="store_true", help="skip the pymunk twins")
    bench.add_argument("--load", type=int, default=0, metavar="N",
                       help="run N busy processes beside the timed frames (started and "
                            "stopped by the bench) to see the speed on a busy machine")
    bench.add_argument("--threads", default="auto", choices=("auto", "1", "2"),
                       help="constraint sweep threads: auto (chosen from the machine's "
                            "load and measured speed-up), 1, or 2 (big batches spread)")
    bench.add_argument("--no-cref", action="store_true",
                       help="do not time the C reference kernel (it needs gcc)")
    bench.add_argument("--startup", action=argparse.BooleanOptionalAction, default=None,
                       help="time launch to first frame of the window with an empty and a "
                            "warm kernel cache (default: on unless --only)")
    bench.add_argument("--results-dir", default="bench/results", metavar="DIR",
                       help="per-machine results folder (default: bench/results)")
    bench.add_argument("--no-save", action="store_true",
                       help="do not write the per-machine results")
    bench.set_defaults(func=cmd_bench)
    return p


def _run(argv: list[str]) -> int:
    parser = build_parser()
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv = ["play", *argv]
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            args = parser.parse_args(["play", *argv])
    except SystemExit as e:             # --help, --version (0) or a usage error (2)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return int(args.func(args) or 0)


def main(argv: list[str] | None = None) -> int:
    """Run the command line ``argv`` (default: the process's arguments); returns the exit
    status. The console script ``verlet-sandbox`` and ``python -m sandbox`` call it."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        code = _run(argv)
        sys.stdout.flush()              # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:             # `bench --list | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
