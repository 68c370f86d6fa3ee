"""The backend interface (flowsim.core.backend): a custom executor gives Flow's bits,
backends reach no private state of Flow, and the shared pieces (RunAhead,
describe/rebuild) behave as documented."""
import ast
import concurrent.futures
import os
import re

import numpy as np
import pytest

import flowsim
from flowsim.core.backend import Executor, RemoteError, RunAhead, describe, rebuild
from flowsim.core.kernel import IterationTask, KernelSpec
from flowsim.targets import double_gaussian

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KW = {"n_events": 30_000, "seed": 5, "block_size": 1024, "events_limit": 4096, "quiet": True}


class PoolExecutor(Executor):
    """The worked example of docs/design.rst: chunks as thread-pool tasks on CPU:0."""

    name = "pool"
    device = "CPU:0"

    def __init__(self, workers=2):
        self.pool = concurrent.futures.ThreadPoolExecutor(workers)
        self.closed = False

    def execute(self, it):
        def one(first, n):
            start = it.now()
            rows = self.compute(it.task, first, n, self.device)
            it.chunk(self.device, first, n, start, it.now())
            return first, rows

        rows = it.rows()
        for first, block_rows in self.pool.map(lambda c: one(*c), it.cut()):
            rows.add(first, block_rows)
        return rows.result()

    def close(self):
        self.pool.shutdown()
        self.closed = True


def bits(result):
    return [(np.asarray(r["value"]).tobytes(), np.asarray(r["error"]).tobytes())
            for r in result.iterations]


def test_custom_executor_gives_the_bits_of_flow():
    for cls in (flowsim.Plain, flowsim.Vegas):
        want = flowsim.Flow(cls(double_gaussian, 3), **KW).run(3)
        executor = PoolExecutor()
        with flowsim.Flow(cls(double_gaussian, 3), executor=executor, **KW) as flow:
            got = flow.run(3)
        assert executor.closed
        assert bits(got) == bits(want), cls.__name__
        assert got.meta["backend"] == "pool" and got.meta["devices"] == "CPU:0"
        n_blocks = flow.grid.n_blocks
        for it in range(1, 4):
            seen = np.zeros(n_blocks, int)
            for c in got.timeline:
                if c["iteration"] == it:
                    seen[c["first_block"]:c["first_block"] + c["blocks"]] += 1
            assert (seen == 1).all()


def test_flow_takes_an_executor_or_a_device_not_both():
    with pytest.raises(ValueError, match="device= or executor="):
        flowsim.Flow(flowsim.Plain(double_gaussian, 2), 1000, device="CPU:0",
                     executor=PoolExecutor())
    with pytest.raises(TypeError, match="executor must be"):
        flowsim.Flow(flowsim.Plain(double_gaussian, 2), 1000, executor=object())


def _flow_private_names():
    with open(os.path.join(ROOT, "flowsim", "core", "flow.py")) as fh:
        tree = ast.parse(fh.read())
    flow = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Flow")
    names = {n.name for n in flow.body if isinstance(n, ast.FunctionDef)}
    names |= {n.attr for n in ast.walk(flow) if isinstance(n, ast.Attribute)
              and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return {n for n in names if re.fullmatch(r"_[a-z]\w*", n)}


def test_no_backend_names_a_private_attribute_of_flow():
    private = _flow_private_names()
    assert {"_t0", "_bar", "_execute", "_last_iteration", "_meta"} <= private
    folder = os.path.join(ROOT, "flowsim", "distribution")
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(folder, name)) as fh:
            tree = ast.parse(fh.read())
        used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        assert not used & private, f"{name} uses {sorted(used & private)}"


def _task(iteration, state):
    return IterationTask(None, KernelSpec(), 1, iteration, 100, state)


def test_task_copies_name_one_kernel():
    """Every pickled copy of a task (one per worker and iteration) carries the trace key
    drawn before the first copy left, so a worker compiles once, not per iteration."""
    import pickle
    task = IterationTask(flowsim.Plain(double_gaussian, 2), KernelSpec(), 1, 0, 100, {})
    first, second = (pickle.loads(pickle.dumps(task)) for _ in range(2))
    assert first.simulation.trace_key() == second.simulation.trace_key() \
        == task.simulation.trace_key()


def test_run_ahead_serves_only_the_same_run():
    ahead = RunAhead(enabled=True, most=3)
    a = {"grid": np.arange(3.0)}
    ahead.keep(_task(2, a), {0: np.ones(2)}, [{"first_block": 0}])
    assert ahead.take(_task(2, {"grid": np.arange(3.0) + 1})) == ({}, [])   # state changed
    ahead.keep(_task(2, a), {0: np.ones(2)})
    ahead.keep(_task(3, a), {1: np.ones(2)})
    rows, timeline = ahead.take(_task(3, a))             # drops iteration 2 on the way
    assert list(rows) == [1] and timeline == []
    assert ahead.take(_task(2, a)) == ({}, [])


class IntegrandDomainError(ArithmeticError):
    """A user's exception type, importable where the run was started."""


def test_remote_errors_keep_importable_types():
    try:
        raise IntegrandDomainError("log of a negative weight")
    except IntegrandDomainError as exc:
        info = describe(exc, rank=1)
    again = rebuild(info, "[rank 1]")
    assert type(again) is IntegrandDomainError
    assert str(again) == "log of a negative weight [rank 1]"
    assert again.remote_traceback == info["traceback"]
    tf = flowsim.core.lazy_tf.tf()
    try:
        tf.debugging.assert_less(tf.constant(1.0), 0.0, message="integrand out of range")
    except tf.errors.InvalidArgumentError as exc:
        info = describe(exc)
    again = rebuild(info, "[task 3]")
    assert type(again) is tf.errors.InvalidArgumentError
    assert "integrand out of range" in str(again) and str(again).endswith("[task 3]")


