"""The background warm-up and the switch from the numpy references to the compiled kernels,
and the thread policy of the compiled sweep. Correctness only: times live in the bench."""

import numpy as np
import pytest

from sandbox import warmup
from sandbox.load import LoadMeter
from sandbox.sim import backend, cores, kernels
from sandbox.sim import builders as B
from sandbox.sim.world import World, WorldConfig

needs_numba = pytest.mark.skipif(not backend.INSTALLED, reason="numba is not installed")


@pytest.fixture
def restore_backend():
    yield
    backend.set_ready(True)             # every part, and no float type held
    assert backend.held() == ()
    cores.set_mode("auto")


def _cloth(dtype="float64", **config) -> World:
    w = World(WorldConfig(dtype=dtype, substeps=4, iterations=1, **config))
    B.build_cloth(w, 40, 30, 0.05, origin=(-1.0, 1.0), pins="top_points", shear=True)
    B.build_rope(w, (2.0, 2.0), (4.0, 2.0), 40, kind="rope")
    B.build_bridge(w, (-3.0, -1.0), (3.0, -1.0), 30, compliance=1e-5)
    w.start(1 / 60)
    return w


def _pile() -> World:
    w = World(WorldConfig(substeps=3, iterations=1, bounds=(-2.0, -1.0, 2.0, 4.0),
                          collide_particles=True, friction=0.3, restitution=0.2))
    k = np.arange(120)
    w.add_particles(np.stack([-1.0 + 0.11 * (k % 20), 0.5 + 0.11 * (k // 20)], 1),
                    radius=0.05)
    w.add_shape("circle", center=(0.0, 0.0), radius=0.3)
    w.start(1 / 60)
    return w


def _same(a: World, b: World) -> bool:
    return all(np.array_equal(getattr(a.particles, k), getattr(b.particles, k))
               for k in ("x", "x_prev", "v"))


@needs_numba
def test_the_gate_switches_every_module_at_once(restore_backend):
    backend.set_ready(False)
    backend.set_ready(True, "kernels")                # parts switch on their own
    assert backend.compiled("auto") and not backend.usable("contacts")
    backend.set_ready(False)
    assert not backend.compiled("auto") and not backend.usable("contacts")
    with backend.loading():                   # the loading thread may use them
        assert backend.compiled("auto") and backend.usable("contacts")
    assert not backend.compiled("auto")
    backend.set_ready(True)
    assert backend.compiled("auto") and backend.usable("contacts")


@needs_numba
@pytest.mark.parametrize("make", [_cloth, lambda: _cloth("float32"), _pile])
def test_worlds_give_the_same_bits_before_and_after_the_switch(make, restore_backend,
                                                               monkeypatch):
    """A world that runs numpy for its first frames and the kernels after (as in the
    app while the kernels compile) equals one that ran either all along."""
    calls = []
    real = kernels.verlet_frame
    monkeypatch.setattr(kernels, "verlet_frame", lambda *a: calls.append(1) or real(*a))
    runs = []
    for switch_at in (0, 12, None):            # compiled from the start, switched, numpy
        backend.set_ready(switch_at == 0)
        w = make()
        for f in range(30):
            if f == switch_at:
                backend.set_ready(True)
            w.step(1 / 60)
        runs.append(w)
    backend.set_ready(True)
    compiled, switched, numpy_only = runs
    assert _same(compiled, switched)
    assert _same(compiled, numpy_only)
    assert calls or make is _pile             # the compiled frame ran for the cloths


@needs_numba
def test_a_switch_asked_for_in_the_middle_of_a_step_waits_for_the_next(restore_backend,
                                                                       monkeypatch):
    """The warm-up's loading thread makes the kernels ready while the window's thread may
    be in the middle of a step. Switched there, the bridge's step ran its first
    iterations on the numpy references and the rest compiled (whose multipliers are
    kept in another order): numbers of neither path, and a replay of the session
    differed from its recording. Asked for mid-step (after the first of the step's 16
    sweeps), the switch now waits for the step's end: the same bits as a world
    switched between two steps."""
    from sandbox.levels import build_world, find_level, load_level
    from sandbox.sim.constraints import Constraints

    def bridge():
        return build_world(load_level(find_level("bridge")))

    backend.set_ready(False)
    a, b = bridge(), bridge()
    assert any(a.constraints.compliance > 0)        # the multipliers matter
    for _ in range(20):
        a.step(1 / 60)
        b.step(1 / 60)
    real, sweeps = Constraints.project, []

    def project(self, *args):
        real(self, *args)
        sweeps.append(backend.usable("kernels"))
        if len(sweeps) == 1:
            backend.ready_between_steps("kernels")     # as the loading thread does
            backend.ready_between_steps("contacts")

    monkeypatch.setattr(Constraints, "project", project)
    a.step(1 / 60)
    monkeypatch.setattr(Constraints, "project", real)
    assert len(sweeps) > 1 and not any(sweeps)       # the whole step on numpy
    assert not backend.ready("kernels")              # until a step starts
    b.step(1 / 60)                                   # switched at its start: compiled
    assert backend.ready()
    for _ in range(20):
        a.step(1 / 60)
        b.step(1 / 60)
    assert _same(a, b)


def test_threads_that_settle_at_once_apply_each_switch_once(monkeypatch):
    """Worlds stepped in several threads settle the warm-up's switches at their steps'
    starts, possibly at once: every switch asked for is applied exactly once, and no
    thread fails on a queue another one emptied between its look and its take."""
    import sys
    import threading

    applied, errors = [], []
    backend._pending.clear()                        # nothing asked for before
    monkeypatch.setattr(backend, "set_ready", lambda ready, part=None: applied.append(part))
    monkeypatch.setattr(backend, "hold",
                        lambda dtype, held=True, part=None: applied.append(dtype))
    asked = 3000
    go = threading.Barrier(5)

    def feed():
        go.wait()
        for k in range(asked):
            backend.ready_between_steps(f"part{k}")

    def step():
        go.wait()
        try:
            for _ in range(4000):
                backend.settle()
        except Exception as e:                      # noqa: BLE001 - what the test counts
            errors.append(e)

    threads = [threading.Thread(target=feed)] + [threading.Thread(target=step)
                                                 for _ in range(4)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                     # threads take turns often
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    backend.settle()                                # what the steppers left
    assert errors == []
    assert sorted(applied) == sorted(f"part{k}" for k in range(asked))


@needs_numba
def test_background_warm_up_switches_to_the_compiled_kernels(restore_backend):
    h = warmup.start_background(dtypes=("float64",), contact_dtypes=(), use_process=False)
    assert h.status()                               # a line for the HUD at any time
    assert h.wait(600), h.error
    assert h.ready and h.done and h.seconds is not None
    assert h.status() == "fast physics ready"
    assert backend.compiled("auto")


@needs_numba
def test_a_level_without_contacts_compiles_none_until_one_appears(restore_backend,
                                                                 tmp_path, monkeypatch):
    """9 of the 15 shipped levels have no contacts, and the contact stages are most of the
    compiling: a warm-up without them leaves contacts on the numpy references (never
    compiled inside a frame), and need_contacts() adds them behind the frames once a
    world with contacts appears; the pile steps the same bits before and after."""
    monkeypatch.setattr(warmup, "_marker", lambda fp: tmp_path / f"warm-{fp}")
    h = warmup.start_background(dtypes=("float64",), contact_dtypes=(), use_process=False)
    assert h.wait(600), h.error
    assert backend.usable("kernels") and not backend.usable("contacts")
    a, b = _pile(), _pile()
    assert not a.colliders.compiled(a.particles, a.particles.x_prev)    # numpy contacts
    for _ in range(5):
        a.step(1 / 60)
    assert h.need_contacts() and not h.done
    assert not h.need_contacts()                      # once
    assert h.wait(600), h.error
    assert h.ready and backend.usable("contacts") and "contacts" in h.ready_parts
    assert (tmp_path / f"warm-{warmup._fingerprint(('float64',), ('float64',), ())}"
            ).exists()
    assert a.colliders.compiled(a.particles, a.particles.x_prev)        # compiled now
    for _ in range(5):
        b.step(1 / 60)
    for _ in range(5):
        a.step(1 / 60)
        b.step(1 / 60)
    assert _same(a, b)                                # the same bits either way


@needs_numba
def test_a_float_type_no_world_uses_is_compiled_only_when_one_appears(restore_backend,
                                                                     tmp_path, monkeypatch):
    """The warm-up compiles the first level's float type only. A world of the other
    runs its numpy references meanwhile (held: never compiled inside a frame), and
    need_dtype() compiles its kernels behind the frames once such a world appears;
    the float32 cloth then runs its compiled frame, the same bits as before."""
    monkeypatch.setattr(warmup, "_marker", lambda fp: tmp_path / f"warm-{fp}")
    h = warmup.start_background(dtypes=("float64",), contact_dtypes=(), use_process=False)
    assert h.wait(600), h.error
    assert backend.held("kernels") == ("float32",)
    frames = []
    real = kernels.verlet_frame
    monkeypatch.setattr(kernels, "verlet_frame", lambda *a: frames.append(1) or real(*a))
    a, b = _cloth("float32"), _cloth("float32")
    assert a.constraints.kernel_args(a.particles.x, a.particles.inv_mass) is None
    for _ in range(5):
        a.step(1 / 60)
    assert not frames                                 # numpy while held
    assert not h.need_dtype("float64")                # compiled already
    assert h.need_dtype("float32") and not h.done
    assert not h.need_dtype("float32")                # once
    assert h.wait(600), h.error
    assert backend.held("kernels") == () and h.dtypes == ("float64", "float32")
    assert (tmp_path / f"warm-{warmup._fingerprint(('float32',), (), ())}").exists()
    for _ in range(5):
        b.step(1 / 60)
    for _ in range(5):
        a.step(1 / 60)
        b.step(1 / 60)
    assert frames                                     # compiled now
    assert _same(a, b)                                # the same bits either way


@needs_numba
def test_a_float_type_runs_its_contacts_on_numpy_until_its_own_contact_stages_are_in(
        restore_backend, tmp_path, monkeypatch):
    """The contact stages are compiled per float type, apart from the constraint
    kernels: a float32 world with shapes after a float64 level (or a float32 level file
    with shapes) had its float32 kernels released with the contacts' and compiled its
    contact stages inside the window's frames (seen under Xvfb: 26 s, then 15 s, then
    more, frozen). Now its contacts stay on numpy until need_contacts("float32") has
    compiled and loaded theirs behind the frames."""
    monkeypatch.setattr(warmup, "_marker", lambda fp: tmp_path / f"warm-{fp}")
    loaded = []
    monkeypatch.setattr(warmup, "_contacts", lambda dtypes: loaded.append(tuple(dtypes)))
    h = warmup.start_background(dtypes=("float64",), contact_dtypes=("float64",),
                                use_process=False)
    assert h.wait(600), h.error
    f64, f32 = np.dtype(np.float64), np.dtype(np.float32)
    assert backend.usable("contacts", f64) and not backend.usable("contacts", f32)
    assert h.need_dtype("float32") and h.wait(600), h.error
    assert backend.usable("kernels", f32)             # its constraint kernels: in
    assert not backend.usable("contacts", f32)        # its contact stages: not yet
    assert backend.held("contacts") == ("float32",) and backend.held("kernels") == ()
    assert not h.need_contacts("float64")             # compiled already
    assert h.need_contacts("float32") and not h.done
    assert not h.need_contacts("float32")             # once
    assert h.wait(600), h.error
    assert backend.usable("contacts", f32) and backend.held() == ()
    assert loaded == [("float64",), ("float32",)]     # each type's stages, once


def test_a_hold_is_per_part_and_float_type(restore_backend):
    """``hold`` with a part keeps only that part's kernels of that type on numpy."""
    backend.set_ready(True)
    f32 = np.dtype(np.float32)
    backend.hold("float32", part="contacts")
    assert backend.held() == ("float32",) and backend.held("kernels") == ()
    assert not backend.usable("contacts", f32)
    assert backend.usable("kernels", f32) == backend.INSTALLED
    backend.release_between_steps("float32", "contacts")
    assert backend.held() == ("float32",)             # at the next step's start
    backend.settle()
    assert backend.held() == ()


@needs_numba
def test_the_first_phase_builds_only_what_it_was_started_for(restore_backend, tmp_path,
                                                             monkeypatch):
    """A level with contacts opened while the first phase still runs: the contact stages
    are the later phase's (compiled in its child), never added to the first phase's
    loading in this process, where they were compiled with the interpreter held (a
    minute of frozen frames)."""
    import threading

    monkeypatch.setattr(warmup, "_marker", lambda fp: tmp_path / f"warm-{fp}")
    asked, contacts = [], []
    inside, go = threading.Event(), threading.Event()
    real, real_kernels = warmup.warm_up, kernels.warm_up

    def first_kernels(dtypes):                    # the first phase, under way
        if not inside.is_set():
            inside.set()
            go.wait(60)
        return real_kernels(dtypes)

    def first_phase(dtypes, contact_dtypes=None, *args, **kw):
        asked.append(tuple(contact_dtypes))
        return real(dtypes, contact_dtypes, *args, **kw)

    monkeypatch.setattr(kernels, "warm_up", first_kernels)
    monkeypatch.setattr(warmup, "warm_up", first_phase)
    monkeypatch.setattr(warmup, "_contacts", lambda dtypes: contacts.append(dtypes))
    h = warmup.start_background(dtypes=("float64",), contact_dtypes=(), use_process=False)
    assert inside.wait(60)
    assert h.need_contacts()                      # while the first phase loads
    go.set()
    assert h.wait(600), h.error
    assert asked == [()]                          # the first phase: no contact stages
    assert [c for c in contacts if c] == [("float64",)]   # by the later phase
    assert backend.ready("contacts")


def test_the_status_names_what_is_being_built():
    """While the child compiles: the physics first, then the collisions when they were
    asked for, else the drawing (a level without contacts compiles none)."""
    w = warmup.Warmup(("float64",), (), (), use_process=True)
    w.phase = "compiling"
    assert w.status().startswith("first start: building fast physics")
    w.ready_parts = {"kernels"}
    assert w.status().startswith("first start: building fast drawing")
    w.contact_dtypes = ("float64",)
    assert w.status().startswith("first start: building fast collisions")
    w._later, w._building = object(), "float32 physics"    # a phase asked for later
    assert w.status().startswith("building fast float32 physics")


@needs_numba
def test_background_warm_up_in_a_child_process(restore_backend, tmp_path, monkeypatch):
    """The child fills numba's cache (here: the project's, already warm); a failing
    child leaves the numpy references running and says so."""
    monkeypatch.setattr(warmup, "_marker", lambda fp: tmp_path / f"warm-{fp}")
    h = warmup.start_background(dtypes=("float64",), contact_dtypes=())
    assert h.wait(600), h.error
    assert (tmp_path / f"warm-{warmup._fingerprint(('float64',), (), ())}").exists()
    assert h.ready_parts == {"kernels", "extras"}
    bad = warmup.start_background(dtypes=("float64",), contact_dtypes=(),
                                  extra=("no_such_module_here:warm_up",))
    assert not bad.wait(600)
    assert bad.phase == "numpy" and bad.error
    # The child had compiled the constraint kernels before it failed: those switched,
    # the rest stays on the references (still correct) and the status says so.
    assert bad.ready_parts == {"kernels"} and backend.compiled("auto")
    assert not backend.usable("contacts")
    assert bad.status() == "compiled kernels, numpy contacts (compiling failed)"


@needs_numba
def test_a_small_first_world_starts_on_numpy_even_with_a_warm_cache(restore_backend,
                                                                    tmp_path, monkeypatch):
    """Loading kernels on their first call starts numba itself (~0.9 s): a small world,
    whose numpy frames cost milliseconds, runs them until the thread has loaded them."""
    marker = tmp_path / "warm"
    marker.touch()                                   # the cache is known to be full
    monkeypatch.setattr(warmup, "_marker", lambda fp: marker)
    monkeypatch.setattr(warmup, "WARM_DELAY_S", 0.3)
    h = warmup.start_background(dtypes=("float64",), contact_dtypes=(), use_process=False,
                                numpy_first=True)
    assert h.warm and not backend.compiled("auto")         # numpy for the first frames
    assert h.status() == ("loading fast physics: slower frames for a moment, the same "
                          "motion")                      # and the HUD says so
    assert h.wait(600), h.error
    assert backend.compiled("auto")
    big = warmup.start_background(dtypes=("float64",), contact_dtypes=(), use_process=False)
    assert big.warm and backend.compiled("auto")           # a big world: compiled at once
    assert big.status() in ("loading fast physics", "fast physics ready")
    assert big.wait(600), big.error


@needs_numba
def test_the_child_marks_the_cache_full_when_it_has_filled_it(tmp_path, monkeypatch):
    """The child marks the cache itself (``warm_up`` does, when it has filled it): a
    window closed before its own loading thread finished (a quick look, ``--frames
    1``) must not make every later start compile. A failed fill marks nothing, nor a
    run under ``NUMBA_DISABLE_JIT``, where nothing went into the cache."""
    monkeypatch.setattr(warmup, "_marker", lambda fp: tmp_path / f"warm-{fp}")
    monkeypatch.setattr(warmup.os, "nice", lambda n: 0)     # the child lowers its priority
    monkeypatch.setattr(warmup.backend, "quiet", False)     # _main sets it: restored after
    done = []
    monkeypatch.setattr(warmup.kernels, "warm_up", lambda d: done.append(d))
    monkeypatch.setattr(warmup, "_contacts", lambda d: done.append(("contacts", d)))
    monkeypatch.setattr(warmup, "_extras", lambda e: done.append(("extras", e)))
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    argv = ["--dtypes", "float64,float32", "--contact-dtypes", "float64", "--extra", "m:f"]
    assert warmup._main(argv) == 0 and done
    fp = warmup._fingerprint(("float64", "float32"), ("float64",), ("m:f",))
    assert (tmp_path / f"warm-{fp}").exists()
    monkeypatch.setattr(warmup, "_contacts", lambda d: 1 / 0)          # a failed fill
    with pytest.raises(ZeroDivisionError):
        warmup._main(["--dtypes", "float32"])
    assert not (tmp_path / f"warm-{warmup._fingerprint(('float32',), ('float64',), ())}").exists()
    monkeypatch.setattr(warmup, "_contacts", lambda d: None)
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    assert warmup._main(["--dtypes", "float32"]) == 0
    assert not (tmp_path / f"warm-{warmup._fingerprint(('float32',), ('float64',), ())}").exists()


@needs_numba
def test_a_foreground_warm_up_on_an_empty_cache_says_so_once(tmp_path, monkeypatch, capsys):
    """A script or a game calling ``warm_up()`` on an empty cache waits minutes: it is
    told so, once, on stderr, before the wait; with the cache marked full, not; the
    window's own loading thread (``tell=False``) and the child (``backend.quiet``) never
    print it."""
    monkeypatch.setattr(warmup, "_marker", lambda fp: tmp_path / f"warm-{fp}")
    monkeypatch.setattr(warmup.kernels, "warm_up", lambda d: None)
    monkeypatch.setattr(warmup, "_contacts", lambda d: None)
    monkeypatch.setattr(warmup.backend, "quiet", False)
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    warmup.warm_up(("float64",), ("float64",), tell=False)
    assert capsys.readouterr().err == ""
    (tmp_path / f"warm-{warmup._fingerprint(('float64',), ('float64',), ())}").unlink()
    warmup.warm_up(("float64",), ("float64",))
    assert capsys.readouterr().err.count("compiling the physics kernels") == 1
    warmup.warm_up(("float64",), ("float64",))                 # marked full: silent
    assert capsys.readouterr().err == ""


@needs_numba
def test_the_drawing_kernels_come_before_the_contact_stages(monkeypatch):
    """The contact stages are most of a first compile: the core's other kernels, then
    the extras (the renderer's), then they; the child says when each part is in, so
    a cloth is simulated and drawn compiled while the contacts still compile. Every
    kernel that follows the part "kernels" is in before it is said to be: the view's
    strain and the Lagrange solvers were extras, compiled after it, and the window's
    frame compiled the strain itself meanwhile (and a switch to Lagrange, its solvers)."""
    calls = []
    monkeypatch.setattr(warmup.kernels, "warm_up", lambda d: calls.append(("kernels", d)))
    monkeypatch.setattr(warmup.view, "warm_up", lambda d: calls.append(("strain", d)))
    monkeypatch.setattr(warmup.lagrange, "warm_up", lambda: calls.append("lagrange"))
    monkeypatch.setattr(warmup, "_extras", lambda e: calls.append(("extras", e)))
    monkeypatch.setattr(warmup, "_contacts", lambda d: calls.append(("contacts", d)))
    warmup.warm_up(("float64", "float32"), ("float64",), extra=("m:f",),
                   on_kernels=lambda: calls.append("said kernels"),
                   on_extra=lambda: calls.append("said extras"))
    # The level's float type first; the other one last, for a level switch.
    assert calls == [("kernels", ("float64",)), ("strain", ("float64",)), "lagrange",
                     "said kernels", ("extras", ("m:f",)), "said extras",
                     ("contacts", ("float64",)), ("kernels", ("float32",)),
                     ("strain", ("float32",)), "lagrange"]


@needs_numba
def test_the_strain_follows_the_kernels_part_and_its_float_type(restore_backend,
                                                                 monkeypatch):
    """The view's strain runs compiled exactly when its warm-up phase is in: the part
    "kernels" ready and the world's float type not held (a float32 world while only
    the float64 kernels are compiled); else numpy, never a compile inside a frame."""
    from sandbox.sim import view

    calls = []
    monkeypatch.setattr(view, "_strain_kernel", lambda x, *a: calls.append(x.dtype.name))
    m = 300                                         # above the compiled kernel's 256
    x = np.stack([np.arange(m + 1.0), np.zeros(m + 1)], 1)
    i = np.arange(m)
    args = (i, i + 1, np.ones(m), np.zeros(m, np.int8))
    backend.set_ready(False, "kernels")
    s = view.link_strain(x, *args)
    assert calls == [] and np.array_equal(s, np.zeros(m))      # numpy: every link rest
    backend.set_ready(True, "kernels")
    backend.hold("float32")
    view.link_strain(x.astype(np.float32), *args)
    assert calls == []
    view.link_strain(x, *args)
    assert calls == ["float64"]


@needs_numba
def test_the_contact_warm_up_takes_the_hands_substep_path_too(monkeypatch):
    """A grab runs the contact stages substep by substep (``begin.begin``,
    ``project``, ``finish``), not in the whole compiled frame: the warm-up must load
    those too, or the first grab in the window stops it while they load."""
    from sandbox.sim.collide import colliders, frame

    seen = []
    for module, name in ((colliders.begin_stage, "begin"), (frame, "project"),
                         (frame, "finish")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name,
                            lambda *a, real=real, name=name: (seen.append(name), real(*a))[1])
    warmup._contacts(("float64",))
    assert {"begin", "project", "finish"} <= set(seen)


def test_policy_one_thread_when_other_processes_hold_the_cores():
    class Meter:
        value = 0.0

        def others(self):
            return self.value

    meter = Meter()
    p = cores.CorePolicy(mode="auto", meter=meter)
    p.cores = 2
    key = ("frame", 1)
    assert not p.parallel(key, 500)                  # too small to spread
    assert not p.parallel(key, 50_000)               # one thread is timed first
    p.record(key, False, 0.200)                      # its first call loads the kernel:
    assert not p.parallel(key, 50_000)               # not a timing
    p.record(key, False, 0.010)
    assert p.parallel(key, 50_000)                   # then two
    p.record(key, True, 0.300)                       # (their first call: not a timing)
    assert p.parallel(key, 50_000)
    p.record(key, True, 0.006)
    assert p.parallel(key, 50_000)                   # faster: kept
    meter.value = 1.0                                # a busy process appears
    assert not p.parallel(key, 50_000)
    meter.value = None                               # cannot tell: one thread
    assert not p.parallel(key, 50_000)
    meter.value = 0.0
    p.record(key, True, 0.5)                         # a collapsed two-thread frame
    assert not p.parallel(key, 50_000)               # held on one thread
    q = cores.CorePolicy(mode="auto", meter=meter)
    q.cores = 2
    for first in (True, False):                      # each mode's first: not a timing
        q.record(key, False, 1.0 if first else 0.010)
        q.record(key, True, 1.0 if first else 0.0099)   # not 10 % faster: one thread
    assert [q.parallel(key, 50_000) for _ in range(cores.PROBE_EVERY + 1)].count(True) == 1
    q.set_mode("serial")
    assert not q.parallel(key, 50_000)
    q.set_mode("parallel")
    assert q.parallel(key, 10)
    with pytest.raises(ValueError):
        q.set_mode("many")


def test_policy_without_a_meter_keeps_one_thread():
    """The core reads no machine state: without a meter handed in (``set_meter``), the
    load is unknown and the sweep stays on one thread, as where /proc/stat is unreadable."""
    p = cores.CorePolicy(mode="auto")
    p.cores = 2
    key = ("frame", 1)
    for seconds in (0.2, 0.010):                     # one thread timed (first: not a timing)
        p.record(key, False, seconds)
    assert not p.parallel(key, 50_000)


def test_load_meter_reads_other_processes_time(tmp_path):
    stat = tmp_path / "stat"
    m = LoadMeter(str(stat))
    assert m.others() is None                        # unreadable: unknown
    stat.write_text("cpu  100 0 100 1000 0 0 0 0 0 0\n")
    m = LoadMeter(str(stat))
    assert m.others() is None                        # one sample: no interval yet
    m._last = (m._last[0] - 1.0, m._last[1] - 2.0, m._last[2])   # 2 cores busy for 1 s
    stat.write_text("cpu  100 0 100 1000 0 0 0 0 0 0\n")
    m._others = None
    got = m.others()
    assert got is not None and got == pytest.approx(2.0, abs=0.3)



# ------------------------------------------------------------------- stale kernels

@needs_numba
def test_cached_kernels_are_dropped_when_the_kernel_sources_change(tmp_path, monkeypatch):
    """numba's cache checks a kernel's own file only: a whole frame cached before an
    update of the broad phase's file would run the old broad phase. The stamp of the
    kernel sources drops every cached kernel of the package when they change."""
    names = {s.name for s in backend._kernel_sources()}
    assert {"kernels.py", "frame.py", "begin.py", "broad.py", "raster.py", "lagrange.py"} <= names
    # Copies of two kernel modules stand for the package; one cache folder for both.
    src = tmp_path / "src"
    src.mkdir()
    solver, broad = src / "solver.py", src / "broad.py"
    solver.write_text("@jit\ndef frame(): pass\n")
    broad.write_text("@jit\ndef pair_list(): pass\n")
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setattr(backend, "_kernel_sources", lambda: [broad, solver])
    monkeypatch.setattr(backend, "_cache_dir_of", lambda path: cache)
    monkeypatch.setattr(backend, "_marker_dir", lambda: cache)
    assert warmup._cache_dir() == cache                # the warm-up marks it there

    def fill():
        files = [cache / "solver.frame-2.py311.nbi", cache / "solver.frame-2.py311.1.nbc"]
        for f in files:
            f.write_bytes(b"compiled")
        return files

    keep = cache / "other.frame-2.py311.nbi"       # not one of these modules: kept
    keep.write_bytes(b"theirs")
    files = fill()
    assert backend.drop_stale_kernels() == 2      # no stamp yet: the cache predates it
    assert not any(f.exists() for f in files) and keep.exists()
    files = fill()                                # compiled again from these sources
    assert backend.drop_stale_kernels() == 0
    assert all(f.exists() for f in files)
    mark = cache / "sandbox-warm-0123"             # the warm-up said the cache is full
    mark.touch()
    broad.write_text("@jit\ndef pair_list(): return 1\n")   # an update of broad.py only
    assert backend.drop_stale_kernels() == 2
    assert not any(f.exists() for f in files) and keep.exists()
    assert not mark.exists()                       # it is not: the next start compiles
    assert backend.drop_stale_kernels() == 0


_LATE = r"""
import sys
from sandbox.app import main as app                 # everything the window imports
from sandbox.sim import backend, kernels, step_kernels
from sandbox.sim.collide import frame
from sandbox.app import raster
from sandbox.levels import build_world, find_level, load_level

held = [step_kernels.verlet_step]                   # kept before numba is there
w = build_world(load_level(find_level("playground")))
backend.set_ready(False)                            # the app's first frames: numpy
w.step(1 / 60)
assert "numba" not in sys.modules, "numba imported before a kernel was needed"
assert type(held[0]) is backend.Kernel and not backend.compiled("auto")

backend.set_ready(True)
assert backend.compiled("auto") and "numba" in sys.modules
import numba
from numba.core.registry import CPUDispatcher
# Every module's name for a kernel is its dispatcher now, and prange is numba's.
assert isinstance(step_kernels.verlet_step, CPUDispatcher)
assert isinstance(frame._verlet_step, CPUDispatcher)      # imported under another name
assert isinstance(raster._draw_kernel, CPUDispatcher)
assert kernels.prange is numba.prange
assert held[0].dispatcher is step_kernels.verlet_step
w.step(1 / 60)
# A stand-in kept from before still runs the same kernel.
import numpy as np
x = np.zeros((3, 2)); a = np.ones((3, 2)); out1 = np.empty_like(x); out2 = np.empty_like(x)
held[0](x, x.copy(), a, 1.0, 1.0, 1.0, 1.0, out1)
step_kernels.verlet_step(x, x.copy(), a, 1.0, 1.0, 1.0, 1.0, out2)
assert np.array_equal(out1, out2)
print("ok")
"""


@needs_numba
def test_numba_is_imported_when_a_kernel_is_first_needed():
    """Importing the app and running numpy frames imports no numba (a third of a warm
    start); the first yes of ``usable()`` does, and puts the dispatchers in every
    module's names."""
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-c", _LATE], cwd=warmup.ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_a_stand_in_runs_as_python_when_numba_cannot_be_used(monkeypatch):
    """If numba fails at its late import, the kernels stay numpy and a stand-in called
    anyway runs its function as Python (``prange`` is ``range`` then)."""
    def double(a):
        for i in backend.prange(a.size):
            a[i] *= 2
        return a
    k = backend.Kernel(double, {})
    monkeypatch.setattr(backend, "_numba", None)
    monkeypatch.setattr(backend, "_failed", "ImportError: broken")
    monkeypatch.setattr(backend, "_ready", set(backend.PARTS))
    assert not backend.compile_all() and not backend.usable()
    assert np.array_equal(k(np.arange(3.0)), [0.0, 2.0, 4.0]) and k.dispatcher is None


#: Run in a fresh process (its dispatchers know only what it loads): the warm-up's
#: phases (float64 kernels and contacts, float32 kernels; float32 contacts held, as
#: in the window after the 200x200 cloth), then every shipped level in both float
#: types under every integrator and link method (copies, as the window's worlds are),
#: with a hand, the view's strain and a ghost; prints every kernel that took a type
#: signature the phases had not given it (each one loaded, or compiled, inside a
#: frame on a first start).
_PHASES_COVER = """
import copy

import numpy as np
from sandbox import levels, warmup
from sandbox.sim import backend, lagrange
from sandbox.sim.integrators import INTEGRATORS

backend.set_ready(False)
with backend.loading():
    warmup._core(("float64",))
    warmup._contacts(("float64",))
    warmup._core(("float32",))
before = {id(k): set(k.dispatcher.signatures) for k in backend._kernels}
backend.set_ready(True)
backend.hold("float32", part="contacts")        # as the window after a float32 level
worlds = 0
for name in levels.level_names():
    first = levels.load_level(levels.find_level(name))
    for dtype in ("float64", "float32"):
        level = first
        if level.world.dtype != dtype:
            level = levels.with_world(first, dtype=dtype, constraint_method="xpbd")
        for integrator in INTEGRATORS:
            for method in lagrange.CONSTRAINT_METHODS:
                w = copy.deepcopy(levels.build_world(level))    # as the window's
                try:
                    w.set_integrator(integrator)
                    w.set_constraint_method(method)
                except lagrange.ConstraintMethodError:
                    continue
                worlds += 1
                for _ in range(2):
                    w.step(1 / 60)
                    w.view().strain()
                k = int(np.argmax(w.particles.inv_mass > 0))
                w.grab(k)
                w.drag_to(w.particles.x[k] + 0.05)
                w.step(1 / 60)
                w.release()
                ghost = copy.deepcopy(w)                # G: another integrator
                ghost.set_integrator("rk4" if integrator != "rk4" else "euler")
                ghost.step(1 / 60)
print("worlds", worlds)
for k in backend._kernels:
    for sig in set(k.dispatcher.signatures) - before[id(k)]:
        print("NEW", k.__module__, k.__qualname__, str(sig)[:300])
"""


@needs_numba
def test_the_warm_up_phases_cover_every_kernel_a_world_calls():
    """Every kernel signature a world calls is one a warm-up phase loaded for its
    part and float type: stepped in every shipped level, both float types, every
    integrator and link method, with a hand and the view's strain, no kernel is
    called with types the phases did not give it. Found this way: the cradle on
    explicit Euler with Lagrange links called ``begin`` with a writable acceleration
    (a compile inside the frame), and a long drag rebuilt the Verlet list with
    ``pair_list``, which the warm-up never called from Python (loaded in a frame)."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _PHASES_COVER], capture_output=True,
                       text=True, timeout=1200, cwd=warmup.ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    worlds = int(r.stdout.split("worlds", 1)[1].split()[0])
    assert worlds > 400                               # the sweep ran
    assert [line for line in r.stdout.splitlines() if line.startswith("NEW")] == []
