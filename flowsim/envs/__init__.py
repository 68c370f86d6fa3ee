"""Batched trading environments: a gymnasium VectorEnv and in-graph policy rollouts.

``flowsim.envs.TradingVectorEnv``
    ``num_envs`` gym-anytrading ``StocksEnv`` environments stepped in one
    TensorFlow call (needs gymnasium: ``pip install 'flowsim[envs]'``).
``flowsim.envs.TradingEnv``
    One such environment (``gymnasium.make("flowsim/Stocks-v0")``).
``flowsim.envs.ForexVectorEnv`` / ``ForexEnv``
    gym-anytrading's ``ForexEnv`` the same way (``flowsim/Forex-v0``).
``flowsim.envs.PortfolioVectorEnv`` / ``PortfolioEnv``
    gym-trading-env's configurable ``TradingEnv`` (positions with shorts and
    leverage, fees, borrowing, your features and reward), ``flowsim/TradingEnv-v0``.
``flowsim.envs.MultiAssetVectorEnv``
    A portfolio over several assets per environment (target weights).
``flowsim.envs.rollout`` / ``portfolio_rollout``
    Whole episodes of a TF policy inside a compiled flowsim Simulation, on any
    backend, with the same bits (no gymnasium needed).
``flowsim.envs.MarketVectorEnv`` / ``MarketEnv``
    A trading agent inside batched pams markets (:mod:`flowsim.markets`), its orders
    in their books, paid by its P&L (``flowsim/MarketEnv-v0``).
``flowsim.envs.train_ppo``
    PPO on a PortfolioVectorEnv's rules: rollouts in a compiled loop, gradient
    steps data-parallel over a backend's devices, the same weights on every one.
``flowsim.envs.evaluate``
    A policy's episodes on one gymnasium env (``flowsim/TradingEnv-v0`` or
    gym-trading-env's ``TradingEnv``), a table of returns and metrics.

Modules, by the library whose rules they follow:

gym-anytrading (``StocksEnv``, ``ForexEnv``)
    ``stocks`` (price data, one step, observations), ``forex`` (Forex's reward
    and profit), ``vector`` (the VectorEnvs), ``rollout`` and ``policies``.
gym-trading-env (``TradingEnv``)
    ``portfolio`` (the rules: :class:`~flowsim.envs.portfolio.PortfolioRules`),
    ``portfolio_history`` (its ``History`` indexing), ``portfolio_env`` (the
    VectorEnv), ``portfolio_eager`` (its numpy steps for small batches),
    ``portfolio_rollout``, ``portfolio_render``, ``evaluation``.
flowsim's own
    ``assets`` (several assets per environment), ``market_env`` and
    ``market_orders`` (an agent in pams markets).

Importing this package registers the gymnasium ids ``flowsim/Stocks-v0`` (entry
point :class:`TradingEnv`, vector entry point :class:`TradingVectorEnv`),
``flowsim/Forex-v0``, ``flowsim/TradingEnv-v0`` and ``flowsim/MarketEnv-v0`` when
gymnasium is installed;
TensorFlow loads only when an environment first steps.
gymnasium 1.x has no plugin entry points, so ``gymnasium.make`` finds the id
after ``import flowsim.envs`` (or as ``"flowsim.envs:flowsim/Stocks-v0"``).
"""
from ..core.lazy import attach
from .evaluation import evaluate
from .policies import MLP, Coin, Momentum
from .portfolio_rollout import PortfolioRollout, portfolio_rollout
from .ppo import ActorCritic, PPOResult, train_ppo
from .rollout import Rollout, RolloutResult, rollout
from .stocks import ACC_DTYPE, Market, sample_prices

ENV_ID = "flowsim/Stocks-v0"
PORTFOLIO_ENV_ID = "flowsim/TradingEnv-v0"
FOREX_ENV_ID = "flowsim/Forex-v0"
MARKET_ENV_ID = "flowsim/MarketEnv-v0"

__all__ = ["ACC_DTYPE", "ENV_ID", "FOREX_ENV_ID", "MARKET_ENV_ID", "MLP", "PORTFOLIO_ENV_ID",
           "ActorCritic", "Coin", "ForexEnv", "ForexVectorEnv", "Market", "MarketEnv",
           "MarketVectorEnv", "Momentum", "MultiAssetVectorEnv", "PPOResult", "PortfolioEnv",
           "PortfolioRollout", "PortfolioVectorEnv", "Rollout", "RolloutResult", "TradingEnv",
           "TradingVectorEnv", "evaluate", "portfolio_rollout", "register", "rollout",
           "sample_prices", "train_ppo"]

#: Names that need gymnasium, imported on first use; ``submodules``: the old paths of
#: modules renamed to name their rules' library (flowsim._moved).
__getattr__, __dir__, _ = attach(
    __name__, {"TradingVectorEnv": "vector", "TradingEnv": "vector", "ForexVectorEnv": "vector",
               "ForexEnv": "vector", "MultiAssetVectorEnv": "assets",
               "PortfolioVectorEnv": "portfolio_env", "PortfolioEnv": "portfolio_env",
               "MarketVectorEnv": "market_env", "MarketEnv": "market_env"},
    submodules={"history", "market", "render"}, needs="gymnasium: pip install 'flowsim[envs]'")


def register():
    """Register ``flowsim/Stocks-v0``, ``flowsim/Forex-v0``, ``flowsim/TradingEnv-v0`` and
    ``flowsim/MarketEnv-v0`` with gymnasium (idempotent); False without gymnasium."""
    try:
        from gymnasium.envs.registration import register as gym_register
        from gymnasium.envs.registration import registry
    except ImportError:
        return False
    if ENV_ID not in registry:
        gym_register(id=ENV_ID, entry_point="flowsim.envs.vector:TradingEnv",
                     vector_entry_point="flowsim.envs.vector:TradingVectorEnv")
    if FOREX_ENV_ID not in registry:
        gym_register(id=FOREX_ENV_ID, entry_point="flowsim.envs.vector:ForexEnv",
                     vector_entry_point="flowsim.envs.vector:ForexVectorEnv")
    if PORTFOLIO_ENV_ID not in registry:
        gym_register(id=PORTFOLIO_ENV_ID, entry_point="flowsim.envs.portfolio_env:PortfolioEnv",
                     vector_entry_point="flowsim.envs.portfolio_env:PortfolioVectorEnv")
    if MARKET_ENV_ID not in registry:
        gym_register(id=MARKET_ENV_ID, entry_point="flowsim.envs.market_env:MarketEnv",
                     vector_entry_point="flowsim.envs.market_env:MarketVectorEnv")
    return True


register()
