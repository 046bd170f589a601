"""The headless commands: ``check`` validates level files, ``simulate`` runs one to an ``.npz``.

Each prints exactly one clean line per outcome, never a traceback, and quotes names and
file contents with :func:`sandbox.levels.printable` (no control characters, no
undecodable bytes, bounded). Exit codes, the command line's convention (``--help``):

``check``     0 every file is valid, 2 any is not (bad input), 130 interrupted.
``simulate``  0 written; 1 the run failed: it diverged (it stopped at the last finite
              state, which was saved), ran out of memory, or its archive could not be
              written; 2 bad input (level, options, --out that exists or is an input,
              a run whose archive would not fit the memory budget); 130 interrupted
              (Ctrl-C): the finished steps were saved.
``replay``    0 the recorded final state, bit for bit; 1 another state (the claim did
              not hold) or the archive could not be written; 2 a file that cannot be
              used (malformed, hostile, its level or inputs refused), an --out that
              exists or is the replay.

Nothing at an existing path is replaced unless asked (``--force``), an input never is,
and the archive is written to a temporary file and placed when complete.

numba keeps its compiled kernels in ``__pycache__`` beside the code or in ``~/.cache``;
when neither can be written (a read-only checkout, no home) the commands fall back to a
private folder in the temporary directory, or to the numpy reference kernels, with one
warning line (``sim/backend.py``, when a kernel is first needed).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import stat
import sys
from pathlib import Path

import numpy as np

from .load import LoadMeter
from .sim import cores

#: What ``simulate`` may hold in memory for the archive (positions, velocities,
#: energies of the kept states, every step's h): a larger run is refused before it starts.
MEMORY_BUDGET = 1 << 30

_INTERRUPTED = 130


# --------------------------------------------------------------------------- output

def _streams() -> None:
    """Never fail on a character the terminal's encoding lacks (a name that is not
    UTF-8 under a strict locale): it is replaced, the line still printed."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="replace")
        except (AttributeError, ValueError, OSError):   # a replaced or closed stream
            pass


def _show(path) -> str:
    from .levels import printable
    return printable(path, 200)


def _error(msg: str, code: int) -> int:
    from .levels import printable
    print(f"error: {printable(msg, 600)}", file=sys.stderr)
    return code


# --------------------------------------------------------------------------- check

def run_check(paths: list[str]) -> int:
    """Validate each level (a path or a shipped name; none: every shipped level) and
    build it (links to particles that do not exist, non-finite derived numbers and
    overlapping contacts are only found that way).

    Prints ``ok  <path>`` or the error lines of each; 2 (bad input) if any failed,
    else 0.
    """
    _streams()
    try:
        from .levels import LevelError, build_world, find_level, level_names, load_level

        failed = 0
        for name in paths or level_names():
            path = name
            try:
                path = find_level(name)
                level = load_level(path)
                try:
                    build_world(level)          # what only building can tell
                except LevelError as e:
                    raise LevelError(path, e.errors) from None
            except LevelError as e:
                print(e)
                failed += 1
            except (MemoryError, ArithmeticError, ValueError) as e:
                print(f"{_show(path)}: cannot build the level ({type(e).__name__}: "
                      f"{_show(e)})")
                failed += 1
            else:
                print(f"ok  {_show(path)}")
    except KeyboardInterrupt:
        return _error("interrupted", _INTERRUPTED)
    return 2 if failed else 0


# --------------------------------------------------------------------------- recording

