"""The statistics of a market run, defined once in numpy (no TensorFlow).

Every market of an ensemble is summarised by :data:`NAMES`, computed from its
series over the *execution window*: the steps ``t0 .. T-1`` from the first
step with execution (``t0``, after the warm-up) to the last step of the run.
With ``p_j`` the market price at the end of step ``t0 + j`` (``j = 0 .. n-1``,
``n = T - t0``; pams's ``market.get_market_prices()[t0 + j]``):

``volatility_1``, ``kurtosis_1``, ``ac1_1``
    Standard deviation, excess kurtosis (``m4 / m2² - 3``, population moments)
    and lag-1 autocorrelation of the ``n - 1`` one-step log returns
    ``r_j = ln(p_j / p_{j-1})``.
``abs_ac1_1``, ``abs_ac5_1``, ``abs_ac10_1``
    Autocorrelation of ``|r_j|`` at lags 1, 5 and 10.
``..._10``
    The same six for the non-overlapping 10-step returns ``ln(p_{10k} / p_{10(k-1)})``.
``zero_share``
    Share of one-step returns exactly 0 (no trade, or a trade at the last price).
``mispricing``
    Mean of ``|ln(p_j / F_j)|`` with the fundamental price ``F`` at the same time.
``trades_per_step``
    Units traded per step over steps ``t0 + 1 .. T - 1`` (the opening clearing left out).
``depth_bid``, ``depth_ask``
    Mean number of resting orders per side at the end of the window's steps.
``final_price``
    Market price at time ``T`` (after the last step).
``clearing_volume``
    Units traded at step ``t0``: the book crossed during the warm-up, cleared at one price.

The autocorrelation at lag ``k`` of a series ``x`` is
``sum_t (x_t - m)(x_{t-k} - m) / sum_t (x_t - m)²`` (the usual ACF estimator).
A market whose returns are all equal has no kurtosis or autocorrelation:
those entries are NaN, and ensembles average over the markets that have them.

:func:`market_statistics` is the reference: the compiled kernel
(:mod:`flowsim.markets.kernel`) computes the same formulas in TensorFlow, and
the test suite checks both agree on the same price paths.
"""
import numpy as np

#: Lags of the autocorrelations of ``|returns|``.
ABS_LAGS = (1, 5, 10)
#: Horizon of the coarse returns.
COARSE = 10


def _return_names(suffix):
    return ([f"volatility_{suffix}", f"kurtosis_{suffix}", f"ac1_{suffix}"]
            + [f"abs_ac{k}_{suffix}" for k in ABS_LAGS])


#: Names of the per-market statistics, in the order of the arrays.
NAMES = tuple(_return_names(1) + _return_names(COARSE)
              + ["zero_share", "mispricing", "trades_per_step", "depth_bid", "depth_ask",
                 "final_price", "clearing_volume"])


def names(markets, indexes=()):
    """Statistics of a run of ``markets`` (their names, config order): :data:`NAMES`
    for one market; for several, ``"MARKET:NAME"`` for each market and name, then
    ``"A|B:return_correlation"`` for each pair ``A`` before ``B``: the Pearson
    correlation of the two markets' one-step log returns over the steps
    ``volatility_1`` uses (NaN if either is constant); then ``"INDEX:index_deviation"``
    for each IndexMarket (``indexes``: their names): per run, the mean over the same
    prices as ``mispricing`` of ``|ln(P_index / I)|``, ``I`` the index (pams's formula,
    :func:`flowsim.markets.venues.index_market.index_of`) of its components' market
    prices at the same time."""
    markets = list(markets)
    if len(markets) == 1:
        return NAMES
    out = [f"{m}:{n}" for m in markets for n in NAMES]
    out += [f"{a}|{b}:return_correlation" for i, a in enumerate(markets)
            for b in markets[i + 1:]]
    out += [f"{i}:index_deviation" for i in indexes]
    return tuple(out)


