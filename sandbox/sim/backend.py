"""The one seam between the numpy references and the compiled kernels: the only module
that imports numba or decides whether compiled code runs.

The choice. Every setting that picks a backend (``Constraints.backend``,
``Colliders.backend``, the integrators' ``backend``, ``forces.point_gravity``'s, the
renderer's, ``RigidLinks.backend``) takes one of :data:`BACKENDS` and asks
:func:`compiled`; whether arrays can go to a kernel as they are is :func:`fits`; a
kernel is written with :func:`njit` (``collide.jit`` dresses it for the contact
kernels), at a module's top level, with or without numba.

``INSTALLED``: numba is installed. ``usable()``: the compiled kernels may be called
now. It is True from the start in scripts, tests and the bench (a first call compiles or
loads a kernel from numba's disk cache, as before). The app instead starts with
``warmup.start_background``, which turns it off until every kernel is compiled and
loaded, so the first frames run the numpy references (the same numbers: the tests
compare them bit for bit) and no frame waits for the compiler. The loading thread may
call the kernels before everyone else (``loading()``). ``compiled("auto", part)`` is
``usable(part)``, read at every call, so every caller switches at the same moment. The
warm-up compiles the kernels for the float type of the level on screen only: another
float type is *held* (:func:`hold`) until a world of it appears and its kernels are
compiled behind the frames, and ``compiled("auto", part, dtype)`` says no for it
meanwhile (the kernels are compiled per float type: a held type's first call would
compile inside a frame).

numba is imported when a kernel is first needed, not when the kernel modules are.
Importing it takes ~0.35 s here (0.7 s and more with other programs busy), a third of
a warm start, and the app's first frames run the numpy references anyway. So ``njit``
returns a stand-in (:class:`Kernel`) that keeps the function and its options; the first
``usable()`` that answers yes, or the first call of a stand-in, runs
:func:`compile_all`: it settles where numba may write its cache, imports numba, makes
every kernel's dispatcher (compiling nothing yet) and puts the dispatchers where the
stand-ins were, in every module's names and the kernels' closures, so that compiled
kernels calling each other see dispatchers, and Python callers call numba directly.
``prange`` is ``range`` until then. If numba is not installed, cannot be imported or can
cache nowhere, ``usable()`` stays False (the numpy references) and a stand-in runs its
function as Python: the kernel modules import and define the same names either way.

Stale kernels. numba's disk cache knows a kernel's own source file, not the files of
the kernels it calls and compiles into itself: after an update that changed only
``collide/broad.py``, ``collide/frame.py``'s cached whole frame would go on running
the old broad phase. So :func:`compile_all` drops this package's cached kernels when
the sources of the kernel modules differ from those the cache was filled from
(:func:`drop_stale_kernels`, a stamp file beside the cache); they compile again.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import stat
import sys
import tempfile
import threading
from collections import deque
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

import numpy as np


def _numba_installed() -> bool:
    if "numba" in sys.modules:
        return sys.modules["numba"] is not None
    try:
        return importlib.util.find_spec("numba") is not None
    except (ImportError, ValueError):                     # pragma: no cover
        return False


INSTALLED = _numba_installed()

PACKAGE = Path(__file__).resolve().parents[1]     # the sandbox package
STAMP = "sandbox-kernel-sources"


def _kernel_sources() -> list[Path]:
    """The package's modules that define compiled kernels."""
    out = []
    for src in sorted(PACKAGE.rglob("*.py")):
        try:
            text = src.read_text(encoding="utf-8")
        except OSError:                                   # pragma: no cover
            continue
        if "njit" in text or "@jit" in text:
            out.append(src)
    return out


def _cache_dir_of(src: Path) -> Path:
    """Where numba keeps the kernels of ``src`` (``NUMBA_CACHE_DIR`` or ``__pycache__``
    beside it, as numba's cache locators put them)."""
    from numba.core import config
    from numba.core.caching import UserProvidedCacheLocator
    if config.CACHE_DIR:
        return Path(config.CACHE_DIR) / UserProvidedCacheLocator.get_suitable_cache_subpath(
            str(src))
    return src.parent / "__pycache__"


