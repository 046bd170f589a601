"""One sweep runner for the lab: a table of cases, a pure function of a case, run on Dask.

``run_sweep(fn, cases, runner)`` calls ``fn(**case)`` for every case (a dict of
parameters; a tuple is matched to ``fn``'s parameters by position) and returns the
results **in case order**. Each case is computed on its own, by the same code, from its
parameters only, so the results, and every CSV made from them, are byte-identical
whichever backend ran them:

``Runner(workers=1)``            serial, in this process (no Dask at all);
``Runner()``                     a ``dask.distributed.LocalCluster`` of one single-threaded
                                 worker process per core, started on first use;
``Runner(scheduler=ADDRESS)``    an existing cluster (``tcp://host:8786``, or the path of
                                 a scheduler file written by ``dask scheduler
                                 --scheduler-file``).

**Chunks.** A task carries a chunk of cases, sized while the sweep runs (guided
self-scheduling): the first task on each worker slot holds one case, which measures a
case's time; after that a chunk holds about ``MIN_TASK`` seconds of work or more, but
never more than ``MAX_TASK`` seconds nor more than its share of what is left (the remaining
cases over twice the slots), so the last tasks are small and no worker sits idle at the
end. Two tasks are kept in flight per slot, so a worker never waits for the round trip.
``SweepStats`` reports the overhead per case: worker-slot time not spent inside ``fn``
(scheduling, transfer, idle slots at the start and end) divided by the number of cases.

**Failures and resuming.** An exception in ``fn`` fails that case only: the other cases
go on and their results are kept; at the end :class:`SweepError` names every failed case
with its parameters and the exception (full tracebacks in ``errors.txt`` beside the
stored results). With a ``store`` folder the results are written as they arrive, one file
per finished chunk; a sweep interrupted (Ctrl+C, a failure, a lost machine) and run again
with the same cases and the same code computes only what is missing. The folder's name
carries a fingerprint of the ``sandbox`` package's source, so results made by other code
are never reused; it is deleted when the sweep completes.

**A lost cluster.** The scheduler gone (killed, its machine down, the network cut) or
no worker left on it: the runner notices within ``LOST_AFTER`` (``NO_WORKERS_AFTER``
for workers) seconds instead of waiting for ever, and :class:`ClusterLost` says in one
line what happened, how many results are kept and what to do; the results that arrived
are in the store, so the same command run again resumes. A connection that comes back
within that time loses nothing: the tasks the client dropped are submitted again.

**Code on a cluster.** Workers need the same Python packages (requirements.txt), not the
checkout: when a worker cannot import this ``sandbox`` (or imports another version of
it), the runner sends the package's source files to every worker, which unpacks them into
its own folder and puts them first on ``sys.path``. Chunks and their results travel as
pickled bytes, so the scheduler (which unpickles task graphs) needs nothing of ours.
Python and numpy versions must match the client's (another numpy may round differently),
or the runner stops with the difference.

Dask is imported only when a cluster is used, never by ``main.py --help``.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import io
import json
import math
import os
import pickle
import shutil
import sys
import time
import traceback
import zipfile
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .output import write_bytes, write_text

MIN_TASK = 0.25       # s of work a chunk holds at least (once a case's time is known)
MAX_TASK = 3.0        # s of work a chunk holds at most (progress and resume granularity)
IN_FLIGHT = 2         # tasks queued per worker slot
LOST_AFTER = 10.0     # s without the scheduler before a sweep gives up on it
NO_WORKERS_AFTER = 30.0   # s without any worker before a sweep gives up on the cluster
POLL = 0.02           # s between looks for a finished task
PACKAGE = Path(__file__).resolve().parents[1]          # the ``sandbox`` package


# --- cases -----------------------------------------------------------------------------

def as_cases(fn: Callable, cases: Iterable) -> list[dict]:
    """Cases as dicts of keyword arguments; tuples are named after ``fn``'s parameters."""
    names = None
    out = []
    for c in cases:
        if isinstance(c, dict):
            out.append(dict(c))
            continue
        if names is None:
            names = list(inspect.signature(fn).parameters)
        if len(c) > len(names):
            raise ValueError(f"case {c!r} has more values than {fn.__name__} has parameters")
        out.append(dict(zip(names, c, strict=False)))
    return out


