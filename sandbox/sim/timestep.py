"""Timestep policies: how a frame's real elapsed time becomes simulation steps.

A policy turns the frame time ``dt`` (s, measured with ``time.perf_counter``; pygame's
``Clock.tick`` returns whole milliseconds) into a plan ``[h1, h2, ...]`` of steps for
the world. Policies live in the ``TIMESTEPS`` registry, in hotkey order:

``fixed``     accumulator of real time, steps of one ``h``, at most ``max_steps`` a
              frame; the excess is dropped and counted (no spiral of death); ``alpha``
              is the fraction of a step left over, for interpolated rendering.
``variable``  the real frame time as it comes, clamped against stalls, optionally
              split into substeps; this is where TCV earns its keep.
``random``    seeded random steps around a nominal ``h`` (article 001's experiment).
``replay``    a recorded step trace played back bit for bit.

Every step a policy returns is finite and positive: zero, negative or non-finite frame
times are rejected (counted in ``rejected``) and never reach an integrator, since
Time-Corrected Verlet divides by the previous step. Time is accounted exactly:
``real == simulated + pending + dropped`` (``pending`` is the fixed accumulator or the
variable carry), up to round-off.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass
class TimeBook:
    """Where real time went: ``real == simulated + pending + dropped``."""

    real: float = 0.0
    simulated: float = 0.0
    dropped: float = 0.0
    rejected: int = 0      # frames with a zero, negative or non-finite dt
    frames: int = 0
    steps: int = 0


class TimestepPolicy:
    """Base class: subclasses implement ``_plan(dt) -> list[float]``."""

    name: str = ""
    label: str = ""
    #: Whether the steps change from one to the next (all but the fixed step's).
    varies: bool = True

    def __init__(self) -> None:
        self.book = TimeBook()
        self.last_plan: list[float] = []

    @property
    def alpha(self) -> float:
        """Render interpolation fraction in ``[0, 1)`` (0 unless the policy accumulates)."""
        return 0.0

    @property
    def pending(self) -> float:
        """Real time received but not yet simulated nor dropped (s)."""
        return 0.0

    @property
    def nominal_h(self) -> float:
        """A representative step (s), used to start an integrator before the first frame."""
        raise NotImplementedError

    def plan(self, dt: float, limit: float | None = None) -> list[float]:
        """The steps to take for a frame that lasted ``dt`` seconds of real time.
        ``limit``: simulate at most that much of it, the rest dropped (the caller's
        physics cannot keep up with real time: see ``Session.update``)."""
        try:
            dt = float(dt)
        except (TypeError, ValueError):
            dt = math.nan
        if not (math.isfinite(dt) and dt > 0.0):
            self.book.rejected += 1
            self.last_plan = []
            return []
        self.book.real += dt
        self.book.frames += 1
        if limit is not None and dt > limit > 0.0:
            self.book.dropped += dt - limit
            dt = limit
        steps = self._plan(dt)
        self.book.simulated += math.fsum(steps)
        self.book.steps += len(steps)
        self.last_plan = steps
        return steps

    def _plan(self, dt: float) -> list[float]:
        raise NotImplementedError

    def describe(self) -> str:
        return self.label


class FixedStep(TimestepPolicy):
    """Fixed ``h`` fed by an accumulator (Gaffer's "Fix your timestep", Matter.js Runner).

    Each frame adds ``dt`` to the accumulator and takes ``floor(acc / h)`` steps, at most
    ``max_steps``; when the cap bites, the whole excess is dropped (counted in
    ``book.dropped``) and only the sub-step remainder is kept, so a 5 s stall costs
    ``max_steps`` steps, not a spiral of death.
    """

    varies = False

    name, label = "fixed", "fixed h"

    def __init__(self, h: float = 1 / 60, max_steps: int = 8) -> None:
        super().__init__()
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"fixed step h must be a positive finite number, got {h!r}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps!r}")
        self.h = float(h)
        self.max_steps = int(max_steps)
        self.acc = 0.0

    @property
    def nominal_h(self) -> float:
        return self.h

    @property
    def alpha(self) -> float:
        return min(max(self.acc / self.h, 0.0), 1.0 - 1e-12)

    @property
    def pending(self) -> float:
        return self.acc

    def _plan(self, dt):
        self.acc += dt
        # The tiny relative slack counts a step whose time is there up to round-off
        # (60 frames of 1/60 s must give 60 steps, not 59).
        n = int(math.floor(self.acc / self.h * (1.0 + 1e-12)))
        if n > self.max_steps:
            keep = self.acc - n * self.h          # remainder below one step
            self.book.dropped += (n - self.max_steps) * self.h
            n = self.max_steps
            self.acc = n * self.h + keep
        self.acc -= n * self.h
        if self.acc < 0.0:                        # the slack above, never below zero
            self.book.dropped += self.acc
            self.acc = 0.0
        return [self.h] * n

    def describe(self):
        return f"fixed h={self.h * 1e3:.2f} ms"


class VariableStep(TimestepPolicy):
    """The real frame time as the step, as a game loop that follows the display does.

    ``dt`` above ``max_frame`` (a stall: the window was dragged, a breakpoint) is clamped
    and the excess dropped. Frames shorter than ``min_step`` are carried into the next
    frame rather than taken as tiny steps. The frame is split into ``substeps`` equal
    steps, more if needed so that no step exceeds ``max_step``.
    """

    name, label = "variable", "variable (frame dt)"

    def __init__(self, substeps: int = 1, max_frame: float = 0.1, max_step: float = 1 / 30,
                 min_step: float = 1e-4, nominal: float = 1 / 60) -> None:
        super().__init__()
        if substeps < 1:
            raise ValueError(f"substeps must be >= 1, got {substeps!r}")
        if not (0 < min_step <= max_step and 0 < max_frame):
            raise ValueError("need 0 < min_step <= max_step and max_frame > 0")
        self.substeps = int(substeps)
        self.max_frame = float(max_frame)
        self.max_step = float(max_step)
        self.min_step = float(min_step)
        self.nominal = float(nominal)
        self.carry = 0.0

    @property
    def nominal_h(self) -> float:
        return self.nominal / self.substeps

    @property
    def pending(self) -> float:
        return self.carry

    def _plan(self, dt):
        total = self.carry + dt
        self.carry = 0.0
        if total > self.max_frame:
            self.book.dropped += total - self.max_frame
            total = self.max_frame
        if total < self.min_step:
            self.carry = total
            return []
        n = max(self.substeps, math.ceil(total / self.max_step - 1e-12))
        return [total / n] * n

    def describe(self):
        return f"variable x{self.substeps}" if self.substeps > 1 else "variable"


class RandomStep(TimestepPolicy):
    """Seeded random steps ``h * U(1 - spread, 1 + spread)``, one per frame.

    The experiment of article 001: it decouples the simulation from the wall clock
    (simulated time advances by about ``h`` a frame whatever the frame took) so that a
    run is reproducible from its seed; the real time not simulated is counted as
    dropped, and a frame that is shorter than its random step borrows the difference
    (dropped goes negative). With ``spread = 1/3`` consecutive steps differ by a ratio
    within ``[0.5, 2]``.
    """

    name, label = "random", "random h"

    def __init__(self, h: float = 1 / 60, spread: float = 1 / 3, seed: int = 0) -> None:
        super().__init__()
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"h must be a positive finite number, got {h!r}")
        if not (0 <= spread < 1):
            raise ValueError(f"spread must be in [0, 1), got {spread!r}")
        self.h, self.spread, self.seed = float(h), float(spread), int(seed)
        self.rng = np.random.default_rng(self.seed)

    @property
    def nominal_h(self) -> float:
        return self.h

    def _plan(self, dt):
        h = self.h * float(self.rng.uniform(1.0 - self.spread, 1.0 + self.spread))
        self.book.dropped += dt - h
        return [h]

    def describe(self):
        return f"random h±{self.spread * 100:.0f}% seed {self.seed}"


@dataclass
class StepTrace:
    """A recorded sequence of plans: ``frames[i]`` is the list of steps of frame ``i``
    (its file, read and written: ``sandbox/steptrace.py``)."""

    frames: list[list[float]] = field(default_factory=list)

    def record(self, plan: list[float]) -> None:
        self.frames.append([float(h) for h in plan])

    @property
    def steps(self) -> np.ndarray:
        return np.array([h for f in self.frames for h in f], dtype=np.float64)


class ReplayStep(TimestepPolicy):
    """Plays a :class:`StepTrace` back exactly, one recorded frame per frame.

    The real frame time is ignored (the difference is booked as dropped, negative when
    the trace ran ahead). At the end of the trace it loops if ``loop``, else it takes
    no more steps and ``finished`` is True.
    """

    name, label = "replay", "replay trace"

    def __init__(self, trace: StepTrace | None = None, loop: bool = False) -> None:
        super().__init__()
        self.trace = trace if trace is not None else StepTrace()
        self.loop = loop
        self.index = 0

    @property
    def nominal_h(self) -> float:
        """The trace's first step (1/60 s for an empty one). The first non-empty frame's,
        not ``trace.steps[0]``: that array of every step took 31 ms to build at 100,000
        frames, twice a frame for the panel (a half-hour replay ran at 16 fps)."""
        for frame in self.trace.frames:
            if len(frame):
                return float(frame[0])
        return 1 / 60

    @property
    def finished(self) -> bool:
        return self.index >= len(self.trace.frames) and not (self.loop and self.trace.frames)

    def _plan(self, dt):
        if self.index >= len(self.trace.frames):
            if not (self.loop and self.trace.frames):
                self.book.dropped += dt
                return []
            self.index = 0
        steps = list(self.trace.frames[self.index])
        self.index += 1
        self.book.dropped += dt - math.fsum(steps)
        return steps

    def describe(self):
        return f"replay {self.index}/{len(self.trace.frames)}"


#: Every policy, in the order the hotkey cycles through them.
TIMESTEPS: dict[str, type[TimestepPolicy]] = {
    cls.name: cls for cls in (FixedStep, VariableStep, RandomStep, ReplayStep)
}


def make_policy(name: str, **kwargs) -> TimestepPolicy:
    """A new policy from the registry; ``ValueError`` listing the valid names."""
    try:
        cls = TIMESTEPS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown timestep mode {name!r}; valid modes: {', '.join(TIMESTEPS)}") \
            from None
    return cls(**kwargs)
