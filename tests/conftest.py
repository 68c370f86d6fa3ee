"""Shared test helpers.  The pytest process itself uses the default devices."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, timeout=300, env=None, args=()):
    """Run ``code`` in a fresh Python (own TF devices); return CompletedProcess."""
    full_env = dict(os.environ, PYTHONPATH=ROOT, **(env or {}))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, cwd=ROOT)


@pytest.fixture
def python():
    """Fixture form of :func:`run_python`."""
    return run_python
