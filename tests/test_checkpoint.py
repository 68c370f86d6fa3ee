"""Checkpoints refuse what they must: another integrand of the same name,
other limits or histograms, damaged or foreign files, a second run on the same path,
an unwritable directory -- and still resume their own run to the same bits."""
import errno
import functools
import json
import os
import pickle
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import ROOT

import flowsim
from flowsim.core import checkpoint as ckpt
from flowsim.core import fingerprint
from flowsim.core.lazy_tf import tf

N, BS, DIM = 4096, 1024, 2


def f(x):
    """Sum of x: exactly 2.0 over [0, 2]^2 ... scaled by the box; a module-level ``f``."""
    return tf().reduce_sum(x, axis=1)


def obs(x):
    return x[:, 0]


def flow(integrand=f, limits=None, histograms=(), cls=flowsim.Plain, **kw):
    sim = cls(integrand, DIM, limits=limits, histograms=histograms)
    kw.setdefault("jit_compile", False)        # XLA compiles take seconds per simulation
    return flowsim.Flow(sim, N, seed=11, block_size=BS, quiet=True, **kw)


def bits(result):
    return [np.asarray(r["value"]).tobytes() for r in result.iterations]


@pytest.fixture
def path(tmp_path):
    return tmp_path / "run.ckpt"


def refused(path, match, **kw):
    """Run on a checkpoint that must be refused; the file stays as it was."""
    saved = path.read_bytes()
    with pytest.raises(ValueError, match=match):
        flow(**kw).run(3, checkpoint=path)
    assert path.read_bytes() == saved
    assert not os.path.exists(f"{path}.lock")


# -- the simulation's fingerprint -----------------------------------------------------
def test_same_named_other_integrand_is_refused(path):
    namespace = {"tf": tf, "__name__": __name__}
    exec("def f(x):\n    return tf().reduce_prod(x, axis=1)\n", namespace)   # also tests.f
    other = namespace["f"]
    assert (other.__module__, other.__qualname__) == (f.__module__, f.__qualname__)
    flow().run(2, checkpoint=path)
    refused(path, r"another configuration: simulation\.integrand: code differs.*"
                  r"simulation\.integrand: values at the check points differ", integrand=other)


def test_closure_values_tell_same_code_apart(path):
    def scaled(c):
        def f(x):
            return c * tf().reduce_sum(x, axis=1)
        return f

    flow(scaled(1.0)).run(1, checkpoint=path)
    refused(path, r"simulation\.integrand: code differs", integrand=scaled(2.0))
    flow(scaled(1.0)).run(2, checkpoint=path)              # an equal closure resumes


def test_two_lambdas_refused_and_a_lambda_resumes_its_own(path):
    t = tf()

    def make():
        return lambda x: t.reduce_sum(x, axis=1)

    add = make()
    mul = lambda x: t.reduce_prod(x, axis=1)    # noqa: E731 - lambdas are the point
    whole = flow(add).run(3)
    flow(add).run(1, checkpoint=path)
    refused(path, r"simulation\.integrand: .*values at the check points differ", integrand=mul)
    # an identical lambda built again, and the same one, resume to the same bits
    flow(make()).run(2, checkpoint=path)
    resumed = flow(add).run(3, checkpoint=path)
    assert bits(resumed) == bits(whole)
    assert {c["iteration"] for c in resumed.timeline} == {3}


def test_same_values_other_code_is_refused_as_code(path):
    flow(lambda x: x[:, 0] + x[:, 1]).run(1, checkpoint=path)
    refused(path, r"integrand: code differs \(bytecode[^;]*$",       # values agree: code only
            integrand=lambda x: x[:, 1] + x[:, 0])


def test_vector_integrands_are_compared_by_every_component(path):
    t = tf()
    flow(lambda x: t.stack([x[:, 0], x[:, 1]], axis=1)).run(1, checkpoint=path)
    refused(path, "values at the check points differ",
            integrand=lambda x: t.stack([x[:, 0], x[:, 0] * 1.0], axis=1))


def test_other_limits_are_refused(path):
    flow().run(1, checkpoint=path)
    refused(path, r"simulation\.limits: checkpoint has \[\[0\.0, 1\.0\], \[0\.0, 1\.0\]\], "
                  r"this run has \[\[0\.0, 2\.0\], \[0\.0, 2\.0\]\]", limits=(0, 2))


