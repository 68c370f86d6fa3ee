"""Where Plain's per-event time goes: XLA's dumps of the block kernel, read for you.

The evidence behind ``docs/performance.rst``'s per-core limit section,
reproducible on any machine.  A child process runs
``Flow(Plain(double_gaussian, 8)).run`` at 2*10^6 events with XLA dumping
every module it compiles (``XLA_FLAGS=--xla_dump_to=DIR
--xla_dump_hlo_as_text``, flowsim's compile cache off so that the kernels
compile); this script then prints, for the block kernel
(the module with the most fusions):

* its fusions after XLA's optimisations, the ops they contain (a
  ``reduce-window`` chain is XLA's rewrite of the in-block sums), and
* the object code of each fusion (``objdump -d``): instructions, and the
  ones that say what the loop does: 64-bit multiplies (``vpmullq``: the
  SplitMix64 stream), divides (``vdivpd``/``vdivps``: XLA's rational
  ``exp``), fused multiply-adds, scalar adds (``vaddsd``/``vaddss``: a
  reduction that is not vectorised), zmm registers (512-bit vectors).

``--perf`` also samples the timed runs with ``perf record -e cpu-clock``
and prints the share of CPU per shared object: ``[JIT]``/unknown is XLA's
generated code, ``libtensorflow_framework`` TensorFlow's executor and its
thread pool, ``python3.11`` the Flow loop's Python::

    .venv/bin/python benchmarks/limit_dump.py [--dir /tmp/flowsim-dump] [--dtype float32] [--perf]

Needs ``objdump`` (binutils) for the object code and ``perf`` for
``--perf``; without them those tables are left out and the script says so.
"""
import argparse
import collections
import glob
import os
import re
import shutil
import signal
import subprocess
import sys
import time

MNEMONICS = ("vpmullq", "vdivpd", "vdivps", "vfmadd", "vaddsd", "vaddss", "vexp")
CHILD = """
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import flowsim
from flowsim.targets import double_gaussian
flow = flowsim.Flow(flowsim.Plain(double_gaussian, 8), n_events={events}, seed=1,
                    dtype="{dtype}", quiet=True)
flow.run(1)
print("ready", flush=True)
sys.stdin.readline()
c = time.process_time()
flow.run({iters})
print(f"{{(time.process_time() - c) / ({iters} * {events}) * 1e9:.2f}} CPU-ns/event", flush=True)
sys.stdin.readline()
"""


def run_child(args, env, perf_data=None):
    """The child run; with ``perf_data``, ``perf record`` attached to its timed runs
    only (after import, tracing and the warm-up iteration).  Returns its last line."""
    code = CHILD.format(events=args.events, iters=args.iters, dtype=args.dtype)
    child = subprocess.Popen([sys.executable, "-c", code], env=env, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    if child.stdout.readline().strip() != "ready":
        raise SystemExit(f"the child run failed (exit code {child.wait()})")
    perf = None
    if perf_data:
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-o", perf_data,
                                 "-p", str(child.pid)], stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    child.stdin.write("go\n")
    child.stdin.flush()
    line = child.stdout.readline().strip()
    if perf:
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=60)
    child.communicate("exit\n", timeout=600)
    return line


def block_module(where):
    """The after-optimisations HLO text with the most fusions, and its module prefix."""
    texts = glob.glob(os.path.join(where, "*cpu_after_optimizations.txt"))
    if not texts:
        raise SystemExit(f"no XLA dump in {where}: is XLA_FLAGS overridden by the environment?")
    best = max(texts, key=lambda p: open(p).read().count("fusion("))
    return best, best[:-len("cpu_after_optimizations.txt")]


def fusion_ops(hlo_text):
    """``{fusion: Counter(op names)}`` from an HLO module's text, named as the
    fusion instruction that calls the computation (the object files' names)."""
    called = dict((c, n) for n, c in re.findall(r"%?([\w.\-]+) = .* fusion\(.*calls=%?([\w.\-]+)",
                                                hlo_text))
    fusions, current = {}, None
    for line in hlo_text.splitlines():
        head = re.match(r"^(%?[\w.\-]*fus[\w.\-]*)\s.*\{\s*$", line)
        if head:
            name = head.group(1).lstrip("%")
            current = fusions.setdefault(called.get(name, name), collections.Counter())
        elif line.startswith("}"):
            current = None
        elif current is not None:
            op = re.search(r"=\s*\S+\s+([a-z][\w\-]*)\(", line)
            if op:
                current[op.group(1)] += 1
    return fusions


def object_code(prefix):
    """``{fusion: Counter(mnemonic families, 'instructions', 'zmm')}`` by ``objdump -d``."""
    if not shutil.which("objdump"):
        return None
    counts = {}
    for obj in sorted(glob.glob(prefix + "obj-file.*.o")):
        text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj],
                              capture_output=True, text=True).stdout
        c = collections.Counter()
        for line in text.splitlines():
            ins = re.match(r"^\s+[0-9a-f]+:\s+(\S+)\s*(.*)$", line)
            if not ins:
                continue
            c["instructions"] += 1
            c["zmm"] += "zmm" in ins.group(2)
            for m in MNEMONICS:
                c[m] += ins.group(1).startswith(m)
        counts[obj[len(prefix) + len("obj-file."):-2]] = c
    return counts


def perf_shares(args, env):
    """CPU share per shared object of the timed child run, from ``perf report``."""
    data = os.path.join(args.dir, "perf.data")
    stdout = run_child(args, env, data)
    report = subprocess.run(["perf", "report", "-i", data, "--stdio", "--sort", "dso"],
                            capture_output=True, text=True).stdout
    rows = [line.split(None, 1) for line in report.splitlines()
            if line.strip() and not line.startswith("#")]
    return stdout, [(share, dso.strip()) for share, dso in rows[:12]]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dir", default="/tmp/flowsim-dump", help="where XLA writes (emptied first)")
    p.add_argument("--events", type=int, default=2_000_000)
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    p.add_argument("--perf", action="store_true", help="also perf record the timed runs")
    args = p.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    dump_flags = f"{env.get('XLA_FLAGS', '')} --xla_dump_to={args.dir} --xla_dump_hlo_as_text"
    dump_env = dict(env, FLOWSIM_CACHE_DIR="off", XLA_FLAGS=dump_flags.strip())
    print(f"Plain, 8-dim double Gaussian, {args.events:,} x {args.iters}, {args.dtype}: "
          f"{run_child(args, dump_env)} (while dumping)")
    hlo, prefix = block_module(args.dir)
    fusions = fusion_ops(open(hlo).read())
    print(f"\nblock kernel {os.path.basename(hlo)}: {len(fusions)} fusions")
    for name, ops in fusions.items():
        print(f"  {name}: {sum(ops.values())} ops; " +
              ", ".join(f"{k} {v}" for k, v in ops.most_common(6)))
    code = object_code(prefix)
    if code is None:
        print("\nobjdump not found: no object-code table")
    else:
        print("\nobject code per fusion (objdump -d):")
        for name, c in code.items():
            print(f"  {name}: {c['instructions']} instructions, zmm {c['zmm']}; " +
                  ", ".join(f"{m} {c[m]}" for m in MNEMONICS if c[m]))
    if args.perf:
        if not shutil.which("perf"):
            print("\nperf not found: no CPU table")
            return
        stdout, shares = perf_shares(args, env)
        print(f"\nperf record -e cpu-clock of the timed runs ({stdout}): CPU by shared object")
        for share, dso in shares:
            print(f"  {share:>8}  {dso}")


if __name__ == "__main__":
    main()
