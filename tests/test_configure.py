"""flowsim.configure(): importing flowsim changes nothing in the process; the first
compile configures TensorFlow and XLA (environment variables the user can see), unless
the user configured first; a TensorFlow imported before gets a warning.  Each case in a
fresh process (TensorFlow reads its options once per process)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers import ROOT

import flowsim
from flowsim.core import configuration

#: What the children print: flowsim's options as the process sees them.
REPORT = """
import json, os, sys
def report(**extra):
    names = ("XLA_FLAGS", "TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS", "TF_CPP_MIN_LOG_LEVEL")
    print(json.dumps({"env": {n: os.environ.get(n) for n in names}, **extra}))
"""

COMPILE = """
r = flowsim.integrate(lambda x: x[:, 0] * x[:, 1], 2, 4096, 1, seed=1, quiet=True)
"""


def run_clean(pieces, tmp_path, **env):
    """The code ``pieces`` (each dedented, after :data:`REPORT`) in a fresh Python whose
    environment has none of flowsim's options, with its home and user cache under
    ``tmp_path``; returns the JSON its last line prints."""
    full = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"), HOME=str(tmp_path / "home"),
                PYTHONPATH=ROOT)
    for name in (*configuration.ENVIRONMENT, "FLOWSIM_CACHE_DIR", "FLOWSIM_TF_VERBOSE"):
        full.pop(name, None)
    full.update(env)
    code = "\n".join(textwrap.dedent(p) for p in (REPORT, *pieces))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, env=full, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def cache_files(tmp_path):
    """Compiled executables under the child's user cache directory."""
    top = tmp_path / "xdg" / "flowsim"
    return sorted(str(p.relative_to(top)) for p in top.rglob("*.pb")) if top.exists() else []


def test_import_changes_nothing_and_the_first_compile_gets_flowsims_options(tmp_path):
    out = run_clean(("""
        before, finders = dict(os.environ), list(sys.meta_path)
        import flowsim
        same = dict(os.environ) == before
        hooks = [type(f).__name__ for f in sys.meta_path if f not in finders]
        made = os.path.exists(os.path.join(os.environ["XDG_CACHE_HOME"], "flowsim"))
        loaded = "tensorflow" in sys.modules
    """, COMPILE, """
        report(same=same, hooks=hooks, made=made, loaded=loaded)
    """), tmp_path)
    assert out["same"] and not out["made"] and not out["loaded"], out
    assert out["hooks"] == ["MovedFinder"], out        # old module paths only
    env = out["env"]
    expected_xla = configuration.xla_flags(None, configuration.cpu_flags())
    assert (env["XLA_FLAGS"] or "") == expected_xla
    flags = env["TF_XLA_FLAGS"].split()
    assert flags[0] == "--tf_xla_disable_constant_folding=true"
    assert flags[1].startswith("--tf_xla_persistent_cache_directory="
                               + str(tmp_path / "xdg" / "flowsim" / "xla-tf"))
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "0" and env["TF_CPP_MIN_LOG_LEVEL"] == "3"
    assert cache_files(tmp_path), "the first compile did not use the persistent cache"


def test_configure_called_first_wins_and_the_first_compile_keeps_it(tmp_path):
    out = run_clean(("""
        import flowsim
        changed = flowsim.configure(cache_dir="off", vector_width=256, quiet=False)
    """, COMPILE, """
        report(changed=changed)
    """), tmp_path, TF_ENABLE_ONEDNN_OPTS="1")
    env = out["env"]
    assert out["changed"] == {"XLA_FLAGS": "--xla_cpu_prefer_vector_width=256",
                              "TF_XLA_FLAGS": "--tf_xla_disable_constant_folding=true"}
    assert env["XLA_FLAGS"] == "--xla_cpu_prefer_vector_width=256"
    assert env["TF_XLA_FLAGS"] == "--tf_xla_disable_constant_folding=true"   # no cache
    assert env["TF_ENABLE_ONEDNN_OPTS"] == "1" and env["TF_CPP_MIN_LOG_LEVEL"] is None
    assert cache_files(tmp_path) == []


def test_tensorflow_imported_before_gets_a_warning_naming_what_came_late(tmp_path):
    out = run_clean(("""
        import warnings
        import tensorflow
        import flowsim
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            flowsim.integrate(lambda x: x[:, 0] * x[:, 1], 2, 4096, 1, seed=1, quiet=True)
        report(warnings=[f"{w.category.__name__}: {w.message}" for w in caught])
    """,), tmp_path)
    (message,) = [w for w in out["warnings"] if w.startswith("FlowsimWarning")]
    late = ["XLA_FLAGS"] if configuration.xla_flags(None, configuration.cpu_flags()) else []
    late += ["TF_XLA_FLAGS", "TF_ENABLE_ONEDNN_OPTS"]
    assert (f"FlowsimWarning: TensorFlow was imported before flowsim.configure() set "
            f"{', '.join(late)}: TensorFlow may have read them already") in message
    assert "call flowsim.configure() before importing tensorflow" in message


def test_a_child_of_a_configured_process_inherits_the_options_without_a_warning(tmp_path):
    """What the test suite's children do: the options are in their environment before
    they import TensorFlow, so a TensorFlow they import first is configured alike."""
    cache = tmp_path / "cache"
    parent = run_clean((f"""
        import flowsim
        flowsim.configure(cache_dir={str(cache)!r})
        report()
    """,), tmp_path)
    out = run_clean(("""
        import warnings
        warnings.simplefilter("error")
        import tensorflow
        import flowsim
    """, COMPILE, """
        report()
    """), tmp_path, **{k: v for k, v in parent["env"].items() if v is not None})
    assert out["env"] == parent["env"]
    assert list(cache.rglob("*.pb"))


@pytest.mark.parametrize("width", ["wide", 0, True, 2.5])
def test_configure_refuses_a_vector_width_it_cannot_pass_to_xla(width):
    with pytest.raises(ValueError, match="configure: vector_width must be 'auto', None or "
                                         "a positive number of bits, got"):
        flowsim.configure(vector_width=width)
