"""Figures for the experiments, drawn with matplotlib's Agg backend to PNG files.

Only this module imports matplotlib (about half a second), and only when a figure is
drawn, so ``python main.py play`` never pays for it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..sim.integrators import INTEGRATORS
from .output import write_bytes


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def style(method: str) -> dict:
    """Colour, marker and label of ``method``, the same in every figure (the
    integrator's ``style``; a name that is no integrator, e.g. a reference: black)."""
    integ = INTEGRATORS.get(method)
    color, marker = integ.style[:2] if integ else ("black", ".")
    return {"color": color, "marker": marker, "label": integ.label if integ else method}


def save(fig, path: Path) -> Path:
    """Save ``fig`` as PNG atomically and close it."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    write_bytes(path, buf.getvalue())
    return path


def convergence_figure(rows, problems: list[str], path: Path) -> Path:
    """Log-log error at the end time against h: one column per problem, fixed and random."""
    plt = _plt()
    modes = ("fixed", "random")
    fig, axes = plt.subplots(len(modes), len(problems), figsize=(4.0 * len(problems), 7.5),
                             squeeze=False)
    for i, mode in enumerate(modes):
        for j, p in enumerate(problems):
            ax = axes[i][j]
            for r in rows:
                if r.problem != p or r.mode != mode:
                    continue
                st = style(r.method)
                err = np.maximum(r.err_x, 1e-16)
                ax.loglog(r.h, err, ms=4, lw=1.2, **st)
            ax.set_title(f"{p} — {mode} h", fontsize=9)
            ax.set_xlabel("step h [s] (nominal T/N)")
            if j == 0:
                ax.set_ylabel("position error at T [m]")
            ax.grid(True, which="both", alpha=0.3)
            # Reference slopes 1, 2 and 4 anchored at the largest h of the panel.
            hs = [r.h for r in rows if r.problem == p and r.mode == mode]
            if hs:
                h = np.array([min(x.min() for x in hs), max(x.max() for x in hs)])
                for k, ls in ((1, ":"), (2, "--"), (4, "-.")):
                    ax.loglog(h, 1e-3 * (h / h[-1]) ** k, color="black", lw=0.7, ls=ls,
                              alpha=0.5, label=f"slope {k}" if (i, j) == (0, 0) else None)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=9, frameon=False)
    fig.suptitle("Global error against step size (fixed steps; random steps with "
                 "consecutive ratio in [0.5, 2])")
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    return save(fig, path)


# --- helpers for the experiments' figures --------------------------------------------

def line(method: str) -> dict:
    """Colour and label of ``method`` for a dense line (no markers)."""
    st = style(method)
    return {"color": st["color"], "label": st["label"]}


def _slopes(ax, h, anchor: float, orders, where: str = "right") -> None:
    """Dotted reference lines ``anchor * (h/h_ref)^k`` for the orders ``k``."""
    h = np.array([np.min(h), np.max(h)])
    for k, ls in zip(orders, (":", "--", "-.", (0, (1, 3)), (0, (5, 5))), strict=False):
        ax.loglog(h, anchor * (h / h[-1]) ** k, color="black", lw=0.7, ls=ls, alpha=0.5,
                  label=f"slope {k}")


Y_TOP = 1e3     # the energy-drift figure's top: explicit Euler's 1e85 would flatten the rest


def _sci(x: float) -> str:
    return "inf" if not np.isfinite(x) else f"{x:.1e}"


def _plain_log_ticks(ax, values) -> None:
    """Label a log x axis at the steps actually run (``0.025``), not at crowded minor ticks."""
    from matplotlib.ticker import NullFormatter
    values = np.unique(np.asarray(values, float))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(values, [f"{v:.3g}" for v in values], fontsize=8)


def energy_drift_figure(runs, problems, path: Path) -> Path:
    """Envelope of |E - E0|/|E0| against time: rows problems, columns fixed/random steps."""
    plt = _plt()
    modes = ("fixed", "random")
    fig, axes = plt.subplots(len(problems), 2, figsize=(12, 4.2 * len(problems)),
                             squeeze=False, sharey="row")
    for i, prob in enumerate(problems):
        for j, mode in enumerate(modes):
            ax = axes[i][j]
            off = []
            for r in runs:
                if r.problem != prob or r.mode != mode:
                    continue
                env = np.where(np.isfinite(r.envelope), r.envelope, np.nan)
                ls = _dashed(r.method)
                ax.semilogy(r.t_window, np.maximum(env, 1e-17), lw=1.3, ls=ls, **line(r.method))
                if not np.nanmax(env) <= Y_TOP:
                    off.append(f"{style(r.method)['label']}: {_sci(np.nanmax(env))}")
            ax.set_ylim(top=Y_TOP)
            if off:
                ax.text(0.98, 0.03, "off scale (max): " + "; ".join(off), transform=ax.transAxes,
                        ha="right", va="bottom", fontsize=8,
                        bbox={"facecolor": "white", "alpha": 0.8, "lw": 0})
            title = "fixed step" if mode == "fixed" else \
                f"random steps (RMS over {max(r.seeds for r in runs)} runs)"
            ax.set_title(f"{prob}: {title}", fontsize=10)
            ax.set_xlabel("time t [s]")
            if j == 0:
                ax.set_ylabel("max |E(t) - E0| / |E0| over each period")
            ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle("Energy error against time, largest per period: flat = bounded, "
                 "rising = drift (log scale)")
    fig.tight_layout(rect=(0, 0.06, 1, 0.97))
    return save(fig, path)


def energy_series_figure(runs, problems, path: Path, methods=("euler", "symplectic_euler",
                                                             "velocity_verlet", "rk4")) -> Path:
    """Article 002's picture: E(t)/E0 against time at a fixed step, first periods."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(problems), figsize=(6 * len(problems), 4.2), squeeze=False)
    for ax, prob in zip(axes[0], problems, strict=True):
        for r in runs:
            if r.problem == prob and r.mode == "fixed" and r.method in methods:
                ax.plot(r.series_t, r.series_d, lw=1.2, **line(r.method))
        ax.set_title(f"{prob}, fixed step", fontsize=10)
        ax.set_xlabel("time t [s]")
        ax.set_ylabel("relative energy error (E(t) - E0) / |E0|")
        ax.set_ylim(-0.15, 0.6)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle("Energy against time (article 002): explicit Euler climbs, "
                 "symplectic methods wiggle about E0, RK4 sits near 0")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return save(fig, path)


def orbit_figure(trajs: dict, exact: np.ndarray, spo: int, orbits: float, path: Path) -> Path:
    """The moon's path relative to the planet, one panel per integrator."""
    plt = _plt()
    methods = list(trajs)
    cols = 4
    rows = (len(methods) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.7 * rows), squeeze=False)
    lim = 30.0
    for ax, m in zip(axes.ravel(), methods, strict=False):
        xy = trajs[m]
        ax.plot(exact[:, 0], exact[:, 1], color="black", lw=0.8, ls="--", label="exact")
        ax.plot(xy[:, 0], xy[:, 1], lw=0.9, **line(m))
        ax.plot([0], [0], "o", color="black", ms=5)
        ax.set_xlim(-lim, lim)
        ax.set_ylim(-lim, lim)
        ax.set_aspect("equal")
        r_end = float(np.hypot(*xy[-1])) if np.all(np.isfinite(xy[-1])) else float("inf")
        ax.set_title(f"{style(m)['label']}\nr at end: {r_end:.3g} m", fontsize=9)
        ax.set_xlabel("x [m]")
        ax.set_ylabel("y [m]")
        ax.grid(True, alpha=0.3)
    for ax in axes.ravel()[len(methods):]:
        ax.axis("off")
    fig.suptitle(f"Article 000's moon at {spo} steps per orbit, {orbits:g} orbits "
                 "(relative to the planet; dashed: exact ellipse; view clipped at 30 m)")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return save(fig, path)


