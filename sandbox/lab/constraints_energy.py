"""Energy of constrained motion: XPBD against Lagrange multipliers and RATTLE / SHAKE.

A rod pendulum (1 m, released at 1 rad) and a double pendulum (two 1 m rods, released
at 2 rad each) swing for ``seconds`` at 60 frames a second. Every run gets the same
budget of force evaluations a frame (:data:`BUDGET`): XPBD spends it on substeps (and
is also shown at fewer), Lagrange mode on ``BUDGET / fevals`` substeps of each
integrator (RK4 takes four evaluations a step, so a quarter of the substeps), RATTLE and
SHAKE on ``BUDGET`` substeps. We record the total energy against time, the largest link
stretch, and the wall-clock cost of a simulated second.

What it shows: under XPBD every integrator loses the same energy (the projection damps
like implicit Euler, ``w^2 h / 2``), so the integrator does not matter; with the
multipliers each integrator shows its own character (explicit Euler gains, RK4 loses a
little); RATTLE and SHAKE keep it bounded without trend.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..sim.builders import build_double_pendulum, build_pendulum
from ..sim.integrators import INTEGRATORS
from ..sim.world import SimulationDiverged, World, WorldConfig

SCENES = ("pendulum", "double_pendulum")
H = 1 / 60
#: Force evaluations a frame: 20 substeps of one evaluation, 5 of RK4 (``--quick``: 8).
BUDGET = 20
QUICK_BUDGET = 8
#: XPBD at fewer substeps too (its loss falls like 1/substeps).
XPBD_SUBSTEPS = (1, 4)
#: A share of the error below this is no trend (energy_drift.SHARE_MAX).
SHARE_MAX = 0.2
#: The integrators XPBD runs at the full budget (they should agree).
XPBD_INTEGRATORS = ("velocity_verlet", "euler", "rk4")
LAGRANGE_INTEGRATORS = ("euler", "symplectic_euler", "velocity_verlet", "tcv_corrected", "rk4")
RATTLE_INTEGRATORS = ("velocity_verlet", "tcv_corrected", "symplectic_euler")
EVERY = 6                     # frames between samples (10 a second)


def runs(budget: int = BUDGET) -> list[tuple[str, str, int]]:
    """``(method, integrator, substeps)`` of every run, at equal cost (``budget`` force
    evaluations a frame) but the XPBD sweep."""
    out = [("xpbd", "velocity_verlet", s) for s in XPBD_SUBSTEPS if s < budget]
    out += [("xpbd", m, budget) for m in XPBD_INTEGRATORS]
    out += [("lagrange", m, budget // INTEGRATORS[m].fevals) for m in LAGRANGE_INTEGRATORS]
    out += [("rattle", m, budget // INTEGRATORS[m].fevals) for m in RATTLE_INTEGRATORS]
    return out


def build(scene: str, method: str, integrator: str, substeps: int) -> World:
    w = World(WorldConfig(integrator=integrator, substeps=substeps, iterations=1,
                          constraint_method=method))
    if scene == "pendulum":
        build_pendulum(w, (0.0, 0.0), 1.0, 1.0, mass=1.0)
    elif scene == "double_pendulum":
        build_double_pendulum(w, (0.0, 0.0), (1.0, 1.0), (2.0, 2.0), (1.0, 1.0))
    else:
        raise ValueError(f"unknown scene {scene!r}; valid: {', '.join(SCENES)}")
    return w


@dataclass
class EnergyRun:
    scene: str
    method: str
    integrator: str
    substeps: int
    scheme: str                   # what runs: "XPBD", "RATTLE", "Lagrange + RK4", ...
    symplectic: bool
    e0: float                     # J
    t: np.ndarray                 # s, sampled every EVERY frames
    de: np.ndarray                # E(t) - E0, J
    max_stretch: float            # largest |L - rest| / rest over the run
    ms_per_s: float               # wall-clock ms a simulated second
    diverged_at: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        scheme = (f"XPBD + {INTEGRATORS[self.integrator].label}" if self.method == "xpbd"
                  else self.scheme)
        return f"{scheme} ({self.substeps} sub)"

    @property
    def fevals_per_s(self) -> float:
        return self.substeps * INTEGRATORS[self.integrator].fevals / H

    @property
    def end(self) -> float:
        return float(self.de[-1])

    @property
    def max_abs(self) -> float:
        return float(np.max(np.abs(self.de)))

    @property
    def share(self) -> float:
        """How much of the error is a trend: ``|slope * T| / max |dE|`` with the slope of
        a straight-line fit of ``dE(t)`` (as the energy-drift experiment measures it):
        about 1 for a steady drift, small for an error that oscillates about a level."""
        mx = self.max_abs
        if len(self.t) < 3 or mx == 0:
            return 0.0
        slope = np.polyfit(self.t, self.de, 1)[0]
        return float(abs(slope) * (self.t[-1] - self.t[0]) / mx)


def energy_run(scene: str, method: str, integrator: str, substeps: int,
               seconds: float = 20.0) -> EnergyRun:
    """One run of ``scene``: the energy every :data:`EVERY` frames and the cost."""
    w = build(scene, method, integrator, substeps)
    w.start(H)
    e0 = w.energy()["total"]
    frames = int(round(seconds / H))
    t, de = [0.0], [0.0]
    stretch, diverged, spent = 0.0, None, 0.0
    for k in range(frames):
        t0 = time.perf_counter()
        try:
            w.step(H)
        except SimulationDiverged:
            diverged = w.t
            break
        if k:                     # the first frame loads the compiled kernels
            spent += time.perf_counter() - t0
        if (k + 1) % EVERY == 0:
            t.append(w.t)
            de.append(w.energy()["total"] - e0)
            stretch = max(stretch, w.constraint_error()[1])
    done = max(w.t - H, H)
    c = w.constraint_scheme
    return EnergyRun(scene, method, integrator, substeps, c.scheme, c.symplectic, e0,
                     np.array(t), np.array(de), stretch, 1e3 * spent / done, diverged)


def verdict(runs: list[EnergyRun], budget: int = BUDGET) -> tuple[bool, str, dict]:
    """Does the integrator matter under XPBD (it should not) and with multipliers or
    RATTLE (it should)? Returns ``(holds, one line, numbers)``, judged from the runs
    made with ``budget`` force evaluations a frame."""
    BUDGET = budget  # noqa: N806 - the runs' budget, as the module's default names it
    by = {(r.scene, r.method, r.integrator, r.substeps): r for r in runs}
    numbers: dict = {}
    ok = True
    parts = []
    for scene in SCENES:
        xp = [by[(scene, "xpbd", m, BUDGET)] for m in XPBD_INTEGRATORS
              if (scene, "xpbd", m, BUDGET) in by]
        lg = {m: by[(scene, "lagrange", m, BUDGET // INTEGRATORS[m].fevals)]
              for m in LAGRANGE_INTEGRATORS
              if (scene, "lagrange", m, BUDGET // INTEGRATORS[m].fevals) in by}
        rt = [by[(scene, "rattle", m, BUDGET // INTEGRATORS[m].fevals)]
              for m in RATTLE_INTEGRATORS
              if (scene, "rattle", m, BUDGET // INTEGRATORS[m].fevals) in by]
        if not xp or not lg or not rt:
            continue
        loss = min(r.end for r in xp)
        spread = max(r.end for r in xp) - loss
        # XPBD: the same loss whatever the integrator: velocity Verlet and RK4 (their
        # free flight is exact or nearly so) to 1e-6 of it, explicit Euler (whose free
        # flight is not: millimetres a second, which chaos magnifies) to 10 %.
        exact = [r.end for r in xp if r.integrator != "euler"]
        same = (loss < 0 and spread <= 0.1 * abs(loss)
                and max(exact) - min(exact) <= 1e-6 * abs(loss))
        eu, rk = lg.get("euler"), lg.get("rk4")
        euler_gains = eu is not None and (eu.diverged_at is not None or eu.end > 0)
        rk4_small = rk is not None and rk.diverged_at is None and abs(rk.end) < 1e-3 * abs(loss)
        bounded = all(r.diverged_at is None and r.share < SHARE_MAX for r in rt)
        rt_max = max(r.max_abs for r in rt)
        # RATTLE/SHAKE: no trend, and an order of magnitude below XPBD's loss at the
        # same cost (measured 0.6 % on the pendulum, 0.2 % on the double pendulum).
        holds = same and euler_gains and rk4_small and bounded and rt_max < 0.1 * abs(loss)
        ok &= holds
        numbers[scene] = {
            "xpbd_loss": loss, "xpbd_spread": spread, "xpbd_same": same,
            "euler_end": None if eu is None else eu.end,
            "euler_diverged_at": None if eu is None else eu.diverged_at,
            "rk4_end": None if rk is None else rk.end,
            "rattle_max": rt_max, "rattle_share": max(r.share for r in rt), "holds": holds,
            "lagrange_end": {m: r.end for m, r in lg.items()}}
        eu_text = (f"flies apart at {eu.diverged_at:.1f} s" if eu and eu.diverged_at
                   else f"{eu.end:+.3g} J" if eu else "-")
        parts.append(f"{scene.replace('_', ' ')}: XPBD {loss:+.3g} J whatever the "
                     f"integrator (spread {spread:.2g} J); Lagrange Euler {eu_text}, RK4 "
                     f"{rk.end:+.2g} J; RATTLE/SHAKE within {rt_max:.2g} J, "
                     + ("no trend" if bounded else "TREND")
                     + f" (drift share at most {max(r.share for r in rt):.2f})")
    line = ("Verdict: under XPBD the integrator does not change the energy, with "
            "Lagrange multipliers and RATTLE it does -- "
            + ("HOLDS" if ok and parts else "does NOT hold") + ". " + "; ".join(parts) + ".")
    numbers["holds"] = bool(ok and parts)
    return bool(ok and parts), line, numbers


def figure(runs: list[EnergyRun], path, budget: int = BUDGET):
    """Energy change against time per scene: linear (left), |dE| on a log scale (right)."""
    from .plots import _plt, save, style
    plt = _plt()
    fig, axes = plt.subplots(len(SCENES), 2, figsize=(13, 4.2 * len(SCENES)), squeeze=False)
    dashes = {"xpbd": (0, (4, 2)), "lagrange": "-", "rattle": (0, (1, 1))}
    for row, scene in zip(axes, SCENES, strict=True):
        for r in (r for r in runs if r.scene == scene):
            st = style(r.integrator)
            grey = r.method == "xpbd" and r.substeps != budget
            kw = dict(color="0.6" if grey else st["color"], ls=dashes[r.method], lw=1.3,
                      label=f"{r.label}" + (f", diverged {r.diverged_at:.1f} s"
                                            if r.diverged_at else ""))
            row[0].plot(r.t, r.de, **kw)
            row[1].semilogy(r.t[1:], np.maximum(np.abs(r.de[1:]), 1e-16), **kw)
        for ax in row:
            ax.set_xlabel("t [s]")
            ax.grid(True, alpha=0.3)
        loss = [abs(r.end) for r in runs if r.scene == scene and r.method == "xpbd"]
        if loss:
            row[0].set_ylim(-1.3 * max(loss), 0.6 * max(loss))
        row[0].set_ylabel("E - E0 [J]")
        row[1].set_ylabel("|E - E0| [J]")
        row[0].set_title(f"{scene.replace('_', ' ')}: energy change (dashed XPBD, "
                         "solid Lagrange, dotted RATTLE/SHAKE)", fontsize=9)
        row[1].set_title(f"{scene.replace('_', ' ')}: |energy change|, {budget} force "
                         "evaluations a frame", fontsize=9)
        row[1].legend(fontsize=6.5, loc="lower right", ncol=2)
    fig.tight_layout()
    return save(fig, path)
