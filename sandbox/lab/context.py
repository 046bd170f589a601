"""What every experiment of the lab shares: where it writes and how it runs its cases
(:class:`Context`), what it returns (:class:`Result`), the sweep runner's front door
(:func:`sweep`), and the CSV files, tables and numbers it prints (:func:`write_csv`,
:func:`format_table`, :func:`_g`, :func:`_emit`). The experiments (:mod:`.experiments`,
:mod:`.maps`) stand on it; it knows none of them.
"""

from __future__ import annotations

import csv
import io
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .output import write_text


@dataclass
class Context:
    out: Path
    seed: int = 0
    jobs: int = 0                 # local worker processes; 0 = all cores, 1 = serial
    progress: bool | None = None  # None: a bar only when stderr is a terminal
    quick: bool = False           # reduced sizes (tests, smoke runs)
    echo: Callable[[str], None] = print
    scheduler: str | None = None  # a Dask scheduler's address (or scheduler file)
    seeds: int | None = None      # random-dt: sequences of the distribution (None: default)
    log: Callable[[str], None] = field(
        default=lambda s: print(s, file=sys.stderr))    # sweep statistics, notices
    _runner: object = field(default=None, repr=False)

    def runner(self):
        """Where sweeps run (:class:`sandbox.lab.sweep.Runner`), made on first use."""
        if self._runner is None:
            from .sweep import Runner
            self._runner = Runner(self.scheduler, self.jobs, log=self.log)
        return self._runner

    def close(self) -> None:
        if self._runner is not None:
            self._runner.close()
            self._runner = None


@dataclass
class Result:
    name: str
    files: list[Path] = field(default_factory=list)
    text: str = ""                 # the printed table
    numbers: dict = field(default_factory=dict)


def sweep(ctx: Context, fn, cases: list, desc: str) -> list:
    """``[fn(**case) for case in cases]`` through the lab's sweep runner, in case order.

    On ``ctx``'s runner (serial, a local Dask cluster or ``--scheduler``), with a progress
    bar and results kept in ``OUT/.sweeps`` until the sweep completes (an interrupted or
    failed sweep resumes there). Results do not depend on the backend: each case is
    independent and seeded by its parameters, so CSVs are byte-identical for the same seed.
    """
    from .sweep import run_sweep
    res = run_sweep(fn, cases, ctx.runner(), name=desc, store=ctx.out / ".sweeps",
                    progress=ctx.progress)
    ctx.log(res.stats.line())
    return res.results


def parallel_map(ctx: Context, fn, jobs: list[tuple], desc: str) -> list:
    """``[fn(*j) for j in jobs]`` as a sweep (:func:`sweep`): the experiments' cases."""
    return sweep(ctx, fn, jobs, desc)


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for r in rows:
        w.writerow([f"{x:.17g}" if isinstance(x, float) else x for x in r])
    write_text(path, buf.getvalue())
    return path


def format_table(header: list[str], rows: list[list]) -> str:
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _g(x, digits: int = 3) -> str:
    """A number for a table: ``digits`` significant figures; inf and nan spelled out."""
    if x is None:
        return "-"
    if isinstance(x, (bool, np.bool_)):
        return "yes" if x else "no"
    x = float(x)
    if np.isnan(x):
        return "nan"
    if np.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}g}"


def _emit(ctx: Context, name: str, text: str, files: list[Path], numbers: dict) -> Result:
    ctx.echo(text)
    files.append(ctx.out / f"{name.replace('-', '_')}.txt")
    write_text(files[-1], text + "\n")
    return Result(name, files, text, numbers)