def orbit_sweep_figure(sweeps, r_far: float, spo_mark: int, path: Path) -> Path:
    """Largest planet-moon distance over the run against steps per orbit."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(9, 5))
    for s in sweeps:
        ls = _dashed(s.method)
        r = np.where(np.isfinite(s.r_max), s.r_max, 1e12)
        ax.semilogy(s.spo, np.minimum(r, 1e12), lw=1.2, ls=ls, **line(s.method))
    ax.axhline(r_far, color="black", lw=0.8, ls=":", label=f"escape: r > {r_far:g} m")
    ax.axvline(spo_mark, color="grey", lw=0.8, ls="-.", label=f"the large step: {spo_mark}")
    ax.set_xlabel("steps per orbit  P/h  (P = 8.94 s)")
    ax.set_ylabel("largest planet-moon distance over the run [m]")
    ax.set_title(f"Article 000's moon over {sweeps[0].orbits} orbits: "
                 "bound below the dotted line (and E < 0 at the end)", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return save(fig, path)


def random_dt_figure(runs, problems, path: Path) -> Path:
    """Position error against time under random steps, one panel per problem."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(problems), figsize=(5.2 * len(problems), 4.6),
                             squeeze=False)
    for ax, prob in zip(axes[0], problems, strict=True):
        for r in runs:
            if r.problem != prob:
                continue
            # From the first step on: at t = 0 every error is exactly 0.
            ax.semilogy(r.t_grid[1:], np.maximum(r.err_rms[1:], 1e-16), lw=1.6,
                        **line(r.method))
            ax.semilogy(r.t[1:, 0], np.maximum(r.err[1:, 0], 1e-16), lw=0.6, alpha=0.45,
                        color=style(r.method)["color"])
        ax.set_title(f"{prob} (nominal h = {_h(runs, prob)})", fontsize=10)
        ax.set_xlabel("time t [s]")
        ax.set_ylabel("position error |x - x_exact| [m]")
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle(f"Random steps (article 001): RMS over {runs[0].seeds} runs (thick) and one "
                 "run (thin); steps vary by a ratio within [0.5, 2]", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    return save(fig, path)


def _h(runs, prob) -> str:
    for r in runs:
        if r.problem == prob:
            return f"{r.h_nominal * 1000:.1f} ms"
    return "?"


def initial_conditions_figure(sweeps, series: dict, path: Path) -> Path:
    """Left: error at T against h for both starts. Right: the naive start's error in time."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    colours = {"naive": "#d62728", "eq2": "#2ca02c"}
    marks = {"projectile": "o", "oscillator": "s"}
    for s in sweeps:
        label = f"{s.problem}, {'x_prev = x0 - v0 h' if s.start == 'naive' else 'eq. (2)'}"
        err = np.maximum(s.err, 1e-16)
        a1.loglog(s.h, err, marker=marks[s.problem], color=colours[s.start],
                  ls="-" if s.problem == "projectile" else "--", label=label)
    hs = np.concatenate([s.h for s in sweeps])
    _slopes(a1, hs, 1e-1, (1, 2))
    _plain_log_ticks(a1, hs)
    a1.set_xlabel("step h [s]")
    a1.set_ylabel("position error at T [m]")
    a1.set_title("Position Verlet: error at the end against the step\n"
                 "(eq. (2) on the projectile: round-off, plotted as is)", fontsize=10)
    a1.grid(True, which="both", alpha=0.3)
    a1.legend(fontsize=8)
    t, naive, eq2, theory, h = (series[k] for k in ("t", "naive", "eq2", "theory", "h"))
    a2.plot(t, naive, color=colours["naive"], lw=1.5, label="x_prev = x0 - v0 h (measured)")
    a2.plot(t, theory, color="black", ls=":", lw=1.2, label="theory |a| h t / 2")
    a2.plot(t, eq2, color=colours["eq2"], lw=1.5, label="eq. (2) (measured)")
    a2.set_xlabel("time t [s]")
    a2.set_ylabel("position error [m]")
    a2.set_title(f"Projectile (g = 9.81 m/s^2) at h = {h * 1000:.0f} ms", fontsize=10)
    a2.grid(True, alpha=0.3)
    a2.legend(fontsize=8)
    fig.suptitle("Initial conditions of position Verlet (article 001)")
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    return save(fig, path)


def phase_space_figure(clouds: dict, ref, idx: np.ndarray, path: Path) -> Path:
    """The cat carried by each integrator, drawn at a few times; dashed: the true flow."""
    plt = _plt()
    methods = list(clouds)
    cols = 4
    rows = (len(methods) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.9 * cols, 3.9 * rows), squeeze=False)
    cmap = plt.get_cmap("viridis")
    for ax, m in zip(axes.ravel(), methods, strict=False):
        c = clouds[m]
        for j, i in enumerate(idx):
            col = cmap(j / max(len(idx) - 1, 1))
            q, p = np.append(c.q[i], c.q[i][0]), np.append(c.p[i], c.p[i][0])
            ax.fill(q, p, color=col, alpha=0.25, lw=0)
            ax.plot(q, p, color=col, lw=1.0, label=f"t = {c.t[i]:.0f} s")
            rq, rp = np.append(ref.q[i], ref.q[i][0]), np.append(ref.p[i], ref.p[i][0])
            ax.plot(rq, rp, color="black", lw=0.6, ls="--")
        ratio = c.area[idx[-1]] / ref.area[idx[-1]]
        ax.set_title(f"{style(m)['label']}\narea / exact-flow area at {c.t[idx[-1]]:.0f} s: "
                     f"{ratio:.6f}", fontsize=9)
        ax.set_xlim(-1.9, 1.9)
        ax.set_ylim(-1.9, 1.9)
        ax.set_aspect("equal")
        ax.set_xlabel("angle q [rad]")
        ax.set_ylabel("p = dq/dt [rad/s]")
        ax.grid(True, alpha=0.3)
    for ax in axes.ravel()[len(methods):]:
        ax.axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(idx), fontsize=9, frameon=False)
    c0 = clouds[methods[0]]
    fig.suptitle(f"A cat of pendulum states (q'' = -sin q) at h = {c0.h:g} s; "
                 "dashed: the same outline under the exact flow")
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    return save(fig, path)


def phase_area_figure(clouds: dict, ref, sweeps, path: Path) -> Path:
    """Left: area error against time. Right: area error at T against h (log-log)."""
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 5.6))
    for m, c in clouds.items():
        rel = np.abs(c.area - ref.area) / ref.area[0]
        ls = _dashed(m)
        a1.semilogy(c.t[1:], np.maximum(rel[1:], 1e-13), lw=1.2, ls=ls, **line(m))
    a1.set_xlabel("time t [s]")
    a1.set_ylabel("|A(t) - A_exact flow(t)| / A0")
    a1.set_title(f"Area of the cat against time, h = {next(iter(clouds.values())).h:g} s "
                 "(signs: see the table)", fontsize=10)
    a1.grid(True, which="both", alpha=0.3)
    for s in sweeps:
        ls = _dashed(s.method)
        st = style(s.method)
        a2.loglog(s.h, np.maximum(np.abs(s.rel_error), 1e-17), ls=ls, ms=5,
                  **{**st, "label": None})
    hs = np.concatenate([s.h for s in sweeps])
    _slopes(a2, hs, 1e-4, (1, 2, 5))
    _plain_log_ticks(a2, hs)
    a2.set_xlabel("step h [s]")
    a2.set_ylabel("|A(T) - A_exact flow(T)| / A0 at T")
    a2.set_title("Area error at the end against the step", fontsize=10)
    a2.grid(True, which="both", alpha=0.3)
    a2.legend(fontsize=8, loc="lower right")
    handles, labels = a1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.suptitle("Phase-space area (article 002): explicit Euler grows it, RK4 shrinks it, "
                 "symplectic maps keep it")
    fig.tight_layout(rect=(0, 0.09, 1, 0.94))
    return save(fig, path)


def velocity_figure(est_sweeps, local, path: Path) -> Path:
    """Velocity-estimate errors against h per problem, and every integrator's local error."""
    plt = _plt()
    n = len(est_sweeps)
    fig, axes = plt.subplots(1, n + 1, figsize=(5.2 * (n + 1), 4.8), squeeze=False)
    marks = {"backward": ("#d62728", "o"), "forward": ("#ff7f0e", "s"),
             "central": ("#1f77b4", "^"), "own": ("#2ca02c", "x")}
    for ax, s in zip(axes[0][:n], est_sweeps, strict=True):
        for k, e in s.err.items():
            col, mk = marks[k]
            ax.loglog(s.h, e, color=col, marker=mk, ls="-" if k != "own" else "--",
                      label=f"{k} (order {s.order[k]:.2f})")
        _slopes(ax, s.h, float(np.max(s.err["backward"])), (1, 2))
        _plain_log_ticks(ax, s.h)
        ax.set_title(f"{s.problem}: velocity from position Verlet", fontsize=10)
        ax.set_xlabel("step h [s]")
        ax.set_ylabel("largest velocity error over the run [m/s]")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[0][n]
    for m, e in local.err.items():
        ls = _dashed(m)
        ax.loglog(local.h, np.maximum(e, 1e-17), ls=ls, ms=4,
                  **{**style(m), "label": f"{style(m)['label']} ({local.order[m]:.2f})"})
    _plain_log_ticks(ax, local.h)
    ax.set_title(f"{local.problem}: local error of ONE step from exact data", fontsize=10)
    ax.set_xlabel("step h [s]")
    ax.set_ylabel("position error after one step [m]")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.suptitle("Article 004: velocity estimates (orders 1, 1, 2, 2) and where "
                 "\"4th order\" comes from (local, not global)")
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return save(fig, path)


def stability_figure(limits, path: Path) -> Path:
    """Measured largest stable step against theory, per integrator and test problem."""
    plt = _plt()
    problems = list(dict.fromkeys(lim.problem for lim in limits))
    fig, axes = plt.subplots(1, len(problems), figsize=(6.5 * len(problems), 4.8),
                             squeeze=False)
    for ax, prob in zip(axes[0], problems, strict=True):
        sel = [lim for lim in limits if lim.problem == prob]
        x = np.arange(len(sel))
        bars = ax.bar(x, [lim.limit for lim in sel],
                      color=[style(lim.method)["color"] for lim in sel], alpha=0.8)
        ax.bar([0], [0], color="grey", alpha=0.8, label=f"measured ({sel[0].n} steps, "
               "amplitude bound 1000x)")
        ax.plot(x, [lim.theory for lim in sel], "k_", ms=22, mew=2, label="theory")
        ax.bar_label(bars, labels=[f"{lim.limit:.3f}" for lim in sel], fontsize=7, padding=2)
        ax.set_xticks(x, [style(lim.method)["label"] for lim in sel], rotation=35, ha="right",
                      fontsize=8)
        what = "w h (oscillator x'' = -w^2 x)" if prob == "oscillator" \
            else "c h (damping x'' = -c v)"
        ax.set_ylabel(f"largest stable {what.split(' (')[0]}  [dimensionless]")
        ax.set_ylim(0, 3.3)
        ax.set_title(what, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Stability limits: the largest step before the amplitude runs away")
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    return save(fig, path)


# --- the maps (stability-map, escape-map, random-dt's distribution) ---------------------

def _dashed(method: str) -> str:
    """The line style of ``method`` (its integrator's ``style``: a method whose curve
    would hide another's, e.g. leapfrog under velocity Verlet, is dashed)."""
    integ = INTEGRATORS.get(method)
    return integ.style[2] if integ else "-"


def stability_map_figure(mp, path: Path) -> Path:
    """One integrator's map: stable points pale, unstable ones by how fast they blew up;
    dashed: where the spectral radius of the one-step map is 1 (theory)."""
    plt = _plt()
    from matplotlib.lines import Line2D
    z = mp.z
    dz = float(z[1] - z[0])
    ext = (-dz / 2, z[-1] + dz / 2, -dz / 2, z[-1] + dz / 2)
    fig, ax = plt.subplots(figsize=(6.6, 5.6))
    img = np.where(mp.stable, np.nan, np.log10(np.maximum(mp.steps, 1))).T
    cmap = plt.get_cmap("magma").copy()
    cmap.set_bad("#d9f0d3")
    im = ax.imshow(img, origin="lower", extent=ext, cmap=cmap, vmin=0,
                   vmax=np.log10(mp.n), interpolation="nearest", aspect="equal")
    cb = fig.colorbar(im, ax=ax, shrink=0.85)
    cb.set_label(f"steps until 1000x the start (log10; pale green: stable {mp.n} steps)",
                 fontsize=8)
    if mp.theory.any() and not mp.theory.all():
        ax.contour(z, z, mp.theory.T.astype(float), levels=[0.5], colors="black",
                   linewidths=1.1, linestyles="--")
    handles = [Line2D([], [], color="black", ls="--", label="theory: rho(one-step map) = 1")]
    ax.legend(handles=handles, loc="upper right", fontsize=8)
    ax.set_xlabel("w h  (oscillation: x'' = -w^2 x - c v)")
    ax.set_ylabel("c h  (damping)")
    ax.set_title(f"{style(mp.method)['label']}: stable region, {z.size} x {z.size} runs",
                 fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def stability_maps_figure(maps: dict, path: Path) -> Path:
    """Every integrator's measured stability boundary on one plot, with the axis theory."""
    plt = _plt()
    from matplotlib.lines import Line2D
    fig, ax = plt.subplots(figsize=(10.4, 6.6))
    handles = []
    for m, mp in maps.items():
        st = style(m)
        if mp.stable.any() and not mp.stable.all():
            ax.contour(mp.z, mp.z, mp.stable.T.astype(float), levels=[0.5],
                       colors=[st["color"]], linewidths=1.6, linestyles=_dashed(m))
        handles.append(Line2D([], [], color=st["color"], ls=_dashed(m), lw=1.6,
                              label=f"{st['label']} ({mp.stable.mean():.0%})"))
    # Each integrator's declared edges (Integrator.stability), once per distinct value.
    edges = {}
    for m in maps:
        lim = INTEGRATORS[m].stability if m in INTEGRATORS else {}
        for axis, at in (("oscillator", lambda e: (e, 0.0)), ("damping", lambda e: (0.0, e))):
            e = lim.get(axis, 0.0)
            if e > 0:
                edges.setdefault(at(round(e, 6)), "2√2" if abs(e - 2 * np.sqrt(2)) < 1e-9
                                 else f"{e:.4g}")
    marks = [(x, y, label) for (x, y), label in edges.items()]
    for x, y, label in marks:
        ax.plot([x], [y], "k+", ms=10, mew=1.5, clip_on=False, zorder=5)
        ax.annotate(label, (x, y), xytext=(4, 4) if y == 0 else (5, -3),
                    textcoords="offset points", fontsize=8)
    handles.append(Line2D([], [], color="black", marker="+", ls="", ms=9,
                          label="closed-form edges on the axes"))
    zmax = float(next(iter(maps.values())).z[-1])
    ax.set_xlim(0, zmax)
    ax.set_ylim(0, zmax)
    ax.set_aspect("equal")
    ax.set_xlabel("w h  (oscillation)")
    ax.set_ylabel("c h  (damping)")
    ax.grid(True, alpha=0.3)
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0),
              title="stable share of the map", title_fontsize=8)
    ax.text(1.02, 0.02, "Stable: the side of a line that holds\nthe small steps; explicit "
            "Euler:\nbetween its two lines. The five\nVerlet-family lines coincide.",
            transform=ax.transAxes, fontsize=8, va="bottom")
    n = next(iter(maps.values())).n
    ax.set_title(f"Stability boundaries of x'' = -w^2 x - c v, every integrator "
                 f"({n} steps a point)", fontsize=10)
    fig.tight_layout()
    return save(fig, path)


def _edges(centres: np.ndarray) -> np.ndarray:
    """Cell edges halfway between sorted centres (half a gap beyond the ends)."""
    c = np.asarray(centres, float)
    if c.size == 1:
        return np.array([c[0] - 0.5, c[0] + 0.5])
    mid = (c[1:] + c[:-1]) / 2
    return np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])


