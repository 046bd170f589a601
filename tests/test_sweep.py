"""The lab's sweep runner: the same bytes from a serial run, a local Dask cluster and a
cluster started from the command line; failed cases named with their parameters; an
interrupted or failed sweep resumed without recomputing what was done.

Small sizes throughout (a quick map row block is a few tens of ms); the two cluster tests
start real worker processes, a few seconds each on two cores.
"""

import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sandbox.lab import escape_map as em
from sandbox.lab import random_dt as rd
from sandbox.lab import stability_map as sm
from sandbox.lab.sweep import Chunker, Runner, SweepError, as_cases, case_key, run_sweep

ROOT = Path(__file__).resolve().parent.parent
MAP_CASES = sm.cases(res=16, n=200, rows=2, methods=("symplectic_euler", "rk4"))


def _bytes(results) -> list[bytes]:
    return [pickle.dumps(r, protocol=5) for r in results]


# --- the runner on its own -------------------------------------------------------------

def test_cases_are_named_after_the_function_and_keyed_by_value():
    cases = as_cases(em.escape_row, [("rk4", 1.1, 4, 10, 5)])
    assert cases == [{"method": "rk4", "speed": 1.1, "spo_lo": 4, "spo_hi": 10, "orbits": 5}]
    assert case_key({"a": 0.1, "b": 2}) == case_key({"b": 2, "a": 0.1})
    assert case_key({"a": 0.1}) != case_key({"a": float(np.nextafter(0.1, 1.0))})


def test_chunks_grow_to_the_minimum_task_and_shrink_at_the_end():
    c = Chunker(slots=2, min_task=0.25, max_task=3.0)
    assert c.size(1000) == 1                      # nothing measured yet: one case
    for _ in range(4):
        c.record(0.01)                            # 10 ms a case
    assert c.size(10_000) == 300                  # capped at 3 s of work
    assert c.size(600) == 150                     # its share: 600 / (2 x 2)
    assert c.size(40) == 25                       # never below 0.25 s of work ...
    assert c.size(7) == 7                         # ... nor above what is left


def test_serial_sweep_keeps_case_order_and_measures_itself():
    res = run_sweep(sm.map_rows, MAP_CASES, name="t")
    assert [r.row0 for r in res.results] == [c["row0"] for c in MAP_CASES]
    assert [r.method for r in res.results] == [c["method"] for c in MAP_CASES]
    s = res.stats
    assert s.computed == len(MAP_CASES) and s.busy > 0 and s.overhead_fraction < 0.5


FAIL_AT = {"row0": None}


def flaky_rows(method: str, row0: int, rows: int, res: int, n: int):
    """``map_rows`` that fails for one block (a case's own error, as a bug would)."""
    if row0 == FAIL_AT["row0"]:
        raise FloatingPointError(f"cannot do row {row0}")
    if row0 == FAIL_AT.get("interrupt"):
        raise KeyboardInterrupt
    CALLS.append((method, row0))
    return sm.map_rows(method, row0, rows, res, n)


CALLS: list = []


def test_a_failing_case_is_named_and_the_rest_kept_then_resumed(tmp_path):
    serial = _bytes(run_sweep(sm.map_rows, MAP_CASES).results)
    FAIL_AT["row0"] = 6
    CALLS.clear()
    with pytest.raises(SweepError) as err:
        run_sweep(flaky_rows, MAP_CASES, name="flaky", store=tmp_path)
    msg = str(err.value)
    assert "2 of 16 cases failed" in msg
    assert "method='symplectic_euler', row0=6" in msg and "method='rk4', row0=6" in msg
    assert "FloatingPointError: cannot do row 6" in msg
    assert len(CALLS) == 14                               # every other case ran
    (store,) = tmp_path.glob("flaky-*")
    assert "Traceback" in (store / "errors.txt").read_text()
    # The cause is fixed; the rerun computes the two failed cases only.
    FAIL_AT["row0"] = None
    CALLS.clear()
    res = run_sweep(flaky_rows, MAP_CASES, name="flaky", store=tmp_path)
    assert sorted(CALLS) == [("rk4", 6), ("symplectic_euler", 6)]
    assert _bytes(res.results) == serial
    assert not tmp_path.exists() or not any(tmp_path.iterdir())      # cleared when done