def _marker_dir() -> Path:
    """Where ``warmup`` marks the cache full (its ``_cache_dir``): numba's cache folder
    (``NUMBA_CACHE_DIR``, read without importing numba before it is needed)."""
    if _numba is not None:
        from numba.core import config
        folder = config.CACHE_DIR
    else:
        folder = os.environ.get("NUMBA_CACHE_DIR", "")
    return Path(folder) if folder else PACKAGE / "sim" / "__pycache__"


def drop_stale_kernels() -> int:
    """Delete this package's cached kernels if the kernel sources changed since the
    cache was filled (or the cache predates the stamp); returns the files deleted.
    Harmless when another process loads meanwhile: numba skips a missing file and
    compiles. Never raises: at worst the stale check is skipped."""
    if not INSTALLED:
        return 0
    try:
        sources = _kernel_sources()
        h = hashlib.sha256()
        for src in sources:
            h.update(src.name.encode() + src.read_bytes())
        digest = h.hexdigest()
        stamp = _cache_dir_of(PACKAGE / "sim" / "backend.py") / STAMP
        try:
            if stamp.read_text() == digest:
                return 0
        except OSError:
            pass
        dropped = 0
        for src in sources:
            folder = _cache_dir_of(src)
            for f in list(folder.glob(f"{src.stem}.*.nbi")) + list(
                    folder.glob(f"{src.stem}.*.nbc")):
                try:
                    f.unlink()
                    dropped += 1
                except OSError:                           # pragma: no cover
                    pass
        # And the warm-up's marks that the cache was full (sandbox/warmup.py): it no longer
        # is, so the next start takes the compiling path and says so.
        for f in _marker_dir().glob("sandbox-warm-*"):
            try:
                f.unlink()
            except OSError:                               # pragma: no cover
                pass
        stamp.parent.mkdir(parents=True, exist_ok=True)
        tmp = stamp.with_name(f"{STAMP}.{os.getpid()}.tmp")
        tmp.write_text(digest)
        os.replace(tmp, stamp)
        return dropped
    except Exception:                                     # pragma: no cover - read-only
        return 0


PARTS = ("kernels", "contacts")         # the constraint/Verlet kernels, the contact stages
_ready: set[str] = set(PARTS) if INSTALLED else set()
_held: set[tuple[str, np.dtype]] = set()    # (part, float type) not compiled yet (hold)
_local = threading.local()


def usable(part: str = "kernels", dtype=None) -> bool:
    """True when the calling thread may use the compiled kernels of ``part`` (the first
    yes imports numba: :func:`compile_all`), for arrays of the float type ``dtype``
    (None: any; one held for ``part``: no, unless this thread is loading them)."""
    if getattr(_local, "loading", False):
        return _numba is not None or compile_all()
    if part in _ready and not (_held and dtype is not None and (part, dtype) in _held):
        return _numba is not None or compile_all()
    return False


def hold(dtype, held: bool = True, part: str | None = None) -> None:
    """Keep "auto" off the compiled kernels of ``part`` (None: every part) for arrays of
    the float type ``dtype`` (True) until they are compiled and loaded, or let it use
    them again (False). Per part: a float type whose constraint kernels are in may
    still lack its contact stages (a float32 world with shapes), which would otherwise
    compile inside a frame."""
    keys = {(p, np.dtype(dtype)) for p in (PARTS if part is None else (part,))}
    if held:
        _held.update(keys)
    else:
        _held.difference_update(keys)


def held(part: str | None = None) -> tuple[str, ...]:
    """The float types :func:`hold` keeps on numpy now for ``part`` (None: for some
    part), by name."""
    return tuple(sorted({d.name for p, d in _held if part is None or p == part}))


def set_ready(ready: bool, part: str | None = None) -> None:
    """Switch every thread to the compiled kernels (True) or to the numpy references,
    for one ``part`` of :data:`PARTS` or (None) all of them; all of them ready also lets
    go of every float type held (:func:`hold`): the default of scripts and tests."""
    parts = PARTS if part is None else (part,)
    if ready and part is None:
        _held.clear()
    for p in parts:
        if ready and INSTALLED:
            _ready.add(p)
        else:
            _ready.discard(p)


