"""MPIFlow: real ``mpirun`` jobs (2 and 3 ranks; 3 oversubscribed on 2 cores).

The same bits for every algorithm on 1, 2 and 3 ranks: ``test_conformance.py``.

Every job has a timeout, so a hang fails the test instead of blocking CI.  The
references come from one process without mpirun: ``Flow`` and ``MPIFlow`` as
size 1.  Jobs write, per rank, the bytes of every value, error and adaptive
state and the whole ``Result`` as JSON; the tests compare them bit for bit.
"""
import json
import subprocess
import sys
import time

import pytest
from helpers import MPI_ENV, MPIRUN, ROOT, mpi_env

pytestmark = [pytest.mark.mpi, pytest.mark.costly]

import mpi4py  # noqa: E402,F401  (flowsim[mpi]; make test installs it: missing is a failure)

#: Seconds before a job counts as hung.  A job needs ~30 CPU-seconds; Linux
#: shares the CPU per session, so a busy shared machine stretches that a lot.
TIMEOUT = 360

if MPIRUN is None:
    raise RuntimeError("no mpirun: pip install 'flowsim[mpi]' (make test does)")

CASE = {"dim": 4, "n_events": 40_000, "block_size": 2048, "events_limit": 6144,
        "seed": 12345, "iters": 3}
#: Bits of every algorithm on 1, 2, 3 ranks: tests/test_conformance.py.  Here what
#: only MPI has: run-ahead (steady Plain, never adaptive Vegas), a failing rank,
#: resuming its checkpoint on another number of ranks, the CLI.
ALGORITHMS = ["plain", "vegas"]

JOB = r'''
import json, os, sys, time
import numpy as np
spec = json.loads(sys.argv[1])
import flowsim
from flowsim.algorithms import algorithm_class
from flowsim.distribution import MPIFlow
from flowsim.targets import double_gaussian

def bits(a):
    return np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes().hex()

def summary(result, sim):
    return {"value": bits(result.value), "error": bits(result.error),
            "iterations": [[bits(r["value"]), bits(r["error"])] for r in result.iterations],
            "state": {k: bits(v) for k, v in sorted(sim.get_state().items())},
            "json": result.to_json(sort_keys=True)}

inject, slow = False, {"rank": spec.get("slow_rank"), "algorithm": None}
if spec.get("fail_rank") is not None or slow["rank"] is not None:
    from flowsim.distribution.mpi import MPIExecutor
    real = MPIExecutor.compute
    def compute(self, task, first, n, device):
        rank = flow.executor.rank
        if inject and task.iteration == spec["fail_iteration"] and rank == spec["fail_rank"]:
            with open(spec["fail_stamp"], "w") as fh:
                fh.write(repr(time.time()))
            raise RuntimeError("injected failure on rank %d" % flow.executor.rank)
        if slow["rank"] == flow.executor.rank and task.iteration == 1 and slow["algorithm"]:
            slow["algorithm"] = None           # once per run: a straggler in iteration 2
            time.sleep(0.5)
        return real(self, task, first, n, device)
    MPIExecutor.compute = compute

def simulation(name):
    """A fresh Simulation of algorithm ``name``."""
    return algorithm_class(name)(double_gaussian, spec["case"]["dim"])

out = {}
for kind in spec["kinds"]:                        # MPIFlow first: it sets TF threads
    cls = MPIFlow if kind == "mpi" else flowsim.Flow
    extra = {"schedule": spec["schedule"]} if kind == "mpi" and spec.get("schedule") else {}
    for name in spec["algorithms"]:
        c = spec["case"]
        sim = simulation(name)
        if name == "plain":
            plain = sim
        flow = cls(sim, n_events=c["n_events"], seed=c["seed"], block_size=c["block_size"],
                   events_limit=c["events_limit"], **extra)
        out["ranks"] = flow.executor.processes.size
        slow["algorithm"] = name
        try:    # a broken algorithm fails its own test only (raised on every rank alike)
            result = flow.run(c["iters"])
        except Exception as exc:
            out[f"{kind}/{name}"] = {"error": f"{type(exc).__name__}: {exc}"[-3000:]}
            continue
        out[f"{kind}/{name}"] = summary(result, sim)
if spec.get("resume"):                            # rerun of the failed job's checkpoint
    c = spec["case"]
    sim = plain            # stateless: reusing it reuses its compiled kernel
    flow = MPIFlow(sim, n_events=c["n_events"], seed=c["seed"], block_size=c["block_size"],
                   events_limit=c["events_limit"])
    out["resumed/plain"] = summary(flow.run(c["iters"], checkpoint=spec["resume"]), sim)
rank = flow.executor.processes.rank
if spec.get("rank_error"):                        # an integrand that raises on rank 1 only

    def integrand(x):
        if rank == 1:
            raise RuntimeError("boom on rank 1")
        return x[:, 0]

    try:
        MPIFlow(flowsim.Plain(integrand, 2), 4096, seed=1, quiet=True).run(1)
        out["rank_error"] = "no exception"
    except Exception as exc:
        out["rank_error"] = f"rank {rank} raised {type(exc).__name__}: {exc}".splitlines()[0]
    print(out["rank_error"], flush=True)
if spec.get("cli"):                               # the command line, its output per rank
    from flowsim import cli
    where = os.path.join(spec["out"], f"cli{rank}")
    sys.stdout.flush(), sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(where + ".out", "w") as stdout, open(where + ".err", "w") as stderr:
        os.dup2(stdout.fileno(), 1), os.dup2(stderr.fileno(), 2)
        try:
            out["cli"] = cli.main(spec["cli"])
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
with open(os.path.join(spec["out"], f"rank{rank}.json"), "w") as fh:
    json.dump(out, fh)
if spec.get("fail_rank") is not None:             # last: one rank raises mid-run
    c = spec["case"]
    flow = MPIFlow(plain, n_events=c["n_events"], seed=c["seed"], block_size=c["block_size"],
                   events_limit=c["events_limit"])
    inject = True
    flow.run(c["iters"], checkpoint=spec["checkpoint"])
    print(f"failing run finished on rank {rank}", flush=True)
'''