@pytest.mark.parametrize("histogram, message", [
    (flowsim.Histogram(obs, 12, (0, 1)), r"histograms\.obs\.bins: checkpoint has 10, "
                                         r"this run has 12"),
    (flowsim.Histogram(obs, 10, (0, 2)), r"histograms\.obs\.range: checkpoint has \[0\.0, "
                                         r"1\.0\], this run has \[0\.0, 2\.0\]"),
    (flowsim.Histogram(lambda x: x[:, 1], 10, (0, 1), name="obs"),
     r"histograms\.obs\.observable: code differs"),
    (flowsim.Histogram(obs, 10, (0, 1), name="other"), r"histograms\.obs: only in the "
                                                       r"checkpoint; .*other: only in this run"),
])
def test_other_histograms_are_refused(path, histogram, message):
    flow(histograms=[flowsim.Histogram(obs, 10, (0, 1))]).run(1, checkpoint=path)
    refused(path, r"simulation\." + message, histograms=[histogram])


def test_vegas_integrand_is_fingerprinted_too(path):
    flow(cls=flowsim.Vegas).run(1, checkpoint=path)
    refused(path, "simulation.integrand: values at the check points differ", cls=flowsim.Vegas,
            integrand=lambda x: tf().reduce_sum(x * x, axis=1))


@pytest.mark.parametrize("cls, old", [
    (flowsim.Vegas, {"n_bins": 50, "alpha": 1.5, "stratify": False}),
    (flowsim.VegasPlus, {"n_bins": 50, "alpha": 0.5})])
def test_checkpoint_of_the_former_vegas_defaults_is_refused_and_resumes_with_them(path, cls,
                                                                                   old):
    """Checkpoints written with flowsim's former VEGAS defaults (50 increments;
    VegasPlus alpha 0.5) hold a map of another shape: the new defaults refuse them,
    naming the options, and passing the former options resumes them to the same bits."""
    former = functools.partial(cls, **old)
    whole = flow(cls=former).run(3)
    flow(cls=former).run(1, checkpoint=path)
    if cls is flowsim.VegasPlus:
        message = (r"simulation\.alpha: checkpoint has 0\.5, this run has 0\.75; "
                   r"simulation\.n_bins: checkpoint has 50, this run has 200")
    else:
        message = (r"simulation\.n_bins: checkpoint has 50, this run has 100; "
                   r"simulation\.stratify: only in this run")
    with pytest.raises(ValueError, match=message):
        flow(cls=cls).run(3, checkpoint=path)
    assert bits(flow(cls=former).run(3, checkpoint=path)) == bits(whole)


def test_unstratified_vegas_checkpoint_is_refused_naming_stratify_and_resumes_with_it(path):
    """Vegas stratifies by default; its checkpoints from before that hold an
    unstratified run: refused naming ``stratify`` (and ``alpha``, whose default
    follows it), resumed to the same bits with ``stratify=False`` (whose
    configuration is the former one, key for key)."""
    former = functools.partial(flowsim.Vegas, stratify=False)
    whole = flow(cls=former).run(3)
    flow(cls=former).run(1, checkpoint=path)
    refused(path, r"another configuration: simulation\.alpha: checkpoint has 1\.5, this run "
                  r"has 0\.5; simulation\.stratify: only in this run \(the checkpoint's "
                  r"run predates it: pass stratify=False to resume it\)$", cls=flowsim.Vegas)
    assert bits(flow(cls=former).run(3, checkpoint=path)) == bits(whole)


def test_stratified_vegas_resumes_to_the_same_bits(path):
    whole = flow(cls=flowsim.Vegas).run(3)
    flow(cls=flowsim.Vegas).run(1, checkpoint=path)
    assert bits(flow(cls=flowsim.Vegas).run(3, checkpoint=path)) == bits(whole)


def test_integrand_not_callable_eagerly_falls_back_to_code(path):
    def graph_only(x):
        if tf().executing_eagerly():
            raise RuntimeError("only under tf.function")
        return tf().reduce_sum(x, axis=1)

    config = flowsim.Plain(graph_only, DIM).config()["integrand"]
    assert config["values"] is None and config["code"] == fingerprint.digest(graph_only)
    whole = flow(graph_only).run(2)
    flow(graph_only).run(1, checkpoint=path)
    assert bits(flow(graph_only).run(2, checkpoint=path)) == bits(whole)


