"""The flowsim command line: --version, devices, run TARGET, errors, python -m flowsim."""
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile

import pytest
from helpers import ROOT

import flowsim
from flowsim import cli
from flowsim.targets import double_gaussian_exact

ENTRY = os.path.join(os.path.dirname(sys.executable), "flowsim")


def main(capsys, *argv):
    """Run the CLI in this process: (exit code, stdout, stderr)."""
    try:
        rc = cli.main(list(argv))
    except SystemExit as exc:           # argparse errors, --version, unknown targets
        rc = exc.code
    out, err = capsys.readouterr()
    return rc, out, err


def test_version(capsys):
    rc, out, _ = main(capsys, "--version")
    assert rc == 0 and out.strip() == f"flowsim {flowsim.__version__}"


def test_devices(capsys):
    rc, out, _ = main(capsys, "devices")
    assert rc == 0
    first = out.splitlines()[0].split()
    assert first[:3] == ["CPU:0", "CPU", "host"] and "GiB host memory" in out
    rc, out, _ = main(capsys, "devices", "--json")
    rows = json.loads(out)
    assert rc == 0 and rows[0]["device"] == "CPU:0" and rows[0]["kind"] == "CPU"
    assert {"device", "kind", "description", "memory"} <= set(rows[0])
    assert [r["device"] for r in rows] == flowsim.logical_devices()


