"""Step trace files: a :class:`~sandbox.sim.timestep.StepTrace` written as text and read
back, every line checked.

One frame's plan a line, its steps as ``float.hex`` (exact), under a header line; what
``simulate --timestep replay --trace FILE`` plays. The trace itself (recording, playing
back) is timing, in the core; reading and writing its file is not.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from .atomic import FileTooLarge, atomic_write_text, read_bounded
from .sim.timestep import StepTrace

#: Limits of a trace file: its size, the steps of one frame, one step's length (s).
MAX_BYTES, MAX_STEPS, MAX_H = 64 << 20, 64, 10.0


def save(trace: StepTrace, path: str | os.PathLike) -> None:
    """Write one frame per line, steps as ``float.hex`` (exact), atomically."""
    path = Path(path)
    lines = ["# verlet-sandbox step trace v1: one frame per line, steps in s as float.hex"]
    lines += [" ".join(float(h).hex() for h in f) for f in trace.frames]
    atomic_write_text(path, "\n".join(lines) + "\n")


def load(path: str | os.PathLike, shown: str | None = None) -> StepTrace:
    """Read a trace from a regular file of at most ``MAX_BYTES``; ``ValueError``
    naming the file (as ``shown``, if given) and the line for anything malformed."""
    name = shown if shown is not None else str(path)
    try:
        text = read_bounded(path, MAX_BYTES).decode("utf-8")
    except FileTooLarge:
        raise ValueError(f"{name}: larger than 64 MiB; not a step trace") from None
    except OSError as e:
        raise ValueError(f"{name}: cannot read step trace: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{name}: cannot read step trace: not UTF-8 text") from None
    lines = text.splitlines()
    if not lines or not lines[0].startswith("# verlet-sandbox step trace v1"):
        raise ValueError(f"{name}: line 1: expected the header "
                         "'# verlet-sandbox step trace v1'")
    frames = []
    for no, line in enumerate(lines[1:], start=2):
        try:
            steps = [float.fromhex(tok) for tok in line.split()]
        except (ValueError, OverflowError):
            raise ValueError(f"{name}: line {no}: expected steps as float.hex numbers") \
                from None
        if len(steps) > MAX_STEPS or not all(
                math.isfinite(h) and 0 < h <= MAX_H for h in steps):
            raise ValueError(f"{name}: line {no}: expected at most {MAX_STEPS} "
                             f"steps, each positive, finite and <= {MAX_H:g} s")
        frames.append(steps)
    return StepTrace(frames)