def test_sweep_and_path_configs_name_what_defines_them():
    from flowsim.finance import GBM, EuropeanCall, EuropeanPut
    from flowsim.finance.pricing import PathSimulation

    def kernel(p, data):
        return p[:, 0] * 2

    a = flowsim.Sweep(kernel, np.arange(4.0)).config()
    assert a == flowsim.Sweep(kernel, np.arange(4.0)).config()
    b = flowsim.Sweep(kernel, np.arange(4.0) + 1).config()
    assert ckpt.differences(a, b) == ["params: content differs"]
    c = flowsim.Sweep(lambda p, data: p[:, 0] * 3, np.arange(4.0)).config()
    assert "kernel: code differs" in "; ".join(ckpt.differences(a, c))
    gbm = GBM(s0=100, r=0.01, sigma=0.2)
    call = PathSimulation(gbm, EuropeanCall(K=100, T=1.0), 4).config()
    put = PathSimulation(gbm, EuropeanPut(K=100, T=1.0), 4).config()
    assert call["kernel"] != put["kernel"] and call["payoff"] != put["payoff"]


OTHER_PROCESS = """
import json, flowsim
from flowsim.targets import double_gaussian
def obs(x):
    return x[:, 0] * 2
sim = flowsim.Plain(double_gaussian, 4, limits=(-1, 2),
                    histograms=[flowsim.Histogram(obs, 8, (0, 1))])
"""


def _other_process_simulation():
    namespace = {"__name__": "__main__"}
    exec(OTHER_PROCESS, namespace)
    return namespace["sim"]


@pytest.mark.timing
def test_fingerprint_is_cheap():
    sim = _other_process_simulation()
    sim.config()
    start = time.perf_counter()
    sim.config()
    assert time.perf_counter() - start < 0.1


