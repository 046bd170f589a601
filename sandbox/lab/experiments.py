"""Experiments as commands: compute arrays, print the numbers, write CSV and figures.

Each experiment in ``EXPERIMENTS`` is an :class:`Experiment`: a function ``run(ctx) ->
Result`` and the report's words for it; ``ctx`` says
where to write, the seed, and how to show progress and spread work over cores. The
computation lives in the other ``sandbox.lab`` modules and returns arrays (tests call
those); this module only orchestrates, formats and writes. matplotlib is imported by
:mod:`sandbox.lab.plots` only when a figure is drawn.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..sim.integrators import INTEGRATORS
from . import convergence as conv
from .context import (
    Context,
    Result,
    _emit,
    _g,
    format_table,
    parallel_map,
    write_csv,
)
from .output import write_text
from .problems import all_problems

# --- convergence ---------------------------------------------------------------------

def _conv_job(problem_name: str, method: str, mode: str, seeds: int, seed: int, quick: bool):
    p = all_problems()[problem_name]
    counts = None
    if quick:
        integ = INTEGRATORS[method]
        declared = integ.order if mode == "fixed" else integ.order_variable
        counts = p.step_counts(max(declared, 1))[:3]
    return conv.convergence_row(p, method, mode, seeds=seeds, counts=counts, seed=seed)


def _fmt_order(row) -> str:
    return "exact" if row.exact else f"{row.order_x:.2f}"


def run_convergence(ctx: Context) -> Result:
    """Global error against step size for every integrator on every problem."""
    problems = list(all_problems())
    seeds = 16 if ctx.quick else 64
    jobs = [(p, m, mode, seeds, ctx.seed, ctx.quick)
            for p in problems for m in INTEGRATORS for mode in conv.MODES]
    rows = parallel_map(ctx, _conv_job, jobs, "convergence")
    ctx.out.mkdir(parents=True, exist_ok=True)

    csv_rows = []
    for r in rows:
        for n, h, ex, ev in zip(r.n, r.h, r.err_x, r.err_v, strict=True):
            csv_rows.append([r.problem, r.method, r.mode, r.declared, int(n), float(h),
                             float(ex), float(ev)])
    files = [write_csv(ctx.out / "convergence.csv",
                       ["problem", "method", "mode", "declared_order", "n_steps", "h_s",
                        "err_x_m", "err_v_m_per_s"], csv_rows)]
    order_rows = [[r.problem, r.method, r.mode, r.declared, _fmt_order(r),
                   "exact" if r.exact else f"{r.order_v:.2f}"] for r in rows]
    files.append(write_csv(ctx.out / "convergence_orders.csv",
                           ["problem", "method", "mode", "declared_order", "measured_order_x",
                            "measured_order_v"], order_rows))

    by = {(r.problem, r.method, r.mode): r for r in rows}
    text = []
    for mode in conv.MODES:
        table = []
        for m, integ in INTEGRATORS.items():
            declared = integ.order if mode == "fixed" else integ.order_variable
            table.append([m, declared if declared else "none"]
                         + [_fmt_order(by[(p, m, mode)]) for p in problems])
        header = ["integrator", f"declared ({mode})"] + problems
        text.append(f"Measured global order of the position error, {mode} steps"
                    + (" (ratio of consecutive steps in [0.5, 2], RMS over "
                       f"{seeds} seeds)" if mode == "random" else "") + ":")
        text.append(format_table(header, table))
        text.append("")
    summary = [[m, integ.order, _fmt_order(by[("oscillator", m, "fixed")]),
                integ.order_variable or "none", _fmt_order(by[("oscillator", m, "random")])]
               for m, integ in INTEGRATORS.items()]
    text.append("Summary on the oscillator (integrator, declared order, measured fixed, "
                "declared random, measured random):")
    text.append(format_table(["integrator", "declared", "measured fixed", "declared random",
                              "measured random"], summary))
    out_text = "\n".join(text)
    ctx.echo(out_text)

    from . import plots
    files.append(plots.convergence_figure(rows, problems, ctx.out / "convergence.png"))
    numbers = {f"{r.problem}/{r.method}/{r.mode}": (None if r.exact else r.order_x)
               for r in rows}
    files.append(ctx.out / "convergence.txt")
    write_text(files[-1], out_text + "\n")
    return Result("convergence", files, out_text, numbers)


def _stiff_job(scene: str, substeps: int, iterations: int, seconds: float):
    from .stiffness import settle_error
    return settle_error(scene, substeps, iterations, seconds)


def run_constraints(ctx: Context) -> Result:
    """Constraint error against iterations and substeps at equal cost."""
    from . import stiffness
    passes = (1, 2, 5) if ctx.quick else (1, 2, 5, 10, 20)
    seconds = 3.0 if ctx.quick else 10.0
    jobs = [(scene, sub, it, seconds) for scene in stiffness.SCENES for p in passes
            for sub, it in ((1, p), (p, 1))]
    errs = parallel_map(ctx, _stiff_job, jobs, "constraints")
    rows = [{"scene": j[0], "passes": j[1] * j[2], "substeps": j[1], "iterations": j[2],
             "mean": e[0], "max": e[1]} for j, e in zip(jobs, errs, strict=True)]
    ctx.out.mkdir(parents=True, exist_ok=True)
    table = [[r["scene"], r["passes"], r["substeps"], r["iterations"], f"{r['mean']:.2e}",
              f"{r['max']:.2e}"] for r in rows]
    header = ["scene", "passes", "substeps", "iterations", "mean stretch", "max stretch"]
    text = ("Settled constraint error (relative stretch) against solver passes per frame:\n"
            + format_table(header, table))
    ctx.echo(text)
    files = [write_csv(ctx.out / "constraints.csv", header,
                       [[r["scene"], r["passes"], r["substeps"], r["iterations"],
                         float(r["mean"]), float(r["max"])] for r in rows]),
             stiffness.figure(rows, ctx.out / "constraints.png")]
    return Result("constraints", files, text)


def _order(x: float) -> str:
    return "exact" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.2f}"


# --- energy drift (article 002) --------------------------------------------------------

def _drift_job(problem: str, method: str, mode: str, seeds: int, seed: int, quick: bool):
    from .energy_drift import drift_run
    return drift_run(problem, method, mode, seeds=seeds, seed=seed, quick=quick)


def run_energy_drift(ctx: Context) -> Result:
    """Energy against time over long runs, fixed and random steps (article 002)."""
    from . import energy_drift as ed
    seeds = 8 if ctx.quick else 16
    jobs = [(p, m, mode, seeds, ctx.seed, ctx.quick)
            for p in ed.PROBLEMS for m in ed.METHODS for mode in ed.MODES]
    runs = parallel_map(ctx, _drift_job, jobs, "energy-drift")
    ctx.out.mkdir(parents=True, exist_ok=True)
    header = ["problem", "integrator", "h", "max |dE|/|E0|", "drift over run",
              "share", "ratio last/first", "verdict"]
    table, csv_rows, env_rows, numbers = [], [], [], {}
    fixed_err = {(r.problem, r.method): r.max_err for r in runs if r.mode == "fixed"}
    for r in runs:
        su = ed.setup(r.problem, ctx.quick)
        verdict = ("diverges" if not r.finite else "trend" if r.trend else "no trend")
        level = r.max_err / fixed_err[(r.problem, r.method)]
        if r.mode == "random" and not r.trend and level > ed.LEVEL_MAX:
            # No trend, but not the fixed step's wiggle either: an O(1) error from the start.
            verdict = f"no trend, {level:.0f}x the fixed-step error"
        table.append([r.problem, r.method, r.mode, _g(r.max_err), _g(r.drift, 2),
                      _g(r.share, 2), _g(r.ratio), verdict])
        csv_rows.append([r.problem, r.method, r.mode, r.seeds, su.n, float(r.T),
                         float(r.max_err), float(r.slope), float(r.drift), float(r.share),
                         float(r.ratio), int(r.trend)])
        for t, e in zip(r.t_window, r.envelope, strict=True):
            env_rows.append([r.problem, r.method, r.mode, float(t), float(e)])
        numbers[f"{r.problem}/{r.method}/{r.mode}"] = {
            "max_err": r.max_err, "drift": r.drift, "share": r.share, "ratio": r.ratio,
            "trend": r.trend, "finite": r.finite, "level_vs_fixed": level}
    files = [write_csv(ctx.out / "energy_drift.csv",
                       ["problem", "method", "mode", "runs", "steps", "T_s", "max_rel_err",
                        "slope_per_s", "drift_over_run", "share", "ratio_last_first",
                        "trend"], csv_rows),
             write_csv(ctx.out / "energy_drift_envelope.csv",
                       ["problem", "method", "mode", "t_s", "max_rel_err_in_window"],
                       env_rows)]
    o, m_ = ed.setup("oscillator", ctx.quick), ed.setup("moon", ctx.quick)
    text = (f"Relative energy error d = (E - E0)/|E0| over long runs: oscillator "
            f"{o.periods} periods at {o.steps_per_period} steps a period (w h = "
            f"{2 * np.pi / o.steps_per_period:.3f}), moon {m_.periods} orbits at "
            f"{m_.steps_per_period} steps an orbit; random steps: {seeds} runs, ratio of "
            "consecutive steps in [0.5, 2].\n"
            "drift = slope of a straight-line fit x T; share = |drift|/max|d|; ratio = "
            "max|d| over the last tenth / first tenth.\n"
            f"'no trend' means ratio < {ed.RATIO_MAX} and share < {ed.SHARE_MAX}; under random "
            f"steps a level above {ed.LEVEL_MAX:g}x the fixed step's is reported too.\n"
            + format_table(header, table))
    from . import plots
    files.append(plots.energy_drift_figure(runs, list(ed.PROBLEMS), ctx.out / "energy_drift.png"))
    files.append(plots.energy_series_figure(runs, list(ed.PROBLEMS),
                                            ctx.out / "energy_drift_series.png"))
    return _emit(ctx, "energy-drift", text, files, numbers)


# --- orbit (article 000) ---------------------------------------------------------------

def _orbit_job(method: str, lo: int, hi: int, orbits: int):
    from .orbit import sweep
    return sweep(method, np.arange(lo, hi + 1), orbits)


def run_orbit(ctx: Context) -> Result:
    """Does the moon stay bound at a large step? Sweep the step for every integrator."""
    from . import orbit as ob
    lo, hi = 4, (30 if ctx.quick else 100)
    spo = ob.LARGE_STEP_SPO
    sweeps = parallel_map(ctx, _orbit_job, [(m, lo, hi, ob.ORBITS) for m in ob.METHODS],
                          "orbit")
    by = {s.method: s for s in sweeps}
    ctx.out.mkdir(parents=True, exist_ok=True)
    _, P = ob.moon_problem()
    header = ["integrator", f"bound at {spo} steps/orbit", "E_end/E0", "r_max [m]",
              "largest escaping steps/orbit", "bound from steps/orbit"]
    table, csv_rows = [], []
    for s in sweeps:
        i = s.at(spo)
        esc = s.largest_escaping
        table.append([s.method, "bound" if s.bound[i] else "ESCAPED", _g(s.energy_ratio[i]),
                      _g(s.r_max[i]), (f">= {esc}" if esc == hi else esc) if esc else "none",
                      s.smallest_always_bound or f"none up to {hi}"])
        for k in range(s.spo.size):
            csv_rows.append([s.method, int(s.spo[k]), float(P / s.spo[k]), int(s.bound[k]),
                             float(s.energy_ratio[k]), float(s.r_max[k]),
                             float(s.escape_orbit[k])])
    se, vv = by["symplectic_euler"], by["velocity_verlet"]
    window = [int(k) for k in se.spo if not se.bound[se.at(k)] and vv.bound[vv.at(k)]]
    holds = (not se.bound[se.at(spo)]) and bool(vv.bound[vv.at(spo)])
    verdict = (f"At {spo} steps per orbit (h = {P / spo:.3f} s) over {ob.ORBITS} orbits, "
               f"symplectic Euler {'escapes' if not se.bound[se.at(spo)] else 'stays bound'} "
               f"and velocity Verlet {'stays bound' if vv.bound[vv.at(spo)] else 'escapes'}: "
               f"the article's claim {'HOLDS' if holds else 'does NOT hold'} at this step. ")
    verdict += (f"Symplectic Euler escapes while velocity Verlet stays bound only at "
                f"{ob.ranges(window)} steps per orbit." if window else
                f"No step from {lo} to {hi} steps per orbit shows symplectic Euler escaping "
                "while velocity Verlet stays bound.")
    text = (f"Article 000's moon (G = 1, planet 1000, moon 1, r = 10 m, 1.1 x circular speed, "
            f"period P = {P:.3f} s); the article's own step was lost, so 'a large step' is "
            f"{spo} steps per orbit here. Bound after {ob.ORBITS} orbits: E < 0 at the end and "
            f"r never above {ob.R_FAR:g} m. Sweep: {lo} to {hi} steps per orbit.\n"
            + format_table(header, table) + "\n" + verdict)
    files = [write_csv(ctx.out / "orbit.csv",
                       ["method", "steps_per_orbit", "h_s", "bound", "energy_end_over_e0",
                        "r_max_m", "escape_orbit"], csv_rows)]
    draw_orbits = 10
    trajs, traj_rows = {}, []
    for m in ob.METHODS:
        xy, t = ob.trajectory(m, spo, draw_orbits)
        trajs[m] = xy
        traj_rows += [[m, float(tt), float(a), float(b)] for tt, (a, b) in zip(t, xy,
                                                                                 strict=True)]
    files.append(write_csv(ctx.out / "orbit_trajectories.csv", ["method", "t_s", "x_m", "y_m"],
                           traj_rows))
    from . import plots
    files.append(plots.orbit_figure(trajs, ob.exact_orbit(), spo, draw_orbits,
                                    ctx.out / "orbit.png"))
    files.append(plots.orbit_sweep_figure(sweeps, ob.R_FAR, spo, ctx.out / "orbit_sweep.png"))
    numbers = {"spo": spo, "orbits": ob.ORBITS, "h": P / spo, "range": (lo, hi),
               "window": window, "holds": holds}
    for s in sweeps:
        i = s.at(spo)
        numbers[s.method] = {"bound": bool(s.bound[i]), "energy_ratio": float(s.energy_ratio[i]),
                             "r_max": float(s.r_max[i]), "largest_escaping": s.largest_escaping,
                             "smallest_bound": s.smallest_always_bound}
    return _emit(ctx, "orbit", text, files, numbers)


# --- random steps (article 001) --------------------------------------------------------

def _random_dt_job(problem: str, method: str, seeds: int, seed: int):
    from .random_dt import random_dt_run
    return random_dt_run(problem, method, seeds=seeds, seed=seed)


def run_random_dt(ctx: Context) -> Result:
    """Verlet, TCV, corrected TCV and Euler under random steps; end errors over --seeds N."""
    from . import random_dt as rd
    seeds = 8 if ctx.quick else 32
    jobs = [(p, m, seeds, ctx.seed) for p in rd.PROBLEMS for m in rd.METHODS]
    runs = parallel_map(ctx, _random_dt_job, jobs, "random-dt")
    ctx.out.mkdir(parents=True, exist_ok=True)
    header = ["problem", "integrator", "nominal h", "error at T (random)", "largest (random)",
              "error at T (fixed h)", "random / fixed"]
    table, csv_rows, series_rows, numbers = [], [], [], {}
    for r in runs:
        ratio = r.end_rms / r.fixed_end if r.fixed_end > 0 else float("inf")
        table.append([r.problem, r.method, f"{r.h_nominal * 1000:.1f} ms", _g(r.end_rms),
                      _g(r.max_rms), _g(r.fixed_end), _g(ratio, 2)])
        csv_rows.append([r.problem, r.method, r.seeds, float(r.h_nominal), float(r.end_rms),
                         float(r.max_rms), float(r.fixed_end), float(r.fixed_max)])
        for t, e in zip(r.t_grid, r.err_rms, strict=True):
            series_rows.append([r.problem, r.method, float(t), float(e)])
        numbers[f"{r.problem}/{r.method}"] = {"end": r.end_rms, "max": r.max_rms,
                                              "fixed_end": r.fixed_end}
    files = [write_csv(ctx.out / "random_dt.csv",
                       ["problem", "method", "runs", "h_nominal_s", "err_end_rms_m",
                        "err_max_rms_m", "err_end_fixed_m", "err_max_fixed_m"], csv_rows),
             write_csv(ctx.out / "random_dt_series.csv",
                       ["problem", "method", "t_s", "err_rms_m"], series_rows)]
    text = (f"Position error under random steps (ratio of consecutive steps in [0.5, 2]), "
            f"RMS over {seeds} runs, against one run at the fixed nominal step:\n"
            + format_table(header, table))
    from . import plots
    files.append(plots.random_dt_figure(runs, list(rd.PROBLEMS), ctx.out / "random_dt.png"))
    from .maps import random_dt_distribution
    more, dist_files, numbers["distribution"] = random_dt_distribution(ctx)
    return _emit(ctx, "random-dt", text + more, files + dist_files, numbers)


# --- initial conditions (article 001) --------------------------------------------------

def run_initial_conditions(ctx: Context) -> Result:
    """Position Verlet started with x0 - v0 h against eq. (2): error against the step."""
    from . import initial_conditions as ic
    sweeps = []
    for p in ic.PROBLEMS:
        _, counts = ic.setup(p)
        counts = counts[:4] if ctx.quick else counts
        sweeps += [ic.start_sweep(p, s, counts) for s in ic.STARTS]
    ctx.out.mkdir(parents=True, exist_ok=True)
    pj, _ = ic.setup("projectile")
    n_show = 100
    t, naive = ic.run_start(pj, "naive", n_show)
    _, eq2 = ic.run_start(pj, "eq2", n_show)
    series = {"t": t, "naive": naive, "eq2": eq2, "h": pj.T / n_show,
              "theory": ic.naive_error_theory(pj, t, pj.T / n_show)}
    header = ["problem", "start", "error at T, largest h", "error at T, smallest h",
              "measured order"]
    table, csv_rows, numbers = [], [], {}
    for s in sweeps:
        table.append([s.problem, "x0 - v0 h" if s.start == "naive" else "eq. (2)",
                      _g(s.err[0]), _g(s.err[-1]), "exact (round-off)" if s.exact
                      else f"{s.order:.2f}"])
        for n, h, e in zip(s.n, s.h, s.err, strict=True):
            csv_rows.append([s.problem, s.start, int(n), float(h), float(e)])
        numbers[f"{s.problem}/{s.start}"] = {"order": None if s.exact else s.order,
                                             "exact": s.exact, "err_largest_h": float(s.err[0])}
    gap = float(np.max(np.abs(naive - series["theory"])))
    numbers["theory_gap"] = gap
    text = ("Position Verlet at fixed steps, started with x_prev = x0 - v0 h (naive) or "
            "article 001's eq. (2) x_prev = x0 - v0 h + a0 h^2/2:\n" + format_table(header, table)
            + f"\nProjectile at h = {pj.T / n_show * 1000:.0f} ms: the naive start's error "
            f"follows |a| h t/2 to {gap:.1e} m (it is {naive[-1]:.4f} m at T = {pj.T:g} s); "
            f"eq. (2) stays at {np.max(eq2):.1e} m.")
    files = [write_csv(ctx.out / "initial_conditions.csv",
                       ["problem", "start", "n_steps", "h_s", "err_at_T_m"], csv_rows),
             write_csv(ctx.out / "initial_conditions_series.csv",
                       ["t_s", "err_naive_m", "err_eq2_m", "theory_a_h_t_over_2_m"],
                       [[float(a), float(b), float(c), float(d)] for a, b, c, d in
                        zip(t, naive, eq2, series["theory"], strict=True)])]
    from . import plots
    files.append(plots.initial_conditions_figure(sweeps, series,
                                                 ctx.out / "initial_conditions.png"))
    return _emit(ctx, "initial-conditions", text, files, numbers)


# --- phase space (article 002) ---------------------------------------------------------

def _phase_job(kind: str, method: str, hs: tuple, k: int):
    from . import phase_space as ps
    ns = [int(round(ps.T_END / h)) for h in hs]
    n_show = int(round(ps.T_END / ps.H_SHOW))
    if kind == "reference":
        ref = ps.reference(tuple(ns) + (n_show,), k=k)
        return ps.on_grid(ref, n_show)
    cloud = ps.evolve(method, ps.H_SHOW, k=k)
    ends = [float(ps.evolve(method, ps.T_END / n, k=k).area[-1]) for n in ns]
    return cloud, np.array(ends), ps.T_END / np.array(ns)


def run_phase_space(ctx: Context) -> Result:
    """The cat in phase space: shapes at several times, area against time and step."""
    from . import phase_space as ps
    from .convergence import fit_order
    k = 400                  # fewer points: the outline's polygon error hides symplectic Euler's
    hs = (0.1, 0.05, 0.025) if ctx.quick else (0.1, 0.05, 0.025, 0.0125)
    jobs = [("reference", "rk4", hs, k)] + [("method", m, hs, k) for m in ps.METHODS]
    out = parallel_map(ctx, _phase_job, jobs, "phase-space")
    ref, results = out[0], out[1:]
    a0 = float(ref.area[0])
    a_ref_T = float(ref.area[-1])       # the same end time T for every step h
    clouds, sweeps, numbers = {}, [], {}
    header = ["integrator", "A(T)/A0", "(A - A_exact)/A0 at T", "max |A - A_exact|/A0",
              "monotone growth", "area-error order in h", "verdict"]
    table, csv_rows, area_rows = [], [], []
    for m, (cloud, ends, h) in zip(ps.METHODS, results, strict=True):
        clouds[m] = cloud
        err = (ends - a_ref_T) / a0
        sw = ps.AreaSweep(m, h, (ends - a0) / a0, err, fit_order(h, np.abs(err)))
        sweeps.append(sw)
        a = cloud.area
        dev = (a - ref.area) / a0
        grows = bool(np.all(np.diff(a) > 0))
        growth = a[-1] / a[0]
        verdict = ps.verdict(m, dev)
        table.append([m, f"{growth:.6g}", _g(dev[-1]), _g(np.max(np.abs(dev))),
                      "yes" if grows else "no", f"{sw.order:.2f}", verdict])
        for hh, c, e in zip(sw.h, sw.rel_change, sw.rel_error, strict=True):
            csv_rows.append([m, float(hh), float(c), float(e)])
        for tt, aa, rr in zip(cloud.t, a, ref.area, strict=True):
            area_rows.append([m, float(tt), float(aa), float(rr)])
        numbers[m] = {"growth": float(growth), "monotone": grows, "dev_end": float(dev[-1]),
                      "dev_max": float(np.max(np.abs(dev))), "order": sw.order,
                      "err_by_h": [float(x) for x in err], "h": [float(x) for x in h],
                      "verdict": verdict}
    numbers["h_show"] = ps.H_SHOW
    numbers["ref_change"] = (a_ref_T - a0) / a0
    ctx.out.mkdir(parents=True, exist_ok=True)
    text = (f"A cat of {ref.q.shape[1]} pendulum states (q'' = -sin q), carried to T = "
            f"{ps.T_END:g} s at h = {ps.H_SHOW} s; A_exact = the same outline under the "
            f"reference flow (its own polygon area changes by {(a_ref_T - a0) / a0:.1e}: "
            f"straight edges become curves). Order fitted on h = {', '.join(map(str, hs))} s.\n"
            + format_table(header, table)
            + f"\nPosition Verlet and the TCVs report p from a three-point estimate; the (q, p) "
              f"map is then not their symplectic map: their area is off by up to "
              f"{numbers['verlet']['dev_max']:.1e} (order {numbers['verlet']['order']:.2f} in h) "
              f"and its verdict is '{numbers['verlet']['verdict']}'.")
    idx = ps.snapshot_indices(ref.t.size - 1)
    shape_rows = []
    for m, c in clouds.items():
        for i in idx:
            shape_rows += [[m, float(c.t[i]), j, float(q), float(p)]
                           for j, (q, p) in enumerate(zip(c.q[i], c.p[i], strict=True))]
    files = [write_csv(ctx.out / "phase_space.csv",
                       ["method", "h_s", "area_change_at_T", "area_error_at_T"], csv_rows),
             write_csv(ctx.out / "phase_space_area.csv",
                       ["method", "t_s", "area", "area_exact_flow"], area_rows),
             write_csv(ctx.out / "phase_space_shapes.csv",
                       ["method", "t_s", "point", "q_rad", "p_rad_per_s"], shape_rows)]
    from . import plots
    files.append(plots.phase_space_figure(clouds, ref, idx, ctx.out / "phase_space.png"))
    files.append(plots.phase_area_figure(clouds, ref, sweeps, ctx.out / "phase_space_area.png"))
    return _emit(ctx, "phase-space", text, files, numbers)


# --- velocity estimates (article 004) --------------------------------------------------

def _velocity_job(kind: str, problem: str, method: str, quick: bool):
    from . import velocity_estimates as ve
    if kind == "estimates":
        _, counts = ve.setup(problem)
        return ve.estimate_sweep(problem, counts[:4] if quick else counts)
    if kind == "local":
        return ve.local_sweep(problem)
    from .problems import all_problems
    p = all_problems()[problem]
    counts = p.step_counts(max(INTEGRATORS[method].order, 1))
    return conv.convergence_row(p, method, "fixed", counts=counts[:3] if quick else counts)


def run_velocity_estimates(ctx: Context) -> Result:
    """Velocity estimates from Verlet positions; local against global orders."""
    from . import velocity_estimates as ve
    jobs = ([("estimates", p, "", ctx.quick) for p in ve.PROBLEMS]
            + [("local", p, "", ctx.quick) for p in ve.PROBLEMS]
            + [("global", p, m, ctx.quick) for p in ve.PROBLEMS for m in INTEGRATORS])
    out = parallel_map(ctx, _velocity_job, jobs, "velocity-estimates")
    np_ = len(ve.PROBLEMS)
    est, local, glob = out[:np_], out[np_:2 * np_], out[2 * np_:]
    gl = {(r.problem, r.method): r.order_x for r in glob}
    numbers = {}
    t1 = []
    for s in est:
        for k in ve.ESTIMATES:
            t1.append([s.problem, k, ve.EXPECTED[k], f"{s.order[k]:.2f}", _g(s.err[k][-1])])
            numbers[f"estimate/{s.problem}/{k}"] = s.order[k]
        numbers[f"x_gap/{s.problem}"] = s.x_gap
        numbers[f"vv_gap/{s.problem}"] = s.vv_gap
    t2 = []
    for m, integ in INTEGRATORS.items():
        row = [m, ve.LOCAL_THEORY[m]]
        row += [f"{lo.order[m]:.2f}" for lo in local]
        row += [integ.order] + [f"{gl[(p, m)]:.2f}" for p in ve.PROBLEMS]
        t2.append(row)
        for lo in local:
            numbers[f"local/{lo.problem}/{m}"] = lo.order[m]
        for p in ve.PROBLEMS:
            numbers[f"global/{p}/{m}"] = gl[(p, m)]
    text = ("Velocity estimates from position Verlet at fixed steps (largest error over the "
            "run, order fitted against h):\n"
            + format_table(["problem", "estimate", "expected order", "measured order",
                            "error at smallest h [m/s]"], t1)
            + "\n\nPosition Verlet and velocity Verlet started consistently give the same "
              "positions: largest difference "
            + ", ".join(f"{_g(s.x_gap, 2)} m ({s.problem})" for s in est)
            + "; the central difference equals velocity Verlet's v to "
            + ", ".join(f"{_g(s.vv_gap, 2)} m/s" for s in est)
            + ".\n\nLocal error (one step from exact data) against global error (at T), "
              "position:\n"
            + format_table(["integrator", "local theory"]
                           + [f"local {lo.problem}" for lo in local]
                           + ["global theory"] + [f"global {p}" for p in ve.PROBLEMS], t2))
    ctx.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for s in est:
        for j in range(s.n.size):
            rows.append([s.problem, int(s.n[j]), float(s.h[j])]
                        + [float(s.err[k][j]) for k in ve.ESTIMATES])
    lrows = []
    for lo in local:
        for j in range(lo.h.size):
            lrows += [[lo.problem, m, float(lo.h[j]), float(lo.err[m][j])] for m in INTEGRATORS]
    files = [write_csv(ctx.out / "velocity_estimates.csv",
                       ["problem", "n_steps", "h_s"] + [f"err_{k}_m_per_s" for k in ve.ESTIMATES],
                       rows),
             write_csv(ctx.out / "velocity_estimates_local.csv",
                       ["problem", "method", "h_s", "local_err_m"], lrows),
             write_csv(ctx.out / "velocity_estimates_orders.csv",
                       ["integrator", "local_theory"] + [f"local_{lo.problem}" for lo in local]
                       + ["global_theory"] + [f"global_{p}" for p in ve.PROBLEMS],
                       [[m, ve.LOCAL_THEORY[m]] + [float(lo.order[m]) for lo in local]
                        + [integ.order] + [float(gl[(p, m)]) for p in ve.PROBLEMS]
                        for m, integ in INTEGRATORS.items()])]
    from . import plots
    files.append(plots.velocity_figure(est, local[0], ctx.out / "velocity_estimates.png"))
    return _emit(ctx, "velocity-estimates", text, files, numbers)


# --- constrained motion: XPBD against Lagrange multipliers and RATTLE -------------------

def _cenergy_job(scene: str, method: str, integrator: str, substeps: int, seconds: float):
    from .constraints_energy import energy_run
    return energy_run(scene, method, integrator, substeps, seconds)


def run_constraints_energy(ctx: Context) -> Result:
    """Energy of a rod and a double pendulum: XPBD, Lagrange multipliers, RATTLE/SHAKE."""
    from . import constraints_energy as ce
    # --quick: half the time at 2/5 of the budget (a fifth of the cost); 10 s is what the
    # first-order SHAKE's O(h) energy offset needs to read as a level, not a trend.
    seconds, budget = (10.0, ce.QUICK_BUDGET) if ctx.quick else (20.0, ce.BUDGET)
    jobs = [(scene, m, integ, sub, seconds) for scene in ce.SCENES
            for m, integ, sub in ce.runs(budget)]
    runs = parallel_map(ctx, _cenergy_job, jobs, "constraints-energy")
    ctx.out.mkdir(parents=True, exist_ok=True)
    holds, line, numbers = ce.verdict(runs, budget)
    header = ["scene", "method", "integrator", "runs as", "substeps", "fevals/s",
              "E end - E0 [J]", "max |dE| [J]", "drift share", "max stretch",
              "ms per sim s"]
    table, summary, series = [], [], []
    for r in runs:
        end = f"diverged at {r.diverged_at:.2f} s" if r.diverged_at else _g(r.end)
        table.append([r.scene, r.method, r.integrator, r.scheme, r.substeps,
                      f"{r.fevals_per_s:.0f}", end, _g(r.max_abs), f"{r.share:.2f}",
                      _g(r.max_stretch, 2), f"{r.ms_per_s:.0f}"])
        summary.append([r.scene, r.method, r.integrator, r.scheme, int(r.symplectic),
                        r.substeps, float(ce.H / r.substeps), float(r.fevals_per_s),
                        float(r.e0), float(r.end), float(r.max_abs), float(r.share),
                        float(r.max_stretch), float(r.ms_per_s),
                        "" if r.diverged_at is None else float(r.diverged_at)])
        series += [[r.scene, r.method, r.integrator, r.substeps, float(t), float(d)]
                   for t, d in zip(r.t, r.de, strict=True)]
    text = (f"Total energy of a rod pendulum (1 m, 1 rad) and a double pendulum (1 m + 1 m, "
            f"2 rad each) over {seconds:g} s at 60 frames/s, {budget} force evaluations "
            f"a frame for every run but the XPBD sweep (RK4: {budget // 4} substeps of 4):\n"
            + format_table(header, table) + "\ndrift share = |slope of a straight-line fit x "
            f"T| / max |dE| (below {ce.SHARE_MAX}: no trend).\n" + line)
    files = [write_csv(ctx.out / "constraints_energy.csv",
                       ["scene", "method", "integrator", "substeps", "t_s", "dE_J"], series),
             write_csv(ctx.out / "constraints_energy_summary.csv",
                       ["scene", "method", "integrator", "runs_as", "symplectic", "substeps",
                        "h_s", "fevals_per_s", "E0_J", "dE_end_J", "max_abs_dE_J",
                        "drift_share", "max_stretch", "ms_per_sim_s",
                        "diverged_at_s"], summary),
             ce.figure(runs, ctx.out / "constraints_energy.png", budget)]
    numbers["verdict"] = line
    return _emit(ctx, "constraints-energy", text, files, numbers)


# --- maps (sandbox/lab/maps.py) -----------------------------------------------------------

def run_stability_map(ctx: Context) -> Result:
    """Stable region over (w h, c h) per integrator, 400 x 400 runs each, against theory."""
    from .maps import stability_map
    return stability_map(ctx)


def run_escape_map(ctx: Context) -> Result:
    """The moon's fate over (steps per orbit, launch speed) for every integrator."""
    from .maps import escape_map
    return escape_map(ctx)


