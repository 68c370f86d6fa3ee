"""float32 against float64 on every shipped workload: what ``dtype="float32"`` (the GPU
choice: most GPUs run float64 at 1/32 to 1/64 of their float32 speed) changes.

Usage::

    python -m flowsim.testing.precision            # the table of docs/gpus.rst
    python -m flowsim.testing.precision path vegas # some workloads only

    from flowsim.testing.precision import compare_dtypes
    row = compare_dtypes("path")
    row["max_sigmas"]          # max |float32 - float64| / float64 error

Each workload is a conformance case of :data:`flowsim.testing.conformance.CASES` (its
Simulation and run settings), run twice with the same seed: ``dtype="float64"`` and
``dtype="float32"``.  A row gives, by the kind of result:

``"estimate"`` (integrals, prices, rollouts, market statistics)
    ``max_sigmas``: the largest ``|float32 - float64|`` in units of the float64
    run's error, and ``max_relative`` the largest relative difference.  Both runs
    draw the same events, so the difference is rounding (and, for adaptive
    algorithms or decisions taken on rounded numbers, a different but equally
    valid sample): a fraction of a standard error.
``"table"`` (sweeps: one row per parameter set)
    ``max_relative``: the largest difference of an output relative to that
    output's largest magnitude over the grid; ``changed_counts``: integer-valued
    outputs (trade counts) that differ anywhere.
``"rows"`` (one iteration's block rows, e.g. unweighted event candidates)
    ``max_relative`` as for tables.

``"portfolio_env"`` and ``"multi_asset_env"`` step
:class:`flowsim.envs.PortfolioVectorEnv` and :class:`flowsim.envs.MultiAssetVectorEnv`
(not Flow workloads) with the same actions in both dtypes and compare the
valuations.
"""
import sys

import numpy as np

__all__ = ["WORKLOADS", "compare_dtypes", "main", "table"]

#: The conformance cases that are workloads (not the engine's own mechanics: resume,
#: rows, errors), in the order of the table, then the stepped environment.
WORKLOADS = ("plain", "vegas", "vegasplus", "physics_scan_plain", "physics_scan_vegasplus",
             "physics_gradient_vegas", "physics_complex_plain", "physics_unweighted", "path",
             "sweep", "finance_rsi_sweep", "markets_small", "markets_learned", "markets_events",
             "markets_venues", "markets_hifreq", "rollout_coin", "rollout_mlp", "rollout_sweep",
             "portfolio_coin", "portfolio_sweep", "portfolio_env", "multi_asset_env")


def _flow_outputs(name, dtype):
    """``(kind, {output: array}, error or None)`` of case ``name`` in ``dtype``."""
    from ..algorithms.sweep import run_sweep
    from ..core.flow import Flow
    from .conformance import CASES
    factory, settings = CASES[name]
    spec = {k: v for k, v in settings.items() if k != "message"}
    sim = factory()
    if spec.pop("sweep", False):
        flow = Flow(sim, n_events=sim.n_rows, seed=0, block_size=sim.block_rows, dtype=dtype,
                    quiet=True)
        return "table", {k: np.asarray(v, np.float64) for k, v in run_sweep(flow).items()}, None
    n_iters = spec.pop("n_iters")
    if spec.pop("rows", False):
        rows = Flow(sim, dtype=dtype, quiet=True, **spec).run_blocks(0)
        return "rows", {"rows": np.asarray(rows, np.float64)}, None
    result = Flow(sim, dtype=dtype, quiet=True, **spec).run(n_iters)
    value = np.atleast_1d(np.asarray(result.value, np.float64))
    return "estimate", {"value": value}, np.atleast_1d(np.asarray(result.error, np.float64))


def _env_outputs(dtype, n_envs=64, steps=300):
    """Valuations and summed rewards of a :class:`PortfolioVectorEnv` with fees, leverage
    and shorts, stepped with the same random actions."""
    from ..envs import PortfolioVectorEnv
    from .cases_envs import sample_frame
    env = PortfolioVectorEnv(sample_frame(), n_envs, positions=[-1, 0, 0.5, 1, 2],
                             trading_fees=0.001, borrow_interest_rate=0.0003, dtype=dtype)
    env.reset(seed=3)
    actions = np.random.default_rng(1).integers(0, 5, (steps, n_envs))
    rewards = np.zeros(n_envs)
    for row in actions:
        _, reward, _, _, info = env.step(row)
        rewards += reward
    return "rows", {"portfolio_valuation": np.asarray(info["portfolio_valuation"], np.float64),
                    "summed_rewards": rewards}, None