class _Recorder:
    """Per-step samples of a world, in arrays allocated once for the run's bound.

    Sample 0 is the state before the first step, so ``t``, ``x``, ``v`` and every
    energy array have ``steps + 1`` rows (as :func:`sandbox.sim.integrators.integrate`).
    A sample is committed by its last statement (the counters), so an interrupt inside
    one leaves the recorded run as it was; a state that is not finite once stored
    (diverged, or beyond the stored dtype) is not committed and :attr:`broken` says why.
    """

    def __init__(self, every: int = 1, dtype=np.float64, steps: int = 16,
                 states: int = 16) -> None:
        self.every = max(int(every), 1)
        self.dtype = np.dtype(dtype)
        self.steps = 0                  # steps taken and committed so far
        self.count = 0                  # states kept so far
        self.h = np.empty(max(steps, 1))
        self.broken: str | None = None
        self._states = max(states, 2)
        self._n: int | None = None
        self.step_no = self.t = self.x = self.v = None
        self.energy: dict[str, np.ndarray] = {}

    def _allocate(self, n: int, keys) -> None:
        cap = self._states
        self._n = n
        self.step_no = np.empty(cap, np.int64)
        self.t = np.empty(cap)
        self.x = np.empty((cap, n, 2), self.dtype)      # pages are used only when written
        self.v = np.empty((cap, n, 2), self.dtype)
        self.energy = {k: np.empty(cap) for k in keys}

    def _grow(self) -> None:
        for name in ("step_no", "t", "x", "v"):
            a = getattr(self, name)
            setattr(self, name, np.concatenate([a, np.empty_like(a)]))
        self.energy = {k: np.concatenate([a, np.empty_like(a)]) for k, a in self.energy.items()}

    def _keep(self, world, step: int) -> bool:
        """Store the world's state after ``step`` steps as the next sample; False
        (nothing kept) if any of it is not finite."""
        p = world.particles
        if self.broken:
            return False
        if self._n is None:
            self._allocate(p.x.shape[0], world.energy())
        if p.x.shape[0] != self._n:
            self.broken = "the number of particles changed"
            return False
        k = self.count
        if k >= len(self.t):
            self._grow()
        with np.errstate(all="ignore"):
            energy = world.energy()
            self.x[k] = p.x
            self.v[k] = p.v
        finite = [np.isfinite(self.x[k]).all(), np.isfinite(self.v[k]).all(),
                  all(math.isfinite(e) for e in energy.values())]
        if not all(finite):
            what = ("position", "velocity", "energy")[finite.index(False)]
            stored = finite[2] and self.dtype != p.x.dtype     # finite before the cast
            self.broken = f"non-finite {what}" + (f" as {self.dtype}" if stored else "")
            return False
        self.step_no[k] = step
        self.t[k] = float(world.t)
        for key, a in self.energy.items():
            a[k] = energy.get(key, np.nan)
        self.count = k + 1
        return True

    def sample(self, world, h: float | None = None, force: bool = False) -> bool:
        """Record the state after a step of ``h`` (None: the initial state); only every
        ``every``-th step's state is kept (``force``: this one too). False when the state
        is not finite: nothing of this step is recorded and the run must stop."""
        if h is None:
            return self._keep(world, 0)
        steps = self.steps + 1
        if steps > len(self.h):
            self.h = np.concatenate([self.h, np.empty_like(self.h)])
        self.h[steps - 1] = h
        if (steps % self.every == 0 or force) and not self._keep(world, steps):
            return False
        self.steps = steps
        return True

    def finish(self, world) -> None:
        """Keep the final state even when it is not an ``every``-th step; if it cannot be
        kept (not finite), the steps after the last kept state are dropped too."""
        if self.count and self.step_no[self.count - 1] == self.steps:
            return
        if not self._keep(world, self.steps):
            self.truncate()

    def truncate(self) -> None:
        """Forget the steps after the last kept state (the world is not trusted)."""
        self.steps = int(self.step_no[self.count - 1]) if self.count else 0

    def arrays(self) -> dict[str, np.ndarray]:
        k = self.count
        while k and self.step_no[k - 1] > self.steps:   # kept, then interrupted
            k -= 1
        keys = list(self.energy)
        data = {"t": self.t[:k] if k else np.zeros(0), "h": self.h[:self.steps],
                "step": self.step_no[:k] if k else np.zeros(0, np.int64),
                "every": np.array(self.every),
                "x": self.x[:k] if k else np.zeros((0, 0, 2), self.dtype),
                "v": self.v[:k] if k else np.zeros((0, 0, 2), self.dtype),
                "energy_keys": np.array(keys, dtype=str)}
        for key in keys:
            data[f"energy_{key}"] = self.energy[key][:k]
        return data


def _save_npz(path: Path, arrays: dict[str, np.ndarray], replace: bool = True) -> None:
    """Compressed, streamed into a temporary file that takes ``path``'s place when
    complete (a reader never sees half an archive); ``replace`` False never replaces."""
    from .atomic import atomic_writer
    with atomic_writer(path, replace=replace) as f:
        np.savez_compressed(f, **arrays)


