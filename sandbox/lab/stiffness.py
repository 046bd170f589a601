"""Constraint error against solver passes: iterations against substeps at equal cost.

A 20-link rope and a 20x20 cloth (top row pinned) hang for 10 s at 60 Hz with linear
drag; we measure the mean and max relative stretch they settle at, for every split of
``passes = substeps x iterations``. Substeps shrink ``h`` and with it the effective
compliance of the Gauss-Seidel residual (``~ h^2``), so at equal passes they win by far.
"""

from __future__ import annotations

import numpy as np

from ..sim.builders import build_cloth, build_rope
from ..sim.world import World, WorldConfig

SCENES = ("rope", "cloth")


def settle_error(scene: str, substeps: int, iterations: int, seconds: float = 10.0,
                 h: float = 1 / 60) -> tuple[float, float]:
    """Mean and max relative stretch of ``scene`` after settling."""
    w = World(WorldConfig(iterations=iterations, substeps=substeps, drag=1.0))
    if scene == "rope":
        build_rope(w, (0, 0), (2, 0), segments=20, kind="stick")
    else:
        build_cloth(w, 20, 20, 0.1, pins="top_row")
    w.start(h)
    for _ in range(int(round(seconds / h))):
        w.step(h)
    return w.constraint_error()


def sweep(passes=(1, 2, 5, 10, 20), seconds: float = 10.0) -> list[dict]:
    """For each total pass count: all iterations (1 substep) against all substeps."""
    rows = []
    for scene in SCENES:
        for p in passes:
            for sub, it in ((1, p), (p, 1)):
                mean, worst = settle_error(scene, sub, it, seconds)
                rows.append({"scene": scene, "passes": p, "substeps": sub, "iterations": it,
                             "mean": mean, "max": worst})
    return rows


def figure(rows: list[dict], path):
    from .plots import _plt, save
    plt = _plt()
    fig, axes = plt.subplots(1, len(SCENES), figsize=(10, 4), squeeze=False)
    for ax, scene in zip(axes[0], SCENES, strict=True):
        for label, pick, st in (("iterations (1 substep)", lambda r: r["substeps"] == 1, "o-"),
                                ("substeps (1 iteration)", lambda r: r["iterations"] == 1,
                                 "s--")):
            sel = [r for r in rows if r["scene"] == scene and pick(r)]
            ax.loglog([r["passes"] for r in sel], [r["max"] for r in sel], st, label=label)
        ax.set_title(f"{scene}: settled max stretch")
        ax.set_xlabel("solver passes per frame (substeps x iterations)")
        ax.set_ylabel("max relative stretch |L - rest| / rest")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return save(fig, path)


def as_array(rows) -> np.ndarray:
    return np.array([[r["passes"], r["substeps"], r["iterations"], r["mean"], r["max"]]
                     for r in rows])
