"""Energy against time over long runs (article 002): bounded wiggles or a drift.

Article 002 says symplectic methods "conserve energy". They do not, exactly: at a
fixed step a symplectic method conserves a *modified* energy ``H_h = H + O(h^p)``
(backward error analysis), so the true energy error oscillates with an amplitude of
order ``h^p`` and no trend, for exponentially long times. Explicit Euler multiplies the
oscillator's energy by ``1 + (w h)^2`` every step; RK4 is not symplectic and loses
``(w h)^6/72`` of it per step, a slow linear drift.

When the step changes every step, ``H_h`` changes with it: each change of step moves
the run to another level set of another modified energy, so the error does a random
walk (symplectic Euler, velocity Verlet: still a composition of symplectic maps, but of
different ones). Position Verlet without time correction is not even consistent then.

How "trend" is measured, per run, on ``d(t) = (E(t) - E0)/|E0|``:

``slope``      least-squares slope of ``d`` against ``t`` (1/s); ``drift = slope * T``.
``share``      ``|drift| / max|d|``: near 0 for a wiggle about a level, near 1 when a
               straight line explains the error.
``ratio``      ``max|d|`` over the last tenth of the run over that of the first tenth:
               1 for a bounded oscillation, 10 for linear growth from zero, ``sqrt(10)``
               for a random walk, enormous for exponential growth.
A run shows *no trend* when ``ratio < 1.5`` and ``share < 0.2``. Random steps: ``S``
seeded runs stacked on a batch axis; ``slope`` is their mean, ``share`` uses the root
mean squares of ``drift`` and ``max|d|``, ``ratio`` is the median.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sim.integrators import INTEGRATORS
from .batch import run_batch, window_max
from .convergence import random_steps
from .problems import Problem, moon, oscillator

#: Every registered integrator.
METHODS = tuple(INTEGRATORS)
MODES = ("fixed", "random")
PROBLEMS = ("oscillator", "moon")
RATIO_MAX = 1.5        # ratio below this ...
SHARE_MAX = 0.2        # ... and share below this: no trend
LEVEL_MAX = 3.0        # random steps: a max error this many times the fixed step's is noted
SERIES_PERIODS = 6     # periods kept at full resolution for the energy-against-time figure


@dataclass(frozen=True)
class DriftSetup:
    problem: Problem
    period: float          # s
    periods: int
    steps_per_period: int

    @property
    def n(self) -> int:
        return self.periods * self.steps_per_period


def setup(name: str, quick: bool = False) -> DriftSetup:
    """The long runs: the oscillator (``w = 1``, ``w h = 0.105``) and article 000's moon.

    Oscillator: 300 periods at 60 steps a period (quick: 60); explicit Euler's energy
    grows by ``(1 + (w h)^2)^n``, about ``1e85`` after 18000 steps, still finite.
    Moon: 100 orbits at 100 steps an orbit (quick: 20 orbits).
    """
    if name == "oscillator":
        periods, spp = (60 if quick else 300), 60
        p = oscillator(T=2 * np.pi * periods)
        return DriftSetup(p, 2 * np.pi, periods, spp)
    if name == "moon":
        periods, spp = (20 if quick else 100), 100
        p = moon(periods=periods)
        return DriftSetup(p, p.T / periods, periods, spp)
    raise ValueError(f"unknown energy-drift problem {name!r}; valid: {', '.join(PROBLEMS)}")


@dataclass(frozen=True)
class DriftRun:
    """One problem, method and step mode. Window arrays have one entry per period."""

    problem: str
    method: str
    mode: str
    T: float                 # s
    seeds: int
    t_window: np.ndarray     # window centres, s: one window per period
    envelope: np.ndarray     # max |d| per window (RMS over seeds)
    max_err: float           # max |d| over the run (RMS over seeds)
    slope: float             # 1/s (mean over seeds)
    share: float
    ratio: float             # median over seeds
    series_t: np.ndarray     # first run, first SERIES_PERIODS periods: t (s)
    series_d: np.ndarray     # ... and d(t)

    @property
    def drift(self) -> float:
        return self.slope * self.T

    @property
    def trend(self) -> bool:
        return not (self.ratio < RATIO_MAX and self.share < SHARE_MAX)

    @property
    def finite(self) -> bool:
        return bool(np.isfinite(self.max_err))


def steps(su: DriftSetup, mode: str, seeds: int, seed: int) -> np.ndarray:
    """``(n, S)`` steps: ``S = 1`` equal steps, or ``seeds`` random runs (ratio in [0.5, 2])."""
    p = su.problem
    if mode == "fixed":
        return np.full((su.n, 1), p.T / su.n)
    if mode == "random":
        return np.stack([random_steps(p.T, su.n, np.random.default_rng([seed, k, su.n]))
                         for k in range(seeds)], axis=1)
    raise ValueError(f"unknown step mode {mode!r}; valid: {', '.join(MODES)}")


def trend_metrics(t: np.ndarray, d: np.ndarray, T: float) -> tuple[float, float, float, float]:
    """``(slope, share, ratio, max_err)`` of ``d (n+1, S)`` at times ``t (n+1, S)``."""
    S = d.shape[1]
    with np.errstate(all="ignore"):
        a = np.abs(d)
        mx = np.where(np.isfinite(a), a, np.inf).max(axis=0)
        if not np.all(np.isfinite(mx)):
            return float("nan"), float("nan"), float("inf"), float("inf")
        slopes = np.array([np.polyfit(t[:, j], d[:, j], 1)[0] for j in range(S)])
        first = np.array([a[t[:, j] <= 0.1 * T, j].max() for j in range(S)])
        last = np.array([a[t[:, j] >= 0.9 * T, j].max() for j in range(S)])
        ratio = float(np.median(last / np.maximum(first, np.finfo(float).tiny)))
        share = float(np.sqrt(np.mean((slopes * T) ** 2)) / np.sqrt(np.mean(mx ** 2)))
        return float(np.mean(slopes)), share, ratio, float(np.sqrt(np.mean(mx ** 2)))


def drift_run(problem: str, method: str, mode: str, seeds: int = 16, seed: int = 0,
              quick: bool = False) -> DriftRun:
    """The relative energy error of ``method`` on ``problem`` over a long run."""
    su = setup(problem, quick)
    p = su.problem
    H = steps(su, mode, seeds, seed)
    e0 = float(p.energy(p.x0, p.v0))
    run = run_batch(p.accel, p.x0, p.v0, H, method,
                    observe=lambda x, v: (p.energy(x, v) - e0) / abs(e0))
    d = run.obs
    slope, share, ratio, mx = trend_metrics(run.t, d, p.T)
    edges = np.linspace(0.0, p.T, su.periods + 1)
    env = window_max(run.t, d, edges)
    with np.errstate(over="ignore", invalid="ignore"):
        envelope = np.sqrt(np.mean(env * env, axis=1))
    keep = run.t[:, 0] <= SERIES_PERIODS * su.period * (1 + 1e-12)
    return DriftRun(problem, method, mode, p.T, H.shape[1], 0.5 * (edges[1:] + edges[:-1]),
                    envelope, mx, slope, share, ratio, run.t[keep, 0].copy(),
                    d[keep, 0].copy())