# --------------------------------------------------------------------------- simulate

def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _check_out(out: Path, inputs: list[Path], force: bool) -> str | None:
    """Why ``out`` must not be written (one line), or None."""
    if not out.parent.is_dir():
        return f"{_show(out.parent)}: no such folder for --out"
    for src in inputs:
        if _same_file(out, src) or out.resolve() == src.resolve():
            return (f"--out {_show(out)} is an input of this run ({_show(src)}); refusing to "
                    "overwrite it")
    if os.path.lexists(out):
        if not force:
            return f"--out {_show(out)} exists; --force replaces it"
        mode = os.lstat(out).st_mode
        if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode) and os.path.isfile(out)):
            return f"--out {_show(out)} exists and is not a regular file; refusing to replace it"
    return None


def _read_trace(path: Path):
    """A step trace (``sandbox.steptrace.load``: a regular file of at most 64 MiB, every
    line checked); ValueError with one line otherwise."""
    from . import steptrace

    return steptrace.load(path, _show(path))


def _plan_bound(level, policy, dt: float, frames: int) -> int:
    """At most how many steps ``frames`` frames of ``dt`` plan (``policy`` has planned
    the first frame already): the replay trace's, the fixed accumulator's (no more
    simulated time than real time, at most ``max_steps`` a frame), the first frame's
    otherwise (a constant frame time plans alike; 1 when it is carried over)."""
    if policy.name == "replay":
        return sum(len(f) for f in policy.trace.frames[:frames])
    if policy.name == "fixed":
        cap, ratio = level.world.max_steps, dt / level.world.h
        return frames * cap if ratio >= cap else min(frames * cap, int(frames * ratio) + 2)
    return frames * max(len(policy.last_plan), 1)


def _budget_problem(steps: int, states: int, n: int, itemsize: int, keys: int,
                    every: int) -> str | None:
    per_state = n * 2 * 2 * itemsize + 8 * (2 + keys)
    need = steps * 8 + states * per_state
    if need <= MEMORY_BUDGET:
        return None
    room = MEMORY_BUDGET - steps * 8
    hint = "fewer --steps"
    if room > per_state * 2:
        hint = (f"--every {max(every + 1, math.ceil(steps / (room // per_state - 2)))}"
                + (", --dtype float32" if itemsize > 4 else "") + " or fewer --steps")
    return (f"the archive would need {need / 2**20:,.0f} MiB ({steps:,} steps, {states:,} "
            f"states of {n:,} particles); the budget is {MEMORY_BUDGET >> 20:,} MiB: use "
            f"{hint}")


class _Stopped(Exception):
    """The run stopped after a whole step, as Ctrl-C asked."""


class _Stop:
    """Ctrl-C during the run: the first stops it after the step under way (then the
    finished steps are saved), a second one interrupts at once."""

    def __init__(self) -> None:
        self.asked = False
        self._old = None

    def __enter__(self):
        try:
            self._old = signal.signal(signal.SIGINT, self._handle)
        except ValueError:                  # not the main thread: Ctrl-C as usual
            self._old = None
        return self

    def _handle(self, signum, frame) -> None:
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True

    def __exit__(self, *exc) -> None:
        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)


def run_simulate(args: argparse.Namespace) -> int:
    """Run a level headless for ``args.steps`` frames and save the trajectory to ``args.out``.

    ``args``: ``level``, ``steps``, ``out``, and optional ``integrator``, ``timestep``,
    ``dt`` (frame time, s; default the level's ``h``), ``seed``, ``every`` (keep every
    K-th step, default 1), ``dtype`` (of the stored ``x`` and ``v``: float64 or
    float32), ``trace`` (the step trace of the replay mode) and ``force`` (replace an
    existing ``out``). The ``.npz`` holds ``h (k,)`` for every step and, for the ``s``
    kept states (step 0, every K-th step and the last), ``step (s,)`` (their step
    numbers), ``t (s,)``, ``x`` and ``v (s, n, 2)``, ``energy_<key> (s,)`` for every key
    of ``World.energy()`` (listed in ``energy_keys``); and ``every``, ``level``,
    ``integrator``, ``timestep``. ``k`` is the number of steps taken; with ``every`` 1,
    ``s = k + 1``. Every number in it is finite.
    """
    _streams()
    cores.set_meter(LoadMeter())      # as the app: spread the sweep only while cores are free
    try:
        return _simulate(args)
    except KeyboardInterrupt:
        return _error("interrupted; nothing written", _INTERRUPTED)
    except MemoryError:
        return _error("out of memory; nothing written (a smaller run: fewer --steps, "
                      "--every K, --dtype float32)", 1)


