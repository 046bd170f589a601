"""Article 001's experiment: three problems with known solutions under randomised steps.

The article ran position Verlet, its Time-Corrected Verlet (TCV) and Euler in a
spreadsheet with a random step every frame and showed sample graphs of the error. We
run the same three kinds of problem (a projectile, an oscillator, an orbit: article
000's moon) with the lab's random steps (each ``h_i = h r_i``, ``r_i ~ U(2/3, 4/3)``
rescaled to end at ``T``, so consecutive steps differ by a ratio within [0.5, 2]) and add
the corrected TCV, ``x+ = x + (x - x_prev) h/h_prev + a h (h + h_prev)/2``.

What theory says: plain Verlet replays the last displacement over a step of another
length, an ``O(h)`` error *every step*: it does not converge. TCV as published
rescales the displacement but keeps ``a h^2``: an ``a h (h - h_prev)/2`` error per step,
first order overall, and wrong even for a projectile. The corrected form is second
order and exact for constant acceleration (round-off on the projectile).

Errors are the max-norm position error against the exact solution at every step of
``S`` seeded runs (stacked on a batch axis); the tables use the root mean square over
the runs of the error at the end and of the largest error over the run.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batch import run_batch
from .convergence import random_steps
from .problems import Problem, moon, oscillator, projectile

METHODS = ("verlet", "tcv", "tcv_corrected", "euler")
PROBLEMS = ("projectile", "oscillator", "moon")
GRID = 200            # points of the common time grid the RMS curve is drawn on


def setup(name: str) -> tuple[Problem, int]:
    """A problem and its number of random steps (nominal step ``T/n``).

    Nominal steps of about one 60 Hz frame: projectile, 2 s at 20 ms (100 steps);
    oscillator (``w = 1``), 20 s at 16.7 ms; moon, 3 orbits at 500 steps an orbit
    (17.9 ms). At these steps plain Verlet's O(1) error is the worst of the four; at
    much larger ones explicit Euler's ``O(h)`` error can overtake it.
    """
    if name == "projectile":
        return projectile(), 100
    if name == "oscillator":
        return oscillator(T=20.0), 1200
    if name == "moon":
        return moon(periods=3.0), 1500
    raise ValueError(f"unknown random-dt problem {name!r}; valid: {', '.join(PROBLEMS)}")


@dataclass(frozen=True)
class RandomDtRun:
    problem: str
    method: str
    seeds: int
    h_nominal: float        # s
    t: np.ndarray           # (n+1, S) s
    err: np.ndarray         # (n+1, S) m, max-norm position error
    t_grid: np.ndarray      # (GRID,) s
    err_rms: np.ndarray     # (GRID,) m, RMS over runs of err interpolated on t_grid
    end_rms: float          # m, RMS over runs of the error at T
    max_rms: float          # m, RMS over runs of the largest error over the run
    fixed_end: float        # m, error at T of one run at the fixed nominal step
    fixed_max: float        # m, largest error over that run


def random_dt_run(problem: str, method: str, seeds: int = 32, seed: int = 0) -> RandomDtRun:
    """Position error against time of ``method`` under ``seeds`` random step sequences."""
    p, n = setup(problem)
    H = np.stack([random_steps(p.T, n, np.random.default_rng([seed, k, n]))
                  for k in range(seeds)], axis=1)
    t, err = position_errors(p, method, H)
    tf, errf = position_errors(p, method, np.full((n, 1), p.T / n))
    with np.errstate(invalid="ignore", over="ignore"):
        t_grid = np.linspace(0.0, p.T, GRID)
        on_grid = np.stack([np.interp(t_grid, t[:, j], err[:, j]) for j in range(seeds)], 1)
        err_rms = np.sqrt(np.mean(on_grid ** 2, axis=1))
        end_rms = float(np.sqrt(np.mean(err[-1] ** 2)))
        max_rms = float(np.sqrt(np.mean(err.max(axis=0) ** 2)))
    return RandomDtRun(problem, method, seeds, p.T / n, t, err, t_grid, err_rms, end_rms,
                       max_rms, float(errf[-1, 0]), float(errf[:, 0].max()))


def position_errors(p: Problem, method: str, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Times ``(n+1, S)`` and max-norm position errors ``(n+1, S)`` (m; ``inf`` if diverged)."""
    run = run_batch(p.accel, p.x0, p.v0, H, method, observe=lambda x, v: x)
    t = run.t
    xe, _ = p.exact(t.ravel())
    with np.errstate(invalid="ignore", over="ignore"):
        dev = np.abs(run.obs - xe.reshape(run.obs.shape)).reshape(t.shape + (-1,))
        err = np.max(dev, axis=-1)
    return t, np.where(np.isfinite(err), err, np.inf)


# --- the distribution over many sequences (``experiment random-dt --seeds N``) ---------

BLOCK = 100           # sequences per case of the sweep (stacked on one batch axis)


def end_errors(start: int, count: int, seed: int = 0) -> np.ndarray:
    """One case of the distribution: the position error at ``T`` (m, max-norm; ``inf`` if
    diverged) of every method on every problem under the random sequences ``start`` ..
    ``start + count - 1``, ``(len(PROBLEMS), len(METHODS), count)``.

    Sequence ``k`` of a problem of ``n`` steps is seeded by ``(seed, k, n)``, the seeding
    of :func:`random_dt_run`, so its first sequences are the ones the RMS curves use; all
    methods of a problem take the same sequences.
    """
    from .convergence import end_errors_batch
    out = np.empty((len(PROBLEMS), len(METHODS), count))
    for a, prob in enumerate(PROBLEMS):
        p, n = setup(prob)
        H = np.stack([random_steps(p.T, n, np.random.default_rng([seed, k, n]))
                      for k in range(start, start + count)], axis=1)
        for b, m in enumerate(METHODS):
            with np.errstate(all="ignore"):
                ex, _ = end_errors_batch(p, m, H)
            out[a, b] = np.where(np.isfinite(ex), ex, np.inf)
    return out


def block_cases(seeds: int, seed: int = 0, block: int = BLOCK) -> list[dict]:
    """The sweep's cases: ``seeds`` sequences in blocks of ``block`` (the last may be short)."""
    return [{"start": s, "count": min(block, seeds - s), "seed": seed}
            for s in range(0, seeds, block)]


def fixed_end_errors() -> np.ndarray:
    """``(len(PROBLEMS), len(METHODS))``: the error at ``T`` of one run at the fixed nominal
    step, the mark the distribution is read against."""
    from .convergence import end_errors_batch
    out = np.empty((len(PROBLEMS), len(METHODS)))
    for a, prob in enumerate(PROBLEMS):
        p, n = setup(prob)
        for b, m in enumerate(METHODS):
            with np.errstate(all="ignore"):
                out[a, b] = end_errors_batch(p, m, np.full((n, 1), p.T / n))[0][0]
    return out