def escape_map_figure(maps: dict, spo_mark: int, path: Path) -> Path:
    """The moon's fate per integrator over (steps per orbit, launch speed)."""
    plt = _plt()
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    methods = list(maps)
    cols = 4
    rows = (len(methods) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.9 * cols, 3.4 * rows + 0.8),
                             squeeze=False, sharex=True, sharey=True)
    cmap = ListedColormap(["#cfe3f3", "#c0392b"])
    for ax, m in zip(axes.ravel(), methods, strict=False):
        mp = maps[m]
        ax.pcolormesh(_edges(mp.spo.astype(float)), _edges(mp.speeds),
                      (~mp.bound).astype(float), cmap=cmap, vmin=0, vmax=1)
        ax.axhline(1.1, color="black", lw=0.7, ls=":")
        ax.axvline(spo_mark, color="black", lw=0.7, ls="-.")
        ax.set_title(f"{style(m)['label']} ({mp.escaped_share:.0%} escaped)", fontsize=9)
        ax.set_xscale("log")
        ticks = [t for t in (4, 5, 10, 20, 50, 100) if mp.spo[0] <= t <= mp.spo[-1]]
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.minorticks_off()
    for ax in axes[-1]:
        ax.set_xlabel("steps per orbit")
    for ax in axes[:, 0]:
        ax.set_ylabel("launch speed / circular speed")
    for ax in axes.ravel()[len(methods):]:
        ax.axis("off")
    handles = [Patch(color="#cfe3f3", label="bound"), Patch(color="#c0392b", label="escaped"),
               plt.Line2D([], [], color="black", ls=":", lw=0.7,
                          label="the orbit experiment's speed (1.1)"),
               plt.Line2D([], [], color="black", ls="-.", lw=0.7,
                          label=f"its large step ({spo_mark} steps per orbit)")]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=9, frameon=False)
    orbits = next(iter(maps.values())).orbits
    fig.suptitle(f"Article 000's moon after {orbits} orbits: bound or escaped, per "
                 "integrator (the exact orbit is bound everywhere here)", fontsize=11)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    return save(fig, path)