#: Switches asked for by the warm-up's loading thread, applied between two steps
#: (:func:`settle`): a switch in the middle of a step ran its first iterations on the
#: numpy references and the rest compiled, whose multipliers are kept in another order,
#: so the step's numbers were neither path's (and a replay of it differed). A deque:
#: threads that step worlds of their own may settle at once, each taking what is left.
_pending: deque[tuple[str | None, np.dtype | None]] = deque()


def ready_between_steps(part: str) -> None:
    """``set_ready(True, part)`` from another thread: at the next :func:`settle`."""
    _pending.append((part, None))


def release_between_steps(dtype, part: str | None = None) -> None:
    """``hold(dtype, False, part)`` from another thread: at the next :func:`settle`."""
    _pending.append((part, np.dtype(dtype)))


def settle() -> None:
    """Apply the switches asked for since the last call, where no step is under way: at
    the start of every step (``pipeline.step``) and when a warm-up is waited for. A
    no-op in a thread that is loading the kernels (its own steps must not switch the
    others' in the middle of theirs)."""
    if not _pending or getattr(_local, "loading", False):
        return
    while True:
        try:
            part, dtype = _pending.popleft()
        except IndexError:          # empty, or emptied by another thread meanwhile
            return
        if dtype is None:                   # a part: ready_between_steps
            set_ready(True, part)
        else:
            hold(dtype, False, part)


def ready(part: str | None = None) -> bool:
    return all(p in _ready for p in (PARTS if part is None else (part,)))


@contextmanager
def loading():
    """Within this block the calling thread uses the compiled kernels even while the
    others still run numpy (the background warm-up loads them this way)."""
    before = getattr(_local, "loading", False)
    _local.loading = INSTALLED
    try:
        yield
    finally:
        _local.loading = before


# --------------------------------------------------------------------------- the choice

#: The one vocabulary of every backend setting:
#:
#: ``"auto"``      the compiled kernels when they may run now (:func:`usable` of the
#:                 caller's part: numba works and the app's warm-up has them ready),
#:                 else the numpy references. The default everywhere.
#: ``"compiled"``  the compiled kernels whenever numba can run at all (:func:`runnable`),
#:                 even while the warm-up still holds the other callers on numpy: an
#:                 explicit request, so a first call may wait for the compiler. Where
#:                 numba cannot run it is an error (``RuntimeError`` saying why), never
#:                 a quiet fall back to numpy: a test comparing the compiled twin with
#:                 its reference must not pass by comparing numpy with numpy.
#: ``"numpy"``     the numpy references.
BACKENDS = ("auto", "compiled", "numpy")


def runnable() -> bool:
    """numba is installed, imports and can cache here: compiled code can run at all
    (the first call imports numba, :func:`compile_all`). The warm-up's gate aside."""
    return INSTALLED and (_numba is not None or compile_all())


def compiled(choice: str, part: str | None = "kernels", dtype=None) -> bool:
    """Whether the caller whose backend setting is ``choice`` (one of :data:`BACKENDS`)
    runs its compiled kernels now. ``part``: which of :data:`PARTS` the caller's
    kernels belong to, for "auto" (the warm-up makes them ready part by part); None for
    kernels the warm-up does not hold back (the drawing: the app keeps the renderer on
    "numpy" itself until they are loaded), where "auto" is :func:`runnable`. ``dtype``:
    the float type of the caller's arrays, for "auto" (a type the warm-up holds,
    :func:`hold`, runs numpy); None where the kernels are float64 only.

    ``ValueError`` for any other ``choice``, naming the valid ones; ``RuntimeError`` for
    "compiled" where numba cannot run. Called every frame (and substep) by the hot
    paths: "auto" costs one call, about what the module attribute it replaces did."""
    if choice == "auto":
        if part is None:
            return runnable()
        return usable(part, dtype)
    if choice == "numpy":
        return False
    if choice == "compiled":
        if runnable():
            return True
        raise RuntimeError(f"backend 'compiled': numba cannot run here "
                           f"({failure() or 'numba is not installed'}); choose 'auto' "
                           "(numpy where numba cannot run) or 'numpy'")
    raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, "
                     f"not {choice!r}")


