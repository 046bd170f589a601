"""Verlet Sandbox command line: play (default), demo, experiment, check, simulate, bench.

Only the subcommand that needs pygame imports it, and only the ones that draw figures
import matplotlib, so ``python main.py --help`` and the headless commands start fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_play(args) -> int:
    try:
        from sandbox.app.main import run_app
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("sandbox.app"):   # no window yet: headless demo
            return cmd_demo(args)
        print(f"error: cannot start the sandbox window: {e}", file=sys.stderr)
        return 1
    return run_app(args.level, integrator=args.integrator, timestep=args.timestep,
                   frames=args.frames)


def cmd_demo(args) -> int:
    from sandbox.lab.demo import run_demo
    return run_demo()


def cmd_experiment(args) -> int:
    from sandbox.lab.experiments import Context, run
    ctx = Context(out=Path(args.out), seed=args.seed, jobs=args.jobs, quick=args.quick)
    try:
        results = run(args.name, ctx)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for r in results:
        for f in r.files:
            print(f"wrote {f}")
    return 0


def cmd_check(args) -> int:
    from sandbox.headless import run_check
    return run_check(args.files)


def cmd_simulate(args) -> int:
    from sandbox.headless import run_simulate
    return run_simulate(args)


def cmd_bench(args) -> int:
    from sandbox.bench import run_bench
    return run_bench(args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="main.py", description=(
        "Verlet Sandbox: an interactive 2D particle sandbox that shows why integrators "
        "differ. Without a command, opens the sandbox window."))
    sub = p.add_subparsers(dest="command")

    play = sub.add_parser("play", help="open the sandbox window on a level (default command)")
    play.add_argument("level", nargs="?", default=None, help="level file or name")
    play.add_argument("--integrator", default=None, help="start with this integrator")
    play.add_argument("--timestep", default=None, help="start with this timestep mode")
    play.add_argument("--frames", type=int, default=0,
                      help="quit after this many frames (0: run until closed)")
    play.set_defaults(func=cmd_play)

    demo = sub.add_parser("demo", help="headless demo: every integrator on article 000's orbit")
    demo.set_defaults(func=cmd_demo)

    ex = sub.add_parser("experiment", help="reproduce an experiment: numbers, CSV and figure")
    ex.add_argument("name", help="experiment name, or 'all'")
    ex.add_argument("--out", default="out", help="output folder (default: out)")
    ex.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    ex.add_argument("--jobs", type=int, default=0, help="worker processes (default: all cores)")
    ex.add_argument("--quick", action="store_true", help="reduced sizes, for a smoke run")
    ex.set_defaults(func=cmd_experiment)

    check = sub.add_parser("check", help="validate level files; one line per file or error")
    check.add_argument("files", nargs="*", metavar="FILE",
                       help="level files or names (default: every shipped level)")
    check.set_defaults(func=cmd_check)

    sim = sub.add_parser("simulate", help="run a level headless and save t, x, v, energy (.npz)")
    sim.add_argument("level", help="level file or name")
    sim.add_argument("--steps", type=int, required=True, metavar="N",
                     help="number of frames to simulate (each may plan several steps)")
    sim.add_argument("--integrator", default=None, help="override the level's integrator")
    sim.add_argument("--timestep", default=None, metavar="MODE",
                     help="override the level's timestep mode")
    sim.add_argument("--dt", type=float, default=None, metavar="H",
                     help="frame time fed to the timestep policy, s (default: the level's h)")
    sim.add_argument("--seed", type=int, default=None, help="override the level's seed")
    sim.add_argument("--out", required=True, metavar="FILE.npz", help="output file")
    sim.set_defaults(func=cmd_simulate)

    bench = sub.add_parser("bench", help="time the scenario table against pymunk; "
                                         "results per machine in bench/results/")
    bench.add_argument("--quick", action="store_true",
                       help="about a minute: fewer rounds and frames, largest extras skipped")
    bench.add_argument("--only", metavar="NAME[,NAME]", default=None,
                       help="run only these scenarios (see --list)")
    bench.add_argument("--list", action="store_true", help="list the scenarios and exit")
    bench.add_argument("--json", metavar="FILE", default=None, help="also write JSON here")
    bench.add_argument("--csv", metavar="FILE", default=None, help="also write CSV here")
    bench.add_argument("--profile", metavar="NAME", default=None,
                       help="profile one scenario's frames under cProfile instead")
    bench.add_argument("--rounds", type=int, default=None, metavar="N",
                       help="timed rounds per scenario (default 7, quick 3)")
    bench.add_argument("--frames", type=int, default=None, metavar="N",
                       help="frames per round (default: per scenario)")
    bench.add_argument("--no-pymunk", action="store_true", help="skip the pymunk twins")
    bench.add_argument("--results-dir", default="bench/results", metavar="DIR",
                       help="per-machine results folder (default: bench/results)")
    bench.add_argument("--no-save", action="store_true",
                       help="do not write the per-machine results")
    bench.set_defaults(func=cmd_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = ["play", *argv]
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        args = parser.parse_args(["play", *argv])
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