def test_an_interrupted_sweep_resumes_where_it_stopped(tmp_path):
    serial = _bytes(run_sweep(sm.map_rows, MAP_CASES).results)
    FAIL_AT.update(row0=None, interrupt=10)
    CALLS.clear()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(flaky_rows, MAP_CASES, name="int", store=tmp_path)
    done = list(CALLS)
    assert done == [("symplectic_euler", r) for r in range(0, 10, 2)]   # in order, then ^C
    FAIL_AT["interrupt"] = None
    CALLS.clear()
    res = run_sweep(flaky_rows, MAP_CASES, name="int", store=tmp_path)
    assert len(CALLS) == len(MAP_CASES) - len(done)
    assert not set(CALLS) & set(done)
    assert _bytes(res.results) == serial


# --- a real local cluster ----------------------------------------------------------------

def test_local_cluster_of_two_processes_gives_the_serial_bytes(tmp_path):
    dist = rd.block_cases(20, seed=3, block=10)
    serial_map = _bytes(run_sweep(sm.map_rows, MAP_CASES).results)
    serial_dist = _bytes(run_sweep(rd.end_errors, dist).results)
    bad = MAP_CASES[:3] + [{**MAP_CASES[0], "method": "nope"}]
    with Runner(workers=2, log=lambda s: None) as runner:
        a = run_sweep(sm.map_rows, MAP_CASES, runner)
        b = run_sweep(rd.end_errors, dist, runner, store=tmp_path / "store", name="dist")
        assert runner.slots() == 2
        info = runner.client().run(os.getpid)
        assert len(set(info.values())) == 2 and os.getpid() not in info.values()
        with pytest.raises(SweepError) as err:          # raised in a worker process
            run_sweep(sm.map_rows, bad, runner, store=tmp_path / "bad", name="bad")
    assert _bytes(a.results) == serial_map
    assert _bytes(b.results) == serial_dist
    assert a.stats.backend == "local" and a.stats.slots == 2
    assert "case 3 (method='nope', row0=0" in str(err.value)
    assert "ValueError" in str(err.value) and "1 of 4 cases failed" in str(err.value)
    kept = [p for p in (tmp_path / "bad").rglob("part-*.pkl")]
    assert sum(len(pickle.loads(p.read_bytes())) for p in kept) == 3


# --- a cluster started as a user would -----------------------------------------------------

def _dask_cli() -> Path:
    exe = Path(sys.executable).with_name("dask")
    return exe if exe.exists() else Path(shutil.which("dask") or "dask")


