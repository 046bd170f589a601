"""The headless commands: ``check`` validates level files, ``simulate`` runs one to an ``.npz``.

Both return a process exit code and print clean one-line errors, never a traceback:
``check`` exits 1 when any file is invalid; ``simulate`` exits 2 on bad input (level
or options) and 3 when the simulation diverges, after saving what it recorded.
"""

from __future__ import annotations

import argparse
import io
import math
import sys
from pathlib import Path

import numpy as np

from .levels import LevelError, find_level, level_names, load_level, with_world
from .sim.atomic import atomic_write_bytes
from .sim.integrators import INTEGRATORS
from .sim.timestep import TIMESTEPS


def run_check(paths: list[str]) -> int:
    """Validate each level (a path or a shipped name; none: every shipped level) and
    build it (links to particles that do not exist are only found that way).

    Prints ``ok  <path>`` or the error lines of each; 1 if any failed, else 0.
    """
    from .levels import build_world

    failed = 0
    for name in paths or level_names():
        try:
            path = find_level(name)
            level = load_level(path)
            try:
                build_world(level)           # what only building can tell (links)
            except LevelError as e:
                raise LevelError(path, e.errors) from None
        except LevelError as e:
            print(e)
            failed += 1
        else:
            print(f"ok  {path}")
    return 1 if failed else 0


def _error(msg: str, code: int) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return code


class _Recorder:
    """Per-step samples of a world, stacked into arrays when the run ends.

    Sample 0 is the state before the first step, so ``t``, ``x``, ``v`` and every
    energy array have ``steps + 1`` rows (as :func:`sandbox.sim.integrators.integrate`).
    """

    def __init__(self, every: int = 1, dtype=np.float64) -> None:
        self.every = max(int(every), 1)
        self.dtype = np.dtype(dtype)
        self.steps = 0                  # steps taken so far
        self.step: list[int] = []       # the step index of each sample
        self.t: list[float] = []
        self.h: list[float] = []
        self.x: list[np.ndarray] = []
        self.v: list[np.ndarray] = []
        self.energy: list[dict[str, float]] = []

    def sample(self, world, h: float | None = None, force: bool = False) -> None:
        """Record the state after a step of ``h`` (None: the initial state); only every
        ``every``-th step is kept (``force``: this one too, e.g. the last)."""
        p = world.particles
        if h is not None:
            self.h.append(h)
            self.steps += 1
            if not force and self.steps % self.every:
                return
        if self.step and self.step[-1] == self.steps:
            return                      # already kept
        self.step.append(self.steps)
        self.t.append(float(world.t))
        self.x.append(p.x.astype(self.dtype))
        self.v.append(p.v.astype(self.dtype))
        self.energy.append(world.energy())

    def finish(self, world) -> None:
        """Keep the final state even when it is not an ``every``-th step."""
        if self.steps and self.step[-1] != self.steps:
            self.step.append(self.steps)
            p = world.particles
            self.t.append(float(world.t))
            self.x.append(p.x.astype(self.dtype))
            self.v.append(p.v.astype(self.dtype))
            self.energy.append(world.energy())

    def _stack(self, rows: list[np.ndarray]) -> np.ndarray:
        # The particle count is constant for every shipped body; should a tool ever add
        # particles mid-run, pad with NaN instead of failing at the very end.
        n = max((r.shape[0] for r in rows), default=0)
        out = np.full((len(rows), n, 2), np.nan, self.dtype)
        for k, r in enumerate(rows):
            out[k, : r.shape[0]] = r
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        keys = list(self.energy[0]) if self.energy else []
        data = {"t": np.array(self.t), "h": np.array(self.h), "step": np.array(self.step),
                "every": np.array(self.every),
                "x": self._stack(self.x), "v": self._stack(self.v),
                "energy_keys": np.array(keys, dtype=str)}
        for k in keys:
            data[f"energy_{k}"] = np.array([e.get(k, np.nan) for e in self.energy])
        return data