def escape_edges_figure(maps: dict, spo_mark: int, path: Path) -> Path:
    """Steps per orbit from which the moon stays bound, against launch speed."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.4, 5.2))
    never = []
    for m, mp in maps.items():
        bf = np.array([np.nan if b is None else b for b in mp.bound_from()], float)
        if np.all(np.isnan(bf)):
            never.append(style(m)["label"])
            continue
        ax.plot(mp.speeds, bf, ls=_dashed(m), ms=4, lw=1.3, **style(m))
    spo_hi = int(next(iter(maps.values())).spo[-1])
    ax.axhline(spo_mark, color="grey", lw=0.8, ls="-.", label=f"{spo_mark} steps per orbit")
    ax.axvline(1.1, color="grey", lw=0.8, ls=":", label="launch speed 1.1")
    ax.set_yscale("log")
    from matplotlib.ticker import NullFormatter
    ax.yaxis.set_minor_formatter(NullFormatter())
    ticks = [t for t in (4, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150) if t <= spo_hi]
    ax.set_yticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("launch speed / circular speed")
    ax.set_ylabel("bound from this many steps per orbit up")
    title = "Steps per orbit the moon needs to stay bound, per integrator"
    if never:
        title += f"\n(never within {spo_hi} steps per orbit: {', '.join(never)})"
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    return save(fig, path)


def random_dt_hist_figure(err: np.ndarray, fixed: np.ndarray, problems, methods,
                          path: Path) -> Path:
    """Histograms of the end error over many random sequences: a panel per problem, a
    histogram per integrator; dashed: the error of the fixed nominal step."""
    plt = _plt()
    floor = 1e-17
    fig, axes = plt.subplots(1, len(problems), figsize=(5.4 * len(problems), 4.6),
                             squeeze=False)
    for a, (ax, prob) in enumerate(zip(axes[0], problems, strict=True)):
        finite = err[a][np.isfinite(err[a])]
        lo = np.log10(max(float(finite.min()) if finite.size else floor, floor))
        hi = np.log10(max(float(finite.max()) if finite.size else 1.0, floor * 10))
        bins = np.linspace(lo - 0.1, hi + 0.1, 61)
        for b, m in enumerate(methods):
            e = err[a, b]
            bad = int(np.sum(~np.isfinite(e)))
            label = style(m)["label"] + (f" ({bad} diverged)" if bad else "")
            ax.hist(np.log10(np.maximum(e[np.isfinite(e)], floor)), bins=bins,
                    histtype="step", lw=1.5, color=style(m)["color"], label=label)
            if np.isfinite(fixed[a, b]):
                ax.axvline(np.log10(max(fixed[a, b], floor)), color=style(m)["color"],
                           ls="--", lw=1.0, alpha=0.8)
        ax.set_title(prob, fontsize=10)
        ax.set_yscale("log")
        ax.set_ylim(0.7, err.shape[-1] * 1.5)
        ax.set_xlabel("log10 position error at T [m]")
        if a == 0:
            ax.set_ylabel("sequences (log scale)")
        ax.grid(True, alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(methods), fontsize=9,
               frameon=False)
    fig.suptitle(f"End error over {err.shape[-1]} random frame-time sequences (ratio of "
                 "consecutive steps in [0.5, 2]); dashed: the fixed nominal step (one line for "
                 "the three Verlet forms, which agree there)", fontsize=11)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    return save(fig, path)
