"""The package layout: every module path of before the layout still imports, as the same
module object as its new home (so patching an old path patches the running code), with a
DeprecationWarning, from one table (no six-line modules); flowsim/ has no import cycle
and no module imports another's private name (both read with ast)."""
import ast
import importlib
import importlib.util
import os
import subprocess
import sys
import warnings

import pytest
from helpers import ROOT, run_python

from flowsim._moved import MOVED


def test_the_table_maps_old_paths_to_modules_of_the_tree():
    """One step each (an old path never leads to another old path) and no old path is
    a module of the tree."""
    modules = _modules()
    assert [old for old in MOVED if old in modules] == []
    assert [new for new in MOVED.values() if new not in modules or new in MOVED] == []


@pytest.mark.parametrize("old", sorted(MOVED))
def test_old_module_path_is_the_new_module(old):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        importlib.import_module(old)
    assert sys.modules[old] is importlib.import_module(MOVED[old])


def test_old_paths_warn_and_the_tree_has_no_alias_modules():
    env = dict(os.environ, PYTHONPATH=ROOT)
    strict = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c",
                             "import flowsim.flow"], capture_output=True, text=True, env=env,
                            cwd=ROOT, timeout=120)
    assert strict.returncode != 0
    assert "flowsim.flow moved to flowsim.core.flow" in strict.stderr
    plain = subprocess.run([sys.executable, "-c", "import flowsim.flow"], capture_output=True,
                           text=True, env=env, cwd=ROOT, timeout=120)
    assert plain.returncode == 0, plain.stderr
    for old in MOVED:
        path = os.path.join(ROOT, *old.split(".")) + ".py"
        assert not os.path.exists(path), f"{path}: an alias module (the table is flowsim/_moved.py)"


def _modules():
    """``{module name: path}`` of every module of flowsim/."""
    found = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "flowsim")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                mod = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                found[mod[:-len(".__init__")] if mod.endswith(".__init__") else mod] = path
    return found


def _imports(name, path, modules):
    """``(module, imported name or None)`` of every flowsim import in ``path`` (also those
    inside functions)."""
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("flowsim"):
                    yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith("flowsim"):
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    yield (sub, None) if sub in modules else (base, alias.name)
        elif (target := _import_module_string(node, package)) is not None:
            yield target, None


#: Cycles allowed, each with its reason (none today).
KNOWN_CYCLES = []


def test_no_import_cycle():
    modules = _modules()
    graph = {m: {i for i, _ in _imports(m, p, modules) if i in modules and i != m}
             for m, p in modules.items()}
    cycles, index, low, stack, on = [], {}, {}, [], set()

    def visit(v):                            # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while not part or part[-1] != v:
                part.append(stack.pop())
                on.discard(part[-1])
            if len(part) > 1:
                cycles.append(sorted(part))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert [c for c in cycles if c not in KNOWN_CYCLES] == []