def case_key(case: dict) -> str:
    """A stable name of a case's parameters (floats by their exact ``repr``)."""
    text = json.dumps(case, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def describe(case: dict, width: int = 120) -> str:
    """``method='rk4', row=3``: a case's parameters for a message."""
    text = ", ".join(f"{k}={v!r}" for k, v in case.items())
    return text if len(text) <= width else text[:width - 3] + "..."


# --- the source fingerprint and the code shipped to workers ----------------------------

def _source_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def code_fingerprint(root: Path = PACKAGE) -> str:
    """SHA-256 of every ``.py`` file of the ``sandbox`` package (relative paths and bytes)."""
    h = hashlib.sha256()
    for p in _source_files(root):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _package_zip(root: Path = PACKAGE) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p in _source_files(root):
            z.write(p, (Path(root.name) / p.relative_to(root)).as_posix())
    return buf.getvalue()


# Run on the workers, which may not be able to import ``sandbox`` yet: compiled from
# this source into a module-less namespace, so cloudpickle sends them by value.
_WORKER_SOURCE = '''
import hashlib, io, os, sys, zipfile
from pathlib import Path

def code_info():
    """(python, numpy, fingerprint of the sandbox package this worker imports, its path,
    host name)."""
    import socket
    import numpy
    py = ".".join(map(str, sys.version_info[:3]))
    host = socket.gethostname()
    try:
        import sandbox
    except Exception as e:
        return py, numpy.__version__, None, f"{type(e).__name__}: {e}", host
    root = Path(sandbox.__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
        h.update(p.relative_to(root).as_posix().encode() + b"\\0" + p.read_bytes() + b"\\0")
    return py, numpy.__version__, h.hexdigest()[:16], str(root), host

def run_payload(blob):
    """A chunk sent as bytes: the scheduler, which unpickles task graphs, needs none of
    our modules; the result goes back as bytes too."""
    import pickle
    from sandbox.lab.sweep import run_chunk
    fn, items = pickle.loads(blob)
    return pickle.dumps(run_chunk(fn, items), protocol=5)

def install(data, tag, dask_worker=None):
    """Unpack the sandbox package into this worker's folder, first on sys.path."""
    base = dask_worker.local_directory if dask_worker is not None else os.getcwd()
    root = os.path.join(base, "sandbox-code-" + tag)
    if not os.path.isdir(os.path.join(root, "sandbox")):
        tmp = root + ".part-" + str(os.getpid())
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            z.extractall(tmp)
        try:
            os.replace(tmp, root)
        except OSError:
            pass
    if root not in sys.path:
        sys.path.insert(0, root)
    return root

from distributed.diagnostics.plugin import WorkerPlugin

class InstallPlugin(WorkerPlugin):
    """Installs the package on every worker of the cluster, those that join later too
    (the scheduler runs ``setup`` on each worker as it connects)."""

    def __init__(self, data, tag):
        self.data, self.tag = data, tag

    def setup(self, worker):
        install(self.data, self.tag, worker)
'''


def _worker_functions() -> dict:
    ns = {"__name__": "verlet_sandbox_worker_bootstrap"}
    exec(compile(_WORKER_SOURCE, "<sandbox worker bootstrap>", "exec"), ns)
    return ns


# --- results -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Failure:
    index: int
    case: dict
    error: str            # "ValueError: ..." (one line)
    traceback: str = ""

    def __str__(self) -> str:
        return f"case {self.index} ({describe(self.case)}): {self.error}"


class SweepError(RuntimeError):
    """Some cases failed; the others' results are kept in ``store`` (if any)."""

    def __init__(self, name: str, failures: list[Failure], total: int, store: Path | None):
        self.failures, self.total, self.store = failures, total, store
        lines = [str(f) for f in failures[:10]]
        if len(failures) > 10:
            lines.append(f"... and {len(failures) - 10} more")
        kept = (f"; the other {total - len(failures)} results are kept in {store} and a rerun "
                "computes only the failed cases" if store else "")
        super().__init__(f"{name}: {len(failures)} of {total} cases failed{kept}:\n  "
                         + "\n  ".join(lines))


class ClusterLost(ConnectionError):
    """The Dask cluster went away mid-sweep (the scheduler, or every worker); the results
    that arrived are kept in the store (if any) for a rerun to resume."""


@dataclass
class SweepStats:
    name: str
    backend: str
    cases: int
    computed: int = 0             # cases computed by this run (the rest came from the store)
    tasks: int = 0
    slots: int = 1                # worker threads the sweep could use
    wall: float = 0.0             # s, first submission to last result
    busy: float = 0.0             # s, time spent inside fn, summed over cases
    chunk_sizes: list[int] = field(default_factory=list)

    @property
    def case_time(self) -> float:
        return self.busy / self.computed if self.computed else 0.0

    @property
    def overhead_per_case(self) -> float:
        """s of worker-slot time per case not spent in ``fn``."""
        if not self.computed:
            return 0.0
        return max(self.slots * self.wall - self.busy, 0.0) / self.computed

    @property
    def overhead_fraction(self) -> float:
        return self.overhead_per_case / self.case_time if self.case_time else 0.0

    def line(self) -> str:
        if not self.computed:
            return f"{self.name}: all {self.cases} cases from the store"
        return (f"{self.name}: {self.computed} cases in {self.tasks} tasks on {self.slots} "
                f"{self.backend} slot{'s' if self.slots != 1 else ''}: {self.wall:.2f} s "
                f"(a case {self.case_time * 1e3:.3g} ms; overhead "
                f"{self.overhead_per_case * 1e3:.3g} ms a case, "
                f"{self.overhead_fraction:.1%} of a case)")


@dataclass
class SweepResult:
    results: list
    stats: SweepStats


# --- the store ---------------------------------------------------------------------------

class Store:
    """Results of one sweep written as they arrive: ``part-*.pkl`` files of (key, value)."""

    def __init__(self, root: Path, name: str, fn: Callable):
        ident = f"{fn.__module__}.{fn.__qualname__}|{code_fingerprint()}"
        self.prefix = f"{name}-"
        self.root = Path(root)
        self.path = self.root / (self.prefix + hashlib.sha256(ident.encode()).hexdigest()[:12])
        self._n = 0
        self._made = False

    def _make(self) -> None:
        """The folder, made on the first write; made again later (and said once) only if
        someone removed it mid-sweep (:mod:`sandbox.lab.output`)."""
        if not self._made:
            self.path.mkdir(parents=True, exist_ok=True)
            self._made = True

    def load(self) -> dict[str, object]:
        out: dict[str, object] = {}
        if not self.path.is_dir():
            return out
        for p in sorted(self.path.glob("part-*.pkl")):
            try:
                pairs = pickle.loads(p.read_bytes())
            except Exception:           # a torn or foreign file: recompute its cases
                continue
            out.update(pairs)
        return out

    def write(self, pairs: list[tuple[str, object]]) -> None:
        if not pairs:
            return
        self._make()
        self._n += 1
        name = f"part-{time.time_ns():x}-{os.getpid()}-{self._n}.pkl"
        write_bytes(self.path / name, pickle.dumps(pairs, protocol=5))

    def write_errors(self, failures: list[Failure]) -> None:
        self._make()
        write_text(self.path / "errors.txt", "\n".join(
            f"{f}\n{f.traceback}" for f in failures))

    def clear(self) -> None:
        """Remove this sweep's folder and older ones of the same name (other code)."""
        if self.root.is_dir():
            for p in self.root.glob(self.prefix + "*"):
                if p.is_dir() and len(p.name) == len(self.path.name):
                    shutil.rmtree(p, ignore_errors=True)
            try:
                self.root.rmdir()
            except OSError:
                pass


# --- the chunk a worker runs -------------------------------------------------------------

def run_chunk(fn: Callable, items: Sequence[tuple[int, dict]]) -> list[tuple]:
    """``[(index, ok, value or (error, traceback), seconds)]`` for ``fn(**case)`` of each item."""
    out = []
    for i, case in items:
        t0 = time.perf_counter()
        try:
            value, ok = fn(**case), True
        except Exception as e:
            value, ok = (f"{type(e).__name__}: {e}".splitlines()[0], traceback.format_exc()), False
        out.append((i, ok, value, time.perf_counter() - t0))
    return out


class Chunker:
    """Guided chunk sizes from the measured time of a case (see the module docstring)."""

    def __init__(self, slots: int, min_task: float = MIN_TASK, max_task: float = MAX_TASK):
        self.slots, self.min_task, self.max_task = max(slots, 1), min_task, max_task
        self.busy = 0.0
        self.done = 0

    def record(self, seconds: float) -> None:
        self.busy += seconds
        self.done += 1

    def size(self, remaining: int) -> int:
        if not self.done:
            return 1
        t = max(self.busy / self.done, 1e-6)
        lo = math.ceil(self.min_task / t)
        hi = max(int(self.max_task / t), 1)
        share = math.ceil(remaining / (2 * self.slots))
        return max(1, min(max(lo, share), hi, remaining))


# --- runners -----------------------------------------------------------------------------

class Runner:
    """Where sweeps run: serially, on a local Dask cluster (default) or on an existing one.

    The cluster starts on the first sweep that needs it and is shared by every sweep until
    :meth:`close`; use the runner as a context manager.
    """

    def __init__(self, scheduler: str | None = None, workers: int = 0,
                 log: Callable[[str], None] | None = None):
        self.scheduler = scheduler
        self.workers = workers
        self.log = log or (lambda s: print(s, file=sys.stderr))
        self._client = None
        self._cluster = None
        self.startup = 0.0          # s to start or reach the cluster and check its code

    @property
    def serial(self) -> bool:
        return self.scheduler is None and self.workers == 1

    @property
    def backend(self) -> str:
        return "serial" if self.serial else ("cluster" if self.scheduler else "local")

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def client(self):
        if self._client is None:
            t0 = time.perf_counter()
            self._client = self._connect()
            try:
                ensure_code(self._client, self.log)
            except BaseException:
                self.close()
                raise
            self.startup = time.perf_counter() - t0
            where = self.scheduler or "local"
            self.log(f"Dask cluster ({where}): {self.slots()} worker slots ready in "
                     f"{self.startup:.1f} s")
        return self._client

    def _connect(self):
        import logging

        from distributed import Client, LocalCluster
        if self.scheduler is None:
            n = self.workers or os.cpu_count() or 1
            self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                         dashboard_address=":0", silence_logs=logging.ERROR)
            return Client(self._cluster)
        target = self.scheduler
        _reachable(target)
        # As LocalCluster(silence_logs=ERROR) does for a local cluster: Dask's INFO lines
        # are not for the user, and one of them carries a traceback when the scheduler
        # goes away while the client sends ("Batched Comm Closed", CI saw it once);
        # a lost scheduler is said in one line (ClusterLost).
        logging.getLogger("distributed").setLevel(logging.ERROR)
        try:
            if os.path.isfile(target):
                client = Client(scheduler_file=target, timeout="20s")
            else:
                client = Client(target, timeout="20s")
        except OSError as e:
            raise ConnectionError(f"cannot reach the Dask scheduler at {target}: {e}") from None
        try:
            client.wait_for_workers(1, timeout=60)
        except TimeoutError:
            client.close()
            raise ConnectionError(f"no worker joined the scheduler at {target} within 60 s "
                                  "(start one: dask worker ADDRESS)") from None
        return client

    @property
    def where(self) -> str:
        return f"the Dask scheduler at {self.scheduler}" if self.scheduler else \
            "the local Dask cluster"

    def remedy(self) -> str:
        """What to do after :class:`ClusterLost`, in words."""
        if self.scheduler:
            return ("start the scheduler and its workers again (or leave out --scheduler) "
                    "and run the same command to resume")
        return "run the same command again to resume"

    def slots(self) -> int:
        if self.serial:
            return 1
        return max(sum(self.client().nthreads().values()), 1)

    def close(self) -> None:
        """Close the client and the local cluster; a cluster already gone is no error
        (closing after :class:`ClusterLost` or Ctrl+C must not hide what happened)."""
        client, cluster = self._client, self._cluster
        self._client = self._cluster = None
        lost = client is not None and client.status != "running"
        with _quiet_distributed(lost):   # its reconnect, cancelled, logs a traceback
            if client is not None:
                with contextlib.suppress(Exception):
                    client.close(timeout=LOST_AFTER)
            if cluster is not None:
                with contextlib.suppress(Exception):
                    cluster.close(timeout=LOST_AFTER)


