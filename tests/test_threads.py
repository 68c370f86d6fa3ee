"""ThreadPoolFlow / ScheduledFlow on 1, 2 and 4 logical CPUs: what only threads
have (every device used, efficiency, out-of-memory split and retry, a kernel bug
stopping every thread, thread settings, CLI).  The same bits for every algorithm
and schedule: ``test_conformance.py``.

Device counts are fixed when TensorFlow starts, so the work runs in fresh
Pythons (one per device count; the one-device run also drives the CLI), started
together and read by the tests below.  Each prints one JSON line.
"""
import json
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.costly

TIMEOUT = 420          # seconds; measured ~150-190 s wall at load average 10-12 on 2 cores

SCRIPT = r'''
import json, pickle, sys, threading, time, traceback
import numpy as np
import flowsim

n = int(sys.argv[1])
flowsim.set_virtual_cpus(n)
from flowsim import schedule
from flowsim.distribution import ScheduledFlow, ThreadPoolFlow
from flowsim.targets import double_gaussian

# Before TF initialises: the thread settings ThreadPoolFlow chooses (or the env's).
probe = ThreadPoolFlow(flowsim.Plain(double_gaussian, 8), 1000, seed=1)
import tensorflow as tf
out = {"devices": flowsim.logical_devices(), "flow_devices": probe.devices(),
       "threads": [tf.config.threading.get_intra_op_parallelism_threads(),
                   tf.config.threading.get_inter_op_parallelism_threads()],
       "chosen": list(probe.executor.thread_settings or ()),
       "cores": len(__import__("os").sched_getaffinity(0))}

# Compiling per device dominates the test time: XLA (the default) with 2 devices,
# plain TF graphs with 1 and 4 devices and for Vegas/VegasPlus.
KW = dict(n_events=60_000 + 17, block_size=1024, events_limit=4096, seed=123, quiet=True,
          jit_compile=(n == 2))
KW_ADAPTIVE = dict(KW, jit_compile=False)


def fingerprint(result, sim):
    parts = [np.asarray(r["value"]).tobytes().hex() + np.asarray(r["error"]).tobytes().hex()
             for r in result.iterations]
    state = sim.get_state()
    parts += [k + np.asarray(state[k]).tobytes().hex() for k in sorted(state)]
    return parts


def fresh(sim0):
    """A pristine copy of ``sim0`` (never run) that shares its compiled functions.

    Every flow starts from the same initial state without relying on
    set_state; the compiled kernels take the state as tensors, so sharing them
    is what one Flow does across iterations anyway (and it saves compiling
    per flow and device).  A pickled copy keeps ``sim0``'s trace key, so the
    kernel cache of :mod:`flowsim.core.kernel` serves it ``sim0``'s functions.
    """
    sim0.trace_key()                    # drawn before the copy: the copy shares it
    return pickle.loads(pickle.dumps(sim0))


def coverage(result, n_blocks):
    bad = []
    for it in {c["iteration"] for c in result.timeline}:
        seen = np.zeros(n_blocks, int)
        for c in result.timeline:
            if c["iteration"] == it and not c.get("failed"):
                seen[c["first_block"]:c["first_block"] + c["blocks"]] += 1
        if not (seen == 1).all():
            bad.append(it)
    return bad


# Bits of every algorithm and schedule: tests/test_conformance.py.  Here Plain,
# for what only threads have: every device used, efficiency, faults below.
mismatch, checks, plain = [], 0, None
checked = []
for name, make in [("Plain", lambda: flowsim.Plain(double_gaussian, 4))]:
    sim0 = make()
    kw = KW
    sim = fresh(sim0)
    want = fingerprint(flowsim.Flow(sim, device="CPU:0", **kw).run(2), sim)
    checked.append(name)
    if name == "Plain":
        plain, plain_want = sim, want
    # ThreadPoolFlow is the weighted policy; the other three through ScheduledFlow.
    flows = [("weighted (ThreadPoolFlow)", lambda: ThreadPoolFlow(sim, **kw)),
             ("static", lambda: ScheduledFlow(sim, schedule="static", **kw)),
             ("dynamic,chunk=3", lambda: ScheduledFlow(sim, schedule="dynamic", chunk=3, **kw)),
             ("guided", lambda: ScheduledFlow(sim, schedule="guided", **kw))]
    for label, make_flow in flows:
        sim = fresh(sim0)
        flow = make_flow()
        res = flow.run(2)
        checks += 1
        got = fingerprint(res, sim)
        used = sorted({c["device"] for c in res.timeline})
        if got != want:
            mismatch.append(f"{name} {label}: bits differ")
        if coverage(res, flow.grid.n_blocks):
            mismatch.append(f"{name} {label}: timeline does not cover every block once")
        if label == "static" and len(used) != n:
            mismatch.append(f"{name} static used {used}")
        if not 0 < res.efficiency <= 1:
            mismatch.append(f"{name} {label}: efficiency {res.efficiency}")
out["checked"] = checked
out["checks"], out["mismatch"] = checks, mismatch

# -- fault injection: the last device runs out of memory on its first chunk ------------
from flowsim.distribution.threads import ThreadExecutor

class OOMOnceExecutor(ThreadExecutor):
    def compute(self, task, first, n_blocks, device):
        if device == self.devices()[-1] and not getattr(self, "_failed", False):
            self._failed = True
            raise tf.errors.ResourceExhaustedError(None, None, f"injected OOM on {device}")
        return super().compute(task, first, n_blocks, device)

def OOMOnce(sim, schedule, **kw):
    return flowsim.Flow(sim, executor=OOMOnceExecutor(schedule=schedule), **kw)

sim, want = plain, plain_want                  # compiled already on every device
oom = {}
for policy in ("static", "weighted"):
    flow = OOMOnce(sim, schedule=policy, **KW)
    res = flow.run(2)
    failed = [c for c in res.timeline if c.get("failed")]
    redo = []
    for f in failed:
        redo += [c["device"] for c in res.timeline if not c.get("failed")
                 and c["iteration"] == f["iteration"]
                 and f["first_block"] <= c["first_block"] < f["first_block"] + f["blocks"]]
    oom[policy] = {"same": fingerprint(res, sim) == want, "failed": failed, "redo": redo,
                   "coverage": coverage(res, flow.grid.n_blocks)}
out["oom"] = oom

# -- a bug in the kernel: stops at once, original exception, no thread left ---------------
class KernelBug(Exception):
    pass

class BuggyExecutor(ThreadExecutor):
    def compute(self, task, first, n_blocks, device):
        if first <= 40 < first + n_blocks:
            raise KernelBug(f"bug in block 40 on {device}")
        return super().compute(task, first, n_blocks, device)

def Buggy(sim, schedule, **kw):
    return flowsim.Flow(sim, executor=BuggyExecutor(schedule=schedule), **kw)

def catch(make):
    start = time.perf_counter()
    flow = make()
    try:
        flow.run(1)
        return {"raised": None}
    except BaseException as exc:
        tb = "".join(traceback.format_exception(exc))
        time.sleep(0.2)
        return {"raised": type(exc).__name__, "message": str(exc), "traceback": tb,
                "seconds": time.perf_counter() - start, "chunks": len(flow.timeline),
                "threads": [t.name for t in threading.enumerate() if t.name.startswith("flowsim-")]}

big = dict(KW, n_events=1024 * 400, events_limit=1024)     # 400 chunks queued
out["bug"] = catch(lambda: Buggy(plain, schedule="dynamic", **big))

def assert_kernel(x):
    tf.debugging.assert_less(tf.reduce_max(x), tf.constant(-1.0, x.dtype),
                             message="integrand bug: x out of range")
    return tf.reduce_sum(x, axis=1)

if n == 2:
    out["tf_bug"] = catch(lambda: ThreadPoolFlow(flowsim.Plain(assert_kernel, 4),
                                                 **KW_ADAPTIVE))

# -- mixed device types: 2 of 4 logical CPUs counted as GPUs, random delays -------------
if n == 4:
  import random
  from flowsim.testing import device_types

  def bits(res):
      return [np.asarray(r["value"]).tobytes().hex() + np.asarray(r["error"]).tobytes().hex()
              for r in res.iterations]

  mixed = {}
  for name, make in [("Plain", lambda: flowsim.Plain(double_gaussian, 4)),
                     ("VegasPlus", lambda: flowsim.VegasPlus(double_gaussian, 4))]:
      all_cpu = bits(ThreadPoolFlow(make(), **KW_ADAPTIVE).run(2))
      seen, used, rng = {}, set(), random.Random(7)
      for run in range(3):
          delays = {f"CPU:{i}": rng.choice([0.0, 0.002, 0.01]) for i in range(4)}
          for policy in ("static", "dynamic", "guided", "weighted"):
              with device_types({"CPU:2": "GPU", "CPU:3": "GPU"}, delays=delays):
                  res = ScheduledFlow(make(), schedule=policy, **KW_ADAPTIVE).run(2)
              seen.setdefault(tuple(bits(res)), []).append(f"{policy} run {run}")
              used |= {c["device"] for c in res.timeline}
      mixed[name] = {"variants": list(seen.values()), "all_cpu_seen": tuple(all_cpu) in seen,
                     "used": sorted(used), "type_weights": res.meta.get("type_weights"),
                     "device_types": res.meta.get("device_types")}
  out["mixed"] = mixed

# -- integrate(backend="threads") -------------------------------------------------------
if n == 1:
  r = flowsim.integrate(double_gaussian, 4, 60_017, 2, seed=123, backend="threads",
                        block_size=1024, events_limit=4096, quiet=True, jit_compile=False)
  out["integrate"] = {"backend": r.meta.get("backend"), "devices": r.meta.get("devices"),
                    "same": [np.asarray(x["value"]).tobytes().hex() for x in r.iterations]
                    == [w[:16] for w in want]}
  # the command line, in this process: flowsim run ... --plot-timeline PNG
  import contextlib, io
  from flowsim import cli
  buf = io.StringIO()
  with contextlib.redirect_stdout(buf):
      code = cli.main(["run", "gaussian8", "--backend", "threads", "--schedule", "guided",
                       "--events", "100000", "--iters", "2", "--seed", "3", "--quiet",
                       "--plot-timeline", sys.argv[2]])
  out["cli"] = {"code": code, "stdout": buf.getvalue()}
print("RESULT " + json.dumps(out, default=str))
'''


