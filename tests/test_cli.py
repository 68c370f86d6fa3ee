"""The flowsim command line: --version, devices, run TARGET, errors, python -m flowsim."""
import json
import os
import sys

import pytest

import flowsim
from flowsim import cli
from flowsim.examples import double_gaussian_exact

from conftest import ROOT

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
    r = flowsim.Flow(flowsim.examples.gaussian8(), 4096, seed=5, events_limit=10**6,
                     quiet=True).run(3)
    assert d["value"] == r.value and d["error"] == r.error
    # text output: the table
    rc, out, _ = main(capsys, *args)
    assert rc == 0 and out.startswith("flowsim: Plain on flow (CPU:0), seed 5")
    assert f"result = {r.value:.12g} +/- {r.error:.4g}" in out


def test_run_module_callable_with_dim(capsys):
    rc, out, err = main(capsys, "run", "flowsim.examples:double_gaussian", "--dim", "2",
                        "--events", "20000", "--iters", "2", "--seed", "1", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert abs(d["value"] - double_gaussian_exact(2)) < 5 * d["error"]


def test_run_writes_and_resumes_a_checkpoint(capsys, tmp_path):
    path = str(tmp_path / "cli.ckpt")
    base = ["run", "gaussian8", "--events", "1024", "--seed", "2", "--json",
            "--checkpoint", path]
    rc, first, _ = main(capsys, *base, "--iters", "1")
    rc2, out, _ = main(capsys, *base, "--iters", "3")
    rc3, whole, _ = main(capsys, "run", "gaussian8", "--events", "1024", "--seed", "2",
                         "--json", "--iters", "3")
    assert rc == rc2 == rc3 == 0
    assert json.loads(out)["value"] == json.loads(whole)["value"]
    rc, _, err = main(capsys, "run", "gaussian8", "--events", "2048", "--seed", "2",
                      "--iters", "3", "--checkpoint", path)
    assert rc == 2 and "n_events: checkpoint has 1024, this run has 2048" in err


@pytest.mark.parametrize("argv, code, message", [
    (["run", "gaussian8", "--events", "0"], 2, "flowsim: error: n_events must be >= 1, got 0"),
    (["run", "gaussian8", "--events", "100", "--iters", "0"], 2,
     "flowsim: error: n_iter must be >= 1, got 0"),
    (["run", "gaussian8", "--events", "100", "--seed", "-1"], 2,
     r"flowsim: error: seed must be in [0, 2**63), got -1"),
    (["run", "gaussian8", "--events", "1000", "--events-limit", "10"], 2,
     "flowsim: error: events_limit (10) must be at least block_size (1024)"),
    (["run", "gaussian8", "--events", "100", "--algorithm", "magic"], 2,
     "flowsim: error: unknown algorithm 'magic'"),
    (["run", "gaussian8", "--events", "100", "--backend", "cloud"], 2,
     "flowsim: error: unknown backend 'cloud'"),
    (["run", "gaussian8", "--events", "abc"], 2, "argument --events: invalid int value: 'abc'"),
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
    ("flowsim.examples:nothing", "flowsim run: cannot load 'flowsim.examples:nothing'"),
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
    r = flowsim.Flow(flowsim.examples.gaussian8(), 2048, seed=9, quiet=True).run(2)
    assert d["value"] == r.value      # same bits in another process
    # no TensorFlow start-up noise on stderr
    assert "absl" not in p.stderr and "cuda" not in p.stderr.lower(), p.stderr[-2000:]


@pytest.mark.skipif(not os.path.exists(ENTRY), reason="flowsim script not installed in this venv")
def test_console_script_calls_cli_main():
    """The installed `flowsim` script is the entry point of setup.py (flowsim.cli:main)."""
    with open(ENTRY, encoding="utf-8") as fh:
        text = fh.read()
    assert "from flowsim.cli import main" in text and "sys.exit(main())" in text