# --- stability -------------------------------------------------------------------------

def _stability_notes(by: dict) -> str:
    """What the measured limits say, sentence by sentence, from the numbers in ``by``."""
    rk_o, rk_d = by[("oscillator", "rk4")], by[("damping", "rk4")]
    out = [f"RK4: measured {rk_o.limit:.4f} on the oscillator (imaginary axis, theory 2 sqrt 2 "
           f"= {rk_o.theory:.4f}) and {rk_d.limit:.4f} under damping (real axis, theory "
           f"{rk_d.theory:.4f}): 2.785 is the real-axis limit."]
    methods = sorted({m for _, m in by}, key=list(INTEGRATORS).index)
    halved = [m for m in methods
              if by[("damping", m)].limit < 0.6 * by[("damping", "symplectic_euler")].limit]
    if halved:
        out.append("Under damping " + ", ".join(halved) + " are stable only to c h = "
                   + "/".join(f"{by[('damping', m)].limit:.3f}" for m in halved)
                   + f", against {by[('damping', 'symplectic_euler')].limit:.3f} for "
                   "symplectic Euler: they evaluate a velocity-dependent force with a predicted "
                   "or estimated velocity.")
    worst = max((abs(lim.limit - lim.theory) / lim.theory, k) for k, lim in by.items()
                if lim.theory > 0)
    out.append(f"Largest relative gap between measurement and theory: {worst[0]:.2%} "
               f"({worst[1][1]}, {worst[1][0]}).")
    return "\n".join(out)