def test_remote_errors_keep_builtin_types_and_name_others():
    try:
        raise KeyError("missing thing")
    except KeyError as exc:
        info = describe(exc, rank=3)
    assert info["rank"] == 3 and "Traceback" in info["traceback"]
    again = rebuild(info, "[rank 3]")
    assert type(again) is KeyError and "[rank 3]" in str(again)

    class Custom(Exception):
        pass

    try:
        raise Custom("odd")
    except Custom as exc:
        info = describe(exc)
    again = rebuild(info, "[there]")
    assert isinstance(again, RemoteError) and "Custom: odd [there]" in str(again)
    assert again.remote_traceback == info["traceback"]


# -- the open registry -----------------------------------------------------------------
THIRD_PARTY = '''
"""A third party's backend: blocks in reverse order of chunks, on CPU:0."""
from flowsim.core.backend import Executor


class ReversedExecutor(Executor):
    name = "reversed"
    device = "CPU:0"

    def __init__(self, stride=1):
        self.stride = stride

    def execute(self, it):
        rows = it.rows()
        for first, n in reversed(it.cut()):
            start = it.now()
            rows.add(first, self.compute(it.task, first, n, self.device))
            it.chunk(self.device, first, n, start, it.now())
        return rows.result()


def make(stride=1):
    return ReversedExecutor(stride)
'''


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    """An installed package ``revbackend`` whose entry point (group flowsim.backends)
    names its executor factory: a module and a .dist-info on the path."""
    (tmp_path / "revbackend.py").write_text(THIRD_PARTY)
    info = tmp_path / "revbackend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: revbackend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[flowsim.backends]\nrev = revbackend:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_registered_backend_runs_through_integrate(third_party):
    import revbackend

    from flowsim.distribution.registry import REGISTERED
    want = flowsim.integrate(double_gaussian, 3, n_iter=2, **KW)
    flowsim.register_backend("reversed-test", revbackend.ReversedExecutor)
    try:
        got = flowsim.integrate(double_gaussian, 3, n_iter=2, backend="reversed-test",
                                stride=2, **KW)
        installed = flowsim.integrate(double_gaussian, 3, n_iter=2, backend="rev", **KW)
        dotted = flowsim.integrate(double_gaussian, 3, n_iter=2, backend="revbackend:make",
                                   **KW)
    finally:
        REGISTERED.pop("reversed-test", None)
        REGISTERED.pop("rev", None)
    for result in (got, installed, dotted):
        assert bits(result) == bits(want)
        assert result.meta["backend"] == "reversed"
    with pytest.raises(TypeError, match=r"backend 'revbackend:make' does not take devices"):
        flowsim.integrate(double_gaussian, 3, n_iter=1, backend="revbackend:make",
                          devices=2, **KW)
    with pytest.raises(ValueError, match=r"unknown backend 'nope'; choose None, one of "
                                         r"'flow', 'threads'.*'rev'.*module:factory"):
        flowsim.integrate(double_gaussian, 3, n_iter=1, backend="nope", **KW)


def test_register_backend_refuses_bad_arguments():
    with pytest.raises(ValueError, match="'threads' is a built-in backend"):
        flowsim.register_backend("threads", PoolExecutor)
    with pytest.raises(ValueError, match="name must be a non-empty string without ':'"):
        flowsim.register_backend("a:b", PoolExecutor)
    with pytest.raises(TypeError, match="factory must be callable"):
        flowsim.register_backend("x", 3)
    flowsim.register_backend("not-an-executor", lambda: object())
    try:
        with pytest.raises(TypeError, match="its factory returned object, not a flowsim"):
            flowsim.integrate(double_gaussian, 3, n_iter=1, backend="not-an-executor", **KW)
    finally:
        flowsim.distribution.registry.REGISTERED.pop("not-an-executor")


def test_cli_runs_an_installed_backend_by_name_and_module_factory(third_party, capsys):
    """flowsim run --backend NAME (an entry point, in a fresh process that finds it in
    the installed metadata) and --backend module:factory (here, through the same
    ``flowsim.cli.main``); same bits as the default backend."""
    import json
    import subprocess
    import sys

    from flowsim.cli import main
    from flowsim.distribution.registry import REGISTERED
    args = ["run", "gaussian8", "--events", "20000", "--iters", "2", "--seed", "3", "--json"]
    env = dict(os.environ, PYTHONPATH=f"{third_party}{os.pathsep}{ROOT}")
    proc = subprocess.run([sys.executable, "-m", "flowsim", *args, "--backend", "rev"],
                          capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = {"rev": json.loads(proc.stdout)}
    try:
        for backend in (None, "revbackend:make"):
            assert main(args + (["--backend", backend] if backend else [])) == 0, backend
            out[backend] = json.loads(capsys.readouterr().out)
        code = main(["run", "gaussian8", "--events", "20000", "--backend", "rev",
                     "--schedule", "static"])
    finally:
        REGISTERED.pop("rev", None)
    assert code != 0 and "backend 'rev' has no schedule" in capsys.readouterr().err
    want = out.pop(None)
    for backend, got in out.items():
        assert got["meta"]["backend"] == "reversed", backend
        assert [(r["value"], r["error"]) for r in got["iterations"]] == [
            (r["value"], r["error"]) for r in want["iterations"]], backend