def _multi_asset_outputs(dtype, n_envs=32, steps=200):
    """Valuations of a :class:`MultiAssetVectorEnv` over three of the sample's price
    columns, with fees and borrowing, stepped with the same random weights."""
    from ..envs import MultiAssetVectorEnv
    from .cases_envs import sample_frame
    prices = sample_frame()[["open", "high", "close"]]
    env = MultiAssetVectorEnv(prices, n_envs, trading_fees=0.001, borrow_interest_rate=0.0002,
                              max_leverage=1.5, dtype=dtype)
    env.reset(seed=4)
    weights = np.random.default_rng(2).uniform(-0.5, 0.5, (steps, n_envs, 3))
    for row in weights:
        _, _, _, _, info = env.step(row)
    return "rows", {"portfolio_valuation": np.asarray(info["portfolio_valuation"],
                                                      np.float64)}, None


#: The stepped environments: name -> outputs of a dtype.
ENVIRONMENTS = {"portfolio_env": _env_outputs, "multi_asset_env": _multi_asset_outputs}


def _scaled(wide, narrow):
    """The largest ``|narrow - wide|`` relative to ``wide``'s largest magnitude."""
    both = np.isfinite(wide) & np.isfinite(narrow)
    scale = np.max(np.abs(wide[both])) if both.any() else 0.0
    if scale == 0:
        return 0.0
    return float(np.max(np.abs(narrow[both] - wide[both])) / scale)


def _summary(kind, wide, narrow, error):
    """The row's figures from the two runs' outputs."""
    row = {"kind": kind, "identical": all(np.array_equal(wide[k], narrow[k], equal_nan=True)
                                           for k in wide)}
    if kind == "estimate":
        difference = np.abs(narrow["value"] - wide["value"])
        row["max_sigmas"] = float(np.max(difference / np.where(error > 0, error, np.inf)))
        row["max_relative"] = float(np.max(difference / np.maximum(np.abs(wide["value"]),
                                                                   np.finfo(float).tiny)))
        return row
    row["max_relative"] = max(_scaled(wide[k], narrow[k]) for k in wide)
    row["changed_counts"] = sorted(
        k for k in wide if np.all(wide[k] == np.round(wide[k]))
        and not np.array_equal(wide[k], narrow[k], equal_nan=True))
    return row


def compare_dtypes(name):
    """float32 against float64 on workload ``name`` (one of :data:`WORKLOADS`): a dict
    with ``case``, ``kind``, ``identical`` and the kind's figures (see the module), or
    ``refused``, the message of a workload that computes in float64 only."""
    outputs = ENVIRONMENTS.get(name) or (lambda dtype: _flow_outputs(name, dtype))
    kind, wide, error = outputs("float64")
    try:
        _, narrow, _ = outputs("float32")
    except ValueError as exc:
        return {"case": name, "kind": kind, "refused": str(exc)}
    return {"case": name, **_summary(kind, wide, narrow, error)}


def _cell(row):
    if "refused" in row:
        return f"refused: {row['refused']}"
    parts = [f"max relative {row['max_relative']:.2g}"]
    if "max_sigmas" in row:
        parts.insert(0, f"max {row['max_sigmas']:.2g} sigma")
    if row.get("changed_counts"):
        parts.append(f"counts changed: {', '.join(row['changed_counts'])}")
    if row["identical"]:
        parts.append("identical bits")
    return "; ".join(parts)


def table(rows):
    """The text of :func:`main`: one line per workload."""
    lines = [f"{'workload':<24}{'kind':<10}float32 against float64 (same seed)"]
    lines += [f"{row['case']:<24}{row['kind']:<10}{_cell(row)}" for row in rows]
    return "\n".join(lines)


def main(argv=None):
    """Print :func:`table` of the workloads named in ``argv`` (default all)."""
    names = list(argv if argv is not None else sys.argv[1:]) or list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        raise SystemExit(f"unknown workload(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(WORKLOADS)}")
    print(table([compare_dtypes(name) for name in names]), flush=True)


if __name__ == "__main__":
    main()