def _simulate(args: argparse.Namespace) -> int:
    from .levels import (
        LevelError,
        build_world,
        find_level,
        load_level,
        make_policy_for,
        with_world,
    )
    from .sim.integrators import INTEGRATORS
    from .sim.timestep import TIMESTEPS, ReplayStep
    from .sim.world import SimulationDiverged

    if args.steps < 0:
        return _error(f"--steps must be >= 0, got {args.steps}", 2)
    every = getattr(args, "every", None)
    every = 1 if every is None else every
    if every < 1:
        return _error(f"--every must be >= 1, got {every}", 2)
    store = getattr(args, "dtype", None) or "float64"
    if store not in ("float64", "float32"):
        return _error(f"--dtype must be float64 or float32, got {store}", 2)
    if args.dt is not None and not (math.isfinite(args.dt) and args.dt > 0):
        return _error(f"--dt must be a positive finite number of seconds, got {args.dt}", 2)
    for flag, value, registry in (("--integrator", args.integrator, INTEGRATORS),
                                  ("--timestep", args.timestep, TIMESTEPS)):
        if value is not None and value not in registry:
            return _error(f"{flag}: unknown name {value!r}; expected one of: "
                          f"{', '.join(registry)}", 2)
    trace_path = getattr(args, "trace", None)
    force = bool(getattr(args, "force", False))
    try:
        path = find_level(args.level)
        level = load_level(path)
        overrides = {k: v for k, v in (("integrator", args.integrator),
                                       ("timestep", args.timestep), ("seed", args.seed))
                     if v is not None}
        if overrides:
            level = with_world(level, "command line", **overrides)
    except LevelError as e:
        print(e, file=sys.stderr)
        return 2
    replay = level.world.timestep == "replay"
    if replay and trace_path is None:
        return _error("the replay timestep mode plays a recorded step trace: give it with "
                      "--trace FILE", 2)
    if trace_path is not None and not replay:
        return _error("--trace FILE is the step trace of --timestep replay; this run's mode "
                      f"is {level.world.timestep}", 2)
    out = Path(args.out)
    inputs = [Path(path)] + ([Path(trace_path)] if trace_path is not None else [])
    if problem := _check_out(out, inputs, force):
        return _error(problem, 2)
    trace = None
    if replay:
        try:
            trace = _read_trace(Path(trace_path))
        except ValueError as e:
            return _error(str(e), 2)

    def new_policy():
        return ReplayStep(trace) if replay else make_policy_for(level)

    dt = level.world.h if args.dt is None else args.dt
    probe = new_policy()
    try:
        probe.plan(dt)                      # a fresh policy: the same first frame
    except (ArithmeticError, ValueError, MemoryError) as e:
        return _error(f"--dt {dt!r}: the {level.world.timestep} timestep policy cannot plan "
                      f"a frame this long ({type(e).__name__}: {e})", 2)
    try:
        world = build_world(level)
    except LevelError as e:
        print(LevelError(path, e.errors), file=sys.stderr)
        return 2
    steps_bound = _plan_bound(level, probe, dt, args.steps)
    states_bound = min(steps_bound, steps_bound // every + 1) + 1
    keys = len(world.energy())
    if problem := _budget_problem(steps_bound, states_bound, world.n,
                                  np.dtype(store).itemsize, keys, every):
        return _error(problem, 2)
    rec = _Recorder(every, store, steps=steps_bound, states=states_bound)
    if not rec.sample(world):
        return _error(f"{_show(path)}: the level starts with a {rec.broken}; nothing to "
                      "simulate", 2)
    policy = new_policy()
    frames = range(args.steps)
    if sys.stderr.isatty():
        from tqdm import tqdm
        frames = tqdm(frames, desc=_show(path.stem), unit="frame", leave=False)
    code, why = 0, ""
    with _Stop() as stop:
        try:
            for _ in frames:
                for h in policy.plan(dt):
                    world.step(h)
                    if not rec.sample(world, h):
                        raise SimulationDiverged(world.t, world.integrator.name, h,
                                                 rec.broken or "non-finite state")
                    if stop.asked:
                        raise _Stopped
        except SimulationDiverged as e:
            code, why = 1, str(e)
            rec.finish(world)               # a diverged world was restored: finite
        except _Stopped:
            code, why = _INTERRUPTED, f"interrupted at t = {world.t:.4f} s"
            rec.finish(world)               # after a whole step: the world is whole
        except KeyboardInterrupt:           # a second Ctrl-C, maybe inside a step
            code, why = _INTERRUPTED, f"interrupted at t = {float(rec.t[rec.count - 1]):.4f} s"
            rec.truncate()
        else:
            rec.finish(world)
        finally:
            if hasattr(frames, "close"):
                frames.close()
        data = rec.arrays()
        data.update(level=np.array(str(path)), integrator=np.array(level.world.integrator),
                    timestep=np.array(level.world.timestep))
        try:
            _save_npz(out, data, replace=force)
        except FileExistsError:
            return _error(f"--out {_show(out)} appeared while the run went on; it was kept, "
                          "nothing written (--force replaces it)", 1)
        except OSError as e:
            return _error(f"cannot write {_show(out)}: {e.strerror or e}", 1)
        except KeyboardInterrupt:
            return _error(f"{why or 'interrupted'}; interrupted again while writing "
                          f"{_show(out)}: nothing written", _INTERRUPTED)
    kept = f", {rec.count} states kept (every {every})" if every > 1 else ""
    wrote = (f"wrote {_show(out)}: {rec.steps} steps{kept}, {world.n} particles, "
             f"t = {float(data['t'][-1]) if rec.count else 0.0:.4f} s, "
             f"{out.stat().st_size / 1e6:.1f} MB")
    if code == 1:
        return _error(f"{why}; kept the {rec.steps} steps before it: {wrote}", 1)
    if code == _INTERRUPTED:
        return _error(f"{why}; kept the {rec.steps} finished steps: {wrote}", _INTERRUPTED)
    print(wrote)
    return 0


# --------------------------------------------------------------------------- replay

def run_replay(args: argparse.Namespace) -> int:
    """``replay FILE --headless [--out OUT.npz]``: rebuild the recorded level, apply the
    recorded inputs before the recorded steps, print the final state hash and whether it
    is the recorded one (exit 0) or not (exit 1). A file that cannot be used is one
    error line and exit 2; nothing runs."""
    _streams()
    cores.set_meter(LoadMeter())      # as the app: spread the sweep only while cores are free
    from .replay import ReplayError, load, play

    try:
        rep = load(args.file)
    except ReplayError as e:
        return _error(str(e), 2)
    out = Path(args.out) if args.out else None
    if out is not None and (problem := _check_out(out, [Path(args.file)],
                                                  force=getattr(args, "force", False))):
        return _error(problem, 2)
    rec = _Recorder() if out is not None else None
    try:
        world = play(rep, on_step=rec.sample if rec is not None else None)
    except ReplayError as e:
        return _error(str(e), 2)
    digest = world.state_hash()
    same = digest == rep.final_hash
    if rec is not None:
        data = rec.arrays()
        data.update(level=np.array(rep.level.name), state_hash=np.array(digest))
        try:
            _save_npz(out, data)
        except OSError as e:
            return _error(f"cannot write {_show(out)}: {e.strerror or e}", 1)
        print(f"wrote {_show(out)}: {rec.steps} steps")
    steps = sum(len(f) for f in rep.frames)
    print(f"replayed {len(rep.frames)} frames, {steps} steps; state hash {digest} "
          + ("(the recorded one: bit for bit)" if same else
             f"(DIFFERS from the recorded {rep.final_hash or 'nothing'})"))
    return 0 if same else 1