@contextlib.contextmanager
def _quiet_distributed(quiet: bool = True):
    """Dask's own log silenced inside the block (when ``quiet``): what happened has been
    said in one line already."""
    import logging
    names = ("distributed", "distributed.client", "distributed.utils", "distributed.core")
    loggers = [logging.getLogger(n) for n in names] if quiet else []
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def _reachable(target: str, timeout: float = 5.0) -> None:
    """Fail at once, in one line, when nothing listens at a ``tcp://host:port`` address
    (Dask itself retries for its whole connect timeout)."""
    import socket
    from urllib.parse import urlsplit
    if os.path.isfile(target) or "://" not in target:
        return
    u = urlsplit(target)
    if u.scheme != "tcp" or not u.hostname or not u.port:
        return
    try:
        socket.create_connection((u.hostname, u.port), timeout=timeout).close()
    except OSError as e:
        raise ConnectionError(f"cannot reach the Dask scheduler at {target}: "
                              f"{e.strerror or e}") from None


def ensure_code(client, log: Callable[[str], None]) -> None:
    """Every worker runs this checkout's ``sandbox`` with our Python and numpy, or raise.

    A worker on this machine that imports the package from this very folder (a local
    cluster) runs our files; any other must import a copy with our fingerprint.
    """
    import socket

    import numpy
    ours = (".".join(map(str, sys.version_info[:3])), numpy.__version__, code_fingerprint())
    host = socket.gethostname()

    def ok(i) -> bool:
        return i[2] == ours[2] or (i[2] is not None and i[4] == host and i[3] == str(PACKAGE))

    funcs = _worker_functions()
    info = client.run(funcs["code_info"])
    if not all(ok(i) for i in info.values()):
        stale = {w: i for w, i in info.items() if i[2] is not None and not ok(i)}
        log(f"sending the sandbox package ({ours[2]}) to the cluster's workers")
        # A plugin, not a one-off run: a worker that joins after this check (a
        # ``dask worker --nworkers 2`` whose second process is still starting) gets the
        # package from the scheduler as it connects.
        client.register_plugin(funcs["InstallPlugin"](_package_zip(), ours[2]),
                               name=f"verlet-sandbox-code-{ours[2]}")
        info = client.run(funcs["code_info"])
        bad = {w: i for w, i in info.items() if not ok(i)}
        if bad:
            w, i = next(iter(bad.items()))
            why = (f"it had already imported another version from {stale[w][3]}; restart "
                   "the workers" if w in stale else f"it cannot import it ({i[3]})")
            raise RuntimeError(f"worker {w} does not run this sandbox code: {why}")
    for w, (py, np_version, *_) in info.items():
        if (py, np_version) != ours[:2]:
            raise RuntimeError(f"worker {w} runs Python {py} with numpy {np_version}, this "
                               f"process Python {ours[0]} with numpy {ours[1]}: results "
                               "would not match a serial run bit for bit; install the same "
                               "requirements on every machine")


