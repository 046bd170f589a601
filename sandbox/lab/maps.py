"""The maps that need a cluster: stability over (w h, c h), the moon's fate over (steps per
orbit, launch speed), and random-dt's distribution over many frame-time sequences.

Each runs its cases through the lab's sweep runner (:func:`context.sweep`) and writes
its tables, CSVs and figures like the other experiments; ``experiments`` registers them.
"""

from __future__ import annotations

import io

import numpy as np

from .context import Context, Result, _emit, _g, format_table, sweep, write_csv
from .output import write_bytes

QUICK_RES = 82             # stability-map --quick: 82 x 82 (no closed-form edge within
QUICK_STEPS = 2000         # 0.31 of a grid step of a grid point, as at 400)
DEFAULT_SEEDS = 1000       # random-dt's distribution without --seeds
QUICK_SEEDS = 300


def _save_npy(path, array: np.ndarray):
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    write_bytes(path, buf.getvalue())
    return path


# --- stability map -------------------------------------------------------------------------

def stability_map(ctx: Context) -> Result:
    from . import plots
    from . import stability_map as sm
    res, n = (QUICK_RES, QUICK_STEPS) if ctx.quick else (sm.RES, sm.N_STEPS)
    cases = sm.cases(res=res, n=n)
    blocks = sweep(ctx, sm.map_rows, cases, "stability-map")
    maps = sm.assemble(blocks, res, n)
    ctx.out.mkdir(parents=True, exist_ok=True)
    dz = float(maps[sm.METHODS[0]].z[1])
    header = ["integrator", "w h edge undamped (stable-unstable)", "theory",
              "c h edge at w h = 0 (stable-unstable)", "theory", "stable share",
              "runs vs rho: points differing", "max |rho - 1| there"]
    table, axes_rows, edge_rows, numbers = [], [], [], {"res": res, "n": n, "dz": dz}
    all_within = True
    for m, mp in maps.items():
        cells, entry = [], {}
        for axis in ("undamped", "damping"):
            lo, hi = mp.axis_edge(axis)
            th = sm.axis_theory(m, axis, n)
            edge = 0.5 * (lo + hi)
            within = bool(abs(edge - th) <= dz)
            all_within &= within
            cells += [f"{edge:.4f} ({lo:.4f}-{hi:.4f})" + ("" if within else " (!)"),
                      f"{th:.4f}" + (f" ({n} steps)" if m == "euler" and axis == "undamped"
                                     else "")]
            axes_rows.append([m, axis, float(lo), float(hi), float(edge), float(th),
                              float((edge - th) / dz), int(within)])
            entry[axis] = {"last_stable": lo, "first_unstable": hi, "edge": edge,
                           "theory": th, "within": within}
        d = mp.disagreement()
        entry.update(share=float(mp.stable.mean()), **d)
        numbers[m] = entry
        table.append([m, *cells, f"{mp.stable.mean():.3f}",
                      f"{d['points']} ({d['points'] / mp.stable.size:.2%})",
                      _g(d["max_rho_gap"], 2)])
        for i, w in enumerate(mp.z):
            js = np.flatnonzero(mp.stable[i])
            edge_rows.append([m, float(w), int(js.size),
                              float(mp.z[js[0]]) if js.size else "",
                              float(mp.z[js[-1]]) if js.size else ""])
    numbers["all_within_one_step"] = all_within
    text = (f"Stable region of x'' = -w^2 x - c v over (w h, c h) in [0, {sm.Z_MAX:g}]^2, "
            f"{res} x {res} points a method ({dz:.4f} apart), {n} steps from x = v = 1; "
            f"unstable: sqrt(w^2 x^2 + v^2) above {sm.THRESHOLD:g}x its start. Axis edge: the "
            "midpoint of the last stable and the first unstable grid value, against the closed "
            "form (theory); "
            "'runs vs rho': points where the runs and the spectral radius of the one-step map "
            "(rho <= 1: stable) disagree.\n" + format_table(header, table)
            + "\n" + (f"Every axis edge lies within one grid step ({dz:.4f}) of its closed "
                      "form." if all_within else
                      "Some axis edges miss their closed form by more than a grid step: (!).")
            + " Points where the runs and rho differ all lie where |rho - 1| is at most the "
            "largest value listed: growth too slow to reach the bound from this start.")
    files = [write_csv(ctx.out / "stability_map_axes.csv",
                       ["method", "axis", "last_stable", "first_unstable", "edge", "theory",
                        "edge_minus_theory_in_steps", "within_one_step"], axes_rows),
             write_csv(ctx.out / "stability_map.csv",
                       ["method", "w_h", "stable_points", "c_h_first_stable",
                        "c_h_last_stable"], edge_rows),
             _save_npy(ctx.out / "stability_map.npy",
                       np.stack([mp.steps.astype(np.int16) for mp in maps.values()]))]
    for m, mp in maps.items():
        files.append(plots.stability_map_figure(mp, ctx.out / f"stability_map_{m}.png"))
    files.append(plots.stability_maps_figure(maps, ctx.out / "stability_map.png"))
    return _emit(ctx, "stability-map", text, files, numbers)


# --- escape map ----------------------------------------------------------------------------

