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

from .atomic import FileTooLarge, atomic_write_bytes, read_bounded
from .sim.timestep import StepTrace

#: Limits of a trace file: its size, the steps of one frame, one step's length (s).
MAX_BYTES, MAX_STEPS, MAX_H = 64 << 20, 64, 10.0
HEADER = "# verlet-sandbox step trace v1: one frame per line, steps in s as float.hex"


def save(trace: StepTrace, path: str | os.PathLike) -> None:
    """Write one frame per line, steps as ``float.hex`` (exact), atomically: the file is
    the whole trace or, on any failure (a full disk: the ``OSError`` names ``path``),
    not there, an older file at ``path`` untouched. A trace that :func:`load` would
    refuse (a frame of more than ``MAX_STEPS`` steps, a step that is not positive, finite
    and at most ``MAX_H`` s, more than ``MAX_BYTES``) is refused before anything is
    written, with a ``ValueError`` naming the frame or the limit: what is saved loads."""
    path = Path(path)
    lines = [HEADER]
    for no, frame in enumerate(trace.frames, start=1):
        steps = [float(h) for h in frame]
        if len(steps) > MAX_STEPS or not all(math.isfinite(h) and 0 < h <= MAX_H
                                             for h in steps):
            raise ValueError(f"{path}: not written: frame {no} has {len(steps)} steps; a "
                             f"step trace holds at most {MAX_STEPS} a frame, each positive, "
                             f"finite and <= {MAX_H:g} s")
        lines.append(" ".join(h.hex() for h in steps))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    if len(data) > MAX_BYTES:
        raise ValueError(f"{path}: not written: {len(data):,} bytes; a step trace holds at "
                         f"most {MAX_BYTES:,} (64 MiB), what load reads")
    atomic_write_bytes(path, data)


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
