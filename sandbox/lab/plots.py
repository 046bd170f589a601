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
