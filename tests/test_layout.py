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
from conftest import ROOT, run_python

from flowsim._moved import MOVED as TABLE

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


def test_the_table_is_the_list_of_moved_modules():
    assert TABLE == MOVED


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


#: Cycles another branch breaks (helper "api": cli -> targets -> markets.job -> cli);
#: the merge removes this entry.
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
    from flowsim.examples import EXAMPLES, double_gaussian  # noqa: F401
    from flowsim.finance.sweep import METRICS, ma_crossover_sweep  # noqa: F401

    import flowsim
    from flowsim.algorithms import ALGORITHMS, algorithm_class
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
