"""Figures for the experiments, drawn with matplotlib's Agg backend to PNG files.

Only this module imports matplotlib (about half a second), and only when a figure is
drawn, so ``python main.py play`` never pays for it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..sim.atomic import atomic_write_bytes
from ..sim.integrators import INTEGRATORS

# One colour and marker per integrator, the same in every figure.
_STYLE = {
    "euler": ("#d62728", "o"), "symplectic_euler": ("#ff7f0e", "s"),
    "velocity_verlet": ("#1f77b4", "^"), "leapfrog": ("#17becf", "v"),
    "verlet": ("#7f7f7f", "D"), "tcv": ("#9467bd", "P"),
    "tcv_corrected": ("#2ca02c", "X"), "rk4": ("#8c564b", "*"),
}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def style(method: str) -> dict:
    color, marker = _STYLE.get(method, ("black", "."))
    return {"color": color, "marker": marker, "label": INTEGRATORS[method].label
            if method in INTEGRATORS else method}


def save(fig, path: Path) -> Path:
    """Save ``fig`` as PNG atomically and close it."""
    import io
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    _plt().close(fig)
    atomic_write_bytes(path, buf.getvalue())
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
                ls = "--" if r.method in ("leapfrog", "tcv_corrected") else "-"
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
        ls = "--" if s.method in ("leapfrog", "tcv", "tcv_corrected") else "-"
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
        ls = "--" if m in ("leapfrog", "tcv", "tcv_corrected") else "-"
        a1.semilogy(c.t[1:], np.maximum(rel[1:], 1e-13), lw=1.2, ls=ls, **line(m))
    a1.set_xlabel("time t [s]")
    a1.set_ylabel("|A(t) - A_exact flow(t)| / A0")
    a1.set_title(f"Area of the cat against time, h = {next(iter(clouds.values())).h:g} s "
                 "(signs: see the table)", fontsize=10)
    a1.grid(True, which="both", alpha=0.3)
    for s in sweeps:
        ls = "--" if s.method in ("leapfrog", "tcv", "tcv_corrected") else "-"
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
        ls = "--" if m in ("leapfrog", "tcv", "tcv_corrected") else "-"
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