def test_no_module_imports_anothers_private_name():
    modules, found = _modules(), []
    for name, path in modules.items():
        for module, imported in _imports(name, path, modules):
            if imported and imported.startswith("_") and not imported.startswith("__"):
                found.append(f"{name} imports {module}.{imported}")
        tree = ast.parse(open(path).read())
        bound = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                 and (n.level or (n.module or "").startswith("flowsim")) for a in n.names}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in bound and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                found.append(f"{name} uses {node.value.id}.{node.attr}")
    assert found == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_patching_an_old_path_patches_the_running_code(monkeypatch):
    import flowsim.flow

    import flowsim.core.flow
    monkeypatch.setattr(flowsim.flow, "LONG_RUN_EVENTS", 123)
    assert flowsim.core.flow.LONG_RUN_EVENTS == 123


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # old paths, on purpose
def test_public_names_keep_their_paths():
    import flowsim.sweep  # noqa: F401  (the old module path; flowsim.sweep stays the function)
    from flowsim.api import integrate
    from flowsim.backends import SCHEDULE_BACKENDS, flow_class
    from flowsim.envs.market import Market
    from flowsim.examples import EXAMPLES, double_gaussian  # noqa: F401
    from flowsim.finance.fastmath import log as finance_log
    from flowsim.finance.sweep import METRICS, ma_crossover_sweep  # noqa: F401
    from flowsim.integrator import integrate as integrator_integrate
    from flowsim.math import log
    from flowsim.scans import scan_simulation

    import flowsim
    from flowsim.algorithms import ALGORITHMS, algorithm_class
    from flowsim.envs.portfolio import Portfolio
    from flowsim.finance.pricing import inverse_normal
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
    assert integrator_integrate is integrate and callable(scan_simulation)
    import flowsim.core.fastmath
    import flowsim.envs
    from flowsim.envs.portfolio import PortfolioRules
    fastmath = flowsim.core.fastmath
    assert (log, inverse_normal) == (fastmath.log, fastmath.inverse_normal)
    assert finance_log is fastmath.log    # the old module's name: the full-range log now
    assert Market is flowsim.envs.Market and Portfolio is PortfolioRules
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
    """Checkpoints written before a move still resume: functions hash under the first
    module name of their code, however often it moved since."""
    import flowsim.core.fastmath
    import flowsim.physics.integrator
    import flowsim.physics.scans
    from flowsim.core.fingerprint import _FORMER, fingerprint
    from flowsim.targets import double_gaussian
    first = {"flowsim.examples.double_gaussian": double_gaussian,
             "flowsim.api.integrate": flowsim.physics.integrator.integrate,
             "flowsim.scans.example_bump": flowsim.physics.scans.example_bump,
             "flowsim.math.log": flowsim.core.fastmath.log}
    assert {name: fingerprint(fn)["name"] for name, fn in first.items()} == {
        name: name for name in first}
    assert _FORMER["flowsim.algorithms.registry"] == "flowsim.algorithms"
    assert set(_FORMER) == set(MOVED.values()) | {"flowsim.algorithms.registry"}



def _import_module_string(node, package):
    """The flowsim module an ``importlib.import_module("...")`` call names by a string
    literal (relative ones resolved in ``package``), or None."""
    func = getattr(node, "func", None)
    if (not isinstance(node, ast.Call) or getattr(func, "attr", getattr(func, "id", None))
            != "import_module" or not node.args or not isinstance(node.args[0], ast.Constant)
            or not isinstance(node.args[0].value, str)):
        return None
    target = importlib.util.resolve_name(node.args[0].value, package)
    return target if target.startswith("flowsim") else None


def test_the_import_graph_reads_import_module_strings():
    """A cycle hidden behind ``importlib.import_module("...")`` is still a cycle: the
    graph :func:`test_no_import_cycle` checks has those edges too."""
    modules = _modules()
    found = {m for m, _ in _imports("flowsim", modules["flowsim"], modules)}
    assert "flowsim._moved" in found            # import_module("._moved", __name__)
    for name in ("flowsim.core.compile_cache", "flowsim.core.configuration"):
        assert "flowsim" not in {m for m, _ in _imports(name, modules[name], modules)}


#: The one module that may use TensorFlow's private names.
TF_PRIVATE_MODULE = "flowsim.core.tf_private"
#: TensorFlow attributes that are not its public API (found where flowsim used them).
TF_PRIVATE_ATTRIBUTES = {"__internal__", "quick_execute", "call_flat", "_inference_function",
                         "CONVERSION_RULES", "function_call_options"}


def _tf_private_uses(tree):
    """What in ``tree`` is a TensorFlow private name: imports of ``tensorflow.<sub>``
    (TensorFlow's API is the top-level module), of ``ctypes``, strings naming
    ``tensorflow.python`` or ``_pywrap``, and :data:`TF_PRIVATE_ATTRIBUTES`."""
    for node in ast.walk(tree):
        yield from (n for n in _absolute_imports(node) if n.startswith(("tensorflow.", "ctypes")))
        if isinstance(node, ast.Attribute) and node.attr in TF_PRIVATE_ATTRIBUTES:
            yield f".{node.attr}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and any(
                word in node.value for word in ("tensorflow.python", "_pywrap")):
            if not _is_docstring(tree, node):
                yield repr(node.value[:60])


