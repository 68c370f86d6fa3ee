"""Integrate the 8-dim double Gaussian on every MPI rank.

    mpirun -n 4 python examples/mpi_integrate.py
    mpirun -n 4 python examples/mpi_integrate.py --algorithm vegas --checkpoint run.npz

``pip install 'flowsim[mpi]'`` puts ``mpirun`` next to ``python``.  As root add
``--allow-run-as-root``; more ranks than cores need ``--oversubscribe``.

This is the laptop script with ``flowsim.Flow`` replaced by ``MPIFlow``: every
rank runs it, the seed is rank 0's, each rank computes a share of the blocks on
its own device and every rank gets the same result -- the same bits as the
laptop run with the same seed.  Only rank 0 prints (``is_root()`` is always
True for ``Flow``) and writes the checkpoint; rerun the same command after a
crash to resume.  Without ``mpirun`` it runs as one rank.
"""
import argparse

from flowsim.algorithms import algorithm_class
from flowsim.distribution import MPIFlow
from flowsim.targets import double_gaussian, double_gaussian_exact


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", default="plain", help="plain, vegas or vegasplus")
    p.add_argument("--events", type=int, default=2_000_000, help="events per iteration")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--checkpoint", default=None, help="resume from / write to this file")
    args = p.parse_args(argv)

    sim = algorithm_class(args.algorithm)(double_gaussian, 8)
    flow = MPIFlow(sim, n_events=args.events, seed=args.seed)    # laptop: flowsim.Flow
    result = flow.run(args.iters, checkpoint=args.checkpoint)
    if flow.is_root():
        print(result)
        print(f"exact = {double_gaussian_exact(8):.12g}")


if __name__ == "__main__":
    main()
