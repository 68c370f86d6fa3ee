"""One conformance suite for every backend: :func:`flowsim.testing.check_executor`'s
shipped cases (run through ``tests/helpers/conformance.py``).

Flow in this process is the reference.  Against it, bit for bit: ThreadPoolFlow /
ScheduledFlow on 1, 2 and 4 logical CPUs with every schedule, MPIFlow on 2
and 3 ranks (every rank's result, and every rank must finish; a world of one is
tests/test_mpi.py's), SparkFlow on
local[2], JoblibFlow on loky and on a Dask cluster.  Each runs Plain, Vegas,
VegasPlus, a path price, a sweep, a checkpoint resume, the rows of an iteration,
a broken kernel and a TensorFlow error at run time (the same exception type and
text must surface), and the timeline must cover every block of every iteration
once.  The workloads' cases (market ensembles, policy rollouts, strategy sweeps,
physics scans: ``conformance.SAMPLE``, one of each kind of Simulation) run on one
configuration of each backend but Dask; all of them on threads (2 logical CPUs,
weighted schedule).

The processes for threads (one, with 4 logical CPUs, on 1, 2 and 4 of them) and
MPI start together once the reference has compiled every kernel into this run's
cache, and run while the in-process backends are checked; their tests come last.
Before them, check_executor must fail on executors that drop, repeat or reorder a
block, or sum a chunk's rows.
"""
import json
import os
import re
import subprocess
import sys
import time

import cloudpickle
import numpy as np
import pytest
from helpers import MPIRUN, ROOT, conformance, mpi_env

from flowsim.core.backend import Executor, LocalExecutor
from flowsim.testing import check_executor
from flowsim.testing import conformance as shipped

#: Shares the run's SparkContext with test_spark.py (one JVM for both).
pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.costly]

#: Seconds for the background processes (measured: 2-4 min on 2 cores at load 2;
#: over 10 min at load 20).
TIMEOUT = 1500
HARNESS = os.path.join(ROOT, "tests", "helpers", "conformance.py")
#: mpirun's world sizes: an even and an odd split of the blocks (a world of one, with
#: and without mpirun, is tests/test_mpi.py's).
MPI_RANKS = (2, 3)

# What tests/helpers/conformance.py defines travels to loky, Dask and Spark workers by
# value (workers cannot import tests/).
cloudpickle.register_pickle_by_value(conformance)


