"""The persistent cache of compiled kernels (flowsim.core.compile_cache): where it is,
that a second process gets the same bits from it, that a changed integrand compiles
anew instead of reusing a stale executable, and `flowsim cache clear`."""
import os
import sys
import textwrap

import pytest
from helpers import run_python

from flowsim.core import compile_cache

RUN = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import flowsim
    from integrand import f
    if len(sys.argv) > 2:       # another kernel first: TensorFlow's own names move on
        flowsim.Flow(flowsim.Plain(f, 2), 4096, seed=5, block_size=1024, quiet=True).run(1)
    r = flowsim.Flow(flowsim.Plain(f, 3), 4096, seed=5, block_size=1024, quiet=True).run(2)
    print(float(r.value).hex())
""")
#: The integrands of the files in argv, each in a process with the cache off: the bits
#: of a fresh compile, one line each.
UNCACHED = textwrap.dedent("""
    import importlib.util, sys
    import flowsim
    for i, path in enumerate(sys.argv[1:]):
        spec = importlib.util.spec_from_file_location(f"integrand_{i}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        r = flowsim.Flow(flowsim.Plain(module.f, 3), 4096, seed=5, block_size=1024,
                         quiet=True).run(2)
        print(float(r.value).hex())
""")


def entries(cache):
    """{path: (size, mtime)} of every file under ``cache``."""
    out = {}
    for dirpath, _, files in os.walk(cache):
        for name in files:
            path = os.path.join(dirpath, name)
            out[path] = (os.path.getsize(path), os.stat(path).st_mtime_ns)
    return out


def run_with(tmp_path, cache, body, other_first=False):
    (tmp_path / "integrand.py").write_text(textwrap.dedent(body))
    r = run_python(RUN, env={"FLOWSIM_CACHE_DIR": str(cache), "TF_XLA_FLAGS": ""},
                   args=(str(tmp_path),) + (("other-first",) if other_first else ()))
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


SQUARES = """
    def f(x):
        from flowsim.core.lazy_tf import tf
        return tf().reduce_sum(x * x, axis=1)