def _stability_job(method: str, problem: str, n: int):
    from .stability import stable_limit
    return stable_limit(method, problem, n=n)


def run_stability(ctx: Context) -> Result:
    """The largest stable w h (oscillator) and c h (damping) per integrator."""
    from . import stability as st
    n = 3000 if ctx.quick else 20000
    jobs = [(m, p, n) for p in st.PROBLEMS for m in st.METHODS]
    limits = parallel_map(ctx, _stability_job, jobs, "stability")
    by = {(lim.problem, lim.method): lim for lim in limits}
    header = ["integrator", "w h measured", "w h theory", "c h measured", "c h theory"]
    table, numbers = [], {}
    for m in st.METHODS:
        o, d = by[("oscillator", m)], by[("damping", m)]
        table.append([m, f"{o.limit:.4f}", f"{o.theory:.4f}" + (" (grows at any h)"
                                                               if m == "euler" else ""),
                      f"{d.limit:.4f}", f"{d.theory:.4f}"])
        for lim in (o, d):
            numbers[f"{lim.problem}/{m}"] = {"limit": lim.limit, "theory": lim.theory}
    numbers["n"] = n
    numbers["euler_finite_n"] = st.euler_finite_n(n)
    text = (f"Largest stable step: amplitude below {st.THRESHOLD:g}x its start over {n} steps "
            f"(vectorised bisection, bracket width {st.Z_MAX / st.GRID ** st.LEVELS:.1e}).\n"
            + format_table(header, table)
            + f"\nExplicit Euler on the oscillator grows at every step by sqrt(1 + (w h)^2); "
              f"after {n} steps the {st.THRESHOLD:g}x bound is crossed at w h = "
              f"{st.euler_finite_n(n):.4f} (measured {by[('oscillator', 'euler')].limit:.4f}), "
              f"which goes to 0 as the run gets longer.\n"
              + _stability_notes(by))
    ctx.out.mkdir(parents=True, exist_ok=True)
    files = [write_csv(ctx.out / "stability.csv",
                       ["problem", "method", "n_steps", "limit", "bracket_lo", "bracket_hi",
                        "theory"],
                       [[lim.problem, lim.method, lim.n, float(lim.limit),
                         float(lim.bracket[0]), float(lim.bracket[1]), float(lim.theory)]
                        for lim in limits])]
    from . import plots
    files.append(plots.stability_figure(limits, ctx.out / "stability.png"))
    return _emit(ctx, "stability", text, files, numbers)