def _env():
    return mpi_env()


def _mpirun(n, args, timeout=TIMEOUT):
    """Run ``mpirun -n n args``; a hang is a failure, never a blocked test run."""
    start = time.monotonic()
    try:
        proc = subprocess.run([MPIRUN, "-n", str(n), *args], capture_output=True, text=True,
                              timeout=timeout, env=_env(), cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mpirun -n {n} {' '.join(args)} hung for {timeout} s:\n"
                    f"{exc.stdout}\n{exc.stderr}")
    return proc, time.monotonic() - start


def _job(out, n, kinds=("mpi",), algorithms=tuple(ALGORITHMS), mpirun=True, **spec):
    """Run the job on ``n`` ranks (or alone); ``(process, {rank: output}, seconds)``."""
    out.mkdir()
    spec = dict(spec, kinds=list(kinds), algorithms=list(algorithms), case=CASE, out=str(out))
    script = out / "job.py"
    script.write_text(JOB)
    args = [sys.executable, str(script), json.dumps(spec)]
    if mpirun:
        proc, seconds = _mpirun(n, args)
    else:
        start = time.monotonic()
        env = {k: v for k, v in _env().items() if k not in MPI_ENV}
        proc = subprocess.run(args, capture_output=True, text=True, timeout=TIMEOUT,
                              env=env, cwd=ROOT)
        seconds = time.monotonic() - start
    ranks = {r: json.loads((out / f"rank{r}.json").read_text())
             for r in range(n) if (out / f"rank{r}.json").exists()}
    return proc, ranks, seconds


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    return tmp_path_factory.mktemp("mpi")