def _save_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())   # a reader never sees half an archive


def run_simulate(args: argparse.Namespace) -> int:
    """Run a level headless for ``args.steps`` frames and save the trajectory to ``args.out``.

    ``args``: ``level``, ``steps``, ``out``, and optional ``integrator``, ``timestep``,
    ``dt`` (frame time, s; default the level's ``h``), ``seed``, ``every`` (keep every
    K-th step, default 1) and ``dtype`` (of the stored ``x`` and ``v``: float64 or
    float32). The ``.npz`` holds ``h (k,)`` for every step and, for the ``s`` kept
    states (step 0, every K-th step and the last), ``step (s,)`` (their step numbers),
    ``t (s,)``, ``x`` and ``v (s, n, 2)``, ``energy_<key> (s,)`` for every key of
    ``World.energy()`` (listed in ``energy_keys``); and ``every``, ``level``,
    ``integrator``, ``timestep``. ``k`` is the number of steps the policy planned; with
    ``every`` 1, ``s = k + 1``.
    """
    from .levels import build_world, make_policy_for
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
    out = Path(args.out)
    if not out.parent.is_dir():
        return _error(f"{out.parent}: no such folder for --out", 2)

    world = build_world(level)
    policy = make_policy_for(level)
    dt = level.world.h if args.dt is None else args.dt
    rec = _Recorder(every, store)
    rec.sample(world)
    frames = range(args.steps)
    if sys.stderr.isatty():
        from tqdm import tqdm
        frames = tqdm(frames, desc=path.stem, unit="frame", leave=False)
    code = 0
    try:
        for _ in frames:
            for h in policy.plan(dt):
                world.step(h)
                rec.sample(world, h)
    except SimulationDiverged as e:
        print(f"error: {e} (kept the {len(rec.h)} steps before it)", file=sys.stderr)
        code = 3
    finally:
        if hasattr(frames, "close"):
            frames.close()
    rec.finish(world)
    data = rec.arrays()
    data.update(level=np.array(str(path)), integrator=np.array(level.world.integrator),
                timestep=np.array(level.world.timestep))
    try:
        _save_npz(out, data)
    except OSError as e:
        return _error(f"cannot write {out}: {e.strerror or e}", 2)
    kept = f", {len(rec.t)} states kept (every {every})" if every > 1 else ""
    print(f"wrote {out}: {len(rec.h)} steps{kept}, {world.n} particles, t = {world.t:.4f} s, "
          f"{out.stat().st_size / 1e6:.1f} MB")
    return code


def run_replay(args: argparse.Namespace) -> int:
    """``replay FILE --headless [--out OUT.npz]``: rebuild the recorded level, apply the
    recorded inputs before the recorded steps, print the final state hash and whether it
    is the recorded one (exit 0) or not (exit 1). A file that cannot be used is one
    error line and exit 1; nothing runs."""
    from .replay import ReplayError, load, play

    try:
        rep = load(args.file)
    except ReplayError as e:
        return _error(str(e), 1)
    out = Path(args.out) if args.out else None
    if out is not None and not out.parent.is_dir():
        return _error(f"{out.parent}: no such folder for --out", 1)
    rec = _Recorder() if out is not None else None
    world = play(rep, on_step=rec.sample if rec is not None else None)
    digest = world.state_hash()
    same = digest == rep.final_hash
    if rec is not None:
        data = rec.arrays()
        data.update(level=np.array(rep.level.name), state_hash=np.array(digest))
        try:
            _save_npz(out, data)
        except OSError as e:
            return _error(f"cannot write {out}: {e.strerror or e}", 1)
        print(f"wrote {out}: {len(rec.h)} steps")
    steps = sum(len(f) for f in rep.frames)
    print(f"replayed {len(rep.frames)} frames, {steps} steps; state hash {digest} "
          + ("(the recorded one: bit for bit)" if same else
             f"(DIFFERS from the recorded {rep.final_hash or 'nothing'})"))
    return 0 if same else 1