def _absolute_imports(node):
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and not node.level:
        return [node.module or ""]
    return []


def _is_docstring(tree, constant):
    return any(isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
               and isinstance(n.body[0], ast.Expr) and n.body[0].value is constant
               for n in ast.walk(tree))


def test_no_tensorflow_private_name_outside_the_shim_module():
    found = [f"{name}: {use}" for name, path in sorted(_modules().items())
             if name != TF_PRIVATE_MODULE
             for use in _tf_private_uses(ast.parse(open(path).read()))]
    assert found == []
    shim = ast.parse(open(_modules()[TF_PRIVATE_MODULE]).read())
    assert list(_tf_private_uses(shim))         # the check sees what the shim module uses


def test_the_version_is_written_once():
    """flowsim/_version.py holds it; flowsim.__version__, setup.py and ``make dist`` read it."""
    from flowsim import __version__
    from flowsim._version import __version__ as written
    assert __version__ is written
    for path in ("setup.py", "Makefile"):
        assert "flowsim/_version.py" in open(os.path.join(ROOT, path)).read(), path
    writers = [name for name, path in _modules().items()      # (compat.vegasflow has
               if f'__version__ = "{written}"' in open(path).read()]   # vegasflow's own)
    assert writers == ["flowsim._version"]


def _drawn_layers():
    """``{name: height}`` of the layer drawing in docs/design.rst (0: the lowest)."""
    text = open(os.path.join(ROOT, "docs", "design.rst")).read()
    block = text.split("Layers, top to bottom::\n\n", 1)[1].split("\n\n", 1)[0]
    rows = [line.split() for line in block.splitlines()]
    return {name: len(rows) - 1 - i for i, row in enumerate(rows) for name in row}


def test_imports_follow_the_layers_docs_design_draws():
    layers, modules = _drawn_layers(), _modules()
    assert {"core", "flowsim", "_version"} <= set(layers), layers

    def layer(module):
        return module.split(".")[1] if "." in module else module
    unknown = sorted({layer(m) for m in modules} - set(layers))
    assert unknown == [], f"{unknown}: draw them in docs/design.rst's layers"
    upward = sorted(f"{name} imports {target}" for name, path in modules.items()
                    for target, _ in _imports(name, path, modules)
                    if layer(target) in layers and layers[layer(target)] > layers[layer(name)])
    assert upward == []


def test_lazy_names_import_on_first_use(tmp_path, monkeypatch):
    """core.lazy.attach: a name imports its submodule and binds every name the table takes
    from it (a submodule named like its function does not shadow it); an unknown name is
    an AttributeError; a missing dependency names what to install."""
    package = tmp_path / "lazypkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from flowsim.core.lazy import attach\n"
        "__getattr__, __dir__, __all__ = attach(__name__, {'clock': 'clock', 'tick': 'clock',"
        " 'gone': 'broken'}, submodules={'extra'}, needs='thing: pip install thing')\n")
    (package / "clock.py").write_text("def clock():\n    return 1\n\ndef tick():\n    return 2\n")
    (package / "extra.py").write_text("VALUE = 3\n")
    (package / "broken.py").write_text("import no_such_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import lazypkg
        assert "clock" not in vars(lazypkg) and lazypkg.__all__ == ["clock", "tick", "gone"]
        assert lazypkg.clock() == 1 and vars(lazypkg)["tick"]() == 2
        assert lazypkg.extra.VALUE == 3 and {"clock", "extra", "gone"} <= set(dir(lazypkg))
        with pytest.raises(AttributeError, match="module 'lazypkg' has no attribute 'nothing'"):
            _ = lazypkg.nothing
        with pytest.raises(ImportError, match=r"lazypkg.gone needs thing: pip install thing \("):
            _ = lazypkg.gone
    finally:
        for name in [m for m in sys.modules if m == "lazypkg" or m.startswith("lazypkg.")]:
            del sys.modules[name]