def _progress(total: int, done: int, name: str, show: bool | None):
    show = sys.stderr.isatty() if show is None else show
    from tqdm import tqdm
    return tqdm(total=total, initial=done, desc=name, disable=not show, leave=False,
                unit="case", dynamic_ncols=True)


def run_sweep(fn: Callable, cases: Iterable, runner: Runner | None = None, *,
              name: str = "sweep", store: Path | None = None, progress: bool | None = None,
              keep: bool = False) -> SweepResult:
    """``[fn(**case) for case in cases]`` on ``runner`` (serial if ``None``), in case order.

    ``store``: a folder for the results as they arrive (resumable; see the module
    docstring); removed when every case succeeded unless ``keep``. Raises
    :class:`SweepError` naming the failed cases once every other case has finished.
    """
    runner = runner or Runner(workers=1)
    cases = as_cases(fn, cases)
    keys = [case_key(c) for c in cases]
    n = len(cases)
    results: list = [None] * n
    st = Store(store, name, fn) if store is not None else None
    have = st.load() if st else {}
    todo = []
    for i, k in enumerate(keys):
        if k in have:
            results[i] = have[k]
        else:
            todo.append(i)
    stats = SweepStats(name, runner.backend, n)
    failures: list[Failure] = []
    bar = _progress(n, n - len(todo), name, progress)

    def take(records: list[tuple]) -> None:
        good = []
        for i, ok, value, seconds in records:
            stats.busy += seconds
            stats.computed += 1
            if ok:
                results[i] = value
                good.append((keys[i], value))
            else:
                failures.append(Failure(i, cases[i], value[0], value[1]))
        if st:
            st.write(good)
        if bar:
            bar.update(len(records))
            if failures:
                bar.set_postfix(failed=len(failures))

    if todo and not runner.serial:
        runner.client()                   # start or reach the cluster before the clock
    t0 = time.perf_counter()
    try:
        if todo:
            if runner.serial:
                _run_serial(fn, cases, todo, take, stats)
            else:
                _run_dask(fn, cases, todo, take, stats, runner)
    except KeyboardInterrupt:
        if st:
            runner.log(f"{name}: interrupted; {stats.computed} new results kept in {st.path}: "
                       "run the same command again to resume")
        raise
    except ClusterLost as e:
        done = n - len(todo) + stats.computed - len(failures)
        if st and failures:
            st.write_errors(sorted(failures, key=lambda f: f.index))
        kept = (f"the results of {done} of {n} cases are kept in {st.path}" if st else
                f"{done} of {n} cases were done (not stored: no store folder)")
        raise ClusterLost(f"{name}: {e}; {kept}; {runner.remedy()}") from None
    finally:
        stats.wall = time.perf_counter() - t0
        if bar:
            bar.close()
    if failures:
        failures.sort(key=lambda f: f.index)
        if st:
            st.write_errors(failures)
        raise SweepError(name, failures, n, st.path if st else None)
    if st and not keep:
        st.clear()
    return SweepResult(results, stats)