def _acf(x, lag):
    """``[k]`` autocorrelation of each row of ``x`` ``[k, n]`` at ``lag``."""
    d = x - x.mean(axis=1, keepdims=True)
    den = (d * d).sum(axis=1)
    num = (d[:, lag:] * d[:, :-lag]).sum(axis=1) if lag < x.shape[1] else np.zeros(len(x))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def return_statistics(r):
    """``[k, 6]``: volatility, excess kurtosis, lag-1 ACF, ``|r|`` ACF at :data:`ABS_LAGS`."""
    d = r - r.mean(axis=1, keepdims=True)
    m2 = (d * d).mean(axis=1)
    m4 = (d ** 4).mean(axis=1)
    safe = np.where(m2 > 0, m2, 1.0)
    kurt = np.where(m2 > 0, m4 / (safe * safe) - 3.0, np.nan)
    cols = [np.sqrt(m2), kurt, _acf(r, 1)] + [_acf(np.abs(r), k) for k in ABS_LAGS]
    return np.stack(cols, axis=1)


def market_statistics(prices, fundamental, volumes, depth_bid, depth_ask, t0):
    """``[k, len(NAMES)]`` statistics of ``k`` market runs of ``T`` steps.

    Parameters
    ----------
    prices, fundamental : array [k, T + 1]
        Market and fundamental prices at times ``0 .. T`` (pams's
        ``get_market_prices()`` / ``get_fundamental_prices()``).
    volumes : array [k, T]
        Units traded at each step ``0 .. T - 1`` (``get_executed_volumes()``).
    depth_bid, depth_ask : array [k, T]
        Resting orders per side at the end of each step.
    t0 : int
        First step with execution.
    """
    prices = np.asarray(prices, np.float64)
    k, t_plus_1 = prices.shape
    T = t_plus_1 - 1
    if not 0 <= t0 < T - 1:
        raise ValueError(f"the execution window t0={t0}..{T - 1} needs at least 2 steps")
    p = np.log(prices[:, t0:T])
    r1 = np.diff(p, axis=1)
    r10 = np.diff(p[:, ::COARSE], axis=1)
    f = np.log(np.asarray(fundamental, np.float64)[:, t0:T])
    volumes = np.asarray(volumes, np.float64)
    rest = np.stack([
        (r1 == 0).mean(axis=1),
        np.abs(p - f).mean(axis=1),
        volumes[:, t0 + 1:T].sum(axis=1) / (T - t0 - 1),
        np.asarray(depth_bid, np.float64)[:, t0:T].mean(axis=1),
        np.asarray(depth_ask, np.float64)[:, t0:T].mean(axis=1),
        prices[:, T],
        volumes[:, t0],
    ], axis=1)
    return np.concatenate([return_statistics(r1), return_statistics(r10), rest], axis=1)


