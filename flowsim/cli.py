"""The ``flowsim`` command line: ``--version``, ``devices``, ``run TARGET``, ``cache``.

Usage::

    flowsim --version
    flowsim devices [--json]                   # every TensorFlow device
    flowsim devices --check                    # each device type on short cases, GPU readiness
    flowsim run gaussian8 --events 2000000 --iters 5 --seed 7
    flowsim run gaussian8 --algorithm vegas --iters 6 --skip 1 --plot convergence.pdf
    flowsim run mymodule:my_simulation --json  # a Simulation, a function returning one...
    flowsim cache dir | clear                  # the persistent cache of compiled kernels

``flowsim run --help`` lists the options and the targets (``MODULE:NAME`` is a
Simulation, a function returning one, a job with ``run_cli(args)``, or with
``--dim N`` a bare integrand).  The result table is printed on stdout, with the
result's warnings under it (``--json``: the JSON, warnings on stderr).

Exit codes: 0 done; 2 bad input, refused with a message naming the option (options
a target or backend would ignore and impossible numbers such as ``--iters 0`` are
refused before TensorFlow loads); 1 what the machine refused (memory, a lost
worker); 130 interrupted (Ctrl-C), with the line saying how to resume.
"""
import argparse
import importlib
import importlib.util
import inspect
import json
import logging
import os
import sys
import warnings

from . import __version__
from .cli_options import flow_options  # noqa: F401  (flowsim.cli.flow_options, as before)


def _check_devices(args):
    from .testing import device_check
    found = device_check.check_devices()
    if args.json:
        print(json.dumps(device_check.as_json(found), indent=2))
    else:
        print(device_check.table(found))
    return 0 if all(report.ok for report in found["readiness"]) else 1


def _devices(args):
    if args.check:
        return _check_devices(args)
    from .core.lazy_tf import logical_devices, tf
    t = tf()
    rows = []
    for name in logical_devices():
        kind = name.split(":")[0]
        memory = "?"
        if kind == "GPU":
            try:
                info = t.config.experimental.get_memory_info(name)
                memory = f"{info.get('peak', 0) / 2**20:.0f} MiB peak in use"
            except (ValueError, RuntimeError):
                pass
            details = {}
            phys = t.config.list_physical_devices("GPU")
            idx = int(name.split(":")[1])
            if idx < len(phys):
                details = t.config.experimental.get_device_details(phys[idx])
            desc = details.get("device_name", "GPU")
        else:
            desc = f"host CPU ({os.cpu_count()} cores)"
            try:
                pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
                memory = f"{pages / 2**30:.1f} GiB host memory"
            except (ValueError, OSError):
                pass
        rows.append({"device": name, "kind": kind, "description": desc, "memory": memory})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for r in rows:
            print(f"{r['device']:<8} {r['kind']:<4} {r['description']:<40} {r['memory']}")
    return 0


def load_target(target):
    """``module:callable`` or a bundled example name -> the callable.

    ``module`` is looked up in the current directory first (as ``python -m`` does).
    """
    from .targets import EXAMPLES
    if target in EXAMPLES:
        return EXAMPLES[target]
    if ":" not in target:
        raise SystemExit(f"flowsim run: unknown target {target!r}; give module:callable or "
                         f"one of the bundled examples: {', '.join(sorted(EXAMPLES))}")
    module, _, attr = target.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"flowsim run: cannot load {target!r}: {exc}") from exc
    return obj


def _is_job(obj):
    """A job object that runs itself and prints its own table (``run_cli(args)``)."""
    from .core.simulation import Simulation
    return (hasattr(obj, "run_cli") and not isinstance(obj, type)
            and not isinstance(obj, Simulation))


def _flag(dest):
    return "--" + dest.replace("_", "-")


def _given(args):
    """Names of the ``flowsim run`` options given with a value other than their default."""
    defaults = vars(parser().parse_args(["run", args.target]))
    return [k for k, v in vars(args).items() if k not in ("target", "func") and v != defaults[k]]


def _refuse(dests, why):
    flags = ", ".join(_flag(d) for d in dests)
    return ValueError(f"{flags} {'does' if len(dests) == 1 else 'do'} not apply here: {why}")


def _check_job(job, args, given):
    used = getattr(job, "cli_options", None)
    unused = [d for d in given if used is not None and d not in used]
    if unused:
        raise _refuse(unused, f"{args.target!r} is a job that takes only "
                              f"{', '.join(map(_flag, used))}; drop the others")
    return job


