"""How many cores the compiled constraint sweep may use, decided frame by frame.

A colour batch of a big cloth can be spread over the cores (``prange``); a frame of the
200x200 cloth then opens ~160 short parallel regions, and each one waits for the slowest
thread. On an idle machine that is a gain; when other processes hold the cores, a
helper thread waits for the OS to give it a core at every region, and measured frames
went from 24 ms on one thread to 400-600 ms on two (2-core VM, two busy processes;
the numbers are in ``bench --load``). So the sweep runs on one thread unless both:

1. the other cores are free: the policy's meter says that *other* processes took under
   half a core lately. The core does not read the machine itself: the app, the bench and
   the headless commands hand the policy a meter (``set_meter``; ``sandbox.load``'s
   ``LoadMeter`` reads ``/proc/stat`` minus this process's own time over the last
   quarter second). Without a meter, or where it cannot tell (None), one thread;
2. two threads are measurably faster for this work: frames of each kind are timed
   (``record``; the first of each kind, which loads its kernel, is not a timing), and
   two threads are kept only while they beat one thread by 10 %.
   One frame in 32 re-times the other kind, so a change of load is seen within a
   second either way; a two-thread frame that takes twice one thread's time switches
   back at once and waits a second before trying again.

``POLICY`` is the process-wide instance that ``World`` and ``kernels.project_batches``
ask. ``set_mode("serial" | "parallel" | "auto")`` pins the choice (tests, the bench's
one-thread rows); the environment variable ``SANDBOX_THREADS`` (``1``: serial,
``auto``) sets the initial mode. ``set_meter`` hands it the meter of rule 1. One set of
links can pin its own sweep with the same words (``Constraints.threads``, :data:`MODES`).
"""

from __future__ import annotations

import os
import time
from typing import Protocol

#: Below this many links a batch never goes parallel (thread start-up costs more).
MIN_LINKS = 1000
#: Other processes' CPU use (cores) at or above which one thread is used.
BUSY_CORES = 0.5
#: Two threads must be this much faster than one to be kept.
GAIN = 0.9
PROBE_EVERY = 32          # frames between re-timings of the mode not in use
HOLD_S = 1.0              # after a bad two-thread frame: one thread for this long

#: The thread choices: "auto" (this module's rules), "serial" (one thread), "parallel"
#: (spread over the cores). The policy's modes, and ``Constraints.threads``.
MODES = ("auto", "serial", "parallel")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:                       # pragma: no cover - not Linux
        return os.cpu_count() or 1


class Meter(Protocol):
    """What the policy asks about the machine (``sandbox.load.LoadMeter``, or a test's)."""

    def others(self) -> float | None:
        """Cores that other processes used lately; None when it cannot be told."""


class _Stats:
    """Exponentially weighted seconds per call of one kind of work, in each mode."""

    __slots__ = ("serial", "parallel", "calls", "hold_until", "last_probe", "seen")

    def __init__(self) -> None:
        self.serial: float | None = None
        self.parallel: float | None = None
        self.calls = 0
        self.hold_until = 0.0
        self.last_probe = 0
        self.seen: set[bool] = set()      # the modes whose first call has been made


class CorePolicy:
    """Chooses one thread or all of them for each compiled sweep (see the module
    docstring); ``min_parallel(key, links)`` is what the kernels take."""

    def __init__(self, mode: str | None = None, meter: Meter | None = None) -> None:
        env = os.environ.get("SANDBOX_THREADS", "auto").strip().lower()
        self.mode = mode or ("serial" if env == "1" else "auto")
        self.cores = _cores()
        self.meter = meter              # None: the load is unknown (one thread)
        self._stats: dict = {}
        self.last = "serial"            # what the last decision was, for the HUD/bench

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be 'auto', 'serial' or 'parallel', not {mode!r}")
        self.mode = mode
        self._stats.clear()

    def parallel(self, key, links: int) -> bool:
        """Whether the next call of work ``key`` (``links`` links a batch at most)
        should spread its big batches over the cores."""
        if self.mode != "auto":
            return self.mode == "parallel" and self.cores > 1
        if self.cores < 2 or links < MIN_LINKS:
            return False
        others = self.meter.others() if self.meter is not None else None
        if others is None or others >= BUSY_CORES:
            return False
        st = self._stats.setdefault(key, _Stats())
        st.calls += 1
        if time.monotonic() < st.hold_until:
            return False
        if st.serial is None:
            return False                      # time one thread first
        if st.parallel is None:
            return True                       # then two
        best_parallel = st.parallel < GAIN * st.serial
        if st.calls - st.last_probe >= PROBE_EVERY:
            st.last_probe = st.calls
            return not best_parallel          # re-time the other kind now and then
        return best_parallel

    def record(self, key, parallel: bool, seconds: float) -> None:
        """How long a call of ``key`` took in the mode ``parallel``."""
        self.last = "parallel" if parallel else "serial"
        if self.mode != "auto":
            return
        st = self._stats.get(key)
        if st is None:
            st = self._stats[key] = _Stats()
        if parallel not in st.seen:
            # A mode's first call loads or compiles its kernel (0.1-0.2 s for the
            # 200x200 cloth's frame): counted, it stood for a hundred frames of that
            # mode, since the estimate forgets it by 0.7 a timing, one timing in 32
            # frames (a float32 cloth kept two threads for 6 s, 15 % slower).
            st.seen.add(parallel)
            return
        if parallel:
            if st.serial is not None and seconds > 2.0 * st.serial:
                st.hold_until = time.monotonic() + HOLD_S      # the cores are taken
                st.parallel = seconds
                return
            st.parallel = seconds if st.parallel is None else 0.7 * st.parallel + 0.3 * seconds
        else:
            st.serial = seconds if st.serial is None else 0.7 * st.serial + 0.3 * seconds

    def min_parallel(self, key, links: int) -> int:
        """The kernels' ``min_parallel``: ``MIN_LINKS`` to spread big batches, or a
        number no batch reaches to stay on one thread."""
        return MIN_LINKS if self.parallel(key, links) else 2**62


#: The process-wide policy.
POLICY = CorePolicy()


def set_mode(mode: str) -> None:
    """Pin the choice: "serial" (one thread), "parallel" (big batches over all cores)
    or "auto" (this module's rules)."""
    POLICY.set_mode(mode)


def set_meter(meter: Meter | None) -> Meter | None:
    """Hand ``POLICY`` the meter of other processes' load (rule 1; None: unknown, one
    thread); returns the one it had, to put back."""
    before, POLICY.meter = POLICY.meter, meter
    return before