def test_fingerprint_is_the_same_in_another_process():
    config = _other_process_simulation().config()
    assert config["integrand"]["values"] and config["histograms"]["obs"]["observable"]["values"]
    out = subprocess.run([sys.executable, "-c", OTHER_PROCESS + "print(json.dumps(sim.config()))"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=ROOT, PYTHONHASHSEED="123"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == json.loads(json.dumps(config))


# -- a Simulation of one's own: the default config() fingerprints its attributes ------
class Antithetic(flowsim.Simulation):
    """The mean of ``f(u)`` and ``f(1 - u)`` over ``[0, 1]^dim``, weighted by ``_w``."""

    def __init__(self, f, dim=DIM, scale=1.0, weights=None):
        self.f, self.dim, self.scale = f, dim, scale
        self._w = np.ones(dim) if weights is None else np.asarray(weights, dtype=float)
        self._cache = None                  # a private None: a cache, left out

    def accumulators(self):
        return {"sum": (), "sum2": ()}

    def block(self, u, valid, state):
        t = tf()
        w = t.constant(self._w, dtype=u.dtype)
        y = t.cast(self.scale * 0.5 * (self.f(u * w) + self.f((1 - u) * w)), t.float64)
        y = t.where(valid, y, t.zeros_like(y))
        return {"sum": t.reduce_sum(y), "sum2": t.reduce_sum(y * y)}

    def estimate(self, totals, n_events):
        mean = totals["sum"] / n_events
        var = max(totals["sum2"] / n_events - mean * mean, 0.0)
        return {"value": mean, "error": (var / n_events) ** 0.5}


def gauss(x):
    return tf().exp(-tf().reduce_sum((x - 0.5) ** 2, axis=1))


def slope(x):
    return 2.0 * tf().reduce_sum(x, axis=1)     # exactly 2.0 over [0, 1]^2


def antithetic_flow(sim):
    return flowsim.Flow(sim, N, seed=11, block_size=BS, quiet=True, jit_compile=False)


def test_own_simulation_checkpoint_is_refused_by_another_integrand_naming_the_attribute(path):
    """A checkpoint of Antithetic(gauss) is not resumed by Antithetic(slope)."""
    whole = antithetic_flow(Antithetic(gauss)).run(3)
    antithetic_flow(Antithetic(gauss)).run(1, checkpoint=path)
    saved = path.read_bytes()
    for other, message in [
            (Antithetic(slope), r"another configuration: simulation\.attributes\.f: code "
                                r"differs .*simulation\.attributes\.f: values at the check "
                                r"points differ"),
            (Antithetic(gauss, scale=2.0), r"simulation\.attributes\.scale: checkpoint has "
                                           r"1\.0, this run has 2\.0"),
            (Antithetic(gauss, weights=[1.0, 0.5]), r"simulation\.attributes\._w: content "
                                                    r"differs")]:
        with pytest.raises(ValueError, match=message):
            antithetic_flow(other).run(3, checkpoint=path)
        assert path.read_bytes() == saved
    resumed = antithetic_flow(Antithetic(gauss)).run(3, checkpoint=path)
    assert bits(resumed) == bits(whole)
    assert abs(antithetic_flow(Antithetic(slope)).run(1).value - 2.0) < 1e-9


def test_default_config_names_attributes_and_leaves_out_state_and_caches():
    class Adaptive(Antithetic):
        def __init__(self, f, inner=None):
            super().__init__(f)
            self.grid = np.linspace(0, 1, 5)       # adaptive state: in the checkpoint
            self.inner = inner

        def get_state(self):
            return {"grid": self.grid.copy()}

        def set_state(self, state):
            self.grid = state["grid"]

    sim = Adaptive(gauss, inner=Antithetic(slope))
    sim.trace_key()                                 # draws the private trace token
    cfg = sim.config()
    assert set(cfg["attributes"]) == {"f", "scale", "_w", "inner"}
    assert cfg["attributes"]["inner"] == Antithetic(slope).config()
    sim.grid = sim.grid ** 2                        # adapting changes no configuration
    assert sim.config() == cfg == Adaptive(gauss, inner=Antithetic(slope)).config()
    assert json.loads(json.dumps(cfg)) == cfg


# -- the file --------------------------------------------------------------------------
def fail_third_iteration(monkeypatch, error):
    """Flow's third iteration raises ``error`` until ``monkeypatch.undo()``."""
    real = flowsim.Flow._iterate

    def failing_at_third(self, iteration):
        if iteration == 2:
            raise error
        return real(self, iteration)

    monkeypatch.setattr(flowsim.Flow, "_iterate", failing_at_third)


def test_interrupted_run_resumes_to_the_same_bits(path, monkeypatch):
    whole = flow(cls=flowsim.Vegas).run(4)
    fail_third_iteration(monkeypatch, KeyboardInterrupt("killed"))
    with pytest.raises(KeyboardInterrupt):
        flow(cls=flowsim.Vegas).run(4, checkpoint=path)
    monkeypatch.undo()
    assert os.listdir(path.parent) == ["run.ckpt"]         # the lock file is gone too
    resumed = flow(cls=flowsim.Vegas).run(4, checkpoint=path)
    assert bits(resumed) == bits(whole)
    assert {c["iteration"] for c in resumed.timeline} == {3, 4}


def test_failed_run_names_its_checkpoint_and_the_resume_says_where_it_starts(path, monkeypatch,
                                                                           caplog):
    """An iteration that fails (here: a lost cluster, simulated) leaves the error a note
    on what the checkpoint holds and how to resume; the resumed run says, on the
    ``flowsim`` logger, the iteration it starts from."""
    import logging
    whole = flow().run(3)
    fail_third_iteration(monkeypatch, RuntimeError("Lost executor 0"))
    with pytest.raises(RuntimeError, match="Lost executor 0") as info:
        flow().run(3, checkpoint=path)
    monkeypatch.undo()
    assert info.value.__notes__ == [f"flowsim: checkpoint {str(path)!r} holds iterations 1-2: "
                                    f"call run() again with this checkpoint to resume"]
    with caplog.at_level(logging.WARNING, logger="flowsim"):
        resumed = flow().run(3, checkpoint=path)
    assert bits(resumed) == bits(whole)
    assert [r.getMessage() for r in caplog.records if r.name == "flowsim"] == [
        f"resuming from iteration 3: checkpoint {str(path)!r} holds 2 iteration(s)"]


def test_refused_checkpoint_gets_no_resume_note(path):
    flow().run(1, checkpoint=path)
    with pytest.raises(ValueError, match="another configuration") as info:
        flow(cls=flowsim.Vegas).run(2, checkpoint=path)
    assert not getattr(info.value, "__notes__", [])


def test_edited_byte_is_refused(path):
    flow().run(1, checkpoint=path)
    data = bytearray(path.read_bytes())
    i = data.index('"elapsed"'.encode("utf-32-le"))     # the header is a numpy str
    data[i + 4] = ord("E")                  # the zip's CRC catches it
    path.write_bytes(bytes(data))
    refused(path, r"run\.ckpt' is damaged \(unreadable: BadZipFile\): delete it or pass "
                  r"another path")


def test_consistent_edit_is_caught_by_the_checksum(path):
    flow().run(1, checkpoint=path)
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["header"] = np.array(str(arrays["header"]).replace('"seed": 11', '"seed": 12'))
    with open(path, "wb") as fh:             # a valid zip, header first, old checksum
        np.savez(fh, **arrays)
    refused(path, r"is damaged \(checksum mismatch\): delete it or pass another path")


def test_truncated_file_is_refused(path):
    flow().run(1, checkpoint=path)
    path.write_bytes(path.read_bytes()[:-100])
    refused(path, r"is damaged \(unreadable: BadZipFile\)")


@pytest.mark.parametrize("content", [
    b"text, not a checkpoint\n",
    pickle.dumps({"format": 2, "config": {}}),
    "npz",
])
def test_foreign_file_is_refused_without_pickle_advice(path, content):
    if content == "npz":
        with open(path, "wb") as fh:
            np.savez(fh, a=np.arange(3.0), header=np.array("{}"))
    else:
        path.write_bytes(content)
    saved = path.read_bytes()
    with pytest.raises(ValueError, match=r"run\.ckpt' is not a readable flowsim checkpoint "
                                         r"\(not a file flowsim wrote") as info:
        flow().run(3, checkpoint=path)
    assert "pickle" not in str(info.value) and path.read_bytes() == saved


def test_older_format_is_refused(path):
    with open(path, "wb") as fh:
        np.savez(fh, header=np.array(json.dumps({"format": 1, "config": {}, "records": [],
                                                 "elapsed": 0.0})))
    refused(path, r"has format 1, from an older flowsim; this flowsim reads format 2 only")


# -- the lock ---------------------------------------------------------------------------
def test_second_run_on_the_same_path_is_refused(path):
    release = ckpt.lock(path)         # another open file description, as another run's
    try:
        with pytest.raises(ValueError, match=r"checkpoint '.*run\.ckpt' is in use by another "
                                             rf"run \(process {os.getpid()} on "):
            flow().run(1, checkpoint=path)
        assert not path.exists()
    finally:
        release()
    assert not os.path.exists(f"{path}.lock")
    flow().run(1, checkpoint=path)
    assert os.listdir(path.parent) == ["run.ckpt"]


def test_lock_of_another_process_refuses_and_dies_with_it(path):
    code = ("import importlib.util, sys, time\n"
            "spec = importlib.util.spec_from_file_location('c', 'flowsim/core/checkpoint.py')\n"
            "c = importlib.util.module_from_spec(spec); spec.loader.exec_module(c)\n"
            "c.lock(sys.argv[1]); print('locked', flush=True); time.sleep(300)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        with pytest.raises(ValueError, match=rf"in use by another run \(process {holder.pid} "):
            flow().run(1, checkpoint=path)
    finally:
        holder.kill()                       # SIGKILL: no finally runs in it
        holder.wait()
    assert os.path.exists(f"{path}.lock")   # left behind, but no longer locked
    flow().run(1, checkpoint=path)
    assert os.listdir(path.parent) == ["run.ckpt"]


# -- the directory ---------------------------------------------------------------------
def test_directory_that_is_a_file_is_refused_before_any_work(tmp_path):
    (tmp_path / "x").write_text("a file")
    run = flow()
    with pytest.raises(ValueError, match=r"checkpoint '.*x/run\.ckpt': directory '.*x' is not "
                                         r"a directory"):
        run.run(2, checkpoint=tmp_path / "x" / "run.ckpt")
    assert run.timeline == []


def test_unwritable_directory_is_refused_before_any_work(path, monkeypatch):
    # Tests run as root, whom chmod does not stop: os.access is what check_path asks.
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if os.fspath(p) == str(
        path.parent) else real(p, mode, **kw))
    run = flow()
    with pytest.raises(ValueError, match=r"checkpoint '.*run\.ckpt': directory '.*' is not "
                                         r"writable"):
        run.run(2, checkpoint=path)
    assert run.timeline == [] and os.listdir(path.parent) == []
    monkeypatch.undo()                      # and a read-only file system (EROFS)
    real_open = os.open

    def read_only(p, *args, **kw):
        if os.fspath(p).endswith(".lock"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(p, *args, **kw)

    monkeypatch.setattr(os, "open", read_only)
    with pytest.raises(ValueError, match=r"checkpoint '.*run\.ckpt': cannot create '.*run\.ckpt"
                                         r"\.lock' \(Read-only file system\); is the directory "
                                         r"writable\?"):
        run.run(2, checkpoint=path)
    assert run.timeline == []


def test_vegasplus_checkpoint_from_before_sigma_h_is_refused_naming_it():
    """VegasPlus's allocation and default hypercubes changed: its
    configuration names the new allocation, which checkpoints from before lack."""
    from flowsim.core.checkpoint import differences
    cfg = flowsim.VegasPlus(lambda x: x[:, 0], 2).config()
    before = {k: v for k, v in cfg.items() if k != "sigma_h"}
    assert differences(before, cfg) == [
        "sigma_h: only in this run (the checkpoint's run predates sigma_h 'of the mean': "
        "start a new run)"]