def escape_map(ctx: Context) -> Result:
    from . import escape_map as em
    from . import plots
    from .orbit import LARGE_STEP_SPO, escape_distance
    if ctx.quick:
        speeds, spo, orbits = em.QUICK_SPEEDS, em.QUICK_SPO, em.QUICK_ORBITS
    else:
        speeds, spo, orbits = em.SPEEDS, em.SPO, em.ORBITS
    cases = em.cases(speeds, spo, orbits)
    rows = sweep(ctx, em.escape_row, cases, "escape-map")
    maps = em.assemble(rows, cases)
    ctx.out.mkdir(parents=True, exist_ok=True)
    shown = [s for s in (0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3) if s in speeds]
    header = ["integrator", "escaped share"] + [f"bound from (speed {s:g})" for s in shown]
    table, csv_rows, numbers = [], [], {"speeds": list(speeds), "spo": list(spo),
                                        "orbits": orbits}
    for (m, mp), c_rows in zip(maps.items(), _by_method(rows, cases), strict=True):
        bf = mp.bound_from()
        at = dict(zip(mp.speeds.tolist(), bf, strict=True))
        table.append([m, f"{mp.escaped_share:.2f}"]
                     + [at[s] if at[s] is not None else f"> {spo[1]}" for s in shown])
        numbers[m] = {"escaped_share": mp.escaped_share,
                      "bound_from": {f"{s:g}": at[s] for s in mp.speeds.tolist()}}
        for speed, sw in c_rows:
            for k in range(sw.spo.size):
                csv_rows.append([m, float(speed), int(sw.spo[k]), int(sw.bound[k]),
                                 float(sw.energy_ratio[k]), float(sw.r_max[k]),
                                 float(sw.escape_orbit[k])])
    text = (f"Article 000's moon launched at {speeds[0]:g} to {speeds[-1]:g} times the circular "
            f"speed at r = 10 m, {spo[0]} to {spo[1]} steps per (exact) orbit, {orbits} orbits "
            f"each. Escaped: E >= 0 at the end or r above {escape_distance(1.1):g} m (scaled "
            "with the exact apoapsis above 1.1 circular speeds). 'bound from N': from N steps "
            "per orbit up, every step keeps the moon bound.\n" + format_table(header, table))
    files = [write_csv(ctx.out / "escape_map.csv",
                       ["method", "speed_over_circular", "steps_per_orbit", "bound",
                        "energy_end_over_e0", "r_max_m", "escape_orbit"], csv_rows),
             plots.escape_map_figure(maps, LARGE_STEP_SPO, ctx.out / "escape_map.png"),
             plots.escape_edges_figure(maps, LARGE_STEP_SPO, ctx.out / "escape_map_edges.png")]
    return _emit(ctx, "escape-map", text, files, numbers)


def _by_method(rows, cases):
    out: dict[str, list] = {}
    for r, c in zip(rows, cases, strict=True):
        out.setdefault(c["method"], []).append((c["speed"], r))
    return [sorted(v, key=lambda x: x[0]) for v in out.values()]


# --- random-dt: the distribution over many sequences -----------------------------------------

def random_dt_distribution(ctx: Context) -> tuple[str, list, dict]:
    """End errors over ``ctx.seeds`` sequences: (text, files, numbers) for random-dt."""
    from . import plots
    from . import random_dt as rd
    seeds = ctx.seeds or (QUICK_SEEDS if ctx.quick else DEFAULT_SEEDS)
    blocks = sweep(ctx, rd.end_errors, rd.block_cases(seeds, ctx.seed), "random-dt seeds")
    err = np.concatenate(blocks, axis=-1)               # (problems, methods, seeds)
    fixed = rd.fixed_end_errors()
    header = ["problem", "integrator", "median", "5 %", "95 %", "largest",
              "fixed h", "share worse than fixed h"]
    table, summary, numbers = [], [], {"seeds": seeds}
    for a, prob in enumerate(rd.PROBLEMS):
        for b, m in enumerate(rd.METHODS):
            e = err[a, b]
            q05, q50, q95 = np.quantile(e, [0.05, 0.5, 0.95])
            worse = float(np.mean(e > fixed[a, b]))
            table.append([prob, m, _g(q50), _g(q05), _g(q95), _g(e.max()), _g(fixed[a, b]),
                          f"{worse:.2f}"])
            summary.append([prob, m, seeds, float(q05), float(q50), float(q95),
                            float(e.max()), float(fixed[a, b]), worse])
            numbers[f"{prob}/{m}"] = {"median": float(q50), "q05": float(q05),
                                      "q95": float(q95), "max": float(e.max()),
                                      "fixed": float(fixed[a, b]), "worse": worse}
    text = (f"\n\nEnd error over {seeds} random frame-time sequences (each method and problem "
            "on the same sequences; sequence k seeded by (seed, k, steps)):\n"
            + format_table(header, table))
    cols = [f"{p}/{m}" for p in rd.PROBLEMS for m in rd.METHODS]
    flat = err.reshape(-1, seeds).T
    files = [write_csv(ctx.out / "random_dt_seeds.csv", ["sequence", *cols],
                       [[k, *map(float, row)] for k, row in enumerate(flat)]),
             write_csv(ctx.out / "random_dt_distribution.csv",
                       ["problem", "method", "sequences", "q05_m", "median_m", "q95_m",
                        "max_m", "fixed_h_m", "share_worse_than_fixed"], summary),
             plots.random_dt_hist_figure(err, fixed, rd.PROBLEMS, rd.METHODS,
                                         ctx.out / "random_dt_hist.png")]
    return text, files, numbers
