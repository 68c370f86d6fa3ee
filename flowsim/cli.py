"""The ``flowsim`` command line: ``--version``, ``devices``, ``run TARGET``."""
import argparse
import importlib
import inspect
import json
import sys

from . import __version__


def _devices(args):
    from ._tf import logical_devices, tf
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
            import os
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
    """``module:callable`` or a bundled example name -> the callable."""
    from .examples import EXAMPLES
    if target in EXAMPLES:
        return EXAMPLES[target]
    if ":" not in target:
        raise SystemExit(f"flowsim run: unknown target {target!r}; give module:callable or "
                         f"one of the bundled examples: {', '.join(sorted(EXAMPLES))}")
    module, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise SystemExit(f"flowsim run: cannot load {target!r}: {exc}") from exc
    return obj


def _is_job(obj):
    """A job object that runs itself and prints its own table (``run_cli(args)``)."""
    from .simulation import Simulation
    return (hasattr(obj, "run_cli") and not isinstance(obj, type)
            and not isinstance(obj, Simulation))


def _simulation(args):
    from .simulation import Simulation
    obj = load_target(args.target)
    if isinstance(obj, Simulation) or _is_job(obj):
        return obj
    if args.dim is not None:
        from .algorithms import algorithm_class
        return algorithm_class(args.algorithm)(obj, args.dim)
    kwargs = {}
    params = inspect.signature(obj).parameters
    if "algorithm" in params:
        kwargs["algorithm"] = args.algorithm
    sim = obj(**kwargs)
    if _is_job(sim):
        return sim
    if not isinstance(sim, Simulation):
        raise SystemExit(f"flowsim run: {args.target!r} returned {type(sim).__name__}, not a "
                         f"Simulation; for a bare integrand pass --dim N")
    return sim


def _run(args):
    from .backends import flow_class
    sim = _simulation(args)
    if _is_job(sim):
        return sim.run_cli(args)
    kwargs = {"n_events": args.events, "seed": args.seed, "dtype": args.dtype,
              "quiet": args.quiet or args.json}
    if args.events_limit is not None:
        kwargs["events_limit"] = args.events_limit
    if args.block_size is not None:
        kwargs["block_size"] = args.block_size
    if args.no_jit:
        kwargs["jit_compile"] = False
    if args.rng is not None:
        kwargs["rng"] = args.rng
    if args.schedule is not None:
        kwargs["schedule"] = args.schedule
    cls = flow_class(args.backend)
    flow = cls(sim, **kwargs)
    result = flow.run(args.iters, checkpoint=args.checkpoint, skip=args.skip)
    if not flow._is_root():
        return 0
    print(result.to_json(indent=2) if args.json else result)
    if args.plot:
        from . import plot
        plot.save_convergence(result, args.plot, simulation=sim)
    if args.plot_timeline:
        from . import plot
        plot.save_timeline(result, args.plot_timeline)
    return 0


def parser():
    p = argparse.ArgumentParser(prog="flowsim", description=__doc__)
    p.add_argument("--version", action="version", version=f"flowsim {__version__}")
    sub = p.add_subparsers(dest="command")
    d = sub.add_parser("devices", help="list every TensorFlow device")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=_devices)
    r = sub.add_parser("run", help="run a simulation: module:callable or a bundled example")
    r.add_argument("target")
    r.add_argument("--events", type=int, default=1_000_000, help="events per iteration")
    r.add_argument("--iters", type=int, default=5, help="iterations")
    r.add_argument("--seed", type=int, default=None)
    r.add_argument("--events-limit", type=int, default=None)
    r.add_argument("--block-size", type=int, default=None,
                   help="events per block, a multiple of 64 (changes the random stream)")
    r.add_argument("--no-jit", action="store_true", help="do not compile kernels with XLA")
    r.add_argument("--rng", default=None, choices=["splitmix", "philox"],
                   help="counter-based generator (default splitmix)")
    r.add_argument("--skip", type=int, default=0, help="warm-up iterations left out")
    r.add_argument("--algorithm", default="plain", help="plain, vegas or vegasplus")
    r.add_argument("--dim", type=int, default=None, help="TARGET is a bare integrand of DIM")
    r.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    r.add_argument("--backend", default=None, help="threads, mpi or spark (default one device)")
    r.add_argument("--schedule", default=None, help="static, dynamic, guided or weighted")
    r.add_argument("--checkpoint", default=None)
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.add_argument("--plot", default=None, help="save a convergence plot (PNG)")
    r.add_argument("--plot-timeline", default=None, help="save the chunk timeline (PNG)")
    r.set_defaults(func=_run)
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    if not getattr(args, "func", None):
        parser().print_help()
        return 2
    try:
        return args.func(args)
    except (ValueError, TypeError, FloatingPointError) as exc:
        if not getattr(exc, "_flowsim_quiet", False):   # another MPI rank reports it
            print(f"flowsim: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
