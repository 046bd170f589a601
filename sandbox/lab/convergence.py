"""Convergence of every integrator: global error at a fixed end time against step size.

Two step families per problem and method:

``fixed``   ``N`` equal steps ``h = T/N``.
``random``  ``N`` random steps ``h_i = T r_i / sum(r)`` with ``r_i ~ U(2/3, 4/3)``, so
            consecutive steps differ by a ratio within ``[0.5, 2]`` however small the
            family gets. Errors are the root mean square over ``seeds`` runs.

Why RMS over many seeds: under random steps the leading error of TCV as published is
``O(h)`` with a *random, zero-mean* coefficient. Summing its per-step error
``a_i (h_i - h_{i-1})/2`` by parts leaves ``a (h(t) - mean h)/2``: it depends on how
the first and last steps differ from the mean, so one seed's error can nearly vanish
at one ``N`` and not at the next, and a fit through single runs wanders by +-1 in
slope. The RMS over 64 seeds estimates ``sqrt(E[c^2]) h`` and fits to within +-0.05;
the seeds run stacked on a batch axis, so they cost little more than one run.

The measured order is the least-squares slope of ``log(error)`` against ``log(T/N)``.
Everything here returns arrays; plotting is in :mod:`sandbox.lab.plots`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..sim.integrators import INTEGRATORS, get_integrator, integrate
from ..sim.particles import State
from .problems import Problem

MODES = ("fixed", "random")
RATIO_LO, RATIO_HI = 2.0 / 3.0, 4.0 / 3.0


def random_steps(T: float, n: int, rng: np.random.Generator,
                 lo: float = RATIO_LO, hi: float = RATIO_HI) -> np.ndarray:
    """``n`` random positive steps summing to ``T`` (to round-off), each ``T/n * r / mean(r)``."""
    r = rng.uniform(lo, hi, size=n)
    return T * r / r.sum()


def steps_for(problem: Problem, n: int, mode: str, seed: int = 0, rep: int = 0) -> np.ndarray:
    """The ``n`` steps of one run; random runs are seeded by ``(seed, rep, n)``."""
    if mode == "fixed":
        return np.full(n, problem.T / n)
    if mode == "random":
        return random_steps(problem.T, n, np.random.default_rng([seed, rep, n]))
    raise ValueError(f"unknown step mode {mode!r}; valid: {', '.join(MODES)}")


def end_error(problem: Problem, method: str, dts: np.ndarray) -> tuple[float, float]:
    """Max-norm position and velocity error at the end of the steps ``dts``."""
    tr = integrate(problem.accel, problem.x0, problem.v0, dts, method)
    xe, ve = problem.exact(tr.t[-1:])
    return float(np.max(np.abs(tr.x[-1] - xe[0]))), float(np.max(np.abs(tr.v[-1] - ve[0])))


def end_errors_batch(problem: Problem, method: str, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Errors at the end of ``S`` runs at once, run ``j`` taking the steps ``H[:, j]``.

    The runs are stacked on a leading axis and each step broadcasts one ``h`` per run,
    so 16 randomly stepped runs cost about one. Each run is the same arithmetic as
    :func:`integrate` on ``H[:, j]`` (a test checks they agree to round-off).
    Returns ``err_x (S,)`` and ``err_v (S,)``.
    """
    integ = get_integrator(method)
    n, S = H.shape
    shape = problem.x0.shape
    s = State.from_xv(np.broadcast_to(problem.x0, (S, *shape)),
                      np.broadcast_to(problem.v0, (S, *shape)))
    bshape = (S,) + (1,) * len(shape)
    integ.start(s, H[0].reshape(bshape), problem.accel)
    for i in range(n):
        integ.step(s, H[i].reshape(bshape), problem.accel)
    t = H.sum(axis=0)
    ex = np.empty(S)
    ev = np.empty(S)
    for j in range(S):
        xe, ve = problem.exact(t[j:j + 1])
        ex[j] = np.max(np.abs(s.x[j] - xe[0]))
        ev[j] = np.max(np.abs(s.v[j] - ve[0]))
    return ex, ev


def fit_order(h: np.ndarray, err: np.ndarray) -> float:
    """Slope of ``log err`` against ``log h`` (least squares); ``nan`` if errors vanish."""
    h, err = np.asarray(h, float), np.asarray(err, float)
    ok = err > 0
    if ok.sum() < 2:
        return float("nan")
    return float(np.polyfit(np.log(h[ok]), np.log(err[ok]), 1)[0])


def roundoff_floor(problem: Problem, n: int) -> float:
    """An error below which a run counts as exact: ``n^2 * eps * scale``.

    Position Verlet sums second differences, so round-off can grow like ``n^2 eps L``
    (``L`` the size of the solution); one-step methods grow more slowly. Used only for
    problems whose solution is a polynomial that a method can reproduce exactly.
    """
    xe, ve = problem.exact(np.array([0.0, problem.T]))
    scale = float(max(np.max(np.abs(xe)), np.max(np.abs(ve)) * problem.T, 1.0))
    return 4.0 * n * n * np.finfo(float).eps * scale


@dataclass(frozen=True)
class ConvergenceRow:
    problem: str
    method: str
    mode: str
    declared: int           # declared order for this mode (0: does not converge)
    n: np.ndarray           # step counts
    h: np.ndarray           # nominal step T/n (s)
    err_x: np.ndarray       # position error at T
    err_v: np.ndarray       # velocity error at T
    order_x: float          # fitted order of err_x (nan if exact)
    order_v: float
    exact: bool             # all errors at round-off level (polynomial problems)


def convergence_row(problem: Problem, method: str, mode: str, seeds: int = 64,
                    counts: tuple[int, ...] | None = None, seed: int = 0) -> ConvergenceRow:
    """Errors and fitted orders of one method on one problem under one step mode."""
    integ = get_integrator(method)
    declared = integ.order if mode == "fixed" else integ.order_variable
    # The family must be in the asymptotic regime of the order expected in this mode.
    counts = tuple(counts or problem.step_counts(max(declared, 1)))
    ns = np.array(counts)
    reps = 1 if mode == "fixed" else seeds
    ex = np.empty((reps, ns.size))
    ev = np.empty((reps, ns.size))
    for j, n in enumerate(counts):
        H = np.stack([steps_for(problem, n, mode, seed, k) for k in range(reps)], axis=1)
        ex[:, j], ev[:, j] = end_errors_batch(problem, method, H)
    err_x = np.sqrt(np.mean(ex * ex, axis=0))
    err_v = np.sqrt(np.mean(ev * ev, axis=0))
    h = problem.T / ns
    exact = bool(problem.polynomial and all(
        max(err_x[j], err_v[j] * problem.T) <= roundoff_floor(problem, n)
        for j, n in enumerate(counts)))
    ox = float("nan") if exact else fit_order(h, err_x)
    ov = float("nan") if exact else fit_order(h, err_v)
    return ConvergenceRow(problem.name, integ.name, mode, declared, ns, h, err_x, err_v,
                          ox, ov, exact)


def summary_table(rows: list[ConvergenceRow], problem: str) -> list[dict]:
    """One line per method for ``problem``: declared and measured orders in both modes."""
    out = []
    for m, integ in INTEGRATORS.items():
        line = {"method": m, "declared_fixed": integ.order,
                "declared_random": integ.order_variable}
        for r in rows:
            if r.problem == problem and r.method == m:
                line[f"measured_{r.mode}"] = "exact" if r.exact else round(r.order_x, 2)
        out.append(line)
    return out