_F64, _F32 = np.dtype(np.float64), np.dtype(np.float32)


def fits(*arrays: np.ndarray) -> bool:
    """Whether ``arrays`` can go to a compiled kernel as they are: all of one float type,
    float64 or float32 (native byte order: what the kernels are compiled for), each
    C-contiguous. Shapes and writability are the caller's to check. A plain loop: the
    hot paths ask this every frame."""
    dt = arrays[0].dtype
    if not (dt == _F64 or dt == _F32):
        return False
    for a in arrays:
        if a.dtype != dt or not a.flags.c_contiguous:
            return False
    return True


# --------------------------------------------------------------------------- numba, late

_numba = None                   # the numba module once compile_all has run
_failed: str | None = None      # why numba cannot be used, once that is known
_lock = threading.RLock()
_kernels: list[Kernel] = []


class Kernel:
    """A compiled kernel before numba is imported: the function and its ``njit`` options.
    Calling it (or asking for a dispatcher's attribute) runs :func:`compile_all` and
    then the dispatcher, which replaces it in every module that named it; without numba
    it runs the function as Python."""

    def __init__(self, py_func, options: dict) -> None:
        functools.update_wrapper(self, py_func)
        self.py_func = py_func
        self.options = options
        self.dispatcher = None

    def _target(self):
        if self.dispatcher is None:
            compile_all()
        return self.py_func if self.dispatcher is None else self.dispatcher

    def __call__(self, *args, **kwargs):
        target = self.dispatcher
        return (target if target is not None else self._target())(*args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("py_func", "options", "dispatcher"):
            raise AttributeError(name)
        return getattr(self._target(), name)

    def __repr__(self) -> str:
        return f"<kernel {self.__qualname__} ({'compiled' if self.dispatcher else 'lazy'})>"


class _PRange:
    """``prange`` before numba is imported: ``range`` (for the kernels run as Python)."""

    instance: ClassVar[_PRange]

    def __call__(self, *args):
        return range(*args)


prange = _PRange.instance = _PRange()     # the class keeps it: this name is swapped too


def njit(*args, **options):
    """``numba.njit``, made when a kernel is first needed (a :class:`Kernel` until then);
    ``@njit`` and ``@njit(**options)`` (no signatures)."""
    if args and not (len(args) == 1 and callable(args[0]) and not options):
        raise TypeError("njit takes a function or options, not signatures")

    def wrap(fn):
        with _lock:
            if _numba is not None:
                return _numba.njit(**options)(fn)
            k = Kernel(fn, options)
            _kernels.append(k)
            return k
    return wrap(args[0]) if args else wrap


def compile_all() -> bool:
    """Import numba and give every kernel its dispatcher (nothing is compiled yet: numba
    compiles or loads a kernel from its disk cache at its first call). Once; thread
    safe. False (and ``usable()`` False from then on) if numba cannot be used."""
    global _numba, _failed, INSTALLED
    if _numba is not None:
        return True
    with _lock:
        if _numba is not None:
            return True
        if _failed is not None or not INSTALLED:
            return False
        try:
            numba = _settle_cache()
        except Exception as e:  # noqa: BLE001 - any failure: the numpy references
            numba = None
            _failed = f"{type(e).__name__}: {e}"
        if numba is None:
            _failed = _failed or "numba cannot cache its kernels"
            INSTALLED = False
            _ready.clear()
            return False
        drop_stale_kernels()
        for k in _kernels:
            k.dispatcher = numba.njit(**k.options)(k.py_func)
        _numba = numba
        _swap_in(numba)
        _listen_for_compiles()
    return True


#: Said once, on stderr, when a kernel is compiled in a process that did not expect it
#: (a script or a game stepping a world with numba's cache empty): a call that waits a
#: minute must not wait silently. The warm-up (its child, the bench) sets ``quiet``.
COMPILING = ("verlet-sandbox: compiling the physics kernels for this machine (once: up to "
             "a few minutes on 2 cores, then loaded from numba's cache in under a second); "
             "to run on the numpy kernels meanwhile (the same numbers, slower), call "
             "sandbox.sim.backend.set_ready(False) before stepping")
quiet = False
_told = False


def _listen_for_compiles() -> None:
    """Tell the user once when numba compiles (its "numba:compile" event fires on a cache
    miss only, never when a kernel loads from the cache)."""
    from numba.core import event

    class _Tell(event.Listener):
        def on_start(self, ev) -> None:
            global _told
            if not (_told or quiet or getattr(_local, "loading", False)):
                _told = True
                print(COMPILING, file=sys.stderr, flush=True)

        def on_end(self, ev) -> None:
            pass

    event.register("numba:compile", _Tell())


def _swap_in(numba) -> None:
    """Put the dispatchers (and ``numba.prange``) where the stand-ins are: the names of
    every loaded module and the kernels' closures."""
    stand_in = _PRange.instance

    def real(v):
        return v.dispatcher if type(v) is Kernel else numba.prange

    for mod in list(sys.modules.values()):
        names = getattr(mod, "__dict__", None)
        if not isinstance(names, dict):
            continue
        for name, v in list(names.items()):
            if type(v) is Kernel or v is stand_in:
                names[name] = real(v)
    for k in _kernels:
        for cell in k.py_func.__closure__ or ():
            try:
                v = cell.cell_contents
            except ValueError:                            # pragma: no cover - empty cell
                continue
            if type(v) is Kernel or v is stand_in:
                cell.cell_contents = real(v)


def failure() -> str | None:
    """Why the compiled kernels cannot be used (None: they can, or it is not known yet)."""
    return _failed


# --------------------------------------------------------------------------- numba's cache

def _plain(text) -> str:
    text = os.fsdecode(text).encode("utf-8", "replace").decode("utf-8")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)[:200]