def _start(args, env=None):
    # GPUs hidden: these tests are about logical CPU devices (same rounding).
    full_env = dict(os.environ, PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="", **(env or {}))
    return subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=full_env, cwd=ROOT)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start every subprocess at once; collect their JSON (killed on teardown)."""
    png = tmp_path_factory.mktemp("cli") / "out.png"
    procs = {n: _start(["-c", SCRIPT, str(n), str(png)],
                       env={"FLOWSIM_INTER_OP_THREADS": "3"} if n == 4 else None)
             for n in (1, 2, 4)}
    deadline = time.monotonic() + TIMEOUT
    done = {}
    try:
        for key, proc in procs.items():
            try:
                stdout, stderr = proc.communicate(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
                stderr += f"\n(timed out after {TIMEOUT} s)"
            done[key] = (proc.returncode, stdout, stderr)
        yield {"procs": done, "png": png}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def result(runs, n):
    code, stdout, stderr = runs["procs"][n]
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    assert code == 0 and lines, (f"subprocess {n} failed ({code}):\n{stdout[-3000:]}\n"
                                 f"{stderr[-5000:]}")
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.parametrize("n", [1, 2, 4])
def test_every_schedule_same_bits_as_flow(runs, n):
    out = result(runs, n)
    assert out["devices"] == [f"CPU:{i}" for i in range(n)]
    assert out["flow_devices"] == out["devices"]
    assert "Plain" in out["checked"]
    assert out["checks"] == 4 * len(out["checked"])
    assert out["mismatch"] == []


@pytest.mark.parametrize("n", [1, 2, 4])
def test_out_of_memory_is_split_and_retried(runs, n):
    out = result(runs, n)
    for policy, oom in out["oom"].items():
        assert oom["same"], policy
        assert oom["coverage"] == [], policy
        assert len(oom["failed"]) == 1, policy
        f = oom["failed"][0]
        assert f["device"] == f"CPU:{n - 1}" and f["failed"] == "ResourceExhaustedError"
        assert oom["redo"], policy
        if n > 1:           # retried on another device
            assert f["device"] not in oom["redo"], (policy, oom["redo"])
        if f["blocks"] > 1:  # split in two
            assert len(oom["redo"]) >= 2


@pytest.mark.parametrize("n", [1, 2, 4])
def test_kernel_bug_stops_at_once_with_original_exception(runs, n):
    bug = result(runs, n)["bug"]
    assert bug["raised"] == "KernelBug"
    assert bug["message"].startswith("bug in block 40 on CPU:")
    # the worker's frames survive the hand-over to the calling thread
    assert "threads.py" in bug["traceback"] and "in _work" in bug["traceback"]
    assert "in compute" in bug["traceback"]
    assert bug["threads"] == []
    assert bug["chunks"] < 100          # of 400 queued chunks: the rest were cancelled


@pytest.mark.timing
@pytest.mark.parametrize("n", [1, 2, 4])
def test_kernel_bug_stops_within_seconds(runs, n):
    assert result(runs, n)["bug"]["seconds"] < 30


def test_tensorflow_error_in_kernel_is_reraised(runs):
    tf_bug = result(runs, 2)["tf_bug"]
    assert tf_bug["raised"] == "InvalidArgumentError"
    assert "integrand bug: x out of range" in tf_bug["message"]
    assert tf_bug["threads"] == []


def test_thread_settings(runs):
    out = result(runs, 2)               # 2 logical CPUs: one thread per core in all
    assert out["threads"] == out["chosen"] == [max(1, out["cores"] - 1), 2]
    out = result(runs, 4)               # FLOWSIM_INTER_OP_THREADS=3 overrides
    assert out["threads"] == out["chosen"] == [max(1, out["cores"] - 3), 3]


def test_thread_settings_rule():
    from flowsim.distribution.threads import thread_settings
    assert thread_settings(1, 0, cores=16) == (16, 2)
    assert thread_settings(9, 8, cores=16) == (8, 9)    # one core per GPU left free
    assert thread_settings(4, 4, cores=16) == (16, 4)   # GPUs only: CPU pool untouched
    assert thread_settings(2, 0, cores=2) == (1, 2)     # 2 logical CPUs: a core each
    assert thread_settings(4, 0, cores=16) == (13, 4)   # shared pool + 3 calling threads
    assert thread_settings(4, 0, cores=2) == (1, 4)
    assert thread_settings(10, 8, cores=16) == (7, 10)  # 8 GPUs + 2 logical CPUs


def test_integrate_backend_threads(runs):
    out = result(runs, 1)["integrate"]
    assert out["backend"] == "threads" and out["devices"] == "CPU:0"
    assert out["same"]


def test_cli_writes_timeline_png(runs):
    cli = result(runs, 1)["cli"]
    assert cli["code"] == 0
    assert "result = " in cli["stdout"] and "on threads" in cli["stdout"]
    data = runs["png"].read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_timeline_plot_in_process(tmp_path):
    from flowsim.core.result import Result
    from flowsim.plot import save_timeline, timeline
    chunks = [{"iteration": 0, "device": d, "first_block": i * 4, "blocks": 4,
               "start": 0.1 * i, "end": 0.1 * i + 0.3} for i, d in
              enumerate(["CPU:0", "GPU:1", "GPU:0", "CPU:0"])]
    chunks.append({"iteration": 0, "device": "GPU:0", "first_block": 16, "blocks": 2,
                   "start": 0.5, "end": 0.55, "failed": "ResourceExhaustedError"})
    res = Result([{"iteration": 1, "value": 1.0, "error": 0.1, "events": 10, "seconds": 1.0}],
                 1.0, chunks, meta={"backend": "threads", "schedule": "weighted"})
    fig = timeline(res)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["GPU:0", "GPU:1", "CPU:0"]
    assert "load balance" in ax.get_title() and "weighted" in ax.get_title()
    path = save_timeline(res, tmp_path / "t.png")
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert path == tmp_path / "t.png"


def test_mixed_device_types_give_bits_without_timing(runs):
    """Under ``device_types`` with CPU:2 and CPU:3 counted as GPUs (rows rounded one ulp
    apart), 3 runs with random per-device delays of every schedule give one set of bits
    on Plain and VegasPlus, which differs from the all-CPU run (the perturbation is
    live); every device ran blocks; the weights used are in Result.meta."""
    for name, got in result(runs, 4)["mixed"].items():
        assert len(got["variants"]) == 1, (name, got["variants"])
        assert not got["all_cpu_seen"], name
        assert got["used"] == ["CPU:0", "CPU:1", "CPU:2", "CPU:3"], (name, got["used"])
        assert got["type_weights"] == {"CPU": 2.0, "GPU": 40.0}, name
        assert got["device_types"] == {"CPU:0": "CPU", "CPU:1": "CPU", "CPU:2": "GPU",
                                       "CPU:3": "GPU"}, name
