"""How busy the machine is: the CPU time other processes took lately, on any system.

The core never reads the machine: ``sim.cores.CorePolicy`` asks whatever meter it is
handed (any object with ``others() -> float | None``), and the app, the bench and the
headless commands hand it a :class:`LoadMeter` (``cores.set_meter(LoadMeter())``).
Without one, or where the machine's CPU times cannot be read, the policy keeps one
thread.

The machine's CPU times come from psutil (Linux, Windows, macOS, the BSDs); a meter
given a file in ``/proc/stat``'s format reads that file instead (the tests' fake
machines), and so does one where psutil is not installed, on Linux.
"""

from __future__ import annotations

import os
import time

SAMPLE_S = 0.25           # how often the CPU times are read
#: The busy fields of psutil's ``cpu_times()`` where a system has them: ``/proc/stat``'s
#: user to steal less idle and iowait (guest time is inside user's already; Windows'
#: interrupt and DPC time inside its system time).
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq", "steal")


class LoadMeter:
    """CPU time used by other processes, in cores, over the last ``SAMPLE_S`` or so:
    the machine's busy time (all cores, less idle and iowait) minus this process's own
    (``os.times``), over the wall time between reads.

    ``stat_path``: read a file in ``/proc/stat``'s format instead of asking psutil.

    >>> meter = LoadMeter()
    >>> meter.others() is None            # one reading: no interval to measure yet
    True
    """

    def __init__(self, stat_path: str | None = None) -> None:
        self.stat_path = stat_path
        self._last: tuple[float, float, float] | None = None   # (wall, busy, ours) s
        self._others: float | None = None
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def _read(self) -> tuple[float, float, float] | None:
        busy = self._busy()
        if busy is None:
            return None
        t = os.times()
        return time.monotonic(), busy, t.user + t.system

    def _busy(self) -> float | None:
        """The machine's busy CPU seconds since boot, all cores (None: unknown)."""
        if self.stat_path is None:
            try:
                import psutil
            except ImportError:                  # not installed: Linux's file, if any
                return self._busy_from("/proc/stat")
            try:
                times = psutil.cpu_times()
            except Exception:                    # noqa: BLE001 - unreadable here: unknown
                return None
            return float(sum(getattr(times, f, 0.0) for f in BUSY_FIELDS))
        return self._busy_from(self.stat_path)

    def _busy_from(self, path: str) -> float | None:
        """The busy seconds of a ``/proc/stat`` file: its first line, user to steal, less
        idle and iowait, in clock ticks."""
        try:
            with open(path) as f:
                fields = f.readline().split()
            if not fields or fields[0] != "cpu":
                return None
            v = [float(x) for x in fields[1:]]
        except (OSError, ValueError):
            return None
        idle = v[3] + (v[4] if len(v) > 4 else 0.0)          # idle + iowait
        return (sum(v[:8]) - idle) / self._tick                # up to steal

    def others(self) -> float | None:
        """Cores used by other processes recently; None when it cannot be measured."""
        now = time.monotonic()
        if self._last is not None and now - self._last[0] < SAMPLE_S:
            return self._others
        cur = self._read()
        if cur is None:
            return None
        if self._last is not None:
            dt = cur[0] - self._last[0]
            if dt > 0:
                self._others = max(0.0, ((cur[1] - self._last[1]) - (cur[2] - self._last[2]))
                                   / dt)
        self._last = cur
        return self._others