@dataclass(frozen=True)
class Experiment:
    """One experiment, every face of it: ``run(ctx) -> Result`` (its first docstring line
    is its line in ``experiment --help``), the report's section ``title`` and ``blurb``
    (one paragraph under it). Its quick sizes live in ``run`` (``ctx.quick``), its
    verdicts in the report's claims, which read its ``Result.numbers``."""

    name: str
    run: Callable[[Context], Result]
    title: str
    blurb: str


#: Every experiment, in the order ``experiment all`` runs them.
EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment("convergence", run_convergence,
               "Convergence: measured global orders",
               "Global error at the end time against the step, every integrator on five problems "
               "with exact solutions, fixed and random steps."),
    Experiment("constraints", run_constraints,
               "Constraints: iterations against substeps",
               "Settled stretch of a rope and a cloth against solver passes."),
    Experiment("energy-drift", run_energy_drift,
               "Energy drift (article 002)",
               "Relative energy error over long runs, fixed and random steps."),
    Experiment("orbit", run_orbit,
               "The moon of a heavy planet (article 000)",
               "Does the moon stay bound at a large step? Trajectories and a step sweep."),
    Experiment("random-dt", run_random_dt,
               "Random steps (article 001)",
               "Position error against time under randomised steps, with the corrected TCV."),
    Experiment("initial-conditions", run_initial_conditions,
               "Starting position Verlet (article 001)",
               "x_prev = x0 - v0·h against eq. (2)."),
    Experiment("phase-space", run_phase_space,
               "A cat in phase space (article 002)",
               "Area of a cloud of pendulum states under each integrator."),
    Experiment("velocity-estimates", run_velocity_estimates,
               "Velocity estimates and local against global order (article 004)",
               "Backward, forward, central and three-point velocities from Verlet positions; the "
               "local error of one step against the global error."),
    Experiment("stability", run_stability,
               "Stability limits",
               "The largest stable step on the oscillator (imaginary axis) and on pure damping "
               "(real axis)."),
    Experiment("stability-map", run_stability_map,
               "Stability maps",
               "The stable region of every integrator over (w h, c h) for a damped oscillator, "
               "400 x 400 runs each, against the closed forms on the axes and the spectral "
               "radius of each method's one-step map."),
    Experiment("escape-map", run_escape_map,
               "Where the moon escapes (article 000)",
               "Bound or escaped over (steps per orbit, launch speed) for every integrator."),
    Experiment("constraints-energy", run_constraints_energy,
               "Constrained motion: XPBD, Lagrange multipliers, RATTLE / SHAKE",
               "Energy of a rod pendulum and a double pendulum against time at equal cost: XPBD "
               "at several substep counts, Lagrange multipliers with each integrator, RATTLE and "
               "SHAKE. The verdict line says whether the integrator matters under each."),
)}


