"""Compile (or load from numba's disk cache) every kernel, in the foreground or behind the
first frames.

``warm_up()`` does it now, in this thread (the bench, scripts). The app calls
``start_background()`` instead and draws its first frame at once::

    handle = warmup.start_background()
    ...every frame: hud_text = handle.status()

Until the kernels are ready every world runs the numpy references (the same numbers as
the kernels, bit for bit: the tests compare them), then all of them switch to the
compiled kernels between two calls (``backend.set_ready``). How:

1. If the kernels are not known to be in the cache (a first start, or the kernel
   sources changed), a child process (``python -m sandbox.warmup``, at a lower
   priority) compiles them and fills the disk cache: about two minutes of CPU for
   everything on a 2-core machine (the contact stages ~75 s of it), on the other
   core, with this process's interpreter lock untouched. It does the core's other
   kernels first (constraints, Verlet, the view's strain, the Lagrange solvers: ~25 s,
   the part "kernels" that they all follow) and says so; the contact stages follow.
   The window asks for its first level's float type only: the worlds of another one
   run numpy (``backend.hold``) until :meth:`Warmup.need_dtype` has compiled theirs
   behind the frames (the 200x200 cloth is float32; most levels are float64).
   A world without contacts needs no contact stages, which are most of the
   compiling: the app leaves them out for such a first level (``contact_dtypes=()``;
   contacts then stay on the numpy references, never compiled inside a frame) and
   :meth:`Warmup.need_contacts` adds them behind the frames when a world with contacts
   first appears (a level switch, build mode's first shape), in its float type: the
   contact stages are compiled per float type too, and a type held for them runs its
   contacts on numpy meanwhile (``backend.hold`` is per part).
2. A thread of this process loads each part from the cache as soon as it is there
   (well under a second, during which frames run slower but do not stop) and switches
   every world over at its next step, never in the middle of one (``backend.settle``):
   cloths get their compiled kernels before the contact stages.

When the cache is known to be full (a marker file beside it, named by a hash of the
kernel sources, numba's version and the float types), the worlds use the compiled
kernels from the first frame (a kernel's first call loads it in ~0.1 s) and the thread
loads the others after ``WARM_DELAY_S``, so that a level switch does not wait.

The kernel modules warm themselves on bare arrays (``_core``: ``kernels.warm_up`` and
the like); the contact pipeline is warmed by running tiny worlds through it, which is why
this sits above :mod:`world` instead of inside the contact package (``collide``).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from . import levels
from .sim import backend, kernels, lagrange, view

ROOT = Path(__file__).resolve().parents[1]       # the folder holding the sandbox package
#: The float types a world can have (``WorldConfig.dtype``).
FLOAT_TYPES = ("float64", "float32")
#: With a warm cache, seconds the loading thread leaves the first frames alone.
WARM_DELAY_S = 1.5


#: Said once on stderr when :func:`warm_up` is about to fill an empty cache in the
#: foreground (a script, a game's start): minutes on 2 cores must not pass in silence.
COMPILING = ("verlet-sandbox: compiling the physics kernels for this machine (once: a few "
             "minutes on 2 cores; numba caches them, later starts load them in under a "
             "second). start_background() runs the numpy kernels meanwhile instead.")


def warm_up(dtypes=("float64", "float32"), contact_dtypes=None, extra=(),
            on_kernels=None, on_extra=None, tell: bool = True) -> None:
    """Every kernel for worlds of the float types ``dtypes``, the first (the level's)
    first; then each ``"module:function"`` of ``extra`` (other numba kernels, e.g. a
    renderer's); then the contact stages for ``contact_dtypes`` (default: ``dtypes``;
    ``()`` skips them), the longest part; then the kernels of the other float types (for
    a level switch: the level on screen does not wait for them). ``on_kernels()`` is
    called once the first type's constraint and Verlet kernels are done, ``on_extra()``
    once the extras are: a cloth then runs and is drawn compiled while the contact
    stages still compile."""
    if not backend.INSTALLED:
        return
    dtypes = tuple(dtypes)
    cd = dtypes if contact_dtypes is None else tuple(contact_dtypes)
    marker = _marker(_fingerprint(dtypes, cd, extra))
    if tell and not backend.quiet and not marker.exists():
        print(COMPILING, file=sys.stderr, flush=True)
    with backend.loading():
        _core(dtypes[:1])
        if on_kernels is not None:
            on_kernels()
    _extras(extra)
    if on_extra is not None:
        on_extra()
    with backend.loading():
        _contacts(cd)
        if dtypes[1:]:
            _core(dtypes[1:])
    _mark(marker)


def _core(dtypes) -> None:
    """The core's kernels but the contact stages, for worlds of the float types
    ``dtypes``: the step's (``kernels.warm_up``), the view's strain and the exact link
    solvers (Lagrange, RATTLE/SHAKE: float64 worlds only). They are all the part
    "kernels" of ``backend.PARTS``, used as soon as it is ready: the strain and the
    solvers were extras compiled after it, and in that gap the window's frame compiled
    the strain itself (a hitch, and the library's "compiling" notice on the terminal)
    or, on a switch to Lagrange, the solvers (6 s of frozen frames)."""
    kernels.warm_up(dtypes)
    view.warm_up(dtypes)
    lagrange.warm_up()


def _mark(marker: Path) -> None:
    """Say beside the cache that it is full for these kernels (the next start uses it
    from the first frame); not when numba only pretends to compile
    (``NUMBA_DISABLE_JIT``): nothing went into the cache."""
    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.touch()
    except OSError:                                  # pragma: no cover - read-only cache
        pass


def _extras(extra) -> None:
    for spec in extra:
        mod, _, fn = spec.partition(":")
        getattr(importlib.import_module(mod), fn)()


#: The warm-up's scenes (``levels/test/``): every shape type, walls and particle pairs;
#: the same with 400 more balls and 64 shapes, which takes the shape grid's broad phase.
WARM_SCENES = ("warm_contacts", "warm_crowd")


def _contacts(dtypes) -> None:
    """Compile (or load from the disk cache) every contact kernel on the level files of
    :data:`WARM_SCENES`, for worlds of the float types ``dtypes``, in whole compiled
    frames and substep by substep (a grabbed particle)."""
    for dtype in (np.dtype(d).name for d in dtypes):
        for scene in WARM_SCENES:
            level = levels.load_level(levels.LEVELS_DIR / "test" / f"{scene}.toml")
            w = levels.build_world(levels.with_world(level, dtype=dtype))
            w.colliders.backend = "compiled"
            for _ in range(3):
                w.step(1 / 60)
            # A hand on a particle: the substep path's stages (begin.begin, project,
            # finish); not loaded here, the first grab in the window loaded them
            # (0.13 s idle, 0.34 s seen with the window's own load). Pulled far enough
            # that its Verlet list goes stale: the substep path rebuilds it from Python
            # (broad.pair_list), which the first long drag loaded otherwise.
            w.grab(0)
            w.drag_to(w.particles.x[0] + 0.5)
            for _ in range(3):
                w.step(1 / 60)
            w.release()


# --------------------------------------------------------------------------- background

def _cache_dir() -> Path:
    """Where numba keeps this package's kernels (``NUMBA_CACHE_DIR`` or ``__pycache__``);
    ``backend.drop_stale_kernels`` clears the marks here with the kernels."""
    if backend.INSTALLED:
        return backend._marker_dir()
    return Path(backend.__file__).resolve().parent / "__pycache__"   # pragma: no cover


def _fingerprint(dtypes, contact_dtypes, extra) -> str:
    """What a filled cache was filled for: the kernel sources, the versions, the types."""
    h = hashlib.sha256()
    here = Path(backend.__file__).resolve().parent      # the core, sandbox/sim
    # Every module of the core: a list of names went stale when modules moved.
    for src in sorted(here.rglob("*.py")):
        h.update(src.relative_to(here).as_posix().encode())
        try:
            h.update(src.read_bytes())
        except OSError:                                # pragma: no cover
            pass
    h.update(Path(__file__).read_bytes())           # and the warm-up's own scenes
    for spec in extra:
        mod = importlib.util.find_spec(spec.partition(":")[0])
        if mod is not None and mod.origin:
            h.update(Path(mod.origin).read_bytes())
    # numba's version without importing it (that waits until a kernel is needed).
    spec = importlib.util.find_spec("numba") if backend.INSTALLED else None
    if spec is not None and spec.origin:
        version = Path(spec.origin).with_name("_version.py")
        h.update(version.read_bytes() if version.exists() else spec.origin.encode())
    h.update(f"{sys.version}|{sorted(dtypes)}|{sorted(contact_dtypes)}|{list(extra)}".encode())
    return h.hexdigest()[:20]


def _marker(fingerprint: str) -> Path:
    return _cache_dir() / f"sandbox-warm-{fingerprint}"


class Warmup:
    """A running (or finished) background warm-up; see :func:`start_background`.

    ``ready``: the compiled kernels are in use. ``status()``: one short line for the
    HUD. ``phase``: "compiling" (child process filling the cache), "loading" (this
    process loading it), "ready", "numpy" (numba missing or the warm-up failed: the
    numpy references stay). ``error``: why it failed, if it did. ``seconds``: from the
    start to ready (None before). ``wait(timeout)``: block until done.
    """

    def __init__(self, dtypes, contact_dtypes, extra, use_process: bool) -> None:
        self.dtypes = tuple(dtypes)
        self.contact_dtypes = tuple(contact_dtypes)
        self.extra = tuple(extra)
        self.use_process = use_process
        self.warm = False               # the cache was filled for these kernels before
        self.numpy_first = False        # numpy until loaded, even when warm
        # Switched over already: backend.PARTS, and "extras" (their kernels loaded).
        self.ready_parts: set[str] = set()
        self.phase = "loading"
        self.error: str | None = None
        self.seconds: float | None = None
        self._t0 = time.monotonic()
        self._proc: subprocess.Popen | None = None
        self._done = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="kernel-warm-up", daemon=True)
        self._later: threading.Thread | None = None      # the last phase asked for later
        # What the first phase builds, fixed now: need_contacts() and need_dtype() add to
        # dtypes and contact_dtypes for phases of their own, which compile in the child;
        # read by the first phase's loading, they were compiled in this process instead
        # (a minute of the compiler holding the interpreter: frozen frames).
        self._first = (self.dtypes, self.contact_dtypes, self.extra)
        self._building = "physics"      # what the phase compiling now builds (status)

    @property
    def ready(self) -> bool:
        return self.phase == "ready"

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def status(self) -> str:
        # In a learner's words: what is slow, why, for how long; "kernels" and "numpy"
        # mean nothing to someone who opened a window to watch a pendulum.
        if self.phase == "compiling":
            # After the physics: the contact stages if asked for, else the drawing's.
            what = self._building
            if self._later is None and "kernels" in self.ready_parts:
                what = "collisions" if self.contact_dtypes else "drawing"
            first = "first start: " if self._later is None else ""
            return (f"{first}building fast {what} ({time.monotonic() - self._t0:.0f}"
                    " s); slower frames meanwhile, the same motion")
        if self.phase == "loading":
            compiled = self.warm and not self.numpy_first     # the worlds' kernels now
            return ("loading fast physics" if compiled else
                    "loading fast physics: slower frames for a moment, the same motion")
        if self.phase == "ready":
            return "fast physics ready"
        if self.error:
            if "kernels" in self.ready_parts:
                return "compiled kernels, numpy contacts (compiling failed)"
            return "numpy kernels (compiling failed)"
        return "numpy kernels (numba not installed)"

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the warm-up has finished; True if the compiled kernels are in use
        (switched to now: no step is under way in the waiting thread)."""
        self._done.wait(timeout)
        backend.settle()
        return self.ready

    def close(self) -> None:
        """Stop the child process if it is still compiling (the app is closing)."""
        self._closed = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:        # pragma: no cover
                proc.kill()

    def _phase(self, kinds: tuple, load) -> None:
        """One phase of the warm-up, for ``kinds`` = ``(dtypes, contact_dtypes,
        extra)``: fill the cache in the child unless it is known to be full for them,
        ``load()`` it here, then ready and mark it. A failure leaves the numpy
        references running (still correct) and says why."""
        fp = _fingerprint(*kinds)
        try:
            if self.use_process and not _marker(fp).exists():
                self.phase = "compiling"
                self._compile_in_child(*kinds)
                if self._closed:
                    raise RuntimeError("closed")
            self.phase = "loading"
            load()
            self.seconds = time.monotonic() - self._t0
            self.phase = "ready"
            _mark(_marker(fp))
        except Exception as e:
            self.error = f"{type(e).__name__}: {e}"
            self.phase = "numpy"
        finally:
            self._phase_done()

    def _phase_done(self) -> None:
        """Done, unless a phase asked for meanwhile is still to run (:attr:`done` and
        :meth:`wait` are about all of them)."""
        if self._later is None or threading.current_thread() is self._later:
            self._done.set()

    def _run(self) -> None:
        self._phase(self._first, self._load)

    def _load(self) -> None:
        if self.warm:
            # The cache is full and the worlds already use it (a first call loads a
            # kernel in ~0.1 s): let the first frames have the interpreter, then load
            # the rest so that a level switch does not wait for it.
            time.sleep(WARM_DELAY_S)
        dtypes, contact_dtypes, extra = self._first
        if "kernels" not in self.ready_parts:
            with backend.loading():
                _core(dtypes[:1])                     # the level's float type
            self._part_ready("kernels")
        warm_up(dtypes, contact_dtypes, extra,
                on_extra=lambda: self.ready_parts.add("extras"), tell=False)
        for part in self.parts():
            self._part_ready(part)

    def parts(self) -> tuple[str, ...]:
        """The parts of ``backend.PARTS`` the first phase makes ready: the contact stages
        only when it was started with them (a level without contacts compiles none
        until :meth:`need_contacts`)."""
        return backend.PARTS if self._first[1] else ("kernels",)

    def need_contacts(self, dtype="float64") -> bool:
        """A world with contacts of the float type ``dtype`` is on screen: compile (or
        load) the contact stages for that type behind the frames too, if this warm-up
        left them out; meanwhile its contacts run on numpy (``backend.usable("contacts",
        dtype)`` stays False: a first contact step never waits for the compiler).
        Returns True if that starts now (the HUD then shows :meth:`status` again until
        :attr:`done`)."""
        name = np.dtype(dtype).name
        if name in self.contact_dtypes or not backend.INSTALLED:
            return False
        self.contact_dtypes += (name,)
        self._then("collisions", (self.dtypes[:1], (name,), ()),
                   lambda: self._load_contacts(name))
        return True

    def need_dtype(self, dtype) -> bool:
        """A world of the float type ``dtype`` is on screen: if this warm-up left that
        type out (it compiles the first level's only), compile (or load) its constraint
        and Verlet kernels behind the frames; meanwhile its worlds run numpy
        (``backend.hold``: a first step of it never waits for the compiler). Returns
        True if that starts now."""
        name = np.dtype(dtype).name
        if name in self.dtypes or not backend.INSTALLED:
            return False
        self.dtypes += (name,)
        self._then(f"{name} physics", ((name,), (), ()),
                   lambda: self._load_dtype(name))
        return True

    def _then(self, what: str, kinds: tuple, load) -> None:
        """A phase after those before it (never beside them: one child compiles at a
        time), for ``kinds`` (:meth:`_phase`)."""
        before = self._later or self._thread
        self._done.clear()

        def run() -> None:
            before.join()
            if self.phase == "numpy":           # it failed: the numpy references stay
                self._phase_done()
                return
            self._t0 = time.monotonic()
            self._building = what
            self._phase(kinds, load)

        self._later = threading.Thread(target=run, name=f"warm-up: {what}", daemon=True)
        self._later.start()

    def _load_contacts(self, name: str) -> None:
        with backend.loading():
            _contacts((name,))
        self._part_ready("contacts")
        backend.release_between_steps(name, "contacts")

    def _load_dtype(self, name: str) -> None:
        with backend.loading():
            _core((name,))
        backend.release_between_steps(name, "kernels")

    def _part_ready(self, part: str) -> None:
        backend.ready_between_steps(part)         # never in the middle of a step
        self.ready_parts.add(part)

    def _compile_in_child(self, dtypes, contact_dtypes, extra) -> None:
        cmd = [sys.executable, "-m", "sandbox.warmup", "--dtypes", ",".join(dtypes),
               "--contact-dtypes", ",".join(contact_dtypes) or "none"]
        for spec in extra:
            cmd += ["--extra", spec]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH"))
                                            if p)
        self._proc = subprocess.Popen(cmd, cwd=str(ROOT), env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        errors: list[bytes] = []
        drain = threading.Thread(target=lambda: errors.append(self._proc.stderr.read()),
                                 daemon=True)
        drain.start()
        for line in self._proc.stdout:
            # The child has the constraint and Verlet kernels in the cache: load them
            # here and switch the cloths over while it goes on with the contact stages;
            # then the extras (the drawing's kernels: the app switches its renderer).
            if line.strip() == b"kernels ready" and not self._closed:
                with backend.loading():
                    _core(dtypes[:1])
                self._part_ready("kernels")
            elif line.strip() == b"extras ready" and not self._closed:
                _extras(extra)
                self.ready_parts.add("extras")
        self._proc.wait()
        drain.join(10)
        err = b"".join(errors)
        if self._proc.returncode != 0 and not self._closed:
            tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no message"]
            raise RuntimeError(f"warm-up process exited {self._proc.returncode}: {tail[0]}")


def start_background(dtypes=FLOAT_TYPES, contact_dtypes=("float64",), extra=(),
                     use_process: bool = True, numpy_first: bool = False) -> Warmup:
    """Make the compiled kernels ready behind the first frames; returns at once.

    Every world runs the numpy references until ``handle.ready``, then the compiled
    kernels (the switch is process-wide). ``dtypes``: float types of the constraint and
    Verlet kernels, both by default (a game's worlds may have either); a program that
    knows its worlds' type lists that one (the window: its first level's): the worlds of
    any other float type run numpy, ``backend.hold``, until :meth:`Warmup.need_dtype`
    has compiled theirs, so no kernel is compiled for a type no world uses;
    ``contact_dtypes``: of the contact stages (the shipped levels with contacts run
    float64; ``()``: none until :meth:`Warmup.need_contacts`), held apart: a float type
    whose constraint kernels are compiled runs its contacts on numpy until its contact
    stages are too;
    ``extra``:
    ``"module:function"`` warm-ups of other kernels to compile
    in the same child and load in the same thread (e.g. ``"sandbox.app.raster:warm_up"``).
    ``numpy_first``: even with a full cache, run the numpy references until the
    loading thread has the kernels (after ``WARM_DELAY_S``): for a small first world,
    whose numpy frames cost a few ms, where loading the kernels on the first call
    (numba's own start, ~0.9 s here) would hold back the first frame.
    """
    handle = Warmup(dtypes, contact_dtypes, extra, use_process)
    if not backend.INSTALLED:
        handle.phase = "numpy"
        handle._done.set()
        return handle
    handle.warm = _marker(_fingerprint(*handle._first)).exists()
    handle.numpy_first = numpy_first
    # A warm cache is used from the first frame, unless the first world is small; the
    # contact stages only if they are part of it (else a first contact step would
    # compile them inside a frame: contacts run on numpy until need_contacts()).
    backend.set_ready(False)
    for part in handle.parts():
        backend.set_ready(handle.warm and not numpy_first, part)
    for other in FLOAT_TYPES:
        backend.hold(other, other not in handle.dtypes, "kernels")
        backend.hold(other, other not in handle.contact_dtypes, "contacts")
    handle._thread.start()
    return handle


def _main(argv=None) -> int:
    """The child process of :func:`start_background`: fill the disk cache, then exit."""
    ap = argparse.ArgumentParser(prog="python -m sandbox.warmup",
                                 description="compile the physics kernels into numba's cache")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--contact-dtypes", default="float64")
    ap.add_argument("--extra", action="append", default=[])
    args = ap.parse_args(argv)
    backend.quiet = True            # compiling is this process's whole job
    try:
        os.nice(5)                  # the window's process comes first
    except (AttributeError, OSError):            # pragma: no cover
        pass
    cd = () if args.contact_dtypes == "none" else tuple(args.contact_dtypes.split(","))
    dtypes, extra = tuple(args.dtypes.split(",")), tuple(args.extra)
    # warm_up marks the cache full when done, so that the next start uses it from the
    # first frame even if the window that started this closed before loading it all.
    warm_up(dtypes, cd, extra,
            on_kernels=lambda: print("kernels ready", flush=True),
            on_extra=lambda: print("extras ready", flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
