"""dtype="float32" on every workload family: float32 is really used (the results move)
and differs from float64 by rounding, a small fraction of a standard error
(:mod:`flowsim.testing.precision`; the markets' statistical comparison is in
tests/test_markets_float32.py).

Tolerances: estimates that draw the same events in both dtypes differ by rounding only,
far below 0.01 standard error (a regression check, not a statistical one).  VEGAS+
reallocates events on rounded variances, so its two runs are two valid samples: they must
agree within 3 sqrt(2) standard errors, a bound that even independent runs fail with
probability 0.27 %.
"""
import math

import pytest

from flowsim.envs import MultiAssetVectorEnv, PortfolioVectorEnv
from flowsim.testing.cases_envs import sample_frame
from flowsim.testing.precision import WORKLOADS, compare_dtypes, main

ROUNDING_ONLY = ("plain", "physics_gradient_vegas", "path", "portfolio_coin")


@pytest.mark.parametrize("case", ROUNDING_ONLY)
def test_float32_estimates_differ_by_rounding(case):
    row = compare_dtypes(case)
    assert row["kind"] == "estimate" and not row["identical"], row
    assert row["max_sigmas"] < 0.01 and row["max_relative"] < 1e-4, row


def test_float32_vegasplus_reallocates_within_errors():
    row = compare_dtypes("vegasplus")
    assert not row["identical"] and row["max_sigmas"] < 3 * math.sqrt(2), row


@pytest.mark.parametrize("case", ["finance_rsi_sweep", "portfolio_env", "multi_asset_env",
                                  "physics_unweighted"])
def test_float32_tables_and_rows_are_close(case):
    row = compare_dtypes(case)
    assert not row["identical"] and row["max_relative"] < 1e-4, row
    assert row.get("changed_counts", []) == [], row


def test_gym_anytrading_rollouts_are_float32_already():
    """StocksEnv's rules keep gym-anytrading's float32; dtype only sets the policy's
    uniforms, whose decisions do not move on this case."""
    row = compare_dtypes("rollout_coin")
    assert row["identical"], row


def test_bad_names_are_refused(capsys):
    with pytest.raises(SystemExit, match="unknown workload.s. plane; choose from plain, "):
        main(["plane"])
    assert "markets_small" in WORKLOADS and "portfolio_env" in WORKLOADS
    for env in (PortfolioVectorEnv, MultiAssetVectorEnv):
        with pytest.raises(ValueError, match="dtype must be 'float64' or 'float32', got "
                                             "'float16'"):
            env(sample_frame()[["close"]] if env is MultiAssetVectorEnv else sample_frame(), 2,
                dtype="float16")
