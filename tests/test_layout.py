"""The package layout: every module path of before the layout still imports, as the same
module object as its new home (so patching an old path patches the running code)."""
import importlib
import sys

import pytest
from conftest import ROOT, run_python

#: Old module path -> where its code lives now.
MOVED = {
    "flowsim.simulation": "flowsim.core.simulation", "flowsim.flow": "flowsim.core.flow",
    "flowsim.backend": "flowsim.core.backend", "flowsim.kernel": "flowsim.core.kernel",
    "flowsim.blocks": "flowsim.core.blocks", "flowsim.reduce": "flowsim.core.sums",
    "flowsim.rng": "flowsim.core.rng", "flowsim.domain": "flowsim.core.integrand",
    "flowsim.stats": "flowsim.core.stats", "flowsim.result": "flowsim.core.result",
    "flowsim.checkpoint": "flowsim.core.checkpoint",
    "flowsim.fingerprint": "flowsim.core.fingerprint", "flowsim._tf": "flowsim.core.lazy_tf",
    "flowsim.log": "flowsim.core.log", "flowsim.plain": "flowsim.algorithms.plain",
    "flowsim.vegas": "flowsim.algorithms.vegas",
    "flowsim.vegasplus": "flowsim.algorithms.vegasplus",
    "flowsim.histogram": "flowsim.algorithms.histogram",
    "flowsim.sweep": "flowsim.algorithms.sweep", "flowsim.api": "flowsim.integrator",
    "flowsim.backends": "flowsim.distribution.registry", "flowsim.examples": "flowsim.targets",
    "flowsim.finance.sweep": "flowsim.finance.backtest",
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_module_path_is_the_new_module(old):
    importlib.import_module(old)
    assert sys.modules[old] is importlib.import_module(MOVED[old])


def test_patching_an_old_path_patches_the_running_code(monkeypatch):
    import flowsim.core.flow
    import flowsim.flow
    monkeypatch.setattr(flowsim.flow, "LONG_RUN_EVENTS", 123)
    assert flowsim.core.flow.LONG_RUN_EVENTS == 123


def test_public_names_keep_their_paths():
    import flowsim
    import flowsim.sweep  # noqa: F401  (binds the module; flowsim.sweep stays the function)
    from flowsim.algorithms import ALGORITHMS, algorithm_class
    from flowsim.api import integrate
    from flowsim.backends import SCHEDULE_BACKENDS, flow_class
    from flowsim.examples import EXAMPLES, double_gaussian  # noqa: F401
    from flowsim.finance.sweep import METRICS, ma_crossover_sweep  # noqa: F401
    from flowsim.schedule import (  # noqa: F401
        POLICIES,
        Chunk,
        Scheduler,
        Throughput,
        chunks,
        simulate,
        static_shares,
    )
    assert callable(flowsim.sweep) and flowsim.integrate is integrate
    assert algorithm_class("vegas") is flowsim.Vegas and set(ALGORITHMS) >= {"plain"}
    assert flow_class(None) is flowsim.Flow and "threads" in SCHEDULE_BACKENDS
    assert "gaussian8" in EXAMPLES
    for name in flowsim.__all__:
        assert getattr(flowsim, name) is not None


def test_schedule_and_core_imports_load_no_tensorflow():
    out = run_python("import sys, flowsim.schedule, flowsim.core.flow, flowsim.algorithms, "
                     "flowsim.distribution.registry, flowsim.flow, flowsim.vegas; "
                     "print(flowsim.__file__, 'tensorflow' in sys.modules)")
    assert out.returncode == 0, out.stderr
    path, loaded = out.stdout.split()
    assert path.startswith(ROOT) and loaded == "False"


def test_fingerprints_name_moved_modules_as_before():
    """Checkpoints written before the layout still resume: the bundled integrand and
    flowsim's own functions hash under their former module names."""
    from flowsim.core.fingerprint import _FORMER, fingerprint
    from flowsim.targets import double_gaussian
    assert fingerprint(double_gaussian)["name"] == "flowsim.examples.double_gaussian"
    assert {new: old for old, new in MOVED.items()}.items() <= _FORMER.items()
