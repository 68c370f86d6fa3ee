"""Integrate the 8-dim double Gaussian on Spark executors.

    PYSPARK_PYTHON=$PWD/.venv/bin/python \\
        spark-submit --master local[2] examples/spark_integrate.py

    make dist    # dist/flowsim-<version>.zip: flowsim for the executors
    PYSPARK_PYTHON=$PWD/.venv/bin/python \\
        spark-submit --master spark://127.0.0.1:7077 --py-files dist/flowsim-*.zip \\
        examples/spark_integrate.py --algorithm vegas

``pip install 'flowsim[spark]'`` brings pyspark, whose ``spark-submit`` sits next
to ``python`` (Java 17 comes from the machine).  ``PYSPARK_PYTHON`` names the
Python of the driver and the executors: one with TensorFlow.  Executors also
need flowsim: ``--py-files`` ships the zip, or install flowsim on the workers.

This is the laptop script with ``flowsim.Flow`` replaced by ``SparkFlow``: each
iteration is a Spark job whose tasks compute runs of blocks; the driver adds
them in block order, so the result has the same bits as the laptop run with the
same seed -- also when Spark retries failed tasks.  Without ``spark-submit`` it
starts a ``local[*]`` session.  The ``bits:`` line is for comparing runs.
"""
import argparse

import flowsim
from flowsim.algorithms import algorithm_class
from flowsim.distribution import SparkFlow
from flowsim.targets import double_gaussian, double_gaussian_exact


def _where_executors_import_flowsim(sc):
    """``flowsim.__file__`` on every executor (shows whether --py-files was used)."""
    def where(_):
        yield flowsim.__file__
    n = sc.defaultParallelism
    return sorted(set(sc.parallelize(range(n), n).mapPartitions(where).collect()))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algorithm", default="plain", help="plain, vegas or vegasplus")
    p.add_argument("--dim", type=int, default=8)
    p.add_argument("--events", type=int, default=2_000_000, help="events per iteration")
    p.add_argument("--iters", type=int, default=5)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--block-size", type=int, default=None, help="changes the random stream")
    p.add_argument("--partitions", type=int, default=None, help="Spark tasks per iteration")
    p.add_argument("--checkpoint", default=None, help="resume from / write to this file")
    args = p.parse_args(argv)

    sim = algorithm_class(args.algorithm)(double_gaussian, args.dim)
    # spark=None: the session spark-submit configured (local[*] without it),
    # stopped when the ``with`` block ends.     Laptop: flowsim.Flow(sim, ...)
    with SparkFlow(sim, n_events=args.events, seed=args.seed, block_size=args.block_size,
                   partitions=args.partitions) as flow:
        result = flow.run(args.iters, checkpoint=args.checkpoint)
        print(result)
        print(f"exact = {double_gaussian_exact(args.dim):.12g}")
        print(f"spark master: {flow.executor.sc.master}; tasks ran on: {result.meta['devices']}")
        print("executors import flowsim from:",
              ", ".join(_where_executors_import_flowsim(flow.executor.sc)))
    print("bits:", " ".join(float(r[k]).hex() for r in result.iterations
                            for k in ("value", "error")))


if __name__ == "__main__":
    main()