def test_run_gaussian8_json(capsys):
    args = ["run", "gaussian8", "--events", "4096", "--iters", "3", "--seed", "5"]
    rc, out, err = main(capsys, *args, "--events-limit", "4096", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["meta"]["seed"] == 5 and d["meta"]["events_limit"] == 4096
    assert d["meta"]["simulation"] == "Plain" and d["n_events"] == 3 * 4096
    assert len(d["iterations"]) == 3 and all(r["events"] == 4096 for r in d["iterations"])
    # the same run through the API gives the same bits; events_limit does not matter
    r = flowsim.Flow(flowsim.targets.gaussian8(), 4096, seed=5, events_limit=10**6,
                     quiet=True).run(3)
    assert d["value"] == r.value and d["error"] == r.error
    # text output: the table
    rc, out, _ = main(capsys, *args)
    assert rc == 0 and out.startswith("flowsim: Plain on flow (CPU:0), seed 5")
    assert f"result = {r.value:.12g} +/- {r.error:.4g}" in out


def test_run_module_callable_with_dim(capsys):
    rc, out, err = main(capsys, "run", "flowsim.targets:double_gaussian", "--dim", "2",
                        "--events", "20000", "--iters", "2", "--seed", "1", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert abs(d["value"] - double_gaussian_exact(2)) < 5 * d["error"]


def test_counts_in_float_notation_and_a_line_per_iteration_as_it_finishes(capsys):
    """``--events 1e4`` is 10000 (a float that is not whole is refused, naming the
    option); each iteration prints a line on stderr as it finishes, as VegasFlow does,
    unless --quiet or --json."""
    base = ["run", "gaussian8", "--iters", "2", "--seed", "4"]
    rc, out, err = main(capsys, *base, "--events", "1e4")
    rc2, out2, _ = main(capsys, *base, "--events", "10_000", "--quiet")
    assert rc == rc2 == 0
    result = [line for line in out.splitlines() if line.startswith("result = ")]
    assert result and result == [line for line in out2.splitlines()
                                 if line.startswith("result = ")]
    lines = err.splitlines()
    assert [line.split(":")[1] for line in lines] == [" iteration 1/2", " iteration 2/2"], err
    assert re.fullmatch(r"flowsim: iteration 1/2: \S+ \+/- \S+ \(\S+ s\)", lines[0]), lines
    rc, _, err = main(capsys, *base, "--events", "1e4", "--json")
    assert rc == 0 and "iteration 1/2" not in err
    rc, _, err = main(capsys, *base, "--events", "2.5")
    assert rc == 2 and "argument --events: must be a whole number, got '2.5'" in err


def test_plot_format_follows_the_extension_or_is_refused(capsys, tmp_path):
    base = ["run", "gaussian8", "--events", "4096", "--iters", "2", "--seed", "4", "--quiet"]
    rc, out, err = main(capsys, *base, "--plot", str(tmp_path / "out.xyz"))
    assert rc == 2 and out == "" and err.startswith(
        f"flowsim: error: --plot {str(tmp_path / 'out.xyz')!r}: extension 'xyz'; the file's "
        f"extension names its format, one of "), err
    assert "pdf" in err and not (tmp_path / "out.xyz").exists()
    rc, _, err = main(capsys, *base, "--plot", str(tmp_path / "out.pdf"))
    assert rc == 0, err
    assert (tmp_path / "out.pdf").read_bytes()[:5] == b"%PDF-"


def test_run_writes_and_resumes_a_checkpoint(capsys, tmp_path):
    path = str(tmp_path / "cli.ckpt")
    base = ["run", "gaussian8", "--events", "1024", "--seed", "2", "--json",
            "--checkpoint", path]
    rc, first, _ = main(capsys, *base, "--iters", "1")
    rc2, out, said = main(capsys, *base, "--iters", "3")
    assert said.splitlines()[0] == (f"flowsim: resuming from iteration 2: checkpoint "
                                    f"{path!r} holds 1 iteration(s)"), said
    rc3, whole, _ = main(capsys, "run", "gaussian8", "--events", "1024", "--seed", "2",
                         "--json", "--iters", "3")
    assert rc == rc2 == rc3 == 0
    assert json.loads(out)["value"] == json.loads(whole)["value"]
    rc, _, err = main(capsys, "run", "gaussian8", "--events", "2048", "--seed", "2",
                      "--iters", "3", "--checkpoint", path)
    assert rc == 2 and "n_events: checkpoint has 1024, this run has 2048" in err


@pytest.mark.parametrize("argv, code, message", [
    (["run", "gaussian8", "--events", "0"], 2, "flowsim: error: --events must be >= 1, got 0"),
    (["run", "gaussian8", "--events", "100", "--iters", "0"], 2,
     "flowsim: error: --iters must be >= 1, got 0"),
    (["run", "gaussian8", "--events", "100", "--seed", "-1"], 2,
     r"flowsim: error: --seed must be in [0, 2**63), got -1"),
    (["run", "gaussian8", "--events", "1000", "--events-limit", "10"], 2,
     "flowsim: error: events_limit (10) must be at least block_size (1024)"),
    (["run", "gaussian8", "--events", "100", "--algorithm", "magic"], 2,
     "flowsim: error: unknown algorithm 'magic'"),
    (["run", "gaussian8", "--events", "100", "--backend", "cloud"], 2,
     "flowsim: error: unknown backend 'cloud'"),
    (["run", "gaussian8", "--events", "abc"], 2,
     "argument --events: must be a whole number such as 1000000 or 1e6, got 'abc'"),
    (["bogus"], 2, "invalid choice: 'bogus'"),
])
def test_errors_exit_nonzero_with_a_message(capsys, argv, code, message):
    rc, out, err = main(capsys, *argv)
    assert rc == code and message in err and "Traceback" not in err
    assert out == ""


@pytest.mark.parametrize("target, message", [
    ("nosuch", "flowsim run: unknown target 'nosuch'; give module:callable or one of the "
               "bundled examples: "),
    ("nosuch_module_xyz:f", "flowsim run: cannot load 'nosuch_module_xyz:f': No module named"),
    ("flowsim.targets:nothing", "flowsim run: cannot load 'flowsim.targets:nothing'"),
    ("flowsim:logical_devices", "flowsim run: 'flowsim:logical_devices' returned list, not a "
                                "Simulation; for a bare integrand pass --dim N"),
])
def test_bad_targets(capsys, target, message):
    rc, _, _ = main(capsys, "run", target, "--events", "100")
    assert isinstance(rc, str) and rc.startswith(message), rc   # SystemExit(message): exit 1
    if target == "nosuch":
        assert "gaussian8" in rc


def test_no_command_prints_help(capsys):
    rc, out, _ = main(capsys)
    assert rc == 2 and "usage: flowsim" in out and "devices" in out


def test_real_processes():
    """`python -m flowsim run ... --json` in a fresh process, as users run it."""
    import subprocess
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "flowsim", "run", "gaussian8", "--events", "2048",
           "--iters", "2", "--seed", "9", "--events-limit", "2048", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    d = json.loads(p.stdout)          # nothing but the JSON on stdout
    assert d["meta"]["seed"] == 9 and len(d["iterations"]) == 2
    r = flowsim.Flow(flowsim.targets.gaussian8(), 2048, seed=9, quiet=True).run(2)
    assert d["value"] == r.value      # same bits in another process
    # no TensorFlow start-up noise on stderr
    assert "absl" not in p.stderr and "cuda" not in p.stderr.lower(), p.stderr[-2000:]


def test_console_script_calls_cli_main():
    """The installed `flowsim` script is the entry point of setup.py (flowsim.cli:main)."""
    with open(ENTRY, encoding="utf-8") as fh:
        text = fh.read()
    assert "from flowsim.cli import main" in text and "sys.exit(main())" in text


def _until(proc, ready, what, timeout=240):
    """Wait until ``ready()`` while ``proc`` runs; fail with its stderr if it ends first."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no {what}; stderr: {(proc.communicate()[1] or '')[-2000:]}")
        time.sleep(0.05)


#: ``python`` that starts with SIGINT's default action, whatever it inherited, then
#: runs its other arguments (``os.execv``: same process).  A non-interactive shell starts
#: its background jobs (``.ci/run > log &``) with SIGINT ignored; make, pytest, its
#: workers and the processes a test starts inherit that, and a Python that starts with
#: SIGINT ignored leaves it so: the Ctrl-C a test sends would do nothing.
PYTHON_WITH_CTRL_C = [sys.executable, "-c", "import os, signal, sys; "
                      "signal.signal(signal.SIGINT, signal.SIG_DFL); "
                      "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]


def _after_ctrl_c(proc, timeout=120):
    """``proc.communicate()`` after a SIGINT; a process still running after ``timeout``
    seconds is killed (tests leave no process behind) and the test fails."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {timeout} s after SIGINT (killed)")


def test_ctrl_c_ends_with_one_line_saying_what_the_checkpoint_holds(capsys, tmp_path):
    path = tmp_path / "run.npz"
    argv = ["run", "gaussian8", "--events", "20000", "--seed", "3", "--checkpoint", str(path),
            "--quiet"]
    proc = subprocess.Popen([*PYTHON_WITH_CTRL_C, "-m", "flowsim", *argv, "--iters", "100000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    _until(proc, path.exists, "checkpoint written")
    proc.send_signal(signal.SIGINT)
    out, err = _after_ctrl_c(proc)
    assert proc.returncode == 130, err[-2000:]
    m = re.fullmatch(r"flowsim: interrupted during iteration (\d+); checkpoint '(.*)' holds "
                     r"iterations? 1(?:-(\d+))?: run the same command again to resume\n", err)
    assert m and m[2] == str(path) and out == "", err[-2000:]
    saved = int(m[3] or 1)
    assert int(m[1]) == saved + 1
    # the same command resumes from it (asked for one more iteration: it runs just that one)
    rc, out, err = main(capsys, *argv, "--iters", str(saved + 1), "--json")
    assert rc == 0, err
    whole = flowsim.Flow(flowsim.targets.gaussian8(), 20000, seed=3, quiet=True).run(saved + 1)
    assert json.loads(out)["value"] == whole.value


def test_ctrl_c_without_checkpoint_says_how_to_make_runs_resumable(tmp_path):
    """Also: a long run's estimated duration reaches stderr without a terminal."""
    code = ("import sys, flowsim.core.flow; flowsim.core.flow.LONG_RUN_EVENTS = 1; "
            "from flowsim.cli import main; sys.exit(main(sys.argv[1:]))")
    argv = ["run", "gaussian8", "--events", "4096", "--block-size", "1024", "--events-limit",
            "1024", "--iters", "10000000", "--seed", "1", "--quiet"]
    errors = tmp_path / "stderr"
    with open(errors, "w") as fh:
        proc = subprocess.Popen([*PYTHON_WITH_CTRL_C, "-c", code, *argv], stdout=subprocess.PIPE,
                                stderr=fh, text=True, env=dict(os.environ, PYTHONPATH=ROOT),
                                cwd=ROOT)
        _until(proc, lambda: errors.read_text().endswith("\n"), "estimated duration")
        proc.send_signal(signal.SIGINT)
        out, _ = _after_ctrl_c(proc)
    first, *rest = errors.read_text().splitlines(keepends=True)
    assert re.fullmatch(r"flowsim: estimated duration ~[\d.]+ (s|min|h|days) \([\d.e+]+ "
                        r"events/s measured on the first chunk after compilation, x1 "
                        r"device\(s\)\)\n", first), first + "".join(rest)[-2000:]
    assert proc.returncode == 130 and out == "", rest
    assert len(rest) == 1 and re.fullmatch(r"flowsim: interrupted during iteration \d+ \(no "
                                           r"checkpoint: pass --checkpoint PATH to make runs "
                                           r"resumable\)\n", rest[0]), rest


def test_flow_run_reraises_ctrl_c_with_a_note(tmp_path):
    def interrupted(checkpoint):
        flow = flowsim.Flow(flowsim.targets.gaussian8(), 1024, seed=1, quiet=True)
        iterate = flow._iterate

        def stop_at_third(iteration):
            if iteration == 2:
                raise KeyboardInterrupt
            return iterate(iteration)
        flow._iterate = stop_at_third
        with pytest.raises(KeyboardInterrupt) as info:
            flow.run(5, checkpoint=checkpoint)
        return info.value.__notes__

    path = tmp_path / "r.npz"
    assert interrupted(path) == [f"flowsim: interrupted during iteration 3; checkpoint "
                                 f"{str(path)!r} holds iterations 1-2: call run() again with "
                                 f"this checkpoint to resume"]
    assert interrupted(None) == ["flowsim: interrupted during iteration 3 (no checkpoint: pass "
                                 "checkpoint=PATH to run() to make runs resumable)"]


def test_long_runs_log_their_estimated_duration(monkeypatch, caplog):
    assert flowsim.core.flow.LONG_RUN_EVENTS == 10**11
    sim = flowsim.targets.gaussian8()

    def logged(threshold):
        monkeypatch.setattr(flowsim.core.flow, "LONG_RUN_EVENTS", threshold)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="flowsim"):
            flowsim.Flow(sim, 4096, seed=1, block_size=1024, events_limit=1024,
                         quiet=True).run(2)
        return [r.getMessage() for r in caplog.records if "duration" in r.getMessage()]

    assert logged(2 * 4096 + 1) == []               # below the threshold: nothing
    at = logged(2 * 4096)                           # 2 iterations x 4096 events: logged once
    assert len(at) == 1 and re.fullmatch(r"estimated duration ~\d+ s \([\d.e+]+ events/s "
                                         r"measured on the first chunk after compilation, x1 "
                                         r"device\(s\)\)", at[0]), at


def test_duration_is_estimated_from_chunks_reported_without_progress(monkeypatch, caplog):
    """MPI's root reports other ranks' chunks with progress=False: they still time the run."""
    from flowsim.core.backend import LocalExecutor

    class Quiet(LocalExecutor):
        def execute(self, it):
            rows = it.rows()
            for first, n in it.cut():
                start = it.now()
                rows.add(first, self.compute(it.task, first, n, self.device))
                it.chunk(self.device, first, n, start, it.now(), progress=False)
            return rows.result()

    monkeypatch.setattr(flowsim.core.flow, "LONG_RUN_EVENTS", 2 * 4096)
    with caplog.at_level(logging.WARNING, logger="flowsim"):
        flowsim.Flow(flowsim.targets.gaussian8(), 4096, seed=1, block_size=1024,
                     events_limit=1024, quiet=True, executor=Quiet("CPU:0")).run(2)
    assert sum("estimated duration" in r.getMessage() for r in caplog.records) == 1


def test_run_help_lists_the_bundled_targets(capsys):
    from flowsim.targets import EXAMPLES
    rc, out, _ = main(capsys, "run", "--help")
    assert rc == 0
    for name, f in EXAMPLES.items():
        assert re.search(rf"^  {name} +{re.escape(f.__doc__.splitlines()[0][:30])}", out, re.M)
    flat = " ".join(out.split())
    for what in ("MODULE:NAME your own; MODULE is found in the current directory",
                 "a Simulation (e.g. flowsim.Plain(f, 2))", "a job (an object with run_cli(args))",
                 "or with --dim N a bare integrand f(x)"):
        assert what in flat, out


MODULE = """import flowsim
from flowsim.core.lazy_tf import tf


def f(x):
    return tf().reduce_sum(x, axis=1)


def bad(x):
    raise ValueError("my message")


sim = flowsim.Plain(f, 2)
"""


def test_run_finds_modules_in_the_current_directory(capsys, tmp_path, monkeypatch):
    (tmp_path / "flowsim_cwd_target.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)            # as the `flowsim` script: the cwd is not on sys.path
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "flowsim_cwd_target", raising=False)
    try:
        common = ["--events", "2048", "--iters", "1", "--seed", "1", "--json"]
        rc, out, err = main(capsys, "run", "flowsim_cwd_target:f", "--dim", "2", *common)
        assert rc == 0, err
        assert abs(json.loads(out)["value"] - 1.0) < 5 * json.loads(out)["error"]
        rc, out, err = main(capsys, "run", "flowsim_cwd_target:sim", *common)
        assert rc == 0, err
        for option in (["--algorithm", "vegas"], ["--dim", "2"]):
            rc, out, err = main(capsys, "run", "flowsim_cwd_target:sim", *option, *common)
            assert rc == 2 and out == "" and err.startswith(
                f"flowsim: error: {option[0]} does not apply here: 'flowsim_cwd_target:sim' is")
        rc, out, err = main(capsys, "run", "flowsim_cwd_target:bad", "--dim", "2", *common)
        assert rc == 2 and err == ("flowsim: error: my message (raised by the integrand bad "
                                   "while flowsim traced it on x of shape [n, 2])\n")
    finally:
        sys.modules.pop("flowsim_cwd_target", None)


JOB = "is a job that takes only "
HESTON = f"'heston-call' {JOB}--events, --seed, --backend, --dtype, --events-limit, --json, --quiet"
BACKTEST = f"'backtest' {JOB}--backend, --dtype, --events-limit, --json, --quiet; drop the others"


@pytest.mark.parametrize("argv, message", [
    (["gaussian8", "--schedule", "static"], "--schedule does not apply here: the default "
     "backend (one device) has no schedule; add --backend threads (or scheduled, mpi)"),
    (["gaussian8", "--dim", "3"], "--dim does not apply here: 'gaussian8' is not a bare "
     "integrand (it has its own dimension); drop --dim, or give module:function --dim N"),
    (["heston-call", "--algorithm", "vegas"], f"--algorithm does not apply here: {HESTON}"),
    (["heston-call", "--iters", "3", "--skip", "1", "--checkpoint", "x.npz", "--plot", "x.png"],
     f"--iters, --skip, --checkpoint, --plot do not apply here: {HESTON}"),
    (["heston-call", "--block-size", "1024", "--no-jit", "--rng", "philox", "--schedule",
      "static", "--plot-timeline", "t.png"],
     "--block-size, --no-jit, --rng, --schedule, --plot-timeline do not apply here: 'heston"),
    (["backtest", "--events", "10", "--seed", "1", "--dim", "2"], "--dim does not apply here"),
    (["backtest", "--events", "10", "--seed", "1"],
     f"--events, --seed do not apply here: {BACKTEST}"),
])
def test_options_a_target_does_not_use_are_refused(capsys, argv, message):
    rc, out, err = main(capsys, "run", *argv)
    assert rc == 2 and out == "" and err.startswith(f"flowsim: error: {message}"), err


def _refuse_unwritable_plot_paths(capsys, tmp_path):
    """Each refusal of ``--plot``/``--plot-timeline`` paths checked; their seconds."""
    (tmp_path / "file").write_text("")
    seconds = []
    for option, path, problem in [
            ("--plot", tmp_path / "no" / "c.png", f"directory {str(tmp_path / 'no')!r} does "
                                                  f"not exist; create it or pass another path"),
            ("--plot-timeline", tmp_path / "file" / "t.png",
             f"directory {str(tmp_path / 'file')!r} is not a directory"),
            ("--plot", tmp_path, "is a directory; pass a file name")]:
        start = time.perf_counter()
        rc, out, err = main(capsys, "run", "gaussian8", "--events", "100", option, str(path))
        seconds.append(time.perf_counter() - start)
        assert rc == 2 and out == "", err
        assert err.startswith(f"flowsim: error: {option} {str(path)!r}") and problem in err, err
    return seconds


def test_plot_paths_that_cannot_be_written_are_refused(capsys, tmp_path):
    _refuse_unwritable_plot_paths(capsys, tmp_path)


@pytest.mark.timing
def test_plot_paths_that_cannot_be_written_are_refused_before_any_work(capsys, tmp_path):
    assert max(_refuse_unwritable_plot_paths(capsys, tmp_path)) < 5


@pytest.mark.parametrize("error, code, line", [
    (OSError(28, "No space left on device"), 1, "[Errno 28] No space left on device"),
    (RuntimeError("MPI rank 1 of 2 failed"), 1, "MPI rank 1 of 2 failed"),
    (ImportError("backend 'mpi' is not available"), 2, "backend 'mpi' is not available"),
    (MemoryError("out of host memory"), 1, "out of host memory"),
])
def test_errors_users_meet_are_one_line(capsys, monkeypatch, error, code, line):
    def fail(args):
        raise error
    monkeypatch.setattr(cli, "_run", fail)
    rc, out, err = main(capsys, "run", "gaussian8")
    assert rc == code and err == f"flowsim: error: {line}\n"
    monkeypatch.setattr(cli, "_run", lambda args: 1 / 0)        # a bug: its traceback
    with pytest.raises(ZeroDivisionError):
        cli.main(["run", "gaussian8"])


def test_make_dist_works_without_the_venv(tmp_path):
    shutil.copy(os.path.join(ROOT, "Makefile"), tmp_path)
    shutil.copytree(os.path.join(ROOT, "flowsim"), tmp_path / "flowsim",
                    ignore=shutil.ignore_patterns("__pycache__"))
    p = subprocess.run(["make", "-C", str(tmp_path), "dist", f"PYTHON={sys.executable}",
                        f"VENV={tmp_path / 'no-venv'}"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    with zipfile.ZipFile(tmp_path / "dist" / f"flowsim-{flowsim.__version__}.zip") as z:
        assert {"flowsim/__init__.py", "flowsim/cli.py"} <= set(z.namelist())


# -- TensorFlow loads when compute starts -------------------------------------------------

LIGHT = r'''
import json, sys, time
start = time.perf_counter()            # after interpreter start-up, before any flowsim import
loaded = {}
import flowsim
loaded["import flowsim"] = "tensorflow" in sys.modules
import flowsim.schedule
loaded["import flowsim.schedule"] = "tensorflow" in sys.modules
from flowsim import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
seconds = time.perf_counter() - start
loaded["cli"] = "tensorflow" in sys.modules
sys.stdout.flush()
print(json.dumps({"code": code, "seconds": seconds, "loaded": loaded}), file=sys.stderr)
'''


LIGHT_ARGVS = [["--version"], ["--help"], ["run", "--help"]]


def _light_report(python, argv):
    """``LIGHT`` run in a fresh process with ``argv``, its answer checked; its report."""
    p = python(LIGHT, timeout=120, args=argv)
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stderr.strip().splitlines()[-1])
    assert report["code"] == 0
    assert ("flowsim 0.1.0" if argv == ["--version"] else "usage: flowsim") in p.stdout
    return report


@pytest.mark.parametrize("argv", LIGHT_ARGVS)
def test_import_version_and_help_load_no_tensorflow(python, argv):
    """`import flowsim`, `import flowsim.schedule` and `flowsim --version/--help/run --help`
    leave TensorFlow unloaded."""
    assert _light_report(python, argv)["loaded"] == {
        "import flowsim": False, "import flowsim.schedule": False, "cli": False}


@pytest.mark.timing
@pytest.mark.parametrize("argv", LIGHT_ARGVS)
def test_import_version_and_help_answer_in_under_a_second(python, argv):
    """Timed inside the fresh process from before `import flowsim` to the exit of cli.main
    (interpreter start-up left out)."""
    report = _light_report(python, argv)
    assert report["seconds"] < 1.0, report


def _console_script_version():
    """The installed `flowsim --version`, whole process, checked; its seconds."""
    start = time.perf_counter()
    p = subprocess.run([ENTRY, "--version"], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert p.returncode == 0 and p.stdout.strip() == f"flowsim {flowsim.__version__}"
    return time.perf_counter() - start


def test_console_script_prints_the_version():
    _console_script_version()


@pytest.mark.timing
def test_console_script_version_is_fast():
    """Under 3 s, a generous margin for a loaded machine (TensorFlow's import alone takes
    longer)."""
    assert _console_script_version() < 3.0


def test_public_names_load_on_first_use(python):
    code = r'''
import sys, flowsim
assert "tensorflow" not in sys.modules and "flowsim.flow" not in sys.modules
names = ["Flow", "Plain", "Result", "Simulation", "Histogram", "Sweep", "sweep", "integrate",
         "logical_devices", "set_virtual_cpus", "Vegas", "VegasPlus", "__version__"]
for name in names:
    getattr(flowsim, name)
from flowsim import *                                   # every name of __all__
import flowsim.sweep                                    # binds the submodule on the package...
assert callable(flowsim.sweep) and flowsim.sweep is sys.modules["flowsim.sweep"].sweep
assert flowsim.core.flow.Flow is flowsim.Flow and flowsim.core.kernel.run_chunk   # ...as before
assert set(flowsim.__all__) <= set(dir(flowsim))
print("tensorflow" in sys.modules)
'''
    p = python(code, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "False", p.stderr[-2000:]


@pytest.mark.parametrize("first", ["import tensorflow", "flowsim.logical_devices()"])
def test_tensorflow_start_up_noise_stays_silent(first):
    """TensorFlow prints absl/CUDA lines on import even with TF_CPP_MIN_LOG_LEVEL=3;
    after `flowsim.configure()` its first import is silenced, whoever makes it."""
    code = (f"import flowsim\nflowsim.configure()\n{first}\nimport tensorflow as tf\n"
            "print(float(tf.constant(1.0) + 1), flowsim.logical_devices())\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    for name in ("FLOWSIM_TF_VERBOSE", "TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS"):
        env.pop(name, None)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=240, env=env, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.startswith("2.0 ['"), p.stderr[-2000:]
    assert p.stderr == ""


def test_the_package_pickles_by_reference_in_closures():
    """A closure naming ``flowsim`` (a Spark mapPartitions function, a joblib task)
    pickles: the package is a plain module, imported again where it is unpickled."""
    import pickle

    import cloudpickle
    code = "import flowsim, pickle, sys; f = pickle.loads(sys.stdin.buffer.read()); print(f())"
    blob = cloudpickle.dumps(lambda: flowsim.sweep.__module__)
    assert pickle.loads(blob)() == "flowsim.algorithms.sweep"
    proc = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True,
                          timeout=120, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT))
    assert proc.returncode == 0 and proc.stdout.strip() == b"flowsim.algorithms.sweep", proc.stderr


def test_untrusted_result_is_printed_once_with_the_table_or_on_stderr_with_json(capsys):
    """Result.warnings print with the table; the log record and the
    FlowsimWarning of the same message do not print again."""
    import warnings
    args = ["run", "gaussian8", "--events", "200000", "--iters", "6", "--seed", "5"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # the CLI issues no Python warning
        rc, out, err = main(capsys, *args)
        assert rc == 0, err
        assert out.count("chi2/dof = 12.2, above") == 1 and "chi2/dof" not in err
        assert out.splitlines()[-1].startswith("warning: Plain: the 6 kept iterations disagree")
        rc, out, err = main(capsys, *args, "--json")
    assert rc == 0 and len(json.loads(out)["warnings"]) == 1
    assert err.count("chi2/dof") == 1 and err.startswith("flowsim: warning: Plain: the 6 kept")


FAST_REFUSALS = [
    (["--seed", "-1"], "flowsim: error: --seed must be in [0, 2**63), got -1"),
    (["--iters", "0"], "flowsim: error: --iters must be >= 1, got 0"),
    (["--skip", "5", "--iters", "5"], "flowsim: error: --skip (5) must be smaller than "
                                      "--iters (5): --skip leaves that many warm-up "
                                      "iterations out of the result"),
    (["--dim", "0"], "flowsim: error: --dim must be >= 1, got 0"),
    (["--markets", "0"], "flowsim: error: --markets must be >= 1, got 0"),
]


def _fast_refusals():
    """:data:`FAST_REFUSALS` in one fresh process, each message checked: ``(seconds of each,
    whether TensorFlow loaded)``."""
    code = ("import contextlib, io, json, sys, time\n"
            "from flowsim import cli\n"
            "out = []\n"
            "for argv in json.loads(sys.argv[1]):\n"
            "    err = io.StringIO()\n"
            "    start = time.perf_counter()\n"
            "    with contextlib.redirect_stderr(err):\n"
            "        rc = cli.main(['run', 'flowsim.examples:double_gaussian'] + argv)\n"
            "    out.append([rc, err.getvalue(), time.perf_counter() - start])\n"
            "print(json.dumps({'runs': out, 'tf': 'tensorflow' in sys.modules}))\n")
    p = subprocess.run([sys.executable, "-c", code, json.dumps([a for a, _ in FAST_REFUSALS])],
                       capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr[-2000:]
    report = json.loads(p.stdout.strip().splitlines()[-1])
    for (argv, message), (rc, err, _) in zip(FAST_REFUSALS, report["runs"]):
        assert rc == 2 and err.strip() == message, (argv, err)
    return [seconds for _, _, seconds in report["runs"]], report["tf"]


def test_impossible_numbers_are_refused_before_tensorflow_loads():
    """Checked before TensorFlow loads, not after (which takes seconds)."""
    _, loaded_tensorflow = _fast_refusals()
    assert not loaded_tensorflow


@pytest.mark.timing
def test_impossible_numbers_are_refused_in_under_a_second():
    seconds, _ = _fast_refusals()
    assert max(seconds) < 1.0, dict(zip(map(" ".join, (a for a, _ in FAST_REFUSALS)), seconds))


def test_plot_help_says_which_formats():
    help_text = " ".join(cli.parser()._subparsers._group_actions[0].choices["run"]
                         .format_help().split())
    assert help_text.count("PNG, PDF or any format matplotlib writes, from the file's "
                           "extension") == 2


def test_jobs_read_the_command_line_through_cli_options_not_cli():
    """A domain job reads the command line through ``flowsim.core.job_options`` (also
    ``flowsim.cli_options``), never the command-line layer: no cycle cli -> targets ->
    markets.job -> cli (flow_options, args._given)."""
    import ast

    def imported(path):
        tree = ast.parse(open(os.path.join(ROOT, "flowsim", *path.split("/"))).read())
        return {("." * n.level) + (n.module or "") for n in ast.walk(tree)
                if isinstance(n, ast.ImportFrom)} | {a.name for n in ast.walk(tree)
                                                     if isinstance(n, ast.Import)
                                                     for a in n.names}
    assert "..core.job_options" in imported("markets/job.py")
    assert not {"..cli", "flowsim.cli", "..cli_options",
                "flowsim.cli_options"} & imported("markets/job.py")
    assert imported("cli_options.py") == {".core.job_options"}
    assert not [m for m in imported("core/job_options.py") if m.startswith((".", "flowsim"))]
    assert "_given" not in open(os.path.join(ROOT, "flowsim", "markets", "job.py")).read()
    from flowsim import cli_options
    from flowsim.core import job_options
    assert cli.flow_options is cli_options.flow_options is job_options.flow_options
    assert cli_options.given is job_options.given


def test_tensorflow_imported_before_flowsim_prints_nothing_after_flowsim_loads():
    """TensorFlow's start-up lines at its own import cannot be taken
    back; what it would print later (the first XLA compile's lines) is silenced."""
    code = ("import sys\n"
            "import tensorflow\n"
            "print('=== flowsim', file=sys.stderr, flush=True)\n"
            "import flowsim\n"
            "from flowsim.examples import double_gaussian\n"
            "r = flowsim.Flow(flowsim.Plain(double_gaussian, 2), 4096, seed=1, quiet=True).run(1)\n"
            "print(r.value)\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("FLOWSIM_TF_VERBOSE", "TF_CPP_MIN_LOG_LEVEL")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, env=dict(env, PYTHONPATH=ROOT))
    assert p.returncode == 0, p.stderr[-2000:]
    _, _, after = p.stderr.partition("=== flowsim\n")
    assert after == "", after[-2000:]
    assert float(p.stdout) > 0
