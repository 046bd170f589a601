"""How busy the machine is: the CPU time other processes took lately, read from /proc/stat.

The core never reads the machine: ``sim.cores.CorePolicy`` asks whatever meter it is
handed (any object with ``others() -> float | None``), and the app, the bench and the
headless commands hand it a :class:`LoadMeter` (``cores.set_meter(LoadMeter())``).
Without one, or where /proc/stat cannot be read, the policy keeps one thread.
"""

from __future__ import annotations

import os
import time

SAMPLE_S = 0.25           # how often /proc/stat is read


class LoadMeter:
    """CPU time used by other processes, in cores, over the last ``SAMPLE_S`` or so:
    the machine's busy time (``/proc/stat``'s first line, user to steal, less idle and
    iowait) minus this process's own (``os.times``), over the wall time between reads."""

    def __init__(self, stat_path: str = "/proc/stat") -> None:
        self.stat_path = stat_path
        self._last: tuple[float, float, float] | None = None   # (wall, busy, ours) s
        self._others = None
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def _read(self) -> tuple[float, float, float] | None:
        try:
            with open(self.stat_path) as f:
                fields = f.readline().split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu":
            return None
        v = [float(x) for x in fields[1:]]
        idle = v[3] + (v[4] if len(v) > 4 else 0.0)          # idle + iowait
        busy = (sum(v[:8]) - idle) / self._tick                # up to steal
        t = os.times()
        return time.monotonic(), busy, t.user + t.system

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