@pytest.fixture(scope="module")
def reference(tmp):
    """``Flow`` and ``MPIFlow`` of size 1, in one process started without mpirun."""
    proc, ranks, _ = _job(tmp / "solo", 1, kinds=("mpi", "flow"), mpirun=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ranks[0]


@pytest.fixture(scope="module")
def jobs(tmp):
    """``jobs(n)``: the job on ``n`` ranks, run once.

    TensorFlow start-up dominates these tests, so jobs do double duty: in the
    2-rank job rank 1 is late (0.5 s) in iteration 2 of every algorithm, an
    integrand then raises on rank 1 only, ``flowsim run`` (:data:`CLI`) runs, and
    the job ends with a run in which rank 1 raises mid-run (after rank 0
    checkpointed iteration 1); the 3-rank job uses the weighted schedule and also
    reruns that checkpoint.
    """
    done = {}

    def get(n):
        if n not in done:
            extra = {}
            if n == 2:
                extra = dict(fail_rank=1, fail_iteration=1, fail_stamp=str(tmp / "failed-at"),
                             checkpoint=str(tmp / "run.ckpt.npz"), slow_rank=1,
                             rank_error=True, cli=CLI)
            if n == 3:
                get(2)
                extra = dict(schedule="weighted", resume=str(tmp / "run.ckpt.npz"))
            try:
                done[n] = _job(tmp / f"ranks{n}", n, **extra), time.time()
            except BaseException as exc:   # a hang fails every test that needs the job
                done[n] = exc
        if isinstance(done[n], BaseException):
            raise done[n]
        return done[n][0]
    get.ended = lambda n: done[n][1]
    return get


def _ok(summary, what):
    if "json" not in summary:
        pytest.fail(f"{what} raised {summary['error']}")


def _check(ranks, reference, n, name):
    assert sorted(ranks) == list(range(n)), "a rank wrote no result"
    for r, out in ranks.items():
        assert out["ranks"] == n
        got, want = out[f"mpi/{name}"], reference[f"flow/{name}"]
        _ok(got, f"MPIFlow on rank {r} of {n}, {name}")
        _ok(want, f"Flow, {name}")
        for key in ("value", "error", "iterations", "state"):
            assert got[key] == want[key], f"rank {r} of {n}, {name}: {key} differs from Flow"
        # Every rank returns the same Result, timings and timeline included.
        assert got["json"] == ranks[0][f"mpi/{name}"]["json"], f"rank {r}: another Result"


def _solo(reference, name):
    """MPIFlow without mpirun is a world of size 1 with Flow's bits."""
    assert reference["ranks"] == 1
    mpi, flow = reference[f"mpi/{name}"], reference[f"flow/{name}"]
    _ok(mpi, f"MPIFlow alone, {name}")
    _ok(flow, f"Flow, {name}")
    keys = ("value", "error", "iterations", "state")
    assert {k: mpi[k] for k in keys} == {k: flow[k] for k in keys}, name
    meta = json.loads(mpi["json"])["meta"]
    assert meta["backend"] == "mpi" and meta["ranks"] == 1


def test_size_one_without_mpirun(reference):
    _solo(reference, "plain")


@pytest.mark.parametrize("n", [2, 3])
def test_plain_same_bits_as_flow(jobs, reference, n):
    """2, 3 ranks (3 oversubscribed): Flow's bits, the same Result on every rank, every
    rank in the timeline."""
    proc, ranks, _ = jobs(n)
    # the 2-rank job ends with an injected failure (test_failure_on_one_rank_ends_every_rank)
    assert (proc.returncode != 0) == (n == 2), (proc.returncode, proc.stderr[-3000:])
    _check(ranks, reference, n, "plain")
    result = json.loads(ranks[0]["mpi/plain"]["json"])
    assert {c["device"].split("/")[0] for c in result["timeline"]} == \
        {f"rank{r}" for r in range(n)}
    assert result["meta"]["devices"] == ", ".join(f"rank{r}/CPU:0" for r in range(n))


def test_early_rank_runs_ahead_only_when_the_state_is_steady(jobs, reference):
    """2 ranks, rank 1 late in iteration 2: rank 0 computes its share of iteration 3
    meanwhile for Plain (steady state) -- Flow's bits all the same -- and never for
    Vegas/VegasPlus, whose grid changes every iteration."""
    _, ranks, _ = jobs(2)
    _check(ranks, reference, 2, "plain")
    timeline = json.loads(ranks[0]["mpi/plain"]["json"])["timeline"]
    ahead = [c for c in timeline if c.get("ahead")]
    assert ahead, "rank 0 waited for rank 1 without working ahead"
    assert {(c["device"], c["iteration"]) for c in ahead} == {("rank0/CPU:0", 3)}
    share = [c for c in timeline if c["device"] == "rank0/CPU:0" and c["iteration"] == 3]
    assert sorted(b for c in share for b in range(c["first_block"],
                                                  c["first_block"] + c["blocks"])) == \
        list(range(10)), "rank 0's share of iteration 3, each block once"
    for name in ALGORITHMS[1:]:
        timeline = json.loads(ranks[0][f"mpi/{name}"]["json"])["timeline"]
        assert not any(c.get("ahead") for c in timeline), name


def test_vegas_same_bits_and_state_on_every_rank(jobs, reference):
    """The VEGAS grid identical on every rank, Flow's bits (also alone, without mpirun)."""
    _solo(reference, "vegas")
    for n in (2, 3):
        proc, ranks, _ = jobs(n)
        assert (proc.returncode != 0) == (n == 2), (proc.returncode, proc.stderr[-3000:])
        _check(ranks, reference, n, "vegas")
        assert ranks[0]["mpi/vegas"]["state"], "no adaptive state to compare"


#: ``flowsim run`` in the 2-rank job, each rank's stdout and stderr to its own files.
CLI = ["run", "gaussian8", "--backend", "mpi", "--events", "100000", "--iters", "2",
       "--seed", "7"]


def test_cli_backend_mpi_prints_once(jobs, tmp):
    """``flowsim run --backend mpi`` on 2 ranks: exit code 0 on each, the lines printed by
    rank 0 only, no traceback."""
    proc, ranks, _ = jobs(2)
    assert sorted(ranks) == [0, 1], proc.stderr[-3000:]
    stdout = "".join((tmp / "ranks2" / f"cli{r}.out").read_text() for r in (0, 1))
    stderr = "".join((tmp / "ranks2" / f"cli{r}.err").read_text() for r in (0, 1))
    assert [ranks[r]["cli"] for r in (0, 1)] == [0, 0], stderr[-3000:]
    assert stdout.count("flowsim: Plain on mpi (rank0/CPU:0, rank1/CPU:0), seed 7") == 1
    assert stdout.count("result =") == 1
    assert "Traceback" not in stderr


def _failure_stamp(jobs, tmp):
    """When rank 1 failed in the 2-rank job (checked to have happened)."""
    proc, _, _ = jobs(2)
    stamp = tmp / "failed-at"
    assert stamp.exists(), "the failure was not injected:\n" + proc.stderr[-3000:]
    return float(stamp.read_text())


@pytest.mark.timing
def test_every_rank_ends_soon_after_a_failure(jobs, tmp):
    elapsed = jobs.ended(2) - _failure_stamp(jobs, tmp)
    assert elapsed < 10, f"ranks ended {elapsed:.1f} s after the failure"


def test_failure_on_one_rank_ends_every_rank(jobs, tmp):
    """Rank 1 raises in iteration 2 of 3: every rank ends (no hang), message printed once."""
    proc, _, _ = jobs(2)
    _failure_stamp(jobs, tmp)
    assert proc.returncode != 0
    assert "failing run finished" not in proc.stdout
    err = proc.stderr
    assert err.count("RankError: MPI rank 1 of 2 failed: RuntimeError: injected failure "
                     "on rank 1") == 1
    assert err.count("Traceback on rank 1:") == 1
    assert err.count('raise RuntimeError("injected failure on rank %d" % flow.executor.rank)') == 1
    assert (tmp / "run.ckpt.npz").exists(), "rank 0 should have checkpointed iteration 1"


def test_resume_after_failure_matches(jobs, reference):
    """The rerun (on 3 ranks) resumes the 2-rank checkpoint and ends with Flow's bits."""
    assert jobs(2)[0].returncode != 0
    proc, ranks, _ = jobs(3)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(ranks) == [0, 1, 2]
    want = reference["flow/plain"]
    for r, out in ranks.items():
        got = out["resumed/plain"]
        assert got["iterations"] == want["iterations"], f"rank {r}"
        assert (got["value"], got["error"]) == (want["value"], want["error"]), f"rank {r}"
        assert got["json"] == ranks[0]["resumed/plain"]["json"]


def test_a_failing_ranks_own_error_reaches_every_rank(jobs):
    """An integrand that raises on rank 1 only (in the 2-rank job, after its runs): every
    rank reports rank 1's exception (type and text), not that the ranks built different
    runs, and goes on (each writes its results afterwards)."""
    proc, ranks, _ = jobs(2)
    assert sorted(ranks) == [0, 1], proc.stderr[-3000:]
    for rank in (0, 1):
        got = ranks[rank]["rank_error"]
        assert got.startswith(f"rank {rank} raised RankError: MPI rank 1 of 2 failed: "
                              f"RuntimeError: boom on rank 1"), got
        assert got in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert "every rank must build the same run" not in proc.stdout