def _check_name(name: str) -> None:
    if name != "all" and name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; valid: {', '.join(EXPERIMENTS)}, all")


def run(name: str, ctx: Context) -> list[Result]:
    """Run one experiment by name, or every one for ``all`` (which also writes the report).

    Their sweeps share one runner (one local cluster, or one connection), closed at the end.
    """
    _check_name(name)
    try:
        if name == "all":
            results = [e.run(ctx) for e in EXPERIMENTS.values()]
            from .report import write_report
            files = write_report(results, ctx, {n: (e.title, e.blurb)
                                                for n, e in EXPERIMENTS.items()})
            ctx.echo(f"report: {files[0]}")
            return results + [Result("report", files)]
        return [EXPERIMENTS[name].run(ctx)]
    finally:
        ctx.close()


def command(args, out: Path) -> int:
    """``main.py experiment``: run, print what was written; exit 1 on a failed sweep, an
    unusable or lost cluster, an output that cannot be written or that was removed while
    the run went on, 2 on an unknown name or a missing optional package (matplotlib
    always; Dask for ``--scheduler`` or ``--jobs N`` > 1), 130 when interrupted (results
    kept). Without Dask the default (all cores) runs the sweeps serially, and says so."""
    from ..extras import MissingExtra, available, require
    from .sweep import SweepError
    scheduler, jobs = getattr(args, "scheduler", None), args.jobs
    try:
        _check_name(args.name)
        require("lab")                  # every experiment draws figures: say so before any sweep
        if scheduler is not None or jobs > 1:
            require("cluster", "--scheduler" if scheduler is not None else f"--jobs {jobs}")
    except (ValueError, MissingExtra) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if jobs != 1 and scheduler is None and not available("distributed"):
        print("note: Dask is not installed, so the sweeps run one at a time in this process "
              "(the same results); pip install 'verlet-sandbox[cluster]' spreads them over "
              "every core", file=sys.stderr)
        jobs = 1
    ctx = Context(out=out, seed=args.seed, jobs=jobs, quick=args.quick,
                  scheduler=scheduler, seeds=getattr(args, "seeds", None))
    try:
        results = run(args.name, ctx)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (SweepError, ConnectionError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except OSError as e:          # a full disk, a read-only or vanished output folder
        where = e.filename or out
        kept = any((out / ".sweeps").glob("*/part-*.pkl"))
        print(f"error: cannot write {where}: {e.strerror or e}"
              + ("; finished sweep parts are kept in " f"{out / '.sweeps'} for the next run "
                 "to resume" if kept else ""), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    from .output import missing
    files = [f for r in results for f in r.files]
    gone = missing(files)
    for f in files:
        if f not in gone:
            print(f"wrote {f}")
    if gone:                      # written, then removed with their folder mid-run
        names = ", ".join(str(f) for f in gone[:5]) + (" ..." if len(gone) > 5 else "")
        print(f"error: {len(gone)} of the {len(files)} files this run wrote are gone (their "
              f"folder was removed while it ran): {names}; run the same command again to "
              "make them", file=sys.stderr)
        return 1
    return 0
