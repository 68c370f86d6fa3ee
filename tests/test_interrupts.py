"""Ctrl-C stops a run between TensorFlow calls, never inside one (flowsim.core.interrupts).

The tests send SIGINT to this process from inside a chunk.  Every KeyboardInterrupt
is caught inside the test (``stopped``), so a regression fails the test instead of
ending the pytest session.
"""
import signal
import threading
import time

import pytest
from helpers import run_python

import flowsim
from flowsim.core import interrupts, kernel
from flowsim.targets import double_gaussian


@pytest.fixture(autouse=True)
def python_ctrl_c():
    """Python's own SIGINT handler, whatever this process inherited (an ignored SIGINT
    in a background job), restored afterwards."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def ctrl_c():
    """SIGINT to the main thread (from a worker, it wakes the main thread's wait)."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def stopped(run):
    """``run()``'s KeyboardInterrupt (failing the test if it ends without one)."""
    try:
        run()
    except KeyboardInterrupt as exc:
        return exc
    pytest.fail("no KeyboardInterrupt")


def test_held_raises_the_ctrl_c_when_the_block_ends_and_restores_the_handler():
    log = []

    def block():
        with interrupts.held():
            ctrl_c()
            log.append("after the signal")        # still running: nothing raised here
        log.append("after the block")

    exc = stopped(block)
    assert log == ["after the signal"] and exc.__context__ is None
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_held_turns_an_error_ended_block_into_the_interrupt():
    def block():
        with interrupts.held():
            ctrl_c()
            raise ValueError("the chunk failed too")

    assert isinstance(stopped(block).__context__, ValueError)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_held_leaves_a_programs_own_handler_and_other_threads_alone():
    calls = []

    def own(*_):
        calls.append("own")
    signal.signal(signal.SIGINT, own)
    with interrupts.held():
        assert signal.getsignal(signal.SIGINT) is own
        ctrl_c()
        time.sleep(0.01)
    assert calls == ["own"] and signal.getsignal(signal.SIGINT) is own

    signal.signal(signal.SIGINT, signal.default_int_handler)
    seen = []

    def worker():
        with interrupts.held():
            seen.append(signal.getsignal(signal.SIGINT))
    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == [signal.default_int_handler]


def test_ctrl_c_during_a_chunk_stops_flow_run_after_the_chunk(monkeypatch):
    """The interrupt is raised after the chunk's TensorFlow call returned, not inside
    it, and Flow.run still notes where the run stopped."""
    compiled, log = kernel.compiled, []

    def interrupting(simulation, spec, device):
        fn = compiled(simulation, spec, device)

        def chunk(*args, **kwargs):
            ctrl_c()
            log.append("started")
            rows = fn(*args, **kwargs)               # TensorFlow work after the signal
            log.append("finished")
            return rows
        return chunk

    monkeypatch.setattr(kernel, "compiled", interrupting)
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, 4), 2048, seed=1, block_size=1024,
                        events_limit=1024, quiet=True)
    exc = stopped(lambda: flow.run(3))
    assert log == ["started", "finished"]           # one chunk, run to its end
    assert exc.__notes__ == ["flowsim: interrupted during iteration 1 (no checkpoint: pass "
                             "checkpoint=PATH to run() to make runs resumable)"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class _Watched:
    """The direct path's thread pool, counting block calls in flight; the first
    sends Ctrl-C; each takes its time."""

    def __init__(self, pool):
        self.pool, self.lock = pool, threading.Lock()
        self.in_flight, self.done, self.first = 0, 0, True

    def map(self, fn, items):
        def watched(b):
            with self.lock:
                self.in_flight += 1
                first, self.first = self.first, False
            try:
                if first:
                    ctrl_c()                        # while the main thread waits for us
                time.sleep(0.3)
                return fn(b)
            finally:
                with self.lock:
                    self.in_flight -= 1
                    self.done += 1
        return self.pool.map(watched, items)


def test_ctrl_c_leaves_no_block_call_running_on_the_direct_paths_threads(monkeypatch):
    """A short run's chunk calls its blocks from kernel._pool's threads; when the
    KeyboardInterrupt leaves Flow.run, none of them is still inside TensorFlow."""
    monkeypatch.setattr(kernel, "DIRECT_THREADS", 2)
    pool = _Watched(kernel._pool())
    monkeypatch.setattr(kernel, "_pool", lambda: pool)
    # a block size of its own: a fresh kernel whose loop was never built (short run)
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, 3), 4 * 320, seed=2, block_size=320,
                        quiet=True)
    stopped(lambda: flow.run(2))
    assert (pool.in_flight, pool.done) == (0, 4)    # every block of the chunk returned


def test_ctrl_c_joins_the_device_threads_of_threadpoolflow(monkeypatch):
    from flowsim.distribution import ThreadPoolFlow
    from flowsim.distribution.threads import ThreadExecutor
    compute, log = ThreadExecutor.compute, []

    def interrupting(self, task, first, n, device):
        log.append("started")
        if len(log) == 1:
            ctrl_c()
            time.sleep(0.5)
        rows = compute(self, task, first, n, device)
        log.append("finished")
        return rows

    monkeypatch.setattr(ThreadExecutor, "compute", interrupting)
    flow = ThreadPoolFlow(flowsim.Plain(double_gaussian, 4), 4096, seed=3, block_size=1024,
                          events_limit=1024, quiet=True)
    stopped(lambda: flow.run(2))
    assert log[:2] == ["started", "finished"] and log.count("started") == log.count("finished")
    assert [t.name for t in threading.enumerate() if t.name.startswith("flowsim-")
            and not t.name.startswith("flowsim-block")] == []     # device workers joined


def test_a_second_ctrl_c_during_the_chunk_ends_the_process_at_once():
    """Killed by the second SIGINT, not ended by the chunk (which would exit 3 after 60 s)
    nor by the held first one (exit 4)."""
    code = """if True:
    import os, signal, sys, time
    signal.signal(signal.SIGINT, signal.default_int_handler)    # whatever was inherited
    import flowsim
    from flowsim.core import kernel
    from flowsim.targets import double_gaussian

    def stuck(simulation, spec, device):
        def chunk(*args, **kwargs):
            os.kill(os.getpid(), signal.SIGINT)
            while signal.getsignal(signal.SIGINT) is not signal.SIG_DFL:
                time.sleep(0.001)               # the first is held
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(60)                      # a chunk that takes its time
            sys.exit(3)
        return chunk
    kernel.compiled = stuck
    flow = flowsim.Flow(flowsim.Plain(double_gaussian, 2), 1024, seed=1, quiet=True)
    try:
        flow.run(1)
    except KeyboardInterrupt:
        sys.exit(4)
    """
    p = run_python(code, timeout=120)
    assert p.returncode == -signal.SIGINT, (p.returncode, p.stderr[-2000:])