class _Loopback:
    """``dask scheduler`` and ``dask worker`` processes on 127.0.0.1 as a user starts them,
    in an empty folder without PYTHONPATH: the workers cannot import the sandbox."""

    def __init__(self, home: Path):
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.home = home
        self.procs: list[subprocess.Popen] = []
        self.address = ""
        self.workers = 0

    def _spawn(self, *args, stderr=subprocess.DEVNULL) -> subprocess.Popen:
        p = subprocess.Popen([str(_dask_cli()), *args], cwd=self.home, env=self.env,
                             stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True)
        self.procs.append(p)
        return p

    def start_scheduler(self) -> None:
        sched_file = self.home / "scheduler.json"
        p = self._spawn("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                        "--scheduler-file", str(sched_file), stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not sched_file.exists() and time.monotonic() < deadline:
            if p.poll() is not None:
                pytest.skip("the dask CLI cannot start a scheduler here: "
                            + p.stderr.read().decode()[-500:])
            time.sleep(0.2)
        if not sched_file.exists():
            pytest.skip("dask scheduler wrote no scheduler file within 60 s")
        self.address = json.loads(sched_file.read_text())["address"]
        assert self.address.startswith("tcp://127.0.0.1:")

    def add_workers(self, n: int) -> None:
        """Start ``n`` one-thread worker processes and wait until all have joined."""
        self._spawn("worker", self.address, "--nworkers", str(n), "--nthreads", "1",
                    "--no-dashboard", "--local-directory", str(self.home / "workers"))
        self.workers += n
        from distributed import Client
        with Client(self.address, timeout="20s") as c:
            c.wait_for_workers(self.workers, timeout=90)

    def stop(self) -> None:
        # Each was started in its own session: its group holds it and its worker processes.
        for p in reversed(self.procs):
            _signal_group(p, signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            _signal_group(p, signal.SIGKILL)
            p.wait(timeout=10)


@pytest.fixture
def loopback(tmp_path):
    home = tmp_path / "cluster"
    home.mkdir()
    cluster = _Loopback(home)
    try:
        cluster.start_scheduler()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def loopback_cluster(loopback):
    """The address of a loopback scheduler with two worker processes connected."""
    loopback.add_workers(2)
    return loopback.address


def _signal_group(p: subprocess.Popen, sig) -> None:
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass


def test_scheduler_flag_runs_a_sweep_on_separate_processes_like_serial(loopback_cluster,
                                                                       tmp_path):
    def main(*args):
        return subprocess.Popen([sys.executable, "main.py", "experiment", "escape-map",
                                 "--quick", *args], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    runs = [main("--scheduler", loopback_cluster, "--out", str(tmp_path / "cluster")),
            main("--jobs", "1", "--out", str(tmp_path / "serial"))]       # side by side
    (_, remote_err), (_, serial_err) = (p.communicate(timeout=240) for p in runs)
    assert runs[1].returncode == 0, serial_err[-2000:]
    assert runs[0].returncode == 0, remote_err[-2000:]
    remote = subprocess.CompletedProcess(runs[0].args, 0, "", remote_err)
    assert "sending the sandbox package" in remote.stderr          # workers had no checkout
    assert "on 2 cluster slots" in remote.stderr
    for f in ("escape_map.csv", "escape_map.txt"):
        assert (tmp_path / "cluster" / f).read_bytes() == (tmp_path / "serial" / f).read_bytes()
    assert not (tmp_path / "cluster" / ".sweeps").exists()


def test_a_remote_scheduler_keeps_dasks_info_lines_quiet(loopback):
    """Connected to a scheduler of its own, the runner silences Dask's log below ERROR,
    as a local cluster's ``silence_logs`` does: a scheduler killed while the client sent
    printed distributed.batched's INFO "Batched Comm Closed" with a traceback (CI, the
    killed-scheduler fault test, once in many runs)."""
    import logging

    loopback.add_workers(1)
    batched = logging.getLogger("distributed.batched")
    level = logging.getLogger("distributed").level
    try:
        logging.getLogger("distributed").setLevel(logging.INFO)
        assert batched.isEnabledFor(logging.INFO)
        with Runner(scheduler=loopback.address, log=lambda s: None) as runner:
            runner.client()
            assert not batched.isEnabledFor(logging.INFO)
            assert batched.isEnabledFor(logging.ERROR)
    finally:
        logging.getLogger("distributed").setLevel(level)


def test_a_worker_that_joins_after_the_code_check_gets_the_package_too(loopback):
    """The race CI met: ``dask worker --nworkers 2`` had one process connected when the
    runner sent the package, and the other ran every task it got without ``sandbox``."""
    from sandbox.lab.sweep import _worker_functions, code_fingerprint
    loopback.add_workers(1)
    with Runner(scheduler=loopback.address, log=lambda s: None) as runner:
        client = runner.client()                      # checks and sends the code now
        loopback.add_workers(1)                       # joins afterwards
        info = client.run(_worker_functions()["code_info"])
        assert len(info) == 2
        assert {i[2] for i in info.values()} == {code_fingerprint()}, info
        r = run_sweep(sm.map_rows, MAP_CASES, runner)
    assert _bytes(r.results) == _bytes(run_sweep(sm.map_rows, MAP_CASES).results)


def test_an_unreachable_scheduler_is_one_clear_line(tmp_path):
    r = subprocess.run([sys.executable, "main.py", "experiment", "escape-map", "--quick",
                        "--scheduler", "tcp://127.0.0.1:9", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1
    assert "cannot reach the Dask scheduler at tcp://127.0.0.1:9" in r.stderr
    assert "Traceback" not in r.stderr


def test_experiment_help_does_not_import_dask():
    code = ("import runpy, sys\nsys.argv = ['main.py', 'experiment', '--help']\n"
            "try:\n    runpy.run_path('main.py', run_name='__main__')\nexcept SystemExit:\n"
            "    pass\nprint('MODULES', *sorted({m.split('.')[0] for m in sys.modules}))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60)
    loaded = set(r.stdout.splitlines()[-1].split()[1:])
    assert "--scheduler ADDRESS" in r.stdout and "--seeds N" in r.stdout
    assert not loaded & {"dask", "distributed", "tornado"}, loaded