"""
CUBES = """
    def f(x):
        from flowsim.core.lazy_tf import tf
        return tf().reduce_sum(x * x * x, axis=1)
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The integrand's runs, each in a fresh process, in this order (TensorFlow's
    start-up dominates, so the tests below share them): squares with an empty cache,
    squares again with that cache, then the same module rewritten to cubes, and cubes
    in a process that compiles another kernel first; and squares and cubes with the
    cache off (one process, both compiled anew).  Each run's bits, and the cache's
    files after each run that uses it."""
    tmp = tmp_path_factory.mktemp("compile-cache")
    cache = tmp / "cache"
    out = {"cache": cache}
    for name, body in (("squares", SQUARES), ("squares again", SQUARES), ("cubes", CUBES),
                       ("cubes after another", CUBES)):
        out[name] = run_with(tmp, cache, body, other_first=name.endswith("another"))
        out[f"files after {name}"] = entries(cache)
    paths = []
    for name, body in (("squares", SQUARES), ("cubes", CUBES)):
        paths.append(tmp / f"uncached_{name}.py")
        paths[-1].write_text(textwrap.dedent(body))
    r = run_python(UNCACHED, env={"FLOWSIM_CACHE_DIR": "off", "TF_XLA_FLAGS": ""},
                   args=tuple(str(p) for p in paths))
    assert r.returncode == 0, r.stderr
    out["squares off"], out["cubes off"] = r.stdout.split()[-2:]
    return out


def test_second_process_loads_the_cached_kernel_and_gets_the_same_bits(runs):
    files = runs["files after squares"]
    assert any(name.endswith(".pb") for name in files), files
    assert runs["squares again"] == runs["squares"]
    assert runs["files after squares again"] == files     # nothing compiled or written again
    assert runs["squares off"] == runs["squares"]   # the cached executable: the same bits


def test_a_changed_integrand_compiles_anew_instead_of_reusing_a_stale_kernel(runs):
    """Same module, same function name, new body: a new executable, the new integral."""
    squares, cubes = float.fromhex(runs["squares"]), float.fromhex(runs["cubes"])
    assert set(runs["files after cubes"]) > set(runs["files after squares again"])
    assert abs(squares - 1.0) < 0.05 and abs(cubes - 0.75) < 0.05     # 3/3 and 3/4
    assert runs["cubes off"] == runs["cubes"]


def test_a_process_that_compiled_another_kernel_first_loads_the_cached_one(runs):
    """TensorFlow names each traced function with a process-wide counter, and the
    names are part of what the cache's entries are named by: without
    :mod:`flowsim.core.stable_names` a worker that ran another case first compiled
    every kernel again.  Here the other kernel is the one new entry."""
    assert runs["cubes after another"] == runs["cubes"]
    before, after = runs["files after cubes"], runs["files after cubes after another"]
    assert len(set(after) - set(before)) == 1, sorted(set(after) - set(before))
    assert all(after[path] == before[path] for path in before)


def test_stable_names_stay_unique_for_equal_keys_in_one_process():
    """Two traces under one key (an edited integrand of the same name, in a notebook)
    get different names: the function library refuses one name for two bodies."""
    from flowsim.core.lazy_tf import tf
    from flowsim.core.stable_names import stable_names
    t = tf()
    names = []
    for scale in (2.0, 3.0):
        fn = t.function(lambda x, s=scale: x * s, jit_compile=True)
        with stable_names(("same key",)):
            concrete = fn.get_concrete_function(t.TensorSpec([], t.float64))
        names.append(concrete.name.decode() if isinstance(concrete.name, bytes) else concrete.name)
        assert float(concrete(t.constant(1.0, t.float64))) == scale
    assert names[0] != names[1], names
    assert all(name.startswith("__inference_<lambda>_") for name in names), names


def test_cache_dir_follows_FLOWSIM_CACHE_DIR_and_is_off_when_asked(tmp_path):
    code = ("import os, sys, flowsim; flowsim.configure(); "
            "print(os.environ.get('TF_XLA_FLAGS', '')); print('tensorflow' in sys.modules)")
    r = run_python(code, env={"FLOWSIM_CACHE_DIR": str(tmp_path / "c"), "TF_XLA_FLAGS": ""})
    flags, loaded = r.stdout.split("\n")[:2]
    assert f"--tf_xla_persistent_cache_directory={tmp_path / 'c'}{os.sep}xla-tf" in flags
    assert loaded == "False"
    r = run_python(code, env={"FLOWSIM_CACHE_DIR": "off", "TF_XLA_FLAGS": ""})
    assert "cache_directory" not in r.stdout.split("\n")[0]
    mine = "--tf_xla_persistent_cache_directory=/elsewhere"
    r = run_python(code, env={"FLOWSIM_CACHE_DIR": str(tmp_path), "TF_XLA_FLAGS": mine})
    assert r.stdout.split("\n")[0].split() == [mine, "--tf_xla_disable_constant_folding=true"]


def test_tensorflow_does_not_fold_the_kernels_ranges_into_the_executable(tmp_path):
    """Unless TF_XLA_FLAGS says otherwise: folded, the random stream's counters were
    array literals in the kernel (9 MB executables, slow to load)."""
    code = "import os, flowsim; flowsim.configure(); print(os.environ.get('TF_XLA_FLAGS', ''))"
    r = run_python(code, env={"FLOWSIM_CACHE_DIR": "off", "TF_XLA_FLAGS": ""})
    assert r.stdout.split("\n")[0] == "--tf_xla_disable_constant_folding=true"
    mine = "--tf_xla_disable_constant_folding=false"
    r = run_python(code, env={"FLOWSIM_CACHE_DIR": "off", "TF_XLA_FLAGS": mine})
    assert r.stdout.split("\n")[0] == mine
    big = ("import flowsim; from flowsim.targets import double_gaussian; "
           "flowsim.Flow(flowsim.Plain(double_gaussian, 8), 1 << 16, seed=1, quiet=True).run(1)")
    sizes = {}
    for flags, folded in (("", False), (mine, True)):
        cache = tmp_path / f"cache-{folded}"
        r = run_python(big, env={"FLOWSIM_CACHE_DIR": str(cache), "TF_XLA_FLAGS": flags})
        assert r.returncode == 0, r.stderr
        (size,) = [size for size, _ in entries(cache).values()]
        sizes[folded] = size
    # folded, a block of 65,536 x 8 counters was 4 MiB of uint64 literals (the generator
    # now adds its counters to a runtime offset, so that no longer happens); other
    # ranges of the block still fold into literals (well under 1 MiB)
    assert sizes[False] < 1 << 20 and sizes[False] < sizes[True], sizes


def test_default_cache_is_under_the_user_cache_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("FLOWSIM_CACHE_DIR", raising=False)
    monkeypatch.delenv("XLA_FLAGS", raising=False)      # flowsim may have set one (AVX-512)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.root() == str(tmp_path / "flowsim")
    path = compile_cache.directory()
    assert path.startswith(str(tmp_path / "flowsim" / "xla-tf"))
    from flowsim import __version__
    assert f"flowsim{__version__}-" in path
    # XLA's options change the machine code of the same HLO: another directory
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_prefer_vector_width=512")
    wide = compile_cache.directory()
    assert wide != path and wide.startswith(path + "-xla")
    monkeypatch.setenv("XLA_FLAGS", " --xla_cpu_prefer_vector_width=512 ")
    assert compile_cache.directory() == wide


def test_flowsim_cache_clear_removes_every_compiled_kernel(runs):
    cache = runs["cache"]
    assert runs["files after cubes"]                    # the runs' kernels are there
    (cache / "mine.txt").write_text("not flowsim's")
    env = {"FLOWSIM_CACHE_DIR": str(cache), "TF_XLA_FLAGS": ""}
    r = run_python("import flowsim.cli, sys; sys.exit(flowsim.cli.main(['cache', 'dir']))",
                   env=env)
    assert r.returncode == 0 and r.stdout.startswith(str(cache)), r.stderr
    r = run_python("import sys, flowsim.cli; code = flowsim.cli.main(['cache', 'clear']); "
                   "print('tensorflow' in sys.modules); sys.exit(code)", env=env)
    assert r.returncode == 0, r.stderr
    assert "MiB of compiled kernels" in r.stdout and r.stdout.strip().endswith("False")
    assert sorted(os.listdir(cache)) == ["mine.txt"]
    assert sys.modules.get("flowsim.core.compile_cache") is compile_cache