def _run_serial(fn, cases, todo, take, stats) -> None:
    chunker = Chunker(1)
    pending: list[tuple] = []
    flushed = time.perf_counter()
    stats.slots = 1
    try:
        for i in todo:
            rec = run_chunk(fn, [(i, cases[i])])
            chunker.record(rec[0][3])
            pending += rec
            if time.perf_counter() - flushed > MAX_TASK / 3:
                stats.tasks += 1
                stats.chunk_sizes.append(len(pending))
                take(pending)
                pending, flushed = [], time.perf_counter()
    finally:
        if pending:
            stats.tasks += 1
            stats.chunk_sizes.append(len(pending))
            take(pending)


class _Watch:
    """Whether the cluster is still there, asked while no task has finished: the client
    connected to its scheduler (the client itself retries for ``LOST_AFTER`` s) and at
    least one worker on it (asked every second, answered within 5 s)."""

    def __init__(self, client, runner: Runner):
        self.client, self.runner = client, runner
        self.away: float | None = None         # since when the scheduler is unreachable
        self.empty: float | None = None        # since when no worker is connected
        self.asked = 0.0

    @property
    def connected(self) -> bool:
        return self.client.status == "running"

    def check(self) -> None:
        """Raise :class:`ClusterLost` when the scheduler or every worker has been gone
        too long."""
        now = time.monotonic()
        if not self.connected:
            self.away = self.away or now
            if self.client.status in ("closing", "closed") or now - self.away > LOST_AFTER:
                raise ClusterLost(f"lost {self.runner.where} (no answer for "
                                  f"{now - self.away:.0f} s)")
            return
        self.away = None
        if now - self.asked < 1.0:
            return
        self.asked = now
        try:
            workers = len(self.client.nthreads(callback_timeout=5))
        except Exception:           # no answer this time: the status says the rest
            return
        if workers:
            self.empty = None
            return
        self.empty = self.empty or now
        if now - self.empty > NO_WORKERS_AFTER:
            raise ClusterLost(f"no worker left on {self.runner.where} for "
                              f"{now - self.empty:.0f} s")