def summarize(per_market):
    """``(mean, standard error, count)`` over markets of ``[k, len(NAMES)]`` statistics,
    NaN entries left out (see the module docstring)."""
    x = np.asarray(per_market, np.float64)
    ok = np.isfinite(x)
    n = ok.sum(axis=0)
    safe = np.where(ok, x, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = safe.sum(axis=0) / n
        var = (np.where(ok, (x - mean) ** 2, 0.0)).sum(axis=0) / (n - 1)
        err = np.sqrt(var / n)
    return mean, np.where(n > 1, err, np.inf), n


def z_scores(mean_a, err_a, mean_b, err_b):
    """``(a - b) / sqrt(err_a² + err_b²)`` elementwise."""
    return (np.asarray(mean_a) - mean_b) / np.sqrt(np.square(err_a) + np.square(err_b))


def pulls(rows_a, rows_b, batches):
    """``[batches, statistics]``: the pulls of two samples of per-run statistics
    (``rows_a``, ``rows_b``: ``[runs, statistics]``, e.g. flowsim's
    ``Result.per_market`` and a stored pams table), each cut into ``batches``
    consecutive parts: batch ``k``'s z of mean ``a`` against mean ``b``
    (:func:`z_scores` of :func:`summarize`).  Independent batches, so where the stated
    standard errors mean what they say each statistic's pulls are draws of (nearly)
    N(0, 1); a statistic constant within a batch on both sides has NaN there.

    .. code-block:: python

       z = stats.pulls(result.per_market, pams_rows, 8)
       np.nanmean(z ** 2)                  # about 1
    """
    out = []
    for a, b in zip(np.array_split(np.asarray(rows_a, np.float64), batches),
                    np.array_split(np.asarray(rows_b, np.float64), batches)):
        mean_a, err_a, _ = summarize(a)
        mean_b, err_b, _ = summarize(b)
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(z_scores(mean_a, err_a, mean_b, err_b))
    return np.array(out)


# -- statistics of several markets, as the stored pams tables compute them ------------------
#: Name of the statistic of a pair of markets, ``"A|B:return_correlation"``.
PAIR_STATISTIC = "return_correlation"
#: Name of the statistic of an index market, ``"INDEX:index_deviation"``.
INDEX_STATISTIC = "index_deviation"


def window(settings):
    """``(T, t0)`` of a pams config: steps of all sessions, and the first step of the
    first session with execution (the start of the statistics window)."""
    steps = [int(s["iterationSteps"]) for s in settings["simulation"]["sessions"]]
    flags = [bool(s.get("withOrderExecution", False))
             for s in settings["simulation"]["sessions"]]
    if True not in flags:
        raise ValueError("simulation.sessions: no session has withOrderExecution")
    return sum(steps), sum(steps[:flags.index(True)])


def one_step_returns(prices, t0):
    """``[k, T - t0 - 1]``: the log returns ``volatility_1`` uses, ``ln(p_t / p_{t-1})``
    for ``t = t0 + 1 .. T - 1`` of prices ``[k, T + 1]``."""
    prices = np.asarray(prices, np.float64)
    return np.diff(np.log(prices[:, t0:prices.shape[1] - 1]), axis=1)


def return_correlation(prices_a, prices_b, t0):
    """``[k]``: Pearson correlation of the one-step log returns (:func:`one_step_returns`)
    of two markets' prices ``[k, T + 1]`` in the same runs; NaN where either market's
    returns are all equal."""
    a, b = one_step_returns(prices_a, t0), one_step_returns(prices_b, t0)
    da = a - a.mean(axis=1, keepdims=True)
    db = b - b.mean(axis=1, keepdims=True)
    den = np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (da * db).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def market_index(component_prices, shares):
    """``[k, T + 1]``: the index of components' prices ``[k, c, T + 1]`` with outstanding
    shares ``[c]``, ``sum_i shares_i p_i / sum_i shares_i`` -- the formula of pams's
    ``IndexMarket.compute_fundamental_index`` (index_market.py), applied to prices."""
    p = np.asarray(component_prices, np.float64)
    w = np.asarray(shares, np.float64)
    total = np.zeros(p.shape[:1] + p.shape[2:])
    for i in range(p.shape[1]):          # pams's order of summation
        total = total + p[:, i] * w[i]
    return total / w.sum()


def index_deviation(index_prices, component_prices, shares, t0):
    """``[k]``: mean over ``t = t0 .. T - 1`` (the prices of the statistics window) of
    ``|ln(P_t / I_t)|``, with ``P`` the index market's price ``[k, T + 1]`` and ``I`` the
    :func:`market_index` of its components' prices at the same time."""
    p = np.asarray(index_prices, np.float64)
    T = p.shape[1] - 1
    index = market_index(component_prices, shares)
    return np.abs(np.log(p[:, t0:T] / index[:, t0:T])).mean(axis=1)


def several_market_names(markets, indexes=None):
    """Column names of :func:`several_market_statistics`: ``markets`` in config order,
    ``indexes`` a dict from index market names to ``(component names, shares)``."""
    names = [f"{m}:{n}" for m in markets for n in NAMES]
    names += [f"{a}|{b}:{PAIR_STATISTIC}" for i, a in enumerate(markets)
              for b in markets[i + 1:]]
    return names + [f"{m}:{INDEX_STATISTIC}" for m in (indexes or {})]


def several_market_statistics(series, t0, indexes=None):
    """``[k, len(several_market_names)]`` statistics of ``k`` runs of several markets.

    Parameters
    ----------
    series : dict
        Market name -> ``(prices, fundamental, volumes, depth_bid, depth_ask)`` as
        :func:`flowsim.markets.market_statistics` takes them, in config order.
    t0 : int
        First step with execution.
    indexes : dict, optional
        Index market name -> ``(component market names, their outstanding shares)``.
    """
    markets = list(series)
    cols = [market_statistics(*series[m], t0) for m in markets]
    cols += [return_correlation(series[a][0], series[b][0], t0)[:, None]
             for i, a in enumerate(markets) for b in markets[i + 1:]]
    for m, (components, shares) in (indexes or {}).items():
        comp = np.stack([np.asarray(series[c][0], np.float64) for c in components], axis=1)
        cols.append(index_deviation(series[m][0], comp, shares, t0)[:, None])
    return np.concatenate(cols, axis=1)


#: Balance-sheet quantities of an agent at the end of a run (pams's
#: ``Agent.cash_amount`` and ``asset_volumes``): ``cash``; ``inventory``, the units
#: held; ``wealth``, cash plus inventory at the final market price; ``pnl``, wealth
#: less the starting cash and inventory at the starting market price.
BALANCE_QUANTITIES = ("cash", "inventory", "wealth", "pnl")
#: Statistics of a quantity over a group's agents in one market run: mean, standard
#: deviation (``ddof=1``) and the 10 %, 50 % and 90 % quantiles (numpy's linear rule).
BALANCE_STATISTICS = ("mean", "std", "q10", "q50", "q90")


def balance_names(groups, markets=None):
    """``"GROUP:QUANTITY_STATISTIC"`` for every agent group (config order), quantity of
    :data:`BALANCE_QUANTITIES` and statistic of :data:`BALANCE_STATISTICS`.  Several
    markets: ``markets`` maps each group to the names of the markets it holds units in
    (pams's ``asset_volumes``: the markets it can reach), and ``inventory`` becomes one
    quantity a market, ``inventory[MARKET]`` (wealth marks every market's units at its
    final price)."""
    out = []
    for g in groups:
        quantities = (BALANCE_QUANTITIES if markets is None else
                      ("cash", *(f"inventory[{m}]" for m in markets[g]), "wealth", "pnl"))
        out += [f"{g}:{q}_{s}" for q in quantities for s in BALANCE_STATISTICS]
    return out


def balance_statistics(cash, inventory, price, start_cash, start_inventory, start_price,
                       groups, access=None):
    """``[M, len(balance_names(groups))]``: per run, the statistics of
    :func:`balance_names`.  ``cash``, ``start_cash``: ``[M, agents]``; ``groups``:
    ``{name: agent indices}`` in config order.  One market: ``inventory``,
    ``start_inventory`` ``[M, agents]``, ``price``, ``start_price`` ``[M]`` (final and
    starting market price).  Several markets: ``inventory``, ``start_inventory``
    ``[M, agents, K]`` (0 where an agent holds nothing), ``price``, ``start_price``
    ``[M, K]`` and ``access`` ``{name: market indices}`` (the markets of
    ``balance_names``'s ``markets``)."""
    cash = np.asarray(cash, np.float64)
    start_cash = np.asarray(start_cash, np.float64)
    inventory = np.asarray(inventory, np.float64)
    start_inventory = np.asarray(start_inventory, np.float64)
    if access is None:
        inventory, start_inventory = inventory[:, :, None], start_inventory[:, :, None]
    price = np.asarray(price, np.float64).reshape(len(cash), 1, -1)
    start_price = np.asarray(start_price, np.float64).reshape(len(cash), 1, -1)
    wealth = cash + (inventory * price).sum(2)
    pnl = wealth - start_cash - (start_inventory * start_price).sum(2)
    columns = []
    for name, idx in groups.items():
        idx = np.asarray(idx)
        held = [0] if access is None else list(access[name])
        for x in (cash, *(inventory[:, :, k] for k in held), wealth, pnl):
            x = x[:, idx]
            columns += [x.mean(1), x.std(1, ddof=1) if x.shape[1] > 1 else x[:, 0] * np.nan,
                        *np.quantile(x, [0.1, 0.5, 0.9], axis=1)]
    return np.stack(columns, 1)
