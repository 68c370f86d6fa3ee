"""``flowsim run markets --config cfg.json --markets 1000``: an ensemble from the CLI."""
import json
import os
import sys


def parse_classes(text):
    """``--classes`` JSON as the ``classes=`` mapping, or a ValueError saying what to give."""
    if text is None:
        return None
    try:
        classes = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--classes must be a JSON object such as "
                         f"'{{\"UserDefinedFCNAgent\": \"FCNAgent\"}}': {exc}") from None
    if not isinstance(classes, dict):
        raise ValueError(f"--classes must be a JSON object (user class -> flowsim class), "
                         f"got {text!r}")
    return classes


class MarketsJob:
    """Runs :func:`flowsim.markets.ensemble` and prints the statistics table (or JSON).

    ``--config`` is a pams JSON config (default: the bundled CI2002) or the name of a
    bundled one (:data:`flowsim.markets.CONFIGS`, e.g. ``price_limit``), ``--classes``
    maps its user classes to flowsim's (JSON, as the ``classes=`` keyword of
    :func:`flowsim.markets.ensemble`), ``--markets`` the
    number of markets (default 1000), ``--iters`` splits them into iterations (with
    ``--checkpoint`` a stopped run resumes), ``--block-size`` is markets per block;
    ``--backend`` and ``--block-size`` not given, it runs where
    :func:`flowsim.markets.ensemble` picks (:func:`flowsim.markets.ensembles.auto_setup`).
    """

    cli_options = ("config", "classes", "markets", "seed", "backend", "events_limit", "block_size",
                   "iters", "checkpoint", "json", "quiet", "no_jit", "rng")

    def run_cli(self, args):
        from ..core.job_options import flow_options, given
        from . import CONFIGS, config_path
        from .ensembles import ensemble, report
        cfg = args.config or "ci2002"
        if cfg in CONFIGS and not os.path.exists(cfg):
            cfg = config_path(cfg)
        classes = parse_classes(getattr(args, "classes", None))
        kwargs = flow_options(args)
        n = args.markets if args.markets is not None else 1000
        iters = args.iters if "iters" in given(args) else 1
        result = ensemble(cfg, n, seed=args.seed, backend=args.backend,
                          block_markets=args.block_size, iterations=iters,
                          checkpoint=args.checkpoint, quiet=args.quiet or args.json,
                          classes=classes, **kwargs)
        mpi = sys.modules.get("mpi4py.MPI")
        if mpi is not None and mpi.COMM_WORLD.Get_rank() != 0:
            return 0
        steps = n * result.meta.get("n_steps", 0)
        if args.json:
            print(json.dumps({"config": str(cfg), "markets": n, "seed": result.meta["seed"],
                              "table": result.table, "wall_time": result.wall_time,
                              "market_steps_per_second": steps / result.wall_time}, indent=2))
            return 0
        print(f"flowsim.markets: {n:,} markets of {cfg} on {result.meta['backend']} "
              f"({result.meta['devices']}), seed {result.meta['seed']}")
        print(report(result))
        print(f"{n:,} markets x {result.meta['n_steps']} steps in {result.wall_time:.2f} s = "
              f"{steps / result.wall_time:,.0f} market-steps/s (compilation included)")
        return 0


def markets():
    """Target of ``flowsim run markets``."""
    return MarketsJob()