class Background:
    """Processes started at once; ``result(key)`` waits for one (killed at teardown)."""

    def __init__(self, out):
        self.out, self.procs, self.done = out, {}, {}
        self.deadline = time.monotonic() + TIMEOUT

    def start(self, key, args, env):
        log = open(os.path.join(self.out, f"{key}.log"), "w")
        self.procs[key] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                           env=env, cwd=ROOT, start_new_session=True)

    def wait(self, key):
        if key not in self.done:
            proc = self.procs[key]
            try:
                proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"{key} hung for {TIMEOUT} s:\n{self.log(key)}")
            self.done[key] = proc.returncode
        return self.done[key]

    def log(self, key):
        with open(os.path.join(self.out, f"{key}.log")) as fh:
            return fh.read()[-6000:]

    def stop(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def background(reference, tmp_path_factory):
    """The threads and MPI processes, started once Flow's reference has compiled every
    case's kernels into this run's cache (FLOWSIM_CACHE_DIR, tests/conftest.py): they
    load the executables instead of compiling each anew."""
    out = str(tmp_path_factory.mktemp("conformance"))
    bg = Background(out)
    env = dict(os.environ, PYTHONPATH=ROOT, CUDA_VISIBLE_DEVICES="")
    try:
        for n in MPI_RANKS:
            os.makedirs(os.path.join(out, f"mpi{n}"))
            bg.start(f"mpi{n}", [MPIRUN, "-n", str(n), sys.executable, HARNESS, "mpi",
                                 os.path.join(out, f"mpi{n}")], mpi_env())
        bg.start("threads", [sys.executable, HARNESS, "threads", out], env)
        yield bg
    finally:
        bg.stop()


@pytest.fixture(scope="module")
def reference(flow_reference):
    """Flow's summaries, in this process (shared with the other files' backend checks)."""
    ref = flow_reference(list(conformance.CASES), conformance.CASES)
    raised = {k: v for k, v in ref.items() if "raised" in v and "error" not in k}
    assert not raised, f"Flow itself fails: {raised}"
    assert ref["error"] == {"raised": "ValueError", "message": conformance.ERROR_TEXT}
    assert ref["tf_error"]["raised"] == "InvalidArgumentError"
    assert "integrand out of range" in ref["tf_error"]["message"]
    for name, summary in ref.items():
        assert not summary.get("timeline_faults"), name
    return ref


def check(got, reference, label, names=None):
    problems = conformance.compare(got, reference, label, names)
    assert not problems, "\n".join(problems)


def test_reference_is_complete(reference, background):
    """(Starts the background processes: the tests in this process run meanwhile.)"""
    assert set(reference) == set(conformance.CASES)
    assert {"markets_small", "rollout_coin"} <= set(reference)
    assert reference["resume"]["iterations"] == reference["plain"]["iterations"]
    for name in ("plain", "vegas", "vegasplus"):
        assert reference[name]["timeline_iterations"] == [1, 2, 3]


#: One case per Simulation class of the core cases that runs under XLA (resume and rows
#: are Plain again, Vegas and VegasPlus run without XLA here, the error cases fail):
#: their kernels are the reference's, compiled already.
PATH_CASES = ("plain", "path", "sweep")


@pytest.mark.parametrize("name", PATH_CASES)
def test_block_calls_and_the_chunk_function_give_flows_rows(reference, name):
    """Under XLA a chunk runs block by block or in the chunk function, by its size (and,
    on several devices, by the measured speeds): forced each way, on chunks that start
    at odd blocks and end with the partial last block, every block's row of three
    iterations is Flow's, bit for bit.  (A chunk compiled as one XLA program failed
    here: the Heston path case's block 2 of iteration 2 rounded differently.)"""
    faults = shipped.kernel_path_faults(name)
    assert not faults, "\n".join(faults)


def check_backend(factory, reference, label, names=None):
    """flowsim.testing.check_executor on ``factory``, with the shared reference."""
    check_executor(factory, conformance.CASES, names=names, reference=reference, label=label)


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_spark_local(spark_sessions, reference):
    from pyspark import cloudpickle as spark_cloudpickle

    from flowsim.distribution.spark import SparkExecutor
    spark_cloudpickle.register_pickle_by_value(conformance)
    spark = spark_sessions.get("local[2]")
    check_backend(lambda: SparkExecutor(spark, show_progress=False), reference,
                  "spark local[2]", conformance.CHECKED)


@pytest.mark.timeout(900)
def test_joblib_loky(reference):
    from flowsim.distribution.joblib import JoblibExecutor
    check_backend(lambda: JoblibExecutor(n_jobs=2), reference, "joblib loky",
                  conformance.CHECKED)


@pytest.mark.timeout(900)
def test_joblib_dask(dask_cluster, reference):
    import joblib
    from dask.distributed import Client

    from flowsim.distribution.joblib import JoblibExecutor
    with Client(dask_cluster):
        with joblib.parallel_config(backend="dask"):
            check_backend(JoblibExecutor, reference, "joblib dask", conformance.CORE)


# -- check_executor fails on broken executors ------------------------------------------
class Broken(Executor):
    """Runs every chunk on CPU:0 like Flow, then spoils the rows as ``how`` says."""

    device = "CPU:0"

    def __init__(self, how):
        self.how, self.name = how, f"broken-{how}"

    def execute(self, it):
        chunks = [(first, n, self.compute(it.task, first, n, self.device))
                  for first, n in it.cut()]
        for first, n in it.cut():
            it.chunk(self.device, first, n, 0.0, 0.0)
        if self.how == "reorder":                 # the rows of the first two chunks swapped
            (f0, n0, r0), (f1, n1, r1) = chunks[:2]
            chunks[:2] = [(f0, n1, r1), (f0 + n1, n0, r0)]
        rows = np.concatenate([r for _, _, r in chunks])
        if self.how == "drop":                    # the last block never ran
            rows[-1] = 0.0
        elif self.how == "repeat":                # block 1 ran twice, block 2 never
            rows[2] = rows[1]
        elif self.how == "sum":                   # one sum per chunk, not a row per block
            for first, n, _ in chunks:
                rows[first] = rows[first:first + n].sum(axis=0)
                rows[first + 1:first + n] = 0.0
        return rows


@pytest.mark.parametrize("how, found", [
    ("drop", r"broken-drop plain: iterations differs from Flow: iteration 1 value"),
    ("repeat", r"broken-repeat plain: iterations differs from Flow: iteration 1 value"),
    ("reorder", r"broken-reorder rows: rows differs from Flow: block 0's row"),
    ("sum", r"broken-sum rows: rows differs from Flow: block 0's row"),
])
def test_check_executor_fails_on_a_broken_executor(reference, how, found):
    """The first line names the first case that differs and the value; each broken
    executor is caught (a reordered block may even keep plain's value bits: the
    rows case catches it)."""
    with pytest.raises(AssertionError) as info:
        check_executor(lambda: Broken(how), conformance.CASES, names=["plain", "rows"],
                       reference=reference, label=f"broken-{how}")
    text = str(info.value)
    assert re.match(rf"broken-{how} (plain|rows): \w+ differs from Flow: ", text), text
    assert re.search(found, text), text


def test_check_executor_passes_on_flows_own_executor(reference):
    got = check_executor(lambda: LocalExecutor("CPU:0"), conformance.CASES,
                         names=["plain", "rows", "error"], reference=reference)
    assert set(got) == {"plain", "rows", "error"}


# -- the backends in their own processes (started with the module, after the reference) ----
@pytest.fixture(scope="module")
def threads(background):
    """The threads process's summaries: {device count: {schedule: summaries}}."""
    code = background.wait("threads")
    path = os.path.join(background.out, "threads.json")
    assert code == 0 and os.path.exists(path), background.log("threads")
    with open(path) as fh:
        got = json.load(fh)
    assert got.pop("devices") == [f"CPU:{i}" for i in range(conformance.VIRTUAL_CPUS)]
    return got


def test_threads_mixed_device_types(threads, reference):
    """check_executor's "mixed device types" case on ThreadExecutor: with 2 and 4
    devices, the second half counted as GPUs, a run with a slowed device gives the bits
    of one without, and not Flow's; with one device the case does not apply."""
    mixed = threads["mixed"]
    assert mixed["1"] is None
    for n in ("2", "4"):
        got = mixed[n]
        assert got["problems"] == [], got["problems"]
        assert got["runs"][0] == got["runs"][1]
        assert got["runs"][0] != reference["plain"] and "raised" not in got["runs"][0]
        assert list(got["mapping"]) == [f"CPU:{i}" for i in range(int(n) // 2, int(n))]


@pytest.mark.parametrize("n", conformance.DEVICE_COUNTS)
def test_threads_every_schedule(threads, reference, n):
    got = dict(threads[str(n)])
    assert got.pop("devices") == [f"CPU:{i}" for i in range(n)]
    assert sorted(got) == ["dynamic", "dynamic,chunk=3", "guided", "static", "weighted"]
    for label, summaries in got.items():
        every = (n, label) == (2, "weighted")
        check(summaries, reference, f"threads={n} schedule={label}",
              None if every else conformance.CORE)


@pytest.mark.mpi
@pytest.mark.parametrize("n", MPI_RANKS)
def test_mpi_every_rank(background, reference, n):
    code = background.wait(f"mpi{n}")
    out = os.path.join(background.out, f"mpi{n}")
    finished = sorted(int(f[4:-5]) for f in os.listdir(out) if f.startswith("rank"))
    assert code == 0 and finished == list(range(n)), (
        f"mpirun -n {n} exit code {code}, ranks that finished: {finished}\n"
        f"{background.log(f'mpi{n}')}")
    for rank in range(n):
        with open(os.path.join(out, f"rank{rank}.json")) as fh:
            got = json.load(fh)
        assert got["size"] == n
        check(got["cases"], reference, f"mpi ranks={n} rank={rank}",
              conformance.CHECKED if n == 2 else conformance.CORE)