def _run_dask(fn, cases, todo, take, stats, runner: Runner) -> None:
    from distributed import as_completed

    client = runner.client()
    slots = stats.slots = runner.slots()
    run_payload = _worker_functions()["run_payload"]
    chunker = Chunker(slots)
    queue = deque(todo)
    solo: deque[int] = deque()          # cases of a chunk whose task itself failed
    first_round = slots
    items_of = {}
    watch = _Watch(client, runner)
    lost: dict[int, int] = defaultdict(int)    # a case's tasks that ended without a result

    def submit():
        if solo:
            idx = [solo.popleft()]
        elif queue:
            nonlocal first_round
            k = 1 if first_round > 0 else chunker.size(len(queue))
            first_round -= 1
            idx = [queue.popleft() for _ in range(min(k, len(queue)))]
        else:
            return None
        blob = pickle.dumps((fn, [(i, cases[i]) for i in idx]), protocol=5)
        try:
            fut = client.submit(run_payload, blob, pure=False)
        except Exception:
            if watch.connected:
                raise
            queue.extendleft(reversed(idx))   # the scheduler went away just now
            return None
        items_of[fut.key] = idx
        stats.tasks += 1
        stats.chunk_sizes.append(len(idx))
        return fut

    futures = as_completed()
    outstanding = set()

    def refill():
        while watch.connected and futures.count() < IN_FLIGHT * slots:
            f = submit()
            if f is None:
                return
            outstanding.add(f)
            futures.add(f)

    refill()
    try:
        while futures.count() or queue or solo:
            if not futures.has_ready():
                # Nothing finished: is the cluster still there? (A lost scheduler never
                # finishes anything; waiting on the futures alone hung for ever.)
                watch.check()
                refill()
                time.sleep(POLL)
                continue
            fut = next(futures)
            outstanding.discard(fut)
            idx = items_of.pop(fut.key)
            try:
                records = pickle.loads(fut.result())
            except Exception as e:
                records = []
                if fut.status != "error" and max(lost[i] for i in idx) < 3:
                    # Not the task's failure: the client dropped it (its scheduler went
                    # away) or could not fetch its result. Submitted again while the
                    # cluster is there (three times at most); the watch says when not.
                    for i in idx:
                        lost[i] += 1
                    queue.extendleft(reversed(idx))
                elif len(idx) > 1:        # the task, not fn: a lost worker, an import error
                    solo.extend(idx)      # retry one case per task to find the culprit
                else:
                    take([(idx[0], False, (f"{type(e).__name__}: {e}".splitlines()[0],
                                           "".join(traceback.format_exception(e))), 0.0)])
            for r in records:
                chunker.record(r[3])
            if records:
                take(records)
            with contextlib.suppress(Exception):
                fut.release()
            refill()
    except BaseException:
        if watch.connected:               # a closed client cannot cancel (and must not
            with contextlib.suppress(Exception):      # hide the first error)
                client.cancel(list(outstanding))
        raise
