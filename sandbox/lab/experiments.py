"""Experiments as commands: compute arrays, print the numbers, write CSV and figures.

Each experiment in ``EXPERIMENTS`` is a function ``run(ctx) -> Result``; ``ctx`` says
where to write, the seed, and how to show progress and spread work over cores. The
computation lives in the other ``sandbox.lab`` modules and returns arrays (tests call
those); this module only orchestrates, formats and writes. matplotlib is imported by
:mod:`sandbox.lab.plots` only when a figure is drawn.
"""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..sim.atomic import atomic_write_text
from ..sim.integrators import INTEGRATORS
from . import convergence as conv
from .problems import all_problems


@dataclass
class Context:
    out: Path
    seed: int = 0
    jobs: int = 0                 # worker processes; 0 = all cores
    progress: bool | None = None  # None: a bar only when stderr is a terminal
    quick: bool = False           # reduced sizes (tests, smoke runs)
    echo: Callable[[str], None] = print


@dataclass
class Result:
    name: str
    files: list[Path] = field(default_factory=list)
    text: str = ""                 # the printed table
    numbers: dict = field(default_factory=dict)


def _bar(ctx: Context, total: int, desc: str):
    show = ctx.progress if ctx.progress is not None else sys.stderr.isatty()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a runtime requirement
        return None
    return tqdm(total=total, desc=desc, disable=not show, leave=False)


def parallel_map(ctx: Context, fn, jobs: list[tuple], desc: str) -> list:
    """``[fn(*j) for j in jobs]`` on all cores, in order, with a progress bar.

    Results do not depend on scheduling: each job is independent and seeded by its
    arguments, so CSVs are byte-identical for the same seed.
    """
    workers = ctx.jobs or os.cpu_count() or 1
    bar = _bar(ctx, len(jobs), desc)
    out = []
    if workers <= 1 or len(jobs) <= 1:
        for j in jobs:
            out.append(fn(*j))
            if bar:
                bar.update()
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            for r in ex.map(fn, *zip(*jobs, strict=True)):
                out.append(r)
                if bar:
                    bar.update()
    if bar:
        bar.close()
    return out


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([f"{x:.17g}" if isinstance(x, float) else x for x in r])
    atomic_write_text(path, buf.getvalue())
    return path


def format_table(header: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


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
    atomic_write_text(files[-1], out_text + "\n")
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


EXPERIMENTS: dict[str, Callable[[Context], Result]] = {
    "convergence": run_convergence,
    "constraints": run_constraints,
}


def run(name: str, ctx: Context) -> list[Result]:
    """Run one experiment by name, or every one for ``all``."""
    if name == "all":
        return [fn(ctx) for fn in EXPERIMENTS.values()]
    try:
        fn = EXPERIMENTS[name]
    except KeyError:
        raise ValueError(f"unknown experiment {name!r}; valid: {', '.join(EXPERIMENTS)}, all") \
            from None
    return [fn(ctx)]