def _numba_can_cache(source: Path) -> bool:
    """Whether numba finds a writable cache folder for a function of ``source``, asked
    the way ``@njit(cache=True)`` asks (its own locator classes, in its order)."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if not classes:
        return True                         # an unknown numba: let it decide
    namespace: dict = {}
    exec(compile("def probe():\n    pass\n", str(source), "exec"), namespace)
    return any(cls.from_function(namespace["probe"], str(source)) is not None
               for cls in classes)


def _settle_cache():
    """Import numba and make sure it can write its cache: where it could write nowhere
    it looks (it would fail with "cannot cache function ... no locator available"), point
    it at ``$TMPDIR/verlet-sandbox-numba-<uid>``; if that cannot be used either, None:
    the numpy reference kernels (the same numbers, slower). Either way one warning line."""
    import numba
    source = PACKAGE / "sim" / "kernels.py"
    try:
        if _numba_can_cache(source):
            return numba
    except Exception:                       # noqa: BLE001 - a probe must never stop a run
        return numba
    from numba.core import config

    folder = Path(tempfile.gettempdir()) / f"verlet-sandbox-numba-{os.getuid()}" \
        if hasattr(os, "getuid") else Path(tempfile.gettempdir()) / "verlet-sandbox-numba"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or (hasattr(os, "getuid")
                                             and st.st_uid != os.getuid()):
            raise PermissionError("not our own folder")
        config.CACHE_DIR = str(folder)
        os.environ["NUMBA_CACHE_DIR"] = str(folder)        # and any worker process
        if not _numba_can_cache(source):
            raise PermissionError("not writable")
    except (OSError, ValueError):
        config.CACHE_DIR = ""
        os.environ.pop("NUMBA_CACHE_DIR", None)
        print("warning: numba cannot write its cache beside the code, in ~/.cache or in "
              f"{_plain(tempfile.gettempdir())}; using the numpy kernels (slower, the same "
              "numbers)", file=sys.stderr)
        return None
    print(f"warning: numba cannot write its cache beside the code or in ~/.cache; caching "
          f"the compiled kernels in {_plain(folder)}", file=sys.stderr)
    return numba