def _simulation(args, given):
    """The Simulation (or job) ``args.target`` names, refusing options it would ignore."""
    from .core.simulation import Simulation
    obj = load_target(args.target)
    if args.dim is not None:
        return _bare_integrand(args, obj)
    if _is_job(obj):
        return _check_job(obj, args, given)
    if isinstance(obj, Simulation):
        if "algorithm" in given:
            raise _refuse(["algorithm"], f"{args.target!r} is a Simulation built with its "
                                         f"algorithm already; drop --algorithm")
        return obj
    return _from_factory(args, obj, given)


def _bare_integrand(args, obj):
    """``--dim N``: ``obj`` is an integrand f(x) of x [n, N]."""
    from .core.simulation import Simulation
    from .targets import EXAMPLES
    if args.target in EXAMPLES or isinstance(obj, Simulation) or _is_job(obj):
        raise _refuse(["dim"], f"{args.target!r} is not a bare integrand (it has its own "
                               f"dimension); drop --dim, or give module:function --dim N "
                               f"to integrate a function f(x) of x [n, N]")
    from .algorithms.registry import algorithm_class
    return algorithm_class(args.algorithm or "plain")(obj, args.dim)


def _from_factory(args, obj, given):
    """``obj`` is a function returning a Simulation or a job: call it."""
    from .core.simulation import Simulation
    if not callable(obj):
        raise SystemExit(f"flowsim run: {args.target!r} is a {type(obj).__name__}, not a "
                         f"Simulation, a job or a function returning one")
    params = inspect.signature(obj).parameters
    required = [n for n, p in params.items() if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if required:
        raise SystemExit(f"flowsim run: {args.target!r} needs arguments ({', '.join(required)}); "
                         f"for a bare integrand f(x) pass --dim N")
    kwargs = {"algorithm": args.algorithm} if "algorithm" in given and "algorithm" in params else {}
    sim = obj(**kwargs)
    if _is_job(sim):
        return _check_job(sim, args, given)
    if "algorithm" in given and not kwargs:
        raise _refuse(["algorithm"], f"{args.target!r} takes no algorithm= argument; drop "
                                     f"--algorithm")
    if not isinstance(sim, Simulation):
        raise SystemExit(f"flowsim run: {args.target!r} returned {type(sim).__name__}, not a "
                         f"Simulation; for a bare integrand pass --dim N")
    return sim


#: ``flowsim run`` options that count something, and the least each may be.
_LEAST = {"events": 1, "iters": 1, "skip": 0, "dim": 1, "events_limit": 1, "block_size": 1,
          "markets": 1}


def check_numbers(args):
    """Refuse impossible numbers of ``flowsim run`` (``--seed -1``, ``--iters 0``,
    ``--skip 5 --iters 5``, ``--dim 0``...) at once, before the target loads and
    TensorFlow with it: a ``ValueError`` naming the option."""
    for dest, least in _LEAST.items():
        value = getattr(args, dest, None)
        if value is not None and value < least:
            raise ValueError(f"{_flag(dest)} must be >= {least}, got {value}")
    if args.seed is not None and not 0 <= args.seed < 2**63:
        raise ValueError(f"--seed must be in [0, 2**63), got {args.seed}")
    if args.skip >= args.iters:
        raise ValueError(f"--skip ({args.skip}) must be smaller than --iters ({args.iters}): "
                         f"--skip leaves that many warm-up iterations out of the result")


def _check_output(option, path):
    """Refuse now an output file that could not be written after the run."""
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        problem = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise ValueError(f"{option} {path!r}: directory {directory!r} {problem}; create it or "
                         f"pass another path")
    if os.path.isdir(path):
        raise ValueError(f"{option} {path!r} is a directory; pass a file name such as "
                         f"{os.path.join(path, 'plot.png')!r}")
    if not os.access(directory, os.W_OK):
        raise ValueError(f"{option} {path!r}: directory {directory!r} is not writable")
    if importlib.util.find_spec("matplotlib") is None:
        raise ImportError(f"{option} needs matplotlib: pip install 'flowsim[plot]'")
    from matplotlib.figure import Figure
    formats = Figure().canvas.get_supported_filetypes()
    extension = os.path.splitext(path)[1][1:].lower()
    if extension not in formats:
        said = f"extension {extension!r}" if extension else "no extension"
        raise ValueError(f"{option} {path!r}: {said}; the file's extension names its format, "
                         f"one of {', '.join(sorted(formats))}")


def whole_number(text):
    """An option's count: ``1000000``, ``1_000_000`` or ``1e6`` (a float that is a
    whole number); refused (argparse names the option) otherwise."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number such as 1000000 or 1e6, "
                                         f"got {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}")
    return int(value)


def print_iteration(n_iter):
    """The command line's line per finished iteration (on stderr, as it finishes)."""
    import numpy as np

    def numbers(x, digits):
        x = np.atleast_1d(x)
        return (f"{float(x[0]):.{digits}g}" if x.size == 1
                else np.array2string(x, precision=digits))

    def say(record):
        print(f"flowsim: iteration {record['iteration']}/{n_iter}: "
              f"{numbers(record['value'], 10)} +/- {numbers(record['error'], 4)} "
              f"({record['seconds']:.3g} s)", file=sys.stderr, flush=True)
    return say


def _run(args):
    from .distribution.registry import flow_class, takes_schedule
    given = _given(args)
    sim = _simulation(args, given)
    if _is_job(sim):
        args.job = True
        args.given = given              # flowsim.cli_options.given(args) reads it
        return sim.run_cli(args)
    for dest in ("config", "markets", "classes"):
        if dest in given:
            raise _refuse([dest], "only the target 'markets' takes it")
    if args.schedule is not None and not takes_schedule(args.backend):
        backend = (f"backend {args.backend!r}" if args.backend
                   else "the default backend (one device)")
        raise _refuse(["schedule"], f"{backend} has no schedule; add --backend threads (or "
                                    f"scheduled, mpi)")
    _check_output("--plot", args.plot)
    _check_output("--plot-timeline", args.plot_timeline)
    kwargs = {"n_events": args.events, "seed": args.seed, "dtype": args.dtype,
              "quiet": args.quiet or args.json, **flow_options(args)}
    if args.block_size is not None:
        kwargs["block_size"] = args.block_size
    if args.schedule is not None:
        kwargs["schedule"] = args.schedule
    cls = flow_class(args.backend)
    flow = cls(sim, **kwargs)
    say = None if args.quiet or args.json else print_iteration(args.iters)
    result = flow.run(args.iters, checkpoint=args.checkpoint, skip=args.skip, on_iteration=say)
    if flow.is_root():
        _report(args, result, sim)
    return 0


def _report(args, result, sim):
    """The result table (or JSON) and the plots asked for."""
    print(result.to_json(indent=2) if args.json else result)
    if args.json:                       # the table prints them; JSON holds them: say so
        for message in result.warnings:
            print(f"flowsim: warning: {message}", file=sys.stderr)
    if args.plot:
        from . import plot
        plot.save_convergence(result, args.plot, simulation=sim)
    if args.plot_timeline:
        from . import plot
        plot.save_timeline(result, args.plot_timeline)


def _cache(args):
    from .core import compile_cache, configuration
    if args.action == "dir":
        env = compile_cache.ENV
        # the XLA_FLAGS flowsim.configure() would run with: part of the directory's name
        flags = configuration.xla_flags(os.environ.get("XLA_FLAGS"), configuration.cpu_flags())
        print(compile_cache.directory(xla_flags=flags) or f"off ({env}={os.environ.get(env)!r})")
        return 0
    freed = compile_cache.clear()
    print(f"flowsim: removed {freed / 2**20:.1f} MiB of compiled kernels from "
          f"{compile_cache.root()}")
    return 0


def _targets_help():
    from .targets import EXAMPLES
    lines = ["targets:"]
    for name, f in EXAMPLES.items():
        doc = (inspect.getdoc(f) or "").splitlines()[0].replace("``", "")
        lines.append(f"  {name:<13} {doc}")
    lines += ["  MODULE:NAME   your own; MODULE is found in the current directory or on sys.path.",
              "                NAME must be a Simulation (e.g. flowsim.Plain(f, 2)), a function",
              "                returning one (it gets --algorithm if it takes algorithm=), a job",
              "                (an object with run_cli(args)), or with --dim N a bare integrand",
              "                f(x) mapping x [n, N] to [n] (or [n, k]) values.",
              "Options a target or backend does not use are refused."]
    return "\n".join(lines)


def parser():
    p = argparse.ArgumentParser(prog="flowsim",
                                description=__doc__.splitlines()[0].replace("``", ""))
    p.add_argument("--version", action="version", version=f"flowsim {__version__}")
    sub = p.add_subparsers(dest="command")
    d = sub.add_parser("devices", help="list every TensorFlow device")
    d.add_argument("--json", action="store_true")
    d.add_argument("--check", action="store_true",
                   help="run each device type on short Plain, Vegas and markets cases "
                        "(events/s, float32 vs float64) and check GPU readiness")
    d.set_defaults(func=_devices)
    c = sub.add_parser("cache", help="the persistent cache of compiled kernels "
                       "(FLOWSIM_CACHE_DIR moves it; 'off' turns it off)")
    c.add_argument("action", choices=["dir", "clear"],
                   help="dir: print where it is; clear: remove every compiled kernel")
    c.set_defaults(func=_cache)
    r = sub.add_parser("run", help="run a simulation: module:callable or a bundled example",
                       epilog=_targets_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("target", help="a bundled example or MODULE:NAME (see targets below)")
    r.add_argument("--events", type=whole_number, default=1_000_000, help="events per iteration")
    r.add_argument("--iters", type=int, default=5, help="iterations")
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--events-limit", type=whole_number, default=None)
    r.add_argument("--block-size", type=whole_number, default=None,
                   help="events per block, a multiple of 64 (changes the random stream)")
    r.add_argument("--no-jit", action="store_true", help="do not compile kernels with XLA")
    r.add_argument("--rng", default=None, choices=["splitmix", "philox", "philox4x32"],
                   help="counter-based generator (default splitmix)")
    r.add_argument("--skip", type=int, default=0, help="warm-up iterations left out")
    r.add_argument("--algorithm", default=None, help="plain (default), vegas or vegasplus")
    r.add_argument("--dim", type=int, default=None,
                   help="TARGET is a bare integrand f(x) of x [n, DIM]")
    r.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    r.add_argument("--backend", default=None,
                   help="threads, scheduled, mpi, spark, joblib, a registered or installed "
                   "backend (flowsim.register_backend, entry points 'flowsim.backends'), "
                   "or module:factory (an Executor factory); default one device (for the markets "
                   "target, flowsim.markets.ensemble's choice for this machine)")
    r.add_argument("--schedule", default=None, help="static, dynamic, guided or weighted "
                   "(with --backend threads, scheduled or mpi)")
    r.add_argument("--checkpoint", default=None)
    r.add_argument("--config", default=None, help="pams JSON config (target markets)")
    r.add_argument("--markets", type=whole_number, default=None,
                   help="markets in the ensemble (target markets)")
    r.add_argument("--classes", default=None,
                   help="pams user classes as flowsim classes, JSON, e.g. "
                        "'{\"UserDefinedFCNAgent\": \"FCNAgent\"}' (target markets)")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.add_argument("--quiet", action="store_true",
                   help="no progress bar and no line per iteration")
    r.add_argument("--plot", default=None, help="save a convergence plot: PNG, PDF or any "
                   "format matplotlib writes, from the file's extension")
    r.add_argument("--plot-timeline", default=None, help="save the chunk timeline: PNG, PDF "
                   "or any format matplotlib writes, from the file's extension")
    r.set_defaults(func=_run)
    return p


def _exit_code(exc):
    """2 for bad input, 1 for what the machine refused; None for a bug (show the traceback)."""
    if isinstance(exc, (ValueError, TypeError, FloatingPointError, ImportError)):
        return 2
    if isinstance(exc, (OSError, MemoryError, RuntimeError)):
        return 1
    tensorflow = sys.modules.get("tensorflow")     # an OpError needs a loaded TensorFlow
    if tensorflow is not None and isinstance(exc, tensorflow.errors.OpError):
        return 1
    return None


class _Stderr(logging.Handler):
    """flowsim's warnings (e.g. a long run's estimated duration) on stderr, one line each;
    not those the result carries (``Result.warnings``): they print with the result."""

    def emit(self, record):
        if not getattr(record, "flowsim_result_warning", False):
            print(f"flowsim: {record.getMessage()}", file=sys.stderr)


def main(argv=None):
    args = parser().parse_args(argv)
    if not getattr(args, "func", None):
        parser().print_help()
        return 2
    from .core.log import FlowsimWarning, logger
    handler = _Stderr(logging.WARNING)
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings():     # Result.warnings print with the result
            warnings.simplefilter("ignore", FlowsimWarning)
            if args.func is _run:
                check_numbers(args)
            return args.func(args)
    except KeyboardInterrupt as exc:
        info = getattr(exc, "flowsim_interrupted", ())
        if info is not None:        # None: another MPI rank reports it
            from .core.flow import interrupted_message
            line = ("interrupted" if not info else f"interrupted during iteration {info[0]}"
                    if getattr(args, "job", False) else interrupted_message(*info, cli=True))
            print(f"flowsim: {line}", file=sys.stderr)
        return 130
    except Exception as exc:            # _exit_code picks what users meet; bugs re-raise
        code = _exit_code(exc)
        if code is None:
            raise
        if not getattr(exc, "flowsim_quiet", False):   # another MPI rank reports it
            message = exc.message if hasattr(exc, "message") and code == 1 else exc
            notes = "".join(f" {n}" for n in getattr(exc, "__notes__", ()))
            print(f"flowsim: error: {message}{notes}", file=sys.stderr)
        return code
    finally:
        logger.removeHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
